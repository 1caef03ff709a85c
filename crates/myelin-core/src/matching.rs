//! Intra-process matching: which local publishers reach which local
//! subscriptions on a topic.
//!
//! The endpoints of one topic in a context are a [`TopicEntities`], kept in
//! the context's [`Graph`]. Every change recomputes each publisher's
//! precomputed, immutable list of matched subscriptions split by buffer
//! kind ([`Matched`]) and swaps it in atomically (a [`LaneCell`](myelin_sync::LaneCell)), so
//! `publish` reads it without a lock: the graph's mutex is taken only when
//! endpoints are created or dropped. QoS incompatibilities are reported to
//! both sides when an endpoint joins; transient-local history is replayed
//! to a joining subscription.

use std::sync::Arc;

use crate::error::CreateEndpointError;
use crate::graph::{Graph, Members};
use crate::message::Message;
use crate::publisher::{Matched, PubInner};
use crate::qos::Durability;
use crate::subscription::{Delivery, SubInner};

/// The local publishers and subscriptions on one topic.
pub(crate) struct TopicEntities<T> {
    pubs: Vec<Arc<PubInner<T>>>,
    subs: Vec<Arc<SubInner<T>>>,
}

impl<T> Default for TopicEntities<T> {
    fn default() -> Self {
        TopicEntities {
            pubs: Vec::new(),
            subs: Vec::new(),
        }
    }
}

impl<T: Message> Members for TopicEntities<T> {
    /// A publisher or a subscription leaves; when the last publisher goes,
    /// the subscriptions' waiters wake (they get
    /// [`WaitError::PublisherGone`](crate::WaitError::PublisherGone)).
    fn remove(&mut self, id: u64) -> bool {
        let (pubs, subs) = (self.pubs.len(), self.subs.len());
        self.pubs.retain(|p| p.id != id);
        self.subs.retain(|s| s.id != id);
        if self.pubs.len() == pubs && self.subs.len() == subs {
            return false;
        }
        if self.pubs.len() < pubs && self.pubs.is_empty() {
            for s in &self.subs {
                s.waitpoint().publishers_gone();
            }
        }
        rematch(self);
        true
    }

    fn counts(&self) -> (usize, usize) {
        (self.pubs.len(), self.subs.len())
    }
}

fn report_incompatible<T: Message>(
    p: &Arc<PubInner<T>>,
    s: &Arc<SubInner<T>>,
    why: &crate::qos::Incompatibility,
) {
    let ps = p.incompatible.record(why.policy, p.events.is_some());
    let ss = s.incompatible.record(why.policy, s.events.is_some());
    p.emit(crate::PublisherEvent::IncompatibleQos(ps));
    s.emit(crate::SubscriptionEvent::IncompatibleQos(ss));
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
                if p.qos.waits_for(&s.qos) {
                    m.paced.push(s.clone());
                }
            }
        }
        let m = m.sealed();
        p.update_matched(m.len() as u32);
        p.matched.store(Arc::new(m));
    }
}

/// Add a publisher to its topic (refused if the topic has another type
/// in this context), and report the subscriptions it cannot match.
pub(crate) fn add_publisher<T: Message>(
    graph: &Graph,
    p: Arc<PubInner<T>>,
    ty: (&'static str, crate::TypeHash),
) -> Result<(), CreateEndpointError> {
    let topic = p.topic.clone();
    graph.join_topic::<T, TopicEntities<T>, _>(&topic, ty, |ents| {
    for s in &ents.subs {
        if let Err(why) = p.qos.compatible_with(&s.qos) {
            report_incompatible(&p, s, &why);
            tracing::warn!(topic = %p.topic, "new publisher does not match a subscription: {why}");
        }
    }
    ents.pubs.push(p);
    rematch(ents);
    })
}

/// Add a subscription; replay transient-local history into its buffer
/// (oldest first across publishers) before any live message can reach it.
pub(crate) fn add_subscription<T: Message>(
    graph: &Graph,
    s: Arc<SubInner<T>>,
    ty: (&'static str, crate::TypeHash),
) -> Result<usize, CreateEndpointError> {
    let replayed = graph.join_topic::<T, TopicEntities<T>, _>(&s.topic, ty, |ents| {
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
        let mut all: Vec<(u64, Arc<T>, u64, crate::message_info::Origin)> = guards
            .iter_mut()
            .zip(&tl_pubs)
            .flat_map(|(g, p)| g.iter().map(|(q, m, e)| (*q, m.clone(), *e, p.origin())))
            .collect();
        all.sort_by_key(|(seq, ..)| *seq);
        for (_, msg, exp, origin) in all {
            s.push_quiet(msg, exp, origin);
            replayed += 1;
        }
    }
    drop(guards);
    replayed
    })?;
    // Wake the executor (or run an inline callback) outside the locks.
    s.kick();
    Ok(replayed)
}
