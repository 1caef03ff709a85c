//! The single-threaded executor: idle costs nothing, timers, stop, panics,
//! several nodes and executors.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{AddNodeError, MultiThreadedExecutor, SpinError};

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

/// A keep_all subscription on `topic` whose callback appends each message
/// to `got`.
fn collect_into<T: myelin::Message>(
    node: &Node,
    topic: &str,
    got: &Arc<Mutex<Vec<T>>>,
) -> Subscription<T> {
    let g = got.clone();
    node.create_subscription(topic, QoS::keep_all(), move |m: T| {
        g.lock().unwrap().push(m);
    })
    .unwrap()
}

/// Keep-all `u64` publishers on `{prefix}_0` .. `{prefix}_{n-1}`.
fn publishers(node: &Node, prefix: &str, n: usize) -> Vec<myelin::Publisher<u64>> {
    (0..n)
        .map(|k| {
            node.create_publisher(&format!("{prefix}_{k}"), QoS::keep_all())
                .unwrap()
        })
        .collect()
}

/// CPU time (user + system) consumed by the calling thread.
fn thread_cpu() -> Duration {
    // SAFETY: getrusage writes a plain C struct that we zero-initialise; the
    // pointer is valid for the call.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut ru), 0);
        ru
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[test]
fn idle_executor_with_200_subscriptions_sleeps() {
    let ctx = ctx();
    let node = ctx.create_node("idle").unwrap();
    let subs: Vec<_> = (0..200)
        .map(|i| {
            node.create_subscription(&format!("t{i}"), QoS::default(), |_m: u64| {})
                .unwrap()
        })
        .collect();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || {
        let before = thread_cpu();
        let t0 = Instant::now();
        exec.spin().unwrap();
        (thread_cpu() - before, t0.elapsed())
    });
    std::thread::sleep(Duration::from_secs(1));
    stop.stop();
    let (cpu, wall) = spinner.join().unwrap();
    assert!(wall >= Duration::from_millis(900));
    assert!(
        cpu < Duration::from_millis(20),
        "idle executor used {cpu:?} of CPU in {wall:?}"
    );
    drop(subs);
}

#[test]
fn a_message_wakes_a_sleeping_executor_on_another_thread() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let _sub = node
        .create_subscription("t", QoS::keep_all(), move |m: u64| {
            g.lock().unwrap().push(m)
        })
        .unwrap();
    let p = node.create_publisher::<u64>("t", QoS::keep_all()).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let g2 = got.clone();
    let spinner = std::thread::spawn(move || {
        exec.spin_until(Duration::from_secs(30), || g2.lock().unwrap().len() == 1000)
            .unwrap()
    });
    for i in 0..1000 {
        p.publish(i).unwrap();
        if i % 100 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert!(spinner.join().unwrap());
    stop.stop();
    assert_eq!(*got.lock().unwrap(), (0..1000).collect::<Vec<_>>());
}

/// Many sleep / wake-up turns from several threads at once: each thread
/// publishes one message on its own topic and waits for its callback
/// before the next, so the executor goes to sleep between nearly every
/// message while other threads' pushes race its sleep. A lost wake-up
/// (the push announced without waking a sleeper that missed it) leaves a
/// thread waiting: it fails after 30 s, however slow the machine.
#[test]
fn a_sleeping_executor_hears_every_ping_from_several_threads() {
    pings_from_several_threads(&ctx());
}

/// As above with shared memory on: the executor sleeps on its slot of the
/// process's wake-up table (the futex word other processes signal).
#[cfg(feature = "shm")]
#[test]
fn a_sleeping_executor_on_the_shared_wake_table_hears_every_ping() {
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(true)
        .network(false)
        .domain_id(171)
        .build()
        .unwrap();
    pings_from_several_threads(&ctx);
}

fn pings_from_several_threads(ctx: &Context) {
    const THREADS: u64 = 4;
    const PINGS: u64 = 2000;
    let node = ctx.create_node("n").unwrap();
    let mut subs = Vec::new();
    let mut pubs = Vec::new();
    let seen: Vec<Arc<std::sync::atomic::AtomicU64>> = (0..THREADS)
        .map(|_| Arc::new(std::sync::atomic::AtomicU64::new(0)))
        .collect();
    for (t, s) in seen.iter().enumerate() {
        let s = s.clone();
        subs.push(
            node.create_subscription(&format!("ping_{t}"), QoS::keep_all(), move |m: u64| {
                s.store(m, std::sync::atomic::Ordering::SeqCst)
            })
            .unwrap(),
        );
        pubs.push(
            node.create_publisher::<u64>(&format!("ping_{t}"), QoS::keep_all())
                .unwrap(),
        );
    }
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin());
    let producers: Vec<_> = pubs
        .into_iter()
        .zip(seen.iter().cloned())
        .map(|(p, s)| {
            std::thread::spawn(move || {
                for i in 1..=PINGS {
                    // Now and then a pause, so that the executor is asleep
                    // (not between two looks) when the next ping comes.
                    if i % 4 == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    p.publish(i).unwrap();
                    let deadline = std::time::Instant::now() + Duration::from_secs(30);
                    while s.load(std::sync::atomic::Ordering::SeqCst) != i {
                        assert!(
                            std::time::Instant::now() < deadline,
                            "ping {i} was never handled"
                        );
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    stop.stop();
    spinner.join().unwrap().unwrap();
    drop(subs);
}

/// A timer made with `create_timer_with_info` is told when each tick was
/// due: due times a whole number of periods apart (ticks skipped on a
/// late run leave gaps of several), never after the callback started;
/// `Timer::call` runs it with the call's moment as the due time.
#[test]
fn a_timer_is_told_when_its_tick_was_due_and_when_it_ran() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let period = Duration::from_millis(3);
    let infos = Arc::new(Mutex::new(Vec::new()));
    let i = infos.clone();
    let timer = node
        .create_timer_with_info(period, move |info: &myelin::TimerInfo| {
            i.lock().unwrap().push(*info)
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    exec.spin_until(Duration::from_secs(30), || infos.lock().unwrap().len() >= 6)
        .unwrap();
    let seen = infos.lock().unwrap().clone();
    for w in seen.windows(2) {
        let gap = w[1].expected_call_time - w[0].expected_call_time;
        assert!(gap >= period, "{gap:?}");
        assert_eq!(
            gap.as_nanos() % period.as_nanos(),
            0,
            "{gap:?} is not whole periods"
        );
    }
    for info in &seen {
        assert!(info.actual_call_time >= info.expected_call_time, "{info:?}");
        assert_eq!(
            info.lateness(),
            info.actual_call_time - info.expected_call_time
        );
    }
    let before = Instant::now();
    timer.call().unwrap();
    let called = *infos.lock().unwrap().last().unwrap();
    assert!(called.expected_call_time >= before, "{called:?}");
    assert!(called.actual_call_time >= called.expected_call_time);
}

/// An executor that sleeps until a timer's deadline asks the kernel to
/// end that sleep on time: its thread's timer slack is 1 us, not the
/// default 50 us that would start every tick up to 50 us late.
#[test]
fn an_executor_waiting_for_a_timer_sleeps_with_a_tight_timer_slack() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let slack = Arc::new(Mutex::new(Vec::new()));
    let s = slack.clone();
    let _timer = node
        .create_timer(Duration::from_millis(2), move || {
            // SAFETY: prctl(PR_GET_TIMERSLACK) reads the calling thread's
            // slack; no memory is passed.
            let ns = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
            s.lock().unwrap().push(ns);
        })
        .unwrap();
    // A thread of its own, with the default slack until it waits.
    std::thread::spawn(move || {
        let mut exec = Executor::new();
        exec.add_node(&node).unwrap();
        exec.spin_until(Duration::from_secs(30), || slack.lock().unwrap().len() >= 2)
            .unwrap();
        assert_eq!(*slack.lock().unwrap(), [1000, 1000]);
    })
    .join()
    .unwrap();
}

#[test]
fn timers_fire_at_their_period_and_stop_with_the_executor() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let stamps = Arc::new(Mutex::new(Vec::new()));
    let s = stamps.clone();
    let timer = node
        .create_timer(Duration::from_millis(20), move || {
            s.lock().unwrap().push(Instant::now())
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let start = Instant::now();
    exec.spin_until(Duration::from_secs(30), || {
        stamps.lock().unwrap().len() >= 5
    })
    .unwrap();
    let stamps_now = stamps.lock().unwrap().clone();
    assert!(stamps_now.len() >= 5);
    // Never early: the k-th firing is at least k periods after creation.
    for (k, t) in stamps_now.iter().enumerate() {
        assert!(
            t.duration_since(start)
                >= Duration::from_millis(20) * (k as u32 + 1) - Duration::from_millis(2)
        );
    }
    assert_eq!(timer.fired() as usize, stamps_now.len());
    // Not spinning: nothing fires.
    let n = stamps.lock().unwrap().len();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(stamps.lock().unwrap().len(), n);
    drop(exec);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(stamps.lock().unwrap().len(), n);
}

#[test]
fn a_late_timer_skips_missed_periods_instead_of_bursting() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let timer = node
        .create_timer(Duration::from_millis(10), move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    std::thread::sleep(Duration::from_millis(105)); // ~10 periods pass unserved
    exec.spin_some().unwrap();
    exec.spin_some().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1, "one run, no burst");
    assert!(timer.missed() >= 8, "missed {}", timer.missed());
}

#[test]
fn a_zero_ms_timer_does_not_starve_a_subscription() {
    zero_ms_timer_against_a_subscription(myelin::IdleWait::Block);
}

/// The same on a busy-polling executor, whose subscriptions are not in
/// the ready queue the timer keeps returning to: turns alternate.
#[test]
fn a_zero_ms_timer_does_not_starve_a_polled_subscription() {
    zero_ms_timer_against_a_subscription(myelin::IdleWait::BusyPoll);
}

fn zero_ms_timer_against_a_subscription(wait: myelin::IdleWait) {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let _timer = node
        .create_timer(Duration::from_nanos(1), move || {
            t.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let got = Arc::new(AtomicUsize::new(0));
    let g = got.clone();
    let _sub = node
        .create_subscription("t", QoS::keep_all(), move |_m: u32| {
            g.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let p = node.create_publisher::<u32>("t", QoS::keep_all()).unwrap();
    for i in 0..100 {
        p.publish(i).unwrap();
    }
    let mut exec = Executor::new();
    exec.set_idle_wait(wait);
    exec.add_node(&node).unwrap();
    exec.spin_until(Duration::from_secs(30), || {
        got.load(Ordering::SeqCst) == 100
    })
    .unwrap();
    assert_eq!(got.load(Ordering::SeqCst), 100);
    // Timers and messages alternate: at most one timer run per message (+1).
    assert!(
        ticks.load(Ordering::SeqCst) <= 101,
        "{} timer runs",
        ticks.load(Ordering::SeqCst)
    );
}

#[test]
fn a_flooded_topic_does_not_starve_another() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (o1, o2) = (order.clone(), order.clone());
    let _a = node
        .create_subscription("flood", QoS::keep_all(), move |_m: u32| {
            o1.lock().unwrap().push('f')
        })
        .unwrap();
    let _b = node
        .create_subscription("quiet", QoS::keep_all(), move |_m: u32| {
            o2.lock().unwrap().push('q')
        })
        .unwrap();
    let flood = node
        .create_publisher::<u32>("flood", QoS::keep_all())
        .unwrap();
    let quiet = node
        .create_publisher::<u32>("quiet", QoS::keep_all())
        .unwrap();
    for i in 0..1000 {
        flood.publish(i).unwrap();
    }
    quiet.publish(0).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    exec.spin_some().unwrap();
    exec.spin_some().unwrap();
    let o = order.lock().unwrap();
    let q = o
        .iter()
        .position(|&c| c == 'q')
        .expect("quiet topic served");
    assert!(q <= 2, "quiet message waited behind {q} flood messages");
}

/// A two-stage pipeline beside a bystander on `node`: `a` passes its
/// message on to `b`; `c` is unrelated. Each callback records its letter
/// in the returned log; the subscriptions are kept alive in the second.
fn pipeline_beside_a_bystander(node: &Node) -> (Arc<Mutex<Vec<char>>>, Vec<Subscription<u32>>) {
    let order = Arc::new(Mutex::new(Vec::new()));
    let to_b = node.create_publisher::<u32>("b", QoS::keep_all()).unwrap();
    let (oa, ob, oc) = (order.clone(), order.clone(), order.clone());
    let subs = vec![
        node.create_subscription("a", QoS::keep_all(), move |m: u32| {
            oa.lock().unwrap().push('a');
            to_b.publish(m).unwrap();
        })
        .unwrap(),
        node.create_subscription("b", QoS::keep_all(), move |_m: u32| {
            ob.lock().unwrap().push('b')
        })
        .unwrap(),
        node.create_subscription("c", QoS::keep_all(), move |_m: u32| {
            oc.lock().unwrap().push('c')
        })
        .unwrap(),
    ];
    (order, subs)
}

/// Spin `node` on an `Executor` (`workers` 0) or a `MultiThreadedExecutor`
/// with that many workers until `done` or `limit`.
fn spin_until_on(workers: usize, node: &Node, limit: Duration, done: impl Fn() -> bool + Sync) {
    if workers == 0 {
        let mut exec = Executor::new();
        exec.add_node(node).unwrap();
        exec.spin_until(limit, done).unwrap();
    } else {
        let mut exec = MultiThreadedExecutor::new(workers);
        exec.add_node(node).unwrap();
        exec.spin_until(limit, done).unwrap();
    }
}

#[test]
fn work_a_callback_causes_runs_before_older_ready_work() {
    for threads in [0, 1] {
        let ctx = ctx();
        let node = ctx.create_node("n").unwrap();
        let (order, _subs) = pipeline_beside_a_bystander(&node);
        let pa = node.create_publisher::<u32>("a", QoS::keep_all()).unwrap();
        let pc = node.create_publisher::<u32>("c", QoS::keep_all()).unwrap();
        // `a` and then `c` are ready; `b` becomes ready while `a` runs.
        pa.publish(1).unwrap();
        pc.publish(1).unwrap();
        let done = || order.lock().unwrap().len() == 3;
        if threads == 0 {
            spin_until_on(0, &node, Duration::from_secs(30), done);
        } else {
            let mut exec = MultiThreadedExecutor::new(threads);
            exec.add_node(&node).unwrap();
            let stop = exec.stop_handle();
            let o = order.clone();
            let watcher = std::thread::spawn(move || {
                let t0 = Instant::now();
                while o.lock().unwrap().len() < 3 && t0.elapsed() < Duration::from_secs(30) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                stop.stop();
            });
            exec.spin().unwrap();
            watcher.join().unwrap();
        }
        // The message goes through the pipeline before `c`, which was
        // ready earlier, as it would if `b` ran in the publisher's thread.
        assert_eq!(
            *order.lock().unwrap(),
            ['a', 'b', 'c'],
            "{threads} worker thread(s)"
        );
    }
}

/// Threads publish into a two-stage pipeline while its callbacks publish
/// to the next stage (work they cause on their own executor, which a
/// single-threaded executor keeps in a queue of its own thread) and the
/// executor keeps falling asleep: every message goes through both stages
/// once, each thread's in order.
#[test]
fn caused_work_and_messages_from_other_threads_all_get_through() {
    const THREADS: u64 = 3;
    const EACH: u64 = 3000;
    for workers in [0, 2] {
        let ctx = ctx();
        let node = ctx.create_node("n").unwrap();
        let to_b = node.create_publisher::<u64>("b", QoS::keep_all()).unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let _a = node
            .create_subscription("a", QoS::keep_all(), move |m: u64| {
                to_b.publish(m).unwrap();
            })
            .unwrap();
        let _b = node
            .create_subscription("b", QoS::keep_all(), move |m: u64| {
                g.lock().unwrap().push(m)
            })
            .unwrap();
        let feeders: Vec<_> = (0..THREADS)
            .map(|t| {
                let p = node.create_publisher::<u64>("a", QoS::keep_all()).unwrap();
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        if i % 64 == 0 {
                            std::thread::sleep(Duration::from_micros(300));
                        }
                        p.publish(t << 32 | i).unwrap();
                    }
                })
            })
            .collect();
        spin_until_on(workers, &node, Duration::from_secs(60), || {
            got.lock().unwrap().len() as u64 == THREADS * EACH
        });
        for f in feeders {
            f.join().unwrap();
        }
        let got = got.lock().unwrap();
        assert_eq!(got.len() as u64, THREADS * EACH, "{workers} workers");
        for t in 0..THREADS {
            let mine: Vec<u64> = got
                .iter()
                .filter(|&&m| m >> 32 == t)
                .map(|&m| m & 0xffff_ffff)
                .collect();
            // An entity runs one message at a time, whichever worker
            // takes it: each stage keeps each thread's order.
            assert_eq!(
                mine,
                (0..EACH).collect::<Vec<_>>(),
                "thread {t}, {workers} workers"
            );
        }
    }
}

#[test]
fn spin_some_runs_what_was_ready_and_leaves_what_it_causes_to_the_next_call() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let (order, _subs) = pipeline_beside_a_bystander(&node);
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    node.create_publisher::<u32>("a", QoS::keep_all())
        .unwrap()
        .publish(1)
        .unwrap();
    node.create_publisher::<u32>("c", QoS::keep_all())
        .unwrap()
        .publish(1)
        .unwrap();
    assert_eq!(exec.spin_some().unwrap(), 2);
    assert_eq!(*order.lock().unwrap(), ['a', 'c']);
    assert_eq!(exec.spin_some().unwrap(), 1);
    assert_eq!(*order.lock().unwrap(), ['a', 'c', 'b']);
}

#[test]
fn callbacks_that_keep_causing_each_other_do_not_starve_older_work() {
    // Caused work went first, for a bounded run (64 entries), then the
    // older entry had its turn.
    callbacks_causing_each_other(myelin::IdleWait::Block, 2..=80);
}

/// The same on a busy-polling executor: the caused work is queued, the
/// other thread's message is polled, and turns alternate between them.
#[test]
fn callbacks_that_keep_causing_each_other_do_not_starve_a_polled_subscription() {
    callbacks_causing_each_other(myelin::IdleWait::BusyPoll, 0..=80);
}

fn callbacks_causing_each_other(wait: myelin::IdleWait, other_at: std::ops::RangeInclusive<usize>) {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let to_pong = node
        .create_publisher::<u32>("pong", QoS::keep_all())
        .unwrap();
    let to_ping = node
        .create_publisher::<u32>("ping", QoS::keep_all())
        .unwrap();
    let (o1, o2, o3) = (order.clone(), order.clone(), order.clone());
    // `ping` and `pong` answer each other for ever: every run causes the next.
    let _ping = node
        .create_subscription("ping", QoS::keep_all(), move |m: u32| {
            o1.lock().unwrap().push('p');
            to_pong.publish(m).unwrap();
        })
        .unwrap();
    let _pong = node
        .create_subscription("pong", QoS::keep_all(), move |m: u32| {
            o2.lock().unwrap().push('p');
            to_ping.publish(m).unwrap();
        })
        .unwrap();
    let _other = node
        .create_subscription("other", QoS::keep_all(), move |_m: u32| {
            o3.lock().unwrap().push('o')
        })
        .unwrap();
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let _timer = node
        .create_timer(Duration::from_millis(1), move || {
            t.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    node.create_publisher::<u32>("ping", QoS::keep_all())
        .unwrap()
        .publish(0)
        .unwrap();
    node.create_publisher::<u32>("other", QoS::keep_all())
        .unwrap()
        .publish(0)
        .unwrap();
    let mut exec = Executor::new();
    exec.set_idle_wait(wait);
    exec.add_node(&node).unwrap();
    exec.spin_until(Duration::from_secs(30), || {
        ticks.load(Ordering::SeqCst) >= 3 && order.lock().unwrap().contains(&'o')
    })
    .unwrap();
    assert!(ticks.load(Ordering::SeqCst) >= 3, "the timer starved");
    let o = order.lock().unwrap();
    let at = o.iter().position(|&c| c == 'o').expect("`other` starved");
    assert!(other_at.contains(&at), "`other` ran after {at} callbacks");
}

#[test]
fn a_panicking_callback_is_reported_by_spin_and_the_executor_keeps_working() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let got = Arc::new(AtomicUsize::new(0));
    let g = got.clone();
    let _sub = node
        .create_subscription("t", QoS::keep_all(), move |m: u32| {
            if m == 1 {
                panic!("bad message {m}");
            }
            g.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let p = node.create_publisher::<u32>("t", QoS::keep_all()).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    for i in 0..3 {
        p.publish(i).unwrap();
    }
    let err = loop {
        match exec.spin_once(Duration::from_secs(10)) {
            Ok(true) => continue,
            Ok(false) => panic!("no panic reported"),
            Err(e) => break e,
        }
    };
    match &err {
        SpinError::CallbackPanicked { entity, message } => {
            assert!(entity.contains("/t") && entity.contains("/n"), "{entity}");
            assert_eq!(message, "bad message 1");
        }
        other => panic!("expected the callback's panic, got {other:?}"),
    }
    exec.spin_until(Duration::from_secs(10), || got.load(Ordering::SeqCst) == 2)
        .unwrap();
    assert_eq!(got.load(Ordering::SeqCst), 2);
}

#[test]
fn stop_handle_and_context_shutdown_end_spin() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let t = std::thread::spawn(move || {
        exec.spin().unwrap();
        exec.spin().unwrap(); // spins again after a stop, until shutdown
    });
    std::thread::sleep(Duration::from_millis(50));
    stop.stop();
    std::thread::sleep(Duration::from_millis(50));
    ctx.shutdown();
    t.join().unwrap();
    assert!(ctx.is_shut_down());
    assert!(matches!(
        ctx.create_node("late"),
        Err(myelin::CreateNodeError::ContextShutDown(_))
    ));
}

/// A stop that ends a `spin_once` wait is used up by it: the next spin
/// runs (and a `spin_once` that no stop ended leaves nothing behind).
#[test]
fn a_stop_that_ends_spin_once_does_not_end_the_next_spin() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u32>::new()));
    let _sub = collect_into(&node, "after_stop", &got);
    let publisher = node
        .create_publisher::<u32>("after_stop", QoS::keep_all())
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    assert!(
        !exec.spin_once(Duration::ZERO).unwrap(),
        "nothing to run yet"
    );
    let stop = exec.stop_handle();
    let waiting = std::thread::spawn(move || {
        let ran = exec.spin_once(Duration::from_secs(60)).unwrap();
        (exec, ran)
    });
    std::thread::sleep(Duration::from_millis(50));
    stop.stop();
    let (mut exec, ran) = waiting.join().unwrap();
    assert!(!ran, "the stop ended the wait");
    publisher.publish(7).unwrap();
    assert!(
        exec.spin_until(Duration::from_secs(30), || !got.lock().unwrap().is_empty())
            .unwrap(),
        "the used stop ended the next spin"
    );
    assert_eq!(*got.lock().unwrap(), [7]);
}

#[test]
fn several_nodes_on_one_executor_and_several_executors_in_one_context() {
    let ctx = ctx();
    let count = Arc::new(AtomicUsize::new(0));
    let mut nodes = Vec::new();
    let mut subs = Vec::new();
    for i in 0..4 {
        let n = ctx.create_node(&format!("n{i}")).unwrap();
        let c = count.clone();
        subs.push(
            n.create_subscription("/shared", QoS::keep_all(), move |_m: u8| {
                c.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap(),
        );
        nodes.push(n);
    }
    let mut e1 = Executor::new();
    e1.add_node(&nodes[0]).unwrap();
    e1.add_node(&nodes[1]).unwrap();
    let mut e2 = Executor::new();
    e2.add_node(&nodes[2]).unwrap();
    e2.add_node(&nodes[3]).unwrap();
    assert_eq!(
        e2.add_node(&nodes[0]).unwrap_err(),
        AddNodeError::AlreadyAdded("/n0".into())
    );
    let p = nodes[0]
        .create_publisher::<u8>("/shared", QoS::keep_all())
        .unwrap();
    p.publish(1).unwrap();
    let c1 = count.clone();
    let h = std::thread::spawn(move || {
        e2.spin_until(Duration::from_secs(10), || c1.load(Ordering::SeqCst) >= 2)
            .unwrap();
        e2
    });
    e1.spin_until(Duration::from_secs(10), || {
        count.load(Ordering::SeqCst) >= 2
    })
    .unwrap();
    let mut e2 = h.join().unwrap();
    e1.spin_some().unwrap();
    e2.spin_some().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 4);
}

#[test]
fn subscriptions_created_after_add_node_are_served() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let got = Arc::new(AtomicUsize::new(0));
    let g = got.clone();
    let _sub = node
        .create_subscription("t", QoS::default(), move |_m: u8| {
            g.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let p = node.create_publisher::<u8>("t", QoS::default()).unwrap();
    p.publish(1).unwrap();
    assert!(exec.spin_once(Duration::from_secs(10)).unwrap());
    assert_eq!(got.load(Ordering::SeqCst), 1);
}

#[test]
fn wait_for_message_returns_the_message_or_a_timeout() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<Vec<u8>>(
            "img",
            QoS::keep_last(1),
            SubscriptionOptions::default(),
        )
        .unwrap();
    let err = sub.wait_for_message(Duration::from_millis(20)).unwrap_err();
    assert!(matches!(err, myelin::WaitError::Timeout { .. }));
    let p = node
        .create_publisher::<Vec<u8>>("img", QoS::keep_last(1))
        .unwrap();
    let frame = Arc::new(vec![5u8; 4_665_600]);
    let addr = frame.as_ptr();
    let p2 = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        p.publish_shared(frame).unwrap();
        p
    });
    let got = sub.wait_for_message(Duration::from_secs(30)).unwrap();
    assert_eq!(
        got.as_ptr(),
        addr,
        "the waiter gets the publisher's frame, not a copy"
    );
    drop(p2.join().unwrap());
}

#[test]
fn shutdown_wakes_a_blocked_waiter() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let sub = node
        .create_polling_subscription::<u8>("t", QoS::default(), SubscriptionOptions::default())
        .unwrap();
    let c = ctx.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        c.shutdown();
    });
    let err = sub.wait_for_message(Duration::from_secs(60)).unwrap_err();
    assert!(matches!(err, myelin::WaitError::ContextShutDown(_)));
    t.join().unwrap();
}

#[test]
fn a_busy_polling_executor_runs_callbacks_and_still_stops() {
    let ctx = ctx();
    let node = ctx.create_node("busy").unwrap();
    let got = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let g = got.clone();
    let _sub = node
        .create_subscription("busy", QoS::keep_all(), move |m: u64| {
            g.fetch_add(m, std::sync::atomic::Ordering::SeqCst);
        })
        .unwrap();
    let p = node
        .create_publisher::<u64>("busy", QoS::keep_all())
        .unwrap();
    let mut exec = Executor::new();
    exec.set_busy_poll(true);
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let h = std::thread::spawn(move || exec.spin());
    for i in 1..=100u64 {
        p.publish(i).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while got.load(std::sync::atomic::Ordering::SeqCst) < 5050
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.stop();
    h.join().unwrap().unwrap();
    assert_eq!(got.load(std::sync::atomic::Ordering::SeqCst), 5050);
}

/// `Publisher::warm` delivers nothing and loses nothing. A sleeping
/// executor is not woken by it (its `spin_once` times out with nothing
/// run); a keep_last(1) subscription keeps its one message; a busy-polling
/// executor, which a warm has run the subscription's empty path, runs
/// every message published while another thread warms in a loop, once
/// each and in order; after shutdown a warm does nothing.
#[test]
fn warming_a_publisher_delivers_nothing_and_loses_nothing() {
    use myelin::IdleWait;
    let ctx = ctx();
    let node = ctx.create_node("warm").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let _sub = collect_into(&node, "frames", &got);
    let last = node
        .create_polling_subscription::<u64>("frames", QoS::keep_last(1), Default::default())
        .unwrap();
    let p = Arc::new(
        node.create_publisher::<u64>("frames", QoS::keep_all())
            .unwrap(),
    );
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    p.publish(0).unwrap();
    assert!(exec.spin_once(Duration::from_secs(60)).unwrap());
    for _ in 0..1000 {
        p.warm();
    }
    // Blocking: nothing was queued, so nothing runs.
    assert!(!exec.spin_once(Duration::from_millis(20)).unwrap());
    assert_eq!(last.buffered(), 1, "a warm stored nothing over the message");

    exec.set_idle_wait(IdleWait::BusyPoll);
    let stop = exec.stop_handle();
    let spinning = std::thread::spawn(move || exec.spin());
    let warmer = Warmer::start(&p, true);
    const N: u64 = 2000;
    for i in 1..=N {
        p.publish(i).unwrap();
        if i % 64 == 0 {
            std::thread::yield_now();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.lock().unwrap().len() < (N + 1) as usize && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    warmer.stop();
    stop.stop();
    spinning.join().unwrap().unwrap();
    assert_eq!(*got.lock().unwrap(), (0..=N).collect::<Vec<_>>());
    assert_eq!(last.take().map(|m| *m), Some(N));

    ctx.shutdown();
    p.warm();
    assert_eq!(last.buffered(), 0);
}

/// A warm's pass on a busy-polling executor is no callback to the
/// executor's callers: `spin_some` does not count it, `spin_once` keeps
/// waiting past it (for a real message, or to its timeout).
#[test]
fn a_warms_pass_is_not_counted_as_a_callback() {
    use myelin::IdleWait;
    let ctx = ctx();
    let node = ctx.create_node("warm_count").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let _sub = collect_into(&node, "frames", &got);
    let p = node
        .create_publisher::<u64>("frames", QoS::keep_all())
        .unwrap();
    let mut exec = Executor::new();
    exec.set_idle_wait(IdleWait::BusyPoll);
    exec.add_node(&node).unwrap();

    p.warm();
    assert_eq!(
        exec.spin_some().unwrap(),
        0,
        "a warm's pass is not a callback"
    );
    p.warm();
    assert!(!exec.spin_once(Duration::from_millis(20)).unwrap());

    // A pass queued ahead of another topic's message: spin_once runs
    // through it to the message.
    let _other = collect_into(&node, "other", &got);
    let other = node
        .create_publisher::<u64>("other", QoS::keep_all())
        .unwrap();
    p.warm();
    other.publish(7).unwrap();
    assert!(exec.spin_once(Duration::from_secs(60)).unwrap());
    assert_eq!(*got.lock().unwrap(), vec![7]);
    p.warm();
    p.publish(8).unwrap();
    assert_eq!(exec.spin_some().unwrap(), 1);
    assert_eq!(*got.lock().unwrap(), vec![7, 8]);
}

/// A busy-polling executor looks at its subscriptions' buffers itself
/// (their publishers skip the ready queue): switched back to blocking, it
/// still runs what was published while it polled (queued by the switch),
/// `spin_some` runs each polled subscription's next message and counts
/// it, and `is_idle` sees unqueued messages.
#[test]
fn switching_busy_poll_off_leaves_no_message_behind() {
    use myelin::IdleWait;
    let ctx = ctx();
    let node = ctx.create_node("polled").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let _a = collect_into(&node, "a", &got);
    let _b = collect_into(&node, "b", &got);
    let a = node.create_publisher::<u64>("a", QoS::keep_all()).unwrap();
    let b = node.create_publisher::<u64>("b", QoS::keep_all()).unwrap();
    let mut exec = Executor::new();
    exec.set_idle_wait(IdleWait::BusyPoll);
    exec.add_node(&node).unwrap();

    a.publish(1).unwrap();
    b.publish(2).unwrap();
    a.publish(3).unwrap();
    assert!(!exec.is_idle(), "unqueued messages are work");
    assert_eq!(exec.spin_some().unwrap(), 2, "each subscription once");
    assert_eq!(got.lock().unwrap().len(), 2);

    a.publish(4).unwrap();
    exec.set_idle_wait(IdleWait::Block);
    assert!(!exec.is_idle());
    assert!(exec.spin_once(Duration::from_secs(60)).unwrap());
    assert!(exec.spin_once(Duration::from_secs(60)).unwrap());
    assert!(exec.is_idle());
    let mut all = got.lock().unwrap().clone();
    all.sort();
    assert_eq!(all, vec![1, 2, 3, 4]);
    // Blocking again: publishers queue as before.
    b.publish(5).unwrap();
    assert!(exec.spin_once(Duration::from_secs(60)).unwrap());
    assert_eq!(got.lock().unwrap().last(), Some(&5));
}

/// Switching busy-poll on and off while another thread publishes loses
/// nothing: every message runs once, in order (the switch and a publish
/// that skips the queue race; whichever comes second queues it).
#[test]
fn switching_busy_poll_while_publishing_loses_nothing() {
    use std::sync::atomic::AtomicBool;
    let ctx = ctx();
    let node = ctx.create_node("switching").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let _sub = collect_into(&node, "switched", &got);
    let p = node
        .create_publisher::<u64>("switched", QoS::keep_all())
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    const N: u64 = 20_000;
    let done = Arc::new(AtomicBool::new(false));
    let publisher = std::thread::spawn({
        let done = done.clone();
        move || {
            for i in 0..N {
                p.publish(i).unwrap();
                if i % 16 == 0 {
                    std::thread::yield_now();
                }
            }
            done.store(true, Ordering::SeqCst);
        }
    });
    let mut polling = false;
    let deadline = Instant::now() + Duration::from_secs(120);
    while got.lock().unwrap().len() < N as usize && Instant::now() < deadline {
        polling = !polling;
        exec.set_busy_poll(polling);
        // Blocking spins wait for a queued message; after the publisher is
        // done, only what the switch queued is left to wait for.
        let _ = exec.spin_once(Duration::from_millis(if done.load(Ordering::SeqCst) {
            200
        } else {
            5
        }));
        let _ = exec.spin_some().unwrap();
    }
    publisher.join().unwrap();
    assert_eq!(*got.lock().unwrap(), (0..N).collect::<Vec<_>>());
}

/// A busy-polling executor with more subscriptions than one look covers
/// still finds a message on the last of them (each look goes on where
/// the previous one stopped).
#[test]
fn a_busy_polling_executor_finds_a_message_on_its_hundredth_subscription() {
    use myelin::IdleWait;
    let ctx = ctx();
    let node = ctx.create_node("hundred").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let _subs: Vec<_> = (0..100)
        .map(|k| collect_into(&node, &format!("many_{k}"), &got))
        .collect();
    let last = node
        .create_publisher::<u64>("many_99", QoS::keep_all())
        .unwrap();
    let mut exec = Executor::new();
    exec.set_idle_wait(IdleWait::BusyPoll);
    exec.add_node(&node).unwrap();
    for round in 0..3 {
        last.publish(round).unwrap();
        assert!(exec.spin_once(Duration::from_secs(60)).unwrap());
    }
    assert_eq!(*got.lock().unwrap(), vec![0, 1, 2]);
}

/// A callback that panics in a busy-polling executor's `spin_some` is
/// reported, and the subscriptions claimed with it but not run are not
/// lost: the next `spin_some` runs them.
#[test]
fn a_panic_in_a_busy_polling_spin_some_leaves_the_rest_runnable() {
    use myelin::IdleWait;
    let ctx = ctx();
    let node = ctx.create_node("panicky").unwrap();
    let _bad = node
        .create_subscription("bad", QoS::keep_all(), |_m: u64| panic!("bad message"))
        .unwrap();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let _good: Vec<_> = (0..3)
        .map(|k| collect_into(&node, &format!("good_{k}"), &got))
        .collect();
    let bad = node
        .create_publisher::<u64>("bad", QoS::keep_all())
        .unwrap();
    let good = publishers(&node, "good", 3);
    let mut exec = Executor::new();
    exec.set_idle_wait(IdleWait::BusyPoll);
    exec.add_node(&node).unwrap();
    bad.publish(0).unwrap();
    for (k, p) in good.iter().enumerate() {
        p.publish(k as u64).unwrap();
    }
    assert!(exec.spin_some().is_err(), "the panic is reported");
    for _ in 0..3 {
        exec.spin_some().unwrap();
    }
    let mut all = got.lock().unwrap().clone();
    all.sort();
    assert_eq!(all, vec![0, 1, 2]);
    assert!(exec.is_idle());
}

/// A subscription that a busy-polling executor looks at is freed when it
/// is dropped (the executor's list lets go of it), and after its node
/// leaves the executor too: its callback's state is dropped with it.
#[test]
fn a_polled_subscription_is_freed_when_dropped() {
    use myelin::IdleWait;
    let ctx = ctx();
    let node = ctx.create_node("freed").unwrap();
    let token = Arc::new(());
    let sub_with = |t: &Arc<()>| {
        let t = t.clone();
        node.create_subscription("freed", QoS::keep_all(), move |_m: u64| {
            let _ = &t;
        })
        .unwrap()
    };
    let mut exec = Executor::new();
    exec.set_idle_wait(IdleWait::BusyPoll);
    exec.add_node(&node).unwrap();
    let sub = sub_with(&token);
    assert_eq!(Arc::strong_count(&token), 2);
    drop(sub);
    assert_eq!(Arc::strong_count(&token), 1, "dropped while attached");

    let sub = sub_with(&token);
    assert!(exec.remove_node(&node));
    drop(sub);
    assert_eq!(Arc::strong_count(&token), 1, "dropped after its node left");

    let sub = sub_with(&token);
    exec.add_node(&node).unwrap();
    drop(exec);
    assert_eq!(Arc::strong_count(&token), 2, "the subscription lives on");
    drop(sub);
    assert_eq!(Arc::strong_count(&token), 1, "dropped after its executor");
}

/// A busy-polling multi-threaded executor runs every message of several
/// subscriptions once, each subscription's in order (two workers look at
/// the same buffers; one claims each message).
#[test]
fn a_busy_polling_multi_threaded_executor_runs_each_message_once() {
    use myelin::{IdleWait, MultiThreadedExecutor};
    let ctx = ctx();
    let node = ctx.create_node("polled_mt").unwrap();
    let got: Vec<Arc<Mutex<Vec<u64>>>> = (0..4).map(|_| Arc::default()).collect();
    let _subs: Vec<_> = (0..4)
        .map(|k| collect_into(&node, &format!("mt_{k}"), &got[k]))
        .collect();
    let pubs = publishers(&node, "mt", 4);
    let mut exec = MultiThreadedExecutor::new(2);
    exec.set_idle_wait(IdleWait::BusyPoll);
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spinning = std::thread::spawn(move || exec.spin());
    const N: u64 = 2000;
    for i in 0..N {
        for p in &pubs {
            p.publish(i).unwrap();
        }
        if i % 32 == 0 {
            std::thread::yield_now();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.iter().any(|g| g.lock().unwrap().len() < N as usize) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.stop();
    spinning.join().unwrap().unwrap();
    for g in &got {
        assert_eq!(*g.lock().unwrap(), (0..N).collect::<Vec<_>>());
    }
}

/// Anticipating executors, single- and multi-threaded, run every message
/// of a periodic publisher in order, return from `spin_once` at its
/// timeout while they anticipate, and stop.
#[test]
fn anticipating_executors_run_every_periodic_message_and_still_stop() {
    use myelin::{IdleWait, MultiThreadedExecutor};
    let ctx = ctx();
    let node = ctx.create_node("anticipating").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u32>::new()));
    let _sub = collect_into(&node, "periodic", &got);
    let p = node
        .create_publisher::<u32>("periodic", QoS::keep_all())
        .unwrap();
    let publish_every_2ms = |from: u32| {
        for i in from..from + 30 {
            p.publish(i).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let wait_for = |n: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while got.lock().unwrap().len() < n && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let mut single = Executor::new();
    single.set_idle_wait(IdleWait::Anticipate);
    single.add_node(&node).unwrap();
    let stop = single.stop_handle();
    let h = std::thread::spawn(move || {
        single.spin()?;
        // Learned a 2 ms period; nothing comes now: spin_once still
        // returns at its timeout.
        let ran = single.spin_once(Duration::from_millis(20))?;
        Ok::<_, myelin::SpinError>((single, ran))
    });
    publish_every_2ms(0);
    wait_for(30);
    stop.stop();
    let (single, ran) = h.join().unwrap().unwrap();
    assert!(!ran);
    drop(single);

    let mut multi = MultiThreadedExecutor::new(2);
    multi.set_idle_wait(IdleWait::Anticipate);
    multi.add_node(&node).unwrap();
    let stop = multi.stop_handle();
    let h = std::thread::spawn(move || multi.spin());
    publish_every_2ms(30);
    wait_for(60);
    stop.stop();
    h.join().unwrap().unwrap();
    assert_eq!(*got.lock().unwrap(), (0..60).collect::<Vec<u32>>());
}

/// An executor that goes away with a subscription still in its ready
/// queue (here: it ran one of two messages, queued the subscription again
/// for the second, and was dropped) leaves nothing stuck: the next
/// executor the node joins runs the rest. rclpy code does this all the
/// time (`spin_once` with a fresh executor per call).
#[test]
fn messages_left_queued_in_a_dropped_executor_reach_the_next_one() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let got = Arc::new(AtomicUsize::new(0));
    let g = got.clone();
    let _sub = node
        .create_subscription("handed_on", QoS::keep_last(10), move |_m: u32| {
            g.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let p = node
        .create_publisher::<u32>("handed_on", QoS::keep_last(10))
        .unwrap();
    {
        let mut first = Executor::new();
        first.add_node(&node).unwrap();
        p.publish(1).unwrap();
        p.publish(2).unwrap();
        assert!(first.spin_once(Duration::from_secs(10)).unwrap());
        assert_eq!(got.load(Ordering::SeqCst), 1, "one message per turn");
    }
    let mut next = Executor::new();
    next.add_node(&node).unwrap();
    assert!(
        next.spin_until(Duration::from_secs(10), || got.load(Ordering::SeqCst) == 2)
            .unwrap(),
        "the second message never ran"
    );
}

/// The same for a service: a request that arrived while the node's
/// executor was still the old one (queued there, and that executor then
/// left the node) is answered by the next executor. Python's tests and
/// rclpy code meet this with a fresh executor per `spin_once` loop: a
/// ROS 2 action client asks for the result right after its goal is
/// accepted, often before the old executor is gone.
#[test]
fn requests_left_queued_in_a_dropped_executor_reach_the_next_one() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let _service = node
        .create_service::<i64, i64>("handed_on_service", |x| x + 1)
        .unwrap();
    let client = node.create_client::<i64, i64>("handed_on_service").unwrap();
    let mut future = {
        let mut first = Executor::new();
        first.add_node(&node).unwrap();
        // In this process the request goes into the service's queue and
        // the service into `first`'s ready queue at once; nothing spins.
        let future = client.call_async(41);
        assert!(
            !first.is_idle(),
            "the request is waiting in the first executor"
        );
        first.remove_node(&node);
        future
    };
    let mut next = Executor::new();
    next.add_node(&node).unwrap();
    let mut answer = None;
    next.spin_until(Duration::from_secs(60), || {
        answer = poll_once(&mut future);
        answer.is_some()
    })
    .unwrap();
    let answer = answer.expect("the request left in the first executor was never answered");
    assert_eq!(answer.unwrap(), 42);
}

/// Poll `f` once: its output if it is ready.
fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(f).poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// A node passed back and forth between two single-threaded executors
/// that spin on two threads at once, while another thread publishes:
/// each executor's queue keeps stale entries of the subscription from
/// before a move, which it runs beside the other executor's fresh ones.
/// The callback never runs twice at once (its lock, or its binding to
/// the one executor that may run it without the lock) and no message is
/// lost or run twice.
#[test]
fn a_node_passed_between_executors_on_two_threads_runs_one_callback_at_a_time() {
    use std::sync::atomic::AtomicBool;
    const N: u64 = 20_000;
    let ctx = ctx();
    let node = ctx.create_node("passed").unwrap();
    let inside = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(vec![false; N as usize]));
    let (i, g, s) = (inside.clone(), got.clone(), seen.clone());
    let _sub = node
        .create_subscription("passed_topic", QoS::keep_all(), move |m: u64| {
            assert!(
                !i.swap(true, Ordering::SeqCst),
                "two runs of one callback at once"
            );
            for _ in 0..200 {
                std::hint::spin_loop();
            }
            let mut seen = s.lock().unwrap();
            assert!(
                !std::mem::replace(&mut seen[m as usize], true),
                "message {m} ran twice"
            );
            drop(seen);
            g.fetch_add(1, Ordering::SeqCst);
            i.store(false, Ordering::SeqCst);
        })
        .unwrap();
    let p = node
        .create_publisher::<u64>("passed_topic", QoS::keep_all())
        .unwrap();
    let publisher = std::thread::spawn(move || {
        for k in 0..N {
            p.publish(k).unwrap();
            if k % 64 == 0 {
                std::thread::yield_now();
            }
        }
    });
    let mut execs = [Executor::new(), Executor::new()];
    // A bystander on each, so that both keep a node to spin.
    let bystanders: Vec<Node> = (0..2)
        .map(|k| ctx.create_node(&format!("bystander_{k}")).unwrap())
        .collect();
    for (e, b) in execs.iter_mut().zip(&bystanders) {
        e.add_node(b).unwrap();
    }
    execs[0].add_node(&node).unwrap();
    let mut at = 0;
    for _ in 0..300 {
        std::thread::scope(|scope| {
            for e in execs.iter_mut() {
                scope.spawn(move || {
                    let until = Instant::now() + Duration::from_micros(500);
                    while Instant::now() < until {
                        e.spin_once(Duration::from_micros(200)).unwrap();
                    }
                });
            }
        });
        assert!(execs[at].remove_node(&node));
        at = 1 - at;
        execs[at].add_node(&node).unwrap();
    }
    publisher.join().unwrap();
    assert!(
        execs[at]
            .spin_until(Duration::from_secs(60), || got.load(Ordering::SeqCst)
                as u64
                == N)
            .unwrap(),
        "{} of {N} messages ran",
        got.load(Ordering::SeqCst)
    );
    execs[1 - at].spin_some().unwrap();
    execs[at].spin_some().unwrap();
    assert_eq!(got.load(Ordering::SeqCst) as u64, N);
}

/// The thread that spins an executor queues what it publishes outside a
/// spin into the executor's own queue (no locked instruction, nobody to
/// wake). Here an executor goes back and forth between two threads, each
/// of which publishes a burst on its own topic right after handing the
/// executor over (racing the other thread, which takes it and spins), one
/// when it holds the executor but has not spun it yet, and one between
/// two spins; a third thread publishes throughout. Every message runs
/// once, each topic's in order, and the thread the executor ends on finds
/// what was queued before it came.
#[test]
fn an_executor_passed_between_threads_runs_what_each_published_around_the_move() {
    use std::sync::mpsc::{Receiver, Sender, channel};
    const ROUNDS: usize = 300;
    const BURST: u64 = 8;
    let ctx = ctx();
    let node = ctx.create_node("home_moves").unwrap();
    let mut got: [Arc<Mutex<Vec<u64>>>; 3] =
        std::array::from_fn(|_| Arc::new(Mutex::new(Vec::new())));
    let _subs: Vec<Subscription<u64>> = (0..3)
        .map(|k| collect_into(&node, &format!("home_moves_{k}"), &got[k]))
        .collect();
    let publishers: Vec<Publisher<u64>> = (0..3)
        .map(|k| {
            node.create_publisher::<u64>(&format!("home_moves_{k}"), QoS::keep_all())
                .unwrap()
        })
        .collect();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let (to_a, at_a) = channel::<Executor>();
    let (to_b, at_b) = channel::<Executor>();
    to_a.send(exec).unwrap();
    // One thread's rounds: take the executor, publish, spin, publish,
    // spin, pass it on, publish.
    let rounds = |p: &Publisher<u64>, inbox: Receiver<Executor>, outbox: Sender<Executor>| {
        let mut next = 0u64;
        let mut burst = || {
            for _ in 0..BURST {
                p.publish(next).unwrap();
                next += 1;
            }
        };
        for _ in 0..ROUNDS {
            let mut exec = inbox.recv().unwrap();
            // Held, not spun yet: the other thread may still be the home.
            burst();
            exec.spin_some().unwrap();
            // The home now: these go into the executor's own queue.
            burst();
            exec.spin_some().unwrap();
            outbox.send(exec).unwrap();
            // Handed over: the other thread takes the home meanwhile.
            burst();
        }
        (next, inbox)
    };
    let background = ROUNDS as u64 * 4 * BURST;
    let (sent, at_a) = std::thread::scope(|s| {
        let a = s.spawn(|| rounds(&publishers[0], at_a, to_b));
        let b = s.spawn(|| rounds(&publishers[1], at_b, to_a));
        s.spawn(|| {
            for n in 0..background {
                publishers[2].publish(n).unwrap();
                if n % 32 == 0 {
                    std::thread::yield_now();
                }
            }
        });
        let ((sent_a, at_a), (sent_b, _)) = (a.join().unwrap(), b.join().unwrap());
        ([sent_a, sent_b, background], at_a)
    });
    // Thread a passed it to b last, which passed it back to a.
    let mut exec = at_a.try_recv().expect("the executor came back to a");
    let all = sent.iter().sum::<u64>() as usize;
    assert!(
        exec.spin_until(Duration::from_secs(60), || count_of(&got) == all)
            .unwrap(),
        "{} of {all} messages ran",
        count_of(&got)
    );
    exec.spin_some().unwrap();
    for (k, g) in got.iter().enumerate() {
        let g = g.lock().unwrap();
        assert_eq!(
            *g,
            (0..sent[k]).collect::<Vec<_>>(),
            "topic {k}: each message once, in order"
        );
    }
    // This thread spun it last (the home): now another thread blocks in a
    // spin, and this one publishes. Its message wakes that spin, whether
    // it went into the queue before the spin took the home (then the spin
    // finds it there) or into the shared ring after (then it wakes).
    for round in 0..20u64 {
        let want = all + round as usize + 1;
        let spinner = std::thread::spawn(move || {
            let ran = exec.spin_until(Duration::from_secs(60), || count_of(&got) == want);
            (exec, ran, got)
        });
        publishers[0].publish(sent[0] + round).unwrap();
        let (e, ran, g) = spinner.join().unwrap();
        assert!(ran.unwrap(), "round {round}: the blocked spin never woke");
        (exec, got) = (e, g);
        exec.spin_some().unwrap(); // the home comes back to this thread
    }
}

fn count_of(got: &[Arc<Mutex<Vec<u64>>>; 3]) -> usize {
    got.iter().map(|g| g.lock().unwrap().len()).sum()
}
