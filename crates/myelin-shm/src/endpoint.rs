//! Discovery without a daemon: every endpoint is a segment whose header
//! describes it, and one domain-wide segment carries a futex that any
//! process bumps when its endpoints change.
//!
//! * a publisher announces itself with `p_<pid>_<id>`;
//! * a subscription's inbox `s_<pid>_<id>` (see [`crate::inbox`]) is its
//!   announcement;
//! * `graph` holds the change counter every process waits on.
//!
//! A process that exits is forgotten when its segments go (clean exit) or
//! when a scanner finds its pid dead (crash).

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::ShmError;
use crate::changes::{self, Change, EndpointKey, GRAPH_LEN, LogEntry, LogRead};
use crate::segment::*;

/// Where the endpoint description starts in a segment.
pub(crate) const INFO_OFF: usize = HEADER_SIZE;
/// Bytes reserved for it.
pub(crate) const INFO_LEN: usize = 1024;
const MAX_STR: usize = 255;
/// Bytes of opaque QoS (encoded by the core).
pub const QOS_BYTES: usize = 64;
/// The type hash of a subscription that takes any type as bytes (`myelin
/// topic echo` and friends); its type name is `*`.
pub const ANY_TYPE: u64 = 0;
/// The type name that goes with [`ANY_TYPE`].
pub const ANY_TYPE_NAME: &str = "*";

/// Publisher or subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndpointKind {
    /// A publisher.
    Publisher,
    /// A subscription.
    Subscription,
}

/// What an endpoint tells other processes about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointInfo {
    /// Publisher or subscription.
    pub kind: EndpointKind,
    /// The owning process.
    pub pid: u32,
    /// The owning context (unique within the process).
    pub context: u64,
    /// The endpoint (unique within the process).
    pub id: u64,
    /// The fully qualified topic name.
    pub topic: String,
    /// The message type name.
    pub type_name: String,
    /// The message schema hash.
    pub type_hash: u64,
    /// The fully qualified node name.
    pub node: String,
    /// The QoS, encoded by the core (opaque here).
    pub qos: [u8; QOS_BYTES],
    /// The [tag](crate::wake::WakeTable::tag) of the owning process's
    /// wake-up table (0: none).
    pub wake_tag: u64,
}

fn put_str(seg: &Segment, off: usize, len_off: usize, s: &str) {
    let mut n = s.len().min(MAX_STR);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    seg.atomic_u32(len_off).store(n as u32, Ordering::Relaxed);
    seg.write_bytes(off, &s.as_bytes()[..n]);
}

fn get_str(seg: &Segment, off: usize, len_off: usize) -> Result<String, String> {
    let n = seg.atomic_u32(len_off).load(Ordering::Relaxed) as usize;
    if n > MAX_STR {
        return Err(format!("string length {n} at offset {off}"));
    }
    String::from_utf8(seg.read_bytes(off, n)).map_err(|_| format!("non-UTF-8 string at {off}"))
}

impl EndpointInfo {
    /// The key naming this endpoint's segment and its log entries.
    pub fn key(&self) -> EndpointKey {
        EndpointKey::new(self.kind, self.pid, self.id, &self.topic)
    }

    pub(crate) fn write(&self, seg: &Segment) {
        let b = INFO_OFF;
        let kind = match self.kind {
            EndpointKind::Publisher => 1,
            EndpointKind::Subscription => 2,
        };
        seg.atomic_u32(b).store(kind, Ordering::Relaxed);
        seg.atomic_u32(b + 4).store(self.pid, Ordering::Relaxed);
        seg.atomic_u64(b + 8).store(self.context, Ordering::Relaxed);
        seg.atomic_u64(b + 16).store(self.id, Ordering::Relaxed);
        seg.atomic_u64(b + 24)
            .store(self.type_hash, Ordering::Relaxed);
        seg.write_bytes(b + 32, &self.qos);
        seg.atomic_u64(b + 112)
            .store(self.wake_tag, Ordering::Relaxed);
        put_str(seg, b + 128, b + 96, &self.topic);
        put_str(seg, b + 384, b + 100, &self.type_name);
        put_str(seg, b + 640, b + 104, &self.node);
    }

    pub(crate) fn read(seg: &Segment) -> Result<EndpointInfo, ShmError> {
        let b = INFO_OFF;
        let bad = |what: String| ShmError::BadHeader {
            path: seg.path_str(),
            what,
        };
        if seg.len() < INFO_OFF + INFO_LEN {
            return Err(bad("too short for an endpoint description".into()));
        }
        let kind = match seg.atomic_u32(b).load(Ordering::Relaxed) {
            1 => EndpointKind::Publisher,
            2 => EndpointKind::Subscription,
            k => return Err(bad(format!("endpoint kind {k}"))),
        };
        let mut qos = [0u8; QOS_BYTES];
        qos.copy_from_slice(&seg.read_bytes(b + 32, QOS_BYTES));
        Ok(EndpointInfo {
            kind,
            pid: seg.atomic_u32(b + 4).load(Ordering::Relaxed),
            context: seg.atomic_u64(b + 8).load(Ordering::Relaxed),
            id: seg.atomic_u64(b + 16).load(Ordering::Relaxed),
            type_hash: seg.atomic_u64(b + 24).load(Ordering::Relaxed),
            qos,
            wake_tag: seg.atomic_u64(b + 112).load(Ordering::Relaxed),
            topic: get_str(seg, b + 128, b + 96).map_err(bad)?,
            type_name: get_str(seg, b + 384, b + 100).map_err(bad)?,
            node: get_str(seg, b + 640, b + 104).map_err(bad)?,
        })
    }
}

/// A publisher's announcement; removed when dropped.
pub struct Announcement {
    _seg: Segment,
}

impl Announcement {
    /// Announce a publisher of `domain`.
    pub fn publish(domain: u32, info: &EndpointInfo) -> Result<Announcement, ShmError> {
        let name = info.key().segment_name(domain)?;
        let seg = Segment::create_fresh(&name, INFO_OFF + INFO_LEN)?;
        info.write(&seg);
        seg.publish_header(KIND_ANNOUNCE, info.pid);
        Ok(Announcement { _seg: seg })
    }
}

impl std::fmt::Debug for Announcement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcement")
            .field("path", &self._seg.path_str())
            .finish()
    }
}

/// An endpoint found by [`scan`].
#[derive(Debug, Clone)]
pub struct Found {
    /// Its segment (for a subscription: the inbox to connect to).
    pub name: SegmentName,
    /// What it says about itself.
    pub info: EndpointInfo,
    /// Whether its process is alive.
    pub alive: bool,
}

/// Every endpoint of `domain` on this host whose segment reads correctly.
/// Segments that fail validation are skipped (they may be half-created or
/// damaged, or not this user's: [`ShmError::Foreign`]); `errors` gets one
/// error per skipped segment.
pub fn scan(domain: u32, errors: &mut Vec<ShmError>) -> Vec<Found> {
    let mut out = Vec::new();
    for (prefix, kind) in [("p_", KIND_ANNOUNCE), ("s_", KIND_INBOX)] {
        for name in list(domain, prefix) {
            match Segment::open_kind(&name, kind).and_then(|s| EndpointInfo::read(&s)) {
                Ok(info) => {
                    let alive = process_alive(info.pid);
                    out.push(Found { name, info, alive });
                }
                Err(e) => errors.push(e),
            }
        }
    }
    out
}

/// The endpoints of `domain` on this host, from the segments' names
/// alone (nothing is opened): what a process compares against what it
/// knows, to find what appeared and what went away.
pub fn list_keys(domain: u32) -> Vec<(EndpointKey, SegmentName)> {
    let prefix_len = prefix(domain).len();
    let mut out = Vec::new();
    for prefix in ["p_", "s_"] {
        for name in list(domain, prefix) {
            if let Some(key) = EndpointKey::parse(&name.file_name()[prefix_len..]) {
                out.push((key, name));
            }
        }
    }
    out
}

/// Open the endpoint `key` of `domain` and read its description.
pub fn open_found(domain: u32, key: &EndpointKey) -> Result<Found, ShmError> {
    let name = key.segment_name(domain)?;
    let kind = match key.kind {
        EndpointKind::Publisher => KIND_ANNOUNCE,
        EndpointKind::Subscription => KIND_INBOX,
    };
    let info = Segment::open_kind(&name, kind).and_then(|s| EndpointInfo::read(&s))?;
    if info.pid != key.pid || info.id != key.id || info.kind != key.kind {
        return Err(ShmError::BadHeader {
            path: name.path().display().to_string(),
            what: format!(
                "describes endpoint {} of process {}, not the one its name says",
                info.id, info.pid
            ),
        });
    }
    Ok(Found {
        alive: process_alive(info.pid),
        name,
        info,
    })
}

/// Whether a segment file that does not validate was last written more than
/// a few seconds ago (so nobody is still creating it).
fn abandoned(name: &SegmentName) -> bool {
    std::fs::metadata(name.path())
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(3))
}

/// A listener slot of the domain's graph segment, held by this process
/// (see [`crate::changes`]).
#[derive(Debug, Clone)]
pub struct Listener {
    slot: usize,
    pid: u32,
}

/// The domain-wide change counter (`graph` segment, owned by nobody).
///
/// Every process that uses it holds a shared `flock` on its file for as
/// long as it does; the last to leave (the one that gets the lock
/// exclusively) removes the file, so a domain leaves nothing behind once
/// its last process exits cleanly, and [`remove_unused_graphs`] removes
/// one a killed process left. A process that opened the file just as it
/// was removed finds its name no longer points at it and starts over.
pub struct GraphEvent {
    seg: Segment,
    squatted: Vec<ShmError>,
    /// The shared lock on the file (its own descriptor), until
    /// [`leave`](Self::leave) (also registered to be left at exit).
    lock: std::sync::Arc<std::sync::Mutex<Option<std::fs::File>>>,
    /// The counter's name (the segment itself may have been built under
    /// a temporary one).
    path: std::path::PathBuf,
}

const OFF_GRAPH_EVENT: usize = HEADER_SIZE;

/// How many names a domain's change counter may take: `graph`, then
/// `graph_1` .. `graph_7`. The counter's name is the one name in a domain
/// that anyone can predict, so another local user could plant a file
/// there first; every process of this user skips the same planted names
/// in the same order and meets at the first name that is its own.
pub const GRAPH_NAMES: usize = 8;

fn graph_name(domain: u32, i: usize) -> Result<SegmentName, ShmError> {
    match i {
        0 => SegmentName::new(domain, "graph"),
        i => SegmentName::new(domain, &format!("graph_{i}")),
    }
}

impl GraphEvent {
    /// Open `domain`'s counter, creating it if this is the first process.
    ///
    /// A name held by a file this user does not own (another user's, a
    /// symlink, writable by others) is skipped for the next of
    /// [`GRAPH_NAMES`]; [`squatted`](Self::squatted) lists what was
    /// skipped. Only when every name is taken is that an error.
    pub fn open_or_create(domain: u32) -> Result<GraphEvent, ShmError> {
        let mut squatted = Vec::new();
        for i in 0..GRAPH_NAMES {
            let name = graph_name(domain, i)?;
            match Self::open_or_create_at(domain, &name) {
                Ok((seg, lock)) => {
                    let lock = std::sync::Arc::new(std::sync::Mutex::new(Some(lock)));
                    leave_at_exit(&lock, name.path(), seg.ino);
                    return Ok(GraphEvent {
                        seg,
                        squatted,
                        lock,
                        path: name.path(),
                    });
                }
                Err(e @ ShmError::Foreign { .. }) => squatted.push(e),
                Err(e) => return Err(e),
            }
        }
        Err(squatted.pop().expect("GRAPH_NAMES > 0"))
    }

    /// The planted files skipped on the way to this counter (each names
    /// its path and what is wrong with it).
    pub fn squatted(&self) -> &[ShmError] {
        &self.squatted
    }

    /// The counter at `name` with a shared lock on its file, taken after
    /// the name was checked to still point at the mapped file.
    fn open_or_create_at(
        domain: u32,
        name: &SegmentName,
    ) -> Result<(Segment, std::fs::File), ShmError> {
        let deadline = Instant::now() + std::time::Duration::from_secs(2);
        loop {
            let seg = Self::map_at(domain, name, deadline)?;
            let path = name.path();
            if let Some(lock) = open_for_lock(&path)? {
                rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockShared)
                    .map_err(|e| io(&path, e.into()))?;
                // The last user may have removed the file between our
                // open and our lock: then the name is gone or points at a
                // newer file, and we start over with that.
                if inode(&lock) == seg.ino && names_inode(&path, seg.ino) {
                    return Ok((seg, lock));
                }
            }
            if Instant::now() > deadline {
                return Err(ShmError::Io {
                    path: path.display().to_string(),
                    source: std::io::Error::other(
                        "the domain's graph file kept being replaced while opening it",
                    ),
                });
            }
        }
    }

    /// Map the counter at `name`, creating it if it does not exist.
    fn map_at(domain: u32, name: &SegmentName, deadline: Instant) -> Result<Segment, ShmError> {
        loop {
            // Build the segment under a private name and link it into
            // place: the shared name never shows a half-written header,
            // even if this process dies midway.
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let tmp = SegmentName::new(domain, &format!("graphtmp_{}_{n}", std::process::id()))?;
            let mut seg = Segment::create_fresh(&tmp, GRAPH_LEN)?;
            seg.disown();
            seg.publish_header(KIND_GRAPH, 0);
            let linked = std::fs::hard_link(tmp.path(), name.path());
            let _ = std::fs::remove_file(tmp.path());
            match linked {
                Ok(()) => return Ok(seg),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(ShmError::Io {
                        path: name.path().display().to_string(),
                        source: e,
                    });
                }
            }
            drop(seg);
            match Segment::open_kind(name, KIND_GRAPH).and_then(|seg| {
                if seg.len() < GRAPH_LEN {
                    Err(ShmError::BadHeader {
                        path: seg.path_str(),
                        what: format!("{} bytes, too short for the change log", seg.len()),
                    })
                } else {
                    Ok(seg)
                }
            }) {
                Ok(seg) => return Ok(seg),
                Err(ShmError::BadHeader { .. } | ShmError::OtherVersion { .. })
                    if abandoned(name) =>
                {
                    // Left half-written by a process that died while
                    // creating it (before creation was atomic): replace.
                    let _ = std::fs::remove_file(name.path());
                }
                Err(e @ ShmError::Foreign { .. }) => return Err(e),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        }
    }

    /// Tell every process that the endpoints changed.
    pub fn bump(&self) {
        self.seg.event(OFF_GRAPH_EVENT).notify();
    }

    /// Record that an endpoint appeared, changed or went away, and tell
    /// every process (see [`crate::changes`]). Appended after the change
    /// is visible in the directory: a segment complete, or unlinked.
    pub fn announce(&self, change: Change, key: &EndpointKey) {
        changes::append(&self.seg, change, key);
        changes::wake_listeners(&self.seg, key.bucket);
        self.bump();
    }

    /// Take a listener slot for this process: its discovery thread then
    /// sleeps on [`wait_listener`](Self::wait_listener) and is woken only
    /// for changes in the topic groups it asks for
    /// ([`listen_to`](Self::listen_to)). `None` when every slot is held
    /// by a live process: then wait on the domain-wide counter.
    pub fn claim_listener(&self) -> Option<Listener> {
        let pid = std::process::id();
        changes::claim_slot(&self.seg, pid).map(|slot| Listener { slot, pid })
    }

    /// Give a listener slot back.
    pub fn release_listener(&self, l: &Listener) {
        changes::release_slot(&self.seg, l.slot, l.pid);
    }

    /// Wake `l` for changes in topic bucket group `group`
    /// ([`changes::group_of`]), or stop.
    pub fn listen_to(&self, l: &Listener, group: usize, on: bool) {
        changes::set_interest(&self.seg, l.slot, group, on);
    }

    /// The listener's wake count.
    pub fn listener_epoch(&self, l: &Listener) -> u32 {
        changes::slot_event(&self.seg, l.slot).epoch()
    }

    /// Wake the listener `l` (this process's own reason: an exit seen).
    pub fn wake_listener(&self, l: &Listener) {
        changes::slot_event(&self.seg, l.slot).notify();
    }

    /// Sleep until `l` is woken (its count differs from `seen`) or
    /// `deadline` passes.
    pub fn wait_listener(&self, l: &Listener, seen: u32, deadline: Instant) {
        let ev = changes::slot_event(&self.seg, l.slot);
        ev.wait_while(|| ev.epoch() == seen, Some(deadline));
    }

    /// How many changes were ever announced (a new reader's cursor).
    pub fn log_head(&self) -> u64 {
        changes::head(&self.seg)
    }

    /// The changes announced from `cursor` on, into `out`.
    pub fn read_log(&self, cursor: u64, out: &mut Vec<LogEntry>) -> LogRead {
        changes::read_since(&self.seg, cursor, out)
    }

    /// The current change count.
    pub fn epoch(&self) -> u32 {
        // The event's first word is its epoch.
        self.seg.atomic_u32(OFF_GRAPH_EVENT).load(Ordering::SeqCst)
    }

    /// Sleep until the count differs from `seen` or `deadline` passes.
    pub fn wait(&self, seen: u32, deadline: Instant) {
        self.seg
            .event(OFF_GRAPH_EVENT)
            .wait_while(|| self.epoch() == seen, Some(deadline));
    }
}

impl GraphEvent {
    /// Stop using the counter: if no other user holds it, this was the
    /// domain's last and the file goes. Idempotent; dropping the counter
    /// does it too. A context calls it when it shuts down, so the file
    /// does not wait for the last clone of the counter (a discovery
    /// thread still finishing, a link) to be dropped; bumping the counter
    /// afterwards is harmless (the mapping stays valid).
    pub fn leave(&self) {
        leave_lock(&self.lock, &self.path, self.seg.ino);
    }
}

/// Give up the shared lock in `slot` (once): if no other process holds the
/// file, this was the domain's last user and the file at `path` goes (if
/// the name is still the file `ino`).
fn leave_lock(slot: &std::sync::Mutex<Option<std::fs::File>>, path: &std::path::Path, ino: u64) {
    let lock = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(lock) = lock else { return };
    // Converting our shared lock to an exclusive one succeeds only if no
    // other process holds the file.
    let last = rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive);
    if last.is_ok() && names_inode(path, ino) {
        let _ = std::fs::remove_file(path);
    }
}

/// A counter to leave when the process exits.
struct LeaveAtExit {
    pid: u32,
    lock: std::sync::Weak<std::sync::Mutex<Option<std::fs::File>>>,
    path: std::path::PathBuf,
    ino: u64,
}

static AT_EXIT: std::sync::Mutex<Vec<LeaveAtExit>> = std::sync::Mutex::new(Vec::new());

/// Leave the counter whose lock is `lock` when the process exits normally,
/// if nothing left it before. A context leaves it when it is dropped, but
/// the last reference may be dropped by a background thread (discovery
/// finishing a pass) that the exit of `main` cuts short: the file stayed
/// behind (a CI run caught it).
fn leave_at_exit(
    lock: &std::sync::Arc<std::sync::Mutex<Option<std::fs::File>>>,
    path: std::path::PathBuf,
    ino: u64,
) {
    extern "C" fn leave_all() {
        // try_lock: a thread killed while holding it must not hang exit.
        let Ok(list) = AT_EXIT.try_lock() else { return };
        for e in list.iter().filter(|e| e.pid == std::process::id()) {
            if let Some(lock) = e.lock.upgrade() {
                leave_lock(&lock, &e.path, e.ino);
            }
        }
    }
    unsafe extern "C" {
        fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
    }
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: `atexit` only records the function pointer; the handler
        // touches a static list (with `try_lock`) and the file system.
        unsafe { atexit(leave_all) };
    });
    let mut list = AT_EXIT.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|e| e.lock.strong_count() > 0);
    list.push(LeaveAtExit {
        pid: std::process::id(),
        lock: std::sync::Arc::downgrade(lock),
        path,
        ino,
    });
}

impl Drop for GraphEvent {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Remove the graph files of `domain` that no process uses (left by
/// processes that were killed, or by myelin versions that kept them);
/// returns what was removed. A file in use, or not this user's, stays.
pub fn remove_unused_graphs(domain: u32) -> Result<Vec<std::path::PathBuf>, ShmError> {
    let mut removed = Vec::new();
    for i in 0..GRAPH_NAMES {
        let path = graph_name(domain, i)?.path();
        let lock = match open_for_lock(&path) {
            Ok(Some(f)) => f,
            Ok(None) | Err(ShmError::Foreign { .. }) => continue,
            Err(e) => return Err(e),
        };
        let unused =
            rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok();
        if unused && names_inode(&path, inode(&lock)) {
            std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
            removed.push(path);
        }
    }
    Ok(removed)
}

impl std::fmt::Debug for GraphEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphEvent")
            .field("path", &self.path)
            .finish()
    }
}
