//! loom model of the executor wake-up protocol: a producer publishes work and
//! notifies; a consumer that found nothing goes to sleep. No interleaving may
//! leave the consumer asleep with work pending (a lost wake-up).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p myelin-sync --test loom --release`.
#![cfg(loom)]

use loom::sync::Arc;
use myelin_sync::atomic::{AtomicU32, Ordering};
use myelin_sync::{Event, Scope};

#[test]
fn no_lost_wakeup_single_producer() {
    loom::model(|| {
        let event = Arc::new(Event::new(Scope::Process));
        let work = Arc::new(AtomicU32::new(0));
        let (e, w) = (event.clone(), work.clone());
        let producer = loom::thread::spawn(move || {
            w.store(1, Ordering::SeqCst);
            e.notify();
        });
        let out = event.wait_while(|| work.load(Ordering::SeqCst) == 0, None);
        assert!(out.is_ready());
        producer.join().unwrap();
    });
}

#[test]
fn no_lost_wakeup_two_producers() {
    loom::model(|| {
        let event = Arc::new(Event::new(Scope::Process));
        let work = Arc::new(AtomicU32::new(0));
        let mut handles = Vec::new();
        for _ in 0..2 {
            let (e, w) = (event.clone(), work.clone());
            handles.push(loom::thread::spawn(move || {
                w.fetch_add(1, Ordering::SeqCst);
                e.notify();
            }));
        }
        let out = event.wait_while(|| work.load(Ordering::SeqCst) < 2, None);
        assert!(out.is_ready());
        for h in handles {
            h.join().unwrap();
        }
    });
}
