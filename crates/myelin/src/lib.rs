//! # myelin
//!
//! A robotics message bus with ROS 2 semantics (nodes, topics, QoS,
//! executors, timers) and the cost of a function call: a publish moves the
//! message straight into each subscription's buffer (one per subscription,
//! making only the copies ownership requires), and the executor that owns
//! the subscription wakes from a futex to run the callback.
//!
//! ## Concepts
//! * [`Context`]: one per process; all its nodes share one participant.
//! * [`Node`]: a name (ROS 2 naming rules) grouping publishers,
//!   subscriptions and timers.
//! * [`Publisher`] / [`Subscription`] on a topic, with a [`QoS`]: history
//!   (`keep_last(depth)` / `keep_all()`), reliability, durability.
//! * [`Executor`]: runs callbacks; sleeps in the kernel when idle.
//! * [`Message`]: the trait a topic's type implements; `#[derive(Message)]`
//!   for your own types; `String`, `Vec<u8>` and the primitives work as is.
//!
//! ## Publish and subscribe
//! ```
//! use myelin::prelude::*;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! #[derive(Clone, Debug, PartialEq, myelin::Message)]
//! struct Odometry { x: f64, y: f64, theta: f64 }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::builder().domain_id(7).handle_signals(false).build()?;
//! let node = ctx.create_node("odometry")?;
//! let publisher = node.create_publisher::<Odometry>("odom", QoS::keep_last(10))?;
//!
//! let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
//! let h = heard.clone();
//! // An `&T` callback shares the message: zero copies.
//! let _sub = node.create_subscription("odom", QoS::keep_last(10), move |o: &Odometry| {
//!     h.lock().unwrap().push(o.x);
//! })?;
//!
//! let mut executor = Executor::new();
//! executor.add_node(&node)?;
//! publisher.publish(Odometry { x: 1.0, y: 0.0, theta: 0.0 })?;
//! executor.spin_until(Duration::from_secs(5), || !heard.lock().unwrap().is_empty())?;
//! assert_eq!(*heard.lock().unwrap(), vec![1.0]);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub use myelin_core::*;
pub use myelin_derive::Message;

/// The standard ROS 2 message and service types (`std_msgs`,
/// `geometry_msgs`, `sensor_msgs`, `builtin_interfaces`, `std_srvs`,
/// `example_interfaces`, ...), in CDR with their ROS 2 type hashes, so
/// they talk to ROS 2 nodes as they are (the `myelin-msgs` crate; feature
/// `msgs`, on by default).
///
/// ```
/// use myelin::msgs::std_msgs::String as RosString;
/// use myelin::prelude::*;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("talker")?;
/// let chatter = node.create_publisher::<RosString>("chatter", QoS::keep_last(10))?;
/// chatter.publish(RosString { data: "hello".into() })?;
/// assert_eq!(<RosString as Message>::TYPE_NAME, "std_msgs/msg/String");
/// # Ok(()) }
/// ```
#[cfg(feature = "msgs")]
pub use myelin_msgs as msgs;

/// Record and read rosbag2 MCAP bags from a program: what `myelin bag`
/// does, as a library (`Writer`, `Reader`, typed decoding of what was
/// recorded; the `myelin-bag` crate; feature `bag`, off by default).
///
/// ```
/// # #[cfg(feature = "bag")] {
/// use myelin::bag::{Reader, TopicInfo, Writer, WriterOptions};
/// use myelin::msgs::std_msgs::String as RosString;
///
/// let dir = std::env::temp_dir().join(format!("myelin_doc_bag_{}", std::process::id()));
/// let mut w = Writer::create(&dir, WriterOptions::default()).unwrap();
/// let chatter = w.add_topic(TopicInfo::of::<RosString>("/chatter")).unwrap();
/// w.write_message(chatter, 1_000, &RosString { data: "hello".into() }).unwrap();
/// w.finish().unwrap();
/// let first = Reader::open(&dir).unwrap().messages().unwrap().next().unwrap().unwrap();
/// assert_eq!(first.decode::<RosString>().unwrap().data, "hello");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # }
/// ```
#[cfg(feature = "bag")]
pub use myelin_bag as bag;

/// The names most programs need.
pub mod prelude {
    pub use myelin_core::{
        BufferKind, Context, Executor, Message, MessageInfo, Node, Publisher, QoS, Received,
        Subscription, SubscriptionOptions, Timer,
    };
}

/// The README's examples, compiled as doctests so they stay correct (they
/// use `myelin::msgs`).
#[cfg(all(doctest, feature = "msgs"))]
#[doc = include_str!("../../../README.md")]
mod readme {}
