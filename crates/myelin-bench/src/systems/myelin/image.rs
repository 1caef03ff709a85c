//! myelin in the image pipeline: frames published shared from a camera
//! node to a viewer node that receives them in an executor callback (the
//! executor asleep between frames, anticipating them:
//! [`IdleWait::Anticipate`], or busy-polling with a camera thread that
//! spins between frames too and warms the path shortly before each frame:
//! the low-latency mode), in an inline callback (inside `publish`; the
//! camera sleeping between frames, or spinning and warming as in the
//! low-latency mode), or in a thread blocked in `wait_for_message`.
//!
//! The executor callback job also measures its floor, a raw futex
//! hand-off between two threads at the same rate, in the same process:
//! each frame is followed half a period later by a hand-off, so that both
//! see the same hour of this machine (their ratio is a goal; measured in
//! two jobs a minute apart it moved between 0.6x and 2.5x on this VM).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{IdleWait, ThreadPolicy};

use crate::harness::{
    BenchError, Job, Meter, Outcome, Stamped, period_of, rate_label, sleep_until, spin_until,
    warmup_for,
};
use crate::scenarios::image::{Frame, ImageParams, Pool, Samples};
use crate::systems::raw::threads::{Handoff, Receiver};

/// The jobs for one frame size: callback, anticipate, busy-poll (unwarmed,
/// then warmed), inline (sleeping camera, spinning and warmed, sleeping
/// and warmed after an early wake-up), waiter, and callback fifo when
/// asked for.
pub(super) fn jobs(p: ImageParams, (label, bytes): Frame) -> Vec<Job> {
    [
        ("callback", Mode::Callback),
        ("anticipate", Mode::Anticipate),
        ("busy-poll unwarmed", Mode::BusyPollUnwarmed),
        ("busy-poll", Mode::BusyPoll),
        ("inline", Mode::Inline),
        ("inline warmed", Mode::InlineWarmed),
        ("inline wake-ahead", Mode::InlineWakeAhead),
        ("waiter", Mode::Waiter),
    ]
    .into_iter()
    .chain(p.fifo.map(|prio| ("callback fifo", Mode::Fifo(prio))))
    .map(|(name, mode)| {
        Job::new(format!("image/myelin/{name} {label}"), move || {
            image(p, label, bytes, mode)
        })
    })
    .collect()
}

/// How long before a frame is due the low-latency camera warms the path:
/// long enough for the executor to run the rehearsal and be back to
/// polling, short enough that little evicts the lines again.
const WARM_AHEAD: Duration = Duration::from_micros(100);

/// The low-latency camera's wait for a frame: spin until `due`, calling
/// `warm` (a [`Publisher::warm`]) [`WARM_AHEAD`] before it when given.
pub(super) fn spin_to_frame(due: Instant, warm: Option<&dyn Fn()>) {
    if let Some(warm) = warm {
        spin_until(due - WARM_AHEAD);
        warm();
    }
    spin_until(due);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Callback,
    /// A callback whose executor anticipates the frames.
    Anticipate,
    /// A callback whose executor never sleeps, and a camera thread that
    /// spins until each frame is due rather than sleeping, and calls
    /// [`Publisher::warm`] [`WARM_AHEAD`] before it: the low-latency mode,
    /// a core each.
    BusyPoll,
    /// `BusyPoll` without the warm: what it takes off.
    BusyPollUnwarmed,
    /// A callback whose executor thread runs under `SCHED_FIFO` at this
    /// priority (asleep between frames, as `Callback`).
    Fifo(u8),
    Inline,
    /// `Inline` with the low-latency camera: it spins until each frame is
    /// due and calls [`Publisher::warm`] [`WARM_AHEAD`] before it.
    InlineWarmed,
    /// `Inline` with a camera that sleeps between frames but wakes
    /// [`WARM_AHEAD`] before each one, calls [`Publisher::warm`] and spins
    /// the rest: most of the warm's gain at a sleeping camera's CPU.
    InlineWakeAhead,
    Waiter,
}

fn image(p: ImageParams, label: &str, bytes: usize, mode: Mode) -> Result<Outcome, BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = super::local_context()?;
    let camera = ctx.create_node("camera").map_err(|e| setup(&e))?;
    let viewer = ctx.create_node("viewer").map_err(|e| setup(&e))?;
    let total = p.frames + warmup_for(p.frames);
    let samples = Samples::new(&p);
    let qos = QoS::sensor_data();
    let publisher = camera
        .create_publisher::<Stamped>("image_raw", qos)
        .map_err(|e| setup(&e))?;
    let anticipated = Arc::new(std::sync::Mutex::new(None));
    let (handle, stop, _sub) = match mode {
        Mode::Callback
        | Mode::Anticipate
        | Mode::BusyPoll
        | Mode::BusyPollUnwarmed
        | Mode::Fifo(_) => {
            let s = samples.clone();
            let sub = viewer
                .create_subscription("image_raw", qos, move |f: Arc<Stamped>| s.on_frame(&f))
                .map_err(|e| setup(&e))?;
            let mut exec = Executor::new();
            exec.add_node(&viewer).map_err(|e| setup(&e))?;
            match mode {
                Mode::Anticipate => exec.set_idle_wait(IdleWait::Anticipate),
                Mode::BusyPoll | Mode::BusyPollUnwarmed => exec.set_idle_wait(IdleWait::BusyPoll),
                _ => {}
            }
            let stop = exec.stop_handle();
            let a = anticipated.clone();
            let policy = match mode {
                Mode::Fifo(prio) => ThreadPolicy::new().fifo(prio),
                _ => ThreadPolicy::new(),
            };
            // Refused (no permission): the run fails with the kernel's
            // answer rather than measuring a normal thread as a real-time
            // one.
            let (applied_tx, applied) = std::sync::mpsc::channel();
            let h = std::thread::spawn(move || {
                let r = policy.apply().map(drop);
                let ok = r.is_ok();
                let _ = applied_tx.send(r);
                if !ok {
                    return;
                }
                let _ = exec.spin();
                *a.lock().unwrap_or_else(|e| e.into_inner()) = Some(exec.anticipation());
            });
            if let Ok(Err(e)) = applied.recv() {
                let _ = h.join();
                return Err(setup(&e));
            }
            (h, Some(stop), Some(sub))
        }
        Mode::Inline | Mode::InlineWarmed | Mode::InlineWakeAhead => {
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
    // The executor callback's floor, handed over between its frames.
    let floor = (mode == Mode::Callback).then(|| {
        Receiver::start(
            Handoff::Futex,
            total,
            warmup_for(p.frames),
            crate::harness::now_ns(),
        )
    });
    let meter = Meter::start();
    let start = Instant::now();
    for seq in 0..total {
        let due = start + period * (seq as u32 + 1);
        match mode {
            Mode::BusyPoll | Mode::InlineWarmed => spin_to_frame(due, Some(&|| publisher.warm())),
            Mode::BusyPollUnwarmed => spin_to_frame(due, None),
            Mode::InlineWakeAhead => {
                sleep_until(due - WARM_AHEAD);
                publisher.warm();
                spin_until(due);
            }
            _ => sleep_until(due),
        }
        let frame = pool.next(seq);
        publisher.publish_shared(frame).map_err(|e| setup(&e))?;
        if let Some(f) = &floor {
            sleep_until(due + period / 2);
            f.send(seq + 1);
        }
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
        Mode::Anticipate => "anticipate",
        Mode::BusyPoll => "busy-poll",
        Mode::BusyPollUnwarmed => "busy-poll unwarmed",
        Mode::Fifo(_) => "callback fifo",
        Mode::Inline => "inline",
        Mode::InlineWarmed => "inline warmed",
        Mode::InlineWakeAhead => "inline wake-ahead",
        Mode::Waiter => "waiter",
    };
    let mut notes = vec![format!(
        "{bytes} B frames published shared at {}",
        rate_label(p.rate)
    )];
    if mode == Mode::Anticipate
        && let Some(a) = *anticipated.lock().unwrap_or_else(|e| e.into_inner())
    {
        notes.push(format!(
            "the executor: {}",
            super::describe_anticipation(&a)
        ));
    }
    if pool.allocated > 0 {
        notes.push(format!(
            "{} frames were still held and re-allocated",
            pool.allocated
        ));
    }
    if floor.is_some() {
        notes.push(format!(
            "measured alternately with the futex hand-off row \"{}\" (half a period apart); CPU is the process's, both",
            floor_config(p, label)
        ));
    }
    let mut out = meter.finish(
        "image",
        "myelin",
        format!("{mode_name} {label}"),
        samples.take(),
        usage_frames,
        total.saturating_sub(usage_frames),
        None,
        notes,
    );
    if let Some(f) = floor {
        let rec = f.finish()?;
        let received = rec.count();
        out.more.push(meter.finish(
            "image",
            "raw",
            floor_config(p, label),
            rec,
            total,
            p.frames.saturating_sub(received),
            Some(1),
            vec![format!(
                "one-way futex hand-off between two threads, half a period after each frame of myelin's \"callback {label}\" row, in its process; CPU is the process's, both"
            )],
        ));
    }
    Ok(out)
}

/// The config of the futex hand-off measured beside the `callback` row of
/// frame size `label`.
fn floor_config(p: ImageParams, label: &str) -> String {
    format!(
        "{} {}, beside callback {label}",
        Handoff::Futex.name(),
        rate_label(p.rate)
    )
}
