//! A subscription's side of the zenoh transport: a zenoh subscriber on the
//! topic's key expression (declared with its liveliness token when the
//! subscription starts). Samples arrive on zenoh's thread and go straight
//! into the subscription's buffer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use crate::gid;
use myelin_zenoh::attachment::Attachment;
use myelin_zenoh::names;
use myelin_zenoh::token::{EntityKind, Token};
use myelin_zenoh::zenoh::Wait;
use myelin_zenoh::zenoh::liveliness::LivelinessToken;
use myelin_zenoh::zenoh::pubsub::Subscriber;
use myelin_zenoh::zenoh::sample::{Locality, Sample};
use myelin_zenoh::zenoh_ext::{
    AdvancedSubscriber, AdvancedSubscriberBuilderExt, HistoryConfig, RecoveryConfig,
};

use super::{Discovered, Peers, RemoteGraph, ZenohTransport, endpoint_token, type_chunks};
use crate::qos::{Durability, QoS, Reliability};
use crate::transport::{Arrived, EndpointSpec, SubLink, SubOwner, TransportError};

/// A subscription's network side.
pub(super) struct SubNet {
    dom: Arc<ZenohTransport>,
    key: String,
    token: Token,
    /// The zenoh subscriber (plain, or advanced for transient local),
    /// held so it stays declared, and the liveliness token.
    parts: Mutex<Option<(Box<dyn std::any::Any + Send + Sync>, LivelinessToken)>>,
    topic: String,
    qos: QoS,
    /// Publishers elsewhere that only zenoh reaches (compatible ones).
    peers: Peers,
    owner: OnceLock<Weak<dyn SubOwner>>,
    /// The lifespans of this topic's myelin publishers (from their
    /// tokens' QoS), for the samples' gids to find.
    lifespans: Arc<Lifespans>,
    /// When each publisher with a lease last asserted its liveliness.
    assertions: Arc<Assertions>,
}

/// The liveliness of the topic's myelin publishers with a lease
/// (manual-by-topic, or automatic: asserted by their process, see
/// `publisher::automatic`): each sample and each explicit assertion (on
/// [`super::alive_key`]) from one renews it; a publisher is not alive once its lease passed since
/// (measured on this host's clock, at arrival: no clock sync needed). A
/// newly seen publisher counts as just asserted. rmw_zenoh publishers
/// carry no assertions: alive while their token is.
#[derive(Default)]
struct Assertions {
    /// Whether any publisher is tracked (the common case, none, takes no
    /// lock per sample).
    any: std::sync::atomic::AtomicBool,
    /// By endpoint: the lease and the last assertion.
    last: Mutex<HashMap<Endpoint, (Duration, std::time::Instant)>>,
}

/// A myelin endpoint as a gid names it: (island, pid, endpoint number).
type Endpoint = (u64, u32, u32);

impl Assertions {
    /// Track exactly the publishers in `manual` (new ones as asserted now).
    fn track(&self, manual: HashMap<Endpoint, Duration>) {
        let now = std::time::Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.retain(|k, _| manual.contains_key(k));
        for (k, lease) in manual {
            last.entry(k).or_insert((lease, now)).0 = lease;
        }
        self.any
            .store(!last.is_empty(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The publisher of `att` asserted its liveliness (a sample or an
    /// explicit assertion arrived).
    fn heard(&self, att: &Attachment) {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let Some(who) = gid::endpoint_of(&att.source_gid) else {
            return;
        };
        if let Some(e) = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&who)
        {
            e.1 = std::time::Instant::now();
        }
    }

    /// How many tracked publishers are not alive now.
    fn lapsed(&self) -> usize {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            return 0;
        }
        let now = std::time::Instant::now();
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|(lease, at)| now.saturating_duration_since(*at) > *lease)
            .count()
    }
}

/// Finite lifespans of publishers, by the (island, pid, endpoint number)
/// of their gids (two hosts' processes may share a pid). rmw_zenoh's gids (a hash of the token) name no token, so their
/// samples live for ever here, as rmw_zenoh itself ignores lifespan.
#[derive(Default)]
struct Lifespans {
    /// Whether any is finite (the common case, none, takes no lock).
    any: std::sync::atomic::AtomicBool,
    by_gid: Mutex<HashMap<Endpoint, Duration>>,
}

impl Lifespans {
    /// Take the lifespans from the topic's publisher tokens in `g`.
    fn update(&self, topic: &str, g: &RemoteGraph) {
        let map: HashMap<Endpoint, Duration> = g
            .tokens
            .values()
            .filter(|t| t.kind == EntityKind::Publisher)
            .filter_map(|t| {
                let info = t.topic.as_ref().filter(|i| i.name == topic)?;
                let span = info.qos.lifespan?;
                Some((super::token_endpoint(t)?, span))
            })
            .collect();
        self.any
            .store(!map.is_empty(), std::sync::atomic::Ordering::Relaxed);
        *self.by_gid.lock().unwrap_or_else(|e| e.into_inner()) = map;
    }

    /// How much longer the sample `att` describes may be delivered
    /// (`None`: for ever). Its age is measured on the wall clock against
    /// the publisher's: across hosts, as in DDS, that needs synchronized
    /// clocks (a publisher clock ahead of ours counts as age zero).
    fn lifetime(&self, att: &Attachment) -> Option<Duration> {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let who = gid::endpoint_of(&att.source_gid)?;
        let span = *self
            .by_gid
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&who)?;
        let now = crate::clock::realtime_ns();
        let age = Duration::from_nanos(now.saturating_sub(att.source_timestamp).max(0) as u64);
        Some(span.saturating_sub(age))
    }
}

impl SubNet {
    pub(super) fn new(
        dom: &Arc<ZenohTransport>,
        spec: &EndpointSpec<'_>,
    ) -> Result<SubNet, TransportError> {
        let ty = type_chunks(&spec.ty);
        let key = if spec.ty.any {
            names::topic_key_any_type(dom.domain, spec.topic)
        } else {
            names::topic_key(dom.domain, spec.topic, spec.ty.name, &ty.1)
        }
        .map_err(|e| TransportError::new("the topic's key expression", e))?;
        Ok(SubNet {
            dom: dom.clone(),
            key,
            token: endpoint_token(dom, EntityKind::Subscription, spec),
            parts: Mutex::new(None),
            topic: spec.topic.to_string(),
            qos: *spec.qos,
            peers: Peers::new(EntityKind::Publisher, spec),
            lifespans: Arc::default(),
            assertions: Arc::default(),
            owner: OnceLock::new(),
        })
    }
}

impl Discovered for SubNet {
    fn graph_changed(&self, g: &RemoteGraph) {
        self.lifespans.update(&self.topic, g);
        let owner = self.owner.get().and_then(Weak::upgrade);
        let (_, changed) = self
            .peers
            .recount(&self.dom, g, owner.as_deref().map(|o| o as _));
        self.assertions.track(self.peers.manual());
        if changed && let Some(o) = owner {
            o.links_changed();
        }
    }
}

impl SubLink for SubNet {
    /// Declare the subscriber and the token: samples (already filtered for
    /// exactly-once delivery) go to `owner`.
    fn start(&self, owner: Weak<dyn SubOwner>) -> Result<(), TransportError> {
        let _ = self.owner.set(owner.clone());
        let island = self.dom.island;
        let shm = self.dom.shm;
        let topic = self.topic.clone();
        let mut gaps = SequenceGaps::default();
        let history = self.qos.durability == Durability::TransientLocal;
        let dom = Arc::downgrade(&self.dom);
        let lifespans = self.lifespans.clone();
        let assertions = self.assertions.clone();
        let on_sample = move |s: Sample| {
            let att = match s.attachment().map(|a| Attachment::decode(&a.to_bytes())) {
                Some(Ok(a)) => a,
                Some(Err(e)) => {
                    tracing::debug!("{topic}: dropping a sample: {e}");
                    return;
                }
                None => {
                    // rmw_zenoh drops these too.
                    tracing::debug!("{topic}: dropping a sample without an attachment");
                    return;
                }
            };
            if shm && gid::delivered_by_shared_memory(&att.source_gid, island) {
                return;
            }
            // History from a cache of this very session (its live samples
            // never come back: remote origin only): already delivered
            // in-process.
            if history
                && dom
                    .upgrade()
                    .is_some_and(|d| d.is_own_history(&att.source_gid))
            {
                return;
            }
            assertions.heard(&att);
            if let Some(o) = owner.upgrade() {
                let skipped = gaps.skipped(&att);
                if skipped > 0 {
                    o.count_lost(skipped);
                }
                let info = crate::message_info::MessageInfo::remote(
                    att.source_gid,
                    att.source_timestamp,
                    crate::clock::realtime_ns(),
                    u64::try_from(att.sequence_number).unwrap_or(0),
                );
                let origin = crate::message_info::Origin::Network(Box::new(info));
                // Lent where zenoh received it: a CDR message is decoded
                // from its one slice of the receive buffer, or across the
                // fragments of a large one; anything else is copied once.
                super::with_parts(s.payload(), |parts| {
                    o.deliver(
                        Arrived::Lent(parts),
                        false,
                        lifespans.lifetime(&att),
                        origin,
                    )
                });
            }
        };
        let builder = self
            .dom
            .session
            .declare_subscriber(self.key.clone())
            .allowed_origin(Locality::Remote);
        let declared = if self.qos.durability == Durability::TransientLocal {
            // rmw_zenoh's transient local: ask every publisher's cache for
            // its last `depth` samples now, and each publisher that appears
            // later too (their `@adv/pub` tokens); a reliable one is also
            // asked again for samples its heartbeat says were missed.
            let depth = self.qos.effective_depth().clamp(1, 10_000);
            let b = builder
                .history(
                    HistoryConfig::default()
                        .detect_late_publishers()
                        .max_samples(depth),
                )
                .subscriber_detection()
                .query_timeout(std::time::Duration::from_secs(600));
            let b = if self.qos.reliability == Reliability::Reliable {
                b.recovery(RecoveryConfig::default().heartbeat())
            } else {
                b
            };
            b.callback_mut(on_sample)
                .wait()
                .map(|s: AdvancedSubscriber<()>| {
                    Box::new(s) as Box<dyn std::any::Any + Send + Sync>
                })
        } else {
            builder
                .callback_mut(on_sample)
                .wait()
                .map(|s: Subscriber<()>| Box::new(s) as Box<dyn std::any::Any + Send + Sync>)
        };
        let sub = declared.map_err(|e| TransportError::new("declaring the zenoh subscriber", e))?;
        // A subscription with a liveliness lease also hears the explicit
        // assertions of publishers with a lease (manual-by-topic ones',
        // and those their processes make for automatic ones).
        let alive = if self.qos.liveliness.lease.is_some() {
            let assertions = self.assertions.clone();
            let alive = self
                .dom
                .session
                .declare_subscriber(super::alive_key(&self.key))
                .allowed_origin(Locality::Remote)
                .callback(move |s: Sample| {
                    if let Some(Ok(att)) = s.attachment().map(|a| Attachment::decode(&a.to_bytes()))
                    {
                        assertions.heard(&att);
                    }
                })
                .wait()
                .map_err(|e| TransportError::new("declaring the liveliness subscriber", e))?;
            Some(alive)
        } else {
            None
        };
        let sub: Box<dyn std::any::Any + Send + Sync> = Box::new((sub, alive));
        let token = self.dom.declare(&self.token)?;
        *self.parts.lock().unwrap_or_else(|e| e.into_inner()) = Some((sub, token));
        // What was seen before the owner was known: report it now. A
        // graph that arrived between this link's creation and the owner's
        // setting was counted then, unheard (this recount finds no
        // change): the owner recounts whatever this one finds.
        self.dom.with_topic(&self.topic, |g| self.graph_changed(g));
        if let Some(o) = self.owner.get().and_then(Weak::upgrade) {
            o.links_changed();
        }
        Ok(())
    }

    fn connected(&self) -> usize {
        self.peers.connected()
    }

    fn liveliness(&self) -> (usize, usize) {
        let connected = self.peers.connected();
        if self.qos.liveliness.lease.is_none() {
            // No lease of its own: no checker, and no subscriber for the
            // explicit assertions (so no way to tell a lapse): every
            // connected publisher counts alive, as over shared memory.
            return (connected, 0);
        }
        let lapsed = self.assertions.lapsed().min(connected);
        (connected - lapsed, lapsed)
    }
}

/// Messages a publisher sent that never arrived, from the sequence
/// numbers of its samples (rmw_zenoh's attachment numbers each
/// publisher's messages from 1): a best-effort message dropped on the way
/// (zenoh drops rather than blocks when a link is congested) shows as a
/// gap, counted in the subscription's `lost()` as rmw_zenoh reports
/// `RMW_EVENT_MESSAGE_LOST`. A message lost after a publisher's last one
/// cannot be seen.
#[derive(Default)]
struct SequenceGaps {
    /// The last sequence number seen from each publisher.
    last: std::collections::HashMap<myelin_zenoh::gid::Gid, i64>,
}

impl SequenceGaps {
    /// Publishers remembered at most (the map is emptied past it: gaps
    /// across that moment go uncounted, memory stays bounded).
    const MAX_PUBLISHERS: usize = 4096;

    /// How many of `att`'s publisher's messages were skipped before it.
    fn skipped(&mut self, att: &Attachment) -> u64 {
        if self.last.len() >= Self::MAX_PUBLISHERS && !self.last.contains_key(&att.source_gid) {
            self.last.clear();
        }
        let seq = att.sequence_number;
        match self.last.insert(att.source_gid, seq) {
            // Numbers from another writer than expected, or a repeat:
            // nothing to count (and a forged huge jump counts at most
            // what a u32 holds, as shared memory's counter does).
            Some(prev) if seq > prev => ((seq - prev - 1) as u64).min(u64::from(u32::MAX)),
            Some(prev) => {
                // Keep the highest seen.
                self.last.insert(att.source_gid, prev.max(seq));
                0
            }
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn att(gid: u8, seq: i64) -> Attachment {
        Attachment {
            sequence_number: seq,
            source_timestamp: 0,
            source_gid: [gid; 16],
        }
    }

    #[test]
    fn gaps_in_each_publishers_numbers_are_counted_once() {
        let mut g = SequenceGaps::default();
        assert_eq!(g.skipped(&att(1, 1)), 0);
        assert_eq!(g.skipped(&att(1, 2)), 0);
        assert_eq!(
            g.skipped(&att(2, 7)),
            0,
            "a publisher first seen mid-stream"
        );
        assert_eq!(g.skipped(&att(1, 5)), 2);
        assert_eq!(g.skipped(&att(2, 8)), 0);
        assert_eq!(g.skipped(&att(1, 4)), 0, "late or repeated: not a gap");
        assert_eq!(g.skipped(&att(1, 6)), 0, "counted from the highest seen");
        assert_eq!(g.skipped(&att(1, i64::MAX)), u64::from(u32::MAX));
    }

    fn wall_ns() -> i64 {
        crate::clock::realtime_ns()
    }

    #[test]
    fn a_samples_lifetime_is_its_publishers_lifespan_less_its_age() {
        let l = Lifespans::default();
        let gid = gid::myelin_gid(7, 4242, 0x12_3456, false);
        let sample = |age: i64| Attachment {
            sequence_number: 1,
            source_timestamp: wall_ns() - age,
            source_gid: gid,
        };
        assert_eq!(l.lifetime(&sample(0)), None, "no publisher has one");
        l.by_gid
            .lock()
            .unwrap()
            .insert((7, 4242, 0x12_3456), Duration::from_secs(10));
        l.any.store(true, std::sync::atomic::Ordering::Relaxed);
        let fresh = l.lifetime(&sample(1_000_000_000)).unwrap();
        assert!(fresh <= Duration::from_secs(9) && fresh > Duration::from_secs(8));
        assert_eq!(
            l.lifetime(&sample(11_000_000_000)),
            Some(Duration::ZERO),
            "older than its lifespan: expired on the way"
        );
        assert_eq!(
            l.lifetime(&sample(-60_000_000_000)),
            Some(Duration::from_secs(10)),
            "a publisher clock ahead of ours: age zero"
        );
        let other = Attachment {
            source_gid: gid::myelin_gid(7, 4242, 0x12_3457, false),
            ..sample(0)
        };
        assert_eq!(l.lifetime(&other), None, "another publisher of the process");
        let elsewhere = Attachment {
            source_gid: gid::myelin_gid(8, 4242, 0x12_3456, false),
            ..sample(0)
        };
        assert_eq!(
            l.lifetime(&elsewhere),
            None,
            "the same pid and number on another host"
        );
        let ros = Attachment {
            source_gid: [0x5a; 16],
            ..sample(0)
        };
        assert_eq!(
            l.lifetime(&ros),
            None,
            "rmw_zenoh's hashed gid names no token"
        );
    }
}
