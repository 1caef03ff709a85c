//! Wait sets: wait on several subscriptions, timers and guard conditions in
//! your own loop, then take (rclcpp's `WaitSet`).
//!
//! ```
//! use myelin_core::{Context, GuardCondition, QoS, SubscriptionOptions, WaitSet};
//! use std::time::Duration;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::builder().handle_signals(false).build()?;
//! let node = ctx.create_node("loop")?;
//! let scan = node.create_polling_subscription::<u32>("scan", QoS::default(), SubscriptionOptions::default())?;
//! let quit = GuardCondition::new();
//! let mut ws = WaitSet::new();
//! let scan_idx = ws.add_subscription(&scan)?;
//! ws.add_guard_condition(&quit)?;
//! node.create_publisher::<u32>("scan", QoS::default())?.publish(7)?;
//! let ready = ws.wait(Duration::from_secs(5))?;
//! assert_eq!(ready.subscriptions, vec![scan_idx]);
//! assert_eq!(*scan.take().unwrap(), 7);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use myelin_sync::RetainCell;
use myelin_sync::atomic::{AtomicBool, Ordering, fence};

use crate::transport::wake::WakeEvent;

use crate::dispatch::Tick;
use crate::message::Message;
use crate::runtime::ContextInner;
use crate::subscription::{SubInner, Subscription};
use crate::timer::{Timer, TimerInner};
use crate::waitpoint::WaitPoint;

/// Adding an entity to a wait set, or waiting, failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WaitSetError {
    /// Subscriptions with a callback belong to an executor.
    #[error(
        "subscription {0:?} has a callback (its executor takes its messages): use a polling subscription"
    )]
    HasCallback(String),
    /// An entity belongs to one wait set at a time.
    #[error("{0} is already in a wait set")]
    AlreadyInWaitSet(String),
    /// The timer's node is attached to an executor, which runs it.
    #[error("the timer's node is attached to an executor")]
    TimerInExecutor,
    /// A wait set waits on steady time; a timer that follows `/clock`
    /// needs an executor.
    #[error(
        "the timer runs on simulated time (use_sim_time): run it in an executor, or make it with create_wall_timer"
    )]
    TimerOnSimTime,
    /// A subscription's context was shut down.
    #[error("the context is shut down")]
    ContextShutDown,
}

/// What was ready when [`WaitSet::wait`] returned: indices as returned by the
/// `add_*` methods. All empty means the timeout passed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitSetReady {
    /// Subscriptions with at least one message (take it).
    pub subscriptions: Vec<usize>,
    /// Timers whose deadline passed (call [`Timer::call`] if you want the
    /// callback); each is reported once per deadline.
    pub timers: Vec<usize>,
    /// Guard conditions that were triggered (and are now reset).
    pub guard_conditions: Vec<usize>,
}

impl WaitSetReady {
    /// Nothing was ready: the timeout passed.
    pub fn is_timeout(&self) -> bool {
        self.subscriptions.is_empty() && self.timers.is_empty() && self.guard_conditions.is_empty()
    }
}

trait Source: Send + Sync {
    fn has_data(&self) -> bool;
    /// Move what other processes sent into the buffer.
    fn pump(&self);
    /// Have other processes' publishers signal `word` (`None`: the
    /// subscription's own slot again).
    fn redirect_wake(&self, word: Option<u32>);
    fn waitpoint(&self) -> &Arc<WaitPoint>;
    fn ctx(&self) -> &Arc<ContextInner>;
}

impl<T: Message> Source for SubInner<T> {
    fn has_data(&self) -> bool {
        SubInner::has_data(self)
    }
    fn pump(&self) {
        self.pump_now();
    }
    fn redirect_wake(&self, word: Option<u32>) {
        SubInner::redirect_wake(self, word);
    }
    fn waitpoint(&self) -> &Arc<WaitPoint> {
        SubInner::waitpoint(self)
    }
    fn ctx(&self) -> &Arc<ContextInner> {
        &self.node.ctx
    }
}

struct WsTimer {
    timer: Arc<TimerInner>,
    next_due: Instant,
}

/// A set of entities to wait on. See the [module docs](self).
pub struct WaitSet {
    /// What `wait` sleeps on: local notifications, and (a slot of the
    /// wake-up table, with shared memory) publishers in other processes
    /// of the subscriptions added.
    event: Arc<WakeEvent>,
    subs: Vec<Arc<dyn Source>>,
    timers: Vec<WsTimer>,
    guards: Vec<GuardCondition>,
}

impl Default for WaitSet {
    fn default() -> Self {
        WaitSet::new()
    }
}

impl WaitSet {
    /// An empty wait set.
    pub fn new() -> Self {
        WaitSet {
            event: Arc::new(WakeEvent::remote_capable()),
            subs: Vec::new(),
            timers: Vec::new(),
            guards: Vec::new(),
        }
    }

    /// Add a polling subscription; returns its index.
    pub fn add_subscription<T: Message>(
        &mut self,
        sub: &Subscription<T>,
    ) -> Result<usize, WaitSetError> {
        let inner = &sub.inner;
        if inner.has_callback() {
            return Err(WaitSetError::HasCallback(inner.topic.clone()));
        }
        if !inner.waitpoint().join_wait_set(&self.event) {
            return Err(WaitSetError::AlreadyInWaitSet(format!(
                "subscription {:?}",
                inner.topic
            )));
        }
        // Publishers in other processes now wake this set; what they sent
        // before goes in at the next look.
        inner.redirect_wake(self.event.word(0));
        self.subs.push(inner.clone());
        Ok(self.subs.len() - 1)
    }

    /// Add a timer whose node is not attached to an executor; returns its
    /// index. Its deadlines follow the executor's rules (phase-aligned, late
    /// ticks skipped).
    pub fn add_timer(&mut self, timer: &Timer) -> Result<usize, WaitSetError> {
        if timer.inner.node.executor().is_some() {
            return Err(WaitSetError::TimerInExecutor);
        }
        if timer.inner.sim.is_some() {
            return Err(WaitSetError::TimerOnSimTime);
        }
        if self
            .timers
            .iter()
            .any(|t| Arc::ptr_eq(&t.timer, &timer.inner))
        {
            return Err(WaitSetError::AlreadyInWaitSet("timer".into()));
        }
        self.timers.push(WsTimer {
            next_due: timer.inner.first_due(),
            timer: timer.inner.clone(),
        });
        Ok(self.timers.len() - 1)
    }

    /// Add a guard condition; returns its index.
    pub fn add_guard_condition(&mut self, gc: &GuardCondition) -> Result<usize, WaitSetError> {
        if gc.inner.in_wait_set.swap(true, Ordering::AcqRel) {
            return Err(WaitSetError::AlreadyInWaitSet("guard condition".into()));
        }
        gc.inner.listener.set(Some(self.event.clone()));
        self.guards.push(gc.clone());
        Ok(self.guards.len() - 1)
    }

    fn collect(&mut self, now: Instant) -> WaitSetReady {
        let mut r = WaitSetReady::default();
        self.event.take_pending();
        for (i, s) in self.subs.iter().enumerate() {
            s.pump();
            if s.has_data() {
                r.subscriptions.push(i);
            }
        }
        for (i, t) in self.timers.iter_mut().enumerate() {
            if !t.timer.is_cancelled() && t.next_due <= now {
                let period = t.timer.period;
                let late = now.duration_since(t.next_due);
                let missed = (late.as_nanos() / period.as_nanos().max(1)) as u64;
                t.next_due += period.saturating_mul(missed.min(u64::from(u32::MAX - 1)) as u32 + 1);
                t.timer.note_missed(missed);
                r.timers.push(i);
            }
        }
        for (i, g) in self.guards.iter().enumerate() {
            if g.inner.triggered.swap(false, Ordering::AcqRel) {
                r.guard_conditions.push(i);
            }
        }
        r
    }

    /// Wait until something is ready or `timeout` passes. Returns what is
    /// ready (all empty on timeout), or
    /// [`WaitSetError::ContextShutDown`] when a subscription's context shuts
    /// down.
    pub fn wait(&mut self, timeout: Duration) -> Result<WaitSetReady, WaitSetError> {
        let deadline = crate::clock::deadline_after(timeout);
        loop {
            let now = Instant::now();
            let ready = self.collect(now);
            if !ready.is_timeout() {
                return Ok(ready);
            }
            if self.subs.iter().any(|s| s.ctx().is_shut_down()) {
                return Err(WaitSetError::ContextShutDown);
            }
            if now >= deadline {
                return Ok(ready);
            }
            let next_timer = self
                .timers
                .iter()
                .filter(|t| !t.timer.is_cancelled())
                .map(|t| t.next_due)
                .min();
            let wake_at = next_timer.map_or(deadline, |t| t.min(deadline));
            let (subs, guards) = (&self.subs, &self.guards);
            let event = &self.event;
            event.wait_while(
                || {
                    !event.is_pending()
                        && !subs.iter().any(|s| s.has_data() || s.ctx().is_shut_down())
                        && !guards
                            .iter()
                            .any(|g| g.inner.triggered.load(Ordering::Acquire))
                },
                Some(wake_at),
            );
        }
    }
}

impl Drop for WaitSet {
    fn drop(&mut self) {
        for s in &self.subs {
            s.waitpoint().leave_wait_set();
            s.redirect_wake(None);
        }
        for g in &self.guards {
            g.inner.listener.set(None);
            g.inner.in_wait_set.store(false, Ordering::Release);
        }
    }
}

impl std::fmt::Debug for WaitSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitSet")
            .field("subscriptions", &self.subs.len())
            .field("timers", &self.timers.len())
            .field("guard_conditions", &self.guards.len())
            .finish()
    }
}

struct GuardInner {
    // SYNC: Release store in `trigger` (then a fence and the listener
    // notify) pairs with the Acquire load/swap in the wait set.
    triggered: AtomicBool,
    listener: RetainCell<WakeEvent>,
    in_wait_set: AtomicBool,
}

/// A condition you trigger by hand to wake a [`WaitSet`] (shutdown requests,
/// work handed over from another thread). Cheap to clone.
#[derive(Clone)]
pub struct GuardCondition {
    inner: Arc<GuardInner>,
}

impl Default for GuardCondition {
    fn default() -> Self {
        GuardCondition::new()
    }
}

impl GuardCondition {
    /// A new, untriggered guard condition.
    pub fn new() -> Self {
        GuardCondition {
            inner: Arc::new(GuardInner {
                triggered: AtomicBool::new(false),
                listener: RetainCell::new(),
                in_wait_set: AtomicBool::new(false),
            }),
        }
    }

    /// Trigger it: the wait set it belongs to wakes and reports it once.
    pub fn trigger(&self) {
        self.inner.triggered.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        if let Some(l) = self.inner.listener.get() {
            l.notify();
        }
    }
}

impl std::fmt::Debug for GuardCondition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardCondition")
            .field("triggered", &self.inner.triggered.load(Ordering::Relaxed))
            .finish()
    }
}
