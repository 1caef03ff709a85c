//! zenoh (crate `zenoh` 1.x, TCP only) as a peer system (feature `zenoh`).
//!
//! In the relay chain and the fan-out, in the two arrangements that matter:
//! one session shared by every node (zenoh then calls subscribers inline in
//! the publisher's thread), and one session per node, as ROS 2 maps nodes
//! to participants. Those sessions are peers with multicast and gossip
//! scouting off, listening on explicit `127.0.0.1` ports and connected to
//! each other explicitly: nothing leaves the host and nothing is sent to
//! the LAN. In the `net` ring, raw zenoh with myelin's session
//! configuration (see [`net`]).

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use zenoh::qos::CongestionControl;
use zenoh::{Config, Session, Wait};

use super::Runs;
use crate::harness::{BenchError, now_ns};

mod fanout;
mod net;
mod relay;

pub(super) const RUNS: Runs = Runs {
    relay: Some(relay::jobs),
    fanout: Some(fanout::jobs),
    net: Some(net::RING),
    ..Runs::NONE
};

/// How zenoh sessions map to nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sessions {
    /// One session for all nodes.
    Shared,
    /// One session per node, connected over TCP loopback.
    PerNode,
}

impl Sessions {
    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            Sessions::Shared => "shared-session",
            Sessions::PerNode => "session-per-node",
        }
    }
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("zenoh", e)
}

fn free_port() -> Result<u16, BenchError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(err)?;
    Ok(l.local_addr().map_err(err)?.port())
}

/// A peer session listening on `127.0.0.1:port`, connected to `peers`.
fn open_peer(port: u16, peers: &[u16]) -> Result<Session, BenchError> {
    let mut c = Config::default();
    let set = |c: &mut Config, k: &str, v: String| {
        c.insert_json5(k, &v)
            .map_err(|e| err(format!("config {k}: {e}")))
    };
    set(&mut c, "mode", "\"peer\"".into())?;
    set(&mut c, "scouting/multicast/enabled", "false".into())?;
    set(&mut c, "scouting/gossip/enabled", "false".into())?;
    set(
        &mut c,
        "listen/endpoints",
        format!("[\"tcp/127.0.0.1:{port}\"]"),
    )?;
    let connect: Vec<String> = peers
        .iter()
        .map(|p| format!("\"tcp/127.0.0.1:{p}\""))
        .collect();
    set(
        &mut c,
        "connect/endpoints",
        format!("[{}]", connect.join(",")),
    )?;
    zenoh::open(c).wait().map_err(err)
}

/// `n` sessions: one shared (returned `n` times) or a full mesh of peers.
pub(crate) fn sessions(mode: Sessions, n: usize) -> Result<Vec<Session>, BenchError> {
    match mode {
        Sessions::Shared => {
            let s = open_peer(free_port()?, &[])?;
            Ok(vec![s; n])
        }
        Sessions::PerNode => {
            let mut ports = Vec::with_capacity(n);
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                let port = free_port()?;
                out.push(open_peer(port, &ports)?);
                ports.push(port);
            }
            // Wait until the mesh is complete.
            let deadline = Instant::now() + Duration::from_secs(20);
            for s in &out {
                while s.info().peers_zid().wait().count() < n - 1 {
                    if Instant::now() > deadline {
                        return Err(err(format!(
                            "peer mesh of {n} sessions did not form within 20 s"
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            Ok(out)
        }
    }
}

/// Encode a stamped message as zenoh payload bytes: stamp, seq, payload.
pub(crate) fn encode(stamp: u64, seq: u64, payload: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + payload);
    v.extend_from_slice(&stamp.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    v.resize(16 + payload, 0xA5);
    v
}

/// Decode (stamp, seq) from the head of a payload.
pub(crate) fn decode(bytes: &[u8]) -> Option<(u64, u64)> {
    let stamp = u64::from_le_bytes(bytes.get(0..8)?.try_into().ok()?);
    let seq = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    Some((stamp, seq))
}

/// Sequence number of the readiness probes (never measured).
pub(crate) const PROBE: u64 = u64::MAX;

/// Publish probes on `publisher` until `seen` turns true (the far end got
/// one), so measuring starts only once declarations have propagated.
pub(crate) fn wait_until_routed(
    publisher: &zenoh::pubsub::Publisher<'_>,
    seen: &AtomicBool,
    size: usize,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.load(Ordering::Acquire) {
        publisher
            .put(encode(now_ns(), PROBE, size))
            .wait()
            .map_err(err)?;
        if Instant::now() > deadline {
            return Err(err("subscriptions were not routed within 20 s"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Declare a reliable, express (no batching) publisher.
pub(crate) fn publisher(
    s: &Session,
    key: String,
) -> Result<zenoh::pubsub::Publisher<'static>, BenchError> {
    s.declare_publisher(key)
        .congestion_control(CongestionControl::Block)
        .express(true)
        .wait()
        .map_err(err)
}
