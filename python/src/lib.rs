//! `myelin._myelin`: the Rust core of the Python package.
//!
//! The Python modules (`myelin/*.py`) give rclpy's shape; this module holds
//! the parts that touch the bus: contexts, nodes, publishers,
//! subscriptions, timers and an executor, with messages as Python objects
//! encoded by [`codec`]. Every endpoint is a run-time typed endpoint of the
//! core (`create_raw_publisher` / `create_raw_subscription`), so Python
//! and Rust nodes meet on one topic in every process and over the network.
//!
//! The GIL is released while an executor waits and runs; a callback takes
//! it only to run Python code. An exception a callback raises is kept and
//! raised again from the `spin_once` that ran it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use myelin::{AnyMessage, QoS, RawType, SubscriptionOptions};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};

mod codec;

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

/// The first exception a callback raised that no `spin_once` has raised
/// again yet.
static CALLBACK_ERROR: Mutex<Option<PyErr>> = Mutex::new(None);

fn keep_callback_error(e: PyErr) {
    let mut slot = CALLBACK_ERROR.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(e);
    }
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

fn duration(label: &str, secs: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| PyValueError::new_err(format!("{label}: {secs} is not a duration in seconds")))
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
    /// -r ... -p ...`).
    #[new]
    #[pyo3(signature = (domain_id=None, shared_memory=None, network=None, args=Vec::new(), use_sim_time=false))]
    fn new(
        py: Python<'_>,
        domain_id: Option<u32>,
        shared_memory: Option<bool>,
        network: Option<bool>,
        args: Vec<String>,
        use_sim_time: bool,
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

    /// A publisher of `msg_type` (a message class) on `topic`.
    fn create_publisher(
        &self,
        msg_type: &Bound<'_, PyAny>,
        topic: &str,
        qos: QosTuple,
    ) -> PyResult<Publisher> {
        let plan = codec::plan_of_class(msg_type)?;
        let p = self
            .node
            .create_raw_publisher(topic, &raw_type(&plan)?, qos_from(qos)?)
            .map_err(endpoint_error)?;
        Ok(Publisher { publisher: p, plan })
    }

    /// A subscription of `msg_type` on `topic`, whose callback an executor
    /// runs with each message (decoded, or its CDR `bytes` if `raw`).
    #[pyo3(signature = (msg_type, topic, qos, callback, raw=false))]
    fn create_subscription(
        &self,
        msg_type: &Bound<'_, PyAny>,
        topic: &str,
        qos: QosTuple,
        callback: Py<PyAny>,
        raw: bool,
    ) -> PyResult<Subscription> {
        let plan = codec::plan_of_class(msg_type)?;
        let ty = raw_type(&plan)?;
        let p = plan.clone();
        let s = self
            .node
            .create_raw_subscription(
                topic,
                &ty,
                qos_from(qos)?,
                SubscriptionOptions::default(),
                move |m: AnyMessage| {
                    Python::attach(|py| {
                        let arg = if raw {
                            Ok(PyBytes::new(py, m.bytes()).into_any())
                        } else {
                            codec::decode(py, &p, m.bytes())
                        };
                        if let Err(e) = arg.and_then(|a| callback.call1(py, (a,))) {
                            keep_callback_error(e);
                        }
                    })
                },
            )
            .map_err(endpoint_error)?;
        Ok(Subscription {
            subscription: s,
            plan,
        })
    }

    /// A timer that calls `callback` every `period` seconds.
    fn create_timer(&self, period: f64, callback: Py<PyAny>) -> PyResult<Timer> {
        let period = duration("timer period", period)?;
        let t = self
            .node
            .create_timer(period, move || {
                Python::attach(|py| {
                    if let Err(e) = callback.call0(py) {
                        keep_callback_error(e);
                    }
                })
            })
            .map_err(core_error)?;
        Ok(Timer { timer: t })
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

    /// The topics this process's context knows, with their types.
    fn topic_names_and_types(&self) -> Vec<(String, String)> {
        self.node
            .topic_names_and_types()
            .into_iter()
            .map(|(t, ty)| (t, ty.to_string()))
            .collect()
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
        let bytes = match msg.cast::<PyBytes>() {
            Ok(b) => b.as_bytes().to_vec(),
            Err(_) => codec::encode(&self.plan, msg)?,
        };
        py.detach(|| self.publisher.publish(AnyMessage(bytes.into())))
            .map_err(core_error)
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
}

/// A subscription (its callback runs on the executor of its node).
#[pyclass(module = "myelin._myelin", frozen)]
struct Subscription {
    subscription: myelin::Subscription<AnyMessage>,
    #[allow(dead_code)]
    plan: Arc<codec::Plan>,
}

#[pymethods]
impl Subscription {
    fn topic(&self) -> String {
        self.subscription.topic().to_string()
    }

    fn publisher_count(&self) -> usize {
        self.subscription.publisher_count()
    }
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

    fn remove_node(&mut self, node: &Node) -> bool {
        self.exec.remove_node(&node.node)
    }

    /// Run at most one ready callback, waiting up to `timeout` seconds for
    /// one (the GIL released meanwhile). Whether one ran. Raises what the
    /// callback raised, and KeyboardInterrupt on Ctrl-C.
    fn spin_once(&mut self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let timeout = duration("timeout", timeout)?;
        // Wait in slices so that Ctrl-C (Python's SIGINT flag) is seen
        // within 100 ms even when nothing arrives.
        let slice = Duration::from_millis(100);
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let exec = &mut self.exec;
            let ran = py
                .detach(|| exec.spin_once(left.min(slice)))
                .map_err(core_error)?;
            take_callback_error()?;
            py.check_signals()?;
            if ran || left <= slice {
                return Ok(ran);
            }
        }
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
    codec::decode(py, &plan, data)
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
    m.add_class::<Context>()?;
    m.add_class::<Node>()?;
    m.add_class::<Publisher>()?;
    m.add_class::<Subscription>()?;
    m.add_class::<Timer>()?;
    m.add_class::<Executor>()?;
    m.add_function(wrap_pyfunction!(register_type, m)?)?;
    m.add_function(wrap_pyfunction!(type_info, m)?)?;
    m.add_function(wrap_pyfunction!(type_hash, m)?)?;
    m.add_function(wrap_pyfunction!(load_msg, m)?)?;
    m.add_function(wrap_pyfunction!(knows_type, m)?)?;
    m.add_function(wrap_pyfunction!(bundled_types, m)?)?;
    m.add_function(wrap_pyfunction!(serialize, m)?)?;
    m.add_function(wrap_pyfunction!(deserialize, m)?)?;
    Ok(())
}
