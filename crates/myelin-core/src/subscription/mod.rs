//! Subscriptions: one buffer each, a callback run by an executor, and
//! synchronous `take` / `wait_for_message` for code that runs its own loop.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use myelin_sync::atomic::Ordering;

use crate::buffer::Received;
use crate::events::{
    DeadlineMissedStatus, LivelinessChangedStatus, MatchedStatus, SubscriptionEvent,
};
use crate::group::CallbackGroup;
use crate::message::Message;
use crate::qos::{IncompatibleQosStatus, QoS};

mod callback;
mod inner;

pub use crate::message_info::MessageInfo;
pub use callback::{Dispatch, SubscriptionCallback, marker};
pub(crate) use inner::{SubInner, SubSpec};

/// What a subscription's buffer stores (rclcpp's intra-process `BufferT`).
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
    /// [`PublishError::CallbackPanicked`](crate::PublishError::CallbackPanicked)
    /// (the first one, when the call drained several messages: the drain
    /// goes on after a panic); during a
    /// [`Publisher::warm`](crate::Publisher::warm), which delivers a message
    /// only when another thread left one to it, a panic is logged.
    /// An inline callback must not publish on a transient-local publisher of
    /// its own topic (that publisher delivers under its history lock).
    ///
    /// Messages from other processes and hosts have no publisher thread
    /// here: they run the callback on the thread that receives them (zenoh's
    /// for the network; one process-wide `myelin-inline` thread, woken by
    /// the publishing process, for shared memory). Still no executor.
    pub inline: bool,
    /// Called by the node's executor for each [`SubscriptionEvent`]
    /// (deadline missed, liveliness changed, matched, incompatible QoS).
    pub event_callback: Option<SharedEventCallback<SubscriptionEvent>>,
    /// How many publishers in other processes of this host can feed this
    /// subscription at once through shared memory (`None`: 16; at most
    /// 1024; each costs one block of rings in its inbox). A publisher
    /// beyond it is not connected and says so on its log, naming this
    /// option. zenoh and in-process delivery have no such limit.
    pub max_publishers: Option<usize>,
}

impl std::fmt::Debug for SubscriptionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionOptions")
            .field("buffer", &self.buffer)
            .field("inline", &self.inline)
            .field("callback_group", &self.callback_group)
            .field("event_callback", &self.event_callback.is_some())
            .field("max_publishers", &self.max_publishers)
            .finish()
    }
}

/// The most [`SubscriptionOptions::max_publishers`] can be.
pub const MAX_PUBLISHERS: usize = 1024;

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

/// A subscription to a topic of type `T`. Created by
/// [`Node::create_subscription`](crate::Node::create_subscription) (callback
/// run by an executor) or
/// [`Node::create_polling_subscription`](crate::Node::create_polling_subscription)
/// (no callback: [`take`](Self::take) / [`wait_for_message`](Self::wait_for_message)).
/// Dropping it removes it from the graph.
///
/// ```
/// use std::time::Duration;
/// use myelin_core::{Context, QoS};
///
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("listener")?;
/// let chatter = node.create_polling_subscription::<String>(
///     "chatter",
///     QoS::keep_last(10),
///     Default::default(),
/// )?;
/// let talker = node.create_publisher::<String>("chatter", QoS::keep_last(10))?;
/// talker.publish("hello".to_string())?;
/// let m = chatter.wait_for_message(Duration::from_secs(5))?;
/// assert_eq!(*m, "hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn take(&self) -> Option<Received<T>> {
        self.inner.take_now().map(|(m, _)| m)
    }

    /// [`take`](Self::take), with the message's [`MessageInfo`]: its
    /// publisher's gid, when it was published and received, whether it came
    /// in-process (what each transport fills in: see [`MessageInfo`]).
    ///
    /// ```
    /// use myelin_core::{Context, QoS};
    /// let ctx = Context::builder().shared_memory(false).network(false).build()?;
    /// let node = ctx.create_node("poller")?;
    /// let sub = node.create_polling_subscription::<u32>("n", QoS::default(), Default::default())?;
    /// let publisher = node.create_publisher::<u32>("n", QoS::default())?;
    /// publisher.publish(1)?;
    /// if let Some((msg, info)) = sub.take_with_info() {
    ///     assert_eq!((*msg, info.publisher_gid()), (1, publisher.gid()));
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_with_info(&self) -> Option<(Received<T>, MessageInfo)> {
        let pid = self.inner.node.ctx.pid;
        self.inner.take_now().map(|(m, o)| (m, o.info(pid)))
    }

    /// This subscription's [`Gid`](crate::Gid), unique among the endpoints
    /// of every process (see [`Gid`](crate::Gid) for its limit).
    pub fn gid(&self) -> crate::Gid {
        self.inner.gid
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
        let deadline = crate::clock::deadline_after(timeout);
        let ctx = &self.inner.node.ctx;
        let wp = &self.inner.waitpoint;
        let gone_at_start = wp.gone_count();
        let mut got = None;
        wp.event.wait_while(
            || {
                // The slot's pending flag first (a SeqCst swap): the
                // publisher's signal wakes only a waiter whose check reads
                // it (see `WakeTable::signal`); through it, what was pushed
                // before the signal is visible to the pump.
                wp.event.take_pending();
                got = self.inner.take_now().map(|(m, _)| m);
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
        self.inner.deadline_status.take_changes()
    }

    /// [`liveliness_changed`](Self::liveliness_changed), resetting its change counts.
    pub fn take_liveliness_changed(&self) -> LivelinessChangedStatus {
        self.inner.liveliness_status.take_changes()
    }

    /// [`matched`](Self::matched), resetting its change counts.
    pub fn take_matched(&self) -> MatchedStatus {
        self.inner.matched_status.take_changes()
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

    /// How many publishers this subscription is matched with, in this
    /// process and others (rclcpp's `get_publisher_count`; the same as
    /// [`matched_count`](Self::matched_count), the name the publisher side
    /// mirrors with [`Publisher::subscription_count`](crate::Publisher::subscription_count)).
    /// Publishers on the topic whose QoS or type does not match are not
    /// counted: [`Node::count_publishers`](crate::Node::count_publishers)
    /// counts every publisher on a topic, in the whole graph.
    ///
    /// ```
    /// use myelin_core::{Context, QoS};
    /// let ctx = Context::builder()
    ///     .handle_signals(false)
    ///     // This context only: counts would include other processes' endpoints.
    ///     .shared_memory(false)
    ///     .network(false)
    ///     .build()?;
    /// let node = ctx.create_node("counts")?;
    /// let sub = node.create_polling_subscription::<u32>("n", QoS::keep_last(1), Default::default())?;
    /// let _reliable = node.create_publisher::<u32>("n", QoS::keep_last(1))?;
    /// let _best_effort = node.create_publisher::<u32>("n", QoS::keep_last(1).best_effort())?;
    /// // A reliable subscription does not match a best-effort publisher.
    /// assert_eq!(sub.publisher_count(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publisher_count(&self) -> usize {
        self.matched_count()
    }

    /// The incompatible-QoS status (publishers that could not match).
    pub fn incompatible_qos(&self) -> IncompatibleQosStatus {
        self.inner.incompatible.get()
    }

    /// Like [`incompatible_qos`](Self::incompatible_qos), and resets the
    /// `total_count_change`.
    pub fn take_incompatible_qos(&self) -> IncompatibleQosStatus {
        self.inner.incompatible.take_changes()
    }

    /// Publishers on this topic with another type, in other processes or
    /// hosts (ROS 2's incompatible-type status): they never match.
    pub fn incompatible_type(&self) -> crate::events::IncompatibleTypeStatus {
        self.inner.incompatible_type.get()
    }

    /// Like [`incompatible_type`](Self::incompatible_type), and resets the
    /// `total_count_change`.
    pub fn take_incompatible_type(&self) -> crate::events::IncompatibleTypeStatus {
        self.inner.incompatible_type.take_changes()
    }
}

impl<T: Message> Drop for Subscription<T> {
    fn drop(&mut self) {
        self.inner
            .node
            .ctx
            .graph
            .leave_topic(&self.inner.topic, self.inner.id);
        self.inner.close(None);
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
