//! [`SoloLock`]: a try-lock that the one runner it is bound to enters
//! without a locked instruction (a subscription's callback, run by its
//! single-threaded executor).

use crate::atomic::{AtomicUsize, Ordering};
use crate::barrier::Barrier;
use crate::ring::cell::UnsafeCell;

/// A value one thread at a time may change: a try-lock, and a *binding*
/// that lets one runner in without the lock.
///
/// A subscription's callback is run by its executor, one message at a
/// time, and the executor's ready mark already keeps two runs apart,
/// except in one case: moving the subscription to another executor while
/// the old one still runs it. A lock covers that case at the price of a
/// locked instruction (a compare-and-swap, ~5 ns on the machines myelin
/// is measured on) on every message. A `SoloLock` moves that price to the
/// move.
///
/// Any thread may [`try_with`](Self::try_with) (the lock path). A
/// [`bind`](Self::bind) names one runner by a *token* (an executor whose
/// one worker runs its callbacks): while bound, the lock path refuses,
/// and that runner's [`run`](Self::run) announces itself in its *slot*
/// (a word only it writes, shared by every lock it is bound to), passes
/// the light side of an asymmetric barrier (a compiler fence where
/// `membarrier` works) and checks the binding: plain loads and stores.
/// [`unbind`](Self::unbind) turns the binding into the lock, held for
/// the old runner (one compare-and-swap), passes the heavy side
/// (`membarrier`: every thread of the process passes a full barrier) and
/// looks at the old runner's slot: the runner either announced itself
/// before that barrier (the unbind then leaves the lock to that run,
/// which lets go of it when it ends) or checks the binding after it (and
/// finds it gone). So the lock path and a bound run are never inside
/// together, and an unbind never waits for a run: it may be called from
/// inside that very run (a callback that moves its own node to another
/// executor).
///
/// Without `membarrier` the light side is a full fence, which costs what
/// the lock does: callers bind only where
/// [`uses_membarrier`](crate::uses_membarrier) is true.
///
/// ```
/// use myelin_sync::SoloLock;
/// use myelin_sync::atomic::AtomicUsize;
///
/// let calls = SoloLock::new(0u32);
/// let slot = AtomicUsize::new(0); // the runner's, shared by its locks
/// assert_eq!(calls.try_with(|n| { *n += 1; *n }), Some(1), "the lock path");
/// assert!(calls.bind(8));
/// assert_eq!(calls.try_with(|n| *n), None, "bound: only the runner enters");
/// // SAFETY: this thread is token 8's only runner; `slot` is token 8's.
/// assert_eq!(unsafe { calls.run(Some((8, &slot)), |n| { *n += 1; *n }) }, Some(2));
/// calls.unbind(|_token| slot.load(std::sync::atomic::Ordering::Acquire));
/// assert_eq!(calls.try_with(|n| *n), Some(2), "the lock path again");
/// ```
pub struct SoloLock<T> {
    /// Who may change the value: [`FREE`] (anyone who takes the lock),
    /// [`LOCKED`] (a run on the lock path), a runner's token (bound to
    /// it), or a token with [`HANDED`] set (unbound; the lock held for a
    /// run of that runner an unbind may have found inside, which lets go
    /// when it leaves). One word, so a move between these states is one
    /// compare-and-swap: the lock path's take (`FREE` to `LOCKED`) fails
    /// while bound.
    // SYNC: compare-and-swaps; the ones that end a hold (unlock, a taken
    // hand-over) Release, the ones that start one Acquire. A bound run
    // loads it (Acquire) after its light barrier; an unbind's move off a
    // token comes before its heavy one.
    state: AtomicUsize,
    barrier: Barrier,
    value: UnsafeCell<T>,
}

/// Nobody holds the value; unbound.
const FREE: usize = 0;
/// A run on the lock path holds the value; unbound.
const LOCKED: usize = 1;
/// Set in a token (whose low bit is clear): the lock is held for that
/// runner's run.
const HANDED: usize = 1;

// SAFETY: the value is changed by one thread at a time (the lock, or the
// bound runner while the lock path refuses), which needs `T: Send`, as a
// `Mutex<T>` does.
unsafe impl<T: Send> Send for SoloLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SoloLock<T> {}

impl<T> SoloLock<T> {
    /// An unlocked, unbound lock.
    pub fn new(value: T) -> Self {
        SoloLock {
            state: AtomicUsize::new(FREE),
            barrier: Barrier::new(),
            value: UnsafeCell::new(value),
        }
    }

    /// Move `from` to `to` (a compare-and-swap), `true` if it did.
    #[inline]
    fn shift(&self, from: usize, to: usize, ordering: Ordering) -> bool {
        self.state
            .compare_exchange(from, to, ordering, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    fn unlock(&self) {
        // SYNC: pairs with the Acquire compare-and-swap that takes it next.
        self.state.store(FREE, Ordering::Release);
    }

    /// Run `f` on the value under the lock: `None` (and no call) if the
    /// lock is held or the value is bound to a runner. A panic in `f`
    /// lets go of the lock and goes on unwinding.
    #[inline]
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        // SAFETY: no runner is given.
        unsafe { self.run(None, f) }
    }

    /// Bind the value to the runner `token`: from now on only
    /// [`run`](Self::run) with that token enters. `false`
    /// (nothing changed) if the lock is held (a run on the lock path, or
    /// a bound run an unbind handed the lock to, is inside), the value
    /// is bound already, or `membarrier` is not in use (see
    /// [`uses_membarrier`](crate::uses_membarrier): the light side would
    /// be a full fence, no cheaper than the lock).
    ///
    /// # Panics
    /// If `token` is 0 or odd (an address of something aligned is
    /// neither).
    pub fn bind(&self, token: usize) -> bool {
        assert!(
            token != 0 && token & HANDED == 0,
            "a runner's token is even and not 0"
        );
        // Bound runs pass the light side as a compiler fence, which pairs
        // only with `membarrier` (under loom and miri both sides are
        // read-modify-writes).
        #[cfg(not(any(loom, miri)))]
        if !crate::uses_membarrier() {
            return false;
        }
        // SYNC: AcqRel: after the last hold (its Release), before the
        // bound runs (their Acquire load).
        self.shift(FREE, token, Ordering::AcqRel)
    }

    /// Undo a [`bind`](Self::bind): the lock path enters again once a
    /// bound run inside now has left. Never waits (the run may be the
    /// caller's own, further up the stack). `running(token)` loads the
    /// old runner's slot (Acquire), which [`run`](Self::run)
    /// announces in.
    pub fn unbind(&self, running: impl FnOnce(usize) -> usize) {
        let mut now = self.state.load(Ordering::Relaxed);
        let old = loop {
            if now == FREE || now == LOCKED || now & HANDED != 0 {
                // Not bound.
                return;
            }
            // SYNC: SeqCst, before the heavy barrier below: a bound run
            // announcing after that barrier loads the new state (see
            // `run`); the run that takes the hand-over reads it.
            match self.state.compare_exchange(
                now,
                now | HANDED,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break now,
                Err(s) => now = s,
            }
        };
        self.barrier.heavy();
        // A run that announced itself before the barrier is, or was,
        // inside, and takes the hand-over as it leaves; one that
        // announces after it loads the hand-over and leaves.
        if running(old) != self.address() {
            // Nobody inside: ours to let go, unless a run took it first.
            // SYNC: Release, as an unlock.
            self.shift(old | HANDED, FREE, Ordering::AcqRel);
        }
    }

    /// [`unbind`](Self::unbind) when the bound runner is known to be
    /// idle: no barrier (and no `membarrier`: an executor's owner taking
    /// a node out of it, which a node moved each `spin_once` does every
    /// time). `false` if the value was not bound.
    ///
    /// # Safety
    /// No run of the bound runner is in progress, and its last one
    /// happened before this call (the runner's owner, between its runs,
    /// or a thread it handed the runner to since).
    ///
    /// ```
    /// let l = myelin_sync::SoloLock::new(0);
    /// if l.bind(2) {
    ///     // SAFETY: runner 2 (this thread) is between runs.
    ///     assert!(unsafe { l.unbind_idle() });
    /// }
    /// assert_eq!(l.try_with(|n| *n), Some(0));
    /// ```
    pub unsafe fn unbind_idle(&self) -> bool {
        let mut now = self.state.load(Ordering::Relaxed);
        loop {
            if now == FREE || now == LOCKED || now & HANDED != 0 {
                return false;
            }
            // SYNC: AcqRel: as an unlock, after the runner's last run (which
            // the caller's contract orders before us).
            match self
                .state
                .compare_exchange(now, FREE, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(s) => now = s,
            }
        }
    }

    /// Run `f` on the value as `runner` (its token and slot) if the value
    /// is bound to it, else on the lock path (as
    /// [`try_with`](Self::try_with)): `None` (and no call) if neither may
    /// enter. As the bound runner, no locked instruction: two plain
    /// stores to the slot, a few loads, and the light side of the barrier
    /// twice (compiler fences where `membarrier` works). A panic in `f`
    /// leaves as a return does and goes on unwinding. `f` is called from
    /// one place, so it inlines here.
    ///
    /// # Safety
    /// If `runner` is given and its token is one the value is ever bound
    /// to: calls with that token never overlap (one thread at a time,
    /// each call before the next: an executor with one worker), and its
    /// slot is that token's alone: written by nothing but these calls
    /// (with any of the token's locks), and what the unbinds' `running`
    /// loads for that token. (A token never bound is never announced: its
    /// calls take the lock path.)
    #[inline(always)]
    pub unsafe fn run<R>(
        &self,
        runner: Option<(usize, &AtomicUsize)>,
        f: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        let mut bound = None;
        if let Some((token, slot)) = runner
            && self.state.load(Ordering::Relaxed) == token
        {
            // SYNC: a plain store; the light barrier pairs it with an
            // unbind's heavy one (see `unbind`).
            slot.store(self.address(), Ordering::Relaxed);
            // Bound: `membarrier` is in use (`bind`).
            self.barrier.light_membarrier();
            let hold = Hold {
                lock: self,
                token,
                slot: Some(slot),
            };
            // SYNC: pairs with the bind's compare-and-swap (which follows
            // the last hold's Release).
            if self.state.load(Ordering::Acquire) == token {
                bound = Some(hold);
            }
            // Else unbound meanwhile: `hold` leaves (letting go of a lock
            // handed to this runner), and we try the lock like anyone.
        }
        let hold = match bound {
            Some(hold) => hold,
            None => {
                // SYNC: Acquire, pairing with the Release that ended the
                // last hold.
                if !self.shift(FREE, LOCKED, Ordering::Acquire) {
                    return None;
                }
                Hold {
                    lock: self,
                    token: 0,
                    slot: None,
                }
            }
        };
        // SAFETY: either `LOCKED` is ours (nobody else reads or writes the
        // value until `hold` drops: a bound runner's check fails, and a
        // bind needs `FREE`), or the value is bound to `runner`, whose
        // calls never overlap (the caller's contract): the lock path's
        // take fails while bound, and an unbind either saw our
        // announcement (and keeps the lock held for us until `hold`
        // leaves) or made us load its hand-over above.
        let r = self.value.with_mut(|p| f(unsafe { &mut *p }));
        drop(hold);
        Some(r)
    }

    /// This lock's address: what a bound run announces in its slot.
    #[inline(always)]
    fn address(&self) -> usize {
        self as *const Self as usize
    }
}

impl<T> std::fmt::Debug for SoloLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoloLock")
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish()
    }
}

/// A hold on the value, ended when dropped (also when unwinding): the
/// lock path's (`slot` `None`: let go of the lock), or a bound run's
/// (clear the announcement in `slot`, then let go of the lock if an
/// unbind handed it to this runner).
struct Hold<'a, T> {
    lock: &'a SoloLock<T>,
    token: usize,
    slot: Option<&'a AtomicUsize>,
}

impl<T> Drop for Hold<'_, T> {
    #[inline]
    fn drop(&mut self) {
        let Some(slot) = self.slot else {
            self.lock.unlock();
            return;
        };
        // SYNC: Release: what the run did happens before an unbind that
        // loads the cleared slot (and so before the lock path after it).
        slot.store(0, Ordering::Release);
        // Paired with the unbind's heavy barrier between its hand-over and
        // its look at the slot: it saw us inside, or we see the hand-over
        // (or both). Bound: `membarrier` is in use (`bind`).
        self.lock.barrier.light_membarrier();
        let handed = self.token | HANDED;
        if self.lock.state.load(Ordering::Relaxed) == handed {
            // SYNC: AcqRel: reads the unbind's hand-over; Release, as an
            // unlock. The unbind's own compare-and-swap from the same
            // state fails if this one won.
            self.lock.shift(handed, FREE, Ordering::AcqRel);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_bound_value_refuses_the_lock_path_until_unbound() {
        let l = SoloLock::new(vec![1]);
        let slot = AtomicUsize::new(0);
        assert!(l.bind(6));
        assert!(!l.bind(8), "bound already");
        assert!(l.try_with(|v| v.push(0)).is_none());
        // SAFETY: this thread is token 6's (and 8's) only runner, and
        // `slot` their slot.
        assert!(unsafe { l.run(Some((8, &slot)), |v| v.push(0)) }.is_none());
        // SAFETY: as above.
        unsafe { l.run(Some((6, &slot)), |v| v.push(2)) }.unwrap();
        assert_eq!(slot.load(Ordering::Relaxed), 0, "the run left its slot");
        l.unbind(|t| {
            assert_eq!(t, 6);
            slot.load(Ordering::Acquire)
        });
        assert_eq!(l.try_with(|v| v.clone()), Some(vec![1, 2]));
        // SAFETY: as above.
        unsafe { l.run(Some((6, &slot)), |v| v.push(3)) }.unwrap();
        assert_eq!(
            l.try_with(|v| v.clone()),
            Some(vec![1, 2, 3]),
            "the lock path"
        );
    }

    #[test]
    fn an_unbind_from_inside_the_bound_run_hands_the_lock_to_it() {
        let l = SoloLock::new(0);
        let slot = AtomicUsize::new(0);
        assert!(l.bind(2));
        // SAFETY: this thread is token 2's only runner and `slot` its slot.
        unsafe {
            l.run(Some((2, &slot)), |n| {
                *n += 1;
                // A callback moving its own node: no wait, no deadlock.
                l.unbind(|_| slot.load(Ordering::Acquire));
                assert!(l.try_with(|_| ()).is_none(), "the run is still inside");
                assert!(!l.bind(4), "nor can another runner bind meanwhile");
            })
        }
        .unwrap();
        assert_eq!(l.try_with(|n| *n), Some(1), "the run let go when it left");
        assert!(l.bind(4));
    }

    #[test]
    fn a_panic_inside_lets_go_of_the_lock_and_of_the_hand_over() {
        let l = SoloLock::new(0);
        let slot = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            l.try_with(|_| panic!("lock path"));
        }));
        assert!(r.is_err());
        assert_eq!(l.try_with(|n| *n), Some(0));
        assert!(l.bind(2));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: this thread is token 2's only runner and `slot` its slot.
            unsafe {
                l.run(Some((2, &slot)), |_| {
                    l.unbind(|_| slot.load(Ordering::Acquire));
                    panic!("bound run");
                })
            }
        }));
        assert!(r.is_err());
        assert_eq!(slot.load(Ordering::Relaxed), 0);
        assert_eq!(l.try_with(|n| *n), Some(0));
    }

    #[test]
    fn an_idle_runner_is_unbound_without_a_hand_over() {
        let l = SoloLock::new(0);
        // SAFETY: nothing is bound.
        assert!(!unsafe { l.unbind_idle() });
        assert!(l.bind(2));
        // SAFETY: runner 2 (this thread) is between runs.
        assert!(unsafe { l.unbind_idle() });
        assert_eq!(l.try_with(|n| *n), Some(0), "the lock path at once");
        assert!(l.bind(4));
    }

    #[test]
    fn the_lock_path_keeps_a_bind_out() {
        let l = SoloLock::new(0);
        l.try_with(|_| assert!(!l.bind(2), "a run on the lock path is inside"));
        assert!(l.bind(2));
    }

    #[test]
    #[should_panic(expected = "even and not 0")]
    fn an_odd_token_is_refused() {
        SoloLock::new(0).bind(3);
    }
}
