//! The gate binary's arguments and baseline files, as an operator gets
//! them wrong: each is a clear error and a non-zero exit, before any
//! counting starts (so these run without valgrind); and a machine
//! without `membarrier`, where the locked rows are reported, not gated
//! (under valgrind).

use std::process::{Command, Output};

fn gate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_myelin-icount"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_missing_corrupt_or_absurd_baseline_is_refused_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("myelin_icount_gate_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.json");
    let corrupt = dir.join("corrupt.json");
    std::fs::write(&corrupt, "{ \"dispatch 64B\": 904.4, ").unwrap();
    let absurd = dir.join("absurd.json");
    std::fs::write(&absurd, r#"{ "dispatch 64B": -3.0 }"#).unwrap();
    for (file, says) in [
        (&missing, "No such file"),
        (&corrupt, "not valid"),
        (&absurd, "not a positive count"),
    ] {
        let o = gate(&["--baseline", file.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains(file.to_str().unwrap()) && e.contains(says),
            "{e}"
        );
        assert!(!e.contains("counting"), "refused before counting: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_are_refused_with_the_usage() {
    for (args, says, code) in [
        (
            &["--tolerance", "nan"][..],
            "a percentage from 0 to 1000",
            1,
        ),
        (
            &["--tolerance", "5000"][..],
            "a percentage from 0 to 1000",
            1,
        ),
        (&["--tolerance", "five"][..], "not a number", 2),
        (&["--baseline"][..], "--baseline needs a value", 2),
        (&["--frobnicate"][..], "unknown argument", 2),
    ] {
        let o = gate(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    let o = gate(&["--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("usage: myelin-icount"));
}

/// Where `membarrier` is off (`MYELIN_MEMBARRIER=0` stands for a kernel
/// or seccomp filter refusing it), a publish's matched-list read is a
/// fence and a callback takes its lock: more locked instructions than
/// the baseline, counted with `membarrier`, has. The gate reports those
/// rows there and fails on them where `membarrier` works. (The baseline
/// here is the test's own: `cargo test` builds without optimisation, so
/// the counts are not the checked-in baseline's.)
#[test]
fn without_membarrier_the_locked_rows_are_reported_not_gated() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("skipped: valgrind is not installed (.ci/run installs it)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("myelin_icount_fences_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let baseline = dir.join("baseline.json");
    // Counts far above any build's, and one locked instruction a hop.
    std::fs::write(
        &baseline,
        r#"{ "dispatch 64B": 1000000.0, "dispatch 64B outside hot text": 1000000.0, "dispatch 64B locked": 1.0 }"#,
    )
    .unwrap();
    let run = |membarrier: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_myelin-icount"));
        c.args(["--workload", "dispatch 64B", "--baseline"])
            .arg(&baseline);
        if !membarrier {
            c.env("MYELIN_MEMBARRIER", "0");
        }
        c.output().unwrap()
    };
    let o = run(false);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let locked = out
        .lines()
        .find(|l| l.starts_with("dispatch 64B locked"))
        .unwrap_or_else(|| panic!("no locked row: {out}"));
    assert!(
        locked.contains("not gated (membarrier is off here"),
        "{locked}"
    );
    if myelin::sched::uses_membarrier() {
        let o = run(true);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert!(stderr(&o).contains("dispatch 64B locked"), "{}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
