//! Names through the public API, and the typed errors for bad input.

use myelin::prelude::*;
use myelin::{ContextError, CreateEndpointError, CreateNodeError, CreateTimerError};
use std::time::Duration;

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap()
}

#[test]
fn topic_names_resolve_like_ros2() {
    let ctx = ctx();
    let node = ctx.create_node_in("camera", "robot1").unwrap();
    assert_eq!(node.fully_qualified_name(), "/robot1/camera");
    let cases = [
        ("image", "/robot1/image"),
        ("/image", "/image"),
        ("~/image", "/robot1/camera/image"),
        ("left/image", "/robot1/left/image"),
        ("{node}/raw", "/robot1/camera/raw"),
    ];
    for (given, expect) in cases {
        let p = node.create_publisher::<u8>(given, QoS::default()).unwrap();
        assert_eq!(p.topic(), expect, "{given}");
    }
}

#[test]
fn invalid_names_are_refused_quoting_the_name_and_rule() {
    let ctx = ctx();
    for bad in ["", "1camera", "my-node", "node name", "caméra", "a/b"] {
        let err = ctx.create_node(bad).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&format!("{bad:?}")), "{text}");
        assert!(matches!(err, CreateNodeError::InvalidName(_)));
    }
    for bad_ns in ["/a//b", "/a/", "/1a", "/a b"] {
        let err = ctx.create_node_in("ok", bad_ns).unwrap_err();
        assert!(err.to_string().contains("namespace"), "{err}");
    }
    let node = ctx.create_node("ok").unwrap();
    for bad in [
        "",
        "a//b",
        "a/",
        "1a",
        "a/~b",
        "a b",
        "{unknown}/x",
        "ümlaut",
    ] {
        let err = node
            .create_publisher::<u8>(bad, QoS::default())
            .unwrap_err();
        assert!(
            matches!(err, CreateEndpointError::InvalidName(_)),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains("topic"), "{err}");
    }
}

#[test]
fn duplicate_node_names_are_refused_until_the_first_is_dropped() {
    let ctx = ctx();
    let n = ctx.create_node("dup").unwrap();
    assert_eq!(
        ctx.create_node("dup").unwrap_err(),
        CreateNodeError::NameTaken("/dup".into())
    );
    // Same name in another namespace is another node.
    ctx.create_node_in("dup", "/other").unwrap();
    drop(n);
    ctx.create_node("dup").unwrap();
}

#[test]
fn domain_ids_follow_ros2() {
    assert_eq!(
        Context::builder()
            .domain_id(232)
            .handle_signals(false)
            .build()
            .unwrap()
            .domain_id(),
        232
    );
    assert_eq!(
        Context::builder().domain_id(233).build().unwrap_err(),
        ContextError::DomainOutOfRange(233)
    );
}

#[test]
fn entities_on_a_shut_down_context_are_refused() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let p = node.create_publisher::<u8>("t", QoS::default()).unwrap();
    ctx.shutdown();
    assert!(matches!(
        node.create_publisher::<u8>("t2", QoS::default()),
        Err(CreateEndpointError::ContextShutDown(_))
    ));
    assert!(matches!(
        p.publish(1),
        Err(myelin::PublishError::ContextShutDown(_))
    ));
    assert_eq!(
        node.create_timer(Duration::from_millis(1), || {})
            .unwrap_err(),
        CreateTimerError::ContextShutDown
    );
}

#[test]
fn zero_timer_period_is_refused() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    assert_eq!(
        node.create_timer(Duration::ZERO, || {}).unwrap_err(),
        CreateTimerError::ZeroPeriod
    );
}

#[test]
fn derived_message_types_carry_name_and_schema_hash() {
    #[derive(Clone, myelin::Message)]
    #[allow(dead_code)]
    struct A {
        x: f64,
    }
    #[derive(Clone, myelin::Message)]
    #[message(name = "geometry_msgs/msg/Point")]
    #[allow(dead_code)]
    struct B {
        x: f64,
        y: f64,
        z: f64,
    }
    // The ROS-style name in this package, whatever the module or binary.
    assert_eq!(<A as Message>::TYPE_NAME, "myelin/msg/A");
    assert_eq!(<B as Message>::TYPE_NAME, "geometry_msgs/msg/Point");
    assert_ne!(<A as Message>::TYPE_HASH, <B as Message>::TYPE_HASH);
}

/// The child of the next test: builds a context without a domain id and
/// reports what `ROS_DOMAIN_ID` made of it.
#[test]
fn domain_env_child() {
    let Ok(role) = std::env::var("MYELIN_DOMAIN_CHILD") else {
        return;
    };
    let built = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .build();
    match role.as_str() {
        "builder" => match built {
            Ok(c) => println!("domain {}", c.domain_id()),
            Err(e) => println!("error {e}"),
        },
        _ => {
            let c = Context::new();
            println!("domain {}", c.domain_id());
        }
    }
}

/// A context without an explicit domain takes `ROS_DOMAIN_ID`, as ROS 2
/// nodes do; a bad value is a typed error from the builder (and a panic
/// that names the variable from `Context::new`), never silently domain 0.
#[test]
fn ros_domain_id_picks_the_domain() {
    let child = |role: &str, value: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "domain_env_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MYELIN_DOMAIN_CHILD", role)
            .env("ROS_DOMAIN_ID", value)
            .env("MYELIN_TRANSPORT", "intra")
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert!(child("builder", "77").0.contains("domain 77"));
    assert!(child("builder", "").0.contains("domain 0"));
    let (out, _) = child("builder", "robot");
    assert!(
        out.contains("error ROS_DOMAIN_ID=\"robot\" is not a domain id"),
        "{out}"
    );
    let (_, err) = child("new", "300");
    assert!(
        err.contains("cannot create the context: ROS_DOMAIN_ID=\"300\""),
        "{err}"
    );
}

/// The child of the next test: publishes a type without a wire encoding
/// while shared memory is on.
#[cfg(feature = "shm")]
#[test]
fn local_type_child() {
    if std::env::var("MYELIN_LOCAL_TYPE_CHILD").is_err() {
        return;
    }
    #[derive(Clone, myelin::Message)]
    struct OnlyHere {
        _x: u32,
    }
    let ctx = Context::new();
    let node = ctx.create_node("local_type").unwrap();
    let _p = node
        .create_publisher::<OnlyHere>("only_here", myelin::QoS::keep_last(1))
        .unwrap();
    let _q = node
        .create_publisher::<OnlyHere>("only_here_too", myelin::QoS::keep_last(1))
        .unwrap();
}

/// A type that cannot leave its process, used while a transport to other
/// processes runs, is said once (with the fix), never silently. (A
/// build without shared memory has no other process to name it for.)
#[cfg(feature = "shm")]
#[test]
fn a_type_that_cannot_cross_processes_is_named_once_with_the_fix() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "local_type_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MYELIN_LOCAL_TYPE_CHILD", "1")
        .env("MYELIN_TRANSPORT", "shm")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("has no wire encoding").count(), 1, "{err}");
    assert!(err.contains("myelin/msg/OnlyHere"), "{err}");
    assert!(err.contains("#[message(cdr)]"), "{err}");
}

/// `--ros-args -r` renames topics, services, nodes and namespaces as ROS 2
/// does, before anything is created.
#[test]
fn remapping_renames_topics_nodes_and_namespaces() {
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .ros_args([
            "prog",
            "--ros-args",
            "-r",
            "listener:chatter:=/talk",
            "-r",
            "chatter:=talk",
            "-r",
            "talker:__node:=speaker",
            "-r",
            "listener:__ns:=/robot",
        ])
        .build()
        .unwrap();
    let talker = ctx.create_node("talker").unwrap();
    assert_eq!(talker.fully_qualified_name(), "/speaker");
    assert_eq!(talker.resolve_topic_name("chatter").unwrap(), "/talk");
    let listener = ctx.create_node("listener").unwrap();
    assert_eq!(listener.fully_qualified_name(), "/robot/listener");
    // The listener's own rule comes first (the first matching rule wins,
    // as in rcl): its `chatter` is /talk too, and both ends meet.
    assert_eq!(listener.resolve_topic_name("chatter").unwrap(), "/talk");
    let s = listener
        .create_polling_subscription::<String>("chatter", QoS::keep_last(5), Default::default())
        .unwrap();
    talker
        .create_publisher::<String>("chatter", QoS::keep_last(5))
        .unwrap()
        .publish("remapped".into())
        .unwrap();
    assert_eq!(*s.take().unwrap(), "remapped");
    let e = Context::builder()
        .handle_signals(false)
        .ros_args(["p", "--ros-args", "-r", "bad name:=x"])
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("-r \"bad name:=x\""), "{e}");
}
