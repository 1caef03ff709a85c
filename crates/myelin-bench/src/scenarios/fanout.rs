//! The 20 topics x 10 subscribers CPU-overhead measurement: 20 topics, each
//! with 1 publisher and 10 subscriptions, in one process on one executor
//! thread.
//!
//! * `nodes=10` (the measurement's `ros` configuration): node `k` publishes topics `2k` and
//!   `2k+1` from its own timer and subscribes to all 20 topics.
//! * `nodes=1` (`rosonenode`): one node, one timer publishing all 20 topics,
//!   200 subscriptions.
//! * `nopub`: 10 nodes with one timer each and no topics: what nodes and
//!   timers cost on their own. The timers share one wake-up per tick, and
//!   on a VM that wake-up is most of it: the kernel's sleep and wake cost
//!   40-48 us of CPU per tick on the reference VM, for one timer or ten
//!   (BENCHMARKS.md, "What an idle tick costs"), so `cpu/msg` (per timer
//!   callback) is mostly that divided by ten.
//! * `raw sleep` (the raw system): a thread that only sleeps until each
//!   tick; its `cpu/msg` is that wake-up divided by a tick's 200
//!   deliveries, the part of every row's CPU per message that is the
//!   machine's wake-up and not the library's work. Its latency column is
//!   how late each wake-up came.
//!
//! Reported: CPU% of the process, CPU time per delivered message, and
//! publish-to-callback latency. zenoh (feature `zenoh`) runs the 10-node
//! graph in a shared session and in a session per node.
//!
//! * `cold nodes=10` (myelin and zenoh's shared session): the 10-node graph
//!   without the 100 Hz sleep. Before each round the measuring thread reads
//!   [`COLD_SWEEP`] bytes, which evicts every cache line of the graph, as
//!   10 ms of other work (or of a VM's neighbours) does between two ticks;
//!   then each node's two topics are published and their 20 callbacks run
//!   (myelin: `spin_some` until idle, the order the executor keeps at
//!   100 Hz; zenoh: inside `put`). No timer and no wake-up are measured, so
//!   the machine's wake-up cost, which moves 2x between runs on a VM, is
//!   out of these rows: what is left is what each delivery costs on cold
//!   memory. `cpu/msg` is the rounds' time (one busy thread) per delivery,
//!   the sweeps excluded; `cpu%` is not measured.

use std::time::Duration;

use super::peers_first;
use crate::harness::{BenchError, Job, period_of};
use crate::systems::{self, System};

/// Topics in the experiment.
pub const TOPICS: usize = 20;
/// Subscriptions per topic.
pub const SUBS_PER_TOPIC: usize = 10;

/// Bytes read between two rounds of the cold rows: twice a 32 MiB
/// last-level cache.
pub const COLD_SWEEP: usize = 64 << 20;

/// Rounds of the cold rows: 50 per second of `--duration` (each round
/// sweeps [`COLD_SWEEP`] bytes first: a few milliseconds), 20 to 1,000.
pub fn cold_rounds(p: &FanoutParams) -> u64 {
    (p.duration.as_secs_f64() * 50.0).clamp(20.0, 1000.0) as u64
}

/// The memory a cold row reads between rounds: written once, so that its
/// pages are real (a fresh allocation reads the kernel's one zero page).
pub(crate) fn cold_sweep_buffer() -> Vec<u8> {
    (0..COLD_SWEEP).map(|i| i as u8).collect()
}

/// Read a line in every 64 bytes of `buf`: every line read before is gone
/// from the caches (see the module docs).
pub(crate) fn sweep(buf: &[u8]) {
    let mut acc = 0u8;
    for i in (0..buf.len()).step_by(64) {
        acc = acc.wrapping_add(buf[i]);
    }
    std::hint::black_box(acc);
}

/// A cold row's figures: the rounds' time per delivery in the CPU
/// column (one busy thread), `cpu%` not measured.
pub(crate) fn cold_cpu(
    record: &mut crate::harness::report::Record,
    rounds_ns: u64,
    deliveries: u64,
) {
    record.cpu_percent = 0.0;
    record.cpu_ns_per_msg = rounds_ns as f64 / deliveries.max(1) as f64;
}

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct FanoutParams {
    /// Publish rate per topic, Hz.
    pub rate: f64,
    /// How long to run.
    pub duration: Duration,
    /// 1 or 10 nodes; `None` runs both.
    pub nodes: Option<usize>,
}

impl FanoutParams {
    /// Check the parameters; errors name the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        period_of(self.rate)?;
        if self.duration < Duration::from_millis(100) {
            return Err(BenchError::InvalidArg {
                flag: "duration",
                reason: format!("{:?}: must be at least 100 ms", self.duration),
            });
        }
        if let Some(n) = self.nodes
            && n != 1
            && n != 10
        {
            return Err(BenchError::InvalidArg {
                flag: "nodes",
                reason: format!("{n}: the experiment is defined for 1 or 10 nodes"),
            });
        }
        Ok(())
    }
}

/// Plan the fan-out jobs (myelin, the raw wake-up floor, and zenoh when
/// compiled in).
pub fn plan(p: FanoutParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(&peers_first(systems), |r| {
        r.fanout.map(|run| run(p))
    }))
}
