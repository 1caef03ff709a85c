//! QoS profiles as rosbag2 stores them: the channel metadata
//! `offered_qos_profiles` (a YAML text) and `metadata.yaml`'s
//! `offered_qos_profiles` (a YAML list), one profile per publisher.
//!
//! Written with the enum names and infinite durations of rosbag2 since Jazzy
//! (`history: keep_last`, `sec: 9223372036, nsec: 854775807`); read in that
//! form and in the older numeric one (`history: 1`, `sec: 2147483647`).

use std::time::Duration;

use myelin::{Durability, History, Liveliness, LivelinessKind, QoS, Reliability};
use serde_yaml::{Mapping, Value};

/// rmw's "infinite" duration: `RMW_DURATION_INFINITE` split in seconds and
/// nanoseconds.
const INFINITE: (u64, u64) = (9_223_372_036, 854_775_807);
/// The infinite durations of bags written with Foxy (CycloneDDS; Fast
/// DDS and Connext), which rosbag2 still reads as infinite.
const INFINITE_OLD: [(u64, u64); 2] = [
    (2_147_483_647, 4_294_967_295),
    (2_147_483_647, 2_147_483_647),
];

fn duration_value(d: Option<Duration>) -> Value {
    let (sec, nsec) = d.map_or(INFINITE, |d| (d.as_secs(), u64::from(d.subsec_nanos())));
    let mut m = Mapping::new();
    m.insert("sec".into(), sec.into());
    m.insert("nsec".into(), nsec.into());
    Value::Mapping(m)
}

/// One profile as a YAML mapping.
pub(crate) fn profile_value(q: &QoS) -> Value {
    let mut m = Mapping::new();
    let (history, depth) = match q.history {
        History::KeepLast(d) => ("keep_last", d as u64),
        History::KeepAll => ("keep_all", 0),
    };
    m.insert("history".into(), history.into());
    m.insert("depth".into(), depth.into());
    let reliability = match q.reliability {
        Reliability::Reliable => "reliable",
        Reliability::BestEffort => "best_effort",
    };
    m.insert("reliability".into(), reliability.into());
    let durability = match q.durability {
        Durability::Volatile => "volatile",
        Durability::TransientLocal => "transient_local",
    };
    m.insert("durability".into(), durability.into());
    m.insert("deadline".into(), duration_value(q.deadline));
    m.insert("lifespan".into(), duration_value(q.lifespan));
    let liveliness = match q.liveliness.kind {
        LivelinessKind::Automatic => "automatic",
        LivelinessKind::ManualByTopic => "manual_by_topic",
    };
    m.insert("liveliness".into(), liveliness.into());
    m.insert(
        "liveliness_lease_duration".into(),
        duration_value(q.liveliness.lease),
    );
    m.insert("avoid_ros_namespace_conventions".into(), false.into());
    Value::Mapping(m)
}

/// The profiles as the YAML text of the channel metadata
/// `offered_qos_profiles`.
///
/// ```
/// use myelin::QoS;
/// let q = [QoS::keep_last(7).best_effort()];
/// let yaml = myelin_bag::profiles_to_yaml(&q);
/// assert!(yaml.contains("history: keep_last"));
/// assert_eq!(myelin_bag::profiles_from_yaml(&yaml), q);
/// ```
pub fn profiles_to_yaml(profiles: &[QoS]) -> String {
    let list = Value::Sequence(profiles.iter().map(profile_value).collect());
    serde_yaml::to_string(&list).unwrap_or_default()
}

/// Parse `offered_qos_profiles` (the YAML text of a channel, in the newer
/// named or older numeric form). What cannot be read is left out, never
/// an error: a bag plays with default QoS rather than not at all.
pub fn profiles_from_yaml(yaml: &str) -> Vec<QoS> {
    match serde_yaml::from_str::<Value>(yaml) {
        Ok(v) => profiles_from_value(&v),
        Err(_) => Vec::new(),
    }
}

/// Parse a list of profiles (or a YAML text holding one, as metadata.yaml
/// before version 9 stores it).
pub(crate) fn profiles_from_value(v: &Value) -> Vec<QoS> {
    match v {
        Value::String(s) => profiles_from_yaml(s),
        Value::Sequence(list) => list.iter().filter_map(profile_from_value).collect(),
        _ => Vec::new(),
    }
}

fn enum_of(v: Option<&Value>, names: &[(&str, u64)]) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => names
            .iter()
            .find(|(name, _)| s.eq_ignore_ascii_case(name))
            .map(|(_, n)| *n),
        _ => None,
    }
}

fn duration_of(v: Option<&Value>) -> Option<Duration> {
    let m = v?.as_mapping()?;
    let sec = m.get("sec")?.as_u64()?;
    let nsec = m.get("nsec")?.as_u64()?;
    if (sec, nsec) == INFINITE || INFINITE_OLD.contains(&(sec, nsec)) || (sec, nsec) == (0, 0) {
        return None;
    }
    // Out-of-range values (a corrupt or hostile bag) mean "none".
    if nsec >= 1_000_000_000 || sec > 1_000_000_000 {
        return None;
    }
    Some(Duration::new(sec, nsec as u32))
}

fn profile_from_value(v: &Value) -> Option<QoS> {
    let m = v.as_mapping()?;
    // rmw's enums: 0 is "system default", 3 "unknown".
    let history = enum_of(
        m.get("history"),
        &[("system_default", 0), ("keep_last", 1), ("keep_all", 2)],
    )
    .filter(|h| *h <= 3)?;
    let depth = m
        .get("depth")
        .and_then(Value::as_u64)
        .unwrap_or(10)
        .min(1 << 20) as usize;
    let mut q = match history {
        2 => QoS::keep_all(),
        _ => QoS::keep_last(if depth == 0 { 10 } else { depth }),
    };
    match enum_of(
        m.get("reliability"),
        &[("system_default", 0), ("reliable", 1), ("best_effort", 2)],
    ) {
        Some(2) => q = q.best_effort(),
        _ => q.reliability = Reliability::Reliable,
    }
    if enum_of(
        m.get("durability"),
        &[
            ("system_default", 0),
            ("transient_local", 1),
            ("volatile", 2),
        ],
    ) == Some(1)
    {
        q = q.transient_local();
    }
    q.deadline = duration_of(m.get("deadline"));
    q.lifespan = duration_of(m.get("lifespan"));
    let kind = match enum_of(
        m.get("liveliness"),
        &[
            ("system_default", 0),
            ("automatic", 1),
            ("manual_by_node", 2),
            ("manual_by_topic", 3),
        ],
    ) {
        Some(3) => LivelinessKind::ManualByTopic,
        _ => LivelinessKind::Automatic,
    };
    q.liveliness = Liveliness {
        kind,
        lease: duration_of(m.get("liveliness_lease_duration")),
    };
    Some(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_older_numeric_form_reads() {
        let yaml = "- history: 1\n  depth: 5\n  reliability: 2\n  durability: 1\n  deadline:\n    sec: 2147483647\n    nsec: 4294967295\n  lifespan:\n    sec: 0\n    nsec: 50000000\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 2147483647\n    nsec: 4294967295\n  avoid_ros_namespace_conventions: false\n";
        let q = profiles_from_yaml(yaml);
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].history, History::KeepLast(5));
        assert_eq!(q[0].reliability, Reliability::BestEffort);
        assert_eq!(q[0].durability, Durability::TransientLocal);
        assert_eq!(q[0].deadline, None);
        assert_eq!(q[0].lifespan, Some(Duration::from_millis(50)));
    }

    #[test]
    fn garbage_reads_as_no_profile() {
        for y in ["", "]]]", "- 5", "- history: 99", "{a: b}"] {
            assert!(profiles_from_yaml(y).is_empty(), "{y}");
        }
    }

    proptest! {
        #[test]
        fn profiles_round_trip(depth in 1usize..1000, be: bool, tl: bool, all: bool,
                               deadline in proptest::option::of(1u64..10_000_000_000),
                               manual: bool) {
            let mut q = if all { QoS::keep_all() } else { QoS::keep_last(depth) };
            if be { q = q.best_effort(); }
            if tl { q = q.transient_local(); }
            q.deadline = deadline.map(Duration::from_nanos);
            if manual {
                q.liveliness = Liveliness { kind: LivelinessKind::ManualByTopic, lease: Some(Duration::from_secs(1)) };
            }
            let back = profiles_from_yaml(&profiles_to_yaml(&[q]));
            prop_assert_eq!(back.len(), 1);
            let b = back[0];
            prop_assert_eq!(b.history, q.history);
            prop_assert_eq!(b.reliability, q.reliability);
            prop_assert_eq!(b.durability, q.durability);
            prop_assert_eq!(b.deadline, q.deadline);
            prop_assert_eq!(b.liveliness, q.liveliness);
        }
    }
}
