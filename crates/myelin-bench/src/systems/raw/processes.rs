//! The limits of this machine between processes: a futex ping-pong and a
//! busy-spin ping-pong on words of a shared mapping with a forked echo
//! process, and a futex chain through forked relay processes at a paced
//! rate (the floor of `relay --processes`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use myelin_sync::SharedEvent;

use crate::harness::stats::LatencyRecorder;
use crate::harness::{
    BenchError, Meter, Outcome, now_ns, period_of, rate_label, sleep_until, warmup_for,
};
use crate::scenarios::ipc::{IpcParams, Wait, err, fork_child, reap, warm};
use crate::scenarios::relay::RelayParams;

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

/// The most hops [`chain`] lays out in its page (the relay chain's limit).
const CHAIN_HOPS: usize = 64;

/// The chain's page: a sequence counter (words 0..64) and a futex event
/// (words 64..192, two each) per hop, and the source's send stamp (bytes
/// 1024..1032).
struct ChainWords(SharedWords);

// SAFETY: the page lives for the rest of the process and every access to
// it goes through atomics (`counter`, `event`, `stamp`), so threads may
// share it as processes do.
unsafe impl Sync for ChainWords {}

impl ChainWords {
    fn counter(&self, hop: usize) -> &AtomicU32 {
        assert!(hop < CHAIN_HOPS);
        // SAFETY: word `hop` < 64 of the zeroed shared page (see
        // `SharedWords`), accessed only atomically.
        unsafe { &*(self.0.base.add(hop) as *const AtomicU32) }
    }

    fn event(&self, hop: usize) -> &SharedEvent {
        assert!(hop < CHAIN_HOPS);
        // SAFETY: words 64 + 2 * hop and the next (< 192) of the same page,
        // 8-byte aligned, accessed only atomically by every process.
        unsafe { SharedEvent::from_words(self.0.base.add(CHAIN_HOPS + 2 * hop)) }
    }

    fn stamp(&self) -> &AtomicU64 {
        // SAFETY: bytes 1024..1032 of the same page (8-byte aligned),
        // accessed only atomically.
        unsafe { &*(self.0.base.add(256) as *const AtomicU64) }
    }
}

/// `relay --processes`' floor: the source (this process) paces a sequence
/// number at `p.rate` through `p.hops - 1` forked relay processes to a sink
/// thread of this process, every hop a futex wake-up of a process asleep
/// since the last message, as a myelin hop with blocking executors is.
pub(super) fn chain(p: RelayParams) -> Result<Outcome, BenchError> {
    let hops = p.hops as usize;
    if hops > CHAIN_HOPS {
        return Err(err(format!("at most {CHAIN_HOPS} hops")));
    }
    let words = ChainWords(SharedWords::new()?);
    let warmup = warmup_for(p.count);
    let total = p.count + warmup;
    let period = period_of(p.rate)?;
    // A relay whose source is gone leaves after this long without a message.
    let patience = period + Duration::from_secs(10);
    // Fork every relay before the sink thread starts: `fork_child` needs a
    // single-threaded process.
    let mut pids = Vec::with_capacity(hops - 1);
    for i in 0..hops - 1 {
        let w = &words;
        pids.push(fork_child(move || {
            for k in 1..=total as u32 {
                let out = w.event(i).wait_while(
                    || w.counter(i).load(Ordering::Acquire) < k,
                    Some(Instant::now() + patience),
                );
                if !out.is_ready() {
                    return;
                }
                w.counter(i + 1).store(k, Ordering::Release);
                w.event(i + 1).notify();
            }
        })?);
    }
    let meter = Meter::start();
    let t0 = now_ns();
    let (recorder, received) = std::thread::scope(|s| {
        let w = &words;
        let sink = s.spawn(move || {
            let mut rec = LatencyRecorder::with_time_series();
            let mut got = 0u64;
            for k in 1..=total as u32 {
                let out = w.event(hops - 1).wait_while(
                    || w.counter(hops - 1).load(Ordering::Acquire) < k,
                    Some(Instant::now() + patience),
                );
                if !out.is_ready() {
                    break;
                }
                got += 1;
                let sent = w.stamp().load(Ordering::Acquire);
                if u64::from(k) > warmup {
                    rec.record_at(
                        sent.saturating_sub(t0) as f64 / 1e9,
                        now_ns().saturating_sub(sent),
                    );
                }
            }
            (rec, got)
        });
        let start = Instant::now();
        for k in 1..=total as u32 {
            sleep_until(start + period * k);
            // One message in the chain at a time (at robot rates the last
            // one left long ago): its stamp is the only one.
            while w.counter(hops - 1).load(Ordering::Acquire) < k - 1 && !sink.is_finished() {
                std::thread::yield_now();
            }
            w.stamp().store(now_ns(), Ordering::Release);
            w.counter(0).store(k, Ordering::Release);
            w.event(0).notify();
        }
        sink.join()
    })
    .map_err(|_| err("the chain's sink thread panicked"))?;
    for pid in pids {
        reap(pid);
    }
    Ok(meter.finish(
        "relay",
        "raw",
        format!("futex-chain {} 64B", rate_label(p.rate)),
        recorder,
        received * u64::from(p.hops),
        total.saturating_sub(received),
        Some(p.hops),
        vec![format!(
            "the floor of a chain of processes at this rate: {} relay processes, each asleep on a futex until its message, waking the next",
            hops - 1
        )],
    ))
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
