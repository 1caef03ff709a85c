//! The domain's change log: what appeared, changed or went away, so a
//! process does work for the changes, not for the population.
//!
//! The log lives in the domain's `graph` segment, after the change
//! counter every process waits on. It is a ring of [`LOG_SLOTS`] entries
//! and a `head` counting every entry ever claimed. A process that creates
//! an endpoint appends `Added` *after* the endpoint's segment is complete,
//! one that removes an endpoint appends `Removed` *after* unlinking it, and
//! then bumps the counter; a reader keeps a cursor and reads what was
//! appended since. Each entry names its endpoint ([`EndpointKey`]: kind,
//! pid, id, and a 16-bit bucket of its topic), so a reader opens only the
//! segments of topics it has endpoints on.
//!
//! Writers: `head.fetch_add(1)` claims sequence `s` (slot `s % LOG_SLOTS`);
//! the entry is written as a seqlock (sequence word zeroed, fields, then
//! the sequence word set to `s + 1` with Release). Readers check the
//! sequence word before and after reading the fields, and a check word
//! over all of them. Anything a reader cannot trust (a slot already
//! overwritten because it fell more than [`LOG_SLOTS`] behind, a torn or
//! forged entry, a head that went backwards) is [`LogRead::Lost`]: the
//! reader rebuilds its view from the directory listing, which is always
//! correct, and continues from the head. A slot claimed but not yet
//! written is [`LogRead::Incomplete`]: its writer is between claim and
//! publish (it bumps the counter when done), or died there (then the
//! reader gives up waiting and rescans).
//!
//! **Who is woken.** Waking every process of the domain for every entry
//! would cost each change a wake-up per process (a late joiner making 100
//! subscriptions among 200 processes: 20,000 wake-ups). So the segment
//! also holds [`LISTENER_SLOTS`] listener slots (a pid and a futex word
//! each; a context's discovery thread claims one and sleeps on it) and,
//! for each of [`GROUPS`] groups of topic buckets, a bitmap of the slots
//! interested in it. A writer wakes the slots whose bit is set in its
//! entry's group (all of them for an entry without a bucket), then bumps
//! the domain-wide counter, which only processes without a slot (all slots
//! taken) and tools wait on. A listener sets its bit *before* reading the
//! log, and a writer reads the bits *after* appending (both with SeqCst),
//! so either the writer wakes the listener or the listener reads the
//! entry. A slot whose process died is taken over (its bits cleared) by
//! the next process that finds no free one.
//!
//! The graph segment is writable by every process of this user, so its
//! contents are untrusted: a bad entry can at worst make a reader open a
//! name that does not exist or rescan, and bad slots or bits at worst
//! wake a process for nothing or not at all until its next check.

use std::sync::atomic::{Ordering, fence};

use crate::ShmError;
use crate::endpoint::EndpointKind;
use crate::segment::{HEADER_SIZE, Segment, SegmentName};

/// Entries in the ring: a reader that falls this far behind rescans.
pub const LOG_SLOTS: u64 = 4096;
/// Where the claim counter lives (after the change counter's event).
pub(crate) const OFF_HEAD: usize = HEADER_SIZE + 64;
/// Where the ring starts.
const OFF_LOG: usize = HEADER_SIZE + 128;
/// Bytes per entry: sequence, what, id, check.
const ENTRY: usize = 32;
/// Listener slots: processes (contexts) woken only for their topics.
pub const LISTENER_SLOTS: usize = 1024;
/// Groups of topic buckets with an interest bitmap each (bucket >> 6).
pub const GROUPS: usize = 1024;
/// Where the listener slots start: per slot a pid (u32), padding, and a
/// futex event (two u32).
const OFF_SLOTS: usize = OFF_LOG + LOG_SLOTS as usize * ENTRY;
const SLOT: usize = 16;
/// Where the interest bitmaps start: per group, one bit per slot.
const OFF_INTEREST: usize = OFF_SLOTS + LISTENER_SLOTS * SLOT;
const GROUP_BYTES: usize = LISTENER_SLOTS / 8;
/// Bytes of the graph segment with its log, slots and bitmaps.
pub(crate) const GRAPH_LEN: usize = OFF_INTEREST + GROUPS * GROUP_BYTES;

/// The interest group of a topic bucket.
pub fn group_of(bucket: u16) -> usize {
    usize::from(bucket >> 6)
}
/// Mixed into the check word, so that zeroed memory is not a valid entry.
const CHECK_SALT: u64 = 0x6d79_656c_696e_4c47;
/// The bucket bits of an entry whose topic is not known (a name without
/// one).
const NO_BUCKET: u64 = 0x1_0000;

/// What happened to an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Its segment now exists and is complete.
    Added,
    /// Something other processes read changed: a subscription's set of
    /// connected publishers, or its inbox header rewritten.
    Changed,
    /// Its segment is gone.
    Removed,
}

/// An endpoint, as its segment's name says: `p_<pid>_<id>_<bucket>` (a
/// publisher's announcement) or `s_<pid>_<id>_<bucket>` (a subscription's
/// inbox), the bucket four hex digits of [`topic_bucket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndpointKey {
    /// Publisher or subscription.
    pub kind: EndpointKind,
    /// The owning process.
    pub pid: u32,
    /// The endpoint's id (unique in its process).
    pub id: u64,
    /// Its topic's bucket; `None` for a name that carries none (then any
    /// reader opens it).
    pub bucket: Option<u16>,
}

/// The 16-bit bucket of a topic name (FNV-1a, folded): readers skip
/// endpoints whose bucket none of their topics has. Only 16 bits, so a
/// segment's name tells another local user little about its topic.
pub fn topic_bucket(topic: &str) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in topic.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48)) as u16
}

impl EndpointKey {
    /// The key of an endpoint on `topic`.
    pub fn new(kind: EndpointKind, pid: u32, id: u64, topic: &str) -> EndpointKey {
        EndpointKey {
            kind,
            pid,
            id,
            bucket: Some(topic_bucket(topic)),
        }
    }

    /// The segment's name, within its domain.
    pub fn file_stem(&self) -> String {
        let k = match self.kind {
            EndpointKind::Publisher => 'p',
            EndpointKind::Subscription => 's',
        };
        match self.bucket {
            Some(b) => format!("{k}_{}_{}_{b:04x}", self.pid, self.id),
            None => format!("{k}_{}_{}", self.pid, self.id),
        }
    }

    /// The segment's name in `domain`.
    pub fn segment_name(&self, domain: u32) -> Result<SegmentName, ShmError> {
        SegmentName::new(domain, &self.file_stem())
    }

    /// Parse the part of a segment's file name after its domain prefix
    /// (`p_12_34_abcd`); `None` for anything else.
    pub fn parse(stem: &str) -> Option<EndpointKey> {
        let mut parts = stem.split('_');
        let kind = match parts.next()? {
            "p" => EndpointKind::Publisher,
            "s" => EndpointKind::Subscription,
            _ => return None,
        };
        let pid = parts.next()?.parse().ok()?;
        let id = parts.next()?.parse().ok()?;
        let bucket = match parts.next() {
            None => None,
            Some(b) if b.len() == 4 => Some(u16::from_str_radix(b, 16).ok()?),
            Some(_) => return None,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(EndpointKey {
            kind,
            pid,
            id,
            bucket,
        })
    }

    /// The key of the endpoint segment at `path` in `domain` (`None` for
    /// another kind of segment, or another domain's).
    pub fn of_path(domain: u32, path: &std::path::Path) -> Option<EndpointKey> {
        let name = path.file_name()?.to_str()?;
        EndpointKey::parse(name.strip_prefix(&crate::segment::prefix(domain))?)
    }

    fn encode(&self, change: Change) -> (u64, u64) {
        let change = match change {
            Change::Added => 1u64,
            Change::Changed => 2,
            Change::Removed => 3,
        };
        let kind = match self.kind {
            EndpointKind::Publisher => 1u64,
            EndpointKind::Subscription => 2,
        };
        let bucket = self.bucket.map_or(NO_BUCKET, u64::from);
        (
            change | kind << 4 | bucket << 8 | u64::from(self.pid) << 32,
            self.id,
        )
    }

    fn decode(what: u64, id: u64) -> Option<(Change, EndpointKey)> {
        let change = match what & 0xf {
            1 => Change::Added,
            2 => Change::Changed,
            3 => Change::Removed,
            _ => return None,
        };
        let kind = match (what >> 4) & 0xf {
            1 => EndpointKind::Publisher,
            2 => EndpointKind::Subscription,
            _ => return None,
        };
        let bucket = match (what >> 8) & 0x1_ffff {
            NO_BUCKET => None,
            b if b < NO_BUCKET => Some(b as u16),
            _ => return None,
        };
        Some((
            change,
            EndpointKey {
                kind,
                pid: (what >> 32) as u32,
                id,
                bucket,
            },
        ))
    }
}

/// One entry of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    /// What happened.
    pub change: Change,
    /// To which endpoint.
    pub key: EndpointKey,
}

/// What reading the change log from a cursor found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogRead {
    /// Every entry up to this sequence (the new cursor) was read.
    UpTo(u64),
    /// Entries up to this sequence were read; the next one is claimed but
    /// not written yet.
    Incomplete(u64),
    /// Entries were lost (overwritten, torn or forged): rebuild from the
    /// directory, then read on from this head.
    Lost(u64),
}

fn check(seq: u64, what: u64, id: u64) -> u64 {
    (seq ^ what.rotate_left(17) ^ id.rotate_left(41) ^ CHECK_SALT)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn slot(seq: u64) -> usize {
    OFF_LOG + (seq % LOG_SLOTS) as usize * ENTRY
}

/// The head: how many entries were ever claimed.
pub(crate) fn head(seg: &Segment) -> u64 {
    // SYNC: Acquire pairs with the AcqRel claim in `append`; entries are
    // published by their own sequence words, this only bounds the read.
    seg.atomic_u64(OFF_HEAD).load(Ordering::Acquire)
}

/// Append an entry (the caller bumps the change counter afterwards).
pub(crate) fn append(seg: &Segment, change: Change, key: &EndpointKey) {
    let (what, id) = key.encode(change);
    // SYNC: AcqRel: claims are totally ordered; the claim happens-before
    // this writer's stores below.
    let seq = seg.atomic_u64(OFF_HEAD).fetch_add(1, Ordering::AcqRel);
    let at = slot(seq);
    // Seqlock: the sequence word is 0 while the fields change.
    seg.atomic_u64(at).store(0, Ordering::Relaxed);
    // SYNC: Release fence: a reader that sees any of the new fields and
    // then re-reads the sequence word (after its Acquire fence) sees the
    // 0 or something newer, never the old entry's sequence.
    fence(Ordering::Release);
    seg.atomic_u64(at + 8).store(what, Ordering::Relaxed);
    seg.atomic_u64(at + 16).store(id, Ordering::Relaxed);
    seg.atomic_u64(at + 24)
        .store(check(seq + 1, what, id), Ordering::Relaxed);
    // SYNC: Release: the fields happen-before a reader's Acquire load of
    // the sequence word that finds `seq + 1`.
    seg.atomic_u64(at).store(seq + 1, Ordering::Release);
}

/// Wake the listeners interested in `bucket` (every listener for `None`).
pub(crate) fn wake_listeners(seg: &Segment, bucket: Option<u16>) {
    // SYNC: SeqCst fence: the entry appended before happens-before the
    // bitmap loads below, pairing with the listener's fence between
    // setting its bit and reading the log (Dekker: one of the two sees the
    // other).
    fence(Ordering::SeqCst);
    match bucket {
        Some(b) => {
            let base = OFF_INTEREST + group_of(b) * GROUP_BYTES;
            for w in 0..GROUP_BYTES / 8 {
                let mut bits = seg.atomic_u64(base + 8 * w).load(Ordering::SeqCst);
                while bits != 0 {
                    let i = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    slot_event(seg, i).notify();
                }
            }
        }
        None => {
            for i in 0..LISTENER_SLOTS {
                if seg.atomic_u32(slot_at(i)).load(Ordering::Relaxed) != 0 {
                    slot_event(seg, i).notify();
                }
            }
        }
    }
}

fn slot_at(i: usize) -> usize {
    OFF_SLOTS + i * SLOT
}

/// Listener slot `i`'s futex event.
pub(crate) fn slot_event(seg: &Segment, i: usize) -> &myelin_sync::SharedEvent {
    seg.event(slot_at(i) + 8)
}

/// Claim a listener slot for process `pid`: a free one, else one whose
/// process is gone (its interest bits cleared first). `None`: all are held
/// by live processes.
pub(crate) fn claim_slot(seg: &Segment, pid: u32) -> Option<usize> {
    for i in 0..LISTENER_SLOTS {
        // SYNC: AcqRel: the claim orders after the previous owner's
        // release (which cleared its bits), and before our bit stores.
        if seg
            .atomic_u32(slot_at(i))
            .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return Some(i);
        }
    }
    for i in 0..LISTENER_SLOTS {
        let owner = seg.atomic_u32(slot_at(i)).load(Ordering::Acquire);
        if owner != 0
            && !crate::process_alive(owner)
            && seg
                .atomic_u32(slot_at(i))
                .compare_exchange(owner, pid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            clear_interest(seg, i);
            return Some(i);
        }
    }
    None
}

/// Give slot `i` back (its interest bits cleared first).
pub(crate) fn release_slot(seg: &Segment, i: usize, pid: u32) {
    clear_interest(seg, i);
    let _ =
        seg.atomic_u32(slot_at(i))
            .compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
}

fn clear_interest(seg: &Segment, i: usize) {
    for g in 0..GROUPS {
        set_interest(seg, i, g, false);
    }
}

/// Say whether slot `i` is woken for entries of `group`.
pub(crate) fn set_interest(seg: &Segment, i: usize, group: usize, on: bool) {
    let word = seg.atomic_u64(OFF_INTEREST + group * GROUP_BYTES + (i / 64) * 8);
    let bit = 1u64 << (i % 64);
    if on {
        word.fetch_or(bit, Ordering::SeqCst);
        // SYNC: SeqCst fence: the bit is set before this listener next
        // reads the log (pairs with the fence in `wake_listeners`).
        fence(Ordering::SeqCst);
    } else {
        word.fetch_and(!bit, Ordering::SeqCst);
    }
}

/// Read the entries from `cursor` on into `out`.
pub(crate) fn read_since(seg: &Segment, cursor: u64, out: &mut Vec<LogEntry>) -> LogRead {
    let head = head(seg);
    if head < cursor || head - cursor > LOG_SLOTS {
        return LogRead::Lost(head);
    }
    for seq in cursor..head {
        let at = slot(seq);
        // SYNC: Acquire pairs with the writer's final Release store.
        let before = seg.atomic_u64(at).load(Ordering::Acquire);
        if before != seq + 1 {
            // 0 (being written) or an older lap's sequence: not written
            // yet. A newer lap's: this reader fell behind.
            return if before == 0 || before <= seq {
                LogRead::Incomplete(seq)
            } else {
                LogRead::Lost(head)
            };
        }
        let what = seg.atomic_u64(at + 8).load(Ordering::Relaxed);
        let id = seg.atomic_u64(at + 16).load(Ordering::Relaxed);
        let sum = seg.atomic_u64(at + 24).load(Ordering::Relaxed);
        // SYNC: Acquire fence: the field loads above happen-before the
        // re-read, so a writer that started over them is seen here.
        fence(Ordering::Acquire);
        let after = seg.atomic_u64(at).load(Ordering::Relaxed);
        if after != before || sum != check(seq + 1, what, id) {
            return LogRead::Lost(head);
        }
        match EndpointKey::decode(what, id) {
            Some((change, key)) => out.push(LogEntry { change, key }),
            None => return LogRead::Lost(head),
        }
    }
    LogRead::UpTo(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_names_and_entries() {
        let k = EndpointKey::new(EndpointKind::Subscription, 4242, 987654321, "/chatter");
        assert_eq!(EndpointKey::parse(&k.file_stem()), Some(k));
        let (what, id) = k.encode(Change::Changed);
        assert_eq!(EndpointKey::decode(what, id), Some((Change::Changed, k)));
        let old = EndpointKey::parse("p_12_34").unwrap();
        assert_eq!(old.bucket, None);
        assert_eq!(old.file_stem(), "p_12_34");
        let (what, id) = old.encode(Change::Removed);
        assert_eq!(EndpointKey::decode(what, id), Some((Change::Removed, old)));
        for bad in [
            "",
            "k_1_2_0",
            "p_x_2",
            "p_1_2_3",
            "p_1_2_zzzz",
            "p_1_2_abcd_e",
            "graph",
        ] {
            assert_eq!(EndpointKey::parse(bad), None, "{bad}");
        }
    }

    /// A graph segment of its own (domain 78, a name per test).
    fn log(name: &str) -> Segment {
        let n = SegmentName::new(78, &format!("logtest_{name}_{}", std::process::id())).unwrap();
        Segment::create_fresh(&n, GRAPH_LEN).unwrap()
    }

    fn key(i: u64) -> EndpointKey {
        EndpointKey::new(EndpointKind::Publisher, 7, i, &format!("/t{i}"))
    }

    #[test]
    fn entries_are_read_in_order_from_a_cursor() {
        let seg = log("order");
        append(&seg, Change::Added, &key(1));
        append(&seg, Change::Changed, &key(2));
        let mut out = Vec::new();
        assert_eq!(read_since(&seg, 0, &mut out), LogRead::UpTo(2));
        assert_eq!(
            out,
            [
                LogEntry {
                    change: Change::Added,
                    key: key(1)
                },
                LogEntry {
                    change: Change::Changed,
                    key: key(2)
                },
            ]
        );
        append(&seg, Change::Removed, &key(1));
        out.clear();
        assert_eq!(read_since(&seg, 2, &mut out), LogRead::UpTo(3));
        assert_eq!(
            out,
            [LogEntry {
                change: Change::Removed,
                key: key(1)
            }]
        );
        out.clear();
        assert_eq!(read_since(&seg, 3, &mut out), LogRead::UpTo(3));
        assert!(out.is_empty());
    }

    #[test]
    fn a_reader_a_whole_ring_behind_is_told_it_lost_entries() {
        let seg = log("lapped");
        for i in 0..LOG_SLOTS + 10 {
            append(&seg, Change::Added, &key(i));
        }
        let mut out = Vec::new();
        assert_eq!(read_since(&seg, 0, &mut out), LogRead::Lost(LOG_SLOTS + 10));
        // From a cursor still in the ring, everything is there.
        out.clear();
        assert_eq!(
            read_since(&seg, 20, &mut out),
            LogRead::UpTo(LOG_SLOTS + 10)
        );
        assert_eq!(out.len() as u64, LOG_SLOTS - 10);
        assert_eq!(out[0].key, key(20));
    }

    #[test]
    fn forged_torn_and_backwards_entries_are_lost_not_trusted() {
        let seg = log("forged");
        append(&seg, Change::Added, &key(1));
        append(&seg, Change::Added, &key(2));
        let mut out = Vec::new();
        // Another process scribbles over the second entry's id.
        seg.atomic_u64(slot(1) + 16).store(99, Ordering::Relaxed);
        assert_eq!(read_since(&seg, 0, &mut out), LogRead::Lost(2));
        // A head that went backwards.
        out.clear();
        assert_eq!(read_since(&seg, 5, &mut out), LogRead::Lost(2));
        // An entry whose kind is out of range but whose check matches:
        // still refused.
        let at = slot(1);
        let bad = 7u64 | 1 << 4;
        seg.atomic_u64(at + 8).store(bad, Ordering::Relaxed);
        seg.atomic_u64(at + 16).store(2, Ordering::Relaxed);
        seg.atomic_u64(at + 24)
            .store(check(2, bad, 2), Ordering::Relaxed);
        out.clear();
        assert_eq!(read_since(&seg, 1, &mut out), LogRead::Lost(2));
    }

    #[test]
    fn a_claimed_but_unwritten_entry_is_incomplete() {
        let seg = log("incomplete");
        append(&seg, Change::Added, &key(1));
        // A writer that claimed sequence 1 and has not written it yet.
        seg.atomic_u64(OFF_HEAD).fetch_add(1, Ordering::SeqCst);
        let mut out = Vec::new();
        assert_eq!(read_since(&seg, 0, &mut out), LogRead::Incomplete(1));
        assert_eq!(
            out,
            [LogEntry {
                change: Change::Added,
                key: key(1)
            }]
        );
    }

    #[test]
    fn listeners_are_woken_for_their_groups_only() {
        let seg = log("listeners");
        let me = std::process::id();
        let a = claim_slot(&seg, me).unwrap();
        let b = claim_slot(&seg, me).unwrap();
        assert_ne!(a, b);
        let ka = key(1);
        let kb = (2..)
            .map(key)
            .find(|k| group_of(k.bucket.unwrap()) != group_of(ka.bucket.unwrap()))
            .unwrap();
        set_interest(&seg, a, group_of(ka.bucket.unwrap()), true);
        set_interest(&seg, b, group_of(kb.bucket.unwrap()), true);
        let (ea, eb) = (slot_event(&seg, a).epoch(), slot_event(&seg, b).epoch());
        wake_listeners(&seg, ka.bucket);
        assert_eq!(slot_event(&seg, a).epoch(), ea.wrapping_add(1));
        assert_eq!(slot_event(&seg, b).epoch(), eb);
        // An entry without a bucket wakes everyone.
        wake_listeners(&seg, None);
        assert_eq!(slot_event(&seg, b).epoch(), eb.wrapping_add(1));
        // A slot given back is free again, its interest gone.
        release_slot(&seg, a, me);
        let ea = slot_event(&seg, a).epoch();
        wake_listeners(&seg, ka.bucket);
        assert_eq!(slot_event(&seg, a).epoch(), ea);
        assert_eq!(claim_slot(&seg, me), Some(a));
    }

    #[test]
    fn a_dead_processs_slot_is_taken_over_when_none_is_free() {
        let seg = log("takeover");
        // Every slot held by this process but one held by a pid that
        // cannot exist.
        for i in 0..LISTENER_SLOTS {
            seg.atomic_u32(slot_at(i))
                .store(std::process::id(), Ordering::Relaxed);
        }
        seg.atomic_u32(slot_at(5)).store(1 << 30, Ordering::Relaxed);
        set_interest(&seg, 5, 3, true);
        assert_eq!(claim_slot(&seg, std::process::id()), Some(5));
        let e = slot_event(&seg, 5).epoch();
        wake_listeners(&seg, Some(3 << 6));
        assert_eq!(
            slot_event(&seg, 5).epoch(),
            e,
            "the dead owner's interest went with it"
        );
        assert_eq!(claim_slot(&seg, std::process::id()), None);
    }

    #[test]
    fn buckets_spread_topics() {
        let buckets: std::collections::HashSet<u16> =
            (0..1000).map(|i| topic_bucket(&format!("/t{i}"))).collect();
        assert!(buckets.len() > 980, "{}", buckets.len());
    }
}
