//! Two processes on one host: round trips between this process and an echo
//! process, one-way latency = round trip / 2.
//!
//! * myelin: its public API over shared memory (the echo is a helper
//!   process), and the shared-memory broadcast ring of `myelin-shm` under
//!   it (ping ring one way, pong ring back; the echo is forked), each
//!   blocking (futex) or polling, at a given message size;
//! * iceoryx2 (feature `iceoryx2`): the same ping-pong through its
//!   zero-copy publish-subscribe;
//! * `raw`: the limits of this machine between two processes: a futex
//!   ping-pong and a busy-spin ping-pong on words of a shared mapping.
//!
//! A forked echo process is `fork`ed from the run's process (each benchmark
//! run is its own single-threaded process, see `myelin bench`), uses only
//! memory allocated before the fork, and leaves with `_exit`.

use crate::harness::{BenchError, Job};
use crate::systems::{self, System};

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct IpcParams {
    /// Round trips measured (a warm-up is added).
    pub count: u64,
    /// Message size for the ring (1 B .. 64 MiB).
    pub size: usize,
}

impl IpcParams {
    /// Check the parameters.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.count == 0 {
            return Err(BenchError::InvalidArg {
                flag: "count",
                reason: "must be at least 1".into(),
            });
        }
        if !(1..=64 << 20).contains(&self.size) {
            return Err(BenchError::InvalidArg {
                flag: "size",
                reason: format!("{} bytes: must be 1 to 67108864", self.size),
            });
        }
        Ok(())
    }
}

/// How both sides wait for the other's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Sleep in the kernel until woken (a futex).
    Block,
    /// Busy-poll.
    Poll,
}

impl Wait {
    /// Both modes, in report order.
    pub const BOTH: [Wait; 2] = [Wait::Block, Wait::Poll];

    /// `block` or `poll`.
    pub fn label(self) -> &'static str {
        match self {
            Wait::Block => "block",
            Wait::Poll => "poll",
        }
    }
}

/// Plan the ipc jobs.
pub fn plan(p: IpcParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(systems, |r| r.ipc.map(|run| run(p))))
}

/// A setup error of an `ipc` run.
pub(crate) fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("ipc", e)
}

/// Fork; the child runs `child` and `_exit`s. Returns the child's pid.
pub(crate) fn fork_child(child: impl FnOnce()) -> Result<libc::pid_t, BenchError> {
    // SAFETY: fork(2). The run's process is single-threaded (each run is
    // its own process), so no lock is held by a thread that does not exist
    // in the child; the child only uses memory allocated before the fork
    // and leaves with `_exit` (no destructors, no atexit handlers).
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(err(std::io::Error::last_os_error())),
        0 => {
            child();
            // SAFETY: terminating the child without running the parent's
            // destructors (which would unlink the parent's segments).
            unsafe { libc::_exit(0) }
        }
        pid => {
            // The closure owns the child's ends (e.g. a ring writer whose
            // drop would mark the ring closed and unlink it): they belong to
            // the child now, so the parent must not run their destructors.
            std::mem::forget(child);
            Ok(pid)
        }
    }
}

/// Wait for a child of [`fork_child`] to exit.
pub(crate) fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// Warm-up round trips before `n` measured ones.
pub(crate) fn warm(n: u64) -> u64 {
    (n / 10).clamp(10, 1000)
}
