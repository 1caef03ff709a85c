//! Seed 004's image experiment: RGB frames (1440x1080 and 320x240) at 30 Hz,
//! received by a callback subscriber (on an executor thread) or by a
//! synchronous waiting subscriber (a thread blocked in
//! `wait_for_message`). Latency is publish call to callback entry / wait
//! return. Frames come from a small pool and are published shared, as a
//! camera driver hands out its buffers: no copy anywhere.
//!
//! Baselines in the same run: a crossbeam channel handing the `Arc` to a
//! blocked thread, and one `memcpy` of the frame (what a copying waiter,
//! like LibXR's, pays).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;

use super::{
    BenchError, Job, Meter, Outcome, Stamped, System, now_ns, period_of, rate_label, sleep_until,
    warmup_for,
};
use crate::harness::stats::LatencyRecorder;

/// The two frame sizes of seed 004.
pub const SIZES: [(&str, usize); 2] = [("1440x1080", 1440 * 1080 * 3), ("320x240", 320 * 240 * 3)];

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct ImageParams {
    /// Frame rate, Hz.
    pub rate: f64,
    /// Frames measured per configuration.
    pub frames: u64,
}

impl ImageParams {
    /// Check the parameters.
    pub fn validate(&self) -> Result<(), BenchError> {
        period_of(self.rate)?;
        if self.frames == 0 {
            return Err(BenchError::InvalidArg {
                flag: "count",
                reason: "must be at least 1 frame".into(),
            });
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Callback,
    Inline,
    Waiter,
}

/// Plan the image jobs.
pub fn plan(p: ImageParams, systems: &[System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    let mut jobs = Vec::new();
    for s in systems {
        for (label, bytes) in SIZES {
            match s {
                System::Myelin => {
                    jobs.push(Job::new(
                        format!("image/myelin/callback {label}"),
                        move || myelin_image(p, label, bytes, Mode::Callback),
                    ));
                    jobs.push(Job::new(
                        format!("image/myelin/inline {label}"),
                        move || myelin_image(p, label, bytes, Mode::Inline),
                    ));
                    jobs.push(Job::new(
                        format!("image/myelin/waiter {label}"),
                        move || myelin_image(p, label, bytes, Mode::Waiter),
                    ));
                }
                System::Channel => {
                    jobs.push(Job::new(
                        format!("image/channel/waiter {label}"),
                        move || channel_image(p, label, bytes),
                    ));
                }
                System::Zenoh | System::Grpc | System::Iceoryx2 | System::CycloneDds => {} // not measured in this scenario
                System::Raw => {
                    jobs.push(Job::new(format!("image/raw/memcpy {label}"), move || {
                        memcpy(p, label, bytes)
                    }));
                }
            }
        }
    }
    Ok(jobs)
}

/// A pool of frames reused when no subscriber holds them any more.
struct Pool {
    frames: Vec<Arc<Stamped>>,
    allocated: u64,
}

impl Pool {
    fn new(bytes: usize) -> Self {
        Pool {
            frames: (0..4)
                .map(|i| Arc::new(Stamped::with_size(i, bytes)))
                .collect(),
            allocated: 0,
        }
    }

    /// The next frame, stamped now.
    fn next(&mut self, seq: u64) -> Arc<Stamped> {
        let slot = &mut self.frames[(seq % 4) as usize];
        if Arc::get_mut(slot).is_none() {
            // Still held downstream: a driver would allocate a new buffer.
            *slot = Arc::new((**slot).clone());
            self.allocated += 1;
        }
        let f = Arc::get_mut(slot).expect("unique after replacement");
        f.seq = seq;
        f.stamp_ns = now_ns();
        slot.clone()
    }
}

struct Samples {
    warmup: u64,
    t0: u64,
    rec: Mutex<LatencyRecorder>,
    received: AtomicU64,
}

impl Samples {
    fn new(p: &ImageParams) -> Arc<Self> {
        Arc::new(Samples {
            warmup: warmup_for(p.frames),
            t0: now_ns(),
            rec: Mutex::new(LatencyRecorder::with_time_series()),
            received: AtomicU64::new(0),
        })
    }

    fn on_frame(&self, f: &Stamped) {
        let now = now_ns();
        if f.seq >= self.warmup {
            self.rec
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record_at(
                    f.stamp_ns.saturating_sub(self.t0) as f64 / 1e9,
                    now.saturating_sub(f.stamp_ns),
                );
        }
        self.received.fetch_add(1, Ordering::Release);
    }

    fn take(&self) -> LatencyRecorder {
        std::mem::take(&mut *self.rec.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn myelin_image(
    p: ImageParams,
    label: &str,
    bytes: usize,
    mode: Mode,
) -> Result<Outcome, BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .map_err(|e| setup(&e))?;
    let camera = ctx.create_node("camera").map_err(|e| setup(&e))?;
    let viewer = ctx.create_node("viewer").map_err(|e| setup(&e))?;
    let total = p.frames + warmup_for(p.frames);
    let samples = Samples::new(&p);
    let qos = QoS::sensor_data();
    let publisher = camera
        .create_publisher::<Stamped>("image_raw", qos)
        .map_err(|e| setup(&e))?;
    let (handle, stop, _sub) = match mode {
        Mode::Callback => {
            let s = samples.clone();
            let sub = viewer
                .create_subscription("image_raw", qos, move |f: Arc<Stamped>| s.on_frame(&f))
                .map_err(|e| setup(&e))?;
            let mut exec = Executor::new();
            exec.add_node(&viewer).map_err(|e| setup(&e))?;
            let stop = exec.stop_handle();
            let h = std::thread::spawn(move || {
                let _ = exec.spin();
            });
            (h, Some(stop), Some(sub))
        }
        Mode::Inline => {
            let s = samples.clone();
            let sub = viewer
                .create_subscription_with(
                    "image_raw",
                    qos,
                    SubscriptionOptions::inline(),
                    move |f: Arc<Stamped>| s.on_frame(&f),
                )
                .map_err(|e| setup(&e))?;
            (std::thread::spawn(|| {}), None, Some(sub))
        }
        Mode::Waiter => {
            let sub = viewer
                .create_polling_subscription::<Stamped>(
                    "image_raw",
                    qos,
                    SubscriptionOptions::default(),
                )
                .map_err(|e| setup(&e))?;
            let s = samples.clone();
            let h = std::thread::spawn(move || {
                while s.received.load(Ordering::Acquire) < total {
                    match sub.wait_for_message(Duration::from_secs(5)) {
                        Ok(f) => s.on_frame(&f),
                        Err(_) => break,
                    }
                }
            });
            (h, None, None)
        }
    };
    let mut pool = Pool::new(bytes);
    let period = period_of(p.rate)?;
    let meter = Meter::start();
    let start = Instant::now();
    for seq in 0..total {
        sleep_until(start + period * (seq as u32 + 1));
        let frame = pool.next(seq);
        publisher.publish_shared(frame).map_err(|e| setup(&e))?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while samples.received.load(Ordering::Acquire) < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let usage_frames = samples.received.load(Ordering::Acquire);
    if let Some(s) = stop {
        s.stop();
    }
    drop(publisher);
    handle
        .join()
        .map_err(|_| setup(&"subscriber thread panicked"))?;
    let mode_name = match mode {
        Mode::Callback => "callback",
        Mode::Inline => "inline",
        Mode::Waiter => "waiter",
    };
    let mut notes = vec![format!(
        "{bytes} B frames published shared at {}",
        rate_label(p.rate)
    )];
    if pool.allocated > 0 {
        notes.push(format!(
            "{} frames were still held and re-allocated",
            pool.allocated
        ));
    }
    Ok(meter.finish(
        "image",
        "myelin",
        format!("{mode_name} {label}"),
        samples.take(),
        usage_frames,
        total.saturating_sub(usage_frames),
        None,
        notes,
    ))
}

fn channel_image(p: ImageParams, label: &str, bytes: usize) -> Result<Outcome, BenchError> {
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

fn memcpy(p: ImageParams, label: &str, bytes: usize) -> Result<Outcome, BenchError> {
    let src = vec![0x5Au8; bytes];
    let mut dst = vec![0u8; bytes];
    let total = p.frames + warmup_for(p.frames);
    let mut rec = LatencyRecorder::with_time_series();
    let period = period_of(p.rate)?;
    let meter = Meter::start();
    let start = Instant::now();
    let t0 = now_ns();
    for i in 0..total {
        sleep_until(start + period * (i as u32 + 1));
        let a = now_ns();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        let b = now_ns();
        if i >= warmup_for(p.frames) {
            rec.record_at(a.saturating_sub(t0) as f64 / 1e9, b - a);
        }
    }
    Ok(meter.finish(
        "image",
        "raw",
        format!("memcpy {label}"),
        rec,
        total,
        0,
        None,
        vec!["one copy of the frame: what a copying waiter pays".into()],
    ))
}
