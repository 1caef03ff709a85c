//! The network transport: publishers, subscriptions and services reach
//! other hosts through one zenoh session per context, in rmw_zenoh's wire
//! format (see `myelin-zenoh` for the names, tokens and attachments, and
//! ARCHITECTURE.md for the design).
//!
//! * **Publish**: the message is encoded (CDR with its encapsulation
//!   header, or the raw bytes of plain old data and blobs) and put on the
//!   topic's key expression with the 33-byte attachment. Nothing is encoded
//!   or sent while no subscription outside the shared-memory island wants
//!   it (known from liveliness tokens).
//! * **Receive**: zenoh calls back on its own thread; the sample is decoded
//!   and pushed into the subscription's buffer, which wakes its executor as
//!   a local publish does. Samples from this context never arrive (the
//!   subscriber only takes remote origins); samples from a publisher that
//!   already reached this subscription through shared memory are dropped
//!   by their gid, so each message arrives once.
//! * **Graph**: every node and endpoint declares an rmw_zenoh liveliness
//!   token; a context follows the tokens of the topics (and services) it
//!   has endpoints on, with one liveliness subscriber per topic, and keeps
//!   them by topic: a change reaches only the processes with endpoints on
//!   its topic, and only their links on it recount (matched counts and
//!   events). zenoh drops the tokens of a process that dies (its session
//!   closes, or its lease ends).
//! * **Same host**: the session id encodes the shared-memory island and
//!   whether the context uses shared memory, so a process knows which
//!   remote endpoints shared memory already serves and counts them once.

mod flush;
mod publish;
mod receive;
mod service;

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::gid;
use myelin_zenoh::names;
use myelin_zenoh::token::{EntityKind, Token, TokenQos, TopicInfo};
use myelin_zenoh::zenoh::bytes::ZBytes;
use myelin_zenoh::zenoh::liveliness::LivelinessToken;
use myelin_zenoh::zenoh::pubsub::Subscriber;
use myelin_zenoh::zenoh::sample::{Sample, SampleKind};
use myelin_zenoh::zenoh::{Session, Wait};

use super::{
    DiscoveredEndpoint, EndpointEvents, EndpointSpec, NodeIdent, PubLink, RawCalls, RequestHandler,
    SubLink, Transport, TransportConfig, TransportError, TypeInfo,
};
use crate::error::ContextError;
use crate::qos::{Durability, History, LivelinessKind, QoS, Reliability};

/// The type name and hash chunks an AnyMessage endpoint uses in its token
/// (`*` cannot appear in a key expression).
const ANY_TYPE: &str = "myelin::msg::dds_::Any_";
const ANY_HASH: &str = "ANY";

/// The type name and hash chunks of a key expression and token: the ROS 2
/// hash when the type has one.
fn type_chunks(ty: &TypeInfo) -> (String, String) {
    if ty.any {
        (ANY_TYPE.into(), ANY_HASH.into())
    } else {
        let hash = match ty.ros_hash {
            Some(h) => h.to_string(),
            None => names::myelin_type_hash(ty.hash.0),
        };
        (names::dds_type_name(ty.name), hash)
    }
}

/// The zid marker byte (bits 56..64 of the 128-bit session id).
const ZID_MAGIC: u128 = 0xA0;

/// A session id that tells others this process's island and whether its
/// context uses shared memory: `island << 64 | (0xA0|shm) << 56 | pid << 24 | serial`.
fn make_zid(island: u64, shm: bool) -> u128 {
    (u128::from(island) << 64)
        | ((ZID_MAGIC | shm as u128) << 56)
        | (u128::from(std::process::id()) << 24)
        | (u128::from(super::next_id()) & 0xff_ffff)
}

/// Whether a session (hex zid) is a myelin context on `island` that uses
/// shared memory.
fn zid_on_shm_island(zid: &str, island: u64) -> bool {
    let Ok(v) = u128::from_str_radix(zid, 16) else {
        return false;
    };
    (v >> 64) as u64 == island && (v >> 56) & 0xff == ZID_MAGIC | 1
}

/// The shared-memory island a myelin session id carries (`None` for
/// another implementation's).
fn zid_island(zid: &str) -> Option<u64> {
    match u128::from_str_radix(zid, 16) {
        Ok(v) if (v >> 56) & 0xfe == ZID_MAGIC => Some((v >> 64) as u64),
        _ => None,
    }
}

/// The pid a myelin session id carries (0 for another implementation).
fn zid_pid(zid: &str) -> u32 {
    match u128::from_str_radix(zid, 16) {
        Ok(v) if (v >> 56) & 0xfe == ZID_MAGIC => ((v >> 24) & 0xffff_ffff) as u32,
        _ => 0,
    }
}

/// The key on which a myelin publisher with a liveliness lease puts its
/// explicit assertions (an empty payload with the attachment),
/// beside its data key `data`. A verbatim chunk (`@myelin`): zenoh's
/// wildcards never match it, so rmw_zenoh's and the tools' subscribers
/// (`**`) do not see these; only myelin subscriptions with a liveliness
/// lease subscribe to it. (rmw_zenoh carries no assertions at all: its
/// liveliness is the token's.)
pub(super) fn alive_key(data: &str) -> String {
    format!("{data}/@myelin/alive")
}

/// The myelin endpoint a token announces as its samples' gids name it
/// ([`gid::endpoint_of`]: island, pid, endpoint number); `None` for
/// another implementation's token.
pub(super) fn token_endpoint(t: &Token) -> Option<(u64, u32, u32)> {
    Some((
        zid_island(&t.zid)?,
        zid_pid(&t.zid),
        (t.eid & 0xff_ffff) as u32,
    ))
}

fn token_qos(q: &QoS) -> TokenQos {
    TokenQos {
        reliable: q.reliability == Reliability::Reliable,
        transient_local: q.durability == Durability::TransientLocal,
        keep_all: q.history == History::KeepAll,
        depth: match q.history {
            History::KeepLast(d) => d as u64,
            History::KeepAll => 0,
        },
        deadline: q.deadline,
        lifespan: q.lifespan,
        manual_by_topic: q.liveliness.kind == LivelinessKind::ManualByTopic,
        lease: q.liveliness.lease,
    }
}

/// The QoS a token announces, as myelin's type.
pub(crate) fn qos_of_token(t: &TokenQos) -> QoS {
    QoS {
        history: if t.keep_all {
            History::KeepAll
        } else {
            History::KeepLast(t.depth.clamp(1, 1 << 20) as usize)
        },
        reliability: if t.reliable {
            Reliability::Reliable
        } else {
            Reliability::BestEffort
        },
        durability: if t.transient_local {
            Durability::TransientLocal
        } else {
            Durability::Volatile
        },
        deadline: t.deadline,
        lifespan: t.lifespan,
        liveliness: crate::qos::Liveliness {
            kind: if t.manual_by_topic {
                LivelinessKind::ManualByTopic
            } else {
                LivelinessKind::Automatic
            },
            lease: t.lease,
        },
        ..QoS::default()
    }
}

/// A link that follows the remote graph.
trait Discovered: Send + Sync {
    fn graph_changed(&self, graph: &RemoteGraph);
}

/// The tokens of other sessions on one topic (or service name), by key
/// expression.
#[derive(Default)]
pub(super) struct RemoteGraph {
    tokens: HashMap<String, Token>,
}

/// What a context follows of one topic: its remote tokens, its own links
/// on it, and the liveliness subscriber that keeps the tokens.
#[derive(Default)]
struct TopicGraph {
    tokens: RemoteGraph,
    locals: Vec<Weak<dyn Discovered>>,
    /// Declared once for the topic (`None` while being declared).
    follower: Option<Subscriber<()>>,
}

/// Start the transport for a context, as `config` and `MYELIN_TRANSPORT`
/// ask: `None` when off; a failure is an error when the network was asked
/// for explicitly (or configured by a file), else a warning and `None`.
/// `uses_shm`: this context's shared memory serves same-host peers.
pub(crate) fn start(
    config: &TransportConfig,
    uses_shm: bool,
) -> Result<Option<Arc<dyn Transport>>, ContextError> {
    // A configuration (file or environment) is an explicit request.
    let explicit = config.network == Some(true)
        || config.zenoh_config.is_some()
        || std::env::var_os(myelin_zenoh::config::CONFIG_ENV).is_some_and(|f| !f.is_empty());
    let wanted = config.network.unwrap_or_else(super::network_enabled);
    if !wanted {
        return Ok(None);
    }
    match ZenohTransport::start(config.domain, uses_shm, config.zenoh_config.as_deref()) {
        Ok(d) => Ok(Some(d)),
        Err(why) if explicit => Err(ContextError::Network {
            domain: config.domain,
            why: why.to_string(),
        }),
        Err(e) => {
            tracing::warn!(
                "domain {}: zenoh unavailable, staying on this host: {e}",
                config.domain
            );
            Ok(None)
        }
    }
}

/// A context's zenoh session and its view of the remote graph.
pub(crate) struct ZenohTransport {
    domain: u32,
    session: Session,
    zid: String,
    island: u64,
    /// Whether this context uses shared memory (then same-island peers
    /// that do too are served by it).
    shm: bool,
    /// The followed topics.
    graph: Mutex<HashMap<String, TopicGraph>>,
    opened: std::time::Instant,
    /// Whether the configuration connects somewhere (a router is expected).
    expect_peers: bool,
    /// The gids of this session's transient-local publishers: a history
    /// query of a subscription here also reaches their caches, and their
    /// samples are already delivered in-process.
    own_history: Mutex<HashSet<myelin_zenoh::gid::Gid>>,
    /// This transport, for the links to keep (they use its session).
    me: Weak<ZenohTransport>,
    /// Every token of the domain, followed from the first graph query on
    /// (`None` inside: following failed, said once).
    domain_graph: std::sync::OnceLock<Option<DomainGraph>>,
}

/// The whole domain's tokens, as rmw_zenoh's graph cache keeps them, for
/// a node's graph queries (`count_publishers`, `topic_names_and_types`).
/// Started by the first query rather than with the session: a process
/// that never asks pays nothing, where a liveliness subscriber on the
/// whole domain would hear every change of every process (the cost that
/// following only the topics a context uses avoids; BENCHMARKS.md,
/// "Scale").
struct DomainGraph {
    tokens: Arc<Mutex<DomainTokens>>,
    _follower: Subscriber<()>,
}

#[derive(Default)]
struct DomainTokens {
    /// By key expression; before `primed`, `None` marks a token the
    /// follower saw withdrawn (so the initial query's older answer does
    /// not bring it back).
    live: HashMap<String, Option<Token>>,
    primed: bool,
}

impl DomainTokens {
    fn apply(&mut self, key: &str, kind: SampleKind) {
        let Ok(tok) = Token::parse(key) else { return };
        match kind {
            SampleKind::Put => {
                self.live.insert(key.to_string(), Some(tok));
            }
            SampleKind::Delete if self.primed => {
                self.live.remove(key);
            }
            SampleKind::Delete => {
                self.live.insert(key.to_string(), None);
            }
        }
    }
}

/// How long after opening a session the graph may still be arriving (the
/// router answers a liveliness query with nothing until the session's
/// declarations are exchanged, a few milliseconds after open returns).
const SETTLE: Duration = Duration::from_millis(400);

/// The longest the first graph query waits for the network's answer (a
/// router answers in milliseconds; without one there is nobody to ask).
const GRAPH_QUERY: Duration = Duration::from_secs(2);

impl ZenohTransport {
    /// Open the session and start following the graph.
    fn start(
        domain: u32,
        shm: bool,
        config_file: Option<&std::path::Path>,
    ) -> Result<Arc<ZenohTransport>, TransportError> {
        let island = gid::island_key();
        let mut config = myelin_zenoh::config::session_config(config_file)
            .map_err(|e| TransportError::new("the zenoh configuration", e))?;
        let zid = make_zid(island, shm);
        config
            .insert_json5("id", &format!("\"{zid:x}\""))
            .map_err(|e| TransportError::new("setting the session id", e))?;
        let custom = config_file.is_some()
            || std::env::var_os(myelin_zenoh::config::CONFIG_ENV).is_some_and(|f| !f.is_empty());
        let expect_peers = if custom {
            config
                .get_json("connect/endpoints")
                .is_ok_and(|j| j.trim() != "[]")
        } else {
            myelin_zenoh::config::default_router_listening(Duration::from_millis(50))
        };
        if !custom && !expect_peers && !shm {
            // Multicast scouting is off: without a router this session
            // meets nobody, and without shared memory neither does the
            // process. Say so once instead of staying silent.
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "domain {domain}: zenoh is the only transport and no router listens on \
                     tcp/127.0.0.1:7447: this process reaches no other until one starts \
                     (`myelin router`, or MYELIN_ZENOH_CONFIG pointing at one)"
                );
            });
        }
        // Without gossip: a context that uses shared memory. Same-host
        // peers that use it too are served by it: direct zenoh links
        // between them (gossip's mesh, one per pair of processes) would
        // carry only keep-alives and declarations, at a cost per process
        // that grows with the host's population. Each session links to
        // its router alone, which carries what leaves the host and what
        // ROS 2 nodes send (BENCHMARKS.md, "Scale").
        let star = !custom && shm;
        if star {
            let _ = config.insert_json5("scouting/gossip/enabled", "false");
        }
        if !custom && expect_peers && !star {
            // A router is up: let open() wait for the connection and the
            // peers gossip brings (milliseconds; zenoh waits up to the
            // scouting delay for its connectors), so what this process
            // declares next reaches them. Without one, open() returns at
            // once and the connector keeps retrying in the background.
            let _ = config.insert_json5("scouting/delay", "2000");
        }
        let session = myelin_zenoh::config::open(config)
            .map_err(|e| TransportError::new("opening the zenoh session", e))?;
        if star && expect_peers {
            // Without gossip zenoh would wait out the whole scouting delay:
            // wait for the router's link instead (milliseconds), up to the
            // same bound.
            wait_for_link(
                &session,
                false,
                Duration::from_secs(2),
                Duration::from_millis(1),
            );
        }
        let dom = Arc::new_cyclic(|me| ZenohTransport {
            me: me.clone(),
            domain,
            zid: session.zid().to_string(),
            session,
            island,
            shm,
            graph: Mutex::new(HashMap::new()),
            opened: std::time::Instant::now(),
            expect_peers,
            own_history: Mutex::new(HashSet::new()),
            domain_graph: std::sync::OnceLock::new(),
        });
        Ok(dom)
    }

    /// Follow the tokens of `topic` (its current ones first).
    fn follow(&self, topic: &str) -> Result<Subscriber<()>, TransportError> {
        let weak = self.me.clone();
        self.session
            .liveliness()
            .declare_subscriber(myelin_zenoh::token::topic_tokens(self.domain, topic))
            .history(true)
            .callback(move |s: Sample| {
                if let Some(d) = weak.upgrade() {
                    d.on_token(&s);
                }
            })
            .wait()
            .map_err(|e| TransportError::new(format!("following the graph of {topic}"), e))
    }

    fn on_token(&self, s: &Sample) {
        let key = s.key_expr().as_str();
        let tok = match Token::parse(key) {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!("ignoring a liveliness token: {e}");
                return;
            }
        };
        if tok.zid == self.zid || tok.domain != self.domain {
            return;
        }
        let Some(topic) = tok.topic.as_ref().map(|t| t.name.clone()) else {
            return;
        };
        tracing::debug!(zid = %self.zid, kind = %s.kind(), key, "liveliness token");
        let mut g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = g.get_mut(&topic) else { return };
        match s.kind() {
            SampleKind::Put => {
                t.tokens.tokens.insert(key.to_string(), tok);
            }
            SampleKind::Delete => {
                t.tokens.tokens.remove(key);
            }
        }
        // Only the links on this topic look again.
        t.locals.retain(|w| w.strong_count() > 0);
        let locals: Vec<_> = t.locals.iter().filter_map(Weak::upgrade).collect();
        for e in locals {
            e.graph_changed(&t.tokens);
        }
    }

    /// Follow the graph of `topic` for `e` (and give it the current state
    /// now). Topics none of this context's links use any more are
    /// forgotten (their liveliness subscribers undeclared).
    fn register(&self, topic: &str, e: Arc<dyn Discovered>) {
        let first = {
            let mut g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
            g.retain(|_, t| {
                t.locals.retain(|w| w.strong_count() > 0);
                !t.locals.is_empty()
            });
            let t = g.entry(topic.to_string()).or_default();
            t.locals.push(Arc::downgrade(&e));
            t.locals.len() == 1
        };
        if first {
            // Declared without the graph's lock: its history may arrive
            // on another thread at once, and `on_token` takes the lock.
            match self.follow(topic) {
                Ok(sub) => {
                    let mut g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(t) = g.get_mut(topic) {
                        t.follower = Some(sub);
                    }
                }
                Err(err) => tracing::warn!("{err}: remote endpoints of it are not seen"),
            }
        }
        self.with_topic(topic, |g| e.graph_changed(g));
    }

    /// Whether shared memory already connects this context to the
    /// endpoint behind `zid`.
    fn served_by_shm(&self, zid: &str) -> bool {
        self.shm && zid_on_shm_island(zid, self.island)
    }

    /// A transient-local publisher of this session starts (`true`) or
    /// stops keeping history.
    pub(super) fn own_history(&self, g: myelin_zenoh::gid::Gid, on: bool) {
        let mut set = self.own_history.lock().unwrap_or_else(|e| e.into_inner());
        if on {
            set.insert(g);
        } else {
            set.remove(&g);
        }
    }

    /// Whether `g` is a transient-local publisher of this session.
    pub(super) fn is_own_history(&self, g: &myelin_zenoh::gid::Gid) -> bool {
        self.own_history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(g)
    }

    /// The domain's tokens, followed from the first call on. The first
    /// call also asks the network for the current ones (up to
    /// [`GRAPH_QUERY`]), so its answer is whole and not what happened to
    /// arrive first.
    fn domain_graph(&self) -> Option<&DomainGraph> {
        self.domain_graph
            .get_or_init(|| {
                let tokens = Arc::new(Mutex::new(DomainTokens::default()));
                let t2 = tokens.clone();
                let follower = self
                    .session
                    .liveliness()
                    .declare_subscriber(myelin_zenoh::token::domain_tokens(self.domain))
                    // The current tokens too, whenever they come: a first
                    // query that times out or is answered in part is made
                    // whole by them.
                    .history(true)
                    .callback(move |s: Sample| {
                        t2.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .apply(s.key_expr().as_str(), s.kind());
                    })
                    .wait();
                let follower = match follower {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(
                            "domain {}: following the graph for graph queries: {e}; node graph queries see this host's shared memory only",
                            self.domain
                        );
                        return None;
                    }
                };
                let answers = self.ask_domain_tokens(GRAPH_QUERY);
                let mut g = tokens.lock().unwrap_or_else(|e| e.into_inner());
                for (key, tok) in answers {
                    g.live.entry(key).or_insert(Some(tok));
                }
                g.live.retain(|_, t| t.is_some());
                g.primed = true;
                drop(g);
                Some(DomainGraph {
                    tokens,
                    _follower: follower,
                })
            })
            .as_ref()
    }

    /// Ask the network for the domain's current tokens (waiting up to
    /// `wait` for the answers), by key expression.
    fn ask_domain_tokens(&self, wait: Duration) -> Vec<(String, Token)> {
        let mut found = Vec::new();
        if let Ok(replies) = self
            .session
            .liveliness()
            .get(myelin_zenoh::token::domain_tokens(self.domain))
            // `Duration::MAX` (a caller's "forever") capped as our own
            // waits are: zenoh adds it to an `Instant`.
            .timeout(wait.min(crate::clock::FOREVER))
            .wait()
        {
            while let Ok(r) = replies.recv() {
                if let Ok(s) = r.result()
                    && let Ok(t) = Token::parse(s.key_expr().as_str())
                {
                    found.push((s.key_expr().as_str().to_string(), t));
                }
            }
        }
        found
    }

    /// Run `f` over the domain's tokens but this session's own and those
    /// of processes shared memory reports (see
    /// [`Transport::graph_endpoints`]).
    fn with_domain_tokens<R: Default>(
        &self,
        f: impl FnOnce(&mut dyn Iterator<Item = &Token>) -> R,
    ) -> R {
        let Some(g) = self.domain_graph() else {
            return R::default();
        };
        let tokens = g.tokens.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut tokens.live.values().flatten().filter(|t| {
            t.zid != self.zid && t.domain == self.domain && !self.served_by_shm(&t.zid)
        }))
    }

    /// Declare a liveliness token.
    fn declare(&self, t: &Token) -> Result<LivelinessToken, TransportError> {
        self.session
            .liveliness()
            .declare_token(t.key())
            .wait()
            .map_err(|e| TransportError::new(format!("declaring {}", t.key()), e))
    }

    /// The endpoints of other sessions (for `myelin topic list`), asking
    /// the network for the current tokens first (up to `wait`), each with
    /// whether it is a shared-memory context on this host.
    fn endpoints(&self, wait: Duration) -> Vec<(Token, bool)> {
        let patience = if self.expect_peers {
            wait
        } else {
            Duration::ZERO
        };
        let connected = wait_for_link(&self.session, true, patience, Duration::from_millis(10));
        if connected {
            let settle =
                (self.opened + SETTLE).saturating_duration_since(std::time::Instant::now());
            std::thread::sleep(settle.min(wait));
        }
        let mut found: HashMap<String, Token> = self.ask_domain_tokens(wait).into_iter().collect();
        let g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        for (k, t) in g.values().flat_map(|t| &t.tokens.tokens) {
            found.entry(k.clone()).or_insert_with(|| t.clone());
        }
        found
            .into_values()
            .filter(|t| t.zid != self.zid && t.domain == self.domain)
            .map(|t| {
                let same = zid_on_shm_island(&t.zid, self.island);
                (t, same)
            })
            .collect()
    }

    /// Run `f` on the current remote graph of `topic`.
    fn with_topic(&self, topic: &str, f: impl FnOnce(&RemoteGraph)) {
        let g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        match g.get(topic) {
            Some(t) => f(&t.tokens),
            None => f(&RemoteGraph::default()),
        }
    }
}

/// What a link matches on the remote graph: the endpoints of the other
/// kind on its topic, of its type, not served by shared memory, and with
/// compatible QoS (DDS's rule: the publisher offers, the subscription
/// requests). The publisher's and the subscription's side share it.
pub(super) struct Peers {
    /// The kind of endpoint matched (the other side).
    other: EntityKind,
    topic: String,
    ty: (String, String),
    qos: QoS,
    /// Tokens already reported as incompatible (each once).
    refused: Mutex<HashSet<String>>,
    /// Compatible endpoints now.
    connected: AtomicU32,
    /// Of the compatible publishers (a subscription's peers), the myelin
    /// ones with a liveliness lease (either kind), by the endpoint
    /// their gids name ([`gid::endpoint_of`]), with the lease.
    manual: Mutex<HashMap<(u64, u32, u32), Duration>>,
}

impl Peers {
    pub(super) fn new(other: EntityKind, spec: &EndpointSpec<'_>) -> Peers {
        Peers {
            other,
            topic: spec.topic.to_string(),
            ty: type_chunks(&spec.ty),
            qos: *spec.qos,
            refused: Mutex::new(HashSet::new()),
            connected: AtomicU32::new(0),
            manual: Mutex::new(HashMap::new()),
        }
    }

    /// Recount from `g`, telling `owner` of each incompatible endpoint once
    /// (none are marked told while there is no owner yet). Returns the count
    /// and whether it changed.
    pub(super) fn recount(
        &self,
        dom: &ZenohTransport,
        g: &RemoteGraph,
        owner: Option<&dyn EndpointEvents>,
    ) -> (u32, bool) {
        let mut compatible = 0;
        let mut manual = HashMap::new();
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        for (key, t) in &g.tokens {
            if t.kind != self.other || dom.served_by_shm(&t.zid) {
                continue;
            }
            let Some(i) = &t.topic else { continue };
            if i.name != self.topic {
                continue;
            }
            if !((i.type_name == self.ty.0 && i.type_hash == self.ty.1)
                || i.type_name == ANY_TYPE
                || self.ty.0 == ANY_TYPE)
            {
                // Same topic, another type: never matched; said once.
                if let Some(o) = owner
                    && refused.insert(key.clone())
                {
                    let ros =
                        |dds: &str| names::ros_type_name(dds).unwrap_or_else(|| dds.to_string());
                    crate::transport::warn_incompatible_type(
                        &self.topic,
                        (&ros(&self.ty.0), &self.ty.1),
                        (&ros(&i.type_name), &i.type_hash),
                        &format!("node {} (zenoh session {})", t.node, t.zid),
                    );
                    o.incompatible_type();
                }
                continue;
            }
            let theirs = qos_of_token(&i.qos);
            let check = match self.other {
                EntityKind::Subscription => self.qos.compatible_with(&theirs),
                _ => theirs.compatible_with(&self.qos),
            };
            match (check, owner) {
                (Ok(()), _) => {
                    compatible += 1;
                    if self.other == EntityKind::Publisher
                        && let Some(lease) = theirs.liveliness.lease
                        && let Some(endpoint) = token_endpoint(t)
                    {
                        manual.insert(endpoint, lease);
                    }
                }
                (Err(why), Some(o)) if refused.insert(key.clone()) => {
                    o.incompatible_qos(why.policy);
                }
                (Err(_), _) => {}
            }
        }
        drop(refused);
        *self.manual.lock().unwrap_or_else(|e| e.into_inner()) = manual;
        let before = self.connected.swap(compatible, Ordering::Relaxed);
        (compatible, before != compatible)
    }

    pub(super) fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed) as usize
    }

    /// The compatible myelin publishers with a liveliness lease (by
    /// endpoint), with their leases.
    pub(super) fn manual(&self) -> HashMap<(u64, u32, u32), Duration> {
        self.manual
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The topic matched on.
    pub(super) fn topic(&self) -> &str {
        &self.topic
    }
}

impl Transport for ZenohTransport {
    fn name(&self) -> &'static str {
        "zenoh"
    }

    /// The domain's endpoints through zenoh but this session's own and
    /// those shared memory reports (same-host processes on it, when this
    /// context is too).
    fn graph_endpoints(&self) -> Vec<DiscoveredEndpoint> {
        self.with_domain_tokens(|tokens| tokens.filter_map(discovered).collect())
    }

    /// Every token's node (rmw_zenoh's `NN` tokens announce nodes without
    /// endpoints too).
    fn graph_nodes(&self) -> Vec<String> {
        self.with_domain_tokens(|tokens| tokens.map(Token::node_fqn).collect())
    }

    fn publisher(
        &self,
        spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn PubLink>>, TransportError> {
        if !spec.ty.crosses() {
            return Ok(None);
        }
        let link = Arc::new(publish::PubNet::new(&self.me(), spec)?);
        self.register(spec.topic, link.clone());
        Ok(Some(link))
    }

    fn subscription(
        &self,
        spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn SubLink>>, TransportError> {
        if !spec.ty.crosses() {
            return Ok(None);
        }
        let link = Arc::new(receive::SubNet::new(&self.me(), spec)?);
        self.register(spec.topic, link.clone());
        Ok(Some(link))
    }

    /// The node's rmw_zenoh liveliness token.
    fn node(&self, node: &NodeIdent<'_>) -> Option<Box<dyn Any + Send + Sync>> {
        let token = Token {
            domain: self.domain,
            zid: self.zid.clone(),
            nid: node.nid,
            eid: node.nid,
            kind: EntityKind::Node,
            enclave: String::new(),
            namespace: node.namespace.to_string(),
            node: node.name.to_string(),
            topic: None,
        };
        match self.declare(&token) {
            Ok(t) => Some(Box::new(t)),
            Err(e) => {
                tracing::warn!("node {}: not visible on the network: {e}", node.fqn);
                None
            }
        }
    }

    fn discover(&self, wait: Duration) -> Vec<DiscoveredEndpoint> {
        // Endpoints of shared-memory processes of this island are found by
        // the host scan.
        let scanned = super::shared_memory_enabled();
        self.endpoints(wait)
            .into_iter()
            .filter(|(_, on_this_island)| !(*on_this_island && scanned))
            .filter_map(|(t, _)| discovered(&t))
            .collect()
    }

    fn session_id(&self) -> Option<String> {
        Some(self.zid.clone())
    }

    fn discover_services(&self, wait: Duration) -> Vec<super::DiscoveredService> {
        self.endpoints(wait)
            .into_iter()
            .filter_map(|(t, _)| {
                let is_server = match t.kind {
                    EntityKind::ServiceServer => true,
                    EntityKind::ServiceClient => false,
                    _ => return None,
                };
                let info = t.topic.as_ref()?;
                Some(super::DiscoveredService {
                    is_server,
                    name: info.name.clone(),
                    type_name: Some(
                        names::ros_type_name(&info.type_name)
                            .unwrap_or_else(|| info.type_name.replace("::", "/")),
                    ),
                    node: t.node_fqn(),
                    pid: zid_pid(&t.zid),
                    zid: Some(t.zid.clone()),
                })
            })
            .collect()
    }

    fn service_server(
        &self,
        spec: &EndpointSpec<'_>,
        handler: RequestHandler,
    ) -> Result<Option<Box<dyn Any + Send + Sync>>, TransportError> {
        service::serve(&self.me(), spec, handler).map(Some)
    }

    fn service_client(
        &self,
        spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn RawCalls>>, TransportError> {
        service::client(&self.me(), spec).map(Some)
    }
}

impl ZenohTransport {
    /// This transport as the `Arc` its links keep.
    fn me(&self) -> Arc<ZenohTransport> {
        self.me
            .upgrade()
            .expect("a transport in use is owned by its context")
    }
}

impl Drop for ZenohTransport {
    fn drop(&mut self) {
        let followed = std::mem::take(self.graph.get_mut().unwrap_or_else(|e| e.into_inner()));
        for s in followed.into_values().filter_map(|t| t.follower) {
            let _ = s.undeclare().wait();
        }
        // What zenoh still queues would be cut by the close (see `flush`).
        let conns = self
            .session
            .info()
            .links()
            .wait()
            .filter_map(|l| {
                let (src, dst) = (l.src().to_string(), l.dst().to_string());
                Some((flush::tcp_address(&src)?, flush::tcp_address(&dst)?))
            })
            .collect();
        let held = flush::wait_until_sent(&conns);
        if held > 0 {
            tracing::warn!(
                "closing zenoh with {held} bytes its peers have not taken after {:?} (or {:?} without progress): the last messages sent may not arrive",
                flush::LIMIT,
                flush::STALLED
            );
        }
        let _ = self.session.close().wait();
    }
}

/// The liveliness token of a new endpoint.
fn endpoint_token(dom: &ZenohTransport, kind: EntityKind, spec: &EndpointSpec<'_>) -> Token {
    let (type_name, type_hash) = type_chunks(&spec.ty);
    Token {
        domain: dom.domain,
        zid: dom.zid.clone(),
        nid: spec.node.nid,
        eid: spec.id,
        kind,
        enclave: String::new(),
        namespace: spec.node.namespace.to_string(),
        node: spec.node.name.to_string(),
        topic: Some(TopicInfo {
            name: spec.topic.to_string(),
            type_name,
            type_hash,
            qos: token_qos(spec.qos),
        }),
    }
}

/// A discovered remote endpoint as `transport::DiscoveredEndpoint`.
fn discovered(t: &Token) -> Option<DiscoveredEndpoint> {
    let info = t.topic.as_ref()?;
    let is_publisher = match t.kind {
        EntityKind::Publisher => true,
        EntityKind::Subscription => false,
        _ => return None,
    };
    let type_name = if info.type_name == ANY_TYPE {
        super::ANY_TYPE_NAME.to_string()
    } else {
        names::ros_type_name(&info.type_name).unwrap_or_else(|| info.type_name.replace("::", "/"))
    };
    let ros_hash = info
        .type_hash
        .starts_with("RIHS01_")
        .then(|| info.type_hash.clone());
    Some(DiscoveredEndpoint {
        is_publisher,
        topic: info.name.clone(),
        type_name,
        type_hash: ros_hash
            .as_deref()
            .map_or(crate::TypeHash(0), crate::TypeHash::of_ros_hash),
        ros_hash,
        node: t.node_fqn(),
        pid: zid_pid(&t.zid),
        qos: qos_of_token(&info.qos),
        zid: Some(t.zid.clone()),
    })
}

/// Wait up to `wait` (looking every `every`) for the session to have a
/// router, or any peer too when `peers`; whether it has one.
fn wait_for_link(
    session: &myelin_zenoh::zenoh::Session,
    peers: bool,
    wait: Duration,
    every: Duration,
) -> bool {
    let info = session.info();
    let linked = || {
        info.routers_zid().wait().next().is_some()
            || (peers && info.peers_zid().wait().next().is_some())
    };
    let give_up = crate::clock::deadline_after(wait);
    loop {
        if linked() {
            return true;
        }
        if std::time::Instant::now() >= give_up {
            return false;
        }
        std::thread::sleep(every);
    }
}

/// Call `f` with `payload`'s bytes as the slices zenoh holds them in:
/// one slice of its receive buffer for a message that fit one batch, or
/// the fragments of a larger one (no vector for the common single slice).
fn with_parts<R>(payload: &ZBytes, f: impl FnOnce(&[&[u8]]) -> R) -> R {
    let mut slices = payload.slices();
    match (slices.next(), slices.next()) {
        (None, _) => f(&[]),
        (Some(a), None) => f(&[a]),
        _ => f(&payload.slices().collect::<Vec<_>>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Liveliness assertions go where only myelin's liveliness
    /// subscribers listen: the data key's subscribers and the tools'
    /// wildcards (`**`, as a recorder or rmw_zenoh's any-type key) never
    /// match the side key.
    #[test]
    fn assertions_are_out_of_reach_of_data_and_wildcard_subscribers() {
        use myelin_zenoh::zenoh::key_expr::KeyExpr;
        let data =
            names::topic_key(0, "/heartbeat", "std_msgs::msg::dds_::Empty_", "RIHS01_00").unwrap();
        let alive = KeyExpr::try_from(alive_key(&data)).unwrap();
        for other in [
            data.as_str(),
            "**",
            "0/**",
            "0/heartbeat/**",
            "0/heartbeat/*/*",
        ] {
            let k = KeyExpr::try_from(other).unwrap();
            assert!(!k.intersects(&alive), "{other} matches {alive}");
        }
        assert!(
            KeyExpr::try_from(alive_key(&data))
                .unwrap()
                .intersects(&alive)
        );
    }

    #[test]
    fn zid_carries_island_and_shm() {
        let z = format!("{:x}", make_zid(0x8123_4567_89ab_cdef, true));
        assert!(zid_on_shm_island(&z, 0x8123_4567_89ab_cdef));
        assert!(!zid_on_shm_island(&z, 1));
        assert_eq!(zid_pid(&z), std::process::id());
        let z = format!("{:x}", make_zid(0x8123_4567_89ab_cdef, false));
        assert!(!zid_on_shm_island(&z, 0x8123_4567_89ab_cdef));
        assert!(!zid_on_shm_island("not hex", 1));
        assert_eq!(zid_pid("aac3178e146ba6f1fc6e6a4085e77f21"), 0);
    }
}
