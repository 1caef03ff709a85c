//! myelin in the relay chain, in four arrangements: every node on one
//! single-threaded executor, every node on its own executor thread, every
//! node on one 2-worker multi-threaded executor, and inline subscriptions
//! (the whole chain runs inside the source's publish call).

use std::time::{Duration, Instant};

use myelin::MultiThreadedExecutor;
use myelin::prelude::*;

use crate::harness::Meter;
use crate::harness::{BenchError, Job, Outcome, Stamped, now_ns, period_of};
use crate::scenarios::relay::{RelayParams, Sink};

/// The jobs: one per arrangement.
pub(super) fn jobs(p: RelayParams) -> Vec<Job> {
    [
        Arrangement::SingleThreaded,
        Arrangement::ThreadPerNode,
        Arrangement::MultiThreaded2,
        Arrangement::Inline,
    ]
    .into_iter()
    .map(|a| {
        Job::new(format!("relay/myelin/{}", p.config(a.name())), move || {
            chain(p, a)
        })
    })
    .collect()
}

/// How myelin runs the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrangement {
    /// Every node on one single-threaded executor.
    SingleThreaded,
    /// Every node on its own executor and thread (rclcpp#1772's ask).
    ThreadPerNode,
    /// Relays and sink with inline subscriptions: the whole chain runs in the
    /// source's publish call.
    Inline,
    /// Every node on one multi-threaded executor with 2 workers.
    MultiThreaded2,
}

impl Arrangement {
    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            Arrangement::SingleThreaded => "single-threaded",
            Arrangement::ThreadPerNode => "thread-per-node",
            Arrangement::Inline => "inline",
            Arrangement::MultiThreaded2 => "multi-threaded-2",
        }
    }
}

fn chain(p: RelayParams, arrangement: Arrangement) -> Result<Outcome, BenchError> {
    let thread_per_node = arrangement == Arrangement::ThreadPerNode;
    let opts = if arrangement == Arrangement::Inline {
        SubscriptionOptions::inline()
    } else {
        SubscriptionOptions::default()
    };
    let system = "myelin";
    let setup = |e: &dyn std::fmt::Display| BenchError::setup(system, e);
    let ctx = super::local_context()?;
    let qos = QoS::keep_last(100);
    let sink = Sink::new(&p);
    let total = p.total();
    let hops = p.hops as usize;

    let mut nodes = Vec::new();
    let mut keep_subs = Vec::new();
    // Relays and sink first, so the chain exists before the source starts.
    for i in 0..hops {
        let last = i + 1 == hops;
        let name = if last {
            "sink".to_string()
        } else {
            format!("relay_{i}")
        };
        let node = ctx.create_node(&name).map_err(|e| setup(&e))?;
        let topic = format!("hop_{i}");
        if last {
            let s = sink.clone();
            keep_subs.push(
                node.create_subscription_with(&topic, qos, opts.clone(), move |m: Stamped| {
                    s.on_message(&m)
                })
                .map_err(|e| setup(&e))?,
            );
        } else {
            let out = node
                .create_publisher::<Stamped>(&format!("hop_{}", i + 1), qos)
                .map_err(|e| setup(&e))?;
            keep_subs.push(
                node.create_subscription_with(&topic, qos, opts.clone(), move |m: Stamped| {
                    let _ = out.publish(m);
                })
                .map_err(|e| setup(&e))?,
            );
        }
        nodes.push(node);
    }
    let source = ctx.create_node("source").map_err(|e| setup(&e))?;
    let out = source
        .create_publisher::<Stamped>("hop_0", qos)
        .map_err(|e| setup(&e))?;
    let mut seq = 0u64;
    let size = p.size;
    let _timer = source
        .create_timer(period_of(p.rate)?, move || {
            if seq < total {
                let mut m = Stamped::with_size(seq, size);
                m.stamp_ns = now_ns();
                let _ = out.publish(m);
                seq += 1;
            }
        })
        .map_err(|e| setup(&e))?;
    nodes.push(source);

    let meter = Meter::start();
    let t0 = now_ns();
    let patience = p.patience();
    if arrangement == Arrangement::MultiThreaded2 {
        let mut exec = MultiThreadedExecutor::new(2);
        for n in &nodes {
            exec.add_node(n).map_err(|e| setup(&e))?;
        }
        let s = sink.clone();
        exec.spin_until(patience, move || s.received() >= total)
            .map_err(|e| setup(&e))?;
    } else if !thread_per_node {
        let mut exec = Executor::new();
        for n in &nodes {
            exec.add_node(n).map_err(|e| setup(&e))?;
        }
        let s = sink.clone();
        exec.spin_until(patience, || s.received() >= total)
            .map_err(|e| setup(&e))?;
    } else {
        let mut handles = Vec::new();
        let mut stops = Vec::new();
        for n in &nodes {
            let mut exec = Executor::new();
            exec.add_node(n).map_err(|e| setup(&e))?;
            stops.push(exec.stop_handle());
            handles.push(std::thread::spawn(move || exec.spin()));
        }
        let deadline = Instant::now() + patience;
        while sink.received() < total && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        for s in &stops {
            s.stop();
        }
        for h in handles {
            h.join()
                .map_err(|_| setup(&"executor thread panicked"))?
                .map_err(|e| setup(&e))?;
        }
    }
    let received = sink.received();
    let rec = sink.recorder(t0);
    let deliveries = received * u64::from(p.hops);
    Ok(meter.finish(
        "relay",
        system,
        p.config(arrangement.name()),
        rec,
        deliveries,
        total - received,
        Some(p.hops),
        vec![],
    ))
}
