//! Service introspection, as ROS 2 (Iron and later) has it: a service or
//! client configured with [`ServiceIntrospection::Metadata`] or
//! [`ServiceIntrospection::Contents`] publishes an event for each request
//! and response on `<service>/_service_event`, typed `pkg/srv/Name_Event`
//! (`service_msgs/ServiceEventInfo info`, then the request and the
//! response, each a sequence of at most one: filled with `Contents`, empty
//! with `Metadata`). `ros2 service echo`, `myelin service echo` and bag
//! recorders (`myelin bag record --all-services`) read them.
//!
//! | event | published by | when | `client_gid`, `sequence_number` |
//! |---|---|---|---|
//! | `REQUEST_SENT` (0) | client | the request is sent | its own gid, the request's number |
//! | `REQUEST_RECEIVED` (1) | server | the callback is about to get the request | the caller's |
//! | `RESPONSE_SENT` (2) | server | the response is sent | the caller's |
//! | `RESPONSE_RECEIVED` (3) | client | the caller gets the response | its own |
//!
//! The stamp is the node's clock (ROS time: simulated under
//! `use_sim_time`) when the event happens. Off is the default, as in ROS
//! 2; turning it off drops the event publisher. A service's type must be
//! a ROS service type with a description (the message crate's services,
//! made with `create_service_for` / `create_client_for`): the event's type
//! hash and the re-encoding of the request and response inside it (CDR
//! aligns them from the start of the event, not their own, see
//! [`crate::dynamic`]) come from it.
//!
//! ```
//! use myelin_core::{Context, QoS, ServiceIntrospection, ServiceType};
//! # use myelin_core::type_description::Described;
//! # struct Double;
//! # impl ServiceType for Double {
//! #     type Request = i64;
//! #     type Response = i64;
//! #     const TYPE_NAME: &'static str = "my_pkg/srv/Double";
//! # }
//! let ctx = Context::builder().handle_signals(false).build()?;
//! let node = ctx.create_node("doubler")?;
//! let service = node.create_service::<i64, i64>("double", |x| 2 * x)?;
//! // A service made without a ROS service type cannot say what it carries.
//! assert!(service.configure_introspection(ServiceIntrospection::Contents, QoS::keep_last(10)).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwapOption;

use crate::dynamic::Value;
use crate::gid::RequestId;
use crate::type_description::{Described, TypeDescription};
use crate::{CreateEndpointError, QoS};

/// What a service or client publishes about its requests and responses
/// (rcl's `rcl_service_introspection_state_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ServiceIntrospection {
    /// Nothing (the default).
    #[default]
    Off,
    /// An event per request and response, without their contents.
    Metadata,
    /// An event per request and response, with the request or response.
    Contents,
}

/// The suffix of a service's event topic (rcl's
/// `RCL_SERVICE_INTROSPECTION_TOPIC_POSTFIX`).
pub const SERVICE_EVENT_SUFFIX: &str = "/_service_event";

/// `ServiceEventInfo.event_type` of a request a client sent.
pub const REQUEST_SENT: u8 = 0;
/// `ServiceEventInfo.event_type` of a request a server received.
pub const REQUEST_RECEIVED: u8 = 1;
/// `ServiceEventInfo.event_type` of a response a server sent.
pub const RESPONSE_SENT: u8 = 2;
/// `ServiceEventInfo.event_type` of a response a client received.
pub const RESPONSE_RECEIVED: u8 = 3;

/// The name ROS 2 gives an event type number (`ros2 service echo`'s).
pub fn event_type_name(event_type: u8) -> Option<&'static str> {
    Some(match event_type {
        REQUEST_SENT => "REQUEST_SENT",
        REQUEST_RECEIVED => "REQUEST_RECEIVED",
        RESPONSE_SENT => "RESPONSE_SENT",
        RESPONSE_RECEIVED => "RESPONSE_RECEIVED",
        _ => return None,
    })
}

/// Why introspection cannot be configured.
#[derive(Debug, thiserror::Error)]
pub enum IntrospectionError {
    /// The service or client was made without a ROS service type.
    #[error(
        "service {0}: made without a ROS service type, so its events have no type \
         (make it with create_service_for / create_client_for)"
    )]
    NoServiceType(String),
    /// The service type has no description (or no event type hash).
    #[error(
        "service {service}: the type {type_name} has no description to publish its events with"
    )]
    NotDescribed {
        /// The service.
        service: String,
        /// Its type.
        type_name: String,
    },
    /// The event publisher could not be made.
    #[error("service {service}: the event publisher: {source}")]
    Publisher {
        /// The service.
        service: String,
        /// Why.
        #[source]
        source: CreateEndpointError,
    },
}

/// Where a service's events go: publish the encoded event, and the time
/// now (ROS time of the node). Made by the node layer (the publisher and
/// the clock are the node's), so this module stays below the service
/// code that uses it.
pub(crate) struct EventSink {
    /// The event topic, for messages.
    pub(crate) topic: String,
    /// Publish one encoded event.
    pub(crate) publish: Box<dyn Fn(Vec<u8>) -> Result<(), String> + Send + Sync>,
    /// The stamp of an event happening now (sec, nanosec).
    pub(crate) now: Box<dyn Fn() -> (i32, u32) + Send + Sync>,
}

/// Makes the event sink of a service: `(topic, event type name, event
/// type hash, qos)`.
pub(crate) type MakeSink =
    Arc<dyn Fn(&str, &str, &str, QoS) -> Result<EventSink, CreateEndpointError> + Send + Sync>;

/// What a service or client knows of its ROS service type: its name, for
/// a Rust service type where its description and event hash come from (a
/// type known at run time is told them when configured), and how to make
/// its event publisher.
#[derive(Clone)]
pub(crate) struct ServiceTypeRef {
    type_name: &'static str,
    describe: fn() -> Option<Described>,
    event_hash: fn() -> Option<String>,
    make: MakeSink,
}

impl ServiceTypeRef {
    pub(crate) fn of<S: crate::ServiceType>(make: MakeSink) -> Self {
        ServiceTypeRef {
            type_name: S::TYPE_NAME,
            describe: S::ros_type_description,
            event_hash: S::ros_event_type_hash,
            make,
        }
    }

    /// A service type known at run time (by name only).
    pub(crate) fn raw(ty: &crate::RawServiceType, make: MakeSink) -> Self {
        ServiceTypeRef {
            type_name: ty.name(),
            describe: || None,
            event_hash: || None,
            make,
        }
    }
}

/// The event publisher of a service or client, while introspection is on.
pub(crate) struct Introspector {
    contents: bool,
    sink: Arc<EventSink>,
    description: Arc<TypeDescription>,
    request_type: String,
    response_type: String,
    /// One warning for contents that do not re-encode.
    warned: AtomicBool,
}

impl Introspector {
    /// Whether events carry the request and response.
    pub(crate) fn contents(&self) -> bool {
        self.contents
    }

    /// Publish one event; `body` is the request's or response's CDR
    /// (used with contents on; a request for the `REQUEST_*` events).
    pub(crate) fn publish(&self, event_type: u8, id: RequestId, body: Option<&[u8]>) {
        let request = matches!(event_type, REQUEST_SENT | REQUEST_RECEIVED);
        let (sec, nanosec) = (self.sink.now)();
        let info = Value::Struct(vec![
            ("event_type".into(), Value::UInt8(event_type)),
            (
                "stamp".into(),
                Value::Struct(vec![
                    ("sec".into(), Value::Int32(sec)),
                    ("nanosec".into(), Value::UInt32(nanosec)),
                ]),
            ),
            ("client_gid".into(), Value::ByteArray(id.gid.to_vec())),
            ("sequence_number".into(), Value::Int64(id.seq)),
        ]);
        let mut out = Vec::with_capacity(64 + body.map_or(0, <[u8]>::len));
        out.extend_from_slice(&[0, 1, 0, 0]);
        info.encode(&mut out, 4);
        // `request` then `response`, each a sequence of at most one: the
        // body in the one this event is about (with contents).
        for part in [true, false] {
            let empty = Value::UInt32(0);
            let Some(b) = body.filter(|_| self.contents && part == request) else {
                empty.encode(&mut out, 4);
                continue;
            };
            let ty = if request {
                &self.request_type
            } else {
                &self.response_type
            };
            let mark = out.len();
            Value::UInt32(1).encode(&mut out, 4);
            if let Err(e) = crate::dynamic::embed(&self.description, ty, b, &mut out, 4) {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "{}: a {ty} does not re-encode ({e}): its events go without contents",
                        self.sink.topic
                    );
                }
                out.truncate(mark);
                empty.encode(&mut out, 4);
            }
        }
        if let Err(e) = (self.sink.publish)(out) {
            tracing::warn!("{}: {e}", self.sink.topic);
        }
    }
}

/// A service's or client's introspection: off, or its event publisher.
#[derive(Default)]
pub(crate) struct IntrospectionCell {
    current: ArcSwapOption<Introspector>,
    /// Whether `current` is set: checked first, so a service or client
    /// with introspection off (nearly all) pays one load per request, not
    /// an `ArcSwap` load (its debt-list protocol: ~50 instructions).
    on: AtomicBool,
    ty: Option<ServiceTypeRef>,
}

impl IntrospectionCell {
    pub(crate) fn new(ty: Option<ServiceTypeRef>) -> Self {
        IntrospectionCell {
            current: ArcSwapOption::empty(),
            on: AtomicBool::new(false),
            ty,
        }
    }

    /// The event publisher, if introspection is on (a load and a branch
    /// when it is off).
    #[inline]
    pub(crate) fn active(&self) -> Option<Arc<Introspector>> {
        // SYNC: Acquire pairs with the Release store in `configure` after
        // `current` is set; a request racing a switch goes with or without
        // an event, as in rcl.
        if !self.on.load(Ordering::Acquire) {
            return None;
        }
        self.current.load_full()
    }

    /// Turn introspection on or off for the service `service` of `node`
    /// (`qos`: the event publisher's, when one is made).
    /// `given`: the description and event hash of a type known at run
    /// time (a Rust service type has its own).
    pub(crate) fn configure(
        &self,
        service: &str,
        state: ServiceIntrospection,
        qos: QoS,
        given: Option<(Described, String)>,
    ) -> Result<(), IntrospectionError> {
        let contents = match state {
            // Turning off always works (and drops the event publisher;
            // replies already on their way still tell of themselves).
            ServiceIntrospection::Off => {
                self.on.store(false, Ordering::Release);
                self.current.store(None);
                return Ok(());
            }
            ServiceIntrospection::Metadata => false,
            ServiceIntrospection::Contents => true,
        };
        let ty = self
            .ty
            .as_ref()
            .ok_or_else(|| IntrospectionError::NoServiceType(service.to_string()))?;
        let not_described = || IntrospectionError::NotDescribed {
            service: service.to_string(),
            type_name: ty.type_name.to_string(),
        };
        let next = match self.current.load_full() {
            // On already: the same publisher (rcl keeps it, and its QoS).
            Some(old) => Introspector {
                contents,
                sink: old.sink.clone(),
                description: old.description.clone(),
                request_type: old.request_type.clone(),
                response_type: old.response_type.clone(),
                warned: AtomicBool::new(false),
            },
            None => {
                let (described, hash) = match given {
                    Some(g) => g,
                    None => (
                        (ty.describe)().ok_or_else(not_described)?,
                        (ty.event_hash)().ok_or_else(not_described)?,
                    ),
                };
                let event_type = format!("{}_Event", ty.type_name);
                let topic = format!("{service}{SERVICE_EVENT_SUFFIX}");
                let sink = (ty.make)(&topic, &event_type, &hash, qos).map_err(|source| {
                    IntrospectionError::Publisher {
                        service: service.to_string(),
                        source,
                    }
                })?;
                Introspector {
                    contents,
                    sink: Arc::new(sink),
                    description: Arc::new(described.description),
                    request_type: format!("{}_Request", ty.type_name),
                    response_type: format!("{}_Response", ty.type_name),
                    warned: AtomicBool::new(false),
                }
            }
        };
        self.current.store(Some(Arc::new(next)));
        self.on.store(true, Ordering::Release);
        Ok(())
    }
}

/// The CDR of a request or response, for an event with contents (`None`
/// without contents, or when the type has no encoding).
pub(crate) fn body_of<M: crate::Message>(intro: &Introspector, m: &M) -> Option<Vec<u8>> {
    if !intro.contents() {
        return None;
    }
    crate::transport::encode_to_vec(m).ok()
}
