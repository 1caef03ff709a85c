//! Services and clients: request/response, intra-process first.
//!
//! A [`Service`] owns a request queue (one per server, like a
//! subscription's buffer) run by its node's executor; a [`Client`] pushes a
//! request with a reply slot into a server's queue and the server's callback
//! answers straight into that slot: no serialisation, no copy, no broker.
//! The reply slot is a trait object ([`Responder`]) so the transports can
//! answer over shared memory or zenoh through the same path.
//!
//! # Semantics
//! * Several servers on one name: requests go round-robin over the servers
//!   (ROS 2 leaves the choice undefined); each request is answered exactly
//!   once.
//! * [`Client::call`] blocks (in the kernel) until the response, the timeout,
//!   or an error. Called from inside a callback of the executor that serves
//!   the service, it runs that executor's other ready work while it waits (a
//!   nested spin), so a single-threaded executor does not deadlock. If the
//!   service is in the same mutually exclusive callback group as the calling
//!   callback on a multi-threaded executor, the call cannot be served and
//!   returns [`CallError::WouldDeadlock`] at once.
//! * [`Client::call_async`] returns a future (any runtime).
//! * Failures are errors, never hangs: no server within the timeout
//!   ([`CallError::NoServer`]), the timeout ([`CallError::Timeout`]), the
//!   server dropped with the request pending
//!   ([`CallError::ServiceUnavailable`], promptly), the server's callback
//!   panicked ([`CallError::ServerPanicked`]; the server keeps serving, and
//!   `spin` does not stop for it: the caller owns the error).
//! * [`ServiceOptions::inline`]: the server callback runs in the caller's
//!   thread, like a function call.
//!
//! ```
//! use myelin_core::{Context, Executor};
//! use std::time::Duration;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::builder().handle_signals(false).build()?;
//! let node = ctx.create_node("doubler")?;
//! let _srv = node.create_service::<i64, i64>("double", |x| 2 * x)?;
//! let client = node.create_client::<i64, i64>("double")?;
//! let mut exec = Executor::new();
//! exec.add_node(&node)?;
//! let stop = exec.stop_handle();
//! let spinner = std::thread::spawn(move || exec.spin());
//! assert_eq!(client.call(21, Duration::from_secs(5))?, 42);
//! stop.stop();
//! spinner.join().unwrap()?;
//! # Ok(()) }
//! ```

use std::any::TypeId;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_queue::SegQueue;
use myelin_sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use myelin_sync::{Event, RetainCell, Scope, TryLock};

use crate::gid::RequestId;
use crate::introspection::{
    IntrospectionCell, IntrospectionError, Introspector, REQUEST_RECEIVED, REQUEST_SENT,
    RESPONSE_RECEIVED, RESPONSE_SENT, ServiceIntrospection, ServiceTypeRef, body_of,
};

use crate::dispatch::{ExecShared, Executable, GroupInner};
use crate::error::{CreateServiceError, SpinError};
use crate::graph::{Graph, Members};
use crate::group::CallbackGroup;
use crate::message::Message;
use crate::runtime::NodeInner;

/// A call failed. Every variant names the service.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No server for the service appeared within the timeout.
    #[error("no server for service {service:?} within {waited:?}")]
    NoServer {
        /// The service.
        service: String,
        /// How long the call waited for one.
        waited: Duration,
    },
    /// The server did not answer within the timeout.
    #[error("service {service:?} did not answer within {timeout:?}")]
    Timeout {
        /// The service.
        service: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The server was dropped while the request was pending.
    #[error("service {0:?} went away with the request pending")]
    ServiceUnavailable(String),
    /// The server's callback panicked on this request.
    #[error("the server of {service:?} panicked: {message}")]
    ServerPanicked {
        /// The service.
        service: String,
        /// The panic payload, if it was a string.
        message: String,
    },
    /// The call can never be served from where it was made.
    #[error("calling {service:?} from here would deadlock: {reason}")]
    WouldDeadlock {
        /// The service.
        service: String,
        /// Why, and what to change.
        reason: &'static str,
    },
    /// The context was shut down.
    #[error("cannot call {0:?}: the context is shut down")]
    ContextShutDown(String),
    /// A deferred server dropped the request's [`ServiceReply`] without
    /// sending an answer.
    #[error("the server of {0:?} dropped the request without answering")]
    NotAnswered(String),
}

/// Where a server's answer goes: a local reply slot, or (with the
/// transports) a message back to another process.
pub trait Responder<Resp>: Send {
    /// Deliver the answer (exactly once).
    fn respond(self: Box<Self>, answer: Result<Resp, CallError>);
}

/// A reply slot: filled once, waited on by a thread or a task.
pub(crate) struct Slot<Resp> {
    answer: Mutex<Option<Result<Resp, CallError>>>,
    // SYNC: Release store in `fill` pairs with Acquire loads by waiters.
    filled: AtomicBool,
    event: Event,
    waker: Mutex<Option<Waker>>,
    // SYNC: SeqCst store after storing the waker pairs with the fence +
    // SeqCst load in `fill` (Dekker with `filled`).
    has_waker: AtomicBool,
    /// An executor spinning nested while waiting for this slot.
    nested: Option<Arc<ExecShared>>,
}

impl<Resp> Slot<Resp> {
    pub(crate) fn new(nested: Option<Arc<ExecShared>>) -> Arc<Self> {
        Arc::new(Slot {
            answer: Mutex::new(None),
            filled: AtomicBool::new(false),
            event: Event::new(Scope::Process),
            waker: Mutex::new(None),
            has_waker: AtomicBool::new(false),
            nested,
        })
    }

    pub(crate) fn fill(&self, answer: Result<Resp, CallError>) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
        self.filled.store(true, Ordering::Release);
        self.event.notify();
        if let Some(e) = &self.nested {
            e.event.notify();
        }
        fence(Ordering::SeqCst);
        if self.has_waker.load(Ordering::SeqCst)
            && let Some(w) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            w.wake();
        }
    }

    pub(crate) fn is_filled(&self) -> bool {
        self.filled.load(Ordering::Acquire)
    }

    pub(crate) fn take(&self) -> Option<Result<Resp, CallError>> {
        self.answer.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

struct SlotResponder<Resp>(Arc<Slot<Resp>>);

impl<Resp: Send> Responder<Resp> for SlotResponder<Resp> {
    fn respond(self: Box<Self>, answer: Result<Resp, CallError>) {
        self.0.fill(answer);
    }
}

struct Request<Req, Resp> {
    req: Req,
    reply: Box<dyn Responder<Resp>>,
    /// The caller and the request's number (service introspection).
    id: RequestId,
}

/// A reply that tells the service's introspection it was sent.
struct Introspected<Resp> {
    reply: Box<dyn Responder<Resp>>,
    intro: Arc<Introspector>,
    id: RequestId,
}

impl<Resp: Message> Responder<Resp> for Introspected<Resp> {
    fn respond(self: Box<Self>, answer: Result<Resp, CallError>) {
        let sent = answer.as_ref().ok().map(|r| body_of(&self.intro, r));
        self.reply.respond(answer);
        // As rcl: after the response went (an error is not a response).
        if let Some(body) = sent {
            self.intro.publish(RESPONSE_SENT, self.id, body.as_deref());
        }
    }
}

/// Options for [`Node::create_service_with`](crate::Node::create_service_with).
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    /// The callback group (default: the node's).
    pub callback_group: Option<CallbackGroup>,
    /// Run the callback in the caller's thread, inside `call` (no executor).
    pub inline: bool,
}

impl ServiceOptions {
    /// Options for an inline service.
    pub fn inline() -> Self {
        ServiceOptions {
            inline: true,
            ..ServiceOptions::default()
        }
    }

    /// Put the service in a callback group.
    pub fn with_group(mut self, group: &CallbackGroup) -> Self {
        self.callback_group = Some(group.clone());
        self
    }
}

/// A server's callback: it answers at once (its return value), or takes
/// the request's [`ServiceReply`] to answer later.
pub(crate) enum Handler<Req, Resp> {
    Now(Box<dyn FnMut(Req) -> Resp + Send>),
    Later(Box<dyn FnMut(Req, ServiceReply<Resp>) + Send>),
}

/// The answer to one request of a deferred server
/// ([`Node::create_deferred_service`](crate::Node::create_deferred_service)):
/// keep it, and [`send`](Self::send) the response when it is ready, from
/// any thread. Dropping it unanswered fails the call with
/// [`CallError::NotAnswered`], so a caller never waits out its timeout for
/// an answer that will not come.
pub struct ServiceReply<Resp> {
    reply: Option<Box<dyn Responder<Resp>>>,
    service: Arc<str>,
}

impl<Resp> ServiceReply<Resp> {
    /// Answer the request.
    pub fn send(mut self, response: Resp) {
        if let Some(r) = self.reply.take() {
            r.respond(Ok(response));
        }
    }

    /// The service's fully qualified name.
    pub fn service(&self) -> &str {
        &self.service
    }
}

impl<Resp> Drop for ServiceReply<Resp> {
    fn drop(&mut self) {
        if let Some(r) = self.reply.take() {
            let service = self.service.to_string();
            r.respond(Err(if std::thread::panicking() {
                CallError::ServerPanicked {
                    service,
                    message: "the deferred server panicked before answering".into(),
                }
            } else {
                CallError::NotAnswered(service)
            }));
        }
    }
}

impl<Resp> std::fmt::Debug for ServiceReply<Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceReply")
            .field("service", &self.service)
            .field("answered", &self.reply.is_none())
            .finish()
    }
}

pub(crate) struct ServiceInner<Req, Resp> {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) node: Arc<NodeInner>,
    queue: SegQueue<Request<Req, Resp>>,
    // SYNC: as a subscription's `queued` (set while queued or running).
    queued: AtomicBool,
    // SYNC: Release store on drop; Acquire loads by callers after pushing.
    alive: AtomicBool,
    pub(crate) target: RetainCell<ExecShared>,
    handler: TryLock<Handler<Req, Resp>>,
    /// The reply of the request the handler is answering now (one at a
    /// time: the handler is locked while it runs).
    in_flight: Mutex<Option<Box<dyn Responder<Resp>>>>,
    inline: bool,
    group: Arc<GroupInner>,
    /// Off, or the event publisher.
    introspection: IntrospectionCell,
}

impl<Req: Message, Resp: Message> ServiceInner<Req, Resp> {
    pub(crate) fn new(
        id: u64,
        name: String,
        node: Arc<NodeInner>,
        handler: Handler<Req, Resp>,
        options: &ServiceOptions,
        group: Arc<GroupInner>,
        ty: Option<ServiceTypeRef>,
    ) -> Self {
        ServiceInner {
            introspection: IntrospectionCell::new(ty),
            id,
            name,
            node,
            queue: SegQueue::new(),
            queued: AtomicBool::new(false),
            alive: AtomicBool::new(true),
            target: RetainCell::new(),
            handler: TryLock::new(handler),
            in_flight: Mutex::new(None),
            inline: options.inline,
            group,
        }
    }

    pub(crate) fn is_inline(&self) -> bool {
        self.inline
    }

    /// Run an answering-at-once handler (already locked) on one request.
    fn answer(
        &self,
        handler: &mut (dyn FnMut(Req) -> Resp + Send),
        req: Req,
    ) -> Result<Resp, CallError> {
        catch_unwind(AssertUnwindSafe(|| handler(req))).map_err(|p| self.panicked(&p))
    }

    fn panicked(&self, p: &Box<dyn std::any::Any + Send>) -> CallError {
        let message = crate::dispatch::panic_message(p);
        tracing::error!("server of {:?} panicked: {message}", self.name);
        CallError::ServerPanicked {
            service: self.name.clone(),
            message,
        }
    }

    /// Answer one queued request with the handler (already locked). The
    /// reply waits in `in_flight` while the handler runs, so dropping the
    /// server meanwhile answers the caller at once
    /// ([`CallError::ServiceUnavailable`]) instead of leaving it to its
    /// timeout; the handler's late answer is then dropped.
    ///
    /// A deferred handler gets the reply itself; if it panics, the reply
    /// it held answers [`CallError::ServerPanicked`] as it unwinds.
    fn serve(&self, handler: &mut Handler<Req, Resp>, r: Request<Req, Resp>) {
        let Request { req, mut reply, id } = r;
        if let Some(intro) = self.introspection.active() {
            intro.publish(REQUEST_RECEIVED, id, body_of(&intro, &req).as_deref());
            reply = Box::new(Introspected { reply, intro, id });
        }
        let handler = match handler {
            Handler::Now(h) => h,
            Handler::Later(h) => {
                let reply = ServiceReply {
                    reply: Some(reply),
                    service: Arc::from(self.name.as_str()),
                };
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| h(req, reply))) {
                    self.panicked(&p);
                }
                return;
            }
        };
        *self.in_flight.lock().unwrap_or_else(|e| e.into_inner()) = Some(reply);
        let answer = self.answer(handler.as_mut(), req);
        let reply = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(reply) = reply {
            reply.respond(answer);
        }
    }

    /// A request from another process (see [`RemoteCalls`]).
    pub(crate) fn submit_remote(
        self: &Arc<Self>,
        req: Req,
        reply: Box<dyn Responder<Resp>>,
        id: RequestId,
    ) {
        self.submit(Request { req, reply, id });
    }

    /// Queue a request and make sure someone serves it.
    fn submit(self: &Arc<Self>, r: Request<Req, Resp>) {
        self.queue.push(r);
        if !self.alive.load(Ordering::Acquire) {
            self.fail_pending();
            return;
        }
        if self.inline {
            self.run_inline();
        } else {
            self.signal();
        }
    }

    fn signal(self: &Arc<Self>) {
        if let Some(exec) = self.target.get()
            && !self.queued.swap(true, Ordering::SeqCst)
        {
            exec.enqueue(self.clone());
        }
    }

    /// Serve queued requests in this thread; if the handler is busy (a
    /// re-entrant or concurrent call), its holder drains the queue.
    fn run_inline(&self) {
        // SYNC: the hand-over of `SubInner::run_inline` (a fence after the
        // push, one after unlocking, then a second look), modelled by
        // myelin-sync's loom test `inline_hand_over_leaves_no_message_behind`.
        fence(Ordering::SeqCst);
        loop {
            let Some(mut h) = self.handler.try_lock() else {
                return;
            };
            while let Some(r) = self.queue.pop() {
                self.serve(&mut h, r);
            }
            drop(h);
            fence(Ordering::SeqCst);
            if self.queue.is_empty() {
                return;
            }
        }
    }

    /// Answer every pending request with `ServiceUnavailable`.
    pub(crate) fn fail_pending(&self) {
        while let Some(r) = self.queue.pop() {
            r.reply
                .respond(Err(CallError::ServiceUnavailable(self.name.clone())));
        }
    }

    /// Answer the request the handler is working on with
    /// `ServiceUnavailable` (the server is going away).
    fn fail_in_flight(&self) {
        let reply = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(reply) = reply {
            reply.respond(Err(CallError::ServiceUnavailable(self.name.clone())));
        }
    }

    pub(crate) fn set_target(&self, exec: Option<Arc<ExecShared>>) {
        self.target.set(exec);
    }

    fn kick(self: &Arc<Self>) {
        if !self.queue.is_empty() {
            self.signal();
        }
    }
}

impl<Req: Message, Resp: Message> Executable for ServiceInner<Req, Resp> {
    fn execute(self: Arc<Self>, exec: &ExecShared) -> Result<bool, SpinError> {
        let mut served = false;
        if !self.alive.load(Ordering::Acquire) {
            self.fail_pending();
        } else if self.target.is(exec)
            && let Some(mut h) = self.handler.try_lock()
            && let Some(r) = self.queue.pop()
        {
            self.serve(&mut h, r);
            served = true;
        }
        // SYNC: as in a subscription: clear (a SeqCst swap), then re-check.
        self.queued.swap(false, Ordering::SeqCst);
        self.kick();
        Ok(served)
    }

    fn attach(self: Arc<Self>, exec: Option<Arc<ExecShared>>) {
        self.set_target(exec);
        // As a subscription's (see `SubInner::attach`): a mark left by the
        // executor this service leaves (queued there, and that executor
        // never run again) would keep every later one from being told of
        // the requests waiting. A stale entry the old one still runs
        // serves nothing (not its target) and hands on what is pending.
        self.queued.store(false, Ordering::SeqCst);
        self.kick();
    }

    fn group(&self) -> &Arc<GroupInner> {
        &self.group
    }
}

/// A service server. Created by
/// [`Node::create_service`](crate::Node::create_service); dropping it removes
/// it, and pending requests get [`CallError::ServiceUnavailable`].
///
/// ```
/// use std::time::Duration;
/// use myelin_core::{Context, Executor};
///
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("doubler")?;
/// let _service = node.create_service::<i64, i64>("double", |x| 2 * x)?;
/// let mut executor = Executor::new();
/// executor.add_node(&node)?;
/// let stop = executor.stop_handle();
/// let spinner = std::thread::spawn(move || executor.spin());
///
/// let client = node.create_client::<i64, i64>("double")?;
/// assert_eq!(client.call(21, Duration::from_secs(5))?, 42);
/// stop.stop();
/// spinner.join().unwrap()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Service<Req: Message, Resp: Message> {
    pub(crate) inner: Arc<ServiceInner<Req, Resp>>,
    /// What receives requests from other processes (kept alive with the
    /// service).
    pub(crate) _remote: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl<Req: Message, Resp: Message> Service<Req, Resp> {
    /// The fully qualified service name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Turn service introspection on or off for this server (see
    /// [`crate::introspection`]): `REQUEST_RECEIVED` and `RESPONSE_SENT`
    /// events on `<service>/_service_event`, published with `qos`. The
    /// service must have been made for a described ROS service type
    /// ([`Node::create_service_for`](crate::Node::create_service_for)).
    pub fn configure_introspection(
        &self,
        state: ServiceIntrospection,
        qos: crate::QoS,
    ) -> Result<(), IntrospectionError> {
        self.inner
            .introspection
            .configure(&self.inner.name, state, qos, None)
    }

    /// [`configure_introspection`](Self::configure_introspection) for a
    /// service typed at run time (made with a `RawServiceType`): the
    /// service type's description and its event type's hash
    /// (`pkg/srv/Name_Event`), which a Rust service type knows itself.
    pub fn configure_introspection_with(
        &self,
        state: ServiceIntrospection,
        qos: crate::QoS,
        description: crate::type_description::Described,
        event_type_hash: &str,
    ) -> Result<(), IntrospectionError> {
        self.inner.introspection.configure(
            &self.inner.name,
            state,
            qos,
            Some((description, event_type_hash.to_string())),
        )
    }
}

impl<Req: Message, Resp: Message> Drop for Service<Req, Resp> {
    fn drop(&mut self) {
        self.inner.alive.store(false, Ordering::Release);
        self.inner
            .node
            .ctx
            .graph
            .leave_service(&self.inner.name, self.inner.id);
        self.inner.fail_pending();
        self.inner.fail_in_flight();
        self.inner.set_target(None);
    }
}

impl<Req: Message, Resp: Message> std::fmt::Debug for Service<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("name", &self.inner.name)
            .field("request", &Req::TYPE_NAME)
            .field("response", &Resp::TYPE_NAME)
            .finish()
    }
}

pub(crate) struct ClientInner<Req: Message, Resp: Message> {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) node: Arc<NodeInner>,
    pub(crate) servers: ArcSwap<Vec<Arc<ServiceInner<Req, Resp>>>>,
    rr: AtomicUsize,
    /// Notified when the server list changes.
    pub(crate) changed: Event,
    /// Servers in other processes.
    pub(crate) remote: Option<Box<dyn RemoteCalls<Req, Resp>>>,
    /// The client's gid, as its requests carry it.
    gid: [u8; 16],
    /// The number of the last request (rmw's numbers start at 1).
    seq: std::sync::atomic::AtomicI64,
    /// Off, or the event publisher.
    introspection: IntrospectionCell,
}

impl<Req: Message, Resp: Message> ClientInner<Req, Resp> {
    pub(crate) fn new(
        id: u64,
        name: String,
        node: Arc<NodeInner>,
        gid: [u8; 16],
        ty: Option<ServiceTypeRef>,
    ) -> Self {
        ClientInner {
            id,
            name,
            node,
            gid,
            seq: std::sync::atomic::AtomicI64::new(0),
            introspection: IntrospectionCell::new(ty),
            servers: ArcSwap::from_pointee(Vec::new()),
            rr: AtomicUsize::new(0),
            changed: Event::new(Scope::Process),
            remote: None,
        }
    }

    /// The id of a new request.
    fn next_request(&self) -> RequestId {
        RequestId {
            gid: self.gid,
            seq: self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
        }
    }

    /// A server in another process can answer.
    pub(crate) fn remote_ready(&self) -> bool {
        if let Some(r) = &self.remote {
            return r.ready();
        }
        false
    }
}

/// A service client. Created by
/// [`Node::create_client`](crate::Node::create_client). Cheap to share
/// between threads (`call` takes `&self`).
///
/// ```
/// use std::time::Duration;
/// use myelin_core::{Context, ServiceOptions};
///
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("adder")?;
/// // Served in the caller's thread: no executor needed.
/// let _service = node.create_service_with::<i64, i64>(
///     "increment",
///     ServiceOptions::inline(),
///     |x| x + 1,
/// )?;
/// let client = node.create_client::<i64, i64>("increment")?;
/// assert!(client.wait_for_service(Duration::from_secs(5)));
/// assert_eq!(client.call(41, Duration::from_secs(5))?, 42);
/// // `call_async` returns a future (any async runtime can await it).
/// let _pending = client.call_async(1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Client<Req: Message, Resp: Message> {
    pub(crate) inner: Arc<ClientInner<Req, Resp>>,
}

impl<Req: Message, Resp: Message> Client<Req, Resp> {
    /// The fully qualified service name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether a server exists now (in this context, or in another process
    /// through shared memory).
    pub fn service_is_ready(&self) -> bool {
        !self.inner.servers.load().is_empty() || self.inner.remote_ready()
    }

    /// Wait until a server exists; returns whether one did within `timeout`.
    pub fn wait_for_service(&self, timeout: Duration) -> bool {
        let ctx = &self.inner.node.ctx;
        let deadline = crate::clock::deadline_after(timeout);
        loop {
            // Local servers wake us; remote ones are polled (discovery
            // takes a few milliseconds anyway).
            let step = (Instant::now() + Duration::from_millis(5)).min(deadline);
            let _ = self.inner.changed.wait_while(
                || !self.service_is_ready() && !ctx.is_shut_down(),
                Some(step),
            );
            if self.service_is_ready() {
                return true;
            }
            if ctx.is_shut_down() || Instant::now() >= deadline {
                return false;
            }
        }
    }

    fn pick(&self) -> Option<Arc<ServiceInner<Req, Resp>>> {
        let servers = self.inner.servers.load();
        if servers.is_empty() {
            return None;
        }
        let i = self.inner.rr.fetch_add(1, Ordering::Relaxed) % servers.len();
        Some(servers[i].clone())
    }

    /// Call the service and wait (in the kernel) for the answer. See the
    /// [module docs](self) for the failure modes.
    pub fn call(&self, req: Req, timeout: Duration) -> Result<Resp, CallError> {
        let id = self.inner.next_request();
        let intro = self.inner.introspection.active();
        let answer = self.call_as(req, id, timeout, intro.as_deref());
        if let (Some(i), Ok(r)) = (&intro, &answer) {
            i.publish(RESPONSE_RECEIVED, id, body_of(i, r).as_deref());
        }
        answer
    }

    /// [`call`](Self::call) with the request's id; `intro`: the client's
    /// introspection, told when the request goes.
    fn call_as(
        &self,
        req: Req,
        id: RequestId,
        timeout: Duration,
        intro: Option<&Introspector>,
    ) -> Result<Resp, CallError> {
        let sent = |req: &Req| {
            if let Some(i) = intro {
                i.publish(REQUEST_SENT, id, body_of(i, req).as_deref());
            }
        };
        let start = Instant::now();
        let deadline = start + timeout.min(crate::clock::FOREVER);
        let name = &self.inner.name;
        if self.inner.node.ctx.is_shut_down() {
            return Err(CallError::ContextShutDown(name.clone()));
        }
        let server = match self.pick() {
            Some(s) => s,
            None => {
                if !self.wait_for_service(timeout) {
                    return Err(CallError::NoServer {
                        service: name.clone(),
                        waited: start.elapsed(),
                    });
                }
                match self.pick() {
                    Some(s) => s,
                    None if self.inner.remote_ready() => {
                        let r = self.inner.remote.as_ref().expect("remote_ready");
                        sent(&req);
                        return r.call(name, req, id, deadline, timeout);
                    }
                    None => return Err(CallError::ServiceUnavailable(name.clone())),
                }
            }
        };
        // Called from inside a callback of the executor that serves it?
        let nested = match crate::dispatch::current() {
            Some((exec_addr, grouped, group_addr)) if !server.is_inline() => {
                match server.target.get() {
                    Some(exec) if exec.is_at(exec_addr) => {
                        if grouped
                            && Arc::as_ptr(&server.group) as usize == group_addr
                            && server.group.kind == crate::CallbackGroupKind::MutuallyExclusive
                        {
                            return Err(CallError::WouldDeadlock {
                                service: name.clone(),
                                reason: "the service is in the calling callback's mutually exclusive group; \
                                         put the service or the caller in another callback group",
                            });
                        }
                        Some((server.target.get_arc(), grouped))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        // Inline service, handler free: a plain function call, no slot.
        // (A deferred one answers through a slot like any queued request.)
        // (Introspected, it takes the queue, which tells of each request.)
        let req = if server.is_inline()
            && intro.is_none()
            && server.introspection.active().is_none()
            && let Some(mut h) = server.handler.try_lock()
        {
            match &mut *h {
                Handler::Now(f) => {
                    let answer = server.answer(f.as_mut(), req);
                    drop(h);
                    // Requests queued by others while we held the handler.
                    server.run_inline();
                    return answer;
                }
                Handler::Later(_) => req,
            }
        } else {
            req
        };
        let slot = Slot::new(match &nested {
            Some((Some(exec), _)) => Some(exec.clone()),
            _ => None,
        });
        sent(&req);
        server.submit(Request {
            req,
            reply: Box::new(SlotResponder(slot.clone())),
            id,
        });
        match nested {
            Some((Some(exec), grouped)) => {
                // Nested spin: run this executor's ready work until answered.
                while !slot.is_filled() {
                    if Instant::now() >= deadline {
                        return Err(CallError::Timeout {
                            service: name.clone(),
                            timeout,
                        });
                    }
                    if let Err(e) = exec.turn_until(
                        crate::dispatch::Until::At(deadline),
                        grouped,
                        Some(&|| slot.is_filled()),
                    ) {
                        tracing::error!("while waiting for {name:?}: {e}");
                    }
                    if self.inner.node.ctx.is_shut_down() && !slot.is_filled() {
                        return Err(CallError::ContextShutDown(name.clone()));
                    }
                }
            }
            _ => {
                let ctx = &self.inner.node.ctx;
                slot.event
                    .wait_while(|| !slot.is_filled() && !ctx.is_shut_down(), Some(deadline));
            }
        }
        match slot.take() {
            Some(answer) => answer,
            None if self.inner.node.ctx.is_shut_down() => {
                Err(CallError::ContextShutDown(name.clone()))
            }
            None => Err(CallError::Timeout {
                service: name.clone(),
                timeout,
            }),
        }
    }

    /// Call the service; the returned future resolves to the answer. It
    /// fails at once with [`CallError::NoServer`] if no server exists now
    /// (use [`wait_for_service`](Self::wait_for_service) first); apply your
    /// runtime's timeout to it. A server in this process takes the request
    /// into its queue; one in another process or host is called from a
    /// thread of the call's own, which gives up with
    /// [`CallError::Timeout`] after [`ASYNC_REMOTE_TIMEOUT`] without an
    /// answer (and at once if the server goes away).
    pub fn call_async(&self, req: Req) -> ResponseFuture<Resp> {
        let slot = Slot::new(None);
        let id = self.inner.next_request();
        let intro = self.inner.introspection.active();
        let sent = |req: &Req| {
            if let Some(i) = &intro {
                i.publish(REQUEST_SENT, id, body_of(i, req).as_deref());
            }
        };
        match self.pick() {
            Some(server) => {
                sent(&req);
                server.submit(Request {
                    req,
                    reply: Box::new(SlotResponder(slot.clone())),
                    id,
                })
            }
            None if self.inner.remote_ready() => {
                sent(&req);
                let inner = self.inner.clone();
                let answer = slot.clone();
                let spawned = std::thread::Builder::new()
                    .name("myelin-call".into())
                    .spawn(move || {
                        let r = inner.remote.as_ref().expect("remote_ready");
                        let deadline = Instant::now() + ASYNC_REMOTE_TIMEOUT;
                        answer.fill(r.call(&inner.name, req, id, deadline, ASYNC_REMOTE_TIMEOUT));
                    });
                if let Err(e) = spawned {
                    tracing::warn!("call to {:?}: no thread for it: {e}", self.inner.name);
                    slot.fill(Err(CallError::ServiceUnavailable(self.inner.name.clone())));
                }
            }
            None => slot.fill(Err(CallError::NoServer {
                service: self.inner.name.clone(),
                waited: Duration::ZERO,
            })),
        }
        ResponseFuture {
            slot,
            received: intro.map(|i| {
                Box::new(move |r: &Resp| {
                    i.publish(RESPONSE_RECEIVED, id, body_of(&i, r).as_deref())
                }) as Received<Resp>
            }),
        }
    }

    /// Turn service introspection on or off for this client (see
    /// [`crate::introspection`]): `REQUEST_SENT` and `RESPONSE_RECEIVED`
    /// events on `<service>/_service_event`, published with `qos`. The
    /// client must have been made for a described ROS service type
    /// ([`Node::create_client_for`](crate::Node::create_client_for)).
    pub fn configure_introspection(
        &self,
        state: ServiceIntrospection,
        qos: crate::QoS,
    ) -> Result<(), IntrospectionError> {
        self.inner
            .introspection
            .configure(&self.inner.name, state, qos, None)
    }

    /// [`configure_introspection`](Self::configure_introspection) for a
    /// service typed at run time (made with a `RawServiceType`): the
    /// service type's description and its event type's hash
    /// (`pkg/srv/Name_Event`), which a Rust service type knows itself.
    pub fn configure_introspection_with(
        &self,
        state: ServiceIntrospection,
        qos: crate::QoS,
        description: crate::type_description::Described,
        event_type_hash: &str,
    ) -> Result<(), IntrospectionError> {
        self.inner.introspection.configure(
            &self.inner.name,
            state,
            qos,
            Some((description, event_type_hash.to_string())),
        )
    }
}

/// How long a [`Client::call_async`] to a server in another process or
/// host waits for its answer before it resolves with
/// [`CallError::Timeout`].
pub const ASYNC_REMOTE_TIMEOUT: Duration = Duration::from_secs(600);

impl<Req: Message, Resp: Message> Drop for Client<Req, Resp> {
    fn drop(&mut self) {
        self.inner
            .node
            .ctx
            .graph
            .leave_service(&self.inner.name, self.inner.id);
    }
}

impl<Req: Message, Resp: Message> std::fmt::Debug for Client<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.inner.name)
            .field("servers", &self.inner.servers.load().len())
            .finish()
    }
}

/// What a [`ResponseFuture`] calls with the response it hands out.
type Received<Resp> = Box<dyn Fn(&Resp) + Send + Sync>;

/// The answer to [`Client::call_async`].
pub struct ResponseFuture<Resp> {
    slot: Arc<Slot<Resp>>,
    /// Tells the client's introspection of the response.
    received: Option<Received<Resp>>,
}

impl<Resp> ResponseFuture<Resp> {
    fn answered(&self, a: Result<Resp, CallError>) -> Poll<Result<Resp, CallError>> {
        if let (Some(tell), Ok(r)) = (&self.received, &a) {
            tell(r);
        }
        Poll::Ready(a)
    }
}

impl<Resp> Future for ResponseFuture<Resp> {
    type Output = Result<Resp, CallError>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        if let Some(a) = self.slot.take() {
            return self.answered(a);
        }
        *self.slot.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        self.slot.has_waker.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // Re-check: the answer may have come before the waker was stored.
        match self.slot.take() {
            Some(a) => self.answered(a),
            None => Poll::Pending,
        }
    }
}

impl<Resp> std::fmt::Debug for ResponseFuture<Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("answered", &self.slot.is_filled())
            .finish()
    }
}

/// The servers and clients on one service name, kept by the context's
/// graph.
pub(crate) struct ServiceEntities<Req: Message, Resp: Message> {
    servers: Vec<Arc<ServiceInner<Req, Resp>>>,
    clients: Vec<Arc<ClientInner<Req, Resp>>>,
}

impl<Req: Message, Resp: Message> Default for ServiceEntities<Req, Resp> {
    fn default() -> Self {
        ServiceEntities {
            servers: Vec::new(),
            clients: Vec::new(),
        }
    }
}

impl<Req: Message, Resp: Message> Members for ServiceEntities<Req, Resp> {
    fn remove(&mut self, id: u64) -> bool {
        let before = self.servers.len() + self.clients.len();
        self.servers.retain(|s| s.id != id);
        self.clients.retain(|c| c.id != id);
        let removed = self.servers.len() + self.clients.len() < before;
        if removed {
            self.publish_servers();
        }
        removed
    }

    fn counts(&self) -> (usize, usize) {
        (self.servers.len(), self.clients.len())
    }
}

impl<Req: Message, Resp: Message> ServiceEntities<Req, Resp> {
    /// Give every client the current server list and wake its waiters.
    pub(crate) fn publish_servers(&self) {
        let list = Arc::new(self.servers.clone());
        for c in &self.clients {
            c.servers.store(list.clone());
            c.changed.notify();
        }
    }
}

/// The type identity of a service: its request and response types.
fn service_type_id<Req: 'static, Resp: 'static>() -> TypeId {
    TypeId::of::<(Req, Resp)>()
}

/// A service's types as `Request -> Response`.
fn service_types<Req: Message, Resp: Message>() -> String {
    format!("{} -> {}", Req::TYPE_NAME, Resp::TYPE_NAME)
}

/// Refuse other request/response types on a service name the context
/// already has (before anything is created for it).
pub(crate) fn check_type<Req: Message, Resp: Message>(
    graph: &Graph,
    name: &str,
) -> Result<(), CreateServiceError> {
    graph.check_service_type(
        name,
        service_type_id::<Req, Resp>(),
        service_types::<Req, Resp>,
    )
}

/// Register a server under its name, and give the clients the new list.
pub(crate) fn add_server<Req: Message, Resp: Message>(
    graph: &Graph,
    s: Arc<ServiceInner<Req, Resp>>,
) -> Result<(), CreateServiceError> {
    let name = s.name.clone();
    graph.join_service(
        &name,
        service_type_id::<Req, Resp>(),
        service_types::<Req, Resp>(),
        |ents: &mut ServiceEntities<Req, Resp>| {
            ents.servers.push(s);
            ents.publish_servers();
        },
    )
}

/// Register a client under its name, and give it the servers.
pub(crate) fn add_client<Req: Message, Resp: Message>(
    graph: &Graph,
    c: Arc<ClientInner<Req, Resp>>,
) -> Result<(), CreateServiceError> {
    let name = c.name.clone();
    graph.join_service(
        &name,
        service_type_id::<Req, Resp>(),
        service_types::<Req, Resp>(),
        |ents: &mut ServiceEntities<Req, Resp>| {
            ents.clients.push(c);
            ents.publish_servers();
        },
    )
}

/// How a client reaches servers in other processes (built by the node from
/// a publisher and a subscription: see `node::remote_services`).
pub(crate) trait RemoteCalls<Req, Resp>: Send + Sync {
    /// A server in another process can take requests and answer.
    fn ready(&self) -> bool;
    /// Call a remote server; wait until `deadline` (`timeout` is reported
    /// in the error).
    fn call(
        &self,
        service: &str,
        req: Req,
        id: RequestId,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Resp, CallError>;
}
