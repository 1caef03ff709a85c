//! Deadline, lifespan, liveliness and matched events. Bounds are generous
//! (an event within N periods), never tight wall-clock limits.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{
    CreateEndpointError, LivelinessKind, PublisherEvent, PublisherOptions, QosPolicy,
    SubscriptionEvent,
};

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn deadline_and_liveliness_compatibility_matrix_informs_both_sides() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let cases = [
        // (offered, requested, compatible?, policy)
        (
            QoS::default().deadline(ms(10)),
            QoS::default().deadline(ms(20)),
            true,
            None,
        ),
        (
            QoS::default().deadline(ms(30)),
            QoS::default().deadline(ms(20)),
            false,
            Some(QosPolicy::Deadline),
        ),
        (
            QoS::default(),
            QoS::default().deadline(ms(20)),
            false,
            Some(QosPolicy::Deadline),
        ),
        (QoS::default().deadline(ms(30)), QoS::default(), true, None),
        (
            QoS::default().liveliness(LivelinessKind::ManualByTopic, ms(10)),
            QoS::default().liveliness(LivelinessKind::Automatic, ms(20)),
            true,
            None,
        ),
        (
            QoS::default().liveliness(LivelinessKind::Automatic, ms(10)),
            QoS::default().liveliness(LivelinessKind::ManualByTopic, ms(20)),
            false,
            Some(QosPolicy::Liveliness),
        ),
        (
            QoS::default().liveliness(LivelinessKind::Automatic, ms(30)),
            QoS::default().liveliness(LivelinessKind::Automatic, ms(20)),
            false,
            Some(QosPolicy::Liveliness),
        ),
        (QoS::default().lifespan(ms(1)), QoS::default(), true, None),
    ];
    for (i, (offered, requested, ok, policy)) in cases.into_iter().enumerate() {
        let topic = format!("t{i}");
        let sub = node
            .create_polling_subscription::<u8>(&topic, requested, SubscriptionOptions::default())
            .unwrap();
        let p = node.create_publisher::<u8>(&topic, offered).unwrap();
        assert_eq!(p.subscription_count() == 1, ok, "case {i}");
        assert_eq!(sub.matched_count() == 1, ok, "case {i}");
        assert_eq!(p.incompatible_qos().last_policy, policy, "case {i}");
        assert_eq!(sub.incompatible_qos().last_policy, policy, "case {i}");
    }
}

#[test]
fn an_expired_message_is_never_delivered_and_is_counted() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u32>("t", QoS::keep_all(), SubscriptionOptions::default())
        .unwrap();
    let p = node
        .create_publisher::<u32>("t", QoS::keep_all().lifespan(ms(20)))
        .unwrap();
    for i in 0..5 {
        p.publish(i).unwrap();
    }
    std::thread::sleep(ms(50));
    assert!(
        sub.take().is_none(),
        "expired messages must not be delivered"
    );
    assert_eq!(sub.expired(), 5);
    assert_eq!(sub.lost(), 5);
    // A fresh message is delivered.
    p.publish(9).unwrap();
    assert_eq!(*sub.take().unwrap(), 9);
}

/// Collect events from callbacks run by an executor spinning on a thread.
struct Spinner {
    stop: myelin::StopHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    fn start(node: &Node) -> Spinner {
        let mut exec = Executor::new();
        exec.add_node(node).unwrap();
        let stop = exec.stop_handle();
        Spinner {
            stop,
            thread: Some(std::thread::spawn(move || exec.spin().unwrap())),
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.stop();
        self.thread.take().unwrap().join().unwrap();
    }
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(ms(2));
    }
    f()
}

#[test]
fn a_stopped_publisher_misses_its_deadline_on_both_sides_and_restarting_ends_it() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub_events = Arc::new(Mutex::new(Vec::new()));
    let pub_events = Arc::new(Mutex::new(Vec::new()));
    let (se, pe) = (sub_events.clone(), pub_events.clone());
    let deadline = ms(20);
    let sub = node
        .create_subscription_with(
            "scan",
            QoS::default().deadline(deadline),
            SubscriptionOptions::default().on_event(move |e| se.lock().unwrap().push(e)),
            |_m: u32| {},
        )
        .unwrap();
    let p = node
        .create_publisher_with::<u32>(
            "scan",
            QoS::default().deadline(deadline),
            PublisherOptions::default().on_event(move |e| pe.lock().unwrap().push(e)),
        )
        .unwrap();
    let _spin = Spinner::start(&node);
    // Publish at 100 Hz for a while: no misses.
    for i in 0..30 {
        p.publish(i).unwrap();
        std::thread::sleep(ms(10));
    }
    let missed_while_publishing = sub.deadline_missed().total_count;
    // Stop: a miss is reported within a couple of deadline periods.
    let stopped = Instant::now();
    assert!(wait_until(Duration::from_secs(10), || sub
        .deadline_missed()
        .total_count
        > missed_while_publishing));
    let took = stopped.elapsed();
    assert!(wait_until(Duration::from_secs(10), || p
        .deadline_missed()
        .total_count
        > 0));
    assert!(
        sub_events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, SubscriptionEvent::RequestedDeadlineMissed(_)))
    );
    assert!(
        pub_events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, PublisherEvent::OfferedDeadlineMissed(_)))
    );
    // Restart: the misses stop.
    for i in 0..20 {
        p.publish(i).unwrap();
        std::thread::sleep(ms(5));
    }
    let before = sub.deadline_missed().total_count;
    for i in 0..20 {
        p.publish(i).unwrap();
        std::thread::sleep(ms(5));
    }
    assert_eq!(
        sub.deadline_missed().total_count,
        before,
        "missed while publishing at 200 Hz"
    );
    // Generous bound: "within 2 deadline periods" of the checker's cadence
    // plus scheduling; only a sanity check that it is not the timeout.
    assert!(took < Duration::from_secs(10));
}

#[test]
fn publish_copy_with_nobody_listening_still_counts_for_the_offered_deadline_and_liveliness() {
    // A publisher nobody listens to skips the copy, not the bookkeeping:
    // publishing every 20 ms against a 200 ms deadline misses nothing, and
    // each publish asserts its liveliness (lease 300 ms), as with
    // `publish`. (Margins of 10x and 15x the publishing period.)
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let qos = QoS::default()
        .deadline(ms(200))
        .liveliness(LivelinessKind::ManualByTopic, ms(300));
    let p = node.create_publisher::<u32>("quiet", qos).unwrap();
    let _spin = Spinner::start(&node);
    p.publish(0).unwrap();
    for i in 1..50 {
        p.publish_copy(&i).unwrap();
        std::thread::sleep(ms(20));
    }
    assert_eq!(p.subscription_count(), 0);
    assert_eq!(
        p.deadline_missed().total_count,
        0,
        "missed while publishing at 50 Hz"
    );
    // The last publish asserted well within the lease: a subscription that
    // comes now sees the publisher alive.
    let sub = node
        .create_polling_subscription::<u32>("quiet", qos, Default::default())
        .unwrap();
    assert_eq!(sub.liveliness_changed().alive_count, 1);
}

#[test]
fn manual_liveliness_lapses_when_the_publisher_goes_quiet_and_returns_when_it_asserts() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let lease = ms(50);
    let sub = node
        .create_subscription_with(
            "heartbeat",
            QoS::default().liveliness(LivelinessKind::ManualByTopic, ms(100)),
            SubscriptionOptions::default().on_event(move |e| ev.lock().unwrap().push(e)),
            |_m: u8| {},
        )
        .unwrap();
    let p = node
        .create_publisher::<u8>(
            "heartbeat",
            QoS::default().liveliness(LivelinessKind::ManualByTopic, lease),
        )
        .unwrap();
    let _spin = Spinner::start(&node);
    p.publish(1).unwrap();
    assert_eq!(sub.liveliness_changed().alive_count, 1);
    // Quiet: within about one lease (plus the checker's period) it is not alive.
    assert!(wait_until(Duration::from_secs(10), || sub
        .liveliness_changed()
        .not_alive_count
        == 1));
    assert_eq!(sub.liveliness_changed().alive_count, 0);
    // Asserting brings it back.
    p.assert_liveliness();
    assert!(wait_until(Duration::from_secs(10), || sub
        .liveliness_changed()
        .alive_count
        == 1));
    // Dropping it removes it from both counts.
    drop(p);
    let st = sub.liveliness_changed();
    assert_eq!((st.alive_count, st.not_alive_count), (0, 0));
    assert!(wait_until(Duration::from_secs(10), || events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, SubscriptionEvent::LivelinessChanged(_)))
        .count()
        >= 4));
}

#[test]
fn an_automatic_publisher_is_alive_until_dropped() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u8>("t", QoS::default(), SubscriptionOptions::default())
        .unwrap();
    let p = node.create_publisher::<u8>("t", QoS::default()).unwrap();
    assert_eq!(sub.liveliness_changed().alive_count, 1);
    drop(p);
    let st = sub.take_liveliness_changed();
    assert_eq!((st.alive_count, st.alive_count_change), (0, 0));
}

#[test]
fn matched_counts_go_up_and_down_and_events_arrive_through_the_executor() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let p = node
        .create_publisher_with::<u8>(
            "t",
            QoS::default(),
            PublisherOptions::default().on_event(move |e| ev.lock().unwrap().push(e)),
        )
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let s1 = node
        .create_subscription("t", QoS::default(), |_m: u8| {})
        .unwrap();
    let s2 = node
        .create_polling_subscription::<u8>("t", QoS::default(), SubscriptionOptions::default())
        .unwrap();
    assert_eq!(p.matched().current_count, 2);
    assert_eq!(s1.matched_count(), 1);
    drop(s1);
    assert_eq!(p.matched().current_count, 1);
    // Each event took the status (rclcpp's executor takes it when it runs
    // the event): nothing changed since the last one.
    let st = p.take_matched();
    assert_eq!(
        (st.total_count, st.current_count, st.current_count_change),
        (2, 1, 0)
    );
    assert_eq!(p.matched().current_count_change, 0);
    drop(s2);
    exec.spin_until(Duration::from_secs(10), || {
        events.lock().unwrap().len() >= 4
    })
    .unwrap();
    // Each event counts the changes since the previous one, not since the
    // publisher was created.
    let counts: Vec<(u32, i32, u64)> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            PublisherEvent::Matched(m) => Some((
                m.current_count,
                m.current_count_change,
                m.total_count_change,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(counts, vec![(1, 1, 1), (2, 1, 1), (1, -1, 0), (0, -1, 0)]);
}

#[test]
fn incompatible_qos_arrives_as_an_event_too() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let _sub = node
        .create_subscription_with(
            "t",
            QoS::default().reliable(),
            SubscriptionOptions::default().on_event(move |e| ev.lock().unwrap().push(e)),
            |_m: u8| {},
        )
        .unwrap();
    let _p = node
        .create_publisher::<u8>("t", QoS::default().best_effort())
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    exec.spin_until(Duration::from_secs(10), || {
        !events.lock().unwrap().is_empty()
    })
    .unwrap();
    assert!(matches!(
        events.lock().unwrap()[0],
        SubscriptionEvent::IncompatibleQos(s) if s.last_policy == Some(QosPolicy::Reliability)
    ));
}

#[test]
fn a_zero_deadline_is_refused_naming_the_policy() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let err = node
        .create_publisher::<u8>("t", QoS::default().deadline(Duration::ZERO))
        .unwrap_err();
    assert!(matches!(
        err,
        CreateEndpointError::InvalidQos {
            policy: QosPolicy::Deadline,
            ..
        }
    ));
    assert!(err.to_string().contains("deadline"), "{err}");
}

/// A subscription of `u8` on `topic` whose events are collected.
fn subscription_with_events(
    node: &Node,
    topic: &str,
) -> (Subscription<u8>, Arc<Mutex<Vec<SubscriptionEvent>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let sub = node
        .create_subscription_with(
            topic,
            QoS::default(),
            SubscriptionOptions::default().on_event(move |e| ev.lock().unwrap().push(e)),
            |_m: u8| {},
        )
        .unwrap();
    (sub, events)
}

/// The subscription's side: a publisher that comes and goes, in this
/// context, is one matched event each way, with the change since the last.
#[test]
fn a_subscription_hears_a_publisher_come_and_go() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let (_sub, events) = subscription_with_events(&node, "come_and_go");
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let p = node
        .create_publisher::<u8>("come_and_go", QoS::default())
        .unwrap();
    let matched = || -> Vec<(u32, i32)> {
        events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                SubscriptionEvent::Matched(m) => Some((m.current_count, m.current_count_change)),
                _ => None,
            })
            .collect()
    };
    exec.spin_until(Duration::from_secs(10), || !matched().is_empty())
        .unwrap();
    drop(p);
    exec.spin_until(Duration::from_secs(10), || matched().len() >= 2)
        .unwrap();
    assert_eq!(matched(), vec![(1, 1), (0, -1)]);
}

/// An event raised while its node is in no executor is run by the next
/// executor the node joins (rclcpp's executor finds what is ready when a
/// node is added), as a message that arrived meanwhile is.
#[test]
fn an_event_raised_while_no_executor_spins_the_node_is_run_by_the_next() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let (_sub, events) = subscription_with_events(&node, "between");
    // Raised with no executor at all.
    let p = node
        .create_publisher::<u8>("between", QoS::default())
        .unwrap();
    let matched = || {
        events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, SubscriptionEvent::Matched(_)))
            .count()
    };
    {
        let mut exec = Executor::new();
        exec.add_node(&node).unwrap();
        assert!(
            exec.spin_until(Duration::from_secs(10), || matched() == 1)
                .unwrap(),
            "the event raised before the node had an executor"
        );
    }
    // Raised after that executor let the node go.
    drop(p);
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    assert!(
        exec.spin_until(Duration::from_secs(10), || matched() == 2)
            .unwrap(),
        "the event raised between two executors"
    );
}
