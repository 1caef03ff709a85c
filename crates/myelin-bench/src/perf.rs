//! `myelin perf ping` / `myelin perf pong`: ddsperf-style latency between
//! two processes (or two sides of one process), one row per second.
//!
//! The pong echoes every ping on `/myelin_perf/pong`; the ping sends
//! (back to back, or at `--rate`), waits for the echo, and records half the
//! round trip. Each second it reports count, min, mean, P50, P90, P99 and
//! max (the per-second rows of a ddsperf-style ping-pong), and at the end a summary over the whole
//! run with the CPU time and the voluntary / involuntary context switches
//! per message of each side (the pong reports its own when asked).
//!
//! Messages are [`Blob`]s of `--size` bytes (at least the 16-byte header:
//! sequence number and send time). `--loan` (the default) writes them in
//! place in shared memory; `--copy` builds them in private memory and lets
//! `publish` copy them in.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, Publisher, Subscription};
use serde::Serialize;

use crate::harness::stats::LatencyRecorder;
use crate::harness::sys::{CpuSnapshot, MachineInfo};

const PING: &str = "/myelin_perf/ping";
const PONG: &str = "/myelin_perf/pong";
const HEADER: usize = 16;
/// Sequence number of the "send me your usage" ping.
const STATS: u64 = u64::MAX;
/// The largest `--size`.
pub const MAX_SIZE: usize = 8 << 20;

/// How the two sides are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// One context, the intra-process manager (`--local` only).
    Intra,
    /// Shared memory (two processes, or two contexts with `--local`).
    Shm,
    /// The zenoh network transport, shared memory off (both sides reach
    /// the same zenoh router: `myelin router`, or `MYELIN_ZENOH_CONFIG`).
    Zenoh,
}

/// How a side waits for the next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    /// Sleep in the kernel (futex) until woken.
    Block,
    /// Spin on `take()`.
    Poll,
}

/// What went wrong; each names the flag or the situation.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// A flag has a value that cannot work.
    #[error("invalid --{flag}: {reason}")]
    InvalidArg {
        /// The flag, without dashes.
        flag: &'static str,
        /// Why.
        reason: String,
    },
    /// No pong answered the match within the timeout.
    #[error(
        "no pong on domain {domain} within {waited:?}: start `myelin perf pong --domain {domain}` (same --transport; for zenoh both sides need a router: `myelin router`), or use --local"
    )]
    NoPong {
        /// The domain.
        domain: u32,
        /// How long ping waited.
        waited: Duration,
    },
    /// The pong stopped answering mid-run.
    #[error("ping {seq}: no answer within {waited:?} (did the pong process stop?)")]
    NoReply {
        /// The unanswered ping.
        seq: u64,
        /// How long ping waited.
        waited: Duration,
    },
    /// SCHED_FIFO could not be set.
    #[error(
        "--rt-priority {priority}: {why}; run without --rt-priority to measure at normal priority"
    )]
    RtPriority {
        /// The requested priority.
        priority: i32,
        /// The OS error.
        why: String,
    },
    /// The CPU affinity could not be set.
    #[error("--cpu {cpu}: cannot pin to it: {why}")]
    Affinity {
        /// The requested CPU.
        cpu: usize,
        /// The OS error.
        why: String,
    },
    /// myelin itself failed (context, endpoint, publish).
    #[error("{0}")]
    Myelin(String),
}

fn m(e: impl std::fmt::Display) -> PerfError {
    PerfError::Myelin(e.to_string())
}

/// Pin the calling thread (and threads it creates later) to `cpu`.
pub fn set_affinity(cpu: usize) -> Result<(), PerfError> {
    myelin::ThreadPolicy::new()
        .cpus([cpu])
        .apply()
        .map(drop)
        .map_err(|e| PerfError::Affinity {
            cpu,
            why: e.to_string(),
        })
}

/// Switch the calling thread (and threads it creates later) to
/// SCHED_FIFO at `priority` (1..=99).
pub fn set_rt_priority(priority: i32) -> Result<(), PerfError> {
    let p = u8::try_from(priority)
        .ok()
        .filter(|p| (1..=myelin::sched::MAX_FIFO_PRIORITY).contains(p))
        .ok_or_else(|| PerfError::InvalidArg {
            flag: "rt-priority",
            reason: format!("{priority}: SCHED_FIFO priorities are 1 to 99"),
        })?;
    myelin::ThreadPolicy::new()
        .fifo(p)
        .apply()
        .map(drop)
        .map_err(|e| PerfError::RtPriority {
            priority,
            why: e.to_string(),
        })
}

/// The settings both sides share.
#[derive(Debug, Clone, Serialize)]
pub struct PerfConfig {
    /// intra / shm / zenoh.
    pub transport: Transport,
    /// block / poll.
    pub wait: WaitMode,
    /// Message size in bytes (0..=8 MiB; at least the 16-byte header is sent).
    pub size: usize,
    /// Pings per second; `None` = back to back.
    pub rate: Option<f64>,
    /// Measured time.
    pub duration: Duration,
    /// Unmeasured time before it.
    pub warmup: Duration,
    /// The ROS 2 domain.
    pub domain: u32,
    /// Loan messages in shared memory (else build and copy).
    pub loan: bool,
    /// Both sides in this process.
    pub local: bool,
    /// How long ping waits for a pong to match.
    pub match_timeout: Duration,
}

impl PerfConfig {
    /// Check the flags together.
    pub fn validate(&self) -> Result<(), PerfError> {
        if self.size > MAX_SIZE {
            return Err(PerfError::InvalidArg {
                flag: "size",
                reason: format!("{} bytes: at most {MAX_SIZE} (8 MiB)", self.size),
            });
        }
        if let Some(r) = self.rate
            && !(r.is_finite() && (1e-3..=1e6).contains(&r))
        {
            return Err(PerfError::InvalidArg {
                flag: "rate",
                reason: format!("{r} Hz: must be 0.001 to 1000000, or `unlimited`"),
            });
        }
        if self.transport == Transport::Intra && !self.local {
            return Err(PerfError::InvalidArg {
                flag: "transport",
                reason: "intra connects the two sides of one process: add --local".into(),
            });
        }
        if self.domain > myelin::MAX_DOMAIN_ID {
            return Err(PerfError::InvalidArg {
                flag: "domain",
                reason: format!("{}: ROS 2 domain ids are 0 to 232", self.domain),
            });
        }
        if self.duration.is_zero() {
            return Err(PerfError::InvalidArg {
                flag: "duration",
                reason: "must be more than 0 seconds".into(),
            });
        }
        Ok(())
    }

    fn wire_size(&self) -> usize {
        self.size.max(HEADER)
    }

    fn context(&self, signals: bool) -> Result<Context, PerfError> {
        Context::builder()
            .domain_id(self.domain)
            .handle_signals(signals)
            .shared_memory(self.transport == Transport::Shm)
            .network(self.transport == Transport::Zenoh)
            .build()
            .map_err(m)
    }
}

/// One row: a second of the run (or the whole run, for the summary). All
/// latencies are one way (round trip / 2) in microseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Row {
    /// Seconds since the measurement started, at the end of the row.
    pub t_s: f64,
    /// Round trips in the row.
    pub count: u64,
    /// Minimum.
    pub min_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Maximum.
    pub max_us: f64,
}

impl Row {
    fn of(t_s: f64, rec: &LatencyRecorder) -> Row {
        let s = rec.summary();
        let us = |ns: u64| ns as f64 / 1000.0;
        Row {
            t_s,
            count: s.count,
            min_us: us(s.min),
            mean_us: s.mean / 1000.0,
            p50_us: us(s.p50),
            p90_us: us(s.p90),
            p99_us: us(s.p99),
            max_us: us(s.max),
        }
    }

    /// The column header for [`Row::line`].
    pub fn header() -> String {
        format!(
            "{:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}   (one way, us)",
            "t(s)", "count", "min", "mean", "p50", "p90", "p99", "max"
        )
    }

    /// The row as printed (ns precision).
    pub fn line(&self) -> String {
        format!(
            "{:>7.2} {:>9} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            self.t_s,
            self.count,
            self.min_us,
            self.mean_us,
            self.p50_us,
            self.p90_us,
            self.p99_us,
            self.max_us
        )
    }
}

/// What one side spent per message.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct SideUsage {
    /// Messages this side handled (sent + received).
    pub messages: u64,
    /// CPU time (user + system, all threads) per message, ns.
    pub cpu_ns_per_msg: f64,
    /// Voluntary context switches (blocking waits) per message.
    pub voluntary_cs_per_msg: f64,
    /// Involuntary context switches (preemptions) per message.
    pub involuntary_cs_per_msg: f64,
}

impl SideUsage {
    fn new(messages: u64, cpu_ns: u64, vol: u64, invol: u64) -> SideUsage {
        let per = |x: u64| {
            if messages == 0 {
                0.0
            } else {
                x as f64 / messages as f64
            }
        };
        SideUsage {
            messages,
            cpu_ns_per_msg: per(cpu_ns),
            voluntary_cs_per_msg: per(vol),
            involuntary_cs_per_msg: per(invol),
        }
    }

    /// For printing.
    pub fn line(&self) -> String {
        format!(
            "{:.0} ns CPU, {:.3} voluntary + {:.3} involuntary context switches per message ({} messages)",
            self.cpu_ns_per_msg,
            self.voluntary_cs_per_msg,
            self.involuntary_cs_per_msg,
            self.messages
        )
    }
}

/// A whole `perf ping` run (what `--json` writes).
#[derive(Debug, Clone, Serialize)]
pub struct PerfReport {
    /// The machine.
    pub machine: MachineInfo,
    /// The settings.
    pub config: PerfConfig,
    /// One row per second.
    pub rows: Vec<Row>,
    /// The whole run.
    pub summary: Row,
    /// The ping side.
    pub ping: SideUsage,
    /// The pong side (None if it did not report, e.g. after Ctrl-C).
    pub pong: Option<SideUsage>,
    /// Stopped by Ctrl-C before `--duration`.
    pub interrupted: bool,
    /// Every sample, for plots (not serialised).
    #[serde(skip)]
    pub recorder: LatencyRecorder,
}

fn header_of(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("at least 16 bytes"))
}

/// Sends messages of the configured size, loaned or copied.
struct Sender {
    p: Publisher<Blob>,
    size: usize,
    loan: bool,
    scratch: Vec<u8>,
}

impl Sender {
    fn send(&mut self, words: &[u64]) -> Result<(), PerfError> {
        if self.loan {
            let mut l = self.p.loan_slice(self.size).map_err(m)?;
            for (i, w) in words.iter().enumerate() {
                l[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
            l.publish().map_err(m)
        } else {
            for (i, w) in words.iter().enumerate() {
                self.scratch[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
            self.p.publish(Blob::from(&self.scratch[..])).map_err(m)
        }
    }
}

fn endpoints(
    node: &Node,
    out: &str,
    inn: &str,
    cfg: &PerfConfig,
) -> Result<(Sender, Subscription<Blob>), PerfError> {
    let size = cfg.wire_size();
    // Big enough for the usage report.
    let size = if size < 40 { 40 } else { size };
    let p = node
        .create_publisher::<Blob>(out, QoS::keep_last(1))
        .map_err(m)?;
    let s = node
        .create_polling_subscription::<Blob>(inn, QoS::keep_last(1), Default::default())
        .map_err(m)?;
    Ok((
        Sender {
            p,
            size,
            loan: cfg.loan,
            scratch: vec![0u8; size],
        },
        s,
    ))
}

/// Wait for the next message, or `None` when `ctx` shuts down.
fn next(
    s: &Subscription<Blob>,
    wait: WaitMode,
    ctx: &Context,
    timeout: Duration,
) -> Result<Option<myelin::Received<Blob>>, Duration> {
    let start = Instant::now();
    match wait {
        WaitMode::Block => loop {
            match s.wait_for_message(Duration::from_millis(200)) {
                Ok(m) => return Ok(Some(m)),
                Err(myelin::WaitError::ContextShutDown(_)) => return Ok(None),
                Err(_) if start.elapsed() >= timeout => return Err(start.elapsed()),
                Err(_) => {}
            }
        },
        WaitMode::Poll => {
            let mut spins = 0u32;
            loop {
                if let Some(m) = s.take() {
                    return Ok(Some(m));
                }
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(4096) {
                    if ctx.is_shut_down() {
                        return Ok(None);
                    }
                    if start.elapsed() >= timeout {
                        return Err(start.elapsed());
                    }
                }
                std::hint::spin_loop();
            }
        }
    }
}

/// Run the pong side until `ctx` shuts down (Ctrl-C, or the caller).
/// `ready` is called once the endpoints exist.
pub fn pong(cfg: &PerfConfig, ctx: &Context, ready: impl FnOnce()) -> Result<u64, PerfError> {
    let node = ctx.create_node("perf_pong").map_err(m)?;
    let (mut tx, rx) = endpoints(&node, PONG, PING, cfg)?;
    ready();
    let mut echoed = 0u64;
    let mut since: Option<CpuSnapshot> = None;
    loop {
        let msg = match next(&rx, cfg.wait, ctx, Duration::from_secs(3600)) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(echoed),
            Err(_) => continue,
        };
        let seq = header_of(&msg);
        drop(msg);
        if seq == STATS {
            let u = match &since {
                Some(s) => CpuSnapshot::now().since(s),
                None => Default::default(),
            };
            tx.send(&[
                STATS,
                echoed * 2,
                u.cpu_ns,
                u.vol_ctx_switches,
                u.invol_ctx_switches,
            ])?;
            since = None;
            echoed = 0;
            continue;
        }
        if since.is_none() {
            since = Some(CpuSnapshot::now());
        }
        tx.send(&[seq])?;
        echoed += 1;
    }
}

/// Run the ping side (with the pong in this process if `cfg.local`).
/// `on_row` gets each per-second row as it completes; `stop` ends the run
/// early (as Ctrl-C does).
pub fn ping(
    cfg: &PerfConfig,
    stop: Option<Arc<AtomicBool>>,
    mut on_row: impl FnMut(&Row),
    on_waiting: impl FnOnce(),
) -> Result<PerfReport, PerfError> {
    cfg.validate()?;
    let ctx = cfg.context(!cfg.local)?;
    // --local: the pong shares the context (intra) or has its own (shm).
    let mut local_pong = None;
    if cfg.local {
        let pctx = if cfg.transport == Transport::Intra {
            ctx.clone()
        } else {
            cfg.context(false)?
        };
        let pcfg = cfg.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let c = pctx.clone();
        let h = std::thread::Builder::new()
            .name("perf-pong".into())
            .spawn(move || {
                pong(&pcfg, &c, || {
                    let _ = tx.send(());
                })
            })
            .map_err(m)?;
        let _ = rx.recv_timeout(Duration::from_secs(10));
        local_pong = Some((pctx, h));
    }
    let node = ctx.create_node("perf_ping").map_err(m)?;
    let (mut tx, rx) = endpoints(&node, PING, PONG, cfg)?;
    // Wait for the pong to be connected both ways.
    let start = Instant::now();
    let mut waiting = Some(on_waiting);
    while tx.p.subscription_count() == 0 || rx.matched_count() == 0 {
        if start.elapsed() > Duration::from_millis(200)
            && let Some(w) = waiting.take()
        {
            w();
        }
        if start.elapsed() >= cfg.match_timeout {
            return Err(PerfError::NoPong {
                domain: cfg.domain,
                waited: start.elapsed(),
            });
        }
        if ctx.is_shut_down() {
            return Err(m("interrupted while waiting for a pong"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let stopped = || ctx.is_shut_down() || stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed));
    let period = cfg.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let reply_timeout = Duration::from_secs(10).max(period.unwrap_or_default() * 4);
    let mut seq = 0u64;
    let mut interrupted = false;
    // Warm-up (not recorded), then the measured part.
    let round_trip = |seq: u64, tx: &mut Sender| -> Result<Option<u64>, PerfError> {
        let t0 = crate::harness::now_ns();
        tx.send(&[seq, t0])?;
        loop {
            match next(&rx, cfg.wait, &ctx, reply_timeout) {
                Ok(Some(msg)) if header_of(&msg) == seq => {
                    return Ok(Some(crate::harness::now_ns() - t0));
                }
                Ok(Some(_)) => {} // a stale echo (keep_last 1): wait for ours
                Ok(None) => return Ok(None),
                Err(waited) => return Err(PerfError::NoReply { seq, waited }),
            }
        }
    };
    let warm_end = Instant::now() + cfg.warmup;
    while Instant::now() < warm_end && !stopped() {
        if round_trip(seq, &mut tx)?.is_none() {
            break;
        }
        seq += 1;
    }
    // Reset the pong's usage counters so they cover the measured part only.
    if !stopped() {
        ask_usage(&mut tx, &rx, cfg.wait, &ctx)?;
    }
    let mut total = LatencyRecorder::with_time_series();
    let mut second = LatencyRecorder::new();
    let mut rows = Vec::new();
    let cpu0 = CpuSnapshot::now();
    let t_start = Instant::now();
    let mut next_row = t_start + Duration::from_secs(1);
    let end = t_start + cfg.duration;
    let mut sent = 0u64;
    let mut next_send = t_start;
    while Instant::now() < end {
        if stopped() {
            interrupted = true;
            break;
        }
        if let Some(p) = period {
            crate::harness::sleep_until(next_send);
            next_send += p;
        }
        let t_at = t_start.elapsed().as_secs_f64();
        match round_trip(seq, &mut tx)? {
            Some(rt) => {
                total.record_at(t_at, rt / 2);
                second.record(rt / 2);
                sent += 1;
            }
            None => {
                interrupted = true;
                break;
            }
        }
        seq += 1;
        let now = Instant::now();
        if now >= next_row {
            let row = Row::of(now.duration_since(t_start).as_secs_f64(), &second);
            on_row(&row);
            rows.push(row);
            second.reset();
            next_row += Duration::from_secs(1);
        }
    }
    if !second.is_empty() {
        let row = Row::of(t_start.elapsed().as_secs_f64(), &second);
        on_row(&row);
        rows.push(row);
    }
    let u = CpuSnapshot::now().since(&cpu0);
    let ping_usage = SideUsage::new(sent * 2, u.cpu_ns, u.vol_ctx_switches, u.invol_ctx_switches);
    // Ask the pong for its usage (not after Ctrl-C: the context is down).
    let pong_usage = if ctx.is_shut_down() {
        None
    } else {
        ask_usage(&mut tx, &rx, cfg.wait, &ctx)?
    };
    if let Some((pctx, h)) = local_pong {
        pctx.shutdown();
        let _ = h.join();
    }
    Ok(PerfReport {
        machine: MachineInfo::detect(),
        config: cfg.clone(),
        summary: Row::of(t_start.elapsed().as_secs_f64(), &total),
        rows,
        ping: ping_usage,
        pong: pong_usage,
        interrupted,
        recorder: total,
    })
}

/// Ask the pong for its usage since the last ask (and reset it).
fn ask_usage(
    tx: &mut Sender,
    rx: &Subscription<Blob>,
    wait: WaitMode,
    ctx: &Context,
) -> Result<Option<SideUsage>, PerfError> {
    tx.send(&[STATS])?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match next(rx, wait, ctx, Duration::from_secs(1)) {
            Ok(Some(msg)) if msg.len() >= 40 && header_of(&msg) == STATS => {
                let w = |i: usize| {
                    u64::from_le_bytes(msg[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
                };
                return Ok(Some(SideUsage::new(w(1), w(2), w(3), w(4))));
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    Ok(None)
}

/// Write `--plot` files: a latency histogram, latency over time (every
/// sample), and the per-second P50 / P99 / max lines.
pub fn write_plots(
    dir: &std::path::Path,
    report: &PerfReport,
) -> Result<Vec<std::path::PathBuf>, crate::PlotError> {
    let title = format!(
        "myelin perf {:?} {:?} {} B",
        report.config.transport, report.config.wait, report.config.size
    );
    let mut files = crate::write_plots(dir, "perf-ping", &report.recorder, &title)?;
    let rows: Vec<crate::RowPoint> = report
        .rows
        .iter()
        .map(|r| crate::RowPoint {
            t: r.t_s,
            p50: (r.p50_us * 1000.0) as u64,
            p99: (r.p99_us * 1000.0) as u64,
            max: (r.max_us * 1000.0) as u64,
        })
        .collect();
    let path = dir.join("perf-ping-rows.svg");
    crate::write_rows_plot(&path, &rows, &title)?;
    files.push(path);
    Ok(files)
}
