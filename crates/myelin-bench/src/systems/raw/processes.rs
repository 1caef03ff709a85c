//! The limits of this machine between two processes: a futex ping-pong
//! and a busy-spin ping-pong on words of a shared mapping with a forked
//! echo process.

use std::sync::atomic::{AtomicU32, Ordering};

use myelin_sync::SharedEvent;

use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Meter, Outcome, now_ns};
use crate::scenarios::ipc::{IpcParams, Wait, err, fork_child, reap, warm};

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

pub(super) fn pingpong(p: IpcParams, wait: Wait) -> Result<Outcome, BenchError> {
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
