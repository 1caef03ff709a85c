//! The experiments, each runnable against several systems in the same run:
//!
//! - [`dispatch`]: the core library's same-thread publish-to-callback cost
//!   (64 B by value, a 1440x1080 frame shared; 0 and 200 idle
//!   subscriptions).
//! - [`relay`]: the relay-chain per-hop latency measurement (Source =>
//!   Relay_0..n => Sink), in one process or with every relay its own process.
//! - [`rpc`]: the client/server chain (a source calls server_0, which calls
//!   server_1, ...).
//! - [`fanout`]: the 20 topics x 10 subscribers CPU-overhead measurement.
//! - [`image`]: the image pipeline (1440x1080 and 320x240 RGB at 30 Hz).
//! - [`ipc`]: round trips between two processes on one host.
//! - [`pingpong`]: the ddsperf-style ping-pong between two processes.
//! - `net` (feature `zenoh`): the network transport across processes,
//!   through a zenoh router on loopback.
//! - [`scale`]: many idle processes (CPU, memory and shared memory per
//!   process, a late joiner's discovery time), shared memory beside zenoh.
//!
//! A scenario validates its parameters and defines what every system's run
//! shares (message sizes, sinks, frame pools), then asks each chosen system
//! of the registry ([`crate::systems`]) for its [`Job`]s; the caller (the
//! `myelin bench` command) runs them one after another, with a progress
//! bar, and collects one [`Outcome`](crate::harness::Outcome) per job.

use std::time::Duration;

use crate::harness::{BenchError, Job};
use crate::systems::System;

pub mod dispatch;
pub mod fanout;
/// `myelin bench icount` (the myelin-icount crate).
pub use myelin_icount as icount;
pub mod image;
pub mod ipc;
#[cfg(feature = "zenoh")]
pub mod late_joiner;
#[cfg(feature = "zenoh")]
pub mod net;
pub mod pingpong;
pub mod relay;
pub mod rpc;
pub mod scale;

/// `systems` with myelin after its peers: the fan-out and client/server
/// tables list the peer's rows before myelin's (as BENCHMARKS.md shows
/// them), whatever the order of `--system`.
fn peers_first<'a>(systems: &[&'a System]) -> Vec<&'a System> {
    let (mine, peers): (Vec<&System>, Vec<&System>) =
        systems.iter().copied().partition(|s| s.name == "myelin");
    peers.into_iter().chain(mine).collect()
}

/// The standard suite: every scenario at a modest size, every system.
/// `quick` shrinks counts for CI and smoke tests.
pub fn suite(quick: bool, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
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
            fifo: None,
        },
        systems,
    )?);
    Ok(jobs)
}
