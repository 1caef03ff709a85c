//! QoS events: deadline misses, liveliness changes, matches and
//! incompatible QoS, as statuses you can read and as callbacks the
//! executor runs (registered in [`SubscriptionOptions`](crate::SubscriptionOptions)
//! and [`PublisherOptions`](crate::PublisherOptions)).
//!
//! Counts follow ROS 2 / DDS: `total_count` only grows, the `*_change`
//! fields count since the status was last taken. An endpoint with an event
//! callback has its status taken by each event, as rclcpp's executor takes
//! it when it runs an event: each event's `*_change` fields count what
//! changed since the previous event. Without a callback, a `take_*`
//! method takes it; the plain getters read without taking.
//!
//! Deadline and liveliness are checked by timers on the endpoint's node's
//! executor (no thread per entity): a node that is not added to an executor
//! gets no deadline or liveliness events.

use std::sync::{Arc, Mutex};

use crossbeam_queue::SegQueue;
use myelin_sync::atomic::{AtomicBool, Ordering};
use myelin_sync::{RetainCell, TryLock};

use crate::dispatch::{ExecShared, Executable, GroupInner};
use crate::error::SpinError;
use crate::qos::{IncompatibleQosStatus, LivelinessKind, QosPolicy};

/// A deadline was missed (requested by a subscription, offered by a
/// publisher).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeadlineMissedStatus {
    /// Missed deadlines so far.
    pub total_count: u64,
    /// Since the status was last taken.
    pub total_count_change: u64,
}

/// The liveliness of the publishers a subscription is matched with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LivelinessChangedStatus {
    /// Matched publishers currently alive.
    pub alive_count: u32,
    /// Matched publishers whose lease expired.
    pub not_alive_count: u32,
    /// Change of `alive_count` since last taken.
    pub alive_count_change: i32,
    /// Change of `not_alive_count` since last taken.
    pub not_alive_count_change: i32,
}

/// Matches with the other side (publications for a subscription,
/// subscriptions for a publisher).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MatchedStatus {
    /// Matches ever made.
    pub total_count: u64,
    /// Since last taken.
    pub total_count_change: u64,
    /// Matched now.
    pub current_count: u32,
    /// Change of `current_count` since last taken.
    pub current_count_change: i32,
}

/// Endpoints on the same topic with another type (ROS 2's
/// incompatible-type status): they never match, and each is counted once
/// when found, on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IncompatibleTypeStatus {
    /// Endpoints of another type found so far.
    pub total_count: u64,
    /// Since the status was last taken.
    pub total_count_change: u64,
}

/// An event of a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionEvent {
    /// `RequestedDeadlineMissed`: nothing arrived within the deadline.
    RequestedDeadlineMissed(DeadlineMissedStatus),
    /// A matched publisher became alive or not alive, appeared or went away.
    LivelinessChanged(LivelinessChangedStatus),
    /// `SubscriptionMatched`: the set of matched publishers changed.
    Matched(MatchedStatus),
    /// A publisher with incompatible QoS was found.
    IncompatibleQos(IncompatibleQosStatus),
    /// A publisher of another type on the topic was found.
    IncompatibleType(IncompatibleTypeStatus),
}

/// An event of a publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublisherEvent {
    /// `OfferedDeadlineMissed`: the publisher did not publish within its
    /// deadline.
    OfferedDeadlineMissed(DeadlineMissedStatus),
    /// `PublicationMatched`: the set of matched subscriptions changed.
    Matched(MatchedStatus),
    /// A subscription with incompatible QoS was found.
    IncompatibleQos(IncompatibleQosStatus),
    /// A subscription of another type on the topic was found.
    IncompatibleType(IncompatibleTypeStatus),
}

/// A status whose `*_change` fields count since it was last taken.
pub(crate) trait Changes {
    /// Zero the `*_change` fields (the status was taken).
    fn clear_changes(&mut self);
}

impl Changes for MatchedStatus {
    fn clear_changes(&mut self) {
        self.total_count_change = 0;
        self.current_count_change = 0;
    }
}

impl Changes for DeadlineMissedStatus {
    fn clear_changes(&mut self) {
        self.total_count_change = 0;
    }
}

impl Changes for LivelinessChangedStatus {
    fn clear_changes(&mut self) {
        self.alive_count_change = 0;
        self.not_alive_count_change = 0;
    }
}

impl Changes for IncompatibleTypeStatus {
    fn clear_changes(&mut self) {
        self.total_count_change = 0;
    }
}

impl Changes for IncompatibleQosStatus {
    fn clear_changes(&mut self) {
        self.total_count_change = 0;
    }
}

/// A status guarded for rare updates (events are rare; messages never touch it).
pub(crate) struct Status<S>(Mutex<S>);

impl<S: Copy + Default + Changes> Status<S> {
    /// Apply `f`; the new status, taken (its changes cleared, under the
    /// same lock) when `take` (an event callback receives it).
    pub(crate) fn update_for_event(&self, take: bool, f: impl FnOnce(&mut S)) -> S {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g);
        let out = *g;
        if take {
            g.clear_changes();
        }
        out
    }

    /// The status, its changes cleared.
    pub(crate) fn take_changes(&self) -> S {
        self.take(S::clear_changes)
    }
}

impl<S: Copy + Default> Status<S> {
    pub(crate) fn new() -> Self {
        Status(Mutex::new(S::default()))
    }
    pub(crate) fn get(&self) -> S {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn take(&self, reset: impl FnOnce(&mut S)) -> S {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let out = *g;
        reset(&mut g);
        out
    }
}

impl Status<MatchedStatus> {
    /// Count the matched peers with `count` and record it; returns the new
    /// status if it changed (for the event). `count` runs under the
    /// status's lock, so refreshes from several threads (a transport's
    /// discovery thread, zenoh's callback thread, the creating thread)
    /// are serialised: the last one to store also counted last, and a
    /// count taken before another thread's change can never overwrite the
    /// count taken after it (a lost match). `count` must take no lock of
    /// its own (it reads the links' atomics).
    /// When `take` (an event callback receives the status), its changes
    /// are cleared under the same lock.
    pub(crate) fn recount(&self, count: impl FnOnce() -> u32, take: bool) -> Option<MatchedStatus> {
        let mut changed = false;
        let out = self.update_for_event(take, |s| {
            let current = count();
            if s.current_count == current {
                return;
            }
            changed = true;
            let d = current as i32 - s.current_count as i32;
            if d > 0 {
                s.total_count += d as u64;
                s.total_count_change += d as u64;
            }
            s.current_count = current;
            s.current_count_change += d;
        });
        changed.then_some(out)
    }
}

pub(crate) type EventCallback<E> = Box<dyn FnMut(E) + Send>;

/// Events waiting for the executor to run the endpoint's event callback.
pub(crate) struct EventQueue<E> {
    queue: SegQueue<E>,
    // SYNC: as a subscription's `queued`.
    queued: AtomicBool,
    pub(crate) target: RetainCell<ExecShared>,
    callback: TryLock<EventCallback<E>>,
    group: Arc<GroupInner>,
    describe: String,
}

impl<E: Send + 'static> EventQueue<E> {
    pub(crate) fn new(
        callback: EventCallback<E>,
        group: Arc<GroupInner>,
        describe: String,
    ) -> Arc<Self> {
        Arc::new(EventQueue {
            queue: SegQueue::new(),
            queued: AtomicBool::new(false),
            target: RetainCell::new(),
            callback: TryLock::new(callback),
            group,
            describe,
        })
    }

    pub(crate) fn emit(self: &Arc<Self>, e: E) {
        self.queue.push(e);
        self.signal();
    }

    fn signal(self: &Arc<Self>) {
        if let Some(exec) = self.target.get()
            && !self.queued.swap(true, Ordering::SeqCst)
        {
            exec.enqueue(self.clone());
        }
    }
}

impl<E: Send + 'static> Executable for EventQueue<E> {
    fn execute(self: Arc<Self>, exec: &ExecShared) -> Result<bool, SpinError> {
        let mut result = Ok(false);
        if self.target.is(exec)
            && let Some(mut cb) = self.callback.try_lock()
            && let Some(e) = self.queue.pop()
        {
            result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (cb)(e))) {
                Ok(()) => Ok(true),
                Err(p) => Err(SpinError::CallbackPanicked {
                    entity: format!("event callback of {}", self.describe),
                    message: crate::dispatch::panic_message(&p),
                }),
            };
        }
        self.queued.swap(false, Ordering::SeqCst);
        if !self.queue.is_empty() {
            self.signal();
        }
        result
    }

    fn attach(self: Arc<Self>, exec: Option<Arc<ExecShared>>) {
        self.target.set(exec);
        // As a subscription's: a mark left by the previous executor must
        // not keep this one from being told (see `SubInner::attach`).
        self.queued.store(false, Ordering::SeqCst);
        if !self.queue.is_empty() {
            self.signal();
        }
    }

    fn group(&self) -> &Arc<GroupInner> {
        &self.group
    }
}

impl Status<IncompatibleQosStatus> {
    /// Count one more incompatible peer; the new status, taken when
    /// `take` (an event callback receives it).
    pub(crate) fn record(&self, policy: QosPolicy, take: bool) -> IncompatibleQosStatus {
        self.update_for_event(take, |s| {
            s.total_count += 1;
            s.total_count_change += 1;
            s.last_policy = Some(policy);
        })
    }
}

impl Status<IncompatibleTypeStatus> {
    /// Count one more endpoint of another type; the new status, taken
    /// when `take` (an event callback receives it).
    pub(crate) fn record(&self, take: bool) -> IncompatibleTypeStatus {
        self.update_for_event(take, |s| {
            s.total_count += 1;
            s.total_count_change += 1;
        })
    }
}

/// A publisher's liveliness as its subscriptions see it.
pub(crate) struct LivelinessToken {
    pub(crate) kind: LivelinessKind,
    /// 0 = infinite.
    pub(crate) lease_ns: u64,
    // SYNC: Relaxed: a timestamp compared against the clock, no data to order.
    pub(crate) last_assert_ns: myelin_sync::atomic::AtomicU64,
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

    pub(crate) fn assert_now(&self) {
        self.last_assert_ns.store(
            crate::clock::now_ns(),
            myelin_sync::atomic::Ordering::Relaxed,
        );
    }
}
