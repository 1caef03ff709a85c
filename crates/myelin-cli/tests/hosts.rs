//! Across hosts for real: two hosts as network namespaces (each with its
//! own `/dev/shm`) on the test bed of `myelin_bench::testbed`, a `myelin
//! router` on each, a talker on one and a listener on the other (this test
//! binary in a role), and the faults a robot and its base station meet:
//! started in the wrong order, a router that restarts, a link down for
//! 10 s, a partition that heals, a lossy link. Without root or network
//! namespaces each test prints why and returns.

use std::io::BufRead;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use myelin::{Context, QoS};
use myelin_bench::testbed::TestBed;
use myelin_msgs::std_msgs;

const LONG: Duration = Duration::from_secs(90);
const ROLE: &str = "MYELIN_HOSTS_ROLE";

/// A process on a host; killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bed(n: usize) -> Option<TestBed> {
    TestBed::new(n).map_err(|e| skipped(&e)).ok()
}

/// Why a test that needs network namespaces cannot run here: printed and
/// kept for CI, or a failure where the bed is required.
fn skipped(e: &dyn std::fmt::Display) {
    if myelin_bench::testbed::required() {
        panic!(
            "{e} ({} is set: the bed must come up here)",
            myelin_bench::testbed::REQUIRE_ENV
        )
    }
    // libtest hides a passing test's output: the reason also goes to a
    // file that `.ci/run` prints after the tests.
    eprintln!("skipped: {e}");
    let test = std::thread::current().name().unwrap_or("?").to_string();
    for_ci("testbed-skipped.txt", &format!("{test}: {e}"));
}

/// `myelin router` on host `i` as the README deploys them: with no
/// `peers` (the base station), listening on every address (loopback for
/// its processes, its address for other hosts' routers); else (a robot)
/// listening on loopback and connecting to the routers of `peers`.
fn router(bed: &TestBed, i: usize, peers: &[usize]) -> Proc {
    let connects: Vec<String> = peers
        .iter()
        .map(|&p| format!("tcp/{}:7447", bed.host(p).addr))
        .collect();
    router_connecting(bed, i, &connects)
}

/// [`router`] connecting to `endpoints` (a robot's), or listening on
/// every address when there are none (the base station's).
fn router_connecting(bed: &TestBed, i: usize, endpoints: &[String]) -> Proc {
    let mut c = bed.command(i, env!("CARGO_BIN_EXE_myelin"));
    if endpoints.is_empty() {
        c.args(["router", "--listen", "tcp/0.0.0.0:7447"]);
    } else {
        c.args(["router", "--listen", "tcp/127.0.0.1:7447"]);
    }
    // A zenoh configuration to compare with the default (the camera
    // measurement); the processes take theirs from MYELIN_ZENOH_CONFIG.
    if let Ok(f) = std::env::var("MYELIN_HOSTS_ROUTER_CONFIG") {
        c.args(["--config", &f]);
    }
    for e in endpoints {
        c.args(["--connect", e]);
    }
    Proc(
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// This test binary on host `i` as `role` with extra environment.
fn role(bed: &TestBed, i: usize, role: &str, env: &[(&str, String)]) -> Child {
    let mut c = bed.command(i, std::env::current_exe().unwrap());
    c.args([
        "--exact",
        &format!("{role}_role"),
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ROLE, role);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A listener on host `i`: the values it receives, as they arrive.
/// Print how long a recovery took, and keep it for `.ci/run` to show
/// (libtest hides a passing test's output).
fn record(what: &str, took: Duration) {
    println!("{what}: {took:.2?}");
    for_ci("testbed-times.txt", &format!("{what}: {took:.2?}"));
}

/// Append `line` to `file` in the target's scratch folder, where
/// `.ci/run` prints it after the tests (libtest hides a passing test's
/// output).
fn for_ci(file: &str, line: &str) {
    use std::io::Write;
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(file);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

fn listener(bed: &TestBed, i: usize, env: &[(&str, String)]) -> (Proc, mpsc::Receiver<i64>) {
    let (p, rx, _) = listener_with_liveliness(bed, i, env);
    (p, rx)
}

/// [`listener`], with the alive count of its subscription's liveliness
/// status too, as it changes.
fn listener_with_liveliness(
    bed: &TestBed,
    i: usize,
    env: &[(&str, String)],
) -> (Proc, mpsc::Receiver<i64>, mpsc::Receiver<i64>) {
    let mut child = role(bed, i, "listener", env);
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let (alive_tx, alive_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let value = |line: &str, word: &str| -> Option<i64> {
            line.split(word).nth(1).and_then(|v| v.trim().parse().ok())
        };
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            // (The first may follow libtest's "test listener_role ... ".)
            if let Some(v) = value(&line, "got ") {
                let _ = tx.send(v);
            } else if let Some(v) = value(&line, "alive ") {
                let _ = alive_tx.send(v);
            }
        }
    });
    (Proc(child), rx, alive_rx)
}

fn talker(bed: &TestBed, i: usize, env: &[(&str, String)]) -> Proc {
    Proc(role(bed, i, "talker", env))
}

/// The next value the listener hears, or a panic after `LONG` saying
/// what was awaited.
fn next(rx: &mpsc::Receiver<i64>, what: &str) -> i64 {
    rx.recv_timeout(LONG)
        .unwrap_or_else(|_| panic!("nothing heard: {what}"))
}

/// Wait until the listener hears a value above `above`; how long it took.
fn heard_above(rx: &mpsc::Receiver<i64>, above: i64, what: &str) -> Duration {
    let start = Instant::now();
    let deadline = start + LONG;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(v) if v > above => return start.elapsed(),
            Ok(_) => {}
            Err(_) => panic!("nothing above {above} heard: {what}"),
        }
    }
}

/// Drain what is queued; the last value (or `last` if none).
fn drain(rx: &mpsc::Receiver<i64>, last: i64) -> i64 {
    rx.try_iter().last().unwrap_or(last)
}

fn qos_env() -> (&'static str, String) {
    ("MYELIN_HOSTS_QOS", "reliable".into())
}

// ----------------------------------------------------------------- roles

fn role_ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .build()
        .expect("a context with shared memory and zenoh")
}

fn role_qos() -> QoS {
    match std::env::var("MYELIN_HOSTS_QOS").as_deref() {
        Ok("keep_all") => QoS::keep_all(),
        Ok("best_effort") => QoS::keep_last(10).best_effort(),
        Ok("transient_local") => QoS::keep_last(10).transient_local(),
        _ => QoS::keep_last(10),
    }
}

/// Publishes 0, 1, 2, ... on /count every `MYELIN_HOSTS_PERIOD_MS` (10),
/// `MYELIN_HOSTS_COUNT` of them (forever if unset), then stays.
#[test]
fn talker_role() {
    if std::env::var(ROLE).as_deref() != Ok("talker") {
        return;
    }
    let ctx = role_ctx();
    let node = ctx.create_node("hosts_talker").unwrap();
    let p = node
        .create_publisher::<std_msgs::Int64>("/count", role_qos())
        .unwrap();
    let period = std::env::var("MYELIN_HOSTS_PERIOD_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let count: i64 = std::env::var("MYELIN_HOSTS_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(i64::MAX);
    let transient_local = std::env::var("MYELIN_HOSTS_QOS").as_deref() == Ok("transient_local");
    if count != i64::MAX && !transient_local {
        // A fixed run waits for its listener first (a transient-local
        // one publishes at once: late joiners get its history).
        while p.subscription_count() == 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    if std::env::var_os("MYELIN_HOSTS_HANDSHAKE").is_some() {
        // The listener's token can reach this host before the routers'
        // route to it does: probe (-1) until the listener says one came
        // through on /ready, so that message 0 has a route.
        let ready = node
            .create_polling_subscription::<std_msgs::Int64>(
                "/ready",
                QoS::keep_last(1),
                Default::default(),
            )
            .unwrap();
        while ready.take().is_none() {
            let _ = p.publish(std_msgs::Int64 { data: -1 });
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let mut i = 0;
    while i < count {
        // A reliable keep_all publish refused after its blocking time is
        // retried: nothing is skipped.
        if p.publish(std_msgs::Int64 { data: i }).is_ok() {
            i += 1;
        }
        std::thread::sleep(Duration::from_millis(period));
    }
    println!("\npublished {count}");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Prints `got N` for every Int64 on /count, and `alive A` whenever the
/// alive count of the subscription's liveliness status changes.
#[test]
fn listener_role() {
    if std::env::var(ROLE).as_deref() != Ok("listener") {
        return;
    }
    use std::io::Write;
    let ctx = role_ctx();
    let node = ctx.create_node("hosts_listener").unwrap();
    let s = node
        .create_polling_subscription::<std_msgs::Int64>("/count", role_qos(), Default::default())
        .unwrap();
    // Answers the talker's probes (see `MYELIN_HOSTS_HANDSHAKE`).
    let ready = std::env::var_os("MYELIN_HOSTS_HANDSHAKE").map(|_| {
        node.create_publisher::<std_msgs::Int64>("/ready", QoS::keep_last(1))
            .unwrap()
    });
    let mut out = std::io::stdout();
    let mut alive = 0;
    loop {
        if let Ok(m) = s.wait_for_message(Duration::from_millis(100)) {
            if let (true, Some(ready)) = (m.data < 0, &ready) {
                let _ = ready.publish(std_msgs::Int64 { data: 1 });
                continue;
            }
            let _ = writeln!(out, "got {}", m.data);
        }
        let now = s.liveliness_changed().alive_count;
        if now != alive {
            alive = now;
            let _ = writeln!(out, "alive {alive}");
        }
        let _ = out.flush();
    }
}

// ----------------------------------------------------------------- tests

/// Start order does not matter: a talker and a listener start on two
/// hosts before any router exists; routers come up seconds later, and the
/// listener hears the talker (each process keeps retrying its router).
#[test]
fn processes_started_before_their_routers_join_when_the_routers_come() {
    let Some(bed) = bed(2) else { return };
    let _talker = talker(&bed, 0, &[qos_env()]);
    let (_listener, rx) = listener(&bed, 1, &[qos_env()]);
    // Both have tried and failed to reach a router by now.
    std::thread::sleep(Duration::from_secs(3));
    assert!(rx.try_recv().is_err(), "heard without routers");
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    let took = heard_above(&rx, -1, "after the routers started");
    record(
        "processes started before their routers: first message after the routers start",
        took,
    );
}

/// A talker on host 0 and a listener on host 1, each host's router up;
/// the router of host `restarted` is killed and started again 2 s later:
/// traffic resumes without restarting the talker or the listener (every
/// router and process reconnects by itself). Records how long it took.
fn traffic_resumes_after_restarting_the_router_of(restarted: usize, what: &str) {
    let Some(bed) = bed(2) else { return };
    let peers = |host: usize| if host == 0 { vec![1] } else { vec![] };
    // The base station's first, as deployed.
    let mut routers = [None, Some(router(&bed, 1, &peers(1)))];
    routers[0] = Some(router(&bed, 0, &peers(0)));
    let _talker = talker(&bed, 0, &[qos_env()]);
    let (_listener, rx) = listener(&bed, 1, &[qos_env()]);
    next(&rx, "before the restart");
    routers[restarted] = None;
    std::thread::sleep(Duration::from_secs(2));
    let before = drain(&rx, 0);
    routers[restarted] = Some(router(&bed, restarted, &peers(restarted)));
    let took = heard_above(&rx, before, &format!("after {what} restarted"));
    record(
        &format!("{what} restarted: next message after the restart"),
        took,
    );
}

/// The robot's router restarts (killed, started again): traffic between
/// the hosts resumes by itself.
#[test]
fn traffic_resumes_after_a_router_restarts() {
    traffic_resumes_after_restarting_the_router_of(0, "the robot's router");
}

/// The base station's router (the upstream every robot's router
/// connects to, and the local router of the listener beside it)
/// restarts: the robot's router and the listener both reconnect by
/// themselves, and traffic resumes without restarting anything else.
#[test]
fn traffic_resumes_after_the_base_station_router_restarts() {
    traffic_resumes_after_restarting_the_router_of(1, "the base station's router");
}

/// Three hosts as a small fleet: two robots (hosts 0 and 2), each router
/// connected only to the base station's (host 1). Robot A's talker is
/// heard on the base station and on robot B (through the base station's
/// router). Robot B's router then restarts: B hears A again afterwards,
/// and the base station keeps hearing A throughout (one robot's trouble
/// does not reach the others).
#[test]
fn a_robot_is_heard_by_the_base_station_and_another_robot_through_it() {
    let Some(bed) = bed(3) else { return };
    let _base = router(&bed, 1, &[]);
    let _robot_a = router(&bed, 0, &[1]);
    let robot_b = router(&bed, 2, &[1]);
    let _talker = talker(&bed, 0, &[qos_env()]);
    let (_on_base, base_rx) = listener(&bed, 1, &[qos_env()]);
    let (_on_b, b_rx) = listener(&bed, 2, &[qos_env()]);
    next(&base_rx, "on the base station");
    next(&b_rx, "on robot B, through the base station");
    drop(robot_b);
    let cut = drain(&base_rx, 0);
    // The talker runs at 100 Hz: the base station hears a second's worth
    // while robot B's router is down.
    std::thread::sleep(Duration::from_secs(2));
    let during = drain(&base_rx, cut);
    assert!(
        during > cut + 50,
        "the base station stopped hearing robot A while robot B's router was down ({cut} -> {during})"
    );
    let before = drain(&b_rx, 0);
    let _robot_b = router(&bed, 2, &[1]);
    let took = heard_above(&b_rx, before, "on robot B after its router restarted");
    record(
        "three hosts, robot B's router restarted: B hears robot A again after",
        took,
    );
    heard_above(&base_rx, during, "on the base station afterwards");
}

/// The talker's link goes down for 10 s (carrier lost) and comes back;
/// traffic resumes by itself.
#[test]
fn traffic_resumes_after_a_link_is_down_for_10_s() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    let _talker = talker(&bed, 0, &[qos_env()]);
    let (_listener, rx) = listener(&bed, 1, &[qos_env()]);
    next(&rx, "before the link went down");
    bed.link(0, false).unwrap();
    std::thread::sleep(Duration::from_secs(10));
    let before = drain(&rx, 0);
    bed.link(0, true).unwrap();
    let took = heard_above(&rx, before, "after the link came back");
    record(
        "a link down for 10 s: next message after it came back",
        took,
    );
}

/// A partition (every packet between the hosts lost, connections left
/// open) for 10 s heals; traffic resumes by itself.
#[test]
fn traffic_resumes_after_a_partition_heals() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    let _talker = talker(&bed, 0, &[qos_env()]);
    let (_listener, rx) = listener(&bed, 1, &[qos_env()]);
    next(&rx, "before the partition");
    bed.partition(1, true).unwrap();
    std::thread::sleep(Duration::from_secs(10));
    let before = drain(&rx, 0);
    bed.partition(1, false).unwrap();
    let took = heard_above(&rx, before, "after the partition healed");
    record("a 10 s partition: next message after it healed", took);
}

/// A partition lasting past zenoh's lease (10 s) is a liveliness loss:
/// the talker leaves the listener's alive count once the routers give up
/// on each other, and is counted alive again when the partition heals,
/// without restarting either process.
#[test]
fn a_partition_past_the_lease_loses_liveliness_and_healing_restores_it() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    let _talker = talker(&bed, 0, &[qos_env()]);
    let (_listener, rx, alive) = listener_with_liveliness(&bed, 1, &[qos_env()]);
    next(&rx, "before the partition");
    let wait_alive = |want: i64, what: &str| {
        let deadline = Instant::now() + LONG;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match alive.recv_timeout(left) {
                Ok(v) if v == want => return,
                Ok(_) => {}
                Err(_) => panic!("alive count never {want}: {what}"),
            }
        }
    };
    wait_alive(1, "before the partition");
    bed.partition(1, true).unwrap();
    let cut = Instant::now();
    wait_alive(0, "during the partition");
    record(
        "a long partition: liveliness lost (zenoh's lease) after",
        cut.elapsed(),
    );
    let before = drain(&rx, 0);
    bed.partition(1, false).unwrap();
    let healed = Instant::now();
    wait_alive(1, "after the partition healed");
    record(
        "a long partition: alive again after it healed",
        healed.elapsed(),
    );
    heard_above(&rx, before, "after the partition healed");
}

/// A slow link, 100 ms each way (a relay in the robot's host holds every
/// byte of the routers' connection: this kernel has no netem): reliable
/// keep_all delivers all 300 messages in order, and the talker stays
/// alive in the listener's liveliness status throughout (the delay is far
/// below zenoh's lease).
#[test]
fn a_slow_link_delivers_everything_in_order_and_stays_alive() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let delay = Duration::from_millis(100);
    let upstream = std::net::SocketAddrV4::new(bed.host(1).addr, 7447);
    let _relay = bed.delay_relay(0, 17447, upstream, delay).unwrap();
    let _r0 = router_connecting(&bed, 0, &["tcp/127.0.0.1:17447".to_string()]);
    const N: i64 = 300;
    let env = [
        ("MYELIN_HOSTS_QOS", "keep_all".to_string()),
        ("MYELIN_HOSTS_COUNT", N.to_string()),
    ];
    let (_listener, rx, alive) = listener_with_liveliness(&bed, 1, &env);
    let _talker = talker(&bed, 0, &env);
    let start = Instant::now();
    for i in 0..N {
        assert_eq!(next(&rx, &format!("message {i}")), i);
    }
    println!("{N} messages over the 100 ms link in {:?}", start.elapsed());
    let changes: Vec<i64> = alive.try_iter().collect();
    assert_eq!(changes, [1], "the alive count went 1 and stayed");
}

/// A robot's router started before the base station's (its upstream):
/// it keeps trying to connect, and traffic flows once the upstream comes,
/// without restarting the router or the nodes.
#[test]
fn a_router_started_before_its_upstream_connects_when_it_comes() {
    let Some(bed) = bed(2) else { return };
    let _r0 = router(&bed, 0, &[1]);
    let _talker = talker(&bed, 0, &[qos_env()]);
    let (_listener, rx) = listener(&bed, 1, &[qos_env()]);
    std::thread::sleep(Duration::from_secs(3));
    assert!(rx.try_recv().is_err(), "heard without the upstream router");
    let _r1 = router(&bed, 1, &[]);
    let took = heard_above(&rx, -1, "after the upstream router started");
    record(
        "a robot router started before its upstream: first message after the upstream starts",
        took,
    );
}

/// Reliable keep_all over a link that loses 5% of its packets each way:
/// every message arrives, once, in order.
#[test]
fn reliable_keep_all_over_a_lossy_link_delivers_everything_in_order() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    bed.set_loss(1, 5.0).unwrap();
    const N: i64 = 2_000;
    let env = [
        ("MYELIN_HOSTS_QOS", "keep_all".to_string()),
        ("MYELIN_HOSTS_COUNT", N.to_string()),
        ("MYELIN_HOSTS_PERIOD_MS", "2".to_string()),
        ("MYELIN_HOSTS_HANDSHAKE", "1".to_string()),
    ];
    let (_listener, rx) = listener(&bed, 1, &env);
    let _talker = talker(&bed, 0, &env);
    // The talker starts once a probe went through (the routers' route
    // for a new subscriber can trail its token across a lossy link):
    // then every message arrives, from the first, once, in order.
    for want in 0..N {
        assert_eq!(next(&rx, &format!("message {want} of {N}")), want);
    }
}

/// Publishes `MYELIN_HOSTS_COUNT` CompressedImages of 256 KiB best effort
/// as fast as it can (`format` = their index), then `end 0`, `end 1`, ...
/// every 200 ms.
#[test]
fn flood_talker_role() {
    if std::env::var(ROLE).as_deref() != Ok("flood_talker") {
        return;
    }
    use myelin_msgs::sensor_msgs::CompressedImage;
    let ctx = role_ctx();
    let node = ctx.create_node("hosts_flood_talker").unwrap();
    let p = node
        .create_publisher::<CompressedImage>("/flood", QoS::keep_last(10).best_effort())
        .unwrap();
    let count: usize = std::env::var("MYELIN_HOSTS_COUNT")
        .unwrap()
        .parse()
        .unwrap();
    while p.subscription_count() == 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let data = vec![7u8; 256 << 10];
    for i in 0..count {
        p.publish(CompressedImage {
            format: i.to_string(),
            data: data.clone(),
            ..Default::default()
        })
        .unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    for k in 0.. {
        p.publish(CompressedImage {
            format: format!("end {k}"),
            ..Default::default()
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Counts the flood; at the first `end K` prints `received R lost L end K
/// first F` (F: the index of the first message received; those before it
/// left no trace, as no sequence number came before them).
#[test]
fn flood_listener_role() {
    if std::env::var(ROLE).as_deref() != Ok("flood_listener") {
        return;
    }
    use myelin_msgs::sensor_msgs::CompressedImage;
    let ctx = role_ctx();
    let node = ctx.create_node("hosts_flood_listener").unwrap();
    let s = node
        .create_polling_subscription::<CompressedImage>(
            "/flood",
            QoS::keep_all().best_effort(),
            Default::default(),
        )
        .unwrap();
    let mut received = 0u64;
    let mut first = None;
    loop {
        let Ok(m) = s.wait_for_message(Duration::from_secs(1)) else {
            continue;
        };
        if let Some(k) = m.format.strip_prefix("end ") {
            // Nothing received before the end: the end's own number.
            let first = first.unwrap_or(u64::MAX);
            println!(
                "\nreceived {received} lost {} end {k} first {first}",
                s.lost()
            );
            return;
        }
        first.get_or_insert(m.format.parse::<u64>().unwrap());
        received += 1;
    }
}

/// Best effort over a congested link (the talker's host limited to
/// 50 Mbit/s, a flood of 256 KiB messages): zenoh drops what the link
/// cannot take, and the listener counts every message it did not get in
/// `lost()` (from the publisher's sequence numbers): received + lost =
/// sent, exactly, from the first message received on (one dropped before
/// it leaves no gap to see).
#[test]
fn best_effort_drops_on_a_congested_link_are_counted() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    bed.limit_rate(0, Some(50_000_000)).unwrap();
    const N: u64 = 200;
    let env = [("MYELIN_HOSTS_COUNT", N.to_string())];
    let mut listener = role(&bed, 1, "flood_listener", &env);
    let out = listener.stdout.take().unwrap();
    let _listener = Proc(listener);
    let _talker = Proc(role(&bed, 0, "flood_talker", &env));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with("received ") {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx
        .recv_timeout(LONG)
        .expect("the listener never saw the end");
    let n: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [received, lost, end, first] = n[..] else {
        panic!("{line}")
    };
    println!("{line}");
    assert!(first < N, "not one message of the flood arrived ({line})");
    assert!(
        lost > 0,
        "nothing was dropped: the link was not congested ({line})"
    );
    assert_eq!(received + lost, N - first + end, "{line}");
}

/// The image of the image test: 1440x1080 rgb8 (4.6 MB), byte `j` of
/// frame `i` is `j ^ i` (mod 256), so every byte of every frame is checked.
const IMAGE_LEN: usize = 1440 * 1080 * 3;

/// Frame `i`'s pixels ([`IMAGE_LEN`] bytes, byte `j` = `j ^ i` mod 256):
/// a 256-byte block repeated (a debug build makes and checks 30 of these
/// a second).
fn image_pixels(i: u64) -> Vec<u8> {
    let block: Vec<u8> = (0..=255u8).map(|j| j ^ i as u8).collect();
    let mut v = Vec::with_capacity(IMAGE_LEN);
    while v.len() < IMAGE_LEN {
        let n = (IMAGE_LEN - v.len()).min(256);
        v.extend_from_slice(&block[..n]);
    }
    v
}

/// Where `data` first differs from frame `i`'s pixels, if it does.
fn image_mismatch(i: u64, data: &[u8]) -> Option<usize> {
    let want = image_pixels(i);
    if data == want.as_slice() {
        return None;
    }
    Some(
        data.iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(data.len().min(want.len())),
    )
}

/// The QoS of the image roles: reliable keep_all (zenoh blocks rather
/// than drops: every frame arrives, the camera is slowed to the link's
/// pace) or, with `MYELIN_HOSTS_QOS=best_effort`, ROS 2's sensor-data
/// profile (what camera drivers use: best effort, keep_last 5; zenoh drops
/// what the link cannot take, and the subscription counts it).
fn image_qos() -> QoS {
    match std::env::var("MYELIN_HOSTS_QOS").as_deref() {
        Ok("best_effort") => QoS::sensor_data(),
        _ => QoS::keep_all(),
    }
}

#[test]
fn image_pixels_are_j_xor_i() {
    for i in [0u64, 1, 7, 200, 255, 256] {
        let v = image_pixels(i);
        assert_eq!(v.len(), IMAGE_LEN);
        for j in [0, 1, 7, 8, 255, 256, 257, 4095, IMAGE_LEN - 1] {
            assert_eq!(v[j], (j as u8) ^ (i as u8), "frame {i} byte {j}");
        }
        assert_eq!(image_mismatch(i, &v), None);
    }
    let mut v = image_pixels(3);
    v[1234] ^= 1;
    assert_eq!(image_mismatch(3, &v), Some(1234));
}

/// Publishes `MYELIN_HOSTS_COUNT` 1440x1080 rgb8 images on /image
/// ([`image_qos`]), one every `MYELIN_HOSTS_PERIOD_US`, once a
/// subscription is there, then prints `published N in T`; `frame_id` the
/// frame's number, `stamp` the wall clock at publishing (the test bed's
/// hosts share the clock).
#[test]
fn image_talker_role() {
    if std::env::var(ROLE).as_deref() != Ok("image_talker") {
        return;
    }
    use myelin_msgs::sensor_msgs::Image;
    let ctx = role_ctx();
    let node = ctx.create_node("hosts_camera").unwrap();
    let p = node
        .create_publisher::<Image>("/image", image_qos())
        .unwrap();
    let count: u64 = std::env::var("MYELIN_HOSTS_COUNT")
        .unwrap()
        .parse()
        .unwrap();
    let period: u64 = std::env::var("MYELIN_HOSTS_PERIOD_US")
        .unwrap()
        .parse()
        .unwrap();
    while p.subscription_count() == 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let start = Instant::now();
    let mut i = 0;
    while i < count {
        let mut frame = Image {
            height: 1080,
            width: 1440,
            encoding: "rgb8".into(),
            step: 1440 * 3,
            data: image_pixels(i),
            ..Default::default()
        };
        frame.header.frame_id = i.to_string();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        frame.header.stamp = myelin::time::Time::from_nanos(wall.as_nanos() as i64);
        // Refused after its blocking time: sent again, nothing skipped.
        if p.publish(frame).is_ok() {
            i += 1;
        }
        let due = start + Duration::from_micros(period * i);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    println!("\npublished {count} in {:?}", start.elapsed());
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Checks every byte of every /image frame; prints `frame I ok L lost N`
/// (L: microseconds from its stamp to its arrival; N: frames the
/// subscription counted lost so far) or `frame I bad WHY`.
#[test]
fn image_listener_role() {
    if std::env::var(ROLE).as_deref() != Ok("image_listener") {
        return;
    }
    use myelin_msgs::sensor_msgs::Image;
    use std::io::Write;
    let ctx = role_ctx();
    let node = ctx.create_node("hosts_viewer").unwrap();
    let s = node
        .create_polling_subscription::<Image>("/image", image_qos(), Default::default())
        .unwrap();
    let mut out = std::io::stdout();
    loop {
        let Ok(m) = s.wait_for_message(Duration::from_secs(1)) else {
            continue;
        };
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        let latency_us = (wall - m.header.stamp.nanos()) / 1000;
        let i: u64 = m.header.frame_id.parse().unwrap_or(u64::MAX);
        let bad = if (m.width, m.height, m.encoding.as_str()) != (1440, 1080, "rgb8") {
            Some(format!("{}x{} {}", m.width, m.height, m.encoding))
        } else if m.data.len() != IMAGE_LEN {
            Some(format!("{} bytes", m.data.len()))
        } else {
            image_mismatch(i, &m.data).map(|j| format!("byte {j}"))
        };
        let _ = match bad {
            None => writeln!(out, "frame {i} ok {latency_us} lost {}", s.lost()),
            Some(why) => writeln!(out, "frame {i} bad {why}"),
        };
        let _ = out.flush();
    }
}

/// What the listener of one image run saw.
struct ImageRun {
    /// Each frame received intact: its number and its latency (us).
    frames: Vec<(u64, i64)>,
    /// Frames the subscription counted lost.
    lost: u64,
    /// How long the talker took to publish them all.
    publishing: String,
}

/// `n` camera frames from host 0 to host 1 at `hz`, host 0's link limited
/// to 1 Gbit/s, with `qos` (`keep_all` or `best_effort`: [`image_qos`]).
/// Every frame that arrives must be intact (a bad one panics).
fn run_images(bed: &TestBed, hz: u64, n: u64, qos: &str) -> ImageRun {
    bed.limit_rate(0, Some(1_000_000_000)).unwrap();
    let _r1 = router(bed, 1, &[]);
    let _r0 = router(bed, 0, &[1]);
    let env = [
        ("MYELIN_HOSTS_COUNT", n.to_string()),
        ("MYELIN_HOSTS_PERIOD_US", (1_000_000 / hz).to_string()),
        ("MYELIN_HOSTS_QOS", qos.to_string()),
    ];
    let mut listener = role(bed, 1, "image_listener", &env);
    let out = listener.stdout.take().unwrap();
    let _listener = Proc(listener);
    let mut talker = role(bed, 0, "image_talker", &env);
    let talker_out = talker.stdout.take().unwrap();
    let _talker = Proc(talker);
    let (tx, rx) = mpsc::channel();
    for out in [out, talker_out] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                for word in ["frame ", "published "] {
                    if let Some(at) = line.find(word) {
                        let _ = tx.send(line[at..].to_string());
                    }
                }
            }
        });
    }
    let mut run = ImageRun {
        frames: Vec::new(),
        lost: 0,
        publishing: String::new(),
    };
    // Until every frame came, or the talker is done and the listener
    // has then been quiet for a second (best effort: the last frames may
    // never come).
    let mut published = false;
    loop {
        let wait = if published {
            Duration::from_secs(1)
        } else {
            LONG
        };
        let line = match rx.recv_timeout(wait) {
            Ok(line) => line,
            Err(_) if published => break,
            Err(_) => panic!("the image run stalled after {} frames", run.frames.len()),
        };
        let w: Vec<&str> = line.split_whitespace().collect();
        if w[0] == "published" {
            run.publishing = w[3..].join(" ");
            published = true;
            continue;
        }
        assert_eq!(w[2], "ok", "{line}");
        run.frames
            .push((w[1].parse().unwrap(), w[3].parse().unwrap()));
        run.lost = w[5].parse().unwrap();
        if run.frames.len() as u64 == n {
            break;
        }
    }
    run
}

/// Latency percentiles (us) of a run's frames: p50, p90, max.
fn image_latency(run: &ImageRun) -> (i64, i64, i64) {
    let mut l: Vec<i64> = run.frames.iter().map(|f| f.1).collect();
    l.sort_unstable();
    let at = |q: f64| l[((l.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.9), at(1.0))
}

/// A camera's 4.6 MB images (1440x1080 rgb8) across hosts on a 1 Gbit/s
/// link (host 0's port limited to 1 Gbit/s), reliable keep_all at 20 Hz
/// (0.75 Gbit/s of pixels; 30 Hz, 1.12 Gbit/s, does not fit a 1 Gbit/s
/// link with any middleware: see the best-effort test): every frame
/// arrives intact to the last byte and in order. How late they arrive is
/// measured (a test never depends on the machine's speed):
/// `measure_camera_frames_on_a_1_gbit_link`, BENCHMARKS.md.
#[test]
fn camera_images_cross_a_1_gbit_link_intact_and_in_order() {
    let Some(bed) = bed(2) else { return };
    const HZ: u64 = 20;
    const N: u64 = 60;
    let run = run_images(&bed, HZ, N, "keep_all");
    let order: Vec<u64> = run.frames.iter().map(|f| f.0).collect();
    assert_eq!(
        order,
        (0..N).collect::<Vec<_>>(),
        "frames lost or reordered"
    );
    let (p50, p90, max) = image_latency(&run);
    println!(
        "{N} frames at {HZ} Hz over 1 Gbit/s: latency p50 {p50} us, p90 {p90} us, max {max} us; published in {}",
        run.publishing
    );
}

/// The same camera at 30 Hz, more than a 1 Gbit/s link carries, with
/// ROS 2's sensor-data QoS (best effort, keep_last 5: what camera drivers
/// use): zenoh drops what the link cannot take, whole frames (never a
/// torn one: every frame that arrives is intact, in order), and the
/// subscription counts each drop in `lost()`: received + lost covers every
/// frame from the first received to the last.
#[test]
fn camera_images_beyond_a_1_gbit_link_drop_whole_frames_and_count_them() {
    let Some(bed) = bed(2) else { return };
    const HZ: u64 = 30;
    const N: u64 = 90;
    let run = run_images(&bed, HZ, N, "best_effort");
    let (p50, p90, max) = image_latency(&run);
    println!(
        "{N} frames at {HZ} Hz best effort over 1 Gbit/s: {} arrived, {} counted lost; latency p50 {p50} us, p90 {p90} us, max {max} us; published in {}",
        run.frames.len(),
        run.lost,
        run.publishing
    );
    let order: Vec<u64> = run.frames.iter().map(|f| f.0).collect();
    assert!(!order.is_empty(), "not one frame arrived");
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "reordered: {order:?}"
    );
    // Every gap before the last frame received was counted.
    let first = order[0];
    let last = *order.last().unwrap();
    assert_eq!(
        run.lost,
        last - first + 1 - order.len() as u64,
        "drops not counted: {order:?}"
    );
}

/// An Int64 publisher (`MYELIN_HOSTS_ROLE=typed_pub`) or a String
/// subscription (`typed_sub`) on /typed: prints `incompatible type N`
/// once it has found an endpoint of the other type, then stays.
#[test]
fn typed_role() {
    let role = std::env::var(ROLE);
    if role.as_deref().is_ok_and(|r| r.starts_with("typed_")) {
        myelin::init_logging();
    }
    let count: Box<dyn Fn() -> u64> = match role.as_deref() {
        Ok("typed_pub") => {
            let ctx = role_ctx();
            let node = ctx.create_node("hosts_typed_pub").unwrap();
            let p = node
                .create_publisher::<std_msgs::Int64>("/typed", QoS::keep_last(1))
                .unwrap();
            Box::new(move || {
                let _keep = &ctx;
                p.incompatible_type().total_count
            })
        }
        Ok("typed_sub") => {
            let ctx = role_ctx();
            let node = ctx.create_node("hosts_typed_sub").unwrap();
            let s = node
                .create_polling_subscription::<std_msgs::String>(
                    "/typed",
                    QoS::keep_last(1),
                    Default::default(),
                )
                .unwrap();
            Box::new(move || {
                let _keep = &ctx;
                s.incompatible_type().total_count
            })
        }
        _ => return,
    };
    while count() == 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("\nincompatible type {}", count());
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A publisher and a subscription of different types on one topic, on two
/// hosts: they never match, and each side reports the other in its
/// incompatible-type status (and once on its log, with both type names).
#[test]
fn a_type_mismatch_across_hosts_is_reported_on_both_sides() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    let mut outs = Vec::new();
    let mut procs = Vec::new();
    for (host, r) in [(0, "typed_pub"), (1, "typed_sub")] {
        let mut c = bed.command(host, std::env::current_exe().unwrap());
        c.args(["--exact", "typed_role", "--nocapture", "--test-threads=1"])
            .env(ROLE, r);
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        outs.push((child.stdout.take().unwrap(), child.stderr.take().unwrap()));
        procs.push(Proc(child));
    }
    let (tx, rx) = mpsc::channel();
    for (i, (out, err)) in outs.into_iter().enumerate() {
        let t = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if line.starts_with("incompatible type") {
                    let _ = t.send((i, line));
                }
            }
        });
        let t = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("do not match") {
                    let _ = t.send((i, line));
                }
            }
        });
    }
    let mut said = [(false, false), (false, false)];
    while said.iter().any(|&(status, log)| !(status && log)) {
        let (i, line) = rx
            .recv_timeout(LONG)
            .unwrap_or_else(|_| panic!("not reported on both sides: {said:?}"));
        if line.starts_with("incompatible type") {
            assert_eq!(line, "incompatible type 1");
            said[i].0 = true;
        } else {
            assert!(
                line.contains("std_msgs/msg/Int64") && line.contains("std_msgs/msg/String"),
                "{line}"
            );
            said[i].1 = true;
        }
    }
}

/// Transient local across hosts: a talker publishes 5 messages before any
/// listener exists; a listener that starts on another host afterwards
/// gets all 5, in order, from the talker's cache (rmw_zenoh's
/// AdvancedPublisher / AdvancedSubscriber).
#[test]
fn a_late_joiner_on_another_host_gets_transient_local_history() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    let env = [
        ("MYELIN_HOSTS_QOS", "transient_local".to_string()),
        ("MYELIN_HOSTS_COUNT", "5".to_string()),
    ];
    let mut talker = role(&bed, 0, "talker", &env);
    let out = talker.stdout.take().unwrap();
    let _talker = Proc(talker);
    let mut lines = std::io::BufReader::new(out).lines();
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.contains("published 5"))),
        "the talker never finished"
    );
    // The routers are joined well before this point in practice; the
    // listener's history query goes to the talker's cache either way (a
    // late publisher is found by its token).
    let (_listener, rx) = listener(&bed, 1, &env);
    for want in 0..5 {
        assert_eq!(next(&rx, &format!("history message {want}")), want);
    }
}

// ------------------------------------------------------ QoS events roles

/// The events talker's and listener's topics and QoS: a deadline of
/// 500 ms on /deadline, manual-by-topic and automatic liveliness with a
/// 1 s lease on /manual and /automatic, a best-effort publisher facing a
/// reliable subscription on /besteffort, and transient-local history on
/// /history from two publishers, one with a lifespan of 1 s.
const EVENT_DEADLINE: Duration = Duration::from_millis(500);
const EVENT_LEASE: Duration = Duration::from_secs(1);

fn event_qos(topic: &str) -> QoS {
    use myelin::LivelinessKind::{Automatic, ManualByTopic};
    match topic {
        "/deadline" => QoS::keep_last(10).deadline(EVENT_DEADLINE),
        "/manual" => QoS::keep_last(10).liveliness(ManualByTopic, EVENT_LEASE),
        "/automatic" => QoS::keep_last(10).liveliness(Automatic, EVENT_LEASE),
        "/history" => QoS::keep_last(10).transient_local(),
        _ => QoS::keep_last(10),
    }
}

/// Lines from a role's stdin, as they come.
fn commands() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Prints `name value` whenever `value` differs from the last printed.
struct Report(std::collections::HashMap<&'static str, String>);

impl Report {
    fn set(&mut self, name: &'static str, value: String) {
        use std::io::Write;
        if self.0.get(name) != Some(&value) {
            println!("\n{name} {value}");
            let _ = std::io::stdout().flush();
            self.0.insert(name, value);
        }
    }
}

/// An executor spinning a node on its own thread (the deadline and
/// liveliness checkers run there) until dropped.
struct Spinning(myelin::StopHandle, Option<std::thread::JoinHandle<()>>);

impl Spinning {
    fn new(node: &myelin::Node) -> Spinning {
        let mut exec = myelin::Executor::new();
        exec.add_node(node).unwrap();
        let stop = exec.stop_handle();
        Spinning(
            stop,
            Some(std::thread::spawn(move || {
                let _ = exec.spin();
            })),
        )
    }
}

impl Drop for Spinning {
    fn drop(&mut self) {
        self.0.stop();
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}

/// Publishes /deadline every 50 ms and asserts /manual every 200 ms while
/// not told `quiet` (`resume` starts again); holds an idle /automatic
/// publisher (its process asserts for it) and a best-effort /besteffort
/// one; publishes 1 on /history with a lifespan of 1 s and 2 with none,
/// then says `history published`. Reports its statuses (see [`Report`]).
#[test]
fn events_talker_role() {
    if std::env::var(ROLE).as_deref() != Ok("events_talker") {
        return;
    }
    let ctx = role_ctx();
    let node = ctx.create_node("hosts_events_talker").unwrap();
    let publisher = |topic: &str, qos: QoS| {
        node.create_publisher::<std_msgs::Int64>(topic, qos)
            .unwrap()
    };
    let deadline = publisher("/deadline", event_qos("/deadline"));
    let manual = publisher("/manual", event_qos("/manual"));
    let _automatic = publisher("/automatic", event_qos("/automatic"));
    let besteffort = publisher("/besteffort", QoS::keep_last(10).best_effort());
    let short = publisher(
        "/history",
        event_qos("/history").lifespan(Duration::from_secs(1)),
    );
    let long = publisher("/history", event_qos("/history"));
    short.publish(std_msgs::Int64 { data: 1 }).unwrap();
    long.publish(std_msgs::Int64 { data: 2 }).unwrap();
    println!("\nhistory published");
    let _spinning = Spinning::new(&node);
    let told = commands();
    let mut report = Report(Default::default());
    let mut quiet = false;
    for tick in 0u64.. {
        match told.try_recv().as_deref() {
            Ok("quiet") => quiet = true,
            Ok("resume") => quiet = false,
            Ok("exit") | Err(mpsc::TryRecvError::Disconnected) => break,
            _ => {}
        }
        if !quiet {
            let _ = deadline.publish(std_msgs::Int64 { data: tick as i64 });
            if tick % 4 == 0 {
                manual.assert_liveliness();
            }
        }
        report.set("matched", deadline.matched_count().to_string());
        report.set(
            "offered_deadline",
            deadline.deadline_missed().total_count.to_string(),
        );
        report.set(
            "incompatible",
            besteffort.incompatible_qos().total_count.to_string(),
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The other side of [`events_talker_role`]: subscriptions with the same
/// QoS (a reliable one on /besteffort), spun by an executor (their
/// deadline and liveliness checkers), reporting their statuses; told
/// `join`, it subscribes to /history and prints `history D` for each
/// message it gets.
#[test]
fn events_listener_role() {
    if std::env::var(ROLE).as_deref() != Ok("events_listener") {
        return;
    }
    let ctx = role_ctx();
    let node = ctx.create_node("hosts_events_listener").unwrap();
    let subscription = |topic: &str, qos: QoS| {
        node.create_subscription(topic, qos, |_: std_msgs::Int64| {})
            .unwrap()
    };
    let deadline = subscription("/deadline", event_qos("/deadline"));
    let manual = subscription("/manual", event_qos("/manual"));
    let automatic = subscription("/automatic", event_qos("/automatic"));
    let besteffort = subscription("/besteffort", QoS::keep_last(10));
    let _spinning = Spinning::new(&node);
    let told = commands();
    let mut report = Report(Default::default());
    let mut history = None;
    loop {
        match told.try_recv().as_deref() {
            Ok("join") => {
                history = Some(
                    node.create_polling_subscription::<std_msgs::Int64>(
                        "/history",
                        event_qos("/history"),
                        Default::default(),
                    )
                    .unwrap(),
                );
            }
            Ok("exit") | Err(mpsc::TryRecvError::Disconnected) => break,
            _ => {}
        }
        let alive = |s: &myelin::Subscription<std_msgs::Int64>| {
            let st = s.liveliness_changed();
            format!("{} {}", st.alive_count, st.not_alive_count)
        };
        report.set("matched", deadline.matched_count().to_string());
        report.set(
            "requested_deadline",
            deadline.deadline_missed().total_count.to_string(),
        );
        report.set("manual", alive(&manual));
        report.set("automatic", alive(&automatic));
        report.set(
            "incompatible",
            besteffort.incompatible_qos().total_count.to_string(),
        );
        if let Some(h) = &history {
            while let Some(m) = h.take() {
                println!("\nhistory {}", m.data);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One side of the events test: its reports as they come, and its stdin.
struct EventSide {
    proc: Proc,
    lines: mpsc::Receiver<String>,
    name: &'static str,
    /// Every report so far by name, and how far [`wait`](Self::wait) has
    /// read each (reports of one name are awaited in order; of different
    /// names, in any).
    seen: std::collections::HashMap<String, (Vec<String>, usize)>,
}

impl EventSide {
    fn start(bed: &TestBed, host: usize, role_name: &'static str) -> EventSide {
        let mut child = role(bed, host, role_name, &[]);
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        EventSide {
            proc: Proc(child),
            lines,
            name: role_name,
            seen: Default::default(),
        }
    }

    fn tell(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.proc.0.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Wait for a report `name V` with `ok(V)` after the one the last wait
    /// for `name` returned; returns V.
    fn wait(&mut self, name: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + LONG;
        loop {
            let (values, read) = self.seen.entry(name.to_string()).or_default();
            while *read < values.len() {
                *read += 1;
                if ok(&values[*read - 1]) {
                    return values[*read - 1].clone();
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "{}: no `{name}` report as awaited; reports: {:?}",
                    self.name, self.seen
                )
            });
            if let Some((n, v)) = line.split_once(' ') {
                self.seen
                    .entry(n.to_string())
                    .or_default()
                    .0
                    .push(v.to_string());
            }
        }
    }
}

/// QoS events across hosts, each as a ROS 2 user would see it in the
/// statuses (and event callbacks) of their endpoints, through two
/// routers on the test bed: matched on both sides; incompatible QoS
/// (best effort against reliable) on both sides; offered and requested
/// deadline missed when the talker goes quiet; manual-by-topic liveliness
/// lost when it stops asserting and back when it resumes; automatic
/// liveliness with a 1 s lease lost within the lease when a partition cuts
/// the hosts apart (zenoh's own lease, 10 s, has not run out: the token
/// is still there) and back when it heals; and a late joiner on the other
/// host gets the transient-local message that lives on, not the one whose
/// 1 s lifespan ran out.
#[test]
fn qos_events_cross_hosts() {
    let Some(bed) = bed(2) else { return };
    let _r1 = router(&bed, 1, &[]);
    let _r0 = router(&bed, 0, &[1]);
    let mut talker = EventSide::start(&bed, 0, "events_talker");
    let mut listener = EventSide::start(&bed, 1, "events_listener");
    let published = Instant::now();
    talker.wait("history", |v| v == "published");
    let nonzero = |v: &str| v != "0";
    talker.wait("matched", |v| v == "1");
    listener.wait("matched", |v| v == "1");
    talker.wait("incompatible", nonzero);
    listener.wait("incompatible", nonzero);
    listener.wait("manual", |v| v == "1 0");
    listener.wait("automatic", |v| v == "1 0");

    talker.tell("quiet");
    talker.wait("offered_deadline", nonzero);
    listener.wait("requested_deadline", nonzero);
    listener.wait("manual", |v| v == "0 1");
    talker.tell("resume");
    listener.wait("manual", |v| v == "1 0");

    bed.partition(1, true).unwrap();
    let cut = Instant::now();
    listener.wait("automatic", |v| v == "0 1");
    record(
        "a partition: automatic liveliness (1 s lease) lost after",
        cut.elapsed(),
    );
    bed.partition(1, false).unwrap();
    listener.wait("automatic", |v| v == "1 0");

    // The short-lived message is long expired (published before all the
    // above, 1 s lifespan); the other is not.
    std::thread::sleep(Duration::from_secs(2).saturating_sub(published.elapsed()));
    listener.tell("join");
    listener.wait("history", |v| {
        assert_ne!(v, "1", "an expired message reached a late joiner");
        v == "2"
    });
    // Anything else of the history arrives with it.
    std::thread::sleep(Duration::from_secs(1));
    for line in listener.lines.try_iter() {
        assert_ne!(
            line, "history 1",
            "an expired message reached a late joiner"
        );
    }
    drop(talker);
}

/// Not a test: the measurement behind BENCHMARKS.md's "Camera frames
/// across a 1 Gbit/s link" (speed lives in benchmarks). Run it in release
/// on an idle machine, as root:
///
/// ```text
/// cargo test --release -p myelin-cli --test hosts -- --ignored --nocapture measure_camera_frames
/// ```
///
/// Set `MYELIN_ZENOH_CONFIG` (the processes) and
/// `MYELIN_HOSTS_ROUTER_CONFIG` (the routers) to compare a zenoh
/// configuration with the default.
#[test]
#[ignore = "a measurement: run by hand in release (see its docs)"]
fn measure_camera_frames_on_a_1_gbit_link() {
    let Some(bed) = bed(2) else { return };
    println!(
        "| rate | QoS | frames | arrived | lost | latency p50 / p90 / max | publishing took | latency growth | on time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (hz, qos) in [
        (20, "keep_all"),
        (25, "keep_all"),
        (30, "keep_all"),
        (30, "best_effort"),
    ] {
        let n = hz * 4;
        let run = run_images(&bed, hz, n, qos);
        let (p50, p90, max) = image_latency(&run);
        // On time: no backlog (the last quarter of the frames is no later
        // than the first quarter plus a period) and the 90th percentile
        // within two periods.
        let period = 1_000_000 / hz as i64;
        let quarter = run.frames.len() / 4;
        let mean = |f: &[(u64, i64)]| f.iter().map(|x| x.1).sum::<i64>() / f.len().max(1) as i64;
        let growth = mean(&run.frames[run.frames.len() - quarter..]) - mean(&run.frames[..quarter]);
        let on_time = growth <= period && p90 <= 2 * period;
        println!(
            "| {hz} Hz | {qos} | {n} | {} | {} | {:.1} / {:.1} / {:.1} ms | {} | {:+.1} ms | {} |",
            run.frames.len(),
            run.lost,
            p50 as f64 / 1e3,
            p90 as f64 / 1e3,
            max as f64 / 1e3,
            run.publishing,
            growth as f64 / 1e3,
            if on_time { "yes" } else { "no" }
        );
    }
}

/// `myelin bench net --hosts` as the README runs it (short runs, 64 B and
/// a 4.6 MB camera frame): the ping-pong between two hosts of a fresh test
/// bed completes for myelin and both raw zenoh modes, and for CycloneDDS's
/// ddsperf where it is installed, each row with every message back; the
/// bench's beds are gone afterwards (no namespace named after it left).
#[test]
fn bench_net_across_hosts_measures_every_system() {
    // Only to know whether a bed can be made here (the bench makes its own).
    let Some(probe) = bed(2) else { return };
    drop(probe);
    let ddsperf = std::process::Command::new("ddsperf")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    let mut bench_pids = Vec::new();
    for (size, label, count) in [("64", "64B", 20u64), ("4665600", "4665600B", 5)] {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_myelin"))
            .args(["bench", "net", "--hosts", "--in-process", "--size", size])
            .args(["--count", &count.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `--in-process`: every job's bed is made in this child, so is
        // named after its pid.
        bench_pids.push(child.id());
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "bench net --hosts --size {size} failed: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut configs = vec!["myelin hosts", "zenoh-callback hosts", "zenoh-thread hosts"];
        if ddsperf {
            configs.push("ddsperf hosts");
        }
        for config in configs {
            let row = text
                .lines()
                .find(|l| l.starts_with("net") && l.contains(config) && l.contains(label))
                .unwrap_or_else(|| panic!("no row for {config} {label}:\n{text}"));
            let w: Vec<&str> = row.split_whitespace().collect();
            // scenario, system, the config's words, count, lost, ...
            let at = w.iter().position(|x| *x == label).unwrap();
            let (sent, lost): (u64, &str) = (w[at + 1].parse().unwrap(), w[at + 2]);
            // ddsperf runs for a time rather than a count.
            assert!(sent >= count && lost == "0", "{row}");
        }
    }
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    // (This test's own pid names the beds of the other tests running
    // beside it: not a leak.)
    let left = String::from_utf8_lossy(&left.stdout);
    for pid in bench_pids {
        let theirs = format!("mtb{pid}x");
        assert!(
            !left.contains(&theirs),
            "a namespace of the bench's beds was left behind: {left}"
        );
    }
}

/// Whether this machine lets a test shape the loopback of a network
/// namespace of its own (`unshare -n`, `tc`; root).
fn can_shape_a_loopback() -> bool {
    std::process::Command::new("unshare")
        .args(["-n", "tc", "qdisc", "show"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `myelin bench net` (zenoh and myelin, every ring shape) in a network
/// namespace of its own whose loopback carries 10 Mbit/s (`tc`): a
/// 256 KiB message is 0.2 s on the link, so whatever zenoh still queues
/// when a `put` returns takes longer than any fixed grace. Every row
/// completes with every message back: each stage keeps its session open
/// until the benchmark has its last reply (a stage that closed it 100 ms
/// after its last `put` lost that message here: 8 of the 11 rows failed), and
/// each ring blocks rather than drops when zenoh's queue is full.
#[test]
fn bench_net_on_a_slow_link_brings_every_message_back() {
    if !can_shape_a_loopback() {
        return skipped(&"`unshare -n` with `tc` is not available here");
    }
    // Small socket buffers (the kernel's 4 MiB would hold a whole
    // message, and a closed socket still sends what it holds): the rest
    // waits in zenoh's own queue, as a 4.6 MB frame does on 1 Gbit/s.
    let shaped = "ip link set lo up && \
        sysctl -qw net.ipv4.tcp_wmem='4096 16384 65536' && \
        sysctl -qw net.ipv4.tcp_rmem='4096 16384 65536' && \
        tc qdisc add dev lo root tbf rate 10mbit burst 256kb latency 2s && \
        exec \"$@\"";
    let out = std::process::Command::new("unshare")
        .args(["-n", "sh", "-c", shaped, "sh"])
        .arg(env!("CARGO_BIN_EXE_myelin"))
        .args(["bench", "net", "--in-process", "--size", "262144"])
        .args(["--count", "1", "--system", "zenoh", "--system", "myelin"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench net on a slow link failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each system's two pingpongs, its services (zenoh's queryable;
    // myelin's service and its raw queryable) and two relays, each with
    // its 11 messages (1 + the warm-up of 10) and none lost.
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("net ") && l.contains("256KiB"))
        .collect();
    let nets: Vec<&&str> = rows.iter().filter(|r| !r.contains("late joiner")).collect();
    assert_eq!(nets.len(), 11, "{text}");
    for row in nets {
        let w: Vec<&str> = row.split_whitespace().collect();
        let at = w.iter().position(|x| *x == "256KiB").unwrap();
        assert_eq!((w[at + 1], w[at + 2]), ("1", "0"), "{row}");
    }
}

/// A talker that publishes a large message once and exits at once
/// (`myelin topic pub`, zenoh only, through `myelin router`) on a slow
/// link: the listener gets the whole message. The loopback of a network
/// namespace of its own carries 1 Mbit/s (`tc`) with TCP buffers of 8 KiB,
/// so when the talker's context closes, most of the 120 KB still waits in
/// zenoh's queue; zenoh's close cut it (the listener got nothing, every
/// time) until the context waited for its peers to take what it sent.
#[test]
fn a_talker_that_exits_right_after_a_large_publish_is_heard_on_a_slow_link() {
    if !can_shape_a_loopback() {
        return skipped(&"`unshare -n` with `tc` is not available here");
    }
    let dir = std::env::temp_dir().join(format!("myelin_exit_talker_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Each wait is for a line a process prints when it is ready (at most
    // 60 s): no fixed sleep. `topic pub` itself waits for the listener's
    // subscription before it publishes.
    let script = r#"
        set -e
        ip link set lo up
        sysctl -qw net.ipv4.tcp_wmem='4096 8192 8192'
        sysctl -qw net.ipv4.tcp_rmem='4096 8192 8192'
        tc qdisc add dev lo root tbf rate 1mbit burst 80kb latency 5s
        M="$1"; D="$2"
        export MYELIN_LOG=warn MYELIN_TRANSPORT=zenoh
        ready() { for _ in $(seq 1200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done; echo "never ready: $1" >&2; cat "$1" >&2; exit 1; }
        MYELIN_TRANSPORT= "$M" router > "$D/router" 2>&1 & R=$!
        trap 'kill $R 2>/dev/null' EXIT
        ready "$D/router" listening
        timeout 30 "$M" topic echo --count 1 /big std_msgs/msg/String > "$D/echo" 2> "$D/echo.err" & E=$!
        ready "$D/echo.err" echoing
        "$M" topic pub /big std_msgs/msg/String "data: $(head -c 120000 /dev/zero | tr '\0' a)" > /dev/null
        wait $E
        grep -o 'a*' "$D/echo" | awk '{ if (length($0) > m) m = length($0) } END { print "heard", m + 0 }'
    "#;
    let out = std::process::Command::new("unshare")
        .args(["-n", "sh", "-c", script, "sh"])
        .arg(env!("CARGO_BIN_EXE_myelin"))
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the talker/listener script failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.trim(),
        "heard 120000",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
