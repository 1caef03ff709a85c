//! Executors: *events executors*, single- and multi-threaded.
//!
//! A push into a subscription's buffer puts that subscription (once, however
//! many messages follow) into its executor's ready queue and notifies the
//! executor's event (a busy-polling executor's workers look at the buffer
//! themselves instead, turn about with the queue; see
//! [`IdleWait::BusyPoll`]). A due timer is put into the same queue. A worker pops
//! the queue and runs one callback per ready entry; a subscription whose
//! buffer still holds messages goes back to the end of the queue. So:
//! * dispatch costs O(ready work), not O(entities): 200 idle subscriptions
//!   cost nothing per message;
//! * fairness is FIFO by readiness: a flooded topic gets one callback per
//!   turn, then waits behind every other ready entry, timers included, so
//!   neither a busy topic nor a 0 ms timer starves the rest;
//! * work a callback causes goes first: an entry that a callback running
//!   on this executor makes ready (it publishes to a subscription served
//!   here, answers a client, ...) runs before older ready entries, so a
//!   message passes through a pipeline of nodes before the executor
//!   starts on the next input, as it would if each callback ran in its
//!   publisher's thread (a busy-polling executor alternates its queue,
//!   caused work first, with looks at its subscriptions' buffers). At
//!   most 64 caused entries run in a row while an older one waits; then
//!   the older one runs, so callbacks that keep publishing to each other
//!   starve nothing. A single-threaded executor looks at its timers
//!   between caused entries only when that turn lets older work in (no
//!   clock read per callback of a pipeline): a timer that comes due
//!   during a burst is queued when the burst ends, behind what other
//!   threads queued during it. (Ten nodes whose timers
//!   publish to each other's subscriptions at 100 Hz: median latency
//!   22.6 us instead of 184 us; Mont Blanc in one process: mean 5.6 us
//!   instead of 62-74 us; see BENCHMARKS.md.) A subscription coming back
//!   for its next message is not caused work: it goes to the end;
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

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use myelin_sync::atomic::Ordering;

use crate::clock::deadline_after;
pub use crate::dispatch::{Anticipated, IdleWait, UnknownIdleWait};
use crate::dispatch::{ExecShared, Until};
use crate::error::{AddNodeError, SpinError};
use crate::node::Node;
use crate::runtime::{ContextInner, NodeInner};

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
            shared: ExecShared::new(crate::dispatch::Workers::One),
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
    /// wake-up), at the cost of one core spinning. Off by default. The same
    /// as `set_idle_wait(IdleWait::BusyPoll)` (on) or `IdleWait::Block` (off).
    pub fn set_busy_poll(&mut self, on: bool) {
        self.set_idle_wait(if on {
            IdleWait::BusyPoll
        } else {
            IdleWait::Block
        });
    }

    /// How this executor waits when there is no work: asleep in the kernel
    /// (the default), [anticipating](IdleWait::Anticipate) periodic work,
    /// or busy-polling. See [`IdleWait`] for what each costs.
    ///
    /// ```
    /// use myelin_core::{Context, Executor, IdleWait, QoS};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("camera_sink")?;
    /// let _sub = node.create_subscription("frames", QoS::sensor_data(), |_f: &u64| {})?;
    /// let mut exec = Executor::new();
    /// exec.add_node(&node)?;
    /// exec.set_idle_wait(IdleWait::Anticipate);
    /// # Ok(()) }
    /// ```
    pub fn set_idle_wait(&mut self, wait: IdleWait) {
        self.shared.set_idle_wait(wait);
    }

    /// With [`IdleWait::Anticipate`]: the period learned and how many
    /// bursts of work were caught in the window or missed (paid a
    /// wake-up). Many misses mean the work is not periodic enough to
    /// anticipate, or the machine is too busy to spin on time.
    ///
    /// ```
    /// use myelin_core::{Executor, IdleWait};
    /// let mut exec = Executor::new();
    /// exec.set_idle_wait(IdleWait::Anticipate);
    /// let a = exec.anticipation();
    /// assert_eq!((a.period, a.caught, a.missed), (None, 0, 0)); // nothing ran yet
    /// ```
    pub fn anticipation(&self) -> Anticipated {
        self.shared.anticipated()
    }

    /// A handle that stops `spin` from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Run callbacks until [`StopHandle::stop`], context shutdown or Ctrl-C
    /// (all return `Ok`), or a callback panics (returns the error).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn spin(&mut self) -> Result<(), SpinError> {
        self.shared.ready.take_home();
        loop {
            if self.shared.take_stop() || self.shared.down.load(Ordering::SeqCst) {
                return Ok(());
            }
            self.shared.turn(Until::Never, false)?;
        }
    }

    /// Wait up to `timeout` for one unit of work (a message or a due timer)
    /// and run it. Returns whether a callback ran (a pass that found
    /// nothing to call, such as a [warm](crate::Publisher::warm)'s, does
    /// not end the wait). `Duration::MAX` waits forever (a century); the
    /// timeout counts from the moment the call finds nothing to run.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use myelin_core::{Context, Executor, QoS};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let ctx = Context::builder().handle_signals(false).shared_memory(false).network(false).build()?;
    /// let node = ctx.create_node("once")?;
    /// let _sub = node.create_subscription("/ticks", QoS::default(), |n: u32| println!("{n}"))?;
    /// let publisher = node.create_publisher::<u32>("/ticks", QoS::default())?;
    /// let mut exec = Executor::new();
    /// exec.add_node(&node)?;
    /// publisher.publish(1)?;
    /// assert!(exec.spin_once(Duration::MAX)?); // the message is there: no wait
    /// assert!(!exec.spin_once(Duration::from_millis(1))?); // nothing came
    /// # Ok(()) }
    /// ```
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn spin_once(&mut self, timeout: Duration) -> Result<bool, SpinError> {
        // The timeout's clock read waits until the turn finds nothing to
        // run: a loop of `spin_once` over ready work reads no clock.
        self.shared.ready.take_home();
        let r = self.shared.turn(Until::After(timeout), false);
        // A stop that ended this wait is used up (it must not end the next
        // spin). Cleared only when set: a `SeqCst` store is a locked
        // instruction, and a loop of `spin_once` calls would pay one per
        // callback (as `take_stop`, a stop set just after the load is
        // seen by the next call, as one set just after the store would be).
        if self.shared.stop.load(Ordering::SeqCst) {
            self.shared.stop.store(false, Ordering::SeqCst);
        }
        r
    }

    /// Run everything that is ready now, without waiting: due timers, and
    /// one message per ready entry present on entry, from every transport
    /// (what other processes sent is collected first, as rclcpp's
    /// `spin_some` executes all work available now). Work those callbacks
    /// cause (a message one of them publishes to a subscription here)
    /// waits for the next call, as in rclcpp; [`spin_all`](Self::spin_all)
    /// runs it too. Returns how many callbacks ran.
    ///
    /// ```
    /// # use myelin_core::{Context, Executor, QoS};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # // In-process only: a doctest in another process on the same domain
    /// # // (they run in parallel) must not add a message to the count.
    /// # let ctx = Context::builder().handle_signals(false).shared_memory(false).network(false).build()?;
    /// let node = ctx.create_node("loop")?;
    /// let _sub = node.create_subscription::<u32, _>("/ticks", QoS::default(), |n: u32| {
    ///     println!("{n}");
    /// })?;
    /// let publisher = node.create_publisher::<u32>("/ticks", QoS::default())?;
    /// let mut exec = Executor::new();
    /// exec.add_node(&node)?;
    /// publisher.publish(1)?;
    /// // A control loop's cycle: do what is ready, then the loop's own work.
    /// assert_eq!(exec.spin_some()?, 1);
    /// assert_eq!(exec.spin_some()?, 0);
    /// # Ok(()) }
    /// ```
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn spin_some(&mut self) -> Result<usize, SpinError> {
        self.shared.ready.take_home();
        self.shared.pump_remote();
        self.shared.poll_timers();
        // The entries ready now, in the order they became ready, caused
        // work (and what this thread published since its last spin) last.
        let (shared, caused) = self.shared.ready.counts();
        let mut ran = 0;
        for _ in 0..shared {
            match self.shared.ready.pop_shared() {
                Some(e) => ran += usize::from(self.shared.run_entry(e, false)?),
                None => break,
            }
        }
        for _ in 0..caused {
            match self.shared.ready.pop_caused() {
                Some(e) => ran += usize::from(self.shared.run_entry(e, false)?),
                None => break,
            }
        }
        if self.shared.busy_polls() {
            ran += self.run_polled()?;
        }
        Ok(ran)
    }

    /// `spin_some`'s part for a busy-polling executor: its subscriptions
    /// whose publishers left their messages unqueued, each looked at once.
    #[inline(never)]
    fn run_polled(&self) -> Result<usize, SpinError> {
        let mut ran = 0;
        let mut claimed = self.shared.claim_all_polled().into_iter();
        while let Some(e) = claimed.next() {
            match self.shared.run_entry(e, false) {
                Ok(true) => ran += 1,
                Ok(false) => {}
                Err(err) => {
                    // A callback panicked: the rest are handed back
                    // unrun, claimable again by the next spin.
                    for rest in claimed {
                        rest.unclaim();
                    }
                    return Err(err);
                }
            }
        }
        Ok(ran)
    }

    /// Run work until none is ready, without waiting for more: rounds of
    /// [`spin_some`](Self::spin_some) (so work that callbacks create, and
    /// messages that arrive meanwhile, run too) until a round runs
    /// nothing, `max_duration` has passed (`Duration::ZERO`: no limit, as
    /// rclcpp's `spin_all`), or the executor is stopped. Returns how many
    /// callbacks ran.
    ///
    /// ```
    /// # use myelin_core::{Context, Executor, QoS};
    /// # use std::time::Duration;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # // In-process only: a doctest in another process on the same domain
    /// # // (they run in parallel) must not add a message to the count.
    /// # let ctx = Context::builder().handle_signals(false).shared_memory(false).network(false).build()?;
    /// let node = ctx.create_node("drain")?;
    /// let publisher = node.create_publisher::<u32>("/backlog", QoS::keep_all())?;
    /// let _sub = node.create_subscription::<u32, _>("/backlog", QoS::keep_all(), |_n: u32| {})?;
    /// let mut exec = Executor::new();
    /// exec.add_node(&node)?;
    /// for n in 0..5 {
    ///     publisher.publish(n)?;
    /// }
    /// assert_eq!(exec.spin_all(Duration::from_millis(100))?, 5);
    /// # Ok(()) }
    /// ```
    pub fn spin_all(&mut self, max_duration: Duration) -> Result<usize, SpinError> {
        let deadline = (!max_duration.is_zero()).then(|| deadline_after(max_duration));
        let mut total = 0;
        loop {
            let ran = self.spin_some()?;
            total += ran;
            if ran == 0
                || deadline.is_some_and(|d| Instant::now() >= d)
                || self.shared.take_stop()
                || self.shared.down.load(Ordering::SeqCst)
            {
                return Ok(total);
            }
        }
    }

    /// Spin until `done()` returns true (checked after each unit of work), or
    /// `timeout` passes, or the executor is stopped. Returns whether `done()`
    /// became true.
    pub fn spin_until(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut() -> bool,
    ) -> Result<bool, SpinError> {
        let deadline = deadline_after(timeout);
        self.shared.ready.take_home();
        loop {
            if done() {
                return Ok(true);
            }
            if self.shared.take_stop()
                || self.shared.down.load(Ordering::SeqCst)
                || Instant::now() >= deadline
            {
                return Ok(done());
            }
            self.shared.turn(Until::At(deadline), false)?;
        }
    }

    /// Whether nothing is ready right now.
    pub fn is_idle(&self) -> bool {
        self.shared.ready.is_empty() && !self.shared.has_polled_work()
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.attached.detach_all(&self.shared);
        self.shared.drop_queued();
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("nodes", &self.attached.nodes.len())
            .finish()
    }
}
