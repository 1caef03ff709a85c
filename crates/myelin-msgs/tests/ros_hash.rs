//! The ROS 2 type hashes (REP 2011) of the types: each Rust type's
//! `ROS_TYPE_HASH` is the one computed from its embedded `.msg`, and its
//! fields are the `.msg`'s fields, in order.

use myelin::Message;
use myelin_msgs::builtin_interfaces::{Duration, Time};
use myelin_msgs::geometry_msgs::*;
use myelin_msgs::idl::{self, EMPTY_STRUCT_MEMBER};
use myelin_msgs::sensor_msgs::*;
use myelin_msgs::std_msgs::{self, Header};
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
    let checked = check_all![
        Time,
        Duration,
        Header,
        std_msgs::String,
        std_msgs::Bool,
        std_msgs::Int32,
        std_msgs::Int64,
        std_msgs::Float32,
        std_msgs::Float64,
        std_msgs::Empty,
        Point,
        Vector3,
        Quaternion,
        Pose,
        PoseStamped,
        Twist,
        TwistStamped,
        Transform,
        TransformStamped,
        Image,
        CompressedImage,
        Imu,
        LaserScan,
        PointField,
        PointCloud2,
        RegionOfInterest,
        CameraInfo,
    ];
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

#[test]
fn known_hashes_from_ros2() {
    for (name, hash) in [
        (
            "std_msgs/msg/String",
            "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
        ),
        (
            "builtin_interfaces/msg/Time",
            "RIHS01_b106235e25a4c5ed35098aa0a61a3ee9c9b18d197f398b0e4206cea9acf9c197",
        ),
        (
            "std_msgs/msg/Header",
            "RIHS01_f49fb3ae2cf070f793645ff749683ac6b06203e41c891e17701b1cb597ce6a01",
        ),
        (
            "std_msgs/msg/Int32",
            "RIHS01_b6578ded3c58c626cfe8d1a6fb6e04f706f97e9f03d2727c9ff4e74b1cef0deb",
        ),
        (
            "geometry_msgs/msg/Vector3",
            "RIHS01_cc12fe83e4c02719f1ce8070bfd14aecd40f75a96696a67a2a1f37f7dbb0765d",
        ),
        (
            "std_msgs/msg/Empty",
            "RIHS01_20b625256f32d5dbc0d04fee44f43c41e51c70d3502f84b4a08e7a9c26a96312",
        ),
    ] {
        assert_eq!(ros_hash_of(name).as_deref(), Some(hash), "{name}");
    }
    assert_eq!(ros_hash_of("std_msgs/msg/Nope"), None);
}
