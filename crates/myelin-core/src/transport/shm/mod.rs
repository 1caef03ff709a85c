//! The shared-memory transport: publishers and subscriptions of one
//! domain connect across processes on the same host (see `myelin-shm` for
//! the segments, inboxes, pools and wake tables, and ARCHITECTURE.md for
//! the design).
//!
//! * **Discovery** ([`ShmTransport`]): each context runs one thread that
//!   rescans the domain's endpoint segments whenever any process bumps the
//!   domain's change counter (and every half second, to notice dead
//!   processes), and hands the result to each of its links.
//! * **Publish** ([`publish`]): a publisher writes the message into a
//!   chunk of its pool (or was handed one by a loan), pushes the chunk's
//!   descriptor into the inbox of each connected subscription in another
//!   process, and marks that inbox's lane in the subscriber's wake table.
//!   Local subscriptions are served by the intra-process manager only, so
//!   nothing arrives twice.
//! * **Receive** ([`receive`]): an executor woken with a lane marked drains
//!   the inboxes behind that lane into their subscriptions' buffers (the
//!   message read in place for plain old data and blobs, decoded for CDR
//!   types); dropping the last reference returns the chunk.

mod publish;
mod qos;
mod receive;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use myelin_shm::endpoint::{EndpointInfo, EndpointKind, Found, GraphEvent, scan};
use myelin_shm::wake::WakeTable;
use myelin_shm::{cleanup_stale, process_alive};

use super::{
    DiscoveredEndpoint, EndpointSpec, PubLink, SubLink, Transport, TransportConfig, TransportError,
    next_id,
};
use crate::error::{ContextError, CreateEndpointError};

pub(crate) use qos::decode_qos;
use qos::{encode_qos, is_any_info};

/// This process's wake-up table (created on first use).
pub(crate) fn wake_table() -> Option<Arc<WakeTable>> {
    static TABLE: OnceLock<Option<Arc<WakeTable>>> = OnceLock::new();
    TABLE
        .get_or_init(|| match WakeTable::create() {
            Ok(t) => {
                t.remove_at_exit();
                Some(t)
            }
            Err(e) => {
                tracing::warn!("shared memory wake-up table unavailable: {e}");
                None
            }
        })
        .clone()
}

/// A new endpoint's id, which names its segments (`p_<pid>_<id>`,
/// `s_<pid>_<id>`, `k_<pid>_<id>_<n>`): unguessable, so another local user
/// cannot plant files at the names a process is about to create (a
/// squatted name would make creating the endpoint fail). A keyed hash
/// (SipHash, keyed from the OS's randomness once per process) of a
/// counter: distinct within the process, and seeing some ids tells
/// nothing about the next.
fn endpoint_id() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new).hash_one(next_id()).max(1)
}

/// Other processes' wake-up tables, opened on demand.
fn remote_wake_table(pid: u32, tag: u64) -> Option<Arc<WakeTable>> {
    /// Opened tables by process and tag.
    type Tables = Mutex<HashMap<(u32, u64), Arc<WakeTable>>>;
    static TABLES: OnceLock<Tables> = OnceLock::new();
    let mut m = TABLES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(t) = m.get(&(pid, tag)) {
        return Some(t.clone());
    }
    if !process_alive(pid) {
        return None;
    }
    let t = Arc::new(WakeTable::open(pid, tag).ok()?);
    m.insert((pid, tag), t.clone());
    Some(t)
}

/// Start the transport for a context, as `config` and `MYELIN_TRANSPORT`
/// ask: `None` when off; a failure is an error when shared memory was
/// required, else a warning and `None` (in-process and the network go on).
pub(crate) fn start(config: &TransportConfig) -> Result<Option<Arc<dyn Transport>>, ContextError> {
    let wanted = config
        .shared_memory
        .unwrap_or_else(super::shared_memory_enabled);
    if !wanted {
        return Ok(None);
    }
    match ShmTransport::start(config.domain) {
        Ok(t) => Ok(Some(t)),
        Err(why) if config.shared_memory == Some(true) => Err(ContextError::SharedMemory {
            domain: config.domain,
            why: why.to_string(),
        }),
        Err(e) => {
            tracing::warn!(
                "domain {}: shared memory unavailable, staying in-process: {e}",
                config.domain
            );
            Ok(None)
        }
    }
}

/// Every live endpoint of `domain` in this host's shared memory.
pub(crate) fn host_endpoints(domain: u32) -> Vec<DiscoveredEndpoint> {
    let mut errors = Vec::new();
    scan(domain, &mut errors)
        .into_iter()
        .filter(|f| f.alive)
        .map(|f| DiscoveredEndpoint {
            is_publisher: f.info.kind == EndpointKind::Publisher,
            topic: f.info.topic,
            type_name: f.info.type_name,
            type_hash: crate::TypeHash(f.info.type_hash),
            ros_hash: None,
            node: f.info.node,
            pid: f.info.pid,
            qos: decode_qos(&f.info.qos),
            zid: None,
        })
        .collect()
}

/// How long the file of a dropped publisher's pool stays after the drop
/// when readers still held chunks of it: a reader that has a message of it
/// queued but has not mapped the pool yet gets this long to do so (its
/// mapping stays valid after the file goes).
const ORPHAN_GRACE: Duration = Duration::from_secs(2);

/// Pool files of dropped publishers, with when they were dropped.
static ORPHANS: Mutex<Vec<(std::path::PathBuf, Instant)>> = Mutex::new(Vec::new());

/// Remove `path` once [`ORPHAN_GRACE`] has passed (on a discovery pass).
fn orphan(path: &std::path::Path) {
    ORPHANS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((path.to_path_buf(), Instant::now()));
}

/// Remove the orphaned pool files whose grace period is over.
fn remove_orphans() {
    let mut list = ORPHANS.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|(path, since)| {
        if since.elapsed() < ORPHAN_GRACE {
            return true;
        }
        let _ = std::fs::remove_file(path);
        false
    });
}

/// A link the discovery thread keeps up to date.
trait Discovered: Send + Sync {
    fn rescan(self: Arc<Self>, found: &[Found]);
}

/// A context's view of its domain in shared memory.
pub(crate) struct ShmTransport {
    domain: u32,
    ctx_id: u64,
    graph: Arc<GraphEvent>,
    locals: Mutex<Vec<Weak<dyn Discovered>>>,
    stop: Arc<AtomicBool>,
    last_cleanup: Mutex<Instant>,
}

impl ShmTransport {
    /// Set up the domain and start the discovery thread.
    fn start(domain: u32) -> Result<Arc<ShmTransport>, TransportError> {
        let graph = Arc::new(
            GraphEvent::open_or_create(domain)
                .map_err(|e| TransportError::new("the domain's graph segment", e))?,
        );
        // A planted file at the counter's usual name: this user's
        // processes meet at the next name instead, and say so once.
        for e in graph.squatted() {
            report_skipped(e);
        }
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            let _ = myelin_shm::cleanup_stale_host();
        });
        // Segments of processes that died in this domain (a crash, or an
        // exit that skipped destructors) go before anyone matches them.
        let _ = cleanup_stale(domain);
        wake_table().ok_or_else(|| {
            TransportError::new("this process's wake-up table", "it could not be created")
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let dom = Arc::new(ShmTransport {
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
            .map_err(|e| TransportError::new("starting the discovery thread", e))?;
        Ok(dom)
    }

    /// Tell every process (this one included) that endpoints changed.
    fn bump(&self) {
        self.graph.bump();
    }

    fn register(&self, d: Weak<dyn Discovered>) {
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
            report_skipped(&e);
        }
        found
    }

    /// One discovery pass.
    fn pass(&self) {
        remove_orphans();
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

    /// What a link keeps of its domain.
    fn domain_handle(&self) -> Domain {
        Domain {
            id: self.domain,
            graph: self.graph.clone(),
        }
    }

    fn info(&self, spec: &EndpointSpec<'_>, kind: EndpointKind, id: u64) -> EndpointInfo {
        EndpointInfo {
            kind,
            pid: std::process::id(),
            context: self.ctx_id,
            id,
            topic: spec.topic.to_string(),
            type_name: spec.ty.name.to_string(),
            type_hash: spec.ty.hash.0,
            node: spec.node.fqn.to_string(),
            qos: encode_qos(spec.qos),
            wake_tag: wake_table().map_or(0, |t| t.tag()),
        }
    }
}

impl Transport for ShmTransport {
    fn name(&self) -> &'static str {
        "shm"
    }

    /// Refuse an endpoint whose topic has another type in another process.
    fn check_type(&self, spec: &EndpointSpec<'_>) -> Result<(), CreateEndpointError> {
        if spec.ty.any {
            return Ok(());
        }
        for f in self.foreign() {
            if f.alive
                && f.info.topic == spec.topic
                && !is_any_info(&f.info)
                && (f.info.type_name != spec.ty.name || f.info.type_hash != spec.ty.hash.0)
            {
                return Err(CreateEndpointError::RemoteTypeMismatch {
                    topic: spec.topic.to_string(),
                    remote: f.info.type_name,
                    remote_hash: f.info.type_hash,
                    pid: f.info.pid,
                    requested: spec.ty.name,
                    requested_hash: spec.ty.hash,
                });
            }
        }
        Ok(())
    }

    fn publisher(
        &self,
        spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn PubLink>>, TransportError> {
        if !spec.ty.crosses() {
            return Ok(None);
        }
        let link = Arc::new(publish::PubShm::new(
            self.domain_handle(),
            spec,
            self.info(spec, EndpointKind::Publisher, endpoint_id()),
        )?);
        let weak: Weak<dyn Discovered> = Arc::downgrade(&(link.clone() as Arc<dyn Discovered>));
        self.register(weak);
        Ok(Some(link))
    }

    fn subscription(
        &self,
        spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn SubLink>>, TransportError> {
        if !spec.ty.crosses() {
            return Ok(None);
        }
        let link = Arc::new(receive::SubShm::new(
            self.domain_handle(),
            spec,
            self.info(spec, EndpointKind::Subscription, endpoint_id()),
        )?);
        let weak: Weak<dyn Discovered> = Arc::downgrade(&(link.clone() as Arc<dyn Discovered>));
        self.register(weak);
        Ok(Some(link))
    }

    fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.graph.bump();
    }
}

impl Drop for ShmTransport {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.graph.bump();
        // The domain's graph file goes now if this was its last user, not
        // when the discovery thread or a link lets go of the counter
        // (possibly never, if the process exits first).
        self.graph.leave();
    }
}

/// What a link keeps of its domain: the id (segment names) and the
/// change counter (bumped when the link's connections change).
#[derive(Clone)]
struct Domain {
    id: u32,
    graph: Arc<GraphEvent>,
}

impl Domain {
    fn bump(&self) {
        self.graph.bump();
    }
}

/// Log a segment that discovery skipped: a foreign one (another user's, a
/// symlink, writable by others) as a warning, once per file; others
/// (half-created, damaged, gone) at debug level on every pass.
fn report_skipped(e: &myelin_shm::ShmError) {
    static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    match e {
        myelin_shm::ShmError::Foreign { path, .. } => {
            let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
            if warned.get_or_insert_with(HashSet::new).insert(path.clone()) {
                tracing::warn!("discovery skipped a segment: {e}");
            }
        }
        _ => tracing::debug!("discovery skipped a segment: {e}"),
    }
}
