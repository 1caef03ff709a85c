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

mod discovery;
mod publish;
mod qos;
mod receive;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use myelin_shm::changes::{Change, EndpointKey};
use myelin_shm::endpoint::{EndpointInfo, EndpointKind, GraphEvent, Listener, scan};
use myelin_shm::wake::WakeTable;
use myelin_shm::watch::{Exited, Watch};
use myelin_shm::{cleanup_stale, process_alive};

use discovery::{Discovered, View};

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

/// The id of the endpoint numbered `serial`, which names its segments
/// (`p_<pid>_<id>`, `s_<pid>_<id>`, `k_<pid>_<id>_<n>`): its low 24 bits
/// are the serial (the endpoint number of its [`Gid`](crate::Gid), which a
/// reader rebuilds from the publisher's pid and id), the upper 40 bits a
/// keyed hash of it (SipHash, keyed from the OS's randomness once per
/// process), so the id is unguessable: another local user cannot plant
/// files at the names a process is about to create (a squatted name would
/// make creating the endpoint fail) without guessing 40 random bits.
fn endpoint_id(serial: u64) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static KEY: OnceLock<RandomState> = OnceLock::new();
    let secret = KEY.get_or_init(RandomState::new).hash_one(serial) << 24;
    (secret | (serial & 0xff_ffff)).max(1)
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
    host_endpoints_but(domain, |_| false)
}

/// [`host_endpoints`] without those `skip` names.
fn host_endpoints_but(
    domain: u32,
    skip: impl Fn(&EndpointInfo) -> bool,
) -> Vec<DiscoveredEndpoint> {
    let mut errors = Vec::new();
    scan(domain, &mut errors)
        .into_iter()
        .filter(|f| f.alive && !skip(&f.info))
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

/// How long an endpoint that is leaving (dropped, or its process exiting)
/// waits, in all, for state another thread holds: a leaving publisher for
/// its connections, a leaving subscription for a pass that is releasing
/// pools handed to it. Bounded: at exit, the holder may be the thread that
/// is exiting.
const LEAVE_WAIT: Duration = Duration::from_millis(500);

/// Lock `m`, waiting as `pacer` does (it spins, yields, then sleeps, up
/// to its deadline); `None` once the deadline passed. A poisoned lock is
/// taken: the state it guards stays consistent between statements.
fn lock_within<'a, T>(
    m: &'a Mutex<T>,
    pacer: &mut crate::clock::Pacer,
) -> Option<std::sync::MutexGuard<'a, T>> {
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {
                if !pacer.pause() {
                    return None;
                }
            }
        }
    }
}

/// Remove `path` once [`ORPHAN_GRACE`] has passed (on a discovery pass;
/// if this process exits first, the survivors' sweep removes it).
fn orphan(path: &std::path::Path) {
    ORPHANS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((path.to_path_buf(), Instant::now()));
}

/// Remove the orphaned pool files whose grace period is over; when the
/// next one is due.
fn remove_orphans() -> Option<Instant> {
    let mut list = ORPHANS.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|(path, since)| {
        if since.elapsed() < ORPHAN_GRACE {
            return true;
        }
        let _ = std::fs::remove_file(path);
        myelin_shm::forget_at_exit(path);
        false
    });
    list.iter().map(|(_, since)| *since + ORPHAN_GRACE).min()
}

/// A context's view of its domain in shared memory.
pub(crate) struct ShmTransport {
    domain: u32,
    ctx_id: u64,
    graph: Arc<GraphEvent>,
    /// This context's listener slot in the graph segment: its discovery
    /// thread is woken only for changes on its topics' groups (`None`:
    /// every slot taken; it waits on the domain-wide counter).
    listener: Option<Listener>,
    view: Mutex<View>,
    /// Processes that exited (told by the exit watch), for the next pass.
    exited: Mutex<Vec<u32>>,
    /// No pidfds here: watched processes are polled (once a second).
    poll_liveness: AtomicBool,
    stop: Arc<AtomicBool>,
    /// Ourselves, for the exit watch.
    me: Weak<ShmTransport>,
}

/// How often a context checks its own inboxes (another process of this
/// user may have damaged one) and, without pidfds, whether the processes
/// it talks to are alive.
const SELF_CHECK: Duration = Duration::from_secs(1);

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
        announce_removed(&graph, domain, cleanup_stale(domain).unwrap_or_default());
        wake_table().ok_or_else(|| {
            TransportError::new("this process's wake-up table", "it could not be created")
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let listener = graph.claim_listener();
        if listener.is_none() {
            tracing::debug!(
                "domain {domain}: every listener slot is taken; discovery wakes for every change"
            );
        }
        let view = View::new(domain, &graph);
        let dom = Arc::new_cyclic(|me| ShmTransport {
            domain,
            ctx_id: next_id(),
            graph: graph.clone(),
            listener: listener.clone(),
            view: Mutex::new(view),
            exited: Mutex::new(Vec::new()),
            poll_liveness: AtomicBool::new(false),
            stop: stop.clone(),
            me: me.clone(),
        });
        let weak = Arc::downgrade(&dom);
        let listener = dom.listener.clone();
        std::thread::Builder::new()
            .name(format!("myelin-discovery-{domain}"))
            .spawn(move || {
                let mut next_check = Instant::now() + SELF_CHECK;
                loop {
                    let seen = match &listener {
                        Some(l) => graph.listener_epoch(l),
                        None => graph.epoch(),
                    };
                    let soon = match weak.upgrade() {
                        Some(d) if !stop.load(Ordering::Relaxed) => {
                            let check = Instant::now() >= next_check;
                            if check {
                                next_check = Instant::now() + SELF_CHECK;
                            }
                            d.pass(check)
                        }
                        _ => return,
                    };
                    let deadline = match soon {
                        Some(t) => t.min(next_check),
                        None => next_check,
                    };
                    match &listener {
                        Some(l) => graph.wait_listener(l, seen, deadline),
                        None => graph.wait(seen, deadline),
                    }
                }
            })
            .map_err(|e| TransportError::new("starting the discovery thread", e))?;
        Ok(dom)
    }

    /// The view, caught up with the log (any thread may do this; the
    /// rescans it asks for run on the discovery thread).
    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        let mut v = self.view.lock().unwrap_or_else(|e| e.into_inner());
        v.catch_up(&self.graph);
        for e in std::mem::take(&mut v.skipped) {
            report_skipped(&e);
        }
        v
    }

    fn register(&self, id: u64, topic: &str, d: Weak<dyn Discovered>) {
        let first = self
            .view
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .register(id, topic, d);
        if let (Some(group), Some(l)) = (first, &self.listener) {
            // Woken for this group from now on; what was announced in it
            // before is read now (the bit is set before the log is read).
            self.graph.listen_to(l, group, true);
            drop(self.view());
        }
    }

    /// Wake this context's discovery thread.
    fn wake(&self) {
        match &self.listener {
            Some(l) => self.graph.wake_listener(l),
            None => self.graph.bump(),
        }
    }

    /// One discovery pass: read the log, handle exits, rescan the links
    /// the changes concern. `check`: also the once-a-second checks.
    /// Returns when to look again at the latest (a log entry is awaited,
    /// or a dropped pool's file is due).
    fn pass(&self, check: bool) -> Option<Instant> {
        let mut exited =
            std::mem::take(&mut *self.exited.lock().unwrap_or_else(|e| e.into_inner()));
        let (work, links, soon) = {
            let mut v = self.view();
            if check {
                v.retry_unopened();
                if self.poll_liveness.load(Ordering::Relaxed) {
                    exited.extend(v.watched().into_iter().filter(|p| !process_alive(*p)));
                }
            }
            for pid in &exited {
                v.mark_dead(*pid);
            }
            let work = v.take_work();
            let links = if check { v.links() } else { Vec::new() };
            let soon = v
                .waiting_for_entry()
                .then(|| Instant::now() + Duration::from_millis(20));
            (work, links, soon)
        };
        if let Some(l) = &self.listener {
            for g in &work.unlisten {
                self.graph.listen_to(l, *g, false);
            }
        }
        self.watch(&work.watch);
        // First the links look again: subscriptions drain (and map the
        // pools of) what a dead publisher left in their inboxes.
        for (link, found) in work.rescans {
            link.rescan(&found, &exited);
        }
        if !exited.is_empty() {
            // A process died without cleaning up: remove its segments
            // (mappings held by survivors stay valid) and say so, and the
            // wake-up tables of exited processes. Its pools go after a
            // grace period: readers in other processes may still have to
            // map the messages queued for them.
            if let Ok((removed, pools)) = myelin_shm::cleanup_exited(self.domain, &exited) {
                announce_removed(&self.graph, self.domain, removed);
                for p in pools {
                    orphan(&p);
                }
            }
            // What the dead process removed itself at its exit, or another
            // survivor removed for it: forgotten here too.
            let mut v = self.view.lock().unwrap_or_else(|e| e.into_inner());
            for pid in &exited {
                v.forget_removed(*pid);
            }
        }
        // Writers the links met that discovery has not seen (they may
        // have come and gone between two passes): watched too, so their
        // exit is heard and the pools they left are removed.
        // A link that met a new writer looks at its topic again too: its
        // inbox may have just filled, shutting out a publisher it already
        // knows (reported once every block is held).
        let mut writers = Vec::new();
        let mut again = Vec::new();
        for (topic, l) in links {
            l.check_own();
            let met = l.take_writers();
            if !met.is_empty() {
                again.push((topic.clone(), l));
            }
            for pid in met {
                writers.push((pid, topic.clone()));
            }
        }
        if !writers.is_empty() {
            let me = std::process::id();
            let (new, again): (Vec<u32>, Vec<_>) = {
                let mut v = self.view.lock().unwrap_or_else(|e| e.into_inner());
                let new = writers
                    .into_iter()
                    .filter(|(pid, topic)| *pid != me && v.watch_writer(*pid, topic))
                    .map(|(pid, _)| pid)
                    .collect();
                let again = again
                    .into_iter()
                    .map(|(topic, l)| (v.on_topic(&topic), l))
                    .collect();
                (new, again)
            };
            self.watch(&new);
            for (found, l) in again {
                l.rescan(&found, &[]);
            }
        }
        let orphans_due = remove_orphans();
        [soon, orphans_due].into_iter().flatten().min()
    }

    /// Start watching `pids` for their exit (one already gone is noted as
    /// exited for the next pass).
    fn watch(&self, pids: &[u32]) {
        let who: Weak<dyn Exited> = self.me.clone();
        for pid in pids {
            match myelin_shm::watch::watch(*pid, &who) {
                Watch::Watching => {}
                Watch::Gone => Exited::exited(self, *pid),
                Watch::Unsupported(e) => {
                    if !self.poll_liveness.swap(true, Ordering::Relaxed) {
                        tracing::debug!("process exits are polled (no pidfd: {e})");
                    }
                }
            }
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

impl Exited for ShmTransport {
    /// On the exit watch's thread: noted for the next pass, which this
    /// starts.
    fn exited(&self, pid: u32) {
        self.exited
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
        self.wake();
    }
}

/// Announce the removal of the endpoint segments in `removed` (this
/// process removed them for a dead one).
fn announce_removed(graph: &GraphEvent, domain: u32, removed: Vec<std::path::PathBuf>) {
    for path in removed {
        if let Some(key) = EndpointKey::of_path(domain, &path) {
            graph.announce(Change::Removed, &key);
        }
    }
}

impl Transport for ShmTransport {
    fn name(&self) -> &'static str {
        "shm"
    }

    /// The host's endpoints of this domain but this context's own.
    fn graph_endpoints(&self) -> Vec<DiscoveredEndpoint> {
        let pid = std::process::id();
        host_endpoints_but(self.domain, |e| e.pid == pid && e.context == self.ctx_id)
    }

    /// Refuse an endpoint whose topic has another type in another process.
    fn check_type(&self, spec: &EndpointSpec<'_>) -> Result<(), CreateEndpointError> {
        if spec.ty.any {
            return Ok(());
        }
        let found = self.view().on_topic(spec.topic);
        for f in found {
            if f.alive
                && !is_any_info(&f.info)
                && (f.info.type_name != spec.ty.name || f.info.type_hash != spec.ty.hash.0)
                && process_alive(f.info.pid)
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
        let info = self.info(spec, EndpointKind::Publisher, endpoint_id(spec.serial));
        let id = info.id;
        let link = Arc::new(publish::PubShm::new(self.domain_handle(), spec, info)?);
        link.own_exit_rule();
        let weak: Weak<dyn Discovered> = Arc::downgrade(&(link.clone() as Arc<dyn Discovered>));
        self.register(id, spec.topic, weak);
        Ok(Some(link))
    }

    fn subscription(
        &self,
        spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn SubLink>>, TransportError> {
        if !spec.ty.crosses() {
            return Ok(None);
        }
        let info = self.info(spec, EndpointKind::Subscription, endpoint_id(spec.serial));
        let id = info.id;
        let link = Arc::new(receive::SubShm::new(self.domain_handle(), spec, info)?);
        link.own_exit_rule();
        let weak: Weak<dyn Discovered> = Arc::downgrade(&(link.clone() as Arc<dyn Discovered>));
        self.register(id, spec.topic, weak);
        Ok(Some(link))
    }

    fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.wake();
    }
}

impl Drop for ShmTransport {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.wake();
        if let Some(l) = &self.listener {
            self.graph.release_listener(l);
        }
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
    /// Tell every process of the domain that `key` appeared, changed or
    /// went away.
    fn announce(&self, change: Change, key: &EndpointKey) {
        self.graph.announce(change, key);
    }
}

/// Log a segment that discovery skipped: a foreign one (another user's, a
/// symlink, writable by others) or another myelin version's (a process
/// this one cannot talk to over shared memory) as a warning, once per
/// file; others (half-created, damaged, gone) at debug level on every
/// pass.
fn report_skipped(e: &myelin_shm::ShmError) {
    static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    match e {
        myelin_shm::ShmError::Foreign { path, .. }
        | myelin_shm::ShmError::OtherVersion { path, .. } => {
            let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
            if warned.get_or_insert_with(HashSet::new).insert(path.clone()) {
                tracing::warn!("discovery skipped a segment: {e}");
            }
        }
        _ => tracing::debug!("discovery skipped a segment: {e}"),
    }
}
