//! The graph: matching, types, exactly-once delivery, peers that come and
//! go, and the queries that list endpoints.

use std::collections::BTreeSet;
use std::time::Duration;

use myelin::prelude::*;
use myelin::{
    DiscoveredEndpoint, MatchedStatus, PublisherEvent, PublisherOptions, SubscriptionEvent,
};

use crate::harness::{LONG, Side, Spinning, Test, wait_until};
use crate::msgs::{OTHER_TYPE, Other, SEQ_TYPE, Seq};

fn current_counts<E, C>(events: &std::sync::Mutex<Vec<E>>, f: impl Fn(&E) -> Option<C>) -> Vec<C> {
    events.lock().unwrap().iter().filter_map(f).collect()
}

/// A publisher and a subscription on each side: matched counts, statuses
/// and events go up when the peer comes and back down when it leaves.
pub mod matched {
    use super::*;
    use std::sync::{Arc, Mutex};

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let pub_events = Arc::new(Mutex::new(Vec::new()));
        let sub_events = Arc::new(Mutex::new(Vec::new()));
        let (pe, se) = (pub_events.clone(), sub_events.clone());
        let p = node
            .create_publisher_with::<Seq>(
                "/to_peer",
                QoS::default(),
                PublisherOptions::default().on_event(move |e| pe.lock().unwrap().push(e)),
            )
            .unwrap();
        let s = node
            .create_subscription_with(
                "/from_peer",
                QoS::default(),
                SubscriptionOptions::default().on_event(move |e| se.lock().unwrap().push(e)),
                |_: Seq| {},
            )
            .unwrap();
        let _spin = Spinning::new(&node);
        let mut peer = t.peer("endpoints");
        wait_until("the peer's endpoints to match", || {
            p.subscription_count() == 1 && s.matched_count() == 1
        });
        peer.expect("matched");
        // The event took the status (as rclcpp's executor takes it when
        // it runs the event): the counts, and no change since.
        let up = MatchedStatus {
            total_count: 1,
            total_count_change: 0,
            current_count: 1,
            current_count_change: 0,
        };
        assert_eq!(p.matched(), up);
        assert_eq!(s.matched(), up);
        peer.finish();
        wait_until("the peer's endpoints to leave", || {
            p.subscription_count() == 0 && s.matched_count() == 0
        });
        for st in [p.take_matched(), s.take_matched()] {
            assert_eq!((st.total_count, st.current_count), (1, 0), "{st:?}");
        }
        wait_until("the matched events", || {
            pub_events.lock().unwrap().len() >= 2 && sub_events.lock().unwrap().len() >= 2
        });
        // Each event counts what changed since the previous one.
        let pub_counts = current_counts(&pub_events, |e| match e {
            PublisherEvent::Matched(m) => Some((m.current_count, m.current_count_change)),
            _ => None,
        });
        let sub_counts = current_counts(&sub_events, |e| match e {
            SubscriptionEvent::Matched(m) => Some((m.current_count, m.current_count_change)),
            _ => None,
        });
        assert_eq!(pub_counts, vec![(1, 1), (0, -1)]);
        assert_eq!(sub_counts, vec![(1, 1), (0, -1)]);
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/to_peer", QoS::default(), Default::default())
            .unwrap();
        let p = node
            .create_publisher::<Seq>("/from_peer", QoS::default())
            .unwrap();
        wait_until("the test's endpoints to match", || {
            sub.matched_count() == 1 && p.subscription_count() == 1
        });
        s.say("matched");
        s.until_told_to_exit();
    }
}

/// A topic with another type on the other side: the endpoint created
/// second is refused with an error naming both types, whichever side it
/// is on; no bytes are reinterpreted.
pub mod type_mismatch {
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let _p = node
            .create_publisher::<Seq>("/typed", QoS::default())
            .unwrap();
        let mut peer = t.peer("other_type");
        // The peer came second.
        let refused = peer.expect("subscription");
        assert!(refused.starts_with("refused"), "{refused}");
        assert!(
            refused.contains(SEQ_TYPE) && refused.contains(OTHER_TYPE),
            "{refused}"
        );
        // This side comes second.
        peer.expect("holding");
        let err = node
            .create_polling_subscription::<Seq>("/typed_too", QoS::default(), Default::default())
            .expect_err("a subscription of another type than the peer's publisher");
        let text = err.to_string();
        assert!(
            text.contains(SEQ_TYPE) && text.contains(OTHER_TYPE) && text.contains("/typed_too"),
            "{text}"
        );
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        match node.create_polling_subscription::<Other>(
            "/typed",
            QoS::default(),
            Default::default(),
        ) {
            Err(e) => s.say(format!("subscription refused: {e}")),
            Ok(_) => s.say("subscription accepted"),
        }
        let _p = node
            .create_publisher::<Other>("/typed_too", QoS::default())
            .unwrap();
        s.say("holding");
        s.until_told_to_exit();
    }
}

/// Each side has a publisher and a subscription on one topic: every
/// subscription gets every message of both publishers exactly once (the
/// local one in-process, the other across the transport). Over zenoh the
/// contexts also share memory, so two transports connect the processes
/// and one copy must be dropped.
pub mod exactly_once {
    use super::*;

    const N: u64 = 100;

    /// The numbers each side publishes.
    fn mine(base: u64) -> impl Iterator<Item = u64> {
        base..base + N
    }

    fn expected() -> BTreeSet<u64> {
        mine(0).chain(mine(1000)).collect()
    }

    /// Publish ours, then read 2N messages and check each came once.
    fn exchange(p: &Publisher<Seq>, sub: &Subscription<Seq>, base: u64) {
        for seq in mine(base) {
            p.publish(Seq::new(seq)).unwrap();
        }
        let got: Vec<u64> = (0..2 * N)
            .map(|_| sub.wait_for_message(LONG).unwrap().seq)
            .collect();
        let distinct: BTreeSet<u64> = got.iter().copied().collect();
        assert_eq!(distinct.len(), got.len(), "a message arrived twice");
        assert_eq!(distinct, expected());
    }

    fn endpoints(node: &Node) -> (Publisher<Seq>, Subscription<Seq>) {
        let sub = node
            .create_polling_subscription::<Seq>("/once", QoS::keep_all(), Default::default())
            .unwrap();
        let p = node
            .create_publisher::<Seq>("/once", QoS::keep_all())
            .unwrap();
        (p, sub)
    }

    fn matched(p: &Publisher<Seq>, sub: &Subscription<Seq>) -> bool {
        p.subscription_count() == 2 && sub.matched_count() == 2
    }

    pub fn test(t: &Test) {
        let ctx = t.context_also_on_shared_memory();
        let node = ctx.create_node("test").unwrap();
        let (p, sub) = endpoints(&node);
        let mut peer = t.peer_also_on_shared_memory("twin");
        wait_until("both subscriptions and both publishers", || {
            matched(&p, &sub)
        });
        peer.expect("matched");
        exchange(&p, &sub, 0);
        peer.expect("received");
        assert!(sub.take().is_none(), "a message arrived twice");
        // Counted once each, whatever the path.
        assert_eq!((p.subscription_count(), sub.matched_count()), (2, 2));
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let (p, sub) = endpoints(&node);
        wait_until("both subscriptions and both publishers", || {
            matched(&p, &sub)
        });
        s.say("matched");
        exchange(&p, &sub, 1000);
        assert_eq!((p.subscription_count(), sub.matched_count()), (2, 2));
        s.say("received");
        s.until_told_to_exit();
    }
}

/// A peer killed (`kill -9`; in one process: its entities dropped) leaves
/// the graph, the test's publisher keeps publishing to nobody, and a new
/// peer is matched and served as the first was: both directions.
pub mod restart {
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let p = node
            .create_publisher::<Seq>("/to_peer", QoS::keep_all())
            .unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/from_peer", QoS::keep_all(), Default::default())
            .unwrap();
        for round in 0..2u64 {
            let mut peer = t.peer("echo");
            wait_until("the peer's endpoints", || {
                p.subscription_count() == 1 && sub.matched_count() == 1
            });
            peer.expect("matched");
            for i in 0..10 {
                p.publish(Seq::new(round * 100 + i)).unwrap();
            }
            for i in 0..10 {
                assert_eq!(sub.wait_for_message(LONG).unwrap().seq, round * 100 + i);
            }
            peer.kill();
            wait_until("the killed peer to leave the graph", || {
                p.subscription_count() == 0 && sub.matched_count() == 0
            });
            p.publish(Seq::new(999)).unwrap();
        }
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/to_peer", QoS::keep_all(), Default::default())
            .unwrap();
        let p = node
            .create_publisher::<Seq>("/from_peer", QoS::keep_all())
            .unwrap();
        wait_until("the test's endpoints", || {
            sub.matched_count() == 1 && p.subscription_count() == 1
        });
        s.say("matched");
        for _ in 0..10 {
            let m = sub.wait_for_message(LONG).unwrap().into_owned();
            p.publish(m).unwrap();
        }
        s.until_told_to_exit();
    }
}

/// The peer's node `/graph_peer` with a publisher on `/graph/data` and a
/// subscription on `/graph/commands`.
pub mod graph_peer {
    use super::*;

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("graph_peer").unwrap();
        let _p = node
            .create_publisher::<Seq>("/graph/data", QoS::default())
            .unwrap();
        let _s = node
            .create_polling_subscription::<Seq>(
                "/graph/commands",
                QoS::default(),
                Default::default(),
            )
            .unwrap();
        s.say("ready");
        s.until_told_to_exit();
    }

    /// Whether `seen` holds both of the peer's endpoints.
    pub fn listed(seen: &[DiscoveredEndpoint]) -> bool {
        let has = |publisher: bool, topic: &str| {
            seen.iter().any(|e| {
                e.is_publisher == publisher
                    && e.topic == topic
                    && e.type_name == SEQ_TYPE
                    && e.node == "/graph_peer"
            })
        };
        has(true, "/graph/data") && has(false, "/graph/commands")
    }

    /// Whether `seen` holds none of them.
    pub fn gone(seen: &[DiscoveredEndpoint]) -> bool {
        !seen.iter().any(|e| e.node == "/graph_peer")
    }
}

/// A node's graph queries (`count_endpoints`, `topic_names_and_types`)
/// see the peer's endpoints, and stop seeing them when it leaves.
pub mod node_queries {
    pub use super::graph_peer::peer;
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        // One of ours on the topic: counted once, not again through the
        // transport that also lists it.
        let _ours = node
            .create_polling_subscription::<Seq>("/graph/data", QoS::default(), Default::default())
            .unwrap();
        let mut peer = t.peer("graph_peer");
        peer.expect("ready");
        wait_until("the peer's endpoints in the node's counts", || {
            node.count_endpoints::<Seq>("/graph/data") == Ok((1, 1))
                && node.count_endpoints::<Seq>("/graph/commands") == Ok((0, 1))
        });
        assert_eq!(node.count_publishers("/graph/data"), Ok(1));
        assert_eq!(node.count_subscribers("/graph/data"), Ok(1));
        assert_eq!(node.count_subscribers("graph/commands"), Ok(1));
        assert_eq!(node.count_endpoints::<Other>("/graph/commands"), Ok((0, 0)));
        let nodes = node.node_names();
        assert!(
            nodes.contains(&"/graph_peer".to_string()) && nodes.contains(&"/test".to_string()),
            "{nodes:?}"
        );
        let topics = node.topic_names_and_types();
        for topic in ["/graph/data", "/graph/commands"] {
            assert!(
                topics
                    .iter()
                    .any(|(n, types)| n == topic && types.iter().any(|ty| ty == SEQ_TYPE)),
                "{topics:?}"
            );
        }
        peer.finish();
        wait_until("the peer's endpoints to leave the counts", || {
            node.count_endpoints::<Seq>("/graph/data") == Ok((0, 1))
                && node.count_endpoints::<Seq>("/graph/commands") == Ok((0, 0))
        });
        assert!(
            !node
                .topic_names_and_types()
                .iter()
                .any(|(n, _)| n == "/graph/commands"),
            "the peer's topic is still listed after it left"
        );
        assert!(!node.node_names().contains(&"/graph_peer".to_string()));
    }
}

/// `Context::discover` lists the peer's endpoints with node, topic and
/// type, and forgets them when it leaves.
pub mod discover {
    pub use super::graph_peer::peer;
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let mut peer = t.peer("graph_peer");
        peer.expect("ready");
        let look = || ctx.discover(Duration::from_millis(100));
        wait_until("the peer's endpoints in discover()", || {
            graph_peer::listed(&look())
        });
        peer.finish();
        wait_until("the peer's endpoints to leave discover()", || {
            graph_peer::gone(&look())
        });
    }
}

/// `myelin::endpoints(domain)`, the host's view of a domain, lists the
/// peer's endpoints and forgets them when it leaves.
pub mod host_endpoints {
    pub use super::graph_peer::peer;
    use super::*;

    pub fn test(t: &Test) {
        let _ctx = t.context();
        let mut peer = t.peer("graph_peer");
        peer.expect("ready");
        wait_until("the peer's endpoints in endpoints()", || {
            graph_peer::listed(&myelin::endpoints(t.domain()))
        });
        peer.finish();
        wait_until("the peer's endpoints to leave endpoints()", || {
            graph_peer::gone(&myelin::endpoints(t.domain()))
        });
    }
}
