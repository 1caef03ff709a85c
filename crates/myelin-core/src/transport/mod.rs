//! Transports: how messages leave the process. This module is the seam.
//!
//! Entities (publishers, subscriptions, nodes, the context) never name a
//! transport. A context holds a list of started `Transport`s; an endpoint
//! asks each one for a link (`PubLink`, `SubLink`) when it is created
//! and from then on calls only the links:
//!
//! ```text
//!  Publisher::publish(msg)
//!    ├─ for each PubLink that is wanted():  link.send(&msg as &dyn Encode)
//!    │     shm:   encode into a pool chunk ─▶ descriptor into each remote inbox ─▶ signal its wake lane
//!    │     zenoh: encode CDR ─▶ put on the rmw_zenoh key expression (33-byte attachment)
//!    └─ intra-process manager: the message into each local subscription's buffer
//!
//!  remote process                          this process
//!    shm:   inbox ─▶ executor woken for that lane ─▶ SubLink::pump ─┐
//!    zenoh: session callback thread ───────────────────────────────┼─▶ SubOwner::deliver(bytes)
//!                                                                   └─▶ decode, push into the buffer,
//!                                                                       mark that subscription ready
//! ```
//!
//! The contract, in four traits:
//! * `Transport`: one per context; started by `start_all` (one line
//!   per transport), it announces and withdraws endpoints, matches remote
//!   ones (its own discovery), and answers graph queries.
//! * `PubLink`: a publisher's side of one transport: send a message
//!   (owned, shared or loaned memory), report refusals and errors.
//! * `SubLink`: a subscription's side: messages arrive through the same
//!   path as local delivery (`SubOwner::deliver`); a link whose messages
//!   wait in shared memory is drained when the executor is woken for it.
//! * `PubOwner` / `SubOwner` (with `EndpointEvents`, common to both): what
//!   a link may ask of its endpoint (history for late joiners, QoS events,
//!   matched counts).
//!
//! A third transport (a UDP or serial link, or a test transport that drops
//! and reorders) is a new module here plus one line in `start_all`.
//!
//! `MYELIN_TRANSPORT` chooses at run time: a comma-separated list of `shm`
//! and `zenoh` (`intra` or any value without them: in-process only).

// The contract is whole whichever transports are compiled in; a build with
// fewer of them leaves parts of it unused. This is the one place the
// features show outside the transports' own modules and `start_all`.
#![cfg_attr(
    not(all(feature = "shm", feature = "zenoh")),
    allow(dead_code, unused_mut)
)]

use std::any::Any;
use std::borrow::Cow;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::error::{ContextError, CreateEndpointError};
use crate::message::{Message, TypeHash};
use crate::qos::{QoS, QosPolicy};
use crate::wire::{SharedBytes, Wire, WireError};

#[cfg(feature = "shm")]
pub(crate) mod shm;
pub(crate) mod wake;
#[cfg(feature = "zenoh")]
pub(crate) mod zenoh;

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A process-unique id for endpoints and contexts (segment names and
/// gids use it).
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The names `MYELIN_TRANSPORT` takes.
const TRANSPORT_NAMES: [&str; 3] = ["intra", "shm", "zenoh"];

/// Check `MYELIN_TRANSPORT` (`value`): a comma-separated list of
/// `intra`, `shm` and `zenoh`; a typo would otherwise silently mean
/// "in-process only" (what a context's `build()` reports, and `myelin
/// doctor`).
///
/// ```
/// assert!(myelin_core::transport::check_transport_env("shm,zenoh").is_ok());
/// let e = myelin_core::transport::check_transport_env("zneoh").unwrap_err();
/// assert!(e.to_string().contains("did you mean zenoh?"));
/// ```
pub fn check_transport_env(value: &str) -> Result<(), ContextError> {
    for part in value.split(',').map(str::trim) {
        if !TRANSPORT_NAMES.contains(&part) {
            let hint = crate::names::did_you_mean(part, TRANSPORT_NAMES)
                .map(|n| format!(" (did you mean {n}?)"))
                .unwrap_or_default();
            return Err(ContextError::InvalidTransportEnv {
                value: value.chars().take(60).collect(),
                why: format!(
                    "{:?} is not a transport{hint}; use a comma-separated list of intra, shm, zenoh",
                    part.chars().take(20).collect::<String>()
                ),
            });
        }
    }
    Ok(())
}

/// Whether `MYELIN_TRANSPORT` lets `name` run (unset: every transport
/// compiled in).
pub(crate) fn transport_allowed(name: &str) -> bool {
    match std::env::var("MYELIN_TRANSPORT") {
        Ok(v) => v.split(',').any(|t| t.trim() == name),
        Err(_) => true,
    }
}

/// Whether the network transport is compiled in and not turned off by
/// `MYELIN_TRANSPORT`.
pub fn network_enabled() -> bool {
    cfg!(feature = "zenoh") && transport_allowed("zenoh")
}

/// Whether the shared-memory transport is compiled in and not turned off
/// by `MYELIN_TRANSPORT`.
pub fn shared_memory_enabled() -> bool {
    cfg!(feature = "shm") && transport_allowed("shm")
}

/// Say once, for a user to see, that `topic` has endpoints of two types
/// that will never talk: both names and hashes, and where the other one is.
pub(crate) fn warn_incompatible_type(
    topic: &str,
    ours: (&str, &str),
    theirs: (&str, &str),
    where_: &str,
) {
    tracing::warn!(
        "topic {topic:?}: {where_} uses type {} ({}), this endpoint {} ({}); they do not match \
         (the same ROS type name with another hash means the two sides were built from \
         different message definitions)",
        theirs.0,
        theirs.1,
        ours.0,
        ours.1
    );
}

// ------------------------------------------------------------------ errors

/// A transport could not do what was asked: what it was doing, and the
/// underlying error (the OS, the shared-memory layer, zenoh).
#[derive(Debug, thiserror::Error)]
#[error("{doing}: {source}")]
pub(crate) struct TransportError {
    doing: Cow<'static, str>,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl TransportError {
    pub(crate) fn new(
        doing: impl Into<Cow<'static, str>>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        TransportError {
            doing: doing.into(),
            source: source.into(),
        }
    }
}

/// Sending one message on a link failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// The message could not be encoded.
    #[error(transparent)]
    Encode(#[from] WireError),
    /// No transport memory for a message of `len` bytes.
    #[error("no memory for {len} bytes: {why}")]
    NoMemory {
        /// The message size.
        len: usize,
        /// Why.
        why: TransportError,
    },
    /// The transport refused or failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
}

/// Remote subscriptions that refused a message (reliable keep_all at its
/// limit): how many, and the smallest limit among them.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Refused {
    pub(crate) count: usize,
    pub(crate) limit: usize,
}

// ------------------------------------------------------------ descriptions

/// What a transport knows of a message type (type-erased: transports are
/// not generic over the message).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TypeInfo {
    pub(crate) name: &'static str,
    pub(crate) hash: TypeHash,
    /// The ROS 2 type hash (`RIHS01_...`), if the type mirrors a `.msg`.
    pub(crate) ros_hash: Option<&'static str>,
    pub(crate) wire: Wire,
    /// `AnyMessage`: takes whatever type the topic carries.
    pub(crate) any: bool,
}

impl TypeInfo {
    pub(crate) fn of<T: Message>() -> TypeInfo {
        TypeInfo {
            name: T::TYPE_NAME,
            hash: T::TYPE_HASH,
            ros_hash: T::ROS_TYPE_HASH,
            wire: T::WIRE,
            any: crate::wire::is_any::<T>(),
        }
    }

    /// A type named at run time (a publisher of recorded bytes).
    pub(crate) fn of_raw(t: &crate::RawType) -> TypeInfo {
        TypeInfo {
            name: t.name(),
            hash: t.hash(),
            ros_hash: t.ros_hash(),
            wire: t.wire(),
            any: false,
        }
    }

    /// Whether the type can leave the process at all.
    pub(crate) fn crosses(&self) -> bool {
        self.wire != Wire::Local
    }
}

/// The node an endpoint belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeIdent<'a> {
    pub(crate) fqn: &'a str,
    pub(crate) name: &'a str,
    pub(crate) namespace: &'a str,
    /// The node's id in its context.
    pub(crate) nid: u64,
}

/// A new publisher or subscription, as its transports see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EndpointSpec<'a> {
    /// The endpoint's id in its context.
    pub(crate) id: u64,
    /// The endpoint's process-unique number, which its gid carries
    /// ([`crate::gid`]): a transport that names the endpoint to other
    /// processes uses it, so that the gid a message arrives with is the
    /// sending [`Publisher::gid`](crate::Publisher::gid).
    pub(crate) serial: u64,
    /// The endpoint's gid (of `serial`; all zeros for services, whose
    /// transports make their own).
    pub(crate) gid: crate::Gid,
    pub(crate) topic: &'a str,
    pub(crate) qos: &'a QoS,
    pub(crate) ty: TypeInfo,
    pub(crate) node: NodeIdent<'a>,
    /// Subscriptions: publishers of other processes taken at once where
    /// a transport has a limit (`None`: its default).
    pub(crate) max_publishers: Option<usize>,
}

/// A message that can be put on the wire (every [`Message`]), type-erased.
pub(crate) trait Encode {
    fn wire_len(&self) -> Result<usize, WireError>;
    fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError>;
    /// The encoded bytes when the message already holds them (a
    /// [`Blob`](crate::Blob) is its own wire form): a link can send them
    /// without encoding or copying.
    fn wire_shared(&self) -> Option<SharedBytes>;
}

impl<T: Message> Encode for T {
    #[inline]
    fn wire_shared(&self) -> Option<SharedBytes> {
        // A type test the compiler settles per message type.
        let any: &dyn Any = self;
        if let Some(b) = any.downcast_ref::<crate::Blob>() {
            Some(b.shared_bytes().clone())
        } else {
            any.downcast_ref::<crate::AnyMessage>()
                .map(|m| m.0.shared_bytes().clone())
        }
    }
    #[inline]
    fn wire_len(&self) -> Result<usize, WireError> {
        Message::wire_len(self)
    }
    #[inline]
    fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
        Message::wire_encode(self, out)
    }
}

/// Encode into a fresh vector.
pub(crate) fn encode_to_vec(msg: &dyn Encode) -> Result<Vec<u8>, WireError> {
    encode_to_vec_of(msg, msg.wire_len()?)
}

/// [`encode_to_vec`] of a message whose `wire_len` is known (computing it
/// walks the whole message, for CDR).
pub(crate) fn encode_to_vec_of(msg: &dyn Encode, len: usize) -> Result<Vec<u8>, WireError> {
    let mut buf = vec![0u8; len];
    msg.wire_encode(&mut buf)?;
    Ok(buf)
}

/// Buffers for large encoded messages, used again once the link is done
/// with them (zenoh drops its payload once it has written it into its
/// batches): a camera frame encoded into a fresh vector pays for zeroing
/// it (and the page faults of a fresh allocation) about as much as for
/// the encoding. At most [`Spares::KEPT`] wait between messages (more are
/// made while more messages are in flight, a transient-local cache's
/// `depth` among them);
/// one much larger than the message that used it last (four times) is
/// freed rather than kept, so a single huge message is not held for ever.
#[cfg(feature = "zenoh")]
pub(crate) struct Spares(Arc<crossbeam_queue::ArrayQueue<Vec<u8>>>);

#[cfg(feature = "zenoh")]
impl Spares {
    /// Buffers kept between messages.
    const KEPT: usize = 2;

    pub(crate) fn new() -> Spares {
        Spares(Arc::new(crossbeam_queue::ArrayQueue::new(Spares::KEPT)))
    }

    /// Encode `msg` (`len` bytes: its `wire_len`) into a spare buffer, or
    /// a new one if none is free or large enough.
    pub(crate) fn encode(&self, msg: &dyn Encode, len: usize) -> Result<Encoded, WireError> {
        let buf = match self.0.pop() {
            // A spare's bytes are overwritten by the encoding
            // (`wire_encode` writes every one of its `len` bytes).
            Some(buf) if buf.len() >= len => buf,
            // None large enough: a new one of the exact size (growing the
            // spare would copy its stale bytes and round its capacity up).
            _ => vec![0; len],
        };
        // Owned by the `Encoded` first: an encoding error returns the
        // buffer too.
        let mut out = Encoded {
            buf,
            len,
            home: self.0.clone(),
        };
        msg.wire_encode(&mut out.buf[..len])?;
        Ok(out)
    }
}

/// A message encoded into a buffer of [`Spares`], which it goes back to
/// when dropped.
#[cfg(feature = "zenoh")]
pub(crate) struct Encoded {
    buf: Vec<u8>,
    len: usize,
    home: Arc<crossbeam_queue::ArrayQueue<Vec<u8>>>,
}

#[cfg(feature = "zenoh")]
impl AsRef<[u8]> for Encoded {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(feature = "zenoh")]
impl Drop for Encoded {
    fn drop(&mut self) {
        if self.buf.capacity() <= self.len.saturating_mul(4) {
            // Full: the buffer is freed.
            let _ = self.home.push(std::mem::take(&mut self.buf));
        }
    }
}

// ------------------------------------------------------------------ traits

/// One transport of one context.
pub(crate) trait Transport: Send + Sync {
    /// `shm`, `zenoh`, ... (the names `MYELIN_TRANSPORT` takes).
    fn name(&self) -> &'static str;

    /// Refuse an endpoint whose topic carries another type elsewhere
    /// (before anything is created for it).
    fn check_type(&self, _spec: &EndpointSpec<'_>) -> Result<(), CreateEndpointError> {
        Ok(())
    }

    /// Announce a publisher; `None` when this transport does not carry it
    /// (e.g. a type without a wire encoding).
    fn publisher(
        &self,
        spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn PubLink>>, TransportError>;

    /// Announce a subscription; `None` when this transport does not carry
    /// it.
    fn subscription(
        &self,
        spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn SubLink>>, TransportError>;

    /// Announce a node; the returned guard withdraws it when dropped.
    fn node(&self, _node: &NodeIdent<'_>) -> Option<Box<dyn Any + Send + Sync>> {
        None
    }

    /// Endpoints this transport sees in other processes and hosts, asking
    /// the network for up to `wait` (graph queries, `myelin topic list`).
    /// Endpoints the host scan ([`endpoints`]) lists already are left out.
    fn discover(&self, _wait: Duration) -> Vec<DiscoveredEndpoint> {
        Vec::new()
    }

    /// Publishers and subscriptions of other contexts (in this process,
    /// other processes, other hosts) as this transport sees them now,
    /// without waiting: what `Node::count_publishers` and friends add to
    /// the context's own. Endpoints another transport of the same context
    /// reports (a same-host process on shared memory that also speaks
    /// zenoh) are left to that one, so each is counted once.
    fn graph_endpoints(&self) -> Vec<DiscoveredEndpoint> {
        Vec::new()
    }

    /// The fully qualified names of the nodes of other contexts this
    /// transport sees now (as [`graph_endpoints`](Self::graph_endpoints);
    /// by default the nodes those endpoints belong to).
    fn graph_nodes(&self) -> Vec<String> {
        self.graph_endpoints().into_iter().map(|e| e.node).collect()
    }

    /// Service servers and clients this transport sees in other processes
    /// and hosts by their own announcement (rmw_zenoh's `SS`/`SC` tokens),
    /// asking the network for up to `wait`.
    fn discover_services(&self, _wait: Duration) -> Vec<DiscoveredService> {
        Vec::new()
    }

    /// The context is shutting down.
    fn shutdown(&self) {}

    /// The transport's session id, for transports that have one (zenoh).
    fn session_id(&self) -> Option<String> {
        None
    }

    /// Serve a service (`spec.topic` is the service name, `spec.ty` the
    /// service type) to callers this transport reaches: `handler` gets
    /// each request's encoded bytes, lent for the call (in the parts the
    /// network delivered them in), and a [`RawReply`] for the answer. The
    /// guard withdraws the service when dropped; `None` when this
    /// transport carries no services of its own.
    fn service_server(
        &self,
        _spec: &EndpointSpec<'_>,
        _handler: RequestHandler,
    ) -> Result<Option<Box<dyn Any + Send + Sync>>, TransportError> {
        Ok(None)
    }

    /// Call servers this transport reaches (see
    /// [`service_server`](Self::service_server)).
    fn service_client(
        &self,
        _spec: &EndpointSpec<'_>,
    ) -> Result<Option<Arc<dyn RawCalls>>, TransportError> {
        Ok(None)
    }
}

/// What a transport calls with each request for a served service: the
/// request's bytes, lent for the call in the parts they arrived in (a
/// large one in its network fragments: decoded across them, never joined
/// first).
pub(crate) type RequestHandler = Arc<dyn Fn(&[&[u8]], Box<dyn RawReply>) + Send + Sync>;

/// The way back to the caller of one request (called at most once;
/// dropped unanswered, the caller learns the service is gone).
pub(crate) trait RawReply: Send {
    /// The encoded response, or why there is none.
    fn reply(self: Box<Self>, answer: Result<Vec<u8>, String>);
    /// The caller's gid and the request's number, when the request
    /// carried them (rmw_zenoh's attachment does).
    fn request_id(&self) -> Option<crate::gid::RequestId> {
        None
    }
}

/// A service's servers as one transport reaches them.
pub(crate) trait RawCalls: Send + Sync {
    /// Whether a server is there now.
    fn ready(&self) -> bool;
    /// Send the encoded request to one server and hand its encoded answer
    /// to `answer`, lent for the call in the parts it arrived in; or why
    /// there is none by `deadline`.
    fn call(
        &self,
        request: Vec<u8>,
        id: crate::gid::RequestId,
        deadline: std::time::Instant,
        answer: &mut dyn FnMut(&[&[u8]]),
    ) -> Result<(), RawCallError>;
}

/// Why a [`RawCalls::call`] has no answer.
#[derive(Debug)]
pub(crate) enum RawCallError {
    /// No answer by the deadline.
    Timeout,
    /// No server took the request (gone, or none).
    Unavailable,
    /// The server answered with an error.
    Failed(String),
}

/// Whether a publisher's link has a subscription to reach: set by the link
/// when its connections change, read by the publisher on every publish
/// without a call into the link (the in-process-only publish stays a few
/// loads).
#[derive(Debug, Default)]
pub(crate) struct Wanted(std::sync::atomic::AtomicBool);

impl Wanted {
    pub(crate) fn set(&self, on: bool) {
        // SYNC: Relaxed: a hint checked on each publish. A transient-local
        // publisher's new readers are connected (and this set) under the
        // publisher's history lock, which its publish takes too, so the
        // first live message after the history is never skipped.
        self.0.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn get(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Memory a link lent for a zero-copy publish (see [`Lender::loan`]):
/// where to write, and the link's name for it. Plain data: the loan's
/// holder gives it back ([`Lender::unloan`]), sends it
/// ([`Lender::send_loaned`]) or turns it into an owner of the bytes
/// ([`Lender::keep_loan`]), exactly once.
#[derive(Clone, Copy)]
pub(crate) struct LinkLoan {
    /// Where to write (at least the asked length, 64-byte aligned).
    pub(crate) ptr: *mut u8,
    /// The link's name for the memory (shared memory: the chunk's key).
    pub(crate) token: u64,
}

// SAFETY: `ptr` points into memory the lending link keeps mapped while the
// loan is outstanding, and only the one holder of the loan writes through
// it before it is published; moving the loan to another thread moves that
// sole writer with it.
unsafe impl Send for LinkLoan {}

/// A link that lends memory for zero-copy publishing (shared memory's
/// pools). A loan costs no allocation: it is a pointer and a token until
/// something besides this link needs the bytes (a subscription of this
/// process, the history, another link), and only then
/// [`keep_loan`](Lender::keep_loan) makes an owner for them.
pub(crate) trait Lender: Send + Sync {
    /// Lend memory for a message of `len` bytes.
    fn loan(&self, len: usize) -> Result<LinkLoan, SendError>;

    /// Send the loaned memory as a `len`-byte message, and give the loan
    /// back (readers hold their own references).
    fn send_loaned(&self, token: u64, len: usize) -> Result<Refused, SendError>;

    /// Turn the loan into an owner of its memory (the loan is consumed;
    /// the memory returns to the link when the owner drops). The link
    /// knows its memory by this owner in [`PubLink::send_bytes`].
    fn keep_loan(&self, token: u64) -> Arc<dyn Any + Send + Sync>;

    /// Give back a loan that was not published.
    fn unloan(&self, token: u64);
}

/// A publisher's side of one transport.
pub(crate) trait PubLink: Send + Sync {
    /// Start following the remote graph on behalf of `owner`.
    fn start(&self, owner: Weak<dyn PubOwner>);

    /// Whether any subscription this link reaches exists (nothing is
    /// encoded or sent otherwise): the flag the link keeps up to date.
    fn wanted(&self) -> &Arc<Wanted>;

    /// Subscriptions this link reaches now.
    fn connected(&self) -> usize;

    /// Encode and send a message.
    fn send(&self, msg: &dyn Encode) -> Result<Refused, SendError>;

    /// Send encoded bytes; `own` is the bytes' owner when this link lent
    /// them (made by its [`Lender::keep_loan`]: then it sends without a
    /// copy).
    fn send_bytes(
        &self,
        bytes: &SharedBytes,
        own: Option<&(dyn Any + Send + Sync)>,
    ) -> Result<Refused, SendError>;

    /// This link as a lender of memory for zero-copy publishing; `None`
    /// when it has none to lend (a loan then comes from the heap).
    fn lender(&self) -> Option<&dyn Lender> {
        None
    }

    /// Lent memory still in use (loaned, in flight, or held by readers).
    fn memory_in_use(&self) -> usize {
        0
    }

    /// Warm the path of the next message without sending one
    /// ([`Publisher::warm`](crate::Publisher::warm)): where the link can,
    /// make each subscriber that polls (rather than sleeps) run its
    /// receive path once over nothing. By default, nothing.
    fn warm(&self) {}

    /// The publisher asserted its manual-by-topic liveliness, explicitly
    /// or (`by_publish`) by publishing a message this link is about to
    /// send: tell the subscriptions this link reaches. Called only for
    /// publishers with manual-by-topic liveliness and a lease.
    fn assert_liveliness(&self, _by_publish: bool) {}
}

/// A subscription's side of one transport.
pub(crate) trait SubLink: Send + Sync {
    /// Start receiving on behalf of `owner`.
    fn start(&self, owner: Weak<dyn SubOwner>) -> Result<(), TransportError>;

    /// Publishers this link hears now.
    fn connected(&self) -> usize;

    /// The publishers this link hears now, split into (alive, not alive)
    /// by their liveliness: a manual-by-topic publisher is not alive once
    /// its lease passed without an assertion. By default every connected
    /// publisher is alive.
    fn liveliness(&self) -> (usize, usize) {
        (self.connected(), 0)
    }

    /// Whether this link's messages wait to be drained ([`pump`](Self::pump))
    /// rather than delivered by the transport's own thread.
    fn pumped(&self) -> bool {
        false
    }

    /// The wake word publishers signal when a message waits (from the
    /// waiter's [`wake::WakeEvent::word`]; `None`: nobody sleeps on it).
    fn set_wake(&self, _word: Option<u32>) {}

    /// Move waiting messages into the subscription, `owner` (the caller:
    /// alive for the whole pass, so the link takes no reference to it).
    fn pump(&self, _owner: &dyn SubOwner) {}

    /// [`pump`](Self::pump) for a reader that takes a message now from a
    /// subscription whose buffer it found empty: when the pass finds
    /// exactly one message, it is handed back instead of delivered (a
    /// push and a pop of an empty buffer, and the wake-up of nobody,
    /// saved); two or more are delivered in order as `pump` does, and
    /// `None` comes back.
    fn pump_take(&self, owner: &dyn SubOwner) -> Option<Held> {
        self.pump(owner);
        None
    }

    /// Whether a message waits to be drained.
    fn has_data(&self) -> bool {
        false
    }

    /// [`pump`](Self::pump) from a thread that is not this link's pump,
    /// waiting at most `patience` for a pass another thread is in the
    /// middle of (its callbacks run under the link's lock, and one may
    /// wait for a lock the caller holds): never from inside a pass of
    /// this thread, never blocking past `patience`.
    fn settle(&self, _owner: &dyn SubOwner, _patience: std::time::Duration) {}
}

/// What any link tells its endpoint, publisher or subscription.
pub(crate) trait EndpointEvents: Send + Sync {
    /// A remote endpoint could not match (its QoS).
    fn incompatible_qos(&self, policy: QosPolicy);

    /// A remote endpoint on the topic has another type (the transport
    /// says so once on the log with both types; this counts it and raises
    /// the event).
    fn incompatible_type(&self);

    /// The links' connections changed (matched counts and events).
    fn links_changed(&self);
}

/// A publisher's transient-local history as its links replay it: each
/// message with its lifespan left (see [`PubOwner::with_history`]).
pub(crate) type History<'a> = dyn Iterator<Item = (&'a dyn Encode, Option<Duration>)> + 'a;

/// What a publisher's links may ask of it.
pub(crate) trait PubOwner: EndpointEvents {
    /// Run `f` over the transient-local history, oldest first, with the
    /// publisher's publishing held off meanwhile, so a reader connected in
    /// `f` gets the history and then every later message, each once.
    /// Each message comes with how much longer it may be delivered (its
    /// lifespan left; `None`: for ever); expired ones are left out.
    /// Volatile publishers pass an empty history.
    fn with_history(&self, f: &mut dyn FnMut(&mut History<'_>));
}

/// A message's bytes as a link hands them to its subscription.
pub(crate) enum Arrived<'a> {
    /// In a buffer the message may keep (a shared-memory chunk, read in
    /// place by plain old data and byte buffers).
    Kept(SharedBytes),
    /// In the link's own buffers, lent for the call: the one slice of a
    /// receive buffer, or the fragments of a large message, in order.
    /// Decoded where they lie (CDR), or copied once into a buffer the
    /// message keeps.
    Lent(&'a [&'a [u8]]),
}

/// The one message a [`SubLink::pump_take`] pass found, handed to the
/// reader directly: what [`SubOwner::deliver`] would have been given.
pub(crate) struct Held {
    pub(crate) bytes: SharedBytes,
    pub(crate) lifetime: Option<Duration>,
    pub(crate) origin: crate::message_info::Origin,
}

/// What a subscription's links may ask of it.
pub(crate) trait SubOwner: EndpointEvents {
    /// A message arrived: decode it and push it into the buffer through the
    /// path local delivery takes (which wakes the executor or waiter).
    /// `paced`: the transport holds messages back while [`has_room`] is
    /// false (shared memory), so a full keep_all buffer may refuse; a
    /// transport that cannot (zenoh: its publisher's `publish` returned
    /// long ago) passes `false`, and keep_all then holds the message past
    /// `max_samples` rather than lose it behind its publisher's back.
    ///
    /// `lifetime`: how much longer the message may be delivered (its
    /// publisher's lifespan less its age when it arrived; `None`: for
    /// ever). `Some(ZERO)`: it expired on the way, and is counted so
    /// rather than delivered.
    ///
    /// [`has_room`]: SubOwner::has_room
    ///
    /// `origin`: its publisher, and what the transport knows of when it
    /// was sent and received ([`MessageInfo`](crate::MessageInfo)).
    fn deliver(
        &self,
        bytes: Arrived<'_>,
        paced: bool,
        lifetime: Option<Duration>,
        origin: crate::message_info::Origin,
    );

    /// Whether the subscription can take a message now without losing
    /// one: a pumped link leaves messages where they are (the publisher's
    /// side then refuses more, as a full keep_all subscription must) while
    /// this is false, and is pumped again when the reader makes room.
    fn has_room(&self) -> bool;

    /// Messages lost on the way (overwritten before they were read,
    /// undecodable, corrupt).
    fn count_lost(&self, n: u64);
}

// ---------------------------------------------------------------- registry

/// How a context asked for its transports.
#[derive(Debug, Clone, Default)]
pub(crate) struct TransportConfig {
    pub(crate) domain: u32,
    /// `None`: the default (on when available; a failure falls back with a
    /// warning). `Some(true)`: required.
    pub(crate) shared_memory: Option<bool>,
    /// As `shared_memory`, for the network.
    pub(crate) network: Option<bool>,
    /// A zenoh configuration file.
    pub(crate) zenoh_config: Option<std::path::PathBuf>,
}

/// The transports of one context, in the order they were started (which is
/// the order a publish sends in: the lowest latency first).
#[derive(Default)]
pub(crate) struct Transports {
    list: Vec<Arc<dyn Transport>>,
}

impl Transports {
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<dyn Transport>> {
        self.list.iter()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn Transport>> {
        self.list.iter().find(|t| t.name() == name)
    }

    fn push(&mut self, t: Option<Arc<dyn Transport>>) {
        self.list.extend(t);
    }
}

/// Start every transport compiled in that `config` and `MYELIN_TRANSPORT`
/// ask for. Registering a transport is one line here.
pub(crate) fn start_all(config: &TransportConfig) -> Result<Transports, ContextError> {
    if let Ok(v) = std::env::var("MYELIN_TRANSPORT") {
        check_transport_env(&v)?;
        // A transport asked for by name but not compiled in would
        // otherwise mean "in-process only" without a word.
        let missing: Vec<&str> = [
            ("shm", cfg!(feature = "shm")),
            ("zenoh", cfg!(feature = "zenoh")),
        ]
        .into_iter()
        .filter(|&(name, built)| !built && transport_allowed(name))
        .map(|(name, _)| name)
        .collect();
        if !missing.is_empty() {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(
                    "MYELIN_TRANSPORT={v:?} asks for {}, but this build of myelin lacks that \
                     feature; running without it",
                    missing.join(" and ")
                )
            });
        }
    }
    let mut started = Transports::default();
    #[cfg(feature = "shm")]
    started.push(shm::start(config)?);
    #[cfg(not(feature = "shm"))]
    if config.shared_memory == Some(true) {
        return Err(ContextError::SharedMemory {
            domain: config.domain,
            why: "myelin was built without the `shm` feature".into(),
        });
    }
    #[cfg(feature = "zenoh")]
    {
        let uses_shm = started.get("shm").is_some();
        started.push(zenoh::start(config, uses_shm)?);
    }
    #[cfg(not(feature = "zenoh"))]
    if config.network == Some(true) || config.zenoh_config.is_some() {
        return Err(ContextError::Network {
            domain: config.domain,
            why: "myelin was built without the `zenoh` feature".into(),
        });
    }
    Ok(started)
}

// -------------------------------------------------------------- discovery

/// A publisher or subscription found outside this context (see
/// [`endpoints`] and [`Context::discover`](crate::Context::discover)).
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredEndpoint {
    /// A publisher (`true`) or a subscription.
    pub is_publisher: bool,
    /// The fully qualified topic name.
    pub topic: String,
    /// The message type name (`*` for a tool that takes any type).
    pub type_name: String,
    /// The schema hash.
    pub type_hash: crate::TypeHash,
    /// The ROS 2 type hash (`RIHS01_...`) when the endpoint announced one
    /// (zenoh liveliness tokens carry it; this host's shared memory does
    /// not, the type name and schema hash identify the type there).
    pub ros_hash: Option<String>,
    /// The fully qualified node name.
    pub node: String,
    /// The process.
    pub pid: u32,
    /// The QoS it offers (publisher) or requests (subscription).
    pub qos: crate::QoS,
    /// The zenoh session of an endpoint seen over the network (`None`:
    /// found in this host's shared memory).
    pub zid: Option<String>,
}

/// The type name the graph lists for a tool's endpoint that takes any
/// type (`AnyMessage`'s, and what shared memory records for it).
pub(crate) const ANY_TYPE_NAME: &str = "*";

/// A service server or client found in the graph (`myelin service list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredService {
    /// A server (`true`) or a client.
    pub is_server: bool,
    /// The fully qualified service name.
    pub name: String,
    /// The service type (`example_interfaces/srv/AddTwoInts`), or `None`
    /// for a myelin service without a service type (its request and
    /// response types only travel with its internal topics).
    pub type_name: Option<String>,
    /// The fully qualified node name.
    pub node: String,
    /// The process (0 when unknown: another implementation's).
    pub pid: u32,
    /// The zenoh session of one seen over the network.
    pub zid: Option<String>,
}

/// The services behind the internal request topics of myelin's
/// services (`/_srv<name>/request`): a subscription is a server, a
/// publisher a client.
pub(crate) fn services_of(endpoints: &[DiscoveredEndpoint]) -> Vec<DiscoveredService> {
    endpoints
        .iter()
        .filter_map(|e| {
            let name = e.topic.strip_prefix("/_srv")?.strip_suffix("/request")?;
            Some(DiscoveredService {
                is_server: !e.is_publisher,
                name: name.to_string(),
                type_name: None,
                node: e.node.clone(),
                pid: e.pid,
                zid: e.zid.clone(),
            })
        })
        .collect()
}

/// Every live publisher and subscription of `domain` on this host that
/// uses shared memory (the view `myelin topic list` and `myelin node list`
/// print). Internal service topics (`/_srv/...`) are included; empty when
/// shared memory is compiled out.
///
/// ```
/// let found = myelin_core::endpoints(0);
/// assert!(found.iter().all(|e| e.topic.starts_with('/')));
/// ```
pub fn endpoints(domain: u32) -> Vec<DiscoveredEndpoint> {
    #[cfg(feature = "shm")]
    return shm::host_endpoints(domain);
    #[cfg(not(feature = "shm"))]
    {
        let _ = domain;
        Vec::new()
    }
}

#[cfg(test)]
mod env_tests {
    use super::*;

    #[test]
    fn myelin_transport_names_are_checked() {
        for ok in ["intra", "shm", "zenoh", "shm,zenoh", " shm , zenoh "] {
            assert!(check_transport_env(ok).is_ok(), "{ok}");
        }
        let e = check_transport_env("shm,zneoh").unwrap_err().to_string();
        assert!(e.contains("did you mean zenoh?"), "{e}");
        let e = check_transport_env("").unwrap_err().to_string();
        assert!(e.contains("not a transport"), "{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_buffer_is_its_own_wire_form_and_nothing_else_is() {
        let blob = crate::Blob::from(vec![1u8, 2, 3]);
        let shared = Encode::wire_shared(&blob).expect("a blob's bytes");
        assert_eq!(shared.as_ptr(), blob.as_slice().as_ptr(), "no copy");
        let any = crate::AnyMessage(blob.clone());
        assert_eq!(
            Encode::wire_shared(&any).unwrap().as_ptr(),
            blob.as_slice().as_ptr()
        );
        // Encoded types go through their encoder.
        assert!(Encode::wire_shared(&7u32).is_none());
        assert_eq!(encode_to_vec(&7u32).unwrap(), 7u32.to_le_bytes());
    }

    #[test]
    #[cfg(feature = "zenoh")]
    fn large_encodings_reuse_their_buffers_and_carry_nothing_over() {
        let spares = Spares::new();
        let encode = |m: &String| {
            let len = Encode::wire_len(m).unwrap();
            spares.encode(m, len).unwrap()
        };
        let big = "a".repeat(100_000);
        let first = encode(&big);
        assert_eq!(first.as_ref(), &encode_to_vec(&big).unwrap()[..]);
        let at = first.as_ref().as_ptr();
        drop(first);
        // The same buffer again, holding only the new message's bytes.
        let smaller = "b".repeat(60_000);
        let second = encode(&smaller);
        assert_eq!(second.as_ref().as_ptr(), at, "reused");
        assert_eq!(second.as_ref(), &encode_to_vec(&smaller).unwrap()[..]);
        // Two in flight at once: the second is a new buffer.
        let third = encode(&big);
        assert_ne!(third.as_ref().as_ptr(), at);
        drop((second, third));
        // A buffer four times larger than the message that used it is
        // freed: a small message after a burst of big ones.
        let tiny = String::from("c");
        let a = encode(&tiny);
        let b = encode(&tiny);
        assert!(a.as_ref().len() < 16 && b.as_ref().len() < 16);
        drop((a, b));
        assert!(spares.0.is_empty(), "both oversized buffers were freed");
        // At most `KEPT` wait.
        let all: Vec<_> = (0..5).map(|_| encode(&big)).collect();
        drop(all);
        assert_eq!(spares.0.len(), Spares::KEPT);
    }
}
