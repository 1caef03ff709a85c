//! `LaneCell` in a program whose threads come and go: a thread that ended
//! gives its lane id to the next, so the cell's four lanes keep serving
//! readers instead of being held for ever by threads long gone (every
//! later reader then cloned the `Arc` under a mutex: two locked
//! instructions and a lock per read). A file of its own: one process, no
//! other test's threads taking the ids meanwhile.
#![cfg(not(loom))]

use std::sync::Arc;

use myelin_sync::LaneCell;

#[test]
fn threads_that_come_and_go_keep_reading_through_lanes() {
    let value = Arc::new(7u32);
    let cell = LaneCell::new(value.clone());
    // A read through a lane touches no count: `value` and the cell's own
    // (2); a read outside the lanes holds a clone for its span (3).
    let counted = || cell.with(|_| Arc::strong_count(&value));
    for round in 0..20 {
        let seen = std::thread::scope(|s| s.spawn(counted).join().unwrap());
        assert_eq!(seen, 2, "thread {round} read outside the lanes");
    }
    // Four threads alive at once hold the four lanes; a fifth clones.
    // Each claims (or not) with its first read, then all look in turn
    // (a clone's span would show in another's count).
    let barrier = std::sync::Barrier::new(5);
    let turn = std::sync::Mutex::new(());
    let seen: Vec<usize> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..5)
            .map(|_| {
                s.spawn(|| {
                    cell.with(|_| ());
                    barrier.wait();
                    let _turn = turn.lock().unwrap();
                    counted()
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [2, 2, 2, 2, 3], "{seen:?}");
}
