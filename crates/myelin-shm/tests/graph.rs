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
