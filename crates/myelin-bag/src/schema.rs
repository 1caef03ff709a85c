//! `ros2msg` schemas: a type's `.msg` text followed by the text of every
//! message it uses, each after a line of 80 `=` and a line `MSG:
//! pkg/msg/Name` (rosbag2's docs/message_definition_encoding.md), so a
//! reader with no ROS installation can decode every field.

use std::collections::BTreeSet;

/// The line before each dependency's definition.
pub(crate) const SEPARATOR: &str =
    "================================================================================";

/// The full `ros2msg` schema of `type_name` (`pkg/msg/Name`), built from
/// the definitions of `myelin-msgs`; `None` if it does not have the type
/// (or one of its dependencies). A service's event type
/// (`pkg/srv/Name_Event`) has its `.srv` text, as rosbag2 writes it.
///
/// ```
/// let s = myelin_bag::ros2msg_schema("std_msgs/msg/Header").unwrap();
/// assert!(s.contains("\nbuiltin_interfaces/Time stamp\n"));
/// assert!(s.contains("\nMSG: builtin_interfaces/msg/Time\n"));
/// assert!(myelin_bag::ros2msg_schema("my_pkg/msg/Unknown").is_none());
/// ```
pub fn ros2msg_schema(type_name: &str) -> Option<String> {
    let mut seen = BTreeSet::new();
    seen.insert(type_name.to_string());
    let mut order = Vec::new();
    let mut out = if let Some(service) = type_name
        .strip_suffix("_Event")
        .filter(|s| s.contains("/srv/"))
    {
        // A service's introspection events: rosbag2 writes the `.srv`
        // text (request, `---`, response) and the messages both parts
        // use (its docs/message_definition_encoding.md; the bags `ros2
        // bag record --all-services` writes carry these).
        let (_, text) = myelin_msgs::srv_definitions()
            .iter()
            .find(|(n, _)| *n == service)?;
        for part in ["Request", "Response"] {
            dependencies(&format!("{service}_{part}"), &mut seen, &mut order)?;
        }
        text.trim_end().to_string()
    } else {
        dependencies(type_name, &mut seen, &mut order)?;
        text_of(type_name)?.trim_end().to_string()
    };
    out.push('\n');
    for dep in order {
        out.push_str(SEPARATOR);
        out.push('\n');
        out.push_str("MSG: ");
        out.push_str(&dep);
        out.push('\n');
        out.push_str(text_of(&dep)?.trim_end());
        out.push('\n');
    }
    Some(out)
}

/// The `.msg` text of one type (a service's request or response part
/// included).
fn text_of(type_name: &str) -> Option<String> {
    if let Some(t) = myelin_msgs::definition(type_name) {
        return Some(t.to_string());
    }
    // `pkg/srv/Name_Request` / `_Response`: the part of the `.srv` text.
    let (service, part) = type_name.rsplit_once('_')?;
    let (_, text) = myelin_msgs::srv_definitions()
        .iter()
        .find(|(n, _)| *n == service)?;
    let mut halves = text.splitn(2, "\n---");
    let request = halves.next()?;
    let response = halves.next().unwrap_or("");
    match part {
        "Request" => Some(request.to_string()),
        "Response" => Some(response.trim_start_matches('\n').to_string()),
        _ => None,
    }
}

/// The nested message types of `type_name`, depth first, each once.
fn dependencies(
    type_name: &str,
    seen: &mut BTreeSet<String>,
    order: &mut Vec<String>,
) -> Option<()> {
    let spec = myelin_msgs::msg_spec(type_name)?;
    for field in &spec.fields {
        if let Some(nested) = field.ty.base.nested_type_name()
            && seen.insert(nested.clone())
        {
            order.push(nested.clone());
            dependencies(&nested, seen, order)?;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_standard_type_has_a_complete_schema() {
        for (name, _) in myelin_msgs::definitions() {
            let s = ros2msg_schema(name).unwrap_or_else(|| panic!("{name}"));
            let spec = myelin_msgs::msg_spec(name).unwrap();
            for f in &spec.fields {
                if let Some(n) = f.ty.base.nested_type_name() {
                    assert!(s.contains(&format!("MSG: {n}\n")), "{name}: {n}");
                }
            }
        }
    }

    /// As rosbag2 (Jazzy) writes a service event's schema: the `.srv`
    /// text, then the messages its request and response use.
    #[test]
    fn a_service_event_has_the_srv_text_and_its_dependencies() {
        let s = ros2msg_schema("example_interfaces/srv/AddTwoInts_Event").unwrap();
        let fields: Vec<&str> = s.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(fields, ["int64 a", "int64 b", "---", "int64 sum"]);
        let s = ros2msg_schema("rcl_interfaces/srv/SetParameters_Event").unwrap();
        assert!(s.contains("Parameter[] parameters\n---\n"), "{s}");
        assert!(
            s.contains("\nMSG: rcl_interfaces/msg/SetParametersResult\n"),
            "{s}"
        );
        assert!(
            s.contains("\nMSG: rcl_interfaces/msg/ParameterValue\n"),
            "{s}"
        );
    }

    #[test]
    fn dependencies_come_once_depth_first() {
        let s = ros2msg_schema("sensor_msgs/msg/Image").unwrap();
        assert_eq!(s.matches("MSG: std_msgs/msg/Header\n").count(), 1);
        assert_eq!(s.matches("MSG: builtin_interfaces/msg/Time\n").count(), 1);
        let header = s.find("MSG: std_msgs/msg/Header").unwrap();
        let time = s.find("MSG: builtin_interfaces/msg/Time").unwrap();
        assert!(header < time);
    }
}
