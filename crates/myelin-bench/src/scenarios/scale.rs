//! `myelin bench scale`: what a population of idle processes costs, and
//! how fast a late joiner finds them.
//!
//! For each transport and each population N, the run starts N *member*
//! processes at once (this executable again, as a helper). Member `i` has
//! one node with M endpoints: M/2 publishers on its own topics
//! `/scale/p<i>/t<j>` (each publishes one message, then the member idles;
//! `t0` is transient local, keep last 1) and M/2 subscriptions to the
//! topics of member `i-1`, so every topic has one publisher and one
//! subscription, as in a robot's pipeline. Once every member has matched
//! its subscriptions the run measures, over an idle window:
//!
//! * CPU time of every member (the scheduler's run time of all its
//!   threads, `/proc/<pid>/task/*/schedstat`), in total and per process,
//!   and of the zenoh router where there is one;
//! * RSS per process (`VmRSS`);
//! * this user's shared-memory objects and the bytes they hold (allocated
//!   blocks), against the count before the run.
//!
//! Then a *late joiner* starts: it subscribes to every member's `t0`
//! (transient local, so history answers at once) and reports, from before
//! its context was built, when every subscription had matched its
//! publisher, when the first message arrived and when one from every
//! member had. Last, every member is told to exit (stdin closes) and the
//! shared-memory objects are counted again: a clean exit leaves none.
//!
//! Transports: `shm` (shared memory only), `zenoh` (rmw_zenoh's mapping:
//! peers with gossip through one router on a loopback port, which connect
//! to each other: a full mesh; shared memory off) and `zenoh-client`
//! (every process a zenoh client of the router: a star); and `hosts`
//! (myelin's default, shared memory and zenoh, on two hosts of the test
//! bed with a router each: members alternate between the hosts, so every
//! subscription's publisher is on the other host; the late joiner is on
//! host 0 and finds half the population over shared memory, half through
//! the routers).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use myelin::{Context, Executor, QoS};
use serde::{Deserialize, Serialize};

use crate::harness::BenchError;
use crate::harness::processes::{domain, run_role};
use crate::testbed::TestBed;

const ENV: &str = "MYELIN_BENCH_SCALE";

/// How long the members of a population get to match each other.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(120);

/// How the processes of a scale run talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScaleTransport {
    /// Shared memory only (no network).
    Shm,
    /// zenoh peers (rmw_zenoh's default: gossip, direct links between
    /// peers) through one router; shared memory off.
    Zenoh,
    /// zenoh clients of one router; shared memory off.
    ZenohClient,
    /// myelin's default (shared memory on a host, zenoh peers between
    /// hosts) on two hosts of the test bed, members alternating between
    /// them, a router per host joined as the README's robot and base
    /// station: every subscription's publisher is on the other host.
    /// Needs root (network namespaces).
    Hosts,
}

impl ScaleTransport {
    /// The name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ScaleTransport::Shm => "shm",
            ScaleTransport::Zenoh => "zenoh",
            ScaleTransport::ZenohClient => "zenoh-client",
            ScaleTransport::Hosts => "hosts",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Result<ScaleTransport, BenchError> {
        match s {
            "shm" => Ok(ScaleTransport::Shm),
            "zenoh" => Ok(ScaleTransport::Zenoh),
            "zenoh-client" => Ok(ScaleTransport::ZenohClient),
            "hosts" => Ok(ScaleTransport::Hosts),
            _ => Err(BenchError::InvalidArg {
                flag: "transport",
                reason: format!("{s:?}: scale runs on shm, zenoh, zenoh-client or hosts"),
            }),
        }
    }

    /// zenoh alone, through one router on this host's loopback.
    fn networked(self) -> bool {
        matches!(self, ScaleTransport::Zenoh | ScaleTransport::ZenohClient)
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ScaleParams {
    /// Populations (numbers of member processes), each run in turn.
    pub populations: Vec<usize>,
    /// Endpoints per member (half publishers, half subscriptions; at
    /// least 2).
    pub endpoints: usize,
    /// The idle window CPU is measured over.
    pub idle: Duration,
    /// Transports, each run at every population.
    pub transports: Vec<ScaleTransport>,
}

impl ScaleParams {
    fn validate(&self) -> Result<(), BenchError> {
        let bad = |flag, reason: String| Err(BenchError::InvalidArg { flag, reason });
        if self.populations.is_empty() || self.populations.iter().any(|&n| !(2..=1000).contains(&n))
        {
            return bad(
                "population",
                format!(
                    "{:?}: each population is 2 to 1000 processes",
                    self.populations
                ),
            );
        }
        if !(2..=200).contains(&self.endpoints) {
            return bad(
                "endpoints",
                format!("{}: 2 to 200 endpoints per process", self.endpoints),
            );
        }
        Ok(())
    }
}

/// One population on one transport.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScaleRow {
    /// The transport.
    pub transport: ScaleTransport,
    /// Member processes.
    pub n: usize,
    /// Endpoints per member.
    pub endpoints: usize,
    /// Members whose subscriptions all matched within [`SETTLE_LIMIT`].
    pub matched: usize,
    /// From the first start to every member matched, or to the limit
    /// (ms).
    pub settle_ms: f64,
    /// CPU of all members over the idle window, per second of it (ms/s).
    pub idle_total_ms_per_s: f64,
    /// The same per member (ms/s).
    pub idle_per_process_ms_per_s: f64,
    /// The busiest member (ms/s).
    pub idle_max_ms_per_s: f64,
    /// The router's CPU over the window (ms/s), where there is one.
    pub router_ms_per_s: Option<f64>,
    /// Mean resident memory per member (MiB).
    pub rss_mib: f64,
    /// Mean private memory per member (MiB): `RssAnon`, its heap and
    /// stacks. RSS also counts the executable's file-backed pages, and
    /// how many of those a process has mapped follows what the page
    /// cache holds of the binary file: the same binary read 11 MiB RSS
    /// per member, and 13 MiB copied to a new file just before (all of
    /// it `RssFile`). Compare builds by this column.
    #[serde(default)]
    pub anon_mib: f64,
    /// This user's shared-memory objects added by the members.
    pub shm_objects: i64,
    /// Bytes they hold (allocated).
    pub shm_bytes: i64,
    /// The late joiner: building its context (ms).
    pub joiner_context_ms: f64,
    /// The late joiner: every subscription matched (ms from its start).
    pub joiner_matched_ms: f64,
    /// The late joiner: first message (ms from its start).
    pub joiner_first_ms: f64,
    /// The late joiner: a message from every member (ms from its start).
    pub joiner_all_ms: f64,
    /// Shared-memory objects left after every member exited cleanly
    /// (against the count before the run).
    pub left_after_exit: i64,
}

/// Run as a member or late joiner if started as one (returns only if not).
pub fn member_if_requested() {
    run_role(ENV, "scale member", role);
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("scale", e)
}

/// What a helper is told: `role,transport,config,domain,index,n,m`.
struct Spec {
    joiner: bool,
    transport: ScaleTransport,
    config: PathBuf,
    domain: u32,
    index: usize,
    n: usize,
    m: usize,
}

impl Spec {
    fn encode(&self) -> String {
        format!(
            "{},{},{},{},{},{},{}",
            if self.joiner { "joiner" } else { "member" },
            self.transport.name(),
            self.config.display(),
            self.domain,
            self.index,
            self.n,
            self.m
        )
    }

    fn decode(s: &str) -> Result<Spec, BenchError> {
        let p: Vec<&str> = s.split(',').collect();
        let [role, transport, config, domain, index, n, m] = p[..] else {
            return Err(err(format!("bad {ENV} {s:?}")));
        };
        Ok(Spec {
            joiner: role == "joiner",
            transport: ScaleTransport::parse(transport)?,
            config: PathBuf::from(config),
            domain: domain.parse().map_err(err)?,
            index: index.parse().map_err(err)?,
            n: n.parse().map_err(err)?,
            m: m.parse().map_err(err)?,
        })
    }

    fn context(&self) -> Result<Context, BenchError> {
        let b = Context::builder()
            .domain_id(self.domain)
            .handle_signals(false)
            .type_description_service(false);
        let b = match self.transport {
            ScaleTransport::Shm => b.shared_memory(true).network(false),
            // The default session: a peer of the host's router on
            // tcp/127.0.0.1:7447.
            ScaleTransport::Hosts => b.shared_memory(true).network(true),
            ScaleTransport::Zenoh | ScaleTransport::ZenohClient => b
                .shared_memory(false)
                .network(true)
                .zenoh_config(&self.config),
        };
        b.build().map_err(err)
    }
}

fn topic(member: usize, j: usize) -> String {
    format!("/scale/p{member}/t{j}")
}

/// `t0` keeps its last message for late joiners; the others are volatile.
fn qos(j: usize) -> QoS {
    if j == 0 {
        QoS::keep_last(1).transient_local()
    } else {
        QoS::keep_last(10)
    }
}

fn role(spec: &str) -> Result<(), BenchError> {
    let spec = Spec::decode(spec)?;
    if spec.joiner {
        joiner(&spec)
    } else {
        member(&spec)
    }
}

/// A member: publish on its own topics once a second, subscribe to the
/// previous member's; say `matched` once every subscription has its
/// publisher; exit when stdin closes.
fn member(spec: &Spec) -> Result<(), BenchError> {
    let ctx = spec.context()?;
    let node = ctx
        .create_node(&format!("scale_{}", spec.index))
        .map_err(err)?;
    let pubs = spec.m / 2;
    let subs = spec.m - pubs;
    let mut publishers = Vec::new();
    for j in 0..pubs {
        publishers.push(
            node.create_publisher::<u64>(&topic(spec.index, j), qos(j))
                .map_err(err)?,
        );
    }
    let prev = (spec.index + spec.n - 1) % spec.n;
    let mut subscriptions = Vec::new();
    for j in 0..subs {
        // A member with more subscriptions than its neighbour has
        // publishers subscribes to the neighbour's topics again.
        let t = topic(prev, j % pubs.max(1));
        subscriptions.push(
            node.create_subscription::<u64, _>(&t, qos(j % pubs.max(1)), |_m: u64| {})
                .map_err(err)?,
        );
    }
    // One message each, kept for late joiners on `t0` (transient local);
    // then the member idles.
    for p in &publishers {
        p.publish(0).map_err(err)?;
    }
    let stopper = ctx.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        stopper.shutdown();
    });
    let watch = std::thread::spawn(move || {
        while !subscriptions.iter().all(|s| s.matched_count() > 0) {
            std::thread::sleep(Duration::from_millis(5));
        }
        println!("matched");
        subscriptions
    });
    let mut exec = Executor::new();
    exec.add_node(&node).map_err(err)?;
    exec.spin().map_err(err)?;
    drop(watch);
    drop(publishers);
    Ok(())
}

/// The late joiner: one subscription to every member's `t0`; prints
/// `joined <context ms> <matched ms> <first ms> <all ms>` (from before
/// the context was built), or `-` for what did not happen in 30 s.
fn joiner(spec: &Spec) -> Result<(), BenchError> {
    let start = Instant::now();
    let ctx = spec.context()?;
    let context_ms = ms(start.elapsed());
    let node = ctx.create_node("scale_late_joiner").map_err(err)?;
    let subs: Vec<_> = (0..spec.n)
        .map(|i| node.create_polling_subscription::<u64>(&topic(i, 0), qos(0), Default::default()))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let created_ms = ms(start.elapsed());
    let mut heard = vec![false; spec.n];
    let (mut matched, mut first, mut all) = (None, None, None);
    let deadline = start + Duration::from_secs(30);
    while (matched.is_none() || all.is_none()) && Instant::now() < deadline {
        for (i, s) in subs.iter().enumerate() {
            if s.take().is_some() {
                heard[i] = true;
                first.get_or_insert_with(|| ms(start.elapsed()));
            }
        }
        if all.is_none() && heard.iter().all(|h| *h) {
            all = Some(ms(start.elapsed()));
        }
        if matched.is_none() && subs.iter().all(|s| s.matched_count() > 0) {
            matched = Some(ms(start.elapsed()));
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    eprintln!(
        "joiner: context {context_ms:.1} ms, {} subscriptions created at {created_ms:.1} ms",
        spec.n
    );
    println!(
        "joined {context_ms:.3} {} {} {}",
        show(matched),
        show(first),
        show(all)
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A started helper; a thread reads its output lines.
struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> Result<Proc, BenchError> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| err(format!("starting a helper process: {e}")))?;
        let out = BufReader::new(child.stdout.take().expect("piped"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(Proc { child, lines })
    }

    /// The next line that starts with `word`; `Ok(None)` if `deadline`
    /// passes first; an error quoting what the helper said if it exits
    /// first.
    fn expect_by(&mut self, word: &str, deadline: Instant) -> Result<Option<String>, BenchError> {
        let mut said = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(word) => return Ok(Some(line.trim().to_string())),
                Ok(line) => {
                    said.push_str(&line);
                    said.push('\n');
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return Ok(None),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(err(format!(
                        "process {} exited before saying {word:?}: {}",
                        self.child.id(),
                        said.trim()
                    )));
                }
            }
        }
    }

    /// [`expect_by`](Self::expect_by) with a minute to answer.
    fn expect(&mut self, word: &str) -> Result<String, BenchError> {
        self.expect_by(word, Instant::now() + Duration::from_secs(60))?
            .ok_or_else(|| err(format!("process {} never said {word:?}", self.child.id())))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait until the helper has exited by itself (its context removed
    /// what it made in shared memory), up to `deadline`; dropping it
    /// before kills it, which leaves its objects to whoever notices.
    fn wait_exit(&mut self, deadline: Instant) -> bool {
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return true,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => return false,
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Normally already waited for; a run that failed halfway kills
        // what it started.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// CPU time of a process so far: the sum over its threads of the time
/// the scheduler ran them (`/proc/<pid>/task/*/schedstat`, in ns; the
/// tick-based `utime`/`stime` of `/proc/<pid>/stat` count in 10 ms steps,
/// too coarse for an idle process over a few seconds).
fn cpu_time(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

/// A memory figure of a process (bytes) from `/proc/<pid>/status`: the
/// line `key:` (`VmRSS`, resident; `RssAnon`, private), in KiB there.
fn status_bytes(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// This user's shared-memory objects: how many, and the bytes they hold.
fn shm_objects() -> Vec<(String, i64)> {
    shm_names_in(&myelin_shm::segment_dir())
}

/// How many objects, and their bytes.
fn count(objects: &[(String, i64)]) -> (i64, i64) {
    (objects.len() as i64, objects.iter().map(|o| o.1).sum())
}

/// This user's shared-memory objects in `dir` (a test-bed host's
/// `/dev/shm`, seen from outside): each name with the bytes it holds.
fn shm_names_in(dir: &Path) -> Vec<(String, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mine = format!("myelin_{}_", rustix::process::getuid().as_raw());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&mine) {
            let bytes = e.metadata().map_or(0, |m| m.blocks() as i64 * 512);
            found.push((format!("{}/{name}", dir.display()), bytes));
        }
    }
    found
}

/// A zenoh router (this executable's `router` command) on a free loopback
/// port, and the session configuration that reaches it.
struct Router {
    proc: Proc,
    config: PathBuf,
}

impl Router {
    fn start(transport: ScaleTransport) -> Result<Router, BenchError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(err)?
            .port();
        let endpoint = format!("tcp/127.0.0.1:{port}");
        let exe = std::env::current_exe().map_err(err)?;
        let mut proc = Proc::spawn(
            Command::new(exe)
                .args(["router", "--listen", &endpoint])
                .env_remove(ENV),
        )?;
        proc.expect("zenoh router")?;
        let config = std::env::temp_dir().join(format!(
            "myelin_bench_scale_{}_{}.json5",
            std::process::id(),
            transport.name()
        ));
        let session = match transport {
            ScaleTransport::ZenohClient => format!(
                r#"{{ mode: "client", connect: {{ endpoints: ["{endpoint}"], timeout_ms: 60000 }}, scouting: {{ multicast: {{ enabled: false }} }} }}"#
            ),
            _ => format!(
                r#"{{ mode: "peer", connect: {{ endpoints: ["{endpoint}"] }}, listen: {{ endpoints: ["tcp/127.0.0.1:0"] }}, scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: true }} }} }}"#
            ),
        };
        std::fs::write(&config, session).map_err(err)?;
        Ok(Router { proc, config })
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config);
    }
}

fn helper(spec: &Spec, bed: Option<&TestBed>) -> Result<Proc, BenchError> {
    let exe = std::env::current_exe().map_err(err)?;
    match bed {
        // Member i on host i % 2; the joiner (index n) on host 0.
        Some(bed) => Proc::spawn(
            bed.command(spec.index % 2 * usize::from(!spec.joiner), exe)
                .env(ENV, spec.encode()),
        ),
        None => Proc::spawn(Command::new(exe).env(ENV, spec.encode())),
    }
}

/// Two hosts of the test bed with a router each, as the README's base
/// station (host 1: listens on its address) and robot (host 0: listens on
/// loopback, connects to host 1's router).
struct Hosts {
    routers: Vec<Proc>,
    bed: TestBed,
}

impl Hosts {
    fn start() -> Result<Hosts, BenchError> {
        let bed = TestBed::new(2).map_err(|e| err(format!("scale on hosts: {e}")))?;
        let exe = std::env::current_exe().map_err(err)?;
        let mut routers = Vec::new();
        for host in [1, 0] {
            let mut proc = Proc::spawn(
                bed.command(host, &exe)
                    .args(bed.router_args(host))
                    .env_remove(ENV),
            )?;
            proc.expect("zenoh router")?;
            routers.push(proc);
        }
        Ok(Hosts { routers, bed })
    }

    /// This user's shared-memory objects on both hosts.
    fn shm_objects(&self) -> Vec<(String, i64)> {
        (0..self.bed.len())
            .flat_map(|h| shm_names_in(&self.bed.host(h).shm))
            .collect()
    }
}

/// Run every transport at every population; `progress` hears a line per
/// step.
pub fn run(
    params: &ScaleParams,
    mut progress: impl FnMut(&str),
) -> Result<Vec<ScaleRow>, BenchError> {
    params.validate()?;
    let mut rows = Vec::new();
    for &transport in &params.transports {
        for &n in &params.populations {
            progress(&format!("{} N={n}: starting", transport.name()));
            let row = run_one(transport, n, params, &mut progress)?;
            progress(&format!(
                "{} N={n}: idle {:.3} ms/s per process, late joiner first message {:.1} ms",
                transport.name(),
                row.idle_per_process_ms_per_s,
                row.joiner_first_ms
            ));
            rows.push(row);
        }
    }
    Ok(rows)
}

fn run_one(
    transport: ScaleTransport,
    n: usize,
    params: &ScaleParams,
    progress: &mut impl FnMut(&str),
) -> Result<ScaleRow, BenchError> {
    let hosts = if transport == ScaleTransport::Hosts {
        Some(Hosts::start()?)
    } else {
        None
    };
    let bed = hosts.as_ref().map(|h| &h.bed);
    let objects = || hosts.as_ref().map_or_else(shm_objects, Hosts::shm_objects);
    let before = objects();
    let router = if transport.networked() {
        Some(Router::start(transport)?)
    } else {
        None
    };
    let dom = domain(n as u32 * 7 + transport as u32);
    let spec = |index, joiner| Spec {
        joiner,
        transport,
        config: router
            .as_ref()
            .map_or_else(PathBuf::new, |r| r.config.clone()),
        domain: dom,
        index,
        n,
        m: params.endpoints,
    };
    let start = Instant::now();
    let mut members = (0..n)
        .map(|i| helper(&spec(i, false), bed))
        .collect::<Result<Vec<_>, _>>()?;
    // Every member matched, or as many as did in the time allowed (a
    // transport that cannot settle at this size is a result too).
    let deadline = start + SETTLE_LIMIT;
    let mut unmatched = Vec::new();
    for (i, m) in members.iter_mut().enumerate() {
        if m.expect_by("matched", deadline)?.is_none() {
            unmatched.push(i);
        }
    }
    let matched = n - unmatched.len();
    let settle_ms = ms(start.elapsed());
    if !unmatched.is_empty() {
        progress(&format!(
            "{} N={n}: members not matched in {} s: {unmatched:?}",
            transport.name(),
            SETTLE_LIMIT.as_secs()
        ));
    }
    progress(&format!(
        "{} N={n}: {matched} of {n} matched after {settle_ms:.0} ms; idle for {:.0} s",
        transport.name(),
        params.idle.as_secs_f64()
    ));
    // Let the start-up's last work (history, first connections) finish.
    std::thread::sleep(Duration::from_secs(1));
    let pids: Vec<u32> = members.iter().map(Proc::pid).collect();
    let router_pids: Vec<u32> = match (&router, &hosts) {
        (Some(r), _) => vec![r.proc.pid()],
        (None, Some(h)) => h.routers.iter().map(Proc::pid).collect(),
        (None, None) => Vec::new(),
    };
    let routers_cpu = || -> Option<Duration> {
        (!router_pids.is_empty()).then(|| router_pids.iter().map(|&p| cpu_time(p)).sum())
    };
    let cpu0: Vec<Duration> = pids.iter().map(|&p| cpu_time(p)).collect();
    let router0 = routers_cpu();
    let t0 = Instant::now();
    std::thread::sleep(params.idle);
    let secs = t0.elapsed().as_secs_f64();
    let per: Vec<f64> = pids
        .iter()
        .zip(&cpu0)
        .map(|(&p, c0)| ms(cpu_time(p).saturating_sub(*c0)) / secs)
        .collect();
    let router_ms_per_s = routers_cpu()
        .zip(router0)
        .map(|(c1, c0)| ms(c1.saturating_sub(c0)) / secs);
    let total: f64 = per.iter().sum();
    let mean_mib = |key: &str| {
        pids.iter()
            .map(|&p| status_bytes(p, key) as f64)
            .sum::<f64>()
            / n as f64
            / (1 << 20) as f64
    };
    let (rss_mib, anon_mib) = (mean_mib("VmRSS"), mean_mib("RssAnon"));
    let during = objects();

    progress(&format!("{} N={n}: late joiner", transport.name()));
    // The joiner gives up after 30 s of waiting for messages; a
    // population that keeps the machine too busy for it to even get
    // there is reported as such (not a number), not as a failed run.
    let mut joiner = helper(&spec(n, true), bed)?;
    let line = joiner
        .expect_by("joined", Instant::now() + SETTLE_LIMIT)?
        .unwrap_or_default();
    // It exits by itself after its report: let it, or it is killed with
    // its shared memory still there (counted as left at exit below).
    if !line.is_empty() && !joiner.wait_exit(Instant::now() + Duration::from_secs(30)) {
        progress(&format!(
            "{} N={n}: the late joiner did not exit within 30 s of its report (killed)",
            transport.name()
        ));
    }
    drop(joiner);
    let mut f = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(f64::NAN));
    let mut next = || f.next().unwrap_or(f64::NAN);
    let (joiner_context_ms, joiner_matched_ms, joiner_first_ms, joiner_all_ms) =
        (next(), next(), next(), next());

    // Clean exit: stdin closes, each member shuts down and exits.
    for m in &mut members {
        drop(m.child.stdin.take());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stuck = Vec::new();
    for (i, m) in members.iter_mut().enumerate() {
        loop {
            match m.child.try_wait() {
                Ok(Some(status)) if !status.success() => {
                    progress(&format!(
                        "{} N={n}: member {i} exited with {status}",
                        transport.name()
                    ));
                    break;
                }
                Ok(Some(_)) => break,
                _ if Instant::now() >= deadline => {
                    stuck.push(i);
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
    if !stuck.is_empty() {
        progress(&format!(
            "{} N={n}: members still running 30 s after their stdin closed (killed): {stuck:?}",
            transport.name()
        ));
    }
    drop(members);
    drop(router);
    let after = objects();
    let left: Vec<&str> = after
        .iter()
        .filter(|o| !before.iter().any(|b| b.0 == o.0))
        .map(|o| o.0.as_str())
        .collect();
    if !left.is_empty() {
        progress(&format!(
            "{} N={n}: left at exit: {}{}",
            transport.name(),
            left.iter().take(8).copied().collect::<Vec<_>>().join(" "),
            if left.len() > 8 { " ..." } else { "" }
        ));
    }
    let (before, during, after) = (count(&before), count(&during), count(&after));
    Ok(ScaleRow {
        transport,
        n,
        endpoints: params.endpoints,
        matched,
        settle_ms,
        idle_total_ms_per_s: total,
        idle_per_process_ms_per_s: total / n as f64,
        idle_max_ms_per_s: per.iter().copied().fold(0.0, f64::max),
        router_ms_per_s,
        rss_mib,
        anon_mib,
        shm_objects: during.0 - before.0,
        shm_bytes: during.1 - before.1,
        joiner_context_ms,
        joiner_matched_ms,
        joiner_first_ms,
        joiner_all_ms,
        left_after_exit: after.0 - before.0,
    })
}

/// The rows as a table.
pub fn render(rows: &[ScaleRow]) -> String {
    let header = [
        "transport",
        "N",
        "M",
        "matched",
        "settled",
        "idle CPU total",
        "per process",
        "busiest",
        "router",
        "RSS/process",
        "private/process",
        "shm objects",
        "shm bytes",
        "joiner matched",
        "first msg",
        "all N msgs",
        "left at exit",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        lines.push(vec![
            r.transport.name().to_string(),
            r.n.to_string(),
            r.endpoints.to_string(),
            format!("{}/{}", r.matched, r.n),
            format!("{:.2} s", r.settle_ms / 1e3),
            format!("{:.2} ms/s", r.idle_total_ms_per_s),
            format!("{:.3} ms/s", r.idle_per_process_ms_per_s),
            format!("{:.3} ms/s", r.idle_max_ms_per_s),
            r.router_ms_per_s
                .map_or("-".into(), |v| format!("{v:.2} ms/s")),
            format!("{:.1} MiB", r.rss_mib),
            format!("{:.1} MiB", r.anon_mib),
            r.shm_objects.to_string(),
            format!("{:.1} MiB", r.shm_bytes as f64 / (1 << 20) as f64),
            format!("{:.1} ms", r.joiner_matched_ms),
            format!("{:.1} ms", r.joiner_first_ms),
            format!("{:.1} ms", r.joiner_all_ms),
            r.left_after_exit.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (v, w))| {
                if c < 1 {
                    format!("{v:<w$}")
                } else {
                    format!("{v:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
            out.push('\n');
        }
    }
    out
}

/// Two charts side by side against N, one line per transport: idle CPU
/// per process, and the late joiner's time to its first message and to a
/// message from every member (SVG).
pub fn write_chart(path: &Path, rows: &[ScaleRow]) -> Result<(), crate::PlotError> {
    crate::harness::plot::write_scale_chart(path, rows)
}

#[cfg(test)]
mod tests {
    use super::status_bytes;

    #[test]
    fn a_process_private_memory_is_part_of_its_resident_memory() {
        let me = std::process::id();
        let (rss, anon) = (status_bytes(me, "VmRSS"), status_bytes(me, "RssAnon"));
        assert!(anon > 0 && anon <= rss, "RssAnon {anon}, VmRSS {rss}");
        // A key that is a prefix of another line's is not that line.
        assert_eq!(status_bytes(me, "Rss"), 0);
        assert_eq!(status_bytes(me, "NoSuchLine"), 0);
    }
}
