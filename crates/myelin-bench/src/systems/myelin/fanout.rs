//! myelin in the 20 topics x 10 subscribers CPU-overhead measurement, on
//! one executor thread: 10 nodes (node `k` publishes topics `2k` and
//! `2k+1` from its own timer and subscribes to all 20), one node holding
//! every publisher and all 200 subscriptions, 10 nodes with inline
//! subscriptions, and `nopub` (10 nodes with a timer each and no topics).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use myelin::prelude::*;

use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns, period_of, rate_label};
use crate::scenarios::fanout::{FanoutParams, SUBS_PER_TOPIC, TOPICS};

/// The jobs: `--nodes` (1, 10 or both), inline with 10 nodes, `nopub`.
pub(super) fn jobs(p: FanoutParams) -> Vec<Job> {
    let node_counts: Vec<usize> = match p.nodes {
        Some(n) => vec![n],
        None => vec![1, 10],
    };
    let mut jobs = Vec::new();
    for n in node_counts {
        jobs.push(Job::new(
            format!("fanout/myelin/nodes={n} {}", rate_label(p.rate)),
            move || fanout(p, n, false),
        ));
    }
    jobs.push(Job::new(
        format!("fanout/myelin/inline nodes=10 {}", rate_label(p.rate)),
        move || fanout(p, 10, true),
    ));
    jobs.push(Job::new(
        format!("fanout/myelin/nopub {}", rate_label(p.rate)),
        move || nopub(p),
    ));
    jobs
}

fn fanout(p: FanoutParams, nodes: usize, inline: bool) -> Result<Outcome, BenchError> {
    let opts = if inline {
        SubscriptionOptions::inline()
    } else {
        SubscriptionOptions::default()
    };
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = super::local_context()?;
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

fn nopub(p: FanoutParams) -> Result<Outcome, BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = super::local_context()?;
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
