//! The broadcast ring: one writer, any number of readers, seqlock slots.
//!
//! Protocol, per message with sequence number `s` in slot `s % count`:
//! * writer: `stamp = 2s+1` (Relaxed), Release fence, write length and
//!   bytes, `stamp = 2s` (Release), `write_seq = s+1` (Release), notify.
//! * reader: `w = write_seq` (Acquire); if its `next < w`: `s1 = stamp`
//!   (Acquire), check `s1 == 2*next`, copy length and bytes out, Acquire
//!   fence, `s2 = stamp`; the copy is good only if `s2 == s1`, otherwise the
//!   writer overwrote the slot meanwhile and the message is counted lost.
//!
//! (The seqlock of Linux and of Hans Boehm's "Can seqlocks get along with
//! programming language memory models?", with the data copied as foreign
//! memory: torn copies are detected and discarded, never used.)

use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use myelin_sync::SharedEvent;

use crate::ShmError;
use crate::segment::*;

/// Offset of the "writer closed" word (in the header's padding).
const OFF_CLOSED: usize = 68;

fn stride_for(slot_size: u32) -> u32 {
    SLOT_HEADER as u32 + slot_size.div_ceil(8) * 8
}

/// Raw access to a mapped ring segment. All offsets passed in are checked
/// by the callers against the validated layout.
struct Raw {
    seg: Segment,
    count: u32,
    slot_size: u32,
    stride: u32,
}

impl Raw {
    /// # Safety
    /// `off + 8 <= len` and `off % 8 == 0` (the mapping is page aligned).
    unsafe fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= self.seg.len() && off.is_multiple_of(8));
        // SAFETY: in bounds and aligned per the contract; `AtomicU64` has
        // the layout of `u64` and accepts any bit pattern; the mapping
        // outlives `&self`.
        unsafe { &*(self.seg.base().add(off) as *const AtomicU64) }
    }

    /// # Safety
    /// `off + 4 <= len` and `off % 4 == 0`.
    unsafe fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + 4 <= self.seg.len() && off.is_multiple_of(4));
        // SAFETY: as `atomic_u64`.
        unsafe { &*(self.seg.base().add(off) as *const AtomicU32) }
    }

    fn read_u32(&self, off: usize) -> u32 {
        assert!(off + 4 <= self.seg.len());
        // SAFETY: in bounds (asserted); a volatile read of foreign memory,
        // any value is acceptable and validated by the caller.
        unsafe { ptr::read_volatile(self.seg.base().add(off) as *const u32) }
    }

    fn read_u64(&self, off: usize) -> u64 {
        assert!(off + 8 <= self.seg.len());
        // SAFETY: as `read_u32`.
        unsafe { ptr::read_volatile(self.seg.base().add(off) as *const u64) }
    }

    fn write_u32(&self, off: usize, v: u32) {
        assert!(off + 4 <= self.seg.len());
        // SAFETY: in bounds (asserted); only the single writer writes
        // non-atomic header fields, before publishing the segment.
        unsafe { ptr::write_volatile(self.seg.base().add(off) as *mut u32, v) }
    }

    fn write_u64(&self, off: usize, v: u64) {
        assert!(off + 8 <= self.seg.len());
        // SAFETY: as `write_u32`.
        unsafe { ptr::write_volatile(self.seg.base().add(off) as *mut u64, v) }
    }

    fn event(&self) -> &SharedEvent {
        // SAFETY: OFF_EVENT is 8-byte aligned, 8 bytes inside the header
        // (checked at open/create: len >= HEADER_SIZE), accessed only
        // atomically by every process.
        unsafe { SharedEvent::from_words(self.seg.base().add(OFF_EVENT) as *mut u32) }
    }

    fn write_seq(&self) -> &AtomicU64 {
        // SAFETY: OFF_WRITE_SEQ is inside the header and 8-byte aligned.
        unsafe { self.atomic_u64(OFF_WRITE_SEQ) }
    }

    fn closed(&self) -> &AtomicU32 {
        // SAFETY: OFF_CLOSED is inside the header and 4-byte aligned.
        unsafe { self.atomic_u32(OFF_CLOSED) }
    }

    /// Offset of the slot for sequence `seq` (always in bounds: the index
    /// is masked by the validated power-of-two count and the layout was
    /// checked to fit the mapping).
    fn slot(&self, seq: u64) -> usize {
        let idx = (seq & u64::from(self.count - 1)) as usize;
        HEADER_SIZE + idx * self.stride as usize
    }

    fn stamp(&self, slot: usize) -> &AtomicU64 {
        // SAFETY: `slot` comes from `Raw::slot` (in bounds, 8-aligned since
        // HEADER_SIZE and the stride are multiples of 8).
        unsafe { self.atomic_u64(slot) }
    }
}

/// The writing end of a ring: one per publisher. Dropping it removes the
/// segment file (readers keep their mapping until they drop it).
pub struct RingWriter {
    raw: Raw,
    next: u64,
}

/// What [`RingReader::try_recv`] received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvInfo {
    /// The message's sequence number (0, 1, 2, ...).
    pub seq: u64,
    /// Messages this reader has lost so far (overwritten before it read
    /// them, or skipped as corrupt).
    pub lost: u64,
}

impl RingWriter {
    /// Create a ring of `slots` slots (rounded up to a power of two) of
    /// `slot_size` bytes each, for messages of type `ty`.
    pub fn create(
        name: &SegmentName,
        ty: &TypeId,
        slots: u32,
        slot_size: u32,
    ) -> Result<RingWriter, ShmError> {
        let count = slots.clamp(1, MAX_SLOTS).next_power_of_two();
        let slot_size = slot_size.min(MAX_SLOT_SIZE);
        let stride = stride_for(slot_size);
        let len = HEADER_SIZE + count as usize * stride as usize;
        let seg = Segment::create(name, len)?;
        let raw = Raw {
            seg,
            count,
            slot_size,
            stride,
        };
        let type_name = ty.name.as_bytes();
        let n = type_name.len().min(MAX_TYPE_NAME);
        raw.write_u32(OFF_VERSION, VERSION);
        raw.write_u32(OFF_KIND, KIND_RING);
        raw.write_u64(OFF_TOTAL_LEN, len as u64);
        raw.write_u32(OFF_OWNER_PID, std::process::id());
        raw.write_u32(OFF_SLOT_COUNT, count);
        raw.write_u32(OFF_SLOT_SIZE, slot_size);
        raw.write_u32(OFF_SLOT_STRIDE, stride);
        raw.write_u64(OFF_TYPE_HASH, ty.hash);
        raw.write_u32(OFF_TYPE_NAME_LEN, n as u32);
        // SAFETY: OFF_TYPE_NAME + MAX_TYPE_NAME <= HEADER_SIZE <= len, and
        // `n <= MAX_TYPE_NAME`; source and destination do not overlap.
        unsafe {
            ptr::copy_nonoverlapping(type_name.as_ptr(), raw.seg.base().add(OFF_TYPE_NAME), n)
        };
        // The magic last, so a reader never accepts a half-written header.
        fence(Ordering::Release);
        raw.write_u64(OFF_MAGIC, MAGIC);
        Ok(RingWriter { raw, next: 0 })
    }

    /// The bytes a message may have.
    pub fn slot_size(&self) -> usize {
        self.raw.slot_size as usize
    }

    /// The segment file.
    pub fn path(&self) -> String {
        self.raw.seg.path_str()
    }

    /// Publish one message; never waits for readers (the oldest unread
    /// message is overwritten when the ring is full). Returns its sequence
    /// number.
    pub fn publish(&mut self, bytes: &[u8]) -> Result<u64, ShmError> {
        if bytes.len() > self.raw.slot_size as usize {
            return Err(ShmError::TooLarge {
                path: self.path(),
                len: bytes.len(),
                slot_size: self.raw.slot_size as usize,
            });
        }
        let seq = self.next;
        let slot = self.raw.slot(seq);
        let stamp = self.raw.stamp(slot);
        // SYNC: odd stamp = being written; the Release fence orders it
        // before the data writes (pairs with the reader's Acquire fence).
        stamp.store((seq << 1) | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.raw.write_u32(slot + 8, bytes.len() as u32);
        // SAFETY: `slot + SLOT_HEADER + len <= slot + stride <= mapping len`
        // (len <= slot_size checked above, layout fixed at creation).
        unsafe {
            ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.raw.seg.base().add(slot + SLOT_HEADER),
                bytes.len(),
            )
        };
        // SYNC: Release: the data above happens-before a reader's Acquire
        // load of the even stamp.
        stamp.store(seq << 1, Ordering::Release);
        // SYNC: pairs with the reader's Acquire load of `write_seq`.
        self.raw.write_seq().store(seq + 1, Ordering::Release);
        self.raw.event().notify();
        self.next = seq + 1;
        Ok(seq)
    }
}

impl Drop for RingWriter {
    fn drop(&mut self) {
        self.raw.closed().store(1, Ordering::Release);
        self.raw.event().notify();
    }
}

impl std::fmt::Debug for RingWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingWriter")
            .field("path", &self.path())
            .field("next", &self.next)
            .finish()
    }
}

/// A reading end of a ring: one per subscription. Holds nothing in the
/// segment, so it never blocks the writer and needs no cleanup if its
/// process dies.
pub struct RingReader {
    raw: Raw,
    next: u64,
    lost: u64,
}

impl RingReader {
    /// Open a ring, checking its header and that it carries `ty`. The reader
    /// starts with the next message published.
    pub fn open(name: &SegmentName, ty: &TypeId) -> Result<RingReader, ShmError> {
        let seg = Segment::open(name)?;
        let path = seg.path_str();
        let bad = |what: String| ShmError::BadHeader {
            path: path.clone(),
            what,
        };
        if seg.len() < HEADER_SIZE {
            return Err(bad(format!(
                "file is {} bytes, shorter than a header",
                seg.len()
            )));
        }
        let probe = Raw {
            seg,
            count: 1,
            slot_size: 0,
            stride: 0,
        };
        let magic = probe.read_u64(OFF_MAGIC);
        if magic != MAGIC {
            return Err(bad(format!("magic {magic:016x} is not a myelin ring")));
        }
        fence(Ordering::Acquire);
        let version = probe.read_u32(OFF_VERSION);
        if version != VERSION || probe.read_u32(OFF_KIND) != KIND_RING {
            return Err(bad(format!("version {version} / kind not supported")));
        }
        let count = probe.read_u32(OFF_SLOT_COUNT);
        let slot_size = probe.read_u32(OFF_SLOT_SIZE);
        let stride = probe.read_u32(OFF_SLOT_STRIDE);
        let total = probe.read_u64(OFF_TOTAL_LEN);
        if count == 0 || !count.is_power_of_two() || count > MAX_SLOTS {
            return Err(bad(format!("slot count {count}")));
        }
        if slot_size > MAX_SLOT_SIZE || stride != stride_for(slot_size) {
            return Err(bad(format!("slot size {slot_size} / stride {stride}")));
        }
        let expected = (count as u64)
            .checked_mul(u64::from(stride))
            .and_then(|s| s.checked_add(HEADER_SIZE as u64));
        if expected != Some(total) || total != probe.seg.len() as u64 {
            return Err(bad(format!(
                "length {total} does not match {count} slots of {stride} bytes in a {}-byte file",
                probe.seg.len()
            )));
        }
        let name_len = probe.read_u32(OFF_TYPE_NAME_LEN) as usize;
        if name_len > MAX_TYPE_NAME {
            return Err(bad(format!("type name length {name_len}")));
        }
        let mut type_name = vec![0u8; name_len];
        // SAFETY: OFF_TYPE_NAME + name_len <= HEADER_SIZE <= len (checked).
        unsafe {
            ptr::copy_nonoverlapping(
                probe.seg.base().add(OFF_TYPE_NAME),
                type_name.as_mut_ptr(),
                name_len,
            )
        };
        let found = String::from_utf8_lossy(&type_name).into_owned();
        let found_hash = probe.read_u64(OFF_TYPE_HASH);
        let want: String = ty.name.chars().take(MAX_TYPE_NAME).collect();
        if found != want || found_hash != ty.hash {
            return Err(ShmError::TypeMismatch {
                path,
                expected: ty.name.clone(),
                expected_hash: ty.hash,
                found,
                found_hash,
            });
        }
        let raw = Raw {
            seg: probe.seg,
            count,
            slot_size,
            stride,
        };
        // SYNC: pairs with the writer's Release store of `write_seq`.
        let next = raw.write_seq().load(Ordering::Acquire);
        Ok(RingReader { raw, next, lost: 0 })
    }

    /// Start from the oldest message still in the ring instead of the next
    /// one (a late joiner's view of the recent history).
    pub fn from_oldest(mut self) -> Self {
        let w = self.raw.write_seq().load(Ordering::Acquire);
        self.next = w.saturating_sub(u64::from(self.raw.count));
        self
    }

    /// Messages lost so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Whether the writer dropped its end (a writer killed with `kill -9`
    /// cannot say so: see [`crate::cleanup_stale`]).
    pub fn writer_closed(&self) -> bool {
        self.raw.closed().load(Ordering::Acquire) != 0
    }

    fn corrupt(&mut self, what: &'static str, value: u64, limit: u64) -> ShmError {
        self.next += 1;
        self.lost += 1;
        ShmError::Corrupt {
            path: self.raw.seg.path_str(),
            what,
            value,
            limit,
        }
    }

    /// Copy the next message into `buf`, without waiting. `Ok(None)`: nothing
    /// new. An `Err(Corrupt)` skipped one damaged slot; call again.
    pub fn try_recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RecvInfo>, ShmError> {
        let count = u64::from(self.raw.count);
        loop {
            // SYNC: pairs with the writer's Release store.
            let w = self.raw.write_seq().load(Ordering::Acquire);
            if self.next >= w {
                return Ok(None);
            }
            if w - self.next > count {
                let skipped = w - self.next - count;
                self.lost += skipped;
                self.next += skipped;
            }
            let slot = self.raw.slot(self.next);
            let stamp = self.raw.stamp(slot);
            // SYNC: pairs with the writer's Release store of the even stamp.
            let s1 = stamp.load(Ordering::Acquire);
            if s1 >> 1 != self.next || s1 & 1 == 1 {
                if s1 >> 1 > self.next {
                    // Overwritten by a newer message before we got to it.
                    self.lost += 1;
                    self.next += 1;
                    continue;
                }
                // Older than a sequence already announced: damaged.
                return Err(self.corrupt("slot stamp", s1, w.saturating_mul(2)));
            }
            let len = self.raw.read_u32(slot + 8);
            if len > self.raw.slot_size {
                return Err(self.corrupt(
                    "slot length",
                    u64::from(len),
                    u64::from(self.raw.slot_size),
                ));
            }
            let len = len as usize;
            buf.clear();
            buf.reserve(len);
            // SAFETY: `slot + SLOT_HEADER + len <= slot + stride` (len <=
            // slot_size checked just above) which is inside the validated
            // mapping; `buf` has capacity `len`; the regions do not overlap.
            // The bytes may be changing under us (foreign memory): a torn
            // copy is detected by the stamp check below and discarded.
            unsafe {
                ptr::copy_nonoverlapping(
                    self.raw.seg.base().add(slot + SLOT_HEADER),
                    buf.as_mut_ptr(),
                    len,
                );
                buf.set_len(len);
            }
            // SYNC: pairs with the writer's Release fence after the odd stamp.
            fence(Ordering::Acquire);
            let s2 = stamp.load(Ordering::Relaxed);
            if s2 != s1 {
                buf.clear();
                self.lost += 1;
                self.next += 1;
                continue;
            }
            let info = RecvInfo {
                seq: self.next,
                lost: self.lost,
            };
            self.next += 1;
            return Ok(Some(info));
        }
    }

    /// Wait (futex in the segment, no polling) up to `timeout` for the next
    /// message. `Ok(None)` on timeout or when the writer closed with nothing
    /// left.
    pub fn recv_timeout(
        &mut self,
        buf: &mut Vec<u8>,
        timeout: Duration,
    ) -> Result<Option<RecvInfo>, ShmError> {
        let deadline = myelin_sync::deadline::after(timeout);
        loop {
            if let Some(info) = self.try_recv(buf)? {
                return Ok(Some(info));
            }
            if self.writer_closed() || Instant::now() >= deadline {
                return Ok(None);
            }
            let next = self.next;
            let raw = &self.raw;
            raw.event().wait_while(
                || {
                    raw.write_seq().load(Ordering::Acquire) <= next
                        && raw.closed().load(Ordering::Acquire) == 0
                },
                Some(deadline),
            );
        }
    }
}

impl std::fmt::Debug for RingReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingReader")
            .field("path", &self.raw.seg.path_str())
            .field("next", &self.next)
            .field("lost", &self.lost)
            .finish()
    }
}
