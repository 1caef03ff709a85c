//! Callback groups: which callbacks a multi-threaded executor may run at the
//! same time.
//!
//! * [`CallbackGroupKind::MutuallyExclusive`] (the default group of every
//!   node, as in ROS 2): at most one callback of the group runs at a time.
//! * [`CallbackGroupKind::Reentrant`]: callbacks of *different* entities of
//!   the group may run in parallel.
//!
//! Whatever the group, one subscription's (or timer's) callback never runs
//! twice at once: callbacks are `FnMut`, and messages of a topic are handled
//! in order. A single-threaded executor never runs two callbacks at once, and
//! inline subscriptions run in the publisher's thread, outside any group.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use myelin_sync::atomic::{AtomicBool, Ordering};

use crate::error::SpinError;
use crate::executor::{ExecShared, Executable};

/// The kind of a [`CallbackGroup`].
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
    pub(crate) fn run(&self, e: Arc<dyn Executable>, exec: &ExecShared) -> Result<(), SpinError> {
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
                return Ok(());
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

/// A callback group. Create with
/// [`Node::create_callback_group`](crate::Node::create_callback_group); pass
/// it in [`SubscriptionOptions::callback_group`](crate::SubscriptionOptions)
/// or to [`Node::create_timer_in`](crate::Node::create_timer_in). Cheap to
/// clone.
#[derive(Clone)]
pub struct CallbackGroup {
    pub(crate) inner: Arc<GroupInner>,
}

impl CallbackGroup {
    pub(crate) fn new(kind: CallbackGroupKind) -> Self {
        CallbackGroup {
            inner: GroupInner::new(kind),
        }
    }

    /// The kind.
    pub fn kind(&self) -> CallbackGroupKind {
        self.inner.kind
    }
}

impl std::fmt::Debug for CallbackGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackGroup")
            .field("kind", &self.inner.kind)
            .finish()
    }
}
