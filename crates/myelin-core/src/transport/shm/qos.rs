//! The QoS in the 64 opaque bytes of a shared-memory endpoint description.

use std::time::Duration;

use myelin_shm::endpoint::{EndpointInfo, QOS_BYTES};

use crate::qos::{Durability, History, Liveliness, LivelinessKind, QoS, Reliability};

/// Encode `q` for an endpoint description.
pub(crate) fn encode_qos(q: &QoS) -> [u8; QOS_BYTES] {
    let mut b = [0u8; QOS_BYTES];
    let (kind, depth) = match q.history {
        History::KeepLast(d) => (0u8, d as u64),
        History::KeepAll => (1u8, 0),
    };
    b[0] = kind;
    b[1] = (q.reliability == Reliability::Reliable) as u8;
    b[2] = (q.durability == Durability::TransientLocal) as u8;
    b[3] = match q.liveliness.kind {
        LivelinessKind::Automatic => 0,
        LivelinessKind::ManualByTopic => 1,
    };
    let ns = |d: Option<Duration>| d.map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64);
    b[8..16].copy_from_slice(&depth.to_le_bytes());
    b[16..24].copy_from_slice(&(q.max_samples as u64).to_le_bytes());
    b[24..32].copy_from_slice(&ns(q.deadline).to_le_bytes());
    b[32..40].copy_from_slice(&ns(q.lifespan).to_le_bytes());
    b[40..48].copy_from_slice(&ns(q.liveliness.lease).to_le_bytes());
    b
}

/// Decode (untrusted bytes: any value gives some QoS).
pub(crate) fn decode_qos(b: &[u8; QOS_BYTES]) -> QoS {
    let u = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().expect("8 bytes"));
    let d = |v: u64| (v != 0).then(|| Duration::from_nanos(v));
    QoS {
        history: if b[0] == 1 {
            History::KeepAll
        } else {
            History::KeepLast(u(8..16).min(1 << 20) as usize)
        },
        reliability: if b[1] == 1 {
            Reliability::Reliable
        } else {
            Reliability::BestEffort
        },
        durability: if b[2] == 1 {
            Durability::TransientLocal
        } else {
            Durability::Volatile
        },
        max_samples: u(16..24).min(1 << 24) as usize,
        deadline: d(u(24..32)),
        lifespan: d(u(32..40)),
        liveliness: Liveliness {
            kind: if b[3] == 1 {
                LivelinessKind::ManualByTopic
            } else {
                LivelinessKind::Automatic
            },
            lease: d(u(40..48)),
        },
        // Publisher-local: not announced.
        max_blocking_time: crate::qos::DEFAULT_MAX_BLOCKING_TIME,
    }
}

/// A subscription that takes any type (`AnyMessage`).
pub(crate) fn is_any_info(i: &EndpointInfo) -> bool {
    i.type_hash == myelin_shm::endpoint::ANY_TYPE
        && i.type_name == myelin_shm::endpoint::ANY_TYPE_NAME
}
