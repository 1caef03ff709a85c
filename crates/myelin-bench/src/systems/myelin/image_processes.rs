//! myelin's low-latency mode across processes (`image --processes`): a
//! camera thread that spins until each frame is due loans the frame in
//! shared memory and publishes it; the viewer is another process whose
//! executor busy-polls ([`IdleWait::BusyPoll`]), a core each, as the
//! in-process `busy-poll` rows. In the warmed rows the camera calls
//! [`Publisher::warm`] shortly before each frame, as there (what it does
//! for a subscription in another process: see its documentation).
//!
//! Latency is publish call to callback entry, both ends reading
//! `CLOCK_MONOTONIC` (one clock for every process of the host): the
//! viewer measures, and hands its samples to the camera's process when
//! told to finish. CPU is the camera process's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, IdleWait};

use super::image::spin_to_frame;
use crate::harness::processes::{Helper, domain, shm_context};
use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns, period_of, rate_label, warmup_for};
use crate::scenarios::image::{Frame, ImageParams};
use crate::systems::Role;

const ENV: &str = "MYELIN_BENCH_VIEWER";

/// What the viewer prints when told to finish: frames received, then
/// each measured latency in ns.
const SAMPLES: &str = "samples";

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("image --processes", e)
}

/// The viewer process.
pub(super) const VIEWER: Role = Role {
    env: ENV,
    name: "viewer",
    run: viewer,
};

/// `domain,warmup`: receive `image_raw` on a busy-polling executor,
/// measuring frames from `warmup` on, until stdin closes; then print the
/// samples.
fn viewer(spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [domain, warmup] = parts[..] else {
        return Err(err(format!("bad {ENV} {spec:?}")));
    };
    let domain: u32 = domain.parse().map_err(err)?;
    let warmup: u64 = warmup.parse().map_err(err)?;
    let ctx = shm_context(domain, "image --processes")?;
    let node = ctx.create_node("viewer").map_err(err)?;
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let received = Arc::new(AtomicU64::new(0));
    let (l, r) = (latencies.clone(), received.clone());
    let _sub = node
        .create_subscription("image_raw", QoS::sensor_data(), move |m: &Blob| {
            let t = now_ns();
            let stamp = u64::from_le_bytes(m[0..8].try_into().expect("16-byte header"));
            let seq = u64::from_le_bytes(m[8..16].try_into().expect("16-byte header"));
            if seq >= warmup {
                l.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(t.saturating_sub(stamp));
            }
            r.fetch_add(1, Ordering::Relaxed);
        })
        .map_err(err)?;
    let mut exec = Executor::new();
    exec.add_node(&node).map_err(err)?;
    exec.set_idle_wait(IdleWait::BusyPoll);
    let stop = exec.stop_handle();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
        stop.stop();
    });
    println!("ready");
    exec.spin().map_err(err)?;
    let lat = latencies.lock().unwrap_or_else(|e| e.into_inner());
    let mut line = format!("{SAMPLES} {}", received.load(Ordering::Relaxed));
    for v in lat.iter() {
        line.push_str(&format!(" {v}"));
    }
    println!("{line}");
    Ok(())
}

/// The jobs for one frame size: unwarmed, then warmed.
pub(super) fn jobs(p: ImageParams, (label, bytes): Frame) -> Vec<Job> {
    [false, true]
        .into_iter()
        .map(|warm| {
            Job::new(format!("image/myelin/{} {label}", row(warm)), move || {
                run(p, label, bytes, warm)
            })
        })
        .collect()
}

fn row(warm: bool) -> &'static str {
    if warm {
        "processes busy-poll"
    } else {
        "processes busy-poll unwarmed"
    }
}

fn run(p: ImageParams, label: &str, bytes: usize, warm: bool) -> Result<Outcome, BenchError> {
    let domain = domain(11);
    let ctx = shm_context(domain, "image --processes")?;
    let node = ctx.create_node("camera").map_err(err)?;
    let warmup = warmup_for(p.frames);
    let total = p.frames + warmup;
    let publisher = node
        .create_publisher::<Blob>("image_raw", QoS::sensor_data())
        .map_err(err)?;
    let mut viewer =
        Helper::spawn("viewer_role", ENV, format!("{domain},{warmup}")).map_err(err)?;
    viewer.expect("ready").map_err(err)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while publisher.subscription_count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    if publisher.subscription_count() == 0 {
        return Err(err("the viewer process did not connect within 20 s"));
    }
    let period = period_of(p.rate)?;
    let meter = Meter::start();
    let start = Instant::now();
    for seq in 0..total {
        let due = start + period * (seq as u32 + 1);
        if warm {
            spin_to_frame(due, Some(&|| publisher.warm()));
        } else {
            spin_to_frame(due, None);
        }
        let mut frame = publisher.loan_slice(bytes).map_err(err)?;
        frame[8..16].copy_from_slice(&seq.to_le_bytes());
        frame[0..8].copy_from_slice(&now_ns().to_le_bytes());
        frame.publish().map_err(err)?;
    }
    // The last frame's way to the viewer (it is polling: microseconds).
    std::thread::sleep(Duration::from_millis(50));
    let line = viewer.finish(SAMPLES).map_err(err)?;
    let mut words = line.split_whitespace().skip(1);
    let received: u64 = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| err(format!("the viewer's samples: {line:?}")))?;
    let mut rec = LatencyRecorder::new();
    for w in words {
        rec.record(w.parse().map_err(err)?);
    }
    Ok(meter.finish(
        "image",
        "myelin",
        format!("{} {label}", row(warm)),
        rec,
        received,
        total.saturating_sub(received),
        None,
        vec![format!(
            "{bytes} B frames loaned in shared memory at {}; the viewer another process busy-polling; CPU is the camera process's",
            rate_label(p.rate)
        )],
    ))
}
