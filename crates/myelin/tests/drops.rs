//! Every message a subscription's buffer takes is dropped exactly once:
//! by the callback that takes it (also when it panics), by the buffer when
//! a newer message overwrites it (keep_last) or its lifespan ends, or with
//! the subscription. The executor moves messages between the buffer and
//! the callback as raw bytes (copied once out of the ring, handed to the
//! callback by pointer), so a slip there is a double drop or a leak, which
//! these counts catch. A subscription is freed when dropped, whatever its
//! queued mark was: it lends its executor a reference of its own (no
//! reference count moves per message), which a leak would keep.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use myelin::prelude::*;
use myelin::{MultiThreadedExecutor, SpinError};

/// Drops and clones counted per test (the tests of this file run at once).
static DROPS: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];
static CLONES: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];

/// A message that counts its drops in `DROPS[tag]`, its clones in
/// `CLONES[tag]`.
#[derive(Debug, myelin::Message)]
struct Tracked {
    tag: u8,
    n: u32,
    payload: Vec<u8>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPS[self.tag as usize].fetch_add(1, Ordering::SeqCst);
    }
}

impl Tracked {
    fn new(tag: u8, n: u32, len: usize) -> Self {
        Tracked {
            tag,
            n,
            payload: vec![7; len],
        }
    }
}

impl Clone for Tracked {
    fn clone(&self) -> Self {
        CLONES[self.tag as usize].fetch_add(1, Ordering::SeqCst);
        Tracked {
            tag: self.tag,
            n: self.n,
            payload: self.payload.clone(),
        }
    }
}

fn drops(tag: u8) -> usize {
    DROPS[tag as usize].load(Ordering::SeqCst)
}

fn context() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .build()
        .unwrap()
}

/// Spin until `calls` (counted by the callbacks themselves: a `spin_some`
/// that meets a panic returns the panic, not how many ran before it)
/// reaches `target`; returns the panics met on the way.
fn spin_until(exec: &mut Executor, calls: &AtomicUsize, target: usize) -> usize {
    let mut panics = 0;
    let mut turns = 0;
    while calls.load(Ordering::SeqCst) < target {
        turns += 1;
        assert!(
            turns < 100_000,
            "{} of {target} callbacks ran",
            calls.load(Ordering::SeqCst)
        );
        match exec.spin_some() {
            Ok(_) => {}
            Err(SpinError::CallbackPanicked { .. }) => panics += 1,
            Err(e) => panic!("spin: {e}"),
        }
    }
    panics
}

#[test]
fn taken_overwritten_and_panicked_on_messages_are_each_dropped_once() {
    const TAG: u8 = 0;
    let ctx = context();
    let node = ctx.create_node("drops").unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let sub = node
        .create_subscription("/tracked", QoS::keep_last(2), move |m: Tracked| {
            c.fetch_add(1, Ordering::SeqCst);
            // Odd ones panic while the callback owns the message.
            assert!(m.n.is_multiple_of(2), "odd message {}", m.n);
        })
        .unwrap();
    let publisher = node
        .create_publisher::<Tracked>("/tracked", QoS::keep_last(2))
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let msg = |n| Tracked::new(TAG, n, 100);
    // Five into a buffer of two: three overwritten, dropped by the ring.
    for n in 0..5 {
        publisher.publish(msg(n)).unwrap();
    }
    assert_eq!(drops(TAG), 3, "the overwritten ones");
    // 3 (odd, panics) and 4: each dropped once by its callback.
    let panics = spin_until(&mut exec, &calls, 2);
    assert_eq!(panics, 1);
    assert_eq!(drops(TAG), 5);
    // One at a time, alternating: taken and panicked on.
    for n in 5..25 {
        publisher.publish(msg(n)).unwrap();
        spin_until(&mut exec, &calls, n as usize - 2);
        assert_eq!(drops(TAG), n as usize + 1, "message {n}");
    }
    // Left in the buffer: dropped with the subscription, once.
    publisher.publish(msg(25)).unwrap();
    drop(sub);
    drop(publisher);
    drop(exec);
    drop(node);
    drop(ctx);
    assert_eq!(drops(TAG), 26);
}

#[test]
fn a_message_whose_lifespan_ended_is_dropped_once_and_never_delivered() {
    const TAG: u8 = 1;
    let ctx = context();
    let node = ctx.create_node("drops_lifespan").unwrap();
    let mut qos = QoS::keep_last(4);
    qos.lifespan = Some(Duration::from_millis(1));
    let delivered = Arc::new(AtomicUsize::new(0));
    let d = delivered.clone();
    let _sub = node
        .create_subscription("/tracked_lifespan", qos, move |_m: Tracked| {
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let publisher = node
        .create_publisher::<Tracked>("/tracked_lifespan", qos)
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    for n in 0..3 {
        publisher.publish(Tracked::new(TAG, n, 10)).unwrap();
    }
    // Longer than the lifespan: all three expire in the buffer.
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(exec.spin_some().unwrap(), 0);
    assert_eq!(delivered.load(Ordering::SeqCst), 0);
    assert_eq!(drops(TAG), 3);
}

#[test]
fn by_reference_and_shared_callbacks_drop_each_message_once() {
    const TAG: u8 = 2;
    let ctx = context();
    let node = ctx.create_node("drops_ref").unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (c1, c2) = (calls.clone(), calls.clone());
    let _by_ref = node
        .create_subscription("/tracked_ref", QoS::keep_last(8), move |m: &Tracked| {
            c1.fetch_add(1, Ordering::SeqCst);
            assert!(!m.n.is_multiple_of(3), "every third panics");
        })
        .unwrap();
    let _by_arc = node
        .create_subscription("/tracked_ref", QoS::keep_last(8), move |m: Arc<Tracked>| {
            c2.fetch_add(1, Ordering::SeqCst);
            assert!(m.payload.len() == 10);
        })
        .unwrap();
    let publisher = node
        .create_publisher::<Tracked>("/tracked_ref", QoS::keep_last(8))
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    for n in 0..6 {
        publisher.publish(Tracked::new(TAG, n, 10)).unwrap();
    }
    // Two callbacks per message, every third message's first panicking.
    let panics = spin_until(&mut exec, &calls, 12);
    assert_eq!(panics, 2);
    // Whatever copies the two subscriptions got, every one made (the six
    // published and their clones) was dropped once.
    let made = 6 + CLONES[TAG as usize].load(Ordering::SeqCst);
    assert_eq!(drops(TAG), made);
}

#[test]
fn an_executor_dropped_with_work_it_never_ran_lets_go_of_the_messages() {
    const TAG: u8 = 3;
    for multi in [false, true] {
        let before = drops(TAG);
        let ctx = context();
        let node = ctx.create_node("drops_unrun").unwrap();
        let sub = node
            .create_subscription("/tracked_unrun", QoS::keep_last(4), |_m: Tracked| {})
            .unwrap();
        let publisher = node
            .create_publisher::<Tracked>("/tracked_unrun", QoS::keep_last(4))
            .unwrap();
        // Queued on the executor, never run: the executor's queue holds
        // the subscription, which held the executor (a cycle, before).
        let exec: Box<dyn std::any::Any> = if multi {
            let mut e = MultiThreadedExecutor::new(2);
            e.add_node(&node).unwrap();
            Box::new(e)
        } else {
            let mut e = Executor::new();
            e.add_node(&node).unwrap();
            Box::new(e)
        };
        for n in 0..3 {
            publisher.publish(Tracked::new(TAG, n, 10)).unwrap();
        }
        drop(exec);
        drop(sub);
        drop(publisher);
        drop(node);
        drop(ctx);
        assert_eq!(drops(TAG) - before, 3, "multi-threaded: {multi}");
    }
}

/// A subscription whose callback owns a `Tracked` (tag 4): freed when
/// that is dropped. Counts its calls in `calls`.
fn owning_sub(node: &Node, topic: &str, calls: &Arc<AtomicUsize>) -> Subscription<u32> {
    let state = Tracked::new(4, 0, 0);
    let calls = calls.clone();
    node.create_subscription(topic, QoS::keep_last(8), move |_m: u32| {
        let _ = &state;
        calls.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap()
}

#[test]
fn a_dropped_subscription_is_freed_whatever_its_mark() {
    const TAG: u8 = 4;
    let ctx = context();
    let node = ctx.create_node("drops_freed").unwrap();
    let publisher = node
        .create_publisher::<u32>("/freed", QoS::keep_last(8))
        .unwrap();
    let mut a = Executor::new();
    a.add_node(&node).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));

    // Run and idle, then dropped.
    let sub = owning_sub(&node, "/freed", &calls);
    publisher.publish(1).unwrap();
    spin_until(&mut a, &calls, 1);
    drop(sub);
    assert_eq!(drops(TAG), 1, "an idle subscription");

    // Dropped while queued: its entry runs after, and lets go.
    let sub = owning_sub(&node, "/freed", &calls);
    publisher.publish(2).unwrap();
    drop(sub);
    a.spin_some().unwrap();
    assert_eq!(drops(TAG), 2, "a queued subscription, dropped");

    // Queued on `a`, moved to `b` (whose attach resets the mark and takes
    // a new reserved reference), `a`'s stale entry run after `b`'s.
    let sub = owning_sub(&node, "/freed", &calls);
    let before = calls.load(Ordering::SeqCst);
    publisher.publish(3).unwrap();
    assert!(a.remove_node(&node));
    let mut b = Executor::new();
    b.add_node(&node).unwrap();
    publisher.publish(4).unwrap();
    spin_until(&mut b, &calls, before + 2);
    a.spin_some().unwrap();
    publisher.publish(5).unwrap();
    spin_until(&mut b, &calls, before + 3);
    drop(sub);
    assert_eq!(drops(TAG), 3, "a subscription moved while queued");

    // Claimed by a busy-polling executor instead of queued.
    b.set_idle_wait(myelin::IdleWait::BusyPoll);
    let sub = owning_sub(&node, "/freed", &calls);
    let before = calls.load(Ordering::SeqCst);
    for n in 0..3 {
        publisher.publish(n).unwrap();
    }
    spin_until(&mut b, &calls, before + 3);
    drop(sub);
    assert_eq!(drops(TAG), 4, "a subscription a busy-polling executor ran");

    // Dropped with the executor that holds its entry.
    let sub = owning_sub(&node, "/freed", &calls);
    b.set_idle_wait(myelin::IdleWait::Block);
    publisher.publish(6).unwrap();
    drop(b);
    drop(sub);
    assert_eq!(drops(TAG), 5, "an executor dropped with its entry");
}
