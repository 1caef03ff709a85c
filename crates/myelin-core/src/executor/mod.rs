//! Executors: *events executors*, single- and multi-threaded.
//!
//! A push into a subscription's buffer puts that subscription (once, however
//! many messages follow) into its executor's ready queue and notifies the
//! executor's event. A due timer is put into the same queue. A worker pops
//! the queue and runs one callback per ready entry; a subscription whose
//! buffer still holds messages goes back to the end of the queue. So:
//! * dispatch costs O(ready work), not O(entities): 200 idle subscriptions
//!   cost nothing per message;
//! * fairness is FIFO by readiness: a flooded topic gets one callback per
//!   turn, then waits behind every other ready entry, timers included, so
//!   neither a busy topic nor a 0 ms timer starves the rest;
//! * idle means asleep in the kernel (a futex), until a message, a timer
//!   deadline, [`StopHandle::stop`], context shutdown or Ctrl-C.
//!
//! An entry stays marked as queued until its callback has returned, so one
//! subscription's callback never runs on two threads at once and its
//! messages are handled in order, whatever the executor.
//!
//! [`Executor`] runs everything on the calling thread.
//! [`MultiThreadedExecutor`] runs N worker threads over one ready queue and
//! honours [callback groups](crate::CallbackGroup). Several executors of
//! either kind can serve one context, each on its own thread: they share no
//! lock on the message path (one executor per component, rclcpp#1772).
//!
//! # Timers: phase alignment and overruns
//! A timer's deadlines are multiples of its period counted from its
//! context's creation (its *epoch*), starting with the first one at least a
//! full period after the timer's creation; so the first tick comes one to two
//! periods after creation, never earlier. Timers of equal period in one
//! context therefore tick at the same instants and share one wake-up: ten
//! nodes with a 100 Hz timer each cost one wake-up per 10 ms, not ten (the
//! many-nodes vs one-node CPU measurement of the 20-topic fan-out).
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

mod multi;

pub use multi::MultiThreadedExecutor;

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_queue::{ArrayQueue, SegQueue};
use myelin_sync::TryLock;
use myelin_sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::clock::{from_mono_ns, mono_ns};
use crate::context::ContextInner;
use crate::error::{AddNodeError, SpinError};
use crate::group::GroupInner;
use crate::node::{Node, NodeInner};
use crate::timer::TimerInner;
use crate::transport::wake::{Lanes as WakeLanes, WakeEvent};

thread_local! {
    /// The executor (by address, never dereferenced), whether it runs
    /// groups, and the group of the callback this thread is running now.
    static CURRENT: std::cell::Cell<Option<(usize, bool, usize)>> = const { std::cell::Cell::new(None) };
}

/// What this thread is executing, if it is inside an executor's callback:
/// (executor address, grouped, group address).
pub(crate) fn current() -> Option<(usize, bool, usize)> {
    CURRENT.with(|c| c.get())
}

/// Marks this thread as running `e` on `exec` until dropped.
struct Running {
    prev: Option<(usize, bool, usize)>,
}

impl Running {
    #[inline]
    fn enter(exec: &ExecShared, grouped: bool, group: usize) -> Running {
        let me = (exec as *const ExecShared as usize, grouped, group);
        Running {
            prev: CURRENT.with(|c| c.replace(Some(me))),
        }
    }
}

impl Drop for Running {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Something an executor runs when it is ready.
pub(crate) trait Executable: Send + Sync {
    /// Run one unit of work (one message or one timer tick), then clear the
    /// entry's queued mark and re-queue it if more work arrived.
    fn execute(self: Arc<Self>, exec: &ExecShared) -> Result<(), SpinError>;
    /// Set (or clear) the executor to notify.
    fn attach(self: Arc<Self>, exec: Option<Arc<ExecShared>>);
    /// The entity's callback group.
    fn group(&self) -> &Arc<GroupInner>;
}

/// A subscription whose messages from other processes wait to be drained
/// (a shared-memory inbox).
pub(crate) trait Pump: Send + Sync {
    /// Move what other processes sent into the subscription's buffer.
    fn pump(self: Arc<Self>);
}

/// The pumps of one executor by ready lane: a remote wake-up names lanes,
/// and only the pumps behind them are drained.
pub(crate) struct PumpLanes {
    /// `lanes[l]`: the pumps that share lane `l`.
    lanes: ArcSwap<Vec<Vec<Weak<dyn Pump>>>>,
    /// Serialises changes (readers never lock).
    change: Mutex<()>,
    next: AtomicU64,
}

impl PumpLanes {
    pub(crate) fn new() -> Self {
        PumpLanes {
            lanes: ArcSwap::from_pointee(Vec::new()),
            change: Mutex::new(()),
            next: AtomicU64::new(0),
        }
    }

    /// Give `p` a lane (round robin: lanes are shared only past
    /// [`WakeLanes::COUNT`] pumps).
    pub(crate) fn add(&self, p: Weak<dyn Pump>) -> u32 {
        let _g = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let lane = (self.next.fetch_add(1, Ordering::Relaxed) % u64::from(WakeLanes::COUNT)) as u32;
        let mut next = (**self.lanes.load()).clone();
        if next.len() <= lane as usize {
            next.resize_with(lane as usize + 1, Vec::new);
        }
        next[lane as usize].retain(|w| w.strong_count() > 0);
        next[lane as usize].push(p);
        self.lanes.store(Arc::new(next));
        lane
    }

    fn remove(&self, p: *const ()) {
        let _g = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = (**self.lanes.load()).clone();
        for l in &mut next {
            l.retain(|w| w.strong_count() > 0 && w.as_ptr() as *const () != p);
        }
        self.lanes.store(Arc::new(next));
    }

    /// Drain the pumps behind the marked lanes.
    pub(crate) fn pump(&self, marked: &WakeLanes) {
        let lanes = self.lanes.load();
        for lane in marked.iter() {
            if let Some(pumps) = lanes.get(lane as usize) {
                for p in pumps.iter().filter_map(Weak::upgrade) {
                    p.pump();
                }
            }
        }
    }
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
        // The overflow is almost always empty; its `len` walks indices.
        let spill = if self.overflow.is_empty() {
            0
        } else {
            self.overflow.len()
        };
        self.ring.len() + spill
    }
}

struct LocalTimer {
    inner: Arc<TimerInner>,
    next_due: Instant,
}

/// The timer schedule, owned by whichever worker holds its lock.
#[derive(Default)]
struct Wheel {
    seen_gen: u64,
    timers: Vec<LocalTimer>,
}

/// The part of an executor that producers and workers share.
pub(crate) struct ExecShared {
    ready: ReadyQueue,
    /// What idle workers sleep on; with shared memory, a slot other
    /// processes signal too (one wait for local and remote work).
    pub(crate) event: WakeEvent,
    /// Subscriptions fed from other processes, by ready lane: drained when
    /// a remote wake-up marks their lane.
    pumps: PumpLanes,
    /// Spin instead of sleeping when idle (lowest latency, one core busy).
    // SYNC: Relaxed: a mode switch read once per idle turn.
    busy_poll: AtomicBool,
    stop: AtomicBool,
    /// Set when the context shuts down.
    down: AtomicBool,
    /// Timers of the attached nodes.
    timers: Mutex<Vec<Arc<TimerInner>>>,
    /// Bumped whenever `timers` changes.
    // SYNC: Release in `timers_changed` pairs with the Acquire in `poll_timers`.
    timers_gen: AtomicU64,
    /// `timers_gen` as last seen by the wheel (lets `poll_timers` skip the
    /// lock and the clock when there is nothing to do).
    wheel_gen: AtomicU64,
    wheel: TryLock<Wheel>,
    /// The earliest timer deadline (`mono_ns`), `u64::MAX` for none.
    next_due: AtomicU64,
}

impl ExecShared {
    fn new() -> Arc<Self> {
        Arc::new(ExecShared {
            ready: ReadyQueue {
                ring: ArrayQueue::new(READY_RING),
                overflow: SegQueue::new(),
            },
            event: WakeEvent::remote_capable(),
            pumps: PumpLanes::new(),
            busy_poll: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            down: AtomicBool::new(false),
            timers: Mutex::new(Vec::new()),
            timers_gen: AtomicU64::new(0),
            wheel_gen: AtomicU64::new(0),
            wheel: TryLock::new(Wheel::default()),
            next_due: AtomicU64::new(u64::MAX),
        })
    }

    /// Queue a ready entry and wake one sleeping worker.
    #[inline]
    pub(crate) fn enqueue(&self, e: Arc<dyn Executable>) {
        self.ready.push(e);
        self.event.notify_one();
    }

    /// Drain `p` whenever a remote wake-up marks the lane it is given;
    /// returns the word remote publishers signal (`None`: this executor's
    /// event cannot be signalled from outside, so `p` is never drained by
    /// a wake-up).
    pub(crate) fn add_pump(&self, p: Weak<dyn Pump>) -> Option<u32> {
        let lane = self.pumps.add(p);
        self.event.word(lane)
    }

    /// Stop draining `p`.
    pub(crate) fn remove_pump(&self, p: *const ()) {
        self.pumps.remove(p);
    }

    /// A remote process signalled: move what it sent into the buffers of
    /// the subscriptions behind the lanes it marked (and only those).
    #[inline]
    fn pump_remote(&self) {
        if let Some(marked) = self.event.take_lanes() {
            self.pumps.pump(&marked);
        }
    }

    /// Queue without waking (the caller notifies).
    #[inline]
    pub(crate) fn push_ready(&self, e: Arc<dyn Executable>) {
        self.ready.push(e);
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

    /// The context shut down: every worker returns.
    pub(crate) fn context_down(&self) {
        self.down.store(true, Ordering::SeqCst);
        self.event.notify();
    }

    fn halted(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.down.load(Ordering::SeqCst)
    }

    /// Queue every due timer (if no other worker is doing it right now).
    #[inline]
    fn poll_timers(&self) {
        let gen_now = self.timers_gen.load(Ordering::Acquire);
        if gen_now == self.wheel_gen.load(Ordering::Relaxed)
            && self.next_due.load(Ordering::Acquire) == u64::MAX
        {
            return; // no timers
        }
        let Some(mut wheel) = self.wheel.try_lock() else {
            return;
        };
        if gen_now != wheel.seen_gen {
            let registered = self
                .timers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let mut next = Vec::with_capacity(registered.len());
            for t in registered {
                let due = wheel
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
            wheel.timers = next;
            wheel.seen_gen = gen_now;
            self.wheel_gen.store(gen_now, Ordering::Relaxed);
        }
        let now = Instant::now();
        let mut earliest = u64::MAX;
        for lt in &mut wheel.timers {
            if let Some(at) = lt.inner.take_reset() {
                lt.next_due = at;
            }
            if lt.inner.is_cancelled() {
                continue;
            }
            if lt.next_due <= now {
                let period = lt.inner.period;
                // Skip (and count) the deadlines missed, rcl-style.
                let late = now.duration_since(lt.next_due);
                let mut missed = (late.as_nanos() / period.as_nanos().max(1)) as u64;
                lt.next_due +=
                    period.saturating_mul(missed.min(u64::from(u32::MAX - 1)) as u32 + 1);
                if lt.next_due <= now {
                    lt.next_due = now + period;
                }
                if !lt.inner.mark_queued() {
                    // Its previous tick has not run yet: this one is missed.
                    missed += 1;
                } else {
                    self.ready.push(lt.inner.clone());
                }
                lt.inner.note_missed(missed);
            }
            earliest = earliest.min(mono_ns(lt.next_due));
        }
        self.next_due.store(earliest, Ordering::Release);
    }

    /// Run one popped entry, marking this thread as inside it.
    #[inline]
    fn run_entry(&self, e: Arc<dyn Executable>, grouped: bool) -> Result<(), SpinError> {
        let _running = Running::enter(self, grouped, Arc::as_ptr(e.group()) as usize);
        if grouped {
            let g = e.group().clone();
            g.run(e, self)
        } else {
            e.execute(self)
        }
    }

    /// Whether `self` is the executor at address `addr` (see [`current`]).
    pub(crate) fn is_at(&self, addr: usize) -> bool {
        self as *const ExecShared as usize == addr
    }

    fn next_due(&self) -> Option<Instant> {
        match self.next_due.load(Ordering::Acquire) {
            u64::MAX => None,
            ns => Some(from_mono_ns(ns)),
        }
    }

    /// One turn: queue due timers, run one ready entry (through its callback
    /// group when `grouped`), else sleep until work, a timer deadline,
    /// `deadline`, stop or shutdown. Returns whether an entry ran.
    pub(crate) fn turn(&self, deadline: Option<Instant>, grouped: bool) -> Result<bool, SpinError> {
        self.turn_until(deadline, grouped, &|| false)
    }

    /// [`turn`](Self::turn) that also returns (`Ok(false)`) as soon as
    /// `enough()` holds: a nested spin waiting for an answer that another
    /// worker produces.
    pub(crate) fn turn_until(
        &self,
        deadline: Option<Instant>,
        grouped: bool,
        enough: &dyn Fn() -> bool,
    ) -> Result<bool, SpinError> {
        loop {
            self.pump_remote();
            self.poll_timers();
            if let Some(e) = self.ready.pop() {
                self.run_entry(e, grouped)?;
                return Ok(true);
            }
            if self.halted() || enough() {
                return Ok(false);
            }
            let timer = self.next_due();
            let wake_at = match (deadline, timer) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(d) = deadline
                && Instant::now() >= d
            {
                return Ok(false);
            }
            if self.busy_poll.load(Ordering::Relaxed) {
                // Busy-poll mode: look again at once (remote inboxes are
                // drained in the next turn once their slot is marked).
                std::hint::spin_loop();
                continue;
            }
            let seen_gen = self.timers_gen.load(Ordering::Acquire);
            self.event.wait_while(
                || {
                    self.ready.is_empty()
                        && !self.event.is_pending()
                        && !self.halted()
                        && !enough()
                        && self.timers_gen.load(Ordering::Acquire) == seen_gen
                        && self.next_due.load(Ordering::Acquire) == timer.map_or(u64::MAX, mono_ns)
                },
                wake_at,
            );
        }
    }
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

pub(crate) fn panic_message(p: &Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// The nodes an executor serves, and its context.
struct Attachments {
    ctx: Option<Arc<ContextInner>>,
    nodes: Vec<Weak<NodeInner>>,
}

impl Attachments {
    fn new() -> Self {
        Attachments {
            ctx: None,
            nodes: Vec::new(),
        }
    }

    fn add(&mut self, shared: &Arc<ExecShared>, node: &Node) -> Result<(), AddNodeError> {
        let n = &node.inner;
        if let Some(ctx) = &self.ctx
            && !Arc::ptr_eq(ctx, &n.ctx)
        {
            return Err(AddNodeError::OtherContext(n.fqn.clone()));
        }
        n.attach(shared)?;
        if self.ctx.is_none() {
            let mut execs = n.ctx.executors.lock().unwrap_or_else(|e| e.into_inner());
            execs.retain(|w| w.strong_count() > 0);
            execs.push(Arc::downgrade(shared));
            drop(execs);
            if n.ctx.is_shut_down() {
                shared.context_down();
            }
            self.ctx = Some(n.ctx.clone());
        }
        self.nodes.push(Arc::downgrade(n));
        Ok(())
    }

    fn remove(&mut self, shared: &Arc<ExecShared>, node: &Node) -> bool {
        let before = self.nodes.len();
        self.nodes
            .retain(|w| w.upgrade().is_some_and(|n| !Arc::ptr_eq(&n, &node.inner)));
        let removed = self.nodes.len() != before;
        if removed {
            node.inner.detach(shared);
        }
        removed
    }

    fn detach_all(&mut self, shared: &Arc<ExecShared>) {
        for n in self.nodes.drain(..) {
            if let Some(n) = n.upgrade() {
                n.detach(shared);
            }
        }
    }
}

/// A single-threaded executor: every callback runs on the thread that
/// spins. See the [module docs](self).
///
/// ```
/// use myelin_core::{Context, Executor, QoS};
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
    attached: Attachments,
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new()
    }
}

impl Executor {
    /// A new executor with no nodes.
    pub fn new() -> Self {
        Executor {
            shared: ExecShared::new(),
            attached: Attachments::new(),
        }
    }

    /// Add a node: its subscriptions and timers, present and future, are run
    /// by this executor. A node belongs to one executor at a time.
    pub fn add_node(&mut self, node: &Node) -> Result<(), AddNodeError> {
        self.attached.add(&self.shared, node)
    }

    /// Remove a node; returns whether it was attached to this executor.
    pub fn remove_node(&mut self, node: &Node) -> bool {
        self.attached.remove(&self.shared, node)
    }

    /// Busy-poll instead of sleeping when there is no work: the lowest
    /// latency for messages from other processes and threads (no futex
    /// wake-up), at the cost of one core spinning. Off by default.
    pub fn set_busy_poll(&mut self, on: bool) {
        self.shared.busy_poll.store(on, Ordering::Relaxed);
    }

    /// A handle that stops `spin` from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Run callbacks until [`StopHandle::stop`], context shutdown or Ctrl-C
    /// (all return `Ok`), or a callback panics (returns the error).
    pub fn spin(&mut self) -> Result<(), SpinError> {
        loop {
            if self.shared.stop.swap(false, Ordering::SeqCst)
                || self.shared.down.load(Ordering::SeqCst)
            {
                return Ok(());
            }
            self.shared.turn(None, false)?;
        }
    }

    /// Wait up to `timeout` for one unit of work (a message or a due timer)
    /// and run it. Returns whether anything ran.
    pub fn spin_once(&mut self, timeout: Duration) -> Result<bool, SpinError> {
        let r = self.shared.turn(Some(Instant::now() + timeout), false);
        self.shared.stop.store(false, Ordering::SeqCst);
        r
    }

    /// Run everything that is ready now (due timers, and one message per
    /// ready entry present on entry), without waiting. Returns how many
    /// callbacks ran.
    pub fn spin_some(&mut self) -> Result<usize, SpinError> {
        self.shared.poll_timers();
        let n = self.shared.ready.len();
        let mut ran = 0;
        for _ in 0..n {
            match self.shared.ready.pop() {
                Some(e) => {
                    self.shared.run_entry(e, false)?;
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
                || self.shared.down.load(Ordering::SeqCst)
                || Instant::now() >= deadline
            {
                return Ok(done());
            }
            self.shared.turn(Some(deadline), false)?;
        }
    }

    /// Whether nothing is ready right now.
    pub fn is_idle(&self) -> bool {
        self.shared.ready.is_empty()
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.attached.detach_all(&self.shared);
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("nodes", &self.attached.nodes.len())
            .finish()
    }
}
