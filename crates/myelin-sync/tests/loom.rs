//! loom model of the executor wake-up protocol: a producer publishes work and
//! notifies; a consumer that found nothing goes to sleep. No interleaving may
//! leave the consumer asleep with work pending (a lost wake-up): the model's
//! futex wait blocks until the word changes, so a lost wake-up spins for
//! ever and loom fails the test.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p myelin-sync --test loom --release`.
#![cfg(loom)]

use loom::sync::Arc;
use myelin_sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use myelin_sync::{Event, Scope};

#[test]
fn no_lost_wakeup_single_producer() {
    loom::model(|| {
        let event = Arc::new(Event::new(Scope::Process));
        let work = Arc::new(AtomicU32::new(0));
        let (e, w) = (event.clone(), work.clone());
        let producer = loom::thread::spawn(move || {
            w.store(1, Ordering::SeqCst);
            e.notify();
        });
        let out = event.wait_while(|| work.load(Ordering::SeqCst) == 0, None);
        assert!(out.is_ready());
        producer.join().unwrap();
    });
}

#[test]
fn no_lost_wakeup_two_producers() {
    loom::model(|| {
        let event = Arc::new(Event::new(Scope::Process));
        let work = Arc::new(AtomicU32::new(0));
        let mut handles = Vec::new();
        for _ in 0..2 {
            let (e, w) = (event.clone(), work.clone());
            handles.push(loom::thread::spawn(move || {
                w.fetch_add(1, Ordering::SeqCst);
                e.notify();
            }));
        }
        let out = event.wait_while(|| work.load(Ordering::SeqCst) < 2, None);
        assert!(out.is_ready());
        for h in handles {
            h.join().unwrap();
        }
    });
}

/// The executor's path: a push into a ring (its `SeqCst`
/// compare-and-swap is the work) announced with `notify_one_if_waiting`,
/// which skips the epoch increment when nobody waits. Two producers, one
/// consumer that sleeps until the ring holds both; it pops with `pop`
/// (several workers) or `pop_single` (one).
#[test]
fn notify_if_waiting_after_a_ring_push_loses_no_wakeup() {
    for single in [false, true] {
        loom::model(move || {
            let event = Arc::new(Event::new(Scope::Process));
            let ring = Arc::new(myelin_sync::Ring::new(2));
            let mut handles = Vec::new();
            for v in 0..2u32 {
                let (e, r) = (event.clone(), ring.clone());
                handles.push(loom::thread::spawn(move || {
                    assert!(r.push(v).is_ok());
                    e.notify_one_if_waiting();
                }));
            }
            let pop = || {
                if single {
                    // SAFETY: this thread is the ring's only consumer.
                    unsafe { ring.pop_single() }
                } else {
                    ring.pop()
                }
            };
            let mut got = 0;
            while got < 2 {
                let out = event.wait_while(|| ring.is_empty(), None);
                assert!(out.is_ready());
                while pop().is_some() {
                    got += 1;
                }
            }
            for h in handles {
                h.join().unwrap();
            }
        });
    }
}

#[test]
fn retain_cell_publishes_initialised_values() {
    use myelin_sync::RetainCell;
    loom::model(|| {
        let cell = Arc::new(RetainCell::<std::sync::Arc<u32>>::new());
        let c = cell.clone();
        let writer = loom::thread::spawn(move || {
            c.set(Some(std::sync::Arc::new(std::sync::Arc::new(7))));
        });
        if let Some(v) = cell.get() {
            assert_eq!(**v, 7);
        }
        if let Some(a) = cell.get_arc() {
            assert_eq!(**a, 7);
        }
        writer.join().unwrap();
        assert_eq!(**cell.get().unwrap(), 7);
    });
}

#[test]
fn try_lock_admits_one_holder() {
    use myelin_sync::TryLock;
    loom::model(|| {
        let lock = Arc::new(TryLock::new(0u32));
        let holders = Arc::new(AtomicU32::new(0));
        let mut hs = Vec::new();
        for _ in 0..2 {
            let (l, h) = (lock.clone(), holders.clone());
            hs.push(loom::thread::spawn(move || {
                if let Some(mut g) = l.try_lock() {
                    assert_eq!(h.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                    *g += 1;
                    h.fetch_sub(1, Ordering::SeqCst);
                }
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
    });
}

/// A run on `lock` the way a subscription's execute makes it on the
/// executor `token` (slot `slot`): bound if bound to it, else the lock
/// path. Inside, the value (a loom cell: loom reports two threads inside
/// at once, or one not ordered after the last) counts the runs.
fn solo_run(lock: &myelin_sync::SoloLock<u32>, token: usize, slot: &AtomicUsize) -> bool {
    // SAFETY: each model gives every token one thread, and every slot one
    // token.
    unsafe { lock.run(Some((token, slot)), |n| *n += 1) }.is_some()
}

/// After every thread is done the lock is free (no hand-over left
/// pending), unbound or bound, and counts every run that entered.
fn solo_settled(
    lock: &myelin_sync::SoloLock<u32>,
    entered: u32,
    bound_to: usize,
    slot: &AtomicUsize,
) {
    let n = if bound_to == 0 {
        lock.try_with(|n| *n)
    } else {
        // SAFETY: the model's threads are done: this is the only runner.
        unsafe { lock.run(Some((bound_to, slot)), |n| *n) }
    };
    assert_eq!(
        n,
        Some(entered),
        "the lock is left held, or a run was lost: {lock:?}"
    );
}

/// A subscription moved from a single-threaded executor (token 2) to
/// another executor while the old one runs it: the move's unbind never
/// waits, the old run and the new executor's (lock path) are never inside
/// at once, and the lock ends free.
#[test]
fn solo_lock_unbind_races_a_bound_run() {
    use myelin_sync::SoloLock;
    loom::model(|| {
        let lock = Arc::new(SoloLock::new(0u32));
        let slot = Arc::new(AtomicUsize::new(0));
        assert!(lock.bind(2));
        let (l, s) = (lock.clone(), slot.clone());
        let old = loom::thread::spawn(move || solo_run(&l, 2, &s) as u32);
        lock.unbind(|_| slot.load(Ordering::Acquire));
        let new = lock.try_with(|n| *n += 1).is_some() as u32;
        let entered = old.join().unwrap() + new;
        solo_settled(&lock, entered, 0, &slot);
    });
}

/// The move binds the subscription to its new single-threaded executor
/// (token 4, its own slot) while the old one (token 2) still runs stale
/// entries of it: a stale run finds the binding gone and tries the lock
/// path, which refuses while bound to the new runner.
#[test]
fn solo_lock_rebind_keeps_a_stale_run_out() {
    use myelin_sync::SoloLock;
    loom::model(|| {
        let lock = Arc::new(SoloLock::new(0u32));
        let (slot1, slot2) = (Arc::new(AtomicUsize::new(0)), AtomicUsize::new(0));
        assert!(lock.bind(2));
        let (l, s) = (lock.clone(), slot1.clone());
        let old =
            loom::thread::spawn(move || solo_run(&l, 2, &s) as u32 + solo_run(&l, 2, &s) as u32);
        lock.unbind(|_| slot1.load(Ordering::Acquire));
        let bound = lock.bind(4);
        let new = solo_run(&lock, 4, &slot2) as u32;
        let entered = old.join().unwrap() + new;
        solo_settled(&lock, entered, if bound { 4 } else { 0 }, &slot2);
    });
}

/// A subscription bound to its new single-threaded executor (token 2)
/// while a worker of a multi-threaded one it left still runs it on the
/// lock path: the bind waits for nothing, and never lets the two in at
/// once.
#[test]
fn solo_lock_bind_races_the_lock_path() {
    use myelin_sync::SoloLock;
    loom::model(|| {
        let lock = Arc::new(SoloLock::new(0u32));
        let slot = AtomicUsize::new(0);
        let l = lock.clone();
        let worker = loom::thread::spawn(move || l.try_with(|n| *n += 1).is_some() as u32);
        let bound = lock.bind(2);
        let new = solo_run(&lock, 2, &slot) as u32;
        let entered = worker.join().unwrap() + new;
        solo_settled(&lock, entered, if bound { 2 } else { 0 }, &slot);
    });
}

/// The "queued" protocol of myelin-core's services, event handlers (and
/// subscriptions before their reserved reference, modelled below):
/// producers push then `swap(queued, true)` and enqueue the subscription only
/// if it was false; the executor takes the entry, handles one message,
/// clears `queued` with a `swap(false)` and re-enqueues if the
/// buffer is not empty. No message may be left behind with nobody queued.
///
/// The buffer is modelled by its length with SeqCst operations, as the real
/// one (crossbeam's queues push with a SeqCst CAS on the tail; `is_empty`
/// loads with SeqCst). This model found that clearing with a plain
/// `store(false)` lets loom produce an execution where a message is left
/// with the flag set and nobody queued; with the clear as an RMW
/// (`swap(false)`, the same `xchg` on x86) no execution loses one, and the
/// executors use `swap(false)`. Without the fence after it the model also
/// passes, even with unbounded preemptions, and the executors have no
/// fence there since 2026-11-29 (one locked instruction, ~5 ns, per
/// callback): correctness rests on the buffers' `is_empty` loading with
/// SeqCst (`Ring`'s own; crossbeam's `SegQueue`'s, an implementation
/// detail of the pinned version). (A `store(false)` followed by a SeqCst
/// fence is also correct under C++20's rules for SeqCst operations and
/// fences, but loom treats SeqCst loads and stores as AcqRel (loom issue
/// #180), so it cannot show that and reports the store as a loss.)
#[test]
fn queued_flag_protocol_loses_no_message() {
    use myelin_sync::atomic::AtomicBool;

    fn run_entry(buffer: &AtomicU32, queued: &AtomicBool, ready: &AtomicU32, handled: &AtomicU32) {
        // Handle one message.
        if buffer
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            handled.fetch_add(1, Ordering::SeqCst);
        }
        // Clear, re-check (subscription.rs `execute` + `kick`).
        queued.swap(false, Ordering::SeqCst);
        if buffer.load(Ordering::SeqCst) > 0 && !queued.swap(true, Ordering::SeqCst) {
            ready.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn take(ready: &AtomicU32) -> bool {
        ready
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    loom::model(|| {
        let buffer = Arc::new(AtomicU32::new(0)); // messages buffered
        let queued = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicU32::new(0)); // entries in the ready queue
        let handled = Arc::new(AtomicU32::new(0));

        let (b, q, r) = (buffer.clone(), queued.clone(), ready.clone());
        let producer = loom::thread::spawn(move || {
            for _ in 0..2 {
                b.fetch_add(1, Ordering::SeqCst); // push
                if !q.swap(true, Ordering::SeqCst) {
                    r.fetch_add(1, Ordering::SeqCst); // enqueue
                }
            }
        });
        // Run entries while the producer works.
        for _ in 0..3 {
            if take(&ready) {
                run_entry(&buffer, &queued, &ready, &handled);
            } else {
                loom::thread::yield_now();
            }
        }
        producer.join().unwrap();
        // Then drain: every remaining message must be reachable from a
        // ready entry.
        while take(&ready) {
            run_entry(&buffer, &queued, &ready, &handled);
        }
        assert_eq!(
            handled.load(Ordering::SeqCst),
            2,
            "a message was left with nobody queued"
        );
        assert_eq!(buffer.load(Ordering::SeqCst), 0);
    });
}

/// The subscription's mark and reserved reference (myelin-core's
/// `subscription::inner::mark`, `SubInner::{queue, finish, claim,
/// unclaim, reset_mark, close}`), modelled on the same state word: a
/// publisher pushes, then queues (`IDLE` -> `MARK | RES`, moving the
/// reserved reference into the entry) or marks `DIRTY`; a run handles a
/// message, clears `DIRTY` and looks at the buffer, queues itself again
/// while messages wait, else clears the mark (handing the reference back
/// from `MARK | RES`, else dropping it). A busy-polling worker claims
/// (`IDLE` -> `MARK`) with a reference of its own; an attach resets the
/// mark (minting a reference if the entry held the reserved one).
///
/// In every interleaving: no message is left with nobody queued, no
/// reference is dropped that nobody owned (the count never goes below
/// zero), and once every entry has run, the references left are exactly
/// the one the subscription holds (so `close` giving it back frees the
/// subscription: none leaks).
mod reserved_mark {
    use super::*;
    use loom::sync::atomic::{AtomicI32, AtomicU8};

    const IDLE: u8 = 0;
    const MARK: u8 = 1;
    const RES: u8 = 2;
    const DIRTY: u8 = 4;

    /// A subscription: its buffer's length, its state, the entries in its
    /// executor's ready queue, and the references the protocol moves (the
    /// reserved one, the entries', a claimer's).
    pub struct Sub {
        buffer: AtomicU32,
        state: AtomicU8,
        ready: AtomicU32,
        refs: AtomicI32,
        handled: AtomicU32,
    }

    impl Sub {
        pub fn new() -> Sub {
            Sub {
                buffer: AtomicU32::new(0),
                state: AtomicU8::new(IDLE),
                ready: AtomicU32::new(0),
                // The reserved reference, in the subscription's hand.
                refs: AtomicI32::new(1),
                handled: AtomicU32::new(0),
            }
        }

        fn drop_ref(&self) {
            let before = self.refs.fetch_sub(1, Ordering::SeqCst);
            assert!(before > 0, "a reference nobody owned was dropped");
        }

        /// `Publisher::publish` into this subscription: push, `queue`.
        pub fn publish(&self) {
            self.buffer.fetch_add(1, Ordering::SeqCst);
            self.queue();
        }

        /// `SubInner::queue`: queue with the reserved reference, or mark
        /// `DIRTY`.
        fn queue(&self) {
            let mut s = self.state.load(Ordering::Relaxed);
            loop {
                let next = if s == IDLE { MARK | RES } else { s | DIRTY };
                match self
                    .state
                    .compare_exchange_weak(s, next, Ordering::SeqCst, Ordering::Relaxed)
                {
                    Ok(_) => break,
                    Err(now) => s = now,
                }
            }
            if s == IDLE {
                // The reserved reference goes into the entry.
                self.ready.fetch_add(1, Ordering::SeqCst);
            }
        }

        /// An executor's turn: take an entry if one is ready and run it.
        pub fn run_one(&self) -> bool {
            if self
                .ready
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_err()
            {
                return false;
            }
            self.execute();
            true
        }

        /// `execute`: one message, then `finish` with the entry's
        /// reference.
        fn execute(&self) {
            if self
                .buffer
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                self.handled.fetch_add(1, Ordering::SeqCst);
            }
            self.finish();
        }

        /// `SubInner::finish`, holding one reference.
        fn finish(&self) {
            let mut s = self.state.load(Ordering::Relaxed);
            loop {
                if s & MARK == 0 {
                    return self.drop_ref();
                }
                if s & DIRTY != 0 {
                    let clean = s & !DIRTY;
                    match self
                        .state
                        .compare_exchange(s, clean, Ordering::SeqCst, Ordering::Relaxed)
                    {
                        Ok(_) => s = clean,
                        Err(now) => {
                            s = now;
                            continue;
                        }
                    }
                }
                if self.buffer.load(Ordering::SeqCst) > 0 {
                    // Queued again, still marked, with this reference.
                    self.ready.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                match self
                    .state
                    .compare_exchange(s, IDLE, Ordering::SeqCst, Ordering::Relaxed)
                {
                    Ok(_) => {
                        if s & RES == 0 {
                            self.drop_ref();
                        }
                        return;
                    }
                    Err(now) => s = now,
                }
            }
        }

        /// A busy-polling worker's `claim` (with a reference of its own,
        /// cloned from the executor's polled list) and run, or `unclaim`.
        pub fn claim_and_run(&self, run: bool) {
            if self.buffer.load(Ordering::SeqCst) == 0
                || self
                    .state
                    .compare_exchange(IDLE, MARK, Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
            {
                return;
            }
            self.refs.fetch_add(1, Ordering::SeqCst);
            if run {
                return self.execute();
            }
            // `unclaim`: hand a claim's mark back, then `kick`.
            let mut s = self.state.load(Ordering::Relaxed);
            while s & MARK != 0 && s & RES == 0 {
                match self
                    .state
                    .compare_exchange(s, IDLE, Ordering::SeqCst, Ordering::Relaxed)
                {
                    Ok(_) => break,
                    Err(now) => s = now,
                }
            }
            self.kick();
            self.drop_ref();
        }

        /// `SubInner::kick`: queue if the buffer holds messages.
        fn kick(&self) {
            if self.buffer.load(Ordering::SeqCst) > 0 {
                self.queue();
            }
        }

        /// `attach` to the same executor again: `reset_mark`, then `kick`.
        pub fn reattach(&self) {
            let mut s = self.state.load(Ordering::Relaxed);
            while s != IDLE {
                match self
                    .state
                    .compare_exchange(s, IDLE, Ordering::SeqCst, Ordering::Relaxed)
                {
                    Ok(_) => {
                        if s & RES != 0 {
                            // A new reserved reference for the subscription.
                            self.refs.fetch_add(1, Ordering::SeqCst);
                        }
                        break;
                    }
                    Err(now) => s = now,
                }
            }
            self.kick();
        }

        /// Run what is left, then check: every message handled, and the
        /// one reference left is the subscription's own.
        pub fn drain_and_check(&self, messages: u32) {
            while self.run_one() {}
            assert_eq!(
                self.handled.load(Ordering::SeqCst),
                messages,
                "a message was left with nobody queued"
            );
            let s = self.state.load(Ordering::SeqCst);
            assert_eq!(s, IDLE, "marked with no entry left");
            assert_eq!(
                self.refs.load(Ordering::SeqCst),
                1,
                "references left besides the reserved one (a leak) or missing"
            );
        }
    }

    /// A subscription, and a thread publishing two messages into it.
    pub fn with_producer() -> (Arc<Sub>, loom::thread::JoinHandle<()>) {
        let sub = Arc::new(Sub::new());
        let p = sub.clone();
        let producer = loom::thread::spawn(move || {
            p.publish();
            p.publish();
        });
        (sub, producer)
    }
}

#[test]
fn reserved_mark_protocol_loses_no_message_and_no_reference() {
    loom::model(|| {
        let (sub, producer) = reserved_mark::with_producer();
        for _ in 0..3 {
            if !sub.run_one() {
                loom::thread::yield_now();
            }
        }
        producer.join().unwrap();
        sub.drain_and_check(2);
    });
}

#[test]
fn reserved_mark_survives_a_reattach_and_a_claim() {
    loom::model(|| {
        let (sub, producer) = reserved_mark::with_producer();
        let a = sub.clone();
        // An attach (its stale entry, if any, stays queued) racing both.
        let attacher = loom::thread::spawn(move || a.reattach());
        sub.run_one();
        sub.claim_and_run(true);
        producer.join().unwrap();
        attacher.join().unwrap();
        sub.drain_and_check(2);
    });
}

#[test]
fn reserved_mark_unclaim_hands_the_claim_back() {
    loom::model(|| {
        let (sub, producer) = reserved_mark::with_producer();
        sub.claim_and_run(false);
        sub.run_one();
        producer.join().unwrap();
        sub.drain_and_check(2);
    });
}

/// The hand-off of a leaving publisher's chunk pools to the readers still
/// behind (`myelin_shm::pool::PoolWriter::hand_off`,
/// `inbox::InboxWriter::hand_off`, `Inbox::leave` / `take_owed`,
/// `pool::release_handed_off`), modelled on process-local atomics (the
/// real words live in shared memory): the publisher counts two readers as
/// holders, then flags each connection and takes back the share of a
/// reader already gone; each reader marks itself gone, then takes its
/// flag and releases. In every interleaving the file is removed exactly
/// once, after every share was given back. Every access to the two words
/// is a read-modify-write (AcqRel), so that whichever side comes second
/// reads what the first wrote: with a plain store and load on each side
/// (SeqCst, which loom models as AcqRel; also with SeqCst fences between)
/// loom finds the interleaving where both miss each other and nobody
/// removes the file.
#[test]
fn pool_hand_off_removes_the_file_exactly_once() {
    use myelin_sync::atomic::AtomicU64;

    /// The checked decrement both sides use; true if it gave back the
    /// last share (the caller removes the file).
    fn release(holders: &AtomicU32, n: u32) -> bool {
        let before = holders
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                Some(c.saturating_sub(n))
            })
            .unwrap_or(0);
        before != 0 && before <= n
    }

    loom::model(|| {
        let holders = Arc::new(AtomicU32::new(0));
        let owes: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let gone: Arc<[AtomicU32; 2]> = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
        let removed = Arc::new(AtomicU32::new(0));
        let mut readers = Vec::new();
        for r in 0..2 {
            let (holders, owes, gone, removed) =
                (holders.clone(), owes.clone(), gone.clone(), removed.clone());
            readers.push(loom::thread::spawn(move || {
                // The subscription leaves.
                gone[r].swap(1, Ordering::AcqRel);
                if owes[r].swap(0, Ordering::AcqRel) != 0 && release(&holders, 1) {
                    removed.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        // The publisher leaves with both readers behind.
        holders.store(2, Ordering::Relaxed);
        let mut back = 0;
        for r in 0..2 {
            owes[r].swap(1, Ordering::AcqRel);
            if gone[r].fetch_or(0, Ordering::AcqRel) != 0 && owes[r].swap(0, Ordering::AcqRel) != 0
            {
                back += 1;
            }
        }
        if back > 0 && release(&holders, back) {
            removed.fetch_add(1, Ordering::SeqCst);
        }
        for h in readers {
            h.join().unwrap();
        }
        assert_eq!(
            removed.load(Ordering::SeqCst),
            1,
            "removed exactly once (back {back}, holders {})",
            holders.load(Ordering::SeqCst)
        );
        assert_eq!(holders.load(Ordering::SeqCst), 0, "every share given back");
    });
}

/// A push racing a pop on a ring of two slots: the pop gets the value or
/// nothing, never a torn or stale one, and the ring ends consistent.
#[test]
fn ring_push_and_pop_race_on_a_wrapped_ring() {
    use myelin_sync::Ring;
    loom::model(|| {
        let ring = Arc::new(Ring::new(2));
        // Wrap the positions once so slots are reused.
        for v in [10, 11] {
            ring.push(v).unwrap();
            assert_eq!(ring.pop(), Some(v));
        }
        let (w, r) = (ring.clone(), ring.clone());
        let producer = loom::thread::spawn(move || {
            w.push(1).unwrap();
            w.push(2).unwrap();
        });
        let consumer = loom::thread::spawn(move || r.pop());
        producer.join().unwrap();
        let first = consumer.join().unwrap();
        let rest: Vec<u32> = std::iter::from_fn(|| ring.pop()).collect();
        match first {
            Some(1) => assert_eq!(rest, [2]),
            None => assert_eq!(rest, [1, 2]),
            other => panic!("popped {other:?}"),
        }
        assert!(ring.is_empty());
    });
}

/// [`Ring::pop_single`] (the head moved by a plain store) against two
/// producers on a wrapped ring of two slots: every value comes out once,
/// each producer's in order, and no slot is written while it is read
/// (loom's cell would report it).
#[test]
fn single_consumer_pops_race_two_producers_on_a_wrapped_ring() {
    use myelin_sync::Ring;
    loom::model(|| {
        let ring = Arc::new(Ring::new(2));
        for v in [10, 11] {
            ring.push(v).unwrap();
            // SAFETY: this thread is the only consumer, here and below.
            assert_eq!(unsafe { ring.pop_single() }, Some(v));
        }
        let producers: Vec<_> = [1u32, 3]
            .into_iter()
            .map(|first| {
                let w = ring.clone();
                loom::thread::spawn(move || {
                    // Refused only while the ring is full (or looks it).
                    let a = w.push(first).is_ok();
                    let b = w.push(first + 1).is_ok();
                    (a, b)
                })
            })
            .collect();
        let mut got = Vec::new();
        // SAFETY: as above.
        if let Some(v) = unsafe { ring.pop_single() } {
            got.push(v);
        }
        let pushed: Vec<(bool, bool)> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        // SAFETY: as above.
        while let Some(v) = unsafe { ring.pop_single() } {
            got.push(v);
        }
        let mut want: Vec<u32> = Vec::new();
        for (first, (a, b)) in [1u32, 3].into_iter().zip(&pushed) {
            if *a {
                want.push(first);
            }
            if *b {
                want.push(first + 1);
            }
        }
        let mut sorted = got.clone();
        sorted.sort_unstable();
        want.sort_unstable();
        assert_eq!(sorted, want, "each pushed value popped once");
        for first in [1u32, 3] {
            let mine: Vec<u32> = got
                .iter()
                .copied()
                .filter(|v| (first..=first + 1).contains(v))
                .collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "in order: {got:?}");
        }
        assert!(ring.is_empty());
    });
}

/// A full ring: a push that needs the slot a pop is still reading waits
/// for the read to finish (no write into a slot being read, which loom's
/// cell would report), and is not refused as full once the pop has
/// claimed the oldest value. The pop is `pop` (several consumers) or
/// `pop_single` (one).
#[test]
fn ring_push_waits_for_the_pop_reading_its_slot() {
    use myelin_sync::Ring;
    for single in [false, true] {
        loom::model(move || {
            let ring = Arc::new(Ring::new(2));
            ring.push(1).unwrap();
            ring.push(2).unwrap();
            let (r, w) = (ring.clone(), ring.clone());
            // The consumer thread, then (after the join) this one: one
            // consumer at a time, as `pop_single` requires.
            let pop = move |r: &Ring<u32>| {
                if single {
                    // SAFETY: one consumer at a time (see above).
                    unsafe { r.pop_single() }
                } else {
                    r.pop()
                }
            };
            let consumer = loom::thread::spawn(move || pop(&r));
            let producer = loom::thread::spawn(move || w.push(3));
            let popped = consumer.join().unwrap();
            let pushed = producer.join().unwrap();
            assert_eq!(popped, Some(1));
            let rest: Vec<u32> = std::iter::from_fn(|| pop(&ring)).collect();
            match pushed {
                Ok(()) => assert_eq!(rest, [2, 3]),
                Err(3) => assert_eq!(rest, [2], "refused only while full"),
                Err(v) => panic!("gave back {v}"),
            }
        });
    }
}

#[test]
fn ring_overwrite_races_a_pop() {
    use myelin_sync::Ring;
    loom::model(|| {
        let ring = Arc::new(Ring::new(1));
        ring.push(9).unwrap();
        let (w, r) = (ring.clone(), ring.clone());
        let producer = loom::thread::spawn(move || w.force_push(1));
        let consumer = loom::thread::spawn(move || r.pop());
        let dropped = producer.join().unwrap();
        let popped = consumer.join().unwrap();
        let rest = ring.pop();
        // 9 went one way (popped or dropped); 1 is still there or popped.
        assert_eq!(
            dropped + popped.is_some() as usize + rest.is_some() as usize,
            2
        );
        assert!(popped.is_some() || rest == Some(1));
        assert!(ring.pop().is_none());
    });
}

/// Two overwriting pushes race on a keep_last(1) ring: one value is kept,
/// the other counted as dropped.
#[test]
fn ring_two_overwrites_race() {
    use myelin_sync::Ring;
    loom::model(|| {
        let ring = Arc::new(Ring::new(1));
        let (w, v) = (ring.clone(), ring.clone());
        let p = loom::thread::spawn(move || w.force_push(1));
        let q = loom::thread::spawn(move || v.force_push(2));
        let dropped = p.join().unwrap() + q.join().unwrap();
        assert_eq!(dropped, 1);
        assert!(matches!(ring.pop(), Some(1 | 2)));
        assert!(ring.pop().is_none());
    });
}

/// A ring with room never refuses a push, even to a producer whose view
/// of the tail went stale while another pushed and a consumer popped
/// (the head then past the tail it read).
#[test]
fn ring_with_room_takes_every_push() {
    use myelin_sync::Ring;
    loom::model(|| {
        let ring = Arc::new(Ring::new(2));
        let (a, b, c) = (ring.clone(), ring.clone(), ring.clone());
        let p1 = loom::thread::spawn(move || a.push(1).is_ok());
        let p2 = loom::thread::spawn(move || b.push(2).is_ok());
        let consumer = loom::thread::spawn(move || c.pop());
        assert!(p1.join().unwrap(), "push 1 refused with room");
        assert!(p2.join().unwrap(), "push 2 refused with room");
        let _ = consumer.join().unwrap();
    });
}

/// An overwrite drops the oldest only while the ring is full: once a
/// consumer has made room, the overwrite keeps what is there.
#[test]
fn ring_overwrite_drops_only_from_a_full_ring() {
    use myelin_sync::Ring;
    loom::model(|| {
        let ring = Arc::new(Ring::new(2));
        ring.push(1).unwrap();
        ring.push(2).unwrap();
        let (w, r) = (ring.clone(), ring.clone());
        let producer = loom::thread::spawn(move || w.force_push(3));
        let consumer = loom::thread::spawn(move || r.pop());
        let dropped = producer.join().unwrap();
        let popped = consumer.join().unwrap();
        if popped == Some(1) {
            // 1 left by the consumer's hand, so the ring had room for 3
            // beside 2, unless 1 was still there when the producer looked.
            let rest: Vec<u32> = std::iter::from_fn(|| ring.pop()).collect();
            assert_eq!(dropped + rest.len(), 2, "{rest:?}");
            assert_eq!(rest.last(), Some(&3));
            if dropped == 1 {
                panic!("2 dropped after the consumer made room: {rest:?}");
            }
        }
    });
}

/// A value with an index that marks, when dropped, its slot in a shared
/// array: a reader that finds its value marked used it after its drop.
struct Marked {
    id: usize,
    dropped: Arc<[myelin_sync::atomic::AtomicBool; 3]>,
}

impl Drop for Marked {
    fn drop(&mut self) {
        self.dropped[self.id].store(true, Ordering::SeqCst);
    }
}

/// `LaneCell` (a publisher's matched subscriptions): `readers` threads read
/// the value `reads` times each, each through a lane of its own (with `nested`,
/// the first read holds its lane while a second, nested, clones the
/// `Arc`), while a writer replaces it twice. No reader sees a value that
/// was dropped, and every replaced value is dropped by the time the cell
/// is. (The barriers, `membarrier` and a compiler fence outside loom, are
/// read-modify-writes of one word here; with the reader's a plain load,
/// loom finds a reader seeing a dropped value.)
fn lane_cell_model(readers: usize, reads: usize, nested: bool) {
    use myelin_sync::LaneCell;
    use myelin_sync::atomic::AtomicBool;
    loom::model(move || {
        let dropped = Arc::new([
            AtomicBool::new(false),
            AtomicBool::new(false),
            AtomicBool::new(false),
        ]);
        let value = |id| {
            std::sync::Arc::new(Marked {
                id,
                dropped: dropped.clone(),
            })
        };
        let cell = Arc::new(LaneCell::new(value(0)));
        let (c, v1, v2) = (cell.clone(), value(1), value(2));
        let writer = loom::thread::spawn(move || {
            c.store(v1);
            c.store(v2);
        });
        let check = |v: &Marked, dropped: &[AtomicBool; 3]| {
            let id = v.id;
            assert!(
                !dropped[id].load(Ordering::SeqCst),
                "value {id} dropped while a reader held it"
            );
        };
        let read = move |cell: &LaneCell<Marked>, dropped: &[AtomicBool; 3]| {
            for i in 0..reads {
                cell.with(|v| {
                    check(v, dropped);
                    if nested && i == 0 {
                        cell.with(|w| check(w, dropped));
                    }
                    check(v, dropped);
                });
            }
        };
        let others: Vec<_> = (1..readers)
            .map(|_| {
                let (c, d) = (cell.clone(), dropped.clone());
                loom::thread::spawn(move || read(&c, &d))
            })
            .collect();
        read(&cell, &dropped);
        writer.join().unwrap();
        for o in others {
            o.join().unwrap();
        }
        // The replaced values are gone once nobody reads; the last one
        // with the cell.
        drop(cell);
        for (id, d) in dropped.iter().enumerate() {
            assert!(d.load(Ordering::SeqCst), "value {id} never dropped");
        }
    });
}

#[test]
fn lane_cell_one_reader_never_sees_a_dropped_value() {
    lane_cell_model(1, 2, true);
}

#[test]
fn lane_cell_two_readers_never_see_a_dropped_value() {
    // One read each (the lane's steady state is the one-reader model's
    // second read): two reads each take minutes.
    lane_cell_model(2, 1, false);
}

/// Two threads each take an index of a two-index stack and give it back
/// while a third takes twice: no index is ever held by two threads at
/// once (the ABA case: a pop that read the top, overtaken by a pop and a
/// push of that index, must not install a stale next index), and every
/// index comes back.
#[test]
fn index_stack_never_hands_one_index_out_twice() {
    use myelin_sync::IndexStack;
    use myelin_sync::atomic::AtomicBool;
    loom::model(|| {
        let s = Arc::new(IndexStack::full(2));
        let held: Arc<[AtomicBool; 2]> = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let take = |s: &IndexStack, held: &[AtomicBool; 2]| {
            let i = s.pop()?;
            assert!(
                !held[i as usize].swap(true, Ordering::SeqCst),
                "index {i} held twice"
            );
            Some(i)
        };
        let give = |s: &IndexStack, held: &[AtomicBool; 2], i: u32| {
            held[i as usize].store(false, Ordering::SeqCst);
            s.push(i);
        };
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (s, held) = (s.clone(), held.clone());
                loom::thread::spawn(move || {
                    if let Some(i) = take(&s, &held) {
                        give(&s, &held, i);
                    }
                })
            })
            .collect();
        let (a, b) = (take(&s, &held), take(&s, &held));
        for i in [a, b].into_iter().flatten() {
            give(&s, &held, i);
        }
        for w in workers {
            w.join().unwrap();
        }
        let mut all = vec![s.pop(), s.pop(), s.pop()];
        all.sort_unstable();
        assert_eq!(all, [None, Some(0), Some(1)]);
    });
}

/// A shared-memory wake slot's signal (`myelin_shm::wake::WakeTable::signal`):
/// the publisher pushes (a Release store of the ring's head), swaps the
/// slot's `pending` flag (SeqCst) and increments the epoch only if someone
/// waits. Both kinds of waiter lose no wake-up: one whose check loads
/// `pending` (an executor, a wait set) and one whose check takes `pending`
/// and then looks at the ring itself (a polling subscription's
/// `wait_for_message`), which must then see the push. (Under loom the
/// SeqCst fences that stand in for the SeqCst order (loom #180) also
/// order the ring's own load, so the model would accept a polling check
/// that skips `pending`; in the real build only the SeqCst accesses are
/// ordered, which is why `wait_for_message` takes the flag.)
#[test]
fn wake_slot_signal_without_epoch_loses_no_wakeup() {
    use myelin_sync::SharedEvent;
    for takes in [false, true] {
        loom::model(move || {
            let event = Arc::new(SharedEvent::new());
            let pending = Arc::new(AtomicU32::new(0));
            let head = Arc::new(AtomicU32::new(0));
            let producer = {
                let (e, p, h) = (event.clone(), pending.clone(), head.clone());
                loom::thread::spawn(move || {
                    h.store(1, Ordering::Release);
                    p.swap(1, Ordering::SeqCst);
                    e.notify_if_waiting();
                })
            };
            if takes {
                let out = event.wait_while(
                    || {
                        if pending.load(Ordering::SeqCst) != 0 {
                            pending.swap(0, Ordering::SeqCst);
                        }
                        head.load(Ordering::Acquire) == 0
                    },
                    None,
                );
                assert!(out.is_ready());
            } else {
                let out = event.wait_while(|| pending.load(Ordering::SeqCst) == 0, None);
                assert!(out.is_ready());
                assert_eq!(
                    head.load(Ordering::Acquire),
                    1,
                    "signalled before the push was seen"
                );
            }
            producer.join().unwrap();
        });
    }
}

/// An inline subscription's hand-over (`SubInner::run_inline` in
/// myelin-core): each publisher pushes into the buffer, then (SeqCst
/// fence) tries the callback lock; the one that gets it drains the
/// buffer, unlocks, and (SeqCst fence) looks again, draining once more if
/// something came. A publisher that finds the lock taken returns at once:
/// the holder must see its message. Two publishers with one message each,
/// one with two, and a thread with none against one with one or two (a
/// `Publisher::warm`, which runs the path with nothing to add): every
/// message reaches the callback, none is left.
///
/// The buffer is the real [`Ring`](myelin_sync::Ring) (keep_last), and
/// also a counter with only acquire/release operations: the fences must
/// carry the hand-over even for a buffer whose operations are not SeqCst
/// (keep_all's `SegQueue` promises nothing about its orderings).
///
/// Checked by breaking it: without the holder's second look loom finds,
/// for both buffers, the message pushed while the holder drained and left
/// behind; without either fence it finds, for both buffers, the
/// store-buffering execution (the publisher's failed `try_lock` reads the
/// lock still held, the holder's look reads the buffer still empty).
#[test]
fn inline_hand_over_leaves_no_message_behind() {
    use myelin_sync::atomic::fence;
    use myelin_sync::{Ring, TryLock};

    trait Buffer: Send + Sync + 'static {
        fn push(&self);
        fn pop(&self) -> bool;
        fn is_empty(&self) -> bool;
    }
    impl Buffer for Ring<u32> {
        fn push(&self) {
            Ring::push(self, 7).expect("the ring has room");
        }
        fn pop(&self) -> bool {
            Ring::pop(self).is_some()
        }
        fn is_empty(&self) -> bool {
            Ring::is_empty(self)
        }
    }
    impl Buffer for AtomicU32 {
        fn push(&self) {
            self.fetch_add(1, Ordering::Release);
        }
        fn pop(&self) -> bool {
            self.fetch_update(Ordering::Acquire, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok()
        }
        fn is_empty(&self) -> bool {
            self.load(Ordering::Acquire) == 0
        }
    }

    /// Publish `n` messages and run the callback inline if the lock is free.
    fn publish(buffer: &impl Buffer, lock: &TryLock<u32>, n: u32) {
        for _ in 0..n {
            buffer.push();
        }
        fence(Ordering::SeqCst);
        loop {
            let Some(mut delivered) = lock.try_lock() else {
                return;
            };
            while buffer.pop() {
                *delivered += 1;
            }
            drop(delivered);
            fence(Ordering::SeqCst);
            if buffer.is_empty() {
                return;
            }
        }
    }

    fn model<B: Buffer>(new: fn() -> B) {
        for counts in [[1, 1], [2, 1], [0, 1], [0, 2]] {
            loom::model(move || {
                let buffer = Arc::new(new());
                let lock = Arc::new(TryLock::new(0u32));
                let other = {
                    let (b, l) = (buffer.clone(), lock.clone());
                    loom::thread::spawn(move || publish(&*b, &l, counts[1]))
                };
                publish(&*buffer, &lock, counts[0]);
                other.join().unwrap();
                assert!(buffer.is_empty(), "a message was left in the buffer");
                let delivered = *lock.try_lock().expect("both publishers returned");
                assert_eq!(delivered, counts[0] + counts[1]);
            });
        }
    }

    model(|| Ring::new(4));
    model(|| AtomicU32::new(0));
}

/// The bytes a lease keeps: read by every holder, rewritten by the
/// publisher once the chunk is given back.
type Chunk = Arc<Bytes>;

/// Memory that loom checks for races (its cell is not `Sync` by itself).
struct Bytes(loom::cell::UnsafeCell<u32>);

// SAFETY: every access goes through loom's cell, which fails the model on
// a race.
unsafe impl Sync for Bytes {}

/// A lease's value: giving its chunk back (the publisher rewrites it) and
/// logging its id (the first value 1, the second 10; 0 for a value a claim
/// refused, never held).
struct GiveBack(u32, Arc<AtomicU32>, Chunk);

impl Drop for GiveBack {
    fn drop(&mut self) {
        if self.0 != 0 {
            // SAFETY: loom checks this write against every holder's read.
            self.2.0.with_mut(|p| unsafe { *p += 1 });
        }
        self.1.fetch_add(self.0, Ordering::SeqCst);
    }
}

/// The lease slab (a shared-memory reader's chunk leases): two holders of
/// one slot read the chunk and drop their leases on two threads while the
/// claimer tries to claim the slot again. The chunk is given back only
/// after both reads (loom's cell fails the model otherwise, as it does when
/// the last lease's decrement does not acquire the others'), the old value
/// is dropped exactly once (possibly after the slot took the new one: the
/// release frees the slot first, as the value may own the slab), and the
/// new value's write never races the old one's take.
#[test]
fn a_lease_slot_is_claimed_again_only_after_its_last_lease() {
    loom::model(|| {
        let log = Arc::new(AtomicU32::new(0));
        let chunk: Chunk = Arc::new(Bytes(loom::cell::UnsafeCell::new(0)));
        let slab = myelin_sync::LeaseSlab::new(1);
        // SAFETY: this thread is the slab's only claimer.
        let a = unsafe { slab.claim(0, GiveBack(1, log.clone(), chunk.clone())) }
            .ok()
            .unwrap();
        let b = a.clone();
        let read = |lease: myelin_sync::Lease, chunk: Chunk| {
            move || {
                // SAFETY: loom checks this read against the give-back.
                chunk.0.with(|p| unsafe { assert_eq!(*p, 0) });
                drop(lease);
            }
        };
        let t1 = loom::thread::spawn(read(a, chunk.clone()));
        let t2 = loom::thread::spawn(read(b, chunk.clone()));
        let again = loop {
            // SAFETY: as above.
            match unsafe { slab.claim(0, GiveBack(10, log.clone(), chunk.clone())) } {
                Ok(lease) => break lease,
                Err(mut refused) => {
                    refused.0 = 0;
                    drop(refused);
                    loom::thread::yield_now();
                }
            }
        };
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(log.load(Ordering::SeqCst), 1, "the old value, once");
        drop(again);
        assert_eq!(log.load(Ordering::SeqCst), 11, "the new value, once");
    });
}

/// A single-threaded executor moved to another thread while the thread
/// that spun it before still publishes into its own queue (`Home::enter`):
/// the new thread's take waits for an enter it finds inside, and an enter
/// after the take's barrier finds it is not home. The queue (a loom cell)
/// is never touched by both at once, and nothing the old home wrote is
/// lost to the new one.
#[test]
fn home_take_waits_for_the_old_homes_enter() {
    use loom::cell::UnsafeCell;
    use myelin_sync::Home;
    loom::model(|| {
        let shared = Arc::new((Home::new(), UnsafeCell::new(0u32), AtomicU32::new(0)));
        let s = shared.clone();
        let old = loom::thread::spawn(move || {
            let (home, queue, moved) = &*s;
            assert!(home.take());
            // The executor goes to the other thread (as a move would).
            moved.store(1, Ordering::Release);
            let mut entered = 0;
            for _ in 0..2 {
                if let Some(_inside) = home.enter() {
                    // SAFETY: entered: this thread is home.
                    queue.with_mut(|q| unsafe { *q += 1 });
                    entered += 1;
                }
            }
            entered
        });
        let (home, queue, moved) = &*shared;
        while moved.load(Ordering::Acquire) == 0 {
            loom::thread::yield_now();
        }
        assert!(home.take());
        // SAFETY: this thread took home: no enter of the old one runs now.
        let seen = queue.with_mut(|q| unsafe {
            *q += 10;
            *q
        });
        let entered = old.join().unwrap();
        // Every enter that ran came before the take returned.
        assert_eq!(seen, 10 + entered);
        assert!(home.enter().is_some(), "this thread is home");
    });
}
