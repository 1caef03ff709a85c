//! Where code that is not an executor waits for a polling subscription:
//! blocked threads (`wait_for_message`), async tasks (`stream`), and wait
//! sets. One `notify` reaches all three.

use std::sync::{Arc, Mutex};
use std::task::Waker;

use myelin_sync::RetainCell;
use myelin_sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use crate::transport::wake::WakeEvent;

pub(crate) struct WaitPoint {
    /// Blocked threads sleep on this (a slot other processes can signal, for
    /// a subscription fed through shared memory).
    pub(crate) event: WakeEvent,
    /// An async task's waker.
    waker: Mutex<Option<Waker>>,
    // SYNC: SeqCst store in `register_waker` pairs with the fence + SeqCst
    // load in `notify` (a Dekker pair with the buffer push / re-check).
    has_waker: AtomicBool,
    /// The wait set this entity belongs to, if any.
    listener: RetainCell<WakeEvent>,
    // SYNC: AcqRel swap claims membership; Release store gives it up.
    in_wait_set: AtomicBool,
    /// Bumped each time the topic loses its last publisher.
    // SYNC: Relaxed counter; waiters re-read it after every wake-up.
    gone: AtomicU64,
}

impl WaitPoint {
    pub(crate) fn new() -> Arc<Self> {
        Self::with_event(WakeEvent::local())
    }

    pub(crate) fn with_event(event: WakeEvent) -> Arc<Self> {
        Arc::new(WaitPoint {
            event,
            waker: Mutex::new(None),
            has_waker: AtomicBool::new(false),
            listener: RetainCell::new(),
            in_wait_set: AtomicBool::new(false),
            gone: AtomicU64::new(0),
        })
    }

    /// Wake everyone waiting here (call after the data is visible).
    pub(crate) fn notify(&self) {
        self.event.notify();
        if let Some(l) = self.listener.get() {
            l.notify();
        }
        // SYNC: pairs with `register_waker`: either we see the waker, or the
        // task's re-check after registering sees the data.
        fence(Ordering::SeqCst);
        if self.has_waker.load(Ordering::SeqCst) {
            let w = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
            self.has_waker.store(false, Ordering::SeqCst);
            if let Some(w) = w {
                w.wake();
            }
        }
    }

    /// Remember a task to wake; the caller re-checks for data afterwards.
    pub(crate) fn register_waker(&self, w: &Waker) {
        let mut slot = self.waker.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some(old) if old.will_wake(w) => {}
            _ => *slot = Some(w.clone()),
        }
        // SYNC: see `notify`.
        self.has_waker.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Join a wait set; false if already in one.
    pub(crate) fn join_wait_set(&self, e: &Arc<WakeEvent>) -> bool {
        if self.in_wait_set.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.listener.set(Some(e.clone()));
        true
    }

    pub(crate) fn leave_wait_set(&self) {
        self.listener.set(None);
        self.in_wait_set.store(false, Ordering::Release);
    }

    pub(crate) fn publishers_gone(&self) {
        self.gone.fetch_add(1, Ordering::Relaxed);
        self.notify();
    }

    pub(crate) fn gone_count(&self) -> u64 {
        self.gone.load(Ordering::Relaxed)
    }
}
