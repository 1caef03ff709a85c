//! What is particular to the shared-memory transport, across real
//! processes: loans read in place, chunks given back by killed readers, a
//! publisher killed mid-stream, file permissions. What every transport
//! must do is in the conformance suite (`tests/conformance/`, `shm::*`).
//! The test binary runs itself as the other process (`MYELIN_SHM_ROLE`).
//! Each test uses its own domain, so tests running in parallel never see
//! each other.

#![cfg(feature = "shm")]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, Publisher, Subscription};

mod common {
    pub mod warmer;
}
use common::warmer::Warmer;

const ROLE: &str = "MYELIN_SHM_ROLE";
const LONG: Duration = Duration::from_secs(60);
const IMAGE: usize = 4_665_600; // 1440 x 1080 x 3

#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, myelin::Message)]
#[repr(C)]
#[message(pod)]
struct Stamp {
    seq: u64,
    value: f64,
}

fn ctx(domain: u32) -> Context {
    Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(true)
        .build()
        .unwrap()
}

fn env_u64(k: &str) -> u64 {
    std::env::var(k).unwrap().parse().unwrap()
}

fn wait_matched<T: myelin::Message>(p: &Publisher<T>, n: usize) {
    let deadline = Instant::now() + LONG;
    while p.subscription_count() < n {
        assert!(Instant::now() < deadline, "no subscription matched");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn wait_publishers<T: myelin::Message>(s: &Subscription<T>, n: usize) {
    let deadline = Instant::now() + LONG;
    while s.matched_count() < n {
        assert!(Instant::now() < deadline, "no publisher matched");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Wait until the publisher's shared memory in use is back at `baseline`
/// (returns are collected when the publisher looks, as
/// `shared_memory_in_use` does); fails after `LONG`, the message prefixed
/// with `what`.
fn wait_for_memory_back<T: myelin::Message>(p: &Publisher<T>, baseline: usize, what: &str) {
    let deadline = Instant::now() + LONG;
    while p.shared_memory_in_use() > baseline {
        assert!(
            Instant::now() < deadline,
            "{what}{} still in use, {baseline} at the start",
            p.shared_memory_in_use()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The other process.
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let domain = env_u64("MYELIN_SHM_DOMAIN") as u32;
    let count = env_u64("MYELIN_SHM_COUNT");
    let c = ctx(domain);
    let node = c
        .create_node(&format!("child_{}", std::process::id()))
        .unwrap();
    let mut line = String::new();
    match role.as_str() {
        "pub_pod" => {
            // Reliable keep_all that may wait as long as the test's
            // watchdog: a slow reader slows this publisher down, and no
            // publish is refused.
            let p = node
                .create_publisher::<Stamp>("stamps", QoS::keep_all().max_blocking_time(LONG))
                .unwrap();
            wait_matched(&p, 1);
            for seq in 0..count {
                let loan = p.loan_uninit().unwrap().write(Stamp {
                    seq,
                    value: seq as f64 * 0.5,
                });
                if let Err(e) = loan.publish() {
                    panic!("message {seq}: {e}");
                }
            }
            println!("done");
            let _ = std::io::stdin().read_line(&mut line);
        }
        "pub_then_leave" => {
            // Publishes `count` messages to one reader that is not reading
            // yet, then leaves when told: dropping everything, or exiting
            // the process without dropping (`MYELIN_SHM_LEAVE=exit`).
            let p = node
                .create_publisher::<Stamp>("stamps", QoS::keep_all())
                .unwrap();
            wait_matched(&p, 1);
            for seq in 0..count {
                p.publish(Stamp { seq, value: 0.0 }).unwrap();
            }
            println!("done");
            let _ = std::io::stdin().read_line(&mut line);
            if std::env::var("MYELIN_SHM_LEAVE").as_deref() == Ok("exit") {
                std::process::exit(0);
            }
            drop(p);
        }
        "pub_blocked_then_exit" => {
            // Fills its one reader (which is not reading yet), then exits
            // while another thread is inside a publish waiting for room:
            // that publish holds the connection as the exit asks it
            // whether the reader is behind.
            let qos = QoS::keep_all().max_blocking_time(Duration::from_millis(100));
            let p = node.create_publisher::<Stamp>("stamps", qos).unwrap();
            wait_matched(&p, 1);
            let mut seq = 0;
            let e = loop {
                match p.publish(Stamp { seq, value: 0.0 }) {
                    Ok(()) => seq += 1,
                    Err(e) => break e,
                }
            };
            assert!(
                matches!(e, myelin::PublishError::ResourceLimit { .. }),
                "{e}"
            );
            let started = Arc::new(AtomicBool::new(false));
            let flag = started.clone();
            std::thread::spawn(move || {
                loop {
                    flag.store(true, Ordering::Relaxed);
                    let _ = p.publish(Stamp { seq, value: 0.0 });
                }
            });
            while !started.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            // Only so that the publish is waiting when the process exits
            // (without the pause the test may pass for the wrong reason,
            // never fail).
            std::thread::sleep(Duration::from_millis(20));
            println!("full after {seq}");
            let _ = std::io::stdin().read_line(&mut line);
            std::process::exit(0);
        }
        "sub_inline_exit" => {
            // Exits the process from inside an inline callback: the thread
            // that calls `exit` is the one draining the inbox (it holds the
            // subscription's reader state). Logs on, so that a leave that
            // gave up waiting says so on stderr.
            myelin::init_logging();
            let _s = node
                .create_subscription_with(
                    "stamps",
                    QoS::keep_all(),
                    SubscriptionOptions::inline(),
                    |m: Stamp| {
                        println!("got {}", m.seq);
                        std::process::exit(0);
                    },
                )
                .unwrap();
            println!("ready");
            let _ = std::io::stdin().read_line(&mut line);
        }
        "sub_late" => {
            // Reads only when told, then leaves at once (no time for a
            // grace period to pass).
            let s = node
                .create_polling_subscription::<Stamp>("stamps", QoS::keep_all(), Default::default())
                .unwrap();
            println!("ready");
            let _ = std::io::stdin().read_line(&mut line);
            // "go", or "go <n>": how many to read.
            let count = line
                .trim()
                .strip_prefix("go ")
                .map_or(count, |n| n.parse().unwrap());
            for seq in 0..count {
                let m = s.wait_for_message(LONG).unwrap();
                assert_eq!(m.seq, seq);
            }
            // (A publish refused for want of room counts as lost here.)
            println!("got {count} lost {}", s.lost());
        }
        "pub_blob" => {
            let p = node
                .create_publisher::<Blob>("images", QoS::keep_all())
                .unwrap();
            wait_matched(&p, 1);
            for seq in 0..count {
                let mut loan = p.loan_slice(IMAGE).unwrap();
                loan.fill(seq as u8);
                loan[0..8].copy_from_slice(&seq.to_le_bytes());
                loan.publish().unwrap();
            }
            println!("done");
            let _ = std::io::stdin().read_line(&mut line);
        }
        "pub_forever" => {
            let p = node
                .create_publisher::<Stamp>("stamps", QoS::keep_last(10))
                .unwrap();
            println!("ready");
            let mut seq = 0;
            loop {
                let _ = p.publish(Stamp { seq, value: 0.0 });
                seq += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        "sub_hold" => {
            // Holds every message it gets (never drops its loans).
            let s = node
                .create_polling_subscription::<Blob>(
                    "images",
                    QoS::keep_last(4),
                    Default::default(),
                )
                .unwrap();
            println!("ready");
            let mut held = Vec::new();
            loop {
                if let Ok(m) = s.wait_for_message(Duration::from_millis(100)) {
                    held.push(m);
                    println!("holding {}", held.len());
                }
            }
        }
        "sub_idle" => {
            // Subscribes (reliable keep_all, limit 2) and never reads.
            let _s = node
                .create_polling_subscription::<Stamp>(
                    "stamps",
                    QoS::keep_all().max_samples(2),
                    Default::default(),
                )
                .unwrap();
            println!("ready");
            let _ = std::io::stdin().read_line(&mut line);
        }
        "double_server" => {
            let _srv = node
                .create_service::<i64, i64>("double", |x| 2 * x)
                .unwrap();
            let mut exec = Executor::new();
            exec.add_node(&node).unwrap();
            let stop = exec.stop_handle();
            let spin = std::thread::spawn(move || exec.spin());
            println!("ready");
            let _ = std::io::stdin().read_line(&mut line);
            stop.stop();
            spin.join().unwrap().unwrap();
        }
        "crowd" => {
            // More polling subscriptions than this process's wake-up table
            // has slots, each created and waited on in turn (so each waits
            // before the publisher has found it).
            let mut subs = Vec::new();
            for i in 0..count {
                let s = node
                    .create_polling_subscription::<u64>(
                        "crowd",
                        QoS::keep_last(1).transient_local(),
                        Default::default(),
                    )
                    .unwrap();
                let m = s
                    .wait_for_message(LONG)
                    .unwrap_or_else(|e| panic!("subscription {i}: {e}"));
                assert_eq!(*m, 42);
                subs.push(s);
            }
            println!("all heard {}", subs.len());
            // Then a live message, sent while the last one (which has no
            // slot of its own) sleeps.
            println!("waiting");
            let last = subs.last().unwrap();
            let asleep = std::time::Instant::now();
            let m = last.wait_for_message(LONG).expect("the live message");
            assert_eq!(*m, 43);
            // The wait's last look at its deadline finds the message even
            // if nothing woke it: woken means long before that.
            assert!(
                asleep.elapsed() < LONG / 2,
                "nothing woke the subscription: it found the message at its deadline"
            );
            println!("heard live");
            // An executor created now has no slot either: its callback
            // still runs for a message from the other process.
            let (tx, rx) = std::sync::mpsc::channel::<u64>();
            let tx = std::sync::Mutex::new(tx);
            let s = node
                .create_subscription("crowd_exec", QoS::keep_last(1), move |m: u64| {
                    let _ = tx.lock().unwrap().send(m);
                })
                .unwrap();
            let mut exec = Executor::new();
            exec.add_node(&node).unwrap();
            let stop = exec.stop_handle();
            let spin = std::thread::spawn(move || exec.spin());
            wait_publishers(&s, 1);
            println!("executor waiting");
            let asleep = std::time::Instant::now();
            assert_eq!(rx.recv_timeout(LONG).expect("the executor's message"), 44);
            assert!(asleep.elapsed() < LONG / 2, "the executor was not woken");
            println!("executor heard");
            stop.stop();
            spin.join().unwrap().unwrap();
            let _ = std::io::stdin().read_line(&mut line);
        }
        "sub_busy_poll" => {
            // A callback on a busy-polling executor (the low-latency
            // mode): reports when `count` messages arrived, all in order.
            let got = Arc::new(std::sync::Mutex::new(Vec::new()));
            let g = got.clone();
            let s = node
                .create_subscription("stamps", QoS::keep_all(), move |m: Stamp| {
                    g.lock().unwrap().push(m.seq);
                })
                .unwrap();
            let mut exec = Executor::new();
            exec.set_idle_wait(myelin::IdleWait::BusyPoll);
            exec.add_node(&node).unwrap();
            let stop = exec.stop_handle();
            let spin = std::thread::spawn(move || exec.spin());
            wait_publishers(&s, 1);
            println!("polling");
            let deadline = Instant::now() + LONG;
            while got.lock().unwrap().len() < count as usize && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            stop.stop();
            spin.join().unwrap().unwrap();
            let got = got.lock().unwrap();
            let in_order = *got == (0..count).collect::<Vec<_>>();
            println!("got {} in order {in_order} lost {}", got.len(), s.lost());
            let _ = std::io::stdin().read_line(&mut line);
        }
        other => panic!("unknown role {other}"),
    }
}

/// A child process; killed when dropped.
struct Peer {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Peer {
    fn spawn(role: &str, domain: u32, count: u64) -> Peer {
        Self::spawn_leaving(role, domain, count, "drop")
    }

    /// [`spawn`](Self::spawn) with how the child leaves (`drop` or `exit`).
    fn spawn_leaving(role: &str, domain: u32, count: u64, leave: &str) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env("MYELIN_SHM_DOMAIN", domain.to_string())
            .env("MYELIN_SHM_COUNT", count.to_string())
            .env("MYELIN_SHM_LEAVE", leave)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Peer { child, out }
    }

    /// Wait for a line containing `what`; returns it.
    fn expect(&mut self, what: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "peer exited before printing {what:?}");
            if line.contains(what) {
                return line;
            }
        }
    }

    /// A peer around a child spawned by hand.
    fn from_child(mut child: Child) -> Peer {
        let out = BufReader::new(child.stdout.take().unwrap());
        Peer { child, out }
    }

    /// Kill the child after `limit` unless the returned guard is dropped
    /// first (bounds reads that would otherwise wait for a hung child).
    fn watchdog(&self, limit: Duration) -> std::sync::mpsc::Sender<()> {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let pid = self.child.id();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        });
        tx
    }

    fn finish(mut self) {
        drop(self.child.stdin.take());
        let st = self.child.wait().unwrap();
        assert!(st.success(), "peer failed: {st}");
    }

    fn say(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn kill9(&mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_pod_type_crosses_processes_in_order_without_loss() {
    let c = ctx(150);
    let node = c.create_node("parent").unwrap();
    let sub = node
        .create_polling_subscription::<Stamp>("stamps", QoS::keep_all(), Default::default())
        .unwrap();
    let peer = Peer::spawn("pub_pod", 150, 2000);
    for seq in 0..2000u64 {
        let m = sub.wait_for_message(LONG).unwrap();
        // Read in place from the publisher's pool: zero copies.
        assert!(matches!(m, myelin::Received::InPlace(_)), "read in place");
        assert_eq!(
            *m,
            Stamp {
                seq,
                value: seq as f64 * 0.5
            }
        );
    }
    assert_eq!(sub.lost(), 0);
    peer.finish();
}

/// `Publisher::warm` reaches a busy-polling executor in another process
/// (its inbox's lane marked with nothing behind it): warming in a loop
/// while messages go out delivers nothing extra and loses nothing, and
/// every message arrives once, in order.
#[test]
fn warming_a_publisher_with_a_subscriber_in_another_process_loses_nothing() {
    const N: u64 = 2000;
    let c = ctx(166);
    let node = c.create_node("parent").unwrap();
    let p = Arc::new(
        node.create_publisher::<Stamp>("stamps", QoS::keep_all().max_blocking_time(LONG))
            .unwrap(),
    );
    let mut peer = Peer::spawn("sub_busy_poll", 166, N);
    let _watchdog = peer.watchdog(LONG * 2);
    wait_matched(&p, 1);
    peer.expect("polling");
    for _ in 0..1000 {
        p.warm();
    }
    let warmer = Warmer::start(&p, true);
    for seq in 0..N {
        p.publish(Stamp { seq, value: 0.0 }).unwrap();
        if seq % 64 == 0 {
            std::thread::yield_now();
        }
    }
    let report = peer.expect("got ");
    warmer.stop();
    assert_eq!(report.trim(), format!("got {N} in order true lost 0"));
    peer.finish();
}

/// rclcpp's `spin_some` executes all work available now, from any source:
/// a control loop that calls `spin_some` (then `spin_all`) once per cycle
/// over a subscription fed by another process gets every message, in
/// order. (`spin_some` used to run only what was already queued: messages
/// from other processes were never collected, and this loop got none.)
#[test]
fn spin_some_and_spin_all_collect_messages_from_another_process() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    const N: u64 = 2000;
    let c = ctx(154);
    let node = c.create_node("parent").unwrap();
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    let _sub = node
        .create_subscription::<Stamp, _>("stamps", QoS::keep_all(), move |m: Stamp| {
            assert_eq!(m.seq, g.load(Ordering::Relaxed), "in order");
            g.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let peer = Peer::spawn("pub_pod", 154, N);
    let deadline = Instant::now() + LONG;
    let cycle = |exec: &mut Executor, half: bool| {
        if half {
            exec.spin_some().unwrap()
        } else {
            exec.spin_all(Duration::from_millis(5)).unwrap()
        }
    };
    for (half, until) in [(true, N / 2), (false, N)] {
        while got.load(Ordering::Relaxed) < until {
            assert!(
                Instant::now() < deadline,
                "the loop collected {} of {N} messages",
                got.load(Ordering::Relaxed)
            );
            if cycle(&mut exec, half) == 0 {
                // The loop's own work between cycles.
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    assert_eq!(got.load(Ordering::Relaxed), N);
    peer.finish();
}

/// Reliable keep_all across processes, a fast publisher and a slow reader
/// (a callback that stalls now and then, limit 4): the publisher waits for
/// room instead of being refused or dropping, the executor refills the
/// buffer as the callback makes room, and all 20,000 messages arrive, in
/// order, none counted lost: delivered == published.
#[test]
fn a_slow_keep_all_reader_in_another_process_gets_all_20000_messages() {
    const N: u64 = 20_000;
    let c = ctx(152);
    let node = c.create_node("parent").unwrap();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = got.clone();
    let sub = node
        .create_subscription("stamps", QoS::keep_all().max_samples(4), move |m: Stamp| {
            if m.seq.is_multiple_of(50) {
                std::thread::sleep(Duration::from_millis(1)); // a stall
            }
            g.lock().unwrap().push(m.seq);
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let peer = Peer::spawn("pub_pod", 152, N);
    let done = exec
        .spin_until(LONG, || got.lock().unwrap().len() as u64 >= N)
        .unwrap();
    assert!(done, "only {} of {N} arrived", got.lock().unwrap().len());
    assert_eq!(*got.lock().unwrap(), (0..N).collect::<Vec<u64>>());
    assert_eq!(sub.lost(), 0);
    peer.finish();
}

/// A reliable keep_all reader that stops reading makes a patient publisher
/// (max_blocking_time 60 s) wait; when that reader is killed, the publisher
/// stops waiting at once (a dead reader frees no room) instead of waiting
/// out its 60 s, and goes on publishing.
#[test]
fn a_writer_waiting_for_a_reader_that_dies_stops_waiting() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    const N: u64 = 2_000;
    let c = ctx(157);
    let node = c.create_node("parent").unwrap();
    let p = node
        .create_publisher::<Stamp>("stamps", QoS::keep_all().max_blocking_time(LONG))
        .unwrap();
    let mut peer = Peer::spawn("sub_idle", 157, 0);
    peer.expect("ready");
    wait_matched(&p, 1);
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        for seq in 0..N {
            match p.publish(Stamp { seq, value: 0.0 }) {
                Ok(()) | Err(myelin::PublishError::ResourceLimit { .. }) => {}
                Err(e) => panic!("{e}"),
            }
            d.fetch_add(1, Ordering::Relaxed);
        }
    });
    // Until the writer stalls on the full reader (or has finished).
    let mut last = u64::MAX;
    while done.load(Ordering::Relaxed) != last && done.load(Ordering::Relaxed) < N {
        last = done.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        done.load(Ordering::Relaxed) < N,
        "the idle reader slowed nothing"
    );
    peer.kill9();
    writer.join().unwrap();
    assert!(
        started.elapsed() < LONG / 2,
        "the writer waited {:?} for a dead reader",
        started.elapsed()
    );
}

#[test]
fn an_image_sized_blob_is_read_in_place_across_processes() {
    let c = ctx(151);
    let node = c.create_node("parent").unwrap();
    let sub = node
        .create_polling_subscription::<Blob>("images", QoS::keep_all(), Default::default())
        .unwrap();
    let peer = Peer::spawn("pub_blob", 151, 12);
    for seq in 0..12u64 {
        let m = sub.wait_for_message(LONG).unwrap();
        assert_eq!(m.len(), IMAGE);
        assert_eq!(u64::from_le_bytes(m[0..8].try_into().unwrap()), seq);
        assert!(m[8..].iter().all(|b| *b == seq as u8), "intact");
    }
    peer.finish();
}

#[test]
fn a_killed_reader_holding_loans_gives_its_chunks_back() {
    let c = ctx(158);
    let node = c.create_node("parent").unwrap();
    let p = node
        .create_publisher::<Blob>("images", QoS::keep_last(4))
        .unwrap();
    let baseline = p.shared_memory_in_use();
    let mut peer = Peer::spawn("sub_hold", 158, 0);
    peer.expect("ready");
    wait_matched(&p, 1);
    for i in 0..6u8 {
        let mut loan = p.loan_slice(64 * 1024).unwrap();
        loan.fill(i);
        loan.publish().unwrap();
        peer.expect(&format!("holding {}", i + 1));
    }
    assert!(p.shared_memory_in_use() >= 6, "the reader holds its loans");
    peer.kill9();
    let deadline = Instant::now() + LONG;
    while (p.shared_memory_in_use() > baseline || p.subscription_count() > 0)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(p.shared_memory_in_use(), baseline, "chunks reclaimed");
    assert_eq!(p.subscription_count(), 0);
}

#[test]
fn a_killed_publisher_leaves_the_reader_working_and_a_restarted_one_rejoins() {
    let c = ctx(159);
    let node = c.create_node("parent").unwrap();
    let sub = node
        .create_polling_subscription::<Stamp>("stamps", QoS::keep_last(10), Default::default())
        .unwrap();
    for round in 0..2 {
        let mut peer = Peer::spawn("pub_forever", 159, 0);
        peer.expect("ready");
        wait_publishers(&sub, 1);
        for _ in 0..20 {
            sub.wait_for_message(LONG).unwrap();
        }
        peer.kill9();
        let deadline = Instant::now() + LONG;
        while sub.matched_count() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            sub.matched_count(),
            0,
            "round {round}: dead publisher forgotten"
        );
    }
}

#[test]
fn shared_memory_objects_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let c = ctx(160);
    let node = c.create_node("parent").unwrap();
    let p = node
        .create_publisher::<Blob>("perm", QoS::default())
        .unwrap();
    let _s = node
        .create_polling_subscription::<Blob>("perm", QoS::default(), Default::default())
        .unwrap();
    let _loan = p.loan_slice(16).unwrap();
    let pid = std::process::id();
    let dir = myelin_shm_dir();
    let mine: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with("myelin_") && n.contains(&format!("_{pid}_"))
        })
        .collect();
    assert!(mine.len() >= 3, "announcement, inbox, pool: {mine:?}");
    for e in mine {
        let mode = e.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{:?}", e.path());
    }
}

/// The chunk-pool files of `domain` (`myelin_<uid>_<domain>_k_...`).
fn pool_files(domain: u32) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    let prefix = format!("myelin_{uid}_{domain}_k_");
    std::fs::read_dir(myelin_shm_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// A publisher that leaves (dropped, or its process exiting) while its
/// only reader has not taken its messages yet leaves its pool's file for
/// that reader; the reader, once done, removes it, though no process of
/// the domain stays to sweep (every process of a launch file exiting
/// together used to leave the file behind).
#[test]
fn a_pool_left_to_a_late_reader_goes_with_that_reader() {
    for (domain, leave) in [(162, "exit"), (161, "drop")] {
        let mut sub = Peer::spawn("sub_late", domain, 5);
        sub.expect("ready");
        let mut publisher = Peer::spawn_leaving("pub_then_leave", domain, 5, leave);
        publisher.expect("done");
        publisher.finish();
        // (The reader's transport may have moved the messages into the
        // subscription, and so mapped the pool, already.)
        sub.say("go");
        sub.expect("got 5 lost 0");
        sub.finish();
        assert_eq!(
            pool_files(domain),
            Vec::<String>::new(),
            "{leave}: the reader removes the pool it was left"
        );
    }
}

/// The same when the leaving publisher's connection is held by a publish
/// on another thread (waiting for room) as its process exits: the exit
/// waits for it rather than keeping the file for nobody (it used to give
/// up at once and leave the file behind; a discovery pass holding the
/// connection at that moment did the same, the flaky case CI saw).
#[test]
fn a_pool_left_while_a_publish_waits_still_goes_with_its_reader() {
    let domain = 163;
    let mut sub = Peer::spawn("sub_late", domain, 0);
    sub.expect("ready");
    let mut publisher = Peer::spawn("pub_blocked_then_exit", domain, 0);
    let full = publisher.expect("full after ");
    let sent: u64 = full
        .split("full after ")
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(sent > 0, "{full}");
    publisher.finish();
    sub.say(&format!("go {sent}"));
    sub.expect(&format!("got {sent}"));
    sub.finish();
    assert_eq!(
        pool_files(domain),
        Vec::<String>::new(),
        "the reader removes the pool it was left"
    );
}

/// A process that exits from inside an inline callback of a subscription
/// fed through shared memory: the exiting thread holds that
/// subscription's reader state, so its exit rule must not wait for it
/// (it used to wait its whole bound, 500 ms per such subscription, then
/// leave without it; now a leave that gives up waiting says so).
#[test]
fn exit_from_an_inline_callback_does_not_wait_for_itself() {
    let domain = 165;
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env(ROLE, "sub_inline_exit")
        .env("MYELIN_SHM_DOMAIN", domain.to_string())
        .env("MYELIN_SHM_COUNT", "0")
        .env("MYELIN_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed if the test fails (or the child hangs: the reads below are
    // bounded by the watchdog, which kills it after LONG).
    let mut peer = Peer::from_child(child);
    let watchdog = peer.watchdog(LONG);
    peer.expect("ready");
    let c = ctx(domain);
    let node = c.create_node("feeder").unwrap();
    let p = node
        .create_publisher::<Stamp>("stamps", QoS::keep_all())
        .unwrap();
    wait_matched(&p, 1);
    p.publish(Stamp { seq: 7, value: 0.0 }).unwrap();
    peer.expect("got 7");
    let mut err = String::new();
    let mut stderr = peer.child.stderr.take().unwrap();
    stderr.read_to_string(&mut err).unwrap();
    let st = peer.child.wait().unwrap();
    drop(watchdog);
    assert!(st.success(), "{st} {err}");
    // The warning is what the exit rule says when its wait runs out (it
    // did here before the fix: the rule waited for its own thread).
    assert!(!err.contains("gave up waiting"), "{err}");
}

fn myelin_shm_dir() -> std::path::PathBuf {
    std::env::var_os("MYELIN_SHM_DIR").map_or_else(|| "/dev/shm".into(), Into::into)
}

/// `call_async` reaches a server in another process (it used to fail at
/// once with "no server" when the only server was remote).
#[test]
fn call_async_reaches_a_server_in_another_process() {
    let c = ctx(153);
    let node = c.create_node("caller").unwrap();
    let client = node.create_client::<i64, i64>("double").unwrap();
    let mut peer = Peer::spawn("double_server", 153, 0);
    peer.expect("ready");
    assert!(client.wait_for_service(LONG));
    let a = client.call_async(21);
    let b = client.call_async(-4);
    assert_eq!(futures::executor::block_on(a).unwrap(), 42);
    assert_eq!(futures::executor::block_on(b).unwrap(), -8);
    peer.finish();
}

/// A process with more polling subscriptions than its wake-up table has
/// slots (256): the ones without a slot of their own still hear messages
/// from other processes (they look every 10 ms instead of being woken), a
/// polling subscription and an executor alike. Before, they slept until
/// their timeout: nobody could signal them.
#[test]
fn more_polling_subscriptions_than_wake_slots_still_hear_other_processes() {
    let c = ctx(155);
    let node = c.create_node("crowd_publisher").unwrap();
    let p = node
        .create_publisher::<u64>("crowd", QoS::keep_last(1).transient_local())
        .unwrap();
    p.publish(42).unwrap();
    let n = WAKE_SLOTS + 20;
    let mut peer = Peer::spawn("crowd", 155, n);
    peer.expect(&format!("all heard {n}"));
    peer.expect("waiting");
    // Only so that the peer is asleep when the message comes (without
    // the pause the test may pass for the wrong reason, never fail).
    std::thread::sleep(Duration::from_millis(200));
    p.publish(43).unwrap();
    peer.expect("heard live");
    let q = node
        .create_publisher::<u64>("crowd_exec", QoS::keep_last(1))
        .unwrap();
    wait_matched(&q, 1);
    peer.expect("executor waiting");
    std::thread::sleep(Duration::from_millis(200));
    q.publish(44).unwrap();
    peer.expect("executor heard");
    peer.finish();
}

/// Slots of a process's wake-up table (`myelin_shm::wake::WAKE_SLOTS`).
const WAKE_SLOTS: u64 = 256;

#[test]
fn a_detached_loan_is_filled_on_another_thread_and_refused_by_another_publisher() {
    let c = ctx(156);
    let node = c.create_node("parent").unwrap();
    let images = node
        .create_publisher::<Blob>("images", QoS::keep_last(4))
        .unwrap();
    let other = node
        .create_publisher::<Blob>("other", QoS::keep_last(4))
        .unwrap();
    let sub = node
        .create_polling_subscription::<Blob>("images", QoS::keep_last(4), Default::default())
        .unwrap();
    let baseline = images.shared_memory_in_use();

    // Filled on another thread, published by the publisher that lent it.
    let loan = images.loan_slice(64 * 1024).unwrap().detach();
    let loan = std::thread::spawn(move || {
        let mut loan = loan;
        loan.fill(7);
        loan
    })
    .join()
    .unwrap();
    images.publish_detached(loan).unwrap();
    let m = sub.wait_for_message(LONG).unwrap();
    assert_eq!(m.len(), 64 * 1024);
    assert!(m.iter().all(|b| *b == 7));
    drop(m);

    // Handed to another publisher: refused, and the memory goes back to
    // the pool that lent it.
    let stray = images.loan_slice(64 * 1024).unwrap().detach();
    match other.publish_detached(stray) {
        Err(myelin::PublishError::ForeignLoan(topic)) => assert_eq!(topic, "/other"),
        r => panic!("a foreign loan was not refused: {r:?}"),
    }
    assert_eq!(images.shared_memory_in_use(), baseline, "chunk returned");
    assert!(sub.take().is_none(), "nothing was published");
}

/// A loan whose only readers are in other contexts is sent from the pool
/// without an owner being made for it (no allocation); one with a reader
/// in its own context too gets an owner and reaches both. Either way, and
/// for loans dropped unpublished, every chunk comes back: the pool's use
/// returns to where it started once the readers dropped their messages.
#[test]
fn loans_sent_or_dropped_all_come_back_to_the_pool() {
    let (a, b) = (ctx(163), ctx(163));
    let p = a
        .create_node("lender")
        .unwrap()
        .create_publisher::<Blob>("/loans", QoS::keep_last(4))
        .unwrap();
    let remote = b
        .create_node("reader")
        .unwrap()
        .create_polling_subscription::<Blob>("/loans", QoS::keep_last(4), Default::default())
        .unwrap();
    let deadline = std::time::Instant::now() + LONG;
    while p.subscription_count() == 0 {
        assert!(std::time::Instant::now() < deadline, "never matched");
        std::thread::sleep(Duration::from_millis(5));
    }
    let baseline = p.shared_memory_in_use();
    for i in 0..20u8 {
        let mut loan = p.loan_slice(1024).unwrap();
        loan.fill(i);
        loan.publish().unwrap();
        let m = remote.wait_for_message(LONG).unwrap();
        assert!(m.len() == 1024 && m.iter().all(|x| *x == i), "message {i}");
        // Dropped unpublished: back to the pool at once.
        drop(p.loan_slice(1024).unwrap());
    }
    // A reader in the lender's own context as well.
    let local = a
        .create_node("near")
        .unwrap()
        .create_polling_subscription::<Blob>("/loans", QoS::keep_last(4), Default::default())
        .unwrap();
    for i in 0..5u8 {
        let mut loan = p.loan_slice(2048).unwrap();
        loan.fill(100 + i);
        loan.publish().unwrap();
        for s in [&local, &remote] {
            let m = s.wait_for_message(LONG).unwrap();
            assert!(m.len() == 2048 && m.iter().all(|x| *x == 100 + i));
        }
    }
    // Returns are collected when the publisher looks (`shared_memory_in_use`
    // does): wait for the reader's last give-back.
    wait_for_memory_back(&p, baseline, "");
}

/// A publisher hands its own reference to a chunk to the last reader that
/// takes it (no count taken and dropped per message). When that reader
/// refuses the chunk (it holds all it may), the publisher must keep and
/// drop its reference itself: with one reader that holds every message it
/// gets and one that drops them, encoded and loaned messages alike, every
/// chunk comes back once the holder lets go, and no reader sees another
/// message's bytes.
#[test]
fn chunks_refused_by_a_full_reader_still_come_back() {
    let (a, b, c) = (ctx(167), ctx(167), ctx(167));
    let p = a
        .create_node("lender")
        .unwrap()
        .create_publisher::<Blob>("/held", QoS::keep_last(4))
        .unwrap();
    let reader = |cx: &Context, name: &str| {
        cx.create_node(name)
            .unwrap()
            .create_polling_subscription::<Blob>("/held", QoS::keep_last(4), Default::default())
            .unwrap()
    };
    // The holder connects last, so it is the connection a publish would
    // hand its reference to.
    let deadline = Instant::now() + LONG;
    let dropper = reader(&c, "dropper");
    while p.subscription_count() < 1 {
        assert!(Instant::now() < deadline, "never matched");
        std::thread::sleep(Duration::from_millis(5));
    }
    let holder = reader(&b, "holder");
    while p.subscription_count() < 2 {
        assert!(Instant::now() < deadline, "never matched");
        std::thread::sleep(Duration::from_millis(5));
    }
    let baseline = p.shared_memory_in_use();
    let mut held = Vec::new();
    for i in 0..200u32 {
        let byte = (i % 251) as u8;
        if i % 2 == 0 {
            p.publish(Blob::from(vec![byte; 512])).unwrap();
        } else {
            let mut loan = p.loan_slice(512).unwrap();
            loan.fill(byte);
            loan.publish().unwrap();
        }
        let m = dropper.wait_for_message(LONG).unwrap();
        assert!(m.iter().all(|x| *x == byte), "message {i} to the dropper");
        while let Some(m) = holder.take() {
            held.push(m);
        }
    }
    assert!(!held.is_empty(), "the holder got messages");
    assert!(
        held.len() < 200,
        "the holder was refused some ({} held)",
        held.len()
    );
    for m in &held {
        let first = m[0];
        assert!(
            m.len() == 512 && m.iter().all(|x| *x == first),
            "a held message changed"
        );
    }
    drop(held);
    wait_for_memory_back(&p, baseline, "");
}

/// A polled `take` from an empty buffer gets a lone message straight from
/// the inbox (no push into the buffer and pop): it must keep every promise
/// the buffered path keeps. keep_last(1) returns the newest of several
/// (the others counted lost), deeper keep_last and keep_all return them
/// in order without loss (keep_all at `max_samples` 1 too), an expired
/// lone message is counted and not returned, its info names its
/// publisher, and a message already buffered from this process comes
/// first.
#[test]
fn a_polled_take_from_an_empty_buffer_keeps_every_qos_promise() {
    let (a, b) = (ctx(164), ctx(164));
    let (pn, sn) = (
        a.create_node("far").unwrap(),
        b.create_node("near").unwrap(),
    );
    let stamp = |seq: u64| Stamp {
        seq,
        value: seq as f64,
    };
    let pair_with = |topic: &str, sub_qos: QoS, pub_qos: QoS| {
        let s = sn
            .create_polling_subscription::<Stamp>(topic, sub_qos, Default::default())
            .unwrap();
        let p = pn.create_publisher::<Stamp>(topic, pub_qos).unwrap();
        wait_matched(&p, 1);
        wait_publishers(&s, 1);
        (p, s)
    };
    let pair = |topic: &str, qos: QoS| pair_with(topic, qos, qos);
    let seqs = |s: &Subscription<Stamp>| {
        std::iter::from_fn(|| s.take().map(|m| m.seq)).collect::<Vec<_>>()
    };

    // keep_last(1): three waiting, the newest is taken.
    let (p, s) = pair("/last1", QoS::keep_last(1));
    for i in 1..=3 {
        p.publish(stamp(i)).unwrap();
    }
    assert_eq!(seqs(&s), [3]);
    assert_eq!(s.lost(), 2);

    // keep_last(4): one, then two waiting.
    let (p, s) = pair("/last4", QoS::keep_last(4));
    p.publish(stamp(1)).unwrap();
    assert_eq!(seqs(&s), [1]);
    p.publish(stamp(2)).unwrap();
    p.publish(stamp(3)).unwrap();
    assert_eq!(seqs(&s), [2, 3]);
    assert_eq!(s.lost(), 0);

    // keep_all with room for one, a message from each of two publishers
    // waiting: the second stays in the inbox until the first is taken.
    let (p, s) = pair_with("/all", QoS::keep_all().max_samples(1), QoS::keep_all());
    let p2 = pn
        .create_publisher::<Stamp>("/all", QoS::keep_all())
        .unwrap();
    wait_publishers(&s, 2);
    wait_matched(&p2, 1);
    p.publish(stamp(1)).unwrap();
    p2.publish(stamp(2)).unwrap();
    let mut got = seqs(&s);
    got.extend(seqs(&s));
    got.sort();
    assert_eq!(got, [1, 2]);
    assert_eq!(s.lost(), 0);

    // Expired on the way: counted, not handed out.
    let (p, s) = pair(
        "/brief",
        QoS::keep_last(4).lifespan(Duration::from_millis(1)),
    );
    p.publish(stamp(1)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(s.take().is_none());
    assert_eq!((s.expired(), s.lost()), (1, 1));

    // Its info names the publisher in the other context.
    let (p, s) = pair("/info", QoS::keep_last(4));
    p.publish(stamp(7)).unwrap();
    let (m, info) = s.take_with_info().unwrap();
    assert_eq!((m.seq, info.publisher_gid()), (7, p.gid()));

    // A message from this context is already buffered: it comes first.
    let (p, s) = pair("/mixed", QoS::keep_last(4));
    let local = sn
        .create_publisher::<Stamp>("/mixed", QoS::keep_last(4))
        .unwrap();
    local.publish(stamp(1)).unwrap();
    p.publish(stamp(2)).unwrap();
    assert_eq!(seqs(&s), [1, 2]);
}

/// A reader holds each chunk it reads in place in a lease slot of the
/// publisher's mapped pool (64 slots at most, a chunk's index modulo that),
/// or, when the slot is taken, in an `Arc` of its own. Holding more
/// messages than there are slots (pools of 64, 128 and 256 chunks), with a
/// clone of each, must neither give a chunk back while a holder remains
/// (the publisher would write a later message over it) nor keep one: with
/// the first holders dropped and 300 more messages published, every copy
/// is as published, and in the end every chunk comes back. Three rounds,
/// so slots are used again.
#[test]
fn more_messages_held_in_place_than_lease_slots_all_come_back() {
    let (a, b) = (ctx(168), ctx(168));
    let p = a
        .create_node("lender")
        .unwrap()
        .create_publisher::<Blob>("/held", QoS::keep_all())
        .unwrap();
    let reader = b
        .create_node("holder")
        .unwrap()
        .create_polling_subscription::<Blob>("/held", QoS::keep_all(), Default::default())
        .unwrap();
    let deadline = Instant::now() + LONG;
    while p.subscription_count() == 0 {
        assert!(Instant::now() < deadline, "never matched");
        std::thread::sleep(Duration::from_millis(5));
    }
    let baseline = p.shared_memory_in_use();
    let send_and_hold = |tags: std::ops::Range<u32>| -> Vec<(u32, Blob)> {
        tags.map(|t| {
            let mut loan = p.loan_slice(256).unwrap();
            for (k, byte) in loan.iter_mut().enumerate() {
                *byte = t.to_le_bytes()[k % 4];
            }
            loan.publish().unwrap();
            (t, reader.wait_for_message(LONG).unwrap().into_owned())
        })
        .collect()
    };
    let check = |(t, m): &(u32, Blob)| {
        assert!(
            m.len() == 256 && (m.iter().enumerate()).all(|(k, x)| *x == t.to_le_bytes()[k % 4]),
            "message {t} was overwritten while held"
        );
    };
    for round in 0..3u32 {
        let first = send_and_hold(round * 1000..round * 1000 + 300);
        let copies: Vec<(u32, Blob)> = first.clone();
        drop(first);
        let second = send_and_hold(round * 1000 + 500..round * 1000 + 800);
        copies.iter().chain(&second).for_each(check);
        drop((copies, second));
        wait_for_memory_back(&p, baseline, &format!("round {round}: "));
    }
}
