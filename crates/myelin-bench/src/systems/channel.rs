//! crossbeam channels, the in-process floor of every scenario they can
//! express: a send and a receive on one thread (dispatch), a thread per
//! stage of the relay chain, and a blocked thread receiving the shared
//! frames of the image pipeline.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Runs;
use crate::harness::stats::LatencyRecorder;
use crate::harness::{
    BenchError, Job, Meter, Outcome, Stamped, now_ns, period_of, sleep_until, warmup_for,
};
use crate::scenarios::dispatch::{DispatchParams, FRAME_1440X1080, LOOP, Msg64, looped, warm};
use crate::scenarios::image::{Frame, ImageParams, Pool, Samples};
use crate::scenarios::relay::{RelayParams, Sink};

pub(super) const RUNS: Runs = Runs {
    dispatch: Some(dispatch_jobs),
    relay: Some(relay_jobs),
    image: Some(image_jobs),
    ..Runs::NONE
};

/// dispatch: a 64 B value, then an `Arc` of a 1440x1080 frame.
fn dispatch_jobs(p: DispatchParams) -> Vec<Job> {
    let n = p.samples;
    vec![
        Job::new("dispatch/channel/64B".into(), move || dispatch_small(n)),
        Job::new("dispatch/channel/64B loop".into(), move || dispatch_loop(n)),
        Job::new("dispatch/channel/1440x1080 Arc".into(), move || {
            dispatch_frame(n)
        }),
    ]
}

/// relay: a thread per stage.
fn relay_jobs(p: RelayParams) -> Vec<Job> {
    vec![Job::new(
        format!("relay/channel/{}", p.config("thread-per-stage")),
        move || chain(p),
    )]
}

/// image: a thread blocked on the channel receives the frames.
fn image_jobs(p: ImageParams, (label, bytes): Frame) -> Vec<Job> {
    vec![Job::new(
        format!("image/channel/waiter {label}"),
        move || image(p, label, bytes),
    )]
}

fn dispatch_small(n: u64) -> Result<Outcome, BenchError> {
    let (tx, rx) = crossbeam_channel::bounded::<Msg64>(1);
    let mut rec = LatencyRecorder::new();
    let meter = Meter::start();
    for i in 0..n + warm(n) {
        let t0 = now_ns();
        tx.send(Msg64 {
            stamp_ns: t0,
            pad: [i; 7],
        })
        .map_err(|e| BenchError::setup("channel", e))?;
        let m = rx.recv().map_err(|e| BenchError::setup("channel", e))?;
        let t1 = now_ns();
        std::hint::black_box(m);
        if i >= warm(n) {
            rec.record(t1.saturating_sub(t0));
        }
    }
    Ok(meter.finish(
        "dispatch",
        "channel",
        "64B".into(),
        rec,
        n + warm(n),
        0,
        None,
        vec![],
    ))
}

/// A send and a receive, timed [`LOOP`] at a time: the mean per hop.
fn dispatch_loop(n: u64) -> Result<Outcome, BenchError> {
    let (tx, rx) = crossbeam_channel::bounded::<Msg64>(1);
    let meter = Meter::start();
    let (rec, hops) = looped(n, |i| {
        tx.send(Msg64 {
            stamp_ns: i,
            pad: [i; 7],
        })
        .map_err(|e| BenchError::setup("channel", e))?;
        let m = rx.recv().map_err(|e| BenchError::setup("channel", e))?;
        std::hint::black_box(m);
        Ok(())
    })?;
    Ok(meter.finish(
        "dispatch",
        "channel",
        "64B loop".into(),
        rec,
        hops,
        0,
        None,
        vec![format!(
            "{LOOP} send + recv in a row per sample; latency = the mean per hop"
        )],
    ))
}

fn dispatch_frame(n: u64) -> Result<Outcome, BenchError> {
    let (tx, rx) = crossbeam_channel::bounded::<Arc<Stamped>>(1);
    let frame = Arc::new(Stamped::with_size(0, FRAME_1440X1080));
    let mut rec = LatencyRecorder::new();
    let meter = Meter::start();
    for i in 0..n + warm(n) {
        let f = frame.clone();
        let t0 = now_ns();
        tx.send(f).map_err(|e| BenchError::setup("channel", e))?;
        let m = rx.recv().map_err(|e| BenchError::setup("channel", e))?;
        let t1 = now_ns();
        std::hint::black_box(&m);
        if i >= warm(n) {
            rec.record(t1.saturating_sub(t0));
        }
    }
    Ok(meter.finish(
        "dispatch",
        "channel",
        "1440x1080 Arc".into(),
        rec,
        n + warm(n),
        0,
        None,
        vec![],
    ))
}

fn chain(p: RelayParams) -> Result<Outcome, BenchError> {
    let total = p.total();
    let sink = Sink::new(&p);
    let (first_tx, mut rx) = crossbeam_channel::unbounded::<Stamped>();
    let mut handles = Vec::new();
    for _ in 0..p.hops - 1 {
        let (tx, next_rx) = crossbeam_channel::unbounded::<Stamped>();
        let my_rx = std::mem::replace(&mut rx, next_rx);
        handles.push(std::thread::spawn(move || {
            for m in my_rx {
                if tx.send(m).is_err() {
                    break;
                }
            }
        }));
    }
    let s = sink.clone();
    handles.push(std::thread::spawn(move || {
        for m in rx {
            s.on_message(&m);
        }
    }));
    let meter = Meter::start();
    let t0 = now_ns();
    let period = period_of(p.rate)?;
    let start = Instant::now();
    for seq in 0..total {
        sleep_until(start + period * (seq as u32 + 1));
        let mut m = Stamped::with_size(seq, p.size);
        m.stamp_ns = now_ns();
        if first_tx.send(m).is_err() {
            break;
        }
    }
    drop(first_tx);
    for h in handles {
        h.join()
            .map_err(|_| BenchError::setup("channel", "stage thread panicked"))?;
    }
    let received = sink.received();
    Ok(meter.finish(
        "relay",
        "channel",
        p.config("thread-per-stage"),
        sink.recorder(t0),
        received * u64::from(p.hops),
        total - received,
        Some(p.hops),
        vec![],
    ))
}

fn image(p: ImageParams, label: &str, bytes: usize) -> Result<Outcome, BenchError> {
    let total = p.frames + warmup_for(p.frames);
    let samples = Samples::new(&p);
    let (tx, rx) = crossbeam_channel::bounded::<Arc<Stamped>>(4);
    let s = samples.clone();
    let h = std::thread::spawn(move || {
        for f in rx {
            s.on_frame(&f);
        }
    });
    let mut pool = Pool::new(bytes);
    let period = period_of(p.rate)?;
    let meter = Meter::start();
    let start = Instant::now();
    for seq in 0..total {
        sleep_until(start + period * (seq as u32 + 1));
        let frame = pool.next(seq);
        tx.send(frame)
            .map_err(|e| BenchError::setup("channel", e))?;
    }
    drop(tx);
    h.join()
        .map_err(|_| BenchError::setup("channel", "receiver panicked"))?;
    let got = samples.received.load(Ordering::Acquire);
    Ok(meter.finish(
        "image",
        "channel",
        format!("waiter {label}"),
        samples.take(),
        got,
        total.saturating_sub(got),
        None,
        vec![],
    ))
}
