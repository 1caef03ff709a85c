//! A publisher's side of the zenoh transport: a zenoh publisher on the
//! topic's rmw_zenoh key expression, and its liveliness token.

use std::any::Any;
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use myelin_zenoh::attachment::Attachment;
use myelin_zenoh::gid::{self, Gid};
use myelin_zenoh::names;
use myelin_zenoh::token::EntityKind;
use myelin_zenoh::zenoh::liveliness::LivelinessToken;
use myelin_zenoh::zenoh::pubsub::Publisher;
use myelin_zenoh::zenoh::qos::CongestionControl;
use myelin_zenoh::zenoh::{self, Wait};

use super::{Discovered, RemoteGraph, ZenohTransport, endpoint_token, type_chunks};
use crate::qos::{History, QoS, Reliability};
use crate::transport::{
    Encode, EndpointSpec, PubLink, PubOwner, Refused, SendError, TransportError, Wanted,
    encode_to_vec,
};
use crate::wire::SharedBytes;

/// A publisher's network side.
pub(super) struct PubNet {
    dom: Arc<ZenohTransport>,
    publisher: Publisher<'static>,
    _token: LivelinessToken,
    gid: Gid,
    seq: AtomicI64,
    topic: String,
    ty: (String, String),
    qos: QoS,
    /// Tokens of subscriptions already reported as incompatible.
    refused: Mutex<HashSet<String>>,
    /// Subscriptions elsewhere that only zenoh reaches (compatible ones).
    connected: AtomicU32,
    /// Whether `connected` is not zero.
    wanted: Arc<Wanted>,
    owner: OnceLock<Weak<dyn PubOwner>>,
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
        let publisher = dom
            .session
            .declare_publisher(key)
            .congestion_control(congestion)
            .wait()
            .map_err(|e| TransportError::new("declaring the zenoh publisher", e))?;
        let token = dom.declare(&endpoint_token(dom, EntityKind::Publisher, spec))?;
        Ok(PubNet {
            dom: dom.clone(),
            publisher,
            _token: token,
            gid: gid::myelin_gid(
                dom.island,
                std::process::id(),
                crate::transport::next_id(),
                dom.shm,
            ),
            seq: AtomicI64::new(0),
            topic: spec.topic.to_string(),
            ty,
            qos: *spec.qos,
            refused: Mutex::new(HashSet::new()),
            connected: AtomicU32::new(0),
            wanted: Arc::default(),
            owner: OnceLock::new(),
        })
    }

    /// Put encoded bytes with their attachment.
    fn put(&self, bytes: impl Into<zenoh::bytes::ZBytes>) -> Result<Refused, SendError> {
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
            .map_err(|e| SendError::Transport(TransportError::new("zenoh put", e)))?;
        Ok(Refused::default())
    }
}

impl Discovered for PubNet {
    fn graph_changed(&self, g: &RemoteGraph) {
        let (n, refused) = self.dom.matching(
            g,
            EntityKind::Subscription,
            &self.topic,
            &self.ty,
            &self.qos,
        );
        let n = n as u32;
        // Only compatible subscriptions make the publisher send.
        self.wanted.set(n > 0);
        let owner = self.owner.get().and_then(Weak::upgrade);
        if let Some(o) = &owner {
            let mut seen = self.refused.lock().unwrap_or_else(|e| e.into_inner());
            for (key, policy) in refused {
                if seen.insert(key) {
                    o.incompatible_qos(policy);
                }
            }
        }
        if self.connected.swap(n, Ordering::Relaxed) != n
            && let Some(o) = owner
        {
            o.links_changed();
        }
    }
}

impl PubLink for PubNet {
    fn start(&self, owner: Weak<dyn PubOwner>) {
        let _ = self.owner.set(owner);
        // What was seen before the owner was known: report it now.
        self.dom.with_graph(|g| self.graph_changed(g));
    }

    fn wanted(&self) -> &Arc<Wanted> {
        &self.wanted
    }

    fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed) as usize
    }

    fn send(&self, msg: &dyn Encode) -> Result<Refused, SendError> {
        self.put(encode_to_vec(msg)?)
    }

    fn send_bytes(
        &self,
        bytes: &SharedBytes,
        _own: Option<&(dyn Any + Send + Sync)>,
    ) -> Result<Refused, SendError> {
        self.put(bytes.to_vec())
    }
}
