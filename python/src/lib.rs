//! `myelin._myelin`: the Rust core of the Python package.
//!
//! The Python modules (`myelin/*.py`) give rclpy's shape; this module holds
//! the parts that touch the bus: contexts, nodes, publishers,
//! subscriptions, timers and an executor, with messages as Python objects
//! encoded by the `codec` module. Every endpoint is a run-time typed endpoint of the
//! core (`create_raw_publisher` / `create_raw_subscription`), so Python
//! and Rust nodes meet on one topic in every process and over the network.
//!
//! The GIL is released while an executor waits and runs; a callback takes
//! it only to run Python code. An exception a callback raises is kept and
//! raised again from the `spin_once` that ran it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use myelin::{AnyMessage, MessageInfo, QoS, RawType, SubscriptionOptions};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyType};

mod codec;
mod loan;
mod params;

create_exception!(
    _myelin,
    MyelinError,
    PyRuntimeError,
    "An error of the myelin core."
);
create_exception!(
    _myelin,
    InvalidNameError,
    PyValueError,
    "A node, namespace or topic name that ROS 2 does not allow."
);
create_exception!(
    _myelin,
    InvalidQoSError,
    PyValueError,
    "A QoS setting out of range or incompatible with the endpoint."
);
create_exception!(
    _myelin,
    TypeMismatchError,
    PyTypeError,
    "A topic already carries another message type."
);

fn endpoint_error(e: myelin::CreateEndpointError) -> PyErr {
    use myelin::CreateEndpointError as E;
    let text = e.to_string();
    match e {
        E::InvalidName(_) => InvalidNameError::new_err(text),
        E::InvalidQos { .. } | E::InvalidOption { .. } => InvalidQoSError::new_err(text),
        E::TypeMismatch { .. } | E::RemoteTypeMismatch { .. } => TypeMismatchError::new_err(text),
        _ => MyelinError::new_err(text),
    }
}

fn core_error(e: impl std::fmt::Display) -> PyErr {
    MyelinError::new_err(e.to_string())
}

/// A timer refused: a period past ROS 2's 292 years is a ValueError, as a
/// period that is no duration at all (`math.inf`: `Duration::MAX`).
fn timer_error(e: myelin::CreateTimerError) -> PyErr {
    match e {
        myelin::CreateTimerError::PeriodTooLong(_) => PyValueError::new_err(e.to_string()),
        other => core_error(other),
    }
}

/// The first exception a callback raised that no `spin_once` has raised
/// again yet.
static CALLBACK_ERROR: Mutex<Option<PyErr>> = Mutex::new(None);

/// Callbacks run so far (subscriptions, timers, services), for a
/// multi-threaded `spin_once` to see that one ran.
static CALLBACKS_RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn callback_ran() {
    CALLBACKS_RUN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

fn callback_error_pending() -> bool {
    CALLBACK_ERROR
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_some()
}

fn keep_callback_error(e: PyErr) {
    let mut slot = CALLBACK_ERROR.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(e);
    }
}

/// A message's info as rclpy's `MessageInfo` dict has it (ns, 0 when
/// unknown, as rmw), plus the publisher's gid (16 bytes) and whether it
/// came in-process.
fn message_info<'py>(py: Python<'py>, i: &MessageInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("source_timestamp", i.source_timestamp().unwrap_or(0))?;
    d.set_item("received_timestamp", i.received_timestamp().unwrap_or(0))?;
    d.set_item(
        "publication_sequence_number",
        i.publication_sequence_number().unwrap_or(0),
    )?;
    d.set_item("reception_sequence_number", 0)?;
    d.set_item(
        "publisher_gid",
        PyBytes::new(py, i.publisher_gid().as_bytes()),
    )?;
    d.set_item("from_intra_process", i.from_intra_process())?;
    Ok(d)
}

fn take_callback_error() -> PyResult<()> {
    match CALLBACK_ERROR
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A QoS event's fields, by rclpy's attribute names.
type EventFields = Vec<(&'static str, EventValue)>;

/// One field of an event: a count, or the name of a QoS policy.
enum EventValue {
    Int(i64),
    Policy(Option<&'static str>),
}

fn counts(total: u64, change: u64) -> EventFields {
    vec![
        ("total_count", EventValue::Int(total as i64)),
        ("total_count_change", EventValue::Int(change as i64)),
    ]
}

fn matched_fields(s: myelin::MatchedStatus) -> EventFields {
    let mut f = counts(s.total_count, s.total_count_change);
    f.push(("current_count", EventValue::Int(i64::from(s.current_count))));
    f.push((
        "current_count_change",
        EventValue::Int(i64::from(s.current_count_change)),
    ));
    f
}

fn incompatible_qos_fields(s: myelin::IncompatibleQosStatus) -> EventFields {
    let mut f = counts(s.total_count, s.total_count_change);
    let policy = s.last_policy.map(|p| match p {
        myelin::QosPolicy::Reliability => "RELIABILITY",
        myelin::QosPolicy::Durability => "DURABILITY",
        myelin::QosPolicy::History => "HISTORY",
        myelin::QosPolicy::Deadline => "DEADLINE",
        myelin::QosPolicy::Liveliness => "LIVELINESS",
        myelin::QosPolicy::Lifespan => "LIFESPAN",
        // rmw has no kind for a resource limit.
        myelin::QosPolicy::ResourceLimits => "INVALID",
    });
    f.push(("last_policy_kind", EventValue::Policy(policy)));
    f
}

/// A subscription's event as (the rclpy callback it goes to, its fields).
fn subscription_event(e: myelin::SubscriptionEvent) -> (&'static str, EventFields) {
    use myelin::SubscriptionEvent as E;
    match e {
        E::RequestedDeadlineMissed(s) => ("deadline", counts(s.total_count, s.total_count_change)),
        E::LivelinessChanged(s) => (
            "liveliness",
            vec![
                ("alive_count", EventValue::Int(i64::from(s.alive_count))),
                (
                    "not_alive_count",
                    EventValue::Int(i64::from(s.not_alive_count)),
                ),
                (
                    "alive_count_change",
                    EventValue::Int(i64::from(s.alive_count_change)),
                ),
                (
                    "not_alive_count_change",
                    EventValue::Int(i64::from(s.not_alive_count_change)),
                ),
            ],
        ),
        E::Matched(s) => ("matched", matched_fields(s)),
        E::IncompatibleQos(s) => ("incompatible_qos", incompatible_qos_fields(s)),
        E::IncompatibleType(s) => (
            "incompatible_type",
            counts(s.total_count, s.total_count_change),
        ),
    }
}

/// A publisher's event as (the rclpy callback it goes to, its fields).
fn publisher_event(e: myelin::PublisherEvent) -> (&'static str, EventFields) {
    use myelin::PublisherEvent as E;
    match e {
        E::OfferedDeadlineMissed(s) => ("deadline", counts(s.total_count, s.total_count_change)),
        E::Matched(s) => ("matched", matched_fields(s)),
        E::IncompatibleQos(s) => ("incompatible_qos", incompatible_qos_fields(s)),
        E::IncompatibleType(s) => (
            "incompatible_type",
            counts(s.total_count, s.total_count_change),
        ),
    }
}

/// Call the Python side's `on_event(kind, fields)`; an exception is kept
/// for `spin_once`, as a message callback's is.
fn call_event(f: &Py<PyAny>, kind: &str, fields: &EventFields) {
    callback_ran();
    Python::attach(|py| {
        let dict = pyo3::types::PyDict::new(py);
        let filled = fields.iter().try_for_each(|(k, v)| match v {
            EventValue::Int(n) => dict.set_item(k, n),
            EventValue::Policy(p) => dict.set_item(k, p),
        });
        if let Err(e) = filled.and_then(|()| f.call1(py, (kind, dict)).map(drop)) {
            keep_callback_error(e);
        }
    });
}

/// Seconds as a `Duration`; `math.inf` is `Duration::MAX`, which the
/// library's timeouts take as forever (NaN and negatives are refused).
fn duration(label: &str, secs: f64) -> PyResult<Duration> {
    if secs == f64::INFINITY {
        return Ok(Duration::MAX);
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|_| PyValueError::new_err(format!("{label}: {secs} is not a duration in seconds")))
}

/// The instant `secs` seconds from now: a timeout past a century (such
/// as `math.inf`) is a century, as the library's own timeouts take it.
fn deadline_in(label: &str, secs: f64) -> PyResult<std::time::Instant> {
    Ok(myelin_sync::deadline::after(duration(label, secs)?))
}

/// A context: one process's membership in a ROS domain.
#[pyclass(module = "myelin._myelin", frozen)]
struct Context {
    ctx: myelin::Context,
}

#[pymethods]
impl Context {
    /// `domain_id` (None: `ROS_DOMAIN_ID`), `shared_memory` and `network`
    /// (None: what `MYELIN_TRANSPORT` allows), ROS arguments (`--ros-args
    /// -r ... -p ...`), simulated time, and a zenoh session configuration
    /// file (None: `MYELIN_ZENOH_CONFIG`, else myelin's default).
    #[new]
    #[pyo3(signature = (domain_id=None, shared_memory=None, network=None, args=Vec::new(), use_sim_time=false, zenoh_config=None))]
    fn new(
        py: Python<'_>,
        domain_id: Option<u32>,
        shared_memory: Option<bool>,
        network: Option<bool>,
        args: Vec<String>,
        use_sim_time: bool,
        zenoh_config: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        myelin::init_logging();
        // Python handles SIGINT (KeyboardInterrupt); the core must not.
        let mut b = myelin::Context::builder()
            .handle_signals(false)
            .ros_args(args)
            .use_sim_time(use_sim_time);
        if let Some(d) = domain_id {
            b = b.domain_id(d);
        }
        if let Some(s) = shared_memory {
            b = b.shared_memory(s);
        }
        if let Some(n) = network {
            b = b.network(n);
        }
        if let Some(c) = zenoh_config {
            b = b.zenoh_config(c);
        }
        let ctx = py.detach(|| b.build()).map_err(core_error)?;
        Ok(Context { ctx })
    }

    /// Whether the context has not been shut down.
    fn ok(&self) -> bool {
        !self.ctx.is_shut_down()
    }

    /// Shut the context down: executors stop, endpoints close.
    fn shutdown(&self, py: Python<'_>) {
        py.detach(|| self.ctx.shutdown());
    }

    /// The domain id.
    fn domain_id(&self) -> u32 {
        self.ctx.domain_id()
    }
}

/// A QoS profile from the Python `QoSProfile`'s fields.
#[allow(clippy::too_many_arguments)]
fn qos_of(
    history: &str,
    depth: usize,
    reliability: &str,
    durability: &str,
    deadline: Option<f64>,
    lifespan: Option<f64>,
    liveliness: &str,
    lease: Option<f64>,
) -> PyResult<QoS> {
    let mut q = match history {
        "keep_last" => QoS::keep_last(depth),
        "keep_all" => QoS::keep_all(),
        h => return Err(InvalidQoSError::new_err(format!("history {h:?}"))),
    };
    q.reliability = match reliability {
        "reliable" => myelin::Reliability::Reliable,
        "best_effort" => myelin::Reliability::BestEffort,
        r => return Err(InvalidQoSError::new_err(format!("reliability {r:?}"))),
    };
    q.durability = match durability {
        "volatile" => myelin::Durability::Volatile,
        "transient_local" => myelin::Durability::TransientLocal,
        d => return Err(InvalidQoSError::new_err(format!("durability {d:?}"))),
    };
    q.deadline = deadline.map(|d| duration("deadline", d)).transpose()?;
    q.lifespan = lifespan.map(|d| duration("lifespan", d)).transpose()?;
    q.liveliness = myelin::Liveliness {
        kind: match liveliness {
            "automatic" => myelin::LivelinessKind::Automatic,
            "manual_by_topic" => myelin::LivelinessKind::ManualByTopic,
            l => return Err(InvalidQoSError::new_err(format!("liveliness {l:?}"))),
        },
        lease: lease.map(|d| duration("liveliness lease", d)).transpose()?,
    };
    Ok(q)
}

/// The QoS tuple the Python layer passes: (history, depth, reliability,
/// durability, deadline, lifespan, liveliness, lease).
type QosTuple = (
    String,
    usize,
    String,
    String,
    Option<f64>,
    Option<f64>,
    String,
    Option<f64>,
);

fn qos_from(t: QosTuple) -> PyResult<QoS> {
    qos_of(&t.0, t.1, &t.2, &t.3, t.4, t.5, &t.6, t.7)
}

fn raw_type(plan: &codec::Plan) -> PyResult<RawType> {
    RawType::ros(&plan.type_name, &plan.ros_hash).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A node.
#[pyclass(module = "myelin._myelin", frozen)]
struct Node {
    node: myelin::Node,
}

#[pymethods]
impl Node {
    #[new]
    #[pyo3(signature = (context, name, namespace=None))]
    fn new(context: &Context, name: &str, namespace: Option<&str>) -> PyResult<Self> {
        let node = match namespace {
            Some(ns) => context.ctx.create_node_in(name, ns),
            None => context.ctx.create_node(name),
        };
        let node = node.map_err(|e| match e {
            myelin::CreateNodeError::InvalidName(_) => InvalidNameError::new_err(e.to_string()),
            e => core_error(e),
        })?;
        Ok(Node { node })
    }

    fn name(&self) -> String {
        self.node.name().to_string()
    }

    fn namespace(&self) -> String {
        self.node.namespace().to_string()
    }

    fn fully_qualified_name(&self) -> String {
        self.node.fully_qualified_name().to_string()
    }

    /// A publisher of `msg_type` (a message class) on `topic`; `on_event`
    /// (if given) is called as `on_event(kind, fields)` by the executor for
    /// each QoS event (see [`publisher_event`]).
    #[pyo3(signature = (msg_type, topic, qos, on_event=None))]
    fn create_publisher(
        &self,
        msg_type: &Bound<'_, PyAny>,
        topic: &str,
        qos: QosTuple,
        on_event: Option<Py<PyAny>>,
    ) -> PyResult<Publisher> {
        let plan = codec::plan_of_class(msg_type)?;
        let mut options = myelin::PublisherOptions::default();
        if let Some(f) = on_event {
            options = options.on_event(move |e| {
                let (kind, fields) = publisher_event(e);
                call_event(&f, kind, &fields);
            });
        }
        let p = self
            .node
            .create_raw_publisher_with(topic, &raw_type(&plan)?, qos_from(qos)?, options)
            .map_err(endpoint_error)?;
        Ok(Publisher { publisher: p, plan })
    }

    /// A subscription of `msg_type` on `topic`, whose callback an executor
    /// runs with each message (decoded, or its CDR `bytes` if `raw`), and
    /// `on_event(kind, fields)` (if given) with each QoS event (see
    /// [`subscription_event`]). `with_info`: the callback takes the
    /// message's info too (see [`message_info`]).
    #[pyo3(signature = (msg_type, topic, qos, callback, raw=false, on_event=None, group=None, with_info=false))]
    #[allow(clippy::too_many_arguments)] // rclpy's create_subscription, spelled out
    fn create_subscription(
        &self,
        msg_type: &Bound<'_, PyAny>,
        topic: &str,
        qos: QosTuple,
        callback: Py<PyAny>,
        raw: bool,
        on_event: Option<Py<PyAny>>,
        group: Option<PyRef<'_, CallbackGroup>>,
        with_info: bool,
    ) -> PyResult<Subscription> {
        let p = codec::plan_of_class(msg_type)?;
        let ty = raw_type(&p)?;
        let mut options = SubscriptionOptions::default();
        if let Some(g) = &group {
            options = options.with_group(&g.group);
        }
        if let Some(f) = on_event {
            options = options.on_event(move |e| {
                let (kind, fields) = subscription_event(e);
                call_event(&f, kind, &fields);
            });
        }
        let qos = qos_from(qos)?;
        // The message as the callback takes it: decoded, or its bytes.
        let run = move |m: AnyMessage, info: Option<&MessageInfo>| {
            callback_ran();
            Python::attach(|py| {
                let arg = if raw {
                    Ok(PyBytes::new(py, m.bytes()).into_any())
                } else {
                    codec::decode(py, &p, m.bytes(), Some(m.0.shared_bytes()))
                };
                let called = arg.and_then(|a| match info {
                    None => callback.call1(py, (a,)),
                    Some(i) => callback.call1(py, (a, message_info(py, i)?)),
                });
                if let Err(e) = called {
                    keep_callback_error(e);
                }
            })
        };
        let s = if with_info {
            self.node.create_raw_subscription(
                topic,
                &ty,
                qos,
                options,
                move |m, i: &MessageInfo| run(m, Some(i)),
            )
        } else {
            self.node
                .create_raw_subscription(topic, &ty, qos, options, move |m: AnyMessage| {
                    run(m, None)
                })
        }
        .map_err(endpoint_error)?;
        Ok(Subscription { subscription: s })
    }

    /// A timer that calls `callback` every `period` seconds (in `group`,
    /// else the node's default group); with `with_info`, as
    /// `callback(lateness_ns)`.
    #[pyo3(signature = (period, callback, group=None, with_info=false))]
    fn create_timer(
        &self,
        period: f64,
        callback: Py<PyAny>,
        group: Option<PyRef<'_, CallbackGroup>>,
        with_info: bool,
    ) -> PyResult<Timer> {
        let period = duration("timer period", period)?;
        let t = if with_info {
            // The callback gets how late the tick started (ns); the Python
            // side makes rclpy's TimerInfo of it on the node's clock.
            let run = move |info: &myelin::TimerInfo| {
                callback_ran();
                let late = u64::try_from(info.lateness().as_nanos()).unwrap_or(u64::MAX);
                Python::attach(|py| {
                    if let Err(e) = callback.call1(py, (late,)) {
                        keep_callback_error(e);
                    }
                })
            };
            match &group {
                Some(g) => self.node.create_timer_with_info_in(period, &g.group, run),
                None => self.node.create_timer_with_info(period, run),
            }
        } else {
            let run = move || {
                callback_ran();
                Python::attach(|py| {
                    if let Err(e) = callback.call0(py) {
                        keep_callback_error(e);
                    }
                })
            };
            match &group {
                Some(g) => self.node.create_timer_in(period, &g.group, run),
                None => self.node.create_timer(period, run),
            }
        }
        .map_err(timer_error)?;
        Ok(Timer { timer: t })
    }

    /// A server of `srv_type` (a service class) on `name`: an executor
    /// spinning the node calls `callback(request, response)` with each
    /// request and a fresh response, and sends what it returns.
    #[pyo3(signature = (srv_type, name, callback, group=None))]
    fn create_service(
        &self,
        srv_type: &Bound<'_, PyAny>,
        name: &str,
        callback: Py<PyAny>,
        group: Option<PyRef<'_, CallbackGroup>>,
    ) -> PyResult<Service> {
        let (ty, req, resp) = service_types(srv_type)?;
        let service = ty.name().to_string();
        let handler = move |m: AnyMessage| -> AnyMessage {
            let bytes = serve(
                &req,
                &m,
                || (),
                |py, request| {
                    let response = resp.class.bind(py).call0()?;
                    let out = callback.call1(py, (request, response))?;
                    codec::encode(&resp, out.bind(py)).map_err(|e| {
                        PyTypeError::new_err(format!(
                            "the callback of service {service} must return a {}: {e}",
                            resp.type_name
                        ))
                    })
                },
            );
            AnyMessage(bytes.into())
        };
        let s = self
            .node
            .create_raw_service(name, &ty, service_options(group.as_deref()), handler)
            .map_err(service_error)?;
        Ok(Service {
            _service: s,
            type_name: ty.name(),
        })
    }

    /// A server of `srv_type` on `name` that answers later: an executor
    /// spinning the node calls `callback(request, reply)`, and the
    /// response goes when something calls `reply.send(response)` (from
    /// any thread; see [`ServiceReply`]).
    #[pyo3(signature = (srv_type, name, callback, group=None))]
    fn create_deferred_service(
        &self,
        srv_type: &Bound<'_, PyAny>,
        name: &str,
        callback: Py<PyAny>,
        group: Option<PyRef<'_, CallbackGroup>>,
    ) -> PyResult<Service> {
        let (ty, req, resp) = service_types(srv_type)?;
        let service: Arc<str> = ty.name().into();
        let handler = move |m: AnyMessage, reply: myelin::ServiceReply<AnyMessage>| {
            let reply = Arc::new(Mutex::new(Some(reply)));
            // If the callback raises, its request is not answered later
            // (the Python handle may live on in the traceback): the reply
            // is taken back and dropped while unwinding, so the caller
            // gets an error at once.
            let take_back = || codec::lock(&reply).take();
            serve(&req, &m, take_back, |py, request| {
                let handle = ServiceReply {
                    reply: reply.clone(),
                    resp: resp.clone(),
                    service: service.clone(),
                };
                callback.call1(py, (request, handle))?;
                Ok(())
            })
        };
        let s = self
            .node
            .create_raw_deferred_service(name, &ty, service_options(group.as_deref()), handler)
            .map_err(service_error)?;
        Ok(Service {
            _service: s,
            type_name: ty.name(),
        })
    }

    /// A client of `srv_type` for the service `name`.
    fn create_client(&self, srv_type: &Bound<'_, PyAny>, name: &str) -> PyResult<Client> {
        let (ty, req, resp) = service_types(srv_type)?;
        let c = self
            .node
            .create_raw_client(name, &ty)
            .map_err(service_error)?;
        Ok(Client {
            client: Arc::new(c),
            req,
            resp,
            type_name: ty.name(),
        })
    }

    /// Declare parameter `name` with `value` (a command-line override
    /// wins): the value it has, and rclpy's type number.
    fn declare_parameter<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, u8)> {
        let v = params::from_py(name, value)?;
        let v = py
            .detach(|| self.node.declare_parameter(name, v))
            .map_err(params::error)?;
        Ok((params::to_py(py, &v)?, params::type_number(&v)))
    }

    /// The value of parameter `name` and its type number.
    fn get_parameter<'py>(&self, py: Python<'py>, name: &str) -> PyResult<(Bound<'py, PyAny>, u8)> {
        let v = self.node.get_parameter(name).map_err(params::error)?;
        Ok((params::to_py(py, &v)?, params::type_number(&v)))
    }

    fn has_parameter(&self, name: &str) -> bool {
        self.node.has_parameter(name)
    }

    fn undeclare_parameter(&self, name: &str) -> PyResult<()> {
        self.node.undeclare_parameter(name).map_err(params::error)
    }

    fn parameter_names(&self) -> Vec<String> {
        let mut names = self.node.parameter_names();
        names.sort();
        names
    }

    /// Set parameters (name, value) at once: all or none.
    fn set_parameters(
        &self,
        py: Python<'_>,
        values: Vec<(String, Bound<'_, PyAny>)>,
    ) -> PyResult<()> {
        let values: Vec<(String, myelin::ParameterValue)> = values
            .iter()
            .map(|(n, v)| Ok((n.clone(), params::from_py(n, v)?)))
            .collect::<PyResult<_>>()?;
        py.detach(|| self.node.set_parameters_atomically(&values))
            .map_err(params::error)
    }

    /// Call `callback([(name, value, type number), ...])` before parameters
    /// change; it returns `(successful, reason)`. The change is refused
    /// when it is not successful or raises. Dropping the handle removes it.
    fn add_on_set_parameters_callback(&self, callback: Py<PyAny>) -> ParametersCallback {
        let h = self.node.add_on_set_parameters_callback(move |changes| {
            Python::attach(|py| -> Result<(), String> {
                let args: Vec<(String, Py<PyAny>, u8)> = changes
                    .iter()
                    .map(|(n, v)| {
                        Ok((
                            n.clone(),
                            params::to_py(py, v)?.unbind(),
                            params::type_number(v),
                        ))
                    })
                    .collect::<PyResult<_>>()
                    .map_err(|e| e.to_string())?;
                let out = callback.call1(py, (args,)).map_err(|e| e.to_string())?;
                let (ok, reason): (bool, String) = out
                    .extract(py)
                    .map_err(|_| "the callback must return (successful, reason)".to_string())?;
                if ok { Ok(()) } else { Err(reason) }
            })
        });
        ParametersCallback { _handle: h }
    }

    /// The node's ROS time in nanoseconds (simulated time under
    /// `use_sim_time`: 0 until the first `/clock`), and whether it is
    /// simulated.
    fn now_ns(&self) -> (i64, bool) {
        let clock = self.node.get_clock();
        (clock.now().nanos(), clock.ros_time_is_active())
    }

    /// Log `msg` at `level` (debug, info, warn, error, fatal) under the
    /// node's logger (stderr and `/rosout`).
    fn log(&self, level: &str, msg: &str) -> PyResult<()> {
        let l = self.node.get_logger();
        match level {
            "debug" => l.debug(msg),
            "info" => l.info(msg),
            "warn" | "warning" => l.warn(msg),
            "error" => l.error(msg),
            "fatal" => l.fatal(msg),
            _ => return Err(PyValueError::new_err(format!("log level {level:?}"))),
        }
        Ok(())
    }

    /// The topics of the graph with their types (this context's and the
    /// other processes' and hosts' its transports see).
    fn topic_names_and_types(&self, py: Python<'_>) -> Vec<(String, Vec<String>)> {
        // Without the GIL: it scans shared memory and, the first time,
        // asks the network (up to 2 s).
        py.detach(|| self.node.topic_names_and_types())
    }

    /// The graph's nodes, fully qualified.
    fn node_names(&self, py: Python<'_>) -> Vec<String> {
        py.detach(|| self.node.node_names())
    }

    /// Publishers on a topic, graph-wide.
    fn count_publishers(&self, py: Python<'_>, topic: &str) -> PyResult<usize> {
        py.detach(|| self.node.count_publishers(topic))
            .map_err(|e| InvalidNameError::new_err(e.to_string()))
    }

    /// Subscriptions on a topic, graph-wide.
    fn count_subscribers(&self, py: Python<'_>, topic: &str) -> PyResult<usize> {
        py.detach(|| self.node.count_subscribers(topic))
            .map_err(|e| InvalidNameError::new_err(e.to_string()))
    }
}

/// A callback group: which callbacks a multi-threaded executor may run
/// at once (mutually exclusive: one at a time; reentrant: callbacks of
/// different entities together).
#[pyclass(module = "myelin._myelin", frozen)]
struct CallbackGroup {
    group: myelin::CallbackGroup,
}

#[pymethods]
impl CallbackGroup {
    #[new]
    fn new(reentrant: bool) -> Self {
        CallbackGroup {
            group: myelin::CallbackGroup::new(if reentrant {
                myelin::CallbackGroupKind::Reentrant
            } else {
                myelin::CallbackGroupKind::MutuallyExclusive
            }),
        }
    }

    /// Whether callbacks of different entities of the group may overlap.
    fn reentrant(&self) -> bool {
        self.group.kind() == myelin::CallbackGroupKind::Reentrant
    }
}

/// A publisher.
#[pyclass(module = "myelin._myelin", frozen)]
struct Publisher {
    publisher: myelin::Publisher<AnyMessage>,
    plan: Arc<codec::Plan>,
}

#[pymethods]
impl Publisher {
    /// Publish `msg`, an instance of the publisher's message class (or its
    /// CDR as `bytes`).
    fn publish(&self, py: Python<'_>, msg: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Ok(b) = msg.cast::<PyBytes>() {
            let bytes = b.as_bytes();
            let mut loan = self.publisher.loan_slice(bytes.len()).map_err(core_error)?;
            loan.copy_from_slice(bytes);
            return py.detach(|| loan.publish()).map_err(core_error);
        }
        // Encode straight into the loaned chunk: the one copy of a numpy
        // array's bytes is into the memory subscribers read.
        let len = codec::encoded_len(&self.plan, msg)?;
        let mut loan = self.publisher.loan_slice(len).map_err(core_error)?;
        codec::encode_into(&self.plan, msg, &mut loan)?;
        py.detach(|| loan.publish()).map_err(core_error)
    }

    /// Loan a shared-memory chunk for `msg`, leaving the arrays `sizes`
    /// names (`[(field, elements)]`) to fill in place through writable
    /// numpy views; see [`loan::Loan`].
    fn loan(
        slf: &Bound<'_, Self>,
        msg: &Bound<'_, PyAny>,
        sizes: Vec<(String, usize)>,
    ) -> PyResult<loan::Loan> {
        loan::loan(slf, msg, sizes)
    }

    fn topic(&self) -> String {
        self.publisher.topic().to_string()
    }

    fn subscription_count(&self) -> usize {
        self.publisher.subscription_count()
    }

    fn assert_liveliness(&self) {
        self.publisher.assert_liveliness();
    }

    /// Warm the path of the next publish without publishing (the Rust
    /// `Publisher::warm`): nothing is delivered.
    fn warm(&self, py: Python<'_>) {
        py.detach(|| self.publisher.warm());
    }
}

/// A subscription (its callback runs on the executor of its node).
#[pyclass(module = "myelin._myelin", frozen)]
struct Subscription {
    subscription: myelin::Subscription<AnyMessage>,
}

#[pymethods]
impl Subscription {
    fn topic(&self) -> String {
        self.subscription.topic().to_string()
    }

    /// Matched publishers, in this process and others (rclcpp's
    /// `get_publisher_count`).
    fn publisher_count(&self) -> usize {
        self.subscription.matched_count()
    }
}

fn service_error(e: myelin::CreateServiceError) -> PyErr {
    use myelin::CreateServiceError as E;
    let text = e.to_string();
    match e {
        E::InvalidName(_) => InvalidNameError::new_err(text),
        E::TypeMismatch { .. } => TypeMismatchError::new_err(text),
        _ => MyelinError::new_err(text),
    }
}

/// The run-time type of a service class and the plans of its request and
/// response.
fn service_types(
    srv_type: &Bound<'_, PyAny>,
) -> PyResult<(myelin::RawServiceType, Arc<codec::Plan>, Arc<codec::Plan>)> {
    let name: String = srv_type
        .getattr("_TYPE_NAME")
        .and_then(|n| n.extract())
        .map_err(|_| PyTypeError::new_err("not a service type (use a class from myelin.msgs)"))?;
    let hash: String = srv_type.getattr("_ROS_HASH")?.extract()?;
    let req = codec::plan_of_class(&srv_type.getattr("Request")?)?;
    let resp = codec::plan_of_class(&srv_type.getattr("Response")?)?;
    let ty = myelin::RawServiceType::ros(&name, &hash, raw_type(&req)?, raw_type(&resp)?)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok((ty, req, resp))
}

/// A service server (its callback runs on the executor of its node).
#[pyclass(module = "myelin._myelin", frozen)]
struct Service {
    _service: myelin::Service<AnyMessage, AnyMessage>,
    /// The service type (`pkg/srv/Name`).
    type_name: &'static str,
}

#[pymethods]
impl Service {
    /// Service introspection of this server: `state` is "off",
    /// "metadata" or "contents"; `qos` the event publisher's.
    fn configure_introspection(&self, state: &str, qos: QosTuple) -> PyResult<()> {
        let qos = qos_from(qos)?;
        match introspection_of(self.type_name, state)? {
            (state, None) => self._service.configure_introspection(state, qos),
            (state, Some((d, h))) => self
                ._service
                .configure_introspection_with(state, qos, d, &h),
        }
        .map_err(|e| MyelinError::new_err(e.to_string()))
    }
}

/// What a service's events need: its description and its event type's
/// hash (the message crate's services have them).
type EventType = (myelin::type_description::Described, String);

/// The introspection state named `state` and, unless it is off, what the
/// service type `type_name` needs for it.
fn introspection_of(
    type_name: &str,
    state: &str,
) -> PyResult<(myelin::ServiceIntrospection, Option<EventType>)> {
    let state = match state {
        "off" => return Ok((myelin::ServiceIntrospection::Off, None)),
        "metadata" => myelin::ServiceIntrospection::Metadata,
        "contents" => myelin::ServiceIntrospection::Contents,
        other => {
            return Err(PyValueError::new_err(format!(
                "introspection state {other:?}"
            )));
        }
    };
    let described = myelin_msgs::describe(type_name);
    let hash = myelin_msgs::ros_hash_of(&format!("{type_name}_Event"));
    match (described, hash) {
        (Some(d), Some(h)) => Ok((state, Some((d, h)))),
        _ => Err(MyelinError::new_err(format!(
            "{type_name}: not a service type with a description, so its events cannot be published"
        ))),
    }
}

/// Run a server's Python callback `f` with the decoded request `m`. An
/// exception (or undecodable request) is kept, to be raised from the spin
/// that ran it, and answers the caller through the core's panic path with
/// its text (as a panicking Rust server does; `resume_unwind` skips the
/// panic hook's report); `on_error`'s value is dropped while unwinding.
fn serve<R, G>(
    req: &codec::Plan,
    m: &AnyMessage,
    on_error: impl FnOnce() -> G,
    f: impl FnOnce(Python<'_>, Bound<'_, PyAny>) -> PyResult<R>,
) -> R {
    callback_ran();
    let done = Python::attach(|py| {
        let request = codec::decode(py, req, m.bytes(), Some(m.0.shared_bytes()))?;
        f(py, request)
    });
    match done {
        Ok(r) => r,
        Err(e) => {
            let text = e.to_string();
            keep_callback_error(e);
            let _dropped_while_unwinding = on_error();
            std::panic::resume_unwind(Box::new(text))
        }
    }
}

/// A server's options: its callback group, if one is given.
fn service_options(group: Option<&CallbackGroup>) -> myelin::ServiceOptions {
    match group {
        Some(g) => myelin::ServiceOptions::default().with_group(&g.group),
        None => myelin::ServiceOptions::default(),
    }
}

/// The answer to one request of a deferred server: `send(response)` once,
/// from any thread. Dropped unanswered, the caller gets an error at once
/// rather than waiting out its timeout.
#[pyclass(module = "myelin._myelin", frozen)]
struct ServiceReply {
    /// Shared with the server's handler, which drops it unanswered if the
    /// callback raises.
    reply: Arc<Mutex<Option<myelin::ServiceReply<AnyMessage>>>>,
    resp: Arc<codec::Plan>,
    service: Arc<str>,
}

#[pymethods]
impl ServiceReply {
    /// Send `response` (an instance of the service's response class).
    fn send(&self, py: Python<'_>, response: &Bound<'_, PyAny>) -> PyResult<()> {
        // The codec's error names the field (TypeError or ValueError).
        let bytes = codec::encode(&self.resp, response)?;
        let reply = codec::lock(&self.reply).take().ok_or_else(|| {
            PyValueError::new_err(format!(
                "this request of service {} was already answered",
                self.service
            ))
        })?;
        py.detach(|| reply.send(AnyMessage(bytes.into())));
        Ok(())
    }

    /// Whether the request is still waiting for its answer.
    #[getter]
    fn pending(&self) -> bool {
        codec::lock(&self.reply).is_some()
    }
}

fn call_error(e: myelin::CallError) -> PyErr {
    MyelinError::new_err(e.to_string())
}

/// A service client. Calls need no executor: an answer from another
/// process arrives on the core's own threads.
#[pyclass(module = "myelin._myelin", frozen)]
struct Client {
    client: Arc<myelin::Client<AnyMessage, AnyMessage>>,
    req: Arc<codec::Plan>,
    resp: Arc<codec::Plan>,
    /// The service type (`pkg/srv/Name`).
    type_name: &'static str,
}

/// Wait in slices (Ctrl-C is seen between them) until `done()` or `timeout`
/// (None: no end). Whether `done()` held.
fn wait_sliced(
    py: Python<'_>,
    timeout: Option<f64>,
    mut step: impl FnMut(Duration) -> bool + Send,
) -> PyResult<bool> {
    let slice = Duration::from_millis(100);
    let deadline = match timeout {
        Some(t) => Some(deadline_in("timeout", t)?),
        None => None,
    };
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        let wait = left.map_or(slice, |l| l.min(slice));
        if py.detach(|| step(wait)) {
            return Ok(true);
        }
        py.check_signals()?;
        if left.is_some_and(|l| l <= slice) {
            return Ok(false);
        }
    }
}

#[pymethods]
impl Client {
    /// Service introspection of this client: as
    /// [`Service::configure_introspection`].
    fn configure_introspection(&self, state: &str, qos: QosTuple) -> PyResult<()> {
        let qos = qos_from(qos)?;
        match introspection_of(self.type_name, state)? {
            (state, None) => self.client.configure_introspection(state, qos),
            (state, Some((d, h))) => self.client.configure_introspection_with(state, qos, d, &h),
        }
        .map_err(|e| MyelinError::new_err(e.to_string()))
    }

    /// Whether a server can be called now.
    fn service_is_ready(&self) -> bool {
        self.client.service_is_ready()
    }

    /// Wait up to `timeout` seconds (None: no end) for a server.
    #[pyo3(signature = (timeout=None))]
    fn wait_for_service(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let c = &self.client;
        wait_sliced(py, timeout, |d| c.wait_for_service(d))
    }

    /// Send `request`; the answer comes through the returned call.
    fn call_async(&self, request: &Bound<'_, PyAny>) -> PyResult<PendingCall> {
        let bytes = codec::encode(&self.req, request)?;
        let fut = self.client.call_async(AnyMessage(bytes.into()));
        Ok(PendingCall {
            fut: Mutex::new(Some(fut)),
            resp: self.resp.clone(),
        })
    }
}

/// An unpark for the thread that waits on a call.
struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Stops an executor's `spin_once` so that its loop looks at the call.
struct StopExecutor(myelin::StopHandle);

impl std::task::Wake for StopExecutor {
    fn wake(self: Arc<Self>) {
        self.0.stop();
    }
}

/// A call on its way: the answer, once it came, is decoded on the first
/// look after.
#[pyclass(module = "myelin._myelin", frozen)]
struct PendingCall {
    fut: Mutex<Option<myelin::ResponseFuture<AnyMessage>>>,
    resp: Arc<codec::Plan>,
}

impl PendingCall {
    /// Poll once with `waker`: the raw answer, if it came.
    fn poll_raw(&self, waker: &std::task::Waker) -> Option<Result<AnyMessage, myelin::CallError>> {
        let mut guard = self.fut.lock().unwrap_or_else(|p| p.into_inner());
        let fut = guard.as_mut()?;
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(fut).poll(&mut cx) {
            std::task::Poll::Ready(r) => {
                *guard = None;
                Some(r)
            }
            std::task::Poll::Pending => None,
        }
    }

    fn finish(
        &self,
        py: Python<'_>,
        r: Result<AnyMessage, myelin::CallError>,
    ) -> PyResult<Py<PyAny>> {
        let m = r.map_err(call_error)?;
        Ok(codec::decode(py, &self.resp, m.bytes(), Some(m.0.shared_bytes()))?.unbind())
    }
}

#[pymethods]
impl PendingCall {
    /// The answer if it came (raises what the call failed with), else None.
    /// A call answers once: later looks give None.
    fn poll(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.poll_raw(std::task::Waker::noop()) {
            Some(r) => self.finish(py, r).map(Some),
            None => Ok(None),
        }
    }

    /// Wait up to `timeout` seconds (None: no end) for the answer, with no
    /// executor (a server in another process needs none). None on timeout.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut got = None;
        wait_sliced(py, timeout, |d| {
            got = self.poll_raw(&waker);
            if got.is_none() {
                std::thread::park_timeout(d);
                got = self.poll_raw(&waker);
            }
            got.is_some()
        })?;
        got.map(|r| self.finish(py, r)).transpose()
    }
}

/// An on-set-parameters callback; dropping it removes the callback.
#[pyclass(module = "myelin._myelin", frozen)]
struct ParametersCallback {
    _handle: myelin::OnSetParametersHandle,
}

/// A timer.
#[pyclass(module = "myelin._myelin", frozen)]
struct Timer {
    timer: myelin::Timer,
}

#[pymethods]
impl Timer {
    fn cancel(&self) {
        self.timer.cancel();
    }

    fn is_canceled(&self) -> bool {
        self.timer.is_cancelled()
    }

    fn reset(&self) {
        self.timer.reset();
    }

    fn period_ns(&self) -> u128 {
        self.timer.period().as_nanos()
    }
}

/// An executor's idle wait by its name: "block", "anticipate" or
/// "busy_poll" ("busy-poll" too: `myelin::IdleWait`'s `FromStr`).
fn idle_wait_named(mode: &str) -> PyResult<myelin::IdleWait> {
    mode.parse()
        .map_err(|e: myelin::UnknownIdleWait| PyValueError::new_err(e.to_string()))
}

/// What an anticipating executor learned (`myelin::Anticipated`) as a
/// dict: "period" (seconds, None until steady), "caught", "missed".
fn anticipation_dict(py: Python<'_>, a: myelin::Anticipated) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    d.set_item("period", a.period.map(|p| p.as_secs_f64()))?;
    d.set_item("caught", a.caught)?;
    d.set_item("missed", a.missed)?;
    Ok(d.into_any().unbind())
}

/// An executor: runs the callbacks of the nodes added to it, one at a time.
#[pyclass(module = "myelin._myelin")]
struct Executor {
    exec: myelin::Executor,
}

#[pymethods]
impl Executor {
    #[new]
    fn new() -> Self {
        Executor {
            exec: myelin::Executor::new(),
        }
    }

    fn add_node(&mut self, node: &Node) -> PyResult<()> {
        self.exec.add_node(&node.node).map_err(core_error)
    }

    /// How the executor waits when idle (see `idle_wait_named`).
    fn set_idle_wait(&mut self, mode: &str) -> PyResult<()> {
        self.exec.set_idle_wait(idle_wait_named(mode)?);
        Ok(())
    }

    /// What anticipation learned (see `anticipation_dict`).
    fn anticipation(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        anticipation_dict(py, self.exec.anticipation())
    }

    fn remove_node(&mut self, node: &Node) -> bool {
        self.exec.remove_node(&node.node)
    }

    /// Look at `call` for this executor: its answer if it came (raises
    /// what the call failed with), else None, and the answer, when it
    /// comes, ends this executor's current wait, so that the loop that
    /// spins it settles the call's future (and runs its done callbacks).
    fn watch(&self, py: Python<'_>, call: &PendingCall) -> PyResult<Option<Py<PyAny>>> {
        let waker = std::task::Waker::from(Arc::new(StopExecutor(self.exec.stop_handle())));
        call.poll_raw(&waker)
            .map(|r| call.finish(py, r))
            .transpose()
    }

    /// Run callbacks until `call` is answered or `timeout` seconds pass
    /// (None: no end); the answer wakes the executor at once. The answer,
    /// or None on timeout.
    #[pyo3(signature = (call, timeout=None))]
    fn spin_until_answered(
        &mut self,
        py: Python<'_>,
        call: &PendingCall,
        timeout: Option<f64>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let stop = self.exec.stop_handle();
        let exec = &mut self.exec;
        spin_until_answered(py, call, timeout, stop, |slice| {
            exec.spin_once(slice).map(drop)
        })
    }

    /// Run callbacks for up to `timeout` seconds, until a callback raised or
    /// the context shut down, staying out of the GIL between them (each
    /// callback takes it only for its Python code); in slices so that
    /// Ctrl-C raises KeyboardInterrupt. What `spin()` runs on.
    fn spin_for(&mut self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let deadline = deadline_in("timeout", timeout)?;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let slice = left.min(Duration::from_millis(100));
            let exec = &mut self.exec;
            let begun = std::time::Instant::now();
            let r = py.detach(|| exec.spin_until(slice, callback_error_pending));
            take_callback_error()?;
            r.map_err(core_error)?;
            py.check_signals()?;
            // A slice that ended early without an error was stopped (the
            // context shut down, or a stop handle).
            if left <= slice || begun.elapsed() < slice {
                return Ok(());
            }
        }
    }

    /// Run at most one ready callback, waiting up to `timeout` seconds for
    /// one (the GIL released meanwhile). Whether one ran. Raises what the
    /// callback raised, and KeyboardInterrupt on Ctrl-C.
    fn spin_once(&mut self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        // Wait in slices so that Ctrl-C (Python's SIGINT flag) is seen
        // within 100 ms even when nothing arrives.
        let slice = Duration::from_millis(100);
        let deadline = deadline_in("timeout", timeout)?;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let exec = &mut self.exec;
            let ran = py.detach(|| exec.spin_once(left.min(slice)));
            // A callback's own exception first (a failed service callback
            // also stops the core's spin with a panic report).
            take_callback_error()?;
            let ran = ran.map_err(core_error)?;
            py.check_signals()?;
            if ran || left <= slice {
                return Ok(ran);
            }
        }
    }
}

/// A CPU wake-up latency request held until `close()` (or the end of a
/// `with` block): see `myelin::CpuWakeupLatency`.
#[pyclass(module = "myelin._myelin")]
struct CpuWakeupLatency {
    held: Option<myelin::CpuWakeupLatency>,
}

#[pymethods]
impl CpuWakeupLatency {
    /// Ask that idle CPUs wake within `max_us` microseconds (0: they
    /// poll). PermissionError without root or write access to
    /// /dev/cpu_dma_latency, ValueError for a bound the kernel cannot take.
    #[new]
    #[pyo3(signature = (max_us=0))]
    fn new(max_us: u64) -> PyResult<Self> {
        match myelin::CpuWakeupLatency::hold(Duration::from_micros(max_us)) {
            Ok(h) => Ok(CpuWakeupLatency { held: Some(h) }),
            Err(e @ myelin::SchedError::CpuLatencyDenied { .. }) => {
                Err(pyo3::exceptions::PyPermissionError::new_err(e.to_string()))
            }
            Err(e @ myelin::SchedError::CpuLatencyRange { .. }) => {
                Err(PyValueError::new_err(e.to_string()))
            }
            Err(e) => Err(core_error(e)),
        }
    }

    /// The bound asked for, in microseconds; None once closed.
    #[getter]
    fn max_us(&self) -> Option<u128> {
        self.held.as_ref().map(|h| h.max().as_micros())
    }

    /// End the request (again: nothing).
    fn close(&mut self) {
        self.held = None;
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) {
        self.close();
    }
}

/// An executor with worker threads: callbacks of different callback
/// groups may run at once (Python code among them still takes turns on
/// the GIL; Rust work and waiting overlap).
#[pyclass(module = "myelin._myelin")]
struct MultiThreadedExecutor {
    exec: myelin::MultiThreadedExecutor,
}

#[pymethods]
impl MultiThreadedExecutor {
    /// `threads` workers (0: one per CPU).
    #[new]
    #[pyo3(signature = (threads=0))]
    fn new(threads: usize) -> Self {
        MultiThreadedExecutor {
            exec: myelin::MultiThreadedExecutor::new(threads),
        }
    }

    fn threads(&self) -> usize {
        self.exec.threads()
    }

    /// Run every worker on `cpus` (None: unchanged) under SCHED_FIFO at
    /// `fifo` (None: unchanged); see `myelin::ThreadPolicy`. Values the
    /// kernel refuses outright are a ValueError here; a permission the
    /// process lacks is a MyelinError when spinning starts, before any
    /// callback runs.
    #[pyo3(signature = (cpus=None, fifo=None))]
    fn set_thread_policy(&mut self, cpus: Option<Vec<usize>>, fifo: Option<u8>) -> PyResult<()> {
        let mut policy = myelin::ThreadPolicy::new();
        if let Some(c) = cpus {
            policy = policy.cpus(c);
        }
        if let Some(p) = fifo {
            policy = policy.fifo(p);
        }
        self.exec
            .set_thread_policy(policy)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    fn add_node(&mut self, node: &Node) -> PyResult<()> {
        self.exec.add_node(&node.node).map_err(core_error)
    }

    /// How the executor waits when idle (see `idle_wait_named`).
    fn set_idle_wait(&mut self, mode: &str) -> PyResult<()> {
        self.exec.set_idle_wait(idle_wait_named(mode)?);
        Ok(())
    }

    /// What anticipation learned (see `anticipation_dict`).
    fn anticipation(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        anticipation_dict(py, self.exec.anticipation())
    }

    fn remove_node(&mut self, node: &Node) -> bool {
        self.exec.remove_node(&node.node)
    }

    /// As `Executor.watch`: the answer ends the workers' current slice.
    fn watch(&self, py: Python<'_>, call: &PendingCall) -> PyResult<Option<Py<PyAny>>> {
        let waker = std::task::Waker::from(Arc::new(StopExecutor(self.exec.stop_handle())));
        call.poll_raw(&waker)
            .map(|r| call.finish(py, r))
            .transpose()
    }

    /// Run the workers for up to `timeout` seconds, until one callback has
    /// run (`once`), a callback raised, or the context shut down; in slices
    /// so that Ctrl-C raises KeyboardInterrupt. Whether a callback ran.
    #[pyo3(signature = (timeout, once=false))]
    fn spin_for(&mut self, py: Python<'_>, timeout: f64, once: bool) -> PyResult<bool> {
        use std::sync::atomic::Ordering;
        let start = CALLBACKS_RUN.load(Ordering::SeqCst);
        let deadline = deadline_in("timeout", timeout)?;
        let ran = || CALLBACKS_RUN.load(Ordering::SeqCst) > start;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let slice = left.min(Duration::from_millis(100));
            let exec = &mut self.exec;
            let begun = std::time::Instant::now();
            let r = py
                .detach(|| exec.spin_until(slice, || callback_error_pending() || (once && ran())));
            take_callback_error()?;
            r.map_err(core_error)?;
            py.check_signals()?;
            // Early without a callback: stopped (the context shut down).
            if (once && ran()) || left <= slice || begun.elapsed() < slice {
                return Ok(ran());
            }
        }
    }

    /// Run the workers until `call` is answered or `timeout` seconds pass
    /// (None: no end). The answer, or None on timeout.
    #[pyo3(signature = (call, timeout=None))]
    fn spin_until_answered(
        &mut self,
        py: Python<'_>,
        call: &PendingCall,
        timeout: Option<f64>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let stop = self.exec.stop_handle();
        let exec = &mut self.exec;
        spin_until_answered(py, call, timeout, stop, |slice| {
            exec.spin_until(slice, callback_error_pending).map(drop)
        })
    }
}

/// Spin (`spin` runs an executor for at most the slice it is given, the
/// GIL released) until `call` is answered or `timeout` seconds pass (None:
/// no end). The answer stops the executor's slice at once (the call's
/// waker stops it through `stop`). The answer, or None on timeout.
fn spin_until_answered(
    py: Python<'_>,
    call: &PendingCall,
    timeout: Option<f64>,
    stop: myelin::StopHandle,
    mut spin: impl FnMut(Duration) -> Result<(), myelin::SpinError> + Send,
) -> PyResult<Option<Py<PyAny>>> {
    let waker = std::task::Waker::from(Arc::new(StopExecutor(stop)));
    let deadline = match timeout {
        Some(t) => Some(deadline_in("timeout", t)?),
        None => None,
    };
    loop {
        if let Some(r) = call.poll_raw(&waker) {
            return call.finish(py, r).map(Some);
        }
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            return Ok(None);
        }
        let slice = left.map_or(Duration::from_millis(100), |l| {
            l.min(Duration::from_millis(100))
        });
        let spun = py.detach(|| spin(slice));
        take_callback_error()?;
        spun.map_err(core_error)?;
        py.check_signals()?;
    }
}

/// Register `cls` as the Python class of message type `type_name`.
#[pyfunction]
fn register_type(py: Python<'_>, cls: &Bound<'_, PyType>, type_name: &str) -> PyResult<()> {
    codec::register(py, cls, type_name)
}

/// The fields and constants of `type_name` (for the class factory).
#[pyfunction]
fn type_info(type_name: &str) -> PyResult<codec::TypeInfo> {
    codec::info(type_name)
}

/// The REP 2011 hash of `type_name`.
#[pyfunction]
fn type_hash(type_name: &str) -> PyResult<String> {
    codec::ros_hash(type_name)
}

/// Add the `.msg` definition `text` of `package/msg/name`.
#[pyfunction]
fn load_msg(package: &str, name: &str, text: &str) -> PyResult<String> {
    codec::load(package, name, text)
}

/// A service type's request and response type names and its hash.
#[pyfunction]
fn srv_info(type_name: &str) -> PyResult<(String, String, String)> {
    codec::srv_info(type_name)
}

/// Whether `type_name` is a service type myelin knows.
#[pyfunction]
fn knows_srv(type_name: &str) -> bool {
    codec::knows_srv(type_name)
}

/// Whether `type_name` is an action type myelin knows.
#[pyfunction]
fn knows_action(type_name: &str) -> bool {
    codec::knows_action(type_name)
}

/// Add the `.action` definition `text` of `package/action/name`.
#[pyfunction]
fn load_action(package: &str, name: &str, text: &str) -> PyResult<String> {
    codec::load_action(package, name, text)
}

/// Add the `.srv` definition `text` of `package/srv/name`.
#[pyfunction]
fn load_srv(package: &str, name: &str, text: &str) -> PyResult<String> {
    codec::load_srv(package, name, text)
}

/// Whether `type_name` is a message type myelin knows.
#[pyfunction]
fn knows_type(type_name: &str) -> bool {
    codec::spec(type_name).is_some()
}

/// The message types the package ships (`pkg/msg/Name`).
#[pyfunction]
fn bundled_types() -> Vec<&'static str> {
    myelin_msgs::definitions().iter().map(|(n, _)| *n).collect()
}

/// The service types the package ships (`pkg/srv/Name`).
#[pyfunction]
fn bundled_services() -> Vec<&'static str> {
    myelin_msgs::srv_definitions()
        .iter()
        .map(|(n, _)| *n)
        .collect()
}

/// The action types the message crate ships (`pkg/action/Name`).
#[pyfunction]
fn bundled_actions() -> Vec<&'static str> {
    myelin_msgs::action_definitions()
        .iter()
        .map(|(n, _)| *n)
        .collect()
}

/// CDR of `msg`.
#[pyfunction]
fn serialize<'py>(py: Python<'py>, msg: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let plan = codec::plan_of_class(&msg.get_type())?;
    Ok(PyBytes::new(py, &codec::encode(&plan, msg)?))
}

/// A message of class `msg_type` from its CDR.
#[pyfunction]
fn deserialize<'py>(
    py: Python<'py>,
    data: &[u8],
    msg_type: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let plan = codec::plan_of_class(msg_type)?;
    codec::decode(py, &plan, data, None)
}

#[pymodule]
fn _myelin(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Array fields are numpy arrays: fail at import, not at a message.
    py.import("numpy")?;
    m.add("MyelinError", py.get_type::<MyelinError>())?;
    m.add("InvalidNameError", py.get_type::<InvalidNameError>())?;
    m.add("InvalidQoSError", py.get_type::<InvalidQoSError>())?;
    m.add("TypeMismatchError", py.get_type::<TypeMismatchError>())?;
    m.add(
        "ParameterNotDeclaredException",
        py.get_type::<params::ParameterNotDeclaredException>(),
    )?;
    m.add(
        "ParameterAlreadyDeclaredException",
        py.get_type::<params::ParameterAlreadyDeclaredException>(),
    )?;
    m.add(
        "InvalidParameterValueException",
        py.get_type::<params::InvalidParameterValueException>(),
    )?;
    m.add_class::<ParametersCallback>()?;
    m.add_class::<Context>()?;
    m.add_class::<Node>()?;
    m.add_class::<CallbackGroup>()?;
    m.add_class::<Publisher>()?;
    m.add_class::<Subscription>()?;
    m.add_class::<Timer>()?;
    m.add_class::<Executor>()?;
    m.add_class::<MultiThreadedExecutor>()?;
    m.add_class::<CpuWakeupLatency>()?;
    m.add_class::<Service>()?;
    m.add_class::<ServiceReply>()?;
    m.add_class::<Client>()?;
    m.add_class::<PendingCall>()?;
    m.add_class::<codec::ReceivedBytes>()?;
    m.add_class::<loan::Loan>()?;
    m.add_class::<loan::LoanMemory>()?;
    m.add_function(wrap_pyfunction!(srv_info, m)?)?;
    m.add_function(wrap_pyfunction!(knows_srv, m)?)?;
    m.add_function(wrap_pyfunction!(knows_action, m)?)?;
    m.add_function(wrap_pyfunction!(bundled_actions, m)?)?;
    m.add_function(wrap_pyfunction!(load_action, m)?)?;
    m.add_function(wrap_pyfunction!(load_srv, m)?)?;
    m.add_function(wrap_pyfunction!(register_type, m)?)?;
    m.add_function(wrap_pyfunction!(type_info, m)?)?;
    m.add_function(wrap_pyfunction!(type_hash, m)?)?;
    m.add_function(wrap_pyfunction!(load_msg, m)?)?;
    m.add_function(wrap_pyfunction!(knows_type, m)?)?;
    m.add_function(wrap_pyfunction!(bundled_types, m)?)?;
    m.add_function(wrap_pyfunction!(bundled_services, m)?)?;
    m.add_function(wrap_pyfunction!(serialize, m)?)?;
    m.add_function(wrap_pyfunction!(deserialize, m)?)?;
    Ok(())
}
