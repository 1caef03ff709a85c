//! Ctrl-C (SIGINT) ends `spin()` cleanly: tested on a real child process.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use myelin::prelude::*;

const CHILD_ENV: &str = "MYELIN_CTRL_C_CHILD";

/// In the child: spin until Ctrl-C, then say so and exit 0.
#[test]
fn ctrl_c_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful as the child of the test below
    }
    let ctx = Context::builder().shared_memory(false).build().unwrap();
    let node = ctx.create_node("sleeper").unwrap();
    let _sub = node
        .create_subscription("t", QoS::default(), |_m: u8| {})
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    println!("spinning");
    exec.spin().unwrap();
    println!("spin returned, shut down = {}", ctx.is_shut_down());
}

#[test]
fn ctrl_c_stops_spin_cleanly() {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "ctrl_c_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // Wait for the child to reach spin().
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child exited early");
        if line.contains("spinning") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill(2) with a valid pid of our own child and SIGINT.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let mut rest = String::new();
    let watchdog = std::thread::spawn(move || {
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        rest
    });
    // Watchdog: a child that ignores Ctrl-C fails the test instead of hanging it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            child.kill().ok();
            panic!("spin() did not return within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let rest = watchdog.join().unwrap();
    assert!(status.success(), "child failed: {status:?}\n{rest}");
    assert!(rest.contains("spin returned, shut down = true"), "{rest}");
}
