//! `myelin perf ping` / `pong` as real processes: rows, summary, JSON,
//! plots, and the errors a user meets (no pong, no permission).

use std::process::Stdio;

mod common;
use common::{Background, myelin, router};

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("myelin-perf-{}-{name}", std::process::id()))
}

#[test]
fn ping_and_pong_in_two_processes_print_rows_and_a_summary_that_agree_with_the_json() {
    let domain = "171";
    let _pong = Background(
        myelin()
            .args(["perf", "pong", "--domain", domain])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let json = tmp("out.json");
    let plots = tmp("plots");
    let out = myelin()
        .args([
            "perf",
            "ping",
            "--domain",
            domain,
            "--duration",
            "2.5",
            "--warmup",
            "0.2",
        ])
        .args(["--rate", "2000", "--timeout", "60", "--json"])
        .arg(&json)
        .arg("--plot")
        .arg(&plots)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() >= 2, "one row per second: {stdout}");
    let total: u64 = rows.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    let count = v["summary"]["count"].as_u64().unwrap();
    assert_eq!(total, count, "rows add up to the summary");
    assert!(count > 0);
    // The printed summary line carries the same count.
    let all = stdout.lines().find(|l| l.ends_with("all")).unwrap();
    assert!(
        all.split_whitespace().nth(1) == Some(&count.to_string()),
        "{all}"
    );
    // Each round trip is two messages on each side.
    assert_eq!(v["ping"]["messages"].as_u64(), Some(2 * count));
    assert_eq!(v["pong"]["messages"].as_u64(), Some(2 * count));
    assert!(v["summary"]["p50_us"].as_f64().unwrap() <= v["summary"]["max_us"].as_f64().unwrap());
    for f in [
        "perf-ping-hist.svg",
        "perf-ping-time.svg",
        "perf-ping-rows.svg",
    ] {
        let text = std::fs::read_to_string(plots.join(f)).unwrap();
        assert!(text.trim_start().starts_with("<svg"), "{f}");
    }
}

#[test]
fn ping_local_runs_both_sides_in_one_process_for_each_transport_and_wait() {
    for (transport, wait) in [("intra", "poll"), ("shm", "block")] {
        let out = myelin()
            .args([
                "perf",
                "ping",
                "--local",
                "--transport",
                transport,
                "--wait",
                wait,
            ])
            .args([
                "--duration",
                "1",
                "--warmup",
                "0.1",
                "--domain",
                "172",
                "--size",
                "4KiB",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{transport}/{wait}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(" all"), "{stdout}");
    }
}

#[test]
fn a_missing_pong_is_a_clear_error_after_the_timeout_not_a_hang() {
    let out = myelin()
        .args([
            "perf",
            "ping",
            "--domain",
            "173",
            "--timeout",
            "0.5",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no pong on domain 173"), "{err}");
    assert!(
        err.contains("waiting for a pong"),
        "the wait was visible: {err}"
    );
}

#[test]
fn rt_priority_works_with_permission_and_is_refused_clearly_without() {
    let out = myelin()
        .args([
            "perf",
            "ping",
            "--local",
            "--transport",
            "intra",
            "--duration",
            "0.3",
        ])
        .args(["--warmup", "0", "--rt-priority", "10", "--cpu", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if out.status.success() {
        // Root (or CAP_SYS_NICE / an rtprio limit): SCHED_FIFO was granted.
        eprintln!("rt-priority granted (root: {root})");
    } else {
        assert!(!root, "root was refused: {err}");
        assert!(err.contains("SCHED_FIFO"), "{err}");
        assert!(err.contains("--rt-priority 10"), "{err}");
    }
    let bad = myelin()
        .args([
            "perf",
            "ping",
            "--local",
            "--transport",
            "intra",
            "--rt-priority",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--rt-priority"));
}

#[test]
fn flags_that_cannot_work_are_refused_naming_the_flag() {
    for (args, needle) in [
        (&["--transport", "intra"][..], "--local"),
        (&["--size", "9MiB"][..], "--size"),
        (&["--rate", "fast"][..], "--rate"),
        (&["--domain", "300"][..], "--domain"),
    ] {
        let out = myelin().args(["perf", "ping"]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn ping_over_zenoh_through_a_router() {
    let (_router, cfg) = router();
    let out = myelin()
        .args([
            "perf",
            "ping",
            "--local",
            "--transport",
            "zenoh",
            "--domain",
            "172",
        ])
        .args([
            "--duration",
            "1.5",
            "--warmup",
            "0.2",
            "--rate",
            "500",
            "--timeout",
            "60",
        ])
        .env("MYELIN_ZENOH_CONFIG", &cfg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = stdout.lines().find(|l| l.ends_with("all")).expect(&stdout);
    let count: u64 = all.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(count > 0, "{stdout}");
    let _ = std::fs::remove_file(&cfg);
}

/// A pong stopped before any ping came says so and how to send one,
/// rather than "stopped after 0 pings".
#[test]
fn a_pong_that_heard_no_ping_says_how_to_send_one() {
    use std::io::{BufRead, Read};
    let mut pong = myelin()
        .args(["perf", "pong", "--domain", "196"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(pong.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("Ctrl-C to stop"), "{line}");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pong.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(pong.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("no ping came"), "{rest}");
    assert!(rest.contains("myelin perf ping --domain 196"), "{rest}");
}
