//! The publisher's side of the shared-memory transport: pools of chunks
//! this process writes, and a connection (descriptor ring) to the inbox of
//! each compatible subscription in another process.

use std::any::Any;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use myelin_shm::NeededAtExit;
use myelin_shm::SegmentName;
use myelin_shm::changes::{Change, EndpointKey};
use myelin_shm::endpoint::{Announcement, EndpointInfo, EndpointKind, Found};
use myelin_shm::inbox::{DEFAULT_CONNECTIONS, Desc, InboxWriter, MAX_CONNECTIONS, Pushed, Stamp};
use myelin_shm::pool::{MAX_CHUNK, PoolWriter};
use myelin_shm::wake::WakeTable;
use myelin_sync::LaneCell;

use super::qos::{decode_qos, is_any_info};
use super::{Discovered, Domain, LEAVE_WAIT, lock_within, remote_wake_table};
use crate::clock::Pacer;
use crate::qos::{Durability, History, QoS};
use crate::transport::{
    Encode, EndpointSpec, Lender, LinkLoan, PubLink, PubOwner, Refused, SendError, TransportError,
    TypeInfo, Wanted,
};
use crate::wire::SharedBytes;

/// Chunks of one publisher: a growing list of pools, indexed by the pool
/// byte of a descriptor.
struct Pools {
    domain: u32,
    id: u64,
    type_hash: u64,
    list: LaneCell<Vec<Arc<PoolWriter>>>,
    grow: Mutex<()>,
    /// The publisher, which tells whether a pool's file is still needed
    /// when the process exits.
    exit_owner: OnceLock<Arc<dyn NeededAtExit>>,
}

/// One reference to a chunk held by this process (a message being
/// encoded and sent, or, in an `Arc`, the owner of a loaned message's
/// bytes that go further than this link: `Lender::keep_loan`); dropping it
/// gives the reference back. The publisher recognises its own memory at
/// send time by that owner (`send_bytes`).
struct Lease {
    pool: Arc<PoolWriter>,
    /// The pool's place in the publisher's list (descriptors name it).
    pool_idx: u8,
    chunk: u32,
}

impl Drop for Lease {
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn drop(&mut self) {
        self.pool.release(self.chunk);
    }
}

/// A chunk taken from a pool, and where it is mapped here. A message
/// encoded into it is sent and dropped in place (no allocation).
struct Chunk {
    lease: Lease,
    ptr: *mut u8,
}

/// A chunk just taken from pool `pool_idx` (one reference, this
/// process's), seen through the pool list's guard.
struct Taken<'a> {
    pool: &'a Arc<PoolWriter>,
    pool_idx: u8,
    chunk: u32,
    ptr: *mut u8,
}

impl Taken<'_> {
    /// Held by a lease (that gives the reference back when dropped).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn into_chunk(self) -> Chunk {
        Chunk {
            lease: Lease {
                pool: self.pool.clone(),
                pool_idx: self.pool_idx,
                chunk: self.chunk,
            },
            ptr: self.ptr,
        }
    }
}

/// What `PubShm::send_chunk` may do with the caller's own reference to
/// the chunk it sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reference {
    /// Hand it to a reader (the caller lets go of the chunk after the
    /// send: a loan or a message just encoded).
    Handed,
    /// Keep it (the chunk is shared further: a kept loan's bytes).
    Kept,
}

impl Lease {
    /// Let go of the lease without giving its reference back: a reader
    /// holds it now (`Reference::Handed`).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn handed_over(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (ManuallyDrop) nor used after
        // this read, so the `Arc` is read out and dropped exactly once;
        // the other fields have no destructor.
        drop(unsafe { std::ptr::read(&this.pool) });
    }
}

/// Which chunk of which pool, for `PubShm::send_chunk`.
#[derive(Clone, Copy)]
struct ChunkAt<'a> {
    pool: &'a Arc<PoolWriter>,
    pool_idx: u8,
    chunk: u32,
}

impl Lease {
    fn at(&self) -> ChunkAt<'_> {
        ChunkAt {
            pool: &self.pool,
            pool_idx: self.pool_idx,
            chunk: self.chunk,
        }
    }
}

/// A chunk's key, as descriptors and returns carry it (`Desc::key`): its
/// pool in the top byte, its index below.
fn chunk_key(pool_idx: u8, chunk: u32) -> u32 {
    Desc {
        pool: pool_idx,
        chunk,
        len: 0,
    }
    .key()
}

/// A key's pool and chunk (the inverse of [`chunk_key`]).
fn split_key(key: u32) -> (u8, u32) {
    ((key >> 24) as u8, key & 0xff_ffff)
}

/// The chunk of `key` in the pools of `list` (`None`: no such pool, as a
/// key a broken reader returns may name).
fn chunk_at(list: &[Arc<PoolWriter>], key: u32) -> Option<ChunkAt<'_>> {
    let (pool_idx, chunk) = split_key(key);
    list.get(usize::from(pool_idx)).map(|pool| ChunkAt {
        pool,
        pool_idx,
        chunk,
    })
}

/// Give the chunk of `key` back to its pool in `list` (a key naming no
/// pool is ignored).
fn release_in(list: &[Arc<PoolWriter>], key: u32) {
    if let Some(at) = chunk_at(list, key) {
        at.pool.release(at.chunk);
    }
}

impl Pools {
    fn new(domain: u32, id: u64, type_hash: u64) -> Pools {
        Pools {
            domain,
            id,
            type_hash,
            list: LaneCell::default(),
            grow: Mutex::new(()),
            exit_owner: OnceLock::new(),
        }
    }

    /// A free chunk of at least `len` bytes from the existing pools, with
    /// its memory reserved (`Err`: the file system is full).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn try_alloc<R>(
        &self,
        len: usize,
        make: &impl Fn(Taken<'_>) -> R,
    ) -> Result<Option<R>, myelin_shm::ShmError> {
        for (i, p) in self.list.read().iter().enumerate() {
            if p.chunk_size() as usize >= len
                && let Some(c) = p.alloc()
            {
                if let Err(e) = p.reserve_chunk(c, len) {
                    p.release(c);
                    return Err(e);
                }
                return Ok(Some(make(Taken {
                    pool: p,
                    pool_idx: i as u8,
                    chunk: c,
                    ptr: p.chunk_ptr(c),
                })));
            }
        }
        Ok(None)
    }

    /// Give the chunk of `key` back to its pool (a key naming no pool, as
    /// a broken reader may return, is ignored). The pool is used through
    /// the list's guard: no reference count taken per chunk.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn release_key(&self, key: u32) {
        release_in(&self.list.read(), key);
    }

    /// A chunk of at least `len` bytes, as `make` makes it of the chunk
    /// taken (with its one reference); `reclaim` is called (to collect
    /// returned chunks) before a new pool is created.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn alloc<R>(
        &self,
        len: usize,
        reclaim: impl FnOnce(),
        make: impl Fn(Taken<'_>) -> R,
    ) -> Result<R, SendError> {
        let no_memory = |why: TransportError| SendError::NoMemory { len, why };
        if len > MAX_CHUNK as usize {
            return Err(no_memory(TransportError::new(
                "allocating a chunk",
                format!("larger than the {MAX_CHUNK}-byte chunk limit"),
            )));
        }
        let full = |e| no_memory(TransportError::new("reserving a chunk", e));
        if let Some(c) = self.try_alloc(len, &make).map_err(full)? {
            return Ok(c);
        }
        reclaim();
        if let Some(c) = self.try_alloc(len, &make).map_err(full)? {
            return Ok(c);
        }
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = self.try_alloc(len, &make).map_err(full)? {
            return Ok(c);
        }
        let list = self.list.load_full();
        if list.len() >= 255 {
            return Err(no_memory(TransportError::new(
                "adding a pool",
                "all 255 pools are in use (subscribers hold too many messages?)",
            )));
        }
        let size = (len.max(64).next_power_of_two() as u32).min(MAX_CHUNK);
        let same = list.iter().filter(|p| p.chunk_size() == size).count() as u32;
        let base = if size <= 64 << 10 {
            64
        } else if size <= 1 << 20 {
            16
        } else {
            8
        };
        let count = base << same.min(4);
        let name = SegmentName::new(
            self.domain,
            &format!("k_{}_{}_{}", std::process::id(), self.id, list.len()),
        )
        .map_err(|e| no_memory(TransportError::new("naming a pool", e)))?;
        let pool = Arc::new(
            PoolWriter::create(&name, self.type_hash, size, count)
                .map_err(|e| no_memory(TransportError::new("creating a pool", e)))?,
        );
        if let Some(owner) = self.exit_owner.get() {
            pool.set_needed_at_exit(owner.clone());
        }
        let mut next = (*list).clone();
        next.push(pool);
        self.list.store(Arc::new(next));
        self.try_alloc(len, &make).map_err(full)?.ok_or_else(|| {
            no_memory(TransportError::new(
                "allocating a chunk",
                "a new pool had no free chunk",
            ))
        })
    }
}

/// The chunks lent on one connection, by key (pool in the top byte, chunk
/// below): a bit per chunk of each pool, so that recording a publish and
/// checking a return cost a shift and a mask (a hash set cost ~100
/// instructions per lookup on every message). A key a reader returns is
/// untrusted: one naming no lent chunk is simply not in the set.
#[derive(Default)]
struct LentSet {
    /// Per pool, a bit per chunk; grown by `insert` (this process's own
    /// keys), never by a lookup.
    bits: Vec<Vec<u64>>,
    len: usize,
}

impl LentSet {
    fn split(key: u32) -> (usize, usize, u64) {
        let (pool, chunk) = split_key(key);
        let chunk = chunk as usize;
        (usize::from(pool), chunk / 64, 1 << (chunk % 64))
    }

    /// Record `key` lent; false if it already was.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn insert(&mut self, key: u32) -> bool {
        let (pool, word, bit) = Self::split(key);
        if self.bits.len() <= pool {
            self.bits.resize_with(pool + 1, Vec::new);
        }
        let words = &mut self.bits[pool];
        if words.len() <= word {
            words.resize(word + 1, 0);
        }
        let fresh = words[word] & bit == 0;
        words[word] |= bit;
        self.len += usize::from(fresh);
        fresh
    }

    /// Take `key` out; false if it was not lent.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn remove(&mut self, key: u32) -> bool {
        let (pool, word, bit) = Self::split(key);
        match self.bits.get_mut(pool).and_then(|w| w.get_mut(word)) {
            Some(w) if *w & bit != 0 => {
                *w &= !bit;
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Every key in the set.
    fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(pool, words)| {
            words.iter().enumerate().flat_map(move |(w, &bits)| {
                (0..64)
                    .filter(move |b| bits & (1 << b) != 0)
                    .map(move |b| chunk_key(pool as u8, (w * 64 + b) as u32))
            })
        })
    }
}

/// A connection to a subscription in another process.
struct Conn {
    writer: InboxWriter,
    inbox: String,
    /// The subscription's key (announced as changed when this connection
    /// comes or goes: its process counts its publishers).
    key: EndpointKey,
    /// Chunks lent on this connection (in its ring or held by the reader).
    lent: LentSet,
    wake: Option<Arc<WakeTable>>,
    /// A full inbox makes a publish wait for room (a reliable keep_all
    /// reader of a reliable publisher; see `QoS::waits_for`).
    paced: bool,
    /// Dropped by a discovery pass, which gave back everything lent on
    /// it. A publish that loaded the connection list before that pass
    /// must not lend on it again: nobody would give the chunk back.
    closed: bool,
}

impl Conn {
    /// Mark this inbox's lane for the subscriber's executor without waking
    /// it, unless it sleeps (see [`WakeTable::rehearse`]).
    fn rehearse(&self) {
        self.with_wake_word(|w, word| w.rehearse(word).map(drop));
    }

    /// Wake the subscriber's executor for this inbox's lane.
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn signal(&self) {
        self.with_wake_word(WakeTable::signal);
    }

    /// `f` on the reader's wake table and the word its inbox asks for,
    /// when it asks for one; its error (a word another process wrote) is
    /// logged.
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn with_wake_word(&self, f: impl FnOnce(&WakeTable, u32) -> Result<(), myelin_shm::ShmError>) {
        let word = self.writer.wake_slot();
        if word != u32::MAX
            && let Some(w) = &self.wake
            && let Err(e) = f(w, word)
        {
            tracing::warn!("subscriber of {}: {e}", self.inbox);
        }
    }
}

/// The shared-memory side of a publisher.
pub(super) struct PubShm {
    dom: Domain,
    id: u64,
    topic: String,
    qos: QoS,
    ty: TypeInfo,
    /// This publisher in the domain's change log.
    key: EndpointKey,
    /// Taken (and the file removed) first when dropped, so that the
    /// removal is announced after it happened.
    announce: Option<Announcement>,
    pools: Pools,
    conns: LaneCell<Vec<Arc<Mutex<Conn>>>>,
    /// Inboxes already reported as unusable (type, QoS, full).
    refused: Mutex<HashSet<String>>,
    keep_last: bool,
    /// Whether `conns` is not empty.
    wanted: Arc<Wanted>,
    owner: OnceLock<Weak<dyn PubOwner>>,
    /// Manual-by-topic liveliness lease in ns (0: automatic), offered on
    /// every connection.
    lease_ns: u64,
    /// The last liveliness assertion (`CLOCK_MONOTONIC` ns), given to new
    /// connections so a quiet publisher does not look alive to them.
    last_assert: AtomicU64,
    /// Whether the pools' files were handed to readers still behind (see
    /// [`hand_off`](Self::hand_off)); decided once. Shared with the pools'
    /// at-exit rule ([`ExitRule`]).
    handed_off: Arc<OnceLock<bool>>,
    /// Set as the publisher starts leaving ([`hand_off`](Self::hand_off)):
    /// a publish on another thread stops waiting for room and lends no
    /// more chunks, so the connections are free to be asked.
    leaving: AtomicBool,
}

impl PubShm {
    pub(super) fn new(
        dom: Domain,
        spec: &EndpointSpec<'_>,
        info: EndpointInfo,
    ) -> Result<PubShm, TransportError> {
        debug_assert_eq!(info.kind, EndpointKind::Publisher);
        let announce = Announcement::publish(dom.id, &info)
            .map_err(|e| TransportError::new("announcing the publisher", e))?;
        Ok(PubShm {
            pools: Pools::new(dom.id, info.id, spec.ty.hash.0),
            id: info.id,
            key: info.key(),
            dom,
            topic: spec.topic.to_string(),
            qos: *spec.qos,
            ty: spec.ty,
            announce: Some(announce),
            conns: LaneCell::default(),
            refused: Mutex::new(HashSet::new()),
            keep_last: matches!(spec.qos.history, History::KeepLast(_)),
            wanted: Arc::default(),
            owner: OnceLock::new(),
            // Manual-by-topic and automatic alike: an automatic one is
            // asserted by its process (`publisher::automatic`).
            lease_ns: spec
                .qos
                .liveliness
                .lease
                .map_or(0, |l| u64::try_from(l.as_nanos()).unwrap_or(u64::MAX)),
            last_assert: AtomicU64::new(myelin_shm::monotonic_ns()),
            handed_off: Arc::new(OnceLock::new()),
            leaving: AtomicBool::new(false),
        })
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn release_key(&self, key: u32) {
        self.pools.release_key(key);
    }

    /// Give back what the reader of `c` returned, to the pools of `list`
    /// (the caller's guard of the pool list).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn drain_returns(c: &mut Conn, list: &[Arc<PoolWriter>]) {
        let Conn { writer, lent, .. } = c;
        writer.drain_returns(|key| {
            // Only what was lent on this connection: a broken reader can
            // neither free foreign chunks nor free one twice.
            if lent.remove(key) {
                release_in(list, key);
            }
        });
    }

    /// Collect every returned chunk.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn reclaim(&self) {
        let list = self.pools.list.read();
        for c in self.conns.read().iter() {
            let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
            Self::drain_returns(&mut c, &list);
        }
    }

    /// Encode `msg` into a chunk.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn encode(&self, msg: &dyn Encode) -> Result<(Chunk, usize), SendError> {
        let len = msg.wire_len()?;
        let chunk = self
            .pools
            .alloc(len, || self.reclaim(), |t| t.into_chunk())?;
        // SAFETY: the chunk has at least `len` bytes (alloc contract) and
        // this process holds its only reference, so nobody reads it while
        // we write.
        let out = unsafe { std::slice::from_raw_parts_mut(chunk.ptr, len) };
        msg.wire_encode(out)?;
        Ok((chunk, len))
    }

    /// When a message published now stops being deliverable, on the
    /// host's monotonic clock (0: never), for the readers to check.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn expires(&self, lifetime: Option<Duration>) -> u64 {
        lifetime.map_or(0, |l| {
            crate::clock::deadline_ns(myelin_shm::monotonic_ns(), l)
        })
    }

    /// Send a chunk to every connected subscription (each gets its own
    /// reference); `list` is the caller's guard of the pool list.
    ///
    /// `Reference::Handed`: the caller's own reference goes to the *last*
    /// connection that takes the chunk instead of a new one (one locked
    /// increment and one decrement fewer per message; with one reader, the
    /// usual case, every message). Only the last: once a reader holds the
    /// chunk, its return may be collected by another thread at any time,
    /// so a later connection's increment could find it freed. Returns
    /// whether the reference was handed over; if not, the caller still
    /// holds it.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn send_chunk(
        &self,
        list: &[Arc<PoolWriter>],
        chunk: ChunkAt<'_>,
        len: usize,
        own: Reference,
    ) -> (Refused, bool) {
        let stamp = Stamp {
            expires: self.expires(self.qos.lifespan),
            sent_ns: crate::clock::realtime_ns(),
        };
        let mut refused = Refused::default();
        let desc = Desc {
            pool: chunk.pool_idx,
            chunk: chunk.chunk,
            len: len as u32,
        };
        let key = desc.key();
        // Shared by every paced connection: one publish waits at most
        // `max_blocking_time` in all.
        let mut pacer = None;
        let mut handed = false;
        let conns = self.conns.read();
        let last = conns.len().saturating_sub(1);
        for (i, c) in conns.iter().enumerate() {
            let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
            if c.closed {
                continue;
            }
            // A publish racing its publisher's exit (on another thread)
            // reaches no reader in another process: the pools may be gone
            // before a reader maps them. Each reader counts it lost, never
            // a silent gap. Checked under the lock: `hand_off` sets the
            // flag before it takes the connections.
            if self.leaving.load(Ordering::SeqCst) {
                c.writer.count_lost();
                continue;
            }
            let max_lent = c.writer.max_lent() as usize;
            let pushed = loop {
                // A reader holding all the chunks it may gets nothing more
                // until it returns some. Its returns are otherwise
                // collected after the message is on its way (below): the
                // return ring is a line the reader writes, a cache miss
                // the message need not wait for.
                if c.lent.len() >= max_lent {
                    Self::drain_returns(&mut c, list);
                }
                let pushed = (c.lent.len() < max_lent)
                    .then(|| c.writer.push_stamped(desc, stamp, self.keep_last));
                match pushed {
                    None | Some(Pushed::Full) if c.paced => {
                        let pacer =
                            pacer.get_or_insert_with(|| Pacer::new(self.qos.max_blocking_time));
                        // The reader drains at its own pace; make sure it is
                        // awake. A reader that died frees no room: stop.
                        c.signal();
                        if !pacer.pause()
                            || self.leaving.load(Ordering::SeqCst)
                            || !myelin_shm::process_alive(c.writer.subscriber_pid())
                        {
                            break pushed;
                        }
                    }
                    _ => break pushed,
                }
            };
            match pushed {
                None if !c.paced => {
                    // Not reliable keep_all: it misses this one.
                    c.writer.count_lost();
                    continue;
                }
                None | Some(Pushed::Full) => {
                    refused.count += 1;
                    refused.limit = c.writer.capacity() as usize;
                    c.writer.count_lost();
                    continue;
                }
                Some(Pushed::Replaced(old)) => {
                    if c.lent.remove(old.key()) {
                        release_in(list, old.key());
                    }
                }
                Some(Pushed::Stored) => {}
            }
            // The reader's reference, counted before its lock (under which
            // its returns are collected) is let go.
            if own == Reference::Handed && i == last {
                handed = true;
            } else {
                chunk.pool.retain(chunk.chunk);
            }
            c.lent.insert(key);
            c.signal();
            Self::drain_returns(&mut c, list);
        }
        (refused, handed)
    }

    /// Update the connections from a discovery pass; returns the
    /// subscriptions connected or disconnected. A transient-local
    /// publisher calls this under its history lock (see `rescan`).
    fn reconnect(&self, found: &[Found], owner: &dyn PubOwner) -> Vec<EndpointKey> {
        let (topic, ty) = (self.topic.as_str(), &self.ty);
        let current = self.conns.load_full();
        let mut next: Vec<Arc<Mutex<Conn>>> = Vec::with_capacity(current.len());
        let mut changed = Vec::new();
        for c in current.iter() {
            let mut g = c.lock().unwrap_or_else(|e| e.into_inner());
            let alive = found
                .iter()
                .any(|f| f.alive && f.name.file_name() == g.inbox)
                && g.writer.still_ours();
            if alive {
                next.push(c.clone());
            } else {
                // Subscriber gone (or crashed): everything lent to it comes
                // back.
                for k in std::mem::take(&mut g.lent).keys() {
                    self.release_key(k);
                }
                g.closed = true;
                changed.push(g.key);
            }
        }
        let mut fresh = Vec::new();
        for f in found {
            if !f.alive
                || f.info.kind != EndpointKind::Subscription
                || f.info.topic != topic
                || next.iter().chain(&fresh).any(|c: &Arc<Mutex<Conn>>| {
                    c.lock().unwrap_or_else(|e| e.into_inner()).inbox == f.name.file_name()
                })
            {
                continue;
            }
            let first_time = self
                .refused
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(f.name.file_name().to_string());
            if !is_any_info(&f.info)
                && (f.info.type_name != ty.name || f.info.type_hash != ty.hash.0)
            {
                if first_time {
                    crate::transport::warn_incompatible_type(
                        topic,
                        (ty.name, &ty.hash.to_string()),
                        (&f.info.type_name, &format!("{:016x}", f.info.type_hash)),
                        &format!("a subscription in process {}", f.info.pid),
                    );
                    owner.incompatible_type();
                }
                continue;
            }
            if let Err(why) = self.qos.compatible_with(&decode_qos(&f.info.qos)) {
                if first_time {
                    owner.incompatible_qos(why.policy);
                }
                continue;
            }
            let last = self.last_assert.load(Ordering::Relaxed);
            match InboxWriter::connect_offering(&f.name, self.id, ty.hash.0, self.lease_ns, last) {
                Ok(Some(writer)) => {
                    self.refused
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(f.name.file_name());
                    fresh.push(Arc::new(Mutex::new(Conn {
                        paced: self.qos.waits_for(&decode_qos(&f.info.qos)),
                        wake: remote_wake_table(f.info.pid, f.info.wake_tag),
                        writer,
                        inbox: f.name.file_name().to_string(),
                        key: f.info.key(),
                        lent: LentSet::default(),
                        closed: false,
                    })));
                }
                Ok(None) => {
                    // Only a warning here: the blocks may be held by a
                    // publisher that just died, freed once its messages are
                    // drained. The subscription, which knows, reports it.
                    if first_time {
                        tracing::warn!(
                            "topic {topic:?}: the subscription in process {} takes no more publishers over shared memory (all its connection blocks are taken); not connected: raise its SubscriptionOptions::max_publishers (default {DEFAULT_CONNECTIONS}, at most {MAX_CONNECTIONS})",
                            f.info.pid
                        );
                    }
                }
                Err(e) => {
                    if first_time {
                        tracing::warn!("topic {topic:?}: {e}");
                    }
                }
            }
        }
        if fresh.is_empty() && changed.is_empty() {
            return changed;
        }
        for c in &fresh {
            changed.push(c.lock().unwrap_or_else(|e| e.into_inner()).key);
        }
        let fresh_from = next.len();
        next.extend(fresh);
        self.wanted.set(!next.is_empty());
        self.conns.store(Arc::new(next.clone()));
        if self.lease_ns != 0 {
            // An assertion made between the connect (which wrote the one
            // before it) and the store above reached only the connections
            // it saw: give the fresh ones the latest too.
            let last = self.last_assert.load(Ordering::Relaxed);
            for c in &next[fresh_from..] {
                c.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .writer
                    .assert_alive(last);
            }
        }
        changed
    }

    /// Send the history to the connections in `new_inboxes` that asked for
    /// it (called under the publisher's history lock).
    fn send_history_to_new(
        &self,
        new_inboxes: &[String],
        history: &mut crate::transport::History<'_>,
    ) {
        let conns = self.conns.read();
        let targets: Vec<_> = conns
            .iter()
            .filter(|c| {
                let g = c.lock().unwrap_or_else(|e| e.into_inner());
                new_inboxes.contains(&g.inbox) && g.writer.wants_history()
            })
            .cloned()
            .collect();
        if targets.is_empty() {
            return;
        }
        for (msg, lifetime) in history {
            // When a message of the history was first sent is not kept.
            let stamp = Stamp {
                expires: self.expires(lifetime),
                sent_ns: 0,
            };
            let (chunk, len) = match self.encode(msg) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("topic {:?}: history not sent: {e}", self.topic);
                    continue;
                }
            };
            let desc = Desc {
                pool: chunk.lease.pool_idx,
                chunk: chunk.lease.chunk,
                len: len as u32,
            };
            for c in &targets {
                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                // Leaving: its pools may be gone before this reader maps
                // them (see `send_chunk`).
                if c.closed
                    || self.leaving.load(Ordering::SeqCst)
                    || c.writer.push_stamped(desc, stamp, self.keep_last) == Pushed::Full
                {
                    continue;
                }
                chunk.lease.pool.retain(chunk.lease.chunk);
                c.lent.insert(desc.key());
                c.signal();
            }
        }
    }

    /// Send a chunk this process alone holds (its lease's reference goes to
    /// a reader if one takes it).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn send_own(&self, chunk: Chunk, len: usize) -> Refused {
        let (refused, handed) = self.send_chunk(
            &self.pools.list.read(),
            chunk.lease.at(),
            len,
            Reference::Handed,
        );
        if handed {
            chunk.lease.handed_over();
        }
        refused
    }

    /// Inboxes of the current connections (to tell new ones apart).
    fn inboxes(&self) -> Vec<String> {
        self.conns
            .read()
            .iter()
            .map(|c| c.lock().unwrap_or_else(|e| e.into_inner()).inbox.clone())
            .collect()
    }

    fn owner(&self) -> Option<Arc<dyn PubOwner>> {
        self.owner.get().and_then(Weak::upgrade)
    }
}

impl Discovered for PubShm {
    fn rescan(self: Arc<Self>, found: &[Found], _exited: &[u32]) {
        let Some(owner) = self.owner() else { return };
        let transient = self.qos.durability == Durability::TransientLocal;
        let mut changed = Vec::new();
        // Under the history lock, which `publish` holds while it sends: a
        // new subscription gets the history and then every later message,
        // each once.
        owner.with_history(&mut |history| {
            let before = if transient {
                self.inboxes()
            } else {
                Vec::new()
            };
            changed = self.reconnect(found, &*owner);
            if !changed.is_empty() && transient {
                let new: Vec<String> = self
                    .inboxes()
                    .into_iter()
                    .filter(|i| !before.contains(i))
                    .collect();
                if !new.is_empty() {
                    self.send_history_to_new(&new, history);
                }
            }
        });
        if !changed.is_empty() {
            owner.links_changed();
            // Tell the subscribers' processes: their matched count is the
            // number of publishers actually connected to them.
            for key in &changed {
                self.dom.announce(Change::Changed, key);
            }
        }
    }
}

impl PubLink for PubShm {
    /// Stored in every connection block, also when publishing: one word
    /// per reader, on the line the push writes anyway.
    fn assert_liveliness(&self, _by_publish: bool) {
        let now = myelin_shm::monotonic_ns();
        // SYNC: Relaxed: a timestamp; a connection made concurrently is
        // given the latest once it is stored (`reconnect`).
        self.last_assert.store(now, Ordering::Relaxed);
        for c in self.conns.read().iter() {
            c.lock()
                .unwrap_or_else(|e| e.into_inner())
                .writer
                .assert_alive(now);
        }
    }

    fn start(&self, owner: Weak<dyn PubOwner>) {
        let _ = self.owner.set(owner);
        // Now complete: other processes may connect (and this process's
        // discovery pass matches it, the owner known).
        self.dom.announce(Change::Added, &self.key);
    }

    fn wanted(&self) -> &Arc<Wanted> {
        &self.wanted
    }

    fn warm(&self) {
        for c in self.conns.read().iter() {
            let c = c.lock().unwrap_or_else(|e| e.into_inner());
            if !c.closed {
                c.rehearse();
            }
        }
    }

    fn connected(&self) -> usize {
        self.conns.read().len()
    }

    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn send(&self, msg: &dyn Encode) -> Result<Refused, SendError> {
        let (chunk, len) = self.encode(msg)?;
        Ok(self.send_own(chunk, len))
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn send_bytes(
        &self,
        bytes: &SharedBytes,
        own: Option<&(dyn Any + Send + Sync)>,
    ) -> Result<Refused, SendError> {
        if let Some(lease) = own.and_then(|o| o.downcast_ref::<Lease>()) {
            // Shared with whoever else holds the bytes: kept.
            let list = self.pools.list.read();
            return Ok(self
                .send_chunk(&list, lease.at(), bytes.len(), Reference::Kept)
                .0);
        }
        let chunk = self
            .pools
            .alloc(bytes.len(), || self.reclaim(), |t| t.into_chunk())?;
        // SAFETY: the chunk has at least `bytes.len()` bytes and this
        // process holds its only reference.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), chunk.ptr, bytes.len()) };
        Ok(self.send_own(chunk, bytes.len()))
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn lender(&self) -> Option<&dyn Lender> {
        Some(self)
    }

    fn memory_in_use(&self) -> usize {
        self.reclaim();
        self.pools
            .list
            .read()
            .iter()
            .map(|p| p.count() as usize - p.free_count())
            .sum()
    }
}

impl Lender for PubShm {
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn loan(&self, len: usize) -> Result<LinkLoan, SendError> {
        self.pools.alloc(
            len,
            || self.reclaim(),
            |t| LinkLoan {
                ptr: t.ptr,
                token: u64::from(chunk_key(t.pool_idx, t.chunk)),
            },
        )
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn send_loaned(&self, token: u64, len: usize) -> Result<Refused, SendError> {
        let list = self.pools.list.read();
        let Some(at) = chunk_at(&list, token as u32) else {
            return Err(SendError::Transport(TransportError::new(
                "sending a loaned chunk",
                format!("no pool {} (a loan of another publisher?)", token >> 24),
            )));
        };
        let (refused, handed) = self.send_chunk(&list, at, len, Reference::Handed);
        if !handed {
            // The loan's own reference: the readers hold theirs.
            at.pool.release(at.chunk);
        }
        Ok(refused)
    }

    fn keep_loan(&self, token: u64) -> Arc<dyn std::any::Any + Send + Sync> {
        let list = self.pools.list.read();
        let at =
            chunk_at(&list, token as u32).expect("a loan's pool stays in its publisher's list");
        Arc::new(Lease {
            pool: at.pool.clone(),
            pool_idx: at.pool_idx,
            chunk: at.chunk,
        })
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn unloan(&self, token: u64) {
        self.pools.release_key(token as u32);
    }
}

impl PubShm {
    /// This publisher decides whether its pools' files stay when the
    /// process exits (see [`NeededAtExit`]).
    pub(super) fn own_exit_rule(self: &Arc<Self>) {
        let rule = Arc::new(ExitRule {
            publisher: Arc::downgrade(self),
            decided: self.handed_off.clone(),
        });
        let _ = self.pools.exit_owner.set(rule);
    }

    /// The publisher is leaving (dropped, or its process exiting): if
    /// readers have descriptors of it they have not taken yet (so they have
    /// not mapped those chunks), hand the pools' files to them. Each pool
    /// counts them as its holders, then each is told through its
    /// connection; the last to finish removes the files
    /// (`myelin_shm::pool::release_handed_off`), so nothing stays behind
    /// even when every process of the domain exits at once. Returns
    /// whether the files stay (also when a connection is mid-publish and
    /// cannot be asked: then the dead-process sweep removes them).
    fn hand_off(&self) -> bool {
        *self.handed_off.get_or_init(|| {
            let conns = self.conns.read();
            let mut behind = Vec::new();
            let mut unsure = false;
            // A discovery pass or a publish on another thread may hold a
            // connection for a moment (at exit, other threads still run);
            // waiting for it keeps the answer sure. A publish stops
            // waiting for room once it sees `leaving`, and takes no
            // connection after it; the wait is bounded all the same.
            self.leaving.store(true, Ordering::SeqCst);
            let mut pacer = Pacer::new(LEAVE_WAIT);
            for c in conns.iter() {
                match lock_within(c, &mut pacer) {
                    Some(g) if !g.closed && g.writer.pending() => behind.push(g),
                    Some(_) => {}
                    None => unsure = true,
                }
            }
            if behind.is_empty() {
                return unsure;
            }
            let readers = u32::try_from(behind.len()).unwrap_or(u32::MAX);
            let pools = self.pools.list.read();
            for p in pools.iter() {
                p.hand_off(readers);
            }
            // Readers whose subscription left meanwhile give their share
            // back at once.
            let back = behind.iter().filter(|g| g.writer.hand_off()).count() as u32;
            if back > 0 {
                for p in pools.iter() {
                    if p.release_shares(back) {
                        let _ = std::fs::remove_file(p.path());
                    }
                }
            }
            back < readers
        })
    }
}

/// Whether a publisher's pool files stay when the process exits.
struct ExitRule {
    publisher: Weak<PubShm>,
    /// The publisher's decision, once made ([`PubShm::hand_off`]).
    decided: Arc<OnceLock<bool>>,
}

impl NeededAtExit for ExitRule {
    /// The pool files stay only for readers that still have to map chunks
    /// of them (handed to them: the last removes them).
    fn needed(&self) -> bool {
        if let Some(p) = self.publisher.upgrade() {
            return p.hand_off();
        }
        // Being dropped by another thread while this one exits: its
        // decision comes in a moment (a background thread still runs
        // while exit handlers do); if it never comes, the file stays for
        // the dead-process sweep.
        let until = std::time::Instant::now() + Duration::from_millis(200);
        loop {
            if let Some(d) = self.decided.get() {
                return *d;
            }
            if std::time::Instant::now() >= until {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for PubShm {
    fn drop(&mut self) {
        self.reclaim();
        self.wanted.set(false);
        let behind = self.hand_off();
        self.conns.store(Arc::new(Vec::new()));
        // A pool with chunks still lent keeps its file when a reader has
        // not taken all its descriptors: it has not mapped those chunks yet
        // (a mapping outlives the name). The readers remove it when done;
        // a grace period later this process does, if it still runs (a
        // reader may have died owing its share).
        let pools = self.pools.list.swap(Arc::new(Vec::new()));
        for p in pools.iter() {
            if behind && p.free_count() < p.count() as usize {
                p.keep_file();
                super::orphan(p.path());
            } else {
                // No reader needs the file any more, though the pool may
                // outlive this publisher (a chunk of its transient-local
                // history held elsewhere): it goes at exit at the latest,
                // no longer asking this publisher.
                myelin_shm::remove_at_exit(p.path());
            }
        }
        drop(self.announce.take());
        self.dom.announce(Change::Removed, &self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::LentSet;
    use proptest::prelude::*;
    use std::collections::HashSet;

    proptest! {
        /// The bit set answers as a set of keys would: for the keys this
        /// process lends (a few pools, chunks up to a few thousand) and for
        /// any key a reader returns (anything at all).
        #[test]
        fn lent_set_is_a_set(ops in proptest::collection::vec(
            (0u8..3, prop_oneof![
                (0u32..4, 0u32..3000).prop_map(|(p, c)| (p << 24) | c),
                any::<u32>(),
            ]),
            0..400,
        )) {
            let mut set = LentSet::default();
            let mut model = HashSet::new();
            for (op, key) in ops {
                let own = (key >> 24) < 4 && (key & 0xff_ffff) < 3000;
                match op {
                    0 if own => prop_assert_eq!(set.insert(key), model.insert(key)),
                    _ => prop_assert_eq!(set.remove(key), model.remove(&key)),
                }
                prop_assert_eq!(set.len(), model.len());
            }
            let mut keys: Vec<u32> = set.keys().collect();
            keys.sort_unstable();
            let mut want: Vec<u32> = model.into_iter().collect();
            want.sort_unstable();
            prop_assert_eq!(keys, want);
        }
    }
}
