//! The multi-threaded executor and callback groups, wait sets, synchronous
//! waits and async streams.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{
    CallbackGroupKind, GuardCondition, MultiThreadedExecutor, SpinError, WaitError, WaitSet,
    WaitSetError,
};

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap()
}

/// A callback body that records how many callbacks of a set run at once.
#[derive(Default)]
struct Overlap {
    inside: AtomicUsize,
    max: AtomicUsize,
    done: AtomicUsize,
}

impl Overlap {
    fn enter(&self) {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.inside.fetch_sub(1, Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_mutually_exclusive_group_never_runs_two_callbacks_at_once() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let o = Arc::new(Overlap::default());
    let mut subs = Vec::new();
    for topic in ["a", "b"] {
        let o = o.clone();
        // The node's default group is mutually exclusive.
        subs.push(
            node.create_subscription(topic, QoS::keep_all(), move |_m: u32| {
                o.enter();
                std::thread::sleep(Duration::from_millis(2));
                o.leave();
            })
            .unwrap(),
        );
    }
    let pa = node.create_publisher::<u32>("a", QoS::keep_all()).unwrap();
    let pb = node.create_publisher::<u32>("b", QoS::keep_all()).unwrap();
    for i in 0..20 {
        pa.publish(i).unwrap();
        pb.publish(i).unwrap();
    }
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    let o2 = o.clone();
    assert!(
        exec.spin_until(Duration::from_secs(60), move || o2
            .done
            .load(Ordering::SeqCst)
            == 40)
            .unwrap()
    );
    assert_eq!(
        o.max.load(Ordering::SeqCst),
        1,
        "two callbacks of one exclusive group overlapped"
    );
}

#[test]
fn a_reentrant_group_runs_callbacks_concurrently_on_two_threads() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let group = node.create_callback_group(CallbackGroupKind::Reentrant);
    let o = Arc::new(Overlap::default());
    let mut subs = Vec::new();
    for topic in ["a", "b"] {
        let o = o.clone();
        subs.push(
            node.create_subscription_with(
                topic,
                QoS::keep_all(),
                SubscriptionOptions::default().with_group(&group),
                move |_m: u32| {
                    o.enter();
                    // Wait (bounded) for the other callback to be inside too.
                    let until = Instant::now() + Duration::from_secs(10);
                    while o.max.load(Ordering::SeqCst) < 2 && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    o.leave();
                },
            )
            .unwrap(),
        );
    }
    node.create_publisher::<u32>("a", QoS::keep_all())
        .unwrap()
        .publish(1)
        .unwrap();
    node.create_publisher::<u32>("b", QoS::keep_all())
        .unwrap()
        .publish(1)
        .unwrap();
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    let o2 = o.clone();
    exec.spin_until(Duration::from_secs(60), move || {
        o2.done.load(Ordering::SeqCst) == 2
    })
    .unwrap();
    assert_eq!(
        o.max.load(Ordering::SeqCst),
        2,
        "the reentrant group did not run in parallel"
    );
}

#[test]
fn one_subscription_is_never_run_twice_at_once_and_stays_in_order() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let group = node.create_callback_group(CallbackGroupKind::Reentrant);
    let o = Arc::new(Overlap::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (o2, s2) = (o.clone(), seen.clone());
    let _sub = node
        .create_subscription_with(
            "t",
            QoS::keep_all(),
            SubscriptionOptions::default().with_group(&group),
            move |m: u32| {
                o2.enter();
                s2.lock().unwrap().push(m);
                o2.leave();
            },
        )
        .unwrap();
    let mut exec = MultiThreadedExecutor::new(4);
    exec.add_node(&node).unwrap();
    let p = node.create_publisher::<u32>("t", QoS::keep_all()).unwrap();
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin());
    for i in 0..2000 {
        p.publish(i).unwrap();
    }
    let until = Instant::now() + Duration::from_secs(60);
    while o.done.load(Ordering::SeqCst) < 2000 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.stop();
    spinner.join().unwrap().unwrap();
    assert_eq!(o.max.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.lock().unwrap(), (0..2000).collect::<Vec<_>>());
}

#[test]
fn timers_and_subscriptions_run_on_the_multi_threaded_executor_and_panics_stop_it() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let _timer = node
        .create_timer(Duration::from_millis(5), move || {
            if t.fetch_add(1, Ordering::SeqCst) == 3 {
                panic!("fourth tick");
            }
        })
        .unwrap();
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    let err = exec
        .spin_until(Duration::from_secs(60), || false)
        .unwrap_err();
    let SpinError::CallbackPanicked { entity, message } = err else {
        panic!("expected the timer's panic, got {err:?}");
    };
    assert!(entity.contains("timer"), "{entity}");
    assert_eq!(message, "fourth tick");
}

#[test]
fn context_shutdown_ends_a_multi_threaded_spin() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let mut exec = MultiThreadedExecutor::new(3);
    exec.add_node(&node).unwrap();
    let c = ctx.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        c.shutdown();
    });
    exec.spin().unwrap();
    t.join().unwrap();
}

#[test]
fn several_single_threaded_executors_on_their_own_threads() {
    let ctx = ctx();
    let mut handles = Vec::new();
    let total = Arc::new(AtomicUsize::new(0));
    for k in 0..4 {
        let node = ctx.create_node(&format!("component_{k}")).unwrap();
        let t = total.clone();
        let sub = node
            .create_subscription(&format!("/c{k}"), QoS::keep_all(), move |_m: u64| {
                t.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        let p = node
            .create_publisher::<u64>(&format!("/c{k}"), QoS::keep_all())
            .unwrap();
        let mut exec = Executor::new();
        exec.add_node(&node).unwrap();
        handles.push(std::thread::spawn(move || {
            for i in 0..5000 {
                p.publish(i).unwrap();
                if i % 64 == 0 {
                    exec.spin_some().unwrap();
                }
            }
            while exec.spin_some().unwrap() > 0 {}
            drop(sub);
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(total.load(Ordering::Relaxed), 4 * 5000);
}

#[test]
fn a_wait_set_wakes_for_a_subscription_a_timer_and_a_guard_condition() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u32>("t", QoS::keep_all(), SubscriptionOptions::default())
        .unwrap();
    let timer = node.create_timer(Duration::from_millis(30), || {}).unwrap();
    let gc = GuardCondition::new();
    let mut ws = WaitSet::new();
    let si = ws.add_subscription(&sub).unwrap();
    let ti = ws.add_timer(&timer).unwrap();
    let gi = ws.add_guard_condition(&gc).unwrap();

    // Guard condition, from another thread.
    let g2 = gc.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        g2.trigger();
    });
    let r = ws.wait(Duration::from_secs(30)).unwrap();
    h.join().unwrap();
    assert!(
        r.guard_conditions == vec![gi] || !r.timers.is_empty(),
        "{r:?}"
    );

    // Subscription, from another thread.
    let p = node.create_publisher::<u32>("t", QoS::keep_all()).unwrap();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        p.publish(9).unwrap();
        p
    });
    let mut got_sub = false;
    let mut got_timer = false;
    let until = Instant::now() + Duration::from_secs(30);
    while !(got_sub && got_timer) && Instant::now() < until {
        let r = ws.wait(Duration::from_secs(30)).unwrap();
        if r.subscriptions.contains(&si) {
            assert_eq!(*sub.take().unwrap(), 9);
            got_sub = true;
        }
        if r.timers.contains(&ti) {
            timer.call().unwrap();
            got_timer = true;
        }
    }
    assert!(got_sub && got_timer);
    assert_eq!(timer.fired(), 1);
    drop(h.join().unwrap());
}

#[test]
fn a_wait_set_times_out_with_nothing_ready() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u32>("quiet", QoS::default(), SubscriptionOptions::default())
        .unwrap();
    let mut ws = WaitSet::new();
    ws.add_subscription(&sub).unwrap();
    let t0 = Instant::now();
    let r = ws.wait(Duration::from_millis(50)).unwrap();
    assert!(r.is_timeout());
    assert!(t0.elapsed() >= Duration::from_millis(50));
}

#[test]
fn wait_set_membership_rules_are_errors_not_surprises() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let with_cb = node
        .create_subscription("a", QoS::default(), |_m: u8| {})
        .unwrap();
    let polling = node
        .create_polling_subscription::<u8>("b", QoS::default(), SubscriptionOptions::default())
        .unwrap();
    let mut ws = WaitSet::new();
    assert_eq!(
        ws.add_subscription(&with_cb).unwrap_err(),
        WaitSetError::HasCallback("/a".into())
    );
    ws.add_subscription(&polling).unwrap();
    let mut other = WaitSet::new();
    assert!(matches!(
        other.add_subscription(&polling),
        Err(WaitSetError::AlreadyInWaitSet(_))
    ));
    drop(ws);
    other.add_subscription(&polling).unwrap();

    let timer = node.create_timer(Duration::from_millis(10), || {}).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    assert_eq!(
        other.add_timer(&timer).unwrap_err(),
        WaitSetError::TimerInExecutor
    );
}

#[test]
fn a_dropped_publisher_wakes_a_blocked_waiter_with_an_error() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u32>("t", QoS::default(), SubscriptionOptions::default())
        .unwrap();
    let p = node.create_publisher::<u32>("t", QoS::default()).unwrap();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(p);
    });
    let err = sub.wait_for_message(Duration::from_secs(60)).unwrap_err();
    assert_eq!(err, WaitError::PublisherGone("/t".into()));
    h.join().unwrap();
}

#[test]
fn stream_delivers_in_order_and_ends_at_shutdown() {
    use futures::StreamExt;
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u32>("t", QoS::keep_all(), SubscriptionOptions::default())
        .unwrap();
    let p = node.create_publisher::<u32>("t", QoS::keep_all()).unwrap();
    let c = ctx.clone();
    let h = std::thread::spawn(move || {
        for i in 0..100 {
            p.publish(i).unwrap();
            if i % 10 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        c.shutdown();
    });
    let got: Vec<u32> = futures::executor::block_on(sub.stream().map(|m| *m).collect());
    h.join().unwrap();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

/// Callbacks that keep causing each other on a multi-threaded executor
/// (two ping-pong pairs, so both workers stay busy with caused work) do
/// not starve a timer of the same executor.
#[test]
fn callbacks_that_keep_causing_each_other_do_not_starve_a_timer_on_two_workers() {
    let ctx = ctx();
    let node = ctx.create_node("mt_pingpong").unwrap();
    let mut subs = Vec::new();
    for pair in 0..2 {
        let (ping, pong) = (format!("ping_{pair}"), format!("pong_{pair}"));
        for (from, to) in [(&ping, &pong), (&pong, &ping)] {
            let out = node.create_publisher::<u32>(to, QoS::keep_all()).unwrap();
            subs.push(
                node.create_subscription(from, QoS::keep_all(), move |m: u32| {
                    out.publish(m.wrapping_add(1)).unwrap();
                })
                .unwrap(),
            );
        }
        node.create_publisher::<u32>(&ping, QoS::keep_all())
            .unwrap()
            .publish(0)
            .unwrap();
    }
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let _timer = node
        .create_timer(Duration::from_millis(1), move || {
            t.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    exec.spin_until(Duration::from_secs(30), || {
        ticks.load(Ordering::SeqCst) >= 5
    })
    .unwrap();
    assert!(ticks.load(Ordering::SeqCst) >= 5, "the timer starved");
}
