//! What executors and blocked waiters sleep on: a private futex, or (with
//! the shared-memory transport) a slot of this process's wake-up table that
//! publishers in other processes can signal too. A remote signal names a
//! ready lane (see `myelin_shm::wake`), so the waiter drains only the
//! links behind the lanes that were marked.
//!
//! A process has 256 such slots. A waiter created when every slot is taken
//! (`Polled`) cannot be signalled by other processes: it looks at all its
//! links every [`POLL`] instead, so it still hears them, later, and never
//! sleeps through a message until its deadline.

#[cfg(feature = "shm")]
use std::time::Duration;
use std::time::Instant;

use myelin_sync::{Event, Scope, WaitOutcome};

/// How often a waiter without a wake-up slot looks for messages from other
/// processes.
#[cfg(feature = "shm")]
const POLL: Duration = Duration::from_millis(10);

pub(crate) enum WakeEvent {
    Local(Event),
    #[cfg(feature = "shm")]
    Shm(myelin_shm::wake::WakeSlot),
    /// Shared memory is on but every slot of this process's wake-up table
    /// is taken: a private event, and when the links were last looked at
    /// (pending again [`POLL`] later).
    #[cfg(feature = "shm")]
    Polled(Event, LastLook),
}

/// When a `Polled` waiter last looked at its links: nanoseconds since this
/// process's first look-up of the clock.
#[cfg(feature = "shm")]
pub(crate) struct LastLook(std::sync::atomic::AtomicU64);

#[cfg(feature = "shm")]
impl LastLook {
    fn now() -> u64 {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }

    fn new() -> Self {
        LastLook(std::sync::atomic::AtomicU64::new(Self::now()))
    }

    /// Whether [`POLL`] has passed since the last look.
    fn due(&self) -> bool {
        // Relaxed: a stale read only moves one look by one poll period.
        Self::now() >= self.0.load(std::sync::atomic::Ordering::Relaxed) + POLL.as_nanos() as u64
    }

    /// Whether a look is due; if so, it counts as taken now.
    fn take(&self) -> bool {
        let due = self.due();
        if due {
            self.0
                .store(Self::now(), std::sync::atomic::Ordering::Relaxed);
        }
        due
    }
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
        {
            if let Some(slot) = t.alloc() {
                return WakeEvent::Shm(slot);
            }
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "every slot of this process's shared-memory wake-up table is taken ({} executors, wait sets and polling subscriptions): more of them look for messages from other processes every {} ms instead of being woken",
                    myelin_shm::wake::WAKE_SLOTS,
                    POLL.as_millis()
                );
            });
            return WakeEvent::Polled(Event::new(Scope::Process), LastLook::new());
        }
        WakeEvent::local()
    }

    #[inline]
    pub(crate) fn notify(&self) {
        match self {
            WakeEvent::Local(e) => e.notify(),
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.event().notify(),
            #[cfg(feature = "shm")]
            WakeEvent::Polled(e, _) => e.notify(),
        }
    }

    #[inline]
    pub(crate) fn notify_one(&self) {
        match self {
            WakeEvent::Local(e) => e.notify_one(),
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.event().notify_one(),
            #[cfg(feature = "shm")]
            WakeEvent::Polled(e, _) => e.notify_one(),
        }
    }

    /// [`notify_one`](Self::notify_one) after work that is a `SeqCst`
    /// read-modify-write the waiters' check reads with `SeqCst` loads (a
    /// push into a ready ring): no epoch increment when nobody waits (see
    /// [`Event::notify_one_if_waiting`]).
    #[inline]
    pub(crate) fn notify_one_if_waiting(&self) {
        match self {
            WakeEvent::Local(e) => e.notify_one_if_waiting(),
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.event().notify_one_if_waiting(),
            #[cfg(feature = "shm")]
            WakeEvent::Polled(e, _) => e.notify_one_if_waiting(),
        }
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) fn wait_while(
        &self,
        #[allow(unused_mut)] mut idle: impl FnMut() -> bool,
        deadline: Option<Instant>,
    ) -> WaitOutcome {
        match self {
            WakeEvent::Local(e) => e.wait_while(idle, deadline),
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.event().wait_while(idle, deadline),
            // Sleep at most until the next look is due; `is_pending` then
            // says so, and the caller's `idle` (which asks it) ends the wait.
            #[cfg(feature = "shm")]
            WakeEvent::Polled(e, _) => loop {
                let next = Instant::now() + POLL;
                let until = deadline.map_or(next, |d| d.min(next));
                let out = e.wait_while(&mut idle, Some(until));
                if out.is_ready() || deadline.is_some_and(|d| Instant::now() >= d) {
                    return out;
                }
            },
        }
    }

    /// The lanes other processes marked ready since the last call (clears
    /// them); `None` when nothing was signalled.
    ///
    /// Every executor turn asks, so the common answers (a private event; a
    /// shared one with nothing pending: one load) are inlined into the
    /// turn; the polled look (a clock read) is kept out of line so that it
    /// does not make the whole function too big to inline (it did: +18
    /// instructions per turn in the icount gate when LLVM stopped).
    #[inline(always)]
    pub(crate) fn take_lanes(&self) -> Option<Lanes> {
        match self {
            WakeEvent::Local(_) => None,
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.take_lanes().map(Lanes),
            #[cfg(feature = "shm")]
            WakeEvent::Polled(_, last) => Self::take_polled(last),
        }
    }

    /// [`take_lanes`](Self::take_lanes) of a polled event: every lane once
    /// its look is due.
    #[cfg(feature = "shm")]
    #[inline(never)]
    fn take_polled(last: &LastLook) -> Option<Lanes> {
        last.take().then(|| Lanes(myelin_shm::wake::Lanes::all()))
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
            #[cfg(feature = "shm")]
            WakeEvent::Polled(..) => None,
        }
    }

    /// Whether another process signalled since the last call (clears it).
    #[inline]
    pub(crate) fn take_pending(&self) -> bool {
        match self {
            WakeEvent::Local(_) => false,
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.take_pending(),
            #[cfg(feature = "shm")]
            WakeEvent::Polled(_, last) => last.take(),
        }
    }

    /// Whether another process signalled (does not clear it).
    #[inline]
    pub(crate) fn is_pending(&self) -> bool {
        match self {
            WakeEvent::Local(_) => false,
            #[cfg(feature = "shm")]
            WakeEvent::Shm(s) => s.is_pending(),
            #[cfg(feature = "shm")]
            WakeEvent::Polled(_, last) => last.due(),
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
