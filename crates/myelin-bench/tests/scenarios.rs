//! Each scenario runs end to end at a tiny size for each system, and its
//! records count exactly what was sent: nothing silently lost in the harness.

use std::time::Duration;

use myelin_bench::harness::Job;
use myelin_bench::scenarios::{dispatch, fanout, image, relay, rpc};
use myelin_bench::scenarios::{
    dispatch::DispatchParams, fanout::FanoutParams, image::ImageParams, relay::RelayParams,
};
use myelin_bench::systems::{self, System};

/// The registry's systems of these names.
fn named(names: &[&str]) -> Vec<&'static System> {
    names.iter().map(|n| systems::parse(n).unwrap()).collect()
}

/// The in-process systems (zenoh has its own test below).
fn local() -> Vec<&'static System> {
    named(&["myelin", "channel", "raw"])
}

fn run(jobs: Vec<Job>) -> Vec<myelin_bench::Record> {
    jobs.into_iter()
        .flat_map(|j| {
            let name = j.name.clone();
            (j.run)()
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .records()
        })
        .collect()
}

#[test]
fn relay_counts_every_message_for_every_system() {
    let p = RelayParams {
        hops: 3,
        rate: 2000.0,
        count: 40,
        size: 256,
    };
    let recs = run(relay::plan(p, &local()).unwrap());
    // myelin x4 arrangements, channel, raw x2
    assert_eq!(recs.len(), 7);
    for r in &recs {
        assert_eq!(r.count, 40, "{} {}", r.system, r.config);
        assert_eq!(r.lost, 0, "{} {}", r.system, r.config);
        assert!(r.latency_ns.p50 > 0);
        let hop = r.per_hop_ns.expect("relay records carry per-hop figures");
        let h = r.hops.unwrap() as f64;
        assert!((hop.p50 as f64 - r.latency_ns.p50 as f64 / h).abs() <= 1.0);
    }
    assert!(recs.iter().any(|r| r.config.starts_with("inline")));
}

#[test]
fn rpc_answers_every_call_in_every_arrangement() {
    let p = RelayParams {
        hops: 3,
        rate: 1000.0,
        count: 40,
        size: 128,
    };
    let recs = run(rpc::plan(p, &local()).unwrap());
    assert_eq!(recs.len(), 4);
    for r in &recs {
        assert_eq!((r.count, r.lost), (40, 0), "{}", r.config);
        assert_eq!(r.hops, Some(3));
    }
}

#[test]
fn fanout_delivers_every_message_to_every_subscription() {
    let p = FanoutParams {
        rate: 200.0,
        duration: Duration::from_millis(300),
        nodes: None,
    };
    let recs = run(fanout::plan(p, &named(&["myelin"])).unwrap());
    assert_eq!(
        recs.len(),
        5,
        "nodes=1, nodes=10, inline nodes=10, nopub, cold nodes=10"
    );
    for r in &recs[..3] {
        assert_eq!(r.lost, 0, "{}", r.config);
        assert!(
            r.count > 0 && r.count % 10 == 0,
            "{}: {} deliveries",
            r.config,
            r.count
        );
    }
    // nodes=1 and nodes=10 come from one job that alternates them: both
    // rows, in that order, each with its own CPU.
    assert!(recs[0].config.starts_with("nodes=1 "), "{}", recs[0].config);
    assert!(
        recs[1].config.starts_with("nodes=10 "),
        "{}",
        recs[1].config
    );
    assert!(recs[..2].iter().all(|r| r.cpu_ns_per_msg > 0.0));
    assert!(recs[3].config.starts_with("nopub"));
    assert_cold_rounds(&recs[4], &p);
}

/// A cold row: every round's 200 deliveries counted (the first two rounds
/// not), none lost, the rounds' time per delivery in the CPU column.
fn assert_cold_rounds(r: &myelin_bench::Record, p: &FanoutParams) {
    assert!(r.config.contains("cold nodes=10"), "{}", r.config);
    assert_eq!(
        (r.count, r.lost),
        (fanout::cold_rounds(p) * 200, 0),
        "{}",
        r.config
    );
    assert!(r.cpu_ns_per_msg > 0.0 && r.cpu_percent == 0.0, "{r:?}");
}

#[test]
fn image_delivers_every_frame() {
    let p = ImageParams {
        rate: 200.0,
        frames: 8,
        fifo: None,
    };
    let recs = run(image::plan(p, &local()).unwrap());
    // per size: myelin callback (and the futex hand-off its job measures
    // between frames), anticipate, busy-poll (warmed and unwarmed), inline
    // (sleeping, spinning and warmed, waking ahead and warmed), waiter;
    // channel; raw memcpy; and once the raw futex hand-off and the
    // hand-off between two spinning threads at the frame rate
    assert_eq!(recs.len(), 24);
    assert!(recs.iter().any(|r| r.config == "inline warmed 320x240"));
    assert!(recs.iter().any(|r| r.config == "inline wake-ahead 320x240"));
    // The callback job's floor follows its row, as raw's.
    for label in ["1440x1080", "320x240"] {
        let at = recs
            .iter()
            .position(|r| r.system == "myelin" && r.config == format!("callback {label}"))
            .unwrap_or_else(|| panic!("no callback {label} row"));
        let floor = &recs[at + 1];
        assert_eq!(
            (floor.system.as_str(), floor.config.as_str()),
            (
                "raw",
                format!("futex-handoff 200Hz, beside callback {label}").as_str()
            )
        );
    }
    for r in &recs {
        assert_eq!(r.count, 8, "{} {}", r.system, r.config);
        assert_eq!(r.lost, 0, "{} {}", r.system, r.config);
    }
}

#[test]
fn dispatch_records_every_sample() {
    let recs = run(dispatch::plan(DispatchParams { samples: 2000 }, &local()).unwrap());
    // myelin: inline, the two loop rows (one job), 64 B and the frame with
    // 0 and 200 idle subscriptions; channel: three; raw: the clock read.
    assert_eq!(recs.len(), 11);
    let idle_loop = recs.iter().find(|r| r.config == "64B loop idle=200");
    assert!(idle_loop.is_some(), "the idle goal's row is there");
    for r in &recs {
        // The loop rows record one mean per 1000 hops, at least 20.
        let samples = if r.config.contains(" loop") { 20 } else { 2000 };
        assert_eq!(r.count, samples, "{} {}", r.system, r.config);
        assert_eq!(r.lost, 0, "{} {}", r.system, r.config);
    }
}

#[test]
fn bad_parameters_name_the_flag() {
    let e = relay::plan(
        RelayParams {
            hops: 3,
            rate: 0.0,
            count: 1,
            size: 64,
        },
        &local(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("--rate"), "{e}");
    let e = relay::plan(
        RelayParams {
            hops: 3,
            rate: 10.0,
            count: 1,
            size: 8,
        },
        &local(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("--size"), "{e}");
    let e = systems::parse("dds").unwrap_err();
    assert!(
        e.to_string().contains("--system") && e.to_string().contains("dds"),
        "{e}"
    );
}

#[cfg(feature = "zenoh")]
#[test]
fn zenoh_relay_and_fanout_count_every_message() {
    let p = RelayParams {
        hops: 3,
        rate: 1000.0,
        count: 30,
        size: 128,
    };
    let recs = run(relay::plan(p, &named(&["zenoh"])).unwrap());
    assert_eq!(recs.len(), 2, "shared session and session per node");
    for r in &recs {
        assert_eq!((r.count, r.lost), (30, 0), "{}", r.config);
    }
    let f = FanoutParams {
        rate: 100.0,
        duration: Duration::from_millis(300),
        nodes: None,
    };
    let recs = run(fanout::plan(f, &named(&["zenoh"])).unwrap());
    assert_eq!(recs.len(), 3);
    for r in &recs[..2] {
        assert_eq!(r.lost, 0, "{}", r.config);
        assert_eq!(r.count, 30 * 200, "{}", r.config);
    }
    assert_cold_rounds(&recs[2], &f);
}

#[cfg(feature = "grpc")]
#[test]
fn grpc_chain_answers_every_call() {
    let p = RelayParams {
        hops: 3,
        rate: 500.0,
        count: 30,
        size: 64,
    };
    let recs = run(rpc::plan(p, &named(&["grpc"])).unwrap());
    assert_eq!(recs.len(), 1);
    assert_eq!((recs[0].count, recs[0].lost), (30, 0));
    assert_eq!(recs[0].system, "grpc");
}
