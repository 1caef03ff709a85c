//! Segment files: naming, creation (0600), validated opening, stale cleanup.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::ShmError;

/// `MYELINR1`: a myelin ring segment, layout version 1.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"MYELINR1");
pub(crate) const VERSION: u32 = 1;
pub(crate) const KIND_RING: u32 = 1;
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

fn prefix(domain: u32) -> String {
    format!("myelin_{}_{domain}_", uid())
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
}

pub(crate) fn io(path: &Path, source: std::io::Error) -> ShmError {
    ShmError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl Segment {
    /// Create a new segment file of `len` bytes, owner-only, mapped.
    pub(crate) fn create(name: &SegmentName, len: usize) -> Result<Segment, ShmError> {
        let path = name.path();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        file.set_len(len as u64).map_err(|e| io(&path, e))?;
        let map = Self::map(&file, &path)?;
        Ok(Segment {
            path,
            map,
            owner: true,
        })
    }

    /// Open an existing segment for reading and waking.
    pub(crate) fn open(name: &SegmentName) -> Result<Segment, ShmError> {
        let path = name.path();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        let map = Self::map(&file, &path)?;
        Ok(Segment {
            path,
            map,
            owner: false,
        })
    }

    fn map(file: &File, path: &Path) -> Result<MmapMut, ShmError> {
        // SAFETY: mapping a file is unsafe because another process may
        // change or truncate it. We never form Rust references to the
        // mapped bytes except to atomics (any bit pattern valid); all other
        // reads are volatile copies that are validated before use, and the
        // length is checked against the header before any slot is touched.
        // Truncation by another process (SIGBUS) is outside what any
        // shared-memory reader can prevent; the file is owner-only.
        unsafe { MmapMut::map_mut(file) }.map_err(|e| io(path, e))
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
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.owner {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether process `pid` exists (as seen from this process).
fn alive(pid: u32) -> bool {
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
    let dir = segment_dir();
    let prefix = prefix(domain);
    let mut removed = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| io(&dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&prefix) {
            continue;
        }
        let path = entry.path();
        let mut head = [0u8; 32];
        let Ok(mut f) = File::open(&path) else {
            continue;
        };
        if f.read_exact(&mut head).is_err() {
            continue;
        }
        let magic = u64::from_ne_bytes(head[OFF_MAGIC..OFF_MAGIC + 8].try_into().expect("8 bytes"));
        if magic != MAGIC {
            continue;
        }
        let pid = u32::from_ne_bytes(
            head[OFF_OWNER_PID..OFF_OWNER_PID + 4]
                .try_into()
                .expect("4 bytes"),
        );
        if !alive(pid) && std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    Ok(removed)
}
