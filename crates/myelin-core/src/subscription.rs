//! Subscriptions: one buffer each, a callback run by an executor, and
//! synchronous `take` / `wait_for_message` for code that runs its own loop.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use myelin_sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use myelin_sync::{RetainCell, TryLock};

use crate::buffer::{Buffer, Pushed, Received};
use crate::error::SpinError;
use crate::events::{
    DeadlineMissedStatus, EventQueue, LivelinessChangedStatus, MatchedStatus, Status,
    SubscriptionEvent,
};
use crate::executor::{ExecShared, Executable};
use crate::group::{CallbackGroup, GroupInner};
use crate::message::Message;
use crate::node::NodeInner;
use crate::publisher::IncompatibleQos;
use crate::publisher::LivelinessToken;
use crate::qos::{IncompatibleQosStatus, QoS, QosPolicy};
use crate::transport::{SubLink, SubOwner};
use crate::waitpoint::WaitPoint;
use crate::wire::SharedBytes;

/// What a subscription's buffer stores (seed 000's `BufferT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BufferKind {
    /// Chosen from the callback: `FnMut(T)` and `FnMut(Box<T>)` want
    /// ownership (`Owned`); `FnMut(Arc<T>)` and `FnMut(&T)` do not (`Shared`).
    #[default]
    CallbackDefault,
    /// The buffer owns its message: the publisher's original or a copy.
    Owned,
    /// The buffer holds an `Arc` shared with other subscriptions (no copy at
    /// publish; a callback that wants ownership copies at take time only if
    /// the `Arc` is still shared).
    Shared,
    /// The buffer always gets its own copy (useful for small messages).
    Value,
}

/// Options for [`Node::create_subscription_with`](crate::Node::create_subscription_with).
#[derive(Clone, Default)]
pub struct SubscriptionOptions {
    /// The callback group (default: the node's mutually exclusive group).
    /// Matters only on a [`MultiThreadedExecutor`](crate::MultiThreadedExecutor).
    pub callback_group: Option<CallbackGroup>,
    /// The buffer kind.
    pub buffer: BufferKind,
    /// Run the callback inline, in the publisher's thread, inside
    /// `publish` (as zenoh does within one session, and LibXR always does):
    /// no executor, no wake-up, the cost of a function call. The publisher
    /// waits for the callback, so keep it short. If the callback is already
    /// running (it publishes on its own topic, or another thread publishes
    /// meanwhile), the message is buffered and the running call drains it
    /// before returning: never a deadlock, never a loss. A panic in an inline
    /// callback is returned by `publish` as
    /// [`PublishError::CallbackPanicked`](crate::PublishError::CallbackPanicked).
    /// An inline callback must not publish on a transient-local publisher of
    /// its own topic (that publisher delivers under its history lock).
    pub inline: bool,
    /// Called by the node's executor for each [`SubscriptionEvent`]
    /// (deadline missed, liveliness changed, matched, incompatible QoS).
    pub event_callback: Option<SharedEventCallback<SubscriptionEvent>>,
}

impl std::fmt::Debug for SubscriptionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionOptions")
            .field("buffer", &self.buffer)
            .field("inline", &self.inline)
            .field("callback_group", &self.callback_group)
            .field("event_callback", &self.event_callback.is_some())
            .finish()
    }
}

/// An event callback as stored in options (shareable, so options can be
/// cloned).
pub type SharedEventCallback<E> = Arc<dyn Fn(E) + Send + Sync>;

impl SubscriptionOptions {
    /// Options with a given buffer kind.
    pub fn buffer(kind: BufferKind) -> Self {
        SubscriptionOptions {
            buffer: kind,
            ..SubscriptionOptions::default()
        }
    }

    /// Options for inline delivery (see [`SubscriptionOptions::inline`]).
    pub fn inline() -> Self {
        SubscriptionOptions {
            inline: true,
            ..SubscriptionOptions::default()
        }
    }

    /// Change the buffer kind.
    pub fn with_buffer(mut self, kind: BufferKind) -> Self {
        self.buffer = kind;
        self
    }

    /// Put the subscription in a callback group.
    pub fn with_group(mut self, group: &CallbackGroup) -> Self {
        self.callback_group = Some(group.clone());
        self
    }

    /// Receive [`SubscriptionEvent`]s through the executor.
    pub fn on_event(mut self, f: impl Fn(SubscriptionEvent) + Send + Sync + 'static) -> Self {
        self.event_callback = Some(Arc::new(f));
        self
    }
}

/// How the publisher hands a message to a subscription (resolved buffer kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    Owned,
    Shared,
    Value,
}

/// Markers that tell the callback signatures apart (type inference picks one
/// from the closure's argument type).
pub mod marker {
    /// `FnMut(T)`.
    #[derive(Debug)]
    pub enum ByValue {}
    /// `FnMut(Box<T>)`.
    #[derive(Debug)]
    pub enum ByBox {}
    /// `FnMut(Arc<T>)`.
    #[derive(Debug)]
    pub enum ByArc {}
    /// `FnMut(&T)`.
    #[derive(Debug)]
    pub enum ByRef {}
    /// `FnMut(Received<T>)`: whatever the buffer holds, without conversion.
    #[derive(Debug)]
    pub enum ByReceived {}
}

/// A subscription callback: a closure taking `T`, `Box<T>`, `Arc<T>`, `&T`
/// or [`Received<T>`]. Annotate the argument type (`|msg: Arc<Image>| ...`)
/// so the right signature is chosen.
pub trait SubscriptionCallback<T, Marker>: Send + 'static {
    /// Whether this signature wants ownership (decides `CallbackDefault`).
    const WANTS_OWNERSHIP: bool;
    /// Turn into the type-erased form the executor calls.
    fn into_dispatch(self) -> Box<dyn FnMut(Received<T>) + Send>;
}

impl<T: Message, F: FnMut(T) + Send + 'static> SubscriptionCallback<T, marker::ByValue> for F {
    const WANTS_OWNERSHIP: bool = true;
    fn into_dispatch(mut self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(move |r| self(r.into_owned()))
    }
}

impl<T: Message, F: FnMut(Box<T>) + Send + 'static> SubscriptionCallback<T, marker::ByBox> for F {
    const WANTS_OWNERSHIP: bool = true;
    fn into_dispatch(mut self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(move |r| self(Box::new(r.into_owned())))
    }
}

impl<T: Message, F: FnMut(Arc<T>) + Send + 'static> SubscriptionCallback<T, marker::ByArc> for F {
    const WANTS_OWNERSHIP: bool = false;
    fn into_dispatch(mut self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(move |r| self(r.into_shared()))
    }
}

impl<T: Message, F: for<'a> FnMut(&'a T) + Send + 'static> SubscriptionCallback<T, marker::ByRef>
    for F
{
    const WANTS_OWNERSHIP: bool = false;
    fn into_dispatch(mut self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(move |r| self(&r))
    }
}

impl<T: Message, F: FnMut(Received<T>) + Send + 'static> SubscriptionCallback<T, marker::ByReceived>
    for F
{
    const WANTS_OWNERSHIP: bool = false;
    fn into_dispatch(self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(self)
    }
}

/// A type-erased subscription callback.
pub(crate) type Dispatch<T> = Box<dyn FnMut(Received<T>) + Send>;

pub(crate) struct SubInner<T> {
    pub(crate) id: u64,
    pub(crate) topic: String,
    pub(crate) qos: QoS,
    pub(crate) delivery: Delivery,
    pub(crate) node: Arc<NodeInner>,
    buffer: Buffer<T>,
    lost: AtomicU64,
    /// Set from the moment this subscription is put in its executor's ready
    /// queue until its callback has returned: a burst of messages enqueues it
    /// once, and no second worker can run it concurrently.
    // SYNC: SeqCst swap in `signal` pairs with the SeqCst swap(false) + fence +
    // re-check at the end of `execute`.
    queued: AtomicBool,
    group: Arc<GroupInner>,
    /// The executor to wake (None until the node is added to one). Read on
    /// every message with one load; changes only when the node moves.
    target: RetainCell<ExecShared>,
    /// Synchronous waiters, async streams and wait sets (polling only).
    waitpoint: Arc<WaitPoint>,
    callback: Option<TryLock<Dispatch<T>>>,
    /// Deliver in the publisher's thread.
    inline: bool,
    /// Messages dropped at take time because their lifespan had passed.
    expired: AtomicU64,
    /// Messages pushed (counted only with a deadline).
    received_count: AtomicU64,
    pub(crate) deadline_status: Status<DeadlineMissedStatus>,
    pub(crate) liveliness_status: Status<LivelinessChangedStatus>,
    pub(crate) matched_status: Status<MatchedStatus>,
    /// Matched publishers' liveliness and whether each was alive last time.
    pub_liveliness: std::sync::Mutex<Vec<(Arc<LivelinessToken>, bool)>>,
    pub(crate) events: Option<Arc<EventQueue<SubscriptionEvent>>>,
    /// The deadline and liveliness checkers (timers on the node's executor).
    pub(crate) checkers: std::sync::Mutex<Vec<crate::Timer>>,
    /// The panic message of the last inline callback that panicked.
    inline_panic: std::sync::Mutex<Option<String>>,
    pub(crate) incompatible: IncompatibleQos,
    /// Matched publishers in this context (set by the graph).
    local_matched: myelin_sync::atomic::AtomicU32,
    /// One link per transport that carries this subscription (publishers
    /// in other processes and hosts).
    pub(crate) links: Box<[Arc<dyn SubLink>]>,
    /// Whether any link's messages wait to be drained (shared memory):
    /// then the executor (or a polling waiter) drains it when woken.
    pumped: bool,
}

/// Everything a subscription is made of, resolved by the node.
pub(crate) struct SubSpec<T> {
    pub(crate) id: u64,
    pub(crate) topic: String,
    pub(crate) qos: QoS,
    pub(crate) delivery: Delivery,
    pub(crate) node: Arc<NodeInner>,
    pub(crate) callback: Option<Dispatch<T>>,
    pub(crate) inline: bool,
    pub(crate) group: Arc<GroupInner>,
    pub(crate) events: Option<Arc<EventQueue<SubscriptionEvent>>>,
    pub(crate) links: Vec<Arc<dyn SubLink>>,
}

impl<T: Message> SubInner<T> {
    pub(crate) fn new(spec: SubSpec<T>) -> Self {
        let SubSpec {
            id,
            topic,
            qos,
            delivery,
            node,
            callback,
            inline,
            group,
            events,
            links,
        } = spec;
        let pumped = links.iter().any(|l| l.pumped());
        let waitpoint = if pumped && callback.is_none() {
            // A polling subscription sleeps on its own slot, which remote
            // publishers signal directly.
            WaitPoint::with_event(crate::transport::wake::WakeEvent::remote_capable())
        } else {
            WaitPoint::new()
        };
        if callback.is_none() {
            let word = waitpoint.event.word(0);
            for l in &links {
                l.set_wake(word);
            }
        }
        SubInner {
            id,
            topic,
            qos,
            delivery,
            node,
            buffer: Buffer::new(&qos),
            lost: AtomicU64::new(0),
            queued: AtomicBool::new(false),
            group,
            target: RetainCell::new(),
            waitpoint,
            inline: inline && callback.is_some(),
            callback: callback.map(TryLock::new),
            inline_panic: std::sync::Mutex::new(None),
            expired: AtomicU64::new(0),
            received_count: AtomicU64::new(0),
            deadline_status: Status::new(),
            liveliness_status: Status::new(),
            matched_status: Status::new(),
            pub_liveliness: std::sync::Mutex::new(Vec::new()),
            events,
            checkers: std::sync::Mutex::new(Vec::new()),
            incompatible: IncompatibleQos::default(),
            local_matched: myelin_sync::atomic::AtomicU32::new(0),
            links: links.into_boxed_slice(),
            pumped,
        }
    }

    /// Publishers in other processes connected to this subscription now.
    pub(crate) fn remote_publishers(&self) -> usize {
        self.links.iter().map(|l| l.connected()).sum()
    }

    /// Move messages other processes sent into the buffer (polling
    /// subscriptions call this before looking at the buffer).
    #[inline]
    pub(crate) fn pump_now(&self) {
        if self.pumped {
            self.waitpoint.event.take_pending();
            for l in self.links.iter() {
                if l.has_data() {
                    l.pump();
                }
            }
        }
    }

    /// Drain every pumped link.
    fn pump_links(&self) {
        for l in self.links.iter() {
            l.pump();
        }
    }

    pub(crate) fn has_callback(&self) -> bool {
        self.callback.is_some()
    }

    pub(crate) fn waitpoint(&self) -> &Arc<WaitPoint> {
        &self.waitpoint
    }

    pub(crate) fn has_data(&self) -> bool {
        !self.buffer.is_empty()
    }

    pub(crate) fn limit(&self) -> usize {
        self.buffer.limit()
    }

    /// The oldest message still within its lifespan; expired ones are
    /// dropped and counted.
    #[inline]
    pub(crate) fn pop_live(&self) -> Option<Received<T>> {
        loop {
            let (item, expires) = self.buffer.pop()?;
            if expires != 0 && crate::clock::now_ns() > expires {
                self.expired.fetch_add(1, Ordering::Relaxed);
                self.lost.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            return Some(item);
        }
    }

    pub(crate) fn emit(&self, e: SubscriptionEvent) {
        if let Some(q) = &self.events {
            q.emit(e);
        }
    }

    /// The deadline checker found no message in the last period.
    pub(crate) fn check_deadline(self: &Arc<Self>, last_seen: &mut u64) {
        let n = self.received_count.load(Ordering::Relaxed);
        if n > 0 && n == *last_seen {
            let st = self.deadline_status.update(|s| {
                s.total_count += 1;
                s.total_count_change += 1;
            });
            self.emit(SubscriptionEvent::RequestedDeadlineMissed(st));
        }
        *last_seen = n;
    }

    /// Re-evaluate the liveliness of the matched publishers (called by the
    /// graph when matches change, and by the lease checker).
    pub(crate) fn update_liveliness(self: &Arc<Self>, tokens: Option<Vec<Arc<LivelinessToken>>>) {
        let now = crate::clock::now_ns();
        let mut pubs = self
            .pub_liveliness
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (mut d_alive, mut d_not) = (0i32, 0i32);
        if let Some(tokens) = tokens {
            // Publishers that went away.
            pubs.retain(|(t, alive)| {
                let keep = tokens.iter().any(|n| Arc::ptr_eq(n, t));
                if !keep {
                    if *alive { d_alive -= 1 } else { d_not -= 1 }
                }
                keep
            });
            // New publishers.
            for t in tokens {
                if !pubs.iter().any(|(p, _)| Arc::ptr_eq(p, &t)) {
                    let alive = t.is_alive(now);
                    if alive {
                        d_alive += 1
                    } else {
                        d_not += 1
                    }
                    pubs.push((t, alive));
                }
            }
        }
        for (t, alive) in pubs.iter_mut() {
            let now_alive = t.is_alive(now);
            if now_alive != *alive {
                if now_alive {
                    d_alive += 1;
                    d_not -= 1;
                } else {
                    d_alive -= 1;
                    d_not += 1;
                }
                *alive = now_alive;
            }
        }
        drop(pubs);
        if d_alive != 0 || d_not != 0 {
            let st = self.liveliness_status.update(|s| {
                s.alive_count = (s.alive_count as i32 + d_alive).max(0) as u32;
                s.not_alive_count = (s.not_alive_count as i32 + d_not).max(0) as u32;
                s.alive_count_change += d_alive;
                s.not_alive_count_change += d_not;
            });
            self.emit(SubscriptionEvent::LivelinessChanged(st));
        }
    }

    /// The graph counted `current` matched publishers in this context.
    pub(crate) fn update_matched(self: &Arc<Self>, current: u32) {
        self.local_matched.store(current, Ordering::Relaxed);
        self.refresh_matched();
    }

    /// Publish the matched status: local plus remote publishers.
    pub(crate) fn refresh_matched(&self) {
        let n = self.local_matched.load(Ordering::Relaxed) + self.remote_publishers() as u32;
        if let Some(st) = self.matched_status.set_current(n) {
            self.emit(SubscriptionEvent::Matched(st));
        }
    }

    #[inline]
    pub(crate) fn push_owned(self: &Arc<Self>, msg: T, expires: u64) -> Pushed {
        self.push(Received::Owned(msg), expires)
    }

    #[inline]
    pub(crate) fn push_received(self: &Arc<Self>, msg: Received<T>, expires: u64) -> Pushed {
        self.push(msg, expires)
    }

    #[inline]
    pub(crate) fn push_shared(self: &Arc<Self>, msg: Arc<T>, expires: u64) -> Pushed {
        self.push(Received::Shared(msg), expires)
    }

    #[inline]
    fn push(self: &Arc<Self>, item: Received<T>, expires: u64) -> Pushed {
        if self.qos.deadline.is_some() {
            self.received_count.fetch_add(1, Ordering::Relaxed);
        }
        let r = self.buffer.push((item, expires));
        match r {
            Pushed::Stored => {}
            Pushed::Overwrote => {
                self.lost.fetch_add(1, Ordering::Relaxed);
            }
            Pushed::Refused | Pushed::Panicked => {
                self.lost.fetch_add(1, Ordering::Relaxed);
                return r;
            }
        }
        if self.inline {
            if let Some(message) = self.run_inline() {
                *self.inline_panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(message);
                return Pushed::Panicked;
            }
            return r;
        }
        self.signal();
        r
    }

    /// Push without waking anyone (history replay under the graph lock);
    /// the caller calls [`kick`](Self::kick) once the locks are released.
    pub(crate) fn push_quiet(&self, msg: Arc<T>, expires: u64) {
        if self.buffer.push((Received::Shared(msg), expires)) != Pushed::Stored {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Drain the buffer through the callback in this thread. Returns the
    /// panic message if the callback panicked.
    fn run_inline(&self) -> Option<String> {
        let cb = self.callback.as_ref()?;
        // SYNC: pairs with the fence after unlocking below: either the
        // holder sees our push when it re-checks, or we get the lock.
        myelin_sync::atomic::fence(Ordering::SeqCst);
        loop {
            // Busy: the holder drains our message before it returns.
            let mut guard = cb.try_lock()?;
            while let Some(item) = self.pop_live() {
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| (guard)(item))) {
                    return Some(crate::executor::panic_message(&p));
                }
            }
            drop(guard);
            // SYNC: pairs with the fence before `try_lock` above.
            myelin_sync::atomic::fence(Ordering::SeqCst);
            if self.buffer.is_empty() {
                return None;
            }
        }
    }

    /// The last inline panic, as an error naming this subscription.
    pub(crate) fn take_inline_panic(&self) -> Option<(String, String)> {
        let m = self
            .inline_panic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        Some((self.describe(), m))
    }

    /// Tell whoever waits that the buffer is not empty.
    #[inline]
    fn signal(self: &Arc<Self>) {
        if self.callback.is_some() {
            if let Some(exec) = self.target.get() {
                // SYNC: pairs with the swap(false) + fence in `execute`.
                if !self.queued.swap(true, Ordering::SeqCst) {
                    exec.enqueue(self.clone());
                }
            }
        } else {
            // Only subscriptions without a callback have waiters.
            self.waitpoint.notify();
        }
    }

    /// Point this subscription at an executor (or none).
    pub(crate) fn set_target(&self, exec: Option<Arc<ExecShared>>) {
        self.target.set(exec);
    }

    /// Called by an executor when this subscription is attached to it: make
    /// sure messages buffered before the attachment are not forgotten.
    pub(crate) fn kick(self: &Arc<Self>) {
        if !self.buffer.is_empty() {
            if self.inline {
                if let Some(m) = self.run_inline() {
                    tracing::error!(
                        "inline callback of {} panicked during history replay: {m}",
                        self.describe()
                    );
                }
            } else {
                self.signal();
            }
        }
    }

    pub(crate) fn describe(&self) -> String {
        format!("subscription {:?} of node {:?}", self.topic, self.node.fqn)
    }
}

impl<T: Message> Executable for SubInner<T> {
    fn execute(self: Arc<Self>, exec: &ExecShared) -> Result<(), SpinError> {
        let mut result = Ok(());
        // Not ours any more (dropped, detached or moved while queued): only
        // hand the queued mark back; `kick` below forwards pending messages.
        if self.target.is(exec)
            && let Some(cb) = &self.callback
            // `queued` stays set while we run, so this is never contended.
            && let Some(mut cb) = cb.try_lock()
            && let Some(item) = self.pop_live()
            && let Err(panic) = catch_unwind(AssertUnwindSafe(|| (cb)(item)))
        {
            result = Err(SpinError::CallbackPanicked {
                entity: self.describe(),
                message: crate::executor::panic_message(&panic),
            });
        }
        // SYNC: pairs with the swap in `signal`: a push that saw the mark set
        // did not enqueue us, so re-check after clearing it.
        self.queued.swap(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // More messages: back to the end of the (current) executor's queue.
        self.kick();
        result
    }

    fn attach(self: Arc<Self>, exec: Option<Arc<ExecShared>>) {
        if self.pumped {
            if let Some(old) = self.target.get() {
                old.remove_pump(Arc::as_ptr(&self) as *const ());
            }
            // The executor gives this subscription a ready lane; publishers
            // in other processes signal it.
            let word = exec.as_ref().and_then(|e| {
                let weak: std::sync::Weak<dyn crate::executor::Pump> =
                    Arc::downgrade(&(self.clone() as Arc<dyn crate::executor::Pump>));
                e.add_pump(weak)
            });
            for l in self.links.iter() {
                l.set_wake(word);
            }
        }
        self.set_target(exec);
        if self.pumped {
            // Messages that arrived before the executor did.
            self.pump_links();
        }
        self.kick();
    }

    fn group(&self) -> &Arc<GroupInner> {
        &self.group
    }
}

impl<T: Message> crate::executor::Pump for SubInner<T> {
    fn pump(self: Arc<Self>) {
        self.pump_links();
    }
}

impl<T: Message> SubOwner for SubInner<T> {
    fn deliver(self: Arc<Self>, bytes: SharedBytes) {
        match crate::buffer::from_wire::<T>(bytes) {
            Ok(m) => {
                self.push(m, 0);
            }
            Err(e) => {
                self.lost.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "{}: dropping a message from another process: {e}",
                    self.describe()
                );
            }
        }
    }

    fn count_lost(&self, n: u64) {
        self.lost.fetch_add(n, Ordering::Relaxed);
    }

    fn incompatible_qos(&self, policy: QosPolicy) {
        self.incompatible.record(policy);
        self.emit(SubscriptionEvent::IncompatibleQos(self.incompatible.get()));
    }

    fn links_changed(&self) {
        self.refresh_matched();
    }
}

/// A subscription to a topic of type `T`. Created by
/// [`Node::create_subscription`](crate::Node::create_subscription) (callback
/// run by an executor) or
/// [`Node::create_polling_subscription`](crate::Node::create_polling_subscription)
/// (no callback: [`take`](Self::take) / [`wait_for_message`](Self::wait_for_message)).
/// Dropping it removes it from the graph.
pub struct Subscription<T: Message> {
    pub(crate) inner: Arc<SubInner<T>>,
}

/// Waiting for a message failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WaitError {
    /// Nothing arrived in time.
    #[error("no message on {topic:?} within {timeout:?}")]
    Timeout {
        /// The topic.
        topic: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The context was shut down while waiting.
    #[error("stopped waiting on {0:?}: the context is shut down")]
    ContextShutDown(String),
    /// The topic's last publisher was dropped while waiting.
    #[error("stopped waiting on {0:?}: its last publisher was dropped")]
    PublisherGone(String),
}

/// The messages of a polling subscription as an async stream. See
/// [`Subscription::stream`].
pub struct SubscriptionStream<'a, T: Message> {
    sub: &'a Subscription<T>,
}

impl<T: Message> futures_core::Stream for SubscriptionStream<'_, T> {
    type Item = Received<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Received<T>>> {
        let inner = &self.sub.inner;
        inner.pump_now();
        if let Some(m) = inner.pop_live() {
            return Poll::Ready(Some(m));
        }
        if inner.node.ctx.is_shut_down() {
            return Poll::Ready(None);
        }
        inner.waitpoint.register_waker(cx.waker());
        // Re-check: a message (or shutdown) may have come before the waker
        // was visible.
        if let Some(m) = inner.pop_live() {
            return Poll::Ready(Some(m));
        }
        if inner.node.ctx.is_shut_down() {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

impl<T: Message> std::fmt::Debug for SubscriptionStream<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionStream")
            .field("topic", &self.sub.inner.topic)
            .finish()
    }
}

impl<T: Message> Subscription<T> {
    /// Take the oldest buffered message without waiting. On a subscription
    /// with a callback this competes with the executor; it is meant for
    /// polling subscriptions.
    pub fn take(&self) -> Option<Received<T>> {
        self.inner.pump_now();
        self.inner.pop_live()
    }

    /// Block until a message arrives (sleeping in the kernel) or `timeout`
    /// passes, as LibXR's synchronous subscribers do. Returns
    /// [`WaitError::PublisherGone`] if the topic's last publisher is dropped
    /// while waiting, and [`WaitError::ContextShutDown`] on shutdown. A shared message is
    /// handed over as an `Arc`, never copied.
    ///
    /// For subscriptions created with
    /// [`Node::create_polling_subscription`](crate::Node::create_polling_subscription):
    /// a subscription with a callback hands its messages to its executor and
    /// does not wake blocked waiters (waiting on it returns at the timeout).
    pub fn wait_for_message(&self, timeout: Duration) -> Result<Received<T>, WaitError> {
        let deadline = Instant::now() + timeout;
        let ctx = &self.inner.node.ctx;
        let wp = &self.inner.waitpoint;
        let gone_at_start = wp.gone_count();
        let mut got = None;
        wp.event.wait_while(
            || {
                self.inner.pump_now();
                got = self.inner.pop_live();
                got.is_none() && !ctx.is_shut_down() && wp.gone_count() == gone_at_start
            },
            Some(deadline),
        );
        match got {
            Some(m) => Ok(m),
            None if ctx.is_shut_down() => Err(WaitError::ContextShutDown(self.inner.topic.clone())),
            None if wp.gone_count() != gone_at_start => {
                Err(WaitError::PublisherGone(self.inner.topic.clone()))
            }
            None => Err(WaitError::Timeout {
                topic: self.inner.topic.clone(),
                timeout,
            }),
        }
    }

    /// The messages of this (polling) subscription as a
    /// [`futures_core::Stream`], in order; it ends when the context shuts
    /// down. Works with any async runtime (myelin depends on none). A
    /// subscription with a callback hands its messages to its executor
    /// instead.
    pub fn stream(&self) -> SubscriptionStream<'_, T> {
        SubscriptionStream { sub: self }
    }

    /// Messages this subscription lost: overwritten in its keep_last ring,
    /// or refused by its full keep_all FIFO.
    pub fn lost(&self) -> u64 {
        self.inner.lost.load(Ordering::Relaxed)
    }

    /// Messages dropped at take time because their lifespan had passed
    /// (also counted in [`lost`](Self::lost)).
    pub fn expired(&self) -> u64 {
        self.inner.expired.load(Ordering::Relaxed)
    }

    /// The requested-deadline-missed status.
    pub fn deadline_missed(&self) -> DeadlineMissedStatus {
        self.inner.deadline_status.get()
    }

    /// The liveliness of the matched publishers.
    pub fn liveliness_changed(&self) -> LivelinessChangedStatus {
        self.inner.liveliness_status.get()
    }

    /// The subscription-matched status.
    pub fn matched(&self) -> MatchedStatus {
        self.inner.matched_status.get()
    }

    /// [`deadline_missed`](Self::deadline_missed), resetting its change count.
    pub fn take_deadline_missed(&self) -> DeadlineMissedStatus {
        self.inner
            .deadline_status
            .take(|s| s.total_count_change = 0)
    }

    /// [`liveliness_changed`](Self::liveliness_changed), resetting its change counts.
    pub fn take_liveliness_changed(&self) -> LivelinessChangedStatus {
        self.inner.liveliness_status.take(|s| {
            s.alive_count_change = 0;
            s.not_alive_count_change = 0;
        })
    }

    /// [`matched`](Self::matched), resetting its change counts.
    pub fn take_matched(&self) -> MatchedStatus {
        self.inner.matched_status.take(|s| {
            s.total_count_change = 0;
            s.current_count_change = 0;
        })
    }

    /// Publishers currently matched (compatible QoS, same type).
    pub fn matched_count(&self) -> usize {
        self.inner.matched_status.get().current_count as usize
    }

    /// Messages currently buffered.
    pub fn buffered(&self) -> usize {
        self.inner.buffer.len()
    }

    /// The fully qualified topic name.
    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// The QoS this subscription requested.
    pub fn qos(&self) -> QoS {
        self.inner.qos
    }

    /// The buffer kind in use (after resolving `CallbackDefault`).
    pub fn buffer_kind(&self) -> BufferKind {
        match self.inner.delivery {
            Delivery::Owned => BufferKind::Owned,
            Delivery::Shared => BufferKind::Shared,
            Delivery::Value => BufferKind::Value,
        }
    }

    /// How many publishers are on this topic in this context (matched or
    /// not; see [`incompatible_qos`](Self::incompatible_qos)).
    pub fn publisher_count(&self) -> usize {
        self.inner
            .node
            .ctx
            .graph
            .topic_counts::<T>(&self.inner.topic)
            .0
    }

    /// The incompatible-QoS status (publishers that could not match).
    pub fn incompatible_qos(&self) -> IncompatibleQosStatus {
        self.inner.incompatible.get()
    }

    /// Like [`incompatible_qos`](Self::incompatible_qos), and resets the
    /// `total_count_change`.
    pub fn take_incompatible_qos(&self) -> IncompatibleQosStatus {
        self.inner.incompatible.take()
    }
}

impl<T: Message> Drop for Subscription<T> {
    fn drop(&mut self) {
        self.inner
            .node
            .ctx
            .graph
            .remove_subscription::<T>(&self.inner.topic, self.inner.id);
        if let Some(old) = self.inner.target.get() {
            old.remove_pump(Arc::as_ptr(&self.inner) as *const ());
        }
        self.inner.set_target(None);
    }
}

impl<T: Message> std::fmt::Debug for Subscription<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("topic", &self.inner.topic)
            .field("type", &T::TYPE_NAME)
            .field("qos", &self.inner.qos)
            .field("buffer", &self.buffer_kind())
            .finish()
    }
}
