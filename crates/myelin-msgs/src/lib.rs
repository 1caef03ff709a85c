//! The common ROS 2 message types for myelin, with their ROS type names
//! and the CDR encoding ROS 2 puts on the wire (so they cross processes
//! and, with the zenoh transport, reach ROS 2 nodes).
//!
//! Field names, types and order follow the `.msg` definitions of ROS 2
//! Jazzy; fixed-size arrays are Rust arrays (no length on the wire),
//! sequences are `Vec`s (a `u32` count). Every type is `Default`, `Clone`,
//! `PartialEq`, serde and [`myelin::Message`].
//!
//! ```
//! use myelin::Message;
//! use myelin_msgs::geometry_msgs::{Point, Pose, Quaternion};
//! use myelin_msgs::std_msgs;
//!
//! let pose = Pose {
//!     position: Point { x: 1.0, y: 2.0, z: 0.0 },
//!     orientation: Quaternion { w: 1.0, ..Default::default() },
//! };
//! assert_eq!(Pose::TYPE_NAME, "geometry_msgs/msg/Pose");
//! let hello = std_msgs::String { data: "hello".into() };
//! let mut buf = vec![0u8; hello.wire_len().unwrap()];
//! hello.wire_encode(&mut buf).unwrap();
//! // CDR little endian: header, length 6 (with the NUL), "hello", NUL.
//! assert_eq!(buf, [0, 1, 0, 0, 6, 0, 0, 0, b'h', b'e', b'l', b'l', b'o', 0]);
//! # let _ = pose;
//! ```
//!
//! Your own types: `#[derive(Clone, serde::Serialize, serde::Deserialize,
//! myelin_derive::Message)]` with `#[message(cdr, name = "my_pkg/msg/MyType")]`.
//!
//! Services are types too: each `.srv` of [`std_srvs`] and
//! [`example_interfaces`] is a request message (`AddTwoIntsRequest`, ROS
//! name `example_interfaces/srv/AddTwoInts_Request`), a response message,
//! and a [`myelin::ServiceType`] (`AddTwoInts`) that carries the
//! service's name and RIHS01 hash, as rmw_zenoh names a service on the
//! wire ([`for_all_services!`], [`srv_definitions`], [`ros_srv_hash_of`]).
//!
//! Each type also carries its ROS 2 type hash (REP 2011, `RIHS01_...`) in
//! [`myelin::Message::ROS_TYPE_HASH`], so ROS 2 nodes (through
//! `rmw_zenoh`) match its topics. The hashes are computed by [`idl`] from
//! the types' `.msg` definitions, which [`definitions`] embeds; a test
//! checks the two agree.
//!
//! ```
//! use myelin::Message;
//! use myelin_msgs::{idl, ros_hash_of, std_msgs};
//!
//! let spec = idl::parse_msg("std_msgs", "String", "string data  # the text").unwrap();
//! assert_eq!(spec.fields[0].name, "data");
//! let hash = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
//! assert_eq!(ros_hash_of("std_msgs/msg/String").as_deref(), Some(hash));
//! assert_eq!(std_msgs::String::ROS_TYPE_HASH, Some(hash));
//! ```

#![warn(missing_docs)]

pub mod idl;

/// The one list of this crate's types (`package Name`), handed to
/// `$crate::$then!` after `$arg`s: it builds [`definitions`] and
/// [`for_all_types!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __type_list {
    ($then:ident $($arg:tt)*) => {
        $crate::$then! { $($arg)*;
            builtin_interfaces Time,
            builtin_interfaces Duration,
            service_msgs ServiceEventInfo,
            rosgraph_msgs Clock,
            std_msgs Header,
            std_msgs String,
            std_msgs Bool,
            std_msgs Int32,
            std_msgs Int64,
            std_msgs Float32,
            std_msgs Float64,
            std_msgs Empty,
            geometry_msgs Point,
            geometry_msgs Vector3,
            geometry_msgs Quaternion,
            geometry_msgs Pose,
            geometry_msgs PoseStamped,
            geometry_msgs Twist,
            geometry_msgs TwistStamped,
            geometry_msgs Transform,
            geometry_msgs TransformStamped,
            sensor_msgs Image,
            sensor_msgs CompressedImage,
            sensor_msgs Imu,
            sensor_msgs LaserScan,
            sensor_msgs PointField,
            sensor_msgs PointCloud2,
            sensor_msgs RegionOfInterest,
            sensor_msgs CameraInfo,
            rcl_interfaces ParameterType,
            rcl_interfaces ParameterValue,
            rcl_interfaces Parameter,
            rcl_interfaces FloatingPointRange,
            rcl_interfaces IntegerRange,
            rcl_interfaces ParameterDescriptor,
            rcl_interfaces ParameterEvent,
            rcl_interfaces SetParametersResult,
            rcl_interfaces ListParametersResult,
            rcl_interfaces Log,
            unique_identifier_msgs UUID,
            action_msgs GoalInfo,
            action_msgs GoalStatus,
            action_msgs GoalStatusArray,
            type_description_interfaces FieldType,
            type_description_interfaces Field,
            type_description_interfaces IndividualTypeDescription,
            type_description_interfaces TypeDescription,
            type_description_interfaces TypeSource,
            type_description_interfaces KeyValue,
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __type_paths {
    ($m:ident; $($pkg:ident $name:ident),* $(,)?) => {
        $m!($($crate::$pkg::$name),*)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __definitions {
    (; $($pkg:ident $name:ident),* $(,)?) => {
        &[$((
            concat!(stringify!($pkg), "/msg/", stringify!($name)),
            include_str!(concat!("../msg/", stringify!($pkg), "/", stringify!($name), ".msg")),
        )),*]
    };
}

/// Calls the macro `$m` with the path of every message type of this crate,
/// in the order of [`definitions`] (e.g. to decode any of them by name, as
/// `myelin topic echo` does):
///
/// ```
/// macro_rules! names {
///     ($($t:ty),*) => { [$(<$t as myelin::Message>::TYPE_NAME),*] };
/// }
/// let all = myelin_msgs::for_all_types!(names);
/// assert_eq!(all[0], "builtin_interfaces/msg/Time");
/// assert_eq!(all.len(), myelin_msgs::definitions().len());
/// ```
#[macro_export]
macro_rules! for_all_types {
    ($m:ident) => {
        $crate::__type_list!(__type_paths $m)
    };
}

static DEFINITIONS: &[(&str, &str)] = __type_list!(__definitions);

/// The one list of this crate's services (`package Name`), as
/// [`__type_list`] is for messages.
#[doc(hidden)]
#[macro_export]
macro_rules! __srv_list {
    ($then:ident $($arg:tt)*) => {
        $crate::$then! { $($arg)*;
            std_srvs Empty,
            std_srvs Trigger,
            std_srvs SetBool,
            example_interfaces AddTwoInts,
            example_interfaces Trigger,
            example_interfaces SetBool,
            rcl_interfaces GetParameters,
            rcl_interfaces SetParameters,
            rcl_interfaces SetParametersAtomically,
            rcl_interfaces ListParameters,
            rcl_interfaces DescribeParameters,
            rcl_interfaces GetParameterTypes,
            action_msgs CancelGoal,
            type_description_interfaces GetTypeDescription,
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __srv_definitions {
    (; $($pkg:ident $name:ident),* $(,)?) => {
        &[$((
            concat!(stringify!($pkg), "/srv/", stringify!($name)),
            include_str!(concat!("../srv/", stringify!($pkg), "/", stringify!($name), ".srv")),
        )),*]
    };
}

/// Calls the macro `$m` with the path of every service type of this crate
/// (each a [`myelin::ServiceType`]), in the order of [`srv_definitions`]:
///
/// ```
/// macro_rules! names {
///     ($($t:ty),*) => { [$(<$t as myelin::ServiceType>::TYPE_NAME),*] };
/// }
/// let all = myelin_msgs::for_all_services!(names);
/// assert_eq!(all[0], "std_srvs/srv/Empty");
/// assert_eq!(all.len(), myelin_msgs::srv_definitions().len());
/// ```
#[macro_export]
macro_rules! for_all_services {
    ($m:ident) => {
        $crate::__srv_list!(__type_paths $m)
    };
}

static SRV_DEFINITIONS: &[(&str, &str)] = __srv_list!(__srv_definitions);

/// The one list of this crate's actions (`package Name`), as
/// [`__type_list`] is for messages.
#[doc(hidden)]
#[macro_export]
macro_rules! __action_list {
    ($then:ident $($arg:tt)*) => {
        $crate::$then! { $($arg)*;
            example_interfaces Fibonacci,
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __action_definitions {
    (; $($pkg:ident $name:ident),* $(,)?) => {
        &[$((
            concat!(stringify!($pkg), "/action/", stringify!($name)),
            include_str!(concat!("../action/", stringify!($pkg), "/", stringify!($name), ".action")),
        )),*]
    };
}

/// Calls the macro `$m` with the path of every action type of this crate
/// (each a [`myelin::action::ActionType`]), in the order of
/// [`action_definitions`]:
///
/// ```
/// macro_rules! names {
///     ($($t:ty),*) => { [$(<$t as myelin::action::ActionType>::NAMES.action),*] };
/// }
/// let all = myelin_msgs::for_all_actions!(names);
/// assert_eq!(all[0], "example_interfaces/action/Fibonacci");
/// assert_eq!(all.len(), myelin_msgs::action_definitions().len());
/// ```
#[macro_export]
macro_rules! for_all_actions {
    ($m:ident) => {
        $crate::__action_list!(__type_paths $m)
    };
}

static ACTION_DEFINITIONS: &[(&str, &str)] = __action_list!(__action_definitions);

/// The ROS 2 (Jazzy) `.action` definition of every action of this crate,
/// as `("pkg/action/Name", text)`.
pub fn action_definitions() -> &'static [(&'static str, &'static str)] {
    ACTION_DEFINITIONS
}

/// The parsed `.action` of `type_name` (`pkg/action/Name`), if this crate
/// has it.
pub fn action_spec(type_name: &str) -> Option<idl::ActionSpec> {
    let (package, name) = type_name.split_once("/action/")?;
    let text = ACTION_DEFINITIONS
        .iter()
        .find(|(n, _)| *n == type_name)
        .map(|(_, t)| *t)?;
    idl::parse_action(package, name, text).ok()
}

/// The ROS 2 type hash of the action `type_name` (`pkg/action/Name`), or
/// of one of the types it implies (`pkg/action/Name_SendGoal`,
/// `pkg/action/Name_Goal`, ...), if this crate has it.
///
/// ```
/// use myelin::action::ActionType;
/// use myelin_msgs::example_interfaces::Fibonacci;
///
/// let h = myelin_msgs::ros_action_hash_of("example_interfaces/action/Fibonacci_SendGoal").unwrap();
/// assert_eq!(Fibonacci::ROS_HASHES.unwrap().send_goal, h);
/// ```
pub fn ros_action_hash_of(type_name: &str) -> Option<String> {
    let action = action_of(type_name)?;
    idl::type_hash(type_name, action.lookup(msg_spec)).ok()
}

/// The action of this crate that `type_name` (`pkg/action/Name` or one of
/// its derived types) belongs to.
fn action_of(type_name: &str) -> Option<idl::ActionSpec> {
    let (package, rest) = type_name.split_once("/action/")?;
    ACTION_DEFINITIONS.iter().find_map(|(n, _)| {
        let (p, name) = n.split_once("/action/")?;
        let own = p == package
            && (rest == name || rest.strip_prefix(name).is_some_and(|r| r.starts_with('_')));
        own.then(|| action_spec(n)).flatten()
    })
}

/// The ROS 2 (Jazzy) `.srv` definition of every service of this crate, as
/// `("pkg/srv/Name", text)`.
pub fn srv_definitions() -> &'static [(&'static str, &'static str)] {
    SRV_DEFINITIONS
}

/// The parsed `.srv` of `type_name` (`pkg/srv/Name`), if this crate has
/// it.
pub fn srv_spec(type_name: &str) -> Option<idl::SrvSpec> {
    let (package, name) = type_name.split_once("/srv/")?;
    let text = SRV_DEFINITIONS
        .iter()
        .find(|(n, _)| *n == type_name)
        .map(|(_, t)| *t)?;
    idl::parse_srv(package, name, text).ok()
}

/// The ROS 2 type hash of the service `type_name` (`pkg/srv/Name`), if
/// this crate has it.
///
/// ```
/// use myelin::ServiceType;
/// use myelin_msgs::example_interfaces::AddTwoInts;
///
/// let h = myelin_msgs::ros_srv_hash_of("example_interfaces/srv/AddTwoInts").unwrap();
/// assert_eq!(h, "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a");
/// assert_eq!(AddTwoInts::ROS_TYPE_HASH, Some(h.as_str()));
/// ```
pub fn ros_srv_hash_of(type_name: &str) -> Option<String> {
    idl::srv_type_hash(&srv_spec(type_name)?, msg_spec).ok()
}

/// The ROS 2 (Jazzy) `.msg` definition of every type of this crate, as
/// `("pkg/msg/Name", text)`, in the order of the modules.
pub fn definitions() -> &'static [(&'static str, &'static str)] {
    DEFINITIONS
}

/// The `.msg` text of `type_name` (`pkg/msg/Name`), if this crate has it.
pub fn definition(type_name: &str) -> Option<&'static str> {
    DEFINITIONS
        .iter()
        .find(|(name, _)| *name == type_name)
        .map(|(_, text)| *text)
}

/// The parsed definition of `type_name` (`pkg/msg/Name`), if this crate
/// has it: the lookup to give [`idl::type_hash`] to hash this crate's
/// types, or your own types that use them.
pub fn msg_spec(type_name: &str) -> Option<idl::MsgSpec> {
    if type_name.contains("/action/") {
        return action_of(type_name)?
            .types()
            .into_iter()
            .find(|t| t.type_name() == type_name);
    }
    if let Some((service, part)) = type_name.rsplit_once('_')
        && service.contains("/srv/")
    {
        let srv = srv_spec(service)?;
        return match part {
            "Request" => Some(srv.request),
            "Response" => Some(srv.response),
            "Event" => Some(srv.event()),
            _ => None,
        };
    }
    let (package, name) = idl::split_type_name(type_name)?;
    idl::parse_msg(package, name, definition(type_name)?).ok()
}

/// The description (REP 2016) of `type_name`, a message, service or
/// action of this crate or a type one implies (`pkg/srv/Name_Request`,
/// `pkg/action/Name_Goal`, ...), with the source files: what a node's
/// `~/get_type_description` answers for it.
///
/// ```
/// let d = myelin_msgs::describe("geometry_msgs/msg/Pose").unwrap();
/// assert_eq!(d.description.type_description.fields[0].name, "position");
/// let refs: Vec<_> = d.description.referenced_type_descriptions.iter().map(|t| t.type_name.as_str()).collect();
/// assert_eq!(refs, ["geometry_msgs/msg/Point", "geometry_msgs/msg/Quaternion"]);
/// assert_eq!(d.sources[0].encoding, "msg");
/// ```
pub fn describe(type_name: &str) -> Option<myelin::type_description::Described> {
    use myelin::type_description as td;
    let (root, referenced) = match srv_spec(type_name) {
        Some(srv) => idl::type_description(type_name, srv.lookup(msg_spec)).ok()?,
        None => idl::type_description(type_name, msg_spec).ok()?,
    };
    let convert = |d: idl::DescribedType| td::IndividualTypeDescription {
        type_name: d.type_name,
        fields: d
            .fields
            .into_iter()
            .map(|f| td::Field {
                name: f.name,
                r#type: td::FieldType {
                    type_id: u8::try_from(f.type_id).unwrap_or(0),
                    capacity: f.capacity,
                    string_capacity: f.string_capacity,
                    nested_type_name: f.nested_type_name,
                },
                default_value: f.default_value,
            })
            .collect(),
    };
    let source = |name: &str| {
        let file = |kind: &str, all: &[(&str, &str)]| {
            all.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| (kind.to_string(), t.to_string()))
        };
        let (encoding, raw_file_contents) = file("msg", DEFINITIONS)
            .or_else(|| file("srv", SRV_DEFINITIONS))
            .or_else(|| file("action", ACTION_DEFINITIONS))
            .unwrap_or_else(|| ("implicit".to_string(), String::new()));
        td::TypeSource {
            type_name: name.to_string(),
            encoding,
            raw_file_contents,
        }
    };
    let mut sources = vec![source(&root.type_name)];
    sources.extend(referenced.iter().map(|d| source(&d.type_name)));
    Some(td::Described {
        description: td::TypeDescription {
            type_description: convert(root),
            referenced_type_descriptions: referenced.into_iter().map(convert).collect(),
        },
        sources,
    })
}

/// The ROS 2 type hash (`RIHS01_...`) of `type_name` (`pkg/msg/Name`)
/// computed from [`definitions`], if this crate has the type.
pub fn ros_hash_of(type_name: &str) -> Option<String> {
    idl::type_hash(type_name, msg_spec).ok()
}

/// `msg!(Name = "pkg/msg/Name", "RIHS01_..." { fields })`: a message type
/// with its ROS name and ROS 2 type hash (the hash of `msg/pkg/Name.msg`;
/// `tests/ros_hash.rs` checks it and prints the computed ones).
macro_rules! msg {
    ($(#[$doc:meta])* $name:ident = $ros:literal, $hash:literal { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, myelin_derive::Message)]
        #[message(cdr, name = $ros, ros_hash = $hash, describe = crate::describe)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }
    };
}

/// `srv!(Name = "pkg/srv/Name", "RIHS01_..." (service hash) {
/// NameRequest = "pkg/srv/Name_Request", "RIHS01_..." { fields }
/// NameResponse = "pkg/srv/Name_Response", "RIHS01_..." { fields } })`:
/// the request and response messages (`NameRequest`, `NameResponse`,
/// named `pkg/srv/Name_Request` and `pkg/srv/Name_Response` as ROS 2
/// names them) and the service type `Name`.
macro_rules! srv {
    ($(#[$doc:meta])* $name:ident = $ros:literal, $hash:literal {
        $req:ident = $req_ros:literal, $req_hash:literal { $($(#[$qdoc:meta])* $qf:ident : $qt:ty),* $(,)? }
        $resp:ident = $resp_ros:literal, $resp_hash:literal { $($(#[$rdoc:meta])* $rf:ident : $rt:ty),* $(,)? }
    }) => {
        msg!(
            #[doc = concat!("The request of [`", stringify!($name), "`].")]
            $req = $req_ros, $req_hash { $($(#[$qdoc])* $qf: $qt),* }
        );
        msg!(
            #[doc = concat!("The response of [`", stringify!($name), "`].")]
            $resp = $resp_ros, $resp_hash { $($(#[$rdoc])* $rf: $rt),* }
        );
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;
        impl myelin::ServiceType for $name {
            type Request = $req;
            type Response = $resp;
            const TYPE_NAME: &'static str = $ros;
            const ROS_TYPE_HASH: Option<&'static str> = Some($hash);
            fn ros_type_description() -> Option<myelin::type_description::Described> {
                crate::describe($ros)
            }
            fn ros_event_type_hash() -> Option<String> {
                crate::ros_hash_of(concat!($ros, "_Event"))
            }
        }
    };
}

/// `action!(Name = "pkg/action/Name" { hashes } { NameGoal = ... { fields }
/// NameResult = ... { fields } NameFeedback = ... { fields } })`: the
/// goal, result and feedback messages and the action type `Name` with
/// its ROS 2 hashes (`tests/ros_hash.rs` checks them against the
/// `.action`).
macro_rules! action {
    ($(#[$doc:meta])* $name:ident = $ros:literal {
        action: $h_action:literal,
        send_goal: $h_sg:literal,
        send_goal_request: $h_sgq:literal,
        send_goal_response: $h_sgr:literal,
        get_result: $h_gr:literal,
        get_result_request: $h_grq:literal,
        get_result_response: $h_grr:literal,
        feedback_message: $h_fm:literal $(,)?
    } {
        $goal:ident = $goal_ros:literal, $goal_hash:literal { $($(#[$gdoc:meta])* $gf:ident : $gt:ty),* $(,)? }
        $result:ident = $result_ros:literal, $result_hash:literal { $($(#[$rdoc:meta])* $rf:ident : $rt:ty),* $(,)? }
        $feedback:ident = $feedback_ros:literal, $feedback_hash:literal { $($(#[$fdoc:meta])* $ff:ident : $ft:ty),* $(,)? }
    }) => {
        msg!(
            #[doc = concat!("The goal of [`", stringify!($name), "`].")]
            $goal = $goal_ros, $goal_hash { $($(#[$gdoc])* $gf: $gt),* }
        );
        msg!(
            #[doc = concat!("The result of [`", stringify!($name), "`].")]
            $result = $result_ros, $result_hash { $($(#[$rdoc])* $rf: $rt),* }
        );
        msg!(
            #[doc = concat!("The feedback of [`", stringify!($name), "`].")]
            $feedback = $feedback_ros, $feedback_hash { $($(#[$fdoc])* $ff: $ft),* }
        );
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;
        impl myelin::action::ActionType for $name {
            type Goal = $goal;
            type Result = $result;
            type Feedback = $feedback;
            const NAMES: myelin::action::ActionNames = myelin::action_names!($ros);
            const ROS_HASHES: Option<myelin::action::ActionHashes> =
                Some(myelin::action::ActionHashes {
                    action: $h_action,
                    send_goal: $h_sg,
                    send_goal_request: $h_sgq,
                    send_goal_response: $h_sgr,
                    get_result: $h_gr,
                    get_result_request: $h_grq,
                    get_result_response: $h_grr,
                    feedback_message: $h_fm,
                });
            fn ros_type_description() -> Option<myelin::type_description::Described> {
                crate::describe($ros)
            }
        }
    };
}

/// `builtin_interfaces`: time.
pub mod builtin_interfaces {
    /// A point in time (seconds and nanoseconds since the epoch): myelin's
    /// own [`myelin::time::Time`], what [`Node::now`](myelin::Node::now)
    /// returns, so a stamp goes straight into a header.
    pub use myelin::time::Time;

    msg!(
        /// A span of time.
        Duration = "builtin_interfaces/msg/Duration",
            "RIHS01_e8d009f659816f758b75334ee1a9ca5b5c0b859843261f14c7f937349599d93b" {
            /// Seconds.
            sec: i32,
            /// Nanoseconds (0..1e9).
            nanosec: u32,
        }
    );
}

/// `rosgraph_msgs`: the simulated clock (`/clock`, which `myelin bag play
/// --clock` publishes and contexts with
/// [`use_sim_time`](myelin::ContextBuilder::use_sim_time) follow).
pub mod rosgraph_msgs {
    /// The current time of a simulation or a replay: myelin's own
    /// [`myelin::time::ClockMessage`], the type a context's `/clock`
    /// subscription takes.
    pub use myelin::time::ClockMessage as Clock;
}

/// `rcl_interfaces`: parameters and logs, the interfaces every ROS 2 node
/// serves (myelin's own [`myelin::rcl_interfaces`], used by
/// [`Node::declare_parameter`](myelin::Node::declare_parameter) and
/// friends).
pub mod rcl_interfaces {
    pub use myelin::rcl_interfaces::*;
}

/// `unique_identifier_msgs`: the id of an action's goal.
pub mod unique_identifier_msgs {
    /// 16 random bytes (myelin's own [`myelin::action::UUID`]).
    pub use myelin::action::UUID;
}

/// `action_msgs`: what every action speaks whatever its type (myelin's
/// own [`myelin::action::msgs`], used by
/// [`Node::create_action_server`](myelin::Node::create_action_server)).
pub mod action_msgs {
    pub use myelin::action::msgs::*;
}

/// `type_description_interfaces`: type descriptions (REP 2016), what a
/// node's `~/get_type_description` answers (myelin's own
/// [`myelin::type_description`]).
pub mod type_description_interfaces {
    pub use myelin::type_description::{
        Field, FieldType, GetTypeDescription, GetTypeDescriptionRequest,
        GetTypeDescriptionResponse, IndividualTypeDescription, KeyValue, TypeDescription,
        TypeSource,
    };
}

/// `service_msgs`: what service introspection reports about a call (part
/// of every service's type description).
pub mod service_msgs {
    use super::builtin_interfaces::Time;

    msg!(
        /// One event of a service call: sent or received, request or
        /// response, by which client, with which number.
        ServiceEventInfo = "service_msgs/msg/ServiceEventInfo",
            "RIHS01_41bcbbe07a75c9b52bc96bfd5c24d7f0fc0a08c0cb7921b3373c5732345a6f45" {
            /// `0` request sent, `1` request received, `2` response sent,
            /// `3` response received.
            event_type: u8,
            /// When it happened.
            stamp: Time,
            /// The calling client's id.
            client_gid: [u8; 16],
            /// The call's number at that client.
            sequence_number: i64,
        }
    );
}

/// `std_srvs`: the services with no particular payload.
pub mod std_srvs {
    srv!(
        /// Nothing in, nothing out (a trigger without an answer).
        Empty = "std_srvs/srv/Empty",
            "RIHS01_5888399dedec5ccc85ea6451949fd2c9f97bfdf963f9a588821639fcd31b5d19" {
            EmptyRequest = "std_srvs/srv/Empty_Request", "RIHS01_458eaf200a3f63d9cc53d19436edebc0c140ef4c93ca75d5bd4ce19fd7759e35" {
                /// CDR gives an empty structure one byte, as ROS 2 does.
                structure_needs_at_least_one_member: u8,
            }
            EmptyResponse = "std_srvs/srv/Empty_Response", "RIHS01_0a2858b3f60df644a61d0fa44cfc923a3d3628e0ad9c8ad8534b1a2c92a413dc" {
                /// CDR gives an empty structure one byte, as ROS 2 does.
                structure_needs_at_least_one_member: u8,
            }
        }
    );
    srv!(
        /// Do something; say whether it worked.
        Trigger = "std_srvs/srv/Trigger",
            "RIHS01_eeff2cd6fa5ad9d27cdf4dec64818317839b62f212a91e6b5304b634b2062c5f" {
            TriggerRequest = "std_srvs/srv/Trigger_Request", "RIHS01_d010825374ce8918e72bfd826c82603e60f45419e932ea976f807b74a863a199" {
                /// CDR gives an empty structure one byte, as ROS 2 does.
                structure_needs_at_least_one_member: u8,
            }
            TriggerResponse = "std_srvs/srv/Trigger_Response", "RIHS01_2d946c21e2fc3f1e9ca6986a8191d85fcc70097a8bb7771a053564bc47009cdf" {
                /// Whether it worked.
                success: bool,
                /// What happened, for a human.
                message: std::string::String,
            }
        }
    );
    srv!(
        /// Turn something on or off.
        SetBool = "std_srvs/srv/SetBool",
            "RIHS01_abe9e4bb6b41b40e6789712c00ec8871923e089af3f667a79992a428cff2da0a" {
            SetBoolRequest = "std_srvs/srv/SetBool_Request", "RIHS01_c62fbb99d94e1b25e8ef9e109f9581956bb1b3361a45a4e5810c36a90d29932e" {
                /// On (`true`) or off.
                data: bool,
            }
            SetBoolResponse = "std_srvs/srv/SetBool_Response", "RIHS01_d0814e7f7b4880ab77e9c57426c7aa1562ab69f11eef8e2e968812f9cbd0b059" {
                /// Whether the change was made.
                success: bool,
                /// What happened, for a human.
                message: std::string::String,
            }
        }
    );
}

/// `example_interfaces`: the services and actions of ROS 2's own demos.
pub mod example_interfaces {
    srv!(
        /// Add two integers (the `add_two_ints` demo).
        AddTwoInts = "example_interfaces/srv/AddTwoInts",
            "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a" {
            AddTwoIntsRequest = "example_interfaces/srv/AddTwoInts_Request", "RIHS01_000c5fd92d6b2e1a05949348f584d6d652adea1e92d691792011ac2273508302" {
                /// The first.
                a: i64,
                /// The second.
                b: i64,
            }
            AddTwoIntsResponse = "example_interfaces/srv/AddTwoInts_Response", "RIHS01_de5c030d4af33cba2749310b249737b631594703f9300495f48bffb2b44dcc2f" {
                /// `a + b`.
                sum: i64,
            }
        }
    );
    srv!(
        /// Do something; say whether it worked.
        Trigger = "example_interfaces/srv/Trigger",
            "RIHS01_cfeeee47f8105dd7685e4c92d46d4074669cb1c477402be1dea37486542a69e0" {
            TriggerRequest = "example_interfaces/srv/Trigger_Request", "RIHS01_2521571bb7fb4de94da045720b069b2859084c689ee27382f48414ebf4dd3a8d" {
                /// CDR gives an empty structure one byte, as ROS 2 does.
                structure_needs_at_least_one_member: u8,
            }
            TriggerResponse = "example_interfaces/srv/Trigger_Response", "RIHS01_3faa1e36b834f5705a7e9aa990c4720c082f0630bf28abedf315cc69f01dc8fc" {
                /// Whether it worked.
                success: bool,
                /// What happened, for a human.
                message: std::string::String,
            }
        }
    );
    srv!(
        /// Turn something on or off.
        SetBool = "example_interfaces/srv/SetBool",
            "RIHS01_a69782e5631b12e15c8e218410de1685bbf13e382718295adad14037a24afbe8" {
            SetBoolRequest = "example_interfaces/srv/SetBool_Request", "RIHS01_db31a9146de9f58c3196ef92ebc43abc460199adfa57ece51550f37544c4ee58" {
                /// On (`true`) or off.
                data: bool,
            }
            SetBoolResponse = "example_interfaces/srv/SetBool_Response", "RIHS01_fd35d6974b0ede7fad127f600619719eb7caf8b0ff8b02a4a5a103900479a619" {
                /// Whether the change was made.
                success: bool,
                /// What happened, for a human.
                message: std::string::String,
            }
        }
    );

    action!(
        /// Compute the Fibonacci sequence up to `order` numbers, reporting
        /// the sequence so far (the `fibonacci_action_server` demo).
        Fibonacci = "example_interfaces/action/Fibonacci" {
            action: "RIHS01_9508051da1ea4658de144b09bd0690ff3de52104683d847aed764d2915906f51",
            send_goal: "RIHS01_d1a57fb2a4afe8c21e34fb10db206f16ce6729b28531141472df92277c55b557",
            send_goal_request: "RIHS01_3d088942b413247db536576f0286768c6be8fcd5d0c9a5d544f359fba090a238",
            send_goal_response: "RIHS01_d8c07bb3d5b766fe4b43159c9a5222af5214e2fcc29229b991d826166c512be1",
            get_result: "RIHS01_1b0de0d5d29dc955d92f546706568428632771db13ec84c15ec1c1a59f424a57",
            get_result_request: "RIHS01_c8a4f5e7d13b81286ee1043e2ecd084281cecf1ff06aaa799464f5f15479f003",
            get_result_response: "RIHS01_6021dc98ab9b4bbe395e48aa4de81ee5f68eb570f88358affcc648146668b24f",
            feedback_message: "RIHS01_c1de71afd52e49a89c53d8262366884185bc0a02f78ce051c4e46b0a7fe59bb2",
        } {
            FibonacciGoal = "example_interfaces/action/Fibonacci_Goal",
                "RIHS01_226cb437e4355dcd3e914f930382a3b0cc1da81545bd319ed554e95a03255f51" {
                /// How many numbers of the sequence to compute.
                order: i32,
            }
            FibonacciResult = "example_interfaces/action/Fibonacci_Result",
                "RIHS01_fea81394f25aa4502217953f1a021fb750e79c10bbd43f13dd94632da6569649" {
                /// The sequence.
                sequence: Vec<i32>,
            }
            FibonacciFeedback = "example_interfaces/action/Fibonacci_Feedback",
                "RIHS01_2b12e37361da6f408d4c85bc24a18de64333f29082f2ca34b5ee33dc4c8b42a9" {
                /// The sequence so far.
                sequence: Vec<i32>,
            }
        }
    );
}

/// `std_msgs`: basic types and the standard header.
pub mod std_msgs {
    use super::builtin_interfaces::Time;

    msg!(
        /// Timestamp and coordinate frame of a stamped message.
        Header = "std_msgs/msg/Header",
            "RIHS01_f49fb3ae2cf070f793645ff749683ac6b06203e41c891e17701b1cb597ce6a01" {
            /// When the data was taken.
            stamp: Time,
            /// The coordinate frame.
            frame_id: std::string::String,
        }
    );
    msg!(
        /// A string.
        String = "std_msgs/msg/String",
            "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18" {
            /// The text.
            data: std::string::String,
        }
    );
    msg!(
        /// A boolean.
        Bool = "std_msgs/msg/Bool",
            "RIHS01_feb91e995ff9ebd09c0cb3d2aed18b11077585839fb5db80193b62d74528f6c9" {
            /// The value.
            data: bool,
        }
    );
    msg!(
        /// A 32-bit signed integer.
        Int32 = "std_msgs/msg/Int32",
            "RIHS01_b6578ded3c58c626cfe8d1a6fb6e04f706f97e9f03d2727c9ff4e74b1cef0deb" {
            /// The value.
            data: i32,
        }
    );
    msg!(
        /// A 64-bit signed integer.
        Int64 = "std_msgs/msg/Int64",
            "RIHS01_8cd1048c2f186b6bd9a92472dc1ce51723c0833a221e2b7aecfff111774f4b49" {
            /// The value.
            data: i64,
        }
    );
    msg!(
        /// A 32-bit float.
        Float32 = "std_msgs/msg/Float32",
            "RIHS01_7170d3d8f841f7be3172ce5f4f59f3a4d7f63b0447e8b33327601ad64d83d6e2" {
            /// The value.
            data: f32,
        }
    );
    msg!(
        /// A 64-bit float.
        Float64 = "std_msgs/msg/Float64",
            "RIHS01_705ba9c3d1a09df43737eb67095534de36fd426c0587779bda2bc51fe790182a" {
            /// The value.
            data: f64,
        }
    );
    msg!(
        /// Nothing (a ping).
        Empty = "std_msgs/msg/Empty",
            "RIHS01_20b625256f32d5dbc0d04fee44f43c41e51c70d3502f84b4a08e7a9c26a96312" {
            /// CDR gives an empty structure one byte, as ROS 2 does.
            structure_needs_at_least_one_member: u8,
        }
    );
}

/// `geometry_msgs`: points, poses, twists, transforms.
pub mod geometry_msgs {
    use super::std_msgs::Header;

    msg!(
        /// A position.
        Point = "geometry_msgs/msg/Point",
            "RIHS01_6963084842a9b04494d6b2941d11444708d892da2f4b09843b9c43f42a7f6881" { /// x.
            x: f64, /// y.
            y: f64, /// z.
            z: f64 }
    );
    msg!(
        /// A direction or velocity.
        Vector3 = "geometry_msgs/msg/Vector3",
            "RIHS01_cc12fe83e4c02719f1ce8070bfd14aecd40f75a96696a67a2a1f37f7dbb0765d" { /// x.
            x: f64, /// y.
            y: f64, /// z.
            z: f64 }
    );
    msg!(
        /// An orientation (unit quaternion).
        Quaternion = "geometry_msgs/msg/Quaternion",
            "RIHS01_8a765f66778c8ff7c8ab94afcc590a2ed5325a1d9a076ffff38fbce36f458684" { /// x.
            x: f64, /// y.
            y: f64, /// z.
            z: f64, /// w.
            w: f64 }
    );
    msg!(
        /// Position and orientation.
        Pose = "geometry_msgs/msg/Pose",
            "RIHS01_d501954e9476cea2996984e812054b68026ae0bfae789d9a10b23daf35cc90fa" { /// Position.
            position: Point, /// Orientation.
            orientation: Quaternion }
    );
    msg!(
        /// A pose with a header.
        PoseStamped = "geometry_msgs/msg/PoseStamped",
            "RIHS01_10f3786d7d40fd2b54367835614bff85d4ad3b5dab62bf8bca0cc232d73b4cd8" { /// Header.
            header: Header, /// Pose.
            pose: Pose }
    );
    msg!(
        /// Linear and angular velocity.
        Twist = "geometry_msgs/msg/Twist",
            "RIHS01_9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a" { /// Linear (m/s).
            linear: Vector3, /// Angular (rad/s).
            angular: Vector3 }
    );
    msg!(
        /// A twist with a header.
        TwistStamped = "geometry_msgs/msg/TwistStamped",
            "RIHS01_5f0fcd4f81d5d06ad9b4c4c63e3ea51b82d6ae4d0558f1d475229b1121db6f64" { /// Header.
            header: Header, /// Twist.
            twist: Twist }
    );
    msg!(
        /// A rigid transform.
        Transform = "geometry_msgs/msg/Transform",
            "RIHS01_beb83fbe698636351461f6f35d1abb20010c43d55374d81bd041f1ba2581fddc" { /// Translation.
            translation: Vector3, /// Rotation.
            rotation: Quaternion }
    );
    msg!(
        /// A transform between two frames.
        TransformStamped = "geometry_msgs/msg/TransformStamped",
            "RIHS01_0a241f87d04668d94099cbb5ba11691d5ad32c2f29682e4eb5653424bd275206" { /// Header (parent frame).
            header: Header, /// Child frame.
            child_frame_id: String, /// Transform.
            transform: Transform }
    );
}

/// `sensor_msgs`: cameras, IMUs, lidars, point clouds.
pub mod sensor_msgs {
    use super::geometry_msgs::{Quaternion, Vector3};
    use super::std_msgs::Header;

    msg!(
        /// An uncompressed image.
        Image = "sensor_msgs/msg/Image",
            "RIHS01_d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47" { /// Header.
            header: Header, /// Rows.
            height: u32, /// Columns.
            width: u32, /// Pixel encoding, e.g. `rgb8`.
            encoding: String, /// Big-endian data.
            is_bigendian: u8, /// Bytes per row.
            step: u32, /// Pixels.
            #[serde(with = "serde_bytes")]
            data: Vec<u8> }
    );
    msg!(
        /// A compressed image.
        CompressedImage = "sensor_msgs/msg/CompressedImage",
            "RIHS01_15640771531571185e2efc8a100baf923961a4d15d5569652e6cb6691e8e371a" { /// Header.
            header: Header, /// `jpeg` or `png`.
            format: String, /// The compressed bytes.
            #[serde(with = "serde_bytes")]
            data: Vec<u8> }
    );
    msg!(
        /// An inertial measurement.
        Imu = "sensor_msgs/msg/Imu",
            "RIHS01_7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b" { /// Header.
            header: Header, /// Orientation.
            orientation: Quaternion, /// Row-major 3x3 covariance.
            orientation_covariance: [f64; 9], /// Angular velocity (rad/s).
            angular_velocity: Vector3, /// Covariance.
            angular_velocity_covariance: [f64; 9], /// Linear acceleration (m/s^2).
            linear_acceleration: Vector3, /// Covariance.
            linear_acceleration_covariance: [f64; 9] }
    );
    msg!(
        /// A planar laser scan.
        LaserScan = "sensor_msgs/msg/LaserScan",
            "RIHS01_64c191398013af96509d518dac71d5164f9382553fce5c1f8cca5be7924bd828" { /// Header.
            header: Header, /// Start angle (rad).
            angle_min: f32, /// End angle (rad).
            angle_max: f32, /// Angular step (rad).
            angle_increment: f32, /// Time between measurements (s).
            time_increment: f32, /// Time between scans (s).
            scan_time: f32, /// Minimum range (m).
            range_min: f32, /// Maximum range (m).
            range_max: f32, /// Ranges (m).
            ranges: Vec<f32>, /// Intensities.
            intensities: Vec<f32> }
    );
    msg!(
        /// One field of a point cloud's points.
        PointField = "sensor_msgs/msg/PointField",
            "RIHS01_5c6a4750728c2bcfbbf7037225b20b02d4429634732146b742dee1726637ef01" { /// Name.
            name: String, /// Byte offset in the point.
            offset: u32, /// Type (1 INT8 .. 8 FLOAT64).
            datatype: u8, /// Elements.
            count: u32 }
    );
    msg!(
        /// A point cloud.
        PointCloud2 = "sensor_msgs/msg/PointCloud2",
            "RIHS01_9198cabf7da3796ae6fe19c4cb3bdd3525492988c70522628af5daa124bae2b5" { /// Header.
            header: Header, /// Rows.
            height: u32, /// Columns.
            width: u32, /// The point layout.
            fields: Vec<PointField>, /// Big-endian data.
            is_bigendian: bool, /// Bytes per point.
            point_step: u32, /// Bytes per row.
            row_step: u32, /// Points.
            #[serde(with = "serde_bytes")]
            data: Vec<u8>, /// No invalid points.
            is_dense: bool }
    );
    msg!(
        /// A region of interest in an image.
        RegionOfInterest = "sensor_msgs/msg/RegionOfInterest",
            "RIHS01_ad16bcba5f9131dcdba6fbded19f726f5440e3c513b4fb586dd3027eeed8abb1" { /// Left edge.
            x_offset: u32, /// Top edge.
            y_offset: u32, /// Height.
            height: u32, /// Width.
            width: u32, /// Rectify first.
            do_rectify: bool }
    );
    msg!(
        /// Camera calibration.
        CameraInfo = "sensor_msgs/msg/CameraInfo",
            "RIHS01_b3dfd68ff46c9d56c80fd3bd4ed22c7a4ddce8c8348f2f59c299e73118e7e275" { /// Header.
            header: Header, /// Rows.
            height: u32, /// Columns.
            width: u32, /// Distortion model name.
            distortion_model: String, /// Distortion parameters.
            d: Vec<f64>, /// Intrinsics (3x3).
            k: [f64; 9], /// Rectification (3x3).
            r: [f64; 9], /// Projection (3x4).
            p: [f64; 12], /// Horizontal binning.
            binning_x: u32, /// Vertical binning.
            binning_y: u32, /// Region of interest.
            roi: RegionOfInterest }
    );
}
