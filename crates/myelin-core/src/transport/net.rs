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
//!   token; one liveliness subscriber per context keeps the remote graph,
//!   from which matched counts and matched events follow. zenoh drops the
//!   tokens of a process that dies (its session closes, or its lease ends).
//! * **Same host**: the session id encodes the shared-memory island and
//!   whether the context uses shared memory, so a process knows which
//!   remote endpoints shared memory already serves and counts them once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use myelin_zenoh::attachment::Attachment;
use myelin_zenoh::gid::{self, Gid};
use myelin_zenoh::names;
use myelin_zenoh::token::{EntityKind, Token, TokenQos, TopicInfo};
use myelin_zenoh::zenoh::liveliness::LivelinessToken;
use myelin_zenoh::zenoh::pubsub::{Publisher, Subscriber};
use myelin_zenoh::zenoh::qos::CongestionControl;
use myelin_zenoh::zenoh::sample::{Locality, Sample, SampleKind};
use myelin_zenoh::zenoh::{self, Session, Wait};

use crate::message::Message;
use crate::qos::{Durability, History, LivelinessKind, QoS, Reliability};
use crate::wire::SharedBytes;

/// The type name and hash chunks an AnyMessage endpoint uses in its token
/// (`*` cannot appear in a key expression).
const ANY_TYPE: &str = "myelin::msg::dds_::Any_";
const ANY_HASH: &str = "ANY";

fn is_any<T: Message>() -> bool {
    T::TYPE_NAME == crate::wire::AnyMessage::TYPE_NAME
        && T::TYPE_HASH == crate::wire::AnyMessage::TYPE_HASH
}

/// The hash chunk of a type: its ROS 2 hash when it has one.
fn hash_chunk<T: Message>() -> String {
    match T::ROS_TYPE_HASH {
        Some(h) => h.to_string(),
        None => names::myelin_type_hash(T::TYPE_HASH.0),
    }
}

fn type_chunks<T: Message>() -> (String, String) {
    if is_any::<T>() {
        (ANY_TYPE.into(), ANY_HASH.into())
    } else {
        (names::dds_type_name(T::TYPE_NAME), hash_chunk::<T>())
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

/// The pid a myelin session id carries (0 for another implementation).
fn zid_pid(zid: &str) -> u32 {
    match u128::from_str_radix(zid, 16) {
        Ok(v) if (v >> 56) & 0xfe == ZID_MAGIC => ((v >> 24) & 0xffff_ffff) as u32,
        _ => 0,
    }
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

/// An endpoint that follows the remote graph.
pub(crate) trait NetDiscovered: Send + Sync {
    fn net_changed(self: Arc<Self>, graph: &RemoteGraph);
}

/// The tokens of other sessions in this domain, by key expression.
#[derive(Default)]
pub(crate) struct RemoteGraph {
    pub(crate) tokens: HashMap<String, Token>,
}

/// How to set up a context's session.
#[derive(Debug, Clone, Default)]
pub(crate) struct NetOptions {
    /// A zenoh configuration file (else `MYELIN_ZENOH_CONFIG`, else the
    /// loopback default).
    pub(crate) config_file: Option<std::path::PathBuf>,
}

/// A context's zenoh session and its view of the remote graph.
pub(crate) struct NetDomain {
    pub(crate) domain: u32,
    session: Session,
    zid: String,
    island: u64,
    /// Whether this context uses shared memory (then same-island peers
    /// that do too are served by it).
    shm: bool,
    graph: Mutex<RemoteGraph>,
    locals: Mutex<Vec<Weak<dyn NetDiscovered>>>,
    liveliness: Mutex<Option<Subscriber<()>>>,
    opened: std::time::Instant,
    /// Whether the configuration connects somewhere (a router is expected).
    expect_peers: bool,
}

/// How long after opening a session the graph may still be arriving (the
/// router answers a liveliness query with nothing until the session's
/// declarations are exchanged, a few milliseconds after open returns).
const SETTLE: Duration = Duration::from_millis(400);

impl NetDomain {
    /// Open the session and start following the graph.
    pub(crate) fn start(
        domain: u32,
        shm: bool,
        opts: &NetOptions,
    ) -> Result<Arc<NetDomain>, String> {
        let island = gid::island_key();
        let mut config = myelin_zenoh::config::session_config(opts.config_file.as_deref())
            .map_err(|e| e.to_string())?;
        let zid = make_zid(island, shm);
        config
            .insert_json5("id", &format!("\"{zid:x}\""))
            .map_err(|e| format!("setting the session id: {e}"))?;
        let custom = opts.config_file.is_some()
            || std::env::var_os(myelin_zenoh::config::CONFIG_ENV).is_some_and(|f| !f.is_empty());
        let expect_peers = if custom {
            config
                .get_json("connect/endpoints")
                .is_ok_and(|j| j.trim() != "[]")
        } else {
            router_listening()
        };
        if !custom && expect_peers {
            // A router is up: wait for the connection (milliseconds), so
            // what this process declares next reaches it. Without one,
            // `connect/timeout_ms = 0` keeps open() instant.
            let _ = config.insert_json5("connect/timeout_ms", "2000");
        }
        let session = myelin_zenoh::config::open(config).map_err(|e| e.to_string())?;
        let dom = Arc::new(NetDomain {
            domain,
            zid: session.zid().to_string(),
            session,
            island,
            shm,
            graph: Mutex::new(RemoteGraph::default()),
            locals: Mutex::new(Vec::new()),
            liveliness: Mutex::new(None),
            opened: std::time::Instant::now(),
            expect_peers,
        });
        let weak = Arc::downgrade(&dom);
        let sub = dom
            .session
            .liveliness()
            .declare_subscriber(myelin_zenoh::token::domain_tokens(domain))
            .history(true)
            .callback(move |s: Sample| {
                if let Some(d) = weak.upgrade() {
                    d.on_token(&s);
                }
            })
            .wait()
            .map_err(|e| format!("following the graph: {e}"))?;
        *dom.liveliness.lock().unwrap_or_else(|e| e.into_inner()) = Some(sub);
        Ok(dom)
    }

    /// The session id (hex).
    pub(crate) fn zid(&self) -> &str {
        &self.zid
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
        {
            let mut g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
            match s.kind() {
                SampleKind::Put => {
                    g.tokens.insert(key.to_string(), tok);
                }
                SampleKind::Delete => {
                    g.tokens.remove(key);
                }
            }
        }
        self.notify();
    }

    /// Tell every registered endpoint the graph changed.
    fn notify(&self) {
        let locals: Vec<_> = {
            let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
            l.retain(|w| w.strong_count() > 0);
            l.iter().filter_map(Weak::upgrade).collect()
        };
        let g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        for e in locals {
            e.net_changed(&g);
        }
    }

    /// Follow the graph (and get the current state now).
    pub(crate) fn register(&self, e: Arc<dyn NetDiscovered>) {
        self.locals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&e));
        let g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        e.net_changed(&g);
    }

    /// Whether shared memory already connects this context to the
    /// endpoint behind `zid`.
    fn served_by_shm(&self, zid: &str) -> bool {
        self.shm && zid_on_shm_island(zid, self.island)
    }

    /// Declare a liveliness token.
    fn declare(&self, t: &Token) -> Result<LivelinessToken, String> {
        self.session
            .liveliness()
            .declare_token(t.key())
            .wait()
            .map_err(|e| format!("declaring {}: {e}", t.key()))
    }

    /// A node's token.
    pub(crate) fn node_token(
        &self,
        nid: u64,
        namespace: &str,
        name: &str,
    ) -> Result<LivelinessToken, String> {
        self.declare(&Token {
            domain: self.domain,
            zid: self.zid.clone(),
            nid,
            eid: nid,
            kind: EntityKind::Node,
            enclave: String::new(),
            namespace: namespace.to_string(),
            node: name.to_string(),
            topic: None,
        })
    }

    /// The endpoints of other sessions (for `myelin topic list`), asking
    /// the network for the current tokens first (up to `wait`).
    pub(crate) fn endpoints(&self, wait: Duration) -> Vec<(Token, bool)> {
        let info = self.session.info();
        let connected = || {
            info.routers_zid().wait().next().is_some() || info.peers_zid().wait().next().is_some()
        };
        let give_up = std::time::Instant::now() + wait;
        while self.expect_peers && !connected() && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
        if connected() {
            let settle =
                (self.opened + SETTLE).saturating_duration_since(std::time::Instant::now());
            std::thread::sleep(settle.min(wait));
        }
        let mut found: HashMap<String, Token> = HashMap::new();
        if let Ok(replies) = self
            .session
            .liveliness()
            .get(myelin_zenoh::token::domain_tokens(self.domain))
            .timeout(wait)
            .wait()
        {
            while let Ok(r) = replies.recv() {
                if let Ok(s) = r.result()
                    && let Ok(t) = Token::parse(s.key_expr().as_str())
                {
                    found.insert(s.key_expr().as_str().to_string(), t);
                }
            }
        }
        let g = self.graph.lock().unwrap_or_else(|e| e.into_inner());
        for (k, t) in &g.tokens {
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

    /// Remote endpoints of `kind` on `topic` whose type matches, not
    /// already served by shared memory.
    fn count(
        &self,
        g: &RemoteGraph,
        kind: EntityKind,
        topic: &str,
        ty: &(String, String),
    ) -> usize {
        g.tokens
            .values()
            .filter(|t| t.kind == kind && !self.served_by_shm(&t.zid))
            .filter(|t| {
                t.topic.as_ref().is_some_and(|i| {
                    i.name == topic
                        && ((i.type_name == ty.0 && i.type_hash == ty.1)
                            || i.type_name == ANY_TYPE
                            || ty.0 == ANY_TYPE)
                })
            })
            .count()
    }
}

impl Drop for NetDomain {
    fn drop(&mut self) {
        if let Some(s) = self
            .liveliness
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = s.undeclare().wait();
        }
        let _ = self.session.close().wait();
    }
}

/// Whether something accepts connections on the default router port.
fn router_listening() -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 7447));
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok()
}

fn endpoint_token<T: Message>(
    dom: &NetDomain,
    kind: EntityKind,
    owner: &Owner<'_>,
    topic: &str,
    qos: &QoS,
) -> Token {
    let (type_name, type_hash) = type_chunks::<T>();
    Token {
        domain: dom.domain,
        zid: dom.zid.clone(),
        nid: owner.nid,
        eid: owner.eid,
        kind,
        enclave: String::new(),
        namespace: owner.namespace.to_string(),
        node: owner.node.to_string(),
        topic: Some(TopicInfo {
            name: topic.to_string(),
            type_name,
            type_hash,
            qos: token_qos(qos),
        }),
    }
}

/// Who a new endpoint belongs to.
pub(crate) struct Owner<'a> {
    pub(crate) eid: u64,
    pub(crate) nid: u64,
    pub(crate) namespace: &'a str,
    pub(crate) node: &'a str,
}

/// A publisher's network side.
pub(crate) struct PubNet {
    pub(crate) dom: Arc<NetDomain>,
    publisher: Publisher<'static>,
    _token: LivelinessToken,
    gid: Gid,
    seq: AtomicI64,
    topic: String,
    ty: (String, String),
    /// Subscriptions elsewhere that only zenoh reaches.
    connected: AtomicU32,
    needed: AtomicBool,
}

impl PubNet {
    pub(crate) fn new<T: Message>(
        dom: &Arc<NetDomain>,
        topic: &str,
        owner: &Owner<'_>,
        qos: &QoS,
    ) -> Result<PubNet, String> {
        let ty = type_chunks::<T>();
        let key =
            names::topic_key(dom.domain, topic, T::TYPE_NAME, &ty.1).map_err(|e| e.to_string())?;
        let congestion =
            if qos.reliability == Reliability::Reliable && qos.history == History::KeepAll {
                CongestionControl::Block
            } else {
                CongestionControl::Drop
            };
        let publisher = dom
            .session
            .declare_publisher(key)
            .congestion_control(congestion)
            .wait()
            .map_err(|e| format!("declaring the zenoh publisher: {e}"))?;
        let token = dom.declare(&endpoint_token::<T>(
            dom,
            EntityKind::Publisher,
            owner,
            topic,
            qos,
        ))?;
        Ok(PubNet {
            dom: dom.clone(),
            publisher,
            _token: token,
            gid: gid::myelin_gid(dom.island, std::process::id(), super::next_id(), dom.shm),
            seq: AtomicI64::new(0),
            topic: topic.to_string(),
            ty,
            connected: AtomicU32::new(0),
            needed: AtomicBool::new(false),
        })
    }

    /// Whether any subscription needs the network copy.
    #[inline]
    pub(crate) fn needed(&self) -> bool {
        self.needed.load(Ordering::Relaxed)
    }

    /// Subscriptions this publisher reaches over the network.
    pub(crate) fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed) as usize
    }

    /// Encode and send a message.
    pub(crate) fn send<T: Message>(&self, msg: &T) -> Result<(), String> {
        let len = msg.wire_len().map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; len];
        msg.wire_encode(&mut buf).map_err(|e| e.to_string())?;
        self.send_bytes(buf)
    }

    /// Send encoded bytes.
    pub(crate) fn send_bytes(&self, bytes: impl Into<zenoh::bytes::ZBytes>) -> Result<(), String> {
        let att = Attachment {
            sequence_number: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            source_timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64),
            source_gid: self.gid,
        };
        self.publisher
            .put(bytes)
            .attachment(att.encode().to_vec())
            .wait()
            .map_err(|e| format!("zenoh put: {e}"))
    }

    /// Recount the subscriptions the network reaches; `true` if changed.
    pub(crate) fn update(&self, g: &RemoteGraph) -> bool {
        let n = self
            .dom
            .count(g, EntityKind::Subscription, &self.topic, &self.ty) as u32;
        self.needed.store(n > 0, Ordering::Relaxed);
        self.connected.swap(n, Ordering::Relaxed) != n
    }
}

/// A subscription's network side.
pub(crate) struct SubNet {
    dom: Arc<NetDomain>,
    key: String,
    token: Token,
    parts: Mutex<Option<(Subscriber<()>, LivelinessToken)>>,
    topic: String,
    ty: (String, String),
    connected: AtomicU32,
}

impl SubNet {
    pub(crate) fn new<T: Message>(
        dom: &Arc<NetDomain>,
        topic: &str,
        owner: &Owner<'_>,
        qos: &QoS,
    ) -> Result<SubNet, String> {
        let ty = type_chunks::<T>();
        let key = if is_any::<T>() {
            names::topic_key_any_type(dom.domain, topic)
        } else {
            names::topic_key(dom.domain, topic, T::TYPE_NAME, &ty.1)
        }
        .map_err(|e| e.to_string())?;
        Ok(SubNet {
            dom: dom.clone(),
            key,
            token: endpoint_token::<T>(dom, EntityKind::Subscription, owner, topic, qos),
            parts: Mutex::new(None),
            topic: topic.to_string(),
            ty,
            connected: AtomicU32::new(0),
        })
    }

    /// Start receiving: `deliver` gets each message's bytes (already
    /// filtered for exactly-once delivery).
    pub(crate) fn start(
        &self,
        deliver: impl Fn(SharedBytes) + Send + Sync + 'static,
    ) -> Result<(), String> {
        let island = self.dom.island;
        let shm = self.dom.shm;
        let topic = self.topic.clone();
        let sub = self
            .dom
            .session
            .declare_subscriber(self.key.clone())
            .allowed_origin(Locality::Remote)
            .callback(move |s: Sample| {
                let att = match s.attachment().map(|a| Attachment::decode(&a.to_bytes())) {
                    Some(Ok(a)) => a,
                    Some(Err(e)) => {
                        tracing::debug!("{topic}: dropping a sample: {e}");
                        return;
                    }
                    None => {
                        // rmw_zenoh drops these too.
                        tracing::debug!("{topic}: dropping a sample without an attachment");
                        return;
                    }
                };
                if shm && gid::delivered_by_shared_memory(&att.source_gid, island) {
                    return;
                }
                deliver(SharedBytes::copy_from(&s.payload().to_bytes()));
            })
            .wait()
            .map_err(|e| format!("declaring the zenoh subscriber: {e}"))?;
        let token = self.dom.declare(&self.token)?;
        *self.parts.lock().unwrap_or_else(|e| e.into_inner()) = Some((sub, token));
        Ok(())
    }

    /// Publishers this subscription hears over the network.
    pub(crate) fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed) as usize
    }

    /// Recount the publishers; `true` if changed.
    pub(crate) fn update(&self, g: &RemoteGraph) -> bool {
        let n = self
            .dom
            .count(g, EntityKind::Publisher, &self.topic, &self.ty) as u32;
        self.connected.swap(n, Ordering::Relaxed) != n
    }
}

/// A discovered remote endpoint as `transport::DiscoveredEndpoint`.
pub(crate) fn discovered(t: &Token) -> Option<super::DiscoveredEndpoint> {
    let info = t.topic.as_ref()?;
    let is_publisher = match t.kind {
        EntityKind::Publisher => true,
        EntityKind::Subscription => false,
        _ => return None,
    };
    let type_name = if info.type_name == ANY_TYPE {
        "*".to_string()
    } else {
        names::ros_type_name(&info.type_name).unwrap_or_else(|| info.type_name.replace("::", "/"))
    };
    Some(super::DiscoveredEndpoint {
        is_publisher,
        topic: info.name.clone(),
        type_name,
        type_hash: crate::TypeHash(0),
        node: t.node_fqn(),
        pid: zid_pid(&t.zid),
        qos: qos_of_token(&info.qos),
        zid: Some(t.zid.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
