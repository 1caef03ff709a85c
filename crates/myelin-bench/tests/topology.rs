//! Topology files: the shipped ones load and run; every validation error
//! names the node and the field (line and column for syntax); the late /
//! too-late / lost counters are right on a deliberately slow subscriber.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use myelin_bench::topology::{self, TopologyError};

/// A process of a multi-process run (`MYELIN_TOPOLOGY_CHILD`).
#[test]
fn topology_role() {
    topology::child_if_requested();
}

fn helper() -> bool {
    std::env::var_os("MYELIN_TOPOLOGY_CHILD").is_some()
}

fn shipped(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../topologies")
        .join(name)
}

fn run(text: &str, secs: f64) -> topology::TopologyReport {
    let plans = topology::parse(text, "test.json").unwrap();
    topology::run_in_process(
        &plans,
        "test.json",
        Duration::from_secs_f64(secs),
        myelin::IdleWait::Block,
        Arc::new(AtomicBool::new(false)),
        |_| {},
    )
    .unwrap()
}

#[test]
fn the_shipped_topologies_load_with_the_published_shapes() {
    for (file, nodes, topics, subs) in [
        ("sierra_nevada.json", 10, 13, 17),
        ("mont_blanc.json", 20, 23, 35),
        ("white_mountain.json", 20, 23, 35),
        ("cedar.json", 9, 13, 19),
    ] {
        let plans = topology::load(&shipped(file)).unwrap();
        assert_eq!(plans.len(), nodes, "{file}");
        assert_eq!(
            plans.iter().map(|n| n.publishers.len()).sum::<usize>(),
            topics,
            "{file}"
        );
        assert_eq!(
            plans.iter().map(|n| n.subscribers.len()).sum::<usize>(),
            subs,
            "{file}"
        );
    }
    for file in [
        "relay_chain.json",
        "fanout_20x10.json",
        "image_pipeline_all_in_one.json",
        "image_pipeline_with_two_image_view.json",
    ] {
        topology::load(&shipped(file)).unwrap();
    }
}

#[test]
fn anticipating_executors_run_a_topology_with_nothing_lost() {
    let path = shipped("sierra_nevada.json");
    let plans = topology::load(&path).unwrap();
    let r = topology::run_in_process(
        &plans,
        "sierra_nevada.json",
        Duration::from_secs_f64(1.5),
        myelin::IdleWait::Anticipate,
        Arc::new(AtomicBool::new(false)),
        |_| {},
    )
    .unwrap();
    assert_eq!(r.placement, "one process, executors anticipate");
    assert_eq!(r.lost, 0);
    assert!(r.subscriptions.iter().all(|s| s.received >= 1));
}

#[test]
fn shipped_topologies_run_in_one_process_with_nothing_lost() {
    for file in [
        "sierra_nevada.json",
        "cedar.json",
        "image_pipeline_all_in_one.json",
    ] {
        let text = std::fs::read_to_string(shipped(file)).unwrap();
        let r = run(&text, 1.5);
        assert_eq!(r.lost, 0, "{file}");
        for s in &r.subscriptions {
            // Every subscription hears its publisher, never more than the
            // rate allows (timers skip, never burst).
            assert!(
                s.received >= 1 || s.expected == 0,
                "{file}: {} {}",
                s.node,
                s.topic
            );
            assert!(
                s.received <= s.expected + 2,
                "{file}: {} {} {} > {}",
                s.node,
                s.topic,
                s.received,
                s.expected
            );
        }
        assert!(r.rss_bytes > 0);
    }
}

fn invalid(text: &str) -> (String, String, String) {
    match topology::parse(text, "bad.json").unwrap_err() {
        TopologyError::Invalid {
            node, field, why, ..
        } => (node, field, why),
        e => panic!("expected Invalid, got {e}"),
    }
}

#[test]
fn validation_errors_name_the_node_and_the_field() {
    let (node, field, why) = invalid(
        r#"{"nodes":[{"node_name":"cam","publishers":[{"topic_name":"t","msg_type":"stamped_banana","period_ms":10}]}]}"#,
    );
    assert_eq!(
        (node.as_str(), field.as_str()),
        ("cam", "publishers[0].msg_type")
    );
    assert!(why.contains("stamped_banana"), "{why}");

    let (node, field, why) = invalid(
        r#"{"nodes":[{"node_name":"viewer","subscribers":[{"topic_name":"ghost","msg_type":"stamped_int64"}]}]}"#,
    );
    assert_eq!(
        (node.as_str(), field.as_str()),
        ("viewer", "subscribers[0].topic_name")
    );
    assert!(why.contains("nobody publishes /ghost"), "{why}");

    let (node, field, why) = invalid(
        r#"{"nodes":[
            {"node_name":"a","publishers":[{"topic_name":"t","msg_type":"stamped_int64","period_ms":10}]},
            {"node_name":"b","subscribers":[{"topic_name":"t","msg_type":"stamped4_int32"}]}]}"#,
    );
    assert_eq!(
        (node.as_str(), field.as_str()),
        ("b", "subscribers[0].msg_type")
    );
    assert!(
        why.contains("stamped_int64") && why.contains("stamped4_int32"),
        "{why}"
    );

    let (node, field, _) = invalid(
        r#"{"nodes":[{"node_name":"a","publishers":[{"topic_name":"t","msg_type":"stamped_int64"}]}]}"#,
    );
    assert_eq!(
        (node.as_str(), field.as_str()),
        ("a", "publishers[0].period_ms")
    );

    // Absurd sizes and counts are refused before anything runs (they
    // aborted or allocated without bound).
    let (node, field, why) = invalid(
        r#"{"nodes":[{"node_name":"a","publishers":[{"topic_name":"t","msg_type":"stamped_vector","msg_size":18446744073709551615,"period_ms":10}]}]}"#,
    );
    assert_eq!(
        (node.as_str(), field.as_str()),
        ("a", "publishers[0].msg_size")
    );
    assert!(why.contains("at most"), "{why}");
    let (node, field, why) = invalid(
        r#"{"nodes":[{"node_name":"a","number":1000000000000,"publishers":[{"topic_name":"t","msg_type":"stamped_int64","period_ms":10}]}]}"#,
    );
    assert_eq!((node.as_str(), field.as_str()), ("a", "number"));
    assert!(why.contains("1 to 1000"), "{why}");

    // Absurd rates are refused before anything runs (1e300 Hz and 1e-300 Hz
    // made the period overflow a Duration and panic).
    for rate in [
        r#""freq_hz":1e-300"#,
        r#""freq_hz":1e300"#,
        r#""period_ms":1e300"#,
    ] {
        let (node, field, why) = invalid(&format!(
            r#"{{"nodes":[{{"node_name":"a","publishers":[{{"topic_name":"t","msg_type":"stamped_int64",{rate}}}]}}]}}"#
        ));
        assert_eq!(
            (node.as_str(), field.as_str()),
            ("a", "publishers[0].period_ms"),
            "{rate}"
        );
        assert!(why.contains("0.001 to 1000000"), "{rate}: {why}");
    }

    let (node, field, _) = invalid(
        r#"{"nodes":[{"node_name":"a","subscribers":[{"topic_name":"t","msg_type":"stamped_int64","qos_reliability":"sometimes"}],
                      "publishers":[{"topic_name":"t","msg_type":"stamped_int64","period_ms":10}]}]}"#,
    );
    assert_eq!(
        (node.as_str(), field.as_str()),
        ("a", "subscribers[0].qos_reliability")
    );
}

#[test]
fn malformed_json_reports_line_and_column() {
    let e = topology::parse(
        "{\n  \"nodes\": [\n    {\"node_name\": \"a\",, }\n  ]\n}",
        "x.json",
    )
    .unwrap_err();
    match e {
        TopologyError::Syntax { line, column, .. } => {
            assert_eq!(line, 3);
            assert!(column > 1);
        }
        e => panic!("{e}"),
    }
    let e =
        topology::parse(r#"{"nodes":[{"node_name":"a","publishrs":[]}]}"#, "x.json").unwrap_err();
    assert!(e.to_string().contains("publishrs"), "{e}");
    assert!(e.to_string().contains("did you mean `publishers`?"), "{e}");
    assert!(e.to_string().starts_with("x.json:1:"), "{e}");
    // A misspelt QoS field (flattened, so serde lists no expected names)
    // is an error with a hint too, never silently the default.
    let e = topology::parse(
        r#"{"nodes":[{"node_name":"a","publishers":[{"topic_name":"t","msg_type":"stamped_int64","freq_hz":10,"qos_dept":5}]}]}"#,
        "x.json",
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field `qos_dept`"), "{e}");
    assert!(e.to_string().contains("did you mean `qos_depth`?"), "{e}");
}

#[test]
fn a_slow_subscriber_makes_its_neighbours_late_and_loses_its_own_messages() {
    // The source on its own executor; `slow` and `bystander` share another.
    // `slow` is busy 25 ms per message of a 100 Hz topic with depth 1, so
    // its buffer overwrites (lost), and `bystander`'s messages wait behind
    // it (late: > 2 ms, too late: > 10 ms).
    let text = r#"{"nodes":[
        {"node_name":"src","executor_id":1,"publishers":[
            {"topic_name":"work","msg_type":"stamped_int64","period_ms":10},
            {"topic_name":"news","msg_type":"stamped_int64","period_ms":10}]},
        {"node_name":"slow","executor_id":2,"subscribers":[
            {"topic_name":"work","msg_type":"stamped_int64","qos_depth":1,"callback_us":25000}]},
        {"node_name":"bystander","executor_id":2,"subscribers":[
            {"topic_name":"news","msg_type":"stamped_int64","qos_depth":100}]}]}"#;
    let r = run(text, 1.5);
    let slow = r.subscriptions.iter().find(|s| s.node == "slow").unwrap();
    let by = r
        .subscriptions
        .iter()
        .find(|s| s.node == "bystander")
        .unwrap();
    assert!(slow.lost > 0, "{slow:?}");
    assert!(by.too_late > 0, "{by:?}");
    assert!(by.late + by.too_late > 0);
    assert_eq!(r.lost, slow.lost + by.lost);
    // `slow`'s busy work is the runner's own time, not myelin's: at least
    // 25 ms for every message it counted but the last (which may end
    // after the measurement).
    let runner_s = r.runner_percent_of_one_core / 100.0 * r.duration_s;
    assert!(
        runner_s >= slow.received.saturating_sub(1) as f64 * 0.025 * 0.999,
        "runner {runner_s:.3} s for {} busy messages",
        slow.received
    );
    // The counters are in the JSON.
    let json = serde_json::to_value(&r).unwrap();
    for key in ["late", "too_late", "lost"] {
        assert!(json[key].is_u64(), "{key}");
        assert!(json["subscriptions"][0][key].is_u64(), "{key}");
    }
    assert!(json["runner_percent_of_one_core"].is_f64());
}

#[test]
fn sierra_nevada_runs_with_every_node_in_its_own_process() {
    if helper() {
        return;
    }
    let path = shipped("sierra_nevada.json");
    let plans = topology::load(&path).unwrap();
    let r = topology::run_in_processes(
        &plans,
        &path,
        topology::Placement::PerNode,
        Duration::from_secs_f64(2.0),
        |_| {},
    )
    .unwrap();
    assert!(r.placement.starts_with("10 processes"), "{}", r.placement);
    assert_eq!(r.subscriptions.len(), 17);
    assert_eq!(r.lost, 0);
    for s in &r.subscriptions {
        assert!(s.received >= 1, "{} {}", s.node, s.topic);
        assert!(s.received <= s.expected + 2, "{} {}", s.node, s.topic);
    }
}

const SERVICES: &str = r#"{"nodes":[
    {"node_name":"asker","clients":[{"service_name":"add","srv_type":"stamped10b","period_ms":20}]},
    {"node_name":"answerer","servers":[{"service_name":"add","srv_type":"stamped10b"}]}]}"#;

#[test]
fn services_in_a_topology_are_called_at_their_rate_in_one_process() {
    let r = run(SERVICES, 1.0);
    let c = &r.subscriptions[0];
    assert_eq!(c.topic, "/add (service)");
    assert!(c.received >= 1 && c.received <= c.expected + 2, "{c:?}");
    assert_eq!(c.lost, 0);
}

#[test]
fn services_in_a_topology_work_across_processes() {
    if helper() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("myelin-topo-srv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("services.json");
    std::fs::write(&path, SERVICES).unwrap();
    let plans = topology::load(&path).unwrap();
    let r = topology::run_in_processes(
        &plans,
        &path,
        topology::Placement::PerNode,
        Duration::from_secs_f64(1.5),
        |_| {},
    )
    .unwrap();
    let c = &r.subscriptions[0];
    assert!(c.received >= 1, "{c:?}");
    assert_eq!(c.lost, 0, "{c:?}");
}

#[test]
fn a_client_without_a_server_is_refused() {
    let (node, field, why) = invalid(
        r#"{"nodes":[{"node_name":"asker","clients":[{"service_name":"nope","srv_type":"stamped10b","period_ms":10}]}]}"#,
    );
    assert_eq!(
        (node.as_str(), field.as_str()),
        ("asker", "clients[0].service_name")
    );
    assert!(why.contains("nobody serves /nope"), "{why}");
}

#[test]
fn a_placement_file_groups_nodes_into_named_processes_and_is_checked() {
    if helper() {
        return;
    }
    let topo = shipped("image_pipeline_all_in_one.json");
    let plans = topology::load(&topo).unwrap();
    let placement = topology::load_placement(
        &shipped("image_pipeline_two_processes.placement.json"),
        &plans,
    )
    .unwrap();
    let r = topology::run_in_processes(
        &plans,
        &topo,
        placement,
        Duration::from_secs_f64(1.5),
        |_| {},
    )
    .unwrap();
    assert_eq!(r.placement, "2 processes (placement file)");
    assert_eq!(r.lost, 0);
    assert!(
        r.subscriptions.iter().all(|s| s.received >= 1),
        "{:?}",
        r.subscriptions
    );

    let dir = std::env::temp_dir().join(format!("myelin-place-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"a": ["camera", "watermark"]}"#).unwrap();
    let e = topology::load_placement(&bad, &plans)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"view\"") && e.contains("not placed"), "{e}");
    std::fs::write(
        &bad,
        r#"{"a": ["camera", "ghost"], "b": ["watermark", "view"]}"#,
    )
    .unwrap();
    let e = topology::load_placement(&bad, &plans)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"ghost\"") && e.contains("no such node"), "{e}");
}

#[cfg(feature = "zenoh")]
#[test]
fn sierra_nevada_runs_per_executor_over_zenoh_without_shared_memory() {
    if helper() {
        return;
    }
    let path = shipped("sierra_nevada.json");
    let plans = topology::load(&path).unwrap();
    let r = topology::run_in_processes_over(
        &plans,
        &path,
        topology::Placement::PerExecutor,
        topology::ProcTransport::Zenoh,
        Duration::from_secs_f64(2.0),
        myelin::IdleWait::Block,
        |_| {},
    )
    .unwrap();
    assert!(r.placement.contains("zenoh"), "{}", r.placement);
    assert_eq!(r.subscriptions.len(), 17);
    assert_eq!(r.lost, 0);
    for s in &r.subscriptions {
        assert!(s.received >= 1, "{} {}", s.node, s.topic);
    }
}
