//! Every way of receiving is fed by every transport: a wait set wakes,
//! and an inline subscription (no executor) runs its callback, for a
//! message from another process, over shared memory and over zenoh. The
//! publisher is this test binary in another process
//! (`MYELIN_FEEDS_ROLE=talker`).

#![cfg(feature = "shm")]

use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{QosPolicy, SubscriptionOptions, WaitSet};

mod common {
    #[cfg(feature = "zenoh")]
    pub mod router;
}

const LONG: Duration = Duration::from_secs(60);
const ROLE: &str = "MYELIN_FEEDS_ROLE";

struct Talker(Child);

impl Drop for Talker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Another process publishing "hello N" on `topic` every 10 ms, over
/// shared memory (`zenoh`: None) or only over zenoh with this config file.
fn talker(domain: u32, topic: &str, zenoh: Option<&std::path::Path>) -> Talker {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "talker_role", "--nocapture"])
        .env(ROLE, "talker")
        .env("MYELIN_FEEDS_DOMAIN", domain.to_string())
        .env("MYELIN_FEEDS_TOPIC", topic);
    match zenoh {
        Some(cfg) => c
            .env("MYELIN_TRANSPORT", "zenoh")
            .env("MYELIN_ZENOH_CONFIG", cfg),
        None => c.env("MYELIN_TRANSPORT", "shm"),
    };
    Talker(c.spawn().unwrap())
}

#[test]
fn talker_role() {
    if std::env::var(ROLE).as_deref() != Ok("talker") {
        return;
    }
    let domain: u32 = std::env::var("MYELIN_FEEDS_DOMAIN")
        .unwrap()
        .parse()
        .unwrap();
    let topic = std::env::var("MYELIN_FEEDS_TOPIC").unwrap();
    let ctx = Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .build()
        .unwrap();
    let node = ctx.create_node("feeds_talker").unwrap();
    let p = node
        .create_publisher::<String>(&topic, QoS::keep_last(10))
        .unwrap();
    for i in 0.. {
        p.publish(format!("hello {i}")).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn local_ctx(domain: u32, zenoh: Option<&std::path::Path>) -> Context {
    let b = Context::builder().domain_id(domain).handle_signals(false);
    match zenoh {
        Some(cfg) => b.shared_memory(false).zenoh_config(cfg),
        None => b.network(false).shared_memory(true),
    }
    .build()
    .unwrap()
}

fn wait_set_case(domain: u32, zenoh: Option<&std::path::Path>) {
    let ctx = local_ctx(domain, zenoh);
    let node = ctx.create_node("feeds_waiter").unwrap();
    let s = node
        .create_polling_subscription::<String>("/feeds_ws", QoS::keep_last(10), Default::default())
        .unwrap();
    let mut ws = WaitSet::new();
    let i = ws.add_subscription(&s).unwrap();
    let _talker = talker(domain, "/feeds_ws", zenoh);
    let deadline = Instant::now() + LONG;
    loop {
        let ready = ws.wait(Duration::from_secs(1)).unwrap();
        if ready.subscriptions.contains(&i) {
            let m = s.take().expect("ready means a message");
            assert!(m.starts_with("hello "), "{}", *m);
            return;
        }
        assert!(Instant::now() < deadline, "the wait set never woke");
    }
}

fn inline_case(domain: u32, zenoh: Option<&std::path::Path>) {
    let ctx = local_ctx(domain, zenoh);
    let node = ctx.create_node("feeds_inline").unwrap();
    let got = Arc::new(Mutex::new(Vec::<String>::new()));
    let g = got.clone();
    let _s = node
        .create_subscription_with(
            "/feeds_inline",
            QoS::keep_last(10),
            SubscriptionOptions::inline(),
            move |m: String| g.lock().unwrap().push(m),
        )
        .unwrap();
    // No executor anywhere in this process.
    let _talker = talker(domain, "/feeds_inline", zenoh);
    let deadline = Instant::now() + LONG;
    while got.lock().unwrap().len() < 3 {
        assert!(Instant::now() < deadline, "the inline callback never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// An executor that anticipates its work hears a talker in another
/// process that publishes every 10 ms: every message, in order, once the
/// period is learned (the executor is then awake in a window around each
/// arrival) and after the talker stops and starts again (a silence longer
/// than the window: the executor blocks until work comes).
fn anticipating_case(domain: u32, zenoh: Option<&std::path::Path>) {
    let ctx = local_ctx(domain, zenoh);
    let node = ctx.create_node("feeds_anticipating").unwrap();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let g = got.clone();
    let _s = node
        .create_subscription("/feeds_ant", QoS::keep_all(), move |m: String| {
            let n = m.strip_prefix("hello ").and_then(|n| n.parse().ok());
            g.lock().unwrap().push(n.expect("hello N"));
        })
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    exec.set_idle_wait(myelin::IdleWait::Anticipate);
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin());
    let heard = |n: usize| {
        let deadline = Instant::now() + LONG;
        while got.lock().unwrap().len() < n {
            assert!(Instant::now() < deadline, "only {:?}", got.lock().unwrap());
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    for round in 1..=2 {
        let talker = talker(domain, "/feeds_ant", zenoh);
        heard(round * 60);
        drop(talker);
        // A silence of many periods.
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.stop();
    spinner.join().unwrap().unwrap();
    let got = got.lock().unwrap();
    // Each talker counts from 0 (what it sent before the match is not
    // heard: volatile); within a talker's run nothing is missing.
    let runs: Vec<&[u64]> = got.chunk_by(|a, b| b > a).collect();
    assert_eq!(runs.len(), 2, "two talkers, one after the other: {got:?}");
    for run in runs {
        let expected: Vec<u64> = (run[0]..run[0] + run.len() as u64).collect();
        assert_eq!(run, &expected[..], "every message, in order");
    }
}

#[test]
fn an_anticipating_executor_hears_a_periodic_talker_over_shared_memory() {
    anticipating_case(220, None);
}

#[cfg(feature = "zenoh")]
#[test]
fn an_anticipating_executor_hears_a_periodic_talker_over_zenoh() {
    let r = common::router::router("feeds_ant");
    anticipating_case(210, Some(&r.config));
}

#[test]
fn a_wait_set_wakes_for_a_message_from_another_process_over_shared_memory() {
    wait_set_case(212, None);
}

#[test]
fn an_inline_subscription_hears_another_process_over_shared_memory() {
    inline_case(213, None);
}

#[cfg(feature = "zenoh")]
#[test]
fn a_wait_set_wakes_for_a_message_from_another_process_over_zenoh() {
    let r = common::router::router("feeds_ws");
    wait_set_case(214, Some(&r.config));
}

#[cfg(feature = "zenoh")]
#[test]
fn an_inline_subscription_hears_another_process_over_zenoh() {
    let r = common::router::router("feeds_inline");
    inline_case(215, Some(&r.config));
}

/// `MYELIN_FEEDS_ROLE=many`: 20 contexts in one process, each publishing
/// its number on /feeds_many every 10 ms (20 publishers over shared
/// memory).
#[test]
fn many_publishers_role() {
    if std::env::var(ROLE).as_deref() != Ok("many") {
        return;
    }
    let domain: u32 = std::env::var("MYELIN_FEEDS_DOMAIN")
        .unwrap()
        .parse()
        .unwrap();
    // The values to publish, one publisher each (default 0 to 19).
    let values: Vec<u32> = std::env::var("MYELIN_FEEDS_VALUES").map_or_else(
        |_| (0..20).collect(),
        |v| v.split(',').map(|x| x.parse().unwrap()).collect(),
    );
    let pubs: Vec<_> = values
        .into_iter()
        .map(|i| {
            let ctx = Context::builder()
                .domain_id(domain)
                .handle_signals(false)
                .network(false)
                .build()
                .unwrap();
            let node = ctx.create_node(&format!("many_{i}")).unwrap();
            let p = node
                .create_publisher::<u32>("/feeds_many", QoS::keep_last(10))
                .unwrap();
            (ctx, p, i)
        })
        .collect();
    loop {
        for (_, p, i) in &pubs {
            p.publish(*i).unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`many_publishers_role`] in a child process.
fn many_publishers(domain: u32) -> Talker {
    publishers_of(domain, None)
}

/// [`many_publishers_role`] in a child process, one publisher per value
/// of `values` (`None`: 0 to 19).
fn publishers_of(domain: u32, values: Option<&str>) -> Talker {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "many_publishers_role", "--nocapture"])
        .env(ROLE, "many")
        .env("MYELIN_FEEDS_DOMAIN", domain.to_string())
        .env("MYELIN_TRANSPORT", "shm");
    if let Some(v) = values {
        c.env("MYELIN_FEEDS_VALUES", v);
    }
    Talker(c.spawn().unwrap())
}

/// A keep_last(100) subscription on /feeds_many taking up to `max`
/// publishers of other processes over shared memory.
fn feeds_subscription(
    node: &Node,
    max: usize,
) -> Result<Subscription<u32>, myelin::CreateEndpointError> {
    node.create_polling_subscription::<u32>(
        "/feeds_many",
        QoS::keep_last(100),
        SubscriptionOptions {
            max_publishers: Some(max),
            ..Default::default()
        },
    )
}

/// A subscription can take more than the default 16 publishers over
/// shared memory when it asks (`max_publishers`); an absurd number is an
/// error naming the option.
#[test]
fn a_subscription_takes_as_many_publishers_as_it_asks_for() {
    let domain = 225;
    let ctx = local_ctx(domain, None);
    let node = ctx.create_node("feeds_many_sub").unwrap();
    let e = feeds_subscription(&node, 5000).unwrap_err();
    assert!(e.to_string().contains("max_publishers"), "{e}");
    let s = feeds_subscription(&node, 24).unwrap();
    let _many = many_publishers(domain);
    let mut heard = std::collections::BTreeSet::new();
    let deadline = Instant::now() + LONG;
    while heard.len() < 20 {
        assert!(Instant::now() < deadline, "heard only {heard:?}");
        if let Ok(m) = s.wait_for_message(Duration::from_millis(100)) {
            heard.insert(*m);
        }
    }
}

/// A subscription's limit reached is an error, not a silent non-match:
/// with room for 2 publishers and 20 in another process, the subscription
/// hears 2 of them and reports every other one in its incompatible-QoS
/// status (policy `ResourceLimits`; its log says which option to raise).
#[test]
fn publishers_past_a_subscriptions_limit_are_reported_not_silently_unmatched() {
    let domain = 228;
    let ctx = local_ctx(domain, None);
    let node = ctx.create_node("feeds_full_sub").unwrap();
    let s = feeds_subscription(&node, 2).unwrap();
    let _many = many_publishers(domain);
    let deadline = Instant::now() + LONG;
    loop {
        let st = s.incompatible_qos();
        if st.total_count == 18 {
            assert_eq!(st.last_policy, Some(QosPolicy::ResourceLimits));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} refused publishers reported, not 18",
            st.total_count
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut heard = std::collections::BTreeSet::new();
    while heard.len() < 2 {
        assert!(Instant::now() < deadline, "heard only {heard:?}");
        if let Ok(m) = s.wait_for_message(Duration::from_millis(100)) {
            heard.insert(*m);
        }
    }
    // Only the two connected ones, for good.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        if let Ok(m) = s.wait_for_message(Duration::from_millis(50)) {
            heard.insert(*m);
        }
    }
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert_eq!(s.incompatible_qos().total_count, 18);
}

/// A publisher shut out of a full subscription connects once a block
/// frees: room for 2, a process with 2 publishers takes both, a third in
/// another process is reported; when the first process is killed, the
/// subscription frees their blocks and the third is heard.
#[test]
fn a_shut_out_publisher_connects_when_a_block_frees() {
    let domain = 231;
    let ctx = local_ctx(domain, None);
    let node = ctx.create_node("feeds_free_sub").unwrap();
    let s = feeds_subscription(&node, 2).unwrap();
    let hear = |want: u32| {
        let deadline = Instant::now() + LONG;
        loop {
            assert!(Instant::now() < deadline, "never heard {want}");
            if s.wait_for_message(Duration::from_millis(100))
                .is_ok_and(|m| *m == want)
            {
                return;
            }
        }
    };
    let first = publishers_of(domain, Some("100,101"));
    hear(100);
    hear(101);
    let _third = publishers_of(domain, Some("200"));
    let deadline = Instant::now() + LONG;
    while s.incompatible_qos().total_count < 1 {
        assert!(Instant::now() < deadline, "the third was never reported");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(first);
    hear(200);
}
