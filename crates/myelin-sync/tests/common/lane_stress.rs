//! Readers on several threads and a writer replacing the value under
//! them: every value read is alive, and every value is dropped exactly
//! once. Shared by `lane_membarrier.rs` and `lane_fences.rs`, one process
//! each: how the barriers are made is decided once per process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use myelin_sync::LaneCell;

/// A value that says whether it was dropped, and counts drops.
struct Value {
    id: usize,
    alive: AtomicBool,
    drops: Arc<AtomicUsize>,
}

impl Drop for Value {
    fn drop(&mut self) {
        assert!(self.alive.swap(false, Ordering::SeqCst), "dropped twice");
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

pub fn readers_never_see_a_dropped_value(readers: usize) {
    const STORES: usize = 2_000;
    let drops = Arc::new(AtomicUsize::new(0));
    let value = |id| {
        Arc::new(Value {
            id,
            alive: AtomicBool::new(true),
            drops: drops.clone(),
        })
    };
    let cell = Arc::new(LaneCell::new(value(0)));
    let done = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..readers)
        .map(|r| {
            let (cell, done) = (cell.clone(), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0usize;
                let mut last = 0;
                while !done.load(Ordering::Relaxed) || reads < 1_000 {
                    cell.with(|v| {
                        assert!(
                            v.alive.load(Ordering::SeqCst),
                            "reader {r} read a dropped value"
                        );
                        // Values only move forward for one reader.
                        assert!(v.id >= last, "reader {r} went back from {last} to {}", v.id);
                        last = v.id;
                        if reads.is_multiple_of(64) {
                            // A nested read clones instead.
                            cell.with(|w| assert!(w.alive.load(Ordering::SeqCst)));
                        }
                    });
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for id in 1..=STORES {
        cell.store(value(id));
    }
    done.store(true, Ordering::Relaxed);
    for t in threads {
        assert!(t.join().unwrap() >= 1_000);
    }
    // Every replaced value is gone once no reader holds it; the last with
    // the cell.
    assert_eq!(drops.load(Ordering::SeqCst), STORES);
    drop(cell);
    assert_eq!(drops.load(Ordering::SeqCst), STORES + 1);
}
