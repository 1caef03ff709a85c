//! [`Ring`]: a bounded lock-free ring, a keep_last subscription's buffer.

use std::mem::MaybeUninit;

use crate::atomic::{AtomicUsize, Ordering};

/// `std`'s `UnsafeCell`, or loom's (which checks every access for races)
/// under `cfg(loom)`, behind loom's closure-style API.
pub(crate) mod cell {
    #[cfg(loom)]
    pub(crate) use loom::cell::UnsafeCell;

    #[cfg(not(loom))]
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(loom))]
    impl<T> UnsafeCell<T> {
        pub(crate) fn new(v: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(v))
        }
        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

/// Waiting for another thread's step (a push writing the slot it claimed,
/// a pop reading out the one it claimed, an old home leaving its
/// `enter`): spin a few times, doubling, then give the core away, so a
/// waiter never spins through the time slice of a preempted thread it
/// waits for. A yield gives the core only to threads of its own
/// scheduling class and priority or above: a `SCHED_FIFO` executor
/// waiting for a preempted `SCHED_OTHER` publisher on its core would
/// yield to nobody until the kernel's real-time throttling (if on) lent
/// the core out, up to a second later. So after a few yields the waiter
/// sleeps, which lets any thread run. Under loom every wait yields (loom
/// must be told, or it explores the spin for ever), so the count is
/// unused there.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct Backoff(u32);

impl Backoff {
    /// Spins before the first yield: 1 + 2 + ... + 32.
    #[cfg_attr(loom, allow(dead_code))]
    const SPIN_ROUNDS: u32 = 6;
    /// Yields before the first sleep.
    #[cfg_attr(loom, allow(dead_code))]
    const YIELD_ROUNDS: u32 = 16;
    /// The first sleep's length (the step waited for is a few
    /// instructions long once its thread runs); each next one is twice
    /// as long, up to [`MAX_SLEEP_US`](Self::MAX_SLEEP_US), so a long
    /// wait costs the waiter next to no CPU.
    #[cfg_attr(loom, allow(dead_code))]
    const SLEEP_US: u64 = 20;
    #[cfg_attr(loom, allow(dead_code))]
    const MAX_SLEEP_US: u64 = 1_000;

    pub(crate) fn new() -> Backoff {
        Backoff(0)
    }

    #[inline]
    pub(crate) fn snooze(&mut self) {
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(not(loom))]
        if self.0 < Self::SPIN_ROUNDS {
            for _ in 0..1u32 << self.0 {
                std::hint::spin_loop();
            }
            self.0 += 1;
        } else {
            self.rest();
        }
    }

    /// A wait past the spins: yield, then sleep (out of line: the waits
    /// that get here are rare, and the code would crowd the hot loops).
    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    fn rest(&mut self) {
        if self.0 < Self::SPIN_ROUNDS + Self::YIELD_ROUNDS {
            std::thread::yield_now();
        } else {
            let doublings = (self.0 - Self::SPIN_ROUNDS - Self::YIELD_ROUNDS).min(6);
            let us = (Self::SLEEP_US << doublings).min(Self::MAX_SLEEP_US);
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
        self.0 = self.0.saturating_add(1);
    }
}

/// How many values lie between `head` and a `tail` read before it:
/// `None` when that tail is stale (a later push and pop moved the head
/// past it; the head never passes the current tail).
#[inline]
fn held(tail: usize, head: usize) -> Option<usize> {
    let n = tail.wrapping_sub(head);
    ((n as isize) >= 0).then_some(n)
}

struct Slot<T> {
    /// The position this slot may next be written at (free), or that
    /// position plus one (holds the message written there).
    // SYNC: Release stores (after writing or reading `value`) pair with the
    // loads of the next side to use the slot. Those loads, and the index
    // loads, are SeqCst (a plain load on x86, `ldar` on ARM, as Acquire):
    // a spinning thread must see the other side's progress, and loom's
    // model lets weaker loads return a stale value for ever.
    stamp: AtomicUsize,
    value: cell::UnsafeCell<MaybeUninit<T>>,
}

/// A bounded lock-free ring: a keep_last subscription's buffer.
///
/// Many threads may push (publishers, transport threads) and pop (the
/// executor; a publisher overwriting the oldest message of a full ring), so
/// it is multi-producer multi-consumer, after Dmitry Vyukov's bounded queue:
/// every slot carries a *stamp*, the position it may next be written at
/// (free) or that position plus one (holding the message written there).
/// A push claims position `tail` with a compare-and-swap, writes the slot
/// and then publishes it by storing the stamp; a pop claims `head` the same
/// way and frees the slot for the position one lap later.
///
/// What differs from a general-purpose queue (`crossbeam`'s `ArrayQueue`,
/// which the subscription buffer used before) is the layout: `head`,
/// `tail` and the slot pointer share one cache line, so a delivery to a
/// subscription whose memory went cold (an executor that slept 10 ms
/// between camera frames) misses in one line of ring bookkeeping, not
/// three. The slot count is a power of two (a mask, not a division, finds
/// the slot) and the depth is enforced apart from it.
///
/// ```
/// use myelin_sync::Ring;
/// let r = Ring::new(2);
/// assert!(r.push(1).is_ok());
/// assert!(r.push(2).is_ok());
/// assert_eq!(r.push(3), Err(3), "full at its depth");
/// assert_eq!(r.force_push(3), 1, "the oldest, 1, made room");
/// assert_eq!((r.pop(), r.pop(), r.pop()), (Some(2), Some(3), None));
/// ```
///
/// At most `depth` values are held; the oldest is popped first.
pub struct Ring<T> {
    /// The position of the next pop (the oldest value).
    // SYNC: SeqCst compare-and-swap in `pop` (a `Release` store in
    // `pop_single`, whose one consumer races no other pop); pops, and
    // pushes checking the depth, load it. SeqCst so that the executors'
    // "queued" flag protocol can rely on an emptiness check seeing every
    // completed push (see tests/loom.rs).
    head: AtomicUsize,
    /// The position of the next push.
    // SYNC: as `head`.
    tail: AtomicUsize,
    /// `slots.len() - 1`; `slots.len()` is a power of two.
    mask: usize,
    /// Values held at most.
    depth: usize,
    slots: Box<[Slot<T>]>,
}

// SAFETY: values move between threads through the ring (`T: Send`); a slot
// is read or written only by the one thread that claimed its position, and
// the stamps order those accesses (see `push` and `pop`).
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above; `&Ring` hands out values, never references to them.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    /// A ring holding at most `depth` values (at least 1), with
    /// `depth.next_power_of_two()` slots (at least 2) allocated now.
    ///
    /// # Panics
    ///
    /// If `depth` is above `usize::MAX / 2 + 1` (no power of two holds
    /// it); callers bound it far lower (a QoS depth is at most 2^20).
    pub fn new(depth: usize) -> Ring<T> {
        let depth = depth.max(1);
        // At least two slots: with one, "holds the value of position p"
        // (p + 1) and "free for position p + 1" would be the same stamp.
        let len = depth
            .checked_next_power_of_two()
            .expect("a ring's depth fits a power of two")
            .max(2);
        let slots = (0..len)
            .map(|i| Slot {
                stamp: AtomicUsize::new(i),
                value: cell::UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Ring {
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            mask: len - 1,
            depth,
            slots,
        }
    }

    /// Values it holds at most.
    pub fn capacity(&self) -> usize {
        self.depth
    }

    /// Add `value` at the back, or give it back if the ring holds `depth`
    /// values. Always inlined: LLVM left the ready queue's push a call
    /// (23 instructions a message more in the icount gate's dispatch).
    #[inline(always)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn push(&self, value: T) -> Result<(), T> {
        // The position is claimed first, in a loop the value stays out of
        // (a value live across the loop's iterations took a stack slot
        // of its own: one copy more of a large one), then written once.
        let Some((slot, tail)) = self.claim_tail() else {
            return Err(value);
        };
        // SAFETY: winning the CAS in `claim_tail` made this thread the
        // only one to hold position `tail`; the stamp said the slot is
        // free (its last value was read out), and no pop reads it before
        // the stamp below.
        slot.value.with_mut(|p| unsafe { (*p).write(value) });
        // SYNC: pairs with the stamp load in `pop`.
        slot.stamp.store(tail.wrapping_add(1), Ordering::Release);
        Ok(())
    }

    /// Claim the next position at the back (the tail's CAS): its slot and
    /// the position, or `None` if the ring holds `depth` values.
    #[inline(always)]
    fn claim_tail(&self) -> Option<(&Slot<T>, usize)> {
        let lap = self.mask + 1;
        let mut backoff = Backoff::new();
        let mut tail = self.tail.load(Ordering::SeqCst);
        loop {
            let slot = &self.slots[tail & self.mask];
            // SYNC: pairs with the Release store of the pop that freed it.
            let stamp = slot.stamp.load(Ordering::SeqCst);
            if stamp == tail {
                // Free for this position; full at the depth (which may be
                // less than the slot count), judged against the head read
                // now: a tail that went stale meanwhile is read again.
                match held(tail, self.head.load(Ordering::SeqCst)) {
                    None => {
                        tail = self.tail.load(Ordering::SeqCst);
                        continue;
                    }
                    Some(n) if n >= self.depth => return None,
                    Some(_) => {}
                }
                match self.tail.compare_exchange(
                    tail,
                    tail.wrapping_add(1),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some((slot, tail)),
                    Err(t) => tail = t,
                }
            } else {
                // The slot still holds the value of one lap ago (the ring
                // holds as many values as it has slots): full, unless a pop
                // has claimed that value and is reading it out. Otherwise
                // another producer took this position. Either way, wait
                // and look again.
                if stamp.wrapping_add(lap) == tail.wrapping_add(1)
                    && self.head.load(Ordering::SeqCst).wrapping_add(lap) == tail
                {
                    return None;
                }
                backoff.snooze();
                tail = self.tail.load(Ordering::SeqCst);
            }
        }
    }

    /// Add `value` at the back, dropping the oldest values to make room
    /// (keep_last). Returns how many were dropped: 0 or 1, more only when
    /// other producers filled the room a drop made before this push took
    /// it. Every drop is of the oldest value of a full ring.
    #[inline(always)]
    pub fn force_push(&self, value: T) -> usize {
        // The position is claimed first, the loop that makes room out of
        // line and without the value (a loop around the push kept the
        // value in a stack slot of its own: a copy more per push), then
        // the value is written once, into its slot.
        self.force_claim().write(value)
    }

    /// Claim the next position for a value the caller then writes in
    /// place (see [`Claim`]), dropping the oldest values to make room, as
    /// [`force_push`](Self::force_push) does. A value built from parts
    /// (a buffer entry: the message, its expiry, its origin) is written
    /// straight into its slot, not assembled elsewhere and copied in.
    ///
    /// ```
    /// use myelin_sync::Ring;
    /// let r = Ring::new(1);
    /// r.push((1, 'a')).unwrap();
    /// let mut c = r.force_claim();
    /// // SAFETY: the claimed slot is this thread's; written whole.
    /// let dropped = unsafe {
    ///     c.as_mut_ptr().write((2, 'b'));
    ///     c.publish()
    /// };
    /// assert_eq!(dropped, 1);
    /// assert_eq!(r.pop(), Some((2, 'b')));
    /// ```
    #[inline(always)]
    pub fn force_claim(&self) -> Claim<'_, T> {
        let (slot, pos, dropped) = match self.claim_tail() {
            Some((slot, tail)) => (slot, tail, 0),
            None => self.claim_making_room(),
        };
        Claim { slot, pos, dropped }
    }

    /// [`force_claim`](Self::force_claim) in a full ring: drop the oldest
    /// value until a position is free; the slot, the position and how
    /// many were dropped.
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn claim_making_room(&self) -> (&Slot<T>, usize, usize) {
        let mut dropped = 0;
        loop {
            if self.take(true).is_some() {
                dropped += 1;
            }
            if let Some((slot, tail)) = self.claim_tail() {
                return (slot, tail, dropped);
            }
        }
    }

    /// Take the oldest value, or `None` if there is none.
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn pop(&self) -> Option<T> {
        self.take(false)
    }

    /// [`pop`](Self::pop) for a ring with one consumer: the head moves by
    /// a plain store instead of a compare-and-swap (about 5 ns less per
    /// pop on x86, where that CAS is a locked instruction). The store is
    /// `Release`, outside the `SeqCst` order: a push may judge the ring by
    /// a head older than this pop's for a moment, and find it full while
    /// it has just made room (a queue with an overflow takes that as it
    /// takes a full ring).
    ///
    /// # Safety
    /// No other thread pops (or [`force_push`](Self::force_push)es, which
    /// pops) this ring while any call of this method runs, ever: every pop
    /// of the ring is this method on one thread at a time. Producers may
    /// [`push`](Self::push) concurrently.
    ///
    /// ```
    /// use myelin_sync::Ring;
    /// let r = Ring::new(4);
    /// r.push(1).unwrap();
    /// // SAFETY: this thread is the ring's only consumer.
    /// assert_eq!(unsafe { r.pop_single() }, Some(1));
    /// assert_eq!(unsafe { r.pop_single() }, None);
    /// ```
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub unsafe fn pop_single(&self) -> Option<T> {
        let lap = self.mask + 1;
        let mut backoff = Backoff::new();
        // Only this thread writes the head: its own last store.
        let head = self.head.load(Ordering::Relaxed);
        let slot = &self.slots[head & self.mask];
        loop {
            // SYNC: pairs with the Release store in `push`.
            let stamp = slot.stamp.load(Ordering::SeqCst);
            if stamp == head.wrapping_add(1) {
                // SYNC: Release, and not a read-modify-write: no other
                // consumer races for the position (the caller's contract).
                // Producers read the head only to judge the depth; a
                // stale one makes the ring look fuller, never lets a push
                // reuse a slot before the stamp below frees it.
                self.head.store(head.wrapping_add(1), Ordering::Release);
                // SAFETY: the only consumer holds position `head` (the
                // caller's contract); the stamp said the push of that
                // position finished writing.
                let value = slot.value.with_mut(|p| unsafe { (*p).assume_init_read() });
                // SYNC: pairs with the stamp load in `push`.
                slot.stamp.store(head.wrapping_add(lap), Ordering::Release);
                return Some(value);
            }
            // Not written yet: empty, unless a push has claimed the
            // position and is writing it; then wait for its stamp.
            if self.tail.load(Ordering::SeqCst) == head {
                return None;
            }
            backoff.snooze();
        }
    }

    /// [`pop`](Self::pop) into `out`: `true` when the oldest value was
    /// moved there (`out` is then initialised; the caller owns the value),
    /// `false` when the ring is empty (`out` untouched).
    ///
    /// The value is copied once, from its slot straight to `out`: a large
    /// value returned in an `Option` through a few calls was copied at
    /// each of them (a 96-byte buffer entry five times on the executor's
    /// path to a callback).
    ///
    /// ```
    /// use std::mem::MaybeUninit;
    /// use myelin_sync::Ring;
    /// let r = Ring::new(4);
    /// r.push(7).unwrap();
    /// let mut out = MaybeUninit::uninit();
    /// assert!(r.pop_into(&mut out));
    /// // SAFETY: `pop_into` returned true: it wrote `out`.
    /// assert_eq!(unsafe { out.assume_init() }, 7);
    /// assert!(!r.pop_into(&mut out));
    /// ```
    #[inline(always)]
    pub fn pop_into(&self, out: &mut MaybeUninit<T>) -> bool {
        let Some((slot, head)) = self.claim_head(false) else {
            return false;
        };
        // SAFETY: winning the CAS in `claim_head` made this thread the
        // only one to hold position `head`; the stamp said the push of
        // that position finished writing. The value is moved (read once)
        // into `out`, and the stamp below gives the slot back.
        slot.value.with_mut(|p| unsafe {
            std::ptr::copy_nonoverlapping((*p).as_ptr(), out.as_mut_ptr(), 1)
        });
        // SYNC: pairs with the stamp load in `push`.
        slot.stamp
            .store(head.wrapping_add(self.mask + 1), Ordering::Release);
        true
    }

    /// Take the oldest value; with `only_if_full`, only while the ring
    /// holds `depth` values (a consumer may have made room since a push
    /// found it full, and the value then stays).
    #[inline]
    fn take(&self, only_if_full: bool) -> Option<T> {
        // As in `push`: the position claimed in a loop the value stays
        // out of, then read once.
        let (slot, head) = self.claim_head(only_if_full)?;
        // SAFETY: winning the CAS in `claim_head` made this thread the
        // only one to hold position `head`; the stamp said the push of
        // that position finished writing.
        let value = slot.value.with_mut(|p| unsafe { (*p).assume_init_read() });
        // SYNC: pairs with the stamp load in `push`.
        slot.stamp
            .store(head.wrapping_add(self.mask + 1), Ordering::Release);
        Some(value)
    }

    /// Claim the oldest position (the head's CAS): its slot and the
    /// position, or `None` if the ring is empty (or, with
    /// `only_if_full`, has room).
    #[inline(always)]
    fn claim_head(&self, only_if_full: bool) -> Option<(&Slot<T>, usize)> {
        let mut backoff = Backoff::new();
        let mut head = self.head.load(Ordering::SeqCst);
        loop {
            let slot = &self.slots[head & self.mask];
            // SYNC: pairs with the Release store in `push`.
            let stamp = slot.stamp.load(Ordering::SeqCst);
            if only_if_full
                && held(self.tail.load(Ordering::SeqCst), head).is_some_and(|n| n < self.depth)
            {
                // Room (judged at `head`: the tail only grows, so a CAS
                // from this head below happens while still full).
                return None;
            }
            if stamp == head.wrapping_add(1) {
                match self.head.compare_exchange(
                    head,
                    head.wrapping_add(1),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some((slot, head)),
                    Err(h) => head = h,
                }
            } else {
                // Not written yet: empty, unless a push has claimed the
                // position and is writing it. Otherwise another consumer
                // took this position. Either way, wait and look again.
                if stamp == head && self.tail.load(Ordering::SeqCst) == head {
                    return None;
                }
                backoff.snooze();
                head = self.head.load(Ordering::SeqCst);
            }
        }
    }

    /// Start bringing the slot the next push writes (and the next pop
    /// reads) into the caches (see [`prefetch`](crate::prefetch)): a
    /// publisher about to push into many rings whose memory went cold asks
    /// for all their slots before it writes the first. A hint: a push or
    /// pop meanwhile only makes it ask for the wrong line.
    #[inline]
    pub fn prefetch_next(&self) {
        #[cfg(not(loom))]
        {
            let slot = &self.slots[self.tail.load(Ordering::Relaxed) & self.mask];
            let first = (slot as *const Slot<T>).cast::<u8>();
            crate::prefetch(first);
            // A slot need not start on a line: its last byte's line too.
            crate::prefetch(first.wrapping_add(std::mem::size_of::<Slot<T>>() - 1));
        }
    }

    /// Whether it holds no value (a push being written counts as held).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tail.load(Ordering::SeqCst) == self.head.load(Ordering::SeqCst)
    }

    /// Values held (at a moment: others may push and pop meanwhile).
    pub fn len(&self) -> usize {
        // The head first: the tail read after it is at or past it.
        let head = self.head.load(Ordering::SeqCst);
        let tail = self.tail.load(Ordering::SeqCst);
        tail.wrapping_sub(head).min(self.depth)
    }
}

/// A position of a [`Ring`] claimed by [`Ring::force_claim`], whose value
/// the claimer writes in place, then [`publish`](Self::publish)es.
///
/// Readers of the ring wait for a claimed position to be published, so a
/// claim must be: dropping one unpublished (a panic while writing the
/// value) aborts the process rather than leave every reader waiting.
pub struct Claim<'a, T> {
    slot: &'a Slot<T>,
    pos: usize,
    dropped: usize,
}

impl<T> Claim<'_, T> {
    /// Write `value` whole and [`publish`](Self::publish) it
    /// ([`Ring::force_push`] is `force_claim().write(value)`).
    #[inline(always)]
    pub fn write(self, value: T) -> usize {
        // SAFETY: the claimed slot is this thread's until published; the
        // value is written once.
        self.slot.value.with_mut(|p| unsafe { (*p).write(value) });
        // SAFETY: just written whole.
        unsafe { self.publish() }
    }

    /// Where the value goes (uninitialised until written).
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.slot.value.with_mut(|p| p.cast::<T>())
    }

    /// Hand the written value to the ring's readers; returns how many
    /// values were dropped to make room for it.
    ///
    /// # Safety
    /// The value at [`as_mut_ptr`](Self::as_mut_ptr) is fully written.
    #[inline(always)]
    pub unsafe fn publish(self) -> usize {
        let this = std::mem::ManuallyDrop::new(self);
        // SYNC: pairs with the stamp load in `pop`.
        this.slot
            .stamp
            .store(this.pos.wrapping_add(1), Ordering::Release);
        this.dropped
    }
}

impl<T> Drop for Claim<'_, T> {
    fn drop(&mut self) {
        // Unpublished: the position stays claimed for ever and its
        // readers would wait on it (see the type's docs).
        std::process::abort();
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

impl<T> std::fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("len", &self.len())
            .field("depth", &self.depth)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn keeps_the_newest_depth_values_in_order() {
        for depth in [1, 3, 4, 10] {
            let r = Ring::new(depth);
            let mut dropped = 0;
            for i in 0..100 {
                dropped += r.force_push(i);
                assert_eq!(r.len(), (i + 1).min(depth));
            }
            assert_eq!(dropped, 100 - depth);
            let got: Vec<usize> = std::iter::from_fn(|| r.pop()).collect();
            assert_eq!(got, (100 - depth..100).collect::<Vec<_>>());
            assert!(r.is_empty());
        }
    }

    #[test]
    fn a_tail_read_before_the_head_passed_it_is_stale_not_full() {
        assert_eq!(held(6, 5), Some(1));
        assert_eq!(held(5, 5), Some(0));
        assert_eq!(held(5, 6), None, "a stale tail, not usize::MAX held");
        assert_eq!(held(1, usize::MAX), Some(2), "across the wrap");
    }

    #[test]
    fn values_left_in_the_ring_are_dropped_with_it() {
        let marker = Arc::new(());
        let r = Ring::new(3);
        for _ in 0..5 {
            r.force_push(marker.clone());
        }
        assert_eq!(Arc::strong_count(&marker), 4);
        drop(r);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn pop_into_and_force_push_move_each_value_once() {
        // Counted by an `Arc`'s strong count: a value copied out twice
        // would be dropped twice (the count falls below its holders), one
        // never moved out would stay counted.
        let marker = Arc::new(());
        let r = Ring::new(2);
        for _ in 0..5 {
            assert!(r.force_push(marker.clone()) <= 1);
        }
        // Two held, three overwritten and dropped.
        assert_eq!(Arc::strong_count(&marker), 3);
        let mut out = MaybeUninit::uninit();
        assert!(r.pop_into(&mut out));
        // SAFETY: `pop_into` returned true.
        let first = unsafe { out.assume_init() };
        assert_eq!(Arc::strong_count(&marker), 3, "moved, not copied");
        drop(first);
        assert_eq!(Arc::strong_count(&marker), 2);
        let mut out = MaybeUninit::uninit();
        assert!(r.pop_into(&mut out));
        // SAFETY: as above.
        drop(unsafe { out.assume_init() });
        let mut out = MaybeUninit::<Arc<()>>::uninit();
        assert!(!r.pop_into(&mut out), "empty");
        assert_eq!(Arc::strong_count(&marker), 1);
        // The ring dropped with nothing left in it drops nothing more.
        drop(r);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn force_claim_writes_in_place_and_makes_room_like_force_push() {
        let marker = Arc::new(());
        let r: Ring<(usize, Arc<()>)> = Ring::new(2);
        let mut dropped = 0;
        for i in 0..5usize {
            let mut c = r.force_claim();
            let p = c.as_mut_ptr();
            // SAFETY: the claimed slot is ours; written whole, published.
            dropped += unsafe {
                p.write((i, marker.clone()));
                c.publish()
            };
        }
        assert_eq!(dropped, 3, "the three oldest made room");
        assert_eq!(Arc::strong_count(&marker), 3);
        let got: Vec<usize> = std::iter::from_fn(|| r.pop().map(|(i, _)| i)).collect();
        assert_eq!(got, [3, 4]);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    /// `producers` threads each overwrite-push `per` values (`value(p, i)`,
    /// calling `check` after each push) while two consumers pop until the
    /// producers are done and the ring is empty. Returns what each consumer
    /// popped, in its order, and how many values were dropped.
    fn race<T: Send + 'static>(
        ring: Ring<T>,
        producers: usize,
        per: usize,
        value: fn(usize, usize) -> T,
        check: fn(&Ring<T>),
    ) -> (Vec<Vec<T>>, usize) {
        let r = Arc::new(ring);
        let dropped = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let pushers: Vec<_> = (0..producers)
            .map(|p| {
                let (r, d, done) = (r.clone(), dropped.clone(), done.clone());
                std::thread::spawn(move || {
                    for i in 0..per {
                        d.fetch_add(r.force_push(value(p, i)), Ordering::Relaxed);
                        check(&r);
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (r, done) = (r.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        match r.pop() {
                            Some(v) => got.push(v),
                            None if done.load(Ordering::SeqCst) == producers && r.is_empty() => {
                                return got;
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                })
            })
            .collect();
        for p in pushers {
            p.join().unwrap();
        }
        let popped = consumers.into_iter().map(|c| c.join().unwrap()).collect();
        (popped, dropped.load(Ordering::Relaxed))
    }

    /// A ring that is never full (more room than values ever pushed) never
    /// drops one, however producers and consumers race: a push must not
    /// take a stale view of the ring for a full one, nor `force_push` drop
    /// a value while a consumer makes room.
    #[test]
    fn a_ring_with_room_drops_nothing_under_races() {
        const PER: usize = 20_000;
        let (popped, dropped) = race(Ring::new(3 * PER + 1), 3, PER, |p, i| p * PER + i, |_| {});
        assert_eq!(dropped, 0, "dropped with room to spare");
        assert_eq!(popped.iter().map(Vec::len).sum::<usize>(), 3 * PER);
    }

    /// Four producers overwrite, two consumers pop: every value is either
    /// popped once or counted as dropped once, each producer's values come
    /// out in its order, and the ring never holds more than its depth.
    #[test]
    fn producers_and_consumers_lose_nothing_uncounted() {
        const PER: usize = 20_000;
        let (mut popped, dropped) = race(
            Ring::new(5),
            4,
            PER,
            |p, i| (p, i),
            |r| assert!(r.len() <= 5),
        );
        for got in &popped {
            for p in 0..4 {
                let mine: Vec<usize> = got.iter().filter(|v| v.0 == p).map(|v| v.1).collect();
                assert!(mine.windows(2).all(|w| w[0] < w[1]), "out of order");
            }
        }
        let total: usize = popped.iter().map(Vec::len).sum();
        assert_eq!(total + dropped, 4 * PER);
        let mut all: Vec<_> = popped.drain(..).flatten().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), total, "a value came out twice");
    }
}

#[cfg(all(test, not(loom)))]
mod prefetch_tests {
    use super::Ring;

    /// A prefetch is a hint: asked for at any position of the ring (empty,
    /// full, past a lap), it changes neither what is held nor its order.
    #[test]
    fn prefetching_the_next_slot_changes_nothing_held() {
        let ring = Ring::new(3);
        ring.prefetch_next();
        for v in 0..10u64 {
            ring.prefetch_next();
            if ring.push(v).is_err() {
                assert_eq!(ring.pop(), Some(v - 3));
                ring.prefetch_next();
                ring.push(v).unwrap();
            }
        }
        ring.prefetch_next();
        assert_eq!(ring.len(), 3);
        assert_eq!(
            std::iter::from_fn(|| ring.pop()).collect::<Vec<_>>(),
            [7, 8, 9]
        );
        ring.prefetch_next();
        assert!(ring.is_empty());
    }

    /// Any address may be prefetched: none faults.
    #[test]
    fn a_prefetch_of_any_address_never_faults() {
        let freed = Box::into_raw(Box::new([0u8; 256]));
        // SAFETY: `freed` came from `Box::into_raw` just above.
        drop(unsafe { Box::from_raw(freed) });
        for p in [
            std::ptr::null::<u8>(),
            std::ptr::dangling::<u8>(),
            freed.cast::<u8>(),
            usize::MAX as *const u8,
            (usize::MAX - 4095) as *const u8,
        ] {
            crate::prefetch(p);
        }
    }
}
