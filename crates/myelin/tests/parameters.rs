//! Node parameters as ROS 2 nodes have them: declared with types,
//! descriptors and ranges, vetted by on-set callbacks, set all or none,
//! given initial values by `--ros-args -p` and parameter files, served
//! through the six parameter services to other processes and announced on
//! `/parameter_events`.

use std::io::Write;

use myelin::ParameterError;
use myelin::parameter::ParameterValue;
use myelin::prelude::*;
use myelin::rcl_interfaces as rcl;

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .build()
        .unwrap()
}

#[test]
fn declared_parameters_keep_their_type_range_and_read_only_flag() {
    let c = ctx();
    let node = c.create_node("params").unwrap();
    assert_eq!(
        node.declare_parameter("rate", 30).unwrap(),
        ParameterValue::Integer(30)
    );
    assert!(matches!(
        node.declare_parameter("rate", 1),
        Err(ParameterError::AlreadyDeclared(_))
    ));
    assert!(matches!(
        node.get_parameter("nope"),
        Err(ParameterError::NotDeclared(_))
    ));
    assert!(matches!(
        node.declare_parameter("bad name", 1),
        Err(ParameterError::InvalidName { .. })
    ));
    node.set_parameter("rate", 60).unwrap();
    assert_eq!(node.get_parameter("rate").unwrap().as_i64(), Some(60));
    let e = node.set_parameter("rate", 2.5).unwrap_err();
    assert_eq!(
        e,
        ParameterError::WrongType {
            name: "rate".into(),
            expected: "integer",
            found: "double"
        }
    );
    // Dynamic typing lets the type change.
    node.declare_parameter_with(
        "anything",
        1,
        rcl::ParameterDescriptor {
            dynamic_typing: true,
            ..Default::default()
        },
    )
    .unwrap();
    node.set_parameter("anything", "text").unwrap();
    assert_eq!(node.describe_parameter("anything").unwrap().r#type, 4);

    node.declare_parameter_with(
        "gain",
        0.5,
        rcl::ParameterDescriptor {
            floating_point_range: vec![rcl::FloatingPointRange {
                from_value: 0.0,
                to_value: 1.0,
                step: 0.0,
            }],
            ..Default::default()
        },
    )
    .unwrap();
    assert!(matches!(
        node.set_parameter("gain", 1.5),
        Err(ParameterError::OutOfRange { .. })
    ));
    node.declare_parameter_with(
        "serial",
        "abc",
        rcl::ParameterDescriptor {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        node.set_parameter("serial", "xyz"),
        Err(ParameterError::ReadOnly("serial".into()))
    );
    assert_eq!(
        node.undeclare_parameter("serial"),
        Err(ParameterError::ReadOnly("serial".into()))
    );
    node.undeclare_parameter("gain").unwrap();
    assert!(!node.has_parameter("gain"));
    assert_eq!(node.parameter_names(), vec!["anything", "rate", "serial"]);
}

#[test]
fn on_set_callbacks_refuse_changes_and_atomic_sets_are_all_or_none() {
    let c = ctx();
    let node = c.create_node("vetted").unwrap();
    node.declare_parameter("low", 0).unwrap();
    node.declare_parameter("high", 10).unwrap();
    let n = node.clone();
    let check = node.add_on_set_parameters_callback(move |changes| {
        let get = |name: &str| {
            changes
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_i64().unwrap())
                .or_else(|| n.get_parameter(name).ok().and_then(|v| v.as_i64()))
                .unwrap_or(0)
        };
        if get("low") > get("high") {
            Err("low must not exceed high".into())
        } else {
            Ok(())
        }
    });
    let e = node.set_parameter("low", 20).unwrap_err();
    assert!(e.to_string().contains("low must not exceed high"), "{e}");
    // Both at once pass the check; one of them wrong fails both.
    node.set_parameters_atomically(&[("low".into(), 15.into()), ("high".into(), 20.into())])
        .unwrap();
    assert!(
        node.set_parameters_atomically(&[("low".into(), 16.into()), ("high".into(), "x".into())])
            .is_err()
    );
    assert_eq!(node.get_parameter("low").unwrap().as_i64(), Some(15));
    drop(check);
    node.set_parameter("low", 99).unwrap();
}

#[test]
fn ros_args_and_parameter_files_give_initial_values() {
    let dir = std::env::temp_dir().join(format!("myelin_params_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("params.yaml");
    let mut f = std::fs::File::create(&file).unwrap();
    writeln!(
        f,
        "/**:\n  ros__parameters:\n    shared: 1\n\
         camera:\n  ros__parameters:\n    fps: 15\n    lens:\n      focal: 4.5\n    names: [a, b]\n\
         /ns/other:\n  ros__parameters:\n    shared: 2"
    )
    .unwrap();
    let c = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .ros_args([
            "prog",
            "--ignored-by-myelin",
            "--ros-args",
            "--params-file",
            file.to_str().unwrap(),
            "-p",
            "camera:exposure:=0.01",
            "-p",
            "verbose:=true",
        ])
        .build()
        .unwrap();
    let cam = c.create_node("camera").unwrap();
    assert_eq!(cam.declare_parameter("fps", 30).unwrap().as_i64(), Some(15));
    assert_eq!(
        cam.declare_parameter("lens.focal", 1.0).unwrap().as_f64(),
        Some(4.5)
    );
    assert_eq!(
        cam.declare_parameter("names", Vec::<String>::new())
            .unwrap(),
        ParameterValue::StringArray(vec!["a".into(), "b".into()])
    );
    assert_eq!(
        cam.declare_parameter("exposure", 0.1).unwrap().as_f64(),
        Some(0.01)
    );
    assert_eq!(
        cam.declare_parameter("shared", 0).unwrap().as_i64(),
        Some(1)
    );
    assert_eq!(
        cam.declare_parameter("verbose", false).unwrap().as_bool(),
        Some(true)
    );
    assert_eq!(
        cam.declare_parameter("untouched", 7).unwrap().as_i64(),
        Some(7)
    );
    let other = c.create_node_in("other", "/ns").unwrap();
    assert_eq!(
        other.declare_parameter("shared", 0).unwrap().as_i64(),
        Some(2)
    );
    assert_eq!(
        other.declare_parameter("exposure", 0.1).unwrap().as_f64(),
        Some(0.1)
    );

    // Mistakes are errors that say what is wrong.
    let err = |args: &[&str]| {
        Context::builder()
            .handle_signals(false)
            .shared_memory(false)
            .network(false)
            .ros_args(args.iter().copied())
            .build()
            .unwrap_err()
            .to_string()
    };
    assert!(err(&["p", "--ros-args", "--enclave", "/e"]).contains("\"--enclave\""));
    assert!(err(&["p", "--ros-args", "-p", "novalue"]).contains("name:=value"));
    assert!(err(&["p", "--ros-args", "--params-file", "/dev/zero"]).contains("not a regular file"));
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "camera: [1, 2]").unwrap();
    assert!(
        err(&["p", "--ros-args", "--params-file", bad.to_str().unwrap()])
            .contains("ros__parameters")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The node's last handle takes its parameter services with it (they hold
/// the node): the name is free again.
#[test]
fn a_node_with_parameters_goes_with_its_last_handle() {
    let c = ctx();
    let node = c.create_node("transient").unwrap();
    node.declare_parameter("x", 1).unwrap();
    let copy = node.clone();
    drop(node);
    assert!(
        c.create_node("transient").is_err(),
        "a handle is still alive"
    );
    drop(copy);
    let again = c.create_node("transient").unwrap();
    assert!(!again.has_parameter("x"));
}

/// Across processes (shared memory): the services and the events.
#[cfg(feature = "shm")]
mod across_processes {
    use super::*;
    use myelin::ServiceType;
    use std::time::{Duration, Instant};

    const LONG: Duration = Duration::from_secs(60);

    /// The child of the next test: a node with parameters, spinning.
    #[test]
    fn parameter_server_child() {
        let Ok(domain) = std::env::var("MYELIN_PARAM_CHILD") else {
            return;
        };
        let c = Context::builder()
            .domain_id(domain.parse().unwrap())
            .handle_signals(false)
            .network(false)
            .build()
            .unwrap();
        let node = c.create_node("tuned").unwrap();
        node.declare_parameter("speed", 1.5).unwrap();
        node.declare_parameter_with(
            "limits.max",
            10,
            rcl::ParameterDescriptor {
                description: "the most".into(),
                integer_range: vec![rcl::IntegerRange {
                    from_value: 0,
                    to_value: 100,
                    step: 0,
                }],
                ..Default::default()
            },
        )
        .unwrap();
        let mut exec = Executor::new();
        exec.add_node(&node).unwrap();
        println!("ready");
        exec.spin_until(LONG, || false).unwrap();
    }

    /// Another process reaches a node's parameters through its services (as
    /// `ros2 param` does) and hears the change on `/parameter_events`.
    #[test]
    fn another_process_gets_and_sets_parameters_through_the_services() {
        let domain = 226;
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "across_processes::parameter_server_child",
                "--nocapture",
            ])
            .env("MYELIN_PARAM_CHILD", domain.to_string())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let c = Context::builder()
            .domain_id(domain)
            .handle_signals(false)
            .network(false)
            .build()
            .unwrap();
        let node = c.create_node("param_client").unwrap();
        let events = node
            .create_polling_subscription::<rcl::ParameterEvent>(
                "/parameter_events",
                QoS::keep_last(1000),
                Default::default(),
            )
            .unwrap();
        let get = node
            .create_client_for::<rcl::GetParameters>("/tuned/get_parameters")
            .unwrap();
        let set = node
            .create_client_for::<rcl::SetParameters>("/tuned/set_parameters")
            .unwrap();
        let list = node
            .create_client_for::<rcl::ListParameters>("/tuned/list_parameters")
            .unwrap();
        let describe = node
            .create_client_for::<rcl::DescribeParameters>("/tuned/describe_parameters")
            .unwrap();
        assert!(get.wait_for_service(LONG) && set.wait_for_service(LONG));
        assert!(list.wait_for_service(LONG) && describe.wait_for_service(LONG));
        assert_eq!(
            rcl::GetParameters::TYPE_NAME,
            "rcl_interfaces/srv/GetParameters"
        );

        let values = get
            .call(
                rcl::GetParametersRequest {
                    names: vec!["speed".into(), "missing".into()],
                },
                LONG,
            )
            .unwrap()
            .values;
        assert_eq!(
            ParameterValue::from_msg(&values[0]),
            Some(ParameterValue::Double(1.5))
        );
        assert_eq!(values[1].r#type, rcl::ParameterType::PARAMETER_NOT_SET);

        let listed = list
            .call(rcl::ListParametersRequest::default(), LONG)
            .unwrap()
            .result;
        assert_eq!(listed.names, vec!["limits.max", "speed"]);
        assert_eq!(listed.prefixes, vec!["limits"]);
        let d = describe
            .call(
                rcl::DescribeParametersRequest {
                    names: vec!["limits.max".into()],
                },
                LONG,
            )
            .unwrap()
            .descriptors;
        assert_eq!(d[0].description, "the most");
        assert_eq!(d[0].integer_range[0].to_value, 100);

        let p = |name: &str, v: ParameterValue| rcl::Parameter {
            name: name.into(),
            value: v.to_msg(),
        };
        let results = set
            .call(
                rcl::SetParametersRequest {
                    parameters: vec![
                        p("limits.max", ParameterValue::Integer(50)),
                        p("limits.max", ParameterValue::Integer(500)),
                        p("speed", ParameterValue::String("fast".into())),
                    ],
                },
                LONG,
            )
            .unwrap()
            .results;
        assert!(results[0].successful, "{results:?}");
        assert!(
            !results[1].successful && results[1].reason.contains("outside"),
            "{results:?}"
        );
        assert!(
            !results[2].successful && results[2].reason.contains("double"),
            "{results:?}"
        );

        // The accepted change was announced.
        let deadline = Instant::now() + LONG;
        loop {
            let e = events.wait_for_message(LONG).expect("a parameter event");
            if e.node == "/tuned"
                && e.changed_parameters.iter().any(|c| {
                    c.name == "limits.max" && ParameterValue::from_msg(&c.value) == Some(50.into())
                })
            {
                break;
            }
            assert!(Instant::now() < deadline);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A node's logger writes `rcl_interfaces/msg/Log` lines to `/rosout`
/// (transient local, so a late listener sees them), with level, the
/// logger's name, the text and where it was logged.
#[test]
fn a_nodes_log_lines_go_to_rosout() {
    let c = ctx();
    let node = c.create_node_in("camera", "/robot").unwrap();
    let log = node.get_logger();
    log.info("streaming");
    log.warn(format_args!("{} frames dropped", 3));
    let reader = c.create_node("console").unwrap();
    let rosout = reader
        .create_polling_subscription::<rcl::Log>(
            "/rosout",
            QoS::keep_last(1000).transient_local(),
            Default::default(),
        )
        .unwrap();
    let first = rosout.take().expect("the history of /rosout");
    assert_eq!(
        (first.level, first.name.as_str(), first.msg.as_str()),
        (rcl::Log::INFO, "robot.camera", "streaming")
    );
    assert!(first.file.ends_with("parameters.rs"), "{}", first.file);
    assert!(first.line > 0);
    let second = rosout.take().unwrap();
    assert_eq!(
        (second.level, second.msg.as_str()),
        (rcl::Log::WARN, "3 frames dropped")
    );
}
