//! `myelin service list|call` end to end: against a ROS 2 server on
//! rmw_zenoh (the independent Python peer, `interop/rmw_zenoh_peer.py`)
//! through `myelin router`, and the errors a user can make.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;
use common::{Background, myelin, router, router_endpoint};

#[path = "../../myelin/tests/common/interop.rs"]
mod interop;

fn run(args: &[&str], net: Option<&std::path::Path>) -> (bool, String, String) {
    let mut c = myelin();
    c.args(args);
    if let Some(cfg) = net {
        c.env("MYELIN_TRANSPORT", "zenoh")
            .env("MYELIN_ZENOH_CONFIG", cfg);
    }
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A ROS 2 server (the peer) is listed with its type and node, `service
/// call` gets its answer, as `ros2 service list -t` / `call` do, and
/// `node list`/`node info` show the node that only serves a service.
#[test]
fn list_and_call_a_ros_2_service_through_a_router() {
    let Some(py) = interop::python() else { return };
    let (router, cfg) = router();
    let endpoint = router_endpoint(&cfg);
    let mut server = std::process::Command::new(py)
        .arg(interop::peer_script())
        .args(["server", "--domain", "185", "--node", "adder"])
        .args(["--connect", &endpoint])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let server = Background(server);

    let deadline = Instant::now() + Duration::from_secs(60);
    let list = loop {
        let (_, out, _) = run(&["service", "list", "-t", "--domain", "185"], Some(&cfg));
        if out.contains("/add_two_ints") || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        list.contains("/add_two_ints [example_interfaces/srv/AddTwoInts]  (/adder)"),
        "{list}"
    );
    // The domain from ROS_DOMAIN_ID, as ros2 takes it.
    let called = myelin()
        .args(["service", "call", "add_two_ints"])
        .args(["example_interfaces/srv/AddTwoInts", "{a: 40, b: 2}"])
        .env("ROS_DOMAIN_ID", "185")
        .env("MYELIN_TRANSPORT", "zenoh")
        .env("MYELIN_ZENOH_CONFIG", &cfg)
        .output()
        .unwrap();
    let (ok, out, err) = (
        called.status.success(),
        String::from_utf8_lossy(&called.stdout).into_owned(),
        String::from_utf8_lossy(&called.stderr).into_owned(),
    );
    assert!(ok, "{out}{err}");
    assert!(out.ends_with("response:\nsum: 42\n"), "{out}");
    let (ok, ty, err) = run(
        &["service", "type", "add_two_ints", "--domain", "185"],
        Some(&cfg),
    );
    assert!(ok, "{err}");
    assert_eq!(ty, "example_interfaces/srv/AddTwoInts\n");
    let (ok, _, err) = run(
        &["service", "type", "/nothing_here", "--domain", "185"],
        Some(&cfg),
    );
    assert!(!ok);
    assert!(err.contains("not found on domain 185"), "{err}");
    // A node that only serves a service is a node too.
    let (_, nodes, _) = run(&["node", "list", "--domain", "185"], Some(&cfg));
    assert!(nodes.lines().any(|n| n == "/adder"), "{nodes}");
    let (ok, info, err) = run(&["node", "info", "/adder", "--domain", "185"], Some(&cfg));
    assert!(ok, "{err}");
    assert!(
        info.contains("  Service Servers:\n    /add_two_ints: example_interfaces/srv/AddTwoInts\n"),
        "{info}"
    );
    drop(server);
    drop(router);
}

/// What a user gets wrong is an error that says what to fix, and a
/// non-zero exit.
#[test]
fn service_call_errors_say_what_to_fix() {
    let (ok, _, err) = run(
        &[
            "service",
            "call",
            "/x",
            "example_interfaces/srv/AddTwoInt",
            "--domain",
            "186",
        ],
        None,
    );
    assert!(!ok);
    assert!(
        err.contains("did you mean example_interfaces/srv/AddTwoInts?"),
        "{err}"
    );
    let (ok, _, err) = run(
        &[
            "service",
            "call",
            "/x",
            "example_interfaces/srv/AddTwoInts",
            "{a: 1, bb: 2}",
            "--domain",
            "186",
        ],
        None,
    );
    assert!(!ok);
    assert!(err.contains("unknown field `bb`"), "{err}");
    assert!(err.contains("did you mean `b`?"), "{err}");
    let (ok, _, err) = run(
        &[
            "service",
            "call",
            "/nobody_serves_this",
            "std_srvs/srv/Trigger",
            "--timeout",
            "0.2",
            "--domain",
            "186",
        ],
        None,
    );
    assert!(!ok);
    assert!(
        err.contains("no server of /nobody_serves_this (std_srvs/srv/Trigger)"),
        "{err}"
    );
    let (ok, _, err) = run(
        &[
            "service",
            "call",
            "/x",
            "std_srvs/srv/Trigger",
            "--timeout",
            "1e300",
        ],
        None,
    );
    assert!(!ok);
    assert!(err.contains("invalid --timeout"), "{err}");
}

/// Two ROS 2 nodes that share a name (two peers, two zenoh sessions) are
/// two nodes: `node list` prints the name twice and warns, as `ros2 node
/// list` does.
#[test]
fn nodes_that_share_a_name_are_listed_apart_with_a_warning() {
    let Some(py) = interop::python() else { return };
    let (router, cfg) = router();
    let endpoint = router_endpoint(&cfg);
    let mut talkers = Vec::new();
    for topic in ["/a", "/b"] {
        let mut t = std::process::Command::new(&py)
            .arg(interop::peer_script())
            .args([
                "talker", "--domain", "189", "--node", "twin", "--topic", topic,
            ])
            .args(["--connect", &endpoint])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(t.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        talkers.push(Background(t));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let (nodes, err) = loop {
        let (_, out, err) = run(&["node", "list", "--domain", "189"], Some(&cfg));
        if out.matches("/twin").count() >= 2 || Instant::now() > deadline {
            break (out, err);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(nodes, "/twin\n/twin\n");
    assert!(err.contains("share an exact name"), "{err}");
    drop(talkers);
    drop(router);
}
