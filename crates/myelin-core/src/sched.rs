//! Where and at what priority the threads that run callbacks are
//! scheduled: a set of CPUs (affinity) and `SCHED_FIFO` real-time
//! priority, for control loops that must not wait behind other work.
//!
//! A [`ThreadPolicy`] is applied to the calling thread with
//! [`ThreadPolicy::apply`] (the thread that spins an [`Executor`]: it is
//! the caller's), or to every worker of a [`MultiThreadedExecutor`] with
//! [`MultiThreadedExecutor::set_thread_policy`]. Either way the kernel's
//! answer is checked: a CPU the process may not use, or real-time priority
//! without the permission for it, is a [`SchedError`], never a silent
//! half-applied policy.
//!
//!
//! [`CpuWakeupLatency`] is the other half of a fast wake-up: an idle CPU
//! in a deep sleep state (or, in a virtual machine, a halted virtual CPU)
//! takes tens of microseconds to run the thread a message wakes. While it
//! is held the kernel keeps idle CPUs in states they leave within the
//! bound (the PM QoS request cyclictest makes).
//!
//! [`Executor`]: crate::Executor
//! [`MultiThreadedExecutor`]: crate::MultiThreadedExecutor
//! [`MultiThreadedExecutor::set_thread_policy`]: crate::MultiThreadedExecutor::set_thread_policy

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// The highest `SCHED_FIFO` priority Linux accepts (the lowest is 1).
pub const MAX_FIFO_PRIORITY: u8 = 99;

/// CPU affinity and real-time priority for a thread that runs callbacks.
/// The default changes nothing: the thread keeps what it inherited.
/// Threads it starts later inherit the policy too (a thread a callback
/// spawns; myelin's own inline-delivery thread if the first inline
/// subscription is made from it).
///
/// ```no_run
/// use myelin_core::{Context, Executor, ThreadPolicy};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = Context::builder().build()?;
/// let node = ctx.create_node("controller")?;
/// let mut exec = Executor::new();
/// exec.add_node(&node)?;
/// // The control loop's thread: CPU 3 only, above every normal thread.
/// let control = std::thread::spawn(move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     ThreadPolicy::new().cpus([3]).fifo(80).apply()?;
///     exec.spin()?;
///     Ok(())
/// });
/// # let _ = control;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadPolicy {
    /// The CPUs the thread may run on, ascending and without repeats;
    /// empty: unchanged.
    cpus: Vec<usize>,
    /// `SCHED_FIFO` at this priority; `None`: the scheduling class is
    /// unchanged.
    fifo: Option<u8>,
}

/// A thread's scheduling as it was before [`ThreadPolicy::apply`] changed
/// it, to put back with [`restore`](Self::restore).
#[derive(Debug)]
#[must_use = "restore() puts the thread's previous scheduling back"]
pub struct SavedPolicy {
    /// The affinity before, when `apply` changed it.
    cpus: Option<CpuSet>,
    /// The scheduling class and priority before, when `apply` changed
    /// them.
    class: Option<(libc::c_int, libc::c_int)>,
}

/// A [`ThreadPolicy`] could not be applied. The thread's scheduling is
/// left as it was before the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedError {
    /// A `SCHED_FIFO` priority outside 1..=99.
    #[error(
        "SCHED_FIFO priority {priority} is out of range: Linux accepts 1 to {MAX_FIFO_PRIORITY}"
    )]
    Priority {
        /// The requested priority.
        priority: u8,
    },
    /// CPUs that do not exist, are offline, or are outside the CPUs this
    /// process may use (its cgroup's cpuset, `taskset`).
    #[error(
        "CPU {} cannot run this thread: it may use CPUs {}",
        list(missing),
        list(allowed)
    )]
    NoSuchCpu {
        /// The requested CPUs the kernel did not grant.
        missing: Vec<usize>,
        /// The CPUs the calling thread may use.
        allowed: Vec<usize>,
    },
    /// The kernel refused real-time priority.
    #[error(
        "cannot run at SCHED_FIFO priority {priority}: {why}. Real-time priority needs root, CAP_SYS_NICE, or an rtprio limit at least {priority} (`ulimit -r`, /etc/security/limits.conf: `@robot - rtprio 90`)"
    )]
    RealtimeDenied {
        /// The requested priority.
        priority: u8,
        /// The OS error.
        why: String,
    },
    /// The CPU wake-up latency request was refused.
    #[error(
        "cannot hold the CPU wake-up latency: {CPU_DMA_LATENCY}: {why}. The request needs root or write access to {CPU_DMA_LATENCY} (a udev rule: KERNEL==\"cpu_dma_latency\", GROUP=\"realtime\", MODE=\"0660\")"
    )]
    CpuLatencyDenied {
        /// The OS error.
        why: String,
    },
    /// A CPU wake-up latency bound the kernel cannot take (above
    /// [`MAX_CPU_WAKEUP_LATENCY`]).
    #[error(
        "a CPU wake-up latency of {micros} us is out of range: the kernel takes 0 to {} us",
        MAX_CPU_WAKEUP_LATENCY.as_micros()
    )]
    CpuLatencyRange {
        /// The requested bound in microseconds.
        micros: u128,
    },
    /// Another system call failed.
    #[error("{call}: {why}")]
    Os {
        /// The system call.
        call: &'static str,
        /// The OS error.
        why: String,
    },
}

/// Whether this process's graph changes use `membarrier(2)`: then a
/// publish reads its matched subscriptions with no locked instruction, and
/// each replacement of such a list (a subscription or publisher made or
/// dropped, a connection to another process) interrupts every CPU that
/// runs a thread of the process once (18-30 us per replacement on a
/// 2-CPU VM while another thread of the process runs). `MYELIN_MEMBARRIER=0` in the environment trades that for one
/// full fence per publish (a control loop that must never see an
/// interrupt it did not ask for); an old kernel or a seccomp filter that
/// refuses `membarrier` does the same.
///
/// ```
/// // Either way publishing works; this says which way it costs.
/// let _ = myelin_core::sched::uses_membarrier();
/// ```
pub fn uses_membarrier() -> bool {
    myelin_sync::uses_membarrier()
}

/// The kernel's CPU latency QoS device: a request lasts while its file is
/// open.
pub const CPU_DMA_LATENCY: &str = "/dev/cpu_dma_latency";

/// The largest bound the kernel takes (its "no constraint" default).
pub const MAX_CPU_WAKEUP_LATENCY: std::time::Duration = std::time::Duration::from_secs(2000);

/// A request to the kernel, held while this value lives, that every CPU
/// wake up from idle within a bound: idle CPUs stay in shallow states
/// (with `Duration::ZERO`, they poll) instead of sleeping deeply. A thread
/// that a message wakes then starts in microseconds instead of paying the
/// idle state's exit (on this project's 2-CPU VM: a 30 Hz executor
/// callback 29 -> 7.7 us P50, a raw futex hand-off 23 -> 6 us; see
/// BENCHMARKS.md, "Idle CPUs: the wake-up latency request").
///
/// The cost is power: idle CPUs spin in the kernel instead of sleeping
/// (on a virtual machine, the host sees the virtual CPUs busy). It shows
/// in no process's CPU time. The kernel drops the request when the file
/// closes, also when the process is killed, so nothing outlives it.
/// Needs root or write access to [`CPU_DMA_LATENCY`].
///
/// ```no_run
/// use myelin_core::CpuWakeupLatency;
/// use std::time::Duration;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let _awake = CpuWakeupLatency::hold(Duration::ZERO)?;
/// // ... run the control loop; the request ends with `_awake`.
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CpuWakeupLatency {
    _request: std::fs::File,
    max: std::time::Duration,
}

impl CpuWakeupLatency {
    /// Ask that idle CPUs wake within `max` until the returned value is
    /// dropped. Several requests (of this process or others) combine: the
    /// smallest holds.
    pub fn hold(max: std::time::Duration) -> Result<CpuWakeupLatency, SchedError> {
        use std::io::Write;
        if max > MAX_CPU_WAKEUP_LATENCY {
            return Err(SchedError::CpuLatencyRange {
                micros: max.as_micros(),
            });
        }
        let micros = i32::try_from(max.as_micros()).map_err(|_| SchedError::CpuLatencyRange {
            micros: max.as_micros(),
        })?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(CPU_DMA_LATENCY)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::PermissionDenied => {
                    SchedError::CpuLatencyDenied { why: e.to_string() }
                }
                _ => os("open /dev/cpu_dma_latency", e),
            })?;
        // Four bytes are taken as a binary s32 (anything else as hex text).
        file.write_all(&micros.to_ne_bytes())
            .map_err(|e| os("write /dev/cpu_dma_latency", e))?;
        Ok(CpuWakeupLatency {
            _request: file,
            max,
        })
    }

    /// The bound this request asked for.
    pub fn max(&self) -> std::time::Duration {
        self.max
    }

    /// The bound in force now, all requests on the system combined
    /// ([`MAX_CPU_WAKEUP_LATENCY`]: none). Needs read access to
    /// [`CPU_DMA_LATENCY`] (root).
    pub fn in_force() -> Result<std::time::Duration, SchedError> {
        use std::io::Read;
        let mut word = [0u8; 4];
        std::fs::File::open(CPU_DMA_LATENCY)
            .and_then(|mut f| f.read_exact(&mut word))
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::PermissionDenied => {
                    SchedError::CpuLatencyDenied { why: e.to_string() }
                }
                _ => os("read /dev/cpu_dma_latency", e),
            })?;
        let micros = u64::try_from(i32::from_ne_bytes(word)).unwrap_or(0);
        Ok(std::time::Duration::from_micros(micros))
    }
}

/// `0, 2-5` for the CPUs `[0, 2, 3, 4, 5]` (ascending).
fn list(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j == i {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}

fn members(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
}

fn os(call: &'static str, e: impl std::fmt::Display) -> SchedError {
    SchedError::Os {
        call,
        why: e.to_string(),
    }
}

/// The calling thread's scheduling class and priority.
fn class_of_current() -> Result<(libc::c_int, libc::c_int), SchedError> {
    // SAFETY: sched_getscheduler(2) of the calling thread (pid 0); no
    // memory is passed.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(os("sched_getscheduler", std::io::Error::last_os_error()));
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_getparam(2) of the calling thread writes one
    // sched_param, which `param` is.
    if unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return Err(os("sched_getparam", std::io::Error::last_os_error()));
    }
    Ok((policy, param.sched_priority))
}

/// Set the calling thread's scheduling class and priority.
fn set_class(policy: libc::c_int, priority: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler(2) on the calling thread (pid 0) reads
    // one initialised sched_param.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl ThreadPolicy {
    /// A policy that changes nothing (add [`cpus`](Self::cpus) and/or
    /// [`fifo`](Self::fifo)).
    pub fn new() -> Self {
        Self::default()
    }

    /// Run only on these CPUs (numbered as in `/proc/cpuinfo`). An empty
    /// set leaves the affinity as it is.
    ///
    /// ```
    /// let p = myelin_core::ThreadPolicy::new().cpus([3, 1, 3]);
    /// assert_eq!(p.cpu_set(), &[1, 3]);
    /// ```
    pub fn cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut cpus: Vec<usize> = cpus.into_iter().collect();
        cpus.sort_unstable();
        cpus.dedup();
        self.cpus = cpus;
        self
    }

    /// Run under `SCHED_FIFO` at `priority` (1 = lowest, 99 = highest; a
    /// control loop usually sits at 80 or below, so the kernel's own
    /// threaded interrupts at 50 and watchdogs at 99 keep their place
    /// where that matters). A `SCHED_FIFO` thread runs until it blocks:
    /// a callback that never returns starves everything below it on its
    /// CPUs.
    ///
    /// ```
    /// assert_eq!(myelin_core::ThreadPolicy::new().fifo(80).fifo_priority(), Some(80));
    /// ```
    pub fn fifo(mut self, priority: u8) -> Self {
        self.fifo = Some(priority);
        self
    }

    /// The CPUs of [`cpus`](Self::cpus), ascending; empty: unchanged.
    pub fn cpu_set(&self) -> &[usize] {
        &self.cpus
    }

    /// The priority of [`fifo`](Self::fifo), if set.
    pub fn fifo_priority(&self) -> Option<u8> {
        self.fifo
    }

    /// Whether the policy changes nothing.
    ///
    /// ```
    /// assert!(myelin_core::ThreadPolicy::new().is_unchanged());
    /// ```
    pub fn is_unchanged(&self) -> bool {
        self.cpus.is_empty() && self.fifo.is_none()
    }

    /// The values the kernel would refuse before asking it: a priority
    /// outside 1..=99, a CPU number past what Linux can name.
    ///
    /// ```
    /// use myelin_core::{SchedError, ThreadPolicy};
    /// assert_eq!(
    ///     ThreadPolicy::new().fifo(100).validate(),
    ///     Err(SchedError::Priority { priority: 100 })
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), SchedError> {
        if let Some(p) = self.fifo
            && !(1..=MAX_FIFO_PRIORITY).contains(&p)
        {
            return Err(SchedError::Priority { priority: p });
        }
        let beyond: Vec<usize> = self
            .cpus
            .iter()
            .copied()
            .filter(|&c| c >= CpuSet::MAX_CPU)
            .collect();
        if !beyond.is_empty() {
            let allowed = sched_getaffinity(None)
                .map(|s| members(&s))
                .unwrap_or_default();
            return Err(SchedError::NoSuchCpu {
                missing: beyond,
                allowed,
            });
        }
        Ok(())
    }

    /// Apply the policy to the calling thread (threads it spawns later
    /// inherit it). Returns what it replaced, for
    /// [`SavedPolicy::restore`]. On an error what it changed is put back
    /// (the kernel taking back what it just granted): a CPU set the kernel
    /// narrowed (CPUs outside the process's cpuset, offline) is an error
    /// too, and undone.
    ///
    /// ```
    /// use myelin_core::ThreadPolicy;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // CPU 0 exists wherever this runs.
    /// let saved = ThreadPolicy::new().cpus([0]).apply()?;
    /// assert_eq!(ThreadPolicy::of_current_thread()?.cpu_set(), &[0]);
    /// saved.restore()?;
    /// # Ok(()) }
    /// ```
    pub fn apply(&self) -> Result<SavedPolicy, SchedError> {
        self.validate()?;
        let mut saved = SavedPolicy {
            cpus: None,
            class: None,
        };
        if !self.cpus.is_empty() {
            let before = sched_getaffinity(None).map_err(|e| os("sched_getaffinity", e))?;
            let mut want = CpuSet::new();
            for &c in &self.cpus {
                want.set(c);
            }
            if let Err(e) = sched_setaffinity(None, &want) {
                // EINVAL: none of them may be used (the kernel's way of
                // saying all are missing).
                if e == rustix::io::Errno::INVAL {
                    return Err(SchedError::NoSuchCpu {
                        missing: self.cpus.clone(),
                        allowed: members(&before),
                    });
                }
                return Err(os("sched_setaffinity", e));
            }
            // The kernel narrows a mask to the cpuset without a word:
            // read back what it granted.
            let granted = match sched_getaffinity(None) {
                Ok(g) => g,
                Err(e) => {
                    let _ = sched_setaffinity(None, &before);
                    return Err(os("sched_getaffinity", e));
                }
            };
            let missing: Vec<usize> = self
                .cpus
                .iter()
                .copied()
                .filter(|&c| !granted.is_set(c))
                .collect();
            if !missing.is_empty() {
                let _ = sched_setaffinity(None, &before);
                return Err(SchedError::NoSuchCpu {
                    missing,
                    allowed: members(&before),
                });
            }
            saved.cpus = Some(before);
        }
        if let Some(priority) = self.fifo {
            let before = match class_of_current() {
                Ok(b) => b,
                Err(e) => {
                    let _ = saved.restore();
                    return Err(e);
                }
            };
            if let Err(e) = set_class(libc::SCHED_FIFO, priority.into()) {
                let _ = saved.restore();
                return Err(SchedError::RealtimeDenied {
                    priority,
                    why: e.to_string(),
                });
            }
            saved.class = Some(before);
            // Back under a normal policy later, the kernel gives the thread
            // the default timer slack again.
            crate::clock::forget_timer_slack();
        }
        Ok(saved)
    }

    /// The calling thread's policy as the kernel has it: its CPUs, and its
    /// priority when it runs under `SCHED_FIFO`.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let now = myelin_core::ThreadPolicy::of_current_thread()?;
    /// assert!(!now.cpu_set().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn of_current_thread() -> Result<ThreadPolicy, SchedError> {
        let cpus = sched_getaffinity(None).map_err(|e| os("sched_getaffinity", e))?;
        let (class, priority) = class_of_current()?;
        Ok(ThreadPolicy {
            cpus: members(&cpus),
            fifo: (class == libc::SCHED_FIFO).then(|| u8::try_from(priority).unwrap_or(u8::MAX)),
        })
    }
}

impl SavedPolicy {
    /// Put the thread's previous affinity and scheduling class back (on
    /// the thread that applied the policy).
    pub fn restore(self) -> Result<(), SchedError> {
        // Both are tried; the first failure is returned.
        let class = match self.class {
            Some((policy, priority)) => {
                crate::clock::forget_timer_slack();
                set_class(policy, priority).map_err(|e| os("sched_setscheduler", e))
            }
            None => Ok(()),
        };
        let cpus = match &self.cpus {
            Some(cpus) => sched_setaffinity(None, cpus).map_err(|e| os("sched_setaffinity", e)),
            None => Ok(()),
        };
        class.and(cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_as_ranges() {
        assert_eq!(list(&[]), "none");
        assert_eq!(list(&[0]), "0");
        assert_eq!(list(&[0, 1]), "0-1");
        assert_eq!(list(&[0, 2, 3, 4, 7]), "0, 2-4, 7");
    }

    #[test]
    fn absurd_values_are_refused_before_the_kernel_is_asked() {
        assert_eq!(
            ThreadPolicy::new().fifo(0).validate(),
            Err(SchedError::Priority { priority: 0 })
        );
        assert_eq!(
            ThreadPolicy::new().fifo(200).apply().map(drop),
            Err(SchedError::Priority { priority: 200 })
        );
        assert_eq!(
            CpuWakeupLatency::hold(std::time::Duration::from_secs(1 << 40)).map(drop),
            Err(SchedError::CpuLatencyRange {
                micros: (1u128 << 40) * 1_000_000
            })
        );
        let far = ThreadPolicy::new().cpus([1, usize::MAX]).apply().map(drop);
        assert!(
            matches!(&far, Err(SchedError::NoSuchCpu { missing, .. }) if missing == &[usize::MAX]),
            "{far:?}"
        );
    }
}
