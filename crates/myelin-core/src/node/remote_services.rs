//! Services across processes, over topics (so over every transport that
//! carries topics).
//!
//! A service `/s` with a server in another process is reached through two
//! internal topics: requests on `/_srv/s/request` (every client publishes,
//! the servers subscribe) and replies on `/_srv/s/reply` (the servers
//! publish, every client subscribes and keeps the replies addressed to it:
//! each request carries its client's id and a sequence number). The server
//! side feeds requests into the service's own queue, so callback groups,
//! inline services and panics behave as for a local call.
//!
//! A client prefers a server in its own context; it calls a remote one when
//! it has none. A server process that dies with a call pending gives the
//! caller [`CallError::ServiceUnavailable`] once discovery notices (within
//! about half a second), never a hang.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::gid::RequestId;
use crate::message::{Message, TypeHash};
use crate::publisher::Publisher;
use crate::qos::QoS;
use crate::service::{CallError, RemoteCalls, Responder, Slot};
use crate::subscription::{Subscription, WaitError};
use crate::wire::{SharedBytes, Wire, WireError};

/// A request as it crosses processes.
#[derive(Clone)]
pub(crate) struct WireRequest<Req> {
    client: u64,
    seq: u64,
    /// The client's gid (its requests' id with `seq`).
    gid: [u8; 16],
    req: Req,
}

/// Mixed into the request type's hash for the request topic's type
/// (changed with the request's layout: the gid came in second, so older
/// processes do not match newer ones).
const REQUEST_KEY: u64 = 0x7265_7175_6573_7402;
/// Mixed into the response type's hash for the reply topic's type.
const REPLY_KEY: u64 = 0x7265_706c_7900_0000;

/// The type the request topic of a service shows transports, its request
/// type's hash being `req` (the Rust type's, or a run-time type's: an
/// `AnyMessage` request has none of its own).
fn request_type<Req: Message>(req: TypeHash) -> crate::transport::TypeInfo {
    crate::transport::TypeInfo {
        name: WireRequest::<Req>::TYPE_NAME,
        hash: mix(req, REQUEST_KEY),
        ros_hash: None,
        wire: wire_of(Req::WIRE),
        any: false,
    }
}

/// The type the reply topic of a service shows transports (see
/// [`request_type`]).
fn reply_type<Resp: Message>(resp: TypeHash) -> crate::transport::TypeInfo {
    crate::transport::TypeInfo {
        name: WireReply::<Resp>::TYPE_NAME,
        hash: mix(resp, REPLY_KEY),
        ros_hash: None,
        wire: wire_of(Resp::WIRE),
        any: false,
    }
}

const fn mix(h: TypeHash, k: u64) -> TypeHash {
    TypeHash(h.0.rotate_left(17) ^ k)
}

const fn wire_of(w: Wire) -> Wire {
    match w {
        Wire::Local => Wire::Local,
        _ => Wire::Cdr,
    }
}

fn short(type_name: &'static str, len: usize) -> WireError {
    WireError::Decode {
        type_name,
        len,
        why: "shorter than its header".into(),
    }
}

impl<Req: Message> Message for WireRequest<Req> {
    const TYPE_NAME: &'static str = "myelin/srv/Request";
    const TYPE_HASH: TypeHash = mix(Req::TYPE_HASH, REQUEST_KEY);
    const WIRE: Wire = wire_of(Req::WIRE);
    fn wire_len(&self) -> Result<usize, WireError> {
        Ok(32 + self.req.wire_len()?)
    }
    fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
        out[0..8].copy_from_slice(&self.client.to_le_bytes());
        out[8..16].copy_from_slice(&self.seq.to_le_bytes());
        out[16..32].copy_from_slice(&self.gid);
        self.req.wire_encode(&mut out[32..])
    }
    fn wire_decode(bytes: SharedBytes) -> Result<Self, WireError> {
        if bytes.len() < 32 {
            return Err(short(Self::TYPE_NAME, bytes.len()));
        }
        Ok(WireRequest {
            client: u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes")),
            seq: u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
            gid: bytes[16..32].try_into().expect("16 bytes"),
            req: Req::wire_decode(bytes.slice_from(32))?,
        })
    }
}

/// A reply as it crosses processes: `status` 0 = answer, 1 = the server
/// panicked (`message`), 2 = the server went away.
#[derive(Clone)]
pub(crate) struct WireReply<Resp> {
    client: u64,
    seq: u64,
    status: u8,
    message: String,
    resp: Option<Resp>,
}

impl<Resp: Message> Message for WireReply<Resp> {
    const TYPE_NAME: &'static str = "myelin/srv/Reply";
    const TYPE_HASH: TypeHash = mix(Resp::TYPE_HASH, REPLY_KEY);
    const WIRE: Wire = wire_of(Resp::WIRE);
    fn wire_len(&self) -> Result<usize, WireError> {
        let body = match &self.resp {
            Some(r) => r.wire_len()?,
            None => 0,
        };
        Ok(21 + self.message.len() + body)
    }
    fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
        out[0..8].copy_from_slice(&self.client.to_le_bytes());
        out[8..16].copy_from_slice(&self.seq.to_le_bytes());
        out[16] = self.status;
        let n = self.message.len();
        out[17..21].copy_from_slice(&(n as u32).to_le_bytes());
        out[21..21 + n].copy_from_slice(self.message.as_bytes());
        match &self.resp {
            Some(r) => r.wire_encode(&mut out[21 + n..]),
            None => Ok(()),
        }
    }
    fn wire_decode(bytes: SharedBytes) -> Result<Self, WireError> {
        if bytes.len() < 21 {
            return Err(short(Self::TYPE_NAME, bytes.len()));
        }
        let n = u32::from_le_bytes(bytes[17..21].try_into().expect("4 bytes")) as usize;
        if bytes.len() < 21 + n {
            return Err(short(Self::TYPE_NAME, bytes.len()));
        }
        let status = bytes[16];
        Ok(WireReply {
            client: u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes")),
            seq: u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
            status,
            message: String::from_utf8_lossy(&bytes[21..21 + n]).into_owned(),
            resp: if status == 0 {
                Some(Resp::wire_decode(bytes.slice_from(21 + n))?)
            } else {
                None
            },
        })
    }
}

pub(crate) fn request_topic(service: &str) -> String {
    format!("/_srv{service}/request")
}

pub(crate) fn reply_topic(service: &str) -> String {
    format!("/_srv{service}/reply")
}

/// Whether a service of these types can cross processes.
pub(crate) fn transportable<Req: Message, Resp: Message>() -> bool {
    Req::WIRE != Wire::Local && Resp::WIRE != Wire::Local
}

/// Sends a server's answer back to the calling process.
pub(crate) struct RemoteResponder<Resp: Message> {
    pub(crate) reply: Arc<Publisher<WireReply<Resp>>>,
    pub(crate) client: u64,
    pub(crate) seq: u64,
}

impl<Resp: Message> Responder<Resp> for RemoteResponder<Resp> {
    fn respond(self: Box<Self>, answer: Result<Resp, CallError>) {
        let (status, message, resp) = match answer {
            Ok(r) => (0, String::new(), Some(r)),
            Err(CallError::ServerPanicked { message, .. }) => (1, message, None),
            Err(e) => (2, e.to_string(), None),
        };
        let r = WireReply {
            client: self.client,
            seq: self.seq,
            status,
            message,
            resp,
        };
        if let Err(e) = self.reply.publish(r) {
            tracing::warn!("reply to process {}: {e}", self.client >> 32);
        }
    }
}

/// The server side: requests from other processes into the service's queue.
pub(crate) struct ServerRemote {
    _requests: Box<dyn std::any::Any + Send + Sync>,
}

impl ServerRemote {
    /// `hashes`: the request and response type hashes of a service typed
    /// at run time (`None`: the Rust types').
    pub(crate) fn new<Req: Message, Resp: Message>(
        node: &crate::Node,
        service: &str,
        server: Weak<crate::service::ServiceInner<Req, Resp>>,
        group: Option<&crate::CallbackGroup>,
        hashes: Option<(TypeHash, TypeHash)>,
    ) -> Result<ServerRemote, crate::CreateEndpointError> {
        let (req_hash, resp_hash) = hashes.unwrap_or((Req::TYPE_HASH, Resp::TYPE_HASH));
        let reply = Arc::new(node.make_publisher::<WireReply<Resp>>(
            &reply_topic(service),
            QoS::keep_all(),
            Default::default(),
            reply_type::<Resp>(resp_hash),
        )?);
        let opts = crate::SubscriptionOptions {
            callback_group: group.cloned(),
            ..Default::default()
        };
        let sub = node.subscription_as(
            &request_topic(service),
            QoS::keep_all(),
            opts,
            move |w: WireRequest<Req>| {
                if let Some(s) = server.upgrade() {
                    s.submit_remote(
                        w.req,
                        Box::new(RemoteResponder {
                            reply: reply.clone(),
                            client: w.client,
                            seq: w.seq,
                        }),
                        RequestId {
                            gid: w.gid,
                            seq: w.seq as i64,
                        },
                    );
                }
            },
            request_type::<Req>(req_hash),
        )?;
        Ok(ServerRemote {
            _requests: Box::new(sub),
        })
    }
}

/// The client side.
pub(crate) struct ClientRemote<Req: Message, Resp: Message> {
    id: u64,
    requests: Publisher<WireRequest<Req>>,
    replies: Subscription<WireReply<Resp>>,
    pending: Mutex<HashMap<u64, Arc<Slot<Resp>>>>,
}

impl<Req: Message, Resp: Message> ClientRemote<Req, Resp> {
    /// `hashes`: as for [`ServerRemote::new`].
    pub(crate) fn new(
        node: &crate::Node,
        service: &str,
        hashes: Option<(TypeHash, TypeHash)>,
    ) -> Result<Self, crate::CreateEndpointError> {
        let (req_hash, resp_hash) = hashes.unwrap_or((Req::TYPE_HASH, Resp::TYPE_HASH));
        Ok(ClientRemote {
            id: (u64::from(std::process::id()) << 32) | (crate::transport::next_id() & 0xffff_ffff),
            requests: node.make_publisher::<WireRequest<Req>>(
                &request_topic(service),
                QoS::keep_all(),
                Default::default(),
                request_type::<Req>(req_hash),
            )?,
            replies: node.polling_subscription_as::<WireReply<Resp>>(
                &reply_topic(service),
                QoS::keep_all(),
                Default::default(),
                reply_type::<Resp>(resp_hash),
            )?,
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// Hand out one reply to its caller's slot.
    fn route(&self, m: &WireReply<Resp>, service: &str) {
        if m.client != self.id {
            return;
        }
        let slot = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&m.seq);
        if let Some(slot) = slot {
            slot.fill(match m.status {
                0 => m
                    .resp
                    .clone()
                    .ok_or_else(|| CallError::ServiceUnavailable(service.to_string())),
                1 => Err(CallError::ServerPanicked {
                    service: service.to_string(),
                    message: m.message.clone(),
                }),
                _ => Err(CallError::ServiceUnavailable(service.to_string())),
            });
        }
    }
}

impl<Req: Message, Resp: Message> RemoteCalls<Req, Resp> for ClientRemote<Req, Resp> {
    /// A server in another process can take requests and answer us.
    fn ready(&self) -> bool {
        self.requests.subscription_count() > 0 && self.replies.inner.remote_publishers() > 0
    }

    fn call(
        &self,
        service: &str,
        req: Req,
        id: RequestId,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        // The client's numbers: unique per client, so per `self.id`.
        let seq = id.seq as u64;
        let slot = Slot::new(None);
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(seq, slot.clone());
        let forget = || {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&seq);
        };
        if let Err(e) = self.requests.publish(WireRequest {
            client: self.id,
            seq,
            gid: id.gid,
            req,
        }) {
            forget();
            tracing::warn!("request to {service:?}: {e}");
            return Err(CallError::ServiceUnavailable(service.to_string()));
        }
        while !slot.is_filled() {
            let now = Instant::now();
            if now >= deadline {
                forget();
                return Err(CallError::Timeout {
                    service: service.to_string(),
                    timeout,
                });
            }
            if !self.ready() {
                forget();
                return Err(CallError::ServiceUnavailable(service.to_string()));
            }
            // Short waits: another thread may take our reply and fill our
            // slot meanwhile.
            match self
                .replies
                .wait_for_message((deadline - now).min(Duration::from_millis(20)))
            {
                Ok(m) => self.route(&m, service),
                Err(WaitError::ContextShutDown(_)) => {
                    forget();
                    return Err(CallError::ContextShutDown(service.to_string()));
                }
                Err(_) => {}
            }
        }
        slot.take()
            .unwrap_or_else(|| Err(CallError::ServiceUnavailable(service.to_string())))
    }
}

// ------------------------------------------- services over a transport's own
// mechanism (zenoh queryables, as rmw_zenoh)

/// The type a service of type `S` shows transports: its own name and ROS
/// hash (the key expression of rmw_zenoh's queryable), and a myelin hash
/// of its request and response types for services without a ROS hash.
pub(crate) fn service_type_info<S: crate::ServiceType>() -> crate::transport::TypeInfo {
    crate::transport::TypeInfo {
        name: S::TYPE_NAME,
        hash: service_hash(S::Request::TYPE_HASH, S::Response::TYPE_HASH),
        ros_hash: S::ROS_TYPE_HASH,
        wire: wire_of(S::Request::WIRE),
        any: false,
    }
}

/// [`service_type_info`] of a service type known at run time: the same
/// name, hashes and wire as the Rust service type it names.
pub(crate) fn raw_service_type_info(ty: &crate::RawServiceType) -> crate::transport::TypeInfo {
    crate::transport::TypeInfo {
        name: ty.name(),
        hash: service_hash(ty.request().hash(), ty.response().hash()),
        ros_hash: ty.ros_hash(),
        wire: wire_of(ty.request().wire()),
        any: false,
    }
}

/// myelin's hash of a service from its request and response hashes.
const fn service_hash(req: TypeHash, resp: TypeHash) -> TypeHash {
    mix(req, resp.0.rotate_left(29))
}

/// The QoS rmw_zenoh announces for services (ROS 2's services default:
/// reliable, volatile, keep last 10).
pub(crate) const SERVICE_QOS: QoS = QoS::keep_last(10);

/// Answers a request that came through a transport's own service
/// mechanism.
struct NetResponder<Resp> {
    raw: Box<dyn crate::transport::RawReply>,
    _resp: std::marker::PhantomData<fn() -> Resp>,
}

impl<Resp: Message> Responder<Resp> for NetResponder<Resp> {
    fn respond(self: Box<Self>, answer: Result<Resp, CallError>) {
        let answer = match answer {
            Ok(r) => crate::transport::encode_to_vec(&r).map_err(|e| e.to_string()),
            Err(CallError::ServerPanicked { message, .. }) => Err(message),
            Err(e) => Err(e.to_string()),
        };
        self.raw.reply(answer);
    }
}

/// What a transport calls with each request: decode it and queue it on
/// the service like any other request (callback groups, inline services
/// and panics behave as for a local call).
pub(crate) fn request_handler<Req: Message, Resp: Message>(
    server: Weak<crate::service::ServiceInner<Req, Resp>>,
) -> crate::transport::RequestHandler {
    Arc::new(move |parts, raw| {
        let Some(s) = server.upgrade() else {
            raw.reply(Err("the service is gone".into()));
            return;
        };
        match Req::wire_decode_parts(parts) {
            Ok(req) => {
                let id = raw.request_id().unwrap_or_default();
                s.submit_remote(
                    req,
                    Box::new(NetResponder {
                        raw,
                        _resp: std::marker::PhantomData,
                    }),
                    id,
                )
            }
            Err(e) => {
                tracing::warn!("service {:?}: a request that does not decode: {e}", s.name);
                raw.reply(Err(format!("the request does not decode: {e}")));
            }
        }
    })
}

/// Calls through a transport's own service mechanism.
pub(crate) struct NetCalls<Req, Resp> {
    pub(crate) raw: Arc<dyn crate::transport::RawCalls>,
    pub(crate) _types: std::marker::PhantomData<fn(Req) -> Resp>,
}

impl<Req: Message, Resp: Message> RemoteCalls<Req, Resp> for NetCalls<Req, Resp> {
    fn ready(&self) -> bool {
        self.raw.ready()
    }

    fn call(
        &self,
        service: &str,
        req: Req,
        id: RequestId,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        use crate::transport::RawCallError;
        let bytes = crate::transport::encode_to_vec(&req).map_err(|e| {
            tracing::warn!("request to {service:?}: {e}");
            CallError::ServiceUnavailable(service.to_string())
        })?;
        let mut decoded = None;
        let sent = self.raw.call(bytes, id, deadline, &mut |parts| {
            decoded = Some(Resp::wire_decode_parts(parts));
        });
        match sent {
            Ok(()) => match decoded {
                Some(Ok(r)) => Ok(r),
                Some(Err(e)) => {
                    tracing::warn!("reply from {service:?}: {e}");
                    Err(CallError::ServiceUnavailable(service.to_string()))
                }
                // A transport that said Ok without an answer: as gone.
                None => Err(CallError::ServiceUnavailable(service.to_string())),
            },
            Err(RawCallError::Timeout) => Err(CallError::Timeout {
                service: service.to_string(),
                timeout,
            }),
            Err(RawCallError::Unavailable) => {
                Err(CallError::ServiceUnavailable(service.to_string()))
            }
            Err(RawCallError::Failed(message)) => Err(CallError::ServerPanicked {
                service: service.to_string(),
                message,
            }),
        }
    }
}

/// Several ways to reach remote servers, in order of preference: a call
/// takes the first that has a server now.
pub(crate) struct FirstReady<Req, Resp>(pub(crate) Vec<Box<dyn RemoteCalls<Req, Resp>>>);

impl<Req: Message, Resp: Message> RemoteCalls<Req, Resp> for FirstReady<Req, Resp> {
    fn ready(&self) -> bool {
        self.0.iter().any(|r| r.ready())
    }

    fn call(
        &self,
        service: &str,
        req: Req,
        id: RequestId,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        match self.0.iter().find(|r| r.ready()) {
            Some(r) => r.call(service, req, id, deadline, timeout),
            None => Err(CallError::ServiceUnavailable(service.to_string())),
        }
    }
}
