//! The shared-memory transport across real processes: the test binary runs
//! itself as the other process (`MYELIN_SHM_ROLE`). Each test uses its own
//! domain, so tests running in parallel never see each other.

#![cfg(feature = "shm")]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, CreateEndpointError, Publisher, Subscription};

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

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, myelin::Message)]
#[message(cdr, name = "test_msgs/msg/Pose")]
struct Pose {
    frame: String,
    seq: u32,
    xyz: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, myelin::Message)]
#[message(cdr, name = "test_msgs/msg/Other")]
struct Other {
    x: i32,
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

/// Publish until accepted (keep_all subscribers may be momentarily full).
fn publish_reliably<T: myelin::Message>(p: &Publisher<T>, msg: T) {
    let deadline = Instant::now() + LONG;
    let mut m = msg;
    loop {
        match p.publish(m.clone()) {
            Ok(()) => return,
            Err(myelin::PublishError::ResourceLimit { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_micros(200));
                m = m.clone();
            }
            Err(e) => panic!("{e}"),
        }
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
            let p = node
                .create_publisher::<Stamp>("stamps", QoS::keep_all())
                .unwrap();
            wait_matched(&p, 1);
            for seq in 0..count {
                let deadline = Instant::now() + LONG;
                loop {
                    let loan = p.loan_uninit().unwrap().write(Stamp {
                        seq,
                        value: seq as f64 * 0.5,
                    });
                    match loan.publish() {
                        Ok(()) => break,
                        Err(myelin::PublishError::ResourceLimit { .. })
                            if Instant::now() < deadline =>
                        {
                            std::thread::sleep(Duration::from_micros(200))
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            println!("done");
            let _ = std::io::stdin().read_line(&mut line);
        }
        "pub_keep_last" => {
            let p = node
                .create_publisher::<Stamp>("stamps", QoS::keep_last(5))
                .unwrap();
            wait_matched(&p, 1);
            for seq in 0..count {
                p.publish(Stamp { seq, value: 0.0 }).unwrap();
            }
            println!("done");
            let _ = std::io::stdin().read_line(&mut line);
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
        "pub_cdr" => {
            let p = node
                .create_publisher::<Pose>("poses", QoS::keep_all())
                .unwrap();
            wait_matched(&p, 1);
            for seq in 0..count as u32 {
                publish_reliably(
                    &p,
                    Pose {
                        frame: format!("map/{seq}"),
                        seq,
                        xyz: vec![seq as f64; (seq % 7) as usize],
                    },
                );
            }
            println!("done");
            let _ = std::io::stdin().read_line(&mut line);
        }
        "pub_history" => {
            let p = node
                .create_publisher::<Stamp>("latched", QoS::keep_last(5).transient_local())
                .unwrap();
            for seq in 0..count {
                p.publish(Stamp { seq, value: 1.0 }).unwrap();
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
        "sub_other_type" => {
            let r = node.create_polling_subscription::<Other>(
                "poses",
                QoS::default(),
                Default::default(),
            );
            match r {
                Err(e) => println!("refused: {e}"),
                Ok(_) => println!("accepted"),
            }
        }
        "pub_other_type" => {
            let _p = node
                .create_publisher::<Other>("poses", QoS::default())
                .unwrap();
            println!("ready");
            let _ = std::io::stdin().read_line(&mut line);
        }
        "server" | "slow_server" => {
            let slow = role == "slow_server";
            let _srv = node
                .create_service::<i64, i64>("double", move |x| {
                    if slow {
                        println!("got request");
                        std::thread::sleep(Duration::from_secs(120));
                    }
                    2 * x
                })
                .unwrap();
            let mut exec = Executor::new();
            exec.add_node(&node).unwrap();
            let stop = exec.stop_handle();
            std::thread::spawn(move || {
                let mut l = String::new();
                let _ = std::io::stdin().read_line(&mut l);
                stop.stop();
            });
            println!("ready");
            exec.spin().unwrap();
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
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env("MYELIN_SHM_DOMAIN", domain.to_string())
            .env("MYELIN_SHM_COUNT", count.to_string())
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

    fn finish(mut self) {
        drop(self.child.stdin.take());
        let st = self.child.wait().unwrap();
        assert!(st.success(), "peer failed: {st}");
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
fn a_serde_type_crosses_processes_as_cdr() {
    let c = ctx(152);
    let node = c.create_node("parent").unwrap();
    let sub = node
        .create_polling_subscription::<Pose>("poses", QoS::keep_all(), Default::default())
        .unwrap();
    let peer = Peer::spawn("pub_cdr", 152, 300);
    for seq in 0..300u32 {
        let m = sub.wait_for_message(LONG).unwrap();
        assert_eq!(
            *m,
            Pose {
                frame: format!("map/{seq}"),
                seq,
                xyz: vec![seq as f64; (seq % 7) as usize]
            }
        );
    }
    peer.finish();
}

#[test]
fn a_slow_keep_last_reader_gets_the_newest_depth_and_counts_the_rest_lost() {
    let c = ctx(153);
    let node = c.create_node("parent").unwrap();
    let sub = node
        .create_polling_subscription::<Stamp>("stamps", QoS::keep_last(5), Default::default())
        .unwrap();
    let mut peer = Peer::spawn("pub_keep_last", 153, 100);
    peer.expect("done"); // we have not read anything yet
    let got: Vec<u64> = std::iter::from_fn(|| sub.take()).map(|m| m.seq).collect();
    assert_eq!(got, vec![95, 96, 97, 98, 99]);
    assert_eq!(sub.lost(), 95);
    peer.finish();
}

#[test]
fn local_and_remote_publishers_reach_a_subscription_exactly_once() {
    let c = ctx(154);
    let node = c.create_node("parent").unwrap();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = got.clone();
    let _sub = node
        .create_subscription("stamps", QoS::keep_all(), move |m: &Stamp| {
            g.lock().unwrap().push(m.seq)
        })
        .unwrap();
    let local = node
        .create_publisher::<Stamp>("stamps", QoS::keep_all())
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin());
    let peer = Peer::spawn("pub_pod", 154, 500);
    for seq in 0..500u64 {
        local
            .publish(Stamp {
                seq: 1_000_000 + seq,
                value: 0.0,
            })
            .unwrap();
    }
    let deadline = Instant::now() + LONG;
    while got.lock().unwrap().len() < 1000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    peer.finish();
    std::thread::sleep(Duration::from_millis(50));
    stop.stop();
    spinner.join().unwrap().unwrap();
    let mut v = got.lock().unwrap().clone();
    assert_eq!(v.len(), 1000, "each message once");
    v.sort();
    v.dedup();
    assert_eq!(v.len(), 1000, "no duplicates");
    // The local publisher does not see the remote-only path for its own
    // subscription: exactly its local subscription is matched locally.
    assert_eq!(local.subscription_count(), 1);
}

#[test]
fn a_type_mismatch_across_processes_is_refused_naming_both_types() {
    // The other process comes second.
    let c = ctx(155);
    let node = c.create_node("parent").unwrap();
    let _p = node
        .create_publisher::<Pose>("poses", QoS::default())
        .unwrap();
    let mut peer = Peer::spawn("sub_other_type", 155, 0);
    let line = peer.expect("refused");
    assert!(line.contains("test_msgs/msg/Pose"), "{line}");
    assert!(line.contains("test_msgs/msg/Other"), "{line}");
    peer.finish();
    // This process comes second.
    let c = ctx(156);
    let node = c.create_node("parent").unwrap();
    let mut peer = Peer::spawn("pub_other_type", 156, 0);
    peer.expect("ready");
    let err = node
        .create_polling_subscription::<Pose>("poses", QoS::default(), Default::default())
        .unwrap_err();
    assert!(
        matches!(&err, CreateEndpointError::RemoteTypeMismatch { remote, requested, .. }
            if remote == "test_msgs/msg/Other" && *requested == "test_msgs/msg/Pose"),
        "{err}"
    );
    peer.finish();
}

#[test]
fn a_late_joiner_in_another_process_gets_transient_local_history() {
    let mut peer = Peer::spawn("pub_history", 157, 12);
    peer.expect("done");
    let c = ctx(157);
    let node = c.create_node("parent").unwrap();
    let sub = node
        .create_polling_subscription::<Stamp>(
            "latched",
            QoS::keep_last(5).transient_local(),
            Default::default(),
        )
        .unwrap();
    let got: Vec<u64> = (0..5)
        .map(|_| sub.wait_for_message(LONG).unwrap().seq)
        .collect();
    assert_eq!(got, vec![7, 8, 9, 10, 11]);
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

fn myelin_shm_dir() -> std::path::PathBuf {
    std::env::var_os("MYELIN_SHM_DIR").map_or_else(|| "/dev/shm".into(), Into::into)
}

#[test]
fn a_service_is_called_across_processes() {
    let c = ctx(161);
    let node = c.create_node("caller").unwrap();
    let client = node.create_client::<i64, i64>("double").unwrap();
    let mut peer = Peer::spawn("server", 161, 0);
    peer.expect("ready");
    assert!(client.wait_for_service(LONG), "the server process is found");
    for x in [21, -4, 1 << 40] {
        assert_eq!(client.call(x, LONG).unwrap(), 2 * x);
    }
    peer.finish();
}

#[test]
fn a_server_killed_mid_call_gives_the_caller_an_error_not_a_hang() {
    let c = ctx(162);
    let node = c.create_node("caller").unwrap();
    let client = std::sync::Arc::new(node.create_client::<i64, i64>("double").unwrap());
    let mut peer = Peer::spawn("slow_server", 162, 0);
    peer.expect("ready");
    assert!(client.wait_for_service(LONG));
    let cl = client.clone();
    let call = std::thread::spawn(move || cl.call(1, Duration::from_secs(300)));
    peer.expect("got request");
    peer.kill9();
    let err = call.join().unwrap().unwrap_err();
    assert!(
        matches!(err, myelin::CallError::ServiceUnavailable(ref s) if s == "/double"),
        "{err}"
    );
}
