//! [`LeaseSlab`]: reference counts that live in a fixed slab and are used
//! again and again, so that handing out a counted value allocates nothing.

use std::ptr::NonNull;

use crate::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use crate::ring::cell::UnsafeCell;

/// The start of every slot: the number of [`Lease`]s on it and what the
/// last one runs. A [`Lease`] points here without knowing the value's type.
#[repr(C)]
struct Header {
    refs: AtomicUsize,
    release: unsafe fn(NonNull<Header>),
}

/// One slot of a [`LeaseSlab`]. `repr(C)` with the header first: a pointer
/// to the header is a pointer to the slot.
#[repr(C)]
struct Slot<V> {
    header: Header,
    /// True while no lease is on the slot and no release is running in it:
    /// the slot may be claimed. Written false by the claimer, true by the
    /// last lease's release, after it took the value out.
    // SYNC: the Release store in `release` pairs with the Acquire load in
    // `claim`.
    free: AtomicBool,
    value: UnsafeCell<Option<V>>,
}

/// A fixed number of slots, each holding a value while [`Lease`]s on it
/// live; the last lease to go drops the value (which does whatever giving
/// the value back means, in its `Drop`) and frees the slot for the next
/// [`claim`](LeaseSlab::claim).
///
/// Against an `Arc<V>` per value: no allocation and no free, and one
/// locked instruction when the last lease goes (std's `Arc` has two, the
/// strong and the weak count). A shared-memory reader holds each chunk it
/// reads in place this way: the value gives the chunk back to its
/// publisher.
///
/// ```
/// use myelin_sync::LeaseSlab;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// struct GiveBack(Arc<AtomicUsize>);
/// impl Drop for GiveBack {
///     fn drop(&mut self) {
///         self.0.fetch_add(1, Ordering::SeqCst);
///     }
/// }
///
/// let given = Arc::new(AtomicUsize::new(0));
/// let slab = LeaseSlab::new(4);
/// // SAFETY: this thread is the only one claiming from `slab`.
/// let lease = unsafe { slab.claim(1, GiveBack(given.clone())) }.ok().unwrap();
/// let other = lease.clone();
/// // Slot 1 is taken: the value comes back.
/// assert!(unsafe { slab.claim(1, GiveBack(given.clone())) }.is_err());
/// drop(lease);
/// assert_eq!(given.load(Ordering::SeqCst), 1); // the refused value, dropped
/// drop(other); // the last lease: the value is dropped, the slot is free
/// assert_eq!(given.load(Ordering::SeqCst), 2);
/// assert!(unsafe { slab.claim(1, GiveBack(given.clone())) }.is_ok());
/// assert_eq!(given.load(Ordering::SeqCst), 3);
/// ```
pub struct LeaseSlab<V> {
    /// A boxed slice, held as a pointer: leases point into it while the
    /// slab moves, which a `Box` (a unique owner) would not allow.
    slots: NonNull<[Slot<V>]>,
}

// SAFETY: the slab hands values to whichever thread drops the last lease
// (`V: Send`); through `&LeaseSlab` no value is ever read, only moved in
// by `claim` and out by the release.
unsafe impl<V: Send> Send for LeaseSlab<V> {}
// SAFETY: as above.
unsafe impl<V: Send> Sync for LeaseSlab<V> {}

impl<V: Send> LeaseSlab<V> {
    /// `len` free slots.
    pub fn new(len: usize) -> LeaseSlab<V> {
        let slots: Box<[Slot<V>]> = (0..len)
            .map(|_| Slot {
                header: Header {
                    refs: AtomicUsize::new(0),
                    release: release::<V>,
                },
                free: AtomicBool::new(true),
                value: UnsafeCell::new(None),
            })
            .collect();
        LeaseSlab {
            slots: NonNull::from(Box::leak(slots)),
        }
    }

    /// The number of slots.
    pub fn len(&self) -> usize {
        self.slots().len()
    }

    /// Whether the slab has no slots (every claim is refused).
    pub fn is_empty(&self) -> bool {
        self.slots().is_empty()
    }

    /// Put `value` into slot `i` and return the first lease on it, or
    /// give `value` back when slot `i` is taken (or past the end).
    ///
    /// # Safety
    /// Calls to `claim` on one slab do not overlap (the caller holds a lock,
    /// or is the only thread that claims): two at once could both find a
    /// slot free.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub unsafe fn claim(&self, i: usize, value: V) -> Result<Lease, V> {
        let Some(slot) = self.slots().get(i) else {
            return Err(value);
        };
        // SYNC: Acquire pairs with the Release store in `release`: the
        // last holder's take of the old value happens before the write
        // below.
        if !slot.free.load(Ordering::Acquire) {
            return Err(value);
        }
        slot.free.store(false, Ordering::Relaxed);
        // SAFETY: the slot was free: no lease points at it and no release
        // runs in it (a release touches the slot only before its store of
        // `free`), and no other claim runs (the caller's contract), so this
        // thread is the only one with access to `value`.
        slot.value.with_mut(|v| unsafe { *v = Some(value) });
        // Relaxed: the lease reaches another thread only through something
        // that synchronises (a queue, a spawn), which carries these writes.
        slot.header.refs.store(1, Ordering::Relaxed);
        // From the whole slot (the release reads past the header).
        Ok(Lease(NonNull::from(slot).cast::<Header>()))
    }
}

impl<V> LeaseSlab<V> {
    fn slots(&self) -> &[Slot<V>] {
        // SAFETY: `slots` came from a leaked box, freed only by the slab's
        // drop.
        unsafe { self.slots.as_ref() }
    }
}

impl<V> Drop for LeaseSlab<V> {
    fn drop(&mut self) {
        // A slab dropped while a lease lives (one whose value does not
        // keep the slab alive) would leave that lease pointing at freed
        // memory: the slots are leaked instead.
        // SYNC: Acquire pairs with the release's Release store of `free`,
        // its last access to the slot.
        if self.slots().iter().any(|s| !s.free.load(Ordering::Acquire)) {
            return;
        }
        // SAFETY: the pointer came from `Box::leak` in `new` and is freed
        // only here; no lease points into the slots (all free).
        drop(unsafe { Box::from_raw(self.slots.as_ptr()) });
    }
}

impl<V> std::fmt::Debug for LeaseSlab<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let taken = (self.slots().iter())
            .filter(|s| !s.free.load(Ordering::Relaxed))
            .count();
        f.debug_struct("LeaseSlab")
            .field("len", &self.slots().len())
            .field("taken", &taken)
            .finish()
    }
}

/// The last lease of a slot is gone: take the value out, free the slot,
/// then drop the value (which may drop the slab itself: the slot is not
/// touched after `free` is stored). So the old value's drop may run after
/// the slot was claimed again.
///
/// # Safety
/// `h` is the header of a `Slot<V>` whose lease count just reached zero
/// (acquired: every holder's accesses happen before).
// SAFETY: hot text is executable code (see `myelin_sync::hot`).
#[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
unsafe fn release<V>(h: NonNull<Header>) {
    // SAFETY: `Slot<V>` is `repr(C)` with its header first, and this
    // function is only ever stored in the header of a `Slot<V>`; the slot
    // is alive (its value, inside, is not dropped yet, and the slab is not
    // dropped while a slot is taken: see `Drop for LeaseSlab`).
    let slot = unsafe { h.cast::<Slot<V>>().as_ref() };
    // SAFETY: no lease is left and `free` is still false, so no claim
    // touches the value: this thread alone has it.
    let value = slot.value.with_mut(|v| unsafe { (*v).take() });
    // SYNC: Release pairs with the Acquire load in `claim` (and in the
    // slab's drop): the take above happens before the next claim's write.
    slot.free.store(true, Ordering::Release);
    drop(value);
}

/// A counted hold on a value in a [`LeaseSlab`]: clones share it, and the
/// last one to drop drops the value and frees the slot. 8 bytes, `Send`
/// and `Sync` (the slab's values are `Send`; a lease gives no access to
/// its value).
pub struct Lease(NonNull<Header>);

// SAFETY: a lease only counts; the value it may drop is `Send` (the
// slab's bound), and the count is atomic.
unsafe impl Send for Lease {}
// SAFETY: as above; `&Lease` allows only a clone (an atomic increment).
unsafe impl Sync for Lease {}

impl Lease {
    fn header(&self) -> &Header {
        // SAFETY: the slot stays alive while a lease on it lives (its value
        // is dropped only by the last lease, and the slab leaks rather than
        // free a taken slot).
        unsafe { self.0.as_ref() }
    }
}

impl Clone for Lease {
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn clone(&self) -> Lease {
        // Relaxed, as `Arc::clone`: the clone comes from a live lease, so
        // the count cannot reach zero meanwhile.
        let old = self.header().refs.fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // As `Arc`: a count this high means leases were leaked in a
            // loop; wrapping would free a slot still in use.
            std::process::abort();
        }
        Lease(self.0)
    }
}

impl Drop for Lease {
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn drop(&mut self) {
        // SYNC: Release, then an Acquire fence for the last one (as
        // `Arc::drop`): every holder's use happens before the release.
        if self.header().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let release = self.header().release;
        // SAFETY: the count just reached zero, acquired above; `release`
        // is the function the slab stored for this slot's value type.
        unsafe { release(self.0) }
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("refs", &self.header().refs.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize as StdCount;

    struct Count(Arc<StdCount>);
    impl Drop for Count {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_slot_is_free_again_only_after_its_last_lease() {
        let dropped = Arc::new(StdCount::new(0));
        let slab = LeaseSlab::new(2);
        // SAFETY: one claimer (this thread).
        let a = unsafe { slab.claim(0, Count(dropped.clone())) }
            .ok()
            .unwrap();
        let copies: Vec<Lease> = (0..5).map(|_| a.clone()).collect();
        drop(a);
        // SAFETY: as above.
        let refused = unsafe { slab.claim(0, Count(dropped.clone())) };
        assert!(refused.is_err());
        drop(refused);
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "only the refused value");
        // Past the end: refused, not a panic.
        // SAFETY: as above.
        assert!(unsafe { slab.claim(2, Count(dropped.clone())) }.is_err());
        assert_eq!(dropped.load(Ordering::SeqCst), 2);
        drop(copies);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            3,
            "the value, by the last lease"
        );
        // SAFETY: as above.
        let b = unsafe { slab.claim(0, Count(dropped.clone())) };
        assert!(b.is_ok());
        drop(b);
        assert_eq!(dropped.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn leases_dropped_on_other_threads_release_each_value_once() {
        let dropped = Arc::new(StdCount::new(0));
        let slab = Arc::new(LeaseSlab::new(4));
        // Fewer under miri, which runs each thread step by step.
        let rounds = if cfg!(miri) { 40 } else { 2000 };
        for round in 0..rounds {
            // SAFETY: one claimer (this thread).
            let lease = unsafe { slab.claim(round % 4, Count(dropped.clone())) };
            // Every lease of the last round is gone (its threads joined).
            let lease = lease.ok().expect("the slot was released");
            let copies: Vec<Lease> = (0..3).map(|_| lease.clone()).collect();
            let threads: Vec<_> = copies
                .into_iter()
                .map(|c| std::thread::spawn(move || drop(c)))
                .collect();
            drop(lease);
            for t in threads {
                t.join().unwrap();
            }
        }
        // Every value was dropped exactly once.
        assert_eq!(dropped.load(Ordering::SeqCst), rounds);
    }

    #[test]
    fn a_slab_dropped_under_a_live_lease_leaks_rather_than_dangles() {
        let dropped = Arc::new(StdCount::new(0));
        let slab = LeaseSlab::new(1);
        // SAFETY: one claimer (this thread).
        let lease = unsafe { slab.claim(0, Count(dropped.clone())) }
            .ok()
            .unwrap();
        drop(slab);
        let copy = lease.clone();
        drop(lease);
        drop(copy);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }
}
