//! The Python package's own tests (`python/tests`, pytest), run from the
//! workspace's test command so that one command checks both languages.
//!
//! They need the package installed in the interop Python
//! (`MYELIN_INTEROP_PYTHON`; `.ci/run` runs `pip install ./python` into
//! it). Outside CI, a Python without the package skips them with the
//! reason printed. The package's extension is built from this checkout
//! when it is installed: reinstall it after changing the Rust code.
//!
//! Only with both transports compiled in (the workspace's test command):
//! the suite runs Rust examples across processes, which the feature
//! matrix's builds without shared memory could not reach.

#![cfg(all(feature = "shm", feature = "zenoh"))]

use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
fn the_python_package_passes_its_pytest_suite() {
    let python = std::env::var_os("MYELIN_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| "python3".into());
    let importable = Command::new(&python)
        .args(["-c", "import myelin._myelin, numpy, pytest"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        let why = format!(
            "{} cannot import myelin, numpy and pytest; install them with \
             `pip install ./python pytest` (see .ci/run)",
            python.display()
        );
        assert!(std::env::var("CI").is_err(), "{why}");
        eprintln!("skipped: {why}");
        return;
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(&repo)
        .output()
        .expect("run pytest");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
}
