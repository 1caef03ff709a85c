//! Simulated time as the timer wheel sees it: the last `/clock` of a
//! context with `use_sim_time`, and the executors to wake when it moves
//! (see [`crate::time`] for the semantics).

use std::sync::{Arc, Mutex, Weak};

use myelin_sync::atomic::{AtomicI64, Ordering};

use super::ExecShared;

/// A context's simulated time.
pub(crate) struct SimTime {
    /// Nanoseconds since the epoch; 0 until the first `/clock`.
    // SYNC: Relaxed: written by the clock thread, read by any thread; a
    // reader wants a recent value, and the executors that must act on a
    // change are woken after the store (the wake-up orders it).
    now: AtomicI64,
    /// The first time `/clock` gave (0 before it): where the periods of
    /// timers made before it start, however late an executor looks.
    first: AtomicI64,
    /// The executors with timers on this time.
    executors: Mutex<Vec<Weak<ExecShared>>>,
}

impl SimTime {
    pub(crate) fn new() -> SimTime {
        SimTime {
            now: AtomicI64::new(0),
            first: AtomicI64::new(0),
            executors: Mutex::new(Vec::new()),
        }
    }

    /// The time now (0 before the first `/clock`).
    pub(crate) fn now_ns(&self) -> i64 {
        self.now.load(Ordering::Relaxed)
    }

    /// The first time `/clock` gave (0 before it).
    pub(crate) fn first_ns(&self) -> i64 {
        self.first.load(Ordering::Relaxed)
    }

    /// `/clock` said `ns`: store it and let the executors with timers on
    /// this time look at them.
    pub(crate) fn set(&self, ns: i64) {
        if ns != 0 {
            // SYNC: Relaxed: stored before `now` by the one clock thread;
            // a reader that sees `now` set and `first` still 0 falls back
            // to `now` (the executor's wake-up orders them in practice).
            let _ = self
                .first
                .compare_exchange(0, ns, Ordering::Relaxed, Ordering::Relaxed);
        }
        if self.now.swap(ns, Ordering::Relaxed) == ns {
            return;
        }
        let execs: Vec<_> = {
            let mut list = self.executors.lock().unwrap_or_else(|e| e.into_inner());
            list.retain(|e| e.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for e in execs {
            e.sim_time_moved();
        }
    }

    /// Wake `exec` whenever this time moves (once per executor).
    pub(crate) fn add_executor(&self, exec: &Arc<ExecShared>) {
        let mut list = self.executors.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|e| e.strong_count() > 0);
        if !list
            .iter()
            .any(|e| std::ptr::eq(e.as_ptr(), Arc::as_ptr(exec)))
        {
            list.push(Arc::downgrade(exec));
        }
    }
}
