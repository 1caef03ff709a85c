//! The two-process scenario end to end (its own test binary: the scenario
//! forks, and a fork is safest with few threads around).

use myelin_bench::scenarios::ipc::{IpcParams, plan};
use myelin_bench::systems::{self, System};

/// The pong process of the API ping-pong is this test binary run again
/// with `MYELIN_BENCH_PONG` set.
#[test]
fn pong_role() {
    myelin_bench::child_if_requested();
}

/// A relay process of `relay --processes` (`MYELIN_BENCH_RELAY`).
#[test]
fn relay_role() {
    myelin_bench::child_if_requested();
}

/// The viewer process of `image --processes` (`MYELIN_BENCH_VIEWER`).
#[test]
fn viewer_role() {
    myelin_bench::child_if_requested();
}

/// The iceoryx2 pong (`MYELIN_BENCH_IOX2`).
#[cfg(feature = "iceoryx2")]
#[test]
fn iox2_role() {
    myelin_bench::child_if_requested();
}

/// A stage of `bench net` (`MYELIN_BENCH_NET`).
#[cfg(feature = "zenoh")]
#[test]
fn net_role() {
    myelin_bench::child_if_requested();
}

/// The transient-local publisher of `bench net`'s late-joiner rows
/// (`MYELIN_BENCH_LATE_JOINER`).
#[cfg(feature = "zenoh")]
#[test]
fn late_joiner_role() {
    myelin_bench::child_if_requested();
}

/// The registry's systems of these names.
fn named(names: &[&str]) -> Vec<&'static System> {
    names.iter().map(|n| systems::parse(n).unwrap()).collect()
}

fn helper() -> bool {
    [
        "MYELIN_BENCH_PONG",
        "MYELIN_BENCH_RELAY",
        "MYELIN_BENCH_VIEWER",
        "MYELIN_BENCH_IOX2",
        "MYELIN_BENCH_NET",
        "MYELIN_BENCH_LATE_JOINER",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

#[cfg(feature = "iceoryx2")]
#[test]
fn the_iceoryx2_peer_ping_pongs_in_both_modes() {
    if helper() {
        return;
    }
    let jobs = plan(
        IpcParams {
            count: 200,
            size: 64,
        },
        &named(&["iceoryx2"]),
    )
    .unwrap();
    assert_eq!(jobs.len(), 2);
    for j in jobs {
        let name = j.name.clone();
        let r = (j.run)().unwrap_or_else(|e| panic!("{name}: {e}")).record;
        assert_eq!((r.count, r.lost), (200, 0), "{name}");
    }
}

#[test]
fn a_relay_chain_across_processes_delivers_every_message() {
    if helper() {
        return;
    }
    let p = myelin_bench::scenarios::relay::RelayParams {
        hops: 3,
        rate: 500.0,
        count: 100,
        size: 64,
    };
    let jobs =
        myelin_bench::scenarios::relay::plan_processes(p, &named(&["myelin", "raw"])).unwrap();
    // myelin blocking and anticipating, the raw futex chain and the two
    // raw ping-pongs.
    let names: Vec<String> = jobs.iter().map(|j| j.name.clone()).collect();
    assert_eq!(jobs.len(), 5, "{names:?}");
    for job in jobs.into_iter().filter(|j| j.name.starts_with("relay/")) {
        let name = job.name.clone();
        let r = (job.run)().unwrap_or_else(|e| panic!("{name}: {e}")).record;
        assert_eq!((r.count, r.lost), (100, 0), "{name}: every message");
        assert_eq!(r.hops, Some(3), "{name}");
    }
}

#[test]
fn the_low_latency_mode_across_processes_delivers_every_frame() {
    if helper() {
        return;
    }
    let p = myelin_bench::scenarios::image::ImageParams {
        rate: 200.0,
        frames: 40,
        fifo: None,
    };
    let jobs = myelin_bench::scenarios::image::plan_processes(p, &named(&["myelin"])).unwrap();
    let names: Vec<String> = jobs.iter().map(|j| j.name.clone()).collect();
    // Unwarmed and warmed, for both frame sizes.
    assert_eq!(jobs.len(), 4, "{names:?}");
    for job in jobs {
        let name = job.name.clone();
        let r = (job.run)().unwrap_or_else(|e| panic!("{name}: {e}")).record;
        // Measured frames (the warm-up's are not counted), none lost.
        assert_eq!((r.count, r.lost), (40, 0), "{name}: every frame");
        assert!(r.latency_ns.p50 > 0, "{name}");
    }
}

#[test]
fn ipc_round_trips_complete_for_the_api_the_ring_and_the_raw_limits() {
    if helper() {
        return; // we are a helper process: its role test runs instead
    }
    let jobs = plan(
        IpcParams {
            count: 200,
            size: 512,
        },
        &named(&["myelin", "raw"]),
    )
    .unwrap();
    assert_eq!(jobs.len(), 6);
    for j in jobs {
        let name = j.name.clone();
        let r = (j.run)().unwrap_or_else(|e| panic!("{name}: {e}")).record;
        assert_eq!((r.count, r.lost), (200, 0), "{name}");
        assert!(r.latency_ns.p50 > 0, "{name}");
    }
    let err = plan(IpcParams { count: 1, size: 0 }, &named(&["myelin"])).unwrap_err();
    assert!(err.to_string().contains("--size"), "{err}");
}

#[test]
fn ddsperf_runs_on_loopback_and_its_rows_become_a_record() {
    if helper() {
        return;
    }
    let Ok(cyclonedds) = systems::parse("cyclonedds") else {
        eprintln!(
            "skipped: ddsperf is not installed (Debian: cyclonedds-tools; .ci/run installs it)"
        );
        return;
    };
    let mut jobs = myelin_bench::scenarios::pingpong::plan(
        myelin_bench::scenarios::pingpong::PingPongParams {
            count: 1,
            sizes: vec![64],
            ddsperf_secs: 3,
        },
        &[cyclonedds],
    )
    .unwrap();
    assert_eq!(jobs.len(), 1);
    let job = jobs.remove(0);
    let r = (job.run)().unwrap().record;
    assert_eq!(r.system, "cyclonedds");
    assert!(r.count > 0);
    assert!(r.latency_ns.p50 > 0 && r.latency_ns.p50 <= r.latency_ns.max);
}

#[cfg(feature = "zenoh")]
#[test]
fn net_rings_over_a_zenoh_router_complete_for_myelin_and_raw_zenoh() {
    if helper() {
        return;
    }
    let jobs = myelin_bench::scenarios::net::plan(
        myelin_bench::scenarios::net::NetParams {
            count: 100,
            size: 64,
            hosts: false,
        },
        &named(&["myelin", "zenoh"]),
    )
    .unwrap();
    // pingpong and relay, for myelin (blobs and CDR images) and the two raw
    // zenoh threadings, and the three service round trips (myelin client,
    // raw get to a myelin server, raw get/queryable), and the late joiner's
    // first and last sample for myelin and raw zenoh (5 rounds each).
    assert_eq!(jobs.len(), 15);
    for j in jobs {
        let name = j.name.clone();
        let r = (j.run)().unwrap_or_else(|e| panic!("{name}: {e}")).record;
        let want = if name.contains("late joiner") { 5 } else { 100 };
        assert_eq!((r.count, r.lost), (want, 0), "{name}");
        assert!(r.latency_ns.p50 > 0, "{name}");
    }
}
