//! The relay-chain per-hop latency measurement: Source => Relay_0 ..
//! Relay_{n-2} => Sink, one topic per hop. Per-hop latency = end-to-end
//! latency / hops.
//!
//! `--hops` counts message transfers (topics): `--hops 5` is Source, four
//! relays and Sink. Relays receive the message by value and publish it on,
//! so myelin moves it through the chain without a copy.
//!
//! `relay --processes` runs the chain with every relay its own process
//! ([`plan_processes`]), beside the two-process limits of this machine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::stats::LatencyRecorder;
use crate::harness::{
    BenchError, Job, STAMPED_HEADER, Stamped, now_ns, period_of, rate_label, size_label, warmup_for,
};
use crate::systems::{self, System};

/// Parameters of the relay chain.
#[derive(Debug, Clone, Copy)]
pub struct RelayParams {
    /// Message transfers from source to sink (1..=64).
    pub hops: u32,
    /// Source rate in Hz.
    pub rate: f64,
    /// Messages measured (a warm-up is added and excluded).
    pub count: u64,
    /// Message size in bytes (16 B .. 64 MiB).
    pub size: usize,
}

/// The largest message the benchmarks accept.
pub const MAX_SIZE: usize = 64 << 20;

impl RelayParams {
    /// Check the parameters; errors name the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        period_of(self.rate)?;
        if !(1..=64).contains(&self.hops) {
            return Err(BenchError::InvalidArg {
                flag: "hops",
                reason: format!("{}: must be 1 to 64", self.hops),
            });
        }
        if self.count == 0 {
            return Err(BenchError::InvalidArg {
                flag: "count",
                reason: "must be at least 1".into(),
            });
        }
        if !(STAMPED_HEADER..=MAX_SIZE).contains(&self.size) {
            return Err(BenchError::InvalidArg {
                flag: "size",
                reason: format!(
                    "{} bytes does not fit: must be {STAMPED_HEADER} (the timestamp header) to {MAX_SIZE}",
                    self.size
                ),
            });
        }
        Ok(())
    }

    /// The config of a run: `<arrangement> <rate> <size>`.
    pub(crate) fn config(&self, arrangement: &str) -> String {
        format!(
            "{arrangement} {} {}",
            rate_label(self.rate),
            size_label(self.size)
        )
    }

    /// Messages sent: the measured count and the warm-up.
    pub(crate) fn total(&self) -> u64 {
        self.count + warmup_for(self.count)
    }

    /// How long to wait for the last message before calling it lost.
    pub(crate) fn patience(&self) -> Duration {
        Duration::from_secs_f64(self.total() as f64 / self.rate * 1.5) + Duration::from_secs(10)
    }
}

/// Plan the relay jobs for the chosen systems.
pub fn plan(p: RelayParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(systems, |r| r.relay.map(|run| run(p))))
}

/// Plan `relay --processes`: the chain with every relay its own process
/// over shared memory, beside the two-process limits of this machine.
pub fn plan_processes(p: RelayParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(systems, |r| {
        r.relay_processes.map(|run| run(p))
    }))
}

/// Collects sink samples, dropping the warm-up.
pub(crate) struct Sink {
    warmup: u64,
    samples: Mutex<Vec<(u64, u64, u64)>>,
    received: AtomicU64,
}

impl Sink {
    /// A sink for the run of `p`.
    pub(crate) fn new(p: &RelayParams) -> Arc<Self> {
        Arc::new(Sink {
            warmup: warmup_for(p.count),
            samples: Mutex::new(Vec::with_capacity(p.total() as usize)),
            received: AtomicU64::new(0),
        })
    }

    /// A message reached the sink.
    pub(crate) fn on_message(&self, m: &Stamped) {
        self.on_stamp(m.seq, m.stamp_ns);
    }

    /// Message `seq`, stamped `stamp`, reached the sink.
    pub(crate) fn on_stamp(&self, seq: u64, stamp: u64) {
        let lat = now_ns().saturating_sub(stamp);
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((seq, stamp, lat));
        self.received.fetch_add(1, Ordering::Release);
    }

    /// Messages received so far.
    pub(crate) fn received(&self) -> u64 {
        self.received.load(Ordering::Acquire)
    }

    /// The samples after the warm-up, timed from `t0_ns`.
    pub(crate) fn recorder(&self, t0_ns: u64) -> LatencyRecorder {
        let mut rec = LatencyRecorder::with_time_series();
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        for &(seq, stamp, lat) in samples.iter() {
            if seq >= self.warmup {
                rec.record_at(stamp.saturating_sub(t0_ns) as f64 / 1e9, lat);
            }
        }
        rec
    }
}
