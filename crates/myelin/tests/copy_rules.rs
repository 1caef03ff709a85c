//! Seed 000's copy table, checked by counting `Clone::clone` calls and
//! comparing the addresses of the message payloads each subscription gets.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use myelin::prelude::*;
use proptest::prelude::*;

thread_local! {
    static CLONES: Cell<usize> = const { Cell::new(0) };
}

/// A message whose clones are counted (per thread) and whose payload address
/// identifies the copy.
#[derive(Debug, myelin::Message)]
struct Counted {
    data: Vec<u8>,
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        CLONES.with(|c| c.set(c.get() + 1));
        Counted {
            data: self.data.clone(),
        }
    }
}

fn clones() -> usize {
    CLONES.with(|c| c.get())
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Owned,
    Shared,
    Value,
}

struct Rig {
    _ctx: Context,
    exec: Executor,
    publisher: Publisher<Counted>,
    seen: Vec<Arc<Mutex<Vec<usize>>>>,
    _subs: Vec<Subscription<Counted>>,
}

fn rig(kinds: &[Kind]) -> Rig {
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap();
    let node = ctx.create_node("copies").unwrap();
    let mut seen = Vec::new();
    let mut subs = Vec::new();
    for k in kinds {
        let s = Arc::new(Mutex::new(Vec::new()));
        let s2 = s.clone();
        let sub = match k {
            // `FnMut(T)` wants ownership: CallbackDefault resolves to Owned.
            Kind::Owned => node
                .create_subscription("t", QoS::keep_all(), move |m: Counted| {
                    s2.lock().unwrap().push(m.data.as_ptr() as usize)
                })
                .unwrap(),
            // `FnMut(Arc<T>)` does not: Shared.
            Kind::Shared => node
                .create_subscription("t", QoS::keep_all(), move |m: Arc<Counted>| {
                    s2.lock().unwrap().push(m.data.as_ptr() as usize)
                })
                .unwrap(),
            Kind::Value => node
                .create_subscription_with(
                    "t",
                    QoS::keep_all(),
                    SubscriptionOptions::buffer(BufferKind::Value),
                    move |m: &Counted| s2.lock().unwrap().push(m.data.as_ptr() as usize),
                )
                .unwrap(),
        };
        seen.push(s);
        subs.push(sub);
    }
    let publisher = node
        .create_publisher::<Counted>("t", QoS::keep_all())
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    Rig {
        _ctx: ctx,
        exec,
        publisher,
        seen,
        _subs: subs,
    }
}

/// Publish one message (moved in) and return (copies made, the payload
/// address each subscription saw, the original's address).
fn publish_owned(kinds: &[Kind]) -> (usize, Vec<usize>, usize) {
    let mut r = rig(kinds);
    let msg = Counted {
        data: vec![7u8; 64],
    };
    let original = msg.data.as_ptr() as usize;
    let before = clones();
    r.publisher.publish(msg).unwrap();
    let copies = clones() - before;
    r.exec.spin_some().unwrap();
    let addrs = r.seen.iter().map(|s| s.lock().unwrap()[0]).collect();
    (copies, addrs, original)
}

#[test]
fn one_owner_gets_the_original() {
    let (copies, a, orig) = publish_owned(&[Kind::Owned]);
    assert_eq!(copies, 0);
    assert_eq!(a, vec![orig]);
}

#[test]
fn two_owners_one_copy_last_gets_the_original() {
    let (copies, a, orig) = publish_owned(&[Kind::Owned, Kind::Owned]);
    assert_eq!(copies, 1);
    assert_ne!(a[0], a[1]);
    assert_eq!(a[1], orig, "the last owner gets the original");
}

#[test]
fn one_sharer_gets_the_original() {
    let (copies, a, orig) = publish_owned(&[Kind::Shared]);
    assert_eq!(copies, 0);
    assert_eq!(a, vec![orig]);
}

#[test]
fn two_sharers_share_the_original() {
    let (copies, a, orig) = publish_owned(&[Kind::Shared, Kind::Shared]);
    assert_eq!(copies, 0);
    assert_eq!(a, vec![orig, orig]);
}

#[test]
fn owner_and_sharer_one_copy() {
    let (copies, a, orig) = publish_owned(&[Kind::Owned, Kind::Shared]);
    assert_eq!(copies, 1);
    assert_eq!(a[0], orig, "the owner gets the original");
    assert_ne!(a[1], orig);
}

#[test]
fn owner_and_two_sharers_one_copy_shared_by_both() {
    let (copies, a, orig) = publish_owned(&[Kind::Owned, Kind::Shared, Kind::Shared]);
    assert_eq!(copies, 1);
    assert_eq!(a[0], orig);
    assert_eq!(a[1], a[2]);
    assert_ne!(a[1], orig);
}

#[test]
fn two_owners_two_sharers_two_copies() {
    let (copies, a, orig) = publish_owned(&[Kind::Owned, Kind::Owned, Kind::Shared, Kind::Shared]);
    assert_eq!(copies, 2);
    assert_eq!(a[1], orig, "the last owner gets the original");
    assert_ne!(a[0], orig);
    assert_eq!(a[2], a[3], "sharers share one copy");
    assert!(a[2] != a[0] && a[2] != orig);
}

#[test]
fn publish_shared_gives_sharers_the_callers_arc() {
    let mut r = rig(&[Kind::Shared, Kind::Shared, Kind::Owned]);
    let msg = Arc::new(Counted {
        data: vec![1u8; 4_665_600],
    });
    let original = msg.data.as_ptr() as usize;
    let before = clones();
    r.publisher.publish_shared(msg).unwrap();
    assert_eq!(clones() - before, 1, "one copy for the one owner");
    r.exec.spin_some().unwrap();
    let a: Vec<usize> = r.seen.iter().map(|s| s.lock().unwrap()[0]).collect();
    assert_eq!(a[0], original);
    assert_eq!(a[1], original);
    assert_ne!(a[2], original);
}

#[test]
fn value_buffers_get_a_copy_each() {
    let (copies, a, orig) = publish_owned(&[Kind::Value, Kind::Value]);
    assert_eq!(copies, 2);
    assert!(a.iter().all(|&p| p != orig));
    assert_ne!(a[0], a[1]);
}

#[test]
fn publish_copy_with_no_subscription_copies_nothing() {
    let r = rig(&[]);
    let msg = Counted { data: vec![0; 8] };
    let before = clones();
    r.publisher.publish_copy(&msg).unwrap();
    assert_eq!(clones() - before, 0);
}

/// The formula of the core issue: `publish(T)` makes `V` + (0 if M = 0,
/// M - 1 if S = 0, M otherwise); `publish_shared` makes `V + M`.
fn expected(m: usize, s: usize, v: usize, shared_publish: bool) -> usize {
    let owners = if shared_publish {
        m
    } else if m == 0 {
        0
    } else if s == 0 {
        m - 1
    } else {
        m
    };
    owners + v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn copies_match_the_formula(m in 0usize..4, s in 0usize..4, v in 0usize..3, shared in any::<bool>(), order_seed in any::<u64>()) {
        let mut kinds: Vec<Kind> = std::iter::repeat_n(Kind::Owned, m)
            .chain(std::iter::repeat_n(Kind::Shared, s))
            .chain(std::iter::repeat_n(Kind::Value, v))
            .collect();
        // Creation order must not matter.
        let n = kinds.len();
        if n > 1 {
            for i in 0..n {
                let j = ((order_seed >> (i % 60)) as usize + i * 7) % n;
                kinds.swap(i, j);
            }
        }
        let mut r = rig(&kinds);
        let data = vec![3u8; 32];
        let original = data.as_ptr() as usize;
        let before = clones();
        if shared {
            r.publisher.publish_shared(Arc::new(Counted { data })).unwrap();
        } else {
            r.publisher.publish(Counted { data }).unwrap();
        }
        prop_assert_eq!(clones() - before, expected(m, s, v, shared));
        r.exec.spin_some().unwrap();
        let addrs: Vec<usize> = r.seen.iter().map(|x| x.lock().unwrap()[0]).collect();
        // Every sharer sees the same address.
        let sharer_addrs: Vec<usize> = kinds.iter().zip(&addrs).filter(|(k, _)| matches!(k, Kind::Shared)).map(|(_, a)| *a).collect();
        prop_assert!(sharer_addrs.windows(2).all(|w| w[0] == w[1]));
        // Owners and value buffers each see a distinct address.
        let mut own: Vec<usize> = kinds.iter().zip(&addrs).filter(|(k, _)| !matches!(k, Kind::Shared)).map(|(_, a)| *a).collect();
        own.sort();
        own.dedup();
        prop_assert_eq!(own.len(), m + v);
        // The original reaches exactly one subscription unless only value buffers exist.
        let hits = addrs.iter().filter(|&&a| a == original).count();
        if m + s > 0 {
            let expect_hits = if shared || m == 0 { s } else { 1 };
            prop_assert_eq!(hits, expect_hits);
        }
    }
}
