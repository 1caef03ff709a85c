//! The `myelin` binary: JSON output and its schema, plots, and errors for
//! bad input (non-zero exit, the flag named).

use std::process::Command;

fn myelin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_myelin"))
}

/// Run `myelin bench ARGS --json DIR/out.json --plot DIR/plots` in a
/// fresh directory named after `tag`, which must succeed: the directory,
/// the JSON and plot paths, and the output.
fn bench_with_json_and_plots(
    tag: &str,
    args: &[&str],
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
    std::process::Output,
) {
    let dir = std::env::temp_dir().join(format!("myelin-cli-{tag}-{}", std::process::id()));
    let json = dir.join("out.json");
    let plots = dir.join("plots");
    let out = myelin()
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&plots)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, json, plots, out)
}

/// A job that measures two rows alternately (fan-out's 1 and 10 nodes)
/// runs in its own child process like any other and reports both rows,
/// each with its plot.
#[test]
fn bench_fanout_reports_both_rows_of_its_paired_job() {
    let (dir, json, plots, _) = bench_with_json_and_plots(
        "fanout",
        &[
            "fanout",
            "--system",
            "myelin",
            "--rate",
            "200",
            "--duration",
            "0.4",
        ],
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let configs: Vec<&str> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["config"].as_str().unwrap())
        .collect();
    assert_eq!(
        configs[..2],
        ["nodes=1 200Hz", "nodes=10 200Hz"],
        "{configs:?}"
    );
    for stem in [
        "fanout-myelin-nodes_1_200Hz",
        "fanout-myelin-nodes_10_200Hz",
    ] {
        assert!(
            std::fs::read_dir(&plots).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(stem)),
            "no plot for {stem}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_relay_writes_json_with_the_documented_schema_and_plots() {
    let (dir, json, plots, out) = bench_with_json_and_plots(
        "test",
        &[
            "relay", "--hops", "3", "--rate", "2000", "--count", "30", "--size", "1KiB",
            "--system", "myelin", "--system", "channel",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("relay") && stdout.contains("hop p50"),
        "{stdout}"
    );
    // The legend names the systems of the table and its columns.
    assert!(stdout.contains("legend:"), "{stdout}");
    assert!(
        stdout.contains("  channel    crossbeam channels"),
        "{stdout}"
    );
    assert!(stdout.contains("  myelin     this library"), "{stdout}");
    assert!(
        !stdout.contains("  zenoh "),
        "only the systems measured: {stdout}"
    );
    // Not on a terminal: a line per finished run instead of a bar.
    let stderr = String::from_utf8_lossy(&out.stderr);
    for i in 1..=5 {
        assert!(stderr.contains(&format!("[{i}/5] relay")), "{stderr}");
    }

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in [
        "cpu_model",
        "nproc",
        "kernel",
        "rustc",
        "git_commit",
        "date",
    ] {
        assert!(v["header"].get(key).is_some(), "header.{key} missing");
    }
    let recs = v["records"].as_array().unwrap();
    assert_eq!(recs.len(), 5, "4 myelin arrangements + channel");
    for r in recs {
        for key in [
            "scenario",
            "system",
            "config",
            "count",
            "lost",
            "cpu_percent",
            "cpu_ns_per_msg",
            "rss_bytes",
            "hops",
        ] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        for p in ["p50", "p90", "p99", "p999", "max", "mean"] {
            assert!(r["latency_ns"].get(p).is_some(), "latency_ns.{p}");
            assert!(r["per_hop_ns"].get(p).is_some(), "per_hop_ns.{p}");
        }
        assert_eq!(r["count"], 30);
        assert_eq!(r["lost"], 0);
        assert_eq!(r["hops"], 3);
    }
    let svgs: Vec<_> = std::fs::read_dir(&plots).unwrap().collect();
    assert_eq!(
        svgs.len(),
        11,
        "a histogram and a time plot per record, and the scenario's comparison chart"
    );
    for f in svgs {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        assert!(text.starts_with("<svg") || text.starts_with("<?xml"));
    }
    // The comparison chart has a row (a box and a CPU bar) per run,
    // labelled with its system and configuration.
    let chart = std::fs::read_to_string(plots.join("compare-relay.svg")).unwrap();
    for r in recs {
        let label = format!(
            "{} {}",
            r["system"].as_str().unwrap(),
            r["config"].as_str().unwrap()
        );
        assert!(
            chart.contains(&label),
            "row {label:?} missing from the chart"
        );
    }
    assert!(
        !chart.contains("no samples"),
        "every run measured something"
    );
    assert!(stdout.contains("1 comparison chart(s)"), "{stdout}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Ctrl-C during the suite (SIGINT to the whole process group, as a
/// terminal sends it) stops after the current run and prints the table of
/// the runs that finished, exiting non-zero.
#[test]
fn ctrl_c_prints_the_runs_that_finished() {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    // 5 runs of 3 s each (300 messages at 100 Hz).
    let mut child = myelin()
        .args([
            "bench", "relay", "--hops", "2", "--rate", "100", "--count", "300", "--size", "64",
        ])
        .args(["--system", "myelin", "--system", "channel"])
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let group = child.id() as i32;
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = err.read_line(&mut line).unwrap();
        assert!(n > 0, "exited before its first run finished");
        if line.starts_with("[1/5]") {
            break;
        }
    }
    // SAFETY: kill(2) with a negative pid signals the process group the
    // child leads (created above by process_group(0)); no memory involved.
    assert_eq!(unsafe { libc::kill(-group, libc::SIGINT) }, 0);
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "an interrupted suite exits non-zero");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("hop p50"),
        "the table of what finished: {stdout}"
    );
    assert!(rest.contains("interrupted (Ctrl-C) after"), "{rest}");
    assert!(!rest.contains("[5/5]"), "stopped early: {rest}");
}

fn fails_naming(args: &[&str], needle: &str) {
    let out = myelin().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(needle),
        "{args:?}: stderr does not name {needle:?}:\n{err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
}

#[test]
fn bad_input_exits_non_zero_naming_the_flag() {
    fails_naming(&["bench", "relay", "--rate", "0"], "--rate");
    fails_naming(&["bench", "relay", "--rate", "1e-300"], "--rate");
    let publish = ["topic", "pub", "/x", "std_msgs/msg/String", "data: hi"];
    for rate in ["1e-300", "0", "inf", "1e9"] {
        fails_naming(&[&publish[..], &["--rate", rate]].concat(), "--rate");
    }
    fails_naming(&["bench", "relay", "--size", "100MiB"], "--size");
    fails_naming(&["bench", "relay", "--size", "lots"], "--size");
    fails_naming(&["bench", "relay", "--hops", "0"], "--hops");
    fails_naming(&["bench", "relay", "--system", "dds"], "--system");
    fails_naming(&["bench", "fanout", "--nodes", "3"], "--nodes");
    fails_naming(&["bench", "teleport"], "teleport");
}

#[test]
fn doctor_clean_runs_and_rejects_a_bad_domain() {
    let out = myelin()
        .args(["doctor", "--clean", "--domain", "229"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("domain 229"));
    fails_naming(&["doctor", "--domain", "999"], "--domain");
}

/// `myelin doctor` says which transports a program would use, how fast idle
/// CPUs wake, what is
/// wrong with MYELIN_TRANSPORT or MYELIN_ZENOH_CONFIG, whether the zenoh
/// router is there, and how much room shared memory has.
#[test]
fn doctor_reports_transports_configuration_and_space() {
    let doctor = |env: &[(&str, &str)]| {
        let mut c = myelin();
        c.arg("doctor")
            .env_remove("MYELIN_TRANSPORT")
            .env_remove("MYELIN_ZENOH_CONFIG");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let plain = doctor(&[]);
    assert!(
        plain.contains("transports: in-process on, shared memory on, zenoh on"),
        "{plain}"
    );
    // Whether a router runs here is not the test's to decide: one of the two.
    assert!(
        plain.contains("a router listens at tcp/127.0.0.1:7447")
            || plain.contains("nothing listens at tcp/127.0.0.1:7447"),
        "{plain}"
    );
    assert!(plain.contains(" free of "), "{plain}");
    // What a wake-up costs here: the idle states, the request in force,
    // and a real attempt at SCHED_FIFO (granted to root).
    assert!(plain.contains("idle CPUs: cpuidle driver "), "{plain}");
    assert!(plain.contains("wake-up latency: "), "{plain}");
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        plain.contains(if root {
            "real-time: SCHED_FIFO is granted to this user"
        } else {
            "real-time: "
        }),
        "{plain}"
    );
    // How graph changes reach the publishers: membarrier where the kernel
    // grants it (this one does), full fences when told not to use it.
    assert!(plain.contains("graph changes: membarrier"), "{plain}");
    let fenced = doctor(&[("MYELIN_MEMBARRIER", "0")]);
    assert!(fenced.contains("graph changes: full fences"), "{fenced}");
    let typo = doctor(&[("MYELIN_TRANSPORT", "shm,zneoh")]);
    assert!(typo.contains("did you mean zenoh?"), "{typo}");
    assert!(typo.contains("programs started with it fail"), "{typo}");
    let shm_only = doctor(&[("MYELIN_TRANSPORT", "shm")]);
    assert!(
        shm_only.contains("shared memory on, zenoh off"),
        "{shm_only}"
    );
    let missing = doctor(&[("MYELIN_ZENOH_CONFIG", "/nonexistent/zenoh.json5")]);
    assert!(missing.contains("/nonexistent/zenoh.json5"), "{missing}");
    assert!(
        missing.contains("programs started with it fail"),
        "{missing}"
    );
}

/// `myelin doctor` reports what is in the segment directory: a forged file
/// named like ours (a symlink) is reported as foreign and `--clean` leaves
/// it (and what it points to) alone; a header-less one is reported as
/// corrupt.
#[test]
fn doctor_reports_foreign_and_corrupt_segments_and_never_removes_a_foreign_one() {
    let dir = std::env::temp_dir().join(format!("myelin_doctor_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let link = dir.join(format!("myelin_{uid}_7_s_1_1"));
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let junk = dir.join(format!("myelin_{uid}_7_p_1_2"));
    std::fs::write(&junk, b"x").unwrap();
    for args in [&["doctor"][..], &["doctor", "--clean"][..]] {
        let out = myelin()
            .args(args)
            .env("MYELIN_SHM_DIR", &dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 corrupt, 1 foreign"), "{text}");
        assert!(text.contains("a symlink"), "{text}");
    }
    assert!(std::fs::symlink_metadata(&link).is_ok());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_topology_runs_a_file_and_reports_json_and_errors() {
    let dir = std::env::temp_dir().join(format!("myelin-topo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.json");
    let topo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/sierra_nevada.json"
    );
    let out = myelin()
        .args(["bench", "topology", topo, "--duration", "1"])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("total:") && stdout.contains("cpu:"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["subscriptions"].as_array().unwrap().len(), 17);
    for k in ["late", "too_late", "lost", "received", "rss_bytes"] {
        assert!(v[k].is_u64(), "{k}");
    }
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\n  \"nodes\": [ oops ]\n}\n").unwrap();
    let out = myelin()
        .args(["bench", "topology"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.json:2:"), "{err}");
    let out = myelin().args(["bench", "topology"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a FILE"));
    let out = myelin()
        .args(["bench", "topology", topo, "--idle-wait", "sometimes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--idle-wait") && err.contains("anticipate"),
        "{err}"
    );
}

/// `myelin interface list|show` as `ros2 interface`: the known types, a
/// definition with its hash, and a typo answered with a suggestion.
#[test]
fn interface_lists_and_shows_types() {
    let out = myelin().args(["interface", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("    rcl_interfaces/srv/GetParameters\n"),
        "{text}"
    );
    assert!(text.contains("    sensor_msgs/msg/Image\n"), "{text}");
    let out = myelin()
        .args(["interface", "show", "std_msgs/msg/String"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("string data"), "{text}");
    assert!(
        text.contains("RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"),
        "{text}"
    );
    let out = myelin()
        .args(["interface", "show", "sensor_msgs/msg/Imgae"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean sensor_msgs/msg/Image?"));
}

/// A reader that has gone (`| head`) ends a printing command quietly by
/// SIGPIPE, as it ends `cat`: no panic message, no "error:". The pipe's
/// read end is closed before the command starts, so every write fails.
#[test]
fn a_reader_that_leaves_ends_printing_commands_quietly() {
    use std::os::unix::process::ExitStatusExt;
    for args in [
        &["interface", "show", "sensor_msgs/msg/Image"][..],
        &["completions", "bash"][..],
        &["interface", "list"][..],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = myelin()
            .args(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?}: {err}");
    }
}
