//! Type descriptions (REP 2016): what a type is, field by field, for a
//! program that does not have it compiled in. Every node answers
//! `~/get_type_description` (`type_description_interfaces/srv/
//! GetTypeDescription`) for the ROS types its publishers, subscriptions,
//! services and actions use, as rclcpp nodes do, so `ros2 service call
//! /talker/get_type_description ...` and tools that learn types at run
//! time see myelin nodes.
//!
//! A type describes itself through [`Message::ros_type_description`]
//! (and [`ServiceType::ros_type_description`],
//! [`ActionType::ros_type_description`](crate::action::ActionType::ros_type_description)):
//! the message crate's types do, from their `.msg`/`.srv`/`.action`
//! files; a derived type of your own with `#[message(describe = f)]`.
//! The service appears with the first described type a node uses.
//!
//! ```
//! use myelin_core::type_description::{FieldType, GetTypeDescriptionRequest};
//! assert_eq!(FieldType::FIELD_TYPE_STRING, 17);
//! let ask = GetTypeDescriptionRequest {
//!     type_name: "std_msgs/msg/String".into(),
//!     include_type_sources: true,
//!     ..Default::default()
//! };
//! # let _ = ask;
//! ```
//!
//! [`Message::ros_type_description`]: crate::Message::ros_type_description
//! [`ServiceType::ros_type_description`]: crate::ServiceType::ros_type_description

pub use crate::message::description::{
    Described, Field, FieldType, GetTypeDescription, GetTypeDescriptionRequest,
    GetTypeDescriptionResponse, IndividualTypeDescription, KeyValue, TypeDescription, TypeSource,
};
