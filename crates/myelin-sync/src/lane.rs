//! [`LaneCell`]: a value read on every message and replaced rarely, whose
//! readers pass through one fast lane.

use std::sync::Arc;

use crate::atomic::{AtomicBool, AtomicPtr, Ordering};

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use std::sync::Mutex;

/// Lock a mutex whose holder may have panicked: the data (a value and a
/// list of retired values) has no invariant a panic could break.
fn locked<T>(m: &Mutex<T>) -> impl std::ops::DerefMut<Target = T> + '_ {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A shared `Arc<T>` that one reader at a time reads without touching a
/// reference count: a publisher's list of matched subscriptions, read by
/// every `publish` and replaced when the graph changes.
///
/// [`read`](Self::read) gives the current value. Whoever takes
/// the *lane* (one swap of a flag: the only locked instruction) reads the
/// value through a plain pointer; a reader that finds the lane taken (two
/// threads publishing at once, or a publish nested in a callback of
/// another) clones the `Arc` under a mutex instead. [`store`](Self::store)
/// replaces the value; the old one is dropped at once unless the lane is
/// taken, in which case it is *retired*: kept until the lane's holder
/// leaves (or the next `store` finds the lane free, or the cell drops).
///
/// `arc_swap::ArcSwap`, which this replaces on the per-message path, pays
/// two locked instructions per read (claiming a debt slot and paying it
/// back) and a thread-local lookup.
///
/// ```
/// use myelin_sync::LaneCell;
/// use std::sync::Arc;
///
/// let cell = LaneCell::new(Arc::new(vec![1, 2]));
/// assert_eq!(cell.with(|v| v.len()), 2);
/// cell.store(Arc::new(vec![1, 2, 3]));
/// assert_eq!(cell.with(|v| v.len()), 3);
/// // Nested reads find the lane taken and clone the Arc instead.
/// assert_eq!(cell.with(|outer| cell.with(|inner| outer.len() + inner.len())), 6);
/// ```
pub struct LaneCell<T> {
    /// `Arc::as_ptr` of `cold.current`.
    // SYNC: Release store in `store` (sequenced before the writer's AcqRel
    // read-modify-write of `busy`); Acquire load by the lane's holder,
    // after its AcqRel swap of `busy`.
    fast: AtomicPtr<T>,
    /// The lane is taken.
    // SYNC: every access but the holder's release is a read-modify-write
    // (AcqRel), so a writer and a reader that meet here are ordered: see
    // `store`.
    busy: AtomicBool,
    /// `cold.retired` may hold values.
    // SYNC: set after pushing under the retired lock; a reader that sees
    // it takes that lock.
    has_retired: AtomicBool,
    /// Behind a pointer: the fields above are what `with` touches.
    cold: Box<Cold<T>>,
}

struct Cold<T> {
    /// Owns the current value; `store` replaces it under this lock, and a
    /// reader outside the lane clones it.
    current: Mutex<Arc<T>>,
    /// Values replaced while the lane was taken.
    retired: Mutex<Vec<Arc<T>>>,
}

impl<T> LaneCell<T> {
    /// A cell holding `value`.
    pub fn new(value: Arc<T>) -> Self {
        LaneCell {
            fast: AtomicPtr::new(Arc::as_ptr(&value) as *mut T),
            busy: AtomicBool::new(false),
            has_retired: AtomicBool::new(false),
            cold: Box::new(Cold {
                current: Mutex::new(value),
                retired: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Run `f` on the current value (see [`read`](Self::read)).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.read())
    }

    /// The current value, held until the guard drops: through the lane if
    /// it is free, else as a clone of the `Arc`.
    #[inline]
    pub fn read(&self) -> LaneGuard<'_, T> {
        // SYNC: pairs with the AcqRel read-modify-write of `busy` in `store`.
        if self.busy.swap(true, Ordering::AcqRel) {
            return self.read_clone();
        }
        // SYNC: pairs with the Release store in `store`.
        let p = self.fast.load(Ordering::Acquire);
        LaneGuard {
            cell: self,
            value: p,
            owned: None,
        }
    }

    /// `read` for a reader that found the lane taken.
    #[cold]
    #[inline(never)]
    fn read_clone(&self) -> LaneGuard<'_, T> {
        let owned = self.load_full();
        LaneGuard {
            cell: self,
            value: Arc::as_ptr(&owned),
            owned: Some(owned),
        }
    }

    /// The current value as an `Arc` (a clone, under a lock): for rare
    /// paths.
    pub fn load_full(&self) -> Arc<T> {
        locked(&self.cold.current).clone()
    }

    /// Replace the value. The old one is dropped now if no reader holds
    /// the lane, else when the lane's holder leaves.
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

    /// Put `value` in; the old one, which a lane reader may still hold.
    fn replace(&self, value: Arc<T>) -> Arc<T> {
        let mut current = locked(&self.cold.current);
        // SYNC: pairs with the lane holder's Acquire load in `read`; made
        // visible to it through the read-modify-write of `busy` in
        // `release`. Under the lock: `fast` always matches `current`.
        self.fast
            .store(Arc::as_ptr(&value) as *mut T, Ordering::Release);
        std::mem::replace(&mut *current, value)
    }

    /// Let go of the cell's reference to `old`, which it no longer holds.
    fn release(&self, old: Arc<T>) {
        // A read-modify-write that leaves `busy` as it is: it reads the
        // latest value in `busy`'s order, and a reader's later swap reads
        // ours (or a value after it), which orders our store of `fast`
        // before its load. `true`: a reader holds the lane and may hold
        // `old`.
        if self.busy.fetch_or(false, Ordering::AcqRel) {
            locked(&self.cold.retired).push(old);
            // SYNC: read by the lane's holder as it leaves.
            self.has_retired.store(true, Ordering::Release);
        } else {
            drop(old);
            // Values retired before: the lane was free at our read, so
            // whoever held it then is done with them, and a later holder
            // reads the newest value.
            if self.has_retired.load(Ordering::Acquire) {
                self.drop_retired();
            }
        }
    }

    /// Drop the retired values (by the lane's holder, or a `store` that
    /// found the lane free).
    fn drop_retired(&self) {
        let retired = {
            let mut r = locked(&self.cold.retired);
            self.has_retired.store(false, Ordering::Relaxed);
            std::mem::take(&mut *r)
        };
        // Outside the lock: dropping a value may run arbitrary drops.
        drop(retired);
    }
}

/// A value read from a [`LaneCell`]: the lane, held (released on drop,
/// also when unwinding), or a clone of the `Arc`.
pub struct LaneGuard<'a, T> {
    cell: &'a LaneCell<T>,
    /// The value: the lane's pointer, or `owned`'s.
    value: *const T,
    /// The clone of a reader outside the lane.
    owned: Option<Arc<T>>,
}

impl<T> std::ops::Deref for LaneGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: with `owned`, `value` points into it. Without, this
        // guard holds the lane (taken by the swap in `read`), and `value`
        // is `Arc::as_ptr` of a value the cell owns (as `cold.current`, or
        // retired) until the lane is released in `drop`. A `store` that
        // replaced the value after the lane was taken saw `busy` set (its
        // read-modify-write of `busy` comes after the swap in `busy`'s
        // order, so it reads `true`) and retired the value instead of
        // dropping it; retired values are dropped only by the lane's
        // holder as it leaves, or by a `store` that found the lane free
        // (every earlier holder's uses happen before its release, which
        // that `store` read). A `store` before the swap is one the swap
        // synchronised with (it read that store's value of `busy`, or a
        // later one in a chain of read-modify-writes and releases), so
        // `value` is not older than it. `T` is only reached through shared
        // references.
        unsafe { &*self.value }
    }
}

impl<T> Drop for LaneGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.owned.is_some() {
            return;
        }
        let cell = self.cell;
        // SYNC: pairs with the Release store in `store`.
        if cell.has_retired.load(Ordering::Acquire) {
            cell.drop_retired();
        }
        // SYNC: pairs with the writer's read-modify-write of `busy`: our
        // uses of the value happen before a `store` that reads `false`
        // from here drops it.
        cell.busy.store(false, Ordering::Release);
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
            .field("busy", &self.busy.load(Ordering::Relaxed))
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
    fn a_panic_inside_the_lane_leaves_it_free() {
        let cell = LaneCell::new(Arc::new(1));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cell.with(|_| panic!("in the lane"));
        }));
        assert!(r.is_err());
        assert!(!cell.busy.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(cell.with(|v| *v), 1);
    }
}
