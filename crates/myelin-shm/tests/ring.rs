//! The shared-memory ring, in one process and across real child processes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use myelin_shm::{RingReader, RingWriter, SegmentName, ShmError, TypeId, cleanup_stale};

const DOMAIN: u32 = 231;
const ROLE: &str = "MYELIN_SHM_TEST_ROLE";

fn ty() -> TypeId {
    TypeId {
        name: "test_msgs/msg/Blob".into(),
        hash: 0xB10B,
    }
}

fn name(tag: &str) -> SegmentName {
    SegmentName::new(DOMAIN, &format!("{tag}_{}", std::process::id())).unwrap()
}

/// Message `seq`: a length that varies with `seq`, bytes derived from it.
fn payload(seq: u64) -> Vec<u8> {
    let len = 16 + (seq as usize * 37) % 3000;
    (0..len).map(|i| (seq as usize + i) as u8).collect()
}

#[test]
fn messages_arrive_in_order_and_overwrites_are_counted() {
    let n = name("order");
    let mut w = RingWriter::create(&n, &ty(), 4, 4096).unwrap();
    let mut r = RingReader::open(&n, &ty()).unwrap();
    let mut buf = Vec::new();
    for s in 0..3 {
        w.publish(&payload(s)).unwrap();
    }
    for s in 0..3 {
        let info = r.try_recv(&mut buf).unwrap().unwrap();
        assert_eq!((info.seq, info.lost), (s, 0));
        assert_eq!(buf, payload(s));
    }
    assert!(r.try_recv(&mut buf).unwrap().is_none());
    // A slow reader: 10 more into 4 slots keeps the newest 4.
    for s in 3..13 {
        w.publish(&payload(s)).unwrap();
    }
    let mut got = Vec::new();
    while let Some(info) = r.try_recv(&mut buf).unwrap() {
        assert_eq!(buf, payload(info.seq));
        got.push(info.seq);
    }
    assert_eq!(got, vec![9, 10, 11, 12]);
    assert_eq!(r.lost(), 6);
}

/// `Duration::MAX` ("wait forever") is no panic: the message there is
/// returned.
#[test]
fn a_timeout_of_duration_max_waits_without_overflowing() {
    let n = name("forever");
    let mut w = RingWriter::create(&n, &ty(), 4, 4096).unwrap();
    let mut r = RingReader::open(&n, &ty()).unwrap();
    let mut buf = Vec::new();
    w.publish(&payload(0)).unwrap();
    let info = r.recv_timeout(&mut buf, Duration::MAX).unwrap().unwrap();
    assert_eq!((info.seq, buf), (0, payload(0)));
}

#[test]
fn a_message_larger_than_a_slot_is_refused_naming_the_segment() {
    let n = name("large");
    let mut w = RingWriter::create(&n, &ty(), 2, 64).unwrap();
    match w.publish(&[0u8; 65]) {
        Err(ShmError::TooLarge {
            path,
            len: 65,
            slot_size: 64,
        }) => assert!(path.contains("large")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_type_mismatch_is_refused_naming_both_types() {
    let n = name("types");
    let _w = RingWriter::create(&n, &ty(), 2, 64).unwrap();
    let other = TypeId {
        name: "geometry_msgs/msg/Pose".into(),
        hash: 7,
    };
    let err = RingReader::open(&n, &other).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("test_msgs/msg/Blob") && text.contains("geometry_msgs/msg/Pose"),
        "{text}"
    );
}

#[test]
fn segments_are_owner_only_and_removed_with_their_writer() {
    let n = name("perms");
    let w = RingWriter::create(&n, &ty(), 2, 64).unwrap();
    let mode = std::fs::metadata(n.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    drop(w);
    assert!(!n.path().exists());
}

#[test]
fn invalid_names_are_refused() {
    for bad in ["", "a/b", "../x", "sp ace", ".hidden"] {
        assert!(
            matches!(SegmentName::new(DOMAIN, bad), Err(ShmError::InvalidName(_))),
            "{bad}"
        );
    }
}

#[test]
fn a_corrupt_slot_length_is_reported_and_skipped_not_read() {
    let n = name("corrupt");
    let mut w = RingWriter::create(&n, &ty(), 4, 256).unwrap();
    let mut r = RingReader::open(&n, &ty()).unwrap();
    w.publish(&payload(10)[..100]).unwrap();
    w.publish(&payload(11)[..100]).unwrap();
    // Write a huge length into slot 0 (header 256 bytes, slot header 16:
    // stamp then length) behind the writer's back.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(n.path())
        .unwrap();
    f.write_all_at(&u32::MAX.to_ne_bytes(), 256 + 8).unwrap();
    let mut buf = Vec::new();
    match r.try_recv(&mut buf) {
        Err(ShmError::Corrupt {
            what: "slot length",
            value,
            limit: 256,
            ..
        }) => assert_eq!(value, u64::from(u32::MAX)),
        other => panic!("expected a corrupt length, got {other:?}"),
    }
    // The next message is intact and still delivered.
    let info = r.try_recv(&mut buf).unwrap().unwrap();
    assert_eq!(info.seq, 1);
    assert_eq!(buf, payload(11)[..100]);
    assert_eq!(r.lost(), 1);
}

#[test]
fn a_damaged_header_is_refused() {
    let n = name("header");
    let _w = RingWriter::create(&n, &ty(), 4, 256).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(n.path())
        .unwrap();
    f.write_all_at(&3u32.to_ne_bytes(), 28).unwrap(); // slot count: not a power of two
    assert!(matches!(
        RingReader::open(&n, &ty()),
        Err(ShmError::BadHeader { .. })
    ));
}

#[test]
fn a_reader_that_never_reads_never_blocks_the_writer() {
    let n = name("stuck");
    let mut w = RingWriter::create(&n, &ty(), 16, 64).unwrap();
    let _idle = RingReader::open(&n, &ty()).unwrap();
    for s in 0..100_000u64 {
        w.publish(&s.to_ne_bytes()).unwrap();
    }
}

// ---- across processes -----------------------------------------------------

/// Child roles, selected by environment (the test binary runs itself).
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let seg = std::env::var("MYELIN_SHM_TEST_SEG").unwrap();
    let n = SegmentName::new(DOMAIN, &seg).unwrap();
    let mut w = RingWriter::create(&n, &ty(), 4096, 4096).unwrap();
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap(); // "go"
    let count: u64 = line.trim().parse().unwrap();
    for s in 0..count {
        w.publish(&payload(s)).unwrap();
        if role == "slow" && s % 100 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    println!("done");
    // Keep the segment alive until the parent closes stdin (or kills us).
    let _ = std::io::stdin().read_line(&mut line);
    drop(w);
}

fn spawn_writer(role: &str, seg: &str) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env("MYELIN_SHM_TEST_SEG", seg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "writer exited early");
        if line.contains("ready") {
            break;
        }
    }
    (child, out)
}

/// Kill a child at the end of a test even if the test fails.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_subscriber_process_receives_every_message_of_a_publisher_process_woken_by_futex() {
    let seg = format!("xproc_{}", std::process::id());
    let (child, _out) = spawn_writer("slow", &seg);
    let mut child = Reap(child);
    let n = SegmentName::new(DOMAIN, &seg).unwrap();
    let mut r = RingReader::open(&n, &ty()).unwrap();
    writeln!(child.0.stdin.as_mut().unwrap(), "2000").unwrap();
    let mut buf = Vec::new();
    let mut next = 0u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while next < 2000 && Instant::now() < deadline {
        // Blocks in the kernel until the other process publishes.
        if let Some(info) = r.recv_timeout(&mut buf, Duration::from_secs(10)).unwrap() {
            assert_eq!(info.seq, next, "in order");
            assert_eq!(buf, payload(info.seq), "intact");
            next += 1;
        }
    }
    assert_eq!(next, 2000);
    assert_eq!(r.lost(), 0);
    drop(child.0.stdin.take()); // let it exit
    assert!(child.0.wait().unwrap().success());
}

#[test]
fn a_killed_publisher_process_is_cleaned_up_and_its_reader_survives() {
    let seg = format!("killed_{}", std::process::id());
    let (child, mut out) = spawn_writer("fast", &seg);
    let mut child = Reap(child);
    let n = SegmentName::new(DOMAIN, &seg).unwrap();
    let mut r = RingReader::open(&n, &ty()).unwrap().from_oldest();
    writeln!(child.0.stdin.as_mut().unwrap(), "100").unwrap();
    let mut line = String::new();
    while !line.contains("done") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0);
    }
    // kill -9 the publisher.
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGKILL) }, 0);
    child.0.wait().unwrap();
    assert!(
        n.path().exists(),
        "a killed writer cannot remove its segment"
    );
    // The reader still has its mapping: the messages published before the
    // kill are all there, then nothing more (no hang: a timeout).
    let mut buf = Vec::new();
    let mut got = 0;
    while r.try_recv(&mut buf).unwrap().is_some() {
        got += 1;
    }
    assert_eq!(got, 100);
    assert!(
        r.recv_timeout(&mut buf, Duration::from_millis(50))
            .unwrap()
            .is_none()
    );
    // The stale segment of the dead process is removed by the cleanup.
    let removed = cleanup_stale(DOMAIN).unwrap();
    assert!(removed.contains(&n.path()), "{removed:?}");
    assert!(!n.path().exists());
}
