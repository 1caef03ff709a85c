//! The benchmark scenarios of seeds 001, 002 and 004 (and the core library's
//! dispatch micro-benchmark), each runnable against several systems in the
//! same run.
//!
//! A scenario is planned into [`Job`]s (one per system and configuration);
//! the caller (the `myelin bench` command) runs them one after another, with
//! a progress bar, and collects one [`Outcome`] per job.

use std::time::Duration;

pub(crate) use crate::harness::Meter;
pub use crate::harness::{
    BenchError, Job, Outcome, STAMPED_HEADER, Stamped, now_ns, period_of, rate_label, size_label,
    sleep_until, warmup_for,
};

pub mod ddsperf;
pub mod dispatch;
pub mod fanout;
#[cfg(feature = "grpc")]
mod grpc;
#[cfg(feature = "iceoryx2")]
pub mod iceoryx2_peer;
pub mod image;
pub mod ipc;
#[cfg(feature = "zenoh")]
pub mod net;
pub mod pingpong;
pub mod raw;
pub mod relay;
pub mod relay_procs;
pub mod rpc;
pub mod shm_api;
#[cfg(feature = "zenoh")]
pub mod zenoh_peer;

/// The systems a scenario can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum System {
    /// myelin's intra-process path.
    Myelin,
    /// crossbeam channels: the in-process floor.
    Channel,
    /// The raw thread hand-off limits of this machine (spin and futex).
    Raw,
    /// zenoh 1.x peers over TCP loopback (feature `zenoh`).
    Zenoh,
    /// gRPC (tonic) over TCP loopback (feature `grpc`; `rpc` only).
    Grpc,
    /// iceoryx2 0.10 zero-copy IPC (feature `iceoryx2`; `ipc` only).
    Iceoryx2,
    /// CycloneDDS's `ddsperf` over UDP loopback (when installed;
    /// `pingpong` only).
    CycloneDds,
}

impl System {
    /// Every system this crate knows, in report order.
    pub const KNOWN: [System; 7] = [
        System::Myelin,
        System::Zenoh,
        System::Grpc,
        System::Iceoryx2,
        System::CycloneDds,
        System::Channel,
        System::Raw,
    ];

    /// The systems compiled into this build, in report order.
    pub fn all() -> Vec<System> {
        System::KNOWN
            .into_iter()
            .filter(|s| s.available())
            .collect()
    }

    /// Whether this build can measure the system.
    pub fn available(self) -> bool {
        match self {
            System::Zenoh => cfg!(feature = "zenoh"),
            System::Grpc => cfg!(feature = "grpc"),
            System::Iceoryx2 => cfg!(feature = "iceoryx2"),
            System::CycloneDds => ddsperf::available(),
            _ => true,
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            System::Myelin => "myelin",
            System::Channel => "channel",
            System::Raw => "raw",
            System::Zenoh => "zenoh",
            System::Grpc => "grpc",
            System::Iceoryx2 => "iceoryx2",
            System::CycloneDds => "cyclonedds",
        }
    }

    /// Parse a `--system` value.
    pub fn parse(s: &str) -> Result<System, BenchError> {
        let known = || System::KNOWN.map(|s| s.name()).join(", ");
        let sys = System::KNOWN
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| BenchError::InvalidArg {
                flag: "system",
                reason: format!("unknown system {s:?}; known: {}", known()),
            })?;
        if !sys.available() {
            let how = if sys == System::CycloneDds {
                "install ddsperf (Debian: apt-get install cyclonedds-tools)".to_string()
            } else {
                format!("enable the `{s}` feature")
            };
            return Err(BenchError::InvalidArg {
                flag: "system",
                reason: format!("{s:?} is not available in this build: {how}"),
            });
        }
        Ok(sys)
    }
}

/// The standard suite: every scenario at a modest size, every system.
/// `quick` shrinks counts for CI and smoke tests.
pub fn suite(quick: bool, systems: &[System]) -> Result<Vec<Job>, BenchError> {
    let mut jobs = dispatch::plan(
        dispatch::DispatchParams {
            samples: if quick { 100_000 } else { 200_000 },
        },
        systems,
    )?;
    for (rate, count, quick_count) in [(1000.0, 1000, 300), (100.0, 200, 60), (10.0, 30, 10)] {
        jobs.extend(relay::plan(
            relay::RelayParams {
                hops: 5,
                rate,
                count: if quick { quick_count } else { count },
                size: 64,
            },
            systems,
        )?);
    }
    jobs.extend(rpc::plan(
        relay::RelayParams {
            hops: 5,
            rate: 1000.0,
            count: if quick { 300 } else { 1000 },
            size: 64,
        },
        systems,
    )?);
    jobs.extend(fanout::plan(
        fanout::FanoutParams {
            rate: 100.0,
            duration: Duration::from_secs(if quick { 1 } else { 3 }),
            nodes: None,
        },
        systems,
    )?);
    jobs.extend(image::plan(
        image::ImageParams {
            rate: 30.0,
            frames: if quick { 20 } else { 60 },
        },
        systems,
    )?);
    Ok(jobs)
}
