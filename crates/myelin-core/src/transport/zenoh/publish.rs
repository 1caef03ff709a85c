//! A publisher's side of the zenoh transport: a zenoh publisher on the
//! topic's rmw_zenoh key expression, and its liveliness token.

use std::any::Any;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use myelin_zenoh::attachment::Attachment;
use myelin_zenoh::gid::Gid;
use myelin_zenoh::names;
use myelin_zenoh::payload;
use myelin_zenoh::token::EntityKind;
use myelin_zenoh::zenoh::liveliness::LivelinessToken;
use myelin_zenoh::zenoh::pubsub::Publisher;
use myelin_zenoh::zenoh::qos::CongestionControl;
use myelin_zenoh::zenoh::{self, Wait};
use myelin_zenoh::zenoh_ext::{
    AdvancedPublisher, AdvancedPublisherBuilderExt, CacheConfig, MissDetectionConfig,
};

use super::{Discovered, Peers, RemoteGraph, ZenohTransport, endpoint_token, type_chunks};
use crate::qos::{Durability, History, Reliability};
use crate::transport::{
    Encode, EndpointSpec, PubLink, PubOwner, Refused, SendError, Spares, TransportError, Wanted,
    encode_to_vec_of,
};
use crate::wire::SharedBytes;

/// The zenoh side of a publisher: a plain publisher, or (transient
/// local) zenoh's advanced publisher with a cache, as rmw_zenoh declares
/// them.
enum Outlet {
    Plain(Publisher<'static>),
    Cached(AdvancedPublisher<'static>),
}

/// A best-effort message larger than this (one zenoh batch: it is
/// fragmented) goes out with zenoh's `BlockFirst` congestion control
/// rather than `Drop`. With `Drop`, a link that backs up drops fragments
/// (zenoh waits at most 50 ms for each), so a camera stream faster than
/// its link lost most frames torn, or, with longer waits, queued whole
/// ones in the socket buffers along the way and delivered them hundreds
/// of milliseconds old. `BlockFirst` hands a frame to zenoh whole (its
/// fragments are never dropped) and keeps at most one waiting per link
/// and priority: a frame that finds one waiting is dropped after 1 ms
/// (the subscriber counts it in `lost()`), so what arrives is whole and
/// fresh, at every hop (routers keep the policy). Small messages keep
/// `Drop`: `BlockFirst` passes each message through a blocking task, a
/// cost worth paying per frame, not per message.
pub(super) const LARGE: usize = 65_535;

/// The largest cache of a transient-local publisher (keep_all's depth
/// is capped here).
const MAX_CACHE: usize = 10_000;

/// A publisher's network side.
pub(super) struct PubNet {
    dom: Arc<ZenohTransport>,
    publisher: Outlet,
    /// Transient local: every message goes into zenoh's cache for late
    /// joiners, whether or not a subscription exists yet.
    keeps_history: bool,
    _token: LivelinessToken,
    gid: Gid,
    seq: AtomicI64,
    /// Subscriptions elsewhere that only zenoh reaches (compatible ones).
    peers: Peers,
    /// Whether `peers` has any.
    wanted: Arc<Wanted>,
    owner: OnceLock<Weak<dyn PubOwner>>,
    /// Liveliness with a lease: where explicit assertions go
    /// ([`super::alive_key`]), and the lease.
    alive: Option<(Publisher<'static>, std::time::Duration)>,
    /// When this publisher last told the network it is alive (a sample or
    /// an explicit assertion; `clock::now_ns`).
    last_told: AtomicU64,
    /// Best effort without history: where messages over [`LARGE`] go
    /// (declared by the first one; `None` inside if that failed, and
    /// they go by `publisher`).
    large: Option<OnceLock<Option<Publisher<'static>>>>,
    /// Buffers of encoded messages over [`LARGE`], reused.
    spares: Spares,
}

impl PubNet {
    pub(super) fn new(
        dom: &Arc<ZenohTransport>,
        spec: &EndpointSpec<'_>,
    ) -> Result<PubNet, TransportError> {
        let ty = type_chunks(&spec.ty);
        let key = names::topic_key(dom.domain, spec.topic, spec.ty.name, &ty.1)
            .map_err(|e| TransportError::new("the topic's key expression", e))?;
        let qos = spec.qos;
        let congestion =
            if qos.reliability == Reliability::Reliable && qos.history == History::KeepAll {
                CongestionControl::Block
            } else {
                CongestionControl::Drop
            };
        let builder = dom
            .session
            .declare_publisher(key.clone())
            .congestion_control(congestion);
        let keeps_history = qos.durability == Durability::TransientLocal;
        let publisher = if keeps_history {
            // rmw_zenoh's transient local: a cache of `depth` samples that
            // late subscribers query, a liveliness token that lets them
            // find this publisher (`<key>/@adv/pub/...`), and sequence
            // numbers (with a heartbeat when reliable, so a subscriber can
            // ask for what it missed). Sequence numbers rather than
            // timestamps also for best effort: no need for the session's
            // timestamping, which a user's configuration may leave off.
            let depth = qos.effective_depth().clamp(1, MAX_CACHE);
            let misses = if qos.reliability == Reliability::Reliable {
                MissDetectionConfig::default()
                    .sporadic_heartbeat(std::time::Duration::from_millis(500))
            } else {
                MissDetectionConfig::default()
            };
            Outlet::Cached(
                builder
                    .cache(CacheConfig::default().max_samples(depth))
                    .sample_miss_detection(misses)
                    .publisher_detection()
                    .wait()
                    .map_err(|e| TransportError::new("declaring the zenoh publisher", e))?,
            )
        } else {
            Outlet::Plain(
                builder
                    .wait()
                    .map_err(|e| TransportError::new("declaring the zenoh publisher", e))?,
            )
        };
        // One number for the token's entity id and the gid's endpoint
        // number: a subscription finds the token (and the lifespan in its
        // QoS) of the publisher a sample's gid names.
        let serial = spec.serial;
        let mut token = endpoint_token(dom, EntityKind::Publisher, spec);
        token.eid = serial;
        let token = dom.declare(&token)?;
        // Manual-by-topic and automatic alike (an automatic one is
        // asserted by its process: `publisher::automatic`).
        let alive = match qos.liveliness.lease {
            Some(lease) => {
                let p = dom
                    .session
                    .declare_publisher(super::alive_key(&key))
                    .wait()
                    .map_err(|e| TransportError::new("declaring the liveliness publisher", e))?;
                Some((p, lease))
            }
            _ => None,
        };
        // The publisher's own gid (`Publisher::gid`).
        let gid = spec.gid.0;
        if keeps_history {
            dom.own_history(gid, true);
        }
        Ok(PubNet {
            dom: dom.clone(),
            publisher,
            keeps_history,
            _token: token,
            gid,
            seq: AtomicI64::new(0),
            peers: Peers::new(EntityKind::Subscription, spec),
            wanted: Arc::default(),
            owner: OnceLock::new(),
            alive,
            last_told: AtomicU64::new(0),
            large: (qos.reliability == Reliability::BestEffort && !keeps_history)
                .then(OnceLock::new),
            spares: Spares::new(),
        })
    }

    /// The publisher for a best-effort message over [`LARGE`] bytes, if
    /// this is a best-effort publisher (declared on first use).
    fn large_outlet(&self) -> Option<&Publisher<'static>> {
        let Outlet::Plain(p) = &self.publisher else {
            return None;
        };
        self.large
            .as_ref()?
            .get_or_init(|| {
                self.dom
                    .session
                    .declare_publisher(p.key_expr().clone().into_owned())
                    .congestion_control(CongestionControl::BlockFirst)
                    .wait()
                    .inspect_err(|e| {
                        tracing::debug!("no BlockFirst publisher for large messages: {e}")
                    })
                    .ok()
            })
            .as_ref()
    }

    /// The attachment of the next sample (or assertion).
    fn attachment(&self, seq: i64) -> Vec<u8> {
        Attachment {
            sequence_number: seq,
            source_timestamp: crate::clock::realtime_ns(),
            source_gid: self.gid,
        }
        .encode()
        .to_vec()
    }

    /// Put encoded bytes with their attachment.
    fn put(&self, bytes: impl Into<zenoh::bytes::ZBytes>) -> Result<Refused, SendError> {
        let bytes: zenoh::bytes::ZBytes = bytes.into();
        let att = self.attachment(self.seq.fetch_add(1, Ordering::Relaxed) + 1);
        let large = if bytes.len() > LARGE {
            self.large_outlet()
        } else {
            None
        };
        match &self.publisher {
            _ if let Some(p) = large => p.put(bytes).attachment(att).wait(),
            Outlet::Plain(p) => p.put(bytes).attachment(att).wait(),
            Outlet::Cached(p) => p.put(bytes).attachment(att).wait(),
        }
        .map_err(|e| SendError::Transport(TransportError::new("zenoh put", e)))?;
        Ok(Refused::default())
    }
}

impl Drop for PubNet {
    fn drop(&mut self) {
        if self.keeps_history {
            self.dom.own_history(self.gid, false);
        }
    }
}

impl Discovered for PubNet {
    fn graph_changed(&self, g: &RemoteGraph) {
        let owner = self.owner.get().and_then(Weak::upgrade);
        let (n, changed) = self
            .peers
            .recount(&self.dom, g, owner.as_deref().map(|o| o as _));
        // Only compatible subscriptions make the publisher send (a
        // transient-local one always sends: into the cache late joiners
        // read).
        self.wanted.set(n > 0 || self.keeps_history);
        if changed && let Some(o) = owner {
            o.links_changed();
        }
    }
}

impl PubLink for PubNet {
    fn start(&self, owner: Weak<dyn PubOwner>) {
        let _ = self.owner.set(owner);
        // What was seen before the owner was known: report it now. A
        // graph that arrived between this link's creation and the owner's
        // setting was counted then, unheard (this recount finds no
        // change): the owner recounts whatever this one finds.
        self.dom
            .with_topic(self.peers.topic(), |g| self.graph_changed(g));
        if let Some(o) = self.owner.get().and_then(Weak::upgrade) {
            o.links_changed();
        }
    }

    fn wanted(&self) -> &Arc<Wanted> {
        &self.wanted
    }

    fn connected(&self) -> usize {
        self.peers.connected()
    }

    /// A publish asserts by its sample. An explicit assertion puts an
    /// empty sample on the side key, at most eight per lease (a control
    /// loop asserting at 1 kHz does not flood the network), and not when
    /// a sample or assertion went out within the last eighth.
    fn assert_liveliness(&self, by_publish: bool) {
        let Some((alive, lease)) = &self.alive else {
            return;
        };
        let now = crate::clock::now_ns();
        if by_publish {
            // SYNC: Relaxed: a timestamp, read only to rate-limit.
            self.last_told.store(now, Ordering::Relaxed);
            return;
        }
        let gap = u64::try_from(lease.as_nanos() / 8).unwrap_or(u64::MAX);
        let last = self.last_told.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < gap {
            return;
        }
        self.last_told.store(now, Ordering::Relaxed);
        // Sequence number 0: not one of the data's numbers (the side key
        // has its own subscriber, which counts no gaps).
        if let Err(e) = alive
            .put(Vec::<u8>::new())
            .attachment(self.attachment(0))
            .wait()
        {
            tracing::debug!("asserting liveliness on zenoh: {e}");
        }
    }

    /// A byte buffer goes out as it is (as loaned bytes do: see
    /// `send_bytes`); anything else is encoded into a vector that zenoh
    /// then owns (a reused one for a message over one batch).
    fn send(&self, msg: &dyn Encode) -> Result<Refused, SendError> {
        if let Some(bytes) = msg.wire_shared() {
            return self.put(payload::shared(bytes));
        }
        let len = msg.wire_len()?;
        if len > LARGE {
            // A frame: into a reused buffer (see `Spares`). Below a batch
            // a fresh vector costs less than the spare list's atomics.
            return self.put(payload::shared(self.spares.encode(msg, len)?));
        }
        self.put(encode_to_vec_of(msg, len)?)
    }

    /// Bytes that already exist (a loan, wherever it lives) are read in
    /// place, no copy. zenoh lets go of them once it has written them into
    /// its batches, so a loaned chunk returns to its pool as before. A
    /// transient-local publisher's cache keeps its last `depth` samples:
    /// the same ones the publisher's own history keeps, so it holds no
    /// chunk longer than that history does.
    fn send_bytes(
        &self,
        bytes: &SharedBytes,
        _own: Option<&(dyn Any + Send + Sync)>,
    ) -> Result<Refused, SendError> {
        self.put(payload::shared(bytes.clone()))
    }
}
