//! `myelin bench icount`, the instruction-count gate, under a real
//! valgrind: the named workloads are counted, a baseline is written and
//! updated, and a count above the baseline fails the command naming the
//! workload. (The counts of this debug build differ from a release
//! build's; the gate's arithmetic is what is tested here, its numbers in
//! `.ci/icount.json`, which CI's gate step checks for every workload.)

use std::process::{Command, Output};

/// `myelin bench icount ARGS...`, run to completion.
fn icount<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_myelin"))
        .args(["bench", "icount"])
        .args(args)
        .output()
        .unwrap()
}

/// The stdout of a run that must succeed (else its output is the failure).
fn succeeded(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn a_count_above_the_baseline_fails_naming_the_workload_and_the_run_writes_a_baseline() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        println!("skipped: valgrind is not installed (apt-get install valgrind)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("myelin_icount_test_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Every workload "used" one instruction per operation before, and no
    // locked one.
    let tight = dir.join("tight.json");
    std::fs::write(
        &tight,
        r#"{ "dispatch 64B": 1.0, "shm loan+take 64B": 1.0, "zenoh publish 64B": 1.0,
             "cdr encode Image": 1.0, "cdr decode Image": 1.0, "relay 64B x5": 1.0,
             "shm idle take": 1.0, "shm idle take locked": 0.0, "cold lines x10": 1.0,
             "dispatch 64B locked": 0.0, "shm loan+take 64B locked": 0.0,
             "zenoh publish 64B locked": 0.0, "cdr encode Image locked": 0.0,
             "cdr decode Image locked": 0.0, "relay 64B x5 locked": 0.0,
             "dispatch 64B outside hot text": 0.0 }"#,
    )
    .unwrap();
    // Two workloads (each costs ~40 s under valgrind here; CI's gate step
    // counts every one in the release build): an instruction count and
    // the cold-cache one, which is reported but not gated.
    let saved = dir.join("saved.json");
    let out = icount([
        "--baseline".as_ref(),
        tight.as_os_str(),
        "--save-baseline".as_ref(),
        saved.as_os_str(),
        "--workload".as_ref(),
        "dispatch 64B".as_ref(),
        "--workload".as_ref(),
        "cold lines x10".as_ref(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains("instruction counts grew more than 5%")
            && stderr.contains("dispatch 64B (")
            && stderr.contains("dispatch 64B locked (+inf%)"),
        "{stderr}"
    );
    assert!(
        stdout.contains("GREW") && stdout.contains("not gated"),
        "{stdout}"
    );
    let read = |path: &std::path::Path| -> std::collections::BTreeMap<String, f64> {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let first = read(&saved);
    // The count, its locked-instruction count, the lines per delivery
    // (data missed, code executed), the pages of that code, and the
    // instructions outside the hot text.
    let keys: Vec<&str> = first.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "cold lines x10",
            "cold lines x10 code",
            "cold lines x10 code pages",
            "dispatch 64B",
            "dispatch 64B locked",
            "dispatch 64B outside hot text"
        ],
        "{first:?}"
    );
    // The locked instructions are found in the hot text too (code
    // callgrind names no object for, placed by the workload's load base).
    assert!(
        first["dispatch 64B"] > 1.0
            && first["dispatch 64B locked"] >= 1.0
            && first["cold lines x10"] > 0.0
            && first["cold lines x10 code"] > 0.0
            && first["cold lines x10 code pages"] > 0.0
            && first["cold lines x10 code pages"] <= first["cold lines x10 code"]
            // The harness's own loop and callback are not counted, and a
            // dispatch hop runs wholly in the hot text (0 on some builds;
            // what runs outside is counted below, in the relay's turns).
            && first["dispatch 64B outside hot text"] < first["dispatch 64B"],
        "{first:?}"
    );

    // Another workload's rows added to the saved baseline; the others
    // stay as they were.
    const TURNS: &str = "relay 64B x5 turns";
    succeeded(&icount([
        "--workload".as_ref(),
        TURNS.as_ref(),
        "--save-baseline".as_ref(),
        saved.as_os_str(),
    ]));
    let second = read(&saved);
    assert_eq!(second.len(), 9, "{second:?}");
    assert!(
        first.iter().all(|(k, v)| second[k] == *v)
            && second[TURNS] > 1.0
            && second.contains_key(&format!("{TURNS} locked"))
            // `spin_once`'s turns run code outside the hot text (the
            // wait's set-up), which this row counts.
            && second[&format!("{TURNS} outside hot text")] > 0.0,
        "{first:?} then {second:?}"
    );

    // The run's own counts as the baseline: within the tolerance.
    let stdout = succeeded(&icount([
        "--workload".as_ref(),
        TURNS.as_ref(),
        "--baseline".as_ref(),
        saved.as_os_str(),
    ]));
    // Its count, its locked-instruction row and its outside-hot-text
    // row, nothing else.
    assert_eq!(stdout.matches(" ok\n").count(), 3, "{stdout}");
    assert!(!stdout.contains("dispatch"), "{stdout}");

    // A workload this build does not have: refused before anything runs.
    let out = icount(["--workload", "nope"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("no workload \"nope\"")
            && stderr.contains("dispatch 64B"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
