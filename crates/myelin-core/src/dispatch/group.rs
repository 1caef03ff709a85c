//! The state of a callback group that the executors see: whether one of its
//! callbacks is running, and what waits for it (the public handle is
//! [`crate::CallbackGroup`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use myelin_sync::atomic::{AtomicBool, Ordering};

use super::{ExecShared, Executable};
use crate::error::SpinError;

/// The kind of a [`CallbackGroup`](crate::CallbackGroup).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackGroupKind {
    /// One callback of the group at a time.
    MutuallyExclusive,
    /// Callbacks of different entities may overlap.
    Reentrant,
}

pub(crate) struct GroupInner {
    pub(crate) kind: CallbackGroupKind,
    /// A callback of this (mutually exclusive) group is running.
    // SYNC: SeqCst, paired with `has_pending` (see `run`).
    busy: AtomicBool,
    /// Entries parked while the group was busy.
    // SYNC: SeqCst, paired with `busy`.
    has_pending: AtomicBool,
    pending: Mutex<VecDeque<Arc<dyn Executable>>>,
}

impl GroupInner {
    pub(crate) fn new(kind: CallbackGroupKind) -> Arc<Self> {
        Arc::new(GroupInner {
            kind,
            busy: AtomicBool::new(false),
            has_pending: AtomicBool::new(false),
            pending: Mutex::new(VecDeque::new()),
        })
    }

    /// Run `e` respecting the group, on a multi-threaded executor. If the
    /// group is busy, `e` is parked and re-queued when the running callback
    /// finishes (no worker spins on it).
    ///
    /// Protocol (all SeqCst): the runner stores `busy = false`, then loads
    /// `has_pending`; a parker, under the `pending` lock, stores
    /// `has_pending = true`, then loads `busy`. In the single total order one
    /// of them sees the other: either the runner drains (under the lock, so
    /// after the parker pushed), or the parker sees the group free and
    /// retries.
    /// Returns whether a callback ran (`false` when `e` was parked).
    pub(crate) fn run(&self, e: Arc<dyn Executable>, exec: &ExecShared) -> Result<bool, SpinError> {
        if self.kind == CallbackGroupKind::Reentrant {
            return e.execute(exec);
        }
        loop {
            // SYNC: see the protocol above.
            if !self.busy.swap(true, Ordering::SeqCst) {
                break;
            }
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            self.has_pending.store(true, Ordering::SeqCst);
            if self.busy.load(Ordering::SeqCst) {
                pending.push_back(e);
                return Ok(false);
            }
        }
        let r = e.execute(exec);
        self.busy.store(false, Ordering::SeqCst);
        if self.has_pending.load(Ordering::SeqCst) {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            self.has_pending.store(false, Ordering::SeqCst);
            let n = pending.len();
            for p in pending.drain(..) {
                exec.push_ready(p);
            }
            drop(pending);
            if n > 0 {
                exec.event.notify();
            }
        }
        r
    }
}
