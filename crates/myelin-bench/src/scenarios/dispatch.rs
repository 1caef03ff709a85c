//! The core library's dispatch micro-benchmark: on one thread, publish a
//! message and run the executor (`spin_some`); latency is publish call to
//! callback entry. Measures what myelin's intra-process path costs per
//! message, with 0 and with 200 idle subscriptions on the same executor
//! (dispatch must not grow with idle entities), for a 64 B value and for a
//! 1440x1080 RGB frame published shared (no copy, so size must not matter).
//! Baselines in the same run: a crossbeam-channel send + recv on one thread,
//! and two back-to-back clock reads (the floor of any timestamped sample).
//!
//! The `64B loop` rows time 1000 hops (`LOOP`) in a row and record their mean:
//! no clock read per hop, so differences of a few nanoseconds show (this
//! VM's clock moves in 10 ns steps, which the P50 of single hops cannot
//! resolve). The `64B loop idle=200` row is measured in the same job as
//! `64B loop`, the two alternating (`looped_pair`): the idle goal's
//! ratio is then not the VM's drift between two jobs.

use crate::harness::{BenchError, Job};
use crate::systems::{self, System};

/// 1440 x 1080 x 3 bytes.
pub const FRAME_1440X1080: usize = 1440 * 1080 * 3;

/// A 64-byte message held by value.
#[derive(Clone, Copy, Debug, myelin::Message)]
#[message(name = "myelin_bench/msg/Msg64")]
pub struct Msg64 {
    /// Publish time.
    pub stamp_ns: u64,
    /// Padding to 64 bytes.
    pub pad: [u64; 7],
}

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct DispatchParams {
    /// Samples per configuration (at least 1000).
    pub samples: u64,
}

impl DispatchParams {
    /// Check the parameters.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.samples < 1000 {
            return Err(BenchError::InvalidArg {
                flag: "count",
                reason: format!("{}: dispatch needs at least 1000 samples", self.samples),
            });
        }
        Ok(())
    }
}

/// Plan the dispatch jobs.
pub fn plan(p: DispatchParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(systems, |r| r.dispatch.map(|run| run(p))))
}

/// Hops per sample of a `64B loop` row.
pub(crate) const LOOP: u64 = 1000;

/// Time `hop(i)` in runs of [`LOOP`]; one sample per run, its mean per
/// hop in ns: `n / LOOP` samples (at least 20) after a few warm-up runs.
pub(crate) fn looped(
    n: u64,
    mut hop: impl FnMut(u64) -> Result<(), BenchError>,
) -> Result<(crate::harness::stats::LatencyRecorder, u64), BenchError> {
    let (warm_runs, runs) = loop_runs(n);
    let mut rec = crate::harness::stats::LatencyRecorder::new();
    let mut i = 0;
    for r in 0..warm_runs + runs {
        let mean = timed_run(&mut hop, &mut i)?;
        if r >= warm_runs {
            rec.record(mean);
        }
    }
    Ok((rec, i))
}

/// [`looped`] for two set-ups compared in a goal, alternating runs of
/// [`LOOP`] hops between them (which goes first alternates too): how fast
/// this VM runs a hop moves by ±20% from one process to the next, and
/// within a process from one stretch of seconds to the next, so two rows
/// measured one after the other differ by more than the goal tolerates.
/// Returns each side's recorder and hop count.
pub(crate) fn looped_pair(
    n: u64,
    mut a: impl FnMut(u64) -> Result<(), BenchError>,
    mut b: impl FnMut(u64) -> Result<(), BenchError>,
) -> Result<[(crate::harness::stats::LatencyRecorder, u64); 2], BenchError> {
    let (warm_runs, runs) = loop_runs(n);
    let mut out = [
        (crate::harness::stats::LatencyRecorder::new(), 0),
        (crate::harness::stats::LatencyRecorder::new(), 0),
    ];
    for r in 0..warm_runs + runs {
        for side in [r % 2, 1 - r % 2] {
            let (rec, i) = &mut out[side as usize];
            let mean = if side == 0 {
                timed_run(&mut a, i)?
            } else {
                timed_run(&mut b, i)?
            };
            if r >= warm_runs {
                rec.record(mean);
            }
        }
    }
    Ok(out)
}

/// Warm-up runs and measured runs of a looped row of `n` samples.
fn loop_runs(n: u64) -> (u64, u64) {
    let runs = (n / LOOP).max(20);
    ((runs / 20).max(2), runs)
}

/// One run of [`LOOP`] hops from hop `*i` on: its mean per hop in ns.
#[inline]
fn timed_run(
    hop: &mut impl FnMut(u64) -> Result<(), BenchError>,
    i: &mut u64,
) -> Result<u64, BenchError> {
    let t0 = std::time::Instant::now();
    for _ in 0..LOOP {
        hop(*i)?;
        *i += 1;
    }
    Ok(t0.elapsed().as_nanos() as u64 / LOOP)
}

/// Warm-up samples before `n` measured ones.
pub(crate) fn warm(n: u64) -> u64 {
    (n / 20).max(100)
}
