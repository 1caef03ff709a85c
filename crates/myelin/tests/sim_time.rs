//! Simulated time (`use_sim_time`): ROS time, timers, deadlines and
//! lifespans follow `/clock`; wall timers and liveliness do not; timers
//! follow rcl's rules when time jumps. `/clock` comes from this process
//! here, and from another process (over shared memory) in the last cases.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::time::{ClockMessage, Time};

const LONG: Duration = Duration::from_secs(30);
const SEC: i64 = 1_000_000_000;

fn sim_ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .use_sim_time(true)
        .build()
        .unwrap()
}

/// Publishes `/clock` and waits until `node`'s ROS time shows it.
struct ClockDriver {
    publisher: Publisher<ClockMessage>,
    node: Node,
}

impl ClockDriver {
    fn new(node: &Node) -> ClockDriver {
        ClockDriver {
            publisher: node
                .create_publisher("/clock", QoS::keep_last(1).best_effort())
                .unwrap(),
            node: node.clone(),
        }
    }

    fn set(&self, ns: i64) {
        let t = Time::from_nanos(ns);
        let deadline = Instant::now() + LONG;
        // Best effort, depth 1: publish until the clock thread has taken it.
        while self.node.now() != t {
            self.publisher.publish(ClockMessage { clock: t }).unwrap();
            assert!(Instant::now() < deadline, "ROS time never reached {t:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Spins `node` on a thread of its own until dropped.
struct Spinner {
    stop: myelin::StopHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    fn new(node: &Node) -> Spinner {
        let mut exec = Executor::new();
        exec.add_node(node).unwrap();
        let stop = exec.stop_handle();
        let thread = Some(std::thread::spawn(move || exec.spin().unwrap()));
        Spinner { stop, thread }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !f() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn counter() -> (Arc<AtomicUsize>, impl FnMut() + Send + 'static) {
    let n = Arc::new(AtomicUsize::new(0));
    let m = n.clone();
    (n, move || {
        m.fetch_add(1, Ordering::SeqCst);
    })
}

#[test]
fn ros_time_is_zero_until_the_first_clock_then_follows_it() {
    let ctx = sim_ctx();
    let node = ctx.create_node("follower").unwrap();
    assert!(node.get_clock().ros_time_is_active());
    assert_eq!(node.now(), Time::default());
    let clock = ClockDriver::new(&node);
    clock.set(1_700_000_000 * SEC + 5);
    assert_eq!(
        node.now(),
        Time {
            sec: 1_700_000_000,
            nanosec: 5
        }
    );
    // Backwards too: a replay that loops.
    clock.set(1_600_000_000 * SEC);
    assert_eq!(node.now().sec, 1_600_000_000);

    // Without use_sim_time, ROS time is the wall clock.
    let wall = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .build()
        .unwrap();
    let n = wall.create_node("wall").unwrap();
    assert!(!n.get_clock().ros_time_is_active());
    let before = Time::now();
    assert!(n.now() >= before);
}

#[test]
fn a_timer_follows_clock_and_not_the_wall() {
    let ctx = sim_ctx();
    let node = ctx.create_node("timed").unwrap();
    let clock = ClockDriver::new(&node);
    let (fired, cb) = counter();
    let timer = node.create_timer(Duration::from_millis(50), cb).unwrap();
    let _spin = Spinner::new(&node);

    // No /clock yet: 200 ms of wall time (four periods) fire nothing.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(fired.load(Ordering::SeqCst), 0, "fired on wall time");

    // The first /clock starts the period: due at 100.050.
    clock.set(100 * SEC);
    clock.set(100 * SEC + 40_000_000);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(fired.load(Ordering::SeqCst), 0, "fired before its time");
    clock.set(100 * SEC + 50_000_000);
    wait_for("the first tick", || fired.load(Ordering::SeqCst) == 1);
    clock.set(100 * SEC + 100_000_000);
    wait_for("the second tick", || fired.load(Ordering::SeqCst) == 2);

    // Simulated time stands still: the wall moves on, nothing fires.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(fired.load(Ordering::SeqCst), 2, "fired while /clock stood");
    assert_eq!(timer.missed(), 0);
}

/// The period of a timer made before the first `/clock` starts at that
/// first `/clock`, even when no executor looked at the timer until time
/// had moved on (a CI run lost the first tick to this race).
#[test]
fn the_first_period_starts_at_the_first_clock_however_late_the_executor_looks() {
    let ctx = sim_ctx();
    let node = ctx.create_node("late_look").unwrap();
    let clock = ClockDriver::new(&node);
    let (fired, cb) = counter();
    let _timer = node.create_timer(Duration::from_millis(50), cb).unwrap();
    // Time starts and moves on before any executor spins the node.
    clock.set(100 * SEC);
    clock.set(100 * SEC + 40_000_000);
    let _spin = Spinner::new(&node);
    clock.set(100 * SEC + 50_000_000);
    wait_for("the tick due at 100.050", || {
        fired.load(Ordering::SeqCst) == 1
    });
}

/// A timer made on running simulated time: its period starts when it was
/// made, not when an executor first looks at it.
#[test]
fn the_first_period_of_a_timer_starts_when_it_is_made() {
    let ctx = sim_ctx();
    let node = ctx.create_node("made_late").unwrap();
    let clock = ClockDriver::new(&node);
    clock.set(200 * SEC);
    let (fired, cb) = counter();
    let _timer = node.create_timer(Duration::from_millis(50), cb).unwrap();
    clock.set(200 * SEC + 30_000_000);
    let _spin = Spinner::new(&node);
    clock.set(200 * SEC + 50_000_000);
    wait_for("the tick due at 200.050", || {
        fired.load(Ordering::SeqCst) == 1
    });
}

#[test]
fn a_jump_back_restarts_the_period_and_a_jump_forward_fires_once() {
    let ctx = sim_ctx();
    let node = ctx.create_node("jumpy").unwrap();
    let clock = ClockDriver::new(&node);
    let (fired, cb) = counter();
    let timer = node.create_timer(Duration::from_secs(1), cb).unwrap();
    let _spin = Spinner::new(&node);

    clock.set(100 * SEC); // due at 101
    clock.set(100 * SEC + 900_000_000);
    // Back to 50: the period restarts there (due at 51, not 101). The
    // executor samples simulated time when it looks, so the time it finds
    // after the jump is the one the period restarts from: one step back,
    // then nothing until the next step is checked (a second step at once,
    // say to 50.5, could be the one the executor sees first under load,
    // and the period would restart at 50.5).
    clock.set(50 * SEC);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(fired.load(Ordering::SeqCst), 0);
    clock.set(51 * SEC);
    wait_for("the tick after the jump back", || {
        fired.load(Ordering::SeqCst) == 1
    });

    // Forward from 51 to 55.5 (due 52): one tick, 52..55 missed (3).
    clock.set(55 * SEC + 500_000_000);
    wait_for("one tick for the jump forward", || {
        fired.load(Ordering::SeqCst) == 2
    });
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(fired.load(Ordering::SeqCst), 2, "a jump fires once");
    assert_eq!(timer.missed(), 3);
    // And the cadence goes on from there: next at 56.
    clock.set(56 * SEC);
    wait_for("the tick at 56", || fired.load(Ordering::SeqCst) == 3);
}

#[test]
fn wall_timers_run_on_steady_time_under_sim_time() {
    let ctx = sim_ctx();
    let node = ctx.create_node("walled").unwrap();
    let (fired, cb) = counter();
    let _t = node
        .create_wall_timer(Duration::from_millis(5), cb)
        .unwrap();
    let _spin = Spinner::new(&node);
    // No /clock at all, and it ticks.
    wait_for("wall ticks", || fired.load(Ordering::SeqCst) >= 3);
}

#[test]
fn deadlines_are_counted_in_simulated_time() {
    let ctx = sim_ctx();
    let node = ctx.create_node("deadline").unwrap();
    let clock = ClockDriver::new(&node);
    let qos = QoS::keep_last(5).deadline(Duration::from_millis(100));
    let p = node.create_publisher::<u32>("/data", qos).unwrap();
    let s = node
        .create_subscription("/data", qos, |_: &u32| {})
        .unwrap();
    let _spin = Spinner::new(&node);
    clock.set(10 * SEC);
    p.publish(1).unwrap();
    // 300 ms of wall time, three deadlines on steady time: none missed,
    // since simulated time stood still.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.deadline_missed().total_count, 0);
    assert_eq!(p.deadline_missed().total_count, 0);
    // 350 ms of simulated time with no message: missed, on both sides.
    for i in 1..=7 {
        clock.set(10 * SEC + i * 50_000_000);
    }
    wait_for("a requested deadline missed", || {
        s.deadline_missed().total_count >= 1
    });
    wait_for("an offered deadline missed", || {
        p.deadline_missed().total_count >= 1
    });
}

#[test]
fn lifespans_are_counted_in_simulated_time() {
    let ctx = sim_ctx();
    let node = ctx.create_node("lifespan").unwrap();
    let clock = ClockDriver::new(&node);
    clock.set(10 * SEC);
    let qos = QoS::keep_last(5).lifespan(Duration::from_millis(100));
    let p = node.create_publisher::<u32>("/fresh", qos).unwrap();
    let s = node
        .create_polling_subscription::<u32>("/fresh", qos, Default::default())
        .unwrap();
    p.publish(1).unwrap();
    p.publish(2).unwrap();
    // Wall time passes the lifespan; simulated time does not.
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(*s.take().expect("still fresh in simulated time"), 1);
    // Simulated time passes it.
    clock.set(10 * SEC + 150_000_000);
    assert!(s.take().is_none(), "expired in simulated time");
    assert_eq!(s.expired(), 1);
}

#[test]
fn a_wait_set_refuses_a_timer_on_simulated_time() {
    let ctx = sim_ctx();
    let node = ctx.create_node("ws").unwrap();
    let t = node.create_timer(Duration::from_secs(1), || {}).unwrap();
    let mut ws = myelin::WaitSet::new();
    let e = ws.add_timer(&t).unwrap_err();
    assert!(e.to_string().contains("create_wall_timer"), "{e}");
    let w = node
        .create_wall_timer(Duration::from_secs(1), || {})
        .unwrap();
    ws.add_timer(&w).unwrap();
}

fn clock_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "myelin-clock")
        })
        .count()
}

/// The time source's thread goes with the last handle of its context (or
/// at shutdown), so contexts made and dropped in a loop leave none behind.
/// (In a child process, alone: other tests here run clocks of their own.)
#[test]
fn the_clock_thread_goes_with_its_context() {
    if std::env::var("MYELIN_SIM_THREADS_CHILD").is_ok() {
        for _ in 0..5 {
            let ctx = sim_ctx();
            let node = ctx.create_node("short_lived").unwrap();
            let _t = node.create_timer(Duration::from_secs(1), || {}).unwrap();
            // (A thread takes its name once it runs.)
            wait_for("the clock thread", || clock_threads() >= 1);
        }
        let shut = sim_ctx();
        shut.shutdown();
        wait_for("the clock threads to end", || clock_threads() == 0);
        println!("no clock thread left");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_clock_thread_goes_with_its_context",
            "--nocapture",
        ])
        .env("MYELIN_SIM_THREADS_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("no clock thread left"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child of the next test: publishes `/clock` from 1000 s on, 10 ms
/// of simulated time per step, until killed.
#[cfg(feature = "shm")]
#[test]
fn clock_publisher_child() {
    let Ok(domain) = std::env::var("MYELIN_SIM_CLOCK_CHILD") else {
        return;
    };
    let ctx = Context::builder()
        .domain_id(domain.parse().unwrap())
        .handle_signals(false)
        .shared_memory(true)
        .network(false)
        .build()
        .unwrap();
    let node = ctx.create_node("sim_clock").unwrap();
    let p = node
        .create_publisher::<ClockMessage>("/clock", QoS::keep_last(1).best_effort())
        .unwrap();
    let mut t = 1000 * SEC;
    loop {
        p.publish(ClockMessage {
            clock: Time::from_nanos(t),
        })
        .unwrap();
        t += 10_000_000;
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A simulator in another process drives this process's timers.
#[cfg(feature = "shm")]
#[test]
fn clock_from_another_process_drives_timers() {
    let domain = 211;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "clock_publisher_child", "--nocapture"])
        .env("MYELIN_SIM_CLOCK_CHILD", domain.to_string())
        .spawn()
        .unwrap();
    let ctx = Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(true)
        .network(false)
        .use_sim_time(true)
        .build()
        .unwrap();
    let node = ctx.create_node("sim_follower").unwrap();
    let (fired, cb) = counter();
    let _timer = node.create_timer(Duration::from_millis(100), cb).unwrap();
    let _spin = Spinner::new(&node);
    wait_for("simulated time from the other process", || {
        node.now().sec >= 1000
    });
    wait_for("timer ticks on its time", || {
        fired.load(Ordering::SeqCst) >= 3
    });
    let _ = child.kill();
    let _ = child.wait();
}

/// `--ros-args -p use_sim_time:=true` (and a parameters file saying so for
/// every node) turns simulated time on, as it does for a ROS 2 node; a
/// value that is not a bool is an error naming it.
#[test]
fn use_sim_time_from_the_command_line_or_a_parameters_file() {
    let build = |args: &[&str]| {
        Context::builder()
            .handle_signals(false)
            .shared_memory(false)
            .network(false)
            .ros_args(args.iter().copied())
            .build()
    };
    let on = build(&["prog", "--ros-args", "-p", "use_sim_time:=true"]).unwrap();
    let node = on.create_node("sim").unwrap();
    assert!(node.get_clock().ros_time_is_active());
    assert_eq!(node.now(), Time::default(), "zero until the first /clock");

    let dir = std::env::temp_dir().join(format!("myelin_sim_params_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("params.yaml");
    std::fs::write(&file, "/**:\n  ros__parameters:\n    use_sim_time: true\n").unwrap();
    let from_file = build(&[
        "prog",
        "--ros-args",
        "--params-file",
        file.to_str().unwrap(),
    ])
    .unwrap();
    assert!(
        from_file
            .create_node("sim")
            .unwrap()
            .get_clock()
            .ros_time_is_active()
    );
    std::fs::remove_dir_all(&dir).unwrap();

    // The command line wins over the builder, both ways.
    let off = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .use_sim_time(true)
        .ros_args(["prog", "--ros-args", "-p", "use_sim_time:=false"])
        .build()
        .unwrap();
    assert!(
        !off.create_node("wall")
            .unwrap()
            .get_clock()
            .ros_time_is_active()
    );

    let Err(e) = build(&["prog", "--ros-args", "-p", "use_sim_time:=maybe"]) else {
        panic!("a string is not a bool");
    };
    assert!(
        e.to_string().contains("use_sim_time must be true or false"),
        "{e}"
    );
}
