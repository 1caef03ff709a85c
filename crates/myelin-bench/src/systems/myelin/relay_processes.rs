//! myelin in the relay-chain per-hop latency measurement with every relay
//! in its own process (`relay --processes`): Source => Relay_0 .. => Sink
//! over myelin's shared-memory transport, executors blocking on their
//! futex (`block`), or anticipating the next message
//! ([`IdleWait::Anticipate`], `anticipate`).
//!
//! The source and the sink share the run's process (one monotonic clock
//! anyway); each relay is this executable started again with
//! `MYELIN_BENCH_RELAY` set. Messages are `Blob`s: the source loans one and
//! writes a 16-byte stamp; each relay reads the incoming chunk in place and
//! loans its own to forward it (a process cannot lend another's chunk): up
//! to 4 KiB it copies the message, above (camera frames) it copies the
//! stamp into a fresh frame, as a stage writing its own output would. CPU is
//! the source+sink process's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, IdleWait};

use crate::harness::processes::{Helper, domain, shm_context};
use crate::harness::stats::LatencyRecorder;
use crate::harness::{
    BenchError, Job, Meter, Outcome, now_ns, period_of, rate_label, size_label, sleep_until,
    warmup_for,
};
use crate::scenarios::relay::RelayParams;
use crate::systems::Role;

const ENV: &str = "MYELIN_BENCH_RELAY";

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("relay --processes", e)
}

fn context(domain: u32) -> Result<Context, BenchError> {
    shm_context(domain, "relay --processes")
}

/// A relay process: forwards one hop of the chain.
pub(super) const RELAY: Role = Role {
    env: ENV,
    name: "relay",
    run: relay,
};

/// How the chain's executors wait (busy-polling is left out: five
/// spinning processes on a few cores measure the scheduler).
const WAITS: [IdleWait; 2] = [IdleWait::Block, IdleWait::Anticipate];

fn wait_named(name: &str) -> Result<IdleWait, BenchError> {
    name.parse().map_err(err)
}

/// `domain,index,wait`: subscribe `hop_<index>`, publish `hop_<index+1>`,
/// the executor waiting as `wait` names.
fn relay(spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [domain, index, wait] = parts[..] else {
        return Err(err(format!("bad {ENV} {spec:?}")));
    };
    let wait = wait_named(wait)?;
    let domain: u32 = domain.parse().map_err(err)?;
    let i: usize = index.parse().map_err(err)?;
    let ctx = context(domain)?;
    let node = ctx.create_node(&format!("relay_{i}")).map_err(err)?;
    let out = Arc::new(
        node.create_publisher::<Blob>(&format!("hop_{}", i + 1), QoS::keep_last(100))
            .map_err(err)?,
    );
    let o = out.clone();
    let _sub = node
        .create_subscription(&format!("hop_{i}"), QoS::keep_last(100), move |m: &Blob| {
            if let Ok(mut l) = o.loan_slice(m.len()) {
                // Small messages are copied whole; a frame gets a fresh loan
                // with the stamp copied (a stage that writes its own output
                // frame), so the hop measures the transport, not a memcpy.
                if m.len() <= 4096 {
                    l.copy_from_slice(m);
                } else {
                    l[..16].copy_from_slice(&m[..16]);
                }
                let _ = l.publish();
            }
        })
        .map_err(err)?;
    let c = ctx.clone();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
        c.shutdown();
    });
    println!("ready");
    // Tell the parent when the next stage is connected.
    let deadline = Instant::now() + Duration::from_secs(20);
    while out.subscription_count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    println!("linked");
    let mut exec = Executor::new();
    exec.add_node(&node).map_err(err)?;
    exec.set_idle_wait(wait);
    exec.spin().map_err(err)
}

/// The jobs: the chain with the executors blocking, and anticipating.
pub(super) fn jobs(p: RelayParams) -> Vec<Job> {
    WAITS
        .iter()
        .map(|&wait| {
            let name = wait.name();
            Job::new(
                format!(
                    "relay/myelin/processes-shm {name} {} {}",
                    rate_label(p.rate),
                    size_label(p.size)
                ),
                move || run(p, name),
            )
        })
        .collect()
}

/// The chain: `p.hops` transfers, `p.hops - 1` relay processes, the
/// executors waiting as `wait` names.
fn run(p: RelayParams, wait: &str) -> Result<Outcome, BenchError> {
    let domain = domain(7);
    let ctx = context(domain)?;
    let hops = p.hops as usize;
    let node = ctx.create_node("source_sink").map_err(err)?;
    let warm = warmup_for(p.count);
    let total = p.count + warm;
    // Sink first.
    let received = Arc::new(AtomicU64::new(0));
    let samples = Arc::new(std::sync::Mutex::new(Vec::with_capacity(total as usize)));
    let (r, s) = (received.clone(), samples.clone());
    let _sink = node
        .create_subscription(
            &format!("hop_{}", hops - 1),
            QoS::keep_last(100),
            move |m: &Blob| {
                let t = now_ns();
                let stamp = u64::from_le_bytes(m[0..8].try_into().expect("16-byte header"));
                let seq = u64::from_le_bytes(m[8..16].try_into().expect("16-byte header"));
                s.lock().unwrap_or_else(|e| e.into_inner()).push((
                    seq,
                    stamp,
                    t.saturating_sub(stamp),
                ));
                r.fetch_add(1, Ordering::Release);
            },
        )
        .map_err(err)?;
    let mut children = Vec::new();
    for i in 0..hops - 1 {
        let mut relay =
            Helper::spawn("relay_role", ENV, format!("{domain},{i},{wait}")).map_err(err)?;
        relay.expect("ready").map_err(err)?;
        children.push(relay);
    }
    let source = node
        .create_publisher::<Blob>("hop_0", QoS::keep_last(100))
        .map_err(err)?;
    for relay in &mut children {
        relay.expect("linked").map_err(err)?;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while (source.subscription_count() == 0 || _sink.matched_count() == 0)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut exec = Executor::new();
    exec.add_node(&node).map_err(err)?;
    exec.set_idle_wait(wait_named(wait)?);
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || {
        let _ = exec.spin();
        exec.anticipation()
    });
    let period = period_of(p.rate)?;
    let meter = Meter::start();
    let t0 = now_ns();
    let start = Instant::now();
    for seq in 0..total {
        sleep_until(start + period * seq as u32);
        let mut l = source.loan_slice(p.size).map_err(err)?;
        l[8..16].copy_from_slice(&seq.to_le_bytes());
        l[0..8].copy_from_slice(&now_ns().to_le_bytes());
        l.publish().map_err(err)?;
    }
    let patience = Instant::now() + Duration::from_secs(10);
    while received.load(Ordering::Acquire) < total && Instant::now() < patience {
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.stop();
    let anticipated = spinner.join().unwrap_or_default();
    let got = received.load(Ordering::Acquire);
    let mut rec = LatencyRecorder::with_time_series();
    for &(seq, stamp, lat) in samples.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        if seq >= warm {
            rec.record_at(stamp.saturating_sub(t0) as f64 / 1e9, lat);
        }
    }
    drop(children);
    let mut notes = vec![format!(
        "every relay its own process ({} relays), shared memory, executors waiting: {wait}; CPU is the source+sink process's",
        hops - 1
    )];
    if wait != "block" {
        notes.push(format!(
            "the sink's executor: {}",
            super::describe_anticipation(&anticipated)
        ));
    }
    Ok(meter.finish(
        "relay",
        "myelin",
        format!(
            "processes-shm {wait} {} {}",
            rate_label(p.rate),
            size_label(p.size)
        ),
        rec,
        got * u64::from(p.hops),
        total - got,
        Some(p.hops),
        notes,
    ))
}
