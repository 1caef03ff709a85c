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

/// Two contexts of one domain with a publisher in one and a subscription
/// in the other on `topic`, matched (through shared memory).
struct Pair {
    a: Context,
    _b: Context,
    p: Publisher<String>,
    s: Subscription<String>,
}

fn pair(domain: u32, topic: &str) -> Pair {
    let a = ctx(domain);
    let b = ctx(domain);
    let p = a
        .create_node("talker")
        .unwrap()
        .create_publisher::<String>(topic, QoS::keep_all())
        .unwrap();
    let s = b
        .create_node("listener")
        .unwrap()
        .create_polling_subscription::<String>(topic, QoS::keep_all(), Default::default())
        .unwrap();
    let deadline = Instant::now() + LONG;
    while p.subscription_count() == 0 {
        assert!(Instant::now() < deadline, "the peers never matched");
        std::thread::sleep(Duration::from_millis(5));
    }
    Pair { a, _b: b, p, s }
}

/// Forged endpoint segments in the domain (one writable by everybody, one
/// of another user when root, one a symlink to a private file) are skipped:
/// two legitimate contexts still find each other and talk, and the file
/// behind the symlink is untouched.
#[test]
fn forged_segments_are_skipped_and_legitimate_peers_still_talk() {
    let domain = 201;
    let dir = shm_dir();
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

    let Pair { a: _a, _b, p, s } = pair(domain, "/chatter");
    p.publish("hello".to_string()).unwrap();
    assert_eq!(*s.wait_for_message(LONG).unwrap(), "hello");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");

    for f in [&writable, &link, &foreign] {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_file(&victim);
}

/// The child of the next test: squats every name its own first 64
/// endpoints and its wake-up table would get if names were its pid and a
/// counter (symlinks, as another user could plant them for a pid about to
/// be used), then talks over shared memory between two contexts.
#[test]
fn squatted_names_child() {
    if std::env::var(ROLE).as_deref() != Ok("squat") {
        return;
    }
    let domain = 206;
    let dir = shm_dir();
    /// Removes the planted files however the test ends.
    struct Planted(Vec<std::path::PathBuf>);
    impl Drop for Planted {
        fn drop(&mut self) {
            for f in &self.0 {
                let _ = std::fs::remove_file(f);
            }
        }
    }
    let mut planted = Planted(Vec::new());
    for n in 0..64 {
        for kind in ["p", "s"] {
            let path = dir.join(format!(
                "myelin_{}_{domain}_{kind}_{}_{n}",
                uid(),
                std::process::id()
            ));
            std::os::unix::fs::symlink("/nonexistent", &path).unwrap();
            planted.0.push(path);
        }
    }
    // And the name its wake-up table would have from its pid alone.
    let table = dir.join(format!("myelin_{}_h_w_{}", uid(), std::process::id()));
    std::os::unix::fs::symlink("/nonexistent", &table).unwrap();
    planted.0.push(table);
    let Pair { a: _a, _b, p, s } = pair(domain, "/chatter");
    p.publish("hello".to_string()).unwrap();
    assert_eq!(*s.wait_for_message(LONG).unwrap(), "hello");
    println!("talked");
}

/// Segment names carry an unguessable part: a local user who plants files
/// at the names a process's endpoints would get from its pid and a
/// counter does not stop it from using shared memory.
#[test]
fn names_a_squatter_could_predict_are_not_used() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "squatted_names_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "squat")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("talked"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

/// The other process of the churn test: subscribes and holds every message
/// it gets (its chunks stay lent) until killed.
#[test]
fn holding_subscriber_child() {
    if std::env::var(ROLE).as_deref() != Ok("hold") {
        return;
    }
    let c = ctx(203);
    let node = c.create_node("hoarder").unwrap();
    let s = node
        .create_polling_subscription::<Blob>("/churn", QoS::keep_last(4), Default::default())
        .unwrap();
    println!("ready");
    let mut held = Vec::new();
    loop {
        if let Ok(m) = s.wait_for_message(Duration::from_millis(100)) {
            held.push(m);
        }
    }
}

fn spawn_holder() -> std::process::Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "holding_subscriber_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "hold")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "holder died"
        );
    }
    child
}

/// The files of this user in the segment directory whose names contain
/// `part`.
fn segments(part: &str) -> std::collections::BTreeSet<String> {
    let dir = shm_dir();
    let prefix = format!("myelin_{}_", uid());
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with(&prefix) && n.contains(part))
        .collect()
}

/// Churn: 2,000 publishers created, used by a subscriber in another
/// process that holds their chunks, and dropped; then 200 subscriber
/// processes killed with `kill -9` while they hold chunks. Once the
/// survivor's discovery has run, every chunk the killed readers held is
/// back in the publisher's pool, and the segment directory is back to its
/// baseline: no pool of a dropped publisher, no inbox or wake-up table of
/// a killed process is left.
#[test]
fn churn_and_kill_9_leave_shm_at_its_baseline() {
    const CREATE_DROP: usize = 2_000;
    const KILLS: usize = 200;
    let c = ctx(203);
    let node = c.create_node("churner").unwrap();
    let baseline = segments("_203_");
    let mut holder = spawn_holder();
    for round in 0..CREATE_DROP {
        let p = node
            .create_publisher::<Blob>("/churn", QoS::keep_last(4))
            .unwrap();
        let deadline = Instant::now() + LONG;
        while p.subscription_count() == 0 {
            assert!(Instant::now() < deadline, "round {round}: never matched");
            std::thread::sleep(Duration::from_millis(1));
        }
        for _ in 0..2 {
            let mut loan = p.loan_slice(1024).unwrap();
            loan.fill(round as u8);
            loan.publish().unwrap();
        }
    }
    let mut killed = vec![holder.id()];
    holder.kill().unwrap();
    holder.wait().unwrap();
    let p = node
        .create_publisher::<Blob>("/churn", QoS::keep_last(4))
        .unwrap();
    for _ in 0..KILLS {
        let mut h = spawn_holder();
        let deadline = Instant::now() + LONG;
        while p.subscription_count() == 0 {
            assert!(Instant::now() < deadline, "never matched");
            std::thread::sleep(Duration::from_millis(1));
        }
        for _ in 0..3 {
            let mut loan = p.loan_slice(1024).unwrap();
            loan.fill(1);
            loan.publish().unwrap();
        }
        killed.push(h.id());
        h.kill().unwrap();
        h.wait().unwrap();
    }
    let deadline = Instant::now() + LONG;
    while p.shared_memory_in_use() > 0 || p.subscription_count() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} chunks still held by killed readers",
            p.shared_memory_in_use()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(p);
    let deadline = Instant::now() + LONG;
    loop {
        let now = segments("_203_");
        let left: Vec<_> = now.difference(&baseline).collect();
        let tables: Vec<_> = killed
            .iter()
            .flat_map(|pid| segments(&format!("_h_w_{pid}_")))
            .collect();
        if left.is_empty() && tables.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: {left:?} {tables:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The child of the next test: uses shared memory, then exits normally.
#[test]
fn clean_exit_child() {
    if std::env::var(ROLE).as_deref() != Ok("exit") {
        return;
    }
    let c = ctx(204);
    let node = c.create_node("brief").unwrap();
    let _s = node
        .create_subscription("/x", QoS::default(), |_: String| {})
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    println!("pid {}", std::process::id());
}

/// The child of the next test but one: as `clean_exit_child`, but a thread
/// still holds the context when `main` returns (as a discovery thread
/// finishing a pass may), so no destructor of the context ever runs.
#[test]
fn held_exit_child() {
    if std::env::var(ROLE).as_deref() != Ok("held_exit") {
        return;
    }
    let c = ctx(205);
    let node = c.create_node("held").unwrap();
    let _s = node
        .create_subscription("/x", QoS::default(), |_: String| {})
        .unwrap();
    let held = c.clone();
    std::thread::spawn(move || {
        let _held = held;
        std::thread::sleep(std::time::Duration::from_secs(3600));
    });
    println!("pid {}", std::process::id());
}

/// A process whose context is still held by a thread when it exits
/// normally leaves nothing either: the domain's graph file is left at
/// exit, not only when the context is dropped (a CI run found the file
/// left behind when the last reference was a background thread's).
#[test]
fn a_clean_exit_with_the_context_held_by_a_thread_leaves_nothing() {
    let left = files_left_by_child("held_exit_child", "held_exit");
    assert!(left.is_empty(), "left: {left:?}");
}

/// Run the child test `child` (role `role`) with a private segment
/// directory; what it left there once it exited normally.
fn files_left_by_child(child: &str, role: &str) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("myelin_{role}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child, "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env("MYELIN_SHM_DIR", &dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("pid "));
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    left
}

/// A process that exits normally takes its wake-up table with it (it lives
/// in a static, whose destructor never runs), and everything else it made,
/// the domain's shared counter too since it was the domain's last process:
/// its private segment directory is empty.
#[test]
fn a_clean_exit_leaves_nothing_behind() {
    let left = files_left_by_child("clean_exit_child", "exit");
    assert!(left.is_empty(), "left: {left:?}");
}

/// Another process of this user scribbles over a subscription's inbox
/// header (its magic and its endpoint description): discovery skips the
/// inbox, so no publisher can connect to it. The subscription notices on
/// its next discovery pass and rewrites the header: a publisher that
/// starts afterwards connects and messages flow, instead of the
/// subscription going silent for good.
/// Where this user's shared-memory files are (`MYELIN_SHM_DIR`, as the
/// library reads it, or `/dev/shm`).
fn shm_dir() -> std::path::PathBuf {
    std::env::var_os("MYELIN_SHM_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/dev/shm".into())
}

/// The inbox file of the one subscription in `domain`, open for reading
/// and writing (as another process of this user could).
fn open_inbox(domain: u32) -> std::fs::File {
    let inbox = segments(&format!("_{domain}_s_"))
        .into_iter()
        .next()
        .expect("the subscription's inbox");
    let dir = shm_dir();
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(&inbox))
        .unwrap()
}

#[test]
fn a_damaged_inbox_header_is_rewritten_and_messages_flow_again() {
    use std::os::unix::fs::FileExt;
    let Pair { a, _b, p, s } = pair(205, "/fragile");
    p.publish("before".to_string()).unwrap();
    assert_eq!(*s.wait_for_message(LONG).unwrap(), "before");
    let f = open_inbox(205);
    // The magic (offset 0) and the first bytes of the description.
    f.write_all_at(&[0xAB; 8], 0).unwrap();
    f.write_all_at(&[0xCD; 32], 256).unwrap();
    // A publisher that starts now must find the inbox through discovery
    // (which validates the header). Until it has connected, a message may
    // find nobody: keep publishing until one arrives.
    drop(p);
    let p = a
        .create_node("talker2")
        .unwrap()
        .create_publisher::<String>("/fragile", QoS::keep_all())
        .unwrap();
    let deadline = Instant::now() + LONG;
    loop {
        p.publish("after".to_string()).unwrap();
        if let Ok(m) = s.wait_for_message(Duration::from_millis(100)) {
            assert_eq!(*m, "after");
            break;
        }
        assert!(Instant::now() < deadline, "the subscription stayed silent");
    }
}

/// A subscription reads only the connection blocks it found claimed until
/// the inbox's claim count moves. Another process of the user sets the
/// count back after a second publisher claimed a block: that publisher's
/// messages are late at worst (the next full look, at the latest the
/// discovery pass), never lost; a count set to garbage costs full looks.
#[test]
fn a_claim_count_set_back_delays_a_publisher_never_loses_it() {
    use std::os::unix::fs::FileExt;
    let Pair { a, _b, p, s } = pair(206, "/claims");
    p.publish("first".to_string()).unwrap();
    assert_eq!(*s.wait_for_message(LONG).unwrap(), "first");
    let f = open_inbox(206);
    // The count word: after the header (256), the endpoint description
    // (1024), and the wake slot, capacities, block count and gone flag.
    const CLAIMS: u64 = 256 + 1024 + 24;
    let mut before = [0u8; 8];
    f.read_exact_at(&mut before, CLAIMS).unwrap();
    let p2 = a
        .create_node("talker2")
        .unwrap()
        .create_publisher::<String>("/claims", QoS::keep_all())
        .unwrap();
    let deadline = Instant::now() + LONG;
    while p2.subscription_count() == 0 {
        assert!(
            Instant::now() < deadline,
            "the second publisher never matched"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    f.write_all_at(&before, CLAIMS).unwrap();
    for i in 0..3 {
        p2.publish(format!("second {i}")).unwrap();
    }
    for i in 0..3 {
        assert_eq!(*s.wait_for_message(LONG).unwrap(), format!("second {i}"));
    }
    // Garbage: every pass looks at every block, messages still flow.
    f.write_all_at(&u64::MAX.to_ne_bytes(), CLAIMS).unwrap();
    p.publish("third".to_string()).unwrap();
    p2.publish("fourth".to_string()).unwrap();
    let mut got = vec![
        (*s.wait_for_message(LONG).unwrap()).clone(),
        (*s.wait_for_message(LONG).unwrap()).clone(),
    ];
    got.sort();
    assert_eq!(got, ["fourth", "third"]);
}

/// The one name anyone can predict, a domain's `graph` file, planted by
/// someone else (a symlink here; another user's file behaves the same):
/// this user's processes meet at the next name (`graph_1`) and talk
/// across processes as before, with one warning naming the planted file;
/// the planted file and what it points to are untouched.
#[test]
fn a_squatted_graph_file_is_skipped_for_the_next_name_never_followed() {
    let domain = 207;
    let dir = shm_dir();
    let victim = std::env::temp_dir().join(format!("myelin_graph_victim_{}", std::process::id()));
    std::fs::write(&victim, b"precious").unwrap();
    let graph = dir.join(format!("myelin_{}_{domain}_graph", uid()));
    let _ = std::fs::remove_file(&graph);
    std::os::unix::fs::symlink(&victim, &graph).unwrap();

    // Another process of this user subscribes on the squatted domain...
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "squatted_graph_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MYELIN_SQUATTED_GRAPH_CHILD", domain.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // ...and hears a publisher of this one.
    let c = Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(true)
        .network(false)
        .build()
        .expect("the next name is free");
    let node = c.create_node("squat_pub").unwrap();
    let p = node
        .create_publisher::<String>("/over_squat", QoS::keep_last(10))
        .unwrap();
    let deadline = Instant::now() + LONG;
    while p.subscription_count() == 0 {
        assert!(Instant::now() < deadline, "the child never matched");
        std::thread::sleep(Duration::from_millis(10));
    }
    p.publish("across".to_string()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("got across"), "{stdout}{stderr}");
    assert_eq!(
        stderr.matches(&format!("{domain}_graph")).count(),
        1,
        "one warning names the planted file: {stderr}"
    );
    assert!(
        dir.join(format!("myelin_{}_{domain}_graph_1", uid()))
            .exists()
    );

    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(std::fs::symlink_metadata(&graph).unwrap().is_symlink());
    std::fs::remove_file(&graph).unwrap();
    std::fs::remove_file(&victim).unwrap();
}

/// The child of the test above: a subscription on the squatted domain.
#[test]
fn squatted_graph_child() {
    let Ok(domain) = std::env::var("MYELIN_SQUATTED_GRAPH_CHILD") else {
        return;
    };
    myelin::init_logging();
    let c = Context::builder()
        .domain_id(domain.parse().unwrap())
        .shared_memory(true)
        .network(false)
        .build()
        .unwrap();
    let node = c.create_node("squat_sub").unwrap();
    let s = node
        .create_polling_subscription::<String>(
            "/over_squat",
            QoS::keep_last(10),
            Default::default(),
        )
        .unwrap();
    let m = s
        .wait_for_message(LONG)
        .expect("a message across processes");
    println!("got {}", *m);
}

/// A publisher that sends one chunk twice (a forger using the
/// shared-memory library directly, not myelin's publisher): the reader
/// reads both descriptors in place, the second while the first is held
/// (its lease slot taken, so it falls back to an allocation of its own),
/// gives the chunk back once per descriptor, the last one only when the
/// last message goes, and keeps reading.
#[test]
fn a_chunk_sent_twice_is_read_twice_and_given_back_twice() {
    use myelin_shm::SegmentName;
    use myelin_shm::endpoint::{EndpointKind, scan};
    use myelin_shm::inbox::{Desc, InboxWriter};
    use myelin_shm::pool::PoolWriter;

    let domain = 208;
    let c = ctx(domain);
    let s = c
        .create_node("listener")
        .unwrap()
        .create_polling_subscription::<u64>("/twice", QoS::keep_all(), Default::default())
        .unwrap();
    let deadline = Instant::now() + LONG;
    let inbox = loop {
        let found = scan(domain, &mut Vec::new())
            .into_iter()
            .find(|f| f.info.kind == EndpointKind::Subscription && f.info.topic == "/twice");
        if let Some(f) = found {
            break f;
        }
        assert!(
            Instant::now() < deadline,
            "the subscription's inbox never appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let (hash, pub_id) = (inbox.info.type_hash, 0x7417_u64);
    let pool_name =
        SegmentName::new(domain, &format!("k_{}_{pub_id}_0", std::process::id())).unwrap();
    let pool = PoolWriter::create(&pool_name, hash, 64, 8).unwrap();
    let chunk = pool.alloc().unwrap();
    pool.reserve_chunk(chunk, 8).unwrap();
    // SAFETY: the chunk is 64 bytes, 64-byte aligned, and this test is its
    // only writer.
    unsafe { (pool.chunk_ptr(chunk) as *mut u64).write(0x5eed) };
    let mut w = InboxWriter::connect(&inbox.name, pub_id, hash)
        .unwrap()
        .expect("a free connection block");
    let d = Desc {
        pool: 0,
        chunk,
        len: 8,
    };
    w.push(d, false);
    w.push(d, false);
    let take = || {
        let deadline = Instant::now() + LONG;
        loop {
            if let Some(m) = s.take() {
                break m;
            }
            assert!(Instant::now() < deadline, "the forged message never came");
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let (first, second) = (take(), take());
    assert_eq!((*first, *second), (0x5eed, 0x5eed));
    let returns = |w: &mut InboxWriter| {
        let mut keys = Vec::new();
        w.drain_returns(|k| keys.push(k));
        keys
    };
    drop(first);
    assert_eq!(
        returns(&mut w),
        [d.key()],
        "the first descriptor's give-back"
    );
    assert_eq!(*second, 0x5eed);
    drop(second);
    assert_eq!(returns(&mut w), [d.key()], "the second's");
    // The reader goes on: the chunk once more.
    w.push(d, false);
    assert_eq!(*take(), 0x5eed);
    assert_eq!(returns(&mut w), [d.key()]);
}
