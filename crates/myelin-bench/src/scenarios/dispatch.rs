//! The core library's dispatch micro-benchmark: on one thread, publish a
//! message and run the executor (`spin_some`); latency is publish call to
//! callback entry. Measures what myelin's intra-process path costs per
//! message, with 0 and with 200 idle subscriptions on the same executor
//! (dispatch must not grow with idle entities), for a 64 B value and for a
//! 1440x1080 RGB frame published shared (no copy, so size must not matter).
//! Baselines in the same run: a crossbeam-channel send + recv on one thread,
//! and two back-to-back clock reads (the floor of any timestamped sample).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use myelin::Message;
use myelin::prelude::*;

use super::{BenchError, Job, Meter, Outcome, Stamped, System, now_ns};
use crate::harness::stats::LatencyRecorder;

/// 1440 x 1080 x 3 bytes.
pub const FRAME_1440X1080: usize = 1440 * 1080 * 3;

/// A 64-byte message held by value.
#[derive(Clone, Copy, Debug, myelin::Message)]
#[message(name = "myelin_bench/msg/Msg64")]
pub struct Msg64 {
    /// Publish time.
    pub stamp_ns: u64,
    /// Padding to 64 bytes.
    pub pad: [u64; 7],
}

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct DispatchParams {
    /// Samples per configuration (at least 1000).
    pub samples: u64,
}

impl DispatchParams {
    /// Check the parameters.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.samples < 1000 {
            return Err(BenchError::InvalidArg {
                flag: "count",
                reason: format!("{}: dispatch needs at least 1000 samples", self.samples),
            });
        }
        Ok(())
    }
}

/// Plan the dispatch jobs.
pub fn plan(p: DispatchParams, systems: &[System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    let n = p.samples;
    let mut jobs = Vec::new();
    for s in systems {
        match s {
            System::Myelin => {
                jobs.push(Job::new("dispatch/myelin/64B inline".into(), move || {
                    myelin_inline(n)
                }));
                for idle in [0usize, 200] {
                    jobs.push(Job::new(
                        format!("dispatch/myelin/64B idle={idle}"),
                        move || myelin_small(n, idle),
                    ));
                    jobs.push(Job::new(
                        format!("dispatch/myelin/1440x1080 shared idle={idle}"),
                        move || myelin_frame(n, idle),
                    ));
                }
            }
            System::Channel => {
                jobs.push(Job::new("dispatch/channel/64B".into(), move || {
                    channel_small(n)
                }));
                jobs.push(Job::new(
                    "dispatch/channel/1440x1080 Arc".into(),
                    move || channel_frame(n),
                ));
            }
            System::Zenoh | System::Grpc | System::Iceoryx2 | System::CycloneDds => {} // not measured in this scenario
            System::Raw => {
                jobs.push(Job::new("dispatch/raw/clock-read".into(), move || {
                    clock_floor(n)
                }));
            }
        }
    }
    Ok(jobs)
}

fn warm(n: u64) -> u64 {
    (n / 20).max(100)
}

fn rig(idle: usize) -> Result<(Context, Node, Vec<Subscription<u64>>), BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .map_err(|e| setup(&e))?;
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

fn myelin_small(n: u64, idle: usize) -> Result<Outcome, BenchError> {
    let (_ctx, node, _idle) = rig(idle)?;
    let hit = Arc::new(AtomicU64::new(0));
    // An owning callback: the message is moved into the buffer, no copy.
    let h = hit.clone();
    let _sub = node
        .create_subscription("small", QoS::keep_last(1), move |_m: Msg64| {
            h.store(now_ns(), Ordering::Relaxed);
        })
        .map_err(setup_err)?;
    let publisher = node
        .create_publisher::<Msg64>("small", QoS::keep_last(1))
        .map_err(setup_err)?;
    let mut exec = Executor::new();
    exec.add_node(&node).map_err(setup_err)?;
    let meter = Meter::start();
    let rec = same_thread(n, &hit, |i| {
        let m = Msg64 {
            stamp_ns: i,
            pad: [i; 7],
        };
        publisher.publish(m).map_err(setup_err)?;
        exec.spin_some().map_err(setup_err).map(drop)
    })?;
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

fn myelin_inline(n: u64) -> Result<Outcome, BenchError> {
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

fn myelin_frame(n: u64, idle: usize) -> Result<Outcome, BenchError> {
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

fn channel_small(n: u64) -> Result<Outcome, BenchError> {
    let (tx, rx) = crossbeam_channel::bounded::<Msg64>(1);
    let mut rec = LatencyRecorder::new();
    let meter = Meter::start();
    for i in 0..n + warm(n) {
        let t0 = now_ns();
        tx.send(Msg64 {
            stamp_ns: t0,
            pad: [i; 7],
        })
        .map_err(|e| BenchError::setup("channel", e))?;
        let m = rx.recv().map_err(|e| BenchError::setup("channel", e))?;
        let t1 = now_ns();
        std::hint::black_box(m);
        if i >= warm(n) {
            rec.record(t1.saturating_sub(t0));
        }
    }
    Ok(meter.finish(
        "dispatch",
        "channel",
        "64B".into(),
        rec,
        n + warm(n),
        0,
        None,
        vec![],
    ))
}

fn channel_frame(n: u64) -> Result<Outcome, BenchError> {
    let (tx, rx) = crossbeam_channel::bounded::<Arc<Stamped>>(1);
    let frame = Arc::new(Stamped::with_size(0, FRAME_1440X1080));
    let mut rec = LatencyRecorder::new();
    let meter = Meter::start();
    for i in 0..n + warm(n) {
        let f = frame.clone();
        let t0 = now_ns();
        tx.send(f).map_err(|e| BenchError::setup("channel", e))?;
        let m = rx.recv().map_err(|e| BenchError::setup("channel", e))?;
        let t1 = now_ns();
        std::hint::black_box(&m);
        if i >= warm(n) {
            rec.record(t1.saturating_sub(t0));
        }
    }
    Ok(meter.finish(
        "dispatch",
        "channel",
        "1440x1080 Arc".into(),
        rec,
        n + warm(n),
        0,
        None,
        vec![],
    ))
}

fn clock_floor(n: u64) -> Result<Outcome, BenchError> {
    let mut rec = LatencyRecorder::new();
    let meter = Meter::start();
    for _ in 0..n {
        let t0 = now_ns();
        let t1 = now_ns();
        rec.record(t1.saturating_sub(t0));
    }
    Ok(meter.finish(
        "dispatch",
        "raw",
        "clock-read".into(),
        rec,
        n,
        0,
        None,
        vec!["two back-to-back clock reads: included in every sample above".into()],
    ))
}
