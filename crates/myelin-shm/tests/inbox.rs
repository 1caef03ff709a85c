//! Inboxes and pools: the descriptor protocol, keep-last overwrite by the
//! publisher, returns, and untrusted contents (a broken peer's writes are
//! reported and skipped, never followed out of bounds).

use std::os::unix::fs::FileExt;

use myelin_shm::endpoint::{EndpointInfo, EndpointKind, QOS_BYTES};
use myelin_shm::inbox::{ConnState, Desc, Inbox, InboxWriter, Popped, Pushed, Stamp};
use myelin_shm::pool::{PoolReader, PoolWriter};
use myelin_shm::{SegmentName, ShmError};
use proptest::prelude::*;

const DOMAIN: u32 = 229;

fn info(id: u64) -> EndpointInfo {
    EndpointInfo {
        kind: EndpointKind::Subscription,
        pid: std::process::id(),
        context: 1,
        id,
        topic: "/t".into(),
        type_name: "test/msg/T".into(),
        type_hash: 7,
        node: "/n".into(),
        qos: [0; QOS_BYTES],
        wake_tag: 0,
    }
}

/// An inbox and a writer connected to it. `id` names the segment: the
/// tests run at once, so each uses its own.
fn pair(id: u64, cap: u32) -> (Inbox, InboxWriter, SegmentName) {
    let inbox = Inbox::create(DOMAIN, &info(id), cap, cap * 2).unwrap();
    let name = info(id).key().segment_name(DOMAIN).unwrap();
    let w = InboxWriter::connect(&name, 99, 7)
        .unwrap()
        .expect("a free block");
    (inbox, w, name)
}

fn d(chunk: u32) -> Desc {
    Desc {
        pool: 0,
        chunk,
        len: 8,
    }
}

/// An inbox takes as many publishers as it was made for, the next is
/// told there is no room, and a header whose count does not fit the file
/// is refused.
#[test]
fn an_inbox_takes_the_publishers_it_was_made_for() {
    let id = 77;
    let inbox = Inbox::create_for(DOMAIN, &info(id), 4, 8, 3).unwrap();
    assert_eq!(inbox.connections(), 3);
    let name = info(id).key().segment_name(DOMAIN).unwrap();
    let writers: Vec<_> = (0..3)
        .map(|p| {
            InboxWriter::connect(&name, 100 + p, 7)
                .unwrap()
                .expect("room")
        })
        .collect();
    assert!(InboxWriter::connect(&name, 200, 7).unwrap().is_none());
    drop(writers);
    // The count word (after the endpoint info, wake slot and capacities)
    // claims more blocks than the file holds.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(name.path())
        .unwrap();
    let off = 256 + 1024 + 16;
    f.write_all_at(&500u32.to_ne_bytes(), off).unwrap();
    let e = InboxWriter::connect(&name, 201, 7).unwrap_err();
    assert!(e.to_string().contains("x 500"), "{e}");
    // The owner rewrites its header, frees the blocks of the publishers
    // that left, and publishers fit again.
    assert!(inbox.repair());
    for i in 0..inbox.connections() {
        let st = inbox.state(i);
        if matches!(st, ConnState::Closed { .. }) {
            inbox.free(i, st);
        }
    }
    assert!(InboxWriter::connect(&name, 202, 7).unwrap().is_some());
    // Out of range asks are clamped, not trusted.
    let big = Inbox::create_for(DOMAIN, &info(78), 1, 1, 1 << 30).unwrap();
    assert_eq!(big.connections(), myelin_shm::inbox::MAX_CONNECTIONS);
}

#[test]
fn descriptors_arrive_in_order_and_keep_last_gives_back_the_oldest() {
    let (inbox, mut w, _) = pair(1, 3);
    assert!(matches!(
        inbox.state(0),
        ConnState::Active { pub_id: 99, .. }
    ));
    for c in 0..3 {
        assert_eq!(w.push(d(c), true), Pushed::Stored);
    }
    assert_eq!(w.push(d(3), true), Pushed::Replaced(d(0)));
    assert_eq!(inbox.lost(0), 1);
    let got: Vec<u32> = std::iter::from_fn(|| inbox.pop(0).unwrap())
        .map(|d| d.chunk)
        .collect();
    assert_eq!(got, vec![1, 2, 3]);
}

fn exp(expires: u64) -> Stamp {
    Stamp {
        expires,
        sent_ns: 0,
    }
}

/// Each descriptor carries its own expiry and send time beside it, also
/// when keep-last overwrites the ring's slots; a plain push means "never
/// expires, sent at an unknown time".
#[test]
fn each_descriptor_carries_its_stamp() {
    let (inbox, mut w, _) = pair(40, 2);
    assert_eq!(w.push_stamped(d(0), exp(1000), true), Pushed::Stored);
    assert_eq!(w.push(d(1), true), Pushed::Stored);
    let sent = Stamp {
        expires: 3000,
        sent_ns: 1_764_000_000_123_456_789,
    };
    assert_eq!(w.push_stamped(d(2), sent, true), Pushed::Replaced(d(0)));
    assert_eq!(inbox.pop_stamped(0).unwrap(), Some((d(1), exp(0))));
    assert_eq!(inbox.pop_stamped(0).unwrap(), Some((d(2), sent)));
    assert_eq!(inbox.pop_stamped(0).unwrap(), None);
    assert_eq!(w.push_stamped(d(3), exp(u64::MAX), true), Pushed::Stored);
    assert_eq!(inbox.pop(0).unwrap(), Some(d(3)));
}

/// `pop_next` says whether descriptors waited behind the one it took, as
/// of the head it read: a push after the take is the next pop's news.
#[test]
fn a_pop_says_whether_more_waited_behind_it() {
    let (inbox, mut w, _) = pair(44, 4);
    let popped = |desc, more| {
        Some(Popped {
            desc,
            stamp: exp(0),
            more,
        })
    };
    assert_eq!(inbox.pop_next(0).unwrap(), None);
    assert_eq!(w.push(d(0), true), Pushed::Stored);
    assert_eq!(w.push(d(1), true), Pushed::Stored);
    assert_eq!(inbox.pop_next(0).unwrap(), popped(d(0), true));
    assert_eq!(inbox.pop_next(0).unwrap(), popped(d(1), false));
    assert_eq!(w.push(d(2), true), Pushed::Stored);
    assert_eq!(inbox.pop_next(0).unwrap(), popped(d(2), false));
    // A full ring overwritten by keep-last: the oldest went back to the
    // publisher, the rest are all "more" but the last.
    for k in 3..9 {
        w.push(d(k), true);
    }
    let got: Vec<_> = std::iter::from_fn(|| inbox.pop_next(0).unwrap())
        .map(|p| (p.desc.chunk, p.more))
        .collect();
    assert_eq!(got, [(5, true), (6, true), (7, true), (8, false)]);
}

/// A connection's liveliness: an automatic publisher is alive while
/// connected; a manual-by-topic one while its last assertion is within its
/// lease, from its connection on (a quiet one is never alive for a moment
/// first); a reused block forgets the previous publisher's lease.
#[test]
fn a_manual_publisher_is_alive_within_its_lease_of_its_last_assertion() {
    let (inbox, w, name) = pair(42, 2);
    assert!(inbox.alive(0, u64::MAX), "automatic: alive while connected");
    drop(w);
    inbox.free(0, inbox.state(0));
    let w = InboxWriter::connect_offering(&name, 99, 7, 100, 1_000)
        .unwrap()
        .expect("a free block");
    assert!(inbox.alive(0, 1_100));
    assert!(!inbox.alive(0, 1_101), "a lease without an assertion");
    w.assert_alive(2_000);
    assert!(inbox.alive(0, 2_050));
    assert!(!inbox.alive(0, 2_101));
    // The clock is shared, but a reader may read it before the writer
    // stores a later assertion: never a fault, alive.
    assert!(inbox.alive(0, 1_500));
    drop(w);
    inbox.free(0, inbox.state(0));
    let _w = InboxWriter::connect(&name, 99, 7)
        .unwrap()
        .expect("a free block");
    assert!(inbox.alive(0, u64::MAX), "the old lease was forgotten");
}

/// An inbox laid out by another myelin version (kind 3, before expiry
/// words; kind 8, before send times) is refused with an error that says
/// so, not misread.
#[test]
fn an_inbox_of_another_myelin_version_is_refused_by_name() {
    for old in [3u32, 8, 9] {
        let (_inbox, _w, name) = pair(41, 2);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(name.path())
            .unwrap();
        // The header's kind word (after the magic and the layout version).
        f.write_all_at(&old.to_ne_bytes(), 12).unwrap();
        match InboxWriter::connect(&name, 98, 7) {
            Err(e @ ShmError::OtherVersion { found_kind, .. }) if found_kind == old => {
                assert!(e.to_string().contains("another myelin version"), "{e}");
            }
            Err(e) => panic!("kind {old} not reported as another version: {e}"),
            Ok(_) => panic!("an inbox of kind {old} was taken"),
        }
    }
}

#[test]
fn keep_all_refuses_when_full_instead_of_overwriting() {
    let (inbox, mut w, _) = pair(2, 2);
    assert_eq!(w.push(d(0), false), Pushed::Stored);
    assert_eq!(w.push(d(1), false), Pushed::Stored);
    assert_eq!(w.push(d(2), false), Pushed::Full);
    assert_eq!(inbox.pop(0).unwrap(), Some(d(0)));
    assert_eq!(w.push(d(2), false), Pushed::Stored);
}

#[test]
fn returns_reach_the_writer_only_for_its_own_generation() {
    let (inbox, mut w, _) = pair(3, 4);
    w.push(d(5), true);
    let ConnState::Active { generation, .. } = inbox.state(0) else {
        panic!("active")
    };
    assert_eq!(inbox.pop(0).unwrap(), Some(d(5)));
    assert!(inbox.give_back(0, generation, d(5).key()));
    assert!(
        !inbox.give_back(0, generation + 1, d(6).key()),
        "stale generation refused"
    );
    let mut back = Vec::new();
    w.drain_returns(|k| back.push(k));
    assert_eq!(back, vec![d(5).key()]);
}

/// The claim count moves with every publisher that claims a block, after
/// its block reads claimed: a reader that saw the count move finds the
/// new block claimed.
#[test]
fn the_claim_count_moves_after_each_claim() {
    let id = 79;
    let inbox = Inbox::create_for(DOMAIN, &info(id), 4, 8, 3).unwrap();
    let name = info(id).key().segment_name(DOMAIN).unwrap();
    let c0 = inbox.claims();
    let w1 = InboxWriter::connect(&name, 100, 7).unwrap().expect("room");
    assert_eq!(inbox.claims(), c0.wrapping_add(1));
    assert!(matches!(inbox.state(0), ConnState::Active { .. }));
    let _w2 = InboxWriter::connect(&name, 101, 7).unwrap().expect("room");
    assert_eq!(inbox.claims(), c0.wrapping_add(2));
    assert!(matches!(inbox.state(1), ConnState::Active { .. }));
    // Leaving does not count: the reader finds the block closed where it
    // already looks.
    drop(w1);
    assert_eq!(inbox.claims(), c0.wrapping_add(2));
    assert!(matches!(inbox.state(0), ConnState::Closed { .. }));
}

#[test]
fn a_closed_connection_is_drained_then_freed() {
    let (inbox, mut w, _) = pair(4, 4);
    w.push(d(1), true);
    drop(w);
    let st = inbox.state(0);
    assert!(matches!(st, ConnState::Closed { .. }));
    assert_eq!(inbox.pop(0).unwrap(), Some(d(1)));
    inbox.free(0, st);
    assert_eq!(inbox.state(0), ConnState::Free);
}

#[test]
fn a_corrupt_ring_index_is_reported_and_skipped() {
    let (inbox, mut w, name) = pair(5, 4);
    w.push(d(1), true);
    // A broken publisher writes a huge head index (block 0's head word).
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(name.path())
        .unwrap();
    f.write_all_at(&u64::MAX.to_ne_bytes(), 4096 + 64).unwrap();
    let e = inbox.pop(0).unwrap_err();
    assert!(matches!(e, ShmError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("ring indices"), "{e}");
    // The reader resynchronised: no crash, no out-of-bounds read after.
    assert!(matches!(
        inbox.pop(0),
        Ok(None) | Err(ShmError::Corrupt { .. })
    ));
}

/// The lost-message counter comes from the publisher's process: a forged
/// jump is reported and not counted, and counting resumes after it.
#[test]
fn a_forged_lost_counter_is_reported_not_counted() {
    let (inbox, w, name) = pair(7, 4);
    let mut seen = 0;
    w.count_lost();
    w.count_lost();
    assert_eq!(inbox.lost_since(0, &mut seen).unwrap(), 2);
    // A broken publisher writes an absurd count (block 0's lost word).
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(name.path())
        .unwrap();
    f.write_all_at(&(u64::MAX - 5).to_ne_bytes(), 4096 + 72)
        .unwrap();
    let e = inbox.lost_since(0, &mut seen).unwrap_err();
    assert!(e.to_string().contains("lost-message counter"), "{e}");
    // Backwards is corrupt too; then counting resumes from there.
    f.write_all_at(&10u64.to_ne_bytes(), 4096 + 72).unwrap();
    assert!(inbox.lost_since(0, &mut seen).is_err());
    w.count_lost();
    assert_eq!(inbox.lost_since(0, &mut seen).unwrap(), 1);
}

#[test]
fn a_descriptor_outside_the_pool_is_refused() {
    let name = SegmentName::new(DOMAIN, &format!("k_{}_1_0", std::process::id())).unwrap();
    let w = PoolWriter::create(&name, 7, 100, 4).unwrap();
    assert_eq!(w.count(), 4);
    let r = PoolReader::open(&name, 7).unwrap();
    assert!(r.chunk(3, 100).is_ok());
    assert!(matches!(r.chunk(4, 1), Err(ShmError::Corrupt { .. })));
    assert!(matches!(r.chunk(0, 10_000), Err(ShmError::Corrupt { .. })));
    assert!(PoolReader::open(&name, 8).is_err(), "type hash checked");
}

#[test]
fn pool_chunks_return_to_the_free_list_with_their_last_reference() {
    let name = SegmentName::new(DOMAIN, &format!("k_{}_2_0", std::process::id())).unwrap();
    let w = PoolWriter::create(&name, 7, 64, 2).unwrap();
    let a = w.alloc().unwrap();
    let b = w.alloc().unwrap();
    assert!(w.alloc().is_none(), "exhausted");
    w.retain(a);
    w.release(a);
    assert_eq!(w.free_count(), 0);
    w.release(a);
    w.release(b);
    assert_eq!(w.free_count(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn random_corruption_of_an_inbox_never_breaks_its_reader(
        writes in proptest::collection::vec((0usize..16384, any::<u8>()), 0..24),
        pushes in 0u32..8,
        case in any::<u32>(),
    ) {
        let id = 1000 + u64::from(case);
        let (inbox, mut w, name) = pair(id, 4);
        for c in 0..pushes {
            w.push(d(c), true);
        }
        let len = std::fs::metadata(name.path()).unwrap().len() as usize;
        let f = std::fs::OpenOptions::new().write(true).open(name.path()).unwrap();
        for (off, b) in &writes {
            f.write_all_at(&[*b], (*off % len) as u64).unwrap();
        }
        for i in 0..inbox.connections() {
            let _ = inbox.state(i);
            for _ in 0..8 {
                match inbox.pop(i) {
                    Ok(Some(desc)) => prop_assert!(desc.chunk < (1 << 24)),
                    Ok(None) => break,
                    Err(e) => {
                        let corrupt = matches!(e, ShmError::Corrupt { .. });
                        prop_assert!(corrupt, "unexpected error {}", e);
                    }
                }
            }
            let _ = inbox.give_back(i, 0, 0);
        }
        // The writer side never trusts the segment either.
        let _ = w.push(d(1), true);
        w.drain_returns(|_| {});
    }

    #[test]
    fn descriptors_pack_and_unpack(pool in any::<u8>(), chunk in 0u32..(1 << 24), len in any::<u32>()) {
        let x = Desc { pool, chunk, len };
        prop_assert_eq!(Desc::unpack(x.pack()), x);
    }
}
