//! Publishers and the copy rules of the intra-process manager (rclcpp's
//! intra-process design: one buffer per subscription, copies only where
//! ownership requires them).
//!
//! With `M` owning (`Owned` buffers), `S` sharing (`Shared` buffers) and `V`
//! copying (`Value` buffers) matched subscriptions:
//!
//! | call | copies made |
//! |---|---|
//! | `publish(T)`, `M = 0` | `V` (sharers get one `Arc` of the original) |
//! | `publish(T)`, `S = 0`, `M > 0` | `V + M - 1` (the last owner gets the original) |
//! | `publish(T)`, `S > 0`, `M > 0` | `V + M` (one copy shared by all sharers, `M - 1` copies and the original for the owners) |
//! | `publish_shared(Arc<T>)` | `V + M` (sharers share the caller's `Arc`) |
//! | `publish_copy(&T)` | `1 +` the `publish(T)` figure, or 0 with no matched subscription |
//!
//! A transient-local publisher keeps its history as `Arc<T>`: it shares the
//! sharers' `Arc` (or the original when nobody owns it); only when owners and
//! no sharers are matched does the history cost one extra copy.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use myelin_sync::LaneCell;

use crate::error::PublishError;
use crate::events::{
    DeadlineMissedStatus, EventQueue, LivelinessToken, MatchedStatus, PublisherEvent, Status,
};
use crate::message::Message;
use crate::qos::{Durability, IncompatibleQosStatus, QoS, QosPolicy};
use crate::runtime::NodeInner;
use crate::subscription::SharedEventCallback;
use crate::transport::{Encode, EndpointEvents, PubLink, PubOwner, SendError, Wanted};

pub(crate) mod automatic;
mod deliver;
mod loan;

use deliver::Full;
pub(crate) use deliver::Matched;
pub use loan::{BytesMessage, DetachedSliceLoan, Loan, LoanUninit, SliceLoan};

/// A transient-local publisher's history: (publish sequence, message,
/// expiry).
pub(crate) type History<T> = Mutex<HistoryQueue<T>>;

/// The contents of a [`History`].
pub(crate) type HistoryQueue<T> = VecDeque<(u64, Arc<T>, u64)>;

/// Options for [`Node::create_publisher_with`](crate::Node::create_publisher_with).
#[derive(Clone, Default)]
pub struct PublisherOptions {
    /// The callback group of the event callback and the deadline checker.
    pub callback_group: Option<crate::CallbackGroup>,
    /// Called by the node's executor for each [`PublisherEvent`].
    pub event_callback: Option<SharedEventCallback<PublisherEvent>>,
}

impl PublisherOptions {
    /// Receive [`PublisherEvent`]s through the executor.
    pub fn on_event(mut self, f: impl Fn(PublisherEvent) + Send + Sync + 'static) -> Self {
        self.event_callback = Some(Arc::new(f));
        self
    }
}

impl std::fmt::Debug for PublisherOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublisherOptions")
            .field("callback_group", &self.callback_group)
            .field("event_callback", &self.event_callback.is_some())
            .finish()
    }
}

/// What a publish reads of its publisher is in the first cache line: the
/// struct starts a line (`align(64)`; a publish never touches the `Arc`'s
/// counts, which sit in the line before) and the fields in that line come
/// first (`repr(C)`). The flags answer "anything to do?" for the QoS
/// features most publishers do not use, so their state (the QoS, the
/// liveliness token, the history) is read only by those that do. A chain
/// of callbacks at 1 kHz, whose memory goes cold between messages, misses
/// in this line instead of four.
#[repr(C, align(64))]
pub(crate) struct PubInner<T> {
    pub(crate) matched: LaneCell<Matched<T>>,
    pub(crate) node: Arc<NodeInner>,
    /// Each link's "has a remote reader" flag, read on every publish.
    pub(crate) wanted: Box<[Arc<Wanted>]>,
    /// What this publisher's in-process messages carry
    /// ([`Origin::Local`](crate::message_info::Origin)).
    origin_word: u32,
    /// `qos.deadline` is set: publishes are counted.
    counts_publishes: bool,
    /// `qos.liveliness.lease` is set: a publish asserts liveliness.
    asserts: bool,
    /// `qos.lifespan` is set: messages carry an expiry.
    expires: bool,
    /// Transient local: `history` is `Some`.
    keeps_history: bool,
    // Read only by the publishers whose flag above says so, or off the
    // publish path.
    pub(crate) id: u64,
    pub(crate) gid: crate::Gid,
    pub(crate) topic: String,
    pub(crate) qos: QoS,
    /// Transient local only: the last `depth` messages with their global
    /// publish sequence number.
    pub(crate) history: Option<History<T>>,
    pub(crate) incompatible: Status<IncompatibleQosStatus>,
    pub(crate) liveliness: Arc<LivelinessToken>,
    /// Publishes so far (counted only with a deadline).
    published_count: myelin_sync::atomic::AtomicU64,
    pub(crate) deadline_status: Status<DeadlineMissedStatus>,
    /// Endpoints of another type found on the topic.
    pub(crate) incompatible_type: Status<crate::events::IncompatibleTypeStatus>,
    pub(crate) matched_status: Status<MatchedStatus>,
    pub(crate) events: Option<Arc<EventQueue<PublisherEvent>>>,
    pub(crate) checkers: Mutex<Vec<crate::Timer>>,
    /// Matched subscriptions in this context (set by the graph).
    local_matched: myelin_sync::atomic::AtomicU32,
    /// One link per transport that carries this publisher (subscriptions
    /// in other processes and hosts), in send order.
    pub(crate) links: Box<[Arc<dyn PubLink>]>,
}

/// Publishes messages of type `T` on one topic. Created by
/// [`Node::create_publisher`](crate::Node::create_publisher); dropping it
/// removes it from the graph.
///
/// ```
/// use myelin_core::{Context, QoS};
///
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("talker")?;
/// let chatter = node.create_publisher::<String>("chatter", QoS::keep_last(10))?;
/// chatter.publish("hello".to_string())?;
/// assert_eq!(chatter.topic(), "/chatter");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Publisher<T: Message> {
    pub(crate) inner: Arc<PubInner<T>>,
}

impl<T: Message> automatic::AssertsAutomatically for PubInner<T> {
    fn assert_automatically(&self) -> bool {
        if self.node.ctx.is_shut_down() {
            return false;
        }
        self.assert_liveliness(false);
        true
    }
}

impl<T: Message> PubInner<T> {
    /// Where this publisher's in-process messages come from.
    #[inline]
    pub(crate) fn origin(&self) -> crate::message_info::Origin {
        crate::message_info::Origin::Local(self.origin_word)
    }

    pub(crate) fn new(
        id: u64,
        gid: crate::Gid,
        topic: String,
        qos: QoS,
        node: Arc<NodeInner>,
        events: Option<Arc<EventQueue<PublisherEvent>>>,
        links: Vec<Arc<dyn PubLink>>,
    ) -> Self {
        let history = (qos.durability == Durability::TransientLocal)
            .then(|| Mutex::new(VecDeque::with_capacity(qos.effective_depth().min(4096))));
        let lease_ns = qos
            .liveliness
            .lease
            .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64);
        PubInner {
            matched: LaneCell::default(),
            node,
            wanted: links.iter().map(|l| l.wanted().clone()).collect(),
            origin_word: crate::message_info::Origin::local_word(gid),
            counts_publishes: qos.deadline.is_some(),
            asserts: lease_ns != 0,
            expires: qos.lifespan.is_some(),
            keeps_history: history.is_some(),
            id,
            gid,
            topic,
            qos,
            history,
            incompatible: Status::new(),
            liveliness: Arc::new(LivelinessToken {
                kind: qos.liveliness.kind,
                lease_ns,
                last_assert_ns: myelin_sync::atomic::AtomicU64::new(crate::clock::now_ns()),
            }),
            published_count: myelin_sync::atomic::AtomicU64::new(0),
            deadline_status: Status::new(),
            incompatible_type: Status::new(),
            matched_status: Status::new(),
            events,
            checkers: Mutex::new(Vec::new()),
            local_matched: myelin_sync::atomic::AtomicU32::new(0),
            links: links.into_boxed_slice(),
        }
    }

    /// Subscriptions in other processes this publisher feeds.
    pub(crate) fn remote_count(&self) -> usize {
        self.links.iter().map(|l| l.connected()).sum()
    }

    /// Send through every link that has a subscription to reach (each
    /// encodes only then), before local delivery moves the message: the
    /// transports in registration order (shared memory, the lower latency,
    /// first). Returns the subscriptions that refused it, and the first
    /// link error (the other links still sent). The common case, no remote
    /// reader, costs one load per link.
    #[inline]
    fn send_remote(&self, msg: &T) -> Result<Full, PublishError> {
        if self.wanted.iter().any(|w| w.get()) {
            self.send_links(msg)
        } else {
            Ok(Full::default())
        }
    }

    #[inline(never)]
    fn send_links(&self, msg: &T) -> Result<Full, PublishError> {
        let mut full = Full::default();
        let mut error = None;
        for (l, w) in self.links.iter().zip(self.wanted.iter()) {
            if w.get() {
                match l.send(msg) {
                    Ok(r) => full.merge(Full::refused(r.count, r.limit)),
                    Err(e) => {
                        error.get_or_insert(self.send_error(e));
                    }
                }
            }
        }
        match error {
            None => Ok(full),
            Some(e) => Err(e),
        }
    }

    /// A link's error as a publish error naming this topic.
    #[cold]
    fn send_error(&self, e: SendError) -> PublishError {
        let topic = self.topic.clone();
        match e {
            SendError::NoMemory { len, why } => PublishError::OutOfMemory {
                topic,
                len,
                why: why.to_string(),
            },
            e => PublishError::Wire {
                topic,
                why: e.to_string(),
            },
        }
    }

    /// Lock the transient-local history (if any): `publish` delivers under
    /// it so a late joiner sees each message exactly once (see
    /// `matching::add_subscription`).
    #[inline]
    fn lock_history(&self) -> Option<std::sync::MutexGuard<'_, HistoryQueue<T>>> {
        if !self.keeps_history {
            return None;
        }
        self.lock_kept_history()
    }

    /// [`lock_history`](Self::lock_history) for a publisher that keeps one
    /// (transient local): out of line, as above.
    #[inline(never)]
    fn lock_kept_history(&self) -> Option<std::sync::MutexGuard<'_, HistoryQueue<T>>> {
        self.history
            .as_ref()
            .map(|h| h.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Report local refusals plus the remote outcome: local delivery has
    /// happened either way, so a wire error is returned after it.
    #[inline]
    fn conclude(
        &self,
        m: &Matched<T>,
        mut full: Full,
        remote: Result<Full, PublishError>,
    ) -> Result<(), PublishError> {
        match remote {
            Ok(r) => {
                full.merge(r);
                self.finish(m, full)
            }
            Err(e) => {
                self.finish(m, full)?;
                Err(e)
            }
        }
    }

    pub(crate) fn emit(&self, e: PublisherEvent) {
        if let Some(q) = &self.events {
            q.emit(e);
        }
    }

    /// The deadline checker found no publish in the last period.
    pub(crate) fn check_deadline(&self, last_seen: &mut u64) {
        let n = self
            .published_count
            .load(myelin_sync::atomic::Ordering::Relaxed);
        if n > 0 && n == *last_seen {
            let st = self
                .deadline_status
                .update_for_event(self.events.is_some(), |s| {
                    s.total_count += 1;
                    s.total_count_change += 1;
                });
            self.emit(PublisherEvent::OfferedDeadlineMissed(st));
        }
        *last_seen = n;
    }

    /// The graph counted `current` matched subscriptions in this context.
    pub(crate) fn update_matched(&self, current: u32) {
        self.local_matched
            .store(current, myelin_sync::atomic::Ordering::Relaxed);
        self.refresh_matched();
    }

    /// Publish the matched status: local plus remote subscriptions.
    pub(crate) fn refresh_matched(&self) {
        let count = || {
            self.local_matched
                .load(myelin_sync::atomic::Ordering::Relaxed)
                + self.remote_count() as u32
        };
        if let Some(st) = self.matched_status.recount(count, self.events.is_some()) {
            self.emit(PublisherEvent::Matched(st));
        }
    }

    /// Per publish: the message's expiry, deadline and liveliness bookkeeping.
    #[inline]
    fn on_publish(&self) -> u64 {
        if self.counts_publishes {
            self.published_count
                .fetch_add(1, myelin_sync::atomic::Ordering::Relaxed);
        }
        if self.asserts {
            self.assert_liveliness(true);
        }
        if !self.expires {
            return 0;
        }
        self.expiry()
    }

    /// When a message published now expires (a lifespan is set): out of
    /// line, as is the liveliness assertion, so that a plain publish's code
    /// stays in fewer cache lines.
    #[inline(never)]
    fn expiry(&self) -> u64 {
        match self.qos.lifespan {
            None => 0,
            Some(l) => crate::clock::deadline_ns(self.node.ctx.expiry_now_ns(), l),
        }
    }

    /// Assert liveliness here and to the subscriptions in other
    /// processes (a publisher with a lease, manual-by-topic or automatic;
    /// others are alive while they exist); `by_publish`: a message is
    /// being published, which itself asserts.
    #[inline(never)]
    fn assert_liveliness(&self, by_publish: bool) {
        self.liveliness.assert_now();
        if self.asserts {
            for l in self.links.iter() {
                l.assert_liveliness(by_publish);
            }
        }
    }

    fn check_alive(&self) -> Result<(), PublishError> {
        if self.node.ctx.is_shut_down() {
            return Err(self.shut_down());
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn shut_down(&self) -> PublishError {
        PublishError::ContextShutDown(self.topic.clone())
    }
}

impl<T: Message> PubOwner for PubInner<T> {
    fn with_history(&self, f: &mut dyn FnMut(&mut crate::transport::History<'_>)) {
        match &self.history {
            None => f(&mut std::iter::empty()),
            Some(h) => {
                let h = h.lock().unwrap_or_else(|e| e.into_inner());
                let now = self.node.ctx.expiry_now_ns();
                f(&mut h.iter().filter_map(|(_, m, exp)| {
                    let left = crate::clock::left_ns(now, *exp);
                    // Expired ones are left out.
                    (left != Some(std::time::Duration::ZERO)).then_some((&**m as &dyn Encode, left))
                }));
            }
        }
    }
}

impl<T: Message> EndpointEvents for PubInner<T> {
    fn incompatible_qos(&self, policy: QosPolicy) {
        let st = self.incompatible.record(policy, self.events.is_some());
        self.emit(PublisherEvent::IncompatibleQos(st));
    }

    fn incompatible_type(&self) {
        let st = self.incompatible_type.record(self.events.is_some());
        self.emit(PublisherEvent::IncompatibleType(st));
    }

    fn links_changed(&self) {
        self.refresh_matched();
    }
}

impl<T: Message> Publisher<T> {
    /// Publish a message, moving it in (rclcpp's `unique_ptr` path). See the
    /// [module docs](self) for how many copies are made.
    ///
    /// Returns [`PublishError::ResourceLimit`] when keep-all subscriptions
    /// were full (every other subscription still got the message).
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn publish(&self, msg: T) -> Result<(), PublishError> {
        let p = &*self.inner;
        p.check_alive()?;
        let exp = p.on_publish();
        let mut h = p.lock_history();
        // Remote first: local delivery moves the message.
        let remote = p.send_remote(&msg);
        let m = p.matched.read();
        p.pace(&m);
        let full = p.deliver_owned(&m, msg, h.as_deref_mut(), exp);
        p.conclude(&m, full, remote)
    }

    /// Warm the path of the next publish without publishing: for the
    /// low-latency mode at robot rates, called shortly (about 100 us)
    /// before a frame is due by a camera thread that spins until then.
    ///
    /// Between frames 33 ms apart the caches forget the path, and the
    /// executor's side of it is what costs (BENCHMARKS.md, "Warming the
    /// path before a frame"): so for each matched subscription whose
    /// callback runs on a busy-polling executor
    /// ([`IdleWait::BusyPoll`](crate::IdleWait)), `warm` queues the
    /// subscription there without adding a message, and the executor
    /// runs its path (the ready queue, the callback's lock, the buffer's
    /// look) up to the callback, which it does not call when there is no
    /// message. Nothing is stored, no message is counted or lost, and a
    /// message published meanwhile is delivered as usual. An inline
    /// subscription's path (its callback's lock, the buffer's look) runs
    /// in this thread, also up to the callback; a message another thread
    /// publishes while the warm holds that lock is delivered by the warm,
    /// in this thread, as it would be by a publish here. Executors that
    /// sleep are not woken (that would cost more than it saves); for
    /// them, and for polling subscriptions, `warm` only brings the
    /// subscriptions' lines into this thread's caches. A subscription
    /// in another process on this host (shared memory) is warmed the same
    /// way from its own side: the publisher marks its inbox's ready lane
    /// with nothing behind it, unless its executor sleeps, and the
    /// executor, busy-polling, drains the empty inbox and runs the same
    /// rehearsal. Over the network (zenoh) nothing is sent. Onload's
    /// `ONLOAD_MSG_WARM` is the same idea for a socket send.
    ///
    /// A warm's pass is no callback to the executor's callers:
    /// [`spin_once`](crate::Executor::spin_once) goes on waiting after it,
    /// and [`spin_some`](crate::Executor::spin_some) does not count it.
    ///
    /// ```
    /// use myelin_core::{Context, QoS};
    ///
    /// let ctx = Context::builder().handle_signals(false).build()?;
    /// let camera = ctx.create_node("camera")?;
    /// let images = camera.create_publisher::<Vec<u8>>("image", QoS::sensor_data())?;
    /// let viewer = camera.create_polling_subscription::<Vec<u8>>("image", QoS::sensor_data(), Default::default())?;
    /// images.warm(); // shortly before the frame is due: nothing is sent
    /// assert_eq!(viewer.buffered(), 0);
    /// images.publish(vec![0; 64])?;
    /// assert_eq!(viewer.buffered(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn warm(&self) {
        let p = &*self.inner;
        if p.check_alive().is_err() {
            return;
        }
        let m = p.matched.read();
        for s in m.all() {
            s.warm();
        }
        for (l, w) in p.links.iter().zip(p.wanted.iter()) {
            if w.get() {
                l.warm();
            }
        }
    }

    /// Publish a boxed message (moves it out of the box).
    #[allow(clippy::boxed_local)] // the API takes what rclcpp users hold: a unique_ptr
    pub fn publish_boxed(&self, msg: Box<T>) -> Result<(), PublishError> {
        self.publish(*msg)
    }

    /// Publish a shared message: sharing subscriptions get this very `Arc`
    /// (zero-copy, which rclcpp cannot do); owning subscriptions get a copy
    /// each.
    #[inline]
    pub fn publish_shared(&self, msg: Arc<T>) -> Result<(), PublishError> {
        let p = &*self.inner;
        p.check_alive()?;
        let exp = p.on_publish();
        let mut h = p.lock_history();
        let remote = p.send_remote(&msg);
        let m = p.matched.read();
        p.pace(&m);
        let full = p.deliver_shared(&m, msg, h.as_deref_mut(), exp);
        p.conclude(&m, full, remote)
    }

    /// Publish a borrowed message: copies it once (only if anyone receives or
    /// the publisher keeps history), then follows [`publish`](Self::publish).
    /// With nobody to receive it, it still counts as a publish for the
    /// offered deadline and asserts liveliness.
    pub fn publish_copy(&self, msg: &T) -> Result<(), PublishError> {
        if !self.inner.keeps_history
            && self.inner.matched.with(|m| m.is_empty())
            && self.inner.remote_count() == 0
        {
            self.inner.check_alive()?;
            // The expiry it returns is for a message nobody stores.
            let _ = self.inner.on_publish();
            return Ok(());
        }
        self.publish(msg.clone())
    }

    /// This publisher's [`Gid`](crate::Gid): unique among the endpoints
    /// of every process (see [`Gid`](crate::Gid) for its limit), and what a subscription's
    /// [`MessageInfo::publisher_gid`](crate::MessageInfo::publisher_gid)
    /// says of its messages, whichever transport carried them.
    pub fn gid(&self) -> crate::Gid {
        self.inner.gid
    }

    /// The fully qualified topic name.
    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// The QoS this publisher offers.
    pub fn qos(&self) -> QoS {
        self.inner.qos
    }

    /// How many subscriptions this publisher currently delivers to (in
    /// this context and, through shared memory, in other processes):
    /// rclcpp's `get_subscription_count`, mirrored by
    /// [`Subscription::publisher_count`](crate::Subscription::publisher_count).
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
    /// let publisher = node.create_publisher::<u32>("n", QoS::keep_last(1))?;
    /// assert_eq!(publisher.subscription_count(), 0);
    /// let _sub = node.create_polling_subscription::<u32>("n", QoS::keep_last(1), Default::default())?;
    /// assert_eq!(publisher.subscription_count(), 1);
    /// assert_eq!(publisher.matched_count(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn subscription_count(&self) -> usize {
        self.inner.matched.with(|m| m.len()) + self.inner.remote_count()
    }

    /// How many of the subscriptions this publisher delivers to are in this
    /// context (rclcpp's `get_intra_process_subscription_count`): the ones
    /// a publish hands the message to directly, without a transport.
    ///
    /// ```
    /// use myelin_core::{Context, QoS};
    /// let ctx = Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("counts")?;
    /// let publisher = node.create_publisher::<u32>("n", QoS::keep_last(1))?;
    /// let _sub = node.create_polling_subscription::<u32>("n", QoS::keep_last(1), Default::default())?;
    /// assert_eq!(publisher.intra_process_subscription_count(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn intra_process_subscription_count(&self) -> usize {
        self.inner.matched.with(|m| m.len())
    }

    /// The fewest free places in the buffer of any subscription in this
    /// context this publisher delivers to (rclcpp's
    /// `lowest_available_ipm_capacity`): how many messages can be
    /// published before the fullest one overwrites its oldest (keep_last)
    /// or refuses more (keep_all). `None` when no subscription in this
    /// context is matched.
    ///
    /// ```
    /// use myelin_core::{Context, QoS};
    /// let ctx = Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("capacity")?;
    /// let publisher = node.create_publisher::<u32>("n", QoS::keep_last(5))?;
    /// assert_eq!(publisher.lowest_available_capacity(), None);
    /// let _small = node.create_polling_subscription::<u32>("n", QoS::keep_last(5), Default::default())?;
    /// let _large = node.create_polling_subscription::<u32>("n", QoS::keep_last(10), Default::default())?;
    /// publisher.publish(1)?;
    /// publisher.publish(2)?;
    /// assert_eq!(publisher.lowest_available_capacity(), Some(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lowest_available_capacity(&self) -> Option<usize> {
        self.inner
            .matched
            .with(|m| m.all().map(|s| s.buffer.room()).min())
    }

    /// The same as [`subscription_count`](Self::subscription_count), named
    /// as [`Subscription::matched_count`](crate::Subscription::matched_count)
    /// is.
    pub fn matched_count(&self) -> usize {
        self.subscription_count()
    }

    /// Shared-memory chunks of this publisher in use: loaned, queued for
    /// subscriptions in other processes, or held by them. Returns to 0 when
    /// every reader has dropped its messages (or died).
    pub fn shared_memory_in_use(&self) -> usize {
        self.inner.links.iter().map(|l| l.memory_in_use()).sum()
    }

    /// Assert this publisher's liveliness (manual-by-topic liveliness;
    /// publishing asserts it too).
    pub fn assert_liveliness(&self) {
        self.inner.assert_liveliness(false);
    }

    /// The offered-deadline-missed status.
    pub fn deadline_missed(&self) -> DeadlineMissedStatus {
        self.inner.deadline_status.get()
    }

    /// The publication-matched status.
    pub fn matched(&self) -> MatchedStatus {
        self.inner.matched_status.get()
    }

    /// [`deadline_missed`](Self::deadline_missed), resetting its change count.
    pub fn take_deadline_missed(&self) -> DeadlineMissedStatus {
        self.inner.deadline_status.take_changes()
    }

    /// [`matched`](Self::matched), resetting its change counts.
    pub fn take_matched(&self) -> MatchedStatus {
        self.inner.matched_status.take_changes()
    }

    /// The incompatible-QoS status (subscriptions that could not match).
    pub fn incompatible_qos(&self) -> IncompatibleQosStatus {
        self.inner.incompatible.get()
    }

    /// Like [`incompatible_qos`](Self::incompatible_qos), and resets the
    /// `total_count_change`.
    pub fn take_incompatible_qos(&self) -> IncompatibleQosStatus {
        self.inner.incompatible.take_changes()
    }

    /// Subscriptions on this topic with another type, in other processes
    /// or hosts (ROS 2's incompatible-type status): they never match.
    pub fn incompatible_type(&self) -> crate::events::IncompatibleTypeStatus {
        self.inner.incompatible_type.get()
    }

    /// Like [`incompatible_type`](Self::incompatible_type), and resets the
    /// `total_count_change`.
    pub fn take_incompatible_type(&self) -> crate::events::IncompatibleTypeStatus {
        self.inner.incompatible_type.take_changes()
    }
}

impl<T: Message> Drop for Publisher<T> {
    fn drop(&mut self) {
        self.inner
            .node
            .ctx
            .graph
            .leave_topic(&self.inner.topic, self.inner.id);
    }
}

impl<T: Message> std::fmt::Debug for Publisher<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("topic", &self.inner.topic)
            .field("type", &T::TYPE_NAME)
            .field("qos", &self.inner.qos)
            .finish()
    }
}

#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::offset_of;

    /// What every publish reads lies in the struct's first cache line,
    /// and the struct starts a line.
    #[test]
    fn the_fields_every_publish_reads_share_one_cache_line() {
        assert_eq!(std::mem::align_of::<PubInner<u64>>(), 64);
        for (name, at, len) in [
            ("matched", offset_of!(PubInner<u64>, matched), 8),
            ("node", offset_of!(PubInner<u64>, node), 8),
            ("wanted", offset_of!(PubInner<u64>, wanted), 16),
            ("origin_word", offset_of!(PubInner<u64>, origin_word), 4),
            (
                "counts_publishes",
                offset_of!(PubInner<u64>, counts_publishes),
                1,
            ),
            ("asserts", offset_of!(PubInner<u64>, asserts), 1),
            ("expires", offset_of!(PubInner<u64>, expires), 1),
            ("keeps_history", offset_of!(PubInner<u64>, keeps_history), 1),
        ] {
            assert!(at + len <= 64, "{name} at byte {at}");
        }
    }
}
