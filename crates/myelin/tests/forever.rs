//! `Duration::MAX` as a timeout or period: "no deadline", never a panic.
//!
//! Rust code writes "wait forever" as `Duration::MAX` (rclcpp's is a
//! negative timeout); `Instant::now() + Duration::MAX` overflows and
//! panics, so every API that takes a timeout, a period or a QoS duration
//! must treat one past what an `Instant` can hold as no deadline. Each
//! case below has its answer ready, so a correct implementation returns
//! at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use myelin::prelude::*;
use myelin::{MultiThreadedExecutor, WaitSet};

const FOREVER: Duration = Duration::MAX;

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .build()
        .unwrap()
}

/// A subscription on "ticks" that counts its callbacks, and a publisher.
fn counted(node: &Node) -> (Arc<AtomicUsize>, Subscription<u32>, Publisher<u32>) {
    let got = Arc::new(AtomicUsize::new(0));
    let g = got.clone();
    let sub = node
        .create_subscription("ticks", QoS::keep_last(10), move |_: u32| {
            g.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let publisher = node
        .create_publisher::<u32>("ticks", QoS::keep_last(10))
        .unwrap();
    (got, sub, publisher)
}

#[test]
fn executor_spins_take_duration_max_as_no_deadline() {
    let ctx = ctx();
    let node = ctx.create_node("forever_exec").unwrap();
    let (got, _sub, publisher) = counted(&node);
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();

    publisher.publish(1).unwrap();
    assert!(exec.spin_once(FOREVER).unwrap());
    publisher.publish(2).unwrap();
    publisher.publish(3).unwrap();
    assert_eq!(exec.spin_all(FOREVER).unwrap(), 2);
    publisher.publish(4).unwrap();
    let g = got.clone();
    assert!(
        exec.spin_until(FOREVER, || g.load(Ordering::SeqCst) == 4)
            .unwrap()
    );
    assert_eq!(got.load(Ordering::SeqCst), 4);
}

#[test]
fn a_multi_threaded_spin_takes_duration_max_as_no_deadline() {
    let ctx = ctx();
    let node = ctx.create_node("forever_mt").unwrap();
    let (got, _sub, publisher) = counted(&node);
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    publisher.publish(1).unwrap();
    let g = got.clone();
    assert!(
        exec.spin_until(FOREVER, move || g.load(Ordering::SeqCst) == 1)
            .unwrap()
    );
}

#[test]
fn waits_for_messages_take_duration_max_as_no_deadline() {
    let ctx = ctx();
    let node = ctx.create_node("forever_wait").unwrap();
    let sub = node
        .create_polling_subscription::<u32>("data", QoS::keep_last(4), Default::default())
        .unwrap();
    let publisher = node
        .create_publisher::<u32>("data", QoS::keep_last(4))
        .unwrap();
    publisher.publish(7).unwrap();
    assert_eq!(*sub.wait_for_message(FOREVER).unwrap(), 7);

    publisher.publish(8).unwrap();
    let mut ws = WaitSet::new();
    ws.add_subscription(&sub).unwrap();
    let ready = ws.wait(FOREVER).unwrap();
    assert!(!ready.is_timeout());
}

#[test]
fn services_take_duration_max_as_no_deadline() {
    let ctx = ctx();
    let node = ctx.create_node("forever_srv").unwrap();
    let _server = node
        .create_service::<u64, u64>("double", |x: u64| x * 2)
        .unwrap();
    let client = node.create_client::<u64, u64>("double").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin().unwrap());
    assert!(client.wait_for_service(FOREVER));
    assert_eq!(client.call(21, FOREVER).unwrap(), 42);
    stop.stop();
    spinner.join().unwrap();
}

/// A period past ROS 2's limit (`i64::MAX` ns, as rclcpp) is refused with
/// an error; the longest allowed one is created, reset and never due.
#[test]
fn a_timer_period_past_292_years_is_refused_and_the_longest_never_fires() {
    let ctx = ctx();
    let node = ctx.create_node("forever_timer").unwrap();
    assert_eq!(
        node.create_timer(FOREVER, || {}).unwrap_err(),
        myelin::CreateTimerError::PeriodTooLong(FOREVER)
    );
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let longest = Duration::from_nanos(i64::MAX as u64);
    let timer = node
        .create_timer(longest, move || {
            f.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    timer.reset();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    assert_eq!(exec.spin_some().unwrap(), 0);
    assert!(!exec.spin_once(Duration::from_millis(1)).unwrap());
    timer.reset();
    assert!(!exec.spin_once(Duration::ZERO).unwrap());
    assert_eq!(fired.load(Ordering::SeqCst), 0);
}

/// A keep_all reader that is full holds its publisher back for
/// `max_blocking_time`; `Duration::MAX` holds it until there is room.
/// (`deadline` and `lifespan` of `Duration::MAX` are refused by
/// `QoS::validate`: ROS 2's infinite is about 292 years.)
#[test]
fn a_max_blocking_time_of_duration_max_waits_for_room() {
    let ctx = ctx();
    let node = ctx.create_node("forever_qos").unwrap();
    let qos = QoS::keep_all()
        .reliable()
        .max_samples(1)
        .max_blocking_time(FOREVER);
    let sub = node
        .create_polling_subscription::<u32>("kept", qos, Default::default())
        .unwrap();
    let publisher = node.create_publisher::<u32>("kept", qos).unwrap();
    let writer = std::thread::spawn(move || {
        publisher.publish(1).unwrap();
        // Blocks until the reader takes the first one.
        publisher.publish(2).unwrap();
    });
    assert_eq!(*sub.wait_for_message(FOREVER).unwrap(), 1);
    // Most likely the second publish is waiting by now (the test passes
    // either way: it asserts no panic, no loss).
    std::thread::sleep(Duration::from_millis(50));
    let second = sub.wait_for_message(FOREVER).unwrap();
    assert_eq!(*second, 2);
    writer.join().unwrap();
}
