//! Topic names, type names and type hashes as rmw_zenoh writes them in
//! key expressions: `<domain>/<topic>/<type>/<hash>`.
//!
//! * The topic loses its leading and trailing `/`; inner slashes stay, so
//!   `/robot1/scan` on domain 0 is `0/robot1/scan/...`.
//! * The type is DDS-mangled: `std_msgs/msg/String` becomes
//!   `std_msgs::msg::dds_::String_` (the name Fast DDS's type support uses).
//! * The hash is the REP-2011 string `RIHS01_<64 hex>` when the type has
//!   one. myelin types without a ROS description use `MYELIN01_<16 hex>` of
//!   their own schema hash, so two myelin processes still only match equal
//!   schemas.

use crate::Error;

/// The characters a key expression chunk cannot contain (zenoh reserves
/// them for wildcards, selectors and verbatim chunks).
const RESERVED: &[char] = &['*', '$', '?', '#'];

/// `std_msgs/msg/String` -> `std_msgs::msg::dds_::String_`; a name without
/// the `pkg/kind/Name` form keeps its text with `/` turned into `::` and
/// reserved characters into `_`.
pub fn dds_type_name(ros: &str) -> String {
    let parts: Vec<&str> = ros.split('/').collect();
    let s = match parts.as_slice() {
        [pkg, kind, name] if !pkg.is_empty() && !kind.is_empty() && !name.is_empty() => {
            format!("{pkg}::{kind}::dds_::{name}_")
        }
        _ => parts.join("::"),
    };
    s.replace(RESERVED, "_")
}

/// The inverse of [`dds_type_name`] for names of the `pkg::kind::dds_::Name_`
/// form (`None` for anything else).
pub fn ros_type_name(dds: &str) -> Option<String> {
    let parts: Vec<&str> = dds.split("::").collect();
    match parts.as_slice() {
        [pkg, kind, "dds_", name] if name.len() > 1 && name.ends_with('_') => {
            Some(format!("{pkg}/{kind}/{}", &name[..name.len() - 1]))
        }
        _ => None,
    }
}

/// The hash chunk for a myelin schema hash without a ROS type description.
pub fn myelin_type_hash(hash: u64) -> String {
    format!("MYELIN01_{hash:016x}")
}

/// `/robot1/scan/` -> `robot1/scan`, checked to be usable in a key
/// expression (no empty chunk, no reserved character).
pub fn topic_chunks(topic: &str) -> Result<&str, Error> {
    let t = topic.trim_matches('/');
    if t.is_empty() || t.split('/').any(str::is_empty) || t.contains(RESERVED) {
        return Err(Error::Name {
            name: topic.to_string(),
            why: "a topic must have at least one non-empty segment and no '*', '$', '?' or '#'",
        });
    }
    Ok(t)
}

/// The data key expression of a topic: `<domain>/<topic>/<type>/<hash>`.
///
/// ```
/// let k = myelin_zenoh::names::topic_key(0, "/chatter", "std_msgs/msg/String", "RIHS01_df66").unwrap();
/// assert_eq!(k, "0/chatter/std_msgs::msg::dds_::String_/RIHS01_df66");
/// ```
pub fn topic_key(domain: u32, topic: &str, type_name: &str, hash: &str) -> Result<String, Error> {
    let t = topic_chunks(topic)?;
    if hash.is_empty() || hash.contains(RESERVED) || hash.contains('/') {
        return Err(Error::Name {
            name: hash.to_string(),
            why: "a type hash must be one key expression chunk",
        });
    }
    Ok(format!("{domain}/{t}/{}/{hash}", dds_type_name(type_name)))
}

/// The key expression matching every type on a topic (a tool that takes
/// any type): `<domain>/<topic>/*/*`.
pub fn topic_key_any_type(domain: u32, topic: &str) -> Result<String, Error> {
    Ok(format!("{domain}/{}/*/*", topic_chunks(topic)?))
}

/// A data key expression taken apart: `(domain, "/topic", dds type, hash)`.
pub fn parse_topic_key(key: &str) -> Option<(u32, String, String, String)> {
    let mut parts: Vec<&str> = key.split('/').collect();
    if parts.len() < 4 {
        return None;
    }
    let hash = parts.pop()?.to_string();
    let ty = parts.pop()?.to_string();
    let domain = parts.first()?.parse().ok()?;
    Some((domain, format!("/{}", parts[1..].join("/")), ty, hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mangles_like_rmw_zenoh() {
        assert_eq!(
            dds_type_name("std_msgs/msg/String"),
            "std_msgs::msg::dds_::String_"
        );
        assert_eq!(
            dds_type_name("example_interfaces/srv/AddTwoInts"),
            "example_interfaces::srv::dds_::AddTwoInts_"
        );
        assert_eq!(dds_type_name("u64"), "u64");
        assert_eq!(dds_type_name("a/b"), "a::b");
        assert_eq!(dds_type_name("x*y"), "x_y");
        assert_eq!(
            ros_type_name("sensor_msgs::msg::dds_::Image_").as_deref(),
            Some("sensor_msgs/msg/Image")
        );
        assert_eq!(ros_type_name("u64"), None);
    }

    #[test]
    fn keys() {
        let h = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
        assert_eq!(
            topic_key(0, "/chatter", "std_msgs/msg/String", h).unwrap(),
            format!("0/chatter/std_msgs::msg::dds_::String_/{h}")
        );
        assert_eq!(
            topic_key(7, "/robot1/scan", "sensor_msgs/msg/LaserScan", "H").unwrap(),
            "7/robot1/scan/sensor_msgs::msg::dds_::LaserScan_/H"
        );
        assert!(topic_key(0, "/", "t", "h").is_err());
        assert!(topic_key(0, "/a//b", "t", "h").is_err());
        assert!(topic_key(0, "/a*", "t", "h").is_err());
        assert_eq!(
            parse_topic_key("7/robot1/scan/sensor_msgs::msg::dds_::LaserScan_/H"),
            Some((
                7,
                "/robot1/scan".into(),
                "sensor_msgs::msg::dds_::LaserScan_".into(),
                "H".into()
            ))
        );
        assert_eq!(parse_topic_key("x/a/b/c"), None);
        assert_eq!(topic_key_any_type(3, "/a/b").unwrap(), "3/a/b/*/*");
    }
}
