//! A 1 kHz control loop on an executor, and how late its timer's ticks
//! start after they were due (`TimerInfo::lateness`): the number a
//! controller's timing budget is about. Run it plain, then
//! with the executor's thread pinned and under `SCHED_FIFO`, then with
//! idle CPUs kept awake, and compare (`myelin doctor` says which of these
//! this machine grants).
//!
//! ```text
//! cargo run --release -p myelin --example control_loop
//! cargo run --release -p myelin --example control_loop -- --fifo 80 --cpu 1
//! sudo target/release/examples/control_loop --wakeup-latency-us 0 --fifo 80 --cpu 1
//! ```
//! Flags: `--seconds S` (default 5), `--rate HZ` (default 1000), `--fifo P`
//! (SCHED_FIFO priority), `--cpu N` (run only on CPU N),
//! `--wakeup-latency-us US` (hold a CPU wake-up latency request).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{CpuWakeupLatency, ThreadPolicy, TimerInfo};

struct Args {
    seconds: f64,
    rate: f64,
    fifo: Option<u8>,
    cpu: Option<usize>,
    wakeup_us: Option<u64>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        seconds: 5.0,
        rate: 1000.0,
        fifo: None,
        cpu: None,
        wakeup_us: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--seconds" => a.seconds = value.parse().map_err(|e| bad(&e))?,
            "--rate" => a.rate = value.parse().map_err(|e| bad(&e))?,
            "--fifo" => a.fifo = Some(value.parse().map_err(|e| bad(&e))?),
            "--cpu" => a.cpu = Some(value.parse().map_err(|e| bad(&e))?),
            "--wakeup-latency-us" => a.wakeup_us = Some(value.parse().map_err(|e| bad(&e))?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    let seconds_ok = a.seconds > 0.0 && a.seconds <= 3600.0;
    let rate_ok = a.rate > 0.0 && a.rate <= 10_000.0;
    if !seconds_ok || !rate_ok {
        return Err("--seconds is 0 to 3600, --rate 0 to 10000".into());
    }
    Ok(a)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse()?;
    let _awake = args
        .wakeup_us
        .map(|us| CpuWakeupLatency::hold(Duration::from_micros(us)))
        .transpose()?;
    let mut policy = ThreadPolicy::new();
    if let Some(cpu) = args.cpu {
        policy = policy.cpus([cpu]);
    }
    if let Some(p) = args.fifo {
        policy = policy.fifo(p);
    }
    policy.validate()?;

    let ctx = Context::new();
    let node = ctx.create_node("controller")?;
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let ticks = (args.seconds * args.rate) as usize;
    // How late each tick started after it was due, in nanoseconds.
    let lateness = Arc::new(Mutex::new(Vec::with_capacity(ticks)));
    let l = lateness.clone();
    let _timer = node.create_timer_with_info(period, move |info: &TimerInfo| {
        let mut l = l.lock().unwrap_or_else(|e| e.into_inner());
        if l.len() < ticks {
            l.push(info.lateness().as_nanos() as u64);
        }
    })?;

    let mut exec = Executor::new();
    exec.add_node(&node)?;
    let stop = exec.stop_handle();
    let done = lateness.clone();
    let controller = std::thread::spawn(move || -> Result<f64, String> {
        let _saved = policy.apply().map_err(|e| e.to_string())?;
        let cpu0 = thread_cpu();
        let start = Instant::now();
        exec.spin_until(Duration::from_secs_f64(args.seconds * 2.0 + 5.0), || {
            done.lock().unwrap_or_else(|e| e.into_inner()).len() >= ticks
        })
        .map_err(|e| e.to_string())?;
        Ok((thread_cpu() - cpu0).as_secs_f64() / start.elapsed().as_secs_f64())
    });
    let busy = controller.join().map_err(|_| "the controller panicked")??;
    drop(stop);

    let mut l = lateness.lock().unwrap_or_else(|e| e.into_inner()).clone();
    l.sort_unstable();
    let at = |q: f64| l[((l.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    println!(
        "{} ticks at {} Hz; started after their due time by P50 {:.1} us, P90 {:.1} us, P99 {:.1} us, max {:.1} us; the controller thread busy {:.2}% of a core",
        l.len(),
        args.rate,
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        busy * 100.0
    );
    Ok(())
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes one timespec, which `t` is.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
