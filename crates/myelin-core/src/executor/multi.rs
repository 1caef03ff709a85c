//! The multi-threaded executor.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{Attachments, ExecShared, StopHandle};
use crate::dispatch::Until;
use crate::error::{AddNodeError, SpinError};
use crate::node::Node;
use crate::sched::{SavedPolicy, SchedError, ThreadPolicy};

/// An executor with N worker threads over one ready queue. Callback groups
/// decide what may overlap: a node's default group is mutually exclusive (as
/// in ROS 2), so two callbacks of one node never run at once unless they are
/// put in a [`Reentrant`](crate::CallbackGroupKind::Reentrant) group. Idle
/// workers sleep in the kernel; a ready entry wakes one of them.
///
/// `spin` runs the workers on scoped threads (the calling thread is one of
/// them) and returns when stopped, when the context shuts down, or with the
/// first callback panic (the other workers are stopped too).
///
/// ```
/// use myelin_core::{CallbackGroupKind, Context, MultiThreadedExecutor, QoS, SubscriptionOptions};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("workers")?;
/// let parallel = node.create_callback_group(CallbackGroupKind::Reentrant);
/// let count = Arc::new(AtomicUsize::new(0));
/// let c = count.clone();
/// let _sub = node.create_subscription_with(
///     "jobs",
///     QoS::keep_all(),
///     SubscriptionOptions::default().with_group(&parallel),
///     move |_job: u32| { c.fetch_add(1, Ordering::SeqCst); },
/// )?;
/// let p = node.create_publisher::<u32>("jobs", QoS::keep_all())?;
/// for i in 0..10 { p.publish(i)?; }
/// let mut exec = MultiThreadedExecutor::new(2);
/// exec.add_node(&node)?;
/// let c = count.clone();
/// assert!(exec.spin_until(Duration::from_secs(10), move || c.load(Ordering::SeqCst) == 10)?);
/// # Ok(()) }
/// ```
pub struct MultiThreadedExecutor {
    shared: Arc<ExecShared>,
    attached: Attachments,
    threads: usize,
    /// Applied to every worker when `spin` starts.
    policy: ThreadPolicy,
}

impl MultiThreadedExecutor {
    /// An executor with `threads` workers (0 = one per CPU).
    pub fn new(threads: usize) -> Self {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            threads
        };
        MultiThreadedExecutor {
            shared: ExecShared::new(crate::dispatch::Workers::Many),
            attached: Attachments::new(),
            threads,
            policy: ThreadPolicy::default(),
        }
    }

    /// Run every worker under `policy` (CPU affinity, `SCHED_FIFO`): the
    /// spawned workers from their start, the calling thread while `spin`
    /// runs (its own scheduling is put back when `spin` returns). Values
    /// the kernel would refuse outright are refused here; a permission
    /// the process lacks is found when `spin` starts, which then returns
    /// [`SpinError::ThreadPolicy`] before any callback runs.
    ///
    /// ```
    /// use myelin_core::{MultiThreadedExecutor, SchedError, ThreadPolicy};
    /// let mut exec = MultiThreadedExecutor::new(2);
    /// assert_eq!(
    ///     exec.set_thread_policy(ThreadPolicy::new().fifo(0)),
    ///     Err(SchedError::Priority { priority: 0 })
    /// );
    /// exec.set_thread_policy(ThreadPolicy::new().cpus([0])).unwrap();
    /// ```
    pub fn set_thread_policy(&mut self, policy: ThreadPolicy) -> Result<(), SchedError> {
        policy.validate()?;
        self.policy = policy;
        Ok(())
    }

    /// The policy of [`set_thread_policy`](Self::set_thread_policy).
    pub fn thread_policy(&self) -> &ThreadPolicy {
        &self.policy
    }

    /// The number of worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How idle workers wait (see [`IdleWait`](crate::IdleWait)); with
    /// [`Anticipate`](crate::IdleWait::Anticipate), one worker spins in the
    /// window and the others sleep.
    pub fn set_idle_wait(&mut self, wait: crate::IdleWait) {
        self.shared.set_idle_wait(wait);
    }

    /// See [`Executor::anticipation`](crate::Executor::anticipation).
    pub fn anticipation(&self) -> crate::Anticipated {
        self.shared.anticipated()
    }

    /// Add a node (see [`Executor::add_node`](crate::Executor::add_node)).
    pub fn add_node(&mut self, node: &Node) -> Result<(), AddNodeError> {
        self.attached.add(&self.shared, node)
    }

    /// Remove a node; returns whether it was attached to this executor.
    pub fn remove_node(&mut self, node: &Node) -> bool {
        self.attached.remove(&self.shared, node)
    }

    /// A handle that stops `spin` from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Run the workers until stopped or the context shuts down (`Ok`), or a
    /// callback panics (the first panic is returned).
    pub fn spin(&mut self) -> Result<(), SpinError> {
        self.run(None, &|| false).map(drop)
    }

    /// Run the workers until `done()` (checked by every worker after each
    /// callback) or `timeout`. Returns whether `done()` became true.
    pub fn spin_until(
        &mut self,
        timeout: Duration,
        done: impl Fn() -> bool + Sync,
    ) -> Result<bool, SpinError> {
        self.run(Some(crate::clock::deadline_after(timeout)), &done)
    }

    fn run(
        &mut self,
        deadline: Option<Instant>,
        done: &(dyn Fn() -> bool + Sync),
    ) -> Result<bool, SpinError> {
        let shared = &self.shared;
        let worker = || -> Result<(), SpinError> {
            loop {
                if shared.halted() || done() || deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(());
                }
                if let Err(e) = shared.turn(deadline.map_or(Until::Never, Until::At), true) {
                    // Stop the others; the first error wins.
                    shared.stop.store(true, Ordering::SeqCst);
                    shared.event.notify();
                    return Err(e);
                }
                if done() {
                    // Wake the others so they see it too.
                    shared.stop.store(true, Ordering::SeqCst);
                    shared.event.notify();
                    return Ok(());
                }
            }
        };
        // Every worker applies the policy, then all wait for each other:
        // if one was refused, none runs a callback.
        let policy = &self.policy;
        let refused = AtomicBool::new(false);
        let applied = StartGate::new(self.threads);
        let prepare = || -> Result<Option<SavedPolicy>, SpinError> {
            if policy.is_unchanged() {
                return Ok(None);
            }
            policy.apply().map(Some).map_err(|e| {
                refused.store(true, Ordering::SeqCst);
                SpinError::ThreadPolicy(e)
            })
        };
        let result = std::thread::scope(|s| {
            // A thread the OS refuses (EAGAIN: a process or memory limit)
            // is an error of this `spin`, not a panic; the workers already
            // started are let through the gate without it and stop.
            // Grown as they start: an absurd thread count meets the OS's
            // refusal below, not a capacity overflow here.
            let mut others = Vec::new();
            let mut unspawned = None;
            for i in 1..self.threads {
                let started = std::thread::Builder::new()
                    .name(format!("myelin-worker-{i}"))
                    .spawn_scoped(s, || {
                        // A spawned worker's scheduling ends with it.
                        let mine = prepare();
                        applied.arrive();
                        match mine {
                            Err(e) => Err(e),
                            Ok(_) if refused.load(Ordering::SeqCst) => Ok(()),
                            Ok(_) => worker(),
                        }
                    });
                match started {
                    Ok(h) => others.push(h),
                    Err(e) => {
                        refused.store(true, Ordering::SeqCst);
                        applied.withdraw(self.threads - i);
                        unspawned = Some(SpinError::WorkerThread {
                            started: i,
                            wanted: self.threads,
                            reason: e.to_string(),
                        });
                        break;
                    }
                }
            }
            let mine = match unspawned {
                Some(e) => Err(e),
                None => prepare(),
            };
            applied.arrive();
            // The calling thread is the user's: its scheduling goes back,
            // also when `done()` panics out of here.
            let mut saved = Restore(None);
            let mut first = match mine {
                Err(e) => Err(e),
                Ok(s) => {
                    saved.0 = s;
                    if refused.load(Ordering::SeqCst) {
                        Ok(())
                    } else {
                        worker()
                    }
                }
            };
            // The calling worker is done: make sure the others finish too.
            shared.stop.store(true, Ordering::SeqCst);
            shared.event.notify();
            for h in others {
                let r = h.join().unwrap_or_else(|p| {
                    Err(SpinError::CallbackPanicked {
                        entity: "executor worker".into(),
                        message: crate::dispatch::panic_message(&p),
                    })
                });
                if first.is_ok() {
                    first = r;
                }
            }
            if let Some(s) = saved.0.take()
                && let Err(e) = s.restore()
                && first.is_ok()
            {
                first = Err(e.into());
            }
            first
        });
        shared.stop.store(false, Ordering::SeqCst);
        result?;
        Ok(done())
    }
}

/// Where the workers of one `spin` wait for each other before the first
/// callback: a barrier that threads which never started can be taken out
/// of (`std::sync::Barrier` would keep the started ones waiting for them).
struct StartGate {
    /// Threads still to arrive.
    missing: Mutex<usize>,
    all_here: Condvar,
}

impl StartGate {
    fn new(threads: usize) -> Self {
        StartGate {
            missing: Mutex::new(threads),
            all_here: Condvar::new(),
        }
    }

    /// Count this thread in and wait for the rest.
    fn arrive(&self) {
        let mut missing = self.missing.lock().unwrap_or_else(|p| p.into_inner());
        *missing -= 1;
        if *missing == 0 {
            self.all_here.notify_all();
        }
        while *missing > 0 {
            missing = self
                .all_here
                .wait(missing)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// `n` threads will never arrive.
    fn withdraw(&self, n: usize) {
        let mut missing = self.missing.lock().unwrap_or_else(|p| p.into_inner());
        *missing -= n;
        if *missing == 0 {
            self.all_here.notify_all();
        }
    }
}

/// A thread's scheduling to put back when dropped (an unwinding `spin`).
struct Restore(Option<SavedPolicy>);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            let _ = s.restore();
        }
    }
}

impl Drop for MultiThreadedExecutor {
    fn drop(&mut self) {
        self.attached.detach_all(&self.shared);
        self.shared.drop_queued();
    }
}

impl std::fmt::Debug for MultiThreadedExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiThreadedExecutor")
            .field("threads", &self.threads)
            .field("nodes", &self.attached.nodes.len())
            .finish()
    }
}
