//! Timers, run by the executor of their node (see the
//! [executor docs](crate::executor) for the overrun rule).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin_sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::dispatch::GroupInner;
use crate::dispatch::SimTime;
use crate::dispatch::{ExecShared, Executable, Tick};
use crate::error::SpinError;
use crate::runtime::NodeInner;

/// A timer's callback, told when its tick was due.
pub(crate) type TimerCallback = Box<dyn FnMut(&TimerInfo) + Send>;

/// A callback that does not ask when its tick was due, as a
/// [`TimerCallback`].
pub(crate) fn without_info(mut f: impl FnMut() + Send + 'static) -> TimerCallback {
    Box::new(move |_: &TimerInfo| f())
}

/// A timer's state. `repr(C)`, hot fields first: a firing reads and
/// writes the `Arc`'s counts (in front of the struct) and the fields up to
/// `queued`, 59 bytes together, so that after a sleep it misses on one
/// or two cache lines of the timer (two unless the allocation, 16-byte
/// aligned, starts a line), not one per field. The rest is read when the
/// timer is made, seen by an executor's wheel, reset or reported, or
/// when a firing is late (`missed`) or runs through a callback group
/// (`group`, a multi-threaded executor).
#[repr(C)]
pub(crate) struct TimerInner {
    callback: Mutex<TimerCallback>,
    /// When the queued tick was due (monotonic ns), for its [`TimerInfo`].
    // SYNC: Relaxed: stored before the entry is pushed to the ready queue
    // and read after it was popped (the queue orders them).
    due_ns: AtomicU64,
    // SYNC: Relaxed counters, read for statistics only.
    fired: AtomicU64,
    /// Set when `reset_to` holds a value: the executor checks this flag on
    /// every turn and takes the mutex only when it is set.
    // SYNC: Release store in `Timer::reset` pairs with the Acquire swap in `take_reset`.
    reset_pending: AtomicBool,
    cancelled: AtomicBool,
    /// Set from the moment a tick is queued until its callback returned.
    // SYNC: SeqCst swap in `mark_queued`, Release store(false) in `execute`.
    queued: AtomicBool,
    missed: AtomicU64,
    pub(crate) id: u64,
    pub(crate) period: Duration,
    created: Instant,
    /// The simulated time this timer runs on (a ROS-time timer of a
    /// context with `use_sim_time`); `None`: steady time.
    pub(crate) sim: Option<Arc<SimTime>>,
    /// The simulated time when the timer was made (0: before the first
    /// `/clock`, or on steady time): its first period starts there.
    pub(crate) sim_created: i64,
    reset_to: Mutex<Option<Instant>>,
    pub(crate) node: Arc<NodeInner>,
    group: Arc<GroupInner>,
}

impl Executable for TimerInner {
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn execute(self: Arc<Self>, _exec: &ExecShared) -> Result<bool, SpinError> {
        let r = if self.is_cancelled() {
            Ok(false)
        } else {
            self.fire(crate::clock::from_mono_ns(
                self.due_ns.load(Ordering::Relaxed),
            ))
            .map(|()| true)
        };
        // A plain store (no locked instruction): the next `mark_queued`
        // is a swap, which reads the latest value whatever the order.
        self.queued.store(false, Ordering::Release);
        r
    }

    fn attach(self: Arc<Self>, _exec: Option<Arc<ExecShared>>) {}

    fn group(&self) -> &Arc<GroupInner> {
        &self.group
    }
}

impl Tick for TimerInner {
    fn id(&self) -> u64 {
        self.id
    }

    fn period(&self) -> Duration {
        self.period
    }

    /// The first multiple of the period, counted from the context's epoch,
    /// that is at least one period after creation. Timers of equal period
    /// in a context therefore tick together, and one wake-up serves them
    /// all.
    fn first_due(&self) -> Instant {
        let epoch = self.node.ctx.epoch;
        let earliest = self.created + self.period;
        let since = earliest.saturating_duration_since(epoch).as_nanos();
        let p = self.period.as_nanos().max(1);
        let ticks = since.div_ceil(p);
        let due_ns = ticks.saturating_mul(p);
        epoch + Duration::from_nanos(u64::try_from(due_ns).unwrap_or(u64::MAX))
    }

    fn sim(&self) -> Option<&SimTime> {
        self.sim.as_deref()
    }
    fn sim_created(&self) -> i64 {
        self.sim_created
    }

    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn take_reset(&self) -> Option<Instant> {
        // SYNC: pairs with the Release store in `Timer::reset`.
        if !self.reset_pending.load(Ordering::Relaxed)
            || !self.reset_pending.swap(false, Ordering::Acquire)
        {
            return None;
        }
        self.reset_to
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn mark_queued(&self, due: Instant) -> bool {
        if self.queued.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.due_ns
            .store(crate::clock::mono_ns(due), Ordering::Relaxed);
        true
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn note_missed(&self, n: u64) {
        if n > 0 {
            self.missed.fetch_add(n, Ordering::Relaxed);
        }
    }
}

impl TimerInner {
    /// A timer on ROS time (`ros_time`: simulated time when the context
    /// uses it) or on steady time.
    pub(crate) fn new(
        id: u64,
        period: Duration,
        ros_time: bool,
        callback: TimerCallback,
        node: Arc<NodeInner>,
        group: Arc<GroupInner>,
    ) -> Self {
        let sim = if ros_time { node.ctx.sim.clone() } else { None };
        TimerInner {
            id,
            period,
            created: Instant::now(),
            sim_created: sim.as_ref().map_or(0, |s| s.now_ns()),
            sim,
            callback: Mutex::new(callback),
            due_ns: AtomicU64::new(0),
            cancelled: AtomicBool::new(false),
            reset_to: Mutex::new(None),
            reset_pending: AtomicBool::new(false),
            fired: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            node,
            queued: AtomicBool::new(false),
            group,
        }
    }

    /// Run the callback for the tick that was due at `expected`.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) fn fire(&self, expected: Instant) -> Result<(), SpinError> {
        self.fired.fetch_add(1, Ordering::Relaxed);
        let mut cb = self.callback.lock().unwrap_or_else(|e| e.into_inner());
        let info = TimerInfo {
            expected_call_time: expected,
            actual_call_time: Instant::now(),
        };
        catch_unwind(AssertUnwindSafe(|| cb(&info))).map_err(|p| SpinError::CallbackPanicked {
            entity: format!(
                "timer ({:?} period) of node {:?}",
                self.period, self.node.fqn
            ),
            message: crate::dispatch::panic_message(&p),
        })
    }
}

/// When a timer's tick was due and when its callback started (rclcpp's
/// `TimerInfo`), for a callback made with
/// [`Node::create_timer_with_info`](crate::Node::create_timer_with_info).
/// `actual_call_time - expected_call_time` is how late the tick ran: the
/// executor's wake-up and whatever ran before it. When ticks were skipped
/// because the timer ran late, `expected_call_time` is the last deadline
/// passed (the one this call stands for). On simulated time both are the
/// steady instants at which the executor found the tick due and ran it;
/// [`Timer::call`] gives the moment of the call as the due time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerInfo {
    /// When the tick was due.
    pub expected_call_time: Instant,
    /// When the callback started.
    pub actual_call_time: Instant,
}

impl TimerInfo {
    /// How late the callback started (zero if it ran early).
    pub fn lateness(&self) -> Duration {
        self.actual_call_time
            .saturating_duration_since(self.expected_call_time)
    }
}

/// A periodic timer. Created by [`Node::create_timer`](crate::Node::create_timer);
/// dropping it (or [`cancel`](Timer::cancel)) stops it.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use myelin_core::{Context, Executor};
///
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("heartbeat")?;
/// let beats = Arc::new(AtomicU32::new(0));
/// let b = beats.clone();
/// let timer = node.create_wall_timer(Duration::from_millis(10), move || {
///     b.fetch_add(1, Ordering::Relaxed);
/// })?;
/// let mut executor = Executor::new();
/// executor.add_node(&node)?;
/// executor.spin_until(Duration::from_secs(5), || beats.load(Ordering::Relaxed) >= 3)?;
/// timer.cancel();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Timer {
    pub(crate) inner: Arc<TimerInner>,
}

impl Timer {
    /// The period.
    pub fn period(&self) -> Duration {
        self.inner.period
    }

    /// Stop firing. The timer stays registered until dropped.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
    }

    /// Whether [`cancel`](Timer::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }

    /// Restart the period from now (and un-cancel). A timer on simulated
    /// time restarts from the simulated now.
    pub fn reset(&self) {
        *self
            .inner
            .reset_to
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + self.inner.period);
        // SYNC: pairs with the Acquire swap in `take_reset`.
        self.inner.reset_pending.store(true, Ordering::Release);
        self.inner.cancelled.store(false, Ordering::Release);
        if let Some(e) = self.inner.node.executor() {
            e.timers_changed();
        }
    }

    /// Run the callback now, in this thread (for timers driven by a
    /// [`WaitSet`](crate::WaitSet) rather than an executor). A panic is
    /// returned as an error.
    pub fn call(&self) -> Result<(), SpinError> {
        self.inner.fire(Instant::now())
    }

    /// How many times the callback ran.
    pub fn fired(&self) -> u64 {
        self.inner.fired.load(Ordering::Relaxed)
    }

    /// How many periods were skipped because the timer ran late.
    pub fn missed(&self) -> u64 {
        self.inner.missed.load(Ordering::Relaxed)
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.cancel();
        self.inner.node.remove_timer(self.inner.id);
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("period", &self.inner.period)
            .field("fired", &self.fired())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields a firing touches, with the `Arc`'s two counts in front
    /// of them, take 64 bytes or less (two lines at most, see
    /// [`TimerInner`]).
    #[test]
    fn a_firings_fields_and_the_arc_counts_take_64_bytes_or_less() {
        let counts = 2 * std::mem::size_of::<usize>();
        let end = std::mem::offset_of!(TimerInner, queued) + 1;
        assert!(counts + end <= 64, "hot part is {} bytes", counts + end);
    }
}
