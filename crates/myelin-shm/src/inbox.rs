//! A subscription's inbox: the per-subscription buffer carried
//! across processes.
//!
//! The subscriber process creates `s_<pid>_<id>`: its endpoint description
//! (see [`crate::endpoint`]), the wake-up slot its executor sleeps on, and
//! a number of connection blocks it chooses ([`DEFAULT_CONNECTIONS`], at
//! most [`MAX_CONNECTIONS`]), one per publisher it can take at once. A publisher in another process
//! claims a free block and then owns its writing side:
//!
//! * a **descriptor ring** (publisher → subscriber) of `u64` descriptors
//!   (pool, chunk, length). `head` is written by the publisher only; `tail`
//!   is advanced by compare-and-swap by the reader *and*, for keep-last when
//!   the ring is full, by the publisher, which thereby takes the oldest
//!   descriptor back (counted lost). Whoever wins the CAS owns that
//!   descriptor, so a descriptor is consumed exactly once and the publisher
//!   never waits for the reader.
//! * a **return ring** (subscriber → publisher) through which the reader
//!   hands back the chunks it is done with, tagged with the connection's
//!   generation so a return can never land in a later connection.
//!
//! The publisher keeps, in its private memory, the set of chunks lent on
//! each connection: a return of anything else is ignored, and when the
//! subscriber's process dies the whole set is reclaimed.
//!
//! Everything read from the segment is untrusted on both sides: indices are
//! masked by capacities each side knows privately, counters are checked, and
//! a bad value is reported and skipped.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::ShmError;
use crate::endpoint::{EndpointInfo, INFO_LEN, INFO_OFF};
use crate::segment::*;

/// Publishers an inbox takes at once unless its subscription asks for more.
pub const DEFAULT_CONNECTIONS: usize = 16;
/// The most publishers any inbox takes at once.
pub const MAX_CONNECTIONS: usize = 1024;
const OFF_WAKE_SLOT: usize = INFO_OFF + INFO_LEN;
const OFF_DESC_CAP: usize = OFF_WAKE_SLOT + 4;
const OFF_RET_CAP: usize = OFF_WAKE_SLOT + 8;
const OFF_TL: usize = OFF_WAKE_SLOT + 12;
const OFF_CONNS: usize = OFF_WAKE_SLOT + 16;
/// Set when the subscription leaves ([`Inbox::leave`]): a publisher
/// handing its pools over then takes back the share of this reader.
const OFF_GONE: usize = OFF_WAKE_SLOT + 20;
/// Bumped by a publisher after each claim of a connection block: a
/// reader looks at every block only when this moved since its last look
/// ([`Inbox::claims`]), and otherwise only at the blocks it found claimed.
const OFF_CLAIMS: usize = OFF_WAKE_SLOT + 24;
const CONN_BASE: usize = 4096;
const CTRL: usize = 256;
// Connection block fields (relative to the block).
/// The largest believable rise of a connection's lost-message counter
/// between two reads (a publisher dropping 4 billion messages between two
/// passes of its reader is a corrupt counter, not a fast publisher).
pub const MAX_LOST_STEP: u64 = 1 << 32;

const C_CLAIM: usize = 0;
const C_GEN: usize = 8;
const C_PUB_ID: usize = 16;
/// The publisher's manual-by-topic liveliness lease in ns (0: automatic,
/// alive while connected). Written once at the claim.
const C_LEASE: usize = 24;
const C_HEAD: usize = 64;
const C_LOST: usize = 72;
/// When the publisher last asserted its liveliness (`CLOCK_MONOTONIC` ns);
/// on the writer's line, which it writes on every push anyway.
const C_ALIVE: usize = 80;
/// Set by a publisher that left with descriptors still in this ring: the
/// reader owes its chunk pools one release once it is done with them
/// ([`Inbox::take_owed`], [`crate::pool::release_handed_off`]).
const C_OWES: usize = 88;
const C_TAIL: usize = 128;
const C_RET_HEAD: usize = 192;
const C_RET_TAIL: usize = 200;
/// Most descriptors per connection ring.
pub const MAX_DESC: u32 = 1 << 16;

const STATE_CLAIMING: u64 = 1;
const STATE_ACTIVE: u64 = 2;
const STATE_CLOSED: u64 = 3;

/// A descriptor: where a message's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    /// Which of the publisher's pools.
    pub pool: u8,
    /// The chunk in that pool (< 2^24).
    pub chunk: u32,
    /// The message's length in bytes.
    pub len: u32,
}

impl Desc {
    /// Pack into one word.
    pub fn pack(self) -> u64 {
        (u64::from(self.len) << 32)
            | (u64::from(self.pool) << 24)
            | u64::from(self.chunk & 0xff_ffff)
    }

    /// Unpack (any word gives some descriptor; the pool checks it).
    pub fn unpack(w: u64) -> Desc {
        Desc {
            len: (w >> 32) as u32,
            pool: (w >> 24) as u8,
            chunk: (w & 0xff_ffff) as u32,
        }
    }

    /// The chunk's identity within the publisher (pool and index).
    pub fn key(self) -> u32 {
        (u32::from(self.pool) << 24) | (self.chunk & 0xff_ffff)
    }
}

/// A connection block: control words, the descriptor ring, then the
/// return ring. A descriptor slot is [`SLOT`] bytes: the descriptor, its
/// expiry word and its send-time word side by side, so that a message's
/// slot is one cache line for the reader to fetch (two slots per line),
/// not three.
fn layout(desc_cap: u32, ret_cap: u32) -> usize {
    (CTRL + SLOT * desc_cap as usize + 8 * ret_cap as usize).div_ceil(64) * 64
}

/// Bytes per descriptor slot: descriptor, expiry, send time, one spare
/// word (a power of two: slots never straddle a cache line).
const SLOT: usize = 32;

/// A descriptor taken from a connection's ring ([`Inbox::pop_next`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Popped {
    /// Where the message's bytes are.
    pub desc: Desc,
    /// What the publisher wrote beside it.
    pub stamp: Stamp,
    /// More descriptors waited behind this one when it was taken (as of
    /// the ring's head then: one pushed since is not counted).
    pub more: bool,
}

/// What a publisher writes beside each descriptor: when the message
/// expires and when it was sent. Untrusted like everything in the
/// segment: a wrong value only misinforms about this publisher's own
/// message (it expires early or late, or shows a wrong send time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// When the message stops being deliverable: ns on `CLOCK_MONOTONIC`,
    /// which every process of the host shares ([`crate::monotonic_ns`]);
    /// 0: never.
    pub expires: u64,
    /// When it was published: ns since the Unix epoch on the publisher's
    /// system clock (`CLOCK_REALTIME`, as ROS 2 stamps messages); 0:
    /// unknown.
    pub sent_ns: i64,
}

/// The state of a connection block as the reader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnState {
    /// Nobody.
    Free,
    /// A publisher is setting it up.
    Claiming,
    /// A publisher (process `pid`, endpoint `pub_id`) writes it; `generation`
    /// changes with every new claim.
    Active {
        /// The publisher's process.
        pid: u32,
        /// The publisher endpoint id.
        pub_id: u64,
        /// The claim generation.
        generation: u32,
    },
    /// The publisher is gone; drain, then [`Inbox::free`].
    Closed {
        /// The publisher's process.
        pid: u32,
        /// The publisher endpoint id.
        pub_id: u64,
        /// The claim generation.
        generation: u32,
    },
}

struct Geometry {
    desc_cap: u32,
    ret_cap: u32,
    stride: usize,
    /// Connection blocks.
    conns: usize,
}

impl Geometry {
    fn conn(&self, i: usize) -> usize {
        CONN_BASE + i * self.stride
    }
    /// Descriptor slot `seq` of block `i`: the descriptor, then (at +8)
    /// its expiry word and (at +16) its send-time word.
    fn desc(&self, i: usize, seq: u64) -> usize {
        self.desc_at(i, (seq % u64::from(self.desc_cap)) as usize)
    }
    /// The `k`-th descriptor slot of block `i` (`k < desc_cap`).
    fn desc_at(&self, i: usize, k: usize) -> usize {
        self.conn(i) + CTRL + SLOT * k
    }
    fn ret(&self, i: usize, seq: u64) -> usize {
        self.conn(i)
            + CTRL
            + SLOT * self.desc_cap as usize
            + 8 * (seq % u64::from(self.ret_cap)) as usize
    }
}

/// The subscriber's side: owns the segment.
pub struct Inbox {
    seg: Segment,
    geo: Geometry,
    /// What the header says, kept to check and repair it
    /// ([`repair`](Inbox::repair)).
    info: EndpointInfo,
    /// The wake slot and history flag last set (mirrors of header words).
    wake_slot: AtomicU32,
    wants_history: AtomicU32,
}

impl Inbox {
    /// Create the inbox of subscription `info.id` in `domain`, with rings
    /// of `desc_cap` descriptors and `ret_cap` returns per connection, for
    /// [`DEFAULT_CONNECTIONS`] publishers.
    pub fn create(
        domain: u32,
        info: &EndpointInfo,
        desc_cap: u32,
        ret_cap: u32,
    ) -> Result<Inbox, ShmError> {
        Self::create_for(domain, info, desc_cap, ret_cap, DEFAULT_CONNECTIONS)
    }

    /// [`create`](Self::create) for `connections` publishers at once (1 to
    /// [`MAX_CONNECTIONS`]; each costs one block of rings).
    pub fn create_for(
        domain: u32,
        info: &EndpointInfo,
        desc_cap: u32,
        ret_cap: u32,
        connections: usize,
    ) -> Result<Inbox, ShmError> {
        let name = info.key().segment_name(domain)?;
        let desc_cap = desc_cap.clamp(1, MAX_DESC);
        let ret_cap = ret_cap.clamp(1, 4 * MAX_DESC);
        let conns = connections.clamp(1, MAX_CONNECTIONS);
        let stride = layout(desc_cap, ret_cap);
        let seg = Segment::create_fresh(&name, CONN_BASE + conns * stride)?;
        info.write(&seg);
        seg.atomic_u32(OFF_CONNS)
            .store(conns as u32, Ordering::Relaxed);
        seg.atomic_u32(OFF_WAKE_SLOT)
            .store(u32::MAX, Ordering::Relaxed);
        seg.atomic_u32(OFF_DESC_CAP)
            .store(desc_cap, Ordering::Relaxed);
        seg.atomic_u32(OFF_RET_CAP)
            .store(ret_cap, Ordering::Relaxed);
        seg.publish_header(KIND_INBOX, info.pid);
        Ok(Inbox {
            seg,
            geo: Geometry {
                desc_cap,
                ret_cap,
                stride,
                conns,
            },
            info: info.clone(),
            wake_slot: AtomicU32::new(u32::MAX),
            wants_history: AtomicU32::new(0),
        })
    }

    /// Check the header and endpoint description that publishers read
    /// (another process of this user may have damaged them: then discovery
    /// skips this inbox and its publishers disconnect, and the subscription
    /// would go silent). If anything differs from what this process wrote,
    /// write it all again and return true: publishers find the inbox on
    /// their next pass and connect again.
    pub fn repair(&self) -> bool {
        let seg = &self.seg;
        let intact = seg.atomic_u64(OFF_MAGIC).load(Ordering::Acquire) == MAGIC
            && seg.atomic_u32(OFF_VERSION).load(Ordering::Relaxed) == VERSION
            && seg.atomic_u32(OFF_KIND).load(Ordering::Relaxed) == KIND_INBOX
            && seg.atomic_u64(OFF_TOTAL_LEN).load(Ordering::Relaxed) == seg.len() as u64
            && seg.atomic_u32(OFF_OWNER_PID).load(Ordering::Relaxed) == self.info.pid
            && seg.atomic_u32(OFF_DESC_CAP).load(Ordering::Relaxed) == self.geo.desc_cap
            && seg.atomic_u32(OFF_RET_CAP).load(Ordering::Relaxed) == self.geo.ret_cap
            && seg.atomic_u32(OFF_CONNS).load(Ordering::Relaxed) as usize == self.geo.conns
            && seg.atomic_u32(OFF_WAKE_SLOT).load(Ordering::Relaxed)
                == self.wake_slot.load(Ordering::Relaxed)
            && seg.atomic_u32(OFF_TL).load(Ordering::Relaxed)
                == self.wants_history.load(Ordering::Relaxed)
            && EndpointInfo::read(seg).is_ok_and(|i| i == self.info);
        if intact {
            return false;
        }
        // SYNC: the magic goes first (Relaxed zero), then the rest, then
        // `publish_header` stores the magic with Release: a reader never
        // accepts a half-rewritten header.
        seg.atomic_u64(OFF_MAGIC).store(0, Ordering::Relaxed);
        self.info.write(seg);
        seg.atomic_u32(OFF_DESC_CAP)
            .store(self.geo.desc_cap, Ordering::Relaxed);
        seg.atomic_u32(OFF_RET_CAP)
            .store(self.geo.ret_cap, Ordering::Relaxed);
        seg.atomic_u32(OFF_CONNS)
            .store(self.geo.conns as u32, Ordering::Relaxed);
        seg.atomic_u32(OFF_TL).store(
            self.wants_history.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        seg.atomic_u32(OFF_WAKE_SLOT)
            .store(self.wake_slot.load(Ordering::Relaxed), Ordering::SeqCst);
        seg.publish_header(KIND_INBOX, self.info.pid);
        true
    }

    /// Remove the inbox's name now: publishers stop finding it, while
    /// messages this process still reads from it stay valid (the
    /// subscription is gone; its last messages may still be in use).
    pub fn unlink(&self) {
        self.seg.unlink();
    }

    /// The segment's name (what publishers connect to).
    pub fn path(&self) -> String {
        self.seg.path_str()
    }

    /// Tell publishers which word of this process's wake table to signal
    /// (a slot and a ready lane, see [`crate::wake::wake_word`]; `u32::MAX`:
    /// none, nobody sleeps on this inbox).
    pub fn set_wake_slot(&self, slot: u32) {
        // SYNC: SeqCst: a publisher that pushes after this store signals the
        // new slot; one that read the old slot signalled the old executor,
        // which the caller re-checks after moving.
        self.wake_slot.store(slot, Ordering::Relaxed);
        self.seg
            .atomic_u32(OFF_WAKE_SLOT)
            .store(slot, Ordering::SeqCst);
    }

    /// Ask publishers for their transient-local history (set before the
    /// inbox is announced).
    pub fn set_wants_history(&self, yes: bool) {
        self.wants_history.store(u32::from(yes), Ordering::Relaxed);
        self.seg
            .atomic_u32(OFF_TL)
            .store(u32::from(yes), Ordering::Relaxed);
    }

    /// How many publishers this inbox takes at once (its connection
    /// blocks).
    pub fn connections(&self) -> usize {
        self.geo.conns
    }

    /// How many times publishers have claimed a connection block of this
    /// inbox (wrapping): while it has not moved, no block became claimed
    /// (a block a publisher claims is in its claimed state before the count
    /// moves). A publisher that claims without counting (a broken one)
    /// is seen at its reader's next full look, as after a dead-process
    /// check; the count's value is never trusted beyond "it moved".
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn claims(&self) -> u64 {
        // SYNC: Acquire pairs with the publisher's Release increment after
        // its claim: the claim word's store happens-before.
        self.seg.atomic_u64(OFF_CLAIMS).load(Ordering::Acquire)
    }

    /// The state of connection block `i` (< [`connections`](Self::connections)).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn state(&self, i: usize) -> ConnState {
        // SYNC: Acquire pairs with the publisher's Release store of the
        // claim word: the block's reset happens-before.
        let claim = self
            .seg
            .atomic_u64(self.geo.conn(i) + C_CLAIM)
            .load(Ordering::Acquire);
        // A free block (most of them, on every pass of a reader) costs the
        // one load.
        match claim & 0xff {
            0 => return ConnState::Free,
            STATE_CLAIMING => return ConnState::Claiming,
            _ => {}
        }
        let pid = (claim >> 32) as u32;
        let pub_id = self
            .seg
            .atomic_u64(self.geo.conn(i) + C_PUB_ID)
            .load(Ordering::Relaxed);
        let generation = self
            .seg
            .atomic_u32(self.geo.conn(i) + C_GEN)
            .load(Ordering::Relaxed);
        match claim & 0xff {
            STATE_ACTIVE => ConnState::Active {
                pid,
                pub_id,
                generation,
            },
            _ => ConnState::Closed {
                pid,
                pub_id,
                generation,
            },
        }
    }

    /// Whether the publisher of connection `i` counts alive at `now` (ns
    /// on `CLOCK_MONOTONIC`): always for an automatic one, and for a
    /// manual-by-topic one while its last assertion is within its lease
    /// ([`InboxWriter::connect_offering`], [`InboxWriter::assert_alive`]). The words are the publisher's
    /// to write: garbage gives some answer, never a fault.
    pub fn alive(&self, i: usize, now: u64) -> bool {
        let c = self.geo.conn(i);
        let lease = self.seg.atomic_u64(c + C_LEASE).load(Ordering::Relaxed);
        let last = self.seg.atomic_u64(c + C_ALIVE).load(Ordering::Relaxed);
        lease == 0 || now.saturating_sub(last) <= lease
    }

    /// Take the oldest descriptor of connection `i`. A bad ring state
    /// (written by a broken publisher) is reported, and the reader skips
    /// to a sane position.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn pop(&self, i: usize) -> Result<Option<Desc>, ShmError> {
        Ok(self.pop_stamped(i)?.map(|(d, _)| d))
    }

    /// [`pop`](Self::pop), with the [`Stamp`] the publisher wrote beside
    /// the descriptor ([`InboxWriter::push_stamped`]).
    #[inline]
    pub fn pop_stamped(&self, i: usize) -> Result<Option<(Desc, Stamp)>, ShmError> {
        Ok(self.pop_next(i)?.map(|p| (p.desc, p.stamp)))
    }

    /// [`pop_stamped`](Self::pop_stamped), saying also whether more
    /// descriptors waited behind the one taken ([`Popped::more`]): a
    /// reader that takes one message and hands it over when it is the
    /// only one need not ask the ring again.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn pop_next(&self, i: usize) -> Result<Option<Popped>, ShmError> {
        let c = self.geo.conn(i);
        let tail = self.seg.atomic_u64(c + C_TAIL);
        let head = self.seg.atomic_u64(c + C_HEAD);
        loop {
            // SYNC: Acquire on both: pairs with the publisher's Release
            // store of head (descriptor and chunk written before) and with
            // its tail CAS.
            let t = tail.load(Ordering::Acquire);
            // The slot's line asked for beside head's (see `pending_in`).
            let slot = self.geo.desc(i, t);
            self.seg.prefetch(slot);
            let h = head.load(Ordering::Acquire);
            if t == h {
                return Ok(None);
            }
            let cap = u64::from(self.geo.desc_cap);
            if t > h || h - t > cap {
                return Err(self.bad_indices(tail, t, h, cap));
            }
            let d = self.seg.atomic_u64(slot).load(Ordering::Relaxed);
            let stamp = Stamp {
                expires: self.seg.atomic_u64(slot + 8).load(Ordering::Relaxed),
                sent_ns: self.seg.atomic_u64(slot + 16).load(Ordering::Relaxed) as i64,
            };
            // SYNC: AcqRel: the descriptor and stamp loads above are
            // ordered before the claim (release), so a publisher that
            // reuses the slot after seeing our new tail cannot have
            // written what we read.
            if tail
                .compare_exchange(t, t + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(Some(Popped {
                    desc: Desc::unpack(d),
                    stamp,
                    more: h - t > 1,
                }));
            }
        }
    }

    /// A ring whose indices a broken publisher wrote (`t > h`, or more
    /// than `cap` apart): the reader skips to head and reports it.
    #[cold]
    #[inline(never)]
    fn bad_indices(&self, tail: &AtomicU64, t: u64, h: u64, cap: u64) -> ShmError {
        let _ = tail.compare_exchange(t, h, Ordering::AcqRel, Ordering::Acquire);
        ShmError::Corrupt {
            path: self.seg.path_str(),
            what: "ring indices (head - tail)",
            value: h.wrapping_sub(t),
            limit: cap,
        }
    }

    /// Whether connection `i` has descriptors waiting.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn has_data(&self, i: usize) -> bool {
        self.pending_in(i)
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    fn pending_in(&self, i: usize) -> bool {
        let c = self.geo.conn(i);
        let t = self.seg.atomic_u64(c + C_TAIL).load(Ordering::Acquire);
        // The slot the next message lands in: its line is on its way while
        // head's is (a poller that sees head move then reads a line it
        // already asked for, not a second one after the first).
        self.seg.prefetch(self.geo.desc(i, t));
        t != self.seg.atomic_u64(c + C_HEAD).load(Ordering::Acquire)
    }

    /// Messages the publisher of connection `i` dropped for this inbox
    /// (as the publisher wrote it: see [`lost_since`](Self::lost_since)).
    #[inline]
    pub fn lost(&self, i: usize) -> u64 {
        self.seg
            .atomic_u64(self.geo.conn(i) + C_LOST)
            .load(Ordering::Relaxed)
    }

    /// Messages the publisher of connection `i` dropped since the count
    /// was `seen` (which becomes the current count). The counter is written
    /// by another process: one that went backwards, or jumped by more than
    /// [`MAX_LOST_STEP`] at once, is [`ShmError::Corrupt`], and nothing is
    /// counted for it (`seen` resynchronises, so the next step counts
    /// again).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn lost_since(&self, i: usize, seen: &mut u64) -> Result<u64, ShmError> {
        let now = self.lost(i);
        // Nothing lost since the last look: every pass, nearly always.
        if now == *seen {
            return Ok(0);
        }
        self.lost_step(now, seen)
    }

    /// [`lost_since`](Self::lost_since) once the counter moved.
    #[inline(never)]
    fn lost_step(&self, now: u64, seen: &mut u64) -> Result<u64, ShmError> {
        let before = std::mem::replace(seen, now);
        match now.checked_sub(before) {
            Some(step) if step <= MAX_LOST_STEP => Ok(step),
            _ => Err(ShmError::Corrupt {
                path: self.seg.path_str(),
                what: "lost-message counter step",
                value: now.wrapping_sub(before),
                limit: MAX_LOST_STEP,
            }),
        }
    }

    /// Hand chunk `key` back to the publisher of connection `i`, claim
    /// generation `generation`. Returns false (and the chunk stays lent until the
    /// publisher reclaims the connection) if the connection changed hands
    /// or its return ring is full. The caller serialises calls per
    /// connection.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn give_back(&self, i: usize, generation: u32, key: u32) -> bool {
        let c = self.geo.conn(i);
        match self.state(i) {
            ConnState::Active { generation: g, .. } if g == generation => {}
            _ => return false,
        }
        let rh = self.seg.atomic_u64(c + C_RET_HEAD);
        let h = rh.load(Ordering::Relaxed);
        // SYNC: Acquire pairs with the publisher's Release store of ret_tail
        // (it has read the slots before).
        let t = self.seg.atomic_u64(c + C_RET_TAIL).load(Ordering::Acquire);
        if h.wrapping_sub(t) >= u64::from(self.geo.ret_cap) {
            return false;
        }
        self.seg.atomic_u64(self.geo.ret(i, h)).store(
            (u64::from(generation) << 32) | u64::from(key),
            Ordering::Relaxed,
        );
        // SYNC: Release: the slot above before the publisher's Acquire load.
        rh.store(h.wrapping_add(1), Ordering::Release);
        true
    }

    /// Whether the publisher of connection block `i` handed its chunk pools
    /// to this reader when it left ([`InboxWriter::hand_off`]); true once
    /// per hand-off. The caller then releases them
    /// ([`crate::pool::release_handed_off`]) when it no longer needs to
    /// map them: after draining the block, or when the subscription goes.
    pub fn take_owed(&self, i: usize) -> bool {
        if i >= self.geo.conns {
            return false;
        }
        // SYNC: AcqRel, with `leave` and the writer's swaps (see
        // `InboxWriter::hand_off`); it also acquires the writer's holder
        // counts before the release.
        self.seg
            .atomic_u64(self.geo.conn(i) + C_OWES)
            .swap(0, Ordering::AcqRel)
            != 0
    }

    /// The subscription is leaving: publishers that hand their pools over
    /// from now on take this reader's share back themselves. The caller
    /// then collects what was handed to it before ([`take_owed`](Self::take_owed)
    /// on every block).
    pub fn leave(&self) {
        // SYNC: AcqRel read-modify-write, before the caller's swaps of the
        // flags: see `InboxWriter::hand_off`.
        self.seg.atomic_u32(OFF_GONE).swap(1, Ordering::AcqRel);
    }

    /// Release connection block `i` after its publisher closed or died (the
    /// caller has drained it). Only if it is still in state `expected`.
    pub fn free(&self, i: usize, expected: ConnState) {
        let c = self.geo.conn(i);
        let w = self.seg.atomic_u64(c + C_CLAIM);
        let cur = w.load(Ordering::Acquire);
        if self.state(i) == expected {
            // No writer writes a block it closed (or whose process died):
            // forget its liveliness, so that a publisher of an older
            // version, which does not write these words, claiming the
            // block next counts as automatic. Before the claim's release.
            self.seg.atomic_u64(c + C_LEASE).store(0, Ordering::Relaxed);
            self.seg.atomic_u64(c + C_ALIVE).store(0, Ordering::Relaxed);
            let _ = w.compare_exchange(cur, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").field("path", &self.path()).finish()
    }
}

/// What [`InboxWriter::push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Stored.
    Stored,
    /// Stored after taking back the oldest descriptor (keep-last), which the
    /// caller releases.
    Replaced(Desc),
    /// Refused: the ring is full (keep-all), or the subscriber holds as many
    /// chunks as it may.
    Full,
}

/// The publisher's side of one connection block.
pub struct InboxWriter {
    seg: Segment,
    geo: Geometry,
    idx: usize,
    generation: u32,
    claim: u64,
    /// What this writer put in each ring slot (the segment's copy is not
    /// trusted).
    shadow: Vec<u64>,
    head: u64,
    /// The ring's tail as last read (it only grows): while `head` is less
    /// than a ring ahead of it, a push has room without reading the tail
    /// again (a cache line the reader writes).
    tail_seen: u64,
    ret_tail: u64,
    info: EndpointInfo,
    wants_history: bool,
}

impl InboxWriter {
    /// Claim a connection block in the inbox `name` for publisher `pub_id`
    /// of this process. Checks the inbox's type; `Ok(None)` if all blocks
    /// are taken.
    pub fn connect(
        name: &SegmentName,
        pub_id: u64,
        type_hash: u64,
    ) -> Result<Option<InboxWriter>, ShmError> {
        Self::connect_offering(name, pub_id, type_hash, 0, 0)
    }

    /// [`connect`](Self::connect) for a publisher with manual-by-topic
    /// liveliness: the reader counts it alive while its last assertion
    /// (`last` at first, then [`assert_alive`](Self::assert_alive); ns on
    /// `CLOCK_MONOTONIC`) is at most `lease_ns` old ([`Inbox::alive`]). A
    /// lease of 0 means automatic: alive while connected.
    pub fn connect_offering(
        name: &SegmentName,
        pub_id: u64,
        type_hash: u64,
        lease_ns: u64,
        last: u64,
    ) -> Result<Option<InboxWriter>, ShmError> {
        let seg = Segment::open_kind(name, KIND_INBOX)?;
        let info = EndpointInfo::read(&seg)?;
        let any = info.type_hash == crate::endpoint::ANY_TYPE
            && info.type_name == crate::endpoint::ANY_TYPE_NAME;
        if info.type_hash != type_hash && !any {
            return Err(ShmError::TypeMismatch {
                path: seg.path_str(),
                expected: String::new(),
                expected_hash: type_hash,
                found: info.type_name,
                found_hash: info.type_hash,
            });
        }
        let desc_cap = seg.atomic_u32(OFF_DESC_CAP).load(Ordering::Relaxed);
        let ret_cap = seg.atomic_u32(OFF_RET_CAP).load(Ordering::Relaxed);
        let conns = seg.atomic_u32(OFF_CONNS).load(Ordering::Relaxed) as usize;
        let stride = layout(desc_cap.max(1), ret_cap.max(1));
        if desc_cap == 0
            || desc_cap > MAX_DESC
            || ret_cap == 0
            || ret_cap > 4 * MAX_DESC
            || !(1..=MAX_CONNECTIONS).contains(&conns)
            || seg.len() != CONN_BASE + conns * stride
        {
            return Err(ShmError::BadHeader {
                path: seg.path_str(),
                what: format!(
                    "inbox of {desc_cap}/{ret_cap} x {conns} in {} bytes",
                    seg.len()
                ),
            });
        }
        let geo = Geometry {
            desc_cap,
            ret_cap,
            stride,
            conns,
        };
        let pid = u64::from(std::process::id());
        for idx in 0..conns {
            let c = geo.conn(idx);
            let w = seg.atomic_u64(c + C_CLAIM);
            let claiming = (pid << 32) | STATE_CLAIMING;
            if w.compare_exchange(0, claiming, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            let generation = seg
                .atomic_u32(c + C_GEN)
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_add(1);
            for off in [C_HEAD, C_LOST, C_OWES, C_TAIL, C_RET_HEAD, C_RET_TAIL] {
                seg.atomic_u64(c + off).store(0, Ordering::Relaxed);
            }
            seg.atomic_u64(c + C_LEASE)
                .store(lease_ns, Ordering::Relaxed);
            seg.atomic_u64(c + C_ALIVE).store(last, Ordering::Relaxed);
            seg.atomic_u64(c + C_PUB_ID)
                .store(pub_id, Ordering::Relaxed);
            let claim = (pid << 32) | STATE_ACTIVE;
            // SYNC: Release: the reset above happens-before a reader's
            // Acquire load of the claim word.
            w.store(claim, Ordering::Release);
            // SYNC: Release, after the claim: a reader that sees the new
            // count (Acquire, `Inbox::claims`) then sees this block claimed.
            seg.atomic_u64(OFF_CLAIMS).fetch_add(1, Ordering::Release);
            let wants_history = seg.atomic_u32(OFF_TL).load(Ordering::Relaxed) == 1;
            return Ok(Some(InboxWriter {
                shadow: vec![0; desc_cap as usize],
                seg,
                geo,
                idx,
                generation,
                claim,
                head: 0,
                tail_seen: 0,
                ret_tail: 0,
                info,
                wants_history,
            }));
        }
        Ok(None)
    }

    /// The subscription this connection feeds.
    pub fn info(&self) -> &EndpointInfo {
        &self.info
    }

    /// Whether the subscription asked for transient-local history.
    pub fn wants_history(&self) -> bool {
        self.wants_history
    }

    /// The descriptor ring's capacity.
    pub fn capacity(&self) -> u32 {
        self.geo.desc_cap
    }

    /// Most chunks the subscriber may hold at once on this connection
    /// (the return ring's capacity).
    pub fn max_lent(&self) -> u32 {
        self.geo.ret_cap
    }

    /// The wake word (slot and lane) the subscriber asks to be signalled
    /// on; `u32::MAX` for none.
    #[inline]
    pub fn wake_slot(&self) -> u32 {
        self.seg.atomic_u32(OFF_WAKE_SLOT).load(Ordering::SeqCst)
    }

    /// Whether the block is still ours (a broken subscriber could have
    /// cleared it).
    pub fn still_ours(&self) -> bool {
        self.seg
            .atomic_u64(self.geo.conn(self.idx) + C_CLAIM)
            .load(Ordering::Relaxed)
            == self.claim
    }

    /// Push a descriptor. With `overwrite` (keep-last) a full ring gives
    /// back its oldest descriptor instead of refusing.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn push(&mut self, d: Desc, overwrite: bool) -> Pushed {
        self.push_stamped(d, Stamp::default(), overwrite)
    }

    /// [`push`](Self::push) a message with when it expires and when it was
    /// sent, for the reader's [`Inbox::pop_stamped`].
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn push_stamped(&mut self, d: Desc, stamp: Stamp, overwrite: bool) -> Pushed {
        let c = self.geo.conn(self.idx);
        let cap = u64::from(self.geo.desc_cap);
        let tail = self.seg.atomic_u64(c + C_TAIL);
        let mut replaced = None;
        // Room by the tail read before: the slot to write was read out
        // before that tail was (whose Acquire load ordered it before us).
        while self.head.saturating_sub(self.tail_seen) >= cap {
            // SYNC: Acquire pairs with the reader's AcqRel tail CAS: its read
            // of a slot happens-before we overwrite that slot.
            let t = tail.load(Ordering::Acquire);
            // A tail that went back (a broken reader) is believed as the
            // writer believed every tail before: room is judged from it.
            self.tail_seen = t;
            if self.head.saturating_sub(t) < cap {
                break;
            }
            if !overwrite {
                return Pushed::Full;
            }
            if tail
                .compare_exchange(t, t + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.seg
                    .atomic_u64(c + C_LOST)
                    .fetch_add(1, Ordering::Relaxed);
                replaced = Some(Desc::unpack(self.shadow[(t % cap) as usize]));
                self.tail_seen = t + 1;
                break;
            }
        }
        let w = d.pack();
        let k = (self.head % cap) as usize;
        self.shadow[k] = w;
        let slot = self.geo.desc_at(self.idx, k);
        self.seg.atomic_u64(slot).store(w, Ordering::Relaxed);
        self.seg
            .atomic_u64(slot + 8)
            .store(stamp.expires, Ordering::Relaxed);
        self.seg
            .atomic_u64(slot + 16)
            .store(stamp.sent_ns as u64, Ordering::Relaxed);
        self.head += 1;
        // SYNC: Release: the chunk's bytes and the slot happen-before the
        // reader's Acquire load of head.
        self.seg
            .atomic_u64(c + C_HEAD)
            .store(self.head, Ordering::Release);
        match replaced {
            Some(r) => Pushed::Replaced(r),
            None => Pushed::Stored,
        }
    }

    /// Assert liveliness at `now` (ns on `CLOCK_MONOTONIC`).
    pub fn assert_alive(&self, now: u64) {
        // SYNC: Relaxed: a timestamp the reader compares against its
        // clock; no other data is published with it.
        self.seg
            .atomic_u64(self.geo.conn(self.idx) + C_ALIVE)
            .store(now, Ordering::Relaxed);
    }

    /// Count a message this subscriber did not get.
    pub fn count_lost(&self) {
        self.seg
            .atomic_u64(self.geo.conn(self.idx) + C_LOST)
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Hand every chunk the subscriber returned to `f` (as its key). Entries
    /// of another generation are skipped; `f` must check the key against
    /// what was lent.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn drain_returns(&mut self, mut f: impl FnMut(u32)) {
        let c = self.geo.conn(self.idx);
        // SYNC: Acquire pairs with the reader's Release store of ret_head.
        let h = self.seg.atomic_u64(c + C_RET_HEAD).load(Ordering::Acquire);
        let tail = self.seg.atomic_u64(c + C_RET_TAIL);
        if h == self.ret_tail {
            // Nothing returned: the tail word (on the line the reader
            // writes its head to) is rewritten only if someone changed it,
            // not on every publish.
            if tail.load(Ordering::Relaxed) != self.ret_tail {
                tail.store(self.ret_tail, Ordering::Release);
            }
            return;
        }
        let cap = u64::from(self.geo.ret_cap);
        if h.wrapping_sub(self.ret_tail) > cap {
            // Corrupt (or a reset by a broken reader): resynchronise.
            self.ret_tail = h;
        }
        while self.ret_tail != h {
            let e = self
                .seg
                .atomic_u64(self.geo.ret(self.idx, self.ret_tail))
                .load(Ordering::Relaxed);
            self.ret_tail = self.ret_tail.wrapping_add(1);
            if (e >> 32) as u32 == self.generation {
                f(e as u32);
            }
        }
        // SYNC: Release: our reads of the slots happen-before the reader
        // reuses them.
        tail.store(self.ret_tail, Ordering::Release);
    }

    /// Whether descriptors this writer pushed are still in the ring (the
    /// reader has not taken them: it may not have mapped their chunks).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn pending(&self) -> bool {
        let c = self.geo.conn(self.idx);
        self.seg.atomic_u64(c + C_TAIL).load(Ordering::Acquire)
            != self.seg.atomic_u64(c + C_HEAD).load(Ordering::Acquire)
    }

    /// Tell the reader it holds a share of this publisher's chunk pools
    /// (the publisher is leaving with descriptors still in the ring, and
    /// has counted this reader in each pool's holders first:
    /// [`crate::pool::PoolWriter::hand_off`]).
    ///
    /// Returns true if the share came back: the subscription left
    /// ([`Inbox::leave`]) and will not take it; the caller releases it
    /// itself.
    pub fn hand_off(&self) -> bool {
        let owes = self.seg.atomic_u64(self.geo.conn(self.idx) + C_OWES);
        // SYNC: every access to the flag and the gone word, on both sides,
        // is an AcqRel read-modify-write (set the flag, then read gone; the
        // reader sets gone, then takes the flag): whichever side comes
        // second reads what the first wrote, and the swaps give the share
        // to exactly one. Modelled in myelin-sync's loom tests
        // (`pool_hand_off_removes_the_file_exactly_once`). Setting the
        // flag also releases the holder counts written before it.
        owes.swap(1, Ordering::AcqRel);
        self.seg.atomic_u32(OFF_GONE).fetch_or(0, Ordering::AcqRel) != 0
            && owes.swap(0, Ordering::AcqRel) != 0
    }

    /// The subscriber's process.
    pub fn subscriber_pid(&self) -> u32 {
        self.info.pid
    }
}

impl Drop for InboxWriter {
    fn drop(&mut self) {
        let w: &AtomicU64 = self.seg.atomic_u64(self.geo.conn(self.idx) + C_CLAIM);
        let closed = (self.claim & !0xff) | STATE_CLOSED;
        // Only if still ours; the reader frees it after draining.
        let _ = w.compare_exchange(self.claim, closed, Ordering::AcqRel, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for InboxWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxWriter")
            .field("path", &self.seg.path_str())
            .field("connection", &self.idx)
            .finish()
    }
}
