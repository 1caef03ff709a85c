//! The shared-memory transport next to a hostile local user and an unlucky
//! operator, at the level a user sees: contexts, publishers and
//! subscriptions. (The segment-level cases are in
//! `crates/myelin-shm/tests/hostile.rs`; reliable keep_all without silent
//! loss and killed peers are in `tests/shm.rs`.)
//!
//! The test binary runs itself as the other process where one is needed
//! (`MYELIN_HOSTILE_ROLE`). Cases that need root (another uid, a mount
//! namespace) print why and return without it.

#![cfg(feature = "shm")]

use std::process::Command;
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, PublishError};

const LONG: Duration = Duration::from_secs(60);
const ROLE: &str = "MYELIN_HOSTILE_ROLE";

fn ctx(domain: u32) -> Context {
    Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(true)
        .network(false)
        .build()
        .unwrap()
}

fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Forged endpoint segments in the domain (one writable by everybody, one
/// of another user when root, one a symlink to a private file) are skipped:
/// two legitimate contexts still find each other and talk, and the file
/// behind the symlink is untouched.
#[test]
fn forged_segments_are_skipped_and_legitimate_peers_still_talk() {
    let domain = 201;
    let dir = std::env::var_os("MYELIN_SHM_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/dev/shm".into());
    let forged = |what: &str| {
        dir.join(format!(
            "myelin_{}_{domain}_{what}_{}_1",
            uid(),
            std::process::id()
        ))
    };
    let writable = forged("p");
    std::fs::write(&writable, vec![0u8; 4096]).unwrap();
    std::fs::set_permissions(
        &writable,
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    let victim = std::env::temp_dir().join(format!("myelin_victim_{}", std::process::id()));
    std::fs::write(&victim, b"precious").unwrap();
    let link = forged("s");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let foreign = forged("pp");
    std::fs::write(&foreign, vec![0u8; 4096]).unwrap();
    let root = uid() == 0;
    if root {
        std::os::unix::fs::chown(&foreign, Some(1001), Some(1001)).unwrap();
    } else {
        eprintln!("note: not root, so no segment of another uid is forged");
    }

    let a = ctx(domain);
    let b = ctx(domain);
    let pub_node = a.create_node("talker").unwrap();
    let sub_node = b.create_node("listener").unwrap();
    let p = pub_node
        .create_publisher::<String>("/chatter", QoS::keep_all())
        .unwrap();
    let s = sub_node
        .create_polling_subscription::<String>("/chatter", QoS::keep_all(), Default::default())
        .unwrap();
    let deadline = Instant::now() + LONG;
    while p.subscription_count() == 0 {
        assert!(Instant::now() < deadline, "the peers never matched");
        std::thread::sleep(Duration::from_millis(5));
    }
    p.publish("hello".to_string()).unwrap();
    assert_eq!(*s.wait_for_message(LONG).unwrap(), "hello");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");

    for f in [&writable, &link, &foreign] {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_file(&victim);
}

/// The child of the next test: inside a mount namespace whose segment
/// directory is a 2 MiB tmpfs.
#[test]
fn full_shm_child() {
    if std::env::var(ROLE).as_deref() != Ok("full") {
        return;
    }
    let c = ctx(202);
    let node = c.create_node("camera").unwrap();
    let outcome = node
        .create_publisher::<Blob>("/image", QoS::keep_last(1))
        .map_err(|e| e.to_string())
        .and_then(|p| {
            let _s = node
                .create_polling_subscription::<Blob>(
                    "/image",
                    QoS::keep_last(1),
                    Default::default(),
                )
                .map_err(|e| e.to_string())?;
            // A 4.6 MB frame: more than the file system holds.
            match p.loan_slice(4_665_600) {
                Err(e) => Err(e.to_string()),
                Ok(mut loan) => {
                    loan.fill(7);
                    loan.publish().map_err(|e: PublishError| e.to_string())
                }
            }
        });
    match outcome {
        Err(e) => {
            assert!(e.contains("no space"), "{e}");
            println!("REFUSED {e}");
        }
        Ok(()) => println!("PUBLISHED"),
    }
}

/// A full segment directory: publishing a frame that does not fit is an
/// error saying so, returned by the call that needed the memory; the
/// process does not die of SIGBUS.
#[test]
fn a_full_shm_is_an_error_from_the_call_not_a_sigbus() {
    if uid() != 0 {
        eprintln!("skipped: a private tmpfs in a mount namespace needs root");
        return;
    }
    if Command::new("unshare").arg("--version").output().is_err() {
        eprintln!("skipped: `unshare` (util-linux) is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("myelin_fullctx_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "mount -t tmpfs -o size=2m tmpfs '{d}' && exec '{exe}' --exact full_shm_child --nocapture --test-threads=1",
        d = dir.display(),
        exe = exe.display()
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env(ROLE, "full")
        .env("MYELIN_SHM_DIR", &dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("Operation not permitted") {
        eprintln!("skipped: mount namespaces are not permitted here: {stderr}");
        return;
    }
    assert!(
        out.status.success() && stdout.contains("REFUSED"),
        "child: {:?}\n{stdout}\n{stderr}",
        out.status
    );
}
