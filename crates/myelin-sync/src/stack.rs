//! A lock-free stack of small indices: a pool's free chunks.

use crate::atomic::{AtomicU32, AtomicU64, Ordering};

/// The index part of an empty stack's head.
const NIL: u32 = u32::MAX;

/// The indices `0..capacity`, each on the stack at most once, taken and
/// given back by any thread with one compare-and-swap each (a `Mutex<Vec>`
/// costs two locked instructions per operation, a lock and an unlock, and
/// makes a thread preempted inside it stall the others).
///
/// Last in, first out: the index given back last is taken first, so a
/// pool reuses the chunk that is still in the caches.
///
/// The head holds the top index and a tag that every change increments:
/// a `pop` that read the top, was overtaken by a pop and a push of that
/// same index, and then tries its compare-and-swap fails on the tag
/// instead of installing a stale next index (the ABA problem). The tag
/// has 32 bits: a pop would have to stall for four billion operations of
/// other threads for it to wrap onto the same value.
///
/// ```
/// use myelin_sync::IndexStack;
///
/// let free = IndexStack::full(3);
/// let a = free.pop().unwrap();
/// assert_eq!(a, 0);
/// free.push(a);
/// assert_eq!(free.pop(), Some(0)); // the one given back last
/// assert_eq!(free.pop(), Some(1));
/// assert_eq!(free.pop(), Some(2));
/// assert_eq!(free.pop(), None);
/// ```
pub struct IndexStack {
    // SYNC: a push writes `next[i]` (Relaxed) and then installs `i` with a
    // Release compare-and-swap; a pop loads the head with Acquire, so the
    // `next` it reads is the one the push wrote (or a later value, in
    // which case the head's tag has moved and its compare-and-swap fails).
    head: AtomicU64,
    /// Below each index on the stack, the next one (`NIL` at the bottom).
    next: Box<[AtomicU32]>,
}

impl IndexStack {
    /// The stack of every index below `capacity`, 0 on top.
    ///
    /// # Panics
    /// If `capacity` is `u32::MAX` or more (that value marks the bottom).
    pub fn full(capacity: u32) -> Self {
        assert!(
            capacity < NIL,
            "an index stack holds fewer than 2^32 - 1 indices"
        );
        IndexStack {
            head: AtomicU64::new(pack(0, if capacity == 0 { NIL } else { 0 })),
            next: (0..capacity)
                .map(|i| AtomicU32::new(if i + 1 == capacity { NIL } else { i + 1 }))
                .collect(),
        }
    }

    /// Take the top index (`None` when the stack is empty).
    #[inline]
    pub fn pop(&self) -> Option<u32> {
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            let (tag, top) = unpack(head);
            if top == NIL {
                return None;
            }
            let below = self.next[top as usize].load(Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                head,
                pack(tag.wrapping_add(1), below),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(top),
                Err(h) => head = h,
            }
        }
    }

    /// Give `index` back. It must have come from [`pop`](Self::pop) and
    /// not have been given back since (a second push of one index would
    /// hand it out twice).
    ///
    /// # Panics
    /// If `index` is not below the capacity.
    #[inline]
    pub fn push(&self, index: u32) {
        let slot = &self.next[index as usize];
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let (tag, top) = unpack(head);
            slot.store(top, Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                head,
                pack(tag.wrapping_add(1), index),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Whether no index is on the stack (a snapshot: other threads may
    /// change it at once).
    pub fn is_empty(&self) -> bool {
        unpack(self.head.load(Ordering::Acquire)).1 == NIL
    }

    /// How many indices the stack was made for.
    pub fn capacity(&self) -> u32 {
        self.next.len() as u32
    }
}

impl std::fmt::Debug for IndexStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexStack")
            .field("capacity", &self.capacity())
            .field("empty", &self.is_empty())
            .finish()
    }
}

fn pack(tag: u32, top: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(top)
}

fn unpack(head: u64) -> (u32, u32) {
    ((head >> 32) as u32, head as u32)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::IndexStack;
    use std::sync::Arc;

    #[test]
    fn an_empty_stack_gives_nothing() {
        let s = IndexStack::full(0);
        assert!(s.is_empty());
        assert_eq!(s.pop(), None);
    }

    /// Four threads take and give back indices of a small stack many
    /// times: no index is ever held by two at once, and all come back.
    #[test]
    fn threads_never_hold_one_index_together() {
        let s = Arc::new(IndexStack::full(8));
        let held: Arc<Vec<std::sync::atomic::AtomicBool>> =
            Arc::new((0..8).map(|_| Default::default()).collect());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (s, held) = (s.clone(), held.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if let Some(i) = s.pop() {
                            let was =
                                held[i as usize].swap(true, std::sync::atomic::Ordering::SeqCst);
                            assert!(!was, "index {i} handed out twice");
                            held[i as usize].store(false, std::sync::atomic::Ordering::SeqCst);
                            s.push(i);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut all: Vec<u32> = std::iter::from_fn(|| s.pop()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
    }
}
