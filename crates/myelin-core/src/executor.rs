//! The single-threaded executor: an *events executor*.
//!
//! A push into a subscription's buffer puts that subscription (once, however
//! many messages follow) into its executor's ready queue and notifies the
//! executor's [`Event`]. The executor pops the queue, runs one callback per
//! ready entry, and puts the subscription back at the end of the queue if its
//! buffer still holds messages. So:
//! * dispatch costs O(ready work), not O(entities): 200 idle subscriptions
//!   cost nothing per message;
//! * fairness is FIFO by readiness: a flooded topic gets one callback per
//!   turn, then waits behind the others; due timers run once per turn, before
//!   the next ready entry, so neither a busy topic nor a 0 ms timer starves
//!   the rest;
//! * idle means asleep in the kernel (a futex), until a message, a timer
//!   deadline, [`StopHandle::stop`], context shutdown or Ctrl-C.
//!
//! # Timers: phase alignment and overruns
//! A timer's deadlines are multiples of its period counted from its
//! context's creation (its *epoch*), starting with the first one at least a
//! full period after the timer's creation; so the first tick comes one to two
//! periods after creation, never earlier. Timers of equal period in one
//! context therefore tick at the same instants and share one wake-up: ten
//! nodes with a 100 Hz timer each cost one wake-up per 10 ms, not ten (seed
//! 001's `ros` vs `rosonenode`).
//!
//! A timer's deadlines are `first + k * period`. When it fires late (a long
//! callback, a busy executor), it runs once, and the deadlines it missed are
//! skipped, not replayed in a burst: the next deadline is the first one
//! after now, and [`Timer::missed`](crate::Timer::missed) counts the skipped
//! periods. This is rcl's rule.
//!
//! # Panics in callbacks
//! A panicking callback is caught; `spin*` returns
//! [`SpinError::CallbackPanicked`] naming the entity. The entity and the
//! executor stay usable: spin again to continue.

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_queue::{ArrayQueue, SegQueue};
use myelin_sync::atomic::{AtomicBool, AtomicU64, Ordering};
use myelin_sync::{Event, Scope};

use crate::context::ContextInner;
use crate::error::{AddNodeError, SpinError};
use crate::node::{Node, NodeInner};
use crate::timer::TimerInner;

/// Something an executor runs when it is ready.
pub(crate) trait Executable: Send + Sync {
    /// Run one unit of work (one message).
    fn execute(self: Arc<Self>, exec: &ExecShared) -> Result<(), SpinError>;
    /// Set (or clear) the executor to notify.
    fn attach(self: Arc<Self>, exec: Option<Arc<ExecShared>>);
}

/// Capacity of the fast ready ring. An entity is queued at most once at a
/// time (its `queued` flag), so this bounds simultaneously *ready* entities,
/// not entities; beyond it, entries spill into an unbounded overflow queue.
const READY_RING: usize = 1024;

/// The ready queue: a bounded lock-free ring (cheap), with an unbounded
/// overflow for the rare moment more than [`READY_RING`] entities are ready.
/// Order is FIFO within each part; the ring is served first.
struct ReadyQueue {
    ring: ArrayQueue<Arc<dyn Executable>>,
    overflow: SegQueue<Arc<dyn Executable>>,
}

impl ReadyQueue {
    #[inline]
    fn push(&self, e: Arc<dyn Executable>) {
        if let Err(e) = self.ring.push(e) {
            self.overflow.push(e);
        }
    }
    #[inline]
    fn pop(&self) -> Option<Arc<dyn Executable>> {
        self.ring.pop().or_else(|| self.overflow.pop())
    }
    #[inline]
    fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.overflow.is_empty()
    }
    fn len(&self) -> usize {
        self.ring.len() + self.overflow.len()
    }
}

/// The part of an executor that producers see.
pub(crate) struct ExecShared {
    ready: ReadyQueue,
    pub(crate) event: Event,
    stop: AtomicBool,
    /// Timers of the attached nodes.
    timers: Mutex<Vec<Arc<TimerInner>>>,
    /// Bumped whenever `timers` changes.
    // SYNC: Release in `timers_changed` pairs with the Acquire in `refresh_timers`.
    timers_gen: AtomicU64,
}

impl ExecShared {
    #[inline]
    pub(crate) fn enqueue(&self, e: Arc<dyn Executable>) {
        self.ready.push(e);
        self.event.notify();
    }

    pub(crate) fn add_timer(&self, t: Arc<TimerInner>) {
        self.timers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(t);
        self.timers_changed();
    }

    pub(crate) fn remove_timer(&self, id: u64) {
        self.timers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t| t.id != id);
        self.timers_changed();
    }

    pub(crate) fn timers_changed(&self) {
        self.timers_gen.fetch_add(1, Ordering::Release);
        self.event.notify();
    }
}

struct LocalTimer {
    inner: Arc<TimerInner>,
    next_due: Instant,
}

/// A single-threaded executor. See the [module docs](self).
///
/// ```
/// use myelin_core::{Context, Executor, QoS};
/// use std::time::Duration;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("listener")?;
/// let _sub = node.create_subscription("chatter", QoS::default(), |msg: String| {
///     println!("heard {msg}");
/// })?;
/// let publisher = node.create_publisher::<String>("chatter", QoS::default())?;
/// let mut exec = Executor::new();
/// exec.add_node(&node)?;
/// publisher.publish("hello".to_string())?;
/// exec.spin_some()?;
/// # Ok(()) }
/// ```
pub struct Executor {
    shared: Arc<ExecShared>,
    ctx: Option<Arc<ContextInner>>,
    nodes: Vec<Weak<NodeInner>>,
    timers: Vec<LocalTimer>,
    seen_gen: u64,
}

/// Stops an executor's `spin` from any thread. Cheap to clone.
#[derive(Clone)]
pub struct StopHandle {
    shared: Weak<ExecShared>,
}

impl StopHandle {
    /// Make the executor's current (or next) `spin` return `Ok`.
    pub fn stop(&self) {
        if let Some(s) = self.shared.upgrade() {
            s.stop.store(true, Ordering::SeqCst);
            s.event.notify();
        }
    }
}

impl std::fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopHandle")
    }
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new()
    }
}

pub(crate) fn panic_message(p: &Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

impl Executor {
    /// A new executor with no nodes.
    pub fn new() -> Self {
        Executor {
            shared: Arc::new(ExecShared {
                ready: ReadyQueue {
                    ring: ArrayQueue::new(READY_RING),
                    overflow: SegQueue::new(),
                },
                event: Event::new(Scope::Process),
                stop: AtomicBool::new(false),
                timers: Mutex::new(Vec::new()),
                timers_gen: AtomicU64::new(1),
            }),
            ctx: None,
            nodes: Vec::new(),
            timers: Vec::new(),
            seen_gen: 0,
        }
    }

    /// Add a node: its subscriptions and timers, present and future, are run
    /// by this executor. A node belongs to one executor at a time.
    pub fn add_node(&mut self, node: &Node) -> Result<(), AddNodeError> {
        let n = &node.inner;
        if let Some(ctx) = &self.ctx
            && !Arc::ptr_eq(ctx, &n.ctx)
        {
            return Err(AddNodeError::OtherContext(n.fqn.clone()));
        }
        n.attach(&self.shared)?;
        if self.ctx.is_none() {
            let mut execs = n.ctx.executors.lock().unwrap_or_else(|e| e.into_inner());
            execs.retain(|w| w.strong_count() > 0);
            execs.push(Arc::downgrade(&self.shared));
            drop(execs);
            self.ctx = Some(n.ctx.clone());
        }
        self.nodes.push(Arc::downgrade(n));
        Ok(())
    }

    /// Remove a node; returns whether it was attached to this executor.
    pub fn remove_node(&mut self, node: &Node) -> bool {
        let before = self.nodes.len();
        self.nodes
            .retain(|w| w.upgrade().is_some_and(|n| !Arc::ptr_eq(&n, &node.inner)));
        let removed = self.nodes.len() != before;
        if removed {
            node.inner.detach(&self.shared);
        }
        removed
    }

    /// A handle that stops `spin` from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    fn shut_down(&self) -> bool {
        self.ctx.as_ref().is_some_and(|c| c.is_shut_down())
    }

    fn refresh_timers(&mut self) {
        let g = self.shared.timers_gen.load(Ordering::Acquire);
        if g == self.seen_gen {
            return;
        }
        self.seen_gen = g;
        let registered = self
            .shared
            .timers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut next = Vec::with_capacity(registered.len());
        for t in registered {
            let due = self
                .timers
                .iter()
                .find(|l| Arc::ptr_eq(&l.inner, &t))
                .map(|l| l.next_due)
                .unwrap_or_else(|| t.first_due());
            next.push(LocalTimer {
                inner: t,
                next_due: due,
            });
        }
        self.timers = next;
    }

    /// Run every due timer once. Returns how many ran.
    fn run_due_timers(&mut self) -> Result<usize, SpinError> {
        if self.timers.is_empty() {
            return Ok(0);
        }
        let now = Instant::now();
        let mut ran = 0;
        let mut result = Ok(());
        for lt in &mut self.timers {
            if let Some(at) = lt.inner.take_reset() {
                lt.next_due = at;
            }
            if lt.inner.is_cancelled() || lt.next_due > now {
                continue;
            }
            let period = lt.inner.period;
            // Skip (and count) the deadlines missed, rcl-style.
            let late = now.duration_since(lt.next_due);
            let missed = (late.as_nanos() / period.as_nanos().max(1)) as u64;
            lt.next_due += period.saturating_mul(missed.min(u64::from(u32::MAX - 1)) as u32 + 1);
            if lt.next_due <= now {
                lt.next_due = now + period;
            }
            lt.inner.note_missed(missed);
            ran += 1;
            if let Err(e) = lt.inner.fire() {
                result = Err(e);
                break;
            }
        }
        result.map(|_| ran)
    }

    fn next_timer_due(&self) -> Option<Instant> {
        self.timers
            .iter()
            .filter(|t| !t.inner.is_cancelled())
            .map(|t| t.next_due)
            .min()
    }

    fn idle(&self) -> bool {
        self.shared.ready.is_empty()
            && !self.shared.stop.load(Ordering::SeqCst)
            && !self.shut_down()
            && self.shared.timers_gen.load(Ordering::Acquire) == self.seen_gen
    }

    /// One unit of work, waiting until `deadline` (None = forever) for it.
    /// Returns whether work was done.
    fn once(&mut self, deadline: Option<Instant>) -> Result<bool, SpinError> {
        loop {
            self.refresh_timers();
            // One turn: every due timer once, then one ready entry, so
            // neither can starve the other.
            let timers_ran = self.run_due_timers()?;
            if let Some(e) = self.shared.ready.pop() {
                e.execute(&self.shared)?;
                return Ok(true);
            }
            if timers_ran > 0 {
                return Ok(true);
            }
            if self.shared.stop.load(Ordering::SeqCst) || self.shut_down() {
                return Ok(false);
            }
            let wake_at = match (deadline, self.next_timer_due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(d) = deadline
                && Instant::now() >= d
            {
                return Ok(false);
            }
            let shared = self.shared.clone();
            let seen = self.seen_gen;
            let ctx = self.ctx.clone();
            shared.event.wait_while(
                || {
                    shared.ready.is_empty()
                        && !shared.stop.load(Ordering::SeqCst)
                        && !ctx.as_ref().is_some_and(|c| c.is_shut_down())
                        && shared.timers_gen.load(Ordering::Acquire) == seen
                },
                wake_at,
            );
        }
    }

    /// Run callbacks until [`StopHandle::stop`], context shutdown or Ctrl-C
    /// (all return `Ok`), or a callback panics (returns the error).
    pub fn spin(&mut self) -> Result<(), SpinError> {
        loop {
            if self.shared.stop.swap(false, Ordering::SeqCst) || self.shut_down() {
                return Ok(());
            }
            self.once(None)?;
        }
    }

    /// Wait up to `timeout` for one unit of work (a message or a due timer)
    /// and run it. Returns whether anything ran.
    pub fn spin_once(&mut self, timeout: Duration) -> Result<bool, SpinError> {
        let r = self.once(Some(Instant::now() + timeout));
        self.shared.stop.store(false, Ordering::SeqCst);
        r
    }

    /// Run everything that is ready now (due timers, then one message per
    /// ready entry present on entry), without waiting. Returns how many
    /// callbacks ran.
    pub fn spin_some(&mut self) -> Result<usize, SpinError> {
        self.refresh_timers();
        let mut ran = self.run_due_timers()?;
        let n = self.shared.ready.len();
        for _ in 0..n {
            match self.shared.ready.pop() {
                Some(e) => {
                    e.execute(&self.shared)?;
                    ran += 1;
                }
                None => break,
            }
        }
        Ok(ran)
    }

    /// Spin until `done()` returns true (checked after each unit of work), or
    /// `timeout` passes, or the executor is stopped. Returns whether `done()`
    /// became true.
    pub fn spin_until(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut() -> bool,
    ) -> Result<bool, SpinError> {
        let deadline = Instant::now() + timeout;
        loop {
            if done() {
                return Ok(true);
            }
            if self.shared.stop.swap(false, Ordering::SeqCst)
                || self.shut_down()
                || Instant::now() >= deadline
            {
                return Ok(done());
            }
            self.once(Some(deadline))?;
        }
    }

    /// Whether the executor would sleep right now.
    pub fn is_idle(&self) -> bool {
        self.idle()
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        for n in self.nodes.drain(..) {
            if let Some(n) = n.upgrade() {
                n.detach(&self.shared);
            }
        }
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("nodes", &self.nodes.len())
            .field("timers", &self.timers.len())
            .finish()
    }
}
