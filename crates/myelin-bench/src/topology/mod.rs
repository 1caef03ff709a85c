//! Whole robot graphs from a JSON file in iRobot ros2-performance's topology
//! format (`performance_test_factory/create_new_topology.md`), so existing
//! topology files run unchanged: nodes with `node_name`, `node_namespace`,
//! `number`, `executor_id`, `publishers` (`topic_name`, `msg_type`,
//! `period_ms` or `freq_hz`, `msg_size`, `msg_pass_by`, `qos_*`) and
//! `subscribers`.
//!
//! Every message carries the benchmark's header (stamp, tracking number,
//! frequency, size) and a payload of its type's size (the message catalogue
//! of `irobot_interfaces_plugin`; `stamped_vector` takes `msg_size`). Each
//! subscription measures latency (receive time - stamp) and counts, as that
//! benchmark defines them: `late` (above min(5 ms, 20% of the period), not
//! too late), `too_late` (above min(50 ms, the period); excluded from the
//! latency statistics), and `lost` (gaps in tracking numbers).
//!
//! myelin extensions (ignored by other tools): `"callback_us"` on a
//! subscriber makes its callback busy for that long (to model work, and to
//! test the late / too-late counters).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, Executor};
use serde::{Deserialize, Serialize};

use crate::harness::stats::LatencyRecorder;
use crate::harness::sys::{CpuSnapshot, MachineInfo};

/// Bytes of the header every topology message carries: stamp (u64 ns),
/// tracking number (u32), frequency (f32), size (u32).
pub const HEADER: usize = 20;

/// A topology file could not be used; each names the file, node and field.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not JSON, or not the topology schema.
    #[error("{file}:{line}:{column}: {why}")]
    Syntax {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        why: String,
    },
    /// Well-formed but unusable.
    #[error("{file}: node {node:?}: {field}: {why}")]
    Invalid {
        /// The file.
        file: String,
        /// The node.
        node: String,
        /// The field (e.g. `publishers[1].msg_type`).
        field: String,
        /// What is wrong.
        why: String,
    },
    /// The run failed.
    #[error("{0}")]
    Run(String),
}

fn default_qos_depth() -> Option<usize> {
    None
}

/// A publisher entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PubSpec {
    /// The topic.
    pub topic_name: String,
    /// The message type (catalogue name, optionally `plugin::name`).
    pub msg_type: String,
    /// Period in milliseconds (or `freq_hz`).
    #[serde(default)]
    pub period_ms: Option<f64>,
    /// Frequency in Hz (or `period_ms`).
    #[serde(default)]
    pub freq_hz: Option<f64>,
    /// Payload bytes of `stamped_vector`.
    #[serde(default)]
    pub msg_size: Option<usize>,
    /// `unique_ptr`, `shared_ptr` or `loaned_msg` (myelin shares every
    /// message; accepted for compatibility).
    #[serde(default)]
    pub msg_pass_by: Option<String>,
    /// QoS fields (`qos_history`, `qos_depth`, `qos_reliability`,
    /// `qos_durability`, ...).
    #[serde(flatten)]
    pub qos: QosSpec,
}

/// A subscriber entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SubSpec {
    /// The topic.
    pub topic_name: String,
    /// The message type.
    pub msg_type: String,
    /// Accepted for compatibility.
    #[serde(default)]
    pub msg_pass_by: Option<String>,
    /// myelin extension: busy time in the callback (microseconds).
    #[serde(default)]
    pub callback_us: Option<u64>,
    /// QoS fields.
    #[serde(flatten)]
    pub qos: QosSpec,
}

/// The `qos_*` fields of an entity.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct QosSpec {
    /// `system_default`, `keep_last`, `keep_all`.
    #[serde(default)]
    pub qos_history: Option<String>,
    /// History depth.
    #[serde(default = "default_qos_depth")]
    pub qos_depth: Option<usize>,
    /// `reliable`, `best_effort`, `system_default`.
    #[serde(default)]
    pub qos_reliability: Option<String>,
    /// `transient_local`, `volatile`, `system_default`.
    #[serde(default)]
    pub qos_durability: Option<String>,
    /// Accepted, only `automatic` / `system_default` are used.
    #[serde(default)]
    pub qos_liveliness: Option<String>,
    /// Accepted and ignored.
    #[serde(default)]
    pub qos_avoid_ros_namespace_conventions: Option<serde_json::Value>,
    /// Only `default` is accepted.
    #[serde(default)]
    pub qos_deadline: Option<serde_json::Value>,
    /// Only `default` is accepted.
    #[serde(default)]
    pub qos_lifespan: Option<serde_json::Value>,
    /// Only `default` is accepted.
    #[serde(default)]
    pub qos_liveliness_lease_duration: Option<serde_json::Value>,
}

/// A client entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// The service.
    pub service_name: String,
    /// The service type (`stamped10b`).
    pub srv_type: String,
    /// Period in milliseconds (or `freq_hz`).
    #[serde(default)]
    pub period_ms: Option<f64>,
    /// Frequency in Hz (or `period_ms`).
    #[serde(default)]
    pub freq_hz: Option<f64>,
    /// QoS fields (accepted; services use myelin's service QoS).
    #[serde(flatten)]
    pub qos: QosSpec,
}

/// A server entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// The service.
    pub service_name: String,
    /// The service type (`stamped10b`).
    pub srv_type: String,
    /// QoS fields (accepted).
    #[serde(flatten)]
    pub qos: QosSpec,
}

/// A node entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// The node's name.
    pub node_name: String,
    /// Its namespace.
    #[serde(default)]
    pub node_namespace: Option<String>,
    /// Copies (`<name>_1` .. `<name>_N`).
    #[serde(default)]
    pub number: Option<usize>,
    /// Nodes with the same id share an executor (one thread each).
    #[serde(default)]
    pub executor_id: Option<u32>,
    /// Publishers.
    #[serde(default)]
    pub publishers: Vec<PubSpec>,
    /// Subscribers.
    #[serde(default)]
    pub subscribers: Vec<SubSpec>,
    /// Service clients: call at a period.
    #[serde(default)]
    pub clients: Vec<ClientSpec>,
    /// Service servers.
    #[serde(default)]
    pub servers: Vec<ServerSpec>,
}

/// A topology file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The nodes.
    pub nodes: Vec<NodeSpec>,
}

/// Payload bytes of a catalogue type (`None`: unknown type).
pub fn payload_size(msg_type: &str, msg_size: Option<usize>) -> Option<usize> {
    let name = msg_type.rsplit("::").next().unwrap_or(msg_type);
    Some(match name {
        "stamped_int64" => 8,
        "stamped3_float32" => 12,
        "stamped4_int32" | "stamped4_float32" => 16,
        "stamped9_float32" => 36,
        "stamped12_float32" => 48,
        "stamped_vector" => msg_size.unwrap_or(0),
        "stamped10b" => 10,
        "stamped100b" => 100,
        "stamped250b" => 250,
        "stamped1kb" => 1024,
        "stamped10kb" => 10240,
        "stamped50kb" => 51200,
        "stamped100kb" => 102400,
        "stamped250kb" => 256000,
        "stamped500kb" => 512000,
        "stamped600kb" => 614400,
        "stamped1mb" => 1048576,
        "stamped4mb" => 4194304,
        "stamped5mb" => 5120000,
        "stamped8mb" => 8388608,
        _ => return None,
    })
}

/// One publisher, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct PubPlan {
    /// Fully qualified topic.
    pub topic: String,
    /// Message type.
    pub msg_type: String,
    /// Period.
    pub period: Duration,
    /// Total message bytes (header + payload).
    pub size: usize,
    /// QoS.
    #[serde(skip)]
    pub qos: QoS,
}

/// One subscriber, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct SubPlan {
    /// Fully qualified topic.
    pub topic: String,
    /// Message type.
    pub msg_type: String,
    /// Busy time in the callback.
    pub callback: Duration,
    /// QoS.
    #[serde(skip)]
    pub qos: QoS,
}

/// One client, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct ClientPlan {
    /// Fully qualified service name.
    pub service: String,
    /// Call period.
    pub period: Duration,
}

/// One node, resolved (copies expanded).
#[derive(Debug, Clone, Serialize)]
pub struct NodePlan {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Executor id.
    pub executor_id: u32,
    /// Publishers.
    pub publishers: Vec<PubPlan>,
    /// Subscribers.
    pub subscribers: Vec<SubPlan>,
    /// Service clients.
    pub clients: Vec<ClientPlan>,
    /// Served services (fully qualified).
    pub servers: Vec<String>,
}

fn qos_of(q: &QosSpec, file: &str, node: &str, field: &str) -> Result<QoS, TopologyError> {
    let bad = |f: &str, why: String| TopologyError::Invalid {
        file: file.into(),
        node: node.into(),
        field: format!("{field}.{f}"),
        why,
    };
    let depth = q.qos_depth.unwrap_or(10);
    let mut qos = match q.qos_history.as_deref() {
        None | Some("system_default") | Some("keep_last") => QoS::keep_last(depth),
        Some("keep_all") => QoS::keep_all(),
        Some(o) => {
            return Err(bad(
                "qos_history",
                format!("{o:?}: use keep_last, keep_all or system_default"),
            ));
        }
    };
    match q.qos_reliability.as_deref() {
        None | Some("system_default") | Some("reliable") => {}
        Some("best_effort") => qos = qos.best_effort(),
        Some(o) => {
            return Err(bad(
                "qos_reliability",
                format!("{o:?}: use reliable, best_effort or system_default"),
            ));
        }
    }
    match q.qos_durability.as_deref() {
        None | Some("system_default") | Some("volatile") => {}
        Some("transient_local") => qos = qos.transient_local(),
        Some(o) => {
            return Err(bad(
                "qos_durability",
                format!("{o:?}: use volatile, transient_local or system_default"),
            ));
        }
    }
    match q.qos_liveliness.as_deref() {
        None | Some("system_default") | Some("automatic") => {}
        Some(o) => {
            return Err(bad(
                "qos_liveliness",
                format!("{o:?}: only automatic is supported"),
            ));
        }
    }
    for (name, v) in [
        ("qos_deadline", &q.qos_deadline),
        ("qos_lifespan", &q.qos_lifespan),
        (
            "qos_liveliness_lease_duration",
            &q.qos_liveliness_lease_duration,
        ),
    ] {
        if let Some(v) = v
            && v.as_str() != Some("default")
        {
            return Err(bad(name, format!("{v}: only \"default\" is supported")));
        }
    }
    Ok(qos)
}

/// The period of a publisher or client: `period_ms` or `freq_hz`.
fn rate(period_ms: Option<f64>, freq_hz: Option<f64>) -> Result<Duration, String> {
    match (period_ms, freq_hz) {
        (Some(ms), None) if ms > 0.0 && ms.is_finite() => Ok(Duration::from_secs_f64(ms / 1000.0)),
        (None, Some(hz)) if hz > 0.0 && hz.is_finite() => Ok(Duration::from_secs_f64(1.0 / hz)),
        (Some(_), Some(_)) => Err("give period_ms or freq_hz, not both".into()),
        (None, None) => Err("missing: give period_ms or freq_hz".into()),
        _ => Err("must be a positive number".into()),
    }
}

fn fq(namespace: &str, topic: &str) -> String {
    if topic.starts_with('/') {
        topic.to_string()
    } else if namespace == "/" || namespace.is_empty() {
        format!("/{topic}")
    } else {
        format!("{}/{topic}", namespace.trim_end_matches('/'))
    }
}

/// Parse `text` (named `file` in errors) and resolve it into nodes,
/// checking everything before anything starts.
pub fn parse(text: &str, file: &str) -> Result<Vec<NodePlan>, TopologyError> {
    let topo: Topology = serde_json::from_str(text).map_err(|e| TopologyError::Syntax {
        file: file.into(),
        line: e.line(),
        column: e.column(),
        why: e.to_string(),
    })?;
    let mut plans = Vec::new();
    let mut names = std::collections::HashSet::new();
    for n in &topo.nodes {
        let invalid = |field: String, why: String| TopologyError::Invalid {
            file: file.into(),
            node: n.node_name.clone(),
            field,
            why,
        };
        for (i, c) in n.clients.iter().enumerate() {
            if c.srv_type.rsplit("::").next() != Some("stamped10b") {
                return Err(invalid(
                    format!("clients[{i}].srv_type"),
                    format!("unknown service type {:?} (known: stamped10b)", c.srv_type),
                ));
            }
        }
        for (i, c) in n.servers.iter().enumerate() {
            if c.srv_type.rsplit("::").next() != Some("stamped10b") {
                return Err(invalid(
                    format!("servers[{i}].srv_type"),
                    format!("unknown service type {:?} (known: stamped10b)", c.srv_type),
                ));
            }
        }
        let copies = n.number.unwrap_or(1);
        if copies == 0 {
            return Err(invalid("number".into(), "must be at least 1".into()));
        }
        for c in 1..=copies {
            let suffix = if n.number.is_some() {
                format!("_{c}")
            } else {
                String::new()
            };
            let name = format!("{}{suffix}", n.node_name);
            let namespace = match &n.node_namespace {
                Some(ns) if !ns.is_empty() => format!("/{}{suffix}", ns.trim_matches('/')),
                _ => "/".to_string(),
            };
            if !names.insert(format!("{namespace}/{name}")) {
                return Err(invalid(
                    "node_name".into(),
                    format!("{name:?} appears twice"),
                ));
            }
            let mut publishers = Vec::new();
            for (i, p) in n.publishers.iter().enumerate() {
                let f = |x: &str| format!("publishers[{i}].{x}");
                let payload = payload_size(&p.msg_type, p.msg_size).ok_or_else(|| {
                    invalid(f("msg_type"), format!("unknown message type {:?} (known: stamped_int64, stamped4_int32, stamped_vector with msg_size, stamped1kb, stamped250kb, ...)", p.msg_type))
                })?;
                let period =
                    rate(p.period_ms, p.freq_hz).map_err(|why| invalid(f("period_ms"), why))?;
                publishers.push(PubPlan {
                    topic: fq(&namespace, &p.topic_name),
                    msg_type: p
                        .msg_type
                        .rsplit("::")
                        .next()
                        .unwrap_or(&p.msg_type)
                        .to_string(),
                    period,
                    size: HEADER + payload,
                    qos: qos_of(&p.qos, file, &n.node_name, &format!("publishers[{i}]"))?,
                });
            }
            let mut subscribers = Vec::new();
            for (i, s) in n.subscribers.iter().enumerate() {
                if payload_size(&s.msg_type, Some(0)).is_none() {
                    return Err(invalid(
                        format!("subscribers[{i}].msg_type"),
                        format!("unknown message type {:?}", s.msg_type),
                    ));
                }
                subscribers.push(SubPlan {
                    topic: fq(&namespace, &s.topic_name),
                    msg_type: s
                        .msg_type
                        .rsplit("::")
                        .next()
                        .unwrap_or(&s.msg_type)
                        .to_string(),
                    callback: Duration::from_micros(s.callback_us.unwrap_or(0)),
                    qos: qos_of(&s.qos, file, &n.node_name, &format!("subscribers[{i}]"))?,
                });
            }
            let mut clients = Vec::new();
            for (i, c) in n.clients.iter().enumerate() {
                let period = rate(c.period_ms, c.freq_hz)
                    .map_err(|why| invalid(format!("clients[{i}].period_ms"), why))?;
                clients.push(ClientPlan {
                    service: fq(&namespace, &c.service_name),
                    period,
                });
            }
            let servers = n
                .servers
                .iter()
                .map(|s| fq(&namespace, &s.service_name))
                .collect();
            plans.push(NodePlan {
                name,
                namespace,
                executor_id: n.executor_id.unwrap_or(0),
                publishers,
                subscribers,
                clients,
                servers,
            });
        }
    }
    // Every subscribed topic has a publisher of the same type.
    let mut published: HashMap<&str, (&str, &str)> = HashMap::new();
    for n in &plans {
        for p in &n.publishers {
            if let Some((ty, other)) = published.get(p.topic.as_str())
                && *ty != p.msg_type
            {
                return Err(TopologyError::Invalid {
                    file: file.into(),
                    node: n.name.clone(),
                    field: format!("publishers (topic {})", p.topic),
                    why: format!("type {} differs from {}'s {}", p.msg_type, other, ty),
                });
            }
            published.insert(&p.topic, (&p.msg_type, &n.name));
        }
    }
    let served: std::collections::HashSet<&str> = plans
        .iter()
        .flat_map(|n| n.servers.iter().map(String::as_str))
        .collect();
    for n in &plans {
        for (i, c) in n.clients.iter().enumerate() {
            if !served.contains(c.service.as_str()) {
                return Err(TopologyError::Invalid {
                    file: file.into(),
                    node: n.name.clone(),
                    field: format!("clients[{i}].service_name"),
                    why: format!("nobody serves {}", c.service),
                });
            }
        }
    }
    for n in &plans {
        for (i, s) in n.subscribers.iter().enumerate() {
            match published.get(s.topic.as_str()) {
                None => {
                    return Err(TopologyError::Invalid {
                        file: file.into(),
                        node: n.name.clone(),
                        field: format!("subscribers[{i}].topic_name"),
                        why: format!("nobody publishes {}", s.topic),
                    });
                }
                Some((ty, by)) if *ty != s.msg_type => {
                    return Err(TopologyError::Invalid {
                        file: file.into(),
                        node: n.name.clone(),
                        field: format!("subscribers[{i}].msg_type"),
                        why: format!(
                            "{} is published as {} by {}, subscribed as {}",
                            s.topic, ty, by, s.msg_type
                        ),
                    });
                }
                _ => {}
            }
        }
    }
    Ok(plans)
}

/// Read and resolve a topology file.
pub fn load(path: &Path) -> Result<Vec<NodePlan>, TopologyError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
        file: file.clone(),
        source,
    })?;
    parse(&text, &file)
}

/// One subscription's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubResult {
    /// The node.
    pub node: String,
    /// The topic.
    pub topic: String,
    /// Message bytes.
    pub size: usize,
    /// Messages received.
    pub received: u64,
    /// Later than min(5 ms, 20% of the period).
    pub late: u64,
    /// Later than min(50 ms, the period) (not in the latency figures).
    pub too_late: u64,
    /// Gaps in tracking numbers.
    pub lost: u64,
    /// Latency (on-time and late messages).
    pub latency: crate::LatencySummary,
    /// Messages expected from the run's duration (rate x time).
    pub expected: u64,
}

/// A topology run.
#[derive(Debug, Clone, Serialize)]
pub struct TopologyReport {
    /// The machine.
    pub machine: MachineInfo,
    /// The file.
    pub file: String,
    /// Placement (`one process`).
    pub placement: String,
    /// Seconds measured.
    pub duration_s: f64,
    /// Per subscription.
    pub subscriptions: Vec<SubResult>,
    /// All subscriptions together.
    pub total: crate::LatencySummary,
    /// Total received / late / too late / lost.
    pub received: u64,
    /// Late.
    pub late: u64,
    /// Too late.
    pub too_late: u64,
    /// Lost.
    pub lost: u64,
    /// CPU time / wall time, percent of one core.
    pub cpu_percent_of_one_core: f64,
    /// The same as a share of all cores (iRobot's definition).
    pub cpu_percent_of_all_cores: f64,
    /// Resident memory at the end (bytes).
    pub rss_bytes: u64,
    /// Stopped early (Ctrl-C).
    pub interrupted: bool,
    /// Every sample (for plots).
    #[serde(skip)]
    pub recorder: LatencyRecorder,
}

struct Tracker {
    period_ns: u64,
    received: u64,
    late: u64,
    too_late: u64,
    lost: u64,
    next_tracking: Option<u32>,
    rec: LatencyRecorder,
}

impl Tracker {
    fn new(period: Duration) -> Arc<Mutex<Tracker>> {
        Arc::new(Mutex::new(Tracker {
            period_ns: period.as_nanos() as u64,
            received: 0,
            late: 0,
            too_late: 0,
            lost: 0,
            next_tracking: None,
            rec: LatencyRecorder::with_time_series(),
        }))
    }

    fn on(&mut self, now: u64, stamp: u64, tracking: u32, freq: f32) {
        let lat = now.saturating_sub(stamp);
        let period = if freq > 0.0 {
            (1e9 / f64::from(freq)) as u64
        } else {
            self.period_ns
        };
        let late_at = (period / 5).min(5_000_000);
        let too_late_at = period.min(50_000_000);
        self.received += 1;
        if let Some(n) = self.next_tracking
            && tracking > n
        {
            self.lost += u64::from(tracking - n);
        }
        self.next_tracking = Some(tracking.wrapping_add(1));
        if lat > too_late_at {
            self.too_late += 1;
            return;
        }
        if lat > late_at {
            self.late += 1;
        }
        self.rec.record(lat);
    }
}

fn header_bytes(b: &mut [u8], stamp: u64, tracking: u32, freq: f32, size: u32) {
    b[0..8].copy_from_slice(&stamp.to_le_bytes());
    b[8..12].copy_from_slice(&tracking.to_le_bytes());
    b[12..16].copy_from_slice(&freq.to_le_bytes());
    b[16..20].copy_from_slice(&size.to_le_bytes());
}

/// What one process measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartResult {
    /// Per subscription of this process's nodes.
    pub subscriptions: Vec<SubResult>,
    /// Every latency sample (ns) of on-time and late messages.
    pub samples: Vec<(f64, u64)>,
    /// CPU time of the process during the measurement (ns).
    pub cpu_ns: u64,
    /// Resident memory at the end (bytes).
    pub rss_bytes: u64,
    /// Seconds measured.
    pub elapsed_s: f64,
    /// Stopped early.
    pub interrupted: bool,
}

/// Build `mine` (a subset of `all`) on `ctx`, start publishing at
/// `start_at_ns` (monotonic clock, shared by every process of the host),
/// measure for `duration`.
fn run_nodes(
    all: &[NodePlan],
    mine: &[usize],
    ctx: &Context,
    start_at_ns: u64,
    duration: Duration,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f64),
) -> Result<PartResult, TopologyError> {
    let err = |e: &dyn std::fmt::Display| TopologyError::Run(e.to_string());
    let mut nodes = Vec::new();
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    // (node, topic, message size, tracker, period) per subscription.
    type Tracked = (String, String, usize, Arc<Mutex<Tracker>>, Duration);
    let mut trackers: Vec<Tracked> = Vec::new();
    let mut periods: HashMap<String, (Duration, usize)> = HashMap::new();
    for n in all {
        for p in &n.publishers {
            periods.insert(p.topic.clone(), (p.period, p.size));
        }
    }
    let running = Arc::new(AtomicBool::new(false));
    for &i in mine {
        let n = &all[i];
        let node = ctx
            .create_node_in(&n.name, &n.namespace)
            .map_err(|e| err(&e))?;
        for s in &n.subscribers {
            let (period, size) = periods[&s.topic];
            let t = Tracker::new(period);
            trackers.push((n.name.clone(), s.topic.clone(), size, t.clone(), period));
            let busy = s.callback;
            let on = running.clone();
            keep.push(Box::new(
                node.create_subscription(&s.topic, s.qos, move |m: &Blob| {
                    let now = crate::harness::now_ns();
                    if m.len() >= HEADER && on.load(Ordering::Relaxed) {
                        let stamp = u64::from_le_bytes(m[0..8].try_into().expect("8"));
                        let tracking = u32::from_le_bytes(m[8..12].try_into().expect("4"));
                        let freq = f32::from_le_bytes(m[12..16].try_into().expect("4"));
                        t.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .on(now, stamp, tracking, freq);
                    }
                    if !busy.is_zero() {
                        let until = Instant::now() + busy;
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                    }
                })
                .map_err(|e| err(&e))?,
            ));
        }
        for p in &n.publishers {
            let publisher = node
                .create_publisher::<Blob>(&p.topic, p.qos)
                .map_err(|e| err(&e))?;
            let size = p.size;
            let freq = (1.0 / p.period.as_secs_f64()) as f32;
            let mut tracking = 0u32;
            let on = running.clone();
            let template = vec![0u8; size];
            keep.push(Box::new(
                node.create_timer(p.period, move || {
                    if !on.load(Ordering::Relaxed) {
                        return;
                    }
                    // Build the message first (the payload is the node's
                    // work), then stamp it: latency is publish to receive.
                    let mut msg = template.clone();
                    header_bytes(
                        &mut msg,
                        crate::harness::now_ns(),
                        tracking,
                        freq,
                        size as u32,
                    );
                    tracking = tracking.wrapping_add(1);
                    let _ = publisher.publish(Blob::from(msg));
                })
                .map_err(|e| err(&e))?,
            ));
        }
        for srv in &n.servers {
            // Echo the request's header in a stamped10b response.
            keep.push(Box::new(
                node.create_service::<Blob, Blob>(srv, |req: Blob| {
                    let mut resp = vec![0u8; HEADER + 10];
                    let n = req.len().min(HEADER);
                    resp[..n].copy_from_slice(&req[..n]);
                    Blob::from(resp)
                })
                .map_err(|e| err(&e))?,
            ));
        }
        for c in &n.clients {
            let client = node
                .create_client::<Blob, Blob>(&c.service)
                .map_err(|e| err(&e))?;
            let t = Tracker::new(c.period);
            trackers.push((
                n.name.clone(),
                format!("{} (service)", c.service),
                HEADER + 10,
                t.clone(),
                c.period,
            ));
            let on = running.clone();
            let freq = (1.0 / c.period.as_secs_f64()) as f32;
            let timeout = c.period.max(Duration::from_millis(100)) * 10;
            let mut tracking = 0u32;
            keep.push(Box::new(
                node.create_timer(c.period, move || {
                    if !on.load(Ordering::Relaxed) {
                        return;
                    }
                    let mut req = vec![0u8; HEADER + 10];
                    let t0 = crate::harness::now_ns();
                    header_bytes(&mut req, t0, tracking, freq, (HEADER + 10) as u32);
                    let seq = tracking;
                    tracking = tracking.wrapping_add(1);
                    // A call's latency: request sent to response received.
                    let answered = client.call(Blob::from(req), timeout).is_ok();
                    let mut g = t.lock().unwrap_or_else(|e| e.into_inner());
                    if answered {
                        g.on(crate::harness::now_ns(), t0, seq, freq);
                    } else {
                        g.next_tracking = Some(seq.wrapping_add(1));
                        g.lost += 1;
                    }
                })
                .map_err(|e| err(&e))?,
            ));
        }
        nodes.push((n.executor_id, node));
    }
    // One executor (and thread) per executor id.
    let mut groups: BTreeMap<u32, Executor> = BTreeMap::new();
    for (id, node) in &nodes {
        groups
            .entry(*id)
            .or_default()
            .add_node(node)
            .map_err(|e| err(&e))?;
    }
    let mut stops = Vec::new();
    let mut threads = Vec::new();
    for (_, mut exec) in groups {
        stops.push(exec.stop_handle());
        threads.push(std::thread::spawn(move || exec.spin()));
    }
    while crate::harness::now_ns() < start_at_ns && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let cpu0 = CpuSnapshot::now();
    let start = Instant::now();
    running.store(true, Ordering::Relaxed);
    let mut interrupted = false;
    while start.elapsed() < duration {
        if stop.load(Ordering::Relaxed) || ctx.is_shut_down() {
            interrupted = true;
            break;
        }
        std::thread::sleep(
            Duration::from_millis(100).min(duration.saturating_sub(start.elapsed())),
        );
        progress((start.elapsed().as_secs_f64() / duration.as_secs_f64()).min(1.0));
    }
    running.store(false, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let usage = CpuSnapshot::now().since(&cpu0);
    // Let in-flight messages land (not counted: `running` is off).
    std::thread::sleep(Duration::from_millis(20));
    for s in &stops {
        s.stop();
    }
    for t in threads {
        let _ = t.join();
    }
    let mut subs = Vec::new();
    let mut samples = Vec::new();
    for (node, topic, size, t, period) in trackers {
        let t = t.lock().unwrap_or_else(|e| e.into_inner());
        samples.extend_from_slice(t.rec.time_series());
        subs.push(SubResult {
            node,
            topic,
            size,
            received: t.received,
            late: t.late,
            too_late: t.too_late,
            lost: t.lost,
            latency: t.rec.summary(),
            expected: (elapsed.as_secs_f64() / period.as_secs_f64()) as u64,
        });
    }
    Ok(PartResult {
        subscriptions: subs,
        samples,
        cpu_ns: usage.cpu_ns,
        rss_bytes: crate::harness::sys::current_rss_bytes(),
        elapsed_s: elapsed.as_secs_f64(),
        interrupted,
    })
}

fn report_of(file: &str, placement: String, parts: Vec<PartResult>) -> TopologyReport {
    let mut rec = LatencyRecorder::with_time_series();
    let mut subs = Vec::new();
    let (mut cpu_ns, mut rss, mut elapsed, mut interrupted) = (0u64, 0u64, 0f64, false);
    for p in parts {
        for (t, ns) in &p.samples {
            rec.record_at(*t, *ns);
        }
        subs.extend(p.subscriptions);
        cpu_ns += p.cpu_ns;
        rss += p.rss_bytes;
        elapsed = elapsed.max(p.elapsed_s);
        interrupted |= p.interrupted;
    }
    let sum = |f: fn(&SubResult) -> u64| subs.iter().map(f).sum::<u64>();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let one = cpu_ns as f64 / (elapsed * 1e9).max(1.0) * 100.0;
    TopologyReport {
        machine: MachineInfo::detect(),
        file: file.into(),
        placement,
        duration_s: elapsed,
        received: sum(|s| s.received),
        late: sum(|s| s.late),
        too_late: sum(|s| s.too_late),
        lost: sum(|s| s.lost),
        subscriptions: subs,
        total: rec.summary(),
        cpu_percent_of_one_core: one,
        cpu_percent_of_all_cores: one / cores,
        rss_bytes: rss,
        interrupted,
        recorder: rec,
    }
}

/// Run the graph in this process for `duration` (nodes with the same
/// `executor_id` share an executor thread). `progress` is called about
/// every 100 ms with the elapsed fraction; `stop` ends the run early.
pub fn run_in_process(
    plans: &[NodePlan],
    file: &str,
    duration: Duration,
    stop: Arc<AtomicBool>,
    mut progress: impl FnMut(f64),
) -> Result<TopologyReport, TopologyError> {
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .map_err(|e| TopologyError::Run(e.to_string()))?;
    let all: Vec<usize> = (0..plans.len()).collect();
    let part = run_nodes(
        plans,
        &all,
        &ctx,
        crate::harness::now_ns(),
        duration,
        &stop,
        &mut progress,
    )?;
    Ok(report_of(file, "one process".into(), vec![part]))
}

/// How nodes are spread over processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Every node its own process.
    PerNode,
    /// Nodes with the same `executor_id` in one process.
    PerExecutor,
    /// Named processes and their nodes (see [`load_placement`]).
    Groups(BTreeMap<String, Vec<String>>),
}

/// Read a placement file: a JSON object from process name to the node
/// names it runs, e.g. `{"perception": ["camera", "watermark"], "ui":
/// ["view"]}`. Every node of the topology must be placed exactly once.
pub fn load_placement(path: &Path, plans: &[NodePlan]) -> Result<Placement, TopologyError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
        file: file.clone(),
        source,
    })?;
    let groups: BTreeMap<String, Vec<String>> =
        serde_json::from_str(&text).map_err(|e| TopologyError::Syntax {
            file: file.clone(),
            line: e.line(),
            column: e.column(),
            why: e.to_string(),
        })?;
    let mut seen = std::collections::HashSet::new();
    for (process, nodes) in &groups {
        for n in nodes {
            if !plans.iter().any(|p| &p.name == n) {
                return Err(TopologyError::Invalid {
                    file: file.clone(),
                    node: n.clone(),
                    field: format!("process {process:?}"),
                    why: "no such node in the topology".into(),
                });
            }
            if !seen.insert(n.clone()) {
                return Err(TopologyError::Invalid {
                    file: file.clone(),
                    node: n.clone(),
                    field: format!("process {process:?}"),
                    why: "placed twice".into(),
                });
            }
        }
    }
    if let Some(missing) = plans.iter().find(|p| !seen.contains(&p.name)) {
        return Err(TopologyError::Invalid {
            file,
            node: missing.name.clone(),
            field: "placement".into(),
            why: "not placed in any process".into(),
        });
    }
    Ok(Placement::Groups(groups))
}

const CHILD_ENV: &str = "MYELIN_TOPOLOGY_CHILD";
const RESULT_MARK: &str = "MYELIN_TOPOLOGY_RESULT ";

/// Run as one process of a multi-process topology run if started as one
/// (call first thing in `main`; returns only if not).
pub fn child_if_requested() {
    crate::harness::processes::run_role(CHILD_ENV, "topology child", |spec| {
        let part = child(spec)?;
        println!(
            "{RESULT_MARK}{}",
            serde_json::to_string(&part).map_err(|e| TopologyError::Run(e.to_string()))?
        );
        Ok::<(), TopologyError>(())
    });
}

/// `file|domain|i,j,k|start_at_ns|duration_s|shm or zenoh config file`
fn child(spec: &str) -> Result<PartResult, TopologyError> {
    let bad = || TopologyError::Run(format!("bad {CHILD_ENV} {spec:?}"));
    let parts: Vec<&str> = spec.split('|').collect();
    let [file, domain, nodes, start, secs, transport] = parts[..] else {
        return Err(bad());
    };
    let plans = load(Path::new(file))?;
    let domain: u32 = domain.parse().map_err(|_| bad())?;
    let mine: Vec<usize> = nodes
        .split(',')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let start: u64 = start.parse().map_err(|_| bad())?;
    let secs: f64 = secs.parse().map_err(|_| bad())?;
    let builder = Context::builder().domain_id(domain).handle_signals(true);
    let builder = if transport == "shm" {
        builder.shared_memory(true).network(false)
    } else {
        builder.shared_memory(false).zenoh_config(transport)
    };
    let ctx = builder
        .build()
        .map_err(|e| TopologyError::Run(e.to_string()))?;
    let stop = AtomicBool::new(false);
    run_nodes(
        &plans,
        &mine,
        &ctx,
        start,
        Duration::from_secs_f64(secs),
        &stop,
        &mut |_| {},
    )
}

/// How the processes of a multi-process run talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcTransport {
    /// Shared memory (zenoh off).
    SharedMemory,
    /// zenoh with shared memory off, through a router this process runs
    /// on a free loopback port (feature `zenoh`).
    Zenoh,
}

/// Run the graph across processes over shared memory: one process per node
/// or per executor id, all started together after a discovery head start.
pub fn run_in_processes(
    plans: &[NodePlan],
    path: &Path,
    placement: Placement,
    duration: Duration,
    progress: impl FnMut(f64),
) -> Result<TopologyReport, TopologyError> {
    run_in_processes_over(
        plans,
        path,
        placement,
        ProcTransport::SharedMemory,
        duration,
        progress,
    )
}

/// [`run_in_processes`] over a chosen transport.
pub fn run_in_processes_over(
    plans: &[NodePlan],
    path: &Path,
    placement: Placement,
    transport: ProcTransport,
    duration: Duration,
    mut progress: impl FnMut(f64),
) -> Result<TopologyReport, TopologyError> {
    let err = |e: &dyn std::fmt::Display| TopologyError::Run(e.to_string());
    #[cfg(feature = "zenoh")]
    let router = match transport {
        ProcTransport::Zenoh => {
            Some(crate::scenarios::net::LoopbackRouter::start().map_err(|e| err(&e))?)
        }
        ProcTransport::SharedMemory => None,
    };
    #[cfg(feature = "zenoh")]
    let transport_spec = router
        .as_ref()
        .map_or_else(|| "shm".to_string(), |r| r.config.display().to_string());
    #[cfg(not(feature = "zenoh"))]
    let transport_spec = match transport {
        ProcTransport::SharedMemory => "shm".to_string(),
        ProcTransport::Zenoh => {
            return Err(err(&"zenoh placement needs the `zenoh` feature"));
        }
    };
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, n) in plans.iter().enumerate() {
        let key = match &placement {
            Placement::PerNode => format!("{i:04}"),
            Placement::PerExecutor => format!("{:010}", n.executor_id),
            Placement::Groups(g) => g
                .iter()
                .find(|(_, nodes)| nodes.contains(&n.name))
                .map_or_else(|| format!("unplaced {i}"), |(k, _)| k.clone()),
        };
        groups.entry(key).or_default().push(i);
    }
    let domain = crate::harness::processes::domain(13);
    // Discovery head start: every process connects before publishing.
    let head = Duration::from_millis(1500 + 50 * groups.len() as u64);
    let start_at = crate::harness::now_ns() + head.as_nanos() as u64;
    let exe = std::env::current_exe().map_err(|e| err(&e))?;
    let mut children = Vec::new();
    for nodes in groups.values() {
        let list: Vec<String> = nodes.iter().map(|i| i.to_string()).collect();
        let spec = format!(
            "{}|{domain}|{}|{start_at}|{}|{transport_spec}",
            path.display(),
            list.join(","),
            duration.as_secs_f64()
        );
        let child = std::process::Command::new(&exe)
            .args(["topology_role", "--exact", "--nocapture"])
            .env(CHILD_ENV, spec)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| err(&e))?;
        children.push(child);
    }
    let t0 = Instant::now();
    let total = head + duration;
    // Read every child's output while it runs (a result bigger than the
    // pipe buffer must not block its writer).
    let waiters: Vec<_> = children
        .into_iter()
        .map(|c| std::thread::spawn(move || c.wait_with_output()))
        .collect();
    while !waiters.iter().all(|w| w.is_finished()) {
        progress((t0.elapsed().as_secs_f64() / total.as_secs_f64()).min(1.0));
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut outputs = Vec::new();
    for w in waiters {
        let out = w
            .join()
            .map_err(|_| err(&"a waiter thread panicked"))?
            .map_err(|e| err(&e))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let part = text
            .lines()
            .find_map(|l| l.strip_prefix(RESULT_MARK))
            .ok_or_else(|| {
                let why = text
                    .lines()
                    .find(|l| l.contains("error"))
                    .unwrap_or("no result");
                TopologyError::Run(format!("a topology process failed: {why}"))
            })?;
        outputs.push(serde_json::from_str::<PartResult>(part).map_err(|e| err(&e))?);
    }
    let how = match transport {
        ProcTransport::SharedMemory => "",
        ProcTransport::Zenoh => ", zenoh",
    };
    let label = match placement {
        Placement::PerNode => format!("{} processes (per node{how})", outputs.len()),
        Placement::PerExecutor => format!("{} processes (per executor{how})", outputs.len()),
        Placement::Groups(_) => format!("{} processes (placement file{how})", outputs.len()),
    };
    Ok(report_of(&path.display().to_string(), label, outputs))
}

/// The report as a table (one row per subscription, then the total).
pub fn render(r: &TopologyReport) -> String {
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
    let mut out = format!(
        "{:<14} {:<12} {:>8} {:>8} {:>6} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9}\n",
        "node",
        "topic",
        "size",
        "received",
        "late",
        "too_late",
        "lost",
        "mean us",
        "p50 us",
        "p99 us",
        "max us"
    );
    for s in &r.subscriptions {
        out += &format!(
            "{:<14} {:<12} {:>8} {:>8} {:>6} {:>8} {:>6} {:>9.1} {:>9} {:>9} {:>9}\n",
            s.node,
            s.topic,
            s.size,
            s.received,
            s.late,
            s.too_late,
            s.lost,
            s.latency.mean / 1000.0,
            us(s.latency.p50),
            us(s.latency.p99),
            us(s.latency.max)
        );
    }
    out += &format!(
        "total: {} received, {} late ({:.2}%), {} too late, {} lost; latency mean {:.1} us, p50 {} us, p99 {} us, max {} us\n",
        r.received,
        r.late,
        r.late as f64 * 100.0 / r.received.max(1) as f64,
        r.too_late,
        r.lost,
        r.total.mean / 1000.0,
        us(r.total.p50),
        us(r.total.p99),
        us(r.total.max)
    );
    out += &format!(
        "cpu: {:.2}% of one core ({:.2}% of all cores); rss {:.1} MB; {} over {:.1} s{}\n",
        r.cpu_percent_of_one_core,
        r.cpu_percent_of_all_cores,
        r.rss_bytes as f64 / 1e6,
        r.placement,
        r.duration_s,
        if r.interrupted { " (interrupted)" } else { "" }
    );
    out
}
