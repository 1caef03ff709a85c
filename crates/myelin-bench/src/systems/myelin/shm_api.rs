//! Ping-pong between two processes through myelin's public API over shared
//! memory: the number a user gets from `Publisher` / `Subscription` across
//! processes, beside the raw limits of the `ipc` scenario.
//!
//! The pong side is this same executable started again with
//! `MYELIN_BENCH_PONG` set (the [`PONG`] role); it echoes every ping
//! from an executor callback (blocking mode) or a busy `take()` loop
//! (polling mode). Messages up to 64 bytes are a plain-old-data type loaned
//! and read in place; larger ones are loaned [`Blob`]s (zero-copy, the
//! contents are not rewritten per message, as in iceoryx2's benchmark).

use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, Publisher, Subscription};

use crate::harness::processes::{Helper, domain, shm_context};
use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns, size_label};
use crate::scenarios::ipc::Wait;
use crate::systems::Role;

const ENV: &str = "MYELIN_BENCH_PONG";

/// The 64-byte plain-old-data ping.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, myelin::Message)]
#[repr(C)]
#[message(pod, name = "myelin_bench/msg/Ping64")]
pub struct Ping64 {
    /// Round-trip number.
    pub seq: u64,
    /// Payload.
    pub pad: [u8; 56],
}

/// myelin's two-process ping-pong in both wait modes, reported under
/// `scenario` (`ipc`, `pingpong`).
pub(super) fn jobs(scenario: &'static str, count: u64, size: usize) -> Vec<Job> {
    Wait::BOTH
        .into_iter()
        .map(|w| {
            Job::new(
                format!("{scenario}/myelin/api {} {}", w.label(), size_label(size)),
                move || {
                    let mut o = run(count, size, w)?;
                    o.record.scenario = scenario.into();
                    Ok(o)
                },
            )
        })
        .collect()
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("ipc", e)
}

fn context(domain: u32) -> Result<Context, BenchError> {
    shm_context(domain, "ipc")
}

/// The pong process: echoes every ping.
pub(super) const PONG: Role = Role {
    env: ENV,
    name: "pong",
    run: pong,
};

/// `domain,size,block|poll`
fn pong(spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [domain, size, wait] = parts[..] else {
        return Err(err(format!("bad {ENV} {spec:?}")));
    };
    let domain: u32 = domain.parse().map_err(err)?;
    let size: usize = size.parse().map_err(err)?;
    let wait = if wait == "poll" {
        Wait::Poll
    } else {
        Wait::Block
    };
    let ctx = context(domain)?;
    let node = ctx.create_node("pong").map_err(err)?;
    if size <= 64 {
        let p = node
            .create_publisher::<Ping64>("pong", QoS::keep_last(1))
            .map_err(err)?;
        echo(&ctx, &node, p, wait, |p: &Publisher<Ping64>, m: &Ping64| {
            let _ = p.loan_uninit().map(|l| l.write(*m).publish());
        })
    } else {
        let p = node
            .create_publisher::<Blob>("pong", QoS::keep_last(1))
            .map_err(err)?;
        echo(
            &ctx,
            &node,
            p,
            wait,
            move |p: &Publisher<Blob>, m: &Blob| {
                if let Ok(mut l) = p.loan_slice(size) {
                    l[..8].copy_from_slice(&m[..8]);
                    let _ = l.publish();
                }
            },
        )
    }
}

fn echo<T: myelin::Message>(
    ctx: &Context,
    node: &Node,
    p: Publisher<T>,
    wait: Wait,
    reply: impl Fn(&Publisher<T>, &T) + Send + 'static,
) -> Result<(), BenchError> {
    // Stop when the parent goes away (stdin closes).
    let c = ctx.clone();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
        c.shutdown();
    });
    match wait {
        Wait::Block => {
            let _sub = node
                .create_subscription("ping", QoS::keep_last(1), move |m: &T| reply(&p, m))
                .map_err(err)?;
            let mut exec = Executor::new();
            exec.add_node(node).map_err(err)?;
            println!("ready");
            exec.spin().map_err(err)
        }
        Wait::Poll => {
            let sub: Subscription<T> = node
                .create_polling_subscription("ping", QoS::keep_last(1), Default::default())
                .map_err(err)?;
            println!("ready");
            while !ctx.is_shut_down() {
                match sub.take() {
                    Some(m) => reply(&p, &m),
                    None => std::hint::spin_loop(),
                }
            }
            Ok(())
        }
    }
}

/// One ping-pong run: `count` measured round trips after a warm-up.
fn run(count: u64, size: usize, wait: Wait) -> Result<Outcome, BenchError> {
    // A domain of its own, so concurrent runs and user graphs are not
    // disturbed (and do not disturb).
    let domain = domain(0);
    let label = wait.label();
    let mut pong =
        Helper::spawn("pong_role", ENV, format!("{domain},{size},{label}")).map_err(err)?;
    pong.expect("ready").map_err(err)?;
    let ctx = context(domain)?;
    let node = ctx.create_node("ping").map_err(err)?;
    let warm = (count / 10).clamp(10, 1000);
    let total = count + warm;
    let mut rec = LatencyRecorder::with_time_series();
    let meter;
    let t_start;
    if size <= 64 {
        let p = node
            .create_publisher::<Ping64>("ping", QoS::keep_last(1))
            .map_err(err)?;
        let s = node
            .create_polling_subscription::<Ping64>("pong", QoS::keep_last(1), Default::default())
            .map_err(err)?;
        wait_matched(&p, &s)?;
        meter = Meter::start();
        t_start = now_ns();
        for i in 0..total {
            let t0 = now_ns();
            p.loan_uninit()
                .map_err(err)?
                .write(Ping64 {
                    seq: i,
                    pad: [0; 56],
                })
                .publish()
                .map_err(err)?;
            let m = receive(&s, wait)?;
            let t1 = now_ns();
            if m.seq != i {
                return Err(err(format!("pong {} for ping {i}", m.seq)));
            }
            if i >= warm {
                rec.record_at((t0 - t_start) as f64 / 1e9, (t1 - t0) / 2);
            }
        }
    } else {
        let p = node
            .create_publisher::<Blob>("ping", QoS::keep_last(1))
            .map_err(err)?;
        let s = node
            .create_polling_subscription::<Blob>("pong", QoS::keep_last(1), Default::default())
            .map_err(err)?;
        wait_matched(&p, &s)?;
        meter = Meter::start();
        t_start = now_ns();
        for i in 0..total {
            let t0 = now_ns();
            let mut l = p.loan_slice(size).map_err(err)?;
            l[..8].copy_from_slice(&i.to_le_bytes());
            l.publish().map_err(err)?;
            let m = receive(&s, wait)?;
            let t1 = now_ns();
            if m[..8] != i.to_le_bytes() {
                return Err(err(format!("wrong pong for ping {i}")));
            }
            if i >= warm {
                rec.record_at((t0 - t_start) as f64 / 1e9, (t1 - t0) / 2);
            }
        }
    }
    let kind = if size <= 64 { "pod" } else { "loaned blob" };
    Ok(meter.finish(
        "ipc",
        "myelin",
        format!("api {label} {} {kind}", size_label(size.max(64))),
        rec,
        total * 2,
        0,
        None,
        vec![
            "one way = round trip / 2 between two processes through Publisher/Subscription over shared memory (zero-copy loans); CPU is the ping side's".into(),
        ],
    ))
}

fn wait_matched<A: myelin::Message, B: myelin::Message>(
    p: &Publisher<A>,
    s: &Subscription<B>,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while p.subscription_count() == 0 || s.matched_count() == 0 {
        if Instant::now() > deadline {
            return Err(err(format!(
                "the pong process never matched within 30 s (ping reaches {} subscription(s), {} publisher(s) reach the ping)",
                p.subscription_count(),
                s.matched_count()
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn receive<T: myelin::Message>(
    s: &Subscription<T>,
    wait: Wait,
) -> Result<myelin::Received<T>, BenchError> {
    match wait {
        Wait::Block => s.wait_for_message(Duration::from_secs(30)).map_err(err),
        Wait::Poll => {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(m) = s.take() {
                    return Ok(m);
                }
                if Instant::now() > deadline {
                    return Err(err("no pong within 30 s"));
                }
                std::hint::spin_loop();
            }
        }
    }
}
