//! History depth, keep_all limits, QoS matching and transient local.

use std::sync::{Arc, Mutex};

use myelin::prelude::*;
use myelin::{PublishError, QosPolicy};

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap()
}

fn collector() -> (Arc<Mutex<Vec<u32>>>, impl FnMut(u32) + Send + 'static) {
    let v = Arc::new(Mutex::new(Vec::new()));
    let v2 = v.clone();
    (v, move |m: u32| v2.lock().unwrap().push(m))
}

#[test]
fn keep_last_with_a_slow_subscriber_keeps_the_newest_depth_and_counts_the_rest_lost() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let (got, cb) = collector();
    let sub = node
        .create_subscription("t", QoS::keep_last(3), cb)
        .unwrap();
    let p = node
        .create_publisher::<u32>("t", QoS::keep_last(3))
        .unwrap();
    for i in 0..10 {
        p.publish(i).unwrap();
    }
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    while exec.spin_some().unwrap() > 0 {}
    assert_eq!(*got.lock().unwrap(), vec![7, 8, 9]);
    assert_eq!(sub.lost(), 7);
}

#[test]
fn keep_last_zero_is_a_one_message_mailbox() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u32>("t", QoS::keep_last(0), SubscriptionOptions::default())
        .unwrap();
    let p = node
        .create_publisher::<u32>("t", QoS::keep_last(0))
        .unwrap();
    for i in 0..5 {
        p.publish(i).unwrap();
    }
    assert_eq!(*sub.take().unwrap(), 4);
    assert!(sub.take().is_none());
    assert_eq!(sub.lost(), 4);
}

#[test]
fn keep_all_keeps_order() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let (got, cb) = collector();
    let sub = node.create_subscription("t", QoS::keep_all(), cb).unwrap();
    let p = node.create_publisher::<u32>("t", QoS::keep_all()).unwrap();
    for i in 0..5000 {
        p.publish(i).unwrap();
    }
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    while exec.spin_some().unwrap() > 0 {}
    assert_eq!(*got.lock().unwrap(), (0..5000).collect::<Vec<_>>());
    assert_eq!(sub.lost(), 0);
}

#[test]
fn keep_all_limit_is_reported_to_the_publisher_and_counted_by_the_subscription() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let full = node
        .create_polling_subscription::<u32>(
            "t",
            QoS::keep_all().max_samples(2),
            SubscriptionOptions::default(),
        )
        .unwrap();
    let roomy = node
        .create_polling_subscription::<u32>("t", QoS::keep_all(), SubscriptionOptions::default())
        .unwrap();
    let p = node.create_publisher::<u32>("t", QoS::keep_all()).unwrap();
    p.publish(1).unwrap();
    p.publish(2).unwrap();
    let err = p.publish(3).unwrap_err();
    assert_eq!(
        err,
        PublishError::ResourceLimit {
            topic: "/t".into(),
            full: 1,
            limit: 2
        }
    );
    assert!(err.to_string().contains("/t"));
    assert_eq!(full.lost(), 1);
    // The other subscription still got all three, in order.
    let r: Vec<u32> = std::iter::from_fn(|| roomy.take().map(|m| *m)).collect();
    assert_eq!(r, vec![1, 2, 3]);
    let f: Vec<u32> = std::iter::from_fn(|| full.take().map(|m| *m)).collect();
    assert_eq!(f, vec![1, 2]);
}

#[test]
fn best_effort_publisher_and_reliable_subscription_do_not_connect_and_both_are_told() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u32>(
            "t",
            QoS::keep_last(5).reliable(),
            SubscriptionOptions::default(),
        )
        .unwrap();
    let p = node
        .create_publisher::<u32>("t", QoS::keep_last(5).best_effort())
        .unwrap();
    p.publish(1).unwrap();
    assert!(sub.take().is_none());
    assert_eq!(p.subscription_count(), 0);
    assert_eq!(p.incompatible_qos().total_count, 1);
    assert_eq!(
        p.incompatible_qos().last_policy,
        Some(QosPolicy::Reliability)
    );
    assert_eq!(sub.incompatible_qos().total_count, 1);
    assert_eq!(
        sub.incompatible_qos().last_policy,
        Some(QosPolicy::Reliability)
    );
    let taken = sub.take_incompatible_qos();
    assert_eq!(taken.total_count_change, 1);
    assert_eq!(sub.incompatible_qos().total_count_change, 0);
}

#[test]
fn reliable_publisher_serves_a_best_effort_subscription() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u32>("t", QoS::sensor_data(), SubscriptionOptions::default())
        .unwrap();
    let p = node
        .create_publisher::<u32>("t", QoS::keep_last(5).reliable())
        .unwrap();
    p.publish(9).unwrap();
    assert_eq!(*sub.take().unwrap(), 9);
    assert_eq!(p.incompatible_qos().total_count, 0);
}

#[test]
fn transient_local_subscription_and_volatile_publisher_are_incompatible() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let p = node
        .create_publisher::<u32>("t", QoS::keep_last(5))
        .unwrap();
    let sub = node
        .create_polling_subscription::<u32>(
            "t",
            QoS::keep_last(5).transient_local(),
            SubscriptionOptions::default(),
        )
        .unwrap();
    p.publish(1).unwrap();
    assert!(sub.take().is_none());
    assert_eq!(
        p.incompatible_qos().last_policy,
        Some(QosPolicy::Durability)
    );
    assert_eq!(
        sub.incompatible_qos().last_policy,
        Some(QosPolicy::Durability)
    );
}

#[test]
fn volatile_subscription_matches_a_transient_local_publisher_without_history() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let p = node
        .create_publisher::<u32>("t", QoS::keep_last(5).transient_local())
        .unwrap();
    p.publish(1).unwrap();
    let sub = node
        .create_polling_subscription::<u32>("t", QoS::keep_last(5), SubscriptionOptions::default())
        .unwrap();
    assert!(
        sub.take().is_none(),
        "a volatile subscription gets no history"
    );
    p.publish(2).unwrap();
    assert_eq!(*sub.take().unwrap(), 2);
    assert_eq!(p.incompatible_qos().total_count, 0);
}

#[test]
fn late_joiner_receives_history_of_two_publishers_oldest_first() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let tl = QoS::keep_last(3).transient_local();
    let a = node.create_publisher::<u32>("map", tl).unwrap();
    let b = node.create_publisher::<u32>("map", tl).unwrap();
    // Interleaved publishes; a keeps its last 3 (12, 14, 16), b its last 3 (13, 15, 17).
    for i in 10..18 {
        if i % 2 == 0 {
            a.publish(i).unwrap()
        } else {
            b.publish(i).unwrap()
        }
    }
    let (got, cb) = collector();
    let _sub = node
        .create_subscription("map", QoS::keep_last(10).transient_local(), cb)
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    // The executor was woken by the replay: spin_some finds the work.
    while exec.spin_some().unwrap() > 0 {}
    assert_eq!(*got.lock().unwrap(), vec![12, 13, 14, 15, 16, 17]);
    // Then live messages follow.
    a.publish(100).unwrap();
    while exec.spin_some().unwrap() > 0 {}
    assert_eq!(got.lock().unwrap().last(), Some(&100));
}

#[test]
fn late_joiner_on_an_attached_node_wakes_a_sleeping_executor() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let p = node
        .create_publisher::<u32>("latched", QoS::keep_last(1).transient_local())
        .unwrap();
    p.publish(42).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let (got, cb) = collector();
    let _sub = node
        .create_subscription("latched", QoS::keep_last(1).transient_local(), cb)
        .unwrap();
    let woke = exec.spin_once(std::time::Duration::from_secs(10)).unwrap();
    assert!(woke);
    assert_eq!(*got.lock().unwrap(), vec![42]);
}

#[test]
fn a_topic_refuses_a_second_type_naming_both() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let _p = node.create_publisher::<u32>("t", QoS::default()).unwrap();
    let err = node
        .create_publisher::<String>("t", QoS::default())
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("uint32") && text.contains("string") && text.contains("/t"),
        "{text}"
    );
}

#[test]
fn dropping_a_subscription_stops_delivery() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let (got, cb) = collector();
    let sub = node
        .create_subscription("t", QoS::keep_last(5), cb)
        .unwrap();
    let p = node
        .create_publisher::<u32>("t", QoS::keep_last(5))
        .unwrap();
    assert_eq!(p.subscription_count(), 1);
    p.publish(1).unwrap();
    drop(sub);
    assert_eq!(p.subscription_count(), 0);
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    exec.spin_some().unwrap();
    assert!(got.lock().unwrap().is_empty());
}

/// Numbers no buffer or timer could be built from (a depth of 2^40 slots,
/// a deadline of u64::MAX seconds) are an `InvalidQos` error naming the
/// policy, for publishers and subscriptions alike; never a crash (a depth
/// of 2^62 used to abort with "capacity overflow").
#[test]
fn absurd_depths_and_durations_are_refused_with_the_policy_named() {
    use myelin::CreateEndpointError;
    use std::time::Duration;
    let ctx = ctx();
    let node = ctx.create_node("absurd").unwrap();
    let policy = |e: CreateEndpointError| match e {
        CreateEndpointError::InvalidQos { policy, .. } => policy,
        e => panic!("expected InvalidQos, got {e}"),
    };
    let huge = QoS::keep_last(1 << 62);
    let e = node
        .create_subscription("a", huge, |_: u32| {})
        .unwrap_err();
    assert_eq!(policy(e), QosPolicy::History);
    let e = node.create_publisher::<u32>("a", huge).unwrap_err();
    assert_eq!(policy(e), QosPolicy::History);
    let mut all = QoS::keep_all();
    all.max_samples = usize::MAX;
    assert!(node.create_publisher::<u32>("b", all).is_err());
    let far = Duration::from_secs(u64::MAX);
    let e = node
        .create_publisher::<u32>("c", QoS::keep_last(1).deadline(far))
        .unwrap_err();
    assert_eq!(policy(e), QosPolicy::Deadline);
    let mut q = QoS::keep_last(1);
    q.lifespan = Some(far);
    let e = node.create_subscription("d", q, |_: u32| {}).unwrap_err();
    assert_eq!(policy(e), QosPolicy::Lifespan);
    // The largest allowed depth works.
    node.create_subscription("e", QoS::keep_last(myelin::qos::MAX_DEPTH), |_: u32| {})
        .unwrap();
}
