//! `myelin bench scale` and what it relies on, with real processes: the
//! report's columns, and `myelin doctor --clean` bringing the segment
//! directory back to empty after every process of a domain was killed
//! with `kill -9`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn myelin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_myelin"))
}

/// A segment directory of the test's own (MYELIN_SHM_DIR), so other tests'
/// files never count.
fn private_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("myelin_scale_{tag}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    v.sort();
    v
}

#[test]
fn bench_scale_reports_every_column_and_leaves_nothing_behind() {
    let dir = private_dir("bench");
    let json = dir.join("out.json");
    let plot = dir.join("plots");
    let out = myelin()
        .args(["bench", "scale", "--population", "3", "--transport", "shm"])
        .args(["--duration", "0.5", "--endpoints", "4"])
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&plot)
        .env("MYELIN_SHM_DIR", &dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("shm N=3"), "progress lines: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("idle CPU total"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r["n"], 3);
    assert_eq!(r["matched"], 3);
    assert_eq!(r["left_after_exit"], 0, "a clean exit leaves nothing");
    assert!(r["shm_objects"].as_i64().unwrap() > 0);
    for key in [
        "idle_per_process_ms_per_s",
        "rss_mib",
        "anon_mib",
        "joiner_matched_ms",
        "joiner_first_ms",
        "joiner_all_ms",
    ] {
        let x = r[key].as_f64().unwrap_or(f64::NAN);
        assert!(x.is_finite() && x >= 0.0, "{key} = {}", r[key]);
    }
    let svg = std::fs::read_to_string(plot.join("scale.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("idle CPU per process"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every process of a domain killed with `kill -9`: none of them removes
/// anything, and nobody is left to notice. `myelin doctor --clean` brings
/// the directory back to empty (the domain's graph file too, since no
/// process holds it any more).
#[test]
fn doctor_clean_after_every_process_was_killed_restores_an_empty_directory() {
    let dir = private_dir("kill9");
    let n = 6;
    let mut children = Vec::new();
    for i in 0..n {
        let mut c = myelin()
            .env("MYELIN_BENCH_SCALE", format!("member,shm,,188,{i},{n},4"))
            .env("MYELIN_SHM_DIR", &dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(c.stdout.take().unwrap());
        children.push((c, out));
    }
    for (_, out) in &mut children {
        let mut line = String::new();
        while !line.starts_with("matched") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "a member died");
        }
    }
    for (c, _) in &mut children {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    let left = files(&dir);
    assert!(
        left.iter().any(|f| f.contains("_188_graph")),
        "the graph file stays after kill -9: {left:?}"
    );
    assert!(left.len() > n, "{left:?}");
    let out = myelin()
        .args(["doctor", "--clean"])
        .env("MYELIN_SHM_DIR", &dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(files(&dir), Vec::<String>::new());
    std::fs::remove_dir_all(&dir).unwrap();
}
