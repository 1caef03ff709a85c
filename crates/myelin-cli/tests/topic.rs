//! `myelin topic` / `myelin node` end to end against a publisher in another
//! process (`myelin topic pub`), over shared-memory discovery.

use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;
use common::{Background, myelin};

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
}

#[test]
fn unknown_topics_types_nodes_and_bad_yaml_are_clear_errors() {
    let (ok, _, err) = run(&["topic", "echo", "/nobody_here", "--domain", "182"]);
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
        "pub",
        "/x",
        "std_msgs/msg/Int32",
        "data: [not, an, int]",
        "--domain",
        "182",
    ]);
    assert!(!ok);
    assert!(err.contains("not a std_msgs/msg/Int32"), "{err}");
    let (ok, _, err) = run(&["node", "info", "/ghost", "--domain", "182"]);
    assert!(!ok);
    assert!(err.contains("node \"/ghost\": not found"), "{err}");
    let (ok, _, err) = run(&["topic", "list", "--domain", "500"]);
    assert!(!ok);
    assert!(err.contains("--domain 500"), "{err}");
}
