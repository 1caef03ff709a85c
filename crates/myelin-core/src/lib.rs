//! myelin's core: contexts, nodes, names, QoS, the intra-process manager,
//! the executors and timers, services, and the transport seam with the
//! shared-memory (feature `shm`) and zenoh (feature `zenoh`) transports.
//!
//! Most users depend on the `myelin` crate, which re-exports this one. The
//! concepts, as in ROS 2:
//! * a [`Context`] per process holds the graph of publishers and
//!   subscriptions (the intra-process manager);
//! * [`Node`]s group publishers, subscriptions and timers under a name;
//! * a [`Publisher`] pushes each message straight into the buffer of every
//!   matched [`Subscription`] (one buffer per subscription, as in
//!   rclcpp's intra-process design), making
//!   only the copies ownership requires;
//! * an [`Executor`] sleeps until a subscription's buffer gets a message or a
//!   [`Timer`] is due, then runs the callback.
//!
//! ```
//! use myelin_core::{Context, Executor, QoS};
//! use std::sync::Arc;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::builder().handle_signals(false).build()?;
//! let node = ctx.create_node_in("camera", "/robot1")?;
//!
//! // `Arc<T>` callback: shares the publisher's message, no copy.
//! let _viewer = node.create_subscription("image", QoS::sensor_data(), |img: Arc<Vec<u8>>| {
//!     assert_eq!(img.len(), 640 * 480 * 3);
//! })?;
//! let publisher = node.create_publisher::<Vec<u8>>("image", QoS::sensor_data())?;
//! assert_eq!(publisher.topic(), "/robot1/image");
//!
//! let mut executor = Executor::new();
//! executor.add_node(&node)?;
//! publisher.publish(vec![0u8; 640 * 480 * 3])?; // moved in; the sharer gets it without a copy
//! assert_eq!(executor.spin_some()?, 1);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod action;
mod buffer;
mod cdr_de;
mod clock;
mod context;
mod dispatch;
pub mod dynamic;
mod error;
pub mod events;
pub mod executor;
pub mod gid;
mod graph;
pub mod group;
pub mod introspection;
mod locks;
mod matching;
pub mod message;
mod message_info;
pub mod names;
mod node;
pub mod parameter;
pub mod publisher;
pub mod qos;
pub mod rcl_interfaces;
mod runtime;
pub mod sched;
pub mod service;
pub mod subscription;
pub mod time;
mod timer;
pub mod transport;
pub mod type_description;
mod waitpoint;
pub mod waitset;
pub mod wire;

pub use buffer::{InPlace, Received};
pub use context::{Context, ContextBuilder, MAX_DOMAIN_ID};
pub use error::{
    AddNodeError, ContextError, CreateEndpointError, CreateNodeError, CreatePublisherError,
    CreateServiceError, CreateSubscriptionError, CreateTimerError, PublishError, SpinError,
};
pub use events::{
    DeadlineMissedStatus, IncompatibleTypeStatus, LivelinessChangedStatus, MatchedStatus,
    PublisherEvent, SubscriptionEvent,
};
pub use executor::{
    Anticipated, Executor, IdleWait, MultiThreadedExecutor, StopHandle, UnknownIdleWait,
};
pub use gid::Gid;
pub use group::{CallbackGroup, CallbackGroupKind};
pub use introspection::{IntrospectionError, ServiceIntrospection};
pub use message::{Message, ServiceType, TypeHash};

/// Print myelin's warnings (and errors) on stderr, as rclcpp prints its
/// logs to the console, unless the program has installed a `tracing`
/// subscriber of its own (then this does nothing). `MYELIN_LOG` sets the
/// filter in `RUST_LOG` syntax (default: `info` for the lines of nodes'
/// loggers ([`Node::get_logger`], target `rosout`), as rclcpp prints
/// `RCLCPP_INFO` on the console; `warn` for myelin itself, `error` for
/// zenoh). [`Context::new`] calls it; a library that builds its context
/// with [`Context::builder`] leaves logging to its program.
///
/// ```
/// myelin_core::init_logging();
/// myelin_core::init_logging(); // idempotent
/// ```
pub fn init_logging() {
    use tracing_subscriber::EnvFilter;
    if tracing::dispatcher::has_been_set() {
        return;
    }
    let filter = EnvFilter::try_from_env("MYELIN_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn,rosout=info,zenoh=error,zenoh_transport=error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
pub use names::NameError;
pub use node::{Logger, Node, OnSetParametersHandle};
pub use parameter::{ParameterError, ParameterValue};
pub use publisher::{
    BytesMessage, DetachedSliceLoan, Loan, LoanUninit, Publisher, PublisherOptions, SliceLoan,
};
pub use qos::{
    Durability, History, IncompatibleQosStatus, Liveliness, LivelinessKind, QoS, QosPolicy,
    Reliability,
};
pub use sched::{CpuWakeupLatency, SavedPolicy, SchedError, ThreadPolicy};
pub use service::{CallError, Client, ResponseFuture, Service, ServiceOptions, ServiceReply};
pub use subscription::{
    BufferKind, MessageInfo, SharedEventCallback, Subscription, SubscriptionCallback,
    SubscriptionOptions, SubscriptionStream, WaitError,
};
pub use time::{Clock, ClockType, Time};
pub use timer::{Timer, TimerInfo};
pub use transport::{DiscoveredEndpoint, DiscoveredService, endpoints, shared_memory_enabled};
pub use waitset::{GuardCondition, WaitSet, WaitSetError, WaitSetReady};
pub use wire::{
    AnyMessage, Blob, RawServiceType, RawType, RawTypeError, SharedBytes, Wire, WireError,
};
