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

#[test]
fn retain_cell_publishes_initialised_values() {
    use myelin_sync::RetainCell;
    loom::model(|| {
        let cell = Arc::new(RetainCell::<std::sync::Arc<u32>>::new());
        let c = cell.clone();
        let writer = loom::thread::spawn(move || {
            c.set(Some(std::sync::Arc::new(std::sync::Arc::new(7))));
        });
        if let Some(v) = cell.get() {
            assert_eq!(**v, 7);
        }
        if let Some(a) = cell.get_arc() {
            assert_eq!(**a, 7);
        }
        writer.join().unwrap();
        assert_eq!(**cell.get().unwrap(), 7);
    });
}

#[test]
fn try_lock_admits_one_holder() {
    use myelin_sync::TryLock;
    loom::model(|| {
        let lock = Arc::new(TryLock::new(0u32));
        let holders = Arc::new(AtomicU32::new(0));
        let mut hs = Vec::new();
        for _ in 0..2 {
            let (l, h) = (lock.clone(), holders.clone());
            hs.push(loom::thread::spawn(move || {
                if let Some(mut g) = l.try_lock() {
                    assert_eq!(h.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                    *g += 1;
                    h.fetch_sub(1, Ordering::SeqCst);
                }
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
    });
}
