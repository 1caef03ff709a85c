//! The asymmetric barrier: a compiler fence on the side that runs on
//! every message, `membarrier` on the side that runs when the graph
//! changes. [`LaneCell`](crate::LaneCell) and
//! [`SoloLock`](crate::SoloLock) order a plain store and a later load of
//! each side with it, as userspace RCU and folly's hazard pointers do.

#[cfg(any(loom, miri))]
use crate::atomic::{AtomicU32, Ordering};

/// How the barriers are made: 0 not decided yet, [`MEMBARRIER`], or
/// [`FENCES`].
#[cfg(not(any(loom, miri)))]
static BARRIERS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
/// Light side: a compiler fence; heavy side: `membarrier`.
#[cfg(not(any(loom, miri)))]
const MEMBARRIER: u8 = 1;
/// Both sides: a full fence.
#[cfg(not(any(loom, miri)))]
const FENCES: u8 = 2;

/// Decide how the barriers are made, once per process, before the first
/// [`Barrier`] exists (so both sides of every barrier use one decision:
/// the barrier's creation happens before any use of it).
fn decide_barriers() {
    #[cfg(not(any(loom, miri)))]
    if BARRIERS.load(std::sync::atomic::Ordering::Acquire) == 0 {
        let off = std::env::var_os("MYELIN_MEMBARRIER").is_some_and(|v| v == "0");
        let ok = !off
            && rustix::thread::membarrier(
                rustix::thread::MembarrierCommand::RegisterPrivateExpedited,
            )
            .is_ok();
        // Two threads deciding at once decide alike.
        BARRIERS.store(
            if ok { MEMBARRIER } else { FENCES },
            std::sync::atomic::Ordering::Release,
        );
    }
}

/// Whether the light side of the barrier is a compiler fence
/// (`membarrier` works here and `MYELIN_MEMBARRIER=0` is not set); else
/// both sides are full fences.
///
/// ```
/// // Either way the cells are correct; only the cost moves.
/// let _cheap_reads = myelin_sync::uses_membarrier();
/// ```
pub fn uses_membarrier() -> bool {
    #[cfg(not(any(loom, miri)))]
    {
        decide_barriers();
        BARRIERS.load(std::sync::atomic::Ordering::Relaxed) == MEMBARRIER
    }
    #[cfg(any(loom, miri))]
    false
}

/// The two sides of one asymmetric barrier. A light side between a
/// thread's store and its later load, and a heavy side between another
/// thread's store and its later load, make a Dekker pair: at least one of
/// the two loads sees the other thread's store.
///
/// Zero-sized in a build for a machine; under loom and miri (which model
/// no `membarrier`) both sides are read-modify-writes of one word of its
/// own, which orders them the same way.
pub(crate) struct Barrier {
    #[cfg(any(loom, miri))]
    word: AtomicU32,
}

impl Barrier {
    pub(crate) fn new() -> Barrier {
        decide_barriers();
        Barrier {
            #[cfg(any(loom, miri))]
            word: AtomicU32::new(0),
        }
    }

    /// The frequent side, between announcing and checking.
    #[inline(always)]
    pub(crate) fn light(&self) {
        #[cfg(not(any(loom, miri)))]
        {
            if BARRIERS.load(std::sync::atomic::Ordering::Relaxed) == MEMBARRIER {
                // The heavy side's `membarrier` is this thread's full
                // barrier.
                std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            } else {
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            }
        }
        // Read-modify-writes of one word are totally ordered: whichever
        // of the two sides comes second reads the first, and the store
        // before the first happens before the load after the second.
        #[cfg(any(loom, miri))]
        self.word.fetch_add(0, Ordering::SeqCst);
    }

    /// [`light`](Self::light) where the caller knows `membarrier` is in
    /// use ([`uses_membarrier`] was true before it made the pairing
    /// possible): a compiler fence, without looking at the mode.
    #[inline(always)]
    pub(crate) fn light_membarrier(&self) {
        #[cfg(not(any(loom, miri)))]
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        #[cfg(any(loom, miri))]
        self.word.fetch_add(0, Ordering::SeqCst);
    }

    /// The frequent side where a missed pairing only delays work (a
    /// reader leaving its lane, see `LaneGuard::drop`): a compiler fence
    /// with `membarrier`, nothing with full fences.
    #[inline(always)]
    pub(crate) fn leave(&self) {
        #[cfg(not(any(loom, miri)))]
        if BARRIERS.load(std::sync::atomic::Ordering::Relaxed) == MEMBARRIER {
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        }
        #[cfg(any(loom, miri))]
        self.word.fetch_add(0, Ordering::SeqCst);
    }

    /// The rare side: every thread of the process passes a full barrier.
    pub(crate) fn heavy(&self) {
        #[cfg(not(any(loom, miri)))]
        {
            use rustix::thread::{MembarrierCommand, membarrier};
            if BARRIERS.load(std::sync::atomic::Ordering::Relaxed) == MEMBARRIER {
                if membarrier(MembarrierCommand::PrivateExpedited).is_ok() {
                    return;
                }
                // A forked child may not inherit the registration:
                // register again; else the (slow) global barrier, which
                // needs none.
                let _ = membarrier(MembarrierCommand::RegisterPrivateExpedited);
                if membarrier(MembarrierCommand::PrivateExpedited).is_ok()
                    || membarrier(MembarrierCommand::Global).is_ok()
                {
                    return;
                }
                // The light side relies on this barrier with no fence of
                // its own: going on could free a value a reader reads, or
                // let two threads into one callback.
                eprintln!("myelin: membarrier failed after it had worked; aborting");
                std::process::abort();
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        #[cfg(any(loom, miri))]
        self.word.fetch_add(0, Ordering::SeqCst);
    }
}
