//! Seed 001's CPU-overhead experiment: 20 topics, each with 1 publisher and
//! 10 subscriptions, in one process on one executor thread.
//!
//! * `nodes=10` (seed 001's `ros`): node `k` publishes topics `2k` and
//!   `2k+1` from its own timer and subscribes to all 20 topics.
//! * `nodes=1` (`rosonenode`): one node, one timer publishing all 20 topics,
//!   200 subscriptions.
//! * `nopub`: 10 nodes with one timer each and no topics: what nodes and
//!   timers cost on their own.
//!
//! Reported: CPU% of the process, CPU time per delivered message, and
//! publish-to-callback latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use myelin::prelude::*;

use super::{BenchError, Job, Meter, Outcome, System, now_ns, period_of, rate_label};
use crate::harness::stats::LatencyRecorder;

/// Topics in the experiment.
pub const TOPICS: usize = 20;
/// Subscriptions per topic.
pub const SUBS_PER_TOPIC: usize = 10;

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

/// Plan the fan-out jobs (myelin, and zenoh when compiled in).
pub fn plan(p: FanoutParams, systems: &[System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    let mut jobs = Vec::new();
    #[cfg(feature = "zenoh")]
    if systems.contains(&System::Zenoh) {
        for mode in [
            super::zenoh_peer::Sessions::Shared,
            super::zenoh_peer::Sessions::PerNode,
        ] {
            jobs.push(Job::new(
                format!(
                    "fanout/zenoh/{} nodes=10 {}",
                    mode.name(),
                    rate_label(p.rate)
                ),
                move || zenoh_fanout(p, mode),
            ));
        }
    }
    if systems.contains(&System::Myelin) {
        let node_counts: Vec<usize> = match p.nodes {
            Some(n) => vec![n],
            None => vec![1, 10],
        };
        for n in node_counts {
            jobs.push(Job::new(
                format!("fanout/myelin/nodes={n} {}", rate_label(p.rate)),
                move || myelin_fanout(p, n, false),
            ));
        }
        jobs.push(Job::new(
            format!("fanout/myelin/inline nodes=10 {}", rate_label(p.rate)),
            move || myelin_fanout(p, 10, true),
        ));
        jobs.push(Job::new(
            format!("fanout/myelin/nopub {}", rate_label(p.rate)),
            move || myelin_nopub(p),
        ));
    }
    Ok(jobs)
}

fn myelin_fanout(p: FanoutParams, nodes: usize, inline: bool) -> Result<Outcome, BenchError> {
    let opts = if inline {
        SubscriptionOptions::inline()
    } else {
        SubscriptionOptions::default()
    };
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .map_err(|e| setup(&e))?;
    let rec = Arc::new(Mutex::new(LatencyRecorder::new()));
    let delivered = Arc::new(AtomicU64::new(0));
    let published = Arc::new(AtomicU64::new(0));
    let node_list: Vec<Node> = (0..nodes)
        .map(|k| ctx.create_node(&format!("node_{k}")))
        .collect::<Result<_, _>>()
        .map_err(|e| setup(&e))?;
    let mut subs = Vec::new();
    // Subscriptions: with 10 nodes each node subscribes every topic once;
    // with 1 node it holds all 10 subscriptions of every topic.
    for t in 0..TOPICS {
        for s in 0..SUBS_PER_TOPIC {
            let node = &node_list[s % nodes];
            let (r, d) = (rec.clone(), delivered.clone());
            subs.push(
                node.create_subscription_with(
                    &format!("/topic_{t}"),
                    QoS::default(),
                    opts.clone(),
                    move |m: &u64| {
                        let lat = now_ns().saturating_sub(*m);
                        r.lock().unwrap_or_else(|e| e.into_inner()).record(lat);
                        d.fetch_add(1, Ordering::Relaxed);
                    },
                )
                .map_err(|e| setup(&e))?,
            );
        }
    }
    // Publishers and one timer per node.
    let per_node = TOPICS / nodes;
    let mut timers = Vec::new();
    for (k, node) in node_list.iter().enumerate() {
        let pubs: Vec<Publisher<u64>> = (0..per_node)
            .map(|i| {
                node.create_publisher::<u64>(
                    &format!("/topic_{}", k * per_node + i),
                    QoS::default(),
                )
            })
            .collect::<Result<_, _>>()
            .map_err(|e| setup(&e))?;
        let pc = published.clone();
        timers.push(
            node.create_timer(period_of(p.rate)?, move || {
                for pb in &pubs {
                    let _ = pb.publish(now_ns());
                }
                pc.fetch_add(pubs.len() as u64, Ordering::Relaxed);
            })
            .map_err(|e| setup(&e))?,
        );
    }
    let mut exec = Executor::new();
    for n in &node_list {
        exec.add_node(n).map_err(|e| setup(&e))?;
    }
    let meter = Meter::start();
    exec.spin_until(p.duration, || false)
        .map_err(|e| setup(&e))?;
    drop(timers);
    // Drain what is in flight so nothing counts as lost by accident.
    while exec.spin_some().map_err(|e| setup(&e))? > 0 {}
    let delivered = delivered.load(Ordering::Relaxed);
    let expected = published.load(Ordering::Relaxed) * SUBS_PER_TOPIC as u64;
    let rec = std::mem::take(&mut *rec.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(meter.finish(
        "fanout",
        "myelin",
        format!(
            "{}nodes={nodes} {}",
            if inline { "inline " } else { "" },
            rate_label(p.rate)
        ),
        rec,
        delivered,
        expected.saturating_sub(delivered),
        None,
        vec![format!(
            "{TOPICS} topics x (1 publisher, {SUBS_PER_TOPIC} subscriptions), one executor thread"
        )],
    ))
}

fn myelin_nopub(p: FanoutParams) -> Result<Outcome, BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .map_err(|e| setup(&e))?;
    let fired = Arc::new(AtomicU64::new(0));
    let mut exec = Executor::new();
    let mut keep = Vec::new();
    for k in 0..10 {
        let node = ctx
            .create_node(&format!("node_{k}"))
            .map_err(|e| setup(&e))?;
        let f = fired.clone();
        keep.push(
            node.create_timer(period_of(p.rate)?, move || {
                f.fetch_add(1, Ordering::Relaxed);
            })
            .map_err(|e| setup(&e))?,
        );
        exec.add_node(&node).map_err(|e| setup(&e))?;
    }
    let meter = Meter::start();
    exec.spin_until(p.duration, || false)
        .map_err(|e| setup(&e))?;
    let fired = fired.load(Ordering::Relaxed);
    Ok(meter.finish(
        "fanout",
        "myelin",
        format!("nopub {}", rate_label(p.rate)),
        LatencyRecorder::new(),
        fired,
        0,
        None,
        vec!["10 nodes x 1 timer, no topics; cpu/msg is per timer callback".into()],
    ))
}

#[cfg(feature = "zenoh")]
fn zenoh_fanout(p: FanoutParams, mode: super::zenoh_peer::Sessions) -> Result<Outcome, BenchError> {
    use super::zenoh_peer as zp;
    use zenoh::Wait;

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
    let ticks = (p.duration.as_secs_f64() * p.rate).round().max(1.0) as u64;
    let meter = Meter::start();
    let start = std::time::Instant::now();
    for k in 0..ticks {
        super::sleep_until(start + period * (k as u32 + 1));
        for pb in &pubs {
            pb.put(zp::encode(now_ns(), first + k, 0))
                .wait()
                .map_err(|e| err(&e))?;
        }
    }
    let expected = ticks * (TOPICS * SUBS_PER_TOPIC) as u64;
    let drain = std::time::Instant::now() + Duration::from_secs(5);
    while delivered.load(Ordering::Relaxed) < expected && std::time::Instant::now() < drain {
        std::thread::sleep(Duration::from_millis(2));
    }
    let got = delivered.load(Ordering::Relaxed);
    let rec = std::mem::take(&mut *rec.lock().unwrap_or_else(|e| e.into_inner()));
    let outcome = meter.finish(
        "fanout",
        "zenoh",
        format!("{} nodes=10 {}", mode.name(), rate_label(p.rate)),
        rec,
        got,
        expected.saturating_sub(got),
        None,
        vec![format!("{TOPICS} topics x (1 publisher, {SUBS_PER_TOPIC} subscriptions); publisher thread paced")],
    );
    drop(keep);
    drop(pubs);
    drop(sessions);
    Ok(outcome)
}
