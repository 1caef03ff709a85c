//! The raw limits of this machine: one-way hand-off latency between two
//! threads, by busy-spinning on an atomic and by a futex wake-up
//! (`thread::park`/`unpark`). Every cross-thread system is bounded below by
//! one of these.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::harness::stats::LatencyRecorder;
use crate::harness::{
    BenchError, Meter, Outcome, now_ns, period_of, rate_label, sleep_until, spin_until, warmup_for,
};

/// How the receiving thread waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handoff {
    /// Busy-spin on an atomic (burns a core; the latency floor).
    Spin,
    /// Sleep in the kernel and be woken (`park`/`unpark`, a futex).
    Futex,
    /// Busy-spin on an atomic, and the sender spins until each hand-off
    /// is due instead of sleeping: both ends warm and a core each, the
    /// floor of the low-latency mode (a busy-polling executor fed by a
    /// spinning camera thread).
    SpinBoth,
}

impl Handoff {
    /// Config name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Handoff::Spin => "spin-handoff",
            Handoff::Futex => "futex-handoff",
            Handoff::SpinBoth => "spin-both",
        }
    }
}

/// The receiving end of a hand-off: a thread that waits (as its
/// [`Handoff`] says) for each sequence number the sender hands over and
/// records the latency from the sender's stamp. Used by [`handoff`] and by
/// jobs that measure this floor alternately with a system's own path, in
/// one process (myelin's image `callback` job).
pub(crate) struct Receiver {
    mode: Handoff,
    /// SYNC: the sender stores the stamp (Relaxed) then the sequence
    /// (Release); the receiver loads the sequence (Acquire) then the stamp.
    stamp: Arc<AtomicU64>,
    seq: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    /// SYNC: the receiver stores the last sequence it handled (Release);
    /// the sender waits for it (Acquire) before the next hand-off, so none
    /// is overwritten unread.
    ack: Arc<AtomicU64>,
    /// `None` once [`finish`](Self::finish) or `drop` joined it.
    thread: Option<std::thread::JoinHandle<LatencyRecorder>>,
}

impl Receiver {
    /// A receiving thread expecting `total` hand-offs, the first `warmup`
    /// not recorded; its time series starts at `t0` ([`now_ns`]).
    pub(crate) fn start(mode: Handoff, total: u64, warmup: u64, t0: u64) -> Receiver {
        let stamp = Arc::new(AtomicU64::new(0));
        let seq = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let ack = Arc::new(AtomicU64::new(0));
        let (st, sq, dn, ak) = (stamp.clone(), seq.clone(), done.clone(), ack.clone());
        let thread = std::thread::spawn(move || {
            let mut rec = LatencyRecorder::with_time_series();
            let mut seen = 0u64;
            while seen < total {
                let s = loop {
                    let s = sq.load(Ordering::Acquire);
                    if s != seen {
                        break s;
                    }
                    if dn.load(Ordering::Acquire) {
                        // The sender stores its last sequence before
                        // `done`: read it again, or a last message that
                        // landed between the two loads would be counted
                        // lost.
                        break sq.load(Ordering::Acquire);
                    }
                    match mode {
                        Handoff::Spin | Handoff::SpinBoth => std::hint::spin_loop(),
                        Handoff::Futex => std::thread::park(),
                    }
                };
                if s == seen {
                    break; // done without a new message
                }
                let sent = st.load(Ordering::Relaxed);
                let lat = now_ns().saturating_sub(sent);
                seen = s;
                ak.store(seen, Ordering::Release);
                if seen > warmup {
                    rec.record_at(sent.saturating_sub(t0) as f64 / 1e9, lat);
                }
            }
            rec
        });
        Receiver {
            mode,
            stamp,
            seq,
            done,
            ack,
            thread: Some(thread),
        }
    }

    /// Hand over sequence number `i` (1, 2, ...): wait until `i - 1` was
    /// handled, stamp now, and wake the receiver if it sleeps.
    pub(crate) fn send(&self, i: u64) {
        while self.ack.load(Ordering::Acquire) < i - 1 {
            std::thread::yield_now();
        }
        self.stamp.store(now_ns(), Ordering::Relaxed);
        self.seq.store(i, Ordering::Release);
        if self.mode == Handoff::Futex
            && let Some(t) = &self.thread
        {
            t.thread().unpark();
        }
    }

    /// Stop the receiver; what it recorded.
    pub(crate) fn finish(mut self) -> Result<LatencyRecorder, BenchError> {
        self.stop()
            .ok_or_else(|| BenchError::setup("raw", "receiver thread panicked"))
    }

    /// Tell the thread it is done, wake it, and join it (once); `None` if
    /// it panicked or was joined before.
    fn stop(&mut self) -> Option<LatencyRecorder> {
        self.done.store(true, Ordering::Release);
        let t = self.thread.take()?;
        t.thread().unpark();
        t.join().ok()
    }
}

impl Drop for Receiver {
    /// A job that ends early (its own side failed between hand-offs)
    /// leaves no thread waiting, or spinning a core, for the rest of the
    /// run.
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Measure `count` one-way hand-offs paced at `rate` Hz.
pub(super) fn handoff(
    scenario: &str,
    mode: Handoff,
    rate: f64,
    count: u64,
) -> Result<Outcome, BenchError> {
    let period = period_of(rate)?;
    let warmup = warmup_for(count);
    let total = count + warmup;
    let receiver = Receiver::start(mode, total, warmup, now_ns());
    let meter = Meter::start();
    let start = Instant::now();
    for i in 1..=total {
        let due = start + period * i as u32;
        if mode == Handoff::SpinBoth {
            spin_until(due);
        } else {
            sleep_until(due);
        }
        receiver.send(i);
    }
    let rec = receiver.finish()?;
    let received = rec.count();
    Ok(meter.finish(
        scenario,
        "raw",
        format!("{} {}", mode.name(), rate_label(rate)),
        rec,
        total,
        count.saturating_sub(received),
        Some(1),
        vec![match mode {
            Handoff::SpinBoth => "one-way hand-off between two spinning threads (the sender spins until each is due); the floor of the low-latency mode".into(),
            _ => "one-way hand-off between two threads; the floor for cross-thread delivery".into(),
        }],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_dropped_unfinished_ends_its_thread() {
        for mode in [Handoff::Spin, Handoff::Futex] {
            let r = Receiver::start(mode, 10, 0, now_ns());
            r.send(1);
            // The thread holds its own reference to `done` while it runs.
            let done = r.done.clone();
            drop(r); // nine hand-offs short, as a job that failed midway
            assert_eq!(
                Arc::strong_count(&done),
                1,
                "{mode:?}: the receiving thread outlived its receiver"
            );
        }
    }
}
