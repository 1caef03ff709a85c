//! The shared-memory transport: publishers and subscriptions of one
//! domain connect across processes on the same host (see `myelin-shm` for
//! the segments, rings and pools, and ARCHITECTURE.md for the design).
//!
//! * **Discovery**: each context runs one thread that rescans the domain's
//!   endpoint segments whenever any process bumps the domain's change
//!   counter (and every half second, to notice dead processes).
//! * **Publish**: a publisher writes the message into a chunk of its pool
//!   (or was handed one by a loan), and pushes the chunk's descriptor into
//!   the inbox of each connected subscription in another process, then
//!   signals that subscription's executor. Local subscriptions are served
//!   by the intra-process manager only, so nothing arrives twice.
//! * **Receive**: an executor whose wake slot was signalled drains the
//!   inboxes of its subscriptions into their in-process buffers (the
//!   message read in place for plain old data and blobs, decoded for CDR
//!   types); dropping the last reference returns the chunk.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use myelin_shm::endpoint::{
    Announcement, EndpointInfo, EndpointKind, Found, GraphEvent, QOS_BYTES, scan,
};
use myelin_shm::inbox::{ConnState, Desc, Inbox, InboxWriter, MAX_CONNECTIONS, Pushed};
use myelin_shm::pool::{MAX_CHUNK, PoolReader, PoolWriter};
use myelin_shm::wake::WakeTable;
use myelin_shm::{SegmentName, cleanup_stale, process_alive};

use crate::message::Message;
use crate::qos::{Durability, History, Liveliness, LivelinessKind, QoS, Reliability};
use crate::wire::{SharedBytes, Wire};

pub(crate) use super::next_id;

/// This process's wake-up table (created on first use).
pub(crate) fn wake_table() -> Option<Arc<WakeTable>> {
    static TABLE: OnceLock<Option<Arc<WakeTable>>> = OnceLock::new();
    TABLE
        .get_or_init(|| match WakeTable::create() {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("shared memory wake-up table unavailable: {e}");
                None
            }
        })
        .clone()
}

/// Other processes' wake-up tables, opened on demand.
fn remote_wake_table(pid: u32) -> Option<Arc<WakeTable>> {
    static TABLES: OnceLock<Mutex<HashMap<u32, Arc<WakeTable>>>> = OnceLock::new();
    let mut m = TABLES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(t) = m.get(&pid) {
        return Some(t.clone());
    }
    let t = Arc::new(WakeTable::open(pid).ok()?);
    m.insert(pid, t.clone());
    Some(t)
}

/// The QoS in the 64 opaque bytes of an endpoint description.
pub(crate) fn encode_qos(q: &QoS) -> [u8; QOS_BYTES] {
    let mut b = [0u8; QOS_BYTES];
    let (kind, depth) = match q.history {
        History::KeepLast(d) => (0u8, d as u64),
        History::KeepAll => (1u8, 0),
    };
    b[0] = kind;
    b[1] = (q.reliability == Reliability::Reliable) as u8;
    b[2] = (q.durability == Durability::TransientLocal) as u8;
    b[3] = match q.liveliness.kind {
        LivelinessKind::Automatic => 0,
        LivelinessKind::ManualByTopic => 1,
    };
    let ns = |d: Option<Duration>| d.map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64);
    b[8..16].copy_from_slice(&depth.to_le_bytes());
    b[16..24].copy_from_slice(&(q.max_samples as u64).to_le_bytes());
    b[24..32].copy_from_slice(&ns(q.deadline).to_le_bytes());
    b[32..40].copy_from_slice(&ns(q.lifespan).to_le_bytes());
    b[40..48].copy_from_slice(&ns(q.liveliness.lease).to_le_bytes());
    b
}

/// Decode (untrusted bytes: any value gives some QoS).
pub(crate) fn decode_qos(b: &[u8; QOS_BYTES]) -> QoS {
    let u = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().expect("8 bytes"));
    let d = |v: u64| (v != 0).then(|| Duration::from_nanos(v));
    QoS {
        history: if b[0] == 1 {
            History::KeepAll
        } else {
            History::KeepLast(u(8..16).min(1 << 20) as usize)
        },
        reliability: if b[1] == 1 {
            Reliability::Reliable
        } else {
            Reliability::BestEffort
        },
        durability: if b[2] == 1 {
            Durability::TransientLocal
        } else {
            Durability::Volatile
        },
        max_samples: u(16..24).min(1 << 24) as usize,
        deadline: d(u(24..32)),
        lifespan: d(u(32..40)),
        liveliness: Liveliness {
            kind: if b[3] == 1 {
                LivelinessKind::ManualByTopic
            } else {
                LivelinessKind::Automatic
            },
            lease: d(u(40..48)),
        },
    }
}

/// A subscription that takes any type (`AnyMessage`).
fn is_any_info(i: &EndpointInfo) -> bool {
    i.type_hash == myelin_shm::endpoint::ANY_TYPE
        && i.type_name == myelin_shm::endpoint::ANY_TYPE_NAME
}

/// An endpoint the discovery thread keeps up to date.
pub(crate) trait Discovered: Send + Sync {
    fn rescan(self: Arc<Self>, found: &[Found]);
}

/// A context's view of its domain in shared memory.
pub(crate) struct ShmDomain {
    pub(crate) domain: u32,
    pub(crate) ctx_id: u64,
    graph: Arc<GraphEvent>,
    locals: Mutex<Vec<Weak<dyn Discovered>>>,
    stop: Arc<AtomicBool>,
    last_cleanup: Mutex<Instant>,
}

impl ShmDomain {
    /// Set up the domain and start the discovery thread.
    pub(crate) fn start(domain: u32) -> Result<Arc<ShmDomain>, String> {
        let graph = Arc::new(GraphEvent::open_or_create(domain).map_err(|e| e.to_string())?);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            let _ = myelin_shm::cleanup_stale_host();
        });
        // Segments of processes that died in this domain (a crash, or an
        // exit that skipped destructors) go before anyone matches them.
        let _ = cleanup_stale(domain);
        wake_table().ok_or("no wake-up table")?;
        let stop = Arc::new(AtomicBool::new(false));
        let dom = Arc::new(ShmDomain {
            domain,
            ctx_id: next_id(),
            graph: graph.clone(),
            locals: Mutex::new(Vec::new()),
            stop: stop.clone(),
            last_cleanup: Mutex::new(Instant::now()),
        });
        let weak = Arc::downgrade(&dom);
        std::thread::Builder::new()
            .name(format!("myelin-discovery-{domain}"))
            .spawn(move || {
                loop {
                    let seen = graph.epoch();
                    match weak.upgrade() {
                        Some(d) if !stop.load(Ordering::Relaxed) => d.pass(),
                        _ => return,
                    }
                    graph.wait(seen, Instant::now() + Duration::from_millis(500));
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(dom)
    }

    pub(crate) fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.graph.bump();
    }

    /// Tell every process (this one included) that endpoints changed.
    pub(crate) fn bump(&self) {
        self.graph.bump();
    }

    pub(crate) fn register(&self, d: Weak<dyn Discovered>) {
        self.locals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(d);
        self.bump();
    }

    /// Endpoints of other contexts (this process's other contexts too).
    fn foreign(&self) -> Vec<Found> {
        let mut errors = Vec::new();
        let me = std::process::id();
        let found: Vec<Found> = scan(self.domain, &mut errors)
            .into_iter()
            .filter(|f| !(f.info.pid == me && f.info.context == self.ctx_id))
            .collect();
        for e in errors {
            tracing::debug!("discovery skipped a segment: {e}");
        }
        found
    }

    /// One discovery pass.
    fn pass(&self) {
        let found = self.foreign();
        let now = Instant::now();
        let periodic = {
            let mut last = self.last_cleanup.lock().unwrap_or_else(|e| e.into_inner());
            let due = now.duration_since(*last) > Duration::from_secs(10);
            if due {
                *last = now;
            }
            due
        };
        if periodic || found.iter().any(|f| !f.alive) {
            // A process died without cleaning up: remove its segments
            // (mappings held by survivors stay valid), and the wake-up
            // tables of exited processes (a table lives as long as its
            // process, so it is never removed by its owner).
            let _ = cleanup_stale(self.domain);
            let _ = myelin_shm::cleanup_stale_host();
        }
        let locals: Vec<Arc<dyn Discovered>> = {
            let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
            l.retain(|w| w.strong_count() > 0);
            l.iter().filter_map(Weak::upgrade).collect()
        };
        for l in locals {
            l.rescan(&found);
        }
    }

    /// Refuse an endpoint whose topic has another type in another process.
    pub(crate) fn check_type<T: Message>(
        &self,
        topic: &str,
    ) -> Result<(), crate::CreateEndpointError> {
        if crate::wire::is_any::<T>() {
            return Ok(());
        }
        for f in self.foreign() {
            if f.alive
                && f.info.topic == topic
                && !is_any_info(&f.info)
                && (f.info.type_name != T::TYPE_NAME || f.info.type_hash != T::TYPE_HASH.0)
            {
                return Err(crate::CreateEndpointError::RemoteTypeMismatch {
                    topic: topic.to_string(),
                    remote: f.info.type_name,
                    remote_hash: f.info.type_hash,
                    pid: f.info.pid,
                    requested: T::TYPE_NAME,
                    requested_hash: T::TYPE_HASH,
                });
            }
        }
        Ok(())
    }

    fn info<T: Message>(
        &self,
        kind: EndpointKind,
        id: u64,
        topic: &str,
        node: &str,
        qos: &QoS,
    ) -> EndpointInfo {
        EndpointInfo {
            kind,
            pid: std::process::id(),
            context: self.ctx_id,
            id,
            topic: topic.to_string(),
            type_name: T::TYPE_NAME.to_string(),
            type_hash: T::TYPE_HASH.0,
            node: node.to_string(),
            qos: encode_qos(qos),
        }
    }
}

impl Drop for ShmDomain {
    fn drop(&mut self) {
        self.shutdown();
    }
}

// ---------------------------------------------------------------- publisher

/// Chunks of one publisher: a growing list of pools, indexed by the pool
/// byte of a descriptor.
pub(crate) struct Pools {
    domain: u32,
    id: u64,
    type_hash: u64,
    list: ArcSwap<Vec<Arc<PoolWriter>>>,
    grow: Mutex<()>,
}

/// One chunk held by this process (a loan, or a local subscriber's view of
/// a loaned message); the last holder returns it to the pool.
pub(crate) struct Lease {
    pool: Arc<PoolWriter>,
    chunk: u32,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.release(self.chunk);
    }
}

/// A chunk taken from a pool.
pub(crate) struct Chunk {
    pub(crate) pool_idx: u8,
    pub(crate) lease: Arc<Lease>,
    pub(crate) ptr: *mut u8,
}

impl Pools {
    fn new(domain: u32, id: u64, type_hash: u64) -> Pools {
        Pools {
            domain,
            id,
            type_hash,
            list: ArcSwap::from_pointee(Vec::new()),
            grow: Mutex::new(()),
        }
    }

    fn try_alloc(&self, len: usize) -> Option<Chunk> {
        for (i, p) in self.list.load().iter().enumerate() {
            if p.chunk_size() as usize >= len
                && let Some(c) = p.alloc()
            {
                return Some(Chunk {
                    pool_idx: i as u8,
                    ptr: p.chunk_ptr(c),
                    lease: Arc::new(Lease {
                        pool: p.clone(),
                        chunk: c,
                    }),
                });
            }
        }
        None
    }

    fn by_key(&self, key: u32) -> Option<(Arc<PoolWriter>, u32)> {
        let list = self.list.load();
        let p = list.get((key >> 24) as usize)?;
        Some((p.clone(), key & 0xff_ffff))
    }

    /// A chunk of at least `len` bytes; `reclaim` is called (to collect
    /// returned chunks) before a new pool is created.
    pub(crate) fn alloc(&self, len: usize, reclaim: impl FnOnce()) -> Result<Chunk, String> {
        if len > MAX_CHUNK as usize {
            return Err(format!("larger than the {MAX_CHUNK}-byte chunk limit"));
        }
        if let Some(c) = self.try_alloc(len) {
            return Ok(c);
        }
        reclaim();
        if let Some(c) = self.try_alloc(len) {
            return Ok(c);
        }
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = self.try_alloc(len) {
            return Ok(c);
        }
        let list = self.list.load_full();
        if list.len() >= 255 {
            return Err("all 255 pools are in use (subscribers hold too many messages?)".into());
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
        .map_err(|e| e.to_string())?;
        let pool = Arc::new(
            PoolWriter::create(&name, self.type_hash, size, count).map_err(|e| e.to_string())?,
        );
        let mut next = (*list).clone();
        next.push(pool);
        self.list.store(Arc::new(next));
        self.try_alloc(len)
            .ok_or_else(|| "a new pool had no free chunk".into())
    }
}

/// A connection to a subscription in another process.
struct Conn {
    writer: InboxWriter,
    inbox: String,
    /// Chunks lent on this connection (in its ring or held by the reader).
    lent: HashSet<u32>,
    wake: Option<Arc<WakeTable>>,
}

/// The shared-memory side of a publisher.
pub(crate) struct PubShm {
    pub(crate) dom: Arc<ShmDomain>,
    pub(crate) id: u64,
    _announce: Announcement,
    pub(crate) pools: Pools,
    conns: ArcSwap<Vec<Arc<Mutex<Conn>>>>,
    /// Inboxes already reported as unusable (type, QoS, full).
    refused: Mutex<HashSet<String>>,
    keep_last: bool,
}

/// What sending to the remote subscriptions did.
#[derive(Default)]
pub(crate) struct Sent {
    pub(crate) full: usize,
    pub(crate) limit: usize,
}

impl PubShm {
    pub(crate) fn new<T: Message>(
        dom: &Arc<ShmDomain>,
        topic: &str,
        node: &str,
        qos: &QoS,
    ) -> Result<PubShm, String> {
        let id = next_id();
        let info = dom.info::<T>(EndpointKind::Publisher, id, topic, node, qos);
        let announce = Announcement::publish(dom.domain, &info).map_err(|e| e.to_string())?;
        Ok(PubShm {
            dom: dom.clone(),
            id,
            _announce: announce,
            pools: Pools::new(dom.domain, id, T::TYPE_HASH.0),
            conns: ArcSwap::from_pointee(Vec::new()),
            refused: Mutex::new(HashSet::new()),
            keep_last: matches!(qos.history, History::KeepLast(_)),
        })
    }

    /// Chunks of this publisher's pools in use (loaned, in flight, or held
    /// by readers), after collecting what readers returned.
    pub(crate) fn chunks_in_use(&self) -> usize {
        self.reclaim();
        self.pools
            .list
            .load()
            .iter()
            .map(|p| p.count() as usize - p.free_count())
            .sum()
    }

    /// Subscriptions in other processes this publisher feeds.
    pub(crate) fn connected(&self) -> usize {
        self.conns.load().len()
    }

    pub(crate) fn has_remote(&self) -> bool {
        !self.conns.load().is_empty()
    }

    fn release_key(&self, key: u32) {
        if let Some((p, c)) = self.pools.by_key(key) {
            p.release(c);
        }
    }

    fn drain_returns(&self, c: &mut Conn) {
        let Conn { writer, lent, .. } = c;
        writer.drain_returns(|key| {
            // Only what was lent on this connection: a broken reader can
            // neither free foreign chunks nor free one twice.
            if lent.remove(&key) {
                self.release_key(key);
            }
        });
    }

    /// Collect every returned chunk.
    pub(crate) fn reclaim(&self) {
        for c in self.conns.load().iter() {
            let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
            self.drain_returns(&mut c);
        }
    }

    /// Encode `msg` into a chunk.
    pub(crate) fn encode<T: Message>(
        &self,
        msg: &T,
    ) -> Result<(Chunk, usize), crate::PublishError> {
        let topic = || String::new();
        let len = msg.wire_len().map_err(|e| crate::PublishError::Wire {
            topic: topic(),
            why: e.to_string(),
        })?;
        let chunk = self.pools.alloc(len, || self.reclaim()).map_err(|why| {
            crate::PublishError::OutOfMemory {
                topic: topic(),
                len,
                why,
            }
        })?;
        // SAFETY: the chunk has at least `len` bytes (alloc contract) and
        // this process holds its only reference, so nobody reads it while
        // we write.
        let out = unsafe { std::slice::from_raw_parts_mut(chunk.ptr, len) };
        msg.wire_encode(out)
            .map_err(|e| crate::PublishError::Wire {
                topic: topic(),
                why: e.to_string(),
            })?;
        Ok((chunk, len))
    }

    /// Send a chunk to every connected subscription.
    pub(crate) fn send(&self, chunk: &Chunk, len: usize) -> Sent {
        let mut sent = Sent::default();
        let desc = Desc {
            pool: chunk.pool_idx,
            chunk: chunk.lease.chunk,
            len: len as u32,
        };
        let key = desc.key();
        for c in self.conns.load().iter() {
            let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
            self.drain_returns(&mut c);
            if c.lent.len() >= c.writer.max_lent() as usize {
                // The reader holds all it may: it misses this one.
                c.writer.count_lost();
                continue;
            }
            match c.writer.push(desc, self.keep_last) {
                Pushed::Full => {
                    sent.full += 1;
                    sent.limit = c.writer.capacity() as usize;
                    c.writer.count_lost();
                    continue;
                }
                Pushed::Replaced(old) => {
                    if c.lent.remove(&old.key()) {
                        self.release_key(old.key());
                    }
                }
                Pushed::Stored => {}
            }
            chunk.lease.pool.retain(chunk.lease.chunk);
            c.lent.insert(key);
            let slot = c.writer.wake_slot();
            if slot != u32::MAX
                && let Some(w) = &c.wake
                && let Err(e) = w.signal(slot)
            {
                tracing::warn!("subscriber of {}: {e}", c.inbox);
            }
        }
        sent
    }

    /// Update the connections from a discovery pass; returns the new
    /// number of connections if it changed. A transient-local publisher
    /// calls this under its history lock (see `PubInner::rescan`).
    pub(crate) fn rescan<T: Message>(
        &self,
        topic: &str,
        qos: &QoS,
        found: &[Found],
        on_refused: impl Fn(crate::qos::Incompatibility),
    ) -> Option<usize> {
        let current = self.conns.load_full();
        let mut next: Vec<Arc<Mutex<Conn>>> = Vec::with_capacity(current.len());
        let mut changed = false;
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
                for k in std::mem::take(&mut g.lent) {
                    self.release_key(k);
                }
                changed = true;
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
                && (f.info.type_name != T::TYPE_NAME || f.info.type_hash != T::TYPE_HASH.0)
            {
                if first_time {
                    tracing::warn!(
                        "topic {topic:?}: subscription in process {} has type {} (hash {:016x}), this publisher {} ({}); not connected",
                        f.info.pid,
                        f.info.type_name,
                        f.info.type_hash,
                        T::TYPE_NAME,
                        T::TYPE_HASH
                    );
                }
                continue;
            }
            if T::WIRE == Wire::Local {
                if first_time {
                    tracing::warn!(
                        "topic {topic:?}: {} has no wire encoding; the subscription in process {} is not connected",
                        T::TYPE_NAME,
                        f.info.pid
                    );
                }
                continue;
            }
            if let Err(why) = qos.compatible_with(&decode_qos(&f.info.qos)) {
                if first_time {
                    on_refused(why);
                }
                continue;
            }
            match InboxWriter::connect(&f.name, self.id, T::TYPE_HASH.0) {
                Ok(Some(writer)) => {
                    self.refused
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(f.name.file_name());
                    fresh.push(Arc::new(Mutex::new(Conn {
                        wake: remote_wake_table(f.info.pid),
                        writer,
                        inbox: f.name.file_name().to_string(),
                        lent: HashSet::new(),
                    })));
                }
                Ok(None) => {
                    if first_time {
                        tracing::warn!(
                            "topic {topic:?}: the subscription in process {} has {MAX_CONNECTIONS} publishers already",
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
        if fresh.is_empty() && !changed {
            return None;
        }
        next.extend(fresh);
        self.conns.store(Arc::new(next));
        Some(self.conns.load().len())
    }

    /// Send `encoded` history messages to the connections that asked for
    /// them and are new (called by the publisher under its history lock).
    pub(crate) fn send_history_to_new(
        &self,
        new_inboxes: &[String],
        items: &mut dyn Iterator<Item = (Chunk, usize)>,
    ) {
        let conns = self.conns.load();
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
        for (chunk, len) in items {
            let desc = Desc {
                pool: chunk.pool_idx,
                chunk: chunk.lease.chunk,
                len: len as u32,
            };
            for c in &targets {
                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                if c.writer.push(desc, self.keep_last) == Pushed::Full {
                    continue;
                }
                chunk.lease.pool.retain(chunk.lease.chunk);
                c.lent.insert(desc.key());
                let slot = c.writer.wake_slot();
                if slot != u32::MAX
                    && let Some(w) = &c.wake
                {
                    let _ = w.signal(slot);
                }
            }
        }
    }

    /// Inboxes of the current connections (to tell new ones apart).
    pub(crate) fn inboxes(&self) -> Vec<String> {
        self.conns
            .load()
            .iter()
            .map(|c| c.lock().unwrap_or_else(|e| e.into_inner()).inbox.clone())
            .collect()
    }
}

impl Drop for PubShm {
    fn drop(&mut self) {
        self.reclaim();
        self.conns.store(Arc::new(Vec::new()));
        // A pool with chunks still lent keeps its file: readers may not have
        // mapped it yet. The last process-wide cleanup removes it.
        let pools = self.pools.list.swap(Arc::new(Vec::new()));
        for p in pools.iter() {
            if p.free_count() < p.count() as usize {
                p.keep_file();
            }
        }
        self.dom.bump();
    }
}

// ------------------------------------------------------------- subscription

/// The inbox and what the reader needs to hand chunks back.
pub(crate) struct InboxShared {
    inbox: Inbox,
    give_back: Mutex<()>,
}

/// A chunk read in place by this process; dropping it gives it back.
struct ReaderLease {
    inbox: Arc<InboxShared>,
    conn: usize,
    generation: u32,
    key: u32,
    _pool: Arc<PoolReader>,
}

impl Drop for ReaderLease {
    fn drop(&mut self) {
        let _g = self
            .inbox
            .give_back
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let _ = self
            .inbox
            .inbox
            .give_back(self.conn, self.generation, self.key);
    }
}

#[derive(Default)]
struct ReaderConn {
    claim: Option<(u32, u64, u32)>,
    pools: Vec<Option<Arc<PoolReader>>>,
    lost_seen: u64,
}

/// The shared-memory side of a subscription.
pub(crate) struct SubShm {
    pub(crate) dom: Arc<ShmDomain>,
    pub(crate) inbox: Arc<InboxShared>,
    readers: Mutex<Vec<ReaderConn>>,
    refused: Mutex<HashSet<String>>,
}

impl SubShm {
    pub(crate) fn new<T: Message>(
        dom: &Arc<ShmDomain>,
        topic: &str,
        node: &str,
        qos: &QoS,
    ) -> Result<SubShm, String> {
        let id = next_id();
        let info = dom.info::<T>(EndpointKind::Subscription, id, topic, node, qos);
        let cap = qos.effective_depth().clamp(1, 4096) as u32;
        let inbox =
            Inbox::create(dom.domain, &info, cap, 2 * cap + 64).map_err(|e| e.to_string())?;
        inbox.set_wants_history(qos.durability == Durability::TransientLocal);
        Ok(SubShm {
            dom: dom.clone(),
            inbox: Arc::new(InboxShared {
                inbox,
                give_back: Mutex::new(()),
            }),
            readers: Mutex::new(
                (0..MAX_CONNECTIONS)
                    .map(|_| ReaderConn::default())
                    .collect(),
            ),
            refused: Mutex::new(HashSet::new()),
        })
    }

    /// Which wake slot publishers signal.
    pub(crate) fn set_wake_slot(&self, slot: Option<u32>) {
        self.inbox.inbox.set_wake_slot(slot.unwrap_or(u32::MAX));
    }

    /// Move every waiting message into the subscription's buffer through
    /// `push`; returns how many were lost on the way (overwritten by the
    /// publisher, undecodable, or corrupt). `dead` connections (publisher
    /// process gone) are drained and freed.
    pub(crate) fn pump<T: Message>(
        &self,
        mut push: impl FnMut(crate::Received<T>),
        check_dead: bool,
    ) -> u64 {
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        let mut lost = 0;
        let inbox = &self.inbox.inbox;
        for (i, r) in readers.iter_mut().enumerate() {
            let st = inbox.state(i);
            let (pid, pub_id, generation, mut closed) = match st {
                ConnState::Active {
                    pid,
                    pub_id,
                    generation,
                } => (pid, pub_id, generation, false),
                ConnState::Closed {
                    pid,
                    pub_id,
                    generation,
                } => (pid, pub_id, generation, true),
                _ => {
                    *r = ReaderConn::default();
                    continue;
                }
            };
            if check_dead && !closed && !process_alive(pid) {
                closed = true;
            }
            if r.claim != Some((pid, pub_id, generation)) {
                *r = ReaderConn {
                    claim: Some((pid, pub_id, generation)),
                    ..ReaderConn::default()
                };
            }
            loop {
                let d = match inbox.pop(i) {
                    Ok(Some(d)) => d,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!("{e}");
                        lost += 1;
                        continue;
                    }
                };
                match self.receive::<T>(r, i, pid, pub_id, generation, d) {
                    Ok(m) => push(m),
                    Err(e) => {
                        tracing::warn!("dropped a message from process {pid}: {e}");
                        lost += 1;
                    }
                }
            }
            let l = inbox.lost(i);
            lost += l.saturating_sub(r.lost_seen);
            r.lost_seen = l;
            if closed {
                inbox.free(i, st);
                *r = ReaderConn::default();
            }
        }
        lost
    }

    fn receive<T: Message>(
        &self,
        r: &mut ReaderConn,
        conn: usize,
        pid: u32,
        pub_id: u64,
        generation: u32,
        d: Desc,
    ) -> Result<crate::Received<T>, String> {
        let p = d.pool as usize;
        if r.pools.len() <= p {
            r.pools.resize(p + 1, None);
        }
        if r.pools[p].is_none() {
            let name = SegmentName::new(self.dom.domain, &format!("k_{pid}_{pub_id}_{p}"))
                .map_err(|e| e.to_string())?;
            r.pools[p] = Some(Arc::new(
                PoolReader::open(&name, T::TYPE_HASH.0).map_err(|e| e.to_string())?,
            ));
        }
        let pool = r.pools[p].clone().expect("opened above");
        let ptr = pool.chunk(d.chunk, d.len).map_err(|e| e.to_string())?;
        let lease = Arc::new(ReaderLease {
            inbox: self.inbox.clone(),
            conn,
            generation,
            key: d.key(),
            _pool: pool,
        });
        // SAFETY: `ptr..ptr+len` is inside the pool mapping (checked by
        // `PoolReader::chunk`), which `lease` keeps mapped; the publisher
        // does not rewrite the chunk until this process gives it back, which
        // happens when `lease` (owned by the bytes) drops.
        let bytes = unsafe { SharedBytes::from_raw(ptr, d.len as usize, lease) };
        crate::buffer::from_wire(bytes).map_err(|e| e.to_string())
    }

    /// Count remote publishers this subscription matches (and report the
    /// incompatible ones once).
    pub(crate) fn count_publishers<T: Message>(
        &self,
        topic: &str,
        qos: &QoS,
        found: &[Found],
        on_refused: impl Fn(crate::qos::Incompatibility),
    ) -> u32 {
        let mut n = 0;
        for f in found {
            if !f.alive || f.info.kind != EndpointKind::Publisher || f.info.topic != topic {
                continue;
            }
            if !crate::wire::is_any::<T>()
                && (f.info.type_name != T::TYPE_NAME || f.info.type_hash != T::TYPE_HASH.0)
            {
                continue;
            }
            match decode_qos(&f.info.qos).compatible_with(qos) {
                Ok(()) => n += 1,
                Err(why) => {
                    if self
                        .refused
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(f.name.file_name().to_string())
                    {
                        on_refused(why);
                    }
                }
            }
        }
        n
    }

    /// Publishers in other processes connected to this inbox now.
    pub(crate) fn connected(&self) -> usize {
        (0..MAX_CONNECTIONS)
            .filter(|i| matches!(self.inbox.inbox.state(*i), ConnState::Active { .. }))
            .count()
    }

    /// Whether any connection has a message waiting.
    pub(crate) fn has_data(&self) -> bool {
        (0..MAX_CONNECTIONS).any(|i| self.inbox.inbox.has_data(i))
    }
}

impl Drop for SubShm {
    fn drop(&mut self) {
        self.dom.bump();
    }
}
