//! Transports: how messages leave the process.
//!
//! The intra-process manager delivers within a context;
//! the shared-memory transport (feature `shm`, on by default) connects
//! contexts in other processes (and other contexts of this process) on the
//! same host. `MYELIN_TRANSPORT=intra` turns it off at run time (any value
//! that does not list `shm` does).

#[cfg(feature = "shm")]
pub(crate) mod shm;
pub(crate) mod wake;

/// Whether the shared-memory transport is compiled in and not turned off
/// by `MYELIN_TRANSPORT`.
pub fn shared_memory_enabled() -> bool {
    if !cfg!(feature = "shm") {
        return false;
    }
    match std::env::var("MYELIN_TRANSPORT") {
        Ok(v) => v.split(',').any(|t| t.trim() == "shm"),
        Err(_) => true,
    }
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
            })
            .collect()
    }
    #[cfg(not(feature = "shm"))]
    {
        let _ = domain;
        Vec::new()
    }
}
