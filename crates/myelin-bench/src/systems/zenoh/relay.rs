//! zenoh in the relay chain: a session per node or one shared, relays
//! forwarding the payload as is (reference counted, no copy).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use zenoh::Wait;

use super::{self as zp, Sessions};
use crate::harness::{
    BenchError, Job, Meter, Outcome, STAMPED_HEADER, now_ns, period_of, sleep_until,
};
use crate::scenarios::relay::{RelayParams, Sink};

/// The jobs: one per session arrangement.
pub(super) fn jobs(p: RelayParams) -> Vec<Job> {
    [Sessions::Shared, Sessions::PerNode]
        .into_iter()
        .map(|mode| {
            Job::new(
                format!("relay/zenoh/{}", p.config(mode.name())),
                move || chain(p, mode),
            )
        })
        .collect()
}

fn chain(p: RelayParams, mode: Sessions) -> Result<Outcome, BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::setup("zenoh", e);
    let hops = p.hops as usize;
    let total = p.total();
    let payload = p.size - STAMPED_HEADER;
    // Session 0 is the source, 1..hops-1 the relays, `hops` the sink.
    let sessions = zp::sessions(mode, hops + 1)?;
    let key = |i: usize| format!("myelin_bench/relay/hop_{i}");
    let sink = Sink::new(&p);
    let probe_seen = Arc::new(AtomicBool::new(false));
    let (s, ps) = (sink.clone(), probe_seen.clone());
    let mut keep = Vec::new();
    keep.push(
        sessions[hops]
            .declare_subscriber(key(hops - 1))
            .callback(move |sample| {
                if let Some((stamp, seq)) = zp::decode(&sample.payload().to_bytes()) {
                    if seq == zp::PROBE {
                        ps.store(true, Ordering::Release);
                    } else {
                        s.on_stamp(seq, stamp);
                    }
                }
            })
            .wait()
            .map_err(|e| err(&e))?,
    );
    for i in 0..hops - 1 {
        let out = zp::publisher(&sessions[i + 1], key(i + 1))?;
        keep.push(
            sessions[i + 1]
                .declare_subscriber(key(i))
                .callback(move |sample| {
                    // Forward the payload as is (reference counted, no copy).
                    let _ = out.put(sample.payload().clone()).wait();
                })
                .wait()
                .map_err(|e| err(&e))?,
        );
    }
    let source = zp::publisher(&sessions[0], key(0))?;
    zp::wait_until_routed(&source, &probe_seen, payload)?;

    let meter = Meter::start();
    let t0 = now_ns();
    let period = period_of(p.rate)?;
    let start = Instant::now();
    for seq in 0..total {
        sleep_until(start + period * (seq as u32 + 1));
        let bytes = zp::encode(now_ns(), seq, payload);
        source.put(bytes).wait().map_err(|e| err(&e))?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while sink.received() < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let received = sink.received();
    let outcome = meter.finish(
        "relay",
        "zenoh",
        p.config(mode.name()),
        sink.recorder(t0),
        received * u64::from(p.hops),
        total.saturating_sub(received),
        Some(p.hops),
        vec!["zenoh peers, TCP on 127.0.0.1, scouting off; relays forward the payload".into()],
    );
    drop(keep);
    drop(sessions);
    Ok(outcome)
}
