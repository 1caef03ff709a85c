//! The independent rmw_zenoh peer of the interop tests
//! (`interop/rmw_zenoh_peer.py`) and the Python that runs it. Shared by
//! the `myelin` and `myelin-cli` test binaries (both crates sit two levels
//! below the repository root).

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The Python that runs the peer, or `None` (with the reason printed) when
/// there is none outside CI.
pub fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("MYELIN_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| "python3".into());
    let ok = Command::new(&candidate)
        .args(["-c", "import zenoh"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(candidate);
    }
    let why = format!(
        "{} cannot import zenoh; set MYELIN_INTEROP_PYTHON to a Python with eclipse-zenoh \
         (see .ci/run)",
        candidate.display()
    );
    assert!(std::env::var("CI").is_err(), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// The peer script.
pub fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/rmw_zenoh_peer.py")
}
