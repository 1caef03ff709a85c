//! What executors share with the entities they run: the ready queue, the
//! timer schedule, the pumps of subscriptions fed from other processes, and
//! callback groups.
//!
//! Entities (subscriptions, timers, services, event handlers) implement
//! [`Executable`] and put themselves into an [`ExecShared`]'s ready queue
//! when they have work; timers implement [`Tick`] and are scheduled by the
//! executor's timer wheel. The executors ([`crate::executor`]) drive an
//! `ExecShared` from their threads. This module knows nothing of nodes or
//! contexts: they sit above it and attach entities to an executor.
//!
//! See the [executor docs](crate::executor) for the dispatch rules (FIFO by
//! readiness, O(ready work), the timer overrun rule).

mod anticipate;
mod group;
mod sim;

pub use group::CallbackGroupKind;
pub(crate) use group::GroupInner;
pub(crate) use sim::SimTime;

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;
use myelin_sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use myelin_sync::{Home, TryLock};
use myelin_sync::{LaneCell, Ring};

pub use anticipate::Anticipated;
use anticipate::{Anticipation, Plan, Window};

use crate::clock::{from_mono_ns, mono_ns};
use crate::error::SpinError;
use crate::locks::lock;
use crate::transport::wake::{Lanes as WakeLanes, WakeEvent};

/// The callback this thread is running, if it runs one for an executor.
#[derive(Clone, Copy)]
struct Current {
    /// The executor (by address, never dereferenced).
    exec: usize,
    /// Whether that executor runs callback groups.
    grouped: bool,
    /// The callback's group (by address), when `grouped` (else 0: only a
    /// grouped executor's groups are asked about, and reading the entity's
    /// group pointer is a cache miss per callback on a cold executor).
    group: usize,
    /// The entity whose callback it is (by address): its own re-queueing
    /// is not work it caused.
    entity: usize,
}

thread_local! {
    /// The [`Current`] of the callback this thread runs (null: none): a
    /// pointer to the running [`Running`]'s own, on this thread's stack,
    /// so that entering and leaving a callback each write one word.
    static CURRENT: std::cell::Cell<*const Current> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// The [`Current`] of this thread's callback, if it runs one.
#[inline(always)]
fn with_current<R>(f: impl FnOnce(Option<&Current>) -> R) -> R {
    CURRENT.with(|c| {
        let p = c.get();
        // SAFETY: a non-null `CURRENT` points to the `Current` of a
        // `Running` that lives on this thread's stack: `Running::run` sets
        // it for the span of its call and puts the previous pointer back
        // before returning (also when unwinding), and only this thread
        // reads its own `CURRENT`.
        f(unsafe { p.as_ref() })
    })
}

/// What this thread is executing, if it is inside an executor's callback:
/// (executor address, grouped, group address; 0 when not grouped).
pub(crate) fn current() -> Option<(usize, bool, usize)> {
    with_current(|c| c.map(|c| (c.exec, c.grouped, c.group)))
}

/// Marks this thread as running an entity's callback on an executor for
/// the span of [`Running::run`].
struct Running {
    me: Current,
    /// `CURRENT` before, put back when the run ends.
    prev: *const Current,
}

impl Running {
    /// What this thread runs while it runs `e`'s callback on `exec`.
    #[inline(always)]
    fn of(exec: &ExecShared, grouped: bool, e: &Arc<dyn Executable>) -> Current {
        Current {
            exec: exec as *const ExecShared as usize,
            grouped,
            group: if grouped {
                Arc::as_ptr(e.group()) as usize
            } else {
                0
            },
            entity: Arc::as_ptr(e) as *const () as usize,
        }
    }

    /// Run `f` marked as running `me`.
    #[inline(always)]
    fn run<R>(me: Current, f: impl FnOnce() -> R) -> R {
        let mut running = Running {
            me,
            prev: std::ptr::null(),
        };
        // `CURRENT` points at `running.me`, which stays in this frame,
        // until `running` drops (after `f`, also when `f` unwinds) and
        // puts `prev` back.
        running.prev = CURRENT.with(|c| c.replace(&running.me));
        f()
    }
}

impl Drop for Running {
    #[inline(always)]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Something an executor runs when it is ready.
pub(crate) trait Executable: Send + Sync {
    /// Run one unit of work (one message or one timer tick), then clear the
    /// entry's queued mark and re-queue it if more work arrived (or, on a
    /// busy-polling executor, leave it for the next claim). Returns
    /// whether a callback ran: an entry can find nothing to do (its message
    /// taken by a polled take first, a [warm](crate::Publisher::warm)'s
    /// rehearsal, a cancelled timer, an entity that left this executor).
    fn execute(self: Arc<Self>, exec: &ExecShared) -> Result<bool, SpinError>;
    /// Set (or clear) the executor to notify. A clear (`None`) comes
    /// from the executor being left, by its owner (`remove_node` or its
    /// drop, both `&mut`), never while that executor runs; an entity
    /// made on a node without an executor is attached to `None` too.
    fn attach(self: Arc<Self>, exec: Option<Arc<ExecShared>>);
    /// The entity's callback group.
    fn group(&self) -> &Arc<GroupInner>;
    /// Claim this entry for running now if work waits in it that nobody
    /// queued: a busy-polling worker's look at a subscription whose
    /// publishers skip the queue (see [`ExecShared::polls_for`]). `true`:
    /// the caller runs it, as if popped from the queue.
    fn claim(&self) -> bool {
        false
    }
    /// Whether work waits in this entry that nobody queued (what
    /// [`claim`](Self::claim) would take).
    fn unqueued_work(&self) -> bool {
        false
    }
    /// The executor stopped busy-polling: queue the work its publishers
    /// left unqueued meanwhile.
    fn unpolled(&self) {}
    /// Hand back a [`claim`](Self::claim) without running it (the run
    /// that claimed it ended early).
    fn unclaim(&self) {}
}

/// A subscription whose messages from other processes wait to be drained
/// (a shared-memory inbox).
pub(crate) trait Pump: Send + Sync {
    /// Move what other processes sent into the subscription's buffer.
    fn pump(self: Arc<Self>);
}

/// A timer as the executor's timer wheel sees it: its deadlines and its
/// queued mark (the callback runs through [`Executable`]).
pub(crate) trait Tick: Executable {
    /// The timer's id (unique in its context).
    fn id(&self) -> u64;
    /// The period.
    fn period(&self) -> Duration;
    /// The first deadline (on steady time).
    fn first_due(&self) -> Instant;
    /// The simulated time the timer runs on instead of steady time.
    fn sim(&self) -> Option<&SimTime> {
        None
    }
    /// The simulated time when the timer was made (0: before the first
    /// `/clock`, or on steady time).
    fn sim_created(&self) -> i64 {
        0
    }
    /// A new deadline set by a reset since the last look, if any.
    fn take_reset(&self) -> Option<Instant>;
    /// Whether the timer is cancelled (it keeps its place, but never fires).
    fn is_cancelled(&self) -> bool;
    /// Claim the right to queue the tick due at `due`; false if one is
    /// still queued.
    fn mark_queued(&self, due: Instant) -> bool;
    /// Count `n` deadlines skipped because the timer ran late.
    fn note_missed(&self, n: u64);
}

/// The pumps of one executor by ready lane: a remote wake-up names lanes,
/// and only the pumps behind them are drained.
pub(crate) struct PumpLanes {
    /// `lanes[l]`: the pumps that share lane `l`.
    lanes: LaneCell<Vec<Vec<Weak<dyn Pump>>>>,
    /// Serialises changes (readers never lock).
    change: Mutex<()>,
    next: AtomicU64,
}

impl PumpLanes {
    pub(crate) fn new() -> Self {
        PumpLanes {
            lanes: LaneCell::default(),
            change: Mutex::new(()),
            next: AtomicU64::new(0),
        }
    }

    /// Give `p` a lane (round robin: lanes are shared only past
    /// [`WakeLanes::COUNT`] pumps).
    pub(crate) fn add(&self, p: Weak<dyn Pump>) -> u32 {
        let _g = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let lane = (self.next.fetch_add(1, Ordering::Relaxed) % u64::from(WakeLanes::COUNT)) as u32;
        let mut next = (*self.lanes.read()).clone();
        if next.len() <= lane as usize {
            next.resize_with(lane as usize + 1, Vec::new);
        }
        next[lane as usize].retain(|w| w.strong_count() > 0);
        next[lane as usize].push(p);
        self.lanes.store(Arc::new(next));
        lane
    }

    pub(crate) fn remove(&self, p: *const ()) {
        let _g = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = (*self.lanes.read()).clone();
        for l in &mut next {
            l.retain(|w| w.strong_count() > 0 && w.as_ptr() as *const () != p);
        }
        self.lanes.store(Arc::new(next));
    }

    /// Drain the pumps behind the marked lanes.
    pub(crate) fn pump(&self, marked: &WakeLanes) {
        let lanes = self.lanes.read();
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

/// How many entries of caused work run in a row while older work waits:
/// then one older entry runs (a timer, another thread's message), so a
/// cycle of callbacks that keep publishing to each other cannot starve the
/// rest.
pub(crate) const CAUSED_STREAK: u32 = 64;

/// How many threads run an executor's entries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Workers {
    /// One at a time ([`Executor`](crate::Executor): its spins take
    /// `&mut self`).
    One,
    /// Several at once ([`MultiThreadedExecutor`](crate::MultiThreadedExecutor)).
    Many,
}

/// Where an entry of caused work went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pushed {
    /// The single worker's own queue: nobody to wake (the worker, or the
    /// thread that spins the executor, is the thread that pushed).
    Local,
    /// A ring (a `SeqCst` compare-and-swap, see [`ExecShared::enqueue`]).
    Ring,
    /// The overflow queue.
    Overflow,
}

/// The queue of caused work: with one worker, a plain queue that only the
/// worker's thread touches (no atomics: caused work is pushed by the
/// callback the worker runs, work the thread's publishes outside a spin
/// make ready by that thread, and all of it is popped by the worker); with
/// several, a ring any of them may pop.
enum Caused {
    Local(LocalCaused),
    Shared(Ring<Arc<dyn Executable>>),
}

/// The single worker's queue of caused work, and of the work its thread
/// makes ready when it publishes outside a spin (a control loop that
/// publishes, then calls `spin_some`).
///
/// Changed by one thread at a time: the thread that spins the executor,
/// which takes the queue's [`Home`] at the start of every spin (and of
/// the executor's drop), and the home thread inside [`Home::enter`],
/// which runs only while no take has moved the home elsewhere. Takes come
/// from `&mut Executor` only, so no other take runs while a spin does,
/// and the spinning thread, home, is the only one whose enters run.
#[derive(Default)]
struct LocalCaused {
    queue: std::cell::UnsafeCell<std::collections::VecDeque<Arc<dyn Executable>>>,
    /// The queue's length, for a look from any thread
    /// ([`Executor::is_idle`](crate::Executor::is_idle) takes `&self`,
    /// and the home thread may push meanwhile).
    // SYNC: written (Relaxed) by the thread that changes the queue, one at
    // a time as above; read Relaxed: a moment's length.
    len: AtomicUsize,
    /// The thread that may push outside a spin.
    home: Home,
    /// Debug builds: set while `push` or `pop` runs, so that a second
    /// thread reaching the queue at the same time (a broken confinement)
    /// fails an assertion instead of racing.
    #[cfg(debug_assertions)]
    busy: std::sync::atomic::AtomicBool,
}

// SAFETY: `queue` is only reached through the `unsafe` methods below,
// whose callers guarantee that it is changed by one thread at a time (the
// executor's one worker, which other threads hand the executor to by
// moving it, or the home thread inside `Home::enter`) and never read
// while it changes.
unsafe impl Sync for LocalCaused {}

impl LocalCaused {
    /// # Safety
    /// Only the executor's worker thread calls `push` and `pop` (after it
    /// took the [`home`](Self::home)), or the home thread inside an
    /// `enter` of it; one call at a time (none calls back into the queue).
    #[inline(always)]
    unsafe fn push(&self, e: Arc<dyn Executable>) {
        self.enter();
        // SAFETY: the caller's guarantee: no other reference to `queue` lives.
        let q = unsafe { &mut *self.queue.get() };
        q.push_back(e);
        self.len.store(q.len(), Ordering::Relaxed);
        self.leave();
    }
    /// # Safety
    /// As [`push`](Self::push).
    #[inline]
    unsafe fn pop(&self) -> Option<Arc<dyn Executable>> {
        self.enter();
        // SAFETY: as in `push`.
        let q = unsafe { &mut *self.queue.get() };
        let e = q.pop_front();
        self.len.store(q.len(), Ordering::Relaxed);
        self.leave();
        e
    }
    /// The length at a moment (any thread).
    #[inline]
    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Push `e` if this thread is the queue's home (the thread that spun
    /// the executor last, publishing outside a spin); else give it back.
    #[inline(always)]
    fn push_home(&self, e: Arc<dyn Executable>) -> Result<(), Arc<dyn Executable>> {
        let Some(_inside) = self.home.enter() else {
            return Err(e);
        };
        // SAFETY: entered, this thread is the home: the worker's thread,
        // outside its spins (or inside one, from a callback of another
        // executor), and no take moves the home until `_inside` drops.
        unsafe { self.push(e) };
        Ok(())
    }

    /// Debug builds: a `push` or `pop` starts; none may run already.
    #[inline]
    fn enter(&self) {
        #[cfg(debug_assertions)]
        assert!(
            !self.busy.swap(true, std::sync::atomic::Ordering::Acquire),
            "an executor's caused work reached from two threads at once"
        );
    }

    /// Debug builds: the `push` or `pop` is over.
    #[inline]
    fn leave(&self) {
        #[cfg(debug_assertions)]
        self.busy.store(false, std::sync::atomic::Ordering::Release);
    }
}

impl Caused {
    // SAFETY (of the `Local` arms below): the ready queue is popped only
    // by the executor's workers (its turns, `spin_some`, its drop), so
    // with one worker, by the thread that took the queue's home when the
    // spin began (see `LocalCaused`).
    #[inline]
    fn is_empty(&self) -> bool {
        match self {
            Caused::Local(l) => l.len() == 0,
            Caused::Shared(r) => r.is_empty(),
        }
    }
    #[inline]
    fn pop(&self) -> Option<Arc<dyn Executable>> {
        match self {
            // SAFETY: see above.
            Caused::Local(l) => unsafe { l.pop() },
            Caused::Shared(r) => r.pop(),
        }
    }
    fn len(&self) -> usize {
        match self {
            Caused::Local(l) => l.len(),
            Caused::Shared(r) => r.len(),
        }
    }
}

/// The ready queue: a bounded lock-free ring (cheap), with an unbounded
/// overflow for the rare moment more than [`READY_RING`] entities are ready,
/// and a queue of *caused* work ahead of both (a plain queue of the worker
/// thread's own for an executor with one worker: no atomics on a
/// callback-to-callback hop; a ring for several).
///
/// Work is caused when a callback running on this executor makes another
/// entity of it ready (publishes to its subscription, answers its client):
/// that entry runs before older ready work, up to [`CAUSED_STREAK`] in a
/// row, so a message goes through a pipeline of callbacks before the
/// executor starts on the next input (as a callback run in the publisher's
/// thread would; tokio's LIFO slot is the same idea). Order is FIFO within
/// each part; the ring is served before the overflow.
pub(crate) struct ReadyQueue {
    /// Caused work; its kind also says whether one worker pops the ring
    /// (`Caused::Local`: then with [`Ring::pop_single`]).
    caused: Caused,
    ring: Ring<Arc<dyn Executable>>,
    overflow: SegQueue<Arc<dyn Executable>>,
    /// Caused entries popped since an older entry was last put ahead of
    /// caused work. So at most [`CAUSED_STREAK`] caused entries run while
    /// older work waits; the count carries over stretches in which
    /// nothing older waited, which can let an older entry go first a few
    /// entries early (order only: nothing waits longer for it). Not reset
    /// on the common path, which would touch this line at every pop.
    // SYNC: Relaxed: a fairness budget; a lost update under contention
    // (several workers) shifts the budget by one entry.
    streak: AtomicU32,
}

impl ReadyQueue {
    fn new(workers: Workers) -> Self {
        ReadyQueue {
            caused: match workers {
                Workers::One => Caused::Local(LocalCaused::default()),
                Workers::Many => Caused::Shared(Ring::new(READY_RING)),
            },
            ring: Ring::new(READY_RING),
            overflow: SegQueue::new(),
            streak: AtomicU32::new(0),
        }
    }

    /// Queue `e`; `true` when it went into the ring (a `SeqCst`
    /// compare-and-swap), `false` into the overflow queue.
    #[inline]
    pub(crate) fn push(&self, e: Arc<dyn Executable>) -> bool {
        match self.ring.push(e) {
            Ok(()) => true,
            Err(e) => {
                self.overflow.push(e);
                false
            }
        }
    }

    /// With one worker: push `e` into the worker's own queue if this
    /// thread spins the executor (see [`LocalCaused`]): no atomics, and
    /// nobody to wake. Else give it back.
    #[inline(always)]
    fn push_home(&self, e: Arc<dyn Executable>) -> Result<(), Arc<dyn Executable>> {
        match &self.caused {
            Caused::Local(l) => l.push_home(e),
            Caused::Shared(_) => Err(e),
        }
    }

    /// The start of a spin (or of the executor's drop), on the thread that
    /// runs it: with one worker, make this thread the home of its queue
    /// (free when it is already; else one `membarrier`, and the executor
    /// moved to this thread since its last spin).
    #[inline]
    pub(crate) fn take_home(&self) {
        if let Caused::Local(l) = &self.caused {
            l.home.take();
        }
    }

    /// Queue work a callback of this executor caused (a full ring: as any
    /// other work); says where it went, which decides the announcement.
    #[inline]
    fn push_caused(&self, e: Arc<dyn Executable>) -> Pushed {
        match &self.caused {
            Caused::Local(l) => {
                // SAFETY: caused work is pushed by the thread running this
                // executor's callback, which for one worker is the worker.
                unsafe { l.push(e) };
                Pushed::Local
            }
            Caused::Shared(r) => match r.push(e) {
                Ok(()) => Pushed::Ring,
                Err(e) => {
                    if self.push(e) {
                        Pushed::Ring
                    } else {
                        Pushed::Overflow
                    }
                }
            },
        }
    }

    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) fn pop(&self) -> Option<Arc<dyn Executable>> {
        if !self.caused.is_empty() {
            return self.pop_with_caused();
        }
        // A match, not `or_else`: the compiler stopped inlining that
        // closure's call as the crate grew (+22 instructions per executor
        // turn in the icount gate's dispatch workload).
        match self.ring_pop() {
            Some(e) => Some(e),
            None => self.overflow_pop(),
        }
    }

    /// The oldest entry of the overflow, which is almost always empty:
    /// its emptiness is two loads, where `SegQueue::pop` of an empty
    /// queue is a `SeqCst` fence (a locked instruction) and ~30
    /// instructions. A push racing the look is found at the next one, as
    /// it would be by a pop that came first; an overflow push always
    /// wakes a sleeping worker.
    #[inline]
    fn overflow_pop(&self) -> Option<Arc<dyn Executable>> {
        if self.overflow.is_empty() {
            None
        } else {
            self.overflow.pop()
        }
    }

    /// The oldest entry of the ring.
    #[inline]
    fn ring_pop(&self) -> Option<Arc<dyn Executable>> {
        if matches!(self.caused, Caused::Local(_)) {
            // SAFETY: the ready ring is popped only by the executor's
            // workers (see `Caused`), here its one.
            unsafe { self.ring.pop_single() }
        } else {
            self.ring.pop()
        }
    }

    /// [`pop`](Self::pop) while caused work waits: it goes first, unless
    /// [`CAUSED_STREAK`] caused entries ran in a row since an older one did.
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn pop_with_caused(&self) -> Option<Arc<dyn Executable>> {
        let streak = self.streak.load(Ordering::Relaxed);
        if streak < CAUSED_STREAK {
            self.streak.store(streak + 1, Ordering::Relaxed);
            return self.caused.pop().or_else(|| self.pop_older());
        }
        self.streak.store(0, Ordering::Relaxed);
        // An older entry goes first; with none waiting, caused work does.
        self.pop_in_order()
    }

    /// Pop in the order entries became ready, caused work last: for
    /// `spin_some`, which runs the entries ready when it started (older
    /// ones, and caused work left from before) and leaves what their
    /// callbacks cause to the next call, as rclcpp's does.
    #[inline(always)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) fn pop_in_order(&self) -> Option<Arc<dyn Executable>> {
        // Inlined matches, not `pop_older` (kept out of line for the
        // caused path): spin_some pops through here for every entry.
        match self.ring_pop() {
            Some(e) => Some(e),
            None => match self.overflow_pop() {
                Some(e) => Some(e),
                None => self.caused.pop(),
            },
        }
    }

    /// How many entries wait where any worker finds them (the ring and
    /// the overflow), and how many in the caused queue: `spin_some` runs
    /// that many of each, the first part first (as
    /// [`pop_in_order`](Self::pop_in_order) would), without a look at
    /// an empty ring per caused entry.
    #[inline(always)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let spill = if self.overflow.is_empty() {
            0
        } else {
            self.overflow.len()
        };
        (self.ring.len() + spill, self.caused.len())
    }

    /// The oldest entry of the ring, else of the overflow.
    #[inline(always)]
    pub(crate) fn pop_shared(&self) -> Option<Arc<dyn Executable>> {
        match self.ring_pop() {
            Some(e) => Some(e),
            None => self.overflow_pop(),
        }
    }

    /// The oldest caused entry.
    #[inline(always)]
    pub(crate) fn pop_caused(&self) -> Option<Arc<dyn Executable>> {
        self.caused.pop()
    }

    #[inline(never)]
    fn pop_older(&self) -> Option<Arc<dyn Executable>> {
        self.ring_pop().or_else(|| self.overflow_pop())
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.caused.is_empty() && self.overflow.is_empty()
    }

    /// Whether the next [`pop`](Self::pop) of this executor's one worker
    /// takes caused work whatever the ring holds (caused work waits and
    /// its streak has budget left): a timer queued now would not run
    /// before it. Always false with several workers: another one can
    /// take the caused entry or spend the streak's budget between this
    /// look and the pop, which would then reach the ring with the timer
    /// not in it.
    #[inline]
    fn caused_runs_next(&self) -> bool {
        matches!(self.caused, Caused::Local(_))
            && !self.caused.is_empty()
            && self.streak.load(Ordering::Relaxed) < CAUSED_STREAK
    }
}

struct LocalTimer {
    inner: Arc<dyn Tick>,
    /// The next deadline on steady time (timers on simulated time: unused).
    next_due: Instant,
    /// The timer's period and whether it runs on simulated time, copied
    /// from it when the wheel builds its list (neither ever changes): the
    /// wheel's walk reads them here, in its own array, instead of from
    /// each timer's lines, which are cold after a sleep.
    period: Duration,
    on_sim: bool,
    /// Timers on simulated time: the next deadline and the simulated time
    /// last seen (ns; 0: no `/clock` seen yet, the deadline is not set).
    sim_due: i64,
    sim_seen: i64,
}

/// A period in nanoseconds (at least 1).
fn period_ns(p: Duration) -> i64 {
    i64::try_from(p.as_nanos()).unwrap_or(i64::MAX).max(1)
}

/// The timer schedule, owned by whichever worker holds its lock.
#[derive(Default)]
struct Wheel {
    seen_gen: u64,
    timers: Vec<LocalTimer>,
}

/// How many polled subscriptions one look of a busy-polling worker
/// covers (turns alternate between a look and the ready queue: timers,
/// services, caused work).
const POLL_LOOK: usize = 64;

/// When a turn stops waiting for work.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Until {
    /// Never ([`Executor::spin`](crate::Executor::spin)'s turns).
    Never,
    /// At this instant.
    At(Instant),
    /// This long after the turn first finds nothing to run
    /// ([`Executor::spin_once`](crate::Executor::spin_once)'s timeout): a
    /// turn that finds its work at once reads no clock for it (the clock
    /// read and std's `Instant + Duration` were ~50 of the ~850
    /// instructions of a relay hop through `spin_once`).
    After(Duration),
}

impl Until {
    /// The instant, fixing an [`After`](Until::After) from now on the
    /// first call (a timeout past [`FOREVER`](crate::clock::FOREVER) is
    /// that far); `None`: never.
    #[inline]
    pub(crate) fn instant(&mut self) -> Option<Instant> {
        match *self {
            Until::Never => None,
            Until::At(at) => Some(at),
            Until::After(timeout) => {
                let at = crate::clock::deadline_after(timeout);
                *self = Until::At(at);
                Some(at)
            }
        }
    }
}

/// The part of an executor that producers and workers share.
pub(crate) struct ExecShared {
    pub(crate) ready: ReadyQueue,
    /// Whether one worker runs this executor at a time (an
    /// [`Executor`](crate::Executor), whose spins take `&mut self`).
    single_worker: bool,
    /// With one worker: the address of the callback lock its run is in,
    /// bound to this executor (`SoloLock::run`); 0 between runs.
    // SYNC: written only by the one worker, plainly (its asymmetric
    // barrier's light side); read by an unbind after its heavy side.
    pub(crate) running: myelin_sync::atomic::AtomicUsize,
    /// What idle workers sleep on; with shared memory, a slot other
    /// processes signal too (one wait for local and remote work).
    pub(crate) event: WakeEvent,
    /// Subscriptions fed from other processes, by ready lane: drained when
    /// a remote wake-up marks their lane.
    pumps: PumpLanes,
    /// How an idle worker waits: an [`IdleWait`] as a number.
    // SYNC: SeqCst where it decides whether a publisher queues (see
    // `polls_for` and `set_idle_wait`); Relaxed where an idle turn reads it.
    idle_wait: AtomicU32,
    /// The subscriptions attached here that a busy-polling worker looks
    /// at itself: while this executor busy-polls, their publishers only
    /// push into their buffers, and the worker finds the message there
    /// (one cache line to learn of it, not the queue's and the entry's
    /// as well).
    polled: Mutex<Vec<Arc<dyn Executable>>>,
    /// Where the next look at `polled` starts (round robin).
    // SYNC: Relaxed: a hint for fairness, not for correctness.
    poll_from: AtomicUsize,
    /// Whether a busy-polling worker's next turn looks at `polled` before
    /// the ready queue (turns alternate, so neither starves the other).
    // SYNC: Relaxed load and store: a hint for fairness.
    poll_turn: AtomicBool,
    /// The learned period of this executor's work ([`IdleWait::Anticipate`]).
    anticipation: Anticipation,
    pub(crate) stop: AtomicBool,
    /// Set when the context shuts down.
    pub(crate) down: AtomicBool,
    /// Timers of the attached nodes.
    timers: Mutex<Vec<Arc<dyn Tick>>>,
    /// Bumped whenever `timers` changes.
    // SYNC: Release in `timers_changed` pairs with the Acquire in `poll_timers`.
    timers_gen: AtomicU64,
    /// `timers_gen` as last seen by the wheel (lets `poll_timers` skip the
    /// lock and the clock when there is nothing to do).
    wheel_gen: AtomicU64,
    wheel: TryLock<Wheel>,
    /// The earliest timer deadline (`mono_ns`), `u64::MAX` for none.
    next_due: AtomicU64,
    /// Bumped when the simulated time of a timer here moves.
    // SYNC: Release in `sim_time_moved` pairs with the Acquire in `poll_timers`.
    sim_gen: AtomicU64,
    /// `sim_gen` as last seen by the wheel.
    wheel_sim_gen: AtomicU64,
}

impl ExecShared {
    pub(crate) fn new(workers: Workers) -> Arc<Self> {
        Arc::new(ExecShared {
            single_worker: matches!(workers, Workers::One),
            running: myelin_sync::atomic::AtomicUsize::new(0),
            ready: ReadyQueue::new(workers),
            event: WakeEvent::remote_capable(),
            pumps: PumpLanes::new(),
            idle_wait: AtomicU32::new(IdleWait::Block as u32),
            polled: Mutex::new(Vec::new()),
            poll_from: AtomicUsize::new(0),
            poll_turn: AtomicBool::new(false),
            anticipation: Anticipation::default(),
            stop: AtomicBool::new(false),
            down: AtomicBool::new(false),
            timers: Mutex::new(Vec::new()),
            timers_gen: AtomicU64::new(0),
            wheel_gen: AtomicU64::new(0),
            wheel: TryLock::new(Wheel::default()),
            next_due: AtomicU64::new(u64::MAX),
            sim_gen: AtomicU64::new(0),
            wheel_sim_gen: AtomicU64::new(0),
        })
    }

    /// Whether one worker runs this executor at a time (see
    /// `single_worker`).
    pub(crate) fn single_worker(&self) -> bool {
        self.single_worker
    }

    /// This executor as a runner's token for a callback lock bound to it
    /// (its address: never 0, unique while it lives).
    #[inline(always)]
    pub(crate) fn token(&self) -> usize {
        self as *const ExecShared as usize
    }

    /// Queue a ready entry and wake one sleeping worker. An entry made
    /// ready by a callback running on this executor (not the callback's
    /// own entity coming back for its next message) is caused work, which
    /// runs first (see [`ReadyQueue`]). One made ready outside this
    /// executor's callbacks by the thread that spins it (one worker)
    /// goes into the worker's own queue too: nobody sleeps, and no locked
    /// instruction is needed.
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) fn enqueue(&self, e: Arc<dyn Executable>) {
        let pushed = match self.inside(Arc::as_ptr(&e) as *const ()) {
            Some(true) => self.ready.push_caused(e),
            Some(false) => self.push_shared(e),
            None => match self.ready.push_home(e) {
                Ok(()) => Pushed::Local,
                Err(e) => self.push_shared(e),
            },
        };
        // A push into either ring is a SeqCst compare-and-swap that the
        // waiters' `ready.is_empty()` reads with SeqCst loads, so nobody
        // waiting costs one load; the overflow queue's is not, so it
        // announces with the epoch increment. The one worker's own queue
        // needs no announcement: the worker pushed it.
        match pushed {
            Pushed::Local => {}
            Pushed::Ring => self.event.notify_one_if_waiting(),
            Pushed::Overflow => self.event.notify_one(),
        }
    }

    /// Queue `e` where any worker finds it: the ring, or the overflow.
    #[inline(always)]
    fn push_shared(&self, e: Arc<dyn Executable>) -> Pushed {
        if self.ready.push(e) {
            Pushed::Ring
        } else {
            Pushed::Overflow
        }
    }

    /// The executor's handle is gone (its nodes detached first): let go
    /// of the entries still queued. A queued subscription or service holds
    /// this executor alive (its target cell keeps every executor it had
    /// until it is dropped itself) while the queue holds it: a cycle that
    /// leaked both, and every message in the entity's buffer, whenever an
    /// executor was dropped with work it never ran.
    pub(crate) fn drop_queued(&self) {
        self.ready.take_home();
        while let Some(e) = self.ready.pop_in_order() {
            drop(e);
        }
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
    pub(crate) fn pump_remote(&self) {
        if let Some(marked) = self.event.take_lanes() {
            self.pumps.pump(&marked);
        }
    }

    /// Queue without waking (the caller notifies).
    #[inline]
    pub(crate) fn push_ready(&self, e: Arc<dyn Executable>) {
        self.ready.push(e);
    }

    pub(crate) fn add_timer(self: &Arc<Self>, t: Arc<dyn Tick>) {
        if let Some(sim) = t.sim() {
            sim.add_executor(self);
        }
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
            .retain(|t| t.id() != id);
        self.timers_changed();
    }

    /// The simulated time of a timer here moved: look at the timers.
    pub(crate) fn sim_time_moved(&self) {
        self.sim_gen.fetch_add(1, Ordering::Release);
        self.event.notify();
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

    pub(crate) fn halted(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.down.load(Ordering::SeqCst)
    }

    /// Whether a stop was requested, clearing the request. A load first:
    /// a spinning executor asks once per callback, and the swap is a
    /// locked instruction. A stop set just after the load is seen at the
    /// next look, as one set just after a swap would be.
    #[inline]
    pub(crate) fn take_stop(&self) -> bool {
        self.stop.load(Ordering::SeqCst) && self.stop.swap(false, Ordering::SeqCst)
    }

    /// Queue every due timer (if no other worker is doing it right now).
    #[inline]
    pub(crate) fn poll_timers(&self) {
        let gen_now = self.timers_gen.load(Ordering::Acquire);
        let sim_now_gen = self.sim_gen.load(Ordering::Acquire);
        if gen_now == self.wheel_gen.load(Ordering::Relaxed)
            && sim_now_gen == self.wheel_sim_gen.load(Ordering::Relaxed)
        {
            // Nothing registered, reset or moved by simulated time since
            // the wheel last looked: only the earliest deadline can make a
            // timer due. (A cancelled timer is seen when it comes due.) So a
            // burst of messages does not walk every timer once per
            // callback: one clock read per turn (none while caused work runs
            // next: see `turn_until`), or none without timers.
            let due = self.next_due.load(Ordering::Acquire);
            if due == u64::MAX || Instant::now() < from_mono_ns(due) {
                return;
            }
        }
        self.poll_wheel(gen_now, sim_now_gen);
    }

    /// [`poll_timers`](Self::poll_timers) when a timer may be due or the
    /// timers changed: the wheel's walk, out of line so that a turn with
    /// nothing due (every message's) runs through fewer cache lines.
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn poll_wheel(&self, gen_now: u64, sim_now_gen: u64) {
        let Some(mut wheel) = self.wheel.try_lock() else {
            return;
        };
        self.wheel_sim_gen.store(sim_now_gen, Ordering::Relaxed);
        if gen_now != wheel.seen_gen {
            let registered = self
                .timers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let mut next = Vec::with_capacity(registered.len());
            for t in registered {
                let kept = wheel
                    .timers
                    .iter()
                    .find(|l| Arc::ptr_eq(&l.inner, &t))
                    .map(|l| (l.next_due, l.sim_due, l.sim_seen));
                let (next_due, sim_due, sim_seen) = match kept {
                    Some(k) => k,
                    None => {
                        // On simulated time: the period starts when the
                        // timer was made (or at the first /clock), however
                        // late this executor first looks at it.
                        let seen = t.sim_created();
                        let due = seen.saturating_add(period_ns(t.period()));
                        (t.first_due(), due, seen)
                    }
                };
                next.push(LocalTimer {
                    period: t.period(),
                    on_sim: t.sim().is_some(),
                    inner: t,
                    next_due,
                    sim_due,
                    sim_seen,
                });
            }
            wheel.timers = next;
            wheel.seen_gen = gen_now;
            self.wheel_gen.store(gen_now, Ordering::Relaxed);
        }
        let now = Instant::now();
        let mut earliest = u64::MAX;
        for lt in &mut wheel.timers {
            if lt.on_sim {
                let sim_now = lt.inner.sim().map_or(0, SimTime::now_ns);
                self.poll_sim_timer(lt, sim_now);
                continue;
            }
            if let Some(at) = lt.inner.take_reset() {
                lt.next_due = at;
            }
            if lt.inner.is_cancelled() {
                continue;
            }
            if lt.next_due <= now {
                let period = lt.period;
                // Skip (and count) the deadlines missed, rcl-style.
                let late = now.duration_since(lt.next_due);
                let mut missed = (late.as_nanos() / period.as_nanos().max(1)) as u64;
                let skipped = missed.min(u64::from(u32::MAX - 1)) as u32;
                // The last deadline passed: the one this tick stands for.
                let due = lt.next_due + period.saturating_mul(skipped);
                lt.next_due = due + period;
                if lt.next_due <= now {
                    lt.next_due = now + period;
                }
                if !lt.inner.mark_queued(due) {
                    // Its previous tick has not run yet: this one is missed.
                    missed += 1;
                } else {
                    self.ready.push(lt.inner.clone() as Arc<dyn Executable>);
                }
                lt.inner.note_missed(missed);
            }
            earliest = earliest.min(mono_ns(lt.next_due));
        }
        self.next_due.store(earliest, Ordering::Release);
    }

    /// One timer on simulated time, now `sim_now` (rcl's rules: the first
    /// `/clock` and a jump backwards restart the period; a jump forwards
    /// past several periods fires once and counts the rest missed).
    fn poll_sim_timer(&self, lt: &mut LocalTimer, sim_now: i64) {
        let period = period_ns(lt.period);
        let reset = lt.inner.take_reset().is_some();
        if sim_now == 0 {
            return; // no /clock yet: simulated time stands at zero
        }
        if lt.sim_seen == 0 && !reset {
            // Made before the first /clock: its period started there, even
            // if this executor first looks at a later time.
            let first = lt.inner.sim().map_or(0, |s| s.first_ns());
            let start = if first == 0 || first > sim_now {
                sim_now
            } else {
                first
            };
            lt.sim_due = start.saturating_add(period);
        } else if reset || sim_now < lt.sim_seen {
            lt.sim_due = sim_now.saturating_add(period);
        }
        lt.sim_seen = sim_now;
        if lt.inner.is_cancelled() || sim_now < lt.sim_due {
            return;
        }
        let late = sim_now - lt.sim_due;
        let mut missed = (late / period) as u64;
        lt.sim_due = lt
            .sim_due
            .saturating_add(period.saturating_mul((missed as i64).saturating_add(1)));
        if !lt.inner.mark_queued(Instant::now()) {
            missed += 1;
        } else {
            self.ready.push(lt.inner.clone() as Arc<dyn Executable>);
        }
        lt.inner.note_missed(missed);
    }

    /// Run one popped entry (through its callback group when `grouped`),
    /// marking this thread as inside it; returns whether a callback ran (a
    /// busy group parks the entry instead).
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) fn run_entry(
        &self,
        e: Arc<dyn Executable>,
        grouped: bool,
    ) -> Result<bool, SpinError> {
        Running::run(Running::of(self, grouped, &e), || {
            if grouped {
                let g = e.group().clone();
                g.run(e, self)
            } else {
                e.execute(self)
            }
        })
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

    /// One turn: queue due timers (with one worker, not while caused work
    /// runs next: see `turn_until`), run one ready entry (through its
    /// callback group when `grouped`), else sleep until work, a timer
    /// deadline, `deadline`, stop or shutdown. Returns whether an entry
    /// ran.
    pub(crate) fn turn(&self, deadline: Until, grouped: bool) -> Result<bool, SpinError> {
        self.turn_until(deadline, grouped, None)
    }

    /// [`turn`](Self::turn) that also returns (`Ok(false)`) as soon as
    /// `enough()` holds, when given: a nested spin waiting for an answer
    /// that another worker produces. (An `Option`, not a closure that says
    /// `false`: a plain turn calls no code outside the hot text.)
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) fn turn_until(
        &self,
        mut deadline: Until,
        grouped: bool,
        enough: Option<&dyn Fn() -> bool>,
    ) -> Result<bool, SpinError> {
        // Whether this turn waited for its work, and whether it holds the
        // anticipation window (both only for `IdleWait::Anticipate`).
        let (mut waited, mut spins) = (false, 0u32);
        // The anticipation window, while this worker holds it: given up
        // before a callback runs, and on every way out of the turn.
        let mut window = Window::default();
        // Whether the last anticipating decision had a steady period.
        let mut steady = false;
        // The timer deadline of the last wait: work found after it may be
        // the timer's, which is no arrival to learn from.
        let mut timer_then: Option<Instant> = None;
        loop {
            self.pump_remote();
            // While caused work runs next (one worker), a due timer could
            // not run before it: the timer check, and its clock read, wait
            // until the burst is over or the streak's budget lets older
            // work in, and a pipeline of callbacks reads the clock once,
            // not once per callback. The price: a timer that came due
            // during a burst queues behind messages other threads queued
            // during it (a burst is at most `CAUSED_STREAK` callbacks).
            if !self.ready.caused_runs_next() {
                self.poll_timers();
            }
            if let Some(e) = self.next_entry() {
                if waited {
                    let now = Instant::now();
                    if timer_then.is_none_or(|t| now < t) {
                        self.anticipation.count(window.held(), steady);
                        self.anticipation.arrived(mono_ns(now));
                    }
                }
                window.give_up();
                if self.run_entry(e, grouped)? {
                    return Ok(true);
                }
                // Nothing ran (a warm's rehearsal, a message a polled take
                // got first, a parked entry): the turn goes on, unless it
                // is over.
                if self.halted()
                    || enough.is_some_and(|f| f())
                    || deadline.instant().is_some_and(|d| Instant::now() >= d)
                {
                    return Ok(false);
                }
                continue;
            }
            if self.halted() || enough.is_some_and(|f| f()) {
                return Ok(false);
            }
            let timer = self.next_due();
            let deadline = deadline.instant();
            let mut wake_at = match (deadline, timer) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(d) = deadline
                && Instant::now() >= d
            {
                return Ok(false);
            }
            match self.idle_wait() {
                IdleWait::Block => {}
                IdleWait::BusyPoll => {
                    // Look again at once (remote inboxes are drained in the
                    // next turn once their slot is marked).
                    std::hint::spin_loop();
                    continue;
                }
                IdleWait::Anticipate => {
                    waited = true;
                    timer_then = timer;
                    let plan = self.anticipation.plan(mono_ns(Instant::now()));
                    steady = plan != Plan::Block;
                    match plan {
                        Plan::Spin if window.hold(&self.anticipation) => {
                            // Yield every 32 looks: alone on its core the
                            // thread is back at once; sharing one (with the
                            // very thread about to publish, on a small
                            // machine) it lets that one run.
                            spins = spins.wrapping_add(1);
                            if spins % 32 == 0 {
                                std::thread::yield_now();
                            } else {
                                std::hint::spin_loop();
                            }
                            continue;
                        }
                        Plan::SleepUntil(open) => {
                            crate::clock::tighten_timer_slack();
                            let open = from_mono_ns(open);
                            wake_at = Some(wake_at.map_or(open, |w| w.min(open)));
                        }
                        Plan::Spin | Plan::Block => {}
                    }
                    window.give_up();
                }
            }
            if timer.is_some() {
                // A timer's deadline ends this sleep: without this, the
                // kernel may end it up to the thread's timer slack (50 us
                // by default) late, and a 1 kHz control loop's ticks start
                // 50 us behind (BENCHMARKS, "Timer ticks on time").
                crate::clock::tighten_timer_slack();
            }
            let seen_gen = self.timers_gen.load(Ordering::Acquire);
            let due = timer.map_or(u64::MAX, mono_ns);
            self.event
                .wait_while(|| self.still_idle(seen_gen, due, enough), wake_at);
        }
    }

    /// Whether a worker that found nothing to do may go on sleeping: no
    /// ready entry, no remote signal, no stop, nothing `enough`, and the
    /// timers (`seen_gen`), the simulated time and the earliest deadline
    /// (`due`) as they were when it looked. A method, not the closure's
    /// body, so that it sits in the hot text with the turn.
    #[inline]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn still_idle(&self, seen_gen: u64, due: u64, enough: Option<&dyn Fn() -> bool>) -> bool {
        self.ready.is_empty()
            && !self.event.is_pending()
            && !self.halted()
            && !enough.is_some_and(|f| f())
            && self.timers_gen.load(Ordering::Acquire) == seen_gen
            && self.sim_gen.load(Ordering::Acquire) == self.wheel_sim_gen.load(Ordering::Relaxed)
            && self.next_due.load(Ordering::Acquire) == due
    }

    /// How idle workers wait.
    pub(crate) fn idle_wait(&self) -> IdleWait {
        match self.idle_wait.load(Ordering::Relaxed) {
            1 => IdleWait::Anticipate,
            2 => IdleWait::BusyPoll,
            _ => IdleWait::Block,
        }
    }

    /// How well idle workers anticipate the work.
    pub(crate) fn anticipated(&self) -> Anticipated {
        self.anticipation.report()
    }

    /// Set how idle workers wait.
    pub(crate) fn set_idle_wait(&self, w: IdleWait) {
        // SYNC: SeqCst swap, then the SeqCst `is_empty` loads in each
        // subscription's `unpolled`; a publisher pushes (a SeqCst
        // compare-and-swap) and then reads the mode (SeqCst) in
        // `polls_for`. In the single order of the four, either the
        // publisher reads the new mode (and queues its message itself) or
        // `unpolled` finds the message in the buffer (and queues it): no
        // message is left behind for a worker that no longer looks.
        let was = self.idle_wait.swap(w as u32, Ordering::SeqCst);
        if was == IdleWait::BusyPoll as u32 && w != IdleWait::BusyPoll {
            let polled = lock(&self.polled).clone();
            for e in polled {
                e.unpolled();
            }
        }
    }

    /// Whether a publisher of the entity at `entity` skips the queue and
    /// leaves its message for a busy-polling worker to find in the
    /// buffer: this executor busy-polls, and the publish is not work that
    /// one of its own callbacks causes (that still goes through the queue,
    /// first within it; but turns alternate between the queue and a look
    /// at the buffers, so a message found there may run before it).
    #[inline(always)]
    pub(crate) fn polls_for(&self, entity: *const ()) -> bool {
        // SYNC: SeqCst: see `set_idle_wait`.
        self.idle_wait.load(Ordering::SeqCst) == IdleWait::BusyPoll as u32 && !self.causes(entity)
    }

    /// Whether work for `entity` made ready now is caused (see
    /// [`inside`](Self::inside)), out of line: the busy-polling publish
    /// asks it rarely enough that its thread-local lookup stays off the
    /// path.
    #[inline(never)]
    fn causes(&self, entity: *const ()) -> bool {
        self.inside(entity) == Some(true)
    }

    /// `Some` when this thread runs a callback of this executor: `true`
    /// when it is another entity's than `entity`'s (work it makes ready
    /// is caused), `false` for `entity`'s own (coming back for its next
    /// message); `None` outside this executor's callbacks.
    #[inline(always)]
    fn inside(&self, entity: *const ()) -> Option<bool> {
        let me = self as *const ExecShared as usize;
        with_current(|c| {
            c.filter(|c| c.exec == me)
                .map(|c| c.entity != entity as usize)
        })
    }

    /// Have a busy-polling worker look at `e`'s buffer (once, however
    /// often it is attached).
    pub(crate) fn add_polled(&self, e: Arc<dyn Executable>) {
        let mut polled = lock(&self.polled);
        let at = Arc::as_ptr(&e) as *const ();
        if !polled.iter().any(|p| Arc::as_ptr(p) as *const () == at) {
            polled.push(e);
        }
    }

    /// Stop looking at the entity at `e` (it left this executor or was
    /// dropped): the list's reference to it goes.
    pub(crate) fn remove_polled(&self, e: *const ()) {
        let mut polled = lock(&self.polled);
        let gone = polled
            .iter()
            .position(|p| Arc::as_ptr(p) as *const () == e)
            .map(|i| polled.swap_remove(i));
        drop(polled);
        // Dropped after the lock: were it the last reference, the entity's
        // drop must not run under it.
        drop(gone);
    }

    /// Whether idle workers busy-poll (and so look at the polled
    /// subscriptions).
    #[inline(always)]
    pub(crate) fn busy_polls(&self) -> bool {
        self.idle_wait.load(Ordering::Relaxed) == IdleWait::BusyPoll as u32
    }

    /// The entry a turn runs: the ready queue's next, or a busy-polling
    /// worker's claim. Busy-polling, turns alternate which is asked first:
    /// a queue that never empties (a 0 ms timer, callbacks that keep
    /// publishing to each other) does not starve the polled
    /// subscriptions, nor they the queue.
    #[inline(always)]
    fn next_entry(&self) -> Option<Arc<dyn Executable>> {
        if self.busy_polls() {
            return self.next_entry_polling();
        }
        self.ready.pop()
    }

    #[inline(never)]
    fn next_entry_polling(&self) -> Option<Arc<dyn Executable>> {
        let polled_first = self.poll_turn.load(Ordering::Relaxed);
        self.poll_turn.store(!polled_first, Ordering::Relaxed);
        if polled_first {
            self.look_at_polled().or_else(|| self.ready.pop())
        } else {
            self.ready.pop().or_else(|| self.look_at_polled())
        }
    }

    /// A busy-polling worker's look at the polled subscriptions, from
    /// where the last look stopped and at most [`POLL_LOOK`] of them: the
    /// first one with an unqueued message, claimed for the caller to run.
    #[inline(never)]
    fn look_at_polled(&self) -> Option<Arc<dyn Executable>> {
        let polled = lock(&self.polled);
        let n = polled.len();
        let from = self.poll_from.load(Ordering::Relaxed);
        for k in 0..n.min(POLL_LOOK) {
            let i = (from + k) % n;
            if polled[i].claim() {
                self.poll_from.store(i + 1, Ordering::Relaxed);
                return Some(polled[i].clone());
            }
        }
        // The next look goes on where this one stopped.
        self.poll_from
            .store(from.wrapping_add(POLL_LOOK) % n.max(1), Ordering::Relaxed);
        None
    }

    /// Every polled subscription with an unqueued message, claimed for
    /// the caller to run (`spin_some`: each once). Empty, and nothing
    /// allocated, when this executor does not busy-poll or nothing was
    /// waiting.
    pub(crate) fn claim_all_polled(&self) -> Vec<Arc<dyn Executable>> {
        if !self.busy_polls() {
            return Vec::new();
        }
        lock(&self.polled)
            .iter()
            .filter(|e| e.claim())
            .cloned()
            .collect()
    }

    /// Whether a polled subscription holds a message nobody queued.
    pub(crate) fn has_polled_work(&self) -> bool {
        self.busy_polls() && lock(&self.polled).iter().any(|e| e.unqueued_work())
    }
}

/// How an idle executor waits for work (see
/// [`Executor::set_idle_wait`](crate::Executor::set_idle_wait)).
///
/// | mode | latency of a message from another thread or process | CPU while idle |
/// |---|---|---|
/// | `Block` (default) | one kernel wake-up (10-70 us on a VM at robot rates) | none |
/// | `Anticipate` | a spinning thread's once the period is learned | a short spin per period (at most 350 us: 1% at 30 Hz) |
/// | `BusyPoll` | a spinning thread's | one core |
///
/// ```
/// use myelin_core::{Context, Executor, IdleWait};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("controller")?;
/// let mut exec = Executor::new();
/// exec.add_node(&node)?;
/// // A 100 Hz control loop: be awake when the next state message lands.
/// exec.set_idle_wait(IdleWait::Anticipate);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u32)]
pub enum IdleWait {
    /// Sleep in the kernel until work comes (a futex): no CPU while idle;
    /// each message after a quiet spell pays a wake-up of the thread, and
    /// of its caches.
    #[default]
    Block = 0,
    /// Learn the period of the work (the intervals between the first
    /// entries after idle spells), sleep until shortly before the next one
    /// is due, then spin until it comes: periodic traffic (a camera, a
    /// control loop) finds the thread running; anything else is handled as
    /// `Block` would, after at most one spin window. The window opens at
    /// least 200 us before the predicted arrival and closes 150 us after it,
    /// wider with jitter, never more than a quarter period each; work
    /// faster than 2.5 kHz is not anticipated. With several workers, one
    /// spins and the others block.
    Anticipate = 1,
    /// Never sleep: spin looking for work. The lowest latency, at the cost
    /// of one core per worker. The workers look at their subscriptions'
    /// buffers themselves, and publishers in other threads only push into
    /// them (no ready queue, no queued mark to set): a message reaches a
    /// polling worker through the cache lines of the buffer alone.
    /// Subscriptions are looked at in turn (one message each per look), so
    /// messages of different topics run in that order rather than in the
    /// order they were published; work that a callback of the same
    /// executor causes, timers and services still go through the queue,
    /// and turns alternate between the queue and a look, so neither
    /// starves the other.
    BusyPoll = 2,
}

impl IdleWait {
    /// Every mode, in the order of their cost in CPU while idle.
    pub const ALL: [IdleWait; 3] = [IdleWait::Block, IdleWait::Anticipate, IdleWait::BusyPoll];

    /// The mode's name: `block`, `anticipate` or `busy-poll` (what
    /// [`Display`](std::fmt::Display) prints and [`FromStr`](std::str::FromStr)
    /// reads).
    pub fn name(self) -> &'static str {
        match self {
            IdleWait::Block => "block",
            IdleWait::Anticipate => "anticipate",
            IdleWait::BusyPoll => "busy-poll",
        }
    }
}

impl std::fmt::Display for IdleWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// A name that is not an [`IdleWait`] mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an idle wait: block, anticipate or busy-poll")]
pub struct UnknownIdleWait(pub String);

/// Reads a mode by its name (`busy_poll` too, as Python spells it).
///
/// ```
/// use myelin_core::IdleWait;
/// assert_eq!("anticipate".parse(), Ok(IdleWait::Anticipate));
/// assert_eq!("busy_poll".parse(), Ok(IdleWait::BusyPoll));
/// assert_eq!(IdleWait::BusyPoll.to_string(), "busy-poll");
/// assert!("sometimes".parse::<IdleWait>().is_err());
/// ```
impl std::str::FromStr for IdleWait {
    type Err = UnknownIdleWait;
    fn from_str(s: &str) -> Result<IdleWait, UnknownIdleWait> {
        match s {
            "busy_poll" => Ok(IdleWait::BusyPoll),
            _ => IdleWait::ALL
                .into_iter()
                .find(|w| w.name() == s)
                .ok_or_else(|| UnknownIdleWait(s.to_owned())),
        }
    }
}

/// The process's pump for inline subscriptions fed through shared memory
/// (they have no executor): an executor's shared part used only for its
/// remote-capable wake-up slot and pump lanes, drained by one thread
/// (`myelin-inline`) that sleeps in the kernel until another process
/// signals. Started with the first such subscription; `None` if its
/// thread could not be started.
pub(crate) fn inline_pump() -> Option<&'static Arc<ExecShared>> {
    static PUMP: std::sync::OnceLock<Option<Arc<ExecShared>>> = std::sync::OnceLock::new();
    PUMP.get_or_init(|| {
        let exec = ExecShared::new(Workers::Many);
        let e = exec.clone();
        std::thread::Builder::new()
            .name("myelin-inline".into())
            .spawn(move || {
                loop {
                    e.event.wait_while(|| !e.event.is_pending(), None);
                    e.pump_remote();
                }
            })
            .ok()
            .map(|_| exec)
    })
    .as_ref()
}

/// The text of a caught panic's payload.
pub(crate) fn panic_message(p: &Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{Pump, PumpLanes};
    use crate::transport::wake::{WakeEvent, signal_as_remote};

    struct Counter(AtomicUsize);

    impl Pump for Counter {
        fn pump(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `current()` names the innermost callback this thread runs, the
    /// outer one again when an inner one returns or panics, and none
    /// once the outermost returned: the thread-local points into the
    /// running frames, and each run puts back what it found.
    #[test]
    fn the_running_callback_is_known_inside_and_forgotten_after_even_when_it_panics() {
        use super::{Current, Running, current};
        let mark = |n: usize| Current {
            exec: n,
            grouped: n % 2 == 1,
            group: if n % 2 == 1 { n * 10 } else { 0 },
            entity: n * 100,
        };
        assert_eq!(current(), None);
        Running::run(mark(1), || {
            assert_eq!(current(), Some((1, true, 10)));
            Running::run(mark(2), || assert_eq!(current(), Some((2, false, 0))));
            assert_eq!(current(), Some((1, true, 10)));
            let panicked = std::panic::catch_unwind(|| {
                Running::run(mark(3), || {
                    assert_eq!(current(), Some((3, true, 30)));
                    panic!("in the callback");
                })
            });
            assert!(panicked.is_err());
            assert_eq!(current(), Some((1, true, 10)));
        });
        assert_eq!(current(), None);
    }

    /// An executor with 100 shared-memory subscriptions and one busy topic
    /// drains one inbox per wake-up, not 100.
    #[test]
    fn a_wake_up_drains_only_the_subscriptions_behind_its_lanes() {
        let event = WakeEvent::remote_capable();
        let lanes = PumpLanes::new();
        let subs: Vec<Arc<Counter>> = (0..100)
            .map(|_| Arc::new(Counter(AtomicUsize::new(0))))
            .collect();
        let words: Option<Vec<u32>> = subs
            .iter()
            .map(|c| {
                let weak: std::sync::Weak<dyn Pump> = Arc::downgrade(&(c.clone() as Arc<dyn Pump>));
                event.word(lanes.add(weak))
            })
            .collect();
        let Some(words) = words else {
            eprintln!("skipped: no transport can wake this process from outside");
            return;
        };
        // A publisher in another process signals the busy subscription's
        // word, three times before the executor looks.
        for _ in 0..3 {
            assert!(signal_as_remote(words[42]));
        }
        let marked = event.take_lanes().expect("signalled");
        lanes.pump(&marked);
        let drained: Vec<usize> = subs
            .iter()
            .enumerate()
            .filter(|(_, c)| c.0.load(Ordering::Relaxed) > 0)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(drained, vec![42]);
        assert_eq!(
            subs[42].0.load(Ordering::Relaxed),
            1,
            "one drain per wake-up"
        );
        assert!(event.take_lanes().is_none());
    }
}
