//! Chunk pools: the memory zero-copy messages live in.
//!
//! A publisher owns one or more pool segments (`k_<pid>_<publisher>_<n>`),
//! each of `count` chunks of `chunk_size` bytes. The reference counts and
//! the free list live in the publisher's *private* memory: a subscriber
//! process can only return a chunk through its connection (see
//! [`crate::inbox`]), which the publisher checks against what it lent on
//! that connection. So a crashed or hostile reader can leak nothing and free
//! nothing it was not given.

use myelin_sync::IndexStack;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::ShmError;
use crate::segment::NeededAtExit;
use crate::segment::*;

/// Chunks start at this offset (page aligned).
const DATA: usize = 4096;
/// How many readers still hold a share of the pool's file after its
/// publisher left (see [`PoolWriter::hand_off`]); after the common header.
const OFF_HOLDERS: usize = HEADER_SIZE;
/// Chunk alignment (and stride granularity).
pub const CHUNK_ALIGN: usize = 64;
/// The largest chunk.
pub const MAX_CHUNK: u32 = 256 << 20;
/// The most chunks in one pool.
pub const MAX_CHUNKS: u32 = 1 << 16;

fn stride_for(chunk_size: u32) -> usize {
    (chunk_size as usize).div_ceil(CHUNK_ALIGN).max(1) * CHUNK_ALIGN
}

/// The writing side of a pool (in the publisher's process).
pub struct PoolWriter {
    seg: Segment,
    chunk_size: u32,
    count: u32,
    stride: usize,
    /// Shared with the at-exit list (see
    /// [`set_needed_at_exit`](Self::set_needed_at_exit)).
    free: std::sync::Arc<FreeList>,
    keep: std::sync::atomic::AtomicBool,
    /// Bytes of each chunk whose memory is reserved (see
    /// [`reserve_chunk`](Self::reserve_chunk)).
    reserved: Box<[AtomicU32]>,
}

impl Drop for PoolWriter {
    fn drop(&mut self) {
        if self.keep.load(Ordering::Relaxed) {
            // Readers still hold chunks: the caller removes the file
            // later; at exit it stays for the survivors' sweep.
            self.seg.disown();
        }
    }
}

/// A pool's chunks as this process holds them (in its private memory):
/// the free ones, and the references to each one in use.
struct FreeList {
    /// Free chunks: taken and given back with one compare-and-swap each;
    /// the one given back last is taken first (still in the caches).
    free: IndexStack,
    /// References to each chunk (0: free, or being taken right now).
    refs: Box<[AtomicU32]>,
}

impl FreeList {
    /// Chunks with a reference (lent, or written by a publish).
    fn in_use(&self) -> usize {
        // SYNC: Acquire, as the last release's AcqRel decrement.
        self.refs
            .iter()
            .filter(|r| r.load(Ordering::Acquire) > 0)
            .count()
    }
}

impl NeededAtExit for FreeList {
    /// A chunk is lent: a reader may not have mapped it yet.
    fn needed(&self) -> bool {
        self.in_use() > 0
    }
}

impl PoolWriter {
    /// Decide with `owner` whether the file stays when this process exits
    /// (instead of "while a chunk is lent"): a publisher knows whether
    /// its readers still have messages of it to map.
    pub fn set_needed_at_exit(&self, rule: std::sync::Arc<dyn NeededAtExit>) {
        crate::segment::remove_at_exit_unless_needed(&self.seg.path, rule);
    }

    /// The pool's file.
    pub fn path(&self) -> &std::path::Path {
        &self.seg.path
    }

    /// Create a pool of `count` chunks of `chunk_size` bytes for type
    /// `type_hash`.
    pub fn create(
        name: &SegmentName,
        type_hash: u64,
        chunk_size: u32,
        count: u32,
    ) -> Result<PoolWriter, ShmError> {
        let chunk_size = chunk_size.clamp(1, MAX_CHUNK);
        let count = count.clamp(1, MAX_CHUNKS);
        let stride = stride_for(chunk_size);
        // The header now; each chunk when it is first handed out.
        let seg = Segment::create_fresh_reserving(name, DATA + stride * count as usize, DATA)?;
        seg.atomic_u32(OFF_SLOT_COUNT)
            .store(count, Ordering::Relaxed);
        seg.atomic_u32(OFF_SLOT_SIZE)
            .store(chunk_size, Ordering::Relaxed);
        seg.atomic_u64(OFF_TYPE_HASH)
            .store(type_hash, Ordering::Relaxed);
        seg.publish_header(KIND_POOL, std::process::id());
        let free = std::sync::Arc::new(FreeList {
            free: IndexStack::full(count),
            refs: (0..count).map(|_| AtomicU32::new(0)).collect(),
        });
        // At this process's exit the file goes only if nothing is lent
        // (unless its owner says better, `set_needed_at_exit`): a reader
        // may not have mapped the chunks it was sent yet (a publisher
        // that exits right after publishing); the survivors' sweep
        // removes it once the readers had time to.
        crate::segment::remove_at_exit_unless_needed(&seg.path, free.clone());
        Ok(PoolWriter {
            seg,
            chunk_size,
            count,
            stride,
            free,
            keep: std::sync::atomic::AtomicBool::new(false),
            reserved: (0..count).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// Bytes per chunk.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// Chunks in the pool.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Chunks currently free.
    pub fn free_count(&self) -> usize {
        self.count as usize - self.free.in_use()
    }

    /// Leave the file in place when this pool is dropped (readers still
    /// have descriptors into it); the caller removes it later, or the
    /// survivors' sweep once this process is gone
    /// ([`crate::cleanup_stale`]).
    pub fn keep_file(&self) {
        self.keep.store(true, Ordering::Relaxed);
    }

    /// Hand the pool's file to `readers` readers: the publisher is leaving
    /// while they still have descriptors of it to take (and so chunks to
    /// map). The last of them to release its share removes the file
    /// ([`release_handed_off`]); the caller keeps it until then
    /// ([`keep_file`](Self::keep_file), or the at-exit rule). The count is
    /// written before the caller tells each reader
    /// ([`crate::inbox::InboxWriter::hand_off`]).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn hand_off(&self, readers: u32) {
        // SYNC: Relaxed; published to each reader by the Release store of
        // its connection's flag (`InboxWriter::hand_off`).
        self.seg
            .atomic_u32(OFF_HOLDERS)
            .store(readers, Ordering::Relaxed);
    }

    /// Give back `n` shares of a hand-off that came back (their readers
    /// left before they were told). True if that was the last share: the
    /// caller removes the file.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn release_shares(&self, n: u32) -> bool {
        // SYNC: AcqRel, as the readers' releases (`release_handed_off`).
        let before = self
            .seg
            .atomic_u32(OFF_HOLDERS)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                Some(c.saturating_sub(n))
            })
            .unwrap_or(0);
        before != 0 && before <= n
    }

    /// Take a free chunk with one reference, or `None` if all are in use.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn alloc(&self) -> Option<u32> {
        let idx = self.free.free.pop()?;
        self.free.refs[idx as usize].store(1, Ordering::Relaxed);
        Some(idx)
    }

    /// Make sure the first `len` bytes of chunk `idx` have their memory
    /// (`fallocate` of what was not reserved before): a full file system
    /// is [`ShmError::NoSpace`] here, never a SIGBUS when the chunk is
    /// written. Only what messages actually use takes memory; cheap once a
    /// chunk has held a message this large.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn reserve_chunk(&self, idx: u32, len: usize) -> Result<(), ShmError> {
        let len = len.min(self.stride) as u32;
        let done = &self.reserved[idx as usize];
        // SYNC: Relaxed: the holder of a chunk is the only one reserving
        // it; the value only saves a repeated (idempotent) fallocate.
        let have = done.load(Ordering::Relaxed);
        if len <= have {
            return Ok(());
        }
        self.reserve_more(idx, have, len)
    }

    /// [`reserve_chunk`](Self::reserve_chunk) for a chunk that holds a
    /// larger message than it ever did: `have` bytes reserved, `len` needed.
    #[inline(never)]
    fn reserve_more(&self, idx: u32, have: u32, len: u32) -> Result<(), ShmError> {
        let done = &self.reserved[idx as usize];
        let base = DATA + idx as usize * self.stride;
        self.seg
            .reserve(base + have as usize, (len - have) as usize)?;
        done.store(len, Ordering::Relaxed);
        Ok(())
    }

    /// Add a reference to a chunk in use.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn retain(&self, idx: u32) {
        // SYNC: Relaxed, like `Arc::clone`: the caller already holds a
        // reference.
        self.free.refs[idx as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Drop a reference; the last one returns the chunk to the free list.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn release(&self, idx: u32) {
        // SYNC: AcqRel, like `Arc::drop`: every use of the chunk
        // happens-before its reuse.
        let prev = self.free.refs[idx as usize].fetch_sub(1, Ordering::AcqRel);
        debug_assert!(prev > 0, "chunk {idx} released too often");
        if prev == 1 {
            self.free.free.push(idx);
        }
    }

    /// The chunk's memory (`chunk_size` bytes, [`CHUNK_ALIGN`] aligned).
    /// Writing is for the holder of the only reference.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn chunk_ptr(&self, idx: u32) -> *mut u8 {
        assert!(idx < self.count, "chunk {idx} of {}", self.count);
        // SAFETY: DATA + idx * stride + stride <= len (layout fixed at
        // creation, idx checked).
        unsafe { self.seg.base().add(DATA + idx as usize * self.stride) }
    }
}

impl std::fmt::Debug for PoolWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolWriter")
            .field("path", &self.seg.path_str())
            .field("chunk_size", &self.chunk_size)
            .field("count", &self.count)
            .finish()
    }
}

/// Release this reader's share of the pools publisher `pub_id` of process
/// `pid` handed off when it left ([`PoolWriter::hand_off`]; the reader
/// was told so by [`crate::inbox::Inbox::take_owed`]). The last holder
/// removes each file: a publisher that exits right after publishing
/// leaves nothing behind once its readers are done, even when no other
/// process stays to sweep. Returns the files removed.
///
/// The count lives in shared memory (untrusted): it never goes below zero,
/// and a file is removed only if its header names process `pid`. A reader
/// that dies owing its share leaves the file to the dead-process sweep.
pub fn release_handed_off(domain: u32, pid: u32, pub_id: u64) -> Vec<std::path::PathBuf> {
    let mut removed = Vec::new();
    for name in list(domain, &format!("k_{pid}_{pub_id}_")) {
        let Ok(seg) = Segment::open_kind(&name, KIND_POOL) else {
            continue;
        };
        if seg.atomic_u32(OFF_OWNER_PID).load(Ordering::Relaxed) != pid {
            continue;
        }
        let holders = seg.atomic_u32(OFF_HOLDERS);
        // SYNC: AcqRel: every holder's release is ordered before the last
        // one's removal.
        let before =
            holders.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if before == Ok(1) && std::fs::remove_file(name.path()).is_ok() {
            removed.push(name.path());
        }
    }
    removed
}

/// A pool mapped by a reader process.
pub struct PoolReader {
    seg: Segment,
    chunk_size: u32,
    count: u32,
    stride: usize,
}

impl PoolReader {
    /// Open a pool, checking its header and type hash (`ANY_TYPE` accepts
    /// any: a tool that only looks at bytes).
    pub fn open(name: &SegmentName, type_hash: u64) -> Result<PoolReader, ShmError> {
        let seg = Segment::open_kind(name, KIND_POOL)?;
        let count = seg.atomic_u32(OFF_SLOT_COUNT).load(Ordering::Relaxed);
        let chunk_size = seg.atomic_u32(OFF_SLOT_SIZE).load(Ordering::Relaxed);
        let found = seg.atomic_u64(OFF_TYPE_HASH).load(Ordering::Relaxed);
        let path = seg.path_str();
        if found != type_hash && type_hash != crate::endpoint::ANY_TYPE {
            return Err(ShmError::BadHeader {
                path,
                what: format!("pool for type hash {found:016x}, expected {type_hash:016x}"),
            });
        }
        if count == 0 || count > MAX_CHUNKS || chunk_size == 0 || chunk_size > MAX_CHUNK {
            return Err(ShmError::BadHeader {
                path,
                what: format!("{count} chunks of {chunk_size} bytes"),
            });
        }
        let stride = stride_for(chunk_size);
        if seg.len() != DATA + stride * count as usize {
            return Err(ShmError::BadHeader {
                path,
                what: format!("{} bytes for {count} chunks of {chunk_size}", seg.len()),
            });
        }
        Ok(PoolReader {
            seg,
            chunk_size,
            count,
            stride,
        })
    }

    /// The number of chunks (checked against the mapping's size at open).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The memory of chunk `idx` holding `len` bytes. Both come from a
    /// descriptor in shared memory and are checked here.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    #[inline]
    pub fn chunk(&self, idx: u32, len: u32) -> Result<*const u8, ShmError> {
        if idx >= self.count {
            return Err(self.corrupt("chunk index", idx, self.count - 1));
        }
        if len > self.chunk_size {
            return Err(self.corrupt("chunk length", len, self.chunk_size));
        }
        // SAFETY: in bounds: idx < count and the length was validated
        // against the layout at open.
        Ok(unsafe { self.seg.base().add(DATA + idx as usize * self.stride) })
    }

    #[cold]
    #[inline(never)]
    fn corrupt(&self, what: &'static str, value: u32, limit: u32) -> ShmError {
        ShmError::Corrupt {
            path: self.seg.path_str(),
            what,
            value: u64::from(value),
            limit: u64::from(limit),
        }
    }
}

impl std::fmt::Debug for PoolReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolReader")
            .field("path", &self.seg.path_str())
            .field("chunk_size", &self.chunk_size)
            .field("count", &self.count)
            .finish()
    }
}
