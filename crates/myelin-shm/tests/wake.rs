//! Wake-up tables across the process boundary: a remote signal names the
//! ready lane, so a waiter drains only the inboxes behind the lanes marked.
//! The "remote" side opens this process's own table by pid, exactly as
//! another process does.

use std::sync::{Arc, OnceLock};

use myelin_shm::wake::{WAKE_LANES, WAKE_SLOTS, WakeTable, wake_word};

/// This process's table: one per process (its name is the pid and a tag), shared by
/// the tests as executors in one process share it.
fn table() -> &'static Arc<WakeTable> {
    static T: OnceLock<Arc<WakeTable>> = OnceLock::new();
    T.get_or_init(|| WakeTable::create().unwrap())
}

#[test]
fn a_signal_marks_exactly_the_lanes_it_names() {
    let table = table();
    let slot = table.alloc().unwrap();
    let remote = WakeTable::open(std::process::id(), table.tag()).unwrap();
    assert_eq!(slot.take_lanes(), None, "nothing signalled yet");

    remote.signal(wake_word(slot.index(), 5)).unwrap();
    remote.signal(wake_word(slot.index(), 300)).unwrap();
    remote.signal(wake_word(slot.index(), 5)).unwrap();
    let lanes = slot.take_lanes().expect("signalled");
    assert_eq!(lanes.iter().collect::<Vec<_>>(), vec![5, 300]);

    // Taking clears both the pending mark and the lanes.
    assert_eq!(slot.take_lanes(), None);
    assert!(!slot.is_pending());
}

#[test]
fn lanes_past_the_bitmap_wrap_and_slots_past_the_table_are_refused() {
    let table = table();
    let slot = table.alloc().unwrap();
    let remote = WakeTable::open(std::process::id(), table.tag()).unwrap();

    // A hostile or stale word: the lane wraps (a spurious drain at worst).
    remote.signal(slot.index() | (0xffff << 16)).unwrap();
    let lanes: Vec<u32> = slot.take_lanes().unwrap().iter().collect();
    assert_eq!(lanes, vec![0xffff % WAKE_LANES]);

    // A slot outside the table is an error, and marks nothing.
    assert!(remote.signal(WAKE_SLOTS).is_err());
    assert!(remote.signal(0xffff).is_err());
    assert_eq!(slot.take_lanes(), None);
}

#[test]
fn slots_do_not_see_each_others_lanes() {
    let table = table();
    let a = table.alloc().unwrap();
    let b = table.alloc().unwrap();
    let remote = WakeTable::open(std::process::id(), table.tag()).unwrap();
    remote.signal(wake_word(a.index(), 7)).unwrap();
    assert_eq!(b.take_lanes(), None);
    assert_eq!(a.take_lanes().unwrap().iter().collect::<Vec<_>>(), vec![7]);
}

/// A rehearsal (a publisher warming the path) marks the lane of a waiter
/// that polls, and leaves one that sleeps asleep and unmarked; a bad word
/// is refused as a signal's is.
#[test]
fn a_rehearsal_marks_a_polling_waiter_and_leaves_a_sleeping_one_alone() {
    use myelin_sync::WaitOutcome;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let table = table();
    let slot = Arc::new(table.alloc().unwrap());
    let remote = WakeTable::open(std::process::id(), table.tag()).unwrap();

    // Nobody sleeps: marked, and nobody is woken (there is nobody).
    assert!(remote.rehearse(wake_word(slot.index(), 9)).unwrap());
    assert_eq!(
        slot.take_lanes().unwrap().iter().collect::<Vec<_>>(),
        vec![9]
    );

    // A thread asleep on the slot's event, until a deadline well ahead.
    let asleep = Arc::new(AtomicBool::new(false));
    let sleeper = std::thread::spawn({
        let (slot, asleep) = (slot.clone(), asleep.clone());
        move || {
            let deadline = Instant::now() + Duration::from_millis(300);
            slot.event().wait_while(
                || {
                    asleep.store(true, Ordering::SeqCst);
                    !slot.is_pending()
                },
                Some(deadline),
            )
        }
    });
    while !(asleep.load(Ordering::SeqCst) && slot.event().has_waiters()) {
        std::thread::yield_now();
    }
    let epoch = slot.event().epoch();
    assert!(!remote.rehearse(wake_word(slot.index(), 9)).unwrap());
    assert_eq!(
        slot.event().epoch(),
        epoch,
        "a rehearsal does not wake a sleeper"
    );
    assert_eq!(sleeper.join().unwrap(), WaitOutcome::TimedOut);
    assert_eq!(slot.take_lanes(), None, "nor marks its lanes");

    assert!(remote.rehearse(WAKE_SLOTS).is_err());
    assert_eq!(slot.take_lanes(), None);
}
