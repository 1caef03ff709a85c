//! Inline delivery (callbacks in the publisher's thread) and phase-aligned
//! timers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use myelin::PublishError;
use myelin::prelude::*;

mod common {
    pub mod warmer;
}
use common::warmer::Warmer;

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap()
}

#[test]
fn inline_callback_runs_in_the_publishers_thread_before_publish_returns() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let _sub = node
        .create_subscription_with(
            "t",
            QoS::default(),
            SubscriptionOptions::inline(),
            move |m: u32| {
                s.lock().unwrap().push((m, std::thread::current().id()));
            },
        )
        .unwrap();
    let p = node.create_publisher::<u32>("t", QoS::default()).unwrap();
    p.publish(7).unwrap();
    // No executor anywhere: the callback already ran, on this thread.
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(7, std::thread::current().id())]
    );
}

#[test]
fn an_inline_relay_chain_moves_the_message_through_without_an_executor() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let _sink = node
        .create_subscription_with(
            "c",
            QoS::default(),
            SubscriptionOptions::inline(),
            move |m: Vec<u8>| g.lock().unwrap().push(m.as_ptr() as usize),
        )
        .unwrap();
    let to_c = node
        .create_publisher::<Vec<u8>>("c", QoS::default())
        .unwrap();
    let _relay = node
        .create_subscription_with(
            "b",
            QoS::default(),
            SubscriptionOptions::inline(),
            move |m: Vec<u8>| to_c.publish(m).unwrap(),
        )
        .unwrap();
    let to_b = node
        .create_publisher::<Vec<u8>>("b", QoS::default())
        .unwrap();
    let msg = vec![1u8; 1 << 20];
    let addr = msg.as_ptr() as usize;
    to_b.publish(msg).unwrap();
    assert_eq!(
        *got.lock().unwrap(),
        vec![addr],
        "moved through both hops, no copy"
    );
}

/// The nested publish also finds the publisher's matched list taken by
/// the outer one (`LaneCell`) and reads it outside the lane.
#[test]
fn a_reentrant_inline_publish_is_buffered_and_drained_not_deadlocked() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let p = Arc::new(
        node.create_publisher::<u32>("loop", QoS::keep_all())
            .unwrap(),
    );
    let got = Arc::new(Mutex::new(Vec::new()));
    let (g, p2) = (got.clone(), p.clone());
    let _sub = node
        .create_subscription_with(
            "loop",
            QoS::keep_all(),
            SubscriptionOptions::inline(),
            move |m: u32| {
                g.lock().unwrap().push(m);
                if m < 5 {
                    p2.publish(m + 1).unwrap(); // re-enters our own topic
                }
            },
        )
        .unwrap();
    p.publish(0).unwrap();
    assert_eq!(*got.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn an_inline_panic_is_returned_by_publish_and_the_subscription_keeps_working() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let _sub = node
        .create_subscription_with(
            "t",
            QoS::default(),
            SubscriptionOptions::inline(),
            move |m: u32| {
                if m == 13 {
                    panic!("unlucky");
                }
                c.fetch_add(1, Ordering::SeqCst);
            },
        )
        .unwrap();
    let p = node.create_publisher::<u32>("t", QoS::default()).unwrap();
    match p.publish(13) {
        Err(PublishError::CallbackPanicked { entity, message }) => {
            assert!(entity.contains("/t"), "{entity}");
            assert_eq!(message, "unlucky");
        }
        other => panic!("expected a panic report, got {other:?}"),
    }
    p.publish(1).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

/// A panic does not end an inline drain: a message handed to the running
/// call (here published by the callback itself, so buffered) before it
/// panicked still reaches the callback before `publish` returns the panic,
/// not at the next publish.
#[test]
fn an_inline_panic_leaves_no_message_behind() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let p = Arc::new(node.create_publisher::<u32>("t", QoS::keep_all()).unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let (g, again) = (got.clone(), p.clone());
    let _sub = node
        .create_subscription_with(
            "t",
            QoS::keep_all(),
            SubscriptionOptions::inline(),
            move |m: u32| {
                g.lock().unwrap().push(m);
                if m == 1 {
                    // Buffered: this call holds the callback.
                    again.publish(2).unwrap();
                    again.publish(3).unwrap();
                    panic!("after handing on two");
                }
                if m == 2 {
                    panic!("the second panic");
                }
            },
        )
        .unwrap();
    match p.publish(1) {
        Err(PublishError::CallbackPanicked { message, .. }) => {
            assert_eq!(message, "after handing on two", "the first panic");
        }
        other => panic!("expected a panic report, got {other:?}"),
    }
    assert_eq!(*got.lock().unwrap(), [1, 2, 3]);
}

#[test]
fn an_inline_late_joiner_gets_transient_local_history_at_creation() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let p = node
        .create_publisher::<u32>("map", QoS::keep_last(2).transient_local())
        .unwrap();
    for i in 0..3 {
        p.publish(i).unwrap();
    }
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let _sub = node
        .create_subscription_with(
            "map",
            QoS::keep_last(5).transient_local(),
            SubscriptionOptions::inline(),
            move |m: u32| g.lock().unwrap().push(m),
        )
        .unwrap();
    assert_eq!(*got.lock().unwrap(), vec![1, 2]);
}

#[test]
fn timers_of_equal_period_tick_together_even_when_created_apart() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let a = node.create_timer(Duration::from_millis(20), || {}).unwrap();
    std::thread::sleep(Duration::from_millis(7));
    let b = node.create_timer(Duration::from_millis(20), || {}).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    // `b` may start one tick later than `a` (its first deadline is the first
    // aligned one a full period after its creation); after that, every turn
    // that runs one runs both, because their deadlines are the same instants.
    exec.spin_until(Duration::from_secs(10), || b.fired() >= 1)
        .unwrap();
    let lead = a.fired() - b.fired();
    assert!(lead <= 1, "a leads by {lead}");
    exec.spin_some().unwrap();
    let lead = a.fired() - b.fired();
    for _ in 0..5 {
        // One wake-up queues both ticks: spin_once runs one, spin_some the
        // other, which was already queued with it.
        assert!(exec.spin_once(Duration::from_secs(10)).unwrap());
        assert_eq!(
            exec.spin_some().unwrap(),
            1,
            "both ticks were queued by one wake-up"
        );
        assert_eq!(a.fired() - b.fired(), lead, "the timers drifted apart");
    }
}

/// A publish reads its matched subscriptions without a reference count
/// (`LaneCell`); the subscriptions a graph change replaced are dropped at
/// once, or, if the change came from inside that publish, as it returns:
/// a dropped subscription's callback (and what it captured) never
/// outlives the publish that was using it.
#[test]
fn a_dropped_subscription_releases_its_callback_at_once_even_mid_publish() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let p = node.create_publisher::<u32>("t", QoS::default()).unwrap();
    let captured = Arc::new(());
    let c = captured.clone();
    let quiet = node
        .create_subscription_with(
            "t",
            QoS::default(),
            SubscriptionOptions::inline(),
            move |_: u32| {
                let _ = &c;
            },
        )
        .unwrap();
    p.publish(1).unwrap();
    drop(quiet);
    assert_eq!(
        Arc::strong_count(&captured),
        1,
        "kept after a drop between publishes"
    );

    // Now the drop happens inside a publish: an inline callback drops
    // another subscription of the same topic.
    let c = captured.clone();
    let victim = Arc::new(Mutex::new(Some(
        node.create_subscription_with(
            "t",
            QoS::default(),
            SubscriptionOptions::inline(),
            move |_: u32| {
                let _ = &c;
            },
        )
        .unwrap(),
    )));
    let v = victim.clone();
    let _dropper = node
        .create_subscription_with(
            "t",
            QoS::default(),
            SubscriptionOptions::inline(),
            move |_: u32| {
                drop(v.lock().unwrap().take());
            },
        )
        .unwrap();
    assert_eq!(Arc::strong_count(&captured), 2);
    p.publish(2).unwrap();
    assert!(victim.lock().unwrap().is_none());
    assert_eq!(
        Arc::strong_count(&captured),
        1,
        "kept after the publish it was dropped in"
    );
}

/// `Publisher::warm` runs an inline subscription's path up to its callback
/// in the warming thread: no call without a message. While one thread
/// warms in a loop, messages that other threads publish each reach the
/// callback once, in each publisher's order: a publisher that finds the
/// callback's lock held by the warm leaves its message to it.
#[test]
fn warming_an_inline_subscription_calls_nothing_and_loses_nothing() {
    let ctx = ctx();
    let node = ctx.create_node("warm").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let g = got.clone();
    let _sub = node
        .create_subscription_with(
            "frames",
            QoS::keep_all(),
            SubscriptionOptions::inline(),
            move |m: u64| g.lock().unwrap().push(m),
        )
        .unwrap();
    let p = Arc::new(
        node.create_publisher::<u64>("frames", QoS::keep_all())
            .unwrap(),
    );
    for _ in 0..1000 {
        p.warm();
    }
    assert!(got.lock().unwrap().is_empty(), "a warm called the callback");

    let warmer = Warmer::start(&p, false);
    // Each message is its publisher's number (high half) and its index.
    const N: u64 = 2000;
    let publishers: Vec<_> = (0..2u64)
        .map(|t| {
            let p = p.clone();
            std::thread::spawn(move || {
                for i in 0..N {
                    p.publish(t << 32 | i).unwrap();
                }
            })
        })
        .collect();
    for h in publishers {
        h.join().unwrap();
    }
    warmer.stop();
    let got = got.lock().unwrap();
    for t in 0..2u64 {
        let mine: Vec<u64> = got
            .iter()
            .filter(|&&m| m >> 32 == t)
            .map(|&m| m & 0xffff_ffff)
            .collect();
        assert_eq!(mine, (0..N).collect::<Vec<_>>(), "publisher {t}");
    }
}
