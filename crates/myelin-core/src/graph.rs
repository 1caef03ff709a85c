//! The context's registry of local endpoints: which topics and service names
//! exist, with which type, and who is on each.
//!
//! One [`Graph`] per context. It maps a fully qualified topic (or service)
//! name to a *members* value that holds the endpoints on it, and refuses a
//! second type on a name. The graph does not know what the members are: the
//! matching rules live with the endpoints ([`crate::matching`] for topics,
//! [`crate::service`] for services), which register their members type
//! here through [`Members`]. So the graph sits below the entities, and
//! dropping an endpoint removes it by id without naming its type.
//!
//! Lock order: the graph's mutexes, then a transient-local publisher's
//! history mutex. Publishers never take a graph mutex.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use myelin_sync::atomic::{AtomicU64, Ordering};

use crate::error::{CreateEndpointError, CreateServiceError};
use crate::locks::lock;
use crate::message::Message;
use crate::waitpoint::WaitPoint;

/// The endpoints on one name, as the graph sees them.
pub(crate) trait Members: Any + Send {
    /// Remove the endpoint with this id (ids are unique in a context) and
    /// recompute what the others are matched with. Returns whether it was
    /// a member.
    fn remove(&mut self, id: u64) -> bool;
    /// (publishers, subscriptions) on a topic; (servers, clients) on a
    /// service name.
    fn counts(&self) -> (usize, usize);
}

struct TopicSlot {
    type_id: TypeId,
    type_name: &'static str,
    type_hash: crate::TypeHash,
    members: Box<dyn Members>,
}

struct ServiceSlot {
    type_id: TypeId,
    types: String,
    members: Box<dyn Members>,
}

#[derive(Default)]
pub(crate) struct Graph {
    topics: Mutex<HashMap<String, TopicSlot>>,
    services: Mutex<HashMap<String, ServiceSlot>>,
    /// Orders transient-local history across publishers (oldest first).
    pub(crate) publish_seq: AtomicU64,
    waiters: Mutex<Vec<Weak<WaitPoint>>>,
}

fn downcast<M: Members>(m: &mut dyn Members) -> &mut M {
    (m as &mut dyn Any)
        .downcast_mut::<M>()
        .expect("a name's members type is fixed by its message type")
}

/// Remove `id` from the members on `name`; the slot goes with its last
/// member.
fn leave<S>(
    slots: &mut HashMap<String, S>,
    name: &str,
    id: u64,
    members: fn(&mut S) -> &mut dyn Members,
) {
    let Some(slot) = slots.get_mut(name) else {
        return;
    };
    let m = members(slot);
    if m.remove(id) && m.counts() == (0, 0) {
        slots.remove(name);
    }
}

impl Graph {
    /// Run `join` on the members of `topic` (created empty for its first
    /// endpoint), under the topics lock. Refused if the topic has another
    /// message type in this context. `M` must be the same type for every
    /// `T` (the caller's members type for topics of `T`).
    pub(crate) fn join_topic<T: Message, M: Members + Default, R>(
        &self,
        topic: &str,
        ty: (&'static str, crate::TypeHash),
        join: impl FnOnce(&mut M) -> R,
    ) -> Result<R, CreateEndpointError> {
        let (type_name, type_hash) = ty;
        let mut topics = lock(&self.topics);
        let slot = topics
            .entry(topic.to_string())
            .or_insert_with(|| TopicSlot {
                type_id: TypeId::of::<T>(),
                type_name,
                type_hash,
                members: Box::new(M::default()),
            });
        // Endpoints of one Rust type share the topic's in-process lists.
        // Run-time typed endpoints (`AnyMessage` with a `RawType`) share
        // one Rust type, so their named types must agree as well; the
        // wildcard (hash 0, a tool's subscription) agrees with any.
        let wildcard = |h: crate::TypeHash| h.0 == 0;
        if slot.type_id != TypeId::of::<T>()
            || !(slot.type_hash == type_hash || wildcard(slot.type_hash) || wildcard(type_hash))
        {
            return Err(CreateEndpointError::TypeMismatch {
                topic: topic.to_string(),
                existing: slot.type_name,
                existing_hash: slot.type_hash,
                requested: type_name,
                requested_hash: type_hash,
            });
        }
        if wildcard(slot.type_hash) && !wildcard(type_hash) {
            slot.type_name = type_name;
            slot.type_hash = type_hash;
        }
        Ok(join(downcast::<M>(slot.members.as_mut())))
    }

    /// Remove the endpoint `id` from `topic`. If it was the topic's last
    /// publisher, the members wake the subscriptions' waiters.
    pub(crate) fn leave_topic(&self, topic: &str, id: u64) {
        leave(&mut lock(&self.topics), topic, id, |s| s.members.as_mut());
    }

    /// Counts of (publishers, subscriptions) on a topic of type `T`, for
    /// introspection.
    pub(crate) fn topic_counts<T: Message>(&self, topic: &str) -> (usize, usize) {
        match lock(&self.topics).get(topic) {
            Some(slot) if slot.type_id == TypeId::of::<T>() => slot.members.counts(),
            _ => (0, 0),
        }
    }

    /// Counts of (publishers, subscriptions) on a topic, whatever its type.
    pub(crate) fn topic_counts_any(&self, topic: &str) -> (usize, usize) {
        lock(&self.topics)
            .get(topic)
            .map_or((0, 0), |slot| slot.members.counts())
    }

    /// The topics and their type names, sorted.
    pub(crate) fn topic_names_and_types(&self) -> Vec<(String, &'static str)> {
        let mut v: Vec<_> = lock(&self.topics)
            .iter()
            .map(|(k, s)| (k.clone(), s.type_name))
            .collect();
        v.sort();
        v
    }

    /// Run `join` on the members of service `name` (created empty for its
    /// first endpoint). `type_id` and `types` (`Request -> Response`) name
    /// the service's type; another type is refused.
    pub(crate) fn join_service<M: Members + Default, R>(
        &self,
        name: &str,
        type_id: TypeId,
        types: String,
        join: impl FnOnce(&mut M) -> R,
    ) -> Result<R, CreateServiceError> {
        let mut services = lock(&self.services);
        match services.get(name) {
            Some(slot) if slot.type_id != type_id => {
                return Err(CreateServiceError::TypeMismatch {
                    service: name.to_string(),
                    existing: slot.types.clone(),
                    requested: types,
                });
            }
            _ => {}
        }
        let slot = services
            .entry(name.to_string())
            .or_insert_with(|| ServiceSlot {
                type_id,
                types,
                members: Box::new(M::default()),
            });
        Ok(join(downcast::<M>(slot.members.as_mut())))
    }

    /// Refuse another type on a service name this context already has
    /// (before anything is created for it).
    pub(crate) fn check_service_type(
        &self,
        name: &str,
        type_id: TypeId,
        types: impl FnOnce() -> String,
    ) -> Result<(), CreateServiceError> {
        match lock(&self.services).get(name) {
            Some(slot) if slot.type_id != type_id => Err(CreateServiceError::TypeMismatch {
                service: name.to_string(),
                existing: slot.types.clone(),
                requested: types(),
            }),
            _ => Ok(()),
        }
    }

    /// Remove the server or client `id` from service `name`.
    pub(crate) fn leave_service(&self, name: &str, id: u64) {
        leave(&mut lock(&self.services), name, id, |s| s.members.as_mut());
    }

    /// Service names and their `Request -> Response` types, sorted.
    pub(crate) fn service_names_and_types(&self) -> Vec<(String, String)> {
        let mut v: Vec<_> = lock(&self.services)
            .iter()
            .map(|(k, s)| (k.clone(), s.types.clone()))
            .collect();
        v.sort();
        v
    }

    pub(crate) fn register_waiter(&self, e: &Arc<WaitPoint>) {
        let mut w = lock(&self.waiters);
        w.retain(|w| w.strong_count() > 0);
        w.push(Arc::downgrade(e));
    }

    pub(crate) fn wake_all_waiters(&self) {
        let w: Vec<_> = lock(&self.waiters)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for e in w {
            e.notify();
        }
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.publish_seq.fetch_add(1, Ordering::Relaxed)
    }
}
