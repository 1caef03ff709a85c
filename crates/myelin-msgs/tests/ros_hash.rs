//! The ROS 2 type hashes (REP 2011) of the types: each Rust type's
//! `ROS_TYPE_HASH` is the one computed from its embedded `.msg`, and its
//! fields are the `.msg`'s fields, in order. (The published hashes are
//! checked in `idl`'s unit tests, for the shipped files too.)

use myelin::Message;
use myelin_msgs::idl::{self, EMPTY_STRUCT_MEMBER};

use myelin_msgs::{definitions, msg_spec, ros_hash_of};
use serde::de::{self, Deserializer, Visitor};

/// A deserializer that only records the field names serde asks a struct
/// for (in declaration order).
struct FieldNames(Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for &mut FieldNames {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(fields);
        Err(de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

fn field_names<T: for<'de> serde::Deserialize<'de>>() -> &'static [&'static str] {
    let mut probe = FieldNames(None);
    let _ = T::deserialize(&mut probe);
    probe.0.expect("a struct")
}

/// Checks `T` against its `.msg`; returns its name.
fn check<T: Message + for<'de> serde::Deserialize<'de>>() -> &'static str {
    let name = T::TYPE_NAME;
    let spec = msg_spec(name).unwrap_or_else(|| panic!("{name}: no .msg"));
    let hash = idl::type_hash(name, msg_spec).unwrap();
    assert_eq!(T::ROS_TYPE_HASH, Some(hash.as_str()), "{name}");
    let mut msg_fields: Vec<&str> = spec.fields.iter().map(|f| f.name.as_str()).collect();
    if msg_fields.is_empty() {
        msg_fields.push(EMPTY_STRUCT_MEMBER);
    }
    assert_eq!(field_names::<T>(), msg_fields, "{name}: fields");
    name
}

macro_rules! check_all {
    ($($t:ty),* $(,)?) => { vec![$(check::<$t>()),*] };
}

#[test]
fn rust_types_carry_the_hash_of_their_msg() {
    let checked = myelin_msgs::for_all_types!(check_all);
    let registered: Vec<&str> = definitions().iter().map(|(name, _)| *name).collect();
    assert_eq!(checked, registered, "every type has a .msg and vice versa");
}

#[test]
fn every_definition_parses_and_hashes() {
    for (name, text) in definitions() {
        let (package, msg) = idl::split_type_name(name).unwrap();
        let spec = idl::parse_msg(package, msg, text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.type_name(), *name);
        let hash = ros_hash_of(name).unwrap();
        assert!(hash.starts_with("RIHS01_") && hash.len() == 71, "{hash}");
        println!("{name} = \"{hash}\"");
    }
}

/// Checks the service `S` against its `.srv`: its hash, and its request
/// and response types as [`check`] checks messages; returns its name.
fn check_srv<S: myelin::ServiceType>() -> &'static str
where
    S::Request: for<'de> serde::Deserialize<'de>,
    S::Response: for<'de> serde::Deserialize<'de>,
{
    let name = S::TYPE_NAME;
    let hash = myelin_msgs::ros_srv_hash_of(name).unwrap_or_else(|| panic!("{name}: no .srv"));
    assert_eq!(S::ROS_TYPE_HASH, Some(hash.as_str()), "{name}");
    assert_eq!(check::<S::Request>(), format!("{name}_Request"));
    assert_eq!(check::<S::Response>(), format!("{name}_Response"));
    name
}

macro_rules! check_all_srv {
    ($($t:ty),* $(,)?) => { vec![$(check_srv::<$t>()),*] };
}

#[test]
fn service_types_carry_the_hashes_of_their_srv() {
    for (name, _) in myelin_msgs::srv_definitions() {
        let spec = myelin_msgs::srv_spec(name).unwrap_or_else(|| panic!("{name} parses"));
        println!(
            "{name} = \"{}\"",
            myelin_msgs::ros_srv_hash_of(name).unwrap()
        );
        for part in [spec.request, spec.response] {
            let n = part.type_name();
            println!("{n} = \"{}\"", idl::type_hash(&n, msg_spec).unwrap());
        }
    }
    let checked = myelin_msgs::for_all_services!(check_all_srv);
    let registered: Vec<&str> = myelin_msgs::srv_definitions()
        .iter()
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(
        checked, registered,
        "every service has a .srv and vice versa"
    );
}

/// Checks the action `A` against its `.action`: every hash it carries,
/// and the fields of its goal, result, feedback and of the wrappers that
/// carry them (`_SendGoal_Request`, ...); returns its name.
fn check_action<A: myelin::action::ActionType>() -> &'static str
where
    A::Goal: for<'de> serde::Deserialize<'de>,
{
    use myelin::ServiceType;
    use myelin::action::{
        FeedbackMessage, GetResult, GetResultRequest, GetResultResponse, SendGoal, SendGoalRequest,
        SendGoalResponse,
    };
    let n = A::NAMES;
    let h = A::ROS_HASHES.expect("a ROS action carries its hashes");
    let hash_of = |name: &str| {
        myelin_msgs::ros_action_hash_of(name).unwrap_or_else(|| panic!("{name}: no .action"))
    };
    for (name, carried) in [
        (n.action, h.action),
        (n.send_goal, h.send_goal),
        (n.send_goal_request, h.send_goal_request),
        (n.send_goal_response, h.send_goal_response),
        (n.get_result, h.get_result),
        (n.get_result_request, h.get_result_request),
        (n.get_result_response, h.get_result_response),
        (n.feedback_message, h.feedback_message),
    ] {
        assert_eq!(hash_of(name), carried, "{name}");
        println!("{name} = \"{carried}\"");
    }
    assert_eq!(SendGoal::<A>::ROS_TYPE_HASH, Some(h.send_goal));
    assert_eq!(GetResult::<A>::ROS_TYPE_HASH, Some(h.get_result));
    assert_eq!(check::<A::Goal>(), format!("{}_Goal", n.action));
    assert_eq!(check::<A::Result>(), format!("{}_Result", n.action));
    assert_eq!(check::<A::Feedback>(), format!("{}_Feedback", n.action));
    assert_eq!(check::<SendGoalRequest<A>>(), n.send_goal_request);
    assert_eq!(check::<SendGoalResponse<A>>(), n.send_goal_response);
    assert_eq!(check::<GetResultRequest<A>>(), n.get_result_request);
    assert_eq!(check::<GetResultResponse<A>>(), n.get_result_response);
    assert_eq!(check::<FeedbackMessage<A>>(), n.feedback_message);
    n.action
}

macro_rules! check_all_actions {
    ($($t:ty),* $(,)?) => { vec![$(check_action::<$t>()),*] };
}

#[test]
fn action_types_carry_the_hashes_of_their_action() {
    let checked = myelin_msgs::for_all_actions!(check_all_actions);
    let registered: Vec<&str> = myelin_msgs::action_definitions()
        .iter()
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(
        checked, registered,
        "every action has an .action and vice versa"
    );
}
