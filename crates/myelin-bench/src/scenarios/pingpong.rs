//! `myelin bench pingpong`: seed 003's ping-pong between two processes,
//! myelin (shared memory, blocking and polling, loaned messages) beside
//! myelin over zenoh (shared memory off, through a loopback router), and
//! CycloneDDS's `ddsperf` over UDP loopback when it is installed, at the
//! issue's sizes (64 B, 4 KiB, 1 MiB, 4,665,600 B) or `--size`.

use super::{BenchError, Job, System, size_label};

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

/// Plan the jobs.
pub fn plan(p: PingPongParams, systems: &[System]) -> Result<Vec<Job>, BenchError> {
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
        for s in systems {
            match s {
                System::Myelin => {
                    jobs.extend(super::shm_api::jobs("pingpong", p.count, size));
                    #[cfg(feature = "zenoh")]
                    jobs.push(super::net::pingpong_job(p.count, size));
                }
                System::CycloneDds => {
                    let secs = p.ddsperf_secs;
                    jobs.push(Job::new(
                        format!("pingpong/cyclonedds/ddsperf {}", size_label(size)),
                        move || super::ddsperf::run(size, secs),
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(jobs)
}
