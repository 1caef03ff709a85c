//! Transports: how messages leave the process.
//!
//! The intra-process manager delivers within a context;
//! the shared-memory transport (feature `shm`, on by default) connects
//! contexts in other processes (and other contexts of this process) on the
//! same host; the network transport (feature `zenoh`) reaches other hosts
//! (and, when shared memory is off, other processes) through zenoh.
//! `MYELIN_TRANSPORT` chooses at run time: a comma-separated list of `shm`
//! and `zenoh` (`intra` or any value without them: in-process only).

#[cfg(feature = "zenoh")]
pub(crate) mod net;
#[cfg(feature = "shm")]
pub(crate) mod shm;
pub(crate) mod wake;

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A process-unique id for endpoints and contexts (segment names and
/// gids use it).
#[cfg_attr(not(any(feature = "shm", feature = "zenoh")), allow(dead_code))]
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Whether `MYELIN_TRANSPORT` lets `name` run (unset: every transport
/// compiled in).
fn transport_allowed(name: &str) -> bool {
    match std::env::var("MYELIN_TRANSPORT") {
        Ok(v) => v.split(',').any(|t| t.trim() == name),
        Err(_) => true,
    }
}

/// Whether the network transport is compiled in and not turned off by
/// `MYELIN_TRANSPORT`.
pub fn network_enabled() -> bool {
    cfg!(feature = "zenoh") && transport_allowed("zenoh")
}

/// Whether the shared-memory transport is compiled in and not turned off
/// by `MYELIN_TRANSPORT`.
pub fn shared_memory_enabled() -> bool {
    cfg!(feature = "shm") && transport_allowed("shm")
}

/// A publisher or subscription found on this host (see [`endpoints`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredEndpoint {
    /// A publisher (`true`) or a subscription.
    pub is_publisher: bool,
    /// The fully qualified topic name.
    pub topic: String,
    /// The message type name (`*` for a tool that takes any type).
    pub type_name: String,
    /// The schema hash.
    pub type_hash: crate::TypeHash,
    /// The fully qualified node name.
    pub node: String,
    /// The process.
    pub pid: u32,
    /// The QoS it offers (publisher) or requests (subscription).
    pub qos: crate::QoS,
    /// The zenoh session of an endpoint seen over the network (`None`:
    /// found in this host's shared memory).
    pub zid: Option<String>,
}

/// Every live publisher and subscription of `domain` on this host that
/// uses shared memory (the view `myelin topic list` and `myelin node list`
/// print). Internal service topics (`/_srv/...`) are included; empty when
/// shared memory is compiled out.
pub fn endpoints(domain: u32) -> Vec<DiscoveredEndpoint> {
    #[cfg(feature = "shm")]
    {
        let mut errors = Vec::new();
        myelin_shm::endpoint::scan(domain, &mut errors)
            .into_iter()
            .filter(|f| f.alive)
            .map(|f| DiscoveredEndpoint {
                is_publisher: f.info.kind == myelin_shm::endpoint::EndpointKind::Publisher,
                topic: f.info.topic,
                type_name: f.info.type_name,
                type_hash: crate::TypeHash(f.info.type_hash),
                node: f.info.node,
                pid: f.info.pid,
                qos: shm::decode_qos(&f.info.qos),
                zid: None,
            })
            .collect()
    }
    #[cfg(not(feature = "shm"))]
    {
        let _ = domain;
        Vec::new()
    }
}
