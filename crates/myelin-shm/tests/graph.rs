//! The domain-wide change counter: created atomically (racing creators all
//! end up on one segment), and a half-written one left by a crash is
//! replaced instead of disabling the domain.

use std::time::{Duration, SystemTime};

use myelin_shm::SegmentName;
use myelin_shm::endpoint::GraphEvent;

#[test]
fn racing_creators_share_one_counter() {
    let domain = 226;
    let _ = std::fs::remove_file(SegmentName::new(domain, "graph").unwrap().path());
    let events: Vec<GraphEvent> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| s.spawn(move || GraphEvent::open_or_create(domain).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let before = events[0].epoch();
    events[3].bump();
    for e in &events {
        assert_eq!(e.epoch(), before.wrapping_add(1), "one shared segment");
    }
}

#[test]
fn a_half_written_counter_left_by_a_crash_is_replaced() {
    let domain = 227;
    let path = SegmentName::new(domain, "graph").unwrap().path();
    let _ = std::fs::remove_file(&path);
    // What a creator killed between sizing the file and writing its header
    // leaves behind: the right length, all zeros, no magic.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(320).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    drop(f);
    let e = GraphEvent::open_or_create(domain).unwrap();
    let again = GraphEvent::open_or_create(domain).unwrap();
    e.bump();
    assert_eq!(again.epoch(), e.epoch());
}

/// The graph file goes with the domain's last user (each GraphEvent is
/// its own open file, as each process's is), not before.
#[test]
fn the_last_user_removes_the_graph_file() {
    let domain = 218;
    let path = SegmentName::new(domain, "graph").unwrap().path();
    let _ = std::fs::remove_file(&path);
    let a = GraphEvent::open_or_create(domain).unwrap();
    let b = GraphEvent::open_or_create(domain).unwrap();
    assert!(path.exists());
    drop(a);
    assert!(path.exists(), "b still uses it");
    b.bump();
    drop(b);
    assert!(!path.exists(), "the last user removes it");
    // The next user starts a new one, and users keep meeting on it.
    let c = GraphEvent::open_or_create(domain).unwrap();
    let d = GraphEvent::open_or_create(domain).unwrap();
    c.bump();
    assert_eq!(c.epoch(), d.epoch());
}

/// `remove_unused_graphs` (what `myelin doctor --clean` runs) removes a
/// graph file nobody holds (a killed process's) and keeps one in use.
#[test]
fn an_unused_graph_file_is_removed_and_a_used_one_kept() {
    let domain = 219;
    let path = SegmentName::new(domain, "graph").unwrap().path();
    let _ = std::fs::remove_file(&path);
    let a = GraphEvent::open_or_create(domain).unwrap();
    assert!(
        myelin_shm::endpoint::remove_unused_graphs(domain)
            .unwrap()
            .is_empty()
    );
    assert!(path.exists(), "in use");
    // What a killed process leaves: the file, with nobody holding it (the
    // kernel drops a dead process's locks).
    let keep = path.with_extension("kept");
    std::fs::hard_link(&path, &keep).unwrap();
    drop(a);
    std::fs::rename(&keep, &path).unwrap();
    assert_eq!(
        myelin_shm::endpoint::remove_unused_graphs(domain).unwrap(),
        std::slice::from_ref(&path)
    );
    assert!(!path.exists());
}

/// Users coming and going at once never split a domain across two files:
/// while one user holds on, every other that comes meets it.
#[test]
fn churning_users_always_meet_the_one_that_stays() {
    let domain = 217;
    let path = SegmentName::new(domain, "graph").unwrap().path();
    let _ = std::fs::remove_file(&path);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(move || {
                for _ in 0..200 {
                    let stays = GraphEvent::open_or_create(domain).unwrap();
                    let comes = GraphEvent::open_or_create(domain).unwrap();
                    let seen = comes.epoch();
                    stays.bump();
                    assert_ne!(comes.epoch(), seen, "two users of one domain on two files");
                    drop(comes);
                    drop(stays);
                }
            });
        }
    });
    assert!(!path.exists(), "everyone left");
}
