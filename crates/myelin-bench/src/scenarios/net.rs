//! `myelin bench net`: myelin's network transport against raw zenoh with
//! the same configuration, in the same run, across real processes.
//!
//! One zenoh router runs in the benchmark process on a free loopback port;
//! every session (myelin's and the raw ones) is a peer that connects to it
//! from a configuration file (multicast scouting off, gossip on, so peers
//! then talk directly over TCP loopback, as rmw_zenoh's do). A ring of
//! `stages` helper processes forwards each message to the next key; the
//! benchmark process publishes to the first and waits for the last.
//! `stages = 1` is a ping-pong, `stages = 3` a relay across three more
//! processes. Latency is the round trip; a hop is the round trip divided
//! by the `stages + 1` transmissions.
//!
//! * `myelin`: contexts with shared memory off; each stage is a polling
//!   subscription whose thread wakes and republishes (zenoh's thread hands
//!   the message over, as to any executor);
//! * `zenoh callback`: each stage republishes inside zenoh's subscriber
//!   callback (no thread hand-off: zenoh's fastest);
//! * `zenoh thread`: zenoh's callback hands the sample to the stage's own
//!   thread through a channel, which republishes (the same threading as
//!   myelin's).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use myelin::{Blob, Context, QoS};
use myelin_zenoh::zenoh::{self, Wait};

use super::{BenchError, Job, Meter, Outcome, System, now_ns, size_label};
use crate::harness::stats::LatencyRecorder;

const ENV: &str = "MYELIN_BENCH_NET";
const WAIT: Duration = Duration::from_secs(30);

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct NetParams {
    /// Round trips measured (a warm-up is added).
    pub count: u64,
    /// Message size (at least 8 bytes are sent: the sequence number).
    pub size: usize,
}

/// Which implementation a ring runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Myelin,
    ZenohCallback,
    ZenohThread,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Myelin => "myelin",
            Kind::ZenohCallback => "zenoh-callback",
            Kind::ZenohThread => "zenoh-thread",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        [Kind::Myelin, Kind::ZenohCallback, Kind::ZenohThread]
            .into_iter()
            .find(|k| k.label() == s)
    }
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("net", e)
}

/// Plan the jobs.
pub fn plan(p: NetParams, systems: &[System]) -> Result<Vec<Job>, BenchError> {
    if p.count == 0 {
        return Err(BenchError::InvalidArg {
            flag: "count",
            reason: "must be at least 1".into(),
        });
    }
    if !(1..=8 << 20).contains(&p.size) {
        return Err(BenchError::InvalidArg {
            flag: "size",
            reason: format!("{} bytes: must be 1 to 8388608", p.size),
        });
    }
    let mut jobs = Vec::new();
    for stages in [1u32, 3] {
        for s in systems {
            let kinds: &[Kind] = match s {
                System::Myelin => &[Kind::Myelin],
                System::Zenoh => &[Kind::ZenohCallback, Kind::ZenohThread],
                _ => &[],
            };
            for &k in kinds {
                let shape = if stages == 1 {
                    "pingpong"
                } else {
                    "relay 3 hops"
                };
                jobs.push(Job::new(
                    format!("net/{}/{shape} {}", system_of(k), size_label(p.size)),
                    move || run(p, k, stages, "net"),
                ));
            }
        }
    }
    Ok(jobs)
}

/// A myelin-over-zenoh ping-pong between two processes (for `bench
/// pingpong`'s zenoh row): fewer round trips for large messages, which
/// cross TCP loopback.
pub fn pingpong_job(count: u64, size: usize) -> Job {
    let count = if size > 64 << 10 {
        count.min(300)
    } else {
        count.min(5_000)
    };
    Job::new(
        format!("pingpong/myelin/zenoh {}", size_label(size)),
        move || run(NetParams { count, size }, Kind::Myelin, 1, "pingpong"),
    )
}

fn system_of(k: Kind) -> &'static str {
    if k == Kind::Myelin { "myelin" } else { "zenoh" }
}

/// A zenoh router on a free loopback port, and a peer configuration file
/// that connects to it (multicast off); both go when it is dropped.
pub struct LoopbackRouter {
    _session: zenoh::Session,
    /// The session configuration file for the processes.
    pub config: PathBuf,
}

type Router = LoopbackRouter;

impl LoopbackRouter {
    /// Start one.
    pub fn start() -> Result<LoopbackRouter, BenchError> {
        router()
    }
}

impl Drop for LoopbackRouter {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config);
    }
}

fn router() -> Result<Router, BenchError> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(err)?
        .port();
    let endpoint = format!("tcp/127.0.0.1:{port}");
    let cfg = myelin_zenoh::config::router_config(None, std::slice::from_ref(&endpoint), &[])
        .map_err(err)?;
    let session = myelin_zenoh::config::open(cfg).map_err(err)?;
    let config = std::env::temp_dir().join(format!(
        "myelin_bench_net_{}_{}.json5",
        std::process::id(),
        now_ns()
    ));
    std::fs::write(
        &config,
        format!(
            r#"{{ mode: "peer", connect: {{ endpoints: ["{endpoint}"] }}, listen: {{ endpoints: ["tcp/127.0.0.1:0"] }}, scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: true }} }} }}"#
        ),
    )
    .map_err(err)?;
    Ok(Router {
        _session: session,
        config,
    })
}

fn myelin_ctx(config: &Path, domain: u32) -> Result<Context, BenchError> {
    Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(false)
        .zenoh_config(config)
        .build()
        .map_err(err)
}

/// A node `name` reading ring topic `from` and writing ring topic `to`.
fn myelin_hop(
    ctx: &Context,
    name: &str,
    from: u32,
    to: u32,
) -> Result<(myelin::Subscription<Blob>, myelin::Publisher<Blob>), BenchError> {
    let node = ctx.create_node(name).map_err(err)?;
    let out = node
        .create_publisher::<Blob>(&topic(to), QoS::keep_last(16))
        .map_err(err)?;
    let sub = node
        .create_polling_subscription::<Blob>(&topic(from), QoS::keep_last(16), Default::default())
        .map_err(err)?;
    Ok((sub, out))
}

fn raw_session(config: &Path) -> Result<zenoh::Session, BenchError> {
    myelin_zenoh::config::open(myelin_zenoh::config::from_file(config).map_err(err)?).map_err(err)
}

fn topic(i: u32) -> String {
    format!("/bench_net/s{i}")
}

fn raw_key(tag: &str, i: u32) -> String {
    format!("bench_net/{tag}/s{i}")
}

/// Run as a stage if started as one (returns only if not).
pub fn stage_if_requested() {
    crate::harness::processes::run_role(ENV, "net stage", stage);
}

/// `kind,config,domain-or-tag,index,total`: forward key/topic `index` to
/// `index + 1`, `total` messages.
fn stage(spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [kind, config, tag, index, total] = parts[..] else {
        return Err(err(format!("bad {ENV} {spec:?}")));
    };
    let kind = Kind::parse(kind).ok_or_else(|| err(format!("bad kind {kind:?}")))?;
    let config = Path::new(config);
    let i: u32 = index.parse().map_err(err)?;
    let total: u64 = total.parse().map_err(err)?;
    match kind {
        Kind::Myelin => {
            let domain: u32 = tag.parse().map_err(err)?;
            let ctx = myelin_ctx(config, domain)?;
            let (sub, out) = myelin_hop(&ctx, &format!("stage{i}"), i, i + 1)?;
            println!("ready");
            // Messages wait in the subscription's buffer until our
            // publisher has seen the next stage (nothing is sent before).
            wait_for(|| out.subscription_count() > 0)?;
            for _ in 0..total {
                let m = sub.wait_for_message(WAIT).map_err(err)?;
                out.publish(m.into_owned()).map_err(err)?;
            }
        }
        Kind::ZenohCallback => {
            let (s, out) = raw_stage(config, tag, i)?;
            let (tx, rx) = mpsc::channel::<()>();
            let mut left = total;
            let _sub = s
                .declare_subscriber(raw_key(tag, i))
                .callback_mut(move |sample| {
                    let _ = out.put(sample.payload().clone()).wait();
                    left -= 1;
                    if left == 0 {
                        let _ = tx.send(());
                    }
                })
                .wait()
                .map_err(err)?;
            rx.recv_timeout(WAIT * 10).map_err(err)?;
        }
        Kind::ZenohThread => {
            let (s, out) = raw_stage(config, tag, i)?;
            let (_sub, rx) = channel_subscriber(&s, raw_key(tag, i))?;
            for _ in 0..total {
                let p = rx.recv_timeout(WAIT).map_err(err)?;
                out.put(p).wait().map_err(err)?;
            }
        }
    }
    // Let the last message leave before the session closes.
    std::thread::sleep(Duration::from_millis(100));
    Ok(())
}

/// A raw stage's session and publisher to the next stage; says `ready`,
/// then waits until the next stage listens (so the caller subscribes only
/// then: the ping waits for our subscriber before sending).
fn raw_stage(
    config: &Path,
    tag: &str,
    i: u32,
) -> Result<(zenoh::Session, zenoh::pubsub::Publisher<'static>), BenchError> {
    let s = raw_session(config)?;
    let out = s
        .declare_publisher(raw_key(tag, i + 1))
        .wait()
        .map_err(err)?;
    println!("ready");
    wait_matching(&out)?;
    Ok((s, out))
}

/// A raw subscriber whose callback hands each payload to a channel.
fn channel_subscriber(
    s: &zenoh::Session,
    key: String,
) -> Result<
    (
        zenoh::pubsub::Subscriber<()>,
        mpsc::Receiver<zenoh::bytes::ZBytes>,
    ),
    BenchError,
> {
    let (tx, rx) = mpsc::channel();
    let sub = s
        .declare_subscriber(key)
        .callback(move |sample| {
            let _ = tx.send(sample.payload().clone());
        })
        .wait()
        .map_err(err)?;
    Ok((sub, rx))
}

/// `total` round trips: `send` a payload whose first 8 bytes are its
/// sequence number, `recv` the reply's first 8 bytes; each after the
/// `warm`-up is recorded (divided by `div`).
fn round_trips(
    total: u64,
    warm: u64,
    div: u64,
    size: usize,
    rec: &mut LatencyRecorder,
    mut send: impl FnMut(&[u8]) -> Result<(), BenchError>,
    mut recv: impl FnMut() -> Result<[u8; 8], BenchError>,
) -> Result<(), BenchError> {
    let mut payload = vec![0u8; size.max(8)];
    let t_start = now_ns();
    for i in 0..total {
        payload[..8].copy_from_slice(&i.to_le_bytes());
        let t0 = now_ns();
        send(&payload)?;
        let back = recv()?;
        let t1 = now_ns();
        if back != i.to_le_bytes() {
            return Err(err("a reply out of order"));
        }
        if i >= warm {
            rec.record_at((t0 - t_start) as f64 / 1e9, (t1 - t0) / div);
        }
    }
    Ok(())
}

fn seq_of(bytes: &[u8]) -> Result<[u8; 8], BenchError> {
    bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| err("a reply shorter than its sequence number"))
}

/// Wait until a raw zenoh publisher has a matching subscriber.
fn wait_matching(p: &zenoh::pubsub::Publisher<'_>) -> Result<(), BenchError> {
    wait_for(|| p.matching_status().wait().is_ok_and(|m| m.matching()))
}

fn wait_for(mut f: impl FnMut() -> bool) -> Result<(), BenchError> {
    let deadline = std::time::Instant::now() + WAIT;
    while !f() {
        if std::time::Instant::now() > deadline {
            return Err(err("the ring's endpoints never matched"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn run(
    p: NetParams,
    kind: Kind,
    stages: u32,
    scenario: &'static str,
) -> Result<Outcome, BenchError> {
    let r = router()?;
    let warm = (p.count / 10).clamp(10, 500);
    let total = p.count + warm;
    let domain = crate::harness::processes::domain(11);
    let tag = format!("{}_{}", std::process::id(), now_ns());
    let id = if kind == Kind::Myelin {
        domain.to_string()
    } else {
        tag.clone()
    };
    let mut helpers = Vec::new();
    for i in 0..stages {
        let spec = format!("{},{},{id},{i},{total}", kind.label(), r.config.display());
        let mut h = crate::harness::processes::Helper::spawn("net_role", ENV, spec).map_err(err)?;
        h.expect("ready").map_err(err)?;
        helpers.push(h);
    }
    // `bench pingpong` reports one way (round trip / 2) like its other
    // rows; `bench net` the round trip with per-transmission hops.
    let one_way = scenario == "pingpong";
    let div = if one_way { 2 } else { 1 };
    let mut rec = LatencyRecorder::with_time_series();
    let hops = u64::from(stages) + 1;
    let meter;
    match kind {
        Kind::Myelin => {
            let ctx = myelin_ctx(&r.config, domain)?;
            let (back, out) = myelin_hop(&ctx, "ping", stages, 0)?;
            wait_for(|| out.subscription_count() > 0 && back.matched_count() > 0)?;
            meter = Meter::start();
            round_trips(
                total,
                warm,
                div,
                p.size,
                &mut rec,
                |b| out.publish(Blob::from(b)).map_err(err),
                || seq_of(&back.wait_for_message(WAIT).map_err(err)?),
            )?;
        }
        Kind::ZenohCallback | Kind::ZenohThread => {
            let s = raw_session(&r.config)?;
            let out = s.declare_publisher(raw_key(&tag, 0)).wait().map_err(err)?;
            let (_sub, rx) = channel_subscriber(&s, raw_key(&tag, stages))?;
            wait_matching(&out)?;
            // The last stage's publisher matches our subscriber.
            std::thread::sleep(Duration::from_millis(200));
            meter = Meter::start();
            round_trips(
                total,
                warm,
                div,
                p.size,
                &mut rec,
                |b| out.put(b.to_vec()).wait().map_err(err),
                || seq_of(&rx.recv_timeout(WAIT).map_err(err)?.to_bytes()),
            )?;
        }
    }
    drop(helpers);
    let shape = if one_way {
        "shm off, one way".to_string()
    } else if stages == 1 {
        "pingpong".to_string()
    } else {
        format!("relay {stages} processes")
    };
    Ok(meter.finish(
        scenario,
        system_of(kind),
        format!(
            "{} {shape} {}",
            if one_way { "zenoh" } else { kind.label() },
            size_label(p.size)
        ),
        rec,
        total * hops,
        0,
        (!one_way).then_some(hops as u32),
        vec![format!(
            "zenoh 1.x peers through a router on 127.0.0.1 (TCP loopback, multicast off); {} process(es) in the ring besides this one; latency = the round trip through the ring, hop = round trip / {hops}; CPU is this process's only",
            stages
        )],
    ))
}
