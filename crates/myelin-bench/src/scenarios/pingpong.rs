//! `myelin bench pingpong`: the ddsperf-style ping-pong between two
//! processes, one way = round trip / 2: myelin (shared memory, blocking and
//! polling, loaned messages) beside myelin over zenoh (shared memory off,
//! through a loopback router), and CycloneDDS's `ddsperf` over UDP loopback
//! when it is installed, at 64 B, 4 KiB, 1 MiB and 4,665,600 B (a
//! 1440x1080 RGB frame) or `--size`.

use crate::harness::{BenchError, Job};
use crate::systems::{self, System};

/// Parameters.
#[derive(Debug, Clone)]
pub struct PingPongParams {
    /// Round trips per myelin run.
    pub count: u64,
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Seconds per ddsperf run.
    pub ddsperf_secs: u32,
}

/// Plan the jobs: per size, every system.
pub fn plan(p: PingPongParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    if p.count == 0 {
        return Err(BenchError::InvalidArg {
            flag: "count",
            reason: "must be at least 1".into(),
        });
    }
    let mut jobs = Vec::new();
    for &size in &p.sizes {
        if !(1..=8 << 20).contains(&size) {
            return Err(BenchError::InvalidArg {
                flag: "size",
                reason: format!("{size} bytes: must be 1 to 8388608"),
            });
        }
        jobs.extend(systems::jobs_of(systems, |r| {
            r.pingpong.map(|run| run(&p, size))
        }));
    }
    Ok(jobs)
}
