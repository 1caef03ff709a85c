//! zenoh in the 20 topics x 10 subscribers CPU-overhead measurement: the
//! 10-node graph in a shared session and in a session per node, published
//! from one paced thread; and in a shared session on cold memory (`cold
//! nodes=10`, see the scenario).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zenoh::Wait;

use super::{self as zp, Sessions};
use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns, period_of, rate_label, sleep_until};
use crate::scenarios::fanout::{
    FanoutParams, SUBS_PER_TOPIC, TOPICS, cold_cpu, cold_rounds, cold_sweep_buffer, sweep,
};

/// The jobs: one per session arrangement, 10 nodes; the shared session on
/// cold memory.
pub(super) fn jobs(p: FanoutParams) -> Vec<Job> {
    let mut jobs: Vec<Job> = [Sessions::Shared, Sessions::PerNode]
        .into_iter()
        .map(|mode| {
            Job::new(
                format!(
                    "fanout/zenoh/{} nodes=10 {}",
                    mode.name(),
                    rate_label(p.rate)
                ),
                move || fanout(p, mode, false),
            )
        })
        .collect();
    jobs.push(Job::new(
        format!("fanout/zenoh/{} cold nodes=10", Sessions::Shared.name()),
        move || fanout(p, Sessions::Shared, true),
    ));
    jobs
}

/// `cold`: rounds on cold memory instead of ticks at `p.rate`.
fn fanout(p: FanoutParams, mode: Sessions, cold: bool) -> Result<Outcome, BenchError> {
    const NODES: usize = 10;
    let err = |e: &dyn std::fmt::Display| BenchError::setup("zenoh", e);
    let sessions = zp::sessions(mode, NODES)?;
    let rec = Arc::new(Mutex::new(LatencyRecorder::new()));
    let delivered = Arc::new(AtomicU64::new(0));
    // Ticks below `measure_from` are routing probes and are not counted.
    let measure_from = Arc::new(AtomicU64::new(u64::MAX));
    let ready: Arc<Vec<std::sync::atomic::AtomicBool>> = Arc::new(
        (0..TOPICS * SUBS_PER_TOPIC)
            .map(|_| Default::default())
            .collect(),
    );
    let mut keep = Vec::new();
    for t in 0..TOPICS {
        for s in 0..SUBS_PER_TOPIC {
            let (r, d, m, rd) = (
                rec.clone(),
                delivered.clone(),
                measure_from.clone(),
                ready.clone(),
            );
            let idx = t * SUBS_PER_TOPIC + s;
            keep.push(
                sessions[s % NODES]
                    .declare_subscriber(format!("myelin_bench/fanout/topic_{t}"))
                    .callback(move |sample| {
                        if let Some((stamp, tick)) = zp::decode(&sample.payload().to_bytes()) {
                            rd[idx].store(true, Ordering::Relaxed);
                            if tick >= m.load(Ordering::Acquire) {
                                let lat = now_ns().saturating_sub(stamp);
                                r.lock().unwrap_or_else(|e| e.into_inner()).record(lat);
                                d.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    })
                    .wait()
                    .map_err(|e| err(&e))?,
            );
        }
    }
    let pubs: Vec<_> = (0..TOPICS)
        .map(|t| {
            zp::publisher(
                &sessions[t / (TOPICS / NODES)],
                format!("myelin_bench/fanout/topic_{t}"),
            )
        })
        .collect::<Result<_, _>>()?;
    // Routing: probe until every subscription has seen a message.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut tick = 0u64;
    while ready.iter().any(|r| !r.load(Ordering::Relaxed)) {
        for pb in &pubs {
            pb.put(zp::encode(now_ns(), tick, 0))
                .wait()
                .map_err(|e| err(&e))?;
        }
        tick += 1;
        if std::time::Instant::now() > deadline {
            return Err(err(&"fan-out subscriptions were not routed within 20 s"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let first = tick + 1;
    measure_from.store(first, Ordering::Release);
    let period = period_of(p.rate)?;
    let ticks = if cold {
        cold_rounds(&p)
    } else {
        (p.duration.as_secs_f64() * p.rate).round().max(1.0) as u64
    };
    let buf = if cold {
        cold_sweep_buffer()
    } else {
        Vec::new()
    };
    let mut rounds_ns = 0;
    let meter = Meter::start();
    let start = std::time::Instant::now();
    for k in 0..ticks {
        if cold {
            sweep(&buf);
        } else {
            sleep_until(start + period * (k as u32 + 1));
        }
        let t0 = std::time::Instant::now();
        for pb in &pubs {
            pb.put(zp::encode(now_ns(), first + k, 0))
                .wait()
                .map_err(|e| err(&e))?;
        }
        rounds_ns += t0.elapsed().as_nanos() as u64;
    }
    let expected = ticks * (TOPICS * SUBS_PER_TOPIC) as u64;
    let drain = std::time::Instant::now() + Duration::from_secs(5);
    while delivered.load(Ordering::Relaxed) < expected && std::time::Instant::now() < drain {
        std::thread::sleep(Duration::from_millis(2));
    }
    let got = delivered.load(Ordering::Relaxed);
    let rec = std::mem::take(&mut *rec.lock().unwrap_or_else(|e| e.into_inner()));
    let config = if cold {
        format!("{} cold nodes=10", mode.name())
    } else {
        format!("{} nodes=10 {}", mode.name(), rate_label(p.rate))
    };
    let note = if cold {
        format!(
            "{ticks} rounds on cold memory (caches swept before each); cpu/msg: the rounds' time per delivery (callbacks run inside put)"
        )
    } else {
        format!(
            "{TOPICS} topics x (1 publisher, {SUBS_PER_TOPIC} subscriptions); publisher thread paced"
        )
    };
    let mut outcome = meter.finish(
        "fanout",
        "zenoh",
        config,
        rec,
        got,
        expected.saturating_sub(got),
        None,
        vec![note],
    );
    if cold {
        cold_cpu(&mut outcome.record, rounds_ns, got);
    }
    drop(keep);
    drop(pubs);
    drop(sessions);
    Ok(outcome)
}
