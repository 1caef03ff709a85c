//! The raw limits of this machine, measured beside every system in the
//! same run:
//!
//! * relay: one-way hand-off latency between two threads, by busy-spinning
//!   on an atomic and by a futex wake-up (`thread::park`/`unpark`); every
//!   cross-thread system is bounded below by one of these ([`threads`]);
//! * ipc (and `relay --processes`): the same between two processes, a
//!   futex ping-pong and a busy-spin ping-pong on words of a shared mapping
//!   ([`processes`]);
//! * dispatch: two back-to-back clock reads, the floor of any timestamped
//!   sample;
//! * image: one `memcpy` of the frame, what a copying waiter pays, and the
//!   futex hand-off between two threads at the frame rate, the floor of an
//!   executor thread woken for each frame.
//! * fanout: a thread that only sleeps until each tick at the graph's
//!   rate: what the tick's wake-up costs this machine's kernel, which
//!   every fan-out row pays once per tick ([`sleep_floor`]).

use std::time::Instant;

use super::Runs;
use crate::harness::stats::LatencyRecorder;
use crate::harness::{
    BenchError, Job, Meter, Outcome, now_ns, period_of, rate_label, sleep_until, warmup_for,
};
use crate::scenarios::dispatch::DispatchParams;
use crate::scenarios::fanout::{FanoutParams, SUBS_PER_TOPIC, TOPICS};
use crate::scenarios::image::{Frame, ImageParams};
use crate::scenarios::ipc::{IpcParams, Wait};
use crate::scenarios::relay::RelayParams;

mod processes;
pub(super) mod threads;

use threads::Handoff;

pub(super) const RUNS: Runs = Runs {
    dispatch: Some(dispatch_jobs),
    relay: Some(relay_jobs),
    relay_processes: Some(relay_processes_jobs),
    image: Some(image_jobs),
    ipc: Some(ipc_jobs),
    fanout: Some(fanout_jobs),
    ..Runs::NONE
};

/// fanout: the wake-up floor of a tick (see [`sleep_floor`]).
fn fanout_jobs(p: FanoutParams) -> Vec<Job> {
    vec![Job::new(
        format!("fanout/raw/sleep {}", rate_label(p.rate)),
        move || sleep_floor(p),
    )]
}

/// A thread that sleeps until each tick at `p.rate` for `p.duration` and
/// does nothing else; its latency column is how late each wake-up came
/// (one sample per tick). Its CPU is the kernel's sleep and wake-up per tick
/// (on a VM 40-50 us a tick: see BENCHMARKS.md, "What an idle tick
/// costs"), which a fan-out row pays once per tick whatever it delivers.
/// `cpu/msg` divides it by a tick's deliveries in the fan-out graph
/// (20 topics x 10 subscriptions): the part of each row's CPU per message
/// that is the wake-up alone.
fn sleep_floor(p: FanoutParams) -> Result<Outcome, BenchError> {
    let period = period_of(p.rate)?;
    let meter = Meter::start();
    let mut late = LatencyRecorder::new();
    let start = Instant::now();
    let mut ticks = 0u64;
    let mut due = start + period;
    while due.duration_since(start) <= p.duration {
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        late.record_duration(Instant::now().saturating_duration_since(due));
        ticks += 1;
        due += period;
    }
    let per_tick = (TOPICS * SUBS_PER_TOPIC) as u64;
    Ok(meter.finish(
        "fanout",
        "raw",
        format!("sleep {}", rate_label(p.rate)),
        late,
        ticks * per_tick,
        0,
        None,
        vec![format!(
            "{ticks} ticks, nothing else; latency is how late each wake-up came; cpu/msg is the tick's CPU / {per_tick} (a tick's deliveries in the fan-out graph)"
        )],
    ))
}

/// dispatch: the clock-read floor.
fn dispatch_jobs(p: DispatchParams) -> Vec<Job> {
    let n = p.samples;
    vec![Job::new("dispatch/raw/clock-read".into(), move || {
        clock_floor(n)
    })]
}

/// relay: the spin and futex hand-offs between two threads at the chain's
/// rate.
fn relay_jobs(p: RelayParams) -> Vec<Job> {
    [Handoff::Spin, Handoff::Futex]
        .into_iter()
        .map(|mode| {
            Job::new(format!("relay/raw/{}", mode.name()), move || {
                threads::handoff("relay", mode, p.rate, p.count)
            })
        })
        .collect()
}

/// `relay --processes`: a futex chain through as many processes at the
/// same rate (the floor of a blocking chain), and the two-process futex
/// and spin ping-pongs (at least 1000 round trips of 64 B), the limits of
/// a cross-process hop kept warm.
fn relay_processes_jobs(p: RelayParams) -> Vec<Job> {
    let mut jobs = vec![Job::new(
        format!("relay/raw/futex-chain {} 64B", rate_label(p.rate)),
        move || processes::chain(p),
    )];
    jobs.extend(ipc_jobs(IpcParams {
        count: p.count.max(1000),
        size: 64,
    }));
    jobs
}

/// image: one memcpy of the frame, and (once, with the first size) the
/// futex hand-off between two threads at the frame rate, the floor of an
/// executor thread woken for each frame, and the hand-off between two
/// spinning threads, the floor of the low-latency mode.
fn image_jobs(p: ImageParams, (label, bytes): Frame) -> Vec<Job> {
    let mut jobs = vec![Job::new(format!("image/raw/memcpy {label}"), move || {
        memcpy(p, label, bytes)
    })];
    if label == crate::scenarios::image::SIZES[0].0 {
        for mode in [Handoff::Futex, Handoff::SpinBoth] {
            jobs.push(Job::new(
                format!("image/raw/{} {}", mode.name(), rate_label(p.rate)),
                move || threads::handoff("image", mode, p.rate, p.frames),
            ));
        }
    }
    jobs
}

/// ipc: the futex and spin ping-pongs between two processes.
fn ipc_jobs(p: IpcParams) -> Vec<Job> {
    Wait::BOTH
        .into_iter()
        .map(|w| {
            let label = if w == Wait::Block { "futex" } else { "spin" };
            Job::new(format!("ipc/raw/{label}-pingpong 2 processes"), move || {
                processes::pingpong(p, w)
            })
        })
        .collect()
}

fn clock_floor(n: u64) -> Result<Outcome, BenchError> {
    let mut rec = LatencyRecorder::new();
    let meter = Meter::start();
    for _ in 0..n {
        let t0 = now_ns();
        let t1 = now_ns();
        rec.record(t1.saturating_sub(t0));
    }
    Ok(meter.finish(
        "dispatch",
        "raw",
        "clock-read".into(),
        rec,
        n,
        0,
        None,
        vec!["two back-to-back clock reads: included in every sample above".into()],
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The floor row reports one wake-up lateness per tick (so the
    /// verdict does not take it for a row where nothing arrived), and
    /// charges its CPU to the graph's deliveries.
    #[test]
    fn the_sleep_floor_has_a_sample_per_tick() {
        let p = FanoutParams {
            rate: 100.0,
            duration: Duration::from_millis(100),
            nodes: None,
        };
        let out = sleep_floor(p).unwrap();
        let r = &out.record;
        assert_eq!(r.count, 10, "{r:?}");
        assert_eq!(r.lost, 0);
        assert!(r.config.contains("sleep 100Hz"), "{}", r.config);
        assert!(r.notes[0].starts_with("10 ticks"), "{:?}", r.notes);
    }
}
