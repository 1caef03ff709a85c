//! `myelin topic` / `myelin node` end to end against a publisher in another
//! process (`myelin topic pub`), over shared-memory discovery.

use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;
use common::{Background, myelin, router};

fn run(args: &[&str]) -> (bool, String, String) {
    let out = myelin().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Retry `args` until `ok(stdout)` (discovery takes a moment), generous.
fn eventually(args: &[&str], ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out, _) = run(args);
        if ok(&out) || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn list_info_echo_hz_and_node_list_see_a_publisher_in_another_process() {
    let d = "181";
    let _pub = Background(
        myelin()
            .args([
                "topic",
                "pub",
                "/greeting",
                "std_msgs/msg/String",
                "data: hello there",
            ])
            .args(["--rate", "50", "--domain", d])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let list = eventually(&["topic", "list", "-t", "--domain", d], |o| {
        o.contains("/greeting")
    });
    assert!(list.contains("/greeting [std_msgs/msg/String]"), "{list}");
    let (ok, info, err) = run(&["topic", "info", "greeting", "--domain", d]);
    assert!(ok, "{err}");
    assert!(info.contains("Type: std_msgs/msg/String"), "{info}");
    assert!(info.contains("Publisher count: 1"), "{info}");
    let (ok, echo, err) = run(&["topic", "echo", "/greeting", "--count", "2", "--domain", d]);
    assert!(ok, "{err}");
    assert_eq!(echo.matches("hello there").count(), 2, "{echo}");
    let (ok, hz, err) = run(&[
        "topic",
        "hz",
        "/greeting",
        "--duration",
        "2.2",
        "--domain",
        d,
    ]);
    assert!(ok, "{err}");
    assert!(hz.contains("average rate:"), "{hz}");
    let (ok, nodes, _) = run(&["node", "list", "--domain", d]);
    assert!(ok);
    let node = nodes
        .lines()
        .find(|l| l.starts_with("/myelin_cli_pub_"))
        .expect(&nodes)
        .to_string();
    let (ok, ninfo, err) = run(&["node", "info", &node, "--domain", d]);
    assert!(ok, "{err}");
    assert!(ninfo.contains("/greeting: std_msgs/msg/String"), "{ninfo}");
    // A typo in a name gets the nearest existing one.
    let (ok, _, err) = run(&["topic", "info", "/greting", "--domain", d]);
    assert!(!ok);
    assert!(err.contains("(did you mean /greeting?)"), "{err}");
    let typo = &node[..node.len() - 1];
    let (ok, _, err) = run(&["node", "info", typo, "--domain", d]);
    assert!(!ok);
    assert!(err.contains(&format!("(did you mean {node}?)")), "{err}");
}

#[test]
fn unknown_topics_types_nodes_and_bad_yaml_are_clear_errors() {
    let (ok, _, err) = run(&["topic", "hz", "/nobody_here", "--domain", "182"]);
    assert!(!ok);
    assert!(
        err.contains("\"/nobody_here\": nothing publishes or subscribes"),
        "{err}"
    );
    let (ok, _, err) = run(&["topic", "pub", "/x", "foo/msg/Bar", "{}", "--domain", "182"]);
    assert!(!ok);
    assert!(err.contains("unknown type \"foo/msg/Bar\""), "{err}");
    let (ok, _, err) = run(&[
        "topic",
        "echo",
        "/x",
        "std_msgs/msg/Strin",
        "--domain",
        "182",
    ]);
    assert!(!ok);
    assert!(err.contains("did you mean std_msgs/msg/String?"), "{err}");
    let (ok, _, err) = run(&[
        "topic",
        "pub",
        "/x",
        "std_msgs/msg/Int32",
        "data: [not, an, int]",
        "--domain",
        "182",
    ]);
    assert!(!ok);
    assert!(err.contains("not a std_msgs/msg/Int32"), "{err}");
    // A misspelt field is an error naming it, not silently a default.
    let (ok, _, err) = run(&[
        "topic",
        "pub",
        "/x",
        "geometry_msgs/msg/Twist",
        "{linear: {x: 1.0}, lineer: {y: 2.0}}",
        "--domain",
        "182",
    ]);
    assert!(!ok);
    assert!(err.contains("unknown field `lineer`"), "{err}");
    assert!(err.contains("did you mean `linear`?"), "{err}");
    let (ok, _, err) = run(&["node", "info", "/ghost", "--domain", "182"]);
    assert!(!ok);
    assert!(err.contains("node \"/ghost\": not found"), "{err}");
    let (ok, _, err) = run(&["topic", "list", "--domain", "500"]);
    assert!(!ok);
    assert!(err.contains("--domain 500"), "{err}");
}

#[test]
fn topic_tools_work_over_a_zenoh_router_without_shared_memory() {
    let (_router, cfg) = router();
    let d = "182";
    let net = |c: &mut std::process::Command| {
        c.env("MYELIN_TRANSPORT", "zenoh")
            .env("MYELIN_ZENOH_CONFIG", &cfg);
    };
    let mut p = myelin();
    p.args(["topic", "pub", "/odom_twist", "geometry_msgs/msg/Twist"])
        .arg("linear: {x: 1.5, y: 0.0, z: 0.0}")
        .args(["--rate", "20", "--domain", d])
        .stdout(Stdio::null());
    net(&mut p);
    let _pub = Background(p.spawn().unwrap());
    let run_net = |args: &[&str]| {
        let mut c = myelin();
        c.args(args);
        net(&mut c);
        let out = c.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let list = loop {
        let (_, out, _) = run_net(&["topic", "list", "-t", "--domain", d]);
        if out.contains("/odom_twist") || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        list.contains("/odom_twist [geometry_msgs/msg/Twist]"),
        "{list}"
    );
    let (ok, info, err) = run_net(&["topic", "info", "/odom_twist", "--domain", d]);
    assert!(ok, "{err}");
    assert!(
        info.contains("Publisher count: 1") && info.contains("via zenoh"),
        "{info}"
    );
    let (ok, echo, err) = run_net(&[
        "topic",
        "echo",
        "/odom_twist",
        "--count",
        "2",
        "--domain",
        d,
    ]);
    assert!(ok, "{err}");
    assert_eq!(echo.matches("x: 1.5").count(), 2, "{echo}");
    let (ok, hz, err) = run_net(&[
        "topic",
        "hz",
        "/odom_twist",
        "--duration",
        "2.2",
        "--domain",
        d,
    ]);
    assert!(ok, "{err}");
    assert!(hz.contains("average rate:"), "{hz}");
    let (ok, bw, err) = run_net(&[
        "topic",
        "bw",
        "/odom_twist",
        "--duration",
        "2.2",
        "--domain",
        d,
    ]);
    assert!(ok, "{err}");
    // A Twist is 4 + 48 bytes of CDR.
    assert!(bw.contains("Message size mean: 52 B"), "{bw}");
    let (ok, nodes, _) = run_net(&["node", "list", "--domain", d]);
    assert!(ok && nodes.contains("/myelin_cli_pub_"), "{nodes}");
    let _ = std::fs::remove_file(&cfg);
}

#[test]
fn a_broken_zenoh_config_is_named_in_the_error() {
    let out = myelin()
        .args(["topic", "list"])
        .env("MYELIN_ZENOH_CONFIG", "/nonexistent/myelin.json5")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/myelin.json5"), "{err}");
}

/// Read `child`'s stdout lines until one contains `want` (generous bound).
fn wait_line(lines: &mut impl Iterator<Item = std::io::Result<String>>, want: &str) -> String {
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains(want) {
            return line;
        }
    }
    panic!("output ended before a line with {want:?}");
}

/// `topic echo` started before anything publishes: without a type it
/// waits for the topic; with one it subscribes at once. Both print the
/// message when it comes.
#[test]
fn echo_waits_for_a_topic_that_does_not_exist_yet() {
    let d = "183";
    let echo = |args: &[&str]| {
        myelin()
            .args(["topic", "echo"])
            .args(args)
            .args(["--count", "1", "--domain", d])
            .env("MYELIN_TRANSPORT", "shm")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut untyped = echo(&["/late"]);
    let mut typed = echo(&["/late_typed", "std_msgs/msg/Int32"]);
    // The untyped echo says it waits (on stderr) before anything exists.
    let mut err = std::io::BufReader::new(untyped.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(line.contains("waiting for /late to appear"), "{line}");
    let untyped_out = untyped.stdout.take().unwrap();
    let pubs: Vec<_> = [
        ["/late", "std_msgs/msg/String", "data: came late"],
        ["/late_typed", "std_msgs/msg/Int32", "data: 42"],
    ]
    .iter()
    .map(|[t, ty, v]| {
        Background(
            myelin()
                .args(["topic", "pub", t, ty, v, "--rate", "20", "--domain", d])
                .env("MYELIN_TRANSPORT", "shm")
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    })
    .collect();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut { untyped_out }, &mut out).unwrap();
    assert!(out.contains("came late"), "{out}");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut typed.stdout.take().unwrap(), &mut out).unwrap();
    assert!(out.contains("data: 42"), "{out}");
    assert!(untyped.wait().unwrap().success());
    assert!(typed.wait().unwrap().success());
    drop(pubs);
}

/// `topic hz` says "no new messages" once the publisher stops, instead of
/// repeating the last rate.
#[test]
fn hz_says_when_the_publisher_went_silent() {
    let ctx = myelin::Context::builder()
        .domain_id(184)
        .network(false)
        .build()
        .unwrap();
    let node = ctx.create_node("hz_source").unwrap();
    let p = node
        .create_publisher::<myelin_msgs::std_msgs::Int32>("/hz_silent", myelin::QoS::keep_last(10))
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publishing = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                p.publish(myelin_msgs::std_msgs::Int32 { data: 1 }).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let mut hz = Background(
        myelin()
            .args([
                "topic",
                "hz",
                "/hz_silent",
                "--duration",
                "120",
                "--domain",
                "184",
            ])
            .env("MYELIN_TRANSPORT", "shm")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(hz.0.stdout.take().unwrap()));
    wait_line(&mut lines, "average rate");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    publishing.join().unwrap();
    wait_line(&mut lines, "no new messages");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, marker) in [
        ("bash", "_myelin()"),
        ("zsh", "#compdef myelin"),
        ("fish", "complete -c myelin"),
    ] {
        let (ok, out, err) = run(&["completions", shell]);
        assert!(ok, "{shell}: {err}");
        assert!(
            out.contains(marker),
            "{shell}: {}",
            &out[..out.len().min(200)]
        );
        assert!(out.contains("bag"), "{shell}");
    }
}
