//! Delivery and history: order, keep_last, keep_all, transient local,
//! lifespan, large messages.

use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, PublishError};

use crate::harness::{Side, Test, wait_until};
use crate::msgs::Seq;

fn take_all(sub: &Subscription<Seq>) -> Vec<u64> {
    std::iter::from_fn(|| sub.take()).map(|m| m.seq).collect()
}

fn numbers(line: &str) -> Vec<u64> {
    line.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("a number"))
        .collect()
}

fn list(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// Every message, in publish order, nothing lost.
pub mod in_order {
    use super::*;

    const N: u64 = 2000;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/ordered", QoS::keep_all(), Default::default())
            .unwrap();
        let peer = t.peer("publisher");
        for seq in 0..N {
            let m = sub.wait_for_message(crate::harness::LONG).unwrap();
            assert_eq!(*m, Seq::new(seq));
        }
        assert_eq!(sub.lost(), 0);
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let p = node
            .create_publisher::<Seq>("/ordered", QoS::keep_all())
            .unwrap();
        wait_until("the test's subscription", || p.subscription_count() == 1);
        for seq in 0..N {
            p.publish(Seq::new(seq)).unwrap();
        }
        s.until_told_to_exit();
    }
}

/// keep_last(5) and a reader that reads only after 100 publishes: the
/// newest 5, and the 95 overwritten ones counted in `lost()`.
pub mod keep_last {
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/history", QoS::keep_last(5), Default::default())
            .unwrap();
        let mut peer = t.peer("publisher");
        peer.expect("published");
        t.wait_reached(&sub, 100);
        assert_eq!(take_all(&sub), (95..100).collect::<Vec<_>>());
        assert_eq!(sub.lost(), 95);
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let p = node
            .create_publisher::<Seq>("/history", QoS::keep_last(5))
            .unwrap();
        wait_until("the test's subscription", || p.subscription_count() == 1);
        for seq in 0..100 {
            p.publish(Seq::new(seq)).unwrap();
        }
        s.say("published");
        s.until_told_to_exit();
    }
}

/// Reliable keep_all with a resource limit of 8: every `publish` that
/// returned `Ok` is delivered, in order. A reader that does not read makes
/// the publisher wait up to its `max_blocking_time`, then refuse with
/// `PublishError::ResourceLimit`; a slow reader slows a fast publisher
/// down to its own pace, and nothing is refused or lost. Never a silent
/// drop. Over zenoh no back-pressure reaches the other process, so nothing
/// is refused there: the subscription holds every message past its limit
/// (up to twice it, at least 1,024 more) instead.
pub mod keep_all {
    use super::*;

    const LIMIT: usize = 8;
    const PACED: u64 = 1000;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let idle = node
            .create_polling_subscription::<Seq>(
                "/everything",
                QoS::keep_all().max_samples(LIMIT),
                Default::default(),
            )
            .unwrap();
        let slow = node
            .create_polling_subscription::<Seq>(
                "/paced",
                QoS::keep_all().max_samples(LIMIT),
                Default::default(),
            )
            .unwrap();
        let mut peer = t.peer("publisher");
        // 1. The reader does not read while 200 messages are published
        //    (each waits 1 ms for room, then is refused).
        let accepted = numbers(&peer.expect("accepted"));
        t.wait_reached(&idle, accepted.len() as u64);
        assert_eq!(take_all(&idle), accepted, "delivered = accepted");
        if t.over_zenoh() {
            // Nothing holds a remote publisher back over the network:
            // every publish is accepted, so the subscription holds them
            // all beyond max_samples rather than drop what was accepted.
            assert_eq!(accepted.len(), 200, "over the network nothing is refused");
            assert_eq!(idle.lost(), 0, "and nothing accepted is lost");
        } else {
            // The subscription takes LIMIT; a transport may buffer some
            // more on the way (shared memory: the inbox ring), the rest is
            // refused.
            assert!(
                (LIMIT..200).contains(&accepted.len()),
                "a full subscription refuses: {} of 200 accepted",
                accepted.len()
            );
        }
        // 2. A slow reader sets the pace of a fast publisher that may wait
        //    long enough: every message is accepted and delivered.
        peer.say("go");
        let mut got = Vec::new();
        while got.len() < PACED as usize {
            let Ok(m) = slow.wait_for_message(crate::harness::LONG) else {
                panic!("after {} of {PACED} messages, nothing more came", got.len());
            };
            got.push(m.seq);
            std::thread::sleep(Duration::from_micros(200)); // slow, on purpose
        }
        assert_eq!(got, (0..PACED).collect::<Vec<_>>(), "all, in order");
        peer.expect("all accepted");
        assert!(slow.take().is_none());
        assert_eq!(slow.lost(), 0, "nothing lost");
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let quick = node
            .create_publisher::<Seq>(
                "/everything",
                QoS::keep_all().max_blocking_time(Duration::from_millis(1)),
            )
            .unwrap();
        let patient = node
            .create_publisher::<Seq>(
                "/paced",
                QoS::keep_all().max_blocking_time(crate::harness::LONG),
            )
            .unwrap();
        wait_until("the test's subscriptions", || {
            quick.subscription_count() == 1 && patient.subscription_count() == 1
        });
        let accepted: Vec<u64> = (0..200)
            .filter(|&seq| match quick.publish(Seq::new(seq)) {
                Ok(()) => true,
                Err(PublishError::ResourceLimit { .. }) => false,
                Err(e) => panic!("{e}"),
            })
            .collect();
        s.say(format!("accepted {}", list(&accepted)));
        s.expect("go");
        // As fast as it can: the reader takes a message every 200 us.
        for seq in 0..PACED {
            if let Err(e) = patient.publish(Seq::new(seq)) {
                panic!("message {seq}: {e}");
            }
        }
        s.say("all accepted");
        s.until_told_to_exit();
    }
}

/// A transient-local subscription created after the publisher published
/// 12 messages gets the last `depth` (5) of them, oldest first, then live
/// messages.
pub mod transient_local {
    use super::*;

    pub fn test(t: &Test) {
        let mut peer = t.peer("publisher");
        peer.expect("published");
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>(
                "/latched",
                QoS::keep_last(5).transient_local(),
                Default::default(),
            )
            .unwrap();
        let mut history = Vec::new();
        while history.len() < 5 {
            match sub.wait_for_message(crate::harness::LONG) {
                Ok(m) => history.push(m.seq),
                // Which half failed: no publisher seen means the two
                // processes never linked (over zenoh: the peers' direct
                // link, which gossip makes once); one seen means its
                // history query went unanswered.
                Err(e) => panic!(
                    "{e} after {history:?}; the publisher is {}",
                    if sub.publisher_count() == 0 {
                        "not seen: the processes never linked"
                    } else {
                        "matched: its history never came"
                    }
                ),
            }
        }
        assert_eq!(history, vec![7, 8, 9, 10, 11]);
        peer.say("live");
        assert_eq!(sub.wait_for_message(crate::harness::LONG).unwrap().seq, 100);
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let p = node
            .create_publisher::<Seq>("/latched", QoS::keep_last(5).transient_local())
            .unwrap();
        for seq in 0..12 {
            p.publish(Seq::new(seq)).unwrap();
        }
        s.say("published");
        s.expect("live");
        p.publish(Seq::new(100)).unwrap();
        s.until_told_to_exit();
    }
}

/// Messages older than their publisher's lifespan are never delivered
/// and are counted in `expired()` (and `lost()`); a message of a
/// publisher with a long lifespan still is.
pub mod lifespan {
    use super::*;

    const SHORT: Duration = Duration::from_millis(100);

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/perishable", QoS::keep_all(), Default::default())
            .unwrap();
        let mut peer = t.peer("publisher");
        peer.expect("published");
        let published_before = Instant::now();
        t.wait_reached(&sub, 5);
        // The lifespan passing is what this case is about.
        std::thread::sleep(
            (published_before + 2 * SHORT).saturating_duration_since(Instant::now()),
        );
        assert!(sub.take().is_none(), "an expired message was delivered");
        assert_eq!(sub.expired(), 5);
        assert_eq!(sub.lost(), 5);
        peer.say("fresh");
        assert_eq!(sub.wait_for_message(crate::harness::LONG).unwrap().seq, 99);
        assert_eq!(sub.expired(), 5);
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let short = node
            .create_publisher::<Seq>("/perishable", QoS::keep_all().lifespan(SHORT))
            .unwrap();
        let long = node
            .create_publisher::<Seq>(
                "/perishable",
                QoS::keep_all().lifespan(crate::harness::LONG),
            )
            .unwrap();
        wait_until("the test's subscription", || {
            short.subscription_count() == 1 && long.subscription_count() == 1
        });
        for seq in 0..5 {
            short.publish(Seq::new(seq)).unwrap();
        }
        s.say("published");
        s.expect("fresh");
        long.publish(Seq::new(99)).unwrap();
        s.until_told_to_exit();
    }
}

/// A transient-local publisher's history ages too: a late joiner gets
/// none of the messages whose lifespan has passed (whether the transport
/// leaves them out or delivers them expired, where they are counted),
/// then the live ones.
pub mod lifespan_history {
    use super::*;

    const SHORT: Duration = Duration::from_millis(100);

    fn qos() -> QoS {
        QoS::keep_last(5).transient_local()
    }

    pub fn test(t: &Test) {
        let mut peer = t.peer("publisher");
        peer.expect("published");
        // The history's lifespan passes before this side joins.
        std::thread::sleep(2 * SHORT);
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/stale", qos(), Default::default())
            .unwrap();
        peer.say("live");
        let first = sub.wait_for_message(crate::harness::LONG).unwrap().seq;
        assert_eq!(first, 100, "an expired history message was delivered");
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let p = node
            .create_publisher::<Seq>("/stale", qos().lifespan(SHORT))
            .unwrap();
        for seq in 0..3 {
            p.publish(Seq::new(seq)).unwrap();
        }
        s.say("published");
        s.expect("live");
        // Matched first, so the live message is not taken for history.
        wait_until("the late joiner", || p.subscription_count() == 1);
        p.publish(Seq::new(100)).unwrap();
        s.until_told_to_exit();
    }
}

/// A camera frame (1440 x 1080 x 3 = 4,665,600 bytes) arrives intact.
pub mod large {
    use super::*;

    const IMAGE: usize = 1440 * 1080 * 3;

    fn frame(n: u64) -> Vec<u8> {
        let mut v: Vec<u8> = (0..IMAGE).map(|i| (i as u64 * 31 + n) as u8).collect();
        v[0..8].copy_from_slice(&n.to_le_bytes());
        v
    }

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Blob>("/image_raw", QoS::keep_all(), Default::default())
            .unwrap();
        let peer = t.peer("camera");
        for n in 0..3 {
            let m = sub.wait_for_message(crate::harness::LONG).unwrap();
            assert_eq!(m.len(), IMAGE);
            assert!(m[..] == frame(n)[..], "frame {n} arrived changed");
        }
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let p = node
            .create_publisher::<Blob>("/image_raw", QoS::keep_all())
            .unwrap();
        wait_until("the test's subscription", || p.subscription_count() == 1);
        for n in 0..3 {
            p.publish(Blob::from(frame(n))).unwrap();
        }
        s.until_told_to_exit();
    }
}
