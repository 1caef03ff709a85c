//! `myelin bag record|play|info` end to end, with real processes: this test
//! publishes and subscribes on shared memory, the recorder and player are
//! `myelin` children (killed with SIGINT and with SIGKILL), and the bags
//! are checked message by message with `myelin_bag::Reader`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use myelin::{Context, QoS};
use myelin_bag::Reader;
use myelin_msgs::std_msgs;

mod common;
use common::{Background, myelin, router, router_endpoint};

#[path = "../../myelin/tests/common/interop.rs"]
mod interop;

fn ctx(domain: u32) -> Context {
    Context::builder()
        .domain_id(domain)
        .network(false)
        .build()
        .unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("myelin_cli_bag_{}_{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `myelin bag ARGS` on shared memory only, in the background.
fn bag(args: &[&str]) -> Background {
    Background(
        myelin()
            .arg("bag")
            .args(args)
            .env("MYELIN_TRANSPORT", "shm")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Publish Int32 0, 1, 2, ... on `topic` every `period` until `stop` (a
/// generous bound that never decides a result: a minute).
fn publisher(ctx: &Context, topic: &str, period: Duration, stop: impl Fn(i32) -> bool) -> i32 {
    let node = ctx.create_node("bag_test_source").unwrap();
    let p = node
        .create_publisher::<std_msgs::Int32>(topic, QoS::keep_last(10))
        .unwrap();
    let mut i = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stop(i) {
        assert!(Instant::now() < deadline, "timed out publishing on {topic}");
        p.publish(std_msgs::Int32 { data: i }).unwrap();
        i += 1;
        std::thread::sleep(period);
    }
    i
}

/// The Int32 values recorded on `topic`, in order.
fn recorded(dir: &Path, topic: &str) -> Vec<i32> {
    Reader::open(dir)
        .unwrap()
        .messages()
        .unwrap()
        .filter_map(|m| m.ok())
        .filter(|m| m.topic.name == topic)
        .map(|m| m.decode::<std_msgs::Int32>().unwrap().data)
        .collect()
}

/// How many messages of the bag at `dir` read back now (0 while there is
/// no bag yet).
fn readable_messages(dir: &Path) -> usize {
    Reader::open(dir)
        .and_then(|r| r.messages())
        .map_or(0, |m| m.filter(|m| m.is_ok()).count())
}

/// Record while this process publishes, stop with Ctrl-C: a complete bag
/// with a consecutive run of the published values; then play it into a
/// subscription of this process under another name.
#[test]
fn record_stop_with_ctrl_c_then_play_into_a_subscriber() {
    let domain = 186;
    let dir = scratch("record_play");
    let d = dir.to_str().unwrap().to_string();
    let c = ctx(domain);
    let recorder = bag(&["record", "/bag_src", "-o", &d, "--domain", "186"]);
    // Publish until 40 messages are safely on disk (the recorder flushes
    // each second), then stop the recorder with SIGINT.
    let sent = publisher(&c, "/bag_src", Duration::from_millis(10), |_| {
        readable_messages(&dir) >= 40
    });
    drop(recorder);
    let values = recorded(&dir, "/bag_src");
    assert!(
        values.len() >= 40 && values.len() <= sent as usize,
        "{}",
        values.len()
    );
    let first = values[0];
    assert_eq!(
        values,
        (first..first + values.len() as i32).collect::<Vec<_>>()
    );
    let info = Reader::open(&dir).unwrap().info().unwrap();
    assert!(info.files.iter().all(|f| f.complete), "{:?}", info.files);

    // `bag info` prints the topic, its type and count.
    let out = myelin().args(["bag", "info", &d]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("/bag_src"), "{text}");
    assert!(text.contains("std_msgs/msg/Int32"), "{text}");
    assert!(text.contains(&format!("Count: {}", values.len())), "{text}");

    // Play, remapped, into a typed subscription here (another process).
    let node = c.create_node("bag_test_sink").unwrap();
    let sub = node
        .create_polling_subscription::<std_msgs::Int32>(
            "/bag_replayed",
            QoS::keep_all(),
            Default::default(),
        )
        .unwrap();
    let out = myelin()
        .args([
            "bag",
            "play",
            &d,
            "--rate",
            "10",
            "--remap",
            "/bag_src:=/bag_replayed",
        ])
        .args(["--wait-for-subscribers", "30", "--domain", "186"])
        .env("MYELIN_TRANSPORT", "shm")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got = Vec::new();
    while let Ok(m) = sub.wait_for_message(Duration::from_secs(5)) {
        got.push(m.data);
        if got.len() == values.len() {
            break;
        }
    }
    assert_eq!(got, values);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--regex`, `--exclude` and named topics together, as `ros2 bag record`
/// takes them: a topic is recorded when named or matching the regex,
/// unless it matches the exclusion (which wins over both).
#[test]
fn record_takes_named_and_matching_topics_minus_the_excluded() {
    let domain = 198;
    let dir = scratch("select");
    let d = dir.to_str().unwrap().to_string();
    let c = ctx(domain);
    let recorder = bag(&[
        "record",
        "/sel_c",
        "/sel_e",
        "--regex",
        "^/sel_(a|b)$",
        "--exclude",
        "_b$|_e$",
        "-o",
        &d,
        "--domain",
        "198",
    ]);
    let node = c.create_node("bag_select_source").unwrap();
    let pubs: Vec<_> = ["/sel_a", "/sel_b", "/sel_c", "/sel_d", "/sel_e"]
        .iter()
        .map(|t| {
            node.create_publisher::<std_msgs::Int32>(t, QoS::keep_last(10))
                .unwrap()
        })
        .collect();
    // Until both wanted topics have messages safely on disk (a minute at
    // most, never deciding the result).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0;
    loop {
        let topics: std::collections::BTreeSet<String> = Reader::open(&dir)
            .and_then(|r| r.messages())
            .map(|m| {
                m.filter_map(|m| m.ok())
                    .map(|m| m.topic.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        if topics.contains("/sel_a") && topics.contains("/sel_c") {
            break;
        }
        assert!(Instant::now() < deadline, "recorded only {topics:?}");
        for p in &pubs {
            p.publish(std_msgs::Int32 { data: i }).unwrap();
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(recorder);
    let topics: std::collections::BTreeSet<String> = Reader::open(&dir)
        .unwrap()
        .messages()
        .unwrap()
        .map(|m| m.unwrap().topic.name.clone())
        .collect();
    assert_eq!(
        topics.into_iter().collect::<Vec<_>>(),
        ["/sel_a", "/sel_c"],
        "named /sel_c, matched /sel_a; /sel_b and /sel_e excluded, /sel_d neither"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `kill -9` of the recorder: the bag (no summary, no final
/// metadata.yaml counts) still reads, up to its last flush, in order.
#[test]
fn a_recorder_killed_with_sigkill_leaves_a_readable_bag() {
    let domain = 187;
    let dir = scratch("sigkill");
    let d = dir.to_str().unwrap().to_string();
    let c = ctx(domain);
    let mut recorder = bag(&["record", "-a", "-o", &d, "--domain", "187"]);
    publisher(&c, "/bag_kill", Duration::from_millis(5), |_| {
        readable_messages(&dir) >= 50
    });
    recorder.0.kill().unwrap();
    recorder.0.wait().unwrap();
    let values = recorded(&dir, "/bag_kill");
    assert!(values.len() >= 50, "{}", values.len());
    let first = values[0];
    assert_eq!(
        values,
        (first..first + values.len() as i32).collect::<Vec<_>>()
    );
    let info = Reader::open(&dir).unwrap().info().unwrap();
    assert!(!info.files[0].complete);
    assert_eq!(info.message_count, values.len() as u64);
    let out = myelin().args(["bag", "info", &d]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("incomplete"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mistakes_are_errors_that_say_what_to_do() {
    let dir = scratch("mistakes");
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.mcap");
    std::fs::write(&junk, b"not a bag").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["record"], "nothing to record"),
        (&["record", "-a", "--regex", "("], "invalid --regex"),
        (
            &["record", "-a", "--max-bag-duration=-1"],
            "invalid --max-bag-duration",
        ),
        (
            &["record", "-a", "--max-bag-size", "0"],
            "invalid --max-bag-size",
        ),
        (&["play", junk.to_str().unwrap()], "not a bag"),
        (
            &["play", dir.to_str().unwrap(), "--rate", "0"],
            "invalid --rate",
        ),
        (
            &["play", dir.to_str().unwrap(), "--remap", "nope"],
            "invalid --remap",
        ),
        (&["info", "/nonexistent/bag"], "No such file"),
    ];
    for (args, want) in cases {
        let out = myelin()
            .arg("bag")
            .args(*args)
            .env("MYELIN_TRANSPORT", "intra")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The recorder cannot keep up (here: it may hold no message at all):
/// every message it loses is counted, reported, and the exit status says
/// the bag is not complete.
#[test]
fn messages_the_recorder_cannot_hold_are_counted_and_fail_the_run() {
    let domain = 188;
    let dir = scratch("dropped");
    let d = dir.to_str().unwrap().to_string();
    let c = ctx(domain);
    let recorder = bag(&[
        "record",
        "/bag_drop",
        "-o",
        &d,
        "--max-cache-size",
        "1",
        "--domain",
        "188",
    ]);
    let node = c.create_node("bag_test_drop").unwrap();
    let p = node
        .create_publisher::<std_msgs::Int32>("/bag_drop", QoS::keep_last(10))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.subscription_count() == 0 {
        assert!(Instant::now() < deadline, "the recorder never subscribed");
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..20 {
        p.publish(std_msgs::Int32 { data: i }).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut child = recorder;
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    let status = child.0.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains("DROPPED"), "{err}");
    assert!(err.contains("messages were not recorded"), "{err}");
    assert!(recorded(&dir, "/bag_drop").is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A full disk (a 512 KiB tmpfs) stops the recording with the OS error
/// and a non-zero exit; what was written before stays readable.
#[test]
fn a_full_disk_stops_the_recording_with_the_error() {
    let mnt = scratch("full_disk");
    std::fs::create_dir_all(&mnt).unwrap();
    let m = mnt.to_str().unwrap().to_string();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs", &m])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    }
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
            // The mount point, empty again.
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let _unmount = Unmount(m.clone());
    let domain = 189;
    let c = ctx(domain);
    let d = format!("{m}/bag");
    let mut recorder = bag(&["record", "/bag_full", "-o", &d, "--domain", "189"]);
    let node = c.create_node("bag_test_full").unwrap();
    let p = node
        .create_publisher::<sensor_msgs_like::Frame>("/bag_full", QoS::keep_last(10))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        assert!(
            Instant::now() < deadline,
            "the recorder never hit the full disk"
        );
        let _ = p.publish(sensor_msgs_like::frame());
        std::thread::sleep(Duration::from_millis(5));
        if let Ok(Some(s)) = recorder.0.try_wait() {
            break s;
        }
    };
    let mut err = String::new();
    std::io::Read::read_to_string(recorder.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    // The bag opens; what reached the disk reads, in order.
    let r = Reader::open(&d).unwrap();
    let n = r.messages().unwrap().filter(|m| m.is_ok()).count();
    assert!(n < 100, "{n}");
}

/// 16 KiB messages, to fill a small disk quickly.
mod sensor_msgs_like {
    pub use myelin_msgs::sensor_msgs::Image as Frame;

    pub fn frame() -> Frame {
        Frame {
            height: 128,
            width: 128,
            encoding: "mono8".into(),
            step: 128,
            data: vec![7; 128 * 128],
            ..Default::default()
        }
    }
}

/// A ROS 2 talker on rmw_zenoh (the independent Python peer) recorded
/// through a router: its type, type hash and QoS come from its token, its
/// messages in order; the bag then plays to a ROS 2 listener.
#[test]
fn record_a_ros_2_talker_and_play_to_a_ros_2_listener() {
    let Some(py) = interop::python() else { return };
    let (_router, cfg) = router();
    let endpoint = router_endpoint(&cfg);
    let peer = |role: &str, domain: &str| {
        let mut c = std::process::Command::new(&py)
            .arg(interop::peer_script())
            .args([
                role,
                "--domain",
                domain,
                "--connect",
                &endpoint,
                "--count",
                "10",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        (c, out)
    };
    let (talker, _talker_out) = peer("talker", "190");
    let talker = Background(talker);
    let dir = scratch("ros_talker");
    let d = dir.to_str().unwrap().to_string();
    let recorder = Background(
        myelin()
            .args(["bag", "record", "/chatter", "-o", &d, "--domain", "190"])
            .env("MYELIN_TRANSPORT", "zenoh")
            .env("MYELIN_ZENOH_CONFIG", &cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while readable_messages(&dir) < 10 {
        assert!(
            Instant::now() < deadline,
            "nothing recorded from the ROS 2 talker"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(recorder);
    drop(talker);
    let r = Reader::open(&dir).unwrap();
    let msgs: Vec<_> = r.messages().unwrap().map(|m| m.unwrap()).collect();
    let t = &msgs[0].topic;
    assert_eq!(t.type_name, "std_msgs/msg/String");
    assert_eq!(
        t.type_hash.as_deref(),
        Some("RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18")
    );
    assert_eq!(t.offered_qos.len(), 1);
    assert_eq!(t.offered_qos[0].reliability, myelin::Reliability::Reliable);
    let texts: Vec<String> = msgs
        .iter()
        .map(|m| m.decode::<std_msgs::String>().unwrap().data)
        .collect();
    let first: usize = texts[0]
        .strip_prefix("py talker ")
        .unwrap()
        .parse()
        .unwrap();
    for (i, t) in texts.iter().enumerate() {
        assert_eq!(t, &format!("py talker {}", first + i));
    }

    // Play to a ROS 2 listener on another domain.
    let (listener, listener_out) = peer("listener", "191");
    let out = myelin()
        .args([
            "bag",
            "play",
            &d,
            "--rate",
            "5",
            "--wait-for-subscribers",
            "30",
        ])
        .args(["--domain", "191"])
        .env("MYELIN_TRANSPORT", "zenoh")
        .env("MYELIN_ZENOH_CONFIG", &cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let heard: Vec<String> = std::io::BufRead::lines(listener_out)
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("heard ").map(str::to_string))
        .take(10)
        .collect();
    drop(Background(listener));
    assert_eq!(heard, texts[..10].to_vec());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `bag play --clock`: the bag's time on /clock while it plays, never
/// backwards, within the bag's span.
#[test]
fn play_publishes_the_bag_time_on_clock() {
    use myelin_msgs::rosgraph_msgs::Clock;
    let dir = scratch("clock");
    let t0 = int_bag(&dir, "/ticks", 100);
    let c = ctx(192);
    let node = c.create_node("bag_test_clock").unwrap();
    let clock = node
        .create_polling_subscription::<Clock>(
            "/clock",
            QoS::keep_last(1000).best_effort(),
            Default::default(),
        )
        .unwrap();
    let ticks = node
        .create_polling_subscription::<std_msgs::Int32>(
            "/ticks",
            QoS::keep_all(),
            Default::default(),
        )
        .unwrap();
    play_with_clock(&dir, "200", 192);
    let mut times = Vec::new();
    while let Some(m) = clock.take() {
        times.push(m.clock.sec as u64 * 1_000_000_000 + m.clock.nanosec as u64);
    }
    assert!(times.len() >= 20, "{}", times.len());
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times.iter().all(|t| (t0..=t0 + 990_000_000).contains(t)));
    let mut n = 0;
    while ticks.take().is_some() {
        n += 1;
    }
    assert_eq!(n, 100);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `bag convert`: two bags merged in time order, filtered, split, with a
/// custom type's definition carried over.
#[test]
fn convert_merges_filters_and_splits_keeping_definitions() {
    use myelin_bag::{TopicInfo, Writer, WriterOptions};
    let dir = scratch("convert");
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b, out) = (dir.join("a"), dir.join("b"), dir.join("out"));
    let custom = TopicInfo {
        name: "/custom".into(),
        type_name: "my_pkg/msg/Custom".into(),
        serialization_format: "cdr".into(),
        offered_qos: vec![QoS::keep_last(5)],
        type_hash: None,
        definition: None,
    };
    {
        let mut w = Writer::create(&a, WriterOptions::default()).unwrap();
        let id = w
            .add_topic(TopicInfo::of::<std_msgs::Int32>("/ints"))
            .unwrap();
        let c = w.add_topic_with_schema(custom, "int32 x\n").unwrap();
        for i in 0..50u64 {
            w.write_message(id, i * 2, &std_msgs::Int32 { data: i as i32 })
                .unwrap();
            w.write(c, i * 2, i * 2, &[0, 1, 0, 0, 7, 0, 0, 0]).unwrap();
        }
        w.finish().unwrap();
        let mut w = Writer::create(&b, WriterOptions::default()).unwrap();
        let id = w
            .add_topic(TopicInfo::of::<std_msgs::String>("/strs"))
            .unwrap();
        let skip = w
            .add_topic(TopicInfo::of::<std_msgs::Int32>("/skip_me"))
            .unwrap();
        for i in 0..50u64 {
            let m = std_msgs::String {
                data: format!("s{i}"),
            };
            w.write_message(id, i * 2 + 1, &m).unwrap();
            w.write_message(skip, i * 2 + 1, &std_msgs::Int32 { data: 0 })
                .unwrap();
        }
        w.finish().unwrap();
    }
    let out_s = out.to_str().unwrap();
    let result = myelin()
        .args([
            "bag",
            "convert",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "-o",
            out_s,
        ])
        .args(["--exclude", "skip", "-b", "1000"])
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let r = Reader::open(&out).unwrap();
    assert!(r.files().len() > 1, "split into {:?}", r.files());
    let msgs: Vec<_> = r.messages().unwrap().map(|m| m.unwrap()).collect();
    assert_eq!(msgs.len(), 150);
    assert!(msgs.windows(2).all(|w| w[0].log_time <= w[1].log_time));
    assert!(msgs.iter().all(|m| m.topic.name != "/skip_me"));
    let c = msgs.iter().find(|m| m.topic.name == "/custom").unwrap();
    assert_eq!(c.topic.definition.as_deref(), Some("int32 x\n"));
    assert_eq!(c.topic.offered_qos, vec![QoS::keep_last(5)]);
    let strs: Vec<String> = msgs
        .iter()
        .filter(|m| m.topic.name == "/strs")
        .map(|m| m.decode::<std_msgs::String>().unwrap().data)
        .collect();
    assert_eq!(strs, (0..50).map(|i| format!("s{i}")).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `myelin bag play DIR --clock HZ` on `domain` (shared memory) to the
/// end; it must succeed.
fn play_with_clock(dir: &Path, hz: &str, domain: u32) {
    let out = myelin()
        .args(["bag", "play", dir.to_str().unwrap(), "--clock", hz])
        .args([
            "--wait-for-subscribers",
            "30",
            "--domain",
            &domain.to_string(),
        ])
        .env("MYELIN_TRANSPORT", "shm")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bag of `n` Int32 (0..n) on `topic`, 10 ms apart from 1.7e18 ns.
fn int_bag(dir: &Path, topic: &str, n: i32) -> u64 {
    use myelin_bag::{TopicInfo, Writer, WriterOptions};
    let t0 = 1_700_000_000_000_000_000u64;
    let mut w = Writer::create(dir, WriterOptions::default()).unwrap();
    let id = w
        .add_topic(TopicInfo::of::<std_msgs::Int32>(topic))
        .unwrap();
    for i in 0..n {
        w.write_message(id, t0 + i as u64 * 10_000_000, &std_msgs::Int32 { data: i })
            .unwrap();
    }
    w.finish().unwrap();
    t0
}

/// A node with `use_sim_time` follows a replay: its ROS time is the bag's
/// time, and its timers tick on it.
#[test]
fn a_sim_time_node_follows_the_replay() {
    use std::sync::{Arc, Mutex};
    let dir = scratch("simtime");
    let t0 = int_bag(&dir, "/sim_ticks", 100);
    let c = Context::builder()
        .domain_id(193)
        .network(false)
        .use_sim_time(true)
        .build()
        .unwrap();
    let node = c.create_node("bag_test_sim").unwrap();
    let stamps = Arc::new(Mutex::new(Vec::new()));
    let (s, n) = (stamps.clone(), node.clone());
    let _timer = node
        .create_timer(Duration::from_millis(100), move || {
            s.lock().unwrap().push(n.now().nanos() as u64)
        })
        .unwrap();
    let _sub = node
        .create_subscription("/sim_ticks", QoS::keep_all(), |_: &std_msgs::Int32| {})
        .unwrap();
    let mut exec = myelin::Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spin = std::thread::spawn(move || exec.spin().unwrap());
    play_with_clock(&dir, "100", 193);
    stop.stop();
    spin.join().unwrap();
    let stamps = stamps.lock().unwrap().clone();
    // One second of bag time at 100 ms: ticks at its time (a few may be
    // missed at the edges; wall time would tick from t = 0).
    assert!(stamps.len() >= 3, "{stamps:?}");
    assert!(
        stamps.iter().all(|t| (t0..=t0 + 1_000_000_000).contains(t)),
        "{stamps:?}"
    );
    assert!(node.now().nanos() as u64 >= t0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `bag play` on a terminal: SPACE pauses (nothing more is published),
/// `s` plays exactly one message and so does RIGHT, UP and DOWN change
/// the rate by 10%, SPACE resumes, and every message arrives once, in
/// order. The terminal is a pseudo-terminal this test
/// holds.
#[test]
fn keys_on_a_terminal_pause_step_and_resume_playback() {
    use std::io::{Read, Write};
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::sync::{Arc, Mutex};
    let dir = scratch("keys");
    int_bag(&dir, "/keyed", 300);
    let c = ctx(194);
    let node = c.create_node("bag_test_keys").unwrap();
    let sub = node
        .create_polling_subscription::<std_msgs::Int32>(
            "/keyed",
            QoS::keep_all(),
            Default::default(),
        )
        .unwrap();
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two new descriptors into the out-parameters;
    // the name, termios and window size arguments may be null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned
    // by nobody else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let player = Background(
        myelin()
            .args(["bag", "play", dir.to_str().unwrap()])
            .args(["--wait-for-subscribers", "30", "--domain", "194"])
            .env("MYELIN_TRANSPORT", "shm")
            .stdin(slave.try_clone().unwrap())
            .stderr(slave.try_clone().unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    drop(slave);
    let said = Arc::new(Mutex::new(String::new()));
    let mut reader = std::fs::File::from(master.try_clone().unwrap());
    let s = said.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            s.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let mut keys = std::fs::File::from(master);
    let wait_said = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = said.lock().unwrap().clone();
            if text.contains(what) {
                return text;
            }
            assert!(Instant::now() < deadline, "never said {what:?}: {text}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait_said("SPACE pause/resume");
    let mut got: Vec<i32> = Vec::new();
    let drain = |got: &mut Vec<i32>| {
        while let Some(m) = sub.take() {
            got.push(m.data);
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < 5 {
        assert!(Instant::now() < deadline, "playback never started");
        drain(&mut got);
        std::thread::sleep(Duration::from_millis(1));
    }
    keys.write_all(b" ").unwrap();
    wait_said("paused");
    std::thread::sleep(Duration::from_millis(300));
    drain(&mut got);
    let at_pause = got.len();
    assert!(at_pause < 300, "the pause came too late to test anything");
    keys.write_all(b"s").unwrap();
    let text = wait_said("step: ");
    let stepped: usize = text
        .split("step: ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert_eq!(stepped, at_pause + 1, "{text}");
    std::thread::sleep(Duration::from_millis(300));
    drain(&mut got);
    assert_eq!(got.len(), at_pause + 1, "exactly one message while paused");
    // RIGHT (an arrow key's escape sequence) steps too.
    keys.write_all(b"\x1b[C").unwrap();
    wait_said(&format!("step: {}", at_pause + 2));
    // UP and DOWN change the rate by 10% (said on the terminal).
    keys.write_all(b"\x1b[A").unwrap();
    wait_said("rate 1.100");
    keys.write_all(b"\x1b[B").unwrap();
    wait_said("rate 1.000");
    keys.write_all(b" ").unwrap();
    wait_said("resumed");
    wait_said("played 300 messages");
    drain(&mut got);
    assert_eq!(got, (0..300).collect::<Vec<_>>());
    drop(player);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A single `.mcap` file written by another writer (the MCAP project's
/// Python one, as ros2 bag would write it) plays into a subscriber:
/// `--topics` keeps one topic, `--start-offset` skips the first 0.1 s, and
/// `--loop` starts over at the end.
#[test]
fn a_file_the_python_writer_wrote_plays_filtered_offset_and_looped() {
    let Some(py) = interop::python() else { return };
    let domain = 197;
    let dir = scratch("py_play");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("py.mcap");
    let n = 30;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/bag_peer.py");
    let out = std::process::Command::new(&py)
        .arg(script)
        .args(["write", file.to_str().unwrap(), &n.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = ctx(domain);
    let node = c.create_node("py_bag_sink").unwrap();
    let chatter = node
        .create_polling_subscription::<std_msgs::String>(
            "/py_chatter",
            QoS::keep_all(),
            Default::default(),
        )
        .unwrap();
    let cmd_vel = node
        .create_polling_subscription::<myelin_msgs::geometry_msgs::Twist>(
            "/py_cmd_vel",
            QoS::keep_all(),
            Default::default(),
        )
        .unwrap();
    let f = file.to_str().unwrap();
    let mut player = bag(&[
        "play",
        f,
        "--topics",
        "/py_chatter",
        "--start-offset",
        "0.1",
        "--loop",
        "--wait-for-subscribers",
        "30",
        "--domain",
        "197",
    ]);
    // 100 Hz in the bag: the first 10 are before the offset. Looping, the
    // run comes again.
    let mut got = Vec::new();
    while got.len() < 2 * (n - 10) {
        let m = chatter
            .wait_for_message(Duration::from_secs(30))
            .expect("the player's messages");
        got.push(m.data.clone());
    }
    let _ = player.0.kill();
    let _ = player.0.wait();
    let once: Vec<String> = (10..n).map(|i| format!("py {i}")).collect();
    assert_eq!(&got[..once.len()], &once[..]);
    assert_eq!(&got[once.len()..], &once[..], "the loop's second pass");
    assert!(cmd_vel.take().is_none(), "--topics left /py_cmd_vel out");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `myelin bag info DIR`'s output (it must succeed).
fn bag_info(dir: &Path) -> String {
    let out = myelin()
        .args(["bag", "info", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    text
}

/// The line of `bag info`'s `text` that starts with `label`.
fn info_line(text: &str, label: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"))
        .to_string()
}

/// `bag info` prints what `ros2 bag info` does, with the values of the
/// bag: duration, start and end (UTC, and the raw stamp), the count, and
/// per topic its type, count, serialization and recorded QoS.
#[test]
fn bag_info_prints_duration_start_end_and_each_topic() {
    let dir = scratch("info_fields");
    // 101 messages 10 ms apart from 1.7e18 ns (Nov 14 2023 22:13:20 UTC).
    let t0 = int_bag(&dir, "/ints", 101);
    assert_eq!(t0, 1_700_000_000_000_000_000);
    let text = bag_info(&dir);
    let line = |label: &str| info_line(&text, label);
    assert!(line("Duration:").ends_with("1.000s"), "{text}");
    assert!(
        line("Start:").contains("Nov 14 2023 22:13:20.000 (1700000000.000000000)"),
        "{text}"
    );
    assert!(
        line("End:").contains("Nov 14 2023 22:13:21.000 (1700000001.000000000)"),
        "{text}"
    );
    assert!(line("Messages:").ends_with(" 101"), "{text}");
    assert!(line("Storage id:").ends_with("mcap"), "{text}");
    let topic = line("Topic information:");
    for part in [
        "Topic: /ints",
        "Type: std_msgs/msg/Int32",
        "Count: 101",
        "Serialization Format: cdr",
        "QoS: ",
    ] {
        assert!(topic.contains(part), "{part:?} in {topic}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The CDR of an `example_interfaces/srv/AddTwoInts_Event`: a request
/// event (`REQUEST_SENT`) asking `a + b`, numbered `seq`.
fn add_two_ints_event(seq: i64, a: i64, b: i64) -> Vec<u8> {
    let mut cdr = vec![0, 1, 0, 0];
    cdr.extend([0u8; 4]); // event_type REQUEST_SENT, padding
    cdr.extend(7i32.to_le_bytes()); // stamp.sec
    cdr.extend(0u32.to_le_bytes()); // stamp.nanosec
    cdr.extend([9u8; 16]); // client_gid
    cdr.extend([0u8; 4]); // padding to 8
    cdr.extend(seq.to_le_bytes());
    cdr.extend(1u32.to_le_bytes()); // one request
    cdr.extend([0u8; 4]); // padding to 8
    cdr.extend(a.to_le_bytes());
    cdr.extend(b.to_le_bytes());
    cdr.extend(0u32.to_le_bytes()); // no response
    cdr
}

/// Service introspection events (`<service>/_service_event`, as ROS 2
/// services publish them with introspection on) are chosen apart from
/// topics, as `ros2 bag record` chooses them: `--services` records a
/// service's events and no topic, `--all-topics` every topic and no
/// service events; `bag info` lists them per service, as `ros2 bag info`.
#[test]
fn service_events_are_recorded_by_service_and_listed_apart() {
    let domain = 176;
    let (services_dir, topics_dir) = (scratch("services"), scratch("topics_only"));
    let c = ctx(domain);
    let services = bag(&[
        "record",
        "--services",
        "adder",
        "-o",
        services_dir.to_str().unwrap(),
        "--domain",
        "176",
    ]);
    let topics = bag(&[
        "record",
        "--all-topics",
        "-o",
        topics_dir.to_str().unwrap(),
        "--domain",
        "176",
    ]);
    let node = c.create_node("bag_service_source").unwrap();
    let event_type = "example_interfaces/srv/AddTwoInts_Event";
    let ty =
        myelin::RawType::ros(event_type, &myelin_msgs::ros_hash_of(event_type).unwrap()).unwrap();
    let events = node
        .create_raw_publisher("/adder/_service_event", &ty, QoS::keep_last(10))
        .unwrap();
    let ints = node
        .create_publisher::<std_msgs::Int32>("/plain", QoS::keep_last(10))
        .unwrap();
    let names = |dir: &Path| -> std::collections::BTreeSet<String> {
        Reader::open(dir)
            .and_then(|r| r.messages())
            .map(|m| {
                m.filter_map(|m| m.ok())
                    .map(|m| m.topic.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    // Until each recorder has its topic on disk (a minute at most, never
    // deciding the result).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0;
    while !(names(&services_dir).contains("/adder/_service_event")
        && names(&topics_dir).contains("/plain"))
    {
        assert!(Instant::now() < deadline, "the recorders never recorded");
        events
            .publish(myelin::AnyMessage(add_two_ints_event(i, i, 2 * i).into()))
            .unwrap();
        ints.publish(std_msgs::Int32 { data: i as i32 }).unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    drop((services, topics));
    assert_eq!(
        names(&services_dir).into_iter().collect::<Vec<_>>(),
        ["/adder/_service_event"]
    );
    assert_eq!(
        names(&topics_dir).into_iter().collect::<Vec<_>>(),
        ["/plain"]
    );

    // The events decode as the service's event type.
    let r = Reader::open(&services_dir).unwrap();
    let first = r.messages().unwrap().next().unwrap().unwrap();
    assert_eq!(first.topic.type_name, event_type);
    assert!(
        first.data.ends_with(&[0, 0, 0, 0]),
        "no response in a request event"
    );

    let text = bag_info(&services_dir);
    let line = |label: &str| info_line(&text, label);
    assert!(
        line("Messages:").ends_with(" 0"),
        "events are not topic messages: {text}"
    );
    assert!(line("Service:").ends_with(" 1"), "{text}");
    let service = line("Service information:");
    for part in [
        "Service: /adder",
        "Type: example_interfaces/srv/AddTwoInts",
        "Event Count: ",
        "Serialization Format: cdr",
    ] {
        assert!(service.contains(part), "{part:?} in {service}");
    }
    assert!(
        !text.contains("Topic: /adder"),
        "listed as a service only: {text}"
    );
    std::fs::remove_dir_all(&services_dir).unwrap();
    std::fs::remove_dir_all(&topics_dir).unwrap();
}

/// Real introspection events, end to end: a server and a client of this
/// process with `Contents` on publish the four events of each call;
/// `myelin service echo` (a child) prints them as `ros2 service echo`
/// does, `myelin bag record --all-services` (another) records them, and
/// the MCAP project's Python reader (knowing nothing of myelin) decodes
/// the recorded events field by field from the bag's `ros2msg` schema:
/// the request realigned inside the event is what it reads.
#[test]
fn introspection_events_echo_and_record_for_an_independent_reader() {
    use myelin::ServiceIntrospection;
    use myelin_msgs::example_interfaces::{AddTwoInts, AddTwoIntsRequest, AddTwoIntsResponse};

    let Some(py) = interop::python() else { return };
    let domain = 178;
    let dir = scratch("introspection");
    let c = ctx(domain);
    let node = c.create_node("introspected_adder").unwrap();
    let server = node
        .create_service_for::<AddTwoInts>("adder", |r: AddTwoIntsRequest| AddTwoIntsResponse {
            sum: r.a + r.b,
        })
        .unwrap();
    let client = node.create_client_for::<AddTwoInts>("adder").unwrap();
    let qos = QoS::keep_last(10);
    server
        .configure_introspection(ServiceIntrospection::Contents, qos)
        .unwrap();
    client
        .configure_introspection(ServiceIntrospection::Contents, qos)
        .unwrap();
    let mut exec = myelin::Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin());

    let recorder = bag(&[
        "record",
        "--all-services",
        "-o",
        dir.to_str().unwrap(),
        "--domain",
        "178",
    ]);
    let echo = myelin()
        .args([
            "service", "echo", "adder", "--count", "8", "--domain", "178",
        ])
        .env("MYELIN_TRANSPORT", "shm")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let echo = Background(echo);
    let events_on_disk = |dir: &Path| {
        Reader::open(dir)
            .and_then(|r| r.messages())
            .map(|m| m.filter_map(|m| m.ok()).count())
            .unwrap_or(0)
    };
    // Call until both have what they need (a minute at most, never
    // deciding the result): echo ends after 8 events, the bag holds 8.
    let mut echo = echo;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(matches!(echo.0.try_wait(), Ok(Some(_))) && events_on_disk(&dir) >= 8) {
        assert!(Instant::now() < deadline, "no events echoed and recorded");
        let sum = client
            .call(AddTwoIntsRequest { a: 2, b: 3 }, Duration::from_secs(60))
            .unwrap()
            .sum;
        assert_eq!(sum, 5);
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(recorder);
    stop.stop();
    spinner.join().unwrap().unwrap();

    let mut printed = String::new();
    std::io::Read::read_to_string(echo.0.stdout.as_mut().unwrap(), &mut printed).unwrap();
    for kind in [
        "REQUEST_SENT",
        "REQUEST_RECEIVED",
        "RESPONSE_SENT",
        "RESPONSE_RECEIVED",
    ] {
        assert!(
            printed.contains(&format!("event_type: {kind}")),
            "{printed}"
        );
    }
    assert!(
        printed.contains("request:\n- a: 2\n  b: 3\nresponse: []"),
        "{printed}"
    );
    assert!(
        printed.contains("request: []\nresponse:\n- sum: 5"),
        "{printed}"
    );

    let mcap = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "mcap"))
        .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/bag_peer.py");
    let out = std::process::Command::new(&py)
        .arg(script)
        .args(["read", mcap.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["topic"] == "/adder/_service_event")
        .collect();
    assert!(events.len() >= 8, "{lines:?}");
    for e in events {
        let m = &e["value"];
        let kind = m["info"]["event_type"].as_u64().unwrap();
        assert_eq!(m["info"]["client_gid"].as_array().unwrap().len(), 16);
        if kind <= 1 {
            assert_eq!(m["request"][0]["a"], 2, "{m}");
            assert_eq!(m["request"][0]["b"], 3, "{m}");
            assert_eq!(m["response"].as_array().unwrap().len(), 0);
        } else {
            assert_eq!(m["response"][0]["sum"], 5, "{m}");
            assert_eq!(m["request"].as_array().unwrap().len(), 0);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
