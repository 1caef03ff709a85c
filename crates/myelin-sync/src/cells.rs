//! Two small cells for the per-message path, each replacing a heavier
//! general-purpose tool where the access pattern allows it.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use crate::atomic::{AtomicBool, AtomicPtr, Ordering};

/// A pointer to an `Arc<T>` that is read on every message and written
/// rarely (when a node moves to another executor).
///
/// A read is one `SeqCst` load (a plain load on x86-64): no reference
/// count, no hazard slot. That is
/// sound because the cell *retains* every value it ever held until the cell
/// itself is dropped, so a reference obtained from [`get`](Self::get) (whose
/// lifetime is tied to `&self`) can never dangle. The price is that old
/// values are freed late: use it only where writes are rare and bounded
/// (each distinct value is retained once).
pub struct RetainCell<T> {
    /// Points into one of `retained`, or is null.
    // SYNC: the SeqCst store in `set` pairs with the SeqCst load in `get`
    // (`is` and `get_arc` load with Acquire: pointer identity only).
    current: AtomicPtr<T>,
    /// Every value ever stored; never shrinks while the cell lives. Behind
    /// a pointer: only `set` and `get_arc` (rare) touch it, and the cell
    /// sits among its owner's per-message fields (a subscription's first
    /// cache lines), where 32 bytes of lock and vector would push a field
    /// the hot path reads into another line.
    retained: Box<Mutex<Vec<Arc<T>>>>,
}

impl<T> RetainCell<T> {
    /// An empty cell.
    pub fn new() -> Self {
        RetainCell {
            current: AtomicPtr::new(std::ptr::null_mut()),
            retained: Box::new(Mutex::new(Vec::new())),
        }
    }

    /// The current value, if any.
    #[inline]
    pub fn get(&self) -> Option<&T> {
        // SYNC: pairs with the store in `set`, so the pointee's
        // initialisation (done before it was wrapped in the Arc) is
        // visible. SeqCst (a plain load on x86-64): a caller may order it
        // against its own SeqCst write before it, as a publisher does
        // (its push, then its subscription's executor) against an attach
        // (the new executor, then the buffer's SeqCst emptiness check).
        let p = self.current.load(Ordering::SeqCst);
        // SAFETY: `p` is null or `Arc::as_ptr` of an Arc in `self.retained`
        // (established in `set`, which pushes the Arc before publishing the
        // pointer). `retained` only grows and is dropped with `self`, so the
        // pointee outlives the returned `&T`, whose lifetime is `&self`'s.
        // `T` is only ever accessed through shared references.
        unsafe { p.as_ref() }
    }

    /// The current value as an `Arc` (a clone), for rare paths.
    pub fn get_arc(&self) -> Option<Arc<T>> {
        let p = self.current.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        let retained = self.retained.lock().unwrap_or_else(|e| e.into_inner());
        retained
            .iter()
            .find(|a| std::ptr::eq(Arc::as_ptr(a), p))
            .cloned()
    }

    /// Whether the current value is `other` (pointer identity).
    #[inline]
    pub fn is(&self, other: &T) -> bool {
        std::ptr::eq(self.current.load(Ordering::Acquire), other)
    }

    /// Replace the value. The previous one stays alive until the cell drops.
    pub fn set(&self, value: Option<Arc<T>>) {
        let mut retained = self.retained.lock().unwrap_or_else(|e| e.into_inner());
        let p = match value {
            None => std::ptr::null_mut(),
            Some(a) => {
                let p = Arc::as_ptr(&a) as *mut T;
                if !retained.iter().any(|r| Arc::ptr_eq(r, &a)) {
                    retained.push(a);
                }
                p
            }
        };
        // SYNC: pairs with the loads in `get`/`is`/`get_arc`; SeqCst for
        // the callers of `get` that need a single order (see there).
        self.current.store(p, Ordering::SeqCst);
    }
}

impl<T> Default for RetainCell<T> {
    fn default() -> Self {
        RetainCell::new()
    }
}

// SAFETY: the cell hands out `&T` to any thread and moves `Arc<T>`s between
// threads, exactly what `Arc<T>: Send + Sync` requires of `T`.
unsafe impl<T: Send + Sync> Send for RetainCell<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for RetainCell<T> {}

impl<T> std::fmt::Debug for RetainCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetainCell")
            .field("set", &!self.current.load(Ordering::Relaxed).is_null())
            .finish()
    }
}

/// A lock that is only ever *tried*: exclusive access to a `T` (a callback)
/// for whoever wins, `None` for everyone else, never blocking. Unlocking is a
/// plain `Release` store (a `Mutex` unlock is a read-modify-write), which
/// matters on the per-message path.
///
/// Locking is a compare-and-swap, not a swap: a try that finds the lock
/// held writes nothing (in the memory model a failed CAS is a load), so
/// the holder's unlock is never ordered against a loser's write. The
/// lock's users make their hand-over with SeqCst fences on both sides
/// (`SubInner::run_inline` in myelin-core; loom model
/// `inline_hand_over_leaves_no_message_behind`), which need only that
/// the loser *read* the lock. loom also checks a CAS faithfully where it
/// lets a plain store fall inside another thread's swap (loom issues
/// #254, #389). On x86 both are one locked instruction.
pub struct TryLock<T> {
    // SYNC: the Acquire CAS in `try_lock` pairs with the Release store in
    // the guard's drop.
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands `&mut T` to one thread at a time, which needs
// `T: Send` (like `Mutex<T>`).
unsafe impl<T: Send> Send for TryLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for TryLock<T> {}

impl<T> TryLock<T> {
    /// A new unlocked lock.
    pub fn new(value: T) -> Self {
        TryLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Exclusive access, or `None` if someone holds it.
    #[inline]
    pub fn try_lock(&self) -> Option<TryLockGuard<'_, T>> {
        // SYNC: pairs with the Release store in `TryLockGuard::drop`.
        match self
            .locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Some(TryLockGuard { lock: self }),
            Err(_) => None,
        }
    }
}

impl<T> std::fmt::Debug for TryLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TryLock")
            .field("locked", &self.locked.load(Ordering::Relaxed))
            .finish()
    }
}

/// Exclusive access to a [`TryLock`]'s value; unlocks on drop (also when
/// unwinding).
pub struct TryLockGuard<'a, T> {
    lock: &'a TryLock<T>,
}

impl<T> Deref for TryLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while `locked` is true and was set
        // by this guard's `try_lock` swap; no other guard can exist.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for TryLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes the access unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for TryLockGuard<'_, T> {
    fn drop(&mut self) {
        // SYNC: pairs with the Acquire CAS in `try_lock`.
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn retain_cell_keeps_old_values_alive() {
        let c = RetainCell::new();
        assert!(c.get().is_none());
        let a = Arc::new(1);
        c.set(Some(a.clone()));
        let r: &i32 = c.get().unwrap();
        c.set(Some(Arc::new(2)));
        drop(a);
        assert_eq!(*r, 1, "the old value is still alive");
        assert_eq!(*c.get().unwrap(), 2);
        assert_eq!(*c.get_arc().unwrap(), 2);
        c.set(None);
        assert!(c.get().is_none());
    }

    #[test]
    fn try_lock_is_exclusive_and_released_on_drop() {
        let l = TryLock::new(5);
        let mut g = l.try_lock().unwrap();
        assert!(l.try_lock().is_none());
        *g += 1;
        drop(g);
        assert_eq!(*l.try_lock().unwrap(), 6);
    }

    #[test]
    fn try_lock_releases_when_unwinding() {
        let l = TryLock::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = l.try_lock().unwrap();
            panic!("boom");
        }));
        assert!(r.is_err());
        assert!(l.try_lock().is_some());
    }
}
