//! Publisher gids and `MessageInfo` (rclcpp's `MessageInfo`): a message
//! names the publisher that sent it, by the same gid that publisher
//! reports, in this process and from another one over shared memory and
//! over zenoh; what each path stamps (send time, arrival time, sequence
//! number, in-process) is what `MessageInfo`'s documentation promises.
//! The other process is this test binary (`MYELIN_INFO_ROLE=talker`),
//! which prints its publisher's gid before it publishes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use myelin::MessageInfo;
use myelin::prelude::*;

#[cfg(feature = "zenoh")]
mod common {
    pub mod router;
}

fn ctx() -> Context {
    Context::builder()
        .shared_memory(false)
        .network(false)
        .handle_signals(false)
        .build()
        .unwrap()
}

#[test]
fn every_endpoint_has_its_own_gid_and_in_process_messages_name_their_publisher() {
    let ctx = ctx();
    let node = ctx.create_node("gids").unwrap();
    let a = node
        .create_publisher::<u32>("/gids", QoS::default())
        .unwrap();
    let b = node
        .create_publisher::<u32>("/gids", QoS::default())
        .unwrap();
    let seen: Arc<Mutex<Vec<(u32, MessageInfo)>>> = Arc::default();
    let s = seen.clone();
    let sub = node
        .create_subscription("/gids", QoS::keep_all(), move |m: &u32, i: &MessageInfo| {
            s.lock().unwrap().push((*m, *i))
        })
        .unwrap();
    let poll = node
        .create_polling_subscription::<u32>("/gids", QoS::keep_all(), Default::default())
        .unwrap();
    let gids = [a.gid(), b.gid(), sub.gid(), poll.gid()];
    for (i, g) in gids.iter().enumerate() {
        assert_eq!(g.pid(), Some(std::process::id()), "{g}");
        assert!(!gids[i + 1..].contains(g), "{g} is not unique: {gids:?}");
    }
    a.publish(1).unwrap();
    b.publish(2).unwrap();
    a.publish_copy(&3).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    while seen.lock().unwrap().len() < 3 {
        exec.spin_once(Duration::from_secs(5)).unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    let expect = |n: u32| if n == 2 { b.gid() } else { a.gid() };
    for (n, info) in &seen {
        assert_eq!(info.publisher_gid(), expect(*n), "message {n}");
        assert!(info.from_intra_process());
        // In-process delivery reads no clock, as rclcpp's.
        assert_eq!(info.source_timestamp(), None);
        assert_eq!(info.publication_sequence_number(), None);
    }
    for n in 1..=3 {
        let (m, info) = poll.take_with_info().expect("three messages");
        assert_eq!((*m, info.publisher_gid()), (n, expect(n)));
    }
    assert!(poll.take_with_info().is_none());
}

#[test]
fn a_late_subscription_learns_who_published_its_history() {
    let ctx = ctx();
    let node = ctx.create_node("history").unwrap();
    let qos = QoS::keep_last(5).transient_local();
    let a = node.create_publisher::<u32>("/history", qos).unwrap();
    let b = node.create_publisher::<u32>("/history", qos).unwrap();
    a.publish(1).unwrap();
    b.publish(2).unwrap();
    let late = node
        .create_polling_subscription::<u32>("/history", qos, Default::default())
        .unwrap();
    let (one, i1) = late.take_with_info().unwrap();
    let (two, i2) = late.take_with_info().unwrap();
    assert_eq!((*one, i1.publisher_gid()), (1, a.gid()));
    assert_eq!((*two, i2.publisher_gid()), (2, b.gid()));
}

/// Messages from another process (the talker: this binary again).
#[cfg(any(feature = "shm", feature = "zenoh"))]
mod remote {
    use super::*;

    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    use myelin::Gid;

    const LONG: Duration = Duration::from_secs(60);
    const ROLE: &str = "MYELIN_INFO_ROLE";

    fn wall_ns() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64
    }

    /// `MYELIN_INFO_ROLE=talker`: publish 1, 2, 3, ... on the topic every
    /// 10 ms, after printing the publisher's gid on a line of its own.
    #[test]
    fn talker_role() {
        if std::env::var(ROLE).as_deref() != Ok("talker") {
            return;
        }
        let var = |k: &str| std::env::var(k).unwrap();
        let ctx = Context::builder()
            .domain_id(var("MYELIN_INFO_DOMAIN").parse().unwrap())
            .handle_signals(false)
            .build()
            .unwrap();
        let node = ctx.create_node("info_talker").unwrap();
        let p = node
            .create_publisher::<u64>(&var("MYELIN_INFO_TOPIC"), QoS::keep_last(10))
            .unwrap();
        println!("gid {}", p.gid());
        for i in 1.. {
            p.publish(i).unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    struct Talker {
        child: Child,
        gid: String,
    }

    impl Drop for Talker {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The talker in another process (over shared memory, or only over zenoh
    /// with this session config), once it said its gid.
    fn talker(domain: u32, topic: &str, zenoh: Option<&std::path::Path>) -> Talker {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--exact", "remote::talker_role", "--nocapture", "--quiet"])
            .env(ROLE, "talker")
            .env("MYELIN_INFO_DOMAIN", domain.to_string())
            .env("MYELIN_INFO_TOPIC", topic)
            .stdout(Stdio::piped());
        match zenoh {
            Some(cfg) => c
                .env("MYELIN_TRANSPORT", "zenoh")
                .env("MYELIN_ZENOH_CONFIG", cfg),
            None => c.env("MYELIN_TRANSPORT", "shm"),
        };
        let mut child = c.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        for line in out.lines() {
            let line = line.unwrap();
            if let Some(g) = line.strip_prefix("gid ") {
                return Talker {
                    child,
                    gid: g.to_string(),
                };
            }
        }
        let _ = child.kill();
        let status = child.wait();
        panic!("the talker exited before saying its gid: {status:?}");
    }

    /// Messages from the talker name its gid and when it sent them; over
    /// zenoh also when they arrived and their sequence numbers.
    fn remote_case(domain: u32, zenoh: Option<&std::path::Path>) {
        let b = Context::builder().domain_id(domain).handle_signals(false);
        let ctx = match zenoh {
            Some(cfg) => b.shared_memory(false).zenoh_config(cfg),
            None => b.network(false).shared_memory(true),
        }
        .build()
        .unwrap();
        let node = ctx.create_node("info_listener").unwrap();
        let sub = node
            .create_polling_subscription::<u64>("/info", QoS::keep_last(10), Default::default())
            .unwrap();
        let started = wall_ns();
        let talker = talker(domain, "/info", zenoh);
        let deadline = Instant::now() + LONG;
        let mut got = Vec::new();
        while got.len() < 3 {
            assert!(Instant::now() < deadline, "got only {got:?}");
            match sub.take_with_info() {
                Some((m, info)) => got.push((*m, info, wall_ns())),
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        for (m, info, taken) in &got {
            assert_eq!(info.publisher_gid().to_string(), talker.gid, "message {m}");
            assert_eq!(info.publisher_gid().pid(), Some(talker.child.id()));
            assert!(!info.from_intra_process());
            let sent = info.source_timestamp().expect("a send time");
            assert!(
                (started..=*taken).contains(&sent),
                "sent at {sent}, between {started} and {taken}?"
            );
            if zenoh.is_some() {
                let arrived = info.received_timestamp().expect("an arrival time");
                assert!((sent..=*taken).contains(&arrived), "{info:?}");
                assert!(info.publication_sequence_number().is_some(), "{info:?}");
            } else {
                assert_eq!(info.received_timestamp(), None);
                assert_eq!(info.publication_sequence_number(), None);
            }
        }
        if zenoh.is_some() {
            // The publisher's own count: rising with the messages it sent.
            let seqs: Vec<u64> = got
                .iter()
                .map(|(_, i, _)| i.publication_sequence_number().unwrap())
                .collect();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        }
        let _: Gid = got[0].1.publisher_gid();
    }

    #[cfg(feature = "shm")]
    #[test]
    fn a_message_over_shared_memory_names_its_publisher_and_send_time() {
        remote_case(218, None);
    }

    #[cfg(feature = "zenoh")]
    #[test]
    fn a_message_over_zenoh_names_its_publisher_send_and_arrival_time_and_number() {
        let r = common::router::router("message_info");
        remote_case(219, Some(&r.config));
    }
}
