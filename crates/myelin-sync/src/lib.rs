//! myelin's concurrency primitives.
//!
//! This is the only crate of myelin that touches raw atomics and the futex
//! system call. Everything lock-free above it imports its atomics from
//! [`atomic`], which swaps in [loom](https://docs.rs/loom)'s model-checked
//! types when built with `RUSTFLAGS="--cfg loom"`, so the wake-up protocols
//! can be model checked (`tests/loom.rs`).
//!
//! The main primitive is [`Event`], an *eventcount*: the thing an executor
//! sleeps on. Producers make work visible (push into a queue) and call
//! [`Event::notify`]; a consumer calls [`Event::wait_while`] with a predicate
//! that says "still nothing to do". The consumer sleeps in the kernel (a
//! futex), so an idle executor costs no CPU, and a notify with no sleeper
//! costs one atomic increment and one load: no system call.
//!
//! The event's state is two `u32` words, so the same protocol works when the
//! event lives in shared memory and the producer is another process
//! ([`Scope::Shared`] uses a non-private futex).
//!
//! ```
//! use myelin_sync::{Event, Scope};
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::time::{Duration, Instant};
//!
//! let event = Arc::new(Event::new(Scope::Process));
//! let work = Arc::new(AtomicBool::new(false));
//! let (e, w) = (event.clone(), work.clone());
//! let producer = std::thread::spawn(move || {
//!     w.store(true, Ordering::SeqCst); // make the work visible first
//!     e.notify();                      // then wake the sleeper, if any
//! });
//! let deadline = Instant::now() + Duration::from_secs(10);
//! let woke = event.wait_while(|| !work.load(Ordering::SeqCst), Some(deadline));
//! assert!(woke.is_ready());
//! producer.join().unwrap();
//! ```
#![warn(missing_docs)]

use std::time::Instant;

mod barrier;
mod cells;
mod home;
mod lane;
mod ring;
mod slab;
mod solo;
mod stack;
pub use barrier::uses_membarrier;
pub use cells::{RetainCell, TryLock, TryLockGuard};
pub use home::{Entered, Home};
pub use lane::{LaneCell, LaneGuard};
pub use ring::{Claim, Ring};
pub use slab::{Lease, LeaseSlab};
pub use solo::SoloLock;
pub use stack::IndexStack;

/// Atomics used by every lock-free structure of myelin: `std`'s normally,
/// loom's under `cfg(loom)`.
pub mod atomic {
    #[cfg(loom)]
    pub use loom::sync::atomic::{
        AtomicBool, AtomicI64, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        fence,
    };
    #[cfg(not(loom))]
    pub use std::sync::atomic::{
        AtomicBool, AtomicI64, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        fence,
    };
}

use atomic::{AtomicU32, Ordering};

/// Hot text: the code a message runs through, kept together.
///
/// A callback at robot rates (a 30 Hz camera, a 100 Hz relay) runs on a
/// thread that slept for milliseconds, and finds its code as cold as its
/// data: on the reference VM each cache line of code costs ~45 ns to fetch
/// when it follows the last one, and each 4 KiB page of it ~170-260 ns
/// more, its translation gone too (BENCHMARKS.md, "Hot text"). The
/// functions of myelin's per-message paths (publish, the subscription's
/// buffer, the ready queue, the executor's turn and its sleep, the wake-up)
/// are compiled into the sections `.text.hot.myelin`, each marked
///
/// ```text
/// // SAFETY: hot text is executable code (see `myelin_sync::hot`).
/// #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
/// ```
///
/// (the attribute is `unsafe` because a section name can make code
/// non-executable; every `.text.*` section is executable). Generic
/// functions keep the attribute in every crate that instantiates them.
///
/// The linker puts them next to each other when it groups `.text.hot.*`:
/// GNU ld does by default; lld (Rust's default linker on x86-64 Linux since
/// 1.90) and mold with `-z keep-text-section-prefix`. myelin's binaries and
/// its Python extension ask for it in their build scripts; a binary of
/// yours can too, in its `build.rs`:
///
/// ```text
/// fn main() {
///     if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
///         println!("cargo::rustc-link-arg=-Wl,-z,keep-text-section-prefix");
///     }
/// }
/// ```
///
/// Without it nothing changes but the layout: each function lies where
/// the linker would have put it anyway.
///
/// `myelin-icount` keeps the paths inside: beside each per-message
/// workload it counts the instructions executed outside `.text.hot`
/// (`... outside hot text`, gated in CI), so a new per-message function
/// without the attribute grows that row. A closure cannot carry the
/// attribute: a per-message closure becomes a named type with a method
/// (as the subscription callback's `Adapter`).
pub mod hot {}

/// Deadlines from timeouts that may say "forever".
pub mod deadline {
    use std::time::{Duration, Instant};

    /// The longest a timeout waits: a century. Rust code says "wait
    /// forever" as `Duration::MAX`, which no `Instant` can be that far
    /// from now (adding it panics); a century is forever for a robot, and
    /// every deadline stays an `Instant` a wait can sleep towards.
    pub const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

    /// The instant `timeout` from now, a timeout beyond [`FOREVER`] taken
    /// as forever. Every wait of myelin (the executors', the
    /// subscriptions', the services', the shared-memory ring's, the
    /// Python binding's) takes its deadline from here.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let far = myelin_sync::deadline::after(Duration::MAX); // no panic
    /// assert!(far > Instant::now() + Duration::from_secs(50 * 365 * 24 * 3600));
    /// ```
    #[inline]
    pub fn after(timeout: Duration) -> Instant {
        Instant::now() + timeout.min(FOREVER)
    }
}

/// Ask the CPU to start bringing the cache line that holds `p` into its
/// caches, and go on without waiting for it.
///
/// A burst that touches many objects whose memory went cold (a publish to
/// ten subscriptions of an executor that slept 10 ms) otherwise misses on
/// one object after the other, each miss waiting for the last; asked for
/// all at once, the misses overlap. A hint only: any address is allowed
/// (nothing is read into the program, nothing faults), and on targets
/// without a prefetch instruction (and under loom) it does nothing.
///
/// ```
/// let values = vec![1u64; 1024];
/// myelin_sync::prefetch(values.as_ptr().wrapping_add(512));
/// assert_eq!(values[512], 1);
/// ```
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: `prefetcht0` is a hint: it never faults (whatever the
    // address), writes nothing and makes no value visible to the program.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(all(target_arch = "aarch64", not(loom)))]
    // SAFETY: `prfm` is a hint: it never faults (whatever the address),
    // writes nothing and makes no value visible to the program.
    unsafe {
        std::arch::asm!(
            "prfm pldl1keep, [{0}]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(any(loom, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    let _ = p;
}

/// Who may wait on and notify an [`Event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Threads of this process only (private futex: cheaper kernel lookup).
    Process,
    /// Processes sharing the memory the event lives in (shared futex).
    Shared,
}

/// The result of [`Event::wait_while`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The predicate said there is work (it returned `false`).
    Ready,
    /// The deadline passed while the predicate still said "idle".
    TimedOut,
}

impl WaitOutcome {
    /// `true` for [`WaitOutcome::Ready`].
    pub fn is_ready(self) -> bool {
        matches!(self, WaitOutcome::Ready)
    }
}

/// An eventcount: sleep in the kernel until notified, without lost wake-ups.
///
/// Protocol (the classic eventcount, e.g. Dmitry Vyukov's, and folly's
/// `EventCount`):
/// * producer: make the work visible, then [`notify`](Event::notify):
///   `epoch += 1`; if `waiters > 0`, futex-wake all.
/// * consumer: `waiters += 1`; loop { `e = epoch`; if work → done; futex-wait
///   while `epoch == e` }; `waiters -= 1`.
///
/// All four accesses are `SeqCst`, which gives the single total order the
/// argument needs: if the producer read `waiters == 0`, the consumer's
/// increment comes later in that order, so its load of `epoch` sees the new
/// value *and* its check sees the work; if the consumer loaded the old epoch,
/// the futex wait returns at once because the word changed (the kernel
/// compares it atomically with going to sleep).
///
/// When the work itself is a `SeqCst` read-modify-write (a ring push), the
/// producer may skip the epoch increment while nobody waits:
/// [`notify_one_if_waiting`](Event::notify_one_if_waiting).
#[repr(C)]
#[derive(Debug)]
pub struct Event {
    /// Bumped by every notify. The futex word.
    // SYNC: SeqCst fetch_add in `notify` pairs with the SeqCst load in `wait_while`.
    epoch: AtomicU32,
    /// Number of consumers inside `wait_while`. Lets `notify` skip the syscall.
    // SYNC: SeqCst fetch_add in `wait_while` pairs with the SeqCst load in `notify`.
    waiters: AtomicU32,
    shared: bool,
}

impl Event {
    /// A new event with no pending notification.
    pub fn new(scope: Scope) -> Self {
        Event {
            epoch: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            shared: scope == Scope::Shared,
        }
    }

    /// Wake every consumer currently waiting. Call it *after* the work is
    /// visible. Costs no system call when nobody waits.
    #[inline]
    pub fn notify(&self) {
        // SYNC: pairs with the epoch load in `wait_while`.
        self.epoch.fetch_add(1, Ordering::SeqCst);
        loom_seq_cst();
        // SYNC: pairs with the waiters increment in `wait_while`.
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.wake_all();
        }
    }

    /// Sleep while `idle()` returns `true`, until notified or `deadline`.
    ///
    /// `idle` is re-evaluated after every wake-up (spurious or not); it must
    /// read the producer's work with at least `Acquire` ordering.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn wait_while(&self, idle: impl FnMut() -> bool, deadline: Option<Instant>) -> WaitOutcome {
        wait_on(&self.epoch, &self.waiters, !self.shared, idle, deadline)
    }

    /// [`notify_one`](Event::notify_one) for a producer whose work *is* a
    /// `SeqCst` read-modify-write (a queue push by `SeqCst`
    /// compare-and-swap) that every consumer's `idle` reads with `SeqCst`
    /// loads: when nobody waits it costs one load, where `notify_one`
    /// always pays a locked increment of the epoch (about 5 ns here, on a
    /// path that runs per message).
    ///
    /// Why it is enough: the producer's write comes before this load in the
    /// single total order of `SeqCst` operations. If the load sees no
    /// waiter, a consumer's increment of `waiters` comes after it, and so
    /// do that consumer's `SeqCst` loads in `idle`, which see the work. If
    /// it sees one, the epoch moves and the futex wakes as in `notify_one`.
    /// With weaker work (a `Release` store, a lock-free queue whose
    /// emptiness check is not `SeqCst`) use `notify_one`. Nor is it for
    /// consumers that read [`epoch`](SharedEvent::epoch) and wait while it
    /// is unchanged without being counted in `waiters`: nothing moves the
    /// epoch for them.
    ///
    /// ```
    /// use myelin_sync::atomic::{AtomicU32, Ordering};
    /// use myelin_sync::{Event, Scope};
    /// let (e, work) = (Event::new(Scope::Process), AtomicU32::new(0));
    /// work.fetch_add(1, Ordering::SeqCst);
    /// e.notify_one_if_waiting();
    /// assert!(e.wait_while(|| work.load(Ordering::SeqCst) == 0, None).is_ready());
    /// ```
    #[inline]
    pub fn notify_one_if_waiting(&self) {
        notify_if_waiting(&self.epoch, &self.waiters, !self.shared, 1);
    }

    /// Wake at most one waiting consumer (for work one consumer can take,
    /// like one ready entry for a pool of executor threads). Same ordering
    /// rules as [`notify`](Event::notify).
    #[inline]
    pub fn notify_one(&self) {
        // SYNC: pairs with the epoch load in `wait_while`.
        self.epoch.fetch_add(1, Ordering::SeqCst);
        loom_seq_cst();
        // SYNC: pairs with the waiters increment in `wait_while`.
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.wake(1);
        }
    }

    /// The number of notifications so far (wrapping). For diagnostics.
    pub fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::Relaxed)
    }

    fn wake_all(&self) {
        wake(&self.epoch, !self.shared, i32::MAX as u32);
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn wake(&self, n: u32) {
        wake(&self.epoch, !self.shared, n);
    }
}

/// The producer side without the unconditional epoch increment (see
/// [`Event::notify_one_if_waiting`]), shared by [`Event`] and
/// [`SharedEvent`].
#[inline]
fn notify_if_waiting(epoch: &AtomicU32, waiters: &AtomicU32, private: bool, n: u32) {
    // SYNC: SeqCst, after the caller's SeqCst read-modify-write of its
    // work: pairs with the waiters increment in `wait_on`, which precedes
    // the consumer's SeqCst loads of that work.
    loom_seq_cst();
    if waiters.load(Ordering::SeqCst) > 0 {
        // SYNC: as in `notify`: a consumer that loaded the old epoch finds
        // the futex word changed.
        epoch.fetch_add(1, Ordering::SeqCst);
        wake(epoch, private, n);
    }
}

/// The consumer side of the eventcount protocol (see [`Event`]) over two
/// words, shared by [`Event`] and [`SharedEvent`].
// SAFETY: hot text is executable code (see `myelin_sync::hot`).
#[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
fn wait_on(
    epoch: &AtomicU32,
    waiters: &AtomicU32,
    private: bool,
    mut idle: impl FnMut() -> bool,
    deadline: Option<Instant>,
) -> WaitOutcome {
    if !idle() {
        return WaitOutcome::Ready;
    }
    // SYNC: pairs with the waiters load in `notify`.
    waiters.fetch_add(1, Ordering::SeqCst);
    loom_seq_cst();
    let outcome = loop {
        // SYNC: pairs with the epoch increment in `notify`.
        let seen = epoch.load(Ordering::SeqCst);
        if !idle() {
            break WaitOutcome::Ready;
        }
        let remaining = match deadline {
            None => None,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break WaitOutcome::TimedOut;
                }
                Some(d - now)
            }
        };
        sleep(epoch, private, seen, remaining);
    };
    // Saturating: in shared memory another process may have zeroed it.
    let _ = waiters.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
        Some(w.saturating_sub(1))
    });
    outcome
}

#[cfg(not(loom))]
fn flags(private: bool) -> rustix::thread::futex::Flags {
    if private {
        rustix::thread::futex::Flags::PRIVATE
    } else {
        rustix::thread::futex::Flags::empty()
    }
}

#[cfg(not(loom))]
// SAFETY: hot text is executable code (see `myelin_sync::hot`).
#[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
fn sleep(epoch: &AtomicU32, private: bool, seen: u32, timeout: Option<std::time::Duration>) {
    use rustix::thread::futex;
    let ts = timeout.map(|d| futex::Timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: d.subsec_nanos() as _,
    });
    // The result is ignored on purpose: EAGAIN (the word changed),
    // ETIMEDOUT and EINTR all mean "re-check", which the caller's loop does.
    let _ = futex::wait(epoch, flags(private), seen, ts.as_ref());
}

/// The futex under loom: a wake generation per futex word (by address)
/// behind a mutex and a condition variable. A sleeper compares the word
/// and takes the generation under the lock, then waits for the
/// generation to move, as the kernel compares the word and queues the
/// waiter atomically with respect to wakes. So a wake-up lost because the
/// word never moved, *or* because it moved with no wake after the
/// sleeper's compare, leaves the sleeper blocked, which loom reports as a
/// deadlock. Over-approximated: a wake of one wakes every sleeper on the
/// word (a lost wake-up that only `n = 1` would cause is not caught).
#[cfg(loom)]
mod futex_model {
    use std::collections::HashMap;

    use loom::sync::{Condvar, Mutex};

    pub(super) struct Futexes {
        generation: Mutex<HashMap<usize, u64>>,
        woken: Condvar,
    }

    loom::lazy_static! {
        pub(super) static ref FUTEXES: Futexes = Futexes {
            generation: Mutex::new(HashMap::new()),
            woken: Condvar::new(),
        };
    }

    impl Futexes {
        /// Block while `word` holds `seen` and no wake on it came after
        /// the compare (returns at once if it no longer holds `seen`).
        pub(super) fn wait(&self, word: &super::AtomicU32, seen: u32) {
            let key = word as *const super::AtomicU32 as usize;
            let mut g = self.generation.lock().unwrap();
            if word.load(super::Ordering::SeqCst) != seen {
                return;
            }
            let at = g.get(&key).copied().unwrap_or(0);
            while g.get(&key).copied().unwrap_or(0) == at {
                g = self.woken.wait(g).unwrap();
            }
        }

        pub(super) fn wake(&self, word: &super::AtomicU32) {
            let key = word as *const super::AtomicU32 as usize;
            *self.generation.lock().unwrap().entry(key).or_insert(0) += 1;
            self.woken.notify_all();
        }
    }
}

#[cfg(loom)]
fn sleep(epoch: &AtomicU32, _private: bool, seen: u32, timeout: Option<std::time::Duration>) {
    // With a timeout, one yield stands for the wait (it may end at any
    // time); without one, the futex model above.
    if timeout.is_some() {
        if epoch.load(Ordering::SeqCst) == seen {
            loom::thread::yield_now();
        }
        return;
    }
    futex_model::FUTEXES.wait(epoch, seen);
}

/// loom models `SeqCst` loads and read-modify-writes as `Acquire` /
/// `AcqRel` (it says so: a source of false alarms), but `SeqCst` fences
/// exactly. The eventcount's argument rests on the single total order of
/// `SeqCst` accesses (see [`Event`]); under loom a fence at each side's
/// turn between its write and its read gives the model that order. A
/// no-op in real builds, where the accesses themselves are `SeqCst`.
#[cfg(loom)]
#[inline]
fn loom_seq_cst() {
    atomic::fence(Ordering::SeqCst);
}

#[cfg(not(loom))]
#[inline(always)]
fn loom_seq_cst() {}

#[cfg(not(loom))]
// SAFETY: hot text is executable code (see `myelin_sync::hot`).
#[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
fn wake(epoch: &AtomicU32, private: bool, n: u32) {
    let _ = rustix::thread::futex::wake(epoch, flags(private), n);
}

#[cfg(loom)]
fn wake(epoch: &AtomicU32, _private: bool, _n: u32) {
    futex_model::FUTEXES.wake(epoch);
}

/// An [`Event`] for memory shared between processes: two `u32` words and
/// nothing else, so every bit pattern is a valid value (a hostile or
/// crashed process can make it wake spuriously or sleep until a timeout,
/// never cause undefined behaviour). Always uses the shared futex.
///
/// Place it in shared memory with [`SharedEvent::from_words`].
#[repr(C)]
#[derive(Debug, Default)]
pub struct SharedEvent {
    // SYNC: as `Event::epoch`.
    epoch: AtomicU32,
    // SYNC: as `Event::waiters`.
    waiters: AtomicU32,
}

impl SharedEvent {
    /// A fresh event (for tests and for initialising shared memory).
    pub fn new() -> Self {
        SharedEvent::default()
    }

    /// View two adjacent, 4-byte aligned `u32` words (e.g. in a shared
    /// mapping) as an event.
    ///
    /// # Safety
    /// `words` must point to 8 bytes, 4-byte aligned, valid for reads and
    /// writes for `'a`, and only ever accessed atomically by anyone (other
    /// processes included).
    pub unsafe fn from_words<'a>(words: *mut u32) -> &'a SharedEvent {
        // SAFETY: the caller guarantees size, alignment and validity;
        // `SharedEvent` is `repr(C)` of two `AtomicU32`, which have the
        // layout of `u32` and accept every bit pattern.
        unsafe { &*(words as *const SharedEvent) }
    }

    /// Wake every waiter (in any process).
    pub fn notify(&self) {
        // SYNC: as `Event::notify`.
        self.epoch.fetch_add(1, Ordering::SeqCst);
        loom_seq_cst();
        if self.waiters.load(Ordering::SeqCst) > 0 {
            wake(&self.epoch, false, i32::MAX as u32);
        }
    }

    /// The number of notifications so far (wrapping): a waiter reads it
    /// before looking for work, then waits while it is unchanged.
    pub fn epoch(&self) -> u32 {
        // SYNC: SeqCst, as the epoch load in `wait_while`: a notify after
        // this load changes what the waiter compares against.
        self.epoch.load(Ordering::SeqCst)
    }

    /// Wake every waiter if any waits: [`notify`](Self::notify) without
    /// the locked epoch increment when nobody waits, for a producer whose
    /// work is a `SeqCst` read-modify-write that every waiter's check reads
    /// with a `SeqCst` load or read-modify-write (the rule of
    /// [`Event::notify_one_if_waiting`]).
    #[inline]
    pub fn notify_if_waiting(&self) {
        notify_if_waiting(&self.epoch, &self.waiters, false, i32::MAX as u32);
    }

    /// Wake one waiter if any waits (as [`Event::notify_one_if_waiting`],
    /// whose rule on the producer's work applies).
    #[inline]
    pub fn notify_one_if_waiting(&self) {
        notify_if_waiting(&self.epoch, &self.waiters, false, 1);
    }

    /// Whether a thread sleeps on this event (or is about to) now: a
    /// hint, stale as soon as it is read, for a producer deciding whether
    /// work it could do ahead of time is worth a wake-up. Nothing that
    /// must be delivered may depend on it (that is what the notify
    /// methods are for).
    ///
    /// ```
    /// let e = myelin_sync::SharedEvent::new();
    /// assert!(!e.has_waiters());
    /// ```
    #[inline]
    pub fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// Wake at most one waiter (as [`Event::notify_one`]).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn notify_one(&self) {
        // SYNC: as `Event::notify`.
        self.epoch.fetch_add(1, Ordering::SeqCst);
        loom_seq_cst();
        if self.waiters.load(Ordering::SeqCst) > 0 {
            wake(&self.epoch, false, 1);
        }
    }

    /// Sleep while `idle()` holds, until notified or `deadline`.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn wait_while(&self, idle: impl FnMut() -> bool, deadline: Option<Instant>) -> WaitOutcome {
        wait_on(&self.epoch, &self.waiters, false, idle, deadline)
    }
}

impl Default for Event {
    fn default() -> Self {
        Event::new(Scope::Process)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    #[test]
    fn wait_times_out_when_nothing_happens() {
        let e = Event::new(Scope::Process);
        let out = e.wait_while(|| true, Some(Instant::now() + Duration::from_millis(20)));
        assert_eq!(out, WaitOutcome::TimedOut);
    }

    #[test]
    fn ready_work_returns_without_sleeping() {
        let e = Event::new(Scope::Process);
        assert_eq!(e.wait_while(|| false, None), WaitOutcome::Ready);
    }

    #[test]
    fn notify_wakes_a_sleeper_many_times_without_loss() {
        let e = Arc::new(Event::new(Scope::Process));
        let counter = Arc::new(atomic::AtomicU64::new(0));
        let (e2, c2) = (e.clone(), counter.clone());
        let t = std::thread::spawn(move || {
            for _ in 0..10_000 {
                c2.fetch_add(1, Ordering::SeqCst);
                e2.notify();
            }
        });
        let mut seen = 0;
        while seen < 10_000 {
            let out = e.wait_while(
                || counter.load(Ordering::SeqCst) == seen,
                Some(Instant::now() + Duration::from_secs(30)),
            );
            assert!(out.is_ready(), "lost wake-up at {seen}");
            seen = counter.load(Ordering::SeqCst);
        }
        t.join().unwrap();
    }

    #[test]
    fn shared_scope_works_within_a_process_too() {
        let e = Arc::new(Event::new(Scope::Shared));
        let flag = Arc::new(AtomicBool::new(false));
        let (e2, f2) = (e.clone(), flag.clone());
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            f2.store(true, Ordering::SeqCst);
            e2.notify();
        });
        let out = e.wait_while(
            || !flag.load(Ordering::SeqCst),
            Some(Instant::now() + Duration::from_secs(30)),
        );
        assert!(out.is_ready());
        t.join().unwrap();
    }
}
