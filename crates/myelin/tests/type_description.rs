//! Every node answers `~/get_type_description` (REP 2016) for the ROS
//! types it uses, as rclcpp nodes do: messages, services and actions,
//! with their sources; anything else is a failure that says why.

use std::time::Duration;

use myelin::Message;
use myelin::prelude::*;
use myelin::type_description::{FieldType, GetTypeDescription, GetTypeDescriptionRequest};
use myelin_msgs::example_interfaces::{AddTwoInts, AddTwoIntsResponse, Fibonacci};
use myelin_msgs::geometry_msgs::PoseStamped;
use myelin_msgs::std_msgs;

const LONG: Duration = Duration::from_secs(30);

fn ask(name: &str, hash: &str, sources: bool) -> GetTypeDescriptionRequest {
    GetTypeDescriptionRequest {
        type_name: name.into(),
        type_hash: hash.into(),
        include_type_sources: sources,
    }
}

#[test]
fn a_node_describes_the_types_it_uses_and_only_those() {
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap();
    let node = ctx.create_node("describer").unwrap();
    let asker = ctx.create_node("asker").unwrap();
    let client = asker
        .create_client_for::<GetTypeDescription>("/describer/get_type_description")
        .unwrap();
    // No described type yet: no service (it comes with the first).
    assert!(!client.service_is_ready());
    let _pub = node
        .create_publisher::<std_msgs::String>("chatter", QoS::keep_last(10))
        .unwrap();
    let _sub = node
        .create_subscription("pose", QoS::keep_last(1), |_: &PoseStamped| {})
        .unwrap();
    let _srv = node
        .create_service_for::<AddTwoInts>("add_two_ints", |r| AddTwoIntsResponse { sum: r.a + r.b })
        .unwrap();
    let _action = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spin = std::thread::spawn(move || exec.spin());
    assert!(client.wait_for_service(LONG));

    let hash = std_msgs::String::ROS_TYPE_HASH.unwrap();
    let r = client
        .call(ask("std_msgs/msg/String", hash, true), LONG)
        .unwrap();
    assert!(r.successful, "{}", r.failure_reason);
    let d = &r.type_description.type_description;
    assert_eq!(d.type_name, "std_msgs/msg/String");
    assert_eq!(d.fields.len(), 1);
    assert_eq!(d.fields[0].name, "data");
    assert_eq!(d.fields[0].r#type.type_id, FieldType::FIELD_TYPE_STRING);
    assert!(r.type_description.referenced_type_descriptions.is_empty());
    assert_eq!(r.type_sources.len(), 1);
    assert_eq!(r.type_sources[0].encoding, "msg");
    assert!(r.type_sources[0].raw_file_contents.contains("string data"));

    // A nested type: every referenced type, sorted; sources left out.
    let r = client
        .call(ask("geometry_msgs/msg/PoseStamped", "", false), LONG)
        .unwrap();
    assert!(r.successful, "{}", r.failure_reason);
    let refs: Vec<&str> = r
        .type_description
        .referenced_type_descriptions
        .iter()
        .map(|t| t.type_name.as_str())
        .collect();
    assert_eq!(
        refs,
        [
            "builtin_interfaces/msg/Time",
            "geometry_msgs/msg/Point",
            "geometry_msgs/msg/Pose",
            "geometry_msgs/msg/Quaternion",
            "std_msgs/msg/Header",
        ]
    );
    let header = &r.type_description.type_description.fields[0];
    assert_eq!(header.r#type.type_id, FieldType::FIELD_TYPE_NESTED_TYPE);
    assert_eq!(header.r#type.nested_type_name, "std_msgs/msg/Header");
    assert!(r.type_sources.is_empty());

    // A service type and an action type, by their own names.
    let r = client
        .call(ask("example_interfaces/srv/AddTwoInts", "", true), LONG)
        .unwrap();
    assert!(r.successful, "{}", r.failure_reason);
    let fields: Vec<&str> = r
        .type_description
        .type_description
        .fields
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        fields,
        ["request_message", "response_message", "event_message"]
    );
    assert_eq!(r.type_sources[0].encoding, "srv");
    let r = client
        .call(ask("example_interfaces/action/Fibonacci", "", true), LONG)
        .unwrap();
    assert!(r.successful, "{}", r.failure_reason);
    assert_eq!(r.type_sources[0].encoding, "action");
    assert!(r.type_sources.iter().any(|s| s.type_name
        == "example_interfaces/action/Fibonacci_Goal"
        && s.encoding == "implicit"));

    // What the node does not use, or another version of what it uses.
    let r = client
        .call(ask("sensor_msgs/msg/Image", "", true), LONG)
        .unwrap();
    assert!(!r.successful);
    assert!(
        r.failure_reason.contains("not used by this node"),
        "{}",
        r.failure_reason
    );
    let wrong = format!("RIHS01_{}", "0".repeat(64));
    let r = client
        .call(ask("std_msgs/msg/String", &wrong, true), LONG)
        .unwrap();
    assert!(!r.successful);
    assert!(r.failure_reason.contains(hash), "{}", r.failure_reason);

    stop.stop();
    spin.join().unwrap().unwrap();
}

/// A context built without the service: its nodes serve none.
#[test]
fn the_service_can_be_turned_off() {
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .type_description_service(false)
        .build()
        .unwrap();
    let node = ctx.create_node("quiet").unwrap();
    let _pub = node
        .create_publisher::<std_msgs::String>("chatter", QoS::keep_last(10))
        .unwrap();
    assert!(
        !node
            .service_names_and_types()
            .iter()
            .any(|(n, _)| n.ends_with("get_type_description"))
    );
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap();
    let node = ctx.create_node("talkative").unwrap();
    let _pub = node
        .create_publisher::<std_msgs::String>("chatter", QoS::keep_last(10))
        .unwrap();
    assert!(
        node.service_names_and_types()
            .iter()
            .any(|(n, _)| n == "/talkative/get_type_description")
    );
}
