//! The client/server chain, the request/response counterpart of the relay
//! chain: a source calls server_0, whose callback calls server_1, ... up to
//! server_{n-1}, which answers; the answers travel back down the chain.
//! Latency is the source's call, end to end; per hop = end-to-end / hops
//! (one hop = one request and its response).
//!
//! Same flags as `relay`. myelin runs it in four executor arrangements,
//! gRPC (feature `grpc`) as one tonic server per hop on loopback.

use super::peers_first;
use super::relay::RelayParams;
use crate::harness::{BenchError, Job};
use crate::systems::{self, System};

/// Plan the rpc jobs (myelin, and gRPC when compiled in).
pub fn plan(p: RelayParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(&peers_first(systems), |r| {
        r.rpc.map(|run| run(p))
    }))
}
