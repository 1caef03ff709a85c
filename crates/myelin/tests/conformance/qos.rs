//! QoS matching and QoS events: reliability, incompatible QoS, deadline,
//! liveliness.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use myelin::prelude::*;
use myelin::{LivelinessKind, PublisherEvent, PublisherOptions, QosPolicy, SubscriptionEvent};

use crate::harness::{LONG, Side, Spinning, Test, wait_until};
use crate::msgs::Seq;

/// Events collected by an event callback.
type Events<E> = Arc<Mutex<Vec<E>>>;

fn collect<E: Send + 'static>() -> (Events<E>, impl Fn(E) + Send + Sync + 'static) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let e = events.clone();
    (events, move |x| e.lock().unwrap().push(x))
}

fn any<E>(events: &Events<E>, f: impl Fn(&E) -> bool) -> bool {
    events.lock().unwrap().iter().any(f)
}

/// A best-effort publisher never connects to a reliable subscription:
/// both sides are told (reliability) and nothing is delivered.
pub mod best_effort_to_reliable {
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>(
                "/reliable_only",
                QoS::keep_last(5).reliable(),
                Default::default(),
            )
            .unwrap();
        let mut peer = t.peer("publisher");
        wait_until("the incompatible publisher to be reported", || {
            sub.incompatible_qos().total_count == 1
        });
        assert_eq!(
            sub.incompatible_qos().last_policy,
            Some(QosPolicy::Reliability)
        );
        assert_eq!(peer.expect("refused by"), "Reliability");
        peer.say("publish");
        peer.expect("published");
        assert!(sub.take().is_none(), "delivered despite incompatible QoS");
        assert_eq!(sub.matched_count(), 0);
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let p = node
            .create_publisher::<Seq>("/reliable_only", QoS::keep_last(5).best_effort())
            .unwrap();
        wait_until("the incompatible subscription to be reported", || {
            p.incompatible_qos().total_count == 1
        });
        assert_eq!(p.subscription_count(), 0);
        s.say(format!(
            "refused by {:?}",
            p.incompatible_qos().last_policy.unwrap()
        ));
        s.expect("publish");
        p.publish(Seq::new(1)).unwrap();
        s.say("published");
        s.until_told_to_exit();
    }
}

/// A reliable publisher serves a best-effort subscription.
pub mod reliable_to_best_effort {
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/sensor", QoS::sensor_data(), Default::default())
            .unwrap();
        let peer = t.peer("publisher");
        assert_eq!(sub.wait_for_message(LONG).unwrap().seq, 7);
        assert_eq!(sub.incompatible_qos().total_count, 0);
        assert_eq!(sub.matched_count(), 1);
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let p = node
            .create_publisher::<Seq>("/sensor", QoS::keep_last(5).reliable())
            .unwrap();
        wait_until("the test's subscription", || p.subscription_count() == 1);
        p.publish(Seq::new(7)).unwrap();
        assert_eq!(p.incompatible_qos().total_count, 0);
        s.until_told_to_exit();
    }
}

/// A volatile publisher and a transient-local subscription: the
/// incompatible-QoS status and event on both sides name durability.
pub mod incompatible {
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let (events, on_event) = collect();
        let sub = node
            .create_subscription_with(
                "/latched_map",
                QoS::keep_last(1).transient_local(),
                SubscriptionOptions::default().on_event(on_event),
                |_: Seq| {},
            )
            .unwrap();
        let _spin = Spinning::new(&node);
        let mut peer = t.peer("publisher");
        wait_until("the subscription's incompatible-QoS event", || {
            any(&events, |e| {
                matches!(e, SubscriptionEvent::IncompatibleQos(s)
                    if s.last_policy == Some(QosPolicy::Durability))
            })
        });
        assert_eq!(peer.expect("refused by"), "Durability");
        let st = sub.incompatible_qos();
        assert_eq!(
            (st.total_count, st.last_policy),
            (1, Some(QosPolicy::Durability))
        );
        assert_eq!(sub.matched_count(), 0);
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let (events, on_event) = collect();
        let p = node
            .create_publisher_with::<Seq>(
                "/latched_map",
                QoS::keep_last(1),
                PublisherOptions::default().on_event(on_event),
            )
            .unwrap();
        let _spin = Spinning::new(&node);
        wait_until("the publisher's incompatible-QoS event", || {
            any(&events, |e| matches!(e, PublisherEvent::IncompatibleQos(_)))
        });
        let st = p.incompatible_qos();
        assert_eq!(st.total_count, 1);
        assert_eq!(p.subscription_count(), 0);
        s.say(format!("refused by {:?}", st.last_policy.unwrap()));
        s.until_told_to_exit();
    }
}

/// A publisher that stops publishing misses its deadline: offered on its
/// side, requested on the subscription's, as statuses and events.
pub mod deadline {
    use super::*;

    const PERIOD: Duration = Duration::from_millis(50);

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let (events, on_event) = collect();
        let sub = node
            .create_subscription_with(
                "/scan",
                QoS::default().deadline(PERIOD),
                SubscriptionOptions::default().on_event(on_event),
                |_: Seq| {},
            )
            .unwrap();
        let _spin = Spinning::new(&node);
        let mut peer = t.peer("publisher");
        peer.expect("stopped");
        wait_until("a requested deadline missed", || {
            sub.deadline_missed().total_count >= 1
                && any(&events, |e| {
                    matches!(e, SubscriptionEvent::RequestedDeadlineMissed(_))
                })
        });
        peer.expect("offered deadline missed");
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let (events, on_event) = collect();
        let p = node
            .create_publisher_with::<Seq>(
                "/scan",
                QoS::default().deadline(PERIOD),
                PublisherOptions::default().on_event(on_event),
            )
            .unwrap();
        let _spin = Spinning::new(&node);
        wait_until("the test's subscription", || p.subscription_count() == 1);
        for seq in 0..5 {
            p.publish(Seq::new(seq)).unwrap();
            std::thread::sleep(PERIOD / 5); // a publisher keeping its deadline
        }
        s.say("stopped");
        wait_until("an offered deadline missed", || {
            p.deadline_missed().total_count >= 1
                && any(&events, |e| {
                    matches!(e, PublisherEvent::OfferedDeadlineMissed(_))
                })
        });
        s.say("offered deadline missed");
        s.until_told_to_exit();
    }
}

/// An automatic publisher is alive while it exists; when it goes away
/// it leaves the subscription's liveliness counts.
pub mod automatic_liveliness {
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_polling_subscription::<Seq>("/alive", QoS::default(), Default::default())
            .unwrap();
        let mut peer = t.peer("publisher");
        peer.expect("ready");
        wait_until("the peer's publisher to be alive", || {
            sub.liveliness_changed().alive_count == 1
        });
        peer.finish();
        wait_until("the peer's publisher to leave", || {
            let st = sub.liveliness_changed();
            (st.alive_count, st.not_alive_count) == (0, 0)
        });
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let _p = node
            .create_publisher::<Seq>("/alive", QoS::default())
            .unwrap();
        s.say("ready");
        s.until_told_to_exit();
    }
}

/// A manual-by-topic publisher with a lease: alive while it asserts,
/// not alive after a quiet lease, alive again when it asserts again
/// (`liveliness_changed` status and events).
pub mod manual_liveliness {
    use super::*;

    const LEASE: Duration = Duration::from_millis(200);

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let (events, on_event) = collect();
        let sub = node
            .create_subscription_with(
                "/heartbeat",
                QoS::default().liveliness(LivelinessKind::ManualByTopic, LEASE),
                SubscriptionOptions::default().on_event(on_event),
                |_: Seq| {},
            )
            .unwrap();
        let _spin = Spinning::new(&node);
        let mut peer = t.peer("publisher");
        let state = || {
            let st = sub.liveliness_changed();
            (st.alive_count, st.not_alive_count)
        };
        wait_until("the asserting publisher to be alive", || state() == (1, 0));
        peer.say("quiet");
        wait_until("the quiet publisher to be not alive", || state() == (0, 1));
        peer.say("assert");
        wait_until("the publisher to be alive again", || state() == (1, 0));
        // The status changes before the executor has run the event
        // callback, so the third event may still be on its way.
        let changes = || {
            events
                .lock()
                .unwrap()
                .iter()
                .filter(|e| matches!(e, SubscriptionEvent::LivelinessChanged(_)))
                .count()
        };
        wait_until("three liveliness events", || changes() >= 3);
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let p = Arc::new(
            node.create_publisher::<Seq>(
                "/heartbeat",
                QoS::default().liveliness(LivelinessKind::ManualByTopic, LEASE),
            )
            .unwrap(),
        );
        // Assert four times per lease while `on`.
        let on = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (p2, on2) = (p.clone(), on.clone());
        let _timer = node
            .create_timer(LEASE / 4, move || {
                if on2.load(std::sync::atomic::Ordering::Relaxed) {
                    p2.assert_liveliness();
                }
            })
            .unwrap();
        p.publish(Seq::new(0)).unwrap();
        let _spin = Spinning::new(&node);
        s.expect("quiet");
        on.store(false, std::sync::atomic::Ordering::Relaxed);
        s.expect("assert");
        on.store(true, std::sync::atomic::Ordering::Relaxed);
        s.until_told_to_exit();
    }
}

/// An automatic publisher with a lease, whose process stops (`SIGSTOP`:
/// a breakpoint, a hung host) while it publishes nothing: its process
/// asserts for it, so it stays alive while idle, is not alive within
/// about a lease once stopped, and is alive again when the process
/// continues. (In one process a publisher is alive while it exists: the
/// intra case checks only the idle part.)
pub mod automatic_liveliness_with_a_lease {
    use super::*;

    const LEASE: Duration = Duration::from_secs(1);

    fn qos() -> QoS {
        QoS::default().liveliness(LivelinessKind::Automatic, LEASE)
    }

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let sub = node
            .create_subscription("/automatic", qos(), |_: Seq| {})
            .unwrap();
        let _spin = Spinning::new(&node);
        let mut peer = t.peer("publisher");
        let state = || {
            let st = sub.liveliness_changed();
            (st.alive_count, st.not_alive_count)
        };
        peer.expect("ready");
        wait_until("the idle publisher to be alive", || state() == (1, 0));
        // Idle for several leases: still alive (nobody publishes or
        // asserts but the process).
        std::thread::sleep(LEASE * 3);
        assert_eq!(state(), (1, 0), "an idle automatic publisher lapsed");
        if peer.is_process() {
            peer.pause(true);
            wait_until("the stopped publisher to be not alive", || {
                state() == (0, 1)
            });
            peer.pause(false);
            wait_until("the continued publisher to be alive again", || {
                state() == (1, 0)
            });
        }
        peer.finish();
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        // Never published on, never asserted by hand, never spun.
        let _p = node.create_publisher::<Seq>("/automatic", qos()).unwrap();
        s.say("ready");
        s.until_told_to_exit();
    }
}
