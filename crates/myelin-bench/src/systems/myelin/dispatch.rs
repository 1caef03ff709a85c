//! myelin in the dispatch measurement: on one thread, `publish` then
//! `spin_some`, latency from the publish call to callback entry; a 64 B
//! value moved into an owning callback, the same into an inline
//! subscription (no executor), and a 1440x1080 frame published shared,
//! each with 0 and 200 idle subscriptions on the executor.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use myelin::Message;
use myelin::prelude::*;

use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, Stamped, now_ns};
use crate::scenarios::dispatch::{DispatchParams, FRAME_1440X1080, LOOP, Msg64, looped_pair, warm};

/// The jobs: inline, then per idle count the 64 B value and the frame.
pub(super) fn jobs(p: DispatchParams) -> Vec<Job> {
    let n = p.samples;
    let mut jobs = vec![
        Job::new("dispatch/myelin/64B inline".into(), move || inline(n)),
        Job::new(
            "dispatch/myelin/64B loop, idle=0 and idle=200 alternated".into(),
            move || looped_small(n),
        ),
    ];
    for idle in [0usize, IDLE] {
        jobs.push(Job::new(
            format!("dispatch/myelin/64B idle={idle}"),
            move || small(n, idle),
        ));
        jobs.push(Job::new(
            format!("dispatch/myelin/1440x1080 shared idle={idle}"),
            move || frame(n, idle),
        ));
    }
    jobs
}

/// Idle subscriptions of the `idle=` rows.
const IDLE: usize = 200;

fn rig(idle: usize) -> Result<(Context, Node, Vec<Subscription<u64>>), BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = super::local_context()?;
    let node = ctx.create_node("dispatch").map_err(|e| setup(&e))?;
    let mut idle_subs = Vec::new();
    for i in 0..idle {
        idle_subs.push(
            node.create_subscription(&format!("idle_{i}"), QoS::default(), |_m: u64| {})
                .map_err(|e| setup(&e))?,
        );
    }
    Ok((ctx, node, idle_subs))
}

/// Time `n` (+ warm-up) same-thread steps: `step(i)` publishes and makes the
/// callback run; the callback stores its entry time in `hit`.
fn same_thread(
    n: u64,
    hit: &AtomicU64,
    mut step: impl FnMut(u64) -> Result<(), BenchError>,
) -> Result<LatencyRecorder, BenchError> {
    let mut rec = LatencyRecorder::new();
    for i in 0..n + warm(n) {
        let t0 = now_ns();
        step(i)?;
        if i >= warm(n) {
            rec.record(hit.load(Ordering::Relaxed).saturating_sub(t0));
        }
    }
    Ok(rec)
}

fn setup_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("myelin", e)
}

/// A subscription on `topic` (inline or executor-run) that stamps `hit`.
fn stamping_sub<T: Message>(
    node: &Node,
    topic: &str,
    inline: bool,
    hit: &Arc<AtomicU64>,
) -> Result<Subscription<T>, BenchError> {
    let h = hit.clone();
    let opts = if inline {
        SubscriptionOptions::inline()
    } else {
        SubscriptionOptions::default()
    };
    node.create_subscription_with(topic, QoS::keep_last(1), opts, move |_m: &T| {
        h.store(now_ns(), Ordering::Relaxed);
    })
    .map_err(setup_err)
}

/// The 64 B path: an owning subscription on "small" running `cb` (the
/// message is moved into the buffer, no copy), its publisher, and an
/// executor with the node.
fn small_path(
    node: &Node,
    cb: impl FnMut(Msg64) + Send + 'static,
) -> Result<(Subscription<Msg64>, Publisher<Msg64>, Executor), BenchError> {
    let sub = node
        .create_subscription("small", QoS::keep_last(1), cb)
        .map_err(setup_err)?;
    let publisher = node
        .create_publisher::<Msg64>("small", QoS::keep_last(1))
        .map_err(setup_err)?;
    let mut exec = Executor::new();
    exec.add_node(node).map_err(setup_err)?;
    Ok((sub, publisher, exec))
}

/// One hop of the 64 B path: publish message `i`, run the callback.
fn small_hop(publisher: &Publisher<Msg64>, exec: &mut Executor, i: u64) -> Result<(), BenchError> {
    publisher
        .publish(Msg64 {
            stamp_ns: i,
            pad: [i; 7],
        })
        .map_err(setup_err)?;
    exec.spin_some().map_err(setup_err).map(drop)
}

fn small(n: u64, idle: usize) -> Result<Outcome, BenchError> {
    let (_ctx, node, _idle) = rig(idle)?;
    let hit = Arc::new(AtomicU64::new(0));
    let h = hit.clone();
    let (_sub, publisher, mut exec) = small_path(&node, move |_m: Msg64| {
        h.store(now_ns(), Ordering::Relaxed);
    })?;
    let meter = Meter::start();
    let rec = same_thread(n, &hit, |i| small_hop(&publisher, &mut exec, i))?;
    Ok(meter.finish(
        "dispatch",
        "myelin",
        format!("64B idle={idle}"),
        rec,
        n + warm(n),
        0,
        None,
        vec![
            "same thread: publish(T) then spin_some(); latency = publish call to callback entry"
                .into(),
        ],
    ))
}

/// The 64 B path of a looped row: its rig (`idle` idle subscriptions) and
/// the sum of the `stamp_ns` its callback saw.
struct LoopRig {
    _ctx: Context,
    _node: Node,
    _idle: Vec<Subscription<u64>>,
    _sub: Subscription<Msg64>,
    publisher: Publisher<Msg64>,
    exec: Executor,
    got: Arc<AtomicU64>,
}

impl LoopRig {
    fn new(idle: usize) -> Result<LoopRig, BenchError> {
        let (ctx, node, idle_subs) = rig(idle)?;
        let got = Arc::new(AtomicU64::new(0));
        let g = got.clone();
        let (sub, publisher, exec) = small_path(&node, move |m: Msg64| {
            g.fetch_add(m.stamp_ns, Ordering::Relaxed);
        })?;
        Ok(LoopRig {
            _ctx: ctx,
            _node: node,
            _idle: idle_subs,
            _sub: sub,
            publisher,
            exec,
            got,
        })
    }

    fn hop(&mut self, i: u64) -> Result<(), BenchError> {
        small_hop(&self.publisher, &mut self.exec, i)
    }

    /// Whether the callback saw messages `0..hops` (1) or not (0).
    fn lost(&self, hops: u64) -> u64 {
        u64::from(self.got.load(Ordering::Relaxed) != (0..hops).sum::<u64>())
    }
}

/// As `small`, timed [`LOOP`] hops at a time (no clock read per hop):
/// the mean per hop, with no idle subscriptions (`64B loop`) and with
/// [`IDLE`] (`64B loop idle=200`, the row the idle goal reads), the two
/// rigs alive at once and measured alternately ([`looped_pair`]).
fn looped_small(n: u64) -> Result<Outcome, BenchError> {
    let mut plain = LoopRig::new(0)?;
    let mut idle = LoopRig::new(IDLE)?;
    let meter = Meter::start();
    let [(rec0, hops0), (rec1, hops1)] = looped_pair(n, |i| plain.hop(i), |i| idle.hop(i))?;
    let row = |config: String, rec, hops, lost, other: usize| {
        meter.finish(
            "dispatch",
            "myelin",
            config,
            rec,
            hops,
            lost,
            None,
            vec![format!(
                "same thread: publish(T) then spin_some(), {LOOP} in a row per sample, \
                 alternating with the rig of idle={other}; latency = the run's mean per hop \
                 (no clock read per hop)"
            )],
        )
    };
    let mut out = row("64B loop".into(), rec0, hops0, plain.lost(hops0), IDLE);
    out.more.push(row(
        format!("64B loop idle={IDLE}"),
        rec1,
        hops1,
        idle.lost(hops1),
        0,
    ));
    Ok(out)
}

fn inline(n: u64) -> Result<Outcome, BenchError> {
    let (_ctx, node, _idle) = rig(0)?;
    let hit = Arc::new(AtomicU64::new(0));
    let _sub = stamping_sub::<Msg64>(&node, "small", true, &hit)?;
    let publisher = node
        .create_publisher::<Msg64>("small", QoS::keep_last(1))
        .map_err(setup_err)?;
    let meter = Meter::start();
    let rec = same_thread(n, &hit, |i| {
        let m = Msg64 {
            stamp_ns: i,
            pad: [i; 7],
        };
        publisher.publish(m).map_err(setup_err)
    })?;
    Ok(meter.finish(
        "dispatch",
        "myelin",
        "64B inline".into(),
        rec,
        n + warm(n),
        0,
        None,
        vec!["inline subscription: the callback runs inside publish(), no executor".into()],
    ))
}

fn frame(n: u64, idle: usize) -> Result<Outcome, BenchError> {
    let (_ctx, node, _idle) = rig(idle)?;
    let hit = Arc::new(AtomicU64::new(0));
    let _sub = stamping_sub::<Stamped>(&node, "frame", false, &hit)?;
    let publisher = node
        .create_publisher::<Stamped>("frame", QoS::keep_last(1))
        .map_err(setup_err)?;
    let mut exec = Executor::new();
    exec.add_node(&node).map_err(setup_err)?;
    let frame = Arc::new(Stamped::with_size(0, FRAME_1440X1080));
    let meter = Meter::start();
    let rec = same_thread(n, &hit, |_| {
        publisher.publish_shared(frame.clone()).map_err(setup_err)?;
        exec.spin_some().map_err(setup_err).map(drop)
    })?;
    Ok(meter.finish(
        "dispatch",
        "myelin",
        format!("1440x1080 shared idle={idle}"),
        rec,
        n + warm(n),
        0,
        None,
        vec!["publish_shared(Arc) of a 4,665,600 B frame, then spin_some()".into()],
    ))
}
