//! Two processes on one host: round trips between this process and a
//! forked echo process, one-way latency = round trip / 2.
//!
//! * `myelin-shm ring`: the shared-memory broadcast ring of `myelin-shm`
//!   (ping ring one way, pong ring back), blocking (futex in the segment)
//!   or polling, at a given message size;
//! * `raw`: the limits of this machine between two processes: a futex
//!   ping-pong and a busy-spin ping-pong on words of a shared mapping.
//!
//! The echo process is `fork`ed from the run's process (each benchmark run
//! is its own single-threaded process, see `myelin bench`), uses only memory
//! allocated before the fork, and leaves with `_exit`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use myelin_shm::{RingReader, RingWriter, SegmentName, TypeId};
use myelin_sync::SharedEvent;

use super::{BenchError, Job, Meter, Outcome, System, now_ns, size_label};
use crate::harness::stats::LatencyRecorder;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Block,
    Poll,
}

/// Plan the ipc jobs.
pub fn plan(p: IpcParams, systems: &[System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    let mut jobs = Vec::new();
    for s in systems {
        match s {
            System::Myelin => {
                jobs.extend(super::shm_api::jobs("ipc", p.count, p.size));
                for w in [Wait::Block, Wait::Poll] {
                    let label = if w == Wait::Block { "block" } else { "poll" };
                    jobs.push(Job::new(
                        format!("ipc/myelin/shm-ring {label} {}", size_label(p.size)),
                        move || ring(p, w),
                    ));
                }
            }
            System::Raw => {
                for w in [Wait::Block, Wait::Poll] {
                    let label = if w == Wait::Block { "futex" } else { "spin" };
                    jobs.push(Job::new(
                        format!("ipc/raw/{label}-pingpong 2 processes"),
                        move || raw(p, w),
                    ));
                }
            }
            System::Iceoryx2 =>
            {
                #[cfg(feature = "iceoryx2")]
                for w in super::shm_api::Wait::BOTH {
                    let size = p.size;
                    jobs.push(Job::new(
                        format!("ipc/iceoryx2/{} {}", w.label(), size_label(size)),
                        move || super::iceoryx2_peer::run(p.count, size, w),
                    ));
                }
            }
            System::Channel | System::Zenoh | System::Grpc | System::CycloneDds => {}
        }
    }
    Ok(jobs)
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("ipc", e)
}

/// Fork; the child runs `child` and `_exit`s. Returns the child's pid.
fn fork_child(child: impl FnOnce()) -> Result<libc::pid_t, BenchError> {
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

fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

fn warm(n: u64) -> u64 {
    (n / 10).clamp(10, 1000)
}

fn ring(p: IpcParams, wait: Wait) -> Result<Outcome, BenchError> {
    let tag = format!("ipc_{}_{}", std::process::id(), now_ns());
    let ty = TypeId {
        name: "myelin_bench/msg/Bytes".into(),
        hash: 1,
    };
    let ping_name = SegmentName::new(0, &format!("{tag}_ping")).map_err(err)?;
    let pong_name = SegmentName::new(0, &format!("{tag}_pong")).map_err(err)?;
    let slot = p.size.max(1) as u32;
    let mut ping_w = RingWriter::create(&ping_name, &ty, 4, slot).map_err(err)?;
    let mut pong_w = RingWriter::create(&pong_name, &ty, 4, slot).map_err(err)?;
    let mut ping_r = RingReader::open(&ping_name, &ty).map_err(err)?;
    let mut pong_r = RingReader::open(&pong_name, &ty).map_err(err)?;
    let total = p.count + warm(p.count);
    let mut child_buf = Vec::with_capacity(p.size.max(1));
    let pid = fork_child(move || {
        // Echo until the stop message (one byte 0xFF after `total` pings).
        for _ in 0..total {
            let got = match wait {
                Wait::Block => ping_r.recv_timeout(&mut child_buf, Duration::from_secs(30)),
                Wait::Poll => loop {
                    match ping_r.try_recv(&mut child_buf) {
                        Ok(None) => std::hint::spin_loop(),
                        other => break other,
                    }
                },
            };
            if !matches!(got, Ok(Some(_))) || pong_w.publish(&child_buf).is_err() {
                return;
            }
        }
    })?;
    let msg = vec![0x5Au8; p.size.max(1)];
    let mut buf = Vec::with_capacity(p.size.max(1));
    let mut rec = LatencyRecorder::with_time_series();
    let mut lost = 0;
    let meter = Meter::start();
    let t_start = now_ns();
    for i in 0..total {
        let t0 = now_ns();
        ping_w.publish(&msg).map_err(err)?;
        let got = match wait {
            Wait::Block => pong_r
                .recv_timeout(&mut buf, Duration::from_secs(30))
                .map_err(err)?,
            Wait::Poll => loop {
                if let Some(x) = pong_r.try_recv(&mut buf).map_err(err)? {
                    break Some(x);
                }
                std::hint::spin_loop();
            },
        };
        let t1 = now_ns();
        match got {
            Some(_) if i >= warm(p.count) => rec.record_at(
                t0.saturating_sub(t_start) as f64 / 1e9,
                t1.saturating_sub(t0) / 2,
            ),
            Some(_) => {}
            None => {
                lost += 1;
                break;
            }
        }
    }
    reap(pid);
    // The child's writer never ran its destructor: remove its segment.
    let _ = std::fs::remove_file(pong_name.path());
    let label = if wait == Wait::Block { "block" } else { "poll" };
    Ok(meter.finish(
        "ipc",
        "myelin",
        format!("shm-ring {label} {}", size_label(p.size)),
        rec,
        total * 2,
        lost,
        None,
        vec!["one way = round trip / 2 between two processes; the ring copies the message into and out of the segment".into()],
    ))
}

/// Four words in a shared anonymous mapping: ping and pong counters, and a
/// futex event for each direction.
struct SharedWords {
    base: *mut u32,
}

impl SharedWords {
    fn new() -> Result<Self, BenchError> {
        // SAFETY: an anonymous shared mapping of one page; checked for
        // failure below; it stays mapped for the rest of the process (the
        // run's process exits right after the run).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(err(std::io::Error::last_os_error()));
        }
        Ok(SharedWords {
            base: p as *mut u32,
        })
    }

    fn counter(&self, i: usize) -> &AtomicU32 {
        // SAFETY: words 0 and 1 of a zeroed, page-aligned, shared mapping
        // that lives as long as the process; accessed only atomically.
        unsafe { &*(self.base.add(i) as *const AtomicU32) }
    }

    fn event(&self, i: usize) -> &SharedEvent {
        // SAFETY: words 2-3 and 4-5 of the same mapping, 8-byte aligned
        // (page base + 8 or + 16), accessed only atomically by both
        // processes.
        unsafe { SharedEvent::from_words(self.base.add(2 + 2 * i)) }
    }
}

fn raw(p: IpcParams, wait: Wait) -> Result<Outcome, BenchError> {
    let words = SharedWords::new()?;
    let total = p.count + warm(p.count);
    let (ping, pong) = (words.counter(0), words.counter(1));
    let (ping_ev, pong_ev) = (words.event(0), words.event(1));
    let pid = fork_child(|| {
        for i in 1..=total as u32 {
            match wait {
                Wait::Block => {
                    ping_ev.wait_while(|| ping.load(Ordering::Acquire) < i, None);
                }
                Wait::Poll => {
                    while ping.load(Ordering::Acquire) < i {
                        std::hint::spin_loop();
                    }
                }
            }
            pong.store(i, Ordering::Release);
            if wait == Wait::Block {
                pong_ev.notify();
            }
        }
    })?;
    let mut rec = LatencyRecorder::with_time_series();
    let meter = Meter::start();
    let t_start = now_ns();
    for i in 1..=total as u32 {
        let t0 = now_ns();
        ping.store(i, Ordering::Release);
        match wait {
            Wait::Block => {
                ping_ev.notify();
                pong_ev.wait_while(|| pong.load(Ordering::Acquire) < i, None);
            }
            Wait::Poll => {
                while pong.load(Ordering::Acquire) < i {
                    std::hint::spin_loop();
                }
            }
        }
        let t1 = now_ns();
        if u64::from(i) > warm(p.count) {
            rec.record_at(
                t0.saturating_sub(t_start) as f64 / 1e9,
                t1.saturating_sub(t0) / 2,
            );
        }
    }
    reap(pid);
    let label = if wait == Wait::Block { "futex" } else { "spin" };
    Ok(meter.finish(
        "ipc",
        "raw",
        format!("{label}-pingpong 2 processes"),
        rec,
        total * 2,
        0,
        None,
        vec![
            "the limit of this machine for a cross-process wake-up (futex) or hand-off (spin)"
                .into(),
        ],
    ))
}
