//! What is particular to the network transport, on real zenoh sessions:
//! contexts of one process over zenoh, any-type subscriptions and the wire
//! bytes, shared memory and zenoh side by side in one process, bad
//! configuration files. A zenoh router runs on a free loopback port
//! (started in this test process, as `myelin router` starts one) and the
//! contexts reach it through a configuration file (multicast scouting
//! off). What every transport must do, across processes, is in the
//! conformance suite (`tests/conformance/`, `zenoh::*`).
#![cfg(feature = "zenoh")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{AnyMessage, Publisher, Subscription};

const LONG: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, myelin::Message)]
#[message(cdr, name = "test_msgs/msg/Reading")]
struct Reading {
    seq: u32,
    label: String,
}

/// A service payload with a large byte field (a map, a point cloud).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, myelin::Message)]
#[message(cdr, name = "test_msgs/msg/Chunk")]
struct Chunk {
    seq: u32,
    data: Vec<u8>,
}

mod common {
    pub mod router;
}
use common::router::{Router, router};

fn ctx(r: &Router, domain: u32, shm: bool) -> Context {
    Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(shm)
        .zenoh_config(&r.config)
        .build()
        .unwrap()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_matched<T: myelin::Message>(p: &Publisher<T>, n: usize) {
    wait_until("subscriptions", || p.subscription_count() >= n);
}

fn wait_publishers<T: myelin::Message>(s: &Subscription<T>, n: usize) {
    wait_until("publishers", || s.matched_count() >= n);
}

#[test]
fn two_contexts_over_zenoh_without_shared_memory() {
    let r = router("basic");
    let a = ctx(&r, 140, false);
    let b = ctx(&r, 140, false);
    assert!(a.uses_network() && !a.uses_shared_memory());
    let pa = a.create_node("talker").unwrap();
    let nb = b.create_node("listener").unwrap();
    let sub = nb
        .create_polling_subscription::<Reading>("/chatter", QoS::keep_all(), Default::default())
        .unwrap();
    let publisher = pa
        .create_publisher::<Reading>("/chatter", QoS::keep_all())
        .unwrap();
    wait_matched(&publisher, 1);
    wait_publishers(&sub, 1);
    for seq in 0..50 {
        publisher
            .publish(Reading {
                seq,
                label: format!("n{seq}"),
            })
            .unwrap();
    }
    for seq in 0..50 {
        let m = sub.wait_for_message(LONG).unwrap().into_owned();
        assert_eq!(
            m,
            Reading {
                seq,
                label: format!("n{seq}")
            }
        );
    }
    // Another domain on the same router sees nothing.
    let c = ctx(&r, 141, false);
    let other = c
        .create_node("x")
        .unwrap()
        .create_polling_subscription::<Reading>("/chatter", QoS::keep_all(), Default::default())
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(other.matched_count(), 0);
    assert_eq!(publisher.subscription_count(), 1);
    // The graph: b sees a's node and publisher through liveliness tokens.
    let seen = b.discover(Duration::from_secs(2));
    assert!(
        seen.iter().any(|e| e.is_publisher
            && e.topic == "/chatter"
            && e.type_name == "test_msgs/msg/Reading"
            && e.node == "/talker"
            && e.zid == a.zenoh_id()),
        "{seen:?}"
    );
    // Dropping the publisher updates the matched count.
    drop(publisher);
    wait_until("the publisher to go", || sub.matched_count() == 0);
}

/// The second endpoint of a topic whose remote graph this context already
/// follows learns it while it is being created, before its owner is
/// known: that count must still reach its matched status (it was lost, and
/// the endpoint never matched).
#[test]
fn an_endpoint_created_on_an_already_followed_topic_matches() {
    let r = router("followed");
    let a = ctx(&r, 142, false);
    let b = ctx(&r, 142, false);
    let na = a.create_node("talker").unwrap();
    let nb = b.create_node("listener").unwrap();
    let p1 = na
        .create_publisher::<Reading>("/followed", QoS::keep_all())
        .unwrap();
    let s1 = nb
        .create_polling_subscription::<Reading>("/followed", QoS::keep_all(), Default::default())
        .unwrap();
    wait_publishers(&s1, 1);
    wait_matched(&p1, 1);
    // b follows /followed already, and a's publisher is in its graph.
    let s2 = nb
        .create_polling_subscription::<Reading>("/followed", QoS::keep_all(), Default::default())
        .unwrap();
    wait_publishers(&s2, 1);
    // And the other way: a follows it, with b's subscriptions known.
    let p2 = na
        .create_publisher::<Reading>("/followed", QoS::keep_all())
        .unwrap();
    wait_matched(&p2, 2);
    p2.publish(Reading {
        seq: 7,
        label: "second".into(),
    })
    .unwrap();
    let m = s2.wait_for_message(LONG).unwrap().into_owned();
    assert_eq!(m.seq, 7);
}

#[test]
fn any_type_subscription_and_callbacks_over_zenoh() {
    let r = router("any");
    let a = ctx(&r, 142, false);
    let b = ctx(&r, 142, false);
    let publisher = a
        .create_node("p")
        .unwrap()
        .create_publisher::<Reading>("/ns/data", QoS::default())
        .unwrap();
    // A tool's any-type subscription lives in its own context (a context
    // holds one type per topic).
    let tool = ctx(&r, 142, false);
    let any = tool
        .create_node("tool")
        .unwrap()
        .create_polling_subscription::<AnyMessage>(
            "/ns/data",
            QoS::keep_last(100).best_effort(),
            Default::default(),
        )
        .unwrap();
    let nb = b.create_node("s").unwrap();
    let got = Arc::new(AtomicUsize::new(0));
    let g = got.clone();
    let _typed = nb
        .create_subscription("/ns/data", QoS::keep_last(100), move |m: Reading| {
            assert_eq!(m.label, "x");
            g.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&nb).unwrap();
    wait_matched(&publisher, 2);
    publisher
        .publish(Reading {
            seq: 7,
            label: "x".into(),
        })
        .unwrap();
    let m = any.wait_for_message(LONG).unwrap();
    // CDR little endian, encapsulation header first.
    assert_eq!(&m.bytes()[..8], &[0, 1, 0, 0, 7, 0, 0, 0]);
    let deadline = Instant::now() + LONG;
    while got.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline);
        exec.spin_once(Duration::from_millis(10)).unwrap();
    }
}

/// A publisher on shared memory and two readers in other contexts of this
/// process (as other processes of the host): one on shared memory too,
/// reached by both transports, and one reached by zenoh only. Fields drop
/// in order: the endpoints, then their contexts.
#[cfg(feature = "shm")]
struct ShmAndNet<T: myelin::Message> {
    publisher: Publisher<T>,
    by_shm: Subscription<T>,
    by_net: Subscription<T>,
    _contexts: [Context; 3],
}

/// [`ShmAndNet`] on `topic` (keep_all), every endpoint matched.
#[cfg(feature = "shm")]
fn shm_and_net<T: myelin::Message>(r: &Router, domain: u32, topic: &str) -> ShmAndNet<T> {
    let contexts = [
        ctx(r, domain, true),
        ctx(r, domain, true),
        ctx(r, domain, false),
    ];
    let publisher = contexts[0]
        .create_node("p")
        .unwrap()
        .create_publisher::<T>(topic, QoS::keep_all())
        .unwrap();
    let reader = |c: &Context| {
        c.create_node("s")
            .unwrap()
            .create_polling_subscription::<T>(topic, QoS::keep_all(), Default::default())
            .unwrap()
    };
    let (by_shm, by_net) = (reader(&contexts[1]), reader(&contexts[2]));
    wait_matched(&publisher, 2);
    wait_publishers(&by_shm, 1);
    wait_publishers(&by_net, 1);
    ShmAndNet {
        publisher,
        by_shm,
        by_net,
        _contexts: contexts,
    }
}

#[test]
#[cfg(feature = "shm")]
fn exactly_once_next_to_shared_memory() {
    let r = router("once");
    let f = shm_and_net::<Reading>(&r, 143, "/once");
    let (publisher, sb, sc) = (&f.publisher, &f.by_shm, &f.by_net);
    // Counted once each, whatever the path.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(publisher.subscription_count(), 2);
    assert_eq!(sb.matched_count(), 1);
    for seq in 0..20 {
        publisher
            .publish(Reading {
                seq,
                label: String::new(),
            })
            .unwrap();
    }
    for s in [sb, sc] {
        for seq in 0..20 {
            assert_eq!(s.wait_for_message(LONG).unwrap().seq, seq);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(sb.take().is_none(), "a message arrived twice");
    assert!(sc.take().is_none(), "a message arrived twice");
}

/// Loaned bytes go to zenoh without a copy (zenoh reads the chunk in
/// place): they arrive intact over the network, and every chunk returns to
/// the pool once zenoh has sent it and the shared-memory reader has let go.
/// A payload zenoh kept (or a reference it never dropped) would leave
/// chunks in use for ever.
#[test]
#[cfg(feature = "shm")]
fn loaned_bytes_go_to_zenoh_in_place_and_come_back_to_the_pool() {
    let r = router("loaned");
    let f = shm_and_net::<myelin::Blob>(&r, 144, "/frames");
    let publisher = &f.publisher;
    // Larger than a zenoh batch (fragmented) and smaller than one.
    let sizes = [200_000usize, 1000, 70_000, 64];
    for (i, &len) in sizes.iter().enumerate() {
        let mut loan = publisher.loan_slice(len).unwrap();
        for (j, byte) in loan.iter_mut().enumerate() {
            *byte = (i * 31 + j) as u8;
        }
        loan.publish().unwrap();
    }
    assert!(
        publisher.shared_memory_in_use() > 0,
        "the loans are chunks of shared memory"
    );
    for s in [&f.by_shm, &f.by_net] {
        for (i, &len) in sizes.iter().enumerate() {
            let m = s.wait_for_message(LONG).unwrap();
            assert_eq!(m.len(), len);
            assert!(
                m.iter().enumerate().all(|(j, &v)| v == (i * 31 + j) as u8),
                "message {i} arrived changed"
            );
        }
    }
    wait_until("every chunk back in the pool", || {
        publisher.shared_memory_in_use() == 0
    });
}

/// CDR messages are decoded where zenoh received them: a camera frame
/// larger than a batch arrives as fragments and is decoded across them
/// (its pixels gathered once into the image's vector), a small message
/// from its slice of the receive buffer, and a string cut by a fragment
/// boundary too. Each arrives intact, in order, none lost.
#[test]
fn camera_frames_decode_across_zenoh_fragments() {
    use myelin_msgs::sensor_msgs::Image;
    let r = router("fragments");
    let a = ctx(&r, 145, false);
    let b = ctx(&r, 145, false);
    let images = b
        .create_node("viewer")
        .unwrap()
        .create_polling_subscription::<Image>("/camera", QoS::keep_all(), Default::default())
        .unwrap();
    let readings = b
        .create_node("logger")
        .unwrap()
        .create_polling_subscription::<Reading>("/log", QoS::keep_all(), Default::default())
        .unwrap();
    let node = a.create_node("camera").unwrap();
    let camera = node
        .create_publisher::<Image>("/camera", QoS::keep_all())
        .unwrap();
    let log = node
        .create_publisher::<Reading>("/log", QoS::keep_all())
        .unwrap();
    wait_matched(&camera, 1);
    wait_matched(&log, 1);
    let image = |seq: u32, width: u32, height: u32| Image {
        height,
        width,
        encoding: "rgb8".into(),
        step: width * 3,
        data: (0..width * height * 3)
            .map(|i| (i.wrapping_mul(7) ^ seq) as u8)
            .collect(),
        header: myelin_msgs::std_msgs::Header {
            frame_id: format!("camera_{seq}"),
            ..Default::default()
        },
        ..Default::default()
    };
    let sent = [image(0, 1440, 1080), image(1, 4, 3), image(2, 640, 480)];
    for m in &sent {
        camera.publish(m.clone()).unwrap();
    }
    // 300,000 characters: the string spans several fragments.
    let label: String = (0..300_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    for seq in 0..3 {
        log.publish(Reading {
            seq,
            label: label[..[300_000, 5, 100_000][seq as usize]].to_string(),
        })
        .unwrap();
    }
    for m in &sent {
        let got = images.wait_for_message(LONG).unwrap();
        assert!(*got == *m, "{} arrived changed", m.header.frame_id);
    }
    for seq in 0..3 {
        let got = readings.wait_for_message(LONG).unwrap();
        assert_eq!(got.seq, seq);
        assert_eq!(got.label, label[..got.label.len()]);
        assert_eq!(got.label.len(), [300_000, 5, 100_000][seq as usize]);
    }
    assert_eq!(images.lost() + readings.lost(), 0);
}

#[test]
fn bad_config_file_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("myelin_badcfg_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("broken.json5");
    std::fs::write(&f, "{ mode: \"peer\", connect: ").unwrap();
    let e = Context::builder()
        .handle_signals(false)
        .zenoh_config(&f)
        .build()
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("broken.json5"), "{text}");
    let e = Context::builder()
        .handle_signals(false)
        .zenoh_config(dir.join("missing.json5"))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("missing.json5"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A service call whose request and reply are each 3 MB crosses zenoh in
/// fragments (zenoh's batches are at most 64 KiB) and is decoded across
/// them on both sides, not joined first; a small call right after takes
/// the one-slice way. Two contexts of this process, so only zenoh links
/// them.
#[test]
fn large_service_requests_and_replies_decode_from_zenohs_fragments() {
    let r = router("big_service");
    let server_ctx = ctx(&r, 41, false);
    let node = server_ctx.create_node("chunk_server").unwrap();
    let _srv = node
        .create_service::<Chunk, Chunk>("reverse", |c: Chunk| Chunk {
            seq: c.seq + 1,
            data: c.data.iter().rev().copied().collect(),
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spin = std::thread::spawn(move || exec.spin());

    let client_ctx = ctx(&r, 41, false);
    let cnode = client_ctx.create_node("chunk_client").unwrap();
    let client = cnode.create_client::<Chunk, Chunk>("reverse").unwrap();
    assert!(client.wait_for_service(LONG), "the server was never seen");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let back = client
        .call(
            Chunk {
                seq: 1,
                data: data.clone(),
            },
            LONG,
        )
        .unwrap();
    assert_eq!(back.seq, 2);
    assert_eq!(back.data.len(), data.len());
    assert!(
        back.data.iter().eq(data.iter().rev()),
        "the bytes came back reversed"
    );
    let small = client
        .call(
            Chunk {
                seq: 9,
                data: vec![1, 2, 3],
            },
            LONG,
        )
        .unwrap();
    assert_eq!(
        small,
        Chunk {
            seq: 10,
            data: vec![3, 2, 1]
        }
    );
    stop.stop();
    spin.join().unwrap().unwrap();
}
