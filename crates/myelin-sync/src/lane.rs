//! [`LaneCell`]: a value read on every message and replaced rarely, whose
//! readers each pass through a lane of their own with no locked
//! instruction.

use std::sync::Arc;

use crate::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use crate::barrier::Barrier;

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::Mutex;

/// Lock a mutex whose holder may have panicked: the data (a value and a
/// list of retired values) has no invariant a panic could break.
fn locked<T>(m: &Mutex<T>) -> impl std::ops::DerefMut<Target = T> + '_ {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lanes besides the first (which lies in the cell itself): up to four
/// threads read a cell through lanes; more clone the `Arc`.
#[cfg(not(loom))]
const EXTRA_LANES: usize = 3;
/// Under loom, enough for the models' two readers (every lane is a load
/// per read and a load per writer's look: states to explore).
#[cfg(loom)]
const EXTRA_LANES: usize = 1;

/// A shared `Arc<T>` whose readers read without touching a reference
/// count or any other locked instruction: a publisher's list of matched
/// subscriptions, read by every `publish` and replaced when the graph
/// changes.
///
/// Each reading thread owns a *lane* of the cell (the first four threads
/// that read it; the first lane lies in the cell, next to the value's
/// pointer): a hazard slot in which it announces the pointer it reads,
/// with a plain store, before it checks that the pointer is still
/// current. [`store`](Self::store) replaces the value, then makes every
/// thread of the process pass a full memory barrier
/// (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, ~0.1-few µs, once per
/// replacement), then looks at the lanes: a reader either announced the
/// old pointer before that barrier (and the old value is *retired*: kept
/// until that reader leaves) or reads the new one after it. The reader's
/// side of the barrier is a compiler fence, so a read costs a few plain
/// loads and stores: the asymmetric fence of userspace RCU and folly's
/// hazard pointers. Where `membarrier` is unavailable (an old kernel, a
/// seccomp filter, or `MYELIN_MEMBARRIER=0` in the environment) both
/// sides use a full fence instead, one locked instruction per read.
///
/// A read nested in another of the same cell on the same thread (a
/// publish from an inline callback of that publisher), or from a fifth
/// thread, clones the `Arc` under a mutex instead.
///
/// `arc_swap::ArcSwap`, which this replaced on the per-message path, pays
/// two locked instructions per read (claiming a debt slot and paying it
/// back) and a thread-local lookup; the single lane this had before took
/// one (a swap).
///
/// ```
/// use myelin_sync::LaneCell;
/// use std::sync::Arc;
///
/// let cell = LaneCell::new(Arc::new(vec![1, 2]));
/// assert_eq!(cell.with(|v| v.len()), 2);
/// cell.store(Arc::new(vec![1, 2, 3]));
/// assert_eq!(cell.with(|v| v.len()), 3);
/// // Nested reads find this thread's lane taken and clone the Arc.
/// assert_eq!(cell.with(|outer| cell.with(|inner| outer.len() + inner.len())), 6);
/// ```
#[repr(C)]
pub struct LaneCell<T> {
    /// `Arc::as_ptr` of `cold.current`.
    // SYNC: Release store in `replace` (under `cold.current`); Acquire
    // loads by readers, before and after announcing it (see `enter`).
    fast: AtomicPtr<T>,
    /// The first lane's hazard slot: the pointer its thread reads now
    /// (null: none).
    // SYNC: written only by the lane's thread (Release); read by writers
    // and reclaimers (Acquire) after a heavy barrier (see `enter`).
    hazard: AtomicPtr<T>,
    /// The first lane's thread ([`thread_id`]; 0: no thread yet).
    // SYNC: claimed once with a compare-and-swap; Relaxed loads (a thread
    // compares it with its own id, which only it can have written).
    owner: AtomicU32,
    /// `cold.retired` may hold values.
    // SYNC: set under the retired lock before a heavy barrier; a reader
    // leaving its lane reads it after a light one (see `LaneGuard::drop`).
    has_retired: AtomicBool,
    /// Behind a pointer: the fields above are what a read touches.
    cold: Box<Cold<T>>,
}

struct Cold<T> {
    /// Owns the current value; `store` replaces it under this lock, and a
    /// reader outside the lanes clones it.
    current: Mutex<Arc<T>>,
    /// Values replaced while a lane announced them.
    retired: Mutex<Vec<Arc<T>>>,
    /// The other lanes.
    lanes: [Lane<T>; EXTRA_LANES],
    /// The readers' and writers' sides of the lanes' barrier.
    barrier: Barrier,
}

/// A lane of [`Cold::lanes`]: as the cell's `hazard` and `owner`.
struct Lane<T> {
    hazard: AtomicPtr<T>,
    owner: AtomicU32,
}

/// This thread's id for lanes: 1, 2, ... in the order threads first read
/// a cell, and the ids of threads that ended given to later ones (so a
/// program whose threads come and go keeps reading through lanes: a
/// cell's lanes belong to ids, and one live thread at most holds an id);
/// `u32::MAX` (outside the lanes) once the thread's id went back, and
/// for every thread beyond four billion live ones.
#[inline]
fn thread_id() -> u32 {
    let id = THREAD_ID.with(|c| c.get());
    if id != 0 { id } else { new_thread_id() }
}

#[cold]
fn new_thread_id() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let id = match reused_id() {
        Reused::Id(id) => id,
        Reused::Ending => u32::MAX,
        Reused::None => NEXT
            .fetch_update(
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
                |n| (n < u32::MAX).then_some(n + 1),
            )
            .unwrap_or(u32::MAX),
    };
    THREAD_ID.with(|c| c.set(id));
    id
}

/// What [`reused_id`] found.
#[cfg_attr(loom, allow(dead_code))]
enum Reused {
    /// An id an ended thread gave back.
    Id(u32),
    /// None to reuse: a new one.
    None,
    /// This thread's destructors run: it reads outside the lanes.
    Ending,
}

/// The id of a thread that ended, for this one; registers the
/// destructor that gives this thread's id back when it ends.
#[cfg(not(loom))]
fn reused_id() -> Reused {
    // Refused once the thread's destructors run.
    if GIVE_BACK.try_with(|_| ()).is_err() {
        return Reused::Ending;
    }
    match FREE_IDS.lock().unwrap_or_else(|e| e.into_inner()).pop() {
        Some(id) => Reused::Id(id),
        None => Reused::None,
    }
}

/// Under loom every model run has new threads, and ids are not reused.
#[cfg(loom)]
fn reused_id() -> Reused {
    Reused::None
}

/// Ids of threads that ended, for the next threads. Taking one from here
/// happens after its last holder's reads ended (the mutex orders them):
/// the lanes it owns hold no announced pointer.
#[cfg(not(loom))]
static FREE_IDS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Gives a thread's id back when the thread ends.
#[cfg(not(loom))]
struct GiveBack;

#[cfg(not(loom))]
impl Drop for GiveBack {
    fn drop(&mut self) {
        // `THREAD_ID` has no destructor: readable here, whatever order the
        // thread's destructors run in. A read after this (another
        // destructor's) goes outside the lanes.
        let id = THREAD_ID.with(|c| c.replace(u32::MAX));
        if id != 0 && id != u32::MAX {
            FREE_IDS.lock().unwrap_or_else(|e| e.into_inner()).push(id);
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    static THREAD_ID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Touched once, when the thread gets its id.
    static GIVE_BACK: GiveBack = const { GiveBack };
}
#[cfg(loom)]
loom::thread_local! {
    static THREAD_ID: std::cell::Cell<u32> = std::cell::Cell::new(0);
}

impl<T> LaneCell<T> {
    /// A cell holding `value`.
    pub fn new(value: Arc<T>) -> Self {
        LaneCell {
            fast: AtomicPtr::new(Arc::as_ptr(&value) as *mut T),
            hazard: AtomicPtr::new(std::ptr::null_mut()),
            owner: AtomicU32::new(0),
            has_retired: AtomicBool::new(false),
            cold: Box::new(Cold {
                current: Mutex::new(value),
                retired: Mutex::new(Vec::new()),
                lanes: std::array::from_fn(|_| Lane {
                    hazard: AtomicPtr::new(std::ptr::null_mut()),
                    owner: AtomicU32::new(0),
                }),
                barrier: Barrier::new(),
            }),
        }
    }

    /// Run `f` on the current value (see [`read`](Self::read)).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.read())
    }

    /// The current value, held until the guard drops: through this
    /// thread's lane if it has one and is not in it already, else as a
    /// clone of the `Arc`.
    #[inline]
    pub fn read(&self) -> LaneGuard<'_, T> {
        let id = thread_id();
        // SYNC: Relaxed: only this thread can have written its own id.
        if self.owner.load(Ordering::Relaxed) == id {
            return self.enter(&self.hazard);
        }
        self.read_other(id)
    }

    /// `read` by a thread that does not own the first lane: its lane
    /// among the others, else a free one claimed (once per thread and
    /// cell), else a clone.
    #[inline(never)]
    fn read_other(&self, id: u32) -> LaneGuard<'_, T> {
        for lane in &self.cold.lanes {
            // SYNC: Relaxed, as in `read`.
            if lane.owner.load(Ordering::Relaxed) == id {
                return self.enter(&lane.hazard);
            }
        }
        self.claim_lane(id)
    }

    /// A thread's first read of this cell: claim a free lane.
    #[cold]
    #[inline(never)]
    fn claim_lane(&self, id: u32) -> LaneGuard<'_, T> {
        if id != u32::MAX {
            let claim = |owner: &AtomicU32| {
                // SYNC: Relaxed: the lane's other fields are only this
                // thread's from here on; the compare-and-swap decides.
                owner.load(Ordering::Relaxed) == 0
                    && owner
                        .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
            };
            if claim(&self.owner) {
                return self.enter(&self.hazard);
            }
            for lane in &self.cold.lanes {
                if claim(&lane.owner) {
                    return self.enter(&lane.hazard);
                }
            }
        }
        self.read_clone()
    }

    /// Read through the lane whose hazard slot is `hazard` (this thread's).
    #[inline]
    fn enter<'a>(&'a self, hazard: &'a AtomicPtr<T>) -> LaneGuard<'a, T> {
        // SYNC: Relaxed: only this thread writes its lane.
        if !hazard.load(Ordering::Relaxed).is_null() {
            // A read of this cell on this thread is in the lane already.
            return self.read_clone();
        }
        // SYNC: Acquire pairs with the Release store in `replace`: the value
        // behind the pointer is initialised.
        let mut p = self.fast.load(Ordering::Acquire);
        loop {
            // Announce `p`, then check it is still current. With the
            // writer's heavy barrier between its store of `fast` and its
            // look at the lanes, one of the two sees the other: the
            // writer sees `p` announced (and retires it), or this load
            // sees the new pointer (and we announce that one instead).
            // SYNC: Release: a reclaimer that reads a later value of this
            // slot has our earlier uses of the value before it.
            hazard.store(p, Ordering::Release);
            self.cold.barrier.light();
            let now = self.fast.load(Ordering::Acquire);
            if now == p {
                break;
            }
            p = now;
        }
        LaneGuard {
            cell: self,
            value: p,
            hazard: Some(hazard),
            _owned: None,
        }
    }

    /// `read` for a reader outside the lanes.
    #[cold]
    #[inline(never)]
    fn read_clone(&self) -> LaneGuard<'_, T> {
        let owned = self.load_full();
        LaneGuard {
            cell: self,
            value: Arc::as_ptr(&owned),
            hazard: None,
            _owned: Some(owned),
        }
    }

    /// The current value as an `Arc` (a clone, under a lock): for rare
    /// paths.
    pub fn load_full(&self) -> Arc<T> {
        locked(&self.cold.current).clone()
    }

    /// Replace the value. The old one is dropped now if no lane announces
    /// it, else when the last that does is left.
    pub fn store(&self, value: Arc<T>) {
        let old = self.replace(value);
        self.release(old);
    }

    /// Replace the value and return the old one (the cell's own
    /// reference to it is released as in [`store`](Self::store)).
    pub fn swap(&self, value: Arc<T>) -> Arc<T> {
        let old = self.replace(value);
        let returned = old.clone();
        self.release(old);
        returned
    }

    /// Put `value` in; the old one, which a lane may still announce.
    fn replace(&self, value: Arc<T>) -> Arc<T> {
        let mut current = locked(&self.cold.current);
        // SYNC: pairs with readers' Acquire loads. Under the lock: `fast`
        // always matches `current`.
        self.fast
            .store(Arc::as_ptr(&value) as *mut T, Ordering::Release);
        std::mem::replace(&mut *current, value)
    }

    /// Whether a lane announces `p` now.
    fn announced(&self, p: *const T) -> bool {
        // SYNC: Acquire pairs with the lane's Release stores: a reader's
        // uses of a value come before we read its slot moving on.
        std::iter::once(&self.hazard)
            .chain(self.cold.lanes.iter().map(|l| &l.hazard))
            .any(|h| std::ptr::eq(h.load(Ordering::Acquire), p))
    }

    /// Let go of the cell's reference to `old`, which it no longer holds.
    fn release(&self, old: Arc<T>) {
        // Every reader now announces `old` already, or will read the new
        // pointer (see `enter`).
        self.cold.barrier.heavy();
        if !self.announced(Arc::as_ptr(&old)) {
            drop(old);
            if self.has_retired.load(Ordering::Acquire) {
                self.reclaim();
            }
            return;
        }
        {
            let mut retired = locked(&self.cold.retired);
            retired.push(old);
            self.has_retired.store(true, Ordering::Release);
        }
        // A reader leaving its lane after this barrier sees `has_retired`
        // (and reclaims); one that left before it is seen gone below.
        self.cold.barrier.heavy();
        self.reclaim();
    }

    /// Drop the retired values no lane announces (by a writer, or a
    /// reader leaving its lane). Each was retired after a heavy barrier,
    /// so a lane that announces it later is a reader that will find it
    /// replaced and never use it.
    fn reclaim(&self) {
        let gone: Vec<Arc<T>> = {
            let mut retired = locked(&self.cold.retired);
            let (kept, gone) = std::mem::take(&mut *retired)
                .into_iter()
                .partition(|v| self.announced(Arc::as_ptr(v)));
            *retired = kept;
            self.has_retired
                .store(!retired.is_empty(), Ordering::Release);
            gone
        };
        // Outside the lock: dropping a value may run arbitrary drops.
        drop(gone);
    }
}

/// A value read from a [`LaneCell`]: announced in this thread's lane
/// (which it leaves on drop, also when unwinding), or a clone of the
/// `Arc`.
pub struct LaneGuard<'a, T> {
    cell: &'a LaneCell<T>,
    /// The value: the announced pointer, or `owned`'s.
    value: *const T,
    /// The lane's hazard slot, for a read through a lane.
    hazard: Option<&'a AtomicPtr<T>>,
    /// The clone of a reader outside the lanes, kept until the guard
    /// drops.
    _owned: Option<Arc<T>>,
}

impl<T> std::ops::Deref for LaneGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: with `_owned`, `value` points into it. Without, `value` is
        // announced in this thread's lane and was current after the
        // announcement and a light barrier (`enter`): a `store` that
        // replaced it afterwards passed its heavy barrier after our
        // announcement and saw it (`announced`), so it retired the value
        // instead of dropping it; retired values are dropped only when no
        // lane announces them (`reclaim`), and ours does until the guard
        // drops. `T` is only reached through shared references. The guard
        // is `!Send` (a raw pointer): it is dropped on the lane's thread.
        unsafe { &*self.value }
    }
}

impl<T> Drop for LaneGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        let Some(hazard) = self.hazard else {
            return;
        };
        // SYNC: Release: our uses of the value come before a reclaimer
        // that reads the slot cleared.
        hazard.store(std::ptr::null_mut(), Ordering::Release);
        let cell = self.cell;
        // Paired with the writer's heavy barrier between its setting
        // `has_retired` and its look at the lanes: it sees us gone, or we
        // see the flag. (With full fences instead of `membarrier` there is
        // no such barrier here, to keep a read at one fence: a value
        // retired as we leave waits for this lane's next read, the next
        // `store`, or the cell's drop.)
        cell.cold.barrier.leave();
        // SYNC: pairs with the Release store under the retired lock.
        if cell.has_retired.load(Ordering::Acquire) {
            cell.reclaim();
        }
    }
}

// SAFETY: the cell hands out `&T` to any thread and moves `Arc<T>`s between
// threads, exactly what `Arc<T>: Send + Sync` requires of `T`.
unsafe impl<T: Send + Sync> Send for LaneCell<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for LaneCell<T> {}

impl<T: Default> Default for LaneCell<T> {
    fn default() -> Self {
        LaneCell::new(Arc::new(T::default()))
    }
}

impl<T> std::fmt::Debug for LaneCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneCell")
            .field("owner", &self.owner.load(Ordering::Relaxed))
            .field("has_retired", &self.has_retired.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_value_replaced_inside_the_lane_lives_until_the_lane_is_left() {
        let drops = Arc::new(AtomicUsize::new(0));
        let cell = LaneCell::new(Arc::new(Counted(drops.clone())));
        cell.with(|v| {
            cell.store(Arc::new(Counted(drops.clone())));
            // Replaced but retired: `v` is still the live old value.
            assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 0);
            assert!(Arc::strong_count(&v.0) >= 2);
        });
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 1);
        cell.store(Arc::new(Counted(drops.clone())));
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 2);
        drop(cell);
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn more_readers_than_lanes_hold_a_replaced_value_until_they_leave() {
        use std::sync::Barrier;
        let drops = Arc::new(AtomicUsize::new(0));
        let cell = Arc::new(LaneCell::new(Arc::new(Counted(drops.clone()))));
        let readers = 2 + EXTRA_LANES + 1; // two read outside the lanes
        let inside = Arc::new(Barrier::new(readers + 1));
        let leave = Arc::new(Barrier::new(readers + 1));
        let threads: Vec<_> = (0..readers)
            .map(|_| {
                let (cell, inside, leave) = (cell.clone(), inside.clone(), leave.clone());
                std::thread::spawn(move || {
                    cell.with(|v| {
                        inside.wait();
                        leave.wait();
                        // Replaced meanwhile, and still alive.
                        Arc::strong_count(&v.0)
                    })
                })
            })
            .collect();
        inside.wait();
        let lanes = std::iter::once(&cell.owner)
            .chain(cell.cold.lanes.iter().map(|l| &l.owner))
            .filter(|o| o.load(std::sync::atomic::Ordering::SeqCst) != 0)
            .count();
        assert_eq!(lanes, 1 + EXTRA_LANES, "every lane has a thread");
        cell.store(Arc::new(Counted(drops.clone())));
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 0);
        leave.wait();
        for t in threads {
            assert!(t.join().unwrap() >= 2);
        }
        // The last reader out dropped it.
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(cell.with(|v| Arc::strong_count(&v.0)), 2);
    }

    #[test]
    fn a_panic_inside_the_lane_leaves_it_free() {
        let cell = LaneCell::new(Arc::new(1));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cell.with(|_| panic!("in the lane"));
        }));
        assert!(r.is_err());
        assert!(
            cell.hazard
                .load(std::sync::atomic::Ordering::SeqCst)
                .is_null()
        );
        assert_eq!(cell.with(|v| *v), 1);
    }
}
