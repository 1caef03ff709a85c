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
//! Each system that takes part gives a [`NetRing`]: its ways of forwarding
//! (config labels), a stage and the measuring end. Today:
//!
//! * `myelin`: contexts with shared memory off; each stage is a polling
//!   subscription whose thread wakes and republishes (zenoh's thread hands
//!   the message over, as to any executor);
//! * `myelin-image`: the same carrying `sensor_msgs/Image`s in CDR (as to
//!   and from ROS 2 nodes), the payload as their pixels;
//! * `zenoh-callback`: each stage republishes inside zenoh's subscriber
//!   callback (no thread hand-off: zenoh's fastest);
//! * `zenoh-thread`: zenoh's callback hands the sample to the stage's own
//!   thread through a channel, which republishes (the same threading as
//!   myelin's).
//!
//! Every message of a ring is reliable and blocks its publisher rather
//! than being dropped when zenoh's queue is full (myelin: reliable
//! keep_all, which it maps to zenoh's `Block` as rmw_zenoh does; raw
//! zenoh: `CongestionControl::Block`). A ring has one message in flight,
//! so a dropped one is not a slower measurement but a stalled run: with
//! zenoh's default `Drop`, a 4.6 MB frame whose fragments waited longer
//! than zenoh's fragment drop limit (50 ms) behind a 1 Gbit/s link on a
//! slow machine was dropped (seen in CI) and the run failed after
//! 30 s.
//!
//! Service modes (ping-pong only, shape `service`): the stage serves an
//! echo service and the measuring end calls it, once per round trip.
//!
//! * `myelin-service`: a myelin server and client of a service type (the
//!   path one myelin process takes to another's service over zenoh);
//! * `zenoh-queryable`: a raw zenoh queryable that replies with the
//!   query's payload, called with `get` (target all complete, no
//!   consolidation: what rmw_zenoh's services do; the baseline).

use std::path::PathBuf;
use std::time::Duration;

use crate::harness::processes::{Helper, domain, run_role};
use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns, size_label};
use crate::systems::{self, System};

const ENV: &str = "MYELIN_BENCH_NET";
/// How long any step of a ring may take.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct NetParams {
    /// Round trips measured (a warm-up is added).
    pub count: u64,
    /// Message size (at least 8 bytes are sent: the sequence number).
    pub size: usize,
    /// Across two hosts of the test bed (network namespaces, root) instead
    /// of loopback: ping-pong only.
    pub hosts: bool,
}

/// A system's part in the ring.
#[derive(Debug, Clone, Copy)]
pub struct NetRing {
    /// Its ways of forwarding, each a run and its config label.
    pub modes: &'static [&'static str],
    /// A stage process: forward `total` messages from ring position
    /// `index` to `index + 1`. It says `ready` on stdout once listening,
    /// and after its last message waits for `until_released` before it
    /// closes its session.
    pub stage: fn(ring: &Ring, index: u32, total: u64) -> Result<(), BenchError>,
    /// The measuring end: publishes to position 0, receives from position
    /// `stages`; returns once both directions are matched.
    pub open: fn(ring: &Ring, stages: u32) -> OpenedEnd,
}

/// What every process of one ring shares.
#[derive(Debug, Clone)]
pub struct Ring {
    /// The system's way of forwarding (one of [`NetRing::modes`]).
    pub mode: &'static str,
    /// The session configuration file: a peer connecting to the run's
    /// router.
    pub config: PathBuf,
    /// The domain of the run (for myelin contexts).
    pub domain: u32,
    /// A tag unique to the run (for raw key expressions).
    pub tag: String,
}

/// A measuring end, open with both directions matched, or why not.
pub type OpenedEnd = Result<Box<dyn RingEnd>, BenchError>;

/// The measuring end of a ring.
pub trait RingEnd {
    /// Send a payload into the ring.
    fn send(&mut self, payload: &[u8]) -> Result<(), BenchError>;
    /// The first 8 bytes (the sequence number) of the next reply.
    fn recv(&mut self) -> Result<[u8; 8], BenchError>;
    /// [`recv`](Self::recv), or `None` after `wait` without a reply (a
    /// probe that the ring lost). Ends that cannot wait less block as
    /// `recv` does.
    fn recv_within(&mut self, wait: Duration) -> Result<Option<[u8; 8]>, BenchError> {
        let _ = wait;
        self.recv().map(Some)
    }
}

/// The sequence number of a probe: stages forward it without counting
/// it, and the measuring end resends it until one comes back (across
/// hosts, a subscriber's token can reach the publisher's side before the
/// routers' route for its samples does, and a ping-pong whose first
/// message is lost on the way waits for ever).
pub(crate) const PROBE: [u8; 8] = [0xff; 8];

/// Whether a payload is a [`PROBE`].
pub(crate) fn is_probe(payload: &[u8]) -> bool {
    payload.starts_with(&PROBE)
}

/// A setup error of a `net` run.
pub(crate) fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("net", e)
}

/// Plan the jobs.
pub fn plan(p: NetParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
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
    if p.hosts {
        for s in systems {
            let Some(ring) = s.runs.net else { continue };
            for &mode in ring.modes.iter().filter(|m| !is_service(m)) {
                let system = s.name;
                jobs.push(Job::new(
                    format!("net/{system}/hosts pingpong {}", size_label(p.size)),
                    move || run_hosts(p, system, mode),
                ));
            }
        }
        if systems.iter().any(|s| s.name == "cyclonedds") {
            let secs = if p.count <= 500 { 3 } else { 10 };
            jobs.push(Job::new(
                format!("net/cyclonedds/hosts pingpong {}", size_label(p.size)),
                move || crate::systems::cyclonedds::run_hosts(p.size, secs),
            ));
        }
        return Ok(jobs);
    }
    for stages in [1u32, 3] {
        for s in systems {
            let Some(ring) = s.runs.net else { continue };
            for &mode in ring.modes {
                let shape = match (is_service(mode), stages) {
                    (true, 1) => "service",
                    (true, _) => continue,
                    (false, 1) => "pingpong",
                    (false, _) => "relay 3 hops",
                };
                let system = s.name;
                jobs.push(Job::new(
                    format!("net/{system}/{shape} {}", size_label(p.size)),
                    move || run(p, system, ring, mode, stages, "net"),
                ));
            }
        }
    }
    // Transient-local history to a late joiner, myelin beside raw zenoh.
    if systems.iter().any(|s| s.name == "myelin") && systems.iter().any(|s| s.name == "zenoh") {
        jobs.extend(super::late_joiner::plan((p.count / 100).clamp(5, 30)));
    }
    Ok(jobs)
}

/// Whether a ring mode is a service (a call and its reply per round trip).
pub(crate) fn is_service(mode: &str) -> bool {
    mode.ends_with("-service") || mode.ends_with("-queryable")
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

/// Run as a stage (or, across hosts, the measuring end) if started as
/// one (returns only if not).
pub fn stage_if_requested() {
    run_role(ENV, "net stage", stage);
    run_role(END_ENV, "net end", end_role);
    super::late_joiner::publisher_if_requested();
}

/// The measuring end across hosts: `system,mode,config,domain,tag,total,
/// warm,size,file`; writes the recorded round trips (ns, u64 little
/// endian) to `file` and says `done`.
const END_ENV: &str = "MYELIN_BENCH_NET_END";

fn end_role(spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [system, mode, config, domain, tag, total, warm, size, file] = parts[..] else {
        return Err(err(format!("bad {END_ENV} {spec:?}")));
    };
    let (ring, at) = ring_of(system, mode, config, domain, tag)?;
    let total: u64 = total.parse().map_err(err)?;
    let warm: u64 = warm.parse().map_err(err)?;
    let size: usize = size.parse().map_err(err)?;
    let mut end = (ring.open)(&at, 1)?;
    let mut samples = Vec::with_capacity(total as usize * 8);
    probe(end.as_mut())?;
    round_trips(total, warm, size, end.as_mut(), |_, rtt| {
        samples.extend_from_slice(&rtt.to_le_bytes())
    })?;
    drop(end);
    std::fs::write(file, samples).map_err(err)?;
    println!("done");
    Ok(())
}

/// A ping-pong between two hosts of the test bed: a router per host (the
/// README's robot and base station), the stage on host 1, the measuring
/// end on host 0, everything in child processes of this one.
fn run_hosts(
    p: NetParams,
    system: &'static str,
    mode: &'static str,
) -> Result<Outcome, BenchError> {
    use crate::testbed::TestBed;
    let bed = TestBed::new(2).map_err(err)?;
    // Gigabit Ethernet between the hosts.
    for h in 0..2 {
        bed.limit_rate(h, Some(1_000_000_000)).map_err(err)?;
    }
    let exe = std::env::current_exe().map_err(err)?;
    let mut routers = Vec::new();
    for host in [1, 0] {
        let child = bed
            .command(host, &exe)
            .args(bed.router_args(host))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(err)?;
        routers.push(KillOnDrop(child));
    }
    let config = std::env::temp_dir().join(format!(
        "myelin_bench_hosts_{}_{}.json5",
        std::process::id(),
        now_ns()
    ));
    std::fs::write(
        &config,
        r#"{ mode: "peer", connect: { endpoints: ["tcp/127.0.0.1:7447"], timeout_ms: -1, exit_on_failure: false, retry: { period_init_ms: 100, period_max_ms: 1000, period_increase_factor: 2 } }, listen: { endpoints: ["tcp/127.0.0.1:0"] }, scouting: { multicast: { enabled: false }, gossip: { enabled: true } } }"#,
    )
    .map_err(err)?;
    let _config = RemoveOnDrop(config.clone());
    let warm = (p.count / 10).clamp(10, 500);
    let total = p.count + warm;
    let at = Ring {
        mode,
        config: config.clone(),
        domain: domain(12),
        tag: format!("{}_{}", std::process::id(), now_ns()),
    };
    let spec = format!(
        "{system},{mode},{},{},{},0,{total}",
        config.display(),
        at.domain,
        at.tag
    );
    let mut stage = bed.command(1, &exe);
    stage.env(ENV, spec);
    let mut stage = Helper::from_command(stage).map_err(err)?;
    stage.expect("ready").map_err(err)?;
    let samples_file = RemoveOnDrop(std::env::temp_dir().join(format!(
        "myelin_bench_hosts_{}_{}.bin",
        std::process::id(),
        now_ns()
    )));
    let end_spec = format!(
        "{system},{mode},{},{},{},{total},{warm},{},{}",
        config.display(),
        at.domain,
        at.tag,
        p.size,
        samples_file.0.display()
    );
    let mut end = bed.command(0, &exe);
    end.env(END_ENV, end_spec);
    let meter = Meter::start();
    let mut end = Helper::from_command(end).map_err(err)?;
    end.expect("done").map_err(err)?;
    let bytes = std::fs::read(&samples_file.0).map_err(err)?;
    let mut rec = LatencyRecorder::new();
    for chunk in bytes.chunks_exact(8) {
        rec.record(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
    }
    drop(end);
    drop(stage);
    drop(routers);
    let mut outcome = meter.finish(
        "net",
        system,
        format!("{mode} hosts pingpong {}", size_label(p.size)),
        rec,
        total * 2,
        0,
        Some(2),
        vec![
            "two hosts: network namespaces on a bridge (veths limited to 1 Gbit/s), a zenoh router per host (robot: loopback + connect; base: listen on all); latency = the round trip, hop = round trip / 2; CPU not measured (every process is a child of this one)".into(),
        ],
    );
    outcome.record.cpu_percent = 0.0;
    outcome.record.cpu_ns_per_msg = 0.0;
    Ok(outcome)
}

/// A child killed and reaped when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A file removed when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The ring of `system` in `mode`, and what its processes share, from a
/// helper's spec.
fn ring_of(
    system: &str,
    mode: &str,
    config: &str,
    domain: &str,
    tag: &str,
) -> Result<(NetRing, Ring), BenchError> {
    let ring = systems::named(system)
        .and_then(|s| s.runs.net)
        .ok_or_else(|| err(format!("bad system {system:?}")))?;
    let mode = ring
        .modes
        .iter()
        .find(|m| **m == mode)
        .ok_or_else(|| err(format!("bad kind {mode:?}")))?;
    let at = Ring {
        mode,
        config: PathBuf::from(config),
        domain: domain.parse().map_err(err)?,
        tag: tag.to_string(),
    };
    Ok((ring, at))
}

/// `system,mode,config,domain,tag,index,total`: the system's stage
/// forwards position `index` to `index + 1`, `total` messages.
fn stage(spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [system, mode, config, domain, tag, index, total] = parts[..] else {
        return Err(err(format!("bad {ENV} {spec:?}")));
    };
    let (ring, at) = ring_of(system, mode, config, domain, tag)?;
    let i: u32 = index.parse().map_err(err)?;
    let total: u64 = total.parse().map_err(err)?;
    (ring.stage)(&at, i, total)
}

/// Wait until the benchmark closes this helper's stdin (it does once the
/// measuring end has every reply, or gave up), at most [`WAIT`]. A stage
/// calls it after its last message, with its session still open: `put`
/// returns once a message is queued, and a session closed right after it
/// lost what zenoh had not written yet (a 4.6 MB frame is 37 ms of a
/// 1 Gbit/s link, more than the socket's buffer holds; a fixed 100 ms
/// grace after the close guarded nothing, and on a `tc`-limited link the
/// ring's last message never came back).
pub(crate) fn until_released() {
    let (tx, rx) = std::sync::mpsc::channel();
    // The reader stays blocked if stdin never closes; the process exits
    // after the wait all the same.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(WAIT);
}

/// Send [`PROBE`]s until one comes back around the ring (the route is
/// then there for the first message), up to [`WAIT`]. A probe is its
/// sequence number alone, whatever the run's size: several 4.6 MB probes
/// in flight at once on a slow machine congested the link, and zenoh
/// dropped a measured message behind them (seen in CI).
fn probe(end: &mut dyn RingEnd) -> Result<(), BenchError> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        end.send(&PROBE)?;
        if end.recv_within(Duration::from_millis(250))? == Some(PROBE) {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(err("no probe came back around the ring"));
        }
    }
}

/// `total` round trips: send a payload whose first 8 bytes are its
/// sequence number, receive the reply's first 8 bytes; each after the
/// `warm`-up goes to `record(ns since the first, round trip ns)`.
fn round_trips(
    total: u64,
    warm: u64,
    size: usize,
    end: &mut dyn RingEnd,
    mut record: impl FnMut(u64, u64),
) -> Result<(), BenchError> {
    let mut payload = vec![0u8; size.max(8)];
    let t_start = now_ns();
    for i in 0..total {
        payload[..8].copy_from_slice(&i.to_le_bytes());
        let t0 = now_ns();
        end.send(&payload)?;
        // (A late reply to a probe is skipped.)
        let back = loop {
            let b = end.recv()?;
            if b != PROBE {
                break b;
            }
        };
        let t1 = now_ns();
        if back != i.to_le_bytes() {
            return Err(err("a reply out of order"));
        }
        if i >= warm {
            record(t0 - t_start, t1 - t0);
        }
    }
    Ok(())
}

/// The sequence number at the head of a reply.
pub(crate) fn seq_of(bytes: &[u8]) -> Result<[u8; 8], BenchError> {
    bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| err("a reply shorter than its sequence number"))
}

/// Wait until `f` holds (the ring's endpoints matched), up to [`WAIT`].
pub(crate) fn wait_for(mut f: impl FnMut() -> bool) -> Result<(), BenchError> {
    let deadline = std::time::Instant::now() + WAIT;
    while !f() {
        if std::time::Instant::now() > deadline {
            return Err(err("the ring's endpoints never matched"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// One ring of `stages` helper processes for `system` in `mode`, reported
/// under `scenario` (`net`, or `pingpong` for myelin's zenoh row).
pub(crate) fn run(
    p: NetParams,
    system: &'static str,
    ring: NetRing,
    mode: &'static str,
    stages: u32,
    scenario: &'static str,
) -> Result<Outcome, BenchError> {
    let r = router()?;
    let warm = (p.count / 10).clamp(10, 500);
    let total = p.count + warm;
    let at = Ring {
        mode,
        config: r.config.clone(),
        domain: domain(11),
        tag: format!("{}_{}", std::process::id(), now_ns()),
    };
    let mut helpers = Vec::new();
    for i in 0..stages {
        let spec = format!(
            "{system},{mode},{},{},{},{i},{total}",
            at.config.display(),
            at.domain,
            at.tag
        );
        let mut h = Helper::spawn("net_role", ENV, spec).map_err(err)?;
        h.expect("ready").map_err(err)?;
        helpers.push(h);
    }
    // `bench pingpong` reports one way (round trip / 2) like its other
    // rows; `bench net` the round trip with per-transmission hops.
    let one_way = scenario == "pingpong";
    let div = if one_way { 2 } else { 1 };
    let mut rec = LatencyRecorder::with_time_series();
    let hops = u64::from(stages) + 1;
    let mut end = (ring.open)(&at, stages)?;
    let meter = Meter::start();
    round_trips(total, warm, p.size, end.as_mut(), |since, rtt| {
        rec.record_at(since as f64 / 1e9, rtt / div)
    })?;
    drop(end);
    drop(helpers);
    let shape = if one_way {
        "shm off, one way".to_string()
    } else if is_service(mode) {
        "service round trip".to_string()
    } else if stages == 1 {
        "pingpong".to_string()
    } else {
        format!("relay {stages} processes")
    };
    Ok(meter.finish(
        scenario,
        system,
        format!(
            "{} {shape} {}",
            if one_way { "zenoh" } else { mode },
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
