//! Publishers and the copy rules of seed 000.
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

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::buffer::Pushed;
use crate::error::PublishError;
use crate::events::{DeadlineMissedStatus, EventQueue, MatchedStatus, PublisherEvent, Status};
use crate::graph::Matched;
use crate::message::Message;
use crate::node::NodeInner;
use crate::qos::LivelinessKind;
use crate::qos::{Durability, IncompatibleQosStatus, QoS, QosPolicy};
use crate::subscription::SharedEventCallback;
use crate::transport::{Encode, LinkLoan, PubLink, PubOwner, SendError};
use crate::wire::SharedBytes;

/// Shared incompatible-QoS status of an endpoint.
#[derive(Default)]
pub(crate) struct IncompatibleQos(Mutex<IncompatibleQosStatus>);

impl IncompatibleQos {
    pub(crate) fn record(&self, policy: QosPolicy) {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        s.total_count += 1;
        s.total_count_change += 1;
        s.last_policy = Some(policy);
    }
    pub(crate) fn get(&self) -> IncompatibleQosStatus {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn take(&self) -> IncompatibleQosStatus {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let out = *s;
        s.total_count_change = 0;
        out
    }
}

/// A transient-local publisher's history: (publish sequence, message,
/// expiry).
pub(crate) type History<T> = Mutex<HistoryQueue<T>>;

/// The contents of a [`History`].
pub(crate) type HistoryQueue<T> = VecDeque<(u64, Arc<T>, u64)>;

/// A publisher's liveliness as its subscriptions see it.
pub(crate) struct LivelinessToken {
    kind: LivelinessKind,
    /// 0 = infinite.
    lease_ns: u64,
    // SYNC: Relaxed: a timestamp compared against the clock, no data to order.
    last_assert_ns: myelin_sync::atomic::AtomicU64,
}

impl LivelinessToken {
    pub(crate) fn is_alive(&self, now: u64) -> bool {
        self.kind == LivelinessKind::Automatic
            || self.lease_ns == 0
            || now.saturating_sub(
                self.last_assert_ns
                    .load(myelin_sync::atomic::Ordering::Relaxed),
            ) <= self.lease_ns
    }

    fn assert_now(&self) {
        self.last_assert_ns.store(
            crate::clock::now_ns(),
            myelin_sync::atomic::Ordering::Relaxed,
        );
    }
}

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

pub(crate) struct PubInner<T> {
    pub(crate) id: u64,
    pub(crate) topic: String,
    pub(crate) qos: QoS,
    pub(crate) node: Arc<NodeInner>,
    pub(crate) matched: ArcSwap<Matched<T>>,
    /// Transient local only: the last `depth` messages with their global
    /// publish sequence number.
    pub(crate) history: Option<History<T>>,
    pub(crate) incompatible: IncompatibleQos,
    pub(crate) liveliness: Arc<LivelinessToken>,
    /// Publishes so far (counted only with a deadline).
    published_count: myelin_sync::atomic::AtomicU64,
    pub(crate) deadline_status: Status<DeadlineMissedStatus>,
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
pub struct Publisher<T: Message> {
    pub(crate) inner: Arc<PubInner<T>>,
}

impl<T: Message> PubInner<T> {
    pub(crate) fn new(
        id: u64,
        topic: String,
        qos: QoS,
        node: Arc<NodeInner>,
        events: Option<Arc<EventQueue<PublisherEvent>>>,
        links: Vec<Arc<dyn PubLink>>,
    ) -> Self {
        let history = (qos.durability == Durability::TransientLocal)
            .then(|| Mutex::new(VecDeque::with_capacity(qos.effective_depth().min(4096))));
        PubInner {
            id,
            topic,
            qos,
            node,
            matched: ArcSwap::from_pointee(Matched::default()),
            history,
            incompatible: IncompatibleQos::default(),
            liveliness: Arc::new(LivelinessToken {
                kind: qos.liveliness.kind,
                lease_ns: qos
                    .liveliness
                    .lease
                    .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64),
                last_assert_ns: myelin_sync::atomic::AtomicU64::new(crate::clock::now_ns()),
            }),
            published_count: myelin_sync::atomic::AtomicU64::new(0),
            deadline_status: Status::new(),
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
    /// link error (the other links still sent).
    #[inline]
    fn send_remote(&self, msg: &T) -> Result<Full, PublishError> {
        let mut full = Full::default();
        let mut error = None;
        for l in self.links.iter() {
            if l.wanted() {
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
    /// `Graph::add_subscription`).
    #[inline]
    fn lock_history(&self) -> Option<std::sync::MutexGuard<'_, HistoryQueue<T>>> {
        self.history
            .as_ref()
            .map(|h| h.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Report local refusals plus the remote outcome: local delivery has
    /// happened either way, so a wire error is returned after it.
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
            let st = self.deadline_status.update(|s| {
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
        let n = self
            .local_matched
            .load(myelin_sync::atomic::Ordering::Relaxed)
            + self.remote_count() as u32;
        if let Some(st) = self.matched_status.set_current(n) {
            self.emit(PublisherEvent::Matched(st));
        }
    }

    /// Per publish: the message's expiry, deadline and liveliness bookkeeping.
    #[inline]
    fn on_publish(&self) -> u64 {
        if self.qos.deadline.is_some() {
            self.published_count
                .fetch_add(1, myelin_sync::atomic::Ordering::Relaxed);
        }
        if self.liveliness.kind == LivelinessKind::ManualByTopic && self.liveliness.lease_ns != 0 {
            self.liveliness.assert_now();
        }
        match self.qos.lifespan {
            None => 0,
            Some(l) => {
                crate::clock::now_ns().saturating_add(l.as_nanos().min(u128::from(u64::MAX)) as u64)
            }
        }
    }

    fn check_alive(&self) -> Result<(), PublishError> {
        if self.node.ctx.is_shut_down() {
            return Err(PublishError::ContextShutDown(self.topic.clone()));
        }
        Ok(())
    }

    fn remember(&self, history: &mut VecDeque<(u64, Arc<T>, u64)>, msg: Arc<T>, exp: u64) {
        let depth = self.qos.effective_depth();
        while history.len() >= depth {
            history.pop_front();
        }
        history.push_back((self.node.ctx.graph.next_seq(), msg, exp));
    }

    /// Deliver an owned message following the copy rules.
    fn deliver_owned(
        &self,
        m: &Matched<T>,
        msg: T,
        history: Option<&mut VecDeque<(u64, Arc<T>, u64)>>,
        exp: u64,
    ) -> Full {
        let mut full = Full::default();
        for v in &m.values {
            full.note(v.push_owned(msg.clone(), exp), v.limit());
        }
        if m.owners.is_empty() {
            if !m.sharers.is_empty() || history.is_some() {
                let arc = Arc::new(msg);
                for s in &m.sharers {
                    full.note(s.push_shared(arc.clone(), exp), s.limit());
                }
                if let Some(h) = history {
                    self.remember(h, arc, exp);
                }
            }
            return full;
        }
        // Owners present: sharers (and the history) share one copy.
        if !m.sharers.is_empty() || history.is_some() {
            let arc = Arc::new(msg.clone());
            for s in &m.sharers {
                full.note(s.push_shared(arc.clone(), exp), s.limit());
            }
            if let Some(h) = history {
                self.remember(h, arc, exp);
            }
        }
        let (last, rest) = m.owners.split_last().expect("owners is not empty");
        for o in rest {
            full.note(o.push_owned(msg.clone(), exp), o.limit());
        }
        full.note(last.push_owned(msg, exp), last.limit());
        full
    }

    fn deliver_shared(
        &self,
        m: &Matched<T>,
        msg: Arc<T>,
        history: Option<&mut VecDeque<(u64, Arc<T>, u64)>>,
        exp: u64,
    ) -> Full {
        let mut full = Full::default();
        for v in &m.values {
            full.note(v.push_owned((*msg).clone(), exp), v.limit());
        }
        for o in &m.owners {
            full.note(o.push_owned((*msg).clone(), exp), o.limit());
        }
        for s in &m.sharers {
            full.note(s.push_shared(msg.clone(), exp), s.limit());
        }
        if let Some(h) = history {
            self.remember(h, msg, exp);
        }
        full
    }

    fn finish(&self, m: &Matched<T>, full: Full) -> Result<(), PublishError> {
        if full.panicked {
            for s in m.owners.iter().chain(&m.sharers).chain(&m.values) {
                if let Some((entity, message)) = s.take_inline_panic() {
                    return Err(PublishError::CallbackPanicked { entity, message });
                }
            }
        }
        if full.count > 0 {
            return Err(PublishError::ResourceLimit {
                topic: self.topic.clone(),
                full: full.count,
                limit: full.limit,
            });
        }
        Ok(())
    }
}

impl<T: Message> PubOwner for PubInner<T> {
    fn with_history(&self, f: &mut dyn FnMut(&mut dyn Iterator<Item = &dyn Encode>)) {
        match &self.history {
            None => f(&mut std::iter::empty()),
            Some(h) => {
                let h = h.lock().unwrap_or_else(|e| e.into_inner());
                f(&mut h.iter().map(|(_, m, _)| &**m as &dyn Encode));
            }
        }
    }

    fn incompatible_qos(&self, policy: QosPolicy) {
        self.incompatible.record(policy);
        self.emit(PublisherEvent::IncompatibleQos(self.incompatible.get()));
    }

    fn links_changed(&self) {
        self.refresh_matched();
    }
}

/// Subscriptions that refused a message (keep_all at its limit).
#[derive(Default)]
struct Full {
    count: usize,
    limit: usize,
    panicked: bool,
}

impl Full {
    /// `count` subscriptions refused, the smallest limit being `limit`.
    fn refused(count: usize, limit: usize) -> Full {
        Full {
            count,
            limit,
            panicked: false,
        }
    }

    /// Add another outcome (the reported limit is the smallest).
    fn merge(&mut self, o: Full) {
        if o.count > 0 {
            self.limit = if self.count == 0 {
                o.limit
            } else {
                self.limit.min(o.limit)
            };
            self.count += o.count;
        }
        self.panicked |= o.panicked;
    }

    #[inline]
    fn note(&mut self, p: Pushed, limit: usize) {
        match p {
            Pushed::Refused => self.merge(Full::refused(1, limit)),
            Pushed::Panicked => self.panicked = true,
            Pushed::Stored | Pushed::Overwrote => {}
        }
    }
}

impl<T: Message> Publisher<T> {
    /// Publish a message, moving it in (seed 000's `unique_ptr` path). See the
    /// [module docs](self) for how many copies are made.
    ///
    /// Returns [`PublishError::ResourceLimit`] when keep-all subscriptions
    /// were full (every other subscription still got the message).
    #[inline]
    pub fn publish(&self, msg: T) -> Result<(), PublishError> {
        let p = &*self.inner;
        p.check_alive()?;
        let exp = p.on_publish();
        let mut h = p.lock_history();
        // Remote first: local delivery moves the message.
        let remote = p.send_remote(&msg);
        let m = p.matched.load();
        let full = p.deliver_owned(&m, msg, h.as_deref_mut(), exp);
        p.conclude(&m, full, remote)
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
        let m = p.matched.load();
        let full = p.deliver_shared(&m, msg, h.as_deref_mut(), exp);
        p.conclude(&m, full, remote)
    }

    /// Publish a borrowed message: copies it once (only if anyone receives or
    /// the publisher keeps history), then follows [`publish`](Self::publish).
    pub fn publish_copy(&self, msg: &T) -> Result<(), PublishError> {
        if self.inner.history.is_none()
            && self.inner.matched.load().is_empty()
            && self.inner.remote_count() == 0
        {
            return self.inner.check_alive();
        }
        self.publish(msg.clone())
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
    /// this context and, through shared memory, in other processes).
    pub fn subscription_count(&self) -> usize {
        self.inner.matched.load().len() + self.inner.remote_count()
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
        self.inner.liveliness.assert_now();
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
        self.inner
            .deadline_status
            .take(|s| s.total_count_change = 0)
    }

    /// [`matched`](Self::matched), resetting its change counts.
    pub fn take_matched(&self) -> MatchedStatus {
        self.inner.matched_status.take(|s| {
            s.total_count_change = 0;
            s.current_count_change = 0;
        })
    }

    /// The incompatible-QoS status (subscriptions that could not match).
    pub fn incompatible_qos(&self) -> IncompatibleQosStatus {
        self.inner.incompatible.get()
    }

    /// Like [`incompatible_qos`](Self::incompatible_qos), and resets the
    /// `total_count_change`.
    pub fn take_incompatible_qos(&self) -> IncompatibleQosStatus {
        self.inner.incompatible.take()
    }
}

impl<T: Message> Drop for Publisher<T> {
    fn drop(&mut self) {
        self.inner
            .node
            .ctx
            .graph
            .remove_publisher::<T>(&self.inner.topic, self.inner.id);
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

/// The link that lent a loan's memory (its index) and its handle.
type LoanOrigin = (usize, Box<dyn Any + Send + Sync>);

/// Memory for one message, loaned from a transport (shared memory: the
/// publisher's pool) or, when no link lends memory, the heap.
enum LoanMem {
    /// From the link at this index.
    Link(usize, LinkLoan),
    Heap(Vec<u128>),
}

impl LoanMem {
    fn new<T: Message>(p: &PubInner<T>, len: usize) -> Result<LoanMem, PublishError> {
        p.check_alive()?;
        for (i, l) in p.links.iter().enumerate() {
            if let Some(loan) = l.loan(len) {
                return loan
                    .map(|m| LoanMem::Link(i, m))
                    .map_err(|e| p.send_error(e));
            }
        }
        Ok(LoanMem::Heap(vec![0u128; len.div_ceil(16)]))
    }

    fn ptr(&mut self) -> *mut u8 {
        match self {
            LoanMem::Link(_, m) => m.ptr,
            LoanMem::Heap(v) => v.as_mut_ptr() as *mut u8,
        }
    }

    fn ptr_const(&self) -> *const u8 {
        match self {
            LoanMem::Link(_, m) => m.ptr as *const u8,
            LoanMem::Heap(v) => v.as_ptr() as *const u8,
        }
    }

    /// Hand the memory over to readers: immutable from now on. Returns the
    /// lending link and its handle, if a link lent it.
    fn freeze(self, len: usize) -> (SharedBytes, Option<LoanOrigin>) {
        match self {
            LoanMem::Link(i, m) => {
                // SAFETY: the loan holds at least `len` bytes, is not
                // written after this point (the loan is consumed), and
                // `keep` keeps it out of the link's free list while the
                // bytes live.
                let b = unsafe { SharedBytes::from_raw(m.ptr, len, m.keep) };
                (b, Some((i, m.handle)))
            }
            LoanMem::Heap(v) => {
                let v = Arc::new(v);
                let ptr = v.as_ptr() as *const u8;
                // SAFETY: the vector has at least `len` bytes, is owned by
                // the Arc and never written again.
                (unsafe { SharedBytes::from_raw(ptr, len, v) }, None)
            }
        }
    }
}

impl<T: Message> PubInner<T> {
    /// Publish bytes written into a loan: in place to every subscription
    /// (the lending link sends its own memory, the others copy or encode).
    fn publish_loaned(&self, mem: LoanMem, len: usize) -> Result<(), PublishError> {
        self.check_alive()?;
        let exp = self.on_publish();
        let (bytes, origin) = mem.freeze(len);
        let mut h = self.lock_history();
        let mut full = Full::default();
        let mut error = None;
        for (i, l) in self.links.iter().enumerate() {
            if !l.wanted() {
                continue;
            }
            let own = match &origin {
                Some((o, handle)) if *o == i => Some(&**handle),
                _ => None,
            };
            match l.send_bytes(&bytes, own) {
                Ok(r) => full.merge(Full::refused(r.count, r.limit)),
                Err(e) => {
                    error.get_or_insert(self.send_error(e));
                }
            }
        }
        let m = self.matched.load();
        for s in m.owners.iter().chain(&m.sharers).chain(&m.values) {
            let r =
                crate::buffer::from_wire::<T>(bytes.clone()).map_err(|e| PublishError::Wire {
                    topic: self.topic.clone(),
                    why: e.to_string(),
                })?;
            full.note(s.push_received(r, exp), s.limit());
        }
        if let Some(h) = h.as_deref_mut() {
            if let Ok(r) = crate::buffer::from_wire::<T>(bytes) {
                self.remember(h, r.into_shared(), exp);
            }
        }
        // Local delivery happened either way; a link error is reported
        // after it.
        self.finish(&m, full)?;
        match error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

/// A loaned, not yet written message (first step of a zero-copy publish):
/// [`write`](Self::write) it, or fill it in place after
/// [`assume_init`](Self::assume_init).
pub struct LoanUninit<'a, T: Message> {
    publisher: &'a Publisher<T>,
    mem: LoanMem,
}

/// A loaned message ready to be filled in place and published
/// ([`publish`](Self::publish)). Dropping it unpublished returns the memory.
pub struct Loan<'a, T: Message> {
    publisher: &'a Publisher<T>,
    mem: LoanMem,
}

impl<T: Message + bytemuck::Pod> Publisher<T> {
    /// Loan memory for one message in this publisher's shared-memory pool
    /// (zero-copy: subscriptions in every process read it in place). The
    /// type must be plain old data.
    ///
    /// ```
    /// # use myelin_core::{Context, QoS};
    /// # let ctx = Context::builder().handle_signals(false).shared_memory(false).build().unwrap();
    /// # let node = ctx.create_node("n").unwrap();
    /// let publisher = node.create_publisher::<u64>("/count", QoS::default()).unwrap();
    /// let loan = publisher.loan_uninit().unwrap().write(42);
    /// loan.publish().unwrap();
    /// ```
    pub fn loan_uninit(&self) -> Result<LoanUninit<'_, T>, PublishError> {
        Ok(LoanUninit {
            publisher: self,
            mem: LoanMem::new(&self.inner, std::mem::size_of::<T>())?,
        })
    }

    /// [`loan_uninit`](Self::loan_uninit) then
    /// [`assume_init`](LoanUninit::assume_init): for filling a large
    /// message field by field without building it on the stack.
    pub fn loan(&self) -> Result<Loan<'_, T>, PublishError> {
        Ok(self.loan_uninit()?.assume_init())
    }
}

impl<'a, T: Message + bytemuck::Pod> LoanUninit<'a, T> {
    /// Move `value` into the loan.
    pub fn write(mut self, value: T) -> Loan<'a, T> {
        // SAFETY: the memory holds at least size_of::<T>() bytes, aligned
        // for T (chunks are 64-byte aligned, heap loans 16; bytemuck::Pod
        // types asking more are refused by `wire_view` at the reader), and
        // this loan is its only user.
        unsafe { std::ptr::write_unaligned(self.mem.ptr() as *mut T, value) };
        Loan {
            publisher: self.publisher,
            mem: self.mem,
        }
    }

    /// Use the memory as it is: whatever it held before (zeros, or an
    /// earlier message). Safe because `T` is plain old data: every bit
    /// pattern is a valid `T`, and the memory is always initialised.
    pub fn assume_init(self) -> Loan<'a, T> {
        Loan {
            publisher: self.publisher,
            mem: self.mem,
        }
    }
}

impl<T: Message + bytemuck::Pod> std::ops::Deref for Loan<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        let len = std::mem::size_of::<T>();
        let ptr = self.mem.ptr_const();
        // SAFETY: `len` initialised bytes that only this loan uses.
        bytemuck::from_bytes(unsafe { std::slice::from_raw_parts(ptr, len) })
    }
}

impl<T: Message + bytemuck::Pod> std::ops::DerefMut for Loan<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        let len = std::mem::size_of::<T>();
        // SAFETY: as `deref`, and `&mut self` makes the access exclusive.
        bytemuck::from_bytes_mut(unsafe { std::slice::from_raw_parts_mut(self.mem.ptr(), len) })
    }
}

impl<T: Message> Loan<'_, T> {
    /// Publish the loaned message: no copy, to every subscription in this
    /// and other processes.
    pub fn publish(self) -> Result<(), PublishError> {
        self.publisher
            .inner
            .publish_loaned(self.mem, std::mem::size_of::<T>())
    }
}

/// A loaned byte buffer of a fixed length for a [`Blob`](crate::Blob)
/// message: fill it, then [`publish`](Self::publish).
pub struct SliceLoan<'a> {
    publisher: &'a Publisher<crate::Blob>,
    mem: LoanMem,
    len: usize,
}

impl Publisher<crate::Blob> {
    /// Loan `len` bytes in shared memory (zero-copy: subscribers in every
    /// process read them in place). The contents start as whatever the
    /// memory held before.
    pub fn loan_slice(&self, len: usize) -> Result<SliceLoan<'_>, PublishError> {
        Ok(SliceLoan {
            publisher: self,
            mem: LoanMem::new(&self.inner, len)?,
            len,
        })
    }
}

impl std::ops::Deref for SliceLoan<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let ptr = self.mem.ptr_const();
        // SAFETY: `len` initialised bytes used only by this loan.
        unsafe { std::slice::from_raw_parts(ptr, self.len) }
    }
}

impl std::ops::DerefMut for SliceLoan<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `deref`, exclusive through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr(), self.len) }
    }
}

impl SliceLoan<'_> {
    /// Publish the bytes: no copy.
    pub fn publish(self) -> Result<(), PublishError> {
        self.publisher.inner.publish_loaned(self.mem, self.len)
    }
}

impl<T: Message> std::fmt::Debug for LoanUninit<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoanUninit")
            .field("type", &T::TYPE_NAME)
            .finish()
    }
}

impl<T: Message> std::fmt::Debug for Loan<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan").field("type", &T::TYPE_NAME).finish()
    }
}

impl std::fmt::Debug for SliceLoan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SliceLoan").field("len", &self.len).finish()
    }
}
