//! Services as rmw_zenoh carries them, so ROS 2 clients and servers on
//! rmw_zenoh and myelin's call each other:
//!
//! * a server declares a zenoh queryable (complete) on the service's key
//!   expression `<domain>/<service>/<pkg>::srv::dds_::<Srv>_/<hash>` (the
//!   service type's name and hash, not its request's) and an `SS`
//!   liveliness token;
//! * a client declares an `SC` token and sends each request as a `get` on
//!   that key (target all complete queryables, no consolidation) with the
//!   request's CDR as payload and the 33-byte attachment (its sequence
//!   number, the time, the client's gid);
//! * the server replies on the query's key with the response's CDR and an
//!   attachment that carries the request's sequence number and the
//!   client's gid back, so the reply belongs to exactly that call (zenoh
//!   routes it to the querying session only). A server that fails (its
//!   callback panicked) replies with a zenoh error reply carrying the
//!   message.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use myelin_zenoh::attachment::Attachment;
use myelin_zenoh::names;
use myelin_zenoh::token::EntityKind;
use myelin_zenoh::zenoh::Wait;
use myelin_zenoh::zenoh::liveliness::LivelinessToken;
use myelin_zenoh::zenoh::query::{ConsolidationMode, Query, QueryTarget, Queryable};

use super::{Discovered, RemoteGraph, ZenohTransport, endpoint_token, type_chunks, with_parts};
use crate::transport::{
    EndpointSpec, RawCallError, RawCalls, RawReply, RequestHandler, TransportError,
};

/// The key expression of a service.
fn service_key(dom: &ZenohTransport, spec: &EndpointSpec<'_>) -> Result<String, TransportError> {
    let (_, hash) = type_chunks(&spec.ty);
    names::topic_key(dom.domain, spec.topic, spec.ty.name, &hash)
        .map_err(|e| TransportError::new("the service's key expression", e))
}

/// A served service on the network: its queryable and its token, both
/// withdrawn when dropped.
struct ServerNet {
    _queryable: Queryable<()>,
    _token: LivelinessToken,
}

/// Serve `spec` on the network: each query goes to `handler`.
pub(super) fn serve(
    dom: &Arc<ZenohTransport>,
    spec: &EndpointSpec<'_>,
    handler: RequestHandler,
) -> Result<Box<dyn Any + Send + Sync>, TransportError> {
    let key = service_key(dom, spec)?;
    let service = spec.topic.to_string();
    let queryable = dom
        .session
        .declare_queryable(key)
        .complete(true)
        .callback(move |query: Query| {
            // rmw_zenoh's attachment; a caller without one still gets an
            // answer (with sequence number 0 and no gid).
            let asked = query
                .attachment()
                .and_then(|a| match Attachment::decode(&a.to_bytes()) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        tracing::debug!("service {service:?}: request attachment: {e}");
                        None
                    }
                });
            // The request's bytes lent where zenoh received them (a
            // query without a payload: none).
            let payload = query.payload().cloned().unwrap_or_default();
            with_parts(&payload, |parts| {
                handler(parts, Box::new(QueryReply { query, asked }))
            });
        })
        .wait()
        .map_err(|e| TransportError::new("declaring the service's queryable", e))?;
    let token = dom.declare(&endpoint_token(dom, EntityKind::ServiceServer, spec))?;
    Ok(Box::new(ServerNet {
        _queryable: queryable,
        _token: token,
    }))
}

/// The way back to one query.
struct QueryReply {
    query: Query,
    asked: Option<Attachment>,
}

impl RawReply for QueryReply {
    fn request_id(&self) -> Option<crate::gid::RequestId> {
        self.asked.map(|a| crate::gid::RequestId {
            gid: a.source_gid,
            seq: a.sequence_number,
        })
    }

    fn reply(self: Box<Self>, answer: Result<Vec<u8>, String>) {
        let sent = match answer {
            Ok(bytes) => {
                let att = Attachment {
                    sequence_number: self.asked.map_or(0, |a| a.sequence_number),
                    source_timestamp: crate::clock::realtime_ns(),
                    source_gid: self.asked.map_or([0; 16], |a| a.source_gid),
                };
                self.query
                    .reply(self.query.key_expr().clone(), bytes)
                    .attachment(att.encode().to_vec())
                    .wait()
            }
            Err(why) => self.query.reply_err(why.into_bytes()).wait(),
        };
        if let Err(e) = sent {
            tracing::warn!("reply to {}: {e}", self.query.key_expr());
        }
        // Dropping the query tells the caller no more replies come.
    }
}

/// A client's network side: its token, and the servers the graph shows.
pub(super) struct ClientNet {
    dom: Arc<ZenohTransport>,
    key: String,
    service: String,
    ty: (String, String),
    _token: LivelinessToken,
    /// Servers in other sessions with this service name and type.
    servers: AtomicU32,
}

impl ClientNet {
    pub(super) fn new(
        dom: &Arc<ZenohTransport>,
        spec: &EndpointSpec<'_>,
    ) -> Result<ClientNet, TransportError> {
        Ok(ClientNet {
            dom: dom.clone(),
            key: service_key(dom, spec)?,
            service: spec.topic.to_string(),
            ty: type_chunks(&spec.ty),
            _token: dom.declare(&endpoint_token(dom, EntityKind::ServiceClient, spec))?,
            servers: AtomicU32::new(0),
        })
    }
}

impl Discovered for ClientNet {
    fn graph_changed(&self, g: &RemoteGraph) {
        let n = g
            .tokens
            .values()
            .filter(|t| t.kind == EntityKind::ServiceServer)
            .filter_map(|t| t.topic.as_ref())
            .filter(|i| {
                i.name == self.service && i.type_name == self.ty.0 && i.type_hash == self.ty.1
            })
            .count();
        self.servers.store(n as u32, Ordering::Relaxed);
    }
}

impl RawCalls for ClientNet {
    fn ready(&self) -> bool {
        self.servers.load(Ordering::Relaxed) > 0
    }

    fn call(
        &self,
        request: Vec<u8>,
        id: crate::gid::RequestId,
        deadline: Instant,
        answer: &mut dyn FnMut(&[&[u8]]),
    ) -> Result<(), RawCallError> {
        // The client's gid and request number (rmw_zenoh's request id; a
        // ROS 2 server keys its pending requests by them).
        let seq = id.seq;
        let att = Attachment {
            sequence_number: seq,
            source_timestamp: crate::clock::realtime_ns(),
            source_gid: id.gid,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let replies = self
            .dom
            .session
            .get(&self.key)
            .payload(request)
            .attachment(att.encode().to_vec())
            .target(QueryTarget::AllComplete)
            .consolidation(ConsolidationMode::None)
            .timeout(left)
            .wait()
            .map_err(|e| {
                tracing::warn!("service {:?}: {e}", self.service);
                RawCallError::Unavailable
            })?;
        loop {
            match replies.recv_deadline(deadline) {
                // The deadline passed.
                Ok(None) => return Err(RawCallError::Timeout),
                // Every server is done and none answered (or zenoh's own
                // timeout ended the query).
                Err(_) if Instant::now() >= deadline => return Err(RawCallError::Timeout),
                Err(_) => return Err(RawCallError::Unavailable),
                Ok(Some(reply)) => match reply.result() {
                    Ok(sample) => {
                        // A reply to another call of ours (several servers
                        // answer each call): not this one.
                        if let Some(a) = sample.attachment()
                            && let Ok(a) = Attachment::decode(&a.to_bytes())
                            && a.sequence_number != seq
                        {
                            continue;
                        }
                        with_parts(sample.payload(), |parts| answer(parts));
                        return Ok(());
                    }
                    Err(e) => {
                        return Err(RawCallError::Failed(
                            String::from_utf8_lossy(&e.payload().to_bytes()).into_owned(),
                        ));
                    }
                },
            }
        }
    }
}

/// Register a client with the graph and hand it out.
pub(super) fn client(
    dom: &Arc<ZenohTransport>,
    spec: &EndpointSpec<'_>,
) -> Result<Arc<dyn RawCalls>, TransportError> {
    let c = Arc::new(ClientNet::new(dom, spec)?);
    dom.register(spec.topic, c.clone());
    Ok(c)
}
