//! The topology file: iRobot ros2-performance's JSON topology format
//! (`performance_test_factory/create_new_topology.md`), so existing
//! topology files run unchanged: nodes with `node_name`, `node_namespace`,
//! `number`, `executor_id`, `publishers` (`topic_name`, `msg_type`,
//! `period_ms` or `freq_hz`, `msg_size`, `msg_pass_by`, `qos_*`),
//! `subscribers`, `clients` and `servers`.
//!
//! [`parse`] checks everything before anything starts (types, rates, QoS,
//! that every subscribed topic has a publisher of the same type and every
//! called service a server) and resolves the file into [`NodePlan`]s:
//! copies expanded, names fully qualified, each message's size the
//! benchmark's header plus its type's payload (the message catalogue of
//! `irobot_interfaces_plugin`; `stamped_vector` takes `msg_size`).
//!
//! myelin extensions (ignored by other tools): `"callback_us"` on a
//! subscriber makes its callback busy for that long (to model work, and to
//! test the late / too-late counters).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use myelin::QoS;
use serde::{Deserialize, Serialize};

use super::TopologyError;

/// Bytes of the header every topology message carries: stamp (u64 ns),
/// tracking number (u32), frequency (f32), size (u32).
pub const HEADER: usize = 20;

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

/// The most copies one node entry may ask for (`number`).
pub const MAX_COPIES: usize = 1000;

/// The largest `msg_size` (the shared-memory transport's chunk limit).
pub const MAX_MSG_SIZE: usize = 256 << 20;

/// The period of a publisher or client: `period_ms` or `freq_hz`, from
/// 1 us to 1000 s (0.001 Hz to 1 MHz).
fn rate(period_ms: Option<f64>, freq_hz: Option<f64>) -> Result<Duration, String> {
    match (period_ms, freq_hz) {
        (Some(ms), None) if (1e-3..=1e6).contains(&ms) => Ok(Duration::from_secs_f64(ms / 1000.0)),
        (None, Some(hz)) if (1e-3..=1e6).contains(&hz) => Ok(Duration::from_secs_f64(1.0 / hz)),
        (Some(_), Some(_)) => Err("give period_ms or freq_hz, not both".into()),
        (None, None) => Err("missing: give period_ms or freq_hz".into()),
        (Some(ms), None) => Err(format!("period_ms {ms}: must be 0.001 to 1000000")),
        (None, Some(hz)) => Err(format!("freq_hz {hz}: must be 0.001 to 1000000")),
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

/// Every field name of a topology file, for "did you mean" hints where
/// serde's error does not list the expected ones (the flattened `qos_*`).
const FIELDS: &[&str] = &[
    "nodes",
    "node_name",
    "node_namespace",
    "number",
    "executor_id",
    "publishers",
    "subscribers",
    "clients",
    "servers",
    "topic_name",
    "msg_type",
    "period_ms",
    "freq_hz",
    "msg_size",
    "msg_pass_by",
    "callback_us",
    "service_name",
    "srv_type",
    "qos_history",
    "qos_depth",
    "qos_reliability",
    "qos_durability",
    "qos_liveliness",
    "qos_avoid_ros_namespace_conventions",
    "qos_deadline",
    "qos_lifespan",
    "qos_liveliness_lease_duration",
];

/// Parse `text` (named `file` in errors) and resolve it into nodes,
/// checking everything before anything starts.
pub fn parse(text: &str, file: &str) -> Result<Vec<NodePlan>, TopologyError> {
    let topo: Topology = serde_json::from_str(text).map_err(|e| {
        let mut why = e.to_string();
        if let Some(f) = myelin::names::did_you_mean_field(&why, FIELDS) {
            why.push_str(&format!(" (did you mean `{f}`?)"));
        }
        TopologyError::Syntax {
            file: file.into(),
            line: e.line(),
            column: e.column(),
            why,
        }
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
        if !(1..=MAX_COPIES).contains(&copies) {
            return Err(invalid(
                "number".into(),
                format!("{copies}: must be 1 to {MAX_COPIES}"),
            ));
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
                if let Some(size) = p.msg_size
                    && size > MAX_MSG_SIZE
                {
                    return Err(invalid(
                        f("msg_size"),
                        format!("{size}: must be at most {MAX_MSG_SIZE} bytes"),
                    ));
                }
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
