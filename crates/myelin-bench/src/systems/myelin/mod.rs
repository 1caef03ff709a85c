//! myelin, the system under test, in every scenario: its intra-process
//! path (dispatch, relay, rpc, fanout, image), its shared-memory transport
//! between processes (ipc, pingpong, `relay --processes`) and, with the
//! `zenoh` feature, its network transport (net, and the zenoh row of
//! pingpong). One file per scenario.

use myelin::Context;

use super::Runs;
use crate::harness::{BenchError, Job};
use crate::scenarios::ipc::IpcParams;
use crate::scenarios::pingpong::PingPongParams;

mod dispatch;
mod fanout;
mod image;
mod image_processes;
#[cfg(feature = "zenoh")]
mod net;
mod relay;
mod relay_processes;
mod rpc;
mod shm_api;
mod shm_ring;

pub(super) const RUNS: Runs = Runs {
    dispatch: Some(dispatch::jobs),
    relay: Some(relay::jobs),
    relay_processes: Some(relay_processes::jobs),
    rpc: Some(rpc::jobs),
    fanout: Some(fanout::jobs),
    image: Some(image::jobs),
    image_processes: Some(image_processes::jobs),
    ipc: Some(ipc_jobs),
    pingpong: Some(pingpong_jobs),
    #[cfg(feature = "zenoh")]
    net: Some(net::RING),
    roles: &[
        shm_api::PONG,
        relay_processes::RELAY,
        image_processes::VIEWER,
    ],
};

/// ipc: the API ping-pong in both wait modes, then the shared-memory ring
/// under it.
fn ipc_jobs(p: IpcParams) -> Vec<Job> {
    let mut jobs = shm_api::jobs("ipc", p.count, p.size);
    jobs.extend(shm_ring::jobs(p));
    jobs
}

/// pingpong: the API ping-pong over shared memory and, with the `zenoh`
/// feature, over the network transport.
fn pingpong_jobs(p: &PingPongParams, size: usize) -> Vec<Job> {
    #[allow(unused_mut)] // without `zenoh`, nothing is added
    let mut jobs = shm_api::jobs("pingpong", p.count, size);
    #[cfg(feature = "zenoh")]
    jobs.push(net::pingpong_job(p.count, size));
    jobs
}

/// A context for a run inside this process: shared memory, the network
/// and the signal handler off, so only the intra-process path is measured
/// (a zenoh router running on the host reaches none of it, and two
/// contexts of one job, as fan-out's paired graphs, do not hear each
/// other).
fn local_context() -> Result<Context, BenchError> {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .build()
        .map_err(|e| BenchError::setup("myelin", e))
}

/// An executor's anticipation figures, for a note of the image and
/// multi-process relay rows.
fn describe_anticipation(a: &myelin::Anticipated) -> String {
    let period = a.period.map_or("no steady period".to_string(), |p| {
        format!("period {p:.1?}")
    });
    format!(
        "{period}, {} bursts caught in the window, {} missed",
        a.caught, a.missed
    )
}
