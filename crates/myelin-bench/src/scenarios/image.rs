//! The image pipeline: RGB frames (1440x1080 and 320x240) at 30 Hz,
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

use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Stamped, now_ns, period_of, warmup_for};
use crate::systems::{self, System};

/// A frame size: its config label and its bytes.
pub type Frame = (&'static str, usize);

/// The two frame sizes of the image pipeline (RGB, 3 bytes a pixel).
pub const SIZES: [Frame; 2] = [("1440x1080", 1440 * 1080 * 3), ("320x240", 320 * 240 * 3)];

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct ImageParams {
    /// Frame rate, Hz.
    pub rate: f64,
    /// Frames measured per configuration.
    pub frames: u64,
    /// Also run myelin's executor callback with the executor thread under
    /// `SCHED_FIFO` at this priority (`callback fifo` rows).
    pub fifo: Option<u8>,
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

/// Plan the image jobs: per system, both frame sizes.
pub fn plan(p: ImageParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(systems, |r| {
        r.image
            .map(|run| SIZES.into_iter().flat_map(|frame| run(p, frame)).collect())
    }))
}

/// Plan the jobs of `image --processes` (the viewer in another process
/// than the camera): per system, both frame sizes.
pub fn plan_processes(p: ImageParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(systems, |r| {
        r.image_processes
            .map(|run| SIZES.into_iter().flat_map(|frame| run(p, frame)).collect())
    }))
}

/// A pool of frames reused when no subscriber holds them any more.
pub(crate) struct Pool {
    frames: Vec<Arc<Stamped>>,
    /// Frames allocated because every slot was still held downstream.
    pub(crate) allocated: u64,
}

impl Pool {
    /// Four frames of `bytes` bytes.
    pub(crate) fn new(bytes: usize) -> Self {
        Pool {
            frames: (0..4)
                .map(|i| Arc::new(Stamped::with_size(i, bytes)))
                .collect(),
            allocated: 0,
        }
    }

    /// The next frame, stamped now.
    pub(crate) fn next(&mut self, seq: u64) -> Arc<Stamped> {
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

/// What the viewer measured: latency after the warm-up, frames received.
pub(crate) struct Samples {
    warmup: u64,
    t0: u64,
    rec: Mutex<LatencyRecorder>,
    /// Frames received, warm-up included.
    pub(crate) received: AtomicU64,
}

impl Samples {
    /// Samples of the run of `p`.
    pub(crate) fn new(p: &ImageParams) -> Arc<Self> {
        Arc::new(Samples {
            warmup: warmup_for(p.frames),
            t0: now_ns(),
            rec: Mutex::new(LatencyRecorder::with_time_series()),
            received: AtomicU64::new(0),
        })
    }

    /// A frame reached the viewer.
    pub(crate) fn on_frame(&self, f: &Stamped) {
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

    /// The samples so far.
    pub(crate) fn take(&self) -> LatencyRecorder {
        std::mem::take(&mut *self.rec.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
