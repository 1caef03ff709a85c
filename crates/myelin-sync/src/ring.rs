//! [`Ring`]: a bounded lock-free ring, a keep_last subscription's buffer.

use std::mem::MaybeUninit;

use crate::atomic::{AtomicUsize, Ordering};

/// `std`'s `UnsafeCell`, or loom's (which checks every access for races)
/// under `cfg(loom)`, behind loom's closure-style API.
mod cell {
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

/// Wait a moment for another thread's step (loom must be told, or it
/// would explore the spin for ever).
#[inline]
fn spin() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
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
    // SYNC: SeqCst compare-and-swap; pops, and pushes checking the depth,
    // load it. SeqCst so that the executors' "queued" flag protocol can
    // rely on an emptiness check seeing every completed push (see
    // tests/loom.rs).
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
    /// A ring holding at most `depth` values (at least 1).
    pub fn new(depth: usize) -> Ring<T> {
        let depth = depth.max(1);
        // At least two slots: with one, "holds the value of position p"
        // (p + 1) and "free for position p + 1" would be the same stamp.
        let len = depth.next_power_of_two().max(2);
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
    /// values.
    #[inline]
    pub fn push(&self, value: T) -> Result<(), T> {
        let lap = self.mask + 1;
        let mut tail = self.tail.load(Ordering::SeqCst);
        loop {
            let slot = &self.slots[tail & self.mask];
            // SYNC: pairs with the Release store of the pop that freed it.
            let stamp = slot.stamp.load(Ordering::SeqCst);
            if stamp == tail {
                // Free for this position; full at the depth (which may be
                // less than the slot count).
                let head = self.head.load(Ordering::SeqCst);
                if tail.wrapping_sub(head) >= self.depth {
                    return Err(value);
                }
                match self.tail.compare_exchange(
                    tail,
                    tail.wrapping_add(1),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the CAS made this thread the only
                        // one to hold position `tail`; the stamp said the
                        // slot is free (its last value was read out), and
                        // no pop reads it before the stamp below.
                        slot.value.with_mut(|p| unsafe { (*p).write(value) });
                        // SYNC: pairs with the stamp load in `pop`.
                        slot.stamp.store(tail.wrapping_add(1), Ordering::Release);
                        return Ok(());
                    }
                    Err(t) => tail = t,
                }
            } else if stamp.wrapping_add(lap) == tail.wrapping_add(1) {
                // The slot still holds the value of one lap ago (the ring
                // holds as many values as it has slots): full, unless a pop
                // has claimed that value and is reading it out (wait for
                // it, rather than report a full ring that is not).
                if self.head.load(Ordering::SeqCst).wrapping_add(lap) == tail {
                    return Err(value);
                }
                spin();
                tail = self.tail.load(Ordering::SeqCst);
            } else {
                // Another producer took this position: look again.
                spin();
                tail = self.tail.load(Ordering::SeqCst);
            }
        }
    }

    /// Add `value` at the back, dropping the oldest values to make room
    /// (keep_last). Returns how many were dropped: 0 or 1, more only when
    /// other threads pushed into the room made at the same time (each drop
    /// still made room for a value that was pushed).
    #[inline]
    pub fn force_push(&self, mut value: T) -> usize {
        let mut dropped = 0;
        loop {
            match self.push(value) {
                Ok(()) => return dropped,
                Err(v) => {
                    value = v;
                    if self.pop().is_some() {
                        dropped += 1;
                    }
                }
            }
        }
    }

    /// Take the oldest value, or `None` if there is none.
    #[inline]
    pub fn pop(&self) -> Option<T> {
        let lap = self.mask + 1;
        let mut head = self.head.load(Ordering::SeqCst);
        loop {
            let slot = &self.slots[head & self.mask];
            // SYNC: pairs with the Release store in `push`.
            let stamp = slot.stamp.load(Ordering::SeqCst);
            if stamp == head.wrapping_add(1) {
                match self.head.compare_exchange(
                    head,
                    head.wrapping_add(1),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the CAS made this thread the only
                        // one to hold position `head`; the stamp said the
                        // push of that position finished writing.
                        let value = slot.value.with_mut(|p| unsafe { (*p).assume_init_read() });
                        // SYNC: pairs with the stamp load in `push`.
                        slot.stamp.store(head.wrapping_add(lap), Ordering::Release);
                        return Some(value);
                    }
                    Err(h) => head = h,
                }
            } else if stamp == head {
                // Not written yet: empty, unless a push has claimed the
                // position and is writing it (wait for it, a few
                // instructions, as a `Mutex` holder would be waited for).
                if self.tail.load(Ordering::SeqCst) == head {
                    return None;
                }
                spin();
                head = self.head.load(Ordering::SeqCst);
            } else {
                // Another consumer took this position: look again.
                spin();
                head = self.head.load(Ordering::SeqCst);
            }
        }
    }

    /// Whether it holds no value (a push being written counts as held).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tail.load(Ordering::SeqCst) == self.head.load(Ordering::SeqCst)
    }

    /// Values held (at a moment: others may push and pop meanwhile).
    pub fn len(&self) -> usize {
        loop {
            let tail = self.tail.load(Ordering::SeqCst);
            let head = self.head.load(Ordering::SeqCst);
            // A consistent pair: tail unchanged while head was read.
            if self.tail.load(Ordering::SeqCst) == tail {
                return tail.wrapping_sub(head).min(self.depth);
            }
        }
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

    /// Four producers overwrite, two consumers pop: every value is either
    /// popped once or counted as dropped once, each producer's values come
    /// out in its order, and the ring never holds more than its depth.
    #[test]
    fn producers_and_consumers_lose_nothing_uncounted() {
        const PER: usize = 20_000;
        let r = Arc::new(Ring::new(5));
        let dropped = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let (r, d, done) = (r.clone(), dropped.clone(), done.clone());
                std::thread::spawn(move || {
                    for i in 0..PER {
                        d.fetch_add(r.force_push((p, i)), Ordering::Relaxed);
                        assert!(r.len() <= 5);
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
                            None if done.load(Ordering::SeqCst) == 4 && r.is_empty() => {
                                return got;
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        let mut popped: Vec<Vec<(usize, usize)>> =
            consumers.into_iter().map(|c| c.join().unwrap()).collect();
        for got in &popped {
            for p in 0..4 {
                let mine: Vec<usize> = got.iter().filter(|v| v.0 == p).map(|v| v.1).collect();
                assert!(mine.windows(2).all(|w| w[0] < w[1]), "out of order");
            }
        }
        let total: usize = popped.iter().map(Vec::len).sum();
        assert_eq!(total + dropped.load(Ordering::Relaxed), 4 * PER);
        let mut all: Vec<_> = popped.drain(..).flatten().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), total, "a value came out twice");
    }
}
