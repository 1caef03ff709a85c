//! A node's `~/get_type_description`: the described types its endpoints
//! use (see [`crate::type_description`]).

use std::sync::{Arc, Weak};

use crate::message::description::{
    Described, GetTypeDescription, GetTypeDescriptionRequest, GetTypeDescriptionResponse,
};
use crate::runtime::NodeInner;

/// Note that `node` uses the type `name` (hash `hash`, described by
/// `describe`); the first such type makes the node's
/// `~/get_type_description` service.
pub(crate) fn register(
    node: &crate::Node,
    name: &str,
    hash: Option<&str>,
    describe: fn() -> Option<Described>,
) {
    let Some(hash) = hash else { return };
    let inner = &node.inner;
    if !inner
        .ctx
        .type_description_service
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return;
    }
    let needs_service = {
        let mut t = inner.types.lock().unwrap_or_else(|e| e.into_inner());
        if t.types.contains_key(name) {
            return;
        }
        let Some(d) = describe() else { return };
        t.types
            .insert(name.to_string(), (hash.to_string(), Arc::new(d)));
        t.service.is_none()
    };
    if needs_service {
        serve(node);
    }
}

/// Make the node's `~/get_type_description` (outside the types' lock:
/// creating a service registers its own type).
fn serve(node: &crate::Node) {
    let weak: Weak<NodeInner> = Arc::downgrade(&node.inner);
    let internal = crate::Node {
        inner: node.inner.clone(),
        _user: None,
    };
    let made = internal.create_service_for::<GetTypeDescription>(
        "~/get_type_description",
        move |req: GetTypeDescriptionRequest| match weak.upgrade() {
            Some(n) => n
                .types
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .answer(&req),
            None => GetTypeDescriptionResponse {
                failure_reason: "the node is gone".into(),
                ..Default::default()
            },
        },
    );
    match made {
        Ok(service) => {
            let mut t = node.inner.types.lock().unwrap_or_else(|e| e.into_inner());
            if t.service.is_none() {
                t.service = Some(Box::new(service));
            }
        }
        Err(e) => tracing::warn!("{}: no ~/get_type_description service: {e}", node.inner.fqn),
    }
}
