//! A thread that warms a publisher's path over and over while a test
//! publishes: the warm's rehearsal racing real messages, which must lose
//! none of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use myelin::{Message, Publisher};

/// The warming thread; [`stop`](Self::stop) ends and joins it.
pub struct Warmer {
    warming: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Warmer {
    /// Call `p.warm()` in a loop on a thread of its own until stopped;
    /// `yielding`: let other threads run between warms (on a 2-core
    /// machine a tight loop can starve the executor it races).
    pub fn start<T: Message>(p: &Arc<Publisher<T>>, yielding: bool) -> Warmer {
        let warming = Arc::new(AtomicBool::new(true));
        let thread = std::thread::spawn({
            let (p, warming) = (p.clone(), warming.clone());
            move || {
                while warming.load(Ordering::Relaxed) {
                    p.warm();
                    if yielding {
                        std::thread::yield_now();
                    }
                }
            }
        });
        Warmer {
            warming,
            thread: Some(thread),
        }
    }

    /// Stop warming and wait for the thread (a panic in it fails the test).
    pub fn stop(mut self) {
        self.warming.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("the warming thread panicked");
        }
    }
}

impl Drop for Warmer {
    /// A test that fails before `stop` does not leave the thread spinning.
    fn drop(&mut self) {
        self.warming.store(false, Ordering::Relaxed);
    }
}
