//! A node's parameters (see [`crate::parameter`]): declaring, reading and
//! setting them, the on-set callbacks, the `/parameter_events` they
//! announce and the six services ROS 2 nodes serve them through.

use std::sync::{Arc, Weak};

use crate::locks::lock;
use crate::parameter::{self, Entry, OnSetCallback, ParameterError, ParameterValue};
use crate::publisher::Publisher;
use crate::qos::QoS;
use crate::rcl_interfaces as msg;
use crate::runtime::NodeInner;

use super::Node;

/// What serves a node's parameters: the event publisher and the services
/// (held so they stay up; dropped with the node's last handle).
struct Entities {
    events: Publisher<msg::ParameterEvent>,
    _services: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

/// Removes an on-set callback when dropped
/// ([`Node::add_on_set_parameters_callback`]).
#[must_use = "the callback is removed when this is dropped"]
pub struct OnSetParametersHandle {
    node: Weak<NodeInner>,
    id: u64,
}

impl Drop for OnSetParametersHandle {
    fn drop(&mut self) {
        if let Some(n) = self.node.upgrade() {
            lock(&n.params.callbacks).retain(|(id, _)| *id != self.id);
        }
    }
}

impl std::fmt::Debug for OnSetParametersHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnSetParametersHandle")
            .field("id", &self.id)
            .finish()
    }
}

/// QoS of `/parameter_events`, as rclcpp's.
fn events_qos() -> QoS {
    QoS::keep_last(1000)
}

impl Node {
    /// Declare a parameter with a default value; returns the value it
    /// starts with: an initial value given on the command line or in a
    /// parameter file for this node (see
    /// [`ContextBuilder::ros_args`](crate::ContextBuilder::ros_args)), else
    /// `default`. The type of that value is the parameter's type from now
    /// on. The node's on-set callbacks see it first; `/parameter_events`
    /// announces it.
    ///
    /// The first parameter also starts what ROS 2 nodes serve parameters
    /// through: `~/get_parameters`, `~/set_parameters`,
    /// `~/set_parameters_atomically`, `~/list_parameters`,
    /// `~/describe_parameters`, `~/get_parameter_types` (run by the node's
    /// executor) and a `/parameter_events` publisher, so `ros2 param` and
    /// `myelin param` reach it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("camera")?;
    /// let fps = node.declare_parameter("fps", 30)?;
    /// assert_eq!(fps.as_i64(), Some(30));
    /// # Ok(()) }
    /// ```
    pub fn declare_parameter(
        &self,
        name: &str,
        default: impl Into<ParameterValue>,
    ) -> Result<ParameterValue, ParameterError> {
        self.declare_parameter_with(name, default, msg::ParameterDescriptor::default())
    }

    /// [`declare_parameter`](Self::declare_parameter) with a descriptor:
    /// a description, `read_only`, `dynamic_typing`, an integer or
    /// floating-point range (checked at every set).
    ///
    /// ```
    /// use myelin_core::rcl_interfaces::{IntegerRange, ParameterDescriptor};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("motor")?;
    /// let limits = ParameterDescriptor {
    ///     description: "current limit (mA)".into(),
    ///     integer_range: vec![IntegerRange { from_value: 0, to_value: 2000, step: 0 }],
    ///     ..Default::default()
    /// };
    /// node.declare_parameter_with("current_limit", 500, limits)?;
    /// assert!(node.set_parameter("current_limit", 5000).is_err());
    /// # Ok(()) }
    /// ```
    pub fn declare_parameter_with(
        &self,
        name: &str,
        default: impl Into<ParameterValue>,
        mut descriptor: msg::ParameterDescriptor,
    ) -> Result<ParameterValue, ParameterError> {
        parameter::check_name(name)?;
        if self.inner.ctx.is_shut_down() {
            return Err(ParameterError::ContextShutDown);
        }
        let value = self
            .inner
            .ctx
            .param_overrides
            .value(&self.inner.fqn, name)
            .unwrap_or_else(|| default.into());
        if lock(&self.inner.params.entries).contains_key(name) {
            return Err(ParameterError::AlreadyDeclared(name.to_string()));
        }
        descriptor.name = name.to_string();
        descriptor.r#type = value.type_id();
        parameter::check_range(name, &value, &descriptor)?;
        run_callbacks(&self.inner, &[(name.to_string(), value.clone())])?;
        {
            let mut entries = lock(&self.inner.params.entries);
            if entries.contains_key(name) {
                return Err(ParameterError::AlreadyDeclared(name.to_string()));
            }
            entries.insert(
                name.to_string(),
                Entry {
                    value: value.clone(),
                    descriptor,
                },
            );
        }
        start_entities(&self.inner);
        publish_event(&self.inner, |e| {
            e.new_parameters.push(msg::Parameter {
                name: name.to_string(),
                value: value.to_msg(),
            })
        });
        Ok(value)
    }

    /// Remove a parameter (not a read-only one); `/parameter_events`
    /// announces it.
    pub fn undeclare_parameter(&self, name: &str) -> Result<(), ParameterError> {
        let removed = {
            let mut entries = lock(&self.inner.params.entries);
            match entries.get(name) {
                None => return Err(ParameterError::NotDeclared(name.to_string())),
                Some(e) if e.descriptor.read_only => {
                    return Err(ParameterError::ReadOnly(name.to_string()));
                }
                Some(_) => entries.remove(name),
            }
        };
        if let Some(e) = removed {
            publish_event(&self.inner, |ev| {
                ev.deleted_parameters.push(msg::Parameter {
                    name: name.to_string(),
                    value: e.value.to_msg(),
                })
            });
        }
        Ok(())
    }

    /// Whether the parameter is declared.
    pub fn has_parameter(&self, name: &str) -> bool {
        lock(&self.inner.params.entries).contains_key(name)
    }

    /// A parameter's value.
    pub fn get_parameter(&self, name: &str) -> Result<ParameterValue, ParameterError> {
        lock(&self.inner.params.entries)
            .get(name)
            .map(|e| e.value.clone())
            .ok_or_else(|| ParameterError::NotDeclared(name.to_string()))
    }

    /// A parameter's descriptor (its type and constraints).
    pub fn describe_parameter(
        &self,
        name: &str,
    ) -> Result<msg::ParameterDescriptor, ParameterError> {
        lock(&self.inner.params.entries)
            .get(name)
            .map(|e| e.descriptor.clone())
            .ok_or_else(|| ParameterError::NotDeclared(name.to_string()))
    }

    /// The declared parameters' names, sorted.
    pub fn parameter_names(&self) -> Vec<String> {
        lock(&self.inner.params.entries).keys().cloned().collect()
    }

    /// Set a parameter: it must be declared, not read-only, of its type
    /// (unless declared with dynamic typing) and within its range, and
    /// every on-set callback must accept it. `/parameter_events`
    /// announces the change.
    pub fn set_parameter(
        &self,
        name: &str,
        value: impl Into<ParameterValue>,
    ) -> Result<(), ParameterError> {
        set_parameters(&self.inner, &[(name.to_string(), value.into())], true)
    }

    /// Set several parameters, all or none (rclcpp's
    /// `set_parameters_atomically`).
    pub fn set_parameters_atomically(
        &self,
        values: &[(String, ParameterValue)],
    ) -> Result<(), ParameterError> {
        set_parameters(&self.inner, values, true)
    }

    /// Call `callback` before any parameter of this node is declared or
    /// set, with the names and new values; an `Err(reason)` refuses the
    /// change (the caller gets [`ParameterError::Rejected`], a remote
    /// caller the reason). It stays until the handle is dropped.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("guard")?;
    /// node.declare_parameter("mode", "idle")?;
    /// let _check = node.add_on_set_parameters_callback(|changes| {
    ///     match changes.iter().find(|(n, _)| n == "mode") {
    ///         Some((_, v)) if v.as_str() == Some("warp") => Err("no warp drive".into()),
    ///         _ => Ok(()),
    ///     }
    /// });
    /// assert!(node.set_parameter("mode", "warp").is_err());
    /// node.set_parameter("mode", "run")?;
    /// # Ok(()) }
    /// ```
    pub fn add_on_set_parameters_callback(
        &self,
        callback: impl Fn(&[(String, ParameterValue)]) -> Result<(), String> + Send + Sync + 'static,
    ) -> OnSetParametersHandle {
        let id = self.inner.ctx.new_id();
        let cb: Arc<OnSetCallback> = Arc::new(callback);
        lock(&self.inner.params.callbacks).push((id, cb));
        OnSetParametersHandle {
            node: Arc::downgrade(&self.inner),
            id,
        }
    }
}

/// Run every on-set callback over `changes` (outside the parameters' lock,
/// so a callback may read parameters).
fn run_callbacks(
    inner: &Arc<NodeInner>,
    changes: &[(String, ParameterValue)],
) -> Result<(), ParameterError> {
    let callbacks: Vec<_> = lock(&inner.params.callbacks)
        .iter()
        .map(|(_, c)| c.clone())
        .collect();
    for cb in callbacks {
        cb(changes).map_err(|reason| ParameterError::Rejected {
            name: changes.first().map(|c| c.0.clone()).unwrap_or_default(),
            reason,
        })?;
    }
    Ok(())
}

/// Check one change against its declaration.
fn check_change(
    entries: &std::collections::BTreeMap<String, Entry>,
    name: &str,
    value: &ParameterValue,
) -> Result<(), ParameterError> {
    let e = entries
        .get(name)
        .ok_or_else(|| ParameterError::NotDeclared(name.to_string()))?;
    if e.descriptor.read_only {
        return Err(ParameterError::ReadOnly(name.to_string()));
    }
    if !e.descriptor.dynamic_typing && value.type_id() != e.descriptor.r#type {
        return Err(ParameterError::WrongType {
            name: name.to_string(),
            expected: parameter::type_name(e.descriptor.r#type),
            found: value.type_name(),
        });
    }
    parameter::check_range(name, value, &e.descriptor)
}

/// Set `values` (all checked, then the callbacks, then applied; `atomic`
/// only changes what the caller is told, every path here is all or none).
fn set_parameters(
    inner: &Arc<NodeInner>,
    values: &[(String, ParameterValue)],
    _atomic: bool,
) -> Result<(), ParameterError> {
    if inner.ctx.is_shut_down() {
        return Err(ParameterError::ContextShutDown);
    }
    {
        let entries = lock(&inner.params.entries);
        for (name, value) in values {
            check_change(&entries, name, value)?;
        }
    }
    run_callbacks(inner, values)?;
    {
        let mut entries = lock(&inner.params.entries);
        // Checked again: another set may have raced the callbacks.
        for (name, value) in values {
            check_change(&entries, name, value)?;
        }
        for (name, value) in values {
            if let Some(e) = entries.get_mut(name) {
                e.value = value.clone();
                e.descriptor.r#type = value.type_id();
            }
        }
    }
    publish_event(inner, |e| {
        for (name, value) in values {
            e.changed_parameters.push(msg::Parameter {
                name: name.clone(),
                value: value.to_msg(),
            });
        }
    });
    Ok(())
}

/// Publish one `/parameter_events` message (if the node serves
/// parameters).
fn publish_event(inner: &Arc<NodeInner>, fill: impl FnOnce(&mut msg::ParameterEvent)) {
    let guard = lock(&inner.param_entities);
    let Some(ent) = guard.as_ref().and_then(|b| b.downcast_ref::<Entities>()) else {
        return;
    };
    let mut e = msg::ParameterEvent {
        stamp: crate::time::Clock::ros(inner.ctx.sim.clone()).now(),
        node: inner.fqn.clone(),
        ..Default::default()
    };
    fill(&mut e);
    if let Err(err) = ent.events.publish(e) {
        tracing::debug!("{}: parameter event not published: {err}", inner.fqn);
    }
}

/// The node's parameter services and event publisher, made once.
fn start_entities(inner: &Arc<NodeInner>) {
    if lock(&inner.param_entities).is_some() {
        return;
    }
    let node = Node {
        inner: inner.clone(),
        _user: None,
    };
    match make_entities(&node) {
        Ok(e) => {
            let mut slot = lock(&inner.param_entities);
            if slot.is_none() {
                *slot = Some(Box::new(e));
            }
        }
        Err(e) => tracing::warn!(
            "node {}: parameters are not served to other processes: {e}",
            inner.fqn
        ),
    }
}

fn make_entities(node: &Node) -> Result<Entities, Box<dyn std::error::Error + Send + Sync>> {
    let events = node.create_publisher::<msg::ParameterEvent>("/parameter_events", events_qos())?;
    let w = Arc::downgrade(&node.inner);
    let mut services: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();

    let n = w.clone();
    services.push(Box::new(node.create_service_for::<msg::GetParameters>(
        "~/get_parameters",
        move |req| {
            let values = match n.upgrade() {
                Some(inner) => {
                    let entries = lock(&inner.params.entries);
                    req.names
                        .iter()
                        .map(|name| {
                            entries
                                .get(name)
                                .map(|e| e.value.to_msg())
                                .unwrap_or_default()
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            msg::GetParametersResponse { values }
        },
    )?));

    let n = w.clone();
    services.push(Box::new(
        node.create_service_for::<msg::GetParameterTypes>("~/get_parameter_types", move |req| {
            let types = match n.upgrade() {
                Some(inner) => {
                    let entries = lock(&inner.params.entries);
                    req.names
                        .iter()
                        .map(|name| entries.get(name).map_or(0, |e| e.value.type_id()))
                        .collect()
                }
                None => Vec::new(),
            };
            msg::GetParameterTypesResponse { types }
        })?,
    ));

    let n = w.clone();
    services.push(Box::new(
        node.create_service_for::<msg::DescribeParameters>("~/describe_parameters", move |req| {
            let descriptors = match n.upgrade() {
                Some(inner) => {
                    let entries = lock(&inner.params.entries);
                    req.names
                        .iter()
                        .map(|name| {
                            entries
                                .get(name)
                                .map(|e| e.descriptor.clone())
                                .unwrap_or_else(|| msg::ParameterDescriptor {
                                    name: name.clone(),
                                    ..Default::default()
                                })
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            msg::DescribeParametersResponse { descriptors }
        })?,
    ));

    let n = w.clone();
    services.push(Box::new(node.create_service_for::<msg::ListParameters>(
        "~/list_parameters",
        move |req| {
            let names: Vec<String> = n
                .upgrade()
                .map(|inner| lock(&inner.params.entries).keys().cloned().collect())
                .unwrap_or_default();
            msg::ListParametersResponse {
                result: list(&names, &req.prefixes, req.depth),
            }
        },
    )?));

    let n = w.clone();
    services.push(Box::new(node.create_service_for::<msg::SetParameters>(
        "~/set_parameters",
        move |req| {
            let results = req
                .parameters
                .iter()
                .map(|p| result(n.upgrade(), std::slice::from_ref(p)))
                .collect();
            msg::SetParametersResponse { results }
        },
    )?));

    let n = w;
    services.push(Box::new(
        node.create_service_for::<msg::SetParametersAtomically>(
            "~/set_parameters_atomically",
            move |req| msg::SetParametersAtomicallyResponse {
                result: result(n.upgrade(), &req.parameters),
            },
        )?,
    ));

    Ok(Entities {
        events,
        _services: services,
    })
}

/// Set `params` (all or none) for a remote caller.
fn result(inner: Option<Arc<NodeInner>>, params: &[msg::Parameter]) -> msg::SetParametersResult {
    let Some(inner) = inner else {
        return msg::SetParametersResult {
            successful: false,
            reason: "the node is gone".into(),
        };
    };
    let mut values = Vec::with_capacity(params.len());
    for p in params {
        match ParameterValue::from_msg(&p.value) {
            Some(v) => values.push((p.name.clone(), v)),
            None => {
                return msg::SetParametersResult {
                    successful: false,
                    reason: format!("parameter {:?}: unknown type {}", p.name, p.value.r#type),
                };
            }
        }
    }
    match set_parameters(&inner, &values, true) {
        Ok(()) => msg::SetParametersResult {
            successful: true,
            reason: String::new(),
        },
        Err(e) => msg::SetParametersResult {
            successful: false,
            reason: e.to_string(),
        },
    }
}

/// rclcpp's `list_parameters`: names under `prefixes` (all when empty),
/// at most `depth` `.`-separated levels below them (0: any), and the
/// prefixes (namespaces) of the names listed.
fn list(names: &[String], prefixes: &[String], depth: u64) -> msg::ListParametersResult {
    let deep_enough = |rest: &str| depth == 0 || rest.matches('.').count() < depth as usize;
    let mut out = msg::ListParametersResult::default();
    for name in names {
        let listed = if prefixes.is_empty() {
            deep_enough(name)
        } else {
            prefixes.iter().any(|p| {
                name == p
                    || name
                        .strip_prefix(p.as_str())
                        .and_then(|r| r.strip_prefix('.'))
                        .is_some_and(deep_enough)
            })
        };
        if listed {
            out.names.push(name.clone());
            if let Some((prefix, _)) = name.rsplit_once('.')
                && !out.prefixes.iter().any(|p| p == prefix)
            {
                out.prefixes.push(prefix.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::list;

    #[test]
    fn listing_follows_rclcpp() {
        let names: Vec<String> = ["a", "b.c", "b.d.e", "f.g"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let all = list(&names, &[], 0);
        assert_eq!(all.names, names);
        assert_eq!(
            all.prefixes,
            vec!["b".to_string(), "b.d".into(), "f".into()]
        );
        assert_eq!(list(&names, &[], 1).names, vec!["a".to_string()]);
        let b = list(&names, &["b".into()], 1);
        assert_eq!(b.names, vec!["b.c".to_string()]);
        assert_eq!(list(&names, &["b".into()], 0).names.len(), 2);
    }
}
