//! What executors and blocked waiters sleep on: a private futex, or (with
//! the shared-memory transport) a slot of this process's wake-up table that
//! publishers in other processes can signal too.

use std::time::Instant;

use myelin_sync::{Event, Scope, WaitOutcome};

pub(crate) enum WakeEvent {
    Local(Event),
    #[cfg(feature = "shm")]
    Shm(myelin_shm::wake::WakeSlot),
}

impl WakeEvent {
    /// A private event.
    pub(crate) fn local() -> Self {
        WakeEvent::Local(Event::new(Scope::Process))
    }

    /// A slot other processes can signal when shared memory is on (falls
    /// back to a private event).
    pub(crate) fn remote_capable() -> Self {
        #[cfg(feature = "shm")]
        if super::shared_memory_enabled()
            && let Some(t) = super::shm::wake_table()
            && let Some(slot) = t.alloc()
        {
            return WakeEvent::Shm(slot);
        }
        WakeEvent::local()
    }

    #[inline]
    pub(crate) fn notify(&self) {
        match self {
            WakeEvent::Local(e) => e.notify(),
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.event().notify(),
        }
    }

    #[inline]
    pub(crate) fn notify_one(&self) {
        match self {
            WakeEvent::Local(e) => e.notify_one(),
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.event().notify_one(),
        }
    }

    pub(crate) fn wait_while(
        &self,
        idle: impl FnMut() -> bool,
        deadline: Option<Instant>,
    ) -> WaitOutcome {
        match self {
            WakeEvent::Local(e) => e.wait_while(idle, deadline),
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.event().wait_while(idle, deadline),
        }
    }

    /// Whether another process signalled since the last call (clears it).
    #[inline]
    pub(crate) fn take_pending(&self) -> bool {
        match self {
            WakeEvent::Local(_) => false,
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.take_pending(),
        }
    }

    /// Whether another process signalled (does not clear it).
    #[inline]
    pub(crate) fn is_pending(&self) -> bool {
        match self {
            WakeEvent::Local(_) => false,
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.is_pending(),
        }
    }

    /// The slot other processes signal (`None` for a private event).
    #[cfg_attr(not(feature = "shm"), allow(dead_code))]
    pub(crate) fn slot(&self) -> Option<u32> {
        match self {
            WakeEvent::Local(_) => None,
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => Some(s.index()),
        }
    }
}
