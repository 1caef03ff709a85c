//! Thread policies for the threads that run callbacks: CPU affinity and
//! `SCHED_FIFO`, as the kernel reports them from inside the callbacks,
//! and refused clearly (before any callback runs) where the process may
//! not have them. The refusals run in a child process that gave up root
//! and its rtprio limit, as an unprivileged robot process would be.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use myelin::prelude::*;
use myelin::{CpuWakeupLatency, MultiThreadedExecutor, SchedError, SpinError, ThreadPolicy};

/// Set in the child process that runs [`unprivileged`].
const ROLE: &str = "MYELIN_SCHED_TEST_UNPRIVILEGED";
/// Set in the child process whose thread limit refuses a worker.
const FEW_THREADS: &str = "MYELIN_SCHED_TEST_FEW_THREADS";
/// Set in the child process that holds a wake-up latency request until
/// it is killed.
const HOLDER: &str = "MYELIN_SCHED_TEST_HOLDER";

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap()
}

/// A node with a subscription that records, for each message, the
/// policy of the thread its callback ran on; one message published.
fn recorder(ctx: &Context) -> (Node, Subscription<u32>, Arc<Mutex<Vec<ThreadPolicy>>>) {
    let node = ctx.create_node("rt").unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let sub = node
        .create_subscription("/rt", QoS::keep_all(), move |_: u32| {
            s.lock()
                .unwrap()
                .push(ThreadPolicy::of_current_thread().unwrap());
        })
        .unwrap();
    let p = node
        .create_publisher::<u32>("/rt", QoS::keep_all())
        .unwrap();
    p.publish(1).unwrap();
    (node, sub, seen)
}

/// Spin a two-worker executor under `policy` until the recorder's one
/// message was delivered (or `limit` passed, or spinning failed): what
/// spinning returned, and the policies the callback saw.
fn spin_with(
    exec: &mut MultiThreadedExecutor,
    seen: &Arc<Mutex<Vec<ThreadPolicy>>>,
    policy: ThreadPolicy,
    limit: Duration,
) -> Result<bool, SpinError> {
    exec.set_thread_policy(policy).unwrap();
    let s = seen.clone();
    exec.spin_until(limit, move || !s.lock().unwrap().is_empty())
}

fn root() -> bool {
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The workers of a multi-threaded executor run on the CPUs they were
/// given, and the calling thread gets its own affinity back afterwards.
#[test]
fn workers_run_on_the_cpus_of_their_policy_and_the_caller_gets_its_own_back() {
    let before = ThreadPolicy::of_current_thread().unwrap();
    let last = *before.cpu_set().last().unwrap();
    let ctx = ctx();
    let (node, _sub, seen) = recorder(&ctx);
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    let policy = ThreadPolicy::new().cpus([last]);
    assert!(spin_with(&mut exec, &seen, policy, Duration::from_secs(30)).unwrap());
    assert_eq!(seen.lock().unwrap()[0].cpu_set(), &[last]);
    assert_eq!(ThreadPolicy::of_current_thread().unwrap(), before);
}

/// With permission (root here), callbacks run under SCHED_FIFO at the
/// policy's priority, and the calling thread is back to its own class.
#[test]
fn workers_run_under_sched_fifo_when_permitted() {
    if !root() {
        eprintln!("not root: SCHED_FIFO may be refused here; the refusal has its own test");
        return;
    }
    let before = ThreadPolicy::of_current_thread().unwrap();
    let ctx = ctx();
    let (node, _sub, seen) = recorder(&ctx);
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    let policy = ThreadPolicy::new().fifo(10);
    assert!(spin_with(&mut exec, &seen, policy, Duration::from_secs(30)).unwrap());
    assert_eq!(seen.lock().unwrap()[0].fifo_priority(), Some(10));
    assert_eq!(ThreadPolicy::of_current_thread().unwrap(), before);
}

/// A policy the process may not have (real-time priority without
/// permission, a CPU outside its set) stops `spin` before any callback
/// runs, with an error that says what to do; the message waits, and runs
/// once the policy is one the process may have.
#[test]
fn a_refused_policy_is_an_error_before_any_callback_runs() {
    if std::env::var_os(ROLE).is_some() {
        return unprivileged();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_refused_policy_is_an_error_before_any_callback_runs",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("both refusals held"),
        "the child did not run its checks:\n{stdout}\n{stderr}"
    );
}

fn unprivileged() {
    if root() {
        // SAFETY: setresuid(2) to `nobody` with plain integers; glibc
        // applies it to every thread of the process.
        assert_eq!(unsafe { libc::setresuid(65534, 65534, 65534) }, 0);
    }
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit(2) reads one initialised rlimit; lowering a limit
    // needs no privilege.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_RTPRIO, &none) }, 0);
    let before = ThreadPolicy::of_current_thread().unwrap();

    let ctx = ctx();
    let (node, _sub, seen) = recorder(&ctx);
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();

    let r = spin_with(
        &mut exec,
        &seen,
        ThreadPolicy::new().fifo(10),
        Duration::from_secs(5),
    );
    match &r {
        Err(SpinError::ThreadPolicy(SchedError::RealtimeDenied { priority: 10, .. })) => {}
        other => panic!("expected a refusal of SCHED_FIFO, got {other:?}"),
    }
    let text = r.unwrap_err().to_string();
    assert!(
        text.contains("CAP_SYS_NICE") && text.contains("rtprio"),
        "{text}"
    );
    assert!(seen.lock().unwrap().is_empty(), "a callback ran");
    assert_eq!(ThreadPolicy::of_current_thread().unwrap(), before);

    // A CPU the process may not use (past every one it has).
    let beyond = before.cpu_set().last().unwrap() + 1;
    let policy = ThreadPolicy::new().cpus([beyond]);
    let r = spin_with(&mut exec, &seen, policy, Duration::from_secs(5));
    match &r {
        Err(SpinError::ThreadPolicy(SchedError::NoSuchCpu { missing, allowed })) => {
            assert_eq!(missing, &[beyond]);
            assert_eq!(allowed.as_slice(), before.cpu_set());
        }
        other => panic!("expected CPU {beyond} refused, got {other:?}"),
    }
    assert!(seen.lock().unwrap().is_empty(), "a callback ran");
    assert_eq!(ThreadPolicy::of_current_thread().unwrap(), before);

    // Without root, the wake-up latency request is refused with the way
    // to grant it.
    let denied = CpuWakeupLatency::hold(Duration::ZERO).unwrap_err();
    assert!(
        matches!(denied, SchedError::CpuLatencyDenied { .. }),
        "{denied:?}"
    );
    assert!(denied.to_string().contains("udev rule"), "{denied}");

    // Nothing was lost: with a policy it may have, the message runs.
    assert!(
        spin_with(
            &mut exec,
            &seen,
            ThreadPolicy::new(),
            Duration::from_secs(30)
        )
        .unwrap()
    );
    eprintln!("both refusals held");
}

/// An executor whose worker thread the OS refuses (the process limit,
/// `ulimit -u`, reached after one more thread) returns an error from
/// `spin` instead of panicking or leaving the started workers waiting
/// for the missing one: the child process finishes, no callback ran, and
/// a smaller executor then delivers the message.
#[test]
fn a_worker_thread_the_os_refuses_is_an_error_not_a_hang() {
    if std::env::var_os(FEW_THREADS).is_some() {
        return few_threads();
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_worker_thread_the_os_refuses_is_an_error_not_a_hang",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FEW_THREADS, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A generous bound: the child only hangs if the workers wait forever.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "spin hung on a refused worker thread:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("refused worker held"),
        "the child did not run its checks:\n{stderr}"
    );
}

/// Tasks (threads) whose real user is `uid`, as the kernel counts them
/// against `RLIMIT_NPROC`.
fn tasks_of(uid: u32) -> u64 {
    let mut n = 0;
    for proc in std::fs::read_dir("/proc").unwrap().flatten() {
        // Processes only: `self` would count this one twice.
        if !proc
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(proc.path().join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            let real = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|u| u.parse::<u32>().ok());
            n += u64::from(real == Some(uid));
        }
    }
    n
}

fn few_threads() {
    if root() {
        // Root is not held to RLIMIT_NPROC, so the limit below needs
        // another user, and one no other process runs as: the limit is
        // counted from the tasks of that user, and a sibling test's child
        // running as `nobody` meanwhile (`unprivileged`) moved the count
        // (3 runs in 15 had all three workers start). A uid needs no
        // entry in /etc/passwd; this one is free unless a process of the
        // same pid modulo 100,000 runs this test too.
        let own = 200_000 + std::process::id() % 100_000;
        // SAFETY: setresuid(2) with plain integers; glibc applies it to
        // every thread of the process.
        assert_eq!(unsafe { libc::setresuid(own, own, own) }, 0);
    }
    let ctx = ctx();
    let (node, _sub, seen) = recorder(&ctx);
    let mut exec = MultiThreadedExecutor::new(3);
    exec.add_node(&node).unwrap();
    // SAFETY: getuid(2) has no arguments and cannot fail.
    let uid = unsafe { libc::getuid() };
    // One more task for this user: the first worker starts, the second
    // is refused.
    let limit = tasks_of(uid) + 1;
    let few = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit(2) reads one initialised rlimit; lowering a limit
    // needs no privilege.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &few) }, 0);

    let r = spin_with(
        &mut exec,
        &seen,
        ThreadPolicy::new(),
        Duration::from_secs(5),
    );
    match &r {
        Err(SpinError::WorkerThread {
            started: 2,
            wanted: 3,
            ..
        }) => {}
        other => panic!("expected the third worker refused, got {other:?}"),
    }
    assert!(r.unwrap_err().to_string().contains("ulimit -u"));
    assert!(seen.lock().unwrap().is_empty(), "a callback ran");

    // An absurd thread count meets the same refusal (no capacity
    // overflow on the way).
    drop(exec);
    let mut absurd = MultiThreadedExecutor::new(usize::MAX);
    absurd.add_node(&node).unwrap();
    match spin_with(
        &mut absurd,
        &seen,
        ThreadPolicy::new(),
        Duration::from_secs(5),
    ) {
        Err(SpinError::WorkerThread {
            started: 2,
            wanted: usize::MAX,
            ..
        }) => {}
        other => panic!("expected the third worker refused, got {other:?}"),
    }
    assert!(seen.lock().unwrap().is_empty(), "a callback ran");

    // Nothing was lost: the calling thread alone delivers the message.
    let mut alone = MultiThreadedExecutor::new(1);
    drop(absurd);
    alone.add_node(&node).unwrap();
    assert!(
        spin_with(
            &mut alone,
            &seen,
            ThreadPolicy::new(),
            Duration::from_secs(30)
        )
        .unwrap()
    );
    eprintln!("refused worker held");
}

/// The wake-up latency request holds while its value lives, and the
/// kernel drops it with the process, also one killed with SIGKILL: no
/// machine is left polling after a crash.
#[test]
fn the_wakeup_latency_request_lasts_while_held_and_dies_with_a_killed_holder() {
    if let Some(v) = std::env::var_os(HOLDER) {
        let micros: u64 = v.to_str().unwrap().parse().unwrap();
        let _held = CpuWakeupLatency::hold(Duration::from_micros(micros)).unwrap();
        println!("held");
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    if !root() {
        eprintln!("not root: /dev/cpu_dma_latency is root's (the refusal is tested unprivileged)");
        return;
    }
    let before = CpuWakeupLatency::in_force().unwrap();
    // A bound no other request on this machine is likely to be below.
    let bound = Duration::from_micros(3);
    if before <= bound {
        eprintln!("a request of {before:?} is already in force here; nothing to observe");
        return;
    }
    {
        let held = CpuWakeupLatency::hold(bound).unwrap();
        assert_eq!(held.max(), bound);
        assert_eq!(CpuWakeupLatency::in_force().unwrap(), bound);
    }
    assert_eq!(CpuWakeupLatency::in_force().unwrap(), before);

    // A holder killed with SIGKILL.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_wakeup_latency_request_lasts_while_held_and_dies_with_a_killed_holder",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER, bound.as_micros().to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The harness prints its own lines first; the holder says when.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("held") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(n > 0, "the holder exited before holding");
    }
    assert_eq!(CpuWakeupLatency::in_force().unwrap(), bound);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(CpuWakeupLatency::in_force().unwrap(), before);
    eprintln!("the request ended with its killed holder");
}

/// Leaving SCHED_FIFO gives a thread the kernel's default timer slack
/// again; an executor on that thread still sleeps until its timer with a
/// tight one (it forgets that it had set it).
#[test]
fn an_executor_after_sched_fifo_still_sleeps_with_a_tight_timer_slack() {
    if !root() {
        eprintln!("not root: SCHED_FIFO may be refused here");
        return;
    }
    let ctx = ctx();
    let node = ctx.create_node("slack").unwrap();
    let slack = Arc::new(Mutex::new(Vec::new()));
    let s = slack.clone();
    let timer = node
        .create_timer(Duration::from_millis(20), move || {
            // SAFETY: prctl(PR_GET_TIMERSLACK) reads the calling thread's
            // slack; no memory is passed.
            s.lock()
                .unwrap()
                .push(unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) });
        })
        .unwrap();
    std::thread::spawn(move || {
        let mut exec = Executor::new();
        exec.add_node(&node).unwrap();
        // Tightened by a first wait, then the thread goes real-time and back.
        exec.spin_until(Duration::from_secs(30), || {
            !slack.lock().unwrap().is_empty()
        })
        .unwrap();
        ThreadPolicy::new()
            .fifo(10)
            .apply()
            .unwrap()
            .restore()
            .unwrap();
        slack.lock().unwrap().clear();
        // A tick already due runs without a sleep before it (on a loaded
        // machine, other tests' real-time threads can hold both CPUs for
        // longer than a period), and only a sleep tightens the slack: the
        // first sleep among five ticks does, and it stays tight. The bug
        // this guards against (the executor forgetting that leaving
        // SCHED_FIFO reset it) leaves every tick at the default.
        timer.reset();
        exec.spin_until(Duration::from_secs(30), || slack.lock().unwrap().len() >= 5)
            .unwrap();
        assert_eq!(slack.lock().unwrap().last(), Some(&1000));
    })
    .join()
    .unwrap();
}
