//! What executors and blocked waiters sleep on: a private futex, or (with
//! the shared-memory transport) a slot of this process's wake-up table that
//! publishers in other processes can signal too. A remote signal names a
//! ready lane (see `myelin_shm::wake`), so the waiter drains only the
//! links behind the lanes that were marked.

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

    /// The lanes other processes marked ready since the last call (clears
    /// them); `None` when nothing was signalled.
    #[inline]
    pub(crate) fn take_lanes(&self) -> Option<Lanes> {
        match self {
            WakeEvent::Local(_) => None,
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.take_lanes().map(Lanes),
        }
    }

    /// The word a link tells remote publishers to signal for `lane`
    /// (`None` for a private event: nobody outside can signal it).
    pub(crate) fn word(&self, lane: u32) -> Option<u32> {
        match self {
            WakeEvent::Local(_) => {
                let _ = lane;
                None
            }
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => Some(myelin_shm::wake::wake_word(s.index(), lane)),
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
}

/// Ready lanes of one wake-up (see [`WakeEvent::take_lanes`]).
pub(crate) struct Lanes(#[cfg(feature = "shm")] myelin_shm::wake::Lanes);

impl Lanes {
    /// Lanes a waiter hands out (more links share lanes).
    pub(crate) const COUNT: u32 = {
        #[cfg(feature = "shm")]
        {
            myelin_shm::wake::WAKE_LANES
        }
        #[cfg(not(feature = "shm"))]
        {
            1
        }
    };

    /// The marked lanes.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        #[cfg(feature = "shm")]
        return self.0.iter();
        #[cfg(not(feature = "shm"))]
        std::iter::empty()
    }
}

/// Signal `word` of this process's wake-up table as a publisher in another
/// process would (for tests); false when no transport can do that.
#[cfg(test)]
pub(crate) fn signal_as_remote(word: u32) -> bool {
    #[cfg(feature = "shm")]
    if let Some(own) = super::shm::wake_table()
        && let Ok(t) = myelin_shm::wake::WakeTable::open(std::process::id(), own.tag())
    {
        return t.signal(word).is_ok();
    }
    let _ = word;
    false
}
