//! [`Home`]: the one thread that may touch a confined value without a
//! locked instruction, and moves of that right between threads that pay
//! for it with `membarrier` (a single-threaded executor's queue of its own
//! work, which the thread that spins it also fills when it publishes).

use crate::atomic::{AtomicPtr, AtomicUsize, Ordering};
use crate::barrier::Barrier;

/// The thread that may work on a value confined to one thread at a time
/// ("home"), and the move of that right to another thread.
///
/// A single-threaded executor keeps a plain queue (no atomics) for work
/// its own thread makes ready. That thread's publishes outside a spin (a
/// control loop that publishes, then calls `spin_some`) make work ready
/// too, and a lock-free ring costs them a locked instruction each; but
/// the executor may move to another thread between two spins, and the
/// thread that spun it before may still publish.
///
/// [`enter`](Self::enter) succeeds if the calling thread is home: it
/// announces itself in a word of its own, passes the light side of an
/// asymmetric barrier (a compiler fence where `membarrier` works) and
/// checks that it is still home, plain loads and stores. [`take`](Self::take)
/// makes the calling thread home: it names itself, passes the heavy side
/// (`membarrier`: every thread of the process passes a full barrier) and
/// waits while the old home is inside an `enter`. So an `enter` of the
/// old home either announced itself before that barrier (the take waits
/// for it to end, and then sees what it did) or checks after it (and
/// finds it is not home any more). What the thread does while it holds
/// an [`Entered`] and whatever the taker does after `take` are never at
/// once.
///
/// `take` must not run on two threads at once, nor while the value is
/// used outside an `enter` by the thread that took it last: the caller
/// orders them (an executor's spins take `&mut`). Without `membarrier`
/// (see [`uses_membarrier`](crate::uses_membarrier)) the light side
/// would be a full fence, no cheaper than the ring: `take` then makes no
/// thread home, and `enter` never succeeds.
///
/// ```
/// use myelin_sync::Home;
///
/// let home = Home::new();
/// assert!(home.enter().is_none(), "nobody is home yet");
/// if home.take() {
///     // This thread is home: its enters succeed, other threads' do not.
///     let inside = home.enter();
///     assert!(inside.is_some());
///     drop(inside); // a take on another thread would wait for this
///     let other = std::thread::scope(|s| s.spawn(|| home.enter().is_some()).join().unwrap());
///     assert!(!other);
/// }
/// ```
pub struct Home {
    /// The home thread's [`Word`], null for none.
    // SYNC: stored by `take` (ordered by its caller with other takes),
    // before its heavy barrier; loaded plainly by `enter`, again after
    // its light barrier.
    owner: AtomicPtr<Word>,
    barrier: Barrier,
}

/// A thread's announcement: the address of the [`Home`] whose `enter` it
/// is in, 0 outside. One per live thread, on a line of its own (a home
/// thread writes it twice per `enter`); given back when the thread ends
/// and handed to a later thread, never freed, so a `take` may read the
/// word of a thread that has ended (and finds it 0, or in use by the one
/// live thread that holds it now, which is the home thread then).
#[repr(align(64))]
struct Word {
    // SYNC: written by its thread only, with Release (the last store a
    // `take` reads must carry the `enter`s before it); read by `take`
    // with Acquire.
    entering: AtomicUsize,
}

/// [`WORD`]'s value for a thread whose word went back to the pool (its
/// thread-local destructors run): it is never home again. Never
/// dereferenced.
const GONE: *const Word = std::ptr::without_provenance(1);

#[cfg(not(loom))]
std::thread_local! {
    /// This thread's [`Word`]: null until its first `take`, [`GONE`]
    /// once given back.
    static WORD: std::cell::Cell<*const Word> = const { std::cell::Cell::new(std::ptr::null()) };
    /// Gives this thread's word back when the thread ends (touched once,
    /// when the word is claimed, which registers the destructor).
    static GIVE_BACK: GiveBack = const { GiveBack };
}

#[cfg(loom)]
loom::thread_local! {
    static WORD: std::cell::Cell<*const Word> = std::cell::Cell::new(std::ptr::null());
}

/// Words of ended threads, for the next threads (so threads that come and
/// go do not leave a word each behind).
#[cfg(not(loom))]
static POOL: std::sync::Mutex<Vec<&'static Word>> = std::sync::Mutex::new(Vec::new());

#[cfg(not(loom))]
struct GiveBack;

#[cfg(not(loom))]
impl Drop for GiveBack {
    fn drop(&mut self) {
        // `WORD` has no destructor: it is readable here, whatever order
        // the thread's destructors run in.
        let w = WORD.with(|c| c.replace(GONE));
        if !w.is_null() && w != GONE {
            // SAFETY: anything else is a word `claim_word` leaked.
            let word: &'static Word = unsafe { &*w };
            // Outside every `enter` (they restore the word before they
            // return, also when unwinding): the next thread starts at 0.
            debug_assert_eq!(word.entering.load(Ordering::Relaxed), 0);
            POOL.lock().unwrap_or_else(|e| e.into_inner()).push(word);
        }
    }
}

/// This thread's word, if it has one.
#[inline(always)]
fn this_word() -> Option<*const Word> {
    WORD.try_with(|c| c.get())
        .ok()
        .filter(|&w| !w.is_null() && w != GONE)
}

/// This thread's word, claimed if it has none yet; `None` while the
/// thread ends (its word went back).
#[cold]
fn claim_word() -> Option<*const Word> {
    let w = WORD.try_with(|c| c.get()).ok()?;
    if w == GONE {
        return None;
    }
    if !w.is_null() {
        return Some(w);
    }
    #[cfg(not(loom))]
    let word: &'static Word = {
        // Registers the destructor that gives the word back; refused
        // (`Err`) once the thread's destructors run.
        GIVE_BACK.try_with(|_| ()).ok()?;
        let reused = POOL.lock().unwrap_or_else(|e| e.into_inner()).pop();
        reused.unwrap_or_else(|| {
            Box::leak(Box::new(Word {
                entering: AtomicUsize::new(0),
            }))
        })
    };
    // Under loom every model run has new threads: a word each.
    #[cfg(loom)]
    let word: &'static Word = Box::leak(Box::new(Word {
        entering: AtomicUsize::new(0),
    }));
    let w = word as *const Word;
    WORD.try_with(|c| c.set(w)).ok()?;
    Some(w)
}

/// A successful [`Home::enter`]: while it lives, this thread is home and
/// no `take` returns. Dropping it puts the thread's announcement back
/// (also when unwinding).
#[must_use = "the thread is inside only while this lives"]
pub struct Entered<'a> {
    word: &'a Word,
    prev: usize,
}

impl Drop for Entered<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // SYNC: Release: a `take` that reads this store sees what the
        // thread did inside.
        self.word.entering.store(self.prev, Ordering::Release);
    }
}

impl std::fmt::Debug for Entered<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entered").finish_non_exhaustive()
    }
}

impl Default for Home {
    fn default() -> Self {
        Home::new()
    }
}

impl Home {
    /// Nobody is home.
    pub fn new() -> Home {
        Home {
            owner: AtomicPtr::new(std::ptr::null_mut()),
            barrier: Barrier::new(),
        }
    }

    /// Enter if this thread is home: while the returned [`Entered`]
    /// lives, no `take` returns. `None` otherwise. Plain loads and stores
    /// (and a compiler fence) when this thread is home; one load
    /// otherwise, two for threads that were home once.
    #[inline(always)]
    pub fn enter(&self) -> Option<Entered<'_>> {
        // SYNC: a hint; the load after the barrier decides.
        let owner = self.owner.load(Ordering::Relaxed);
        if owner.is_null() {
            return None;
        }
        let word = match this_word() {
            // SAFETY: this thread's word, which `claim_word` leaked
            // (never freed).
            Some(w) if std::ptr::eq(w, owner) => unsafe { &*w },
            _ => return None,
        };
        let me = self.addr();
        // SYNC: plain (Relaxed) read of our own word; nested enters put
        // the outer one back.
        let prev = word.entering.load(Ordering::Relaxed);
        // SYNC: the light side's store: a `take` whose barrier came after
        // it reads it (and waits for our `Leave`).
        word.entering.store(me, Ordering::Release);
        let entered = Entered { word, prev };
        // Home is only ever taken where `membarrier` is in use (`take`),
        // so the light side is a compiler fence.
        self.barrier.light_membarrier();
        // SYNC: the light side's load: after a `take`'s barrier it reads
        // the new owner.
        if !std::ptr::eq(self.owner.load(Ordering::Relaxed), owner) {
            return None;
        }
        Some(entered)
    }

    /// Make this thread home (returns `true`), after the old home left
    /// the `enter` it may be in; `false` when no thread can be home (no
    /// `membarrier` here, or this thread is ending): then nobody is, and
    /// nobody's `enter` runs once this returns. Free when this thread is
    /// home already; else one `membarrier` (and a wait for an old home
    /// inside an `enter`, which is a few stores long).
    ///
    /// The caller orders takes with each other and with its own uses of
    /// the value outside an `enter` (see [`Home`]).
    #[inline]
    pub fn take(&self) -> bool {
        // SYNC: as below: the last take's store, or ours.
        let owner = self.owner.load(Ordering::Relaxed);
        if !owner.is_null() && this_word().is_some_and(|w| std::ptr::eq(w, owner)) {
            return true;
        }
        self.take_away()
    }

    /// [`take`](Self::take) where this thread is not home.
    #[inline(never)]
    fn take_away(&self) -> bool {
        let mine = if cfg!(any(loom, miri)) || crate::uses_membarrier() {
            this_word().or_else(claim_word).unwrap_or(std::ptr::null())
        } else {
            std::ptr::null()
        };
        // SYNC: only takes store `owner`, and the caller orders them with
        // this one: this reads the last.
        let old = self.owner.load(Ordering::Relaxed);
        if std::ptr::eq(old, mine) {
            return !mine.is_null();
        }
        // SYNC: the heavy side's store.
        self.owner.store(mine.cast_mut(), Ordering::SeqCst);
        if !old.is_null() {
            self.barrier.heavy();
            // SAFETY: `old` is a word `claim_word` leaked (never freed).
            let word = unsafe { &*old };
            let me = self.addr();
            // SYNC: the heavy side's load; Acquire pairs with the
            // Release of the old home's last store to its word, after
            // every `enter` it made here.
            let mut backoff = crate::ring::Backoff::new();
            while word.entering.load(Ordering::Acquire) == me {
                backoff.snooze();
            }
        }
        !mine.is_null()
    }

    /// This `Home`'s address, as a thread's word announces it (compared,
    /// never dereferenced).
    #[inline(always)]
    fn addr(&self) -> usize {
        (self as *const Home).addr()
    }

    /// Whether this thread is home (it was the last to [`take`](Self::take)).
    pub fn is_home(&self) -> bool {
        this_word().is_some_and(|w| std::ptr::eq(w, self.owner.load(Ordering::Relaxed)))
    }
}

impl std::fmt::Debug for Home {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Home")
            .field("owned", &!self.owner.load(Ordering::Relaxed).is_null())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inside(home: &Home) -> bool {
        home.enter().is_some()
    }

    #[test]
    fn only_the_thread_that_took_it_last_enters() {
        let home = Home::new();
        assert!(!inside(&home), "nobody home");
        let taken = home.take();
        assert_eq!(taken, cfg!(miri) || crate::uses_membarrier());
        if !taken {
            assert!(!inside(&home), "nobody is ever home");
            return;
        }
        assert!(home.is_home());
        assert!(inside(&home));
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(!inside(&home), "not home");
                assert!(home.take());
                assert!(inside(&home));
            });
        });
        assert!(!home.is_home());
        assert!(!inside(&home), "the other thread took it");
        assert!(home.take());
        assert!(inside(&home));
    }

    #[test]
    fn enters_nest_and_a_panic_leaves() {
        let (a, b) = (Home::new(), Home::new());
        if !(a.take() && b.take()) {
            return;
        }
        {
            let _outer = a.enter().unwrap();
            let _inner = b.enter().unwrap();
            assert!(inside(&a), "the same home twice");
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _in = a.enter();
            panic!("inside");
        }));
        assert!(caught.is_err());
        // The word says "outside" again: other threads' takes of `a` and
        // `b` do not wait for ever.
        std::thread::scope(|s| {
            s.spawn(|| assert!(a.take() && b.take()));
        });
        assert!(!inside(&a) && !inside(&b));
    }

    #[test]
    fn an_ended_home_is_taken_without_waiting() {
        let home = Home::new();
        // A thread takes it and ends: its word goes back to the pool (a
        // later thread that is handed the word is home until a take moves
        // it; only one live thread holds a word).
        std::thread::scope(|s| {
            s.spawn(|| home.take());
        });
        assert!(!home.is_home());
        if home.take() {
            assert!(home.is_home());
            assert!(inside(&home));
        }
    }
}
