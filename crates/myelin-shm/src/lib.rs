//! myelin's shared-memory layer: the segments and lock-free structures
//! the shared-memory transport (`myelin-core`'s `transport::shm`) is built
//! from. Nothing here knows myelin's types; everything read from a segment
//! is untrusted.
//!
//! * **Segments** ([`SegmentName`]) are files in `/dev/shm` named
//!   `myelin_<uid>_<domain>_<name>`, created owner-only (`0600`), with a
//!   validated header (magic, version, kind, length, owner pid).
//!   [`cleanup_stale`] removes the segments of dead processes.
//! * **Endpoints** ([`endpoint`]): the announcements discovery reads, and
//!   the domain's change counter with its change log ([`changes`]).
//! * **Inboxes** ([`inbox`]): a subscription's buffer across processes:
//!   descriptor rings written by up to 16 publishers, return rings back.
//! * **Pools** ([`pool`]): a publisher's chunks, read in place by
//!   subscribers; reference counts stay in the publisher's private memory.
//! * **Wake-up tables** ([`wake`]): futex slots other processes signal,
//!   with ready lanes that say which inbox has data.
//! * **Exits** ([`watch`]): a pidfd per peer process in one epoll set, so
//!   a process that dies (even by `kill -9`) is noticed at once.
//! * **The broadcast ring** ([`RingWriter`], [`RingReader`]): one writer,
//!   any number of readers, each slot a seqlock, so the writer never waits.
//!   The transport does not use it; the benchmark does, as the floor of a
//!   copying shared-memory transport (`myelin bench ipc`).
//!
//! This crate is the unsafe boundary for *foreign* memory, as `myelin-sync`
//! is for in-process primitives: it views words of the mapping as `std`
//! atomics (loom cannot model memory shared between processes, so the
//! protocols are tested with real processes and corruption proptests), and
//! copies payloads with volatile or raw copies that are validated first.
//!
//! ```
//! use myelin_shm::{RingReader, RingWriter, SegmentName, TypeId};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let name = SegmentName::new(77, &format!("doc_{}", std::process::id()))?;
//! let ty = TypeId { name: "std_msgs/msg/String".into(), hash: 0x1234 };
//! let mut writer = RingWriter::create(&name, &ty, 8, 256)?;
//! let mut reader = RingReader::open(&name, &ty)?;
//! writer.publish(b"hello")?;
//! let mut buf = Vec::new();
//! let info = reader.try_recv(&mut buf)?.expect("a message");
//! assert_eq!(&buf, b"hello");
//! assert_eq!(info.lost, 0);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod changes;
pub mod endpoint;
pub mod inbox;
pub mod pool;
mod ring;
mod segment;
pub mod wake;
pub mod watch;

pub use ring::{RecvInfo, RingReader, RingWriter};
pub use segment::{
    NeededAtExit, SegmentName, SegmentState, SurveyEntry, TypeId, cleanup_exited, cleanup_stale,
    cleanup_stale_host, forget_at_exit, process_alive, remove_at_exit,
    remove_at_exit_unless_needed, segment_dir, segment_space, survey,
};

/// Shared-memory errors. Each names the segment (its path) and what is
/// wrong.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// A name has characters that cannot be part of a segment file name.
    #[error(
        "invalid segment name {0:?}: use letters, digits, '_', '-' and '.' only (at most 180 characters)"
    )]
    InvalidName(String),
    /// Creating, opening or mapping the file failed.
    #[error("shared memory {path}: {source}")]
    Io {
        /// The segment file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not one this process may trust: a symlink, not a
    /// regular file, owned by another user, or writable by others. It was
    /// not mapped (and, when found while scanning, it is skipped).
    #[error(
        "shared memory {path}: {why}; not used. Remove it if it is stale (`myelin doctor --clean` removes only this user's), or set MYELIN_SHM_DIR to a private directory"
    )]
    Foreign {
        /// The file.
        path: String,
        /// What is wrong with it (a symlink, the owner uid, the mode).
        why: String,
    },
    /// The file system holding the segments is full: the segment could not
    /// be given its memory (reported here instead of a SIGBUS on first
    /// touch).
    #[error(
        "shared memory {path}: no space for {needed} bytes ({available} bytes free in {dir}); free /dev/shm (`myelin doctor --clean`, `df -h /dev/shm`) or use smaller messages"
    )]
    NoSpace {
        /// The file that could not grow.
        path: String,
        /// Bytes it needed.
        needed: u64,
        /// Bytes free on that file system.
        available: u64,
        /// The directory.
        dir: String,
    },
    /// The segment's header is not a myelin ring (or is damaged).
    #[error("shared memory {path}: bad header: {what}")]
    BadHeader {
        /// The segment file.
        path: String,
        /// Which field and why.
        what: String,
    },
    /// The segment was written by another myelin version: its layout
    /// (version, or the kind number a changed layout takes) is not this
    /// one's.
    #[error(
        "shared memory {path}: written by another myelin version (layout {found_version}, kind {found_kind}; this one reads layout {version}, kind {kind}): processes built against different myelin versions do not meet over shared memory; rebuild them against one"
    )]
    OtherVersion {
        /// The segment file.
        path: String,
        /// Its layout version.
        found_version: u32,
        /// Its kind number.
        found_kind: u32,
        /// The layout version this build reads.
        version: u32,
        /// The kind number this build expects.
        kind: u32,
    },
    /// The segment carries another message type.
    #[error(
        "shared memory {path}: carries {found} (hash {found_hash:016x}), expected {expected} (hash {expected_hash:016x})"
    )]
    TypeMismatch {
        /// The segment file.
        path: String,
        /// The type this end expects.
        expected: String,
        /// Its schema hash.
        expected_hash: u64,
        /// The type in the segment.
        found: String,
        /// Its schema hash.
        found_hash: u64,
    },
    /// A message does not fit a slot.
    #[error(
        "shared memory {path}: message of {len} bytes does not fit a slot of {slot_size} bytes"
    )]
    TooLarge {
        /// The segment file.
        path: String,
        /// The message length.
        len: usize,
        /// The slot capacity.
        slot_size: usize,
    },
    /// A value read from the segment is out of range (corruption or a
    /// hostile writer); the reader skipped it.
    #[error("shared memory {path}: corrupt {what}: {value} (limit {limit}); skipped")]
    Corrupt {
        /// The segment file.
        path: String,
        /// Which value.
        what: &'static str,
        /// What was read.
        value: u64,
        /// The largest valid value.
        limit: u64,
    },
}

/// Nanoseconds on `CLOCK_MONOTONIC`: one clock for every process of the
/// host (a container in its own time namespace aside), on which a
/// publisher stamps when its messages expire ([`inbox::InboxWriter::push_stamped`]).
///
/// ```
/// let a = myelin_shm::monotonic_ns();
/// assert!(myelin_shm::monotonic_ns() >= a);
/// ```
pub fn monotonic_ns() -> u64 {
    // Through libc, not rustix: rustix's raw backend finds the vDSO by
    // parsing the auxiliary vector itself, which faults under valgrind
    // (its vDSO is not where the auxv says), so every publisher made
    // `myelin` crash under valgrind (and the instruction-count gate).
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes one timespec through a valid,
    // exclusive pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}
