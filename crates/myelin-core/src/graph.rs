//! The intra-process manager: which publishers reach which subscriptions.
//!
//! One [`Graph`] per context. It maps a fully qualified topic name to the
//! publishers and subscriptions on it, checks types and QoS compatibility,
//! and gives every publisher a precomputed, immutable list of matched
//! subscriptions split by buffer kind ([`Matched`]). The list is swapped
//! atomically ([`arc_swap`]) when the graph changes, so `publish` reads it
//! without a lock: the mutex here is taken only when entities are created or
//! dropped.
//!
//! Lock order: the graph mutex, then a transient-local publisher's history
//! mutex. Publishers never take the graph mutex.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use myelin_sync::atomic::{AtomicU64, Ordering};

use crate::error::{CreateEndpointError, CreateServiceError};
use crate::message::Message;
use crate::publisher::PubInner;
use crate::qos::Durability;
use crate::service::{ClientInner, ServiceEntities, ServiceInner, downcast, service_type_id};
use crate::subscription::{Delivery, SubInner};
use crate::waitpoint::WaitPoint;

/// The subscriptions a publisher delivers to, split by how they take a
/// message (the split the copy rules need: see [`crate::publisher`]).
pub(crate) struct Matched<T> {
    /// Want ownership: get the original (last one) or a copy.
    pub(crate) owners: Vec<Arc<SubInner<T>>>,
    /// Share one `Arc`.
    pub(crate) sharers: Vec<Arc<SubInner<T>>>,
    /// Always get their own copy.
    pub(crate) values: Vec<Arc<SubInner<T>>>,
}

impl<T> Default for Matched<T> {
    fn default() -> Self {
        Matched {
            owners: Vec::new(),
            sharers: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl<T> Matched<T> {
    pub(crate) fn is_empty(&self) -> bool {
        self.owners.is_empty() && self.sharers.is_empty() && self.values.is_empty()
    }
    pub(crate) fn len(&self) -> usize {
        self.owners.len() + self.sharers.len() + self.values.len()
    }
}

fn report_incompatible<T: Message>(
    p: &Arc<PubInner<T>>,
    s: &Arc<SubInner<T>>,
    why: &crate::qos::Incompatibility,
) {
    p.incompatible.record(why.policy);
    s.incompatible.record(why.policy);
    p.emit(crate::PublisherEvent::IncompatibleQos(p.incompatible.get()));
    s.emit(crate::SubscriptionEvent::IncompatibleQos(
        s.incompatible.get(),
    ));
}

struct TopicEntities<T> {
    pubs: Vec<Arc<PubInner<T>>>,
    subs: Vec<Arc<SubInner<T>>>,
}

struct TopicSlot {
    type_id: TypeId,
    type_name: &'static str,
    type_hash: crate::TypeHash,
    /// A `TopicEntities<T>` for the topic's `T`.
    entities: Box<dyn Any + Send>,
    count: usize,
}

struct ServiceSlot {
    type_id: TypeId,
    types: String,
    /// A `ServiceEntities<Req, Resp>`.
    entities: Box<dyn Any + Send>,
    count: usize,
}

#[derive(Default)]
pub(crate) struct Graph {
    topics: Mutex<HashMap<String, TopicSlot>>,
    services: Mutex<HashMap<String, ServiceSlot>>,
    /// Orders transient-local history across publishers (oldest first).
    pub(crate) publish_seq: AtomicU64,
    waiters: Mutex<Vec<Weak<WaitPoint>>>,
}

fn slot_for<'a, T: Message>(
    topics: &'a mut HashMap<String, TopicSlot>,
    topic: &str,
) -> Result<&'a mut TopicSlot, CreateEndpointError> {
    let slot = topics
        .entry(topic.to_string())
        .or_insert_with(|| TopicSlot {
            type_id: TypeId::of::<T>(),
            type_name: T::TYPE_NAME,
            type_hash: T::TYPE_HASH,
            entities: Box::new(TopicEntities::<T> {
                pubs: Vec::new(),
                subs: Vec::new(),
            }),
            count: 0,
        });
    if slot.type_id != TypeId::of::<T>() {
        return Err(CreateEndpointError::TypeMismatch {
            topic: topic.to_string(),
            existing: slot.type_name,
            existing_hash: slot.type_hash,
            requested: T::TYPE_NAME,
            requested_hash: T::TYPE_HASH,
        });
    }
    Ok(slot)
}

fn entities<T: Message>(slot: &mut TopicSlot) -> &mut TopicEntities<T> {
    slot.entities
        .downcast_mut::<TopicEntities<T>>()
        .expect("topic slot type checked by TypeId")
}

/// Recompute every publisher's matched list on a topic, and both sides'
/// matched counts and the subscriptions' view of publisher liveliness.
fn rematch<T: Message>(ents: &TopicEntities<T>) {
    for s in &ents.subs {
        let tokens: Vec<_> = ents
            .pubs
            .iter()
            .filter(|p| p.qos.compatible_with(&s.qos).is_ok())
            .map(|p| p.liveliness.clone())
            .collect();
        s.update_matched(tokens.len() as u32);
        s.update_liveliness(Some(tokens));
    }
    for p in &ents.pubs {
        let mut m = Matched::default();
        for s in &ents.subs {
            if p.qos.compatible_with(&s.qos).is_ok() {
                match s.delivery {
                    Delivery::Owned => m.owners.push(s.clone()),
                    Delivery::Shared => m.sharers.push(s.clone()),
                    Delivery::Value => m.values.push(s.clone()),
                }
            }
        }
        p.update_matched(m.len() as u32);
        p.matched.store(Arc::new(m));
    }
}

impl Graph {
    pub(crate) fn add_publisher<T: Message>(
        &self,
        p: Arc<PubInner<T>>,
    ) -> Result<(), CreateEndpointError> {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slot_for::<T>(&mut topics, &p.topic)?;
        slot.count += 1;
        let ents = entities::<T>(slot);
        for s in &ents.subs {
            if let Err(why) = p.qos.compatible_with(&s.qos) {
                report_incompatible(&p, s, &why);
                tracing::warn!(topic = %p.topic, "new publisher does not match a subscription: {why}");
            }
        }
        ents.pubs.push(p);
        rematch(ents);
        Ok(())
    }

    /// Add a subscription; replay transient-local history into its buffer
    /// (oldest first across publishers) before any live message can reach it.
    pub(crate) fn add_subscription<T: Message>(
        &self,
        s: Arc<SubInner<T>>,
    ) -> Result<usize, CreateEndpointError> {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slot_for::<T>(&mut topics, &s.topic)?;
        slot.count += 1;
        let ents = entities::<T>(slot);
        for p in &ents.pubs {
            if let Err(why) = p.qos.compatible_with(&s.qos) {
                report_incompatible(p, &s, &why);
                tracing::warn!(topic = %s.topic, "new subscription does not match a publisher: {why}");
            }
        }
        ents.subs.push(s.clone());
        let replay = s.qos.durability == Durability::TransientLocal;
        // Hold the history locks of every matched transient-local publisher
        // while the matched lists change and the history is replayed: a
        // publisher delivers under its history lock, so each message reaches
        // the new subscription exactly once (history or live), in order.
        let tl_pubs: Vec<_> = ents
            .pubs
            .iter()
            .filter(|p| p.history.is_some() && p.qos.compatible_with(&s.qos).is_ok())
            .cloned()
            .collect();
        let mut guards: Vec<_> = if replay {
            tl_pubs
                .iter()
                .map(|p| {
                    p.history
                        .as_ref()
                        .unwrap()
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                })
                .collect()
        } else {
            Vec::new()
        };
        rematch(ents);
        let mut replayed = 0;
        if replay {
            let mut all: Vec<(u64, Arc<T>, u64)> =
                guards.iter_mut().flat_map(|g| g.iter().cloned()).collect();
            all.sort_by_key(|(seq, _, _)| *seq);
            for (_, msg, exp) in all {
                s.push_quiet(msg, exp);
                replayed += 1;
            }
        }
        drop(guards);
        drop(topics);
        // Wake the executor (or run an inline callback) outside the locks.
        s.kick();
        Ok(replayed)
    }

    /// Remove a publisher; if it was the topic's last one, wake the
    /// subscriptions' waiters (they get `WaitError::PublisherGone`).
    pub(crate) fn remove_publisher<T: Message>(&self, topic: &str, id: u64) {
        self.remove(topic, |ents: &mut TopicEntities<T>| {
            ents.pubs.retain(|p| p.id != id);
            if ents.pubs.is_empty() {
                for s in &ents.subs {
                    s.waitpoint().publishers_gone();
                }
            }
        });
    }

    pub(crate) fn remove_subscription<T: Message>(&self, topic: &str, id: u64) {
        self.remove(topic, |ents: &mut TopicEntities<T>| {
            ents.subs.retain(|s| s.id != id)
        });
    }

    fn remove<T: Message>(&self, topic: &str, f: impl FnOnce(&mut TopicEntities<T>)) {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = topics.get_mut(topic) else {
            return;
        };
        if slot.type_id != TypeId::of::<T>() {
            return;
        }
        slot.count -= 1;
        let empty = slot.count == 0;
        let ents = entities::<T>(slot);
        f(ents);
        rematch(ents);
        if empty {
            topics.remove(topic);
        }
    }

    /// Counts of (publishers, subscriptions) on a topic, for introspection.
    pub(crate) fn topic_counts<T: Message>(&self, topic: &str) -> (usize, usize) {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        match topics.get_mut(topic) {
            Some(slot) if slot.type_id == TypeId::of::<T>() => {
                let e = entities::<T>(slot);
                (e.pubs.len(), e.subs.len())
            }
            _ => (0, 0),
        }
    }

    /// The topics and their type names, sorted.
    pub(crate) fn topic_names_and_types(&self) -> Vec<(String, &'static str)> {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = topics
            .iter()
            .map(|(k, s)| (k.clone(), s.type_name))
            .collect();
        v.sort();
        v
    }

    pub(crate) fn register_waiter(&self, e: &Arc<WaitPoint>) {
        let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        w.retain(|w| w.strong_count() > 0);
        w.push(Arc::downgrade(e));
    }

    pub(crate) fn wake_all_waiters(&self) {
        let w: Vec<_> = self
            .waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
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

fn service_types<Req: Message, Resp: Message>() -> String {
    format!("{} -> {}", Req::TYPE_NAME, Resp::TYPE_NAME)
}

impl Graph {
    fn service_slot<'a, Req: Message, Resp: Message>(
        services: &'a mut HashMap<String, ServiceSlot>,
        name: &str,
    ) -> Result<&'a mut ServiceEntities<Req, Resp>, CreateServiceError> {
        let slot = services
            .entry(name.to_string())
            .or_insert_with(|| ServiceSlot {
                type_id: service_type_id::<Req, Resp>(),
                types: service_types::<Req, Resp>(),
                entities: Box::new(ServiceEntities::<Req, Resp>::new()),
                count: 0,
            });
        if slot.type_id != service_type_id::<Req, Resp>() {
            return Err(CreateServiceError::TypeMismatch {
                service: name.to_string(),
                existing: slot.types.clone(),
                requested: service_types::<Req, Resp>(),
            });
        }
        slot.count += 1;
        Ok(downcast::<Req, Resp>(&mut slot.entities))
    }

    /// Refuse other request/response types on a service name this context
    /// already has (before anything is created for it).
    pub(crate) fn check_service_type<Req: Message, Resp: Message>(
        &self,
        name: &str,
    ) -> Result<(), CreateServiceError> {
        let services = self.services.lock().unwrap_or_else(|e| e.into_inner());
        match services.get(name) {
            Some(slot) if slot.type_id != service_type_id::<Req, Resp>() => {
                Err(CreateServiceError::TypeMismatch {
                    service: name.to_string(),
                    existing: slot.types.clone(),
                    requested: service_types::<Req, Resp>(),
                })
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn add_server<Req: Message, Resp: Message>(
        &self,
        s: Arc<ServiceInner<Req, Resp>>,
    ) -> Result<(), CreateServiceError> {
        let mut services = self.services.lock().unwrap_or_else(|e| e.into_inner());
        let ents = Self::service_slot::<Req, Resp>(&mut services, &s.name)?;
        ents.servers.push(s);
        ents.publish_servers();
        Ok(())
    }

    pub(crate) fn add_client<Req: Message, Resp: Message>(
        &self,
        c: Arc<ClientInner<Req, Resp>>,
    ) -> Result<(), CreateServiceError> {
        let mut services = self.services.lock().unwrap_or_else(|e| e.into_inner());
        let ents = Self::service_slot::<Req, Resp>(&mut services, &c.name)?;
        ents.clients.push(c);
        ents.publish_servers();
        Ok(())
    }

    fn remove_service_entity<Req: Message, Resp: Message>(
        &self,
        name: &str,
        f: impl FnOnce(&mut ServiceEntities<Req, Resp>),
    ) {
        let mut services = self.services.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = services.get_mut(name) else {
            return;
        };
        if slot.type_id != service_type_id::<Req, Resp>() {
            return;
        }
        slot.count -= 1;
        let empty = slot.count == 0;
        let ents = downcast::<Req, Resp>(&mut slot.entities);
        f(ents);
        ents.publish_servers();
        if empty {
            services.remove(name);
        }
    }

    pub(crate) fn remove_server<Req: Message, Resp: Message>(&self, name: &str, id: u64) {
        self.remove_service_entity::<Req, Resp>(name, |e| e.servers.retain(|s| s.id != id));
    }

    pub(crate) fn remove_client<Req: Message, Resp: Message>(&self, name: &str, id: u64) {
        self.remove_service_entity::<Req, Resp>(name, |e| e.clients.retain(|c| c.id != id));
    }

    /// Service names and their `Request -> Response` types, sorted.
    pub(crate) fn service_names_and_types(&self) -> Vec<(String, String)> {
        let services = self.services.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = services
            .iter()
            .map(|(k, s)| (k.clone(), s.types.clone()))
            .collect();
        v.sort();
        v
    }
}
