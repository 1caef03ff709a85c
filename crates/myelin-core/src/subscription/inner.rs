//! A subscription's inside: its buffer, how a message is pushed into it
//! (from a local publisher or a transport: the same path), who is woken,
//! and how the executor runs it.

use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use myelin_sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, Ordering};
use myelin_sync::{RetainCell, SoloLock};

use crate::buffer::{Buffer, Entry, Pushed, Received};
use crate::dispatch::{ExecShared, Executable, GroupInner};
use crate::error::SpinError;
use crate::events::{
    DeadlineMissedStatus, EventQueue, LivelinessChangedStatus, LivelinessToken, MatchedStatus,
    Status, SubscriptionEvent,
};
use crate::message::Message;
use crate::qos::{QoS, QosPolicy};
use crate::runtime::NodeInner;
use crate::transport::{Arrived, EndpointEvents, SubLink, SubOwner};
use crate::waitpoint::WaitPoint;

use super::Delivery;
use super::callback::Dispatch;
use crate::message_info::Origin;

/// How far past `max_samples` a keep_all subscription holds messages from
/// the network (see `SubInner::push_unpaced`).
const UNPACED_HEADROOM: usize = 2;

#[repr(C)]
pub(crate) struct SubInner<T> {
    // Laid out in declaration order (`repr(C)`): the fields every message
    // touches come first, in two cache lines ahead of the buffer, so a
    // delivery to a subscription whose memory went cold (an executor that
    // slept 10 ms) misses in as few lines as it can. Reordered by the
    // compiler they spread over nine of the eighteen lines.
    /// Whether this subscription is queued in its executor's ready queue
    /// (or claimed by a busy-polling worker), from the moment it is put
    /// there until its callback has returned (a burst of messages queues
    /// it once), and where its reserved reference is: see [`mark`]. (A
    /// stale entry left by an executor it moved from can run beside the
    /// new one's; the callback's lock keeps them apart.)
    // SYNC: every change is a SeqCst read-modify-write: the publisher's in
    // `queue` pairs with the executor's in `finish`, which re-checks the
    // buffer after each (see `finish`).
    state: AtomicU8,
    /// Deliver in the publisher's thread.
    inline: bool,
    /// Whether any link's messages wait to be drained (shared memory):
    /// then the executor (or a polling waiter) drains it when woken.
    pumped: bool,
    pub(crate) delivery: Delivery,
    /// Whether keep_all has held a network message beyond `max_samples`
    /// (warned once), and whether it has dropped one at the hard cap.
    stretched: AtomicBool,
    overflowed: AtomicBool,
    /// `qos.deadline` is set: pushes are counted (`received_count`).
    counts_received: bool,
    /// Has a callback (an executor runs it); else it is polled.
    has_callback: bool,
    /// The executor to wake (None until the node is added to one). Read on
    /// every message with one load; changes only when the node moves.
    pub(super) target: RetainCell<ExecShared>,
    /// This subscription's `Arc` as a raw pointer, for its *reserved
    /// reference*: one strong count that the subscription owns while it
    /// is not queued and that moves into the ready queue's entry when it
    /// is (see [`mark`]), so neither queueing nor running an entry touches
    /// the reference count (an upgrade and a drop, two locked instructions
    /// a message). Null for a subscription that is never queued (inline,
    /// or without a callback). Right after `target`, which `queue` reads
    /// first.
    // SYNC: written once in `reserve`, before the subscription is attached
    // or reachable from another thread.
    slot: AtomicPtr<SubInner<T>>,
    pub(crate) node: Arc<NodeInner>,
    /// `None` exactly when `has_callback` is false (the flag answers
    /// without touching the lock). Bound to the executor while that has
    /// one worker (see `attach`): its runs then take no lock.
    callback: SoloLock<Option<Dispatch<T>>>,
    pub(crate) buffer: Buffer<T>,
    /// The address of the callback's captured state (0: no callback),
    /// which `callback` never replaces: a fan-out prefetches it ahead of
    /// the callbacks without taking the lock (see [`prefetch`](Self::prefetch)).
    callback_at: usize,
    // Written only when a message is lost, or with a deadline: after the
    // buffer, so that the fields above fit two lines (with the `Arc`'s
    // counts ahead of them).
    pub(super) lost: AtomicU64,
    /// Messages pushed (counted only with a deadline).
    received_count: AtomicU64,
    pub(crate) id: u64,
    pub(crate) gid: crate::Gid,
    pub(crate) topic: String,
    pub(crate) qos: QoS,
    group: Arc<GroupInner>,
    /// Synchronous waiters, async streams and wait sets (polling only).
    pub(super) waitpoint: Arc<WaitPoint>,
    /// Messages dropped at take time because their lifespan had passed.
    pub(super) expired: AtomicU64,
    pub(crate) deadline_status: Status<DeadlineMissedStatus>,
    /// Endpoints of another type found on the topic.
    pub(crate) incompatible_type: Status<crate::events::IncompatibleTypeStatus>,
    pub(crate) liveliness_status: Status<LivelinessChangedStatus>,
    pub(crate) matched_status: Status<MatchedStatus>,
    /// Matched publishers' liveliness and whether each was alive last time.
    pub_liveliness: std::sync::Mutex<Vec<(Arc<LivelinessToken>, bool)>>,
    pub(crate) events: Option<Arc<EventQueue<SubscriptionEvent>>>,
    /// The deadline and liveliness checkers (timers on the node's executor).
    pub(crate) checkers: std::sync::Mutex<Vec<crate::Timer>>,
    /// The panic message of the last inline callback that panicked.
    inline_panic: std::sync::Mutex<Option<String>>,
    pub(crate) incompatible: Status<crate::qos::IncompatibleQosStatus>,
    /// Matched publishers in this context (set by the graph).
    local_matched: myelin_sync::atomic::AtomicU32,
    /// Publishers in other processes counted (alive, not alive) in
    /// `liveliness_status`, as the links tell ([`SubLink::liveliness`]):
    /// connected automatic ones are alive (their process's liveliness,
    /// which the transport follows); manual-by-topic ones while their
    /// assertions come within their lease.
    remote_alive: myelin_sync::atomic::AtomicU64,
    /// One link per transport that carries this subscription (publishers
    /// in other processes and hosts).
    pub(crate) links: Box<[Arc<dyn SubLink>]>,
    /// Set when the user's handle drops: an `attach` racing the drop (a
    /// node added to an executor on another thread) undoes itself, so the
    /// executor keeps no reference to a dropped subscription.
    // SYNC: SeqCst store in `close`, then the SeqCst target load there;
    // `attach` stores the target (SeqCst), then loads this (SeqCst): one
    // of the two sees the other.
    closed: AtomicBool,
}

/// Everything a subscription is made of, resolved by the node.
pub(crate) struct SubSpec<T> {
    pub(crate) id: u64,
    pub(crate) gid: crate::Gid,
    pub(crate) topic: String,
    pub(crate) qos: QoS,
    pub(crate) delivery: Delivery,
    pub(crate) node: Arc<NodeInner>,
    pub(crate) callback: Option<Dispatch<T>>,
    pub(crate) inline: bool,
    pub(crate) group: Arc<GroupInner>,
    pub(crate) events: Option<Arc<EventQueue<SubscriptionEvent>>>,
    pub(crate) links: Vec<Arc<dyn SubLink>>,
}

/// The values of [`SubInner::state`]: a subscription's queued mark, and
/// where its *reserved reference* is.
///
/// A subscription its executor runs owns one strong count of its own `Arc`
/// (taken in [`SubInner::reserve`], given back in [`SubInner::close`]).
/// While it is not queued (`IDLE`) the subscription holds it; the
/// publisher that queues it (`IDLE` -> `MARK | RES`) moves it into the
/// ready queue's entry (`Arc::from_raw`), and the run that clears the mark
/// from `MARK | RES` hands it back (`mem::forget`). So queueing and
/// running touch no reference count. The counts are interchangeable: any
/// run that clears `MARK | RES` returns the reference it holds and any
/// other drops it, so an entry left behind by an executor the
/// subscription moved away from (whose mark [`attach`](SubInner::attach)
/// reset, putting a fresh count in the subscription's hand) costs nothing
/// but its own count, whichever entry runs first. Invariant: the
/// subscription holds its reserved reference exactly when `state & RES`
/// is clear and `state != SHUT`.
pub(super) mod mark {
    /// Not queued; the subscription holds its reserved reference.
    pub const IDLE: u8 = 0;
    /// Queued, or claimed by a busy-polling worker: the run that clears
    /// it re-checks the buffer.
    pub const MARK: u8 = 1;
    /// The reserved reference is in a ready queue's entry.
    pub const RES: u8 = 2;
    /// A message arrived while marked: the run re-checks the buffer
    /// before it clears the mark.
    pub const DIRTY: u8 = 4;
    /// Closed, or never queued (inline, or without a callback): no
    /// reserved reference, and nobody marks it again.
    pub const SHUT: u8 = 8 | MARK;
}

impl<T: Message> SubInner<T> {
    /// The subscription `spec` describes. One its executor runs is
    /// [`reserve`](Self::reserve)d once in its `Arc`.
    pub(crate) fn new(spec: SubSpec<T>) -> Self {
        let SubSpec {
            id,
            gid,
            topic,
            qos,
            delivery,
            node,
            callback,
            inline,
            group,
            events,
            links,
        } = spec;
        let pumped = links.iter().any(|l| l.pumped());
        let waitpoint = if pumped && callback.is_none() {
            // A polling subscription sleeps on its own slot, which remote
            // publishers signal directly.
            WaitPoint::with_event(crate::transport::wake::WakeEvent::remote_capable())
        } else {
            WaitPoint::new()
        };
        if callback.is_none() {
            let word = waitpoint.event.word(0);
            for l in &links {
                l.set_wake(word);
            }
        }
        SubInner {
            id,
            gid,
            topic,
            qos,
            delivery,
            node,
            buffer: Buffer::new(&qos),
            counts_received: qos.deadline.is_some(),
            lost: AtomicU64::new(0),
            // Never queued until `reserve` gives it its reserved reference.
            state: AtomicU8::new(mark::SHUT),
            group,
            target: RetainCell::new(),
            waitpoint,
            inline: inline && callback.is_some(),
            has_callback: callback.is_some(),
            callback_at: callback.as_ref().map_or(0, Dispatch::state_addr),
            callback: SoloLock::new(callback),
            inline_panic: std::sync::Mutex::new(None),
            expired: AtomicU64::new(0),
            stretched: AtomicBool::new(false),
            overflowed: AtomicBool::new(false),
            received_count: AtomicU64::new(0),
            deadline_status: Status::new(),
            incompatible_type: Status::new(),
            liveliness_status: Status::new(),
            matched_status: Status::new(),
            pub_liveliness: std::sync::Mutex::new(Vec::new()),
            events,
            checkers: std::sync::Mutex::new(Vec::new()),
            incompatible: Status::new(),
            local_matched: myelin_sync::atomic::AtomicU32::new(0),
            remote_alive: myelin_sync::atomic::AtomicU64::new(0),
            links: links.into_boxed_slice(),
            closed: AtomicBool::new(false),
            pumped,
            slot: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Give a subscription its executor runs its reserved reference (see
    /// [`mark`]): once, right after it is put in its `Arc`, before it is
    /// attached or reachable from another thread.
    pub(crate) fn reserve(self: &Arc<Self>) {
        if !self.has_callback || self.inline {
            return;
        }
        // SYNC: Relaxed: no other thread sees this subscription yet; what
        // attaches it publishes it.
        self.slot
            .store(Arc::into_raw(self.clone()).cast_mut(), Ordering::Relaxed);
        self.state.store(mark::IDLE, Ordering::Relaxed);
    }

    /// The reserved reference taken out of the subscription's hand, as an
    /// `Arc`.
    ///
    /// # Safety
    /// The caller owns the reserved reference: it moved the state from
    /// `IDLE` to one with `RES` set.
    #[inline]
    unsafe fn reserved(&self) -> Arc<Self> {
        // SAFETY: `slot` is `Arc::into_raw` of this subscription (set in
        // `reserve`, before any state but `SHUT`), and the count this `Arc`
        // owns is the reserved one, which the caller took (contract).
        unsafe { Arc::from_raw(self.slot.load(Ordering::Relaxed)) }
    }

    /// Publishers in other processes connected to this subscription now.
    pub(crate) fn remote_publishers(&self) -> usize {
        self.links.iter().map(|l| l.connected()).sum()
    }

    /// Move messages other processes sent into the buffer (polling
    /// subscriptions call this before looking at the buffer).
    #[inline]
    pub(crate) fn pump_now(&self) {
        if self.pumped {
            // The own slot's `pending` flag is not taken here: nobody reads
            // it (a waiter sleeps on the slot's epoch and its check pumps
            // the links itself), and taking it was a locked swap of a line
            // the publisher writes on every message (a transfer on every
            // polled take).
            for l in self.links.iter() {
                if l.has_data() {
                    l.pump(self);
                }
            }
        }
    }

    /// The oldest message still within its lifespan, with where it came
    /// from, after moving what other processes sent (a polling `take`).
    /// From an empty buffer, a link that holds exactly one message hands
    /// it over directly ([`SubLink::pump_take`]): the push into the buffer,
    /// its pop and the wake-up of waiters (nobody else can want a message
    /// this reader takes now) are skipped, on the path a polled hop
    /// between processes waits for.
    #[inline]
    pub(crate) fn take_now(&self) -> Option<(Received<T>, Origin)> {
        if self.pumped {
            let mut empty = self.buffer.is_empty();
            for l in self.links.iter() {
                if !l.has_data() {
                    continue;
                }
                if !empty {
                    l.pump(self);
                    continue;
                }
                if let Some(h) = l.pump_take(self)
                    && let Some((msg, _)) = self.arrived(Arrived::Kept(h.bytes), h.lifetime)
                {
                    self.count_received();
                    return Some((msg, h.origin));
                }
                // Two or more went into the buffer (or the one expired).
                empty = false;
            }
        }
        self.pop_live_from()
    }

    /// A message as a link hands it over, decoded, with when it expires
    /// (0: never); `None` when it expired on the way or does not decode
    /// (counted lost). In the hot text also when LLVM leaves it out of
    /// line (it did once the callback's lock grew).
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn arrived(
        &self,
        bytes: Arrived<'_>,
        lifetime: Option<std::time::Duration>,
    ) -> Option<(Received<T>, u64)> {
        // On the clock `pop_live` compares with (0: never expires).
        let expires = match lifetime {
            None => 0,
            Some(d) if d.is_zero() => {
                self.expired.fetch_add(1, Ordering::Relaxed);
                self.lost.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Some(d) => crate::clock::deadline_ns(self.node.ctx.expiry_now_ns(), d),
        };
        let decoded = match bytes {
            Arrived::Kept(b) => crate::buffer::from_wire::<T>(b),
            Arrived::Lent(parts) => crate::buffer::from_lent::<T>(parts),
        };
        match decoded {
            Ok(msg) => Some((msg, expires)),
            Err(e) => {
                self.lost.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "{}: dropping a message from another process: {e}",
                    self.describe()
                );
                None
            }
        }
    }

    /// After taking a message: move messages that waited in a pumped link
    /// for room into the buffer (keep_all only: a keep_last buffer never
    /// makes a link wait).
    #[inline]
    pub(crate) fn refill(&self) {
        if self.pumped && self.qos.history == crate::qos::History::KeepAll {
            for l in self.links.iter() {
                if l.has_data() {
                    l.pump(self);
                }
            }
        }
    }

    /// Count the publishers in other processes in the liveliness status:
    /// a connected one is alive while its liveliness holds (for a
    /// manual-by-topic one: an assertion within its lease) and not alive
    /// after; one that goes away leaves the counts, as a deleted DDS
    /// writer does.
    pub(crate) fn refresh_remote_liveliness(&self) {
        // Counted and applied under the status's lock: concurrent
        // refreshes (discovery, the network's thread, the lease checker)
        // are serialised, so the last to apply also counted last and a
        // stale count never overwrites a newer one.
        let (mut d_alive, mut d_not) = (0i64, 0i64);
        let st =
            self.liveliness_status
                .update_for_event(self.events.is_some(), |s| {
                    let (alive, not) = self.links.iter().map(|l| l.liveliness()).fold(
                        (0u32, 0u32),
                        |(a, n), (la, ln)| {
                            (a.saturating_add(la as u32), n.saturating_add(ln as u32))
                        },
                    );
                    let now = (u64::from(alive) << 32) | u64::from(not);
                    // SYNC: Relaxed: only read and written under this lock.
                    let before = self.remote_alive.swap(now, Ordering::Relaxed);
                    d_alive = i64::from(alive) - (before >> 32) as i64;
                    d_not = i64::from(not) - i64::from(before as u32);
                    s.alive_count = (i64::from(s.alive_count) + d_alive).max(0) as u32;
                    s.not_alive_count = (i64::from(s.not_alive_count) + d_not).max(0) as u32;
                    s.alive_count_change += d_alive as i32;
                    s.not_alive_count_change += d_not as i32;
                });
        if d_alive != 0 || d_not != 0 {
            self.emit(SubscriptionEvent::LivelinessChanged(st));
        }
    }

    /// Deliver what reached the pumped links from this thread, waiting up
    /// to `patience` for a pass the pump thread is in the middle of (see
    /// `SubLink::settle`): never a deadlock, at worst a message the pump
    /// thread delivers later.
    pub(crate) fn settle_links(&self, patience: std::time::Duration) {
        for l in self.links.iter() {
            l.settle(self, patience);
        }
    }

    /// Drain every pumped link.
    fn pump_links(&self) {
        for l in self.links.iter() {
            l.pump(self);
        }
    }

    pub(crate) fn has_callback(&self) -> bool {
        self.has_callback
    }

    pub(crate) fn waitpoint(&self) -> &Arc<WaitPoint> {
        &self.waitpoint
    }

    pub(crate) fn has_data(&self) -> bool {
        !self.buffer.is_empty()
    }

    pub(crate) fn limit(&self) -> usize {
        self.buffer.limit()
    }

    /// The oldest message still within its lifespan; expired ones are
    /// dropped and counted.
    #[inline]
    pub(crate) fn pop_live(&self) -> Option<Received<T>> {
        self.pop_live_from().map(|(m, _)| m)
    }

    /// [`pop_live`](Self::pop_live), with where the message came from.
    /// Always inlined: as a call, the entry was moved out of the buffer,
    /// into the returned tuple and out of it again (-39 instructions a
    /// 64-byte message in the icount gate's dispatch, inlined).
    #[inline(always)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) fn pop_live_from(&self) -> Option<(Received<T>, Origin)> {
        let mut e = MaybeUninit::uninit();
        if !self.pop_live_into(&mut e) {
            return None;
        }
        // SAFETY: `pop_live_into` returned true: it wrote `e`.
        let e = unsafe { e.assume_init() };
        Some((e.msg, e.origin))
    }

    /// [`pop_live_from`](Self::pop_live_from) into `out`: `true` when the
    /// oldest live entry was moved there (see [`Ring::pop_into`]: copied
    /// once from the buffer, where a returned `Option` of a tuple was
    /// copied at each step on the way to the callback).
    ///
    /// [`Ring::pop_into`]: myelin_sync::Ring::pop_into
    #[inline(always)]
    fn pop_live_into(&self, out: &mut MaybeUninit<Entry<T>>) -> bool {
        loop {
            if !self.buffer.pop_into(out) {
                return false;
            }
            // SAFETY: `pop_into` returned true: it wrote `out`.
            let expires = unsafe { out.assume_init_ref() }.expires;
            if expires != 0 && self.node.ctx.expiry_now_ns() > expires {
                // SAFETY: as above; dropped once, then overwritten or
                // left (the caller reads `out` only after `true`).
                unsafe { out.assume_init_drop() };
                self.expired.fetch_add(1, Ordering::Relaxed);
                self.lost.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            return true;
        }
    }

    pub(crate) fn emit(&self, e: SubscriptionEvent) {
        if let Some(q) = &self.events {
            q.emit(e);
        }
    }

    /// The deadline checker found no message in the last period.
    pub(crate) fn check_deadline(self: &Arc<Self>, last_seen: &mut u64) {
        let n = self.received_count.load(Ordering::Relaxed);
        if n > 0 && n == *last_seen {
            let st = self
                .deadline_status
                .update_for_event(self.events.is_some(), |s| {
                    s.total_count += 1;
                    s.total_count_change += 1;
                });
            self.emit(SubscriptionEvent::RequestedDeadlineMissed(st));
        }
        *last_seen = n;
    }

    /// Re-evaluate the liveliness of the matched publishers (called by the
    /// graph when matches change, and by the lease checker).
    pub(crate) fn update_liveliness(self: &Arc<Self>, tokens: Option<Vec<Arc<LivelinessToken>>>) {
        let now = crate::clock::now_ns();
        let mut pubs = self
            .pub_liveliness
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (mut d_alive, mut d_not) = (0i32, 0i32);
        if let Some(tokens) = tokens {
            // Publishers that went away.
            pubs.retain(|(t, alive)| {
                let keep = tokens.iter().any(|n| Arc::ptr_eq(n, t));
                if !keep {
                    if *alive { d_alive -= 1 } else { d_not -= 1 }
                }
                keep
            });
            // New publishers.
            for t in tokens {
                if !pubs.iter().any(|(p, _)| Arc::ptr_eq(p, &t)) {
                    let alive = t.is_alive(now);
                    if alive {
                        d_alive += 1
                    } else {
                        d_not += 1
                    }
                    pubs.push((t, alive));
                }
            }
        }
        for (t, alive) in pubs.iter_mut() {
            let now_alive = t.is_alive(now);
            if now_alive != *alive {
                if now_alive {
                    d_alive += 1;
                    d_not -= 1;
                } else {
                    d_alive -= 1;
                    d_not += 1;
                }
                *alive = now_alive;
            }
        }
        drop(pubs);
        if d_alive != 0 || d_not != 0 {
            let st = self
                .liveliness_status
                .update_for_event(self.events.is_some(), |s| {
                    s.alive_count = (s.alive_count as i32 + d_alive).max(0) as u32;
                    s.not_alive_count = (s.not_alive_count as i32 + d_not).max(0) as u32;
                    s.alive_count_change += d_alive;
                    s.not_alive_count_change += d_not;
                });
            self.emit(SubscriptionEvent::LivelinessChanged(st));
        }
    }

    /// The graph counted `current` matched publishers in this context.
    pub(crate) fn update_matched(self: &Arc<Self>, current: u32) {
        self.local_matched.store(current, Ordering::Relaxed);
        self.refresh_matched();
    }

    /// Publish the matched status: local plus remote publishers.
    pub(crate) fn refresh_matched(&self) {
        let count = || self.local_matched.load(Ordering::Relaxed) + self.remote_publishers() as u32;
        if let Some(st) = self.matched_status.recount(count, self.events.is_some()) {
            self.emit(SubscriptionEvent::Matched(st));
        }
    }

    /// Where [`prefetch`](Self::prefetch) asks for lines, from the value's
    /// start: the `Arc`'s counts sit 16 bytes ahead of it, and the fields
    /// a push reads (`repr(C)`, see the struct), `callback_at` included,
    /// end within the allocation's first three lines (the layout test
    /// checks each field against these).
    const PREFETCHED: [isize; 3] = [-16, 48, 112];

    /// Start bringing the lines a delivery reads into the caches: this
    /// subscription's first lines (its `Arc`'s counts, the flags, the
    /// executor, the buffer's indices), then with `slot` the buffer's next
    /// slot and the callback's state, which need those lines to find (see
    /// the publisher's `Matched::prefetch`).
    #[inline]
    pub(crate) fn prefetch(&self, slot: bool) {
        if slot {
            self.buffer.prefetch_next();
            if self.callback_at != 0 {
                myelin_sync::prefetch(self.callback_at as *const u8);
            }
        } else {
            let at = (self as *const Self).cast::<u8>();
            for offset in Self::PREFETCHED {
                myelin_sync::prefetch(at.wrapping_offset(offset));
            }
        }
    }

    /// Warm a delivery to this subscription without delivering (see
    /// [`Publisher::warm`](crate::Publisher::warm)): bring its lines and
    /// its buffer's next slot into the calling thread's caches and, when
    /// its callback runs on a busy-polling executor, queue it there
    /// without adding a message: the executor runs its `execute` path,
    /// which with an empty buffer calls no callback (as for any entry
    /// whose message a polled take got first), and a real message arriving
    /// meanwhile is run as usual (the mark protocol of `queue` and
    /// `execute`). An executor that sleeps is left alone: waking it would
    /// cost more than warming saves. An inline subscription's path runs
    /// here (`run_inline`): no call with an empty
    /// buffer; a message another thread left to this holder meanwhile is
    /// delivered, and a panic in its callback is logged (no publish here
    /// to return it).
    #[inline]
    pub(crate) fn warm(&self) {
        self.prefetch(false);
        self.prefetch(true);
        if self.inline {
            // The inline path up to the callback, in this (the publishing)
            // thread: the lock, the buffer's look (empty: no call). A
            // message left behind would be delivered, as by any publish.
            if let Some(m) = self.run_inline() {
                tracing::error!(
                    "inline callback of {} panicked during a warm: {m}",
                    self.describe()
                );
            }
        } else if self.has_callback
            && let Some(exec) = self.target.get()
            && exec.idle_wait() == crate::dispatch::IdleWait::BusyPoll
        {
            // Through the queue, although the executor polls the buffer:
            // the rehearsal is the queued entry's run.
            self.queue(exec);
        }
    }

    #[inline]
    pub(crate) fn push_owned(&self, msg: T, expires: u64, origin: Origin) -> Pushed {
        self.push(msg, Received::Owned, expires, origin)
    }

    #[inline]
    pub(crate) fn push_received(&self, msg: Received<T>, expires: u64, origin: Origin) -> Pushed {
        self.push(msg, |m| m, expires, origin)
    }

    #[inline]
    pub(crate) fn push_shared(&self, msg: Arc<T>, expires: u64, origin: Origin) -> Pushed {
        self.push(msg, Received::Shared, expires, origin)
    }

    /// Into the buffer as `wrap(msg)` (see [`Buffer::push_parts`]).
    #[inline]
    fn push<M>(
        &self,
        msg: M,
        wrap: impl FnOnce(M) -> Received<T>,
        expires: u64,
        origin: Origin,
    ) -> Pushed {
        self.count_received();
        let r = self.buffer.push_parts(msg, wrap, expires, origin);
        self.pushed(r)
    }

    /// Into the buffer, counted for the deadline check; keep_all takes up
    /// to `cap` messages (see [`Buffer::push_beyond`]).
    #[inline]
    fn store(&self, entry: Entry<T>, cap: usize) -> Pushed {
        self.count_received();
        self.buffer.push_beyond(entry, cap)
    }

    /// One more message arrived, for the deadline check (counted only
    /// when `qos.deadline` is set): a buffered one or one a polled take
    /// got straight from its link.
    #[inline]
    fn count_received(&self) {
        if self.counts_received {
            self.received_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Push a message from a transport that gives its publisher no
    /// back-pressure (zenoh: `publish` in the other process has returned
    /// `Ok` long ago). Refusing it at `max_samples` would lose it silently
    /// as far as the publisher knows, so a keep_all subscription holds it
    /// beyond the limit, as rmw_zenoh's unbounded keep_all queue does, up
    /// to [`UNPACED_HEADROOM`] times the limit (at least 1,024 more), past
    /// which it is lost, counted and warned about: memory stays bounded
    /// when a reader stalls for good.
    fn push_unpaced(&self, entry: Entry<T>) -> Pushed {
        let limit = self.buffer.limit();
        let cap = limit
            .saturating_mul(UNPACED_HEADROOM)
            .max(limit.saturating_add(1024));
        let r = self.store(entry, cap);
        match r {
            Pushed::Stretched if !self.stretched.swap(true, Ordering::Relaxed) => {
                tracing::warn!(
                    "{}: keep_all is full ({limit} messages, max_samples) and a message came over the network, whose publisher cannot be held back: holding up to {cap} until the reader catches up",
                    self.describe()
                );
            }
            Pushed::Refused if !self.overflowed.swap(true, Ordering::Relaxed) => {
                tracing::warn!(
                    "{}: keep_all holds {cap} messages from the network (max_samples {limit}, and the reader is not taking them): dropping what arrives now, counted in lost()",
                    self.describe()
                );
            }
            _ => {}
        }
        self.pushed(r)
    }

    /// What follows a push: count what was lost, run an inline callback or
    /// wake whoever waits. Always inlined: a few branches and a call,
    /// which LLVM once left out of line (and out of the hot text) for
    /// the shared-memory and relay paths.
    #[inline(always)]
    fn pushed(&self, r: Pushed) -> Pushed {
        match r {
            Pushed::Stored | Pushed::Stretched => {}
            Pushed::Overwrote(n) => {
                self.lost.fetch_add(n as u64, Ordering::Relaxed);
            }
            Pushed::Refused | Pushed::Panicked => {
                self.lost.fetch_add(1, Ordering::Relaxed);
                return r;
            }
        }
        if self.inline {
            if let Some(message) = self.run_inline() {
                *self.inline_panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(message);
                return Pushed::Panicked;
            }
            return r;
        }
        self.signal();
        r
    }

    /// Push without waking anyone (history replay under the graph lock);
    /// the caller calls [`kick`](Self::kick) once the locks are released.
    pub(crate) fn push_quiet(&self, msg: Arc<T>, expires: u64, origin: Origin) {
        let entry = Entry {
            msg: Received::Shared(msg),
            expires,
            origin,
        };
        let lost = match self.buffer.push(entry) {
            Pushed::Stored | Pushed::Stretched => 0,
            Pushed::Overwrote(n) => n as u64,
            Pushed::Refused | Pushed::Panicked => 1,
        };
        if lost > 0 {
            self.lost.fetch_add(lost, Ordering::Relaxed);
        }
    }

    /// Drain the buffer through the callback in this thread. Returns the
    /// first panic message if the callback panicked (the drain goes on
    /// after a panic).
    // Out of line: inlined, its drain made `pushed` too large to inline
    // into the pushes (which then ran outside the hot text).
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn run_inline(&self) -> Option<String> {
        if !self.has_callback {
            return None;
        }
        let cb = &self.callback;
        // SYNC: pairs with the fence after letting go of the lock below:
        // either the holder sees our push when it re-checks, or we get
        // the lock.
        // (myelin-sync's loom model `inline_hand_over_leaves_no_message_behind`.)
        myelin_sync::atomic::fence(Ordering::SeqCst);
        // The first panic; the drain goes on after it: messages other
        // threads left to this holder must not wait for the next publish.
        let mut panicked = None;
        loop {
            // Busy (`None`): the holder drains our message before it
            // returns. (An inline subscription is never bound to a runner:
            // `attach` binds only executors' callbacks.)
            let drained = cb.try_with(|call| {
                let Some(call) = call.as_mut() else {
                    return false;
                };
                let mut entry = MaybeUninit::uninit();
                while self.pop_live_into(&mut entry) {
                    // SAFETY: `pop_live_into` returned true: it wrote `entry`.
                    if let Err(p) = unsafe { call_popped(call, &mut entry, self.node.ctx.pid) } {
                        panicked.get_or_insert_with(|| crate::dispatch::panic_message(&p));
                    }
                }
                true
            });
            if drained != Some(true) {
                return panicked;
            }
            // SYNC: pairs with the fence before `try_with` above.
            myelin_sync::atomic::fence(Ordering::SeqCst);
            if self.buffer.is_empty() {
                return panicked;
            }
        }
    }

    /// The last inline panic, as an error naming this subscription.
    pub(crate) fn take_inline_panic(&self) -> Option<(String, String)> {
        let m = self
            .inline_panic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        Some((self.describe(), m))
    }

    /// Tell whoever waits that the buffer is not empty.
    #[inline]
    fn signal(&self) {
        if self.has_callback {
            if let Some(exec) = self.target.get() {
                // A busy-polling executor finds the message in the buffer
                // itself (`claim`).
                if !exec.polls_for(self as *const Self as *const ()) {
                    self.queue(exec);
                }
            }
        } else {
            // Only subscriptions without a callback have waiters.
            self.waitpoint.notify();
        }
    }

    /// Put this subscription in `exec`'s ready queue with its reserved
    /// reference, unless it is there already (or running): then tell the
    /// run to look at the buffer again before it lets go (`DIRTY`).
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn queue(&self, exec: &ExecShared) {
        // SYNC: a hint; the compare-and-swap decides.
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let next = match s {
                mark::IDLE => mark::MARK | mark::RES,
                mark::SHUT => return,
                // Marked: a read-modify-write even when `DIRTY` is set
                // already, so the run that clears the mark reads it (or a
                // later value) and its re-check sees our push.
                _ => s | mark::DIRTY,
            };
            // SYNC: pairs with the read-modify-writes in `finish`: our push
            // (before this) is seen by its buffer check after it.
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        if s == mark::IDLE {
            // SAFETY: we moved the state from `IDLE` to `MARK | RES`: the
            // reserved reference is ours, and goes into the entry.
            exec.enqueue(unsafe { self.reserved() });
        }
    }

    /// An inline subscription with links that wait to be pumped (shared
    /// memory): publishers in other processes signal the process's inline
    /// pump, whose thread pumps them into this subscription, which runs
    /// the callback there.
    pub(crate) fn start_inline_pump(self: &Arc<Self>) {
        if !self.pumped {
            return;
        }
        let Some(pump) = crate::dispatch::inline_pump() else {
            tracing::warn!(
                "{}: no thread to receive messages from other processes on (could not start one)",
                self.describe()
            );
            return;
        };
        let weak: std::sync::Weak<dyn crate::dispatch::Pump> =
            Arc::downgrade(&(self.clone() as Arc<dyn crate::dispatch::Pump>));
        let word = pump.add_pump(weak);
        for l in self.links.iter() {
            l.set_wake(word);
        }
        // The drop path removes the pump from its target.
        self.set_target(Some(pump.clone()));
        self.pump_links();
    }

    /// Have publishers in other processes signal `word` (a wait set's
    /// slot), or this subscription's own slot again (`None`).
    pub(crate) fn redirect_wake(&self, word: Option<u32>) {
        if !self.pumped || self.has_callback {
            return;
        }
        let word = word.or_else(|| self.waitpoint.event.word(0));
        for l in self.links.iter() {
            l.set_wake(word);
        }
    }

    /// The user's handle dropped: leave the executor (its pump lanes and
    /// polled list) for good, and `also` (an executor an `attach` racing
    /// the drop set: the drop may have read an older one, or cleared the
    /// pointer after the attach set it).
    pub(crate) fn close(&self, also: Option<&ExecShared>) {
        self.closed.store(true, Ordering::SeqCst);
        // Nobody queues it again; the reserved reference, if the
        // subscription holds it, goes (one in an entry is dropped by the
        // entry's run, which finds the state `SHUT`).
        // SYNC: a read-modify-write, ordered with `queue`'s and `finish`'s.
        let s = self.state.swap(mark::SHUT, Ordering::SeqCst);
        if s != mark::SHUT && s & mark::RES == 0 {
            // SAFETY: the state said the subscription held the reserved
            // reference (see `mark`), and our swap took it; the caller
            // holds another (`close` runs from a handle or an `Arc`), so
            // this is not the last.
            unsafe { Arc::decrement_strong_count(self.slot.load(Ordering::Relaxed)) };
        }
        let me = self as *const Self as *const ();
        if let Some(old) = self.target.get() {
            old.remove_pump(me);
        }
        if let Some(e) = also {
            e.remove_pump(me);
            e.remove_polled(me);
        }
        self.set_target(None);
    }

    /// Point this subscription at an executor (or none).
    pub(crate) fn set_target(&self, exec: Option<Arc<ExecShared>>) {
        if let Some(old) = self.target.get()
            && !exec.as_ref().is_some_and(|e| std::ptr::eq(&**e, old))
        {
            old.remove_polled(self as *const Self as *const ());
        }
        self.target.set(exec);
    }

    /// Called by an executor when this subscription is attached to it: make
    /// sure messages buffered before the attachment are not forgotten.
    #[inline]
    pub(crate) fn kick(&self) {
        // The look inlined (after every callback, and mostly empty); what
        // a message left behind costs, out of line.
        if !self.buffer.is_empty() {
            self.kick_pending();
        }
    }

    /// [`kick`](Self::kick) with messages in the buffer.
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn kick_pending(&self) {
        if self.inline {
            if let Some(m) = self.run_inline() {
                tracing::error!(
                    "inline callback of {} panicked during history replay: {m}",
                    self.describe()
                );
            }
        } else {
            self.signal();
        }
    }

    /// The end of a run (`execute`): look at the buffer again and queue
    /// the subscription again while it holds messages, else clear the
    /// mark; the reference the run holds goes back to the subscription
    /// when it clears `MARK | RES` (see [`mark`]), else is dropped.
    // SYNC: a publisher pushes, then marks `DIRTY` (or queues) with a
    // read-modify-write of `state`; the run clears `DIRTY` with one, then
    // looks at the buffer, and clears the mark with a compare-and-swap that
    // fails if a publisher marked `DIRTY` since: every push either precedes
    // a read-modify-write this run reads (and so its buffer check), or
    // follows the clear (and queues the subscription itself). Only
    // read-modify-writes decide, which the loom model
    // `reserved_mark_protocol_loses_no_message_and_no_reference` checks.
    // After a successful clear the run no longer touches `self`: its
    // reference is the subscription's again, which `close` may drop.
    #[inline]
    fn finish(self: Arc<Self>, running: &ExecShared) {
        // The run's reference as a pointer: it ends in the queue, back in
        // the subscription's hand, or dropped, each decided below.
        let me = Arc::into_raw(self);
        // SAFETY: `me` owns a strong count until one of the three below.
        let this = unsafe { &*me };
        let mut s = this.state.load(Ordering::Relaxed);
        loop {
            if s & mark::MARK == 0 || s == mark::SHUT {
                // Not ours to clear: an attach reset it (and kicked what
                // was pending), or the subscription closed.
                // SAFETY: `me`'s count is still the run's (nothing above
                // gave it away).
                drop(unsafe { Arc::from_raw(me) });
                return;
            }
            if s & mark::DIRTY != 0 {
                let clean = s & !mark::DIRTY;
                match this
                    .state
                    .compare_exchange(s, clean, Ordering::SeqCst, Ordering::Relaxed)
                {
                    Ok(_) => s = clean,
                    Err(now) => {
                        s = now;
                        continue;
                    }
                }
            }
            if !this.buffer.is_empty()
                && let Some(exec) = this.target.get()
                && !exec.polls_for(me as *const ())
            {
                // More messages: back to the end of the (current)
                // executor's queue, still marked, with this reference.
                // SAFETY: `me`'s count is still the run's; it goes into the
                // queue (or a clone does, and it is dropped).
                let mine = unsafe { Arc::from_raw(me) };
                if std::ptr::eq(exec, running) {
                    running.enqueue(mine);
                } else {
                    // An executor this run is not on, which lives as long as
                    // the subscription (`target` retains it): our reference
                    // keeps the subscription until the queue has its own.
                    exec.enqueue(mine.clone());
                    drop(mine);
                }
                return;
            }
            // A busy-polling executor claims what is left itself; one
            // without an executor is kicked by the attach that gives it
            // one.
            match this
                .state
                .compare_exchange(s, mark::IDLE, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => {
                    if s & mark::RES == 0 {
                        // A claim's own `Arc` (the subscription kept its
                        // reserved reference).
                        // SAFETY: that `Arc`'s count is the run's own, which
                        // the clear did not hand to the subscription.
                        drop(unsafe { Arc::from_raw(me) });
                    }
                    // Else back in the subscription's hand, as it was
                    // before the publisher queued it.
                    return;
                }
                Err(now) => s = now,
            }
        }
    }

    /// Clear a mark this subscription may keep from an executor it left
    /// (see `attach`); if the reserved reference was in that executor's
    /// entry, the subscription takes a new one (the entry drops its own).
    fn reset_mark(self: &Arc<Self>) {
        let mut s = self.state.load(Ordering::Relaxed);
        while s != mark::IDLE && s != mark::SHUT {
            // SYNC: a read-modify-write, ordered with `queue`'s and
            // `finish`'s; `attach` kicks (re-checks the buffer) after it.
            match self
                .state
                .compare_exchange(s, mark::IDLE, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => {
                    if s & mark::RES != 0 {
                        let _ = Arc::into_raw(self.clone());
                    }
                    return;
                }
                Err(now) => s = now,
            }
        }
    }

    pub(crate) fn describe(&self) -> String {
        format!("subscription {:?} of node {:?}", self.topic, self.node.fqn)
    }
}

/// Run `cb` on the entry popped into `entry`, catching a panic: the
/// callback takes the message where it lies (see [`Call::call`]), and
/// the entry's origin is dropped here after it, also after a panic.
///
/// # Safety
/// `entry` holds an entry (a `pop_live_into` returned true), which this
/// call consumes: the caller treats `entry` as uninitialised afterwards.
///
/// [`Call::call`]: super::callback::Call::call
#[inline(always)]
unsafe fn call_popped<T>(
    cb: &mut Dispatch<T>,
    entry: &mut MaybeUninit<Entry<T>>,
    pid: u32,
) -> std::thread::Result<()> {
    let e = entry.as_mut_ptr();
    // SAFETY: `entry` holds an entry (the caller's contract). Its message
    // goes to the callback, which takes it: it is neither read nor
    // dropped here again, also on a panic.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        cb.call_from(&raw const (*e).msg, &(*e).origin, pid)
    }));
    // SAFETY: the origin is still the entry's, dropped once, here.
    // (`expires` needs no drop.)
    unsafe { std::ptr::drop_in_place(&raw mut (*e).origin) };
    r
}

impl<T: Message> Executable for SubInner<T> {
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn execute(self: Arc<Self>, exec: &ExecShared) -> Result<bool, SpinError> {
        // Not ours any more (dropped, detached or moved while queued): only
        // hand the mark back; `finish` forwards pending messages.
        // No message (a polled take got it first, or a warm's rehearsal):
        // no call.
        let mut entry = MaybeUninit::uninit();
        let called = if self.target.is(exec) && self.has_callback {
            let pid = self.node.ctx.pid;
            let run = |cb: &mut Option<Dispatch<T>>| {
                let cb = cb.as_mut()?;
                // SAFETY: `pop_live_into` returned true: it wrote `entry`.
                self.pop_live_into(&mut entry)
                    .then(|| unsafe { call_popped(cb, &mut entry, pid) })
            };
            // The mark stays set while we run, so the callback is never
            // contended but by the stale entry of an executor this one was
            // moved from: on an executor with one worker, the binding
            // (`attach`) keeps that entry out with plain loads and stores;
            // elsewhere the lock does, with a compare-and-swap.
            // SAFETY: the callback is bound only to executors with one
            // worker (`attach`), which run their entries on that worker's
            // thread, one after the other (their spins take `&mut`), and
            // only those runs write their `running`.
            unsafe { (self.callback).run(Some((exec.token(), &exec.running)), run) }.flatten()
        } else {
            None
        };
        // A keep_all subscription fed from shared memory stops draining its
        // inbox when its buffer is full, and the publisher, refused, does
        // not signal again: the room the callback just made is filled here.
        self.refill();
        let r = match called {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(panic)) => Err(SpinError::CallbackPanicked {
                entity: self.describe(),
                message: crate::dispatch::panic_message(&panic),
            }),
        };
        self.finish(exec);
        r
    }

    fn attach(self: Arc<Self>, exec: Option<Arc<ExecShared>>) {
        if self.pumped {
            if let Some(old) = self.target.get() {
                old.remove_pump(Arc::as_ptr(&self) as *const ());
            }
            // The executor gives this subscription a ready lane; publishers
            // in other processes signal it.
            let word = exec.as_ref().and_then(|e| {
                let weak: std::sync::Weak<dyn crate::dispatch::Pump> =
                    Arc::downgrade(&(self.clone() as Arc<dyn crate::dispatch::Pump>));
                e.add_pump(weak)
            });
            for l in self.links.iter() {
                l.set_wake(word);
            }
        }
        if self.has_callback
            && !self.inline
            && let Some(e) = &exec
        {
            // Looked at by the executor's busy-polling workers (before
            // publishers see the new target and may skip its queue).
            e.add_polled(self.clone());
        }
        let undo = exec.clone();
        // A single-worker executor's token, for the binding below.
        let bind = exec
            .as_ref()
            .filter(|e| e.single_worker())
            .map(|e| e.token());
        self.set_target(exec);
        if self.has_callback && !self.inline {
            // Runs of the executor left (or of this one, re-attached) take
            // the lock again.
            if undo.is_none() {
                // Left by its owner, between its runs (see
                // `Executable::attach`): no barrier.
                // SAFETY: the executor left is idle, its owner calling.
                unsafe { self.callback.unbind_idle() };
            } else {
                // Anything else (not seen: a node joins an executor only
                // after leaving the last): a run in progress keeps the
                // lock until it ends (never waited for: this may be that
                // run's callback).
                self.callback.unbind(|token| {
                    // SAFETY: a binding's token is the address of an
                    // executor that `target` held (only the lines below
                    // bind, to the new target), and `target` keeps every
                    // executor it held alive while this subscription
                    // lives.
                    let old = unsafe { &*(token as *const ExecShared) };
                    old.running.load(Ordering::Acquire)
                });
            }
            // The lock's compare-and-swap is one of a message's few locked
            // instructions; `membarrier` moves its price to attaching.
            // Binding fails (and runs keep the lock) without `membarrier`
            // (its barrier would be a full fence, which saves nothing) or
            // while a run in progress holds the lock.
            if let Some(token) = bind {
                self.callback.bind(token);
            }
        }
        // A mark left by the executor this subscription leaves (queued
        // there, and that queue dropped or never run again) would keep
        // every later executor from being told: the new one starts clear.
        // Should the old one still run its stale entry, `execute` skips
        // the callback (not its target) and hands on what is pending.
        self.reset_mark();
        if self.pumped {
            // Messages that arrived before the executor did.
            self.pump_links();
        }
        self.kick();
        if self.closed.load(Ordering::SeqCst) {
            // The handle dropped while this attach ran: let go again.
            self.close(undo.as_deref());
        }
    }

    fn group(&self) -> &Arc<GroupInner> {
        &self.group
    }

    #[inline]
    fn claim(&self) -> bool {
        // The reserved reference stays with the subscription (`RES`
        // clear): the caller runs its own `Arc`.
        // SYNC: as the compare-and-swap in `queue`: one of the two wins.
        self.unqueued_work()
            && self
                .state
                .compare_exchange(mark::IDLE, mark::MARK, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }

    #[inline]
    fn unqueued_work(&self) -> bool {
        // The mark first: this thread's own line while the executor polls
        // (publishers then leave it alone); the buffer's is the
        // publisher's.
        // SYNC: Relaxed: a hint; `claim`'s compare-and-swap decides.
        self.state.load(Ordering::Relaxed) & mark::MARK == 0 && !self.buffer.is_empty()
    }

    fn unpolled(&self) {
        self.kick();
    }

    fn unclaim(&self) {
        // A claim's mark (`RES` clear) handed back; one with `RES` set is a
        // queued entry's (an attach reset ours meanwhile), not ours.
        // SYNC: as the clear in `finish`; `kick` re-checks after it.
        let mut s = self.state.load(Ordering::Relaxed);
        while s & mark::MARK != 0 && s & mark::RES == 0 && s != mark::SHUT {
            match self
                .state
                .compare_exchange(s, mark::IDLE, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        self.kick();
    }
}

impl<T: Message> crate::dispatch::Pump for SubInner<T> {
    fn pump(self: Arc<Self>) {
        self.pump_links();
        // Marked with nothing behind it: a publisher in another process
        // warming the path (`Publisher::warm`), or a lane shared with a
        // busier inbox. On a busy-polling executor, rehearse the rest of
        // the path as an in-process warm does. (An inline subscription's
        // pump has just run its path: nothing to rehearse.)
        if !self.inline && self.buffer.is_empty() {
            self.warm();
        }
    }
}

impl<T: Message> SubOwner for SubInner<T> {
    fn deliver(
        &self,
        bytes: Arrived<'_>,
        paced: bool,
        lifetime: Option<std::time::Duration>,
        origin: Origin,
    ) {
        let Some((msg, expires)) = self.arrived(bytes, lifetime) else {
            return;
        };
        if paced {
            self.push_received(msg, expires, origin);
        } else {
            self.push_unpaced(Entry {
                msg,
                expires,
                origin,
            });
        }
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn has_room(&self) -> bool {
        self.buffer.has_room()
    }

    fn count_lost(&self, n: u64) {
        self.lost.fetch_add(n, Ordering::Relaxed);
    }
}

impl<T: Message> EndpointEvents for SubInner<T> {
    fn incompatible_qos(&self, policy: QosPolicy) {
        let st = self.incompatible.record(policy, self.events.is_some());
        self.emit(SubscriptionEvent::IncompatibleQos(st));
    }

    fn incompatible_type(&self) {
        let st = self.incompatible_type.record(self.events.is_some());
        self.emit(SubscriptionEvent::IncompatibleType(st));
    }

    fn links_changed(&self) {
        self.refresh_matched();
        self.refresh_remote_liveliness();
    }
}

#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::offset_of;

    /// The `Arc`'s two counts, ahead of the value in its allocation.
    const ARC_COUNTS: usize = 16;

    /// The fields every delivery reads or writes: name, offset, length.
    fn hot_fields() -> [(&'static str, usize, usize); 9] {
        [
            ("state", offset_of!(SubInner<u64>, state), 1),
            ("inline", offset_of!(SubInner<u64>, inline), 1),
            ("pumped", offset_of!(SubInner<u64>, pumped), 1),
            (
                "counts_received",
                offset_of!(SubInner<u64>, counts_received),
                1,
            ),
            ("target", offset_of!(SubInner<u64>, target), 8),
            ("slot", offset_of!(SubInner<u64>, slot), 8),
            ("node", offset_of!(SubInner<u64>, node), 8),
            (
                "callback",
                offset_of!(SubInner<u64>, callback),
                std::mem::size_of::<SoloLock<Option<Dispatch<u64>>>>(),
            ),
            (
                "buffer",
                offset_of!(SubInner<u64>, buffer),
                std::mem::size_of::<Buffer<u64>>(),
            ),
        ]
    }

    /// The fields every message touches, with the `Arc`'s two counts
    /// ahead of them, take 128 bytes at most: two lines when the
    /// allocation starts a line. `lost` and `received_count` are written
    /// only when a message is lost or with a deadline, and stay out of
    /// them.
    #[test]
    fn the_fields_every_message_touches_share_two_cache_lines() {
        for (name, at, len) in hot_fields() {
            assert!(ARC_COUNTS + at + len <= 128, "{name} at byte {at}");
        }
    }

    /// A fan-out's prefetch asks for the lines every field a push reads
    /// lies on (taking the allocation to start a line), `callback_at`
    /// among them: a reordered struct fails here rather than prefetching
    /// the wrong lines unseen.
    #[test]
    fn the_prefetch_asks_for_every_line_a_push_reads() {
        let line_of = |at: usize| (ARC_COUNTS + at) / 64;
        let prefetched: Vec<usize> = SubInner::<u64>::PREFETCHED
            .iter()
            // Offsets from the value's start: none is before the counts.
            .map(|&o| (ARC_COUNTS as isize + o) as usize / 64)
            .collect();
        let callback_at = ("callback_at", offset_of!(SubInner<u64>, callback_at), 8);
        for (name, at, len) in hot_fields().into_iter().chain([callback_at]) {
            for line in line_of(at)..=line_of(at + len - 1) {
                assert!(
                    prefetched.contains(&line),
                    "{name} at byte {at} is on line {line}, not prefetched"
                );
            }
        }
    }
}
