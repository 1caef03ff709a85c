//! Another local user and an unlucky operator: segment files are trusted
//! only when they are regular files of this user that nobody else can
//! write, opened without following symlinks; a full file system is an
//! error, not a SIGBUS; cleanup never touches another user's file.
//!
//! Tests that need root (to `chown` a file to another uid, or to mount a
//! private tmpfs in a mount namespace) print why and return when they run
//! without it.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use myelin_shm::{RingReader, RingWriter, SegmentName, ShmError, TypeId, cleanup_stale};

/// Another user's uid for `chown` (any uid that is not ours works).
const OTHER_UID: u32 = 1001;

fn ty() -> TypeId {
    TypeId {
        name: "test/msg/Bytes".into(),
        hash: 7,
    }
}

fn name(domain: u32, what: &str) -> SegmentName {
    SegmentName::new(domain, &format!("{what}_{}", std::process::id())).unwrap()
}

fn is_root() -> bool {
    rustix::process::getuid().is_root()
}

fn scratch(what: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("myelin_hostile_{what}_{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn a_symlink_in_place_of_a_segment_is_never_followed() {
    let victim = scratch("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let n = name(221, "link");
    let _ = std::fs::remove_file(n.path());
    std::os::unix::fs::symlink(&victim, n.path()).unwrap();
    let r = RingReader::open(&n, &ty());
    assert!(
        matches!(&r, Err(ShmError::Foreign { why, .. }) if why.contains("symlink")),
        "{:?}",
        r.err()
    );
    assert!(RingWriter::create(&n, &ty(), 4, 64).is_err());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    // Another test's dead process may have left files in this domain: the
    // point is that the symlink is not among what the sweep removes.
    assert!(!cleanup_stale(221).unwrap().contains(&n.path()));
    assert!(
        std::fs::symlink_metadata(n.path()).is_ok(),
        "cleanup left it"
    );
    std::fs::remove_file(n.path()).unwrap();
    std::fs::remove_file(&victim).unwrap();
}

#[test]
fn a_segment_others_may_write_is_refused() {
    let n = name(222, "mode");
    let _w = RingWriter::create(&n, &ty(), 4, 64).unwrap();
    std::fs::set_permissions(n.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = RingReader::open(&n, &ty());
    assert!(
        matches!(&r, Err(ShmError::Foreign { why, .. }) if why.contains("0666")),
        "{:?}",
        r.err()
    );
    let text = r.err().unwrap().to_string();
    assert!(text.contains("doctor --clean"), "says what to do: {text}");
}

#[test]
fn another_users_segment_is_refused_and_never_cleaned_up() {
    if !is_root() {
        eprintln!("skipped: chown to another uid needs root");
        return;
    }
    let n = name(223, "squat");
    let w = RingWriter::create(&n, &ty(), 4, 64).unwrap();
    // Keep the file when the writer goes: it plays a squatter's segment
    // whose creator is dead.
    let path = n.path();
    let kept = path.with_file_name(format!("kept_{}", std::process::id()));
    std::fs::hard_link(&path, &kept).unwrap();
    drop(w);
    std::fs::rename(&kept, &path).unwrap();
    std::os::unix::fs::chown(&path, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    let r = RingReader::open(&n, &ty());
    assert!(
        matches!(&r, Err(ShmError::Foreign { why, .. }) if why.contains(&format!("uid {OTHER_UID}"))),
        "{:?}",
        r.err()
    );
    cleanup_stale(223).unwrap();
    assert!(path.exists(), "cleanup removed another user's file");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_truncated_segment_is_a_clean_error_not_a_crash() {
    let n = name(224, "trunc");
    let _w = RingWriter::create(&n, &ty(), 4, 64).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(n.path())
        .unwrap();
    for len in [0u64, 100, 300] {
        f.set_len(len).unwrap();
        let r = RingReader::open(&n, &ty());
        assert!(
            matches!(r, Err(ShmError::BadHeader { .. })),
            "{len} bytes: {:?}",
            r.err()
        );
    }
}

/// The child of [`a_full_shm_is_an_error_naming_the_space_not_a_sigbus`]:
/// runs inside a mount namespace whose segment directory is a 1 MiB tmpfs.
#[test]
fn full_shm_child() {
    if std::env::var_os("MYELIN_HOSTILE_FULL").is_none() {
        return;
    }
    let n = name(225, "big");
    // 16 slots of 1 MiB: sixteen times what the file system holds.
    match RingWriter::create(&n, &ty(), 16, 1 << 20) {
        Err(ShmError::NoSpace {
            needed, available, ..
        }) => {
            assert!(needed > available, "{needed} > {available}");
            println!("NOSPACE needed={needed} available={available}");
        }
        Err(e) => panic!("expected NoSpace, got {e}"),
        Ok(mut w) => {
            // Without a reservation this is where a SIGBUS would come.
            for _ in 0..16 {
                let _ = w.publish(&vec![1u8; 1 << 20]);
            }
            panic!("a 16 MiB segment was created in a 1 MiB file system");
        }
    }
    assert!(!n.path().exists(), "the failed segment was removed");
}

#[test]
fn a_full_shm_is_an_error_naming_the_space_not_a_sigbus() {
    if !is_root() {
        eprintln!("skipped: a private tmpfs in a mount namespace needs root");
        return;
    }
    if Command::new("unshare").arg("--version").output().is_err() {
        eprintln!("skipped: `unshare` (util-linux) is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("myelin_fullshm_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs '{d}' && exec '{exe}' --exact full_shm_child --nocapture --test-threads=1",
        d = dir.display(),
        exe = exe.display()
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env("MYELIN_HOSTILE_FULL", "1")
        .env("MYELIN_SHM_DIR", &dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Operation not permitted") && !out.status.success() {
        eprintln!("skipped: mount namespaces are not permitted here: {stderr}");
        return;
    }
    assert!(
        out.status.success() && stdout.contains("NOSPACE"),
        "child: {:?}\n{stdout}\n{stderr}",
        out.status
    );
}
