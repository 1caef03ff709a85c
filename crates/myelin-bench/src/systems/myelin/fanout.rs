//! myelin in the 20 topics x 10 subscribers CPU-overhead measurement, on
//! one executor thread: 10 nodes (node `k` publishes topics `2k` and
//! `2k+1` from its own timer and subscribes to all 20), one node holding
//! every publisher and all 200 subscriptions, 10 nodes with inline
//! subscriptions, and `nopub` (10 nodes with a timer each and no topics);
//! and the 10-node graph on cold memory (`cold nodes=10`, see the
//! scenario).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use myelin::prelude::*;

use crate::harness::stats::LatencyRecorder;
use crate::harness::sys::{CpuSnapshot, CpuUsage};
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns, period_of, rate_label};
use crate::scenarios::fanout::{
    FanoutParams, SUBS_PER_TOPIC, TOPICS, cold_cpu, cold_rounds, cold_sweep_buffer, sweep,
};

/// The jobs: `--nodes` (1, 10 or both), inline with 10 nodes, `nopub`.
pub(super) fn jobs(p: FanoutParams) -> Vec<Job> {
    let node_counts: Vec<usize> = match p.nodes {
        Some(n) => vec![n],
        None => vec![1, 10],
    };
    let mut jobs = Vec::new();
    if node_counts == [1, 10] {
        // Compared in a goal (10 nodes cost <= 1.2x one node): measured
        // alternately in one process, not in two runs seconds apart.
        jobs.push(Job::new(
            format!(
                "fanout/myelin/nodes=1 and nodes=10, alternated {}",
                rate_label(p.rate)
            ),
            move || paired(p),
        ));
    } else {
        for n in node_counts {
            jobs.push(Job::new(
                format!("fanout/myelin/nodes={n} {}", rate_label(p.rate)),
                move || fanout(p, n, false),
            ));
        }
    }
    jobs.push(Job::new(
        format!("fanout/myelin/inline nodes=10 {}", rate_label(p.rate)),
        move || fanout(p, 10, true),
    ));
    jobs.push(Job::new(
        format!("fanout/myelin/nopub {}", rate_label(p.rate)),
        move || nopub(p),
    ));
    if p.nodes.is_none_or(|n| n == 10) {
        jobs.push(Job::new("fanout/myelin/cold nodes=10".into(), move || {
            cold(p)
        }));
    }
    jobs
}

/// The fan-out's nodes and 200 subscriptions, each recording its
/// messages' latency: with 10 nodes each node subscribes every topic once;
/// with 1 node it holds all 10 subscriptions of every topic.
struct Graph {
    nodes: Vec<Node>,
    _subs: Vec<Subscription<u64>>,
    rec: Arc<Mutex<LatencyRecorder>>,
    delivered: Arc<AtomicU64>,
}

impl Graph {
    fn new(ctx: &Context, nodes: usize, opts: SubscriptionOptions) -> Result<Graph, BenchError> {
        let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
        let rec = Arc::new(Mutex::new(LatencyRecorder::new()));
        let delivered = Arc::new(AtomicU64::new(0));
        let node_list: Vec<Node> = (0..nodes)
            .map(|k| ctx.create_node(&format!("node_{k}")))
            .collect::<Result<_, _>>()
            .map_err(|e| setup(&e))?;
        let mut subs = Vec::new();
        for t in 0..TOPICS {
            for s in 0..SUBS_PER_TOPIC {
                let (r, d) = (rec.clone(), delivered.clone());
                subs.push(
                    node_list[s % nodes]
                        .create_subscription_with(
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
        Ok(Graph {
            nodes: node_list,
            _subs: subs,
            rec,
            delivered,
        })
    }

    /// The latencies recorded so far (and a fresh recorder).
    fn take_latencies(&self) -> LatencyRecorder {
        std::mem::take(&mut *self.rec.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn fanout(p: FanoutParams, nodes: usize, inline: bool) -> Result<Outcome, BenchError> {
    let opts = if inline {
        SubscriptionOptions::inline()
    } else {
        SubscriptionOptions::default()
    };
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let mut side = Side::new(p, nodes, opts)?;
    let meter = Meter::start();
    side.exec
        .spin_until(p.duration, || false)
        .map_err(|e| setup(&e))?;
    side.stop()?;
    let (delivered, expected) = side.counts();
    let rec = side.graph.take_latencies();
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

/// How many slices each graph of [`paired`] runs, alternating.
const SLICES: u32 = 8;

/// A fan-out graph with its context, timers and executor: one run of
/// [`fanout`], or one of the two graphs of [`paired`] (with what its
/// slices measured).
struct Side {
    nodes: usize,
    _ctx: Context,
    graph: Graph,
    timers: Vec<Timer>,
    published: Arc<AtomicU64>,
    exec: Executor,
    cpu: Option<CpuUsage>,
}

impl Side {
    /// The graph of `nodes` nodes, each publishing its topics from its own
    /// timer, on one executor (not spinning yet).
    fn new(p: FanoutParams, nodes: usize, opts: SubscriptionOptions) -> Result<Side, BenchError> {
        let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
        let ctx = super::local_context()?;
        let graph = Graph::new(&ctx, nodes, opts)?;
        let published = Arc::new(AtomicU64::new(0));
        let per_node = TOPICS / nodes;
        let mut timers = Vec::new();
        let mut exec = Executor::new();
        for (k, node) in graph.nodes.iter().enumerate() {
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
            let timer = node
                .create_timer(period_of(p.rate)?, move || {
                    for pb in &pubs {
                        let _ = pb.publish(now_ns());
                    }
                    pc.fetch_add(pubs.len() as u64, Ordering::Relaxed);
                })
                .map_err(|e| setup(&e))?;
            timers.push(timer);
            exec.add_node(node).map_err(|e| setup(&e))?;
        }
        Ok(Side {
            nodes,
            _ctx: ctx,
            graph,
            timers,
            published,
            exec,
            cpu: None,
        })
    }

    /// Run the graph for `slice`: its timers restarted (so no tick missed
    /// while the other graph ran fires late), then stopped and drained.
    fn run(&mut self, slice: Duration) -> Result<(), BenchError> {
        let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
        let before = CpuSnapshot::now();
        for t in &self.timers {
            t.reset();
        }
        self.exec
            .spin_until(slice, || false)
            .map_err(|e| setup(&e))?;
        self.stop()?;
        let used = CpuSnapshot::now().since(&before);
        match &mut self.cpu {
            Some(c) => c.add(&used),
            None => self.cpu = Some(used),
        }
        Ok(())
    }

    /// Stop the timers and drain what is in flight, so nothing counts as
    /// lost by accident.
    fn stop(&mut self) -> Result<(), BenchError> {
        for t in &self.timers {
            t.cancel();
        }
        while self
            .exec
            .spin_some()
            .map_err(|e| BenchError::setup("myelin", e))?
            > 0
        {}
        Ok(())
    }

    /// Deliveries made, and expected from what was published.
    fn counts(&self) -> (u64, u64) {
        let delivered = self.graph.delivered.load(Ordering::Relaxed);
        let expected = self.published.load(Ordering::Relaxed) * SUBS_PER_TOPIC as u64;
        (delivered, expected)
    }

    fn finish(self, p: FanoutParams) -> Outcome {
        let (delivered, expected) = self.counts();
        Meter::finish_with(
            self.cpu.unwrap_or_default(),
            "fanout",
            "myelin",
            format!("nodes={} {}", self.nodes, rate_label(p.rate)),
            self.graph.take_latencies(),
            delivered,
            expected.saturating_sub(delivered),
            vec![format!(
                "{TOPICS} topics x (1 publisher, {SUBS_PER_TOPIC} subscriptions), one executor thread; alternated with the other node count in {SLICES} slices each (cpu: the process during this graph's slices)"
            )],
        )
    }
}

/// The 1-node and 10-node graphs, each in its own context, run in turns
/// of `duration / SLICES` on this thread (which goes first alternates):
/// what the machine does during the run falls on both alike, so their
/// ratio (a goal) holds where two runs seconds apart differ by more than
/// the bound. Records: `nodes=1`, then `nodes=10`.
fn paired(p: FanoutParams) -> Result<Outcome, BenchError> {
    let mut sides = [
        Side::new(p, 1, SubscriptionOptions::default())?,
        Side::new(p, 10, SubscriptionOptions::default())?,
    ];
    for side in &mut sides {
        side.stop()?;
    }
    let slice = p.duration / SLICES;
    for s in 0..SLICES {
        let order = if s % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            sides[i].run(slice)?;
        }
    }
    let [one, ten] = sides;
    let mut out = one.finish(p);
    out.more.push(ten.finish(p));
    Ok(out)
}

/// The 10-node graph on cold memory: per round, a sweep of the caches,
/// then node by node its two topics published and the executor run until
/// idle (the order of a 100 Hz tick: each timer's deliveries before the
/// next timer).
fn cold(p: FanoutParams) -> Result<Outcome, BenchError> {
    const NODES: usize = 10;
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = super::local_context()?;
    let graph = Graph::new(&ctx, NODES, SubscriptionOptions::default())?;
    let node_list = &graph.nodes;
    let per_node = TOPICS / NODES;
    let pubs: Vec<Vec<Publisher<u64>>> = node_list
        .iter()
        .enumerate()
        .map(|(k, node)| {
            (0..per_node)
                .map(|i| {
                    node.create_publisher::<u64>(
                        &format!("/topic_{}", k * per_node + i),
                        QoS::default(),
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<_, _>>()
        .map_err(|e| setup(&e))?;
    let mut exec = Executor::new();
    for n in node_list {
        exec.add_node(n).map_err(|e| setup(&e))?;
    }
    let buf = cold_sweep_buffer();
    let mut round = |measure: bool| -> Result<u64, BenchError> {
        sweep(&buf);
        let t0 = std::time::Instant::now();
        for node_pubs in &pubs {
            for pb in node_pubs {
                pb.publish(now_ns()).map_err(|e| setup(&e))?;
            }
            while exec.spin_some().map_err(|e| setup(&e))? > 0 {}
        }
        let ns = t0.elapsed().as_nanos() as u64;
        if !measure {
            graph.take_latencies();
            graph.delivered.store(0, Ordering::Relaxed);
        }
        Ok(ns)
    };
    // Two rounds to fault everything in, not counted.
    for _ in 0..2 {
        round(false)?;
    }
    let rounds = cold_rounds(&p);
    let meter = Meter::start();
    let mut rounds_ns = 0;
    for _ in 0..rounds {
        rounds_ns += round(true)?;
    }
    let delivered = graph.delivered.load(Ordering::Relaxed);
    let expected = rounds * (TOPICS * SUBS_PER_TOPIC) as u64;
    let rec = graph.take_latencies();
    let mut out = meter.finish(
        "fanout",
        "myelin",
        "cold nodes=10".into(),
        rec,
        delivered,
        expected.saturating_sub(delivered),
        None,
        vec![format!(
            "{rounds} rounds on cold memory (caches swept before each); cpu/msg: the rounds' time per delivery"
        )],
    );
    cold_cpu(&mut out.record, rounds_ns, delivered);
    Ok(out)
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
        vec![
            "10 nodes x 1 timer, no topics; cpu/msg is per timer callback, the tick's wake-up included"
                .into(),
        ],
    ))
}
