//! Segment files: naming, creation (0600), validated opening, stale cleanup.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::MmapMut;
use myelin_sync::SharedEvent;

use crate::ShmError;

/// `MYELINR1`: a myelin ring segment, layout version 1.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"MYELINR1");
pub(crate) const VERSION: u32 = 1;
pub(crate) const KIND_RING: u32 = 1;
pub(crate) const KIND_POOL: u32 = 2;
/// A subscription's inbox (kind 3 was the inbox before its connection
/// blocks carried an expiry per message, kind 8 before they carried a
/// send time too, kind 9 before its publishers counted their claims in the
/// header and a descriptor's stamps moved into its slot: an older process's inbox is refused by name rather than
/// misread, and an older publisher, which would not count its claim,
/// refuses this one).
pub(crate) const KIND_INBOX: u32 = 10;
pub(crate) const KIND_WAKE: u32 = 4;
pub(crate) const KIND_ANNOUNCE: u32 = 5;
/// The domain's change counter and change log (kind 6 was the counter
/// alone, before the log).
pub(crate) const KIND_GRAPH: u32 = 7;
/// Bytes of the segment header; slots start here.
pub(crate) const HEADER_SIZE: usize = 256;
/// Bytes of a slot's own header (stamp, length).
pub(crate) const SLOT_HEADER: usize = 16;
pub(crate) const MAX_TYPE_NAME: usize = 120;
pub(crate) const MAX_SLOTS: u32 = 1 << 20;
pub(crate) const MAX_SLOT_SIZE: u32 = 64 << 20;

// Header field offsets (all naturally aligned; the mapping is page aligned).
pub(crate) const OFF_MAGIC: usize = 0;
pub(crate) const OFF_VERSION: usize = 8;
pub(crate) const OFF_KIND: usize = 12;
pub(crate) const OFF_TOTAL_LEN: usize = 16;
pub(crate) const OFF_OWNER_PID: usize = 24;
pub(crate) const OFF_SLOT_COUNT: usize = 28;
pub(crate) const OFF_SLOT_SIZE: usize = 32;
pub(crate) const OFF_SLOT_STRIDE: usize = 36;
pub(crate) const OFF_EVENT: usize = 40;
pub(crate) const OFF_WRITE_SEQ: usize = 48;
pub(crate) const OFF_TYPE_HASH: usize = 56;
pub(crate) const OFF_TYPE_NAME_LEN: usize = 64;
pub(crate) const OFF_TYPE_NAME: usize = 72;

/// The directory segments live in (`/dev/shm`, or `$MYELIN_SHM_DIR`).
pub fn segment_dir() -> PathBuf {
    std::env::var_os("MYELIN_SHM_DIR").map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// Bytes free (for this user) and in total on the file system that holds
/// the segments ([`segment_dir`]); `None` if it cannot be asked.
pub fn segment_space() -> Option<(u64, u64)> {
    let v = rustix::fs::statvfs(segment_dir()).ok()?;
    Some((
        v.f_bavail.saturating_mul(v.f_frsize),
        v.f_blocks.saturating_mul(v.f_frsize),
    ))
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// A segment's name: per user and domain, so users and domains never see
/// each other's segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentName {
    file: String,
}

impl SegmentName {
    /// `myelin_<uid>_<domain>_<name>`; `name` may use letters, digits, `_`,
    /// `-` and `.`.
    pub fn new(domain: u32, name: &str) -> Result<SegmentName, ShmError> {
        let ok = !name.is_empty()
            && name.len() <= 180
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
            && !name.starts_with('.');
        if !ok {
            return Err(ShmError::InvalidName(name.to_string()));
        }
        Ok(SegmentName {
            file: format!("{}{name}", prefix(domain)),
        })
    }

    /// The segment's path.
    pub fn path(&self) -> PathBuf {
        segment_dir().join(&self.file)
    }
}

pub(crate) fn prefix(domain: u32) -> String {
    format!("myelin_{}_{domain}_", uid())
}

/// The prefix of per-process segments that belong to no domain (wake-up
/// tables).
fn host_prefix() -> String {
    format!("myelin_{}_h_", uid())
}

impl SegmentName {
    /// `myelin_<uid>_h_<name>`: a per-user segment that belongs to no domain
    /// (a process's wake-up table, shared by its contexts).
    pub fn host(name: &str) -> Result<SegmentName, ShmError> {
        let mut n = SegmentName::new(0, name)?;
        n.file = format!("{}{name}", host_prefix());
        Ok(n)
    }

    /// The file name (without the directory).
    pub fn file_name(&self) -> &str {
        &self.file
    }

    /// A name from a file name found in the segment directory (no checks
    /// beyond those of the file system; opening validates the contents).
    pub(crate) fn from_file(file: &str) -> SegmentName {
        SegmentName {
            file: file.to_string(),
        }
    }
}

/// A message type as a segment records it: name and schema hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeId {
    /// The type name (at most 120 bytes are recorded).
    pub name: String,
    /// The schema hash.
    pub hash: u64,
}

/// A mapped segment file.
pub(crate) struct Segment {
    pub(crate) path: PathBuf,
    pub(crate) map: MmapMut,
    /// The creator unlinks the file when dropped.
    owner: bool,
    /// The creator's descriptor, kept to reserve memory later
    /// ([`reserve`](Self::reserve)); readers keep none.
    file: Option<File>,
    /// The file's inode when it was opened (whether the name still points
    /// at the file this process mapped).
    pub(crate) ino: u64,
}

pub(crate) fn io(path: &Path, source: std::io::Error) -> ShmError {
    ShmError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl Segment {
    /// Create a new segment file of `len` bytes, owner-only, mapped.
    ///
    /// The file is created exclusively (never an existing file or a
    /// symlink), mode 0600, and its memory is reserved before it is mapped:
    /// a full file system is [`ShmError::NoSpace`] here, not a SIGBUS on
    /// first touch.
    pub(crate) fn create(name: &SegmentName, len: usize) -> Result<Segment, ShmError> {
        Segment::create_reserving(name, len, len)
    }

    /// [`create`](Self::create), reserving only the first `reserved` bytes
    /// now; the creator reserves the rest as it first uses it
    /// ([`reserve`](Self::reserve)): a pool's chunks, which may never all
    /// be used, take memory only when first handed out.
    pub(crate) fn create_reserving(
        name: &SegmentName,
        len: usize,
        reserved: usize,
    ) -> Result<Segment, ShmError> {
        let path = name.path();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc_flags())
            .open(&path)
            .map_err(|e| io(&path, e))?;
        // Ours from here: remove it again if it cannot be completed.
        let made = (|| {
            check_trusted(&file, &path)?;
            file.set_len(len as u64).map_err(|e| io(&path, e))?;
            reserve(&file, &path, 0, reserved.min(len) as u64)?;
            Self::map(&file, &path, len as u64)
        })();
        match made {
            Ok(map) => {
                remove_at_exit(&path);
                Ok(Segment {
                    path,
                    map,
                    owner: true,
                    ino: inode(&file),
                    file: Some(file),
                })
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Reserve the memory of `len` bytes at `off` (see
    /// [`create_reserving`](Self::create_reserving)); a full file system is
    /// [`ShmError::NoSpace`]. Only the creator can reserve.
    pub(crate) fn reserve(&self, off: usize, len: usize) -> Result<(), ShmError> {
        match &self.file {
            Some(f) => reserve(f, &self.path, off as u64, len as u64),
            None => Ok(()),
        }
    }

    /// Create a segment whose name carries this process's pid: a file of
    /// that name can only be left over from a dead process of this user
    /// that had the same pid, so it is removed first. A file of that name
    /// that is not this user's is [`ShmError::Foreign`] (never removed,
    /// never opened).
    pub(crate) fn create_fresh(name: &SegmentName, len: usize) -> Result<Segment, ShmError> {
        Segment::create_fresh_reserving(name, len, len)
    }

    /// [`create_fresh`](Self::create_fresh), reserving only the first
    /// `reserved` bytes (see [`create_reserving`](Self::create_reserving)).
    pub(crate) fn create_fresh_reserving(
        name: &SegmentName,
        len: usize,
        reserved: usize,
    ) -> Result<Segment, ShmError> {
        let path = name.path();
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if let Some(why) = untrusted(&meta) {
                return Err(ShmError::Foreign {
                    path: path.display().to_string(),
                    why,
                });
            }
            let _ = std::fs::remove_file(&path);
        }
        Segment::create_reserving(name, len, reserved)
    }

    /// Open an existing segment for reading and waking: never through a
    /// symlink, only a regular file of this user that others cannot write,
    /// mapped at the length the file has now.
    pub(crate) fn open(name: &SegmentName) -> Result<Segment, ShmError> {
        let path = name.path();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc_flags())
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => ShmError::Foreign {
                    path: path.display().to_string(),
                    why: "a symlink".into(),
                },
                _ => io(&path, e),
            })?;
        let size = check_trusted(&file, &path)?;
        if size < HEADER_SIZE as u64 {
            return Err(ShmError::BadHeader {
                path: path.display().to_string(),
                what: format!("file is {size} bytes, shorter than a header"),
            });
        }
        let map = Self::map(&file, &path, size)?;
        Ok(Segment {
            path,
            map,
            owner: false,
            ino: inode(&file),
            file: None,
        })
    }

    fn map(file: &File, path: &Path, len: u64) -> Result<MmapMut, ShmError> {
        let len = usize::try_from(len).map_err(|_| ShmError::BadHeader {
            path: path.display().to_string(),
            what: format!("file of {len} bytes does not fit this address space"),
        })?;
        // SAFETY: mapping a file is unsafe because another process may
        // change or truncate it. We never form Rust references to the
        // mapped bytes except to atomics (any bit pattern valid); all other
        // reads are volatile copies that are validated before use, and the
        // length is the file's length checked just before (fstat) and
        // against the header before any slot is touched. The file is a
        // regular file of this user that no other user can write (checked
        // on the open descriptor); a process of this same user truncating
        // it under us can still raise SIGBUS: that is the residual risk,
        // the same as for any shared mapping.
        unsafe { memmap2::MmapOptions::new().len(len).map_mut(file) }.map_err(|e| io(path, e))
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.map.as_ptr() as *mut u8
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn path_str(&self) -> String {
        self.path.display().to_string()
    }

    /// Remove the file's name now (if it is still this file): other
    /// processes stop finding it, while mappings, this one too, stay
    /// valid until dropped.
    pub(crate) fn unlink(&self) {
        if names_inode(&self.path, self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Keep the file when this mapping is dropped (readers of a segment
    /// whose creator is gone, and the domain-wide graph segment).
    pub(crate) fn disown(&mut self) {
        if self.owner {
            forget_at_exit(&self.path);
        }
        self.owner = false;
    }

    /// A 64-bit word of the mapping viewed as an atomic.
    ///
    /// Panics if `off` is out of bounds or not 8-byte aligned: offsets are
    /// computed from validated layouts, so a panic here is a myelin bug,
    /// never a consequence of what another process wrote.
    #[inline]
    pub(crate) fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        assert!(
            off + 8 <= self.len() && off.is_multiple_of(8),
            "offset {off}"
        );
        // SAFETY: in bounds and aligned (asserted; the mapping is page
        // aligned); `AtomicU64` has the layout of `u64` and accepts every
        // bit pattern; every process accesses this word atomically; the
        // mapping outlives `&self`.
        unsafe { &*(self.base().add(off) as *const AtomicU64) }
    }

    /// Ask for the cache line at `off` ahead of a load of it (a hint: no
    /// fault, no effect on what any load returns). Out of range: nothing.
    #[inline]
    pub(crate) fn prefetch(&self, off: usize) {
        if off >= self.len() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch reads nothing into the program and never
        // faults; the address is inside the mapping (checked above).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                self.base().add(off) as *const i8,
            );
        }
    }

    /// A 32-bit word of the mapping viewed as an atomic (see
    /// [`atomic_u64`](Self::atomic_u64)).
    #[inline]
    pub(crate) fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        assert!(
            off + 4 <= self.len() && off.is_multiple_of(4),
            "offset {off}"
        );
        // SAFETY: as `atomic_u64`.
        unsafe { &*(self.base().add(off) as *const AtomicU32) }
    }

    /// Two words at `off` as a cross-process futex event.
    #[inline]
    pub(crate) fn event(&self, off: usize) -> &SharedEvent {
        assert!(
            off + 8 <= self.len() && off.is_multiple_of(8),
            "offset {off}"
        );
        // SAFETY: 8 bytes in bounds, aligned (asserted), accessed only
        // atomically by every process.
        unsafe { SharedEvent::from_words(self.base().add(off) as *mut u32) }
    }

    /// Copy `len` bytes at `off` out of the mapping (foreign memory: the
    /// caller validates what it gets).
    pub(crate) fn read_bytes(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len()));
        let mut out = vec![0u8; len];
        // SAFETY: in bounds (asserted); a raw copy of foreign bytes into a
        // private buffer.
        unsafe { std::ptr::copy_nonoverlapping(self.base().add(off), out.as_mut_ptr(), len) };
        out
    }

    /// Copy bytes into the mapping at `off`.
    pub(crate) fn write_bytes(&self, off: usize, bytes: &[u8]) {
        assert!(
            off.checked_add(bytes.len())
                .is_some_and(|e| e <= self.len())
        );
        // SAFETY: in bounds (asserted); the caller owns this region (it
        // created the segment and has not published it yet, or it holds the
        // chunk).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base().add(off), bytes.len()) };
    }

    /// Write the common header (all but the magic), then the magic with
    /// Release ordering so a reader never accepts a half-written header.
    pub(crate) fn publish_header(&self, kind: u32, owner_pid: u32) {
        self.atomic_u32(OFF_VERSION)
            .store(VERSION, Ordering::Relaxed);
        self.atomic_u32(OFF_KIND).store(kind, Ordering::Relaxed);
        self.atomic_u64(OFF_TOTAL_LEN)
            .store(self.len() as u64, Ordering::Relaxed);
        self.atomic_u32(OFF_OWNER_PID)
            .store(owner_pid, Ordering::Relaxed);
        // SYNC: Release: the header (and everything the creator wrote
        // before) happens-before a reader's Acquire load of the magic.
        self.atomic_u64(OFF_MAGIC).store(MAGIC, Ordering::Release);
    }

    /// Open `name` and check the common header: magic, version, `kind`, and
    /// that the recorded length is the file's length.
    pub(crate) fn open_kind(name: &SegmentName, kind: u32) -> Result<Segment, ShmError> {
        let mut seg = Segment::open(name)?;
        seg.disown();
        let bad = |what: String| ShmError::BadHeader {
            path: seg.path_str(),
            what,
        };
        if seg.len() < HEADER_SIZE {
            return Err(bad(format!(
                "file is {} bytes, shorter than a header",
                seg.len()
            )));
        }
        // SYNC: pairs with the Release store in `publish_header`.
        let magic = seg.atomic_u64(OFF_MAGIC).load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(bad(format!("magic {magic:016x} is not a myelin segment")));
        }
        let version = seg.atomic_u32(OFF_VERSION).load(Ordering::Relaxed);
        let found = seg.atomic_u32(OFF_KIND).load(Ordering::Relaxed);
        if version != VERSION || found != kind {
            return Err(ShmError::OtherVersion {
                path: seg.path_str(),
                found_version: version,
                found_kind: found,
                version: VERSION,
                kind,
            });
        }
        let total = seg.atomic_u64(OFF_TOTAL_LEN).load(Ordering::Relaxed);
        if total != seg.len() as u64 {
            return Err(bad(format!(
                "recorded length {total} differs from the file's {}",
                seg.len()
            )));
        }
        Ok(seg)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.owner {
            let _ = std::fs::remove_file(&self.path);
            forget_at_exit(&self.path);
        }
    }
}

/// Whether a file on the at-exit list is still needed when the process
/// exits (a pool whose chunks readers have not mapped yet).
pub trait NeededAtExit: Send + Sync {
    /// Still needed: the file stays (for its readers, or the survivors'
    /// sweep). Called at exit, with the at-exit list no longer locked (it
    /// may drop what it holds, and segments with it).
    fn needed(&self) -> bool;
}

/// When a file on the at-exit list goes: always, or unless its rule says
/// it is needed. The list holds the rule: a rule that needs an object
/// which may be gone by exit holds it weakly and answers for it.
type ExitRule = Option<std::sync::Arc<dyn NeededAtExit>>;

/// The segment files this process created and still owns, and the pid
/// that made the list (a forked child's list starts empty).
struct Owned {
    pid: u32,
    paths: std::collections::HashMap<PathBuf, ExitRule>,
}

static OWNED: std::sync::Mutex<Option<Owned>> = std::sync::Mutex::new(None);

/// Remove the file at `path` when this process exits normally, unless it
/// is removed (or [`forget_at_exit`]) before. Every segment a process
/// creates is on this list while it owns it: a segment whose last
/// reference a background thread holds when `main` returns (a discovery
/// pass running, a message in flight) is never dropped, and would stay
/// behind. A process killed outright leaves its files to the survivors'
/// sweep ([`cleanup_stale`]).
pub fn remove_at_exit(path: &Path) {
    add_at_exit(path, None);
}

/// [`remove_at_exit`], unless `rule` says the file is still needed then.
pub fn remove_at_exit_unless_needed(path: &Path, rule: std::sync::Arc<dyn NeededAtExit>) {
    add_at_exit(path, Some(rule));
}

fn add_at_exit(path: &Path, rule: ExitRule) {
    extern "C" fn remove_owned() {
        // Taken out of the list first: a rule may drop the last handle of
        // an object whose drop takes a file off the list.
        let paths = {
            let mut list = OWNED.lock().unwrap_or_else(|e| e.into_inner());
            match list.as_mut().filter(|o| o.pid == std::process::id()) {
                Some(o) => std::mem::take(&mut o.paths),
                None => return,
            }
        };
        for (p, rule) in paths {
            if !rule.is_some_and(|r| r.needed()) {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    unsafe extern "C" {
        fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
    }
    let pid = std::process::id();
    let mut list = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    let o = list.get_or_insert_with(|| {
        // SAFETY: `atexit` only records the function pointer; the handler
        // touches a static list under its mutex and the file system.
        unsafe { atexit(remove_owned) };
        Owned {
            pid,
            paths: Default::default(),
        }
    });
    if o.pid != pid {
        // A forked child: its parent's files are not its own.
        o.pid = pid;
        o.paths.clear();
    }
    o.paths.insert(path.to_path_buf(), rule);
}

/// Take `path` off the list of files removed at exit (it was removed, or
/// is someone else's to remove now).
pub fn forget_at_exit(path: &Path) {
    let mut list = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(o) = list.as_mut() {
        o.paths.remove(path);
    }
}

/// `O_NOFOLLOW | O_CLOEXEC`: a symlink in place of a segment is refused
/// (`ELOOP`), and no child process inherits the descriptor.
fn libc_flags() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC).bits() as i32
}

/// The inode of an open file (0 if it cannot be read).
pub(crate) fn inode(file: &File) -> u64 {
    use std::os::unix::fs::MetadataExt;
    file.metadata().map(|m| m.ino()).unwrap_or(0)
}

/// Open `path` to hold a lock on it: never through a symlink, only a file
/// of this user that others cannot write (`Ok(None)`: no such file).
pub(crate) fn open_for_lock(path: &Path) -> Result<Option<File>, ShmError> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(path)
    {
        Ok(f) => {
            check_trusted(&f, path)?;
            Ok(Some(f))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(match e.raw_os_error() {
            Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => ShmError::Foreign {
                path: path.display().to_string(),
                why: "a symlink".into(),
            },
            _ => io(path, e),
        }),
    }
}

/// Whether `path` names the file with inode `ino` now.
pub(crate) fn names_inode(path: &Path, ino: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.ino() == ino)
}

/// Why a file must not be used as a segment, if it must not: not a regular
/// file (a symlink, a directory, a FIFO), another user's, or writable by
/// group or others.
fn untrusted(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Some("a symlink".into());
    }
    if !kind.is_file() {
        return Some("not a regular file".into());
    }
    if meta.uid() != uid() {
        return Some(format!(
            "owned by uid {}, not by this user (uid {})",
            meta.uid(),
            uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "mode {:04o}: group or others may write it",
            meta.mode() & 0o7777
        ));
    }
    None
}

/// Check the open descriptor (not the path, which may change under us):
/// a regular file of this user that nobody else may write. Returns its
/// size.
fn check_trusted(file: &File, path: &Path) -> Result<u64, ShmError> {
    let meta = file.metadata().map_err(|e| io(path, e))?;
    match untrusted(&meta) {
        Some(why) => Err(ShmError::Foreign {
            path: path.display().to_string(),
            why,
        }),
        None => Ok(meta.len()),
    }
}

/// Reserve the memory of `len` bytes at `off` of the file now
/// (`posix_fallocate`), so a full file system is an error here rather than
/// a SIGBUS when a page is first touched. File systems without
/// `fallocate` are left as they are (the residual risk stays with them).
fn reserve(file: &File, path: &Path, off: u64, len: u64) -> Result<(), ShmError> {
    if len == 0 {
        return Ok(());
    }
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), off, len) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::NOSPC => {
            let available = rustix::fs::fstatvfs(file)
                .map(|v| v.f_bavail.saturating_mul(v.f_frsize))
                .unwrap_or(0);
            Err(ShmError::NoSpace {
                path: path.display().to_string(),
                needed: len,
                available,
                dir: segment_dir().display().to_string(),
            })
        }
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => Ok(()),
        Err(e) => Err(io(
            path,
            std::io::Error::from_raw_os_error(e.raw_os_error()),
        )),
    }
}

/// What [`survey`] found about one file of this user in the segment
/// directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentState {
    /// Its owner process runs.
    Live {
        /// The owner process.
        pid: u32,
    },
    /// Its owner process is gone (`kill -9`, a crash): `cleanup_stale`
    /// (and `myelin doctor --clean`) removes it.
    Stale {
        /// The dead owner.
        pid: u32,
    },
    /// Shared by a domain's processes (the change counter): owned by none.
    Shared,
    /// Named like this user's, but a symlink, another user's file, or
    /// writable by others: never used, never removed by myelin.
    Foreign(String),
    /// This user's, but its header is not a myelin header (half-created,
    /// damaged, or not myelin's).
    Corrupt(String),
}

/// One file of [`survey`].
#[derive(Debug, Clone)]
pub struct SurveyEntry {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// What it is.
    pub state: SegmentState,
}

/// Every file in the segment directory named like this user's segments
/// (`myelin_<uid>_...`, any domain), classified without mapping any of
/// them: what `myelin doctor` reports.
pub fn survey() -> Vec<SurveyEntry> {
    let dir = segment_dir();
    let mine = format!("myelin_{}_", uid());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&mine) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let state = match untrusted(&meta) {
            Some(why) => SegmentState::Foreign(why),
            None => classify(&path),
        };
        out.push(SurveyEntry {
            path,
            bytes: meta.len(),
            state,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// A trusted file's state from its header (read, not mapped).
fn classify(path: &Path) -> SegmentState {
    let mut head = [0u8; 32];
    let read = OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(path)
        .and_then(|mut f| f.read_exact(&mut head));
    if read.is_err() {
        return SegmentState::Corrupt("shorter than a header".into());
    }
    let magic = u64::from_ne_bytes(head[OFF_MAGIC..OFF_MAGIC + 8].try_into().expect("8 bytes"));
    if magic != MAGIC {
        return SegmentState::Corrupt(format!("magic {magic:016x} is not a myelin segment"));
    }
    let pid = u32::from_ne_bytes(
        head[OFF_OWNER_PID..OFF_OWNER_PID + 4]
            .try_into()
            .expect("4 bytes"),
    );
    match pid {
        0 => SegmentState::Shared,
        p if process_alive(p) => SegmentState::Live { pid: p },
        p => SegmentState::Stale { pid: p },
    }
}

/// Whether process `pid` exists (as seen from this process).
pub fn process_alive(pid: u32) -> bool {
    match rustix::process::Pid::from_raw(pid as i32) {
        None => false,
        Some(p) => match rustix::process::test_kill_process(p) {
            Ok(()) => true,
            Err(e) => e != rustix::io::Errno::SRCH,
        },
    }
}

/// Remove this user's segments of `domain` whose owner process is dead
/// (e.g. after `kill -9`). Returns the removed paths. Segments whose header
/// cannot be read are left alone (they may be being created right now).
pub fn cleanup_stale(domain: u32) -> Result<Vec<PathBuf>, ShmError> {
    cleanup_prefix(&prefix(domain), &[], None)
}

/// [`cleanup_stale`] and [`cleanup_stale_host`] in one, also removing
/// the segments of the processes in `exited`, which the caller knows have
/// exited (a pidfd said so) though they may still look alive: a killed
/// process is a zombie until its parent reaps it, and a zombie answers
/// `kill(pid, 0)`. Their chunk pools are not removed but returned (the
/// second list): readers may not have mapped the messages still queued in
/// their inboxes yet; the caller removes them after a grace period.
pub fn cleanup_exited(
    domain: u32,
    exited: &[u32],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ShmError> {
    let mut pools = Vec::new();
    let mut removed = cleanup_prefix(&prefix(domain), exited, Some(&mut pools))?;
    removed.extend(cleanup_prefix(&host_prefix(), exited, None)?);
    Ok((removed, pools))
}

/// [`cleanup_stale`] for the per-process segments that belong to no domain
/// (wake-up tables).
pub fn cleanup_stale_host() -> Result<Vec<PathBuf>, ShmError> {
    cleanup_prefix(&host_prefix(), &[], None)
}

/// The segment files of `domain` whose names start with `kind_prefix`
/// (after the domain prefix), sorted.
pub(crate) fn list(domain: u32, kind_prefix: &str) -> Vec<SegmentName> {
    let full = format!("{}{kind_prefix}", prefix(domain));
    let Ok(entries) = std::fs::read_dir(segment_dir()) else {
        return Vec::new();
    };
    let mut out: Vec<SegmentName> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with(&full))
        .map(|n| SegmentName::from_file(&n))
        .collect();
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

fn cleanup_prefix(
    prefix: &str,
    exited: &[u32],
    mut defer_pools: Option<&mut Vec<PathBuf>>,
) -> Result<Vec<PathBuf>, ShmError> {
    let dir = segment_dir();
    let mut removed = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| io(&dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(prefix) {
            continue;
        }
        let path = entry.path();
        // Never another user's file, never through a symlink.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if untrusted(&meta).is_some() {
            continue;
        }
        let mut head = [0u8; 32];
        let Ok(mut f) = OpenOptions::new()
            .read(true)
            .custom_flags(libc_flags())
            .open(&path)
        else {
            continue;
        };
        if f.read_exact(&mut head).is_err() {
            continue;
        }
        let magic = u64::from_ne_bytes(head[OFF_MAGIC..OFF_MAGIC + 8].try_into().expect("8 bytes"));
        if magic != MAGIC {
            // Half-created by a process that died before writing its
            // header: remove once it is clearly not being created now.
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > std::time::Duration::from_secs(10));
            if old && std::fs::remove_file(&path).is_ok() {
                removed.push(path);
            }
            continue;
        }
        let pid = u32::from_ne_bytes(
            head[OFF_OWNER_PID..OFF_OWNER_PID + 4]
                .try_into()
                .expect("4 bytes"),
        );
        // pid 0: a domain-wide segment owned by nobody (never stale). An
        // owner is gone when it was reported exited or no longer runs.
        let owner_gone = exited.contains(&pid) || !process_alive(pid);
        if pid == 0 || !owner_gone {
            continue;
        }
        let kind = u32::from_ne_bytes(head[OFF_KIND..OFF_KIND + 4].try_into().expect("4 bytes"));
        if let Some(pools) = defer_pools.as_deref_mut()
            && kind == KIND_POOL
            && exited.contains(&pid)
        {
            pools.push(path);
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    Ok(removed)
}
