//! Node parameters as ROS 2 has them: typed values a node declares (with
//! a descriptor: description, read-only, ranges, dynamic typing), that
//! others read and set through the node's parameter services
//! (`~/get_parameters`, `~/set_parameters`, ... as `ros2 param` calls
//! them), announced on `/parameter_events`, vetted by the node's on-set
//! callbacks, and given initial values from the command line (`--ros-args
//! -p name:=value --params-file FILE`, see
//! [`ContextBuilder::ros_args`](crate::ContextBuilder::ros_args)).
//!
//! ```
//! use myelin_core::parameter::ParameterValue;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
//! let node = ctx.create_node("planner")?;
//! let speed = node.declare_parameter("max_speed", 1.5)?;
//! assert_eq!(speed, ParameterValue::Double(1.5));
//! node.set_parameter("max_speed", 2.0)?;
//! assert_eq!(node.get_parameter("max_speed")?.as_f64(), Some(2.0));
//! // A parameter keeps its type unless declared with dynamic typing.
//! assert!(node.set_parameter("max_speed", "fast").is_err());
//! # Ok(()) }
//! ```

use std::fmt;

use crate::rcl_interfaces::{self as msg, ParameterType};

/// A parameter's value.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ParameterValue {
    /// No value (an undeclared parameter, as the services report it).
    #[default]
    NotSet,
    /// `bool`.
    Bool(bool),
    /// `int64`.
    Integer(i64),
    /// `float64`.
    Double(f64),
    /// `string`.
    String(String),
    /// `byte[]`.
    ByteArray(Vec<u8>),
    /// `bool[]`.
    BoolArray(Vec<bool>),
    /// `int64[]`.
    IntegerArray(Vec<i64>),
    /// `float64[]`.
    DoubleArray(Vec<f64>),
    /// `string[]`.
    StringArray(Vec<String>),
}

impl ParameterValue {
    /// Its [`ParameterType`] constant.
    pub fn type_id(&self) -> u8 {
        match self {
            ParameterValue::NotSet => ParameterType::PARAMETER_NOT_SET,
            ParameterValue::Bool(_) => ParameterType::PARAMETER_BOOL,
            ParameterValue::Integer(_) => ParameterType::PARAMETER_INTEGER,
            ParameterValue::Double(_) => ParameterType::PARAMETER_DOUBLE,
            ParameterValue::String(_) => ParameterType::PARAMETER_STRING,
            ParameterValue::ByteArray(_) => ParameterType::PARAMETER_BYTE_ARRAY,
            ParameterValue::BoolArray(_) => ParameterType::PARAMETER_BOOL_ARRAY,
            ParameterValue::IntegerArray(_) => ParameterType::PARAMETER_INTEGER_ARRAY,
            ParameterValue::DoubleArray(_) => ParameterType::PARAMETER_DOUBLE_ARRAY,
            ParameterValue::StringArray(_) => ParameterType::PARAMETER_STRING_ARRAY,
        }
    }

    /// The type's name as `ros2 param` prints it (`integer`, `double
    /// array`, ...).
    pub fn type_name(&self) -> &'static str {
        type_name(self.type_id())
    }

    /// The value as a `bool`, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            ParameterValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The value as an `i64`, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            ParameterValue::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The value as an `f64`, if it is a double (or an integer).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParameterValue::Double(d) => Some(*d),
            ParameterValue::Integer(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            ParameterValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The message form.
    pub fn to_msg(&self) -> msg::ParameterValue {
        let mut m = msg::ParameterValue {
            r#type: self.type_id(),
            ..Default::default()
        };
        match self.clone() {
            ParameterValue::NotSet => {}
            ParameterValue::Bool(v) => m.bool_value = v,
            ParameterValue::Integer(v) => m.integer_value = v,
            ParameterValue::Double(v) => m.double_value = v,
            ParameterValue::String(v) => m.string_value = v,
            ParameterValue::ByteArray(v) => m.byte_array_value = v,
            ParameterValue::BoolArray(v) => m.bool_array_value = v,
            ParameterValue::IntegerArray(v) => m.integer_array_value = v,
            ParameterValue::DoubleArray(v) => m.double_array_value = v,
            ParameterValue::StringArray(v) => m.string_array_value = v,
        }
        m
    }

    /// From the message form (an unknown type is `None`).
    pub fn from_msg(m: &msg::ParameterValue) -> Option<ParameterValue> {
        Some(match m.r#type {
            ParameterType::PARAMETER_NOT_SET => ParameterValue::NotSet,
            ParameterType::PARAMETER_BOOL => ParameterValue::Bool(m.bool_value),
            ParameterType::PARAMETER_INTEGER => ParameterValue::Integer(m.integer_value),
            ParameterType::PARAMETER_DOUBLE => ParameterValue::Double(m.double_value),
            ParameterType::PARAMETER_STRING => ParameterValue::String(m.string_value.clone()),
            ParameterType::PARAMETER_BYTE_ARRAY => {
                ParameterValue::ByteArray(m.byte_array_value.clone())
            }
            ParameterType::PARAMETER_BOOL_ARRAY => {
                ParameterValue::BoolArray(m.bool_array_value.clone())
            }
            ParameterType::PARAMETER_INTEGER_ARRAY => {
                ParameterValue::IntegerArray(m.integer_array_value.clone())
            }
            ParameterType::PARAMETER_DOUBLE_ARRAY => {
                ParameterValue::DoubleArray(m.double_array_value.clone())
            }
            ParameterType::PARAMETER_STRING_ARRAY => {
                ParameterValue::StringArray(m.string_array_value.clone())
            }
            _ => return None,
        })
    }

    /// A value from YAML text, as `--ros-args -p name:=VALUE` and
    /// parameter files read it: `true`, `3`, `2.5`, `[1, 2]`, `[a, b]`,
    /// anything else a string.
    pub fn from_yaml_str(text: &str) -> ParameterValue {
        match serde_yaml::from_str::<serde_yaml::Value>(text) {
            Ok(v) => ParameterValue::from_yaml(&v)
                .unwrap_or_else(|| ParameterValue::String(text.to_string())),
            Err(_) => ParameterValue::String(text.to_string()),
        }
    }

    /// A value from parsed YAML (`None` for maps, nulls, mixed lists).
    pub fn from_yaml(v: &serde_yaml::Value) -> Option<ParameterValue> {
        use serde_yaml::Value as Y;
        Some(match v {
            Y::Bool(b) => ParameterValue::Bool(*b),
            Y::Number(n) if n.is_i64() => ParameterValue::Integer(n.as_i64()?),
            Y::Number(n) => ParameterValue::Double(n.as_f64()?),
            Y::String(s) => ParameterValue::String(s.clone()),
            Y::Sequence(items) if items.is_empty() => ParameterValue::StringArray(Vec::new()),
            Y::Sequence(items) => {
                if items.iter().all(|i| matches!(i, Y::Bool(_))) {
                    ParameterValue::BoolArray(items.iter().filter_map(Y::as_bool).collect())
                } else if items.iter().all(|i| i.as_i64().is_some()) {
                    ParameterValue::IntegerArray(items.iter().filter_map(Y::as_i64).collect())
                } else if items.iter().all(|i| matches!(i, Y::Number(_))) {
                    ParameterValue::DoubleArray(items.iter().filter_map(Y::as_f64).collect())
                } else if items.iter().all(|i| matches!(i, Y::String(_))) {
                    ParameterValue::StringArray(
                        items
                            .iter()
                            .filter_map(|i| i.as_str().map(str::to_string))
                            .collect(),
                    )
                } else {
                    return None;
                }
            }
            _ => return None,
        })
    }
}

/// The name `ros2 param` gives a [`ParameterType`] constant.
pub fn type_name(type_id: u8) -> &'static str {
    match type_id {
        ParameterType::PARAMETER_NOT_SET => "not set",
        ParameterType::PARAMETER_BOOL => "boolean",
        ParameterType::PARAMETER_INTEGER => "integer",
        ParameterType::PARAMETER_DOUBLE => "double",
        ParameterType::PARAMETER_STRING => "string",
        ParameterType::PARAMETER_BYTE_ARRAY => "byte array",
        ParameterType::PARAMETER_BOOL_ARRAY => "boolean array",
        ParameterType::PARAMETER_INTEGER_ARRAY => "integer array",
        ParameterType::PARAMETER_DOUBLE_ARRAY => "double array",
        ParameterType::PARAMETER_STRING_ARRAY => "string array",
        _ => "unknown",
    }
}

impl fmt::Display for ParameterValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParameterValue::NotSet => f.write_str("(not set)"),
            ParameterValue::Bool(v) => write!(f, "{v}"),
            ParameterValue::Integer(v) => write!(f, "{v}"),
            ParameterValue::Double(v) => write!(f, "{v:?}"),
            ParameterValue::String(v) => write!(f, "{v}"),
            ParameterValue::ByteArray(v) => write!(f, "{v:?}"),
            ParameterValue::BoolArray(v) => write!(f, "{v:?}"),
            ParameterValue::IntegerArray(v) => write!(f, "{v:?}"),
            ParameterValue::DoubleArray(v) => write!(f, "{v:?}"),
            ParameterValue::StringArray(v) => write!(f, "{v:?}"),
        }
    }
}

macro_rules! from_value {
    ($($t:ty => $variant:ident $(as $conv:ty)?),* $(,)?) => {
        $(impl From<$t> for ParameterValue {
            fn from(v: $t) -> Self {
                ParameterValue::$variant((v $(as $conv)?).into())
            }
        })*
    };
}

from_value!(
    bool => Bool,
    i64 => Integer,
    i32 => Integer as i64,
    u32 => Integer as i64,
    f64 => Double,
    f32 => Double as f64,
    String => String,
    &str => String,
    Vec<u8> => ByteArray,
    Vec<bool> => BoolArray,
    Vec<i64> => IntegerArray,
    Vec<f64> => DoubleArray,
    Vec<String> => StringArray,
);

/// A parameter operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParameterError {
    /// The node has no parameter of that name.
    #[error("parameter {0:?} is not declared")]
    NotDeclared(String),
    /// `declare_parameter` twice.
    #[error("parameter {0:?} is already declared")]
    AlreadyDeclared(String),
    /// The name is not a parameter name.
    #[error("invalid parameter name {name:?}: {why}")]
    InvalidName {
        /// The name.
        name: String,
        /// The rule it breaks.
        why: &'static str,
    },
    /// The parameter is read-only.
    #[error("parameter {0:?} is read-only")]
    ReadOnly(String),
    /// The value's type is not the parameter's (and it has no dynamic
    /// typing).
    #[error("parameter {name:?} is {expected}, not {found}")]
    WrongType {
        /// The parameter.
        name: String,
        /// Its type.
        expected: &'static str,
        /// The value's.
        found: &'static str,
    },
    /// The value is outside the parameter's range.
    #[error("parameter {name:?}: {value} is outside {range}")]
    OutOfRange {
        /// The parameter.
        name: String,
        /// The value.
        value: String,
        /// The range, as text.
        range: String,
    },
    /// An on-set callback of the node refused the change.
    #[error("parameter {name:?} rejected: {reason}")]
    Rejected {
        /// The parameter (the first, for several at once).
        name: String,
        /// The callback's reason.
        reason: String,
    },
    /// The node's context is shut down.
    #[error("the context is shut down")]
    ContextShutDown,
}

/// Check a parameter name: non-empty, letters, digits, `_` and `.` (the
/// namespace separator), not starting with a digit or `.`.
pub(crate) fn check_name(name: &str) -> Result<(), ParameterError> {
    let bad = |why| {
        Err(ParameterError::InvalidName {
            name: name.chars().take(80).collect(),
            why,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > 255 {
        return bad("longer than 255 characters");
    }
    if name.starts_with('.') || name.ends_with('.') || name.contains("..") {
        return bad("`.` separates non-empty parts");
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return bad("starts with a digit");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return bad("only letters, digits, `_` and `.` are allowed");
    }
    Ok(())
}

/// Check `value` against a descriptor's ranges (rclcpp's rules: inclusive
/// ends; a step counts from `from_value`, to within 1e-6 for doubles; the
/// ends are always allowed).
pub(crate) fn check_range(
    name: &str,
    value: &ParameterValue,
    d: &msg::ParameterDescriptor,
) -> Result<(), ParameterError> {
    let out = |range: String| ParameterError::OutOfRange {
        name: name.to_string(),
        value: value.to_string(),
        range,
    };
    if let (Some(r), Some(v)) = (d.integer_range.first(), value.as_i64()) {
        let text = format!(
            "[{}, {}]{}",
            r.from_value,
            r.to_value,
            if r.step > 0 {
                format!(" in steps of {}", r.step)
            } else {
                String::new()
            }
        );
        if v < r.from_value || v > r.to_value {
            return Err(out(text));
        }
        if r.step > 0
            && v != r.to_value
            && !(v.wrapping_sub(r.from_value) as u64).is_multiple_of(r.step)
        {
            return Err(out(text));
        }
    }
    if let (Some(r), ParameterValue::Double(v)) = (d.floating_point_range.first(), value) {
        let text = format!(
            "[{}, {}]{}",
            r.from_value,
            r.to_value,
            if r.step > 0.0 {
                format!(" in steps of {}", r.step)
            } else {
                String::new()
            }
        );
        let eps = 1e-6;
        if !v.is_finite() || *v < r.from_value - eps || *v > r.to_value + eps {
            return Err(out(text));
        }
        if r.step > 0.0 && (v - r.to_value).abs() > eps {
            let steps = (v - r.from_value) / r.step;
            if (steps - steps.round()).abs() * r.step > eps {
                return Err(out(text));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_convert_both_ways_and_parse_like_ros() {
        for v in [
            ParameterValue::NotSet,
            ParameterValue::Bool(true),
            ParameterValue::Integer(-3),
            ParameterValue::Double(2.5),
            ParameterValue::String("x".into()),
            ParameterValue::ByteArray(vec![1, 2]),
            ParameterValue::BoolArray(vec![true]),
            ParameterValue::IntegerArray(vec![1, 2]),
            ParameterValue::DoubleArray(vec![0.5]),
            ParameterValue::StringArray(vec!["a".into()]),
        ] {
            assert_eq!(ParameterValue::from_msg(&v.to_msg()), Some(v));
        }
        assert_eq!(
            ParameterValue::from_yaml_str("true"),
            ParameterValue::Bool(true)
        );
        assert_eq!(
            ParameterValue::from_yaml_str("42"),
            ParameterValue::Integer(42)
        );
        assert_eq!(
            ParameterValue::from_yaml_str("4.0"),
            ParameterValue::Double(4.0)
        );
        assert_eq!(
            ParameterValue::from_yaml_str("[1, 2]"),
            ParameterValue::IntegerArray(vec![1, 2])
        );
        assert_eq!(
            ParameterValue::from_yaml_str("[1, 2.5]"),
            ParameterValue::DoubleArray(vec![1.0, 2.5])
        );
        assert_eq!(
            ParameterValue::from_yaml_str("hello world"),
            ParameterValue::String("hello world".into())
        );
        assert_eq!(
            ParameterValue::from_yaml_str("{a: 1}"),
            ParameterValue::String("{a: 1}".into())
        );
    }

    #[test]
    fn names_follow_ros_rules() {
        assert!(check_name("max_speed").is_ok());
        assert!(check_name("limits.max_speed").is_ok());
        for bad in ["", "1a", ".a", "a.", "a..b", "a/b", "a b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ranges_follow_rclcpp() {
        let d = msg::ParameterDescriptor {
            integer_range: vec![msg::IntegerRange {
                from_value: 0,
                to_value: 10,
                step: 3,
            }],
            floating_point_range: vec![msg::FloatingPointRange {
                from_value: 0.0,
                to_value: 1.0,
                step: 0.25,
            }],
            ..Default::default()
        };
        for ok in [0, 3, 9, 10] {
            assert!(
                check_range("p", &ParameterValue::Integer(ok), &d).is_ok(),
                "{ok}"
            );
        }
        for bad in [-1, 4, 11] {
            assert!(
                check_range("p", &ParameterValue::Integer(bad), &d).is_err(),
                "{bad}"
            );
        }
        for ok in [0.0, 0.25, 0.75, 1.0] {
            assert!(
                check_range("p", &ParameterValue::Double(ok), &d).is_ok(),
                "{ok}"
            );
        }
        for bad in [-0.1, 0.3, 1.5, f64::NAN] {
            assert!(
                check_range("p", &ParameterValue::Double(bad), &d).is_err(),
                "{bad}"
            );
        }
    }
}

// ------------------------------------------------------------ node state

/// A declared parameter: its value and descriptor.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) value: ParameterValue,
    pub(crate) descriptor: msg::ParameterDescriptor,
}

/// What an on-set callback is given: the parameters about to change, with
/// their new values; it returns `Err(reason)` to refuse them all.
pub type OnSetCallback = dyn Fn(&[(String, ParameterValue)]) -> Result<(), String> + Send + Sync;

/// A node's parameters (the services and the event publisher that serve
/// them live with the node's entities).
#[derive(Default)]
pub(crate) struct ParamState {
    pub(crate) entries: std::sync::Mutex<std::collections::BTreeMap<String, Entry>>,
    pub(crate) callbacks: std::sync::Mutex<Vec<(u64, std::sync::Arc<OnSetCallback>)>>,
}

/// Initial values from the command line and parameter files, for the
/// nodes they name (see [`ContextBuilder::ros_args`](crate::ContextBuilder::ros_args)).
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    /// (which nodes, name, value), later rules winning.
    rules: Vec<(NodeMatch, String, ParameterValue)>,
}

/// Which nodes a rule applies to.
#[derive(Debug, Clone, PartialEq)]
enum NodeMatch {
    /// `/**`.
    All,
    /// A fully qualified name (`/ns/node`; a bare `node` is `/node`).
    Exact(String),
    /// `/**/node`: a node of that name in any namespace.
    AnyNamespace(String),
}

impl NodeMatch {
    fn parse(key: &str) -> NodeMatch {
        let key = key.trim();
        if key == "/**" || key == "**" {
            NodeMatch::All
        } else if let Some(name) = key.strip_prefix("/**/") {
            NodeMatch::AnyNamespace(name.to_string())
        } else if key.starts_with('/') {
            NodeMatch::Exact(key.to_string())
        } else {
            NodeMatch::Exact(format!("/{key}"))
        }
    }

    fn matches(&self, fqn: &str) -> bool {
        match self {
            NodeMatch::All => true,
            NodeMatch::Exact(f) => f == fqn,
            NodeMatch::AnyNamespace(n) => fqn.rsplit('/').next() == Some(n.as_str()),
        }
    }
}

/// The largest parameter file read.
const MAX_PARAMS_FILE: u64 = 1 << 20;

impl Overrides {
    /// The value the rules give `name` of node `fqn`, if any (the last
    /// matching rule).
    pub(crate) fn value(&self, fqn: &str, name: &str) -> Option<ParameterValue> {
        self.rules
            .iter()
            .rev()
            .find(|(m, n, _)| n == name && m.matches(fqn))
            .map(|(_, _, v)| v.clone())
    }

    /// What the rules say of `use_sim_time`, the last one winning
    /// whichever nodes it names: simulated time is the context's, so a
    /// rule for one node turns it on for all of them (said at debug level).
    pub(crate) fn use_sim_time(&self) -> Result<Option<bool>, String> {
        let Some((m, _, v)) = self
            .rules
            .iter()
            .rev()
            .find(|(_, n, _)| n == "use_sim_time")
        else {
            return Ok(None);
        };
        if *m != NodeMatch::All {
            tracing::debug!(
                "use_sim_time is set for {m:?} only: simulated time is per context, so every node of this one follows it"
            );
        }
        v.as_bool()
            .map(Some)
            .ok_or_else(|| format!("use_sim_time must be true or false, not {v:?}"))
    }

    /// `-p [node:]name:=value`.
    pub(crate) fn add_arg(&mut self, arg: &str) -> Result<(), String> {
        let (lhs, value) = arg
            .split_once(":=")
            .ok_or_else(|| format!("-p {arg:?}: expected name:=value or node:name:=value"))?;
        let (node, name) = match lhs.rsplit_once(':') {
            Some((node, name)) => (NodeMatch::parse(node), name),
            None => (NodeMatch::All, lhs),
        };
        check_name(name).map_err(|e| format!("-p {arg:?}: {e}"))?;
        self.rules
            .push((node, name.to_string(), ParameterValue::from_yaml_str(value)));
        Ok(())
    }

    /// `--params-file FILE`: ROS 2's YAML (`node: {ros__parameters: {..}}`,
    /// nested maps flattened with `.`).
    pub(crate) fn add_file(&mut self, path: &std::path::Path) -> Result<(), String> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("{shown}: not a regular file"));
        }
        if meta.len() > MAX_PARAMS_FILE {
            return Err(format!(
                "{shown}: {} bytes; a parameter file is at most {MAX_PARAMS_FILE}",
                meta.len()
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| {
            format!(
                "{shown}: not YAML: {}",
                e.to_string().chars().take(200).collect::<String>()
            )
        })?;
        let nodes = doc
            .as_mapping()
            .ok_or_else(|| format!("{shown}: expected a map of node names"))?;
        for (node, body) in nodes {
            let node = node
                .as_str()
                .ok_or_else(|| format!("{shown}: a node name is not a string"))?;
            let params = body
                .get("ros__parameters")
                .ok_or_else(|| format!("{shown}: node {node:?} has no `ros__parameters` map"))?;
            let mut flat = Vec::new();
            flatten("", params, &mut flat).map_err(|e| format!("{shown}: node {node:?}: {e}"))?;
            let m = NodeMatch::parse(node);
            for (name, value) in flat {
                self.rules.push((m.clone(), name, value));
            }
        }
        Ok(())
    }
}

/// `map` flattened into `prefix.key` names.
fn flatten(
    prefix: &str,
    map: &serde_yaml::Value,
    out: &mut Vec<(String, ParameterValue)>,
) -> Result<(), String> {
    let m = map.as_mapping().ok_or_else(|| {
        format!(
            "`{}` is not a map",
            if prefix.is_empty() {
                "ros__parameters"
            } else {
                prefix
            }
        )
    })?;
    for (k, v) in m {
        let k = k.as_str().ok_or("a parameter name is not a string")?;
        let name = if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        };
        if v.is_mapping() {
            flatten(&name, v, out)?;
        } else {
            check_name(&name).map_err(|e| e.to_string())?;
            let value = ParameterValue::from_yaml(v)
                .ok_or_else(|| format!("parameter {name:?}: a value of no parameter type"))?;
            out.push((name, value));
        }
    }
    Ok(())
}
