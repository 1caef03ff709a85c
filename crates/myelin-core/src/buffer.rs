//! Per-subscription buffers (one buffer per subscription, as in rclcpp's
//! intra-process design).
//!
//! * keep_last(depth): a lock-free bounded ring ([`myelin_sync::Ring`])
//!   pushed with `force_push`, which drops the oldest element when full;
//!   the dropped one is counted as lost. Its indices share one cache line
//!   (a delivery to a cold subscription misses in fewer lines).
//! * keep_all: a lock-free unbounded FIFO ([`crossbeam_queue::SegQueue`])
//!   with an explicit bound (`max_samples`) enforced by a counter; a push over
//!   the bound is refused and reported.
//!
//! Both are multi-producer (several publishers, several threads) and lock
//! free, so publishing never takes a mutex.

use std::mem::MaybeUninit;
use std::ops::Deref;
use std::sync::Arc;

use crossbeam_queue::SegQueue;
use myelin_sync::Ring;
use myelin_sync::atomic::{AtomicUsize, Ordering};

use crate::message::Message;
use crate::message_info::Origin;
use crate::qos::{History, QoS};
use crate::wire::{SharedBytes, Wire, WireError};

/// A message as stored in a buffer and handed out by
/// [`Subscription::take`](crate::Subscription::take): owned (moved or
/// copied for this subscription), shared with other subscriptions, or read
/// in place from shared memory.
#[derive(Debug)]
pub enum Received<T> {
    /// This subscription owns the message.
    Owned(T),
    /// The message is shared, zero-copy, with other subscriptions.
    Shared(Arc<T>),
    /// Plain old data read in place from a loaned chunk (shared memory):
    /// zero copies, whatever the size. The chunk goes back to its pool when
    /// this is dropped.
    InPlace(InPlace<T>),
}

/// A plain-old-data message viewed in place in bytes it keeps alive.
///
/// Only the view and the bytes' owner are kept (24 bytes): a buffer entry
/// holding one fits a cache line with its stamp and origin.
pub struct InPlace<T> {
    ptr: *const T,
    _owner: crate::wire::Owner,
}

// SAFETY: `ptr` points into bytes that `owner` keeps alive, immutable
// while any view of them lives (see `SharedBytes`); handing out `&T`
// across threads needs `T: Sync`, moving needs `T: Send`.
unsafe impl<T: Send + Sync> Send for InPlace<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for InPlace<T> {}

impl<T: Message> InPlace<T> {
    /// View `bytes` as a `T` (`None` unless `T` is plain old data and the
    /// size and alignment fit).
    pub fn new(bytes: SharedBytes) -> Option<InPlace<T>> {
        let ptr = T::wire_view(&bytes)? as *const T;
        Some(InPlace {
            ptr,
            _owner: bytes.into_owner(),
        })
    }
}

impl<T> Deref for InPlace<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `ptr` came from `T::wire_view(&bytes)` (size and alignment
        // checked, `T` valid for any bit pattern), and `owner` keeps that
        // memory alive and unmodified for our lifetime (the bytes never
        // move while their owner lives).
        unsafe { &*self.ptr }
    }
}

impl<T> std::fmt::Debug for InPlace<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InPlace")
            .field("len", &std::mem::size_of::<T>())
            .finish()
    }
}

/// A message from bytes another process (or a loan) wrote: viewed in place
/// when the type allows it, decoded otherwise.
pub(crate) fn from_wire<T: Message>(bytes: SharedBytes) -> Result<Received<T>, WireError> {
    if T::WIRE == Wire::Pod {
        let len = bytes.len();
        return InPlace::new(bytes)
            .map(Received::InPlace)
            // The error (and its message, formatted) only when it happens.
            .ok_or_else(|| WireError::Decode {
                type_name: T::TYPE_NAME,
                len,
                why: format!("expected {} bytes", std::mem::size_of::<T>()),
            });
    }
    T::wire_decode(bytes).map(Received::Owned)
}

/// A message from bytes lent for the call (a network link's buffers):
/// plain old data is copied once into an aligned buffer of its own and
/// viewed there (a large one never moves by value); anything else decodes
/// from where the bytes lie ([`Message::wire_decode_parts`]: a CDR message
/// without joining its fragments, a byte buffer copied once).
pub(crate) fn from_lent<T: Message>(parts: &[&[u8]]) -> Result<Received<T>, WireError> {
    if T::WIRE == Wire::Pod {
        let len = parts.iter().map(|p| p.len()).sum();
        return from_wire(SharedBytes::copy_from_parts(parts.iter().copied(), len));
    }
    T::wire_decode_parts(parts).map(Received::Owned)
}

impl<T: Clone> Received<T> {
    /// The message by value: moves it if owned or if this is the last shared
    /// reference, copies it otherwise.
    ///
    /// ```
    /// use myelin_core::Received;
    /// use std::sync::Arc;
    ///
    /// assert_eq!(Received::Owned(7u32).into_owned(), 7);
    /// let shared = Arc::new(String::from("frame"));
    /// let r = Received::Shared(shared.clone());
    /// assert_eq!(r.into_owned(), "frame"); // a copy: `shared` still holds it
    /// ```
    #[inline]
    pub fn into_owned(self) -> T {
        // The owned case inlined into the caller (an owning callback's
        // every message: it was a call that moved the message twice);
        // the copies out of line.
        match self {
            Received::Owned(t) => t,
            other => other.copied_out(),
        }
    }

    /// [`into_owned`](Self::into_owned) of a message that is not owned.
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn copied_out(self) -> T {
        match self {
            Received::Owned(t) => t,
            Received::Shared(a) => Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone()),
            Received::InPlace(v) => (*v).clone(),
        }
    }

    /// The message as an `Arc`: no copy either way (an owned message is
    /// moved into a new `Arc`).
    pub fn into_shared(self) -> Arc<T> {
        match self {
            Received::Owned(t) => Arc::new(t),
            Received::Shared(a) => a,
            Received::InPlace(v) => Arc::new((*v).clone()),
        }
    }
}

impl<T> Deref for Received<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Received::Owned(t) => t,
            Received::Shared(a) => a,
            Received::InPlace(v) => v,
        }
    }
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Stored, nothing lost.
    Stored,
    /// Stored, and the oldest messages of the full ring were dropped to
    /// make room (keep_last): this many, one unless other publishers
    /// filled the room first.
    Overwrote(usize),
    /// Refused: keep_all at its resource limit.
    Refused,
    /// Stored beyond keep_all's limit (a message from the network, which
    /// cannot be refused to its publisher: see [`Buffer::push_beyond`]).
    Stretched,
    /// Stored, and an inline callback panicked while handling it.
    Panicked,
}

/// A buffered message, when it expires (`executor::now_ns` units; 0 =
/// never: no lifespan) and where it came from.
pub(crate) struct Entry<T> {
    pub(crate) msg: Received<T>,
    pub(crate) expires: u64,
    pub(crate) origin: Origin,
}

pub(crate) enum Buffer<T> {
    /// keep_last: small, beside the subscription's hot fields.
    Ring(Ring<Entry<T>>),
    /// keep_all: behind a pointer (its queue keeps head and tail in lines
    /// of their own, which would spread the subscription over more lines).
    Fifo(Box<Fifo<T>>),
}

pub(crate) struct Fifo<T> {
    queue: SegQueue<Entry<T>>,
    // SYNC: Relaxed is enough: it only bounds the length; the queue's own
    // synchronisation orders the elements.
    len: AtomicUsize,
    limit: usize,
}

impl<T> Buffer<T> {
    pub(crate) fn new(qos: &QoS) -> Self {
        match qos.history {
            History::KeepLast(_) => Buffer::Ring(Ring::new(qos.effective_depth())),
            History::KeepAll => Buffer::Fifo(Box::new(Fifo {
                queue: SegQueue::new(),
                len: AtomicUsize::new(0),
                limit: qos.effective_depth(),
            })),
        }
    }

    /// Store `item`: a keep_last ring overwrites its oldest when full, a
    /// keep_all FIFO refuses at its limit.
    #[inline]
    pub(crate) fn push(&self, item: Entry<T>) -> Pushed {
        self.push_beyond(item, 0)
    }

    /// [`push`](Self::push) for a message no publisher can be made to hold
    /// back (one that came over the network): a keep_all FIFO takes it
    /// beyond its limit, up to `cap` messages, and says so with
    /// [`Pushed::Stretched`]; past `cap` it is refused.
    /// (A `cap` at or below the limit is the limit: [`push`](Self::push).)
    #[inline]
    pub(crate) fn push_beyond(&self, item: Entry<T>, cap: usize) -> Pushed {
        match self {
            Buffer::Ring(q) => match q.force_push(item) {
                0 => Pushed::Stored,
                n => Pushed::Overwrote(n),
            },
            Buffer::Fifo(f) => {
                let Fifo { queue, len, limit } = &**f;
                let before = len.fetch_add(1, Ordering::Relaxed);
                if before >= cap.max(*limit) {
                    len.fetch_sub(1, Ordering::Relaxed);
                    return Pushed::Refused;
                }
                queue.push(item);
                if before >= *limit {
                    Pushed::Stretched
                } else {
                    Pushed::Stored
                }
            }
        }
    }

    /// [`push`](Self::push) of an entry of these parts, written in its
    /// ring slot (see [`Ring::force_claim`]): the message is `wrap(msg)`
    /// (`Received::Owned`, `Received::Shared`, or the `Received` itself),
    /// made there from where `msg` lies. Assembled first and pushed, the
    /// entry was copied twice more.
    #[inline(always)]
    pub(crate) fn push_parts<M>(
        &self,
        msg: M,
        wrap: impl FnOnce(M) -> Received<T>,
        expires: u64,
        origin: Origin,
    ) -> Pushed {
        match self {
            Buffer::Ring(q) => {
                let mut c = q.force_claim();
                let e = c.as_mut_ptr();
                // SAFETY: the claimed slot is this thread's until it is
                // published; each field is written once, then the whole
                // entry is published. `msg` is read once (moved) where it
                // lies and forgotten below (moved into `wrap` by value,
                // it was copied to a temporary first).
                let dropped = unsafe {
                    (&raw mut (*e).msg).write(wrap(std::ptr::read(&msg)));
                    (&raw mut (*e).expires).write(expires);
                    (&raw mut (*e).origin).write(origin);
                    c.publish()
                };
                std::mem::forget(msg);
                match dropped {
                    0 => Pushed::Stored,
                    n => Pushed::Overwrote(n),
                }
            }
            Buffer::Fifo(_) => self.push_beyond(
                Entry {
                    msg: wrap(msg),
                    expires,
                    origin,
                },
                0,
            ),
        }
    }

    /// The oldest entry (the tests' view of [`pop_into`](Self::pop_into)).
    #[cfg(test)]
    pub(crate) fn pop(&self) -> Option<Entry<T>> {
        let mut out = MaybeUninit::uninit();
        // SAFETY: `pop_into` returned true: it wrote `out`.
        self.pop_into(&mut out)
            .then(|| unsafe { out.assume_init() })
    }

    /// Move the oldest entry into `out` (see [`Ring::pop_into`]): `true`
    /// when there was one.
    #[inline(always)]
    pub(crate) fn pop_into(&self, out: &mut MaybeUninit<Entry<T>>) -> bool {
        match self {
            Buffer::Ring(q) => q.pop_into(out),
            Buffer::Fifo(f) => match f.queue.pop() {
                Some(e) => {
                    f.len.fetch_sub(1, Ordering::Relaxed);
                    out.write(e);
                    true
                }
                None => false,
            },
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Buffer::Ring(q) => q.is_empty(),
            Buffer::Fifo(f) => f.queue.is_empty(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Buffer::Ring(q) => q.len(),
            Buffer::Fifo(f) => f.queue.len(),
        }
    }

    /// Start bringing the slot of the next push into the caches (a keep_last
    /// ring; keep_all's queue allocates its blocks as it goes).
    #[inline]
    pub(crate) fn prefetch_next(&self) {
        if let Buffer::Ring(q) = self {
            q.prefetch_next();
        }
    }

    pub(crate) fn limit(&self) -> usize {
        match self {
            Buffer::Ring(q) => q.capacity(),
            Buffer::Fifo(f) => f.limit,
        }
    }

    /// Whether a push would be stored without loss: a keep_all FIFO below
    /// its limit (a keep_last ring always takes a message, overwriting).
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        match self {
            Buffer::Ring(_) => true,
            // The counter, not `SegQueue::len` (which walks its indices).
            Buffer::Fifo(f) => f.len.load(Ordering::Relaxed) < f.limit,
        }
    }

    /// Messages that still fit before the oldest is overwritten (keep_last)
    /// or a push is refused (keep_all). Reads counters only: `SegQueue::len`
    /// walks the queue's indices.
    pub(crate) fn room(&self) -> usize {
        match self {
            Buffer::Ring(q) => q.capacity() - q.len(),
            Buffer::Fifo(f) => f.limit.saturating_sub(f.len.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(n: i32) -> Entry<i32> {
        Entry {
            msg: Received::Owned(n),
            expires: 0,
            origin: Origin::Local(0),
        }
    }

    #[test]
    fn ring_overwrites_oldest() {
        let b = Buffer::new(&QoS::keep_last(2));
        assert_eq!(b.push(e(1)), Pushed::Stored);
        assert_eq!(b.push(e(2)), Pushed::Stored);
        assert_eq!(b.push(e(3)), Pushed::Overwrote(1));
        assert_eq!(*b.pop().unwrap().msg, 2);
        assert_eq!(*b.pop().unwrap().msg, 3);
        assert!(b.pop().is_none());
    }

    #[test]
    fn fifo_refuses_over_limit() {
        let b = Buffer::new(&QoS::keep_all().max_samples(2));
        assert_eq!(b.push(e(1)), Pushed::Stored);
        assert_eq!(b.push(e(2)), Pushed::Stored);
        assert_eq!(b.push(e(3)), Pushed::Refused);
        assert_eq!(*b.pop().unwrap().msg, 1);
        assert_eq!(b.push(e(4)), Pushed::Stored);
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn a_network_message_stretches_keep_all_up_to_the_cap_and_room_counts() {
        let b = Buffer::new(&QoS::keep_all().max_samples(2));
        assert_eq!(b.room(), 2);
        assert_eq!(b.push_beyond(e(1), 3), Pushed::Stored);
        assert_eq!(b.push_beyond(e(2), 3), Pushed::Stored);
        assert_eq!(b.push_beyond(e(3), 3), Pushed::Stretched);
        assert_eq!(b.room(), 0);
        assert!(!b.has_room(), "local publishers still wait or are refused");
        assert_eq!(b.push(e(9)), Pushed::Refused);
        assert_eq!(b.push_beyond(e(4), 3), Pushed::Refused);
        assert_eq!(
            (0..3).map(|_| *b.pop().unwrap().msg).collect::<Vec<_>>(),
            [1, 2, 3],
            "in order, the refused ones not among them"
        );
        assert_eq!(b.room(), 2);
        // keep_last is never stretched: it overwrites, as always.
        let r = Buffer::new(&QoS::keep_last(1));
        assert_eq!(r.push_beyond(e(1), 5), Pushed::Stored);
        assert_eq!(r.push_beyond(e(2), 5), Pushed::Overwrote(1));
        assert_eq!(r.room(), 0);
    }
}

#[cfg(test)]
mod layout {
    use super::*;
    use crate::message_info::Origin;

    /// A small message's buffer entry, with the ring's 8-byte stamp, fits
    /// one cache line (a delivery to a cold subscription misses one line
    /// for the slot, not two).
    #[test]
    fn a_small_message_entry_fits_a_line_with_its_stamp() {
        assert_eq!(std::mem::size_of::<Origin>(), 16);
        assert!(std::mem::size_of::<Received<u64>>() <= 32);
        assert!(std::mem::size_of::<Entry<u64>>() + 8 <= 64);
    }
}
