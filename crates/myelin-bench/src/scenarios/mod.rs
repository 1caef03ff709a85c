//! The benchmark scenarios of seeds 001, 002 and 004 (and the core library's
//! dispatch micro-benchmark), each runnable against several systems in the
//! same run.
//!
//! A scenario is planned into [`Job`]s (one per system and configuration);
//! the caller (the `myelin bench` command) runs them one after another, with
//! a progress bar, and collects one [`Outcome`] per job.

use std::time::{Duration, Instant};

use crate::report::Record;
use crate::stats::LatencyRecorder;
use crate::sys::{CpuSnapshot, CpuUsage, peak_rss_bytes};

pub mod ddsperf;
pub mod dispatch;
pub mod fanout;
#[cfg(feature = "grpc")]
mod grpc;
pub(crate) mod helper;
#[cfg(feature = "iceoryx2")]
pub mod iceoryx2_peer;
pub mod image;
pub mod ipc;
#[cfg(feature = "zenoh")]
pub mod net;
pub mod pingpong;
pub mod raw;
pub mod relay;
pub mod relay_procs;
pub mod rpc;
pub mod shm_api;
#[cfg(feature = "zenoh")]
pub mod zenoh_peer;

/// `CLOCK_MONOTONIC` in nanoseconds: the clock every timestamp in a
/// benchmark message uses. It is host-wide, so a stamp taken in one process
/// is comparable with a reading in another (multi-process topologies and
/// relays); the vDSO makes it as cheap as `Instant::now`.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes one timespec through a valid pointer;
    // CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The benchmark message: a publish timestamp, a sequence number and a
/// payload. Its size is `16 + data.len()` bytes.
#[derive(Clone, Debug, myelin::Message)]
#[message(name = "myelin_bench/msg/Stamped")]
pub struct Stamped {
    /// [`now_ns`] just before publish.
    pub stamp_ns: u64,
    /// 0, 1, 2, ...
    pub seq: u64,
    /// Payload.
    pub data: Vec<u8>,
}

/// Bytes of [`Stamped`] besides its payload.
pub const STAMPED_HEADER: usize = 16;

impl Stamped {
    /// A message of `size` bytes in total (at least the header).
    pub fn with_size(seq: u64, size: usize) -> Self {
        Stamped {
            stamp_ns: 0,
            seq,
            data: vec![0xA5; size.saturating_sub(STAMPED_HEADER)],
        }
    }
}

/// A benchmark failed or was misconfigured.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A flag has a value the scenario cannot use.
    #[error("invalid --{flag}: {reason}")]
    InvalidArg {
        /// The flag, without dashes.
        flag: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The scenario could not be set up (names the system).
    #[error("{system}: setup failed: {reason}")]
    Setup {
        /// The system.
        system: String,
        /// What failed.
        reason: String,
    },
    /// The run did not finish in time (names what was missing).
    #[error(
        "{system} {config}: timed out after {secs} s with {received} of {expected} messages received"
    )]
    Timeout {
        /// The system.
        system: String,
        /// The configuration.
        config: String,
        /// Seconds waited.
        secs: u64,
        /// Received so far.
        received: u64,
        /// Expected.
        expected: u64,
    },
}

impl BenchError {
    pub(crate) fn setup(system: &str, reason: impl std::fmt::Display) -> Self {
        BenchError::Setup {
            system: system.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// One measured run: the record for the report, and the samples for plots.
#[derive(Debug)]
pub struct Outcome {
    /// The summary.
    pub record: Record,
    /// All samples (with a time series) for plots.
    pub recorder: LatencyRecorder,
}

/// One planned run.
pub struct Job {
    /// `scenario/system/config`, for progress display.
    pub name: String,
    /// Runs the job.
    pub run: Box<dyn FnOnce() -> Result<Outcome, BenchError> + Send>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("name", &self.name).finish()
    }
}

impl Job {
    pub(crate) fn new(
        name: String,
        run: impl FnOnce() -> Result<Outcome, BenchError> + Send + 'static,
    ) -> Self {
        Job {
            name,
            run: Box::new(run),
        }
    }
}

/// The systems a scenario can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum System {
    /// myelin's intra-process path.
    Myelin,
    /// crossbeam channels: the in-process floor.
    Channel,
    /// The raw thread hand-off limits of this machine (spin and futex).
    Raw,
    /// zenoh 1.x peers over TCP loopback (feature `zenoh`).
    Zenoh,
    /// gRPC (tonic) over TCP loopback (feature `grpc`; `rpc` only).
    Grpc,
    /// iceoryx2 0.10 zero-copy IPC (feature `iceoryx2`; `ipc` only).
    Iceoryx2,
    /// CycloneDDS's `ddsperf` over UDP loopback (when installed;
    /// `pingpong` only).
    CycloneDds,
}

impl System {
    /// Every system this crate knows, in report order.
    pub const KNOWN: [System; 7] = [
        System::Myelin,
        System::Zenoh,
        System::Grpc,
        System::Iceoryx2,
        System::CycloneDds,
        System::Channel,
        System::Raw,
    ];

    /// The systems compiled into this build, in report order.
    pub fn all() -> Vec<System> {
        System::KNOWN
            .into_iter()
            .filter(|s| s.available())
            .collect()
    }

    /// Whether this build can measure the system.
    pub fn available(self) -> bool {
        match self {
            System::Zenoh => cfg!(feature = "zenoh"),
            System::Grpc => cfg!(feature = "grpc"),
            System::Iceoryx2 => cfg!(feature = "iceoryx2"),
            System::CycloneDds => ddsperf::available(),
            _ => true,
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            System::Myelin => "myelin",
            System::Channel => "channel",
            System::Raw => "raw",
            System::Zenoh => "zenoh",
            System::Grpc => "grpc",
            System::Iceoryx2 => "iceoryx2",
            System::CycloneDds => "cyclonedds",
        }
    }

    /// Parse a `--system` value.
    pub fn parse(s: &str) -> Result<System, BenchError> {
        let known = || System::KNOWN.map(|s| s.name()).join(", ");
        let sys = System::KNOWN
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| BenchError::InvalidArg {
                flag: "system",
                reason: format!("unknown system {s:?}; known: {}", known()),
            })?;
        if !sys.available() {
            let how = if sys == System::CycloneDds {
                "install ddsperf (Debian: apt-get install cyclonedds-tools)".to_string()
            } else {
                format!("enable the `{s}` feature")
            };
            return Err(BenchError::InvalidArg {
                flag: "system",
                reason: format!("{s:?} is not available in this build: {how}"),
            });
        }
        Ok(sys)
    }
}

/// Measures CPU and builds a [`Record`] at the end of a run.
pub(crate) struct Meter {
    cpu: CpuSnapshot,
}

impl Meter {
    pub(crate) fn start() -> Self {
        Meter {
            cpu: CpuSnapshot::now(),
        }
    }

    pub(crate) fn usage(&self) -> CpuUsage {
        CpuSnapshot::now().since(&self.cpu)
    }

    /// Finish: `messages` is what CPU time is divided by (deliveries).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish(
        &self,
        scenario: &str,
        system: &str,
        config: String,
        recorder: LatencyRecorder,
        messages: u64,
        lost: u64,
        hops: Option<u32>,
        notes: Vec<String>,
    ) -> Outcome {
        let cpu = self.usage();
        let latency = recorder.summary();
        let record = Record {
            scenario: scenario.to_string(),
            system: system.to_string(),
            config,
            count: latency.count,
            lost,
            latency_ns: latency,
            cpu_percent: cpu.cpu_percent,
            cpu_ns_per_msg: cpu.cpu_ns_per(messages.max(1)),
            // Each run is its own process (see the CLI), so this is the run's peak.
            rss_bytes: peak_rss_bytes(),
            hops,
            per_hop_ns: hops.map(|h| latency.scaled(f64::from(h.max(1)))),
            notes,
        };
        Outcome { record, recorder }
    }
}

/// Sleep until `deadline` (coarse sleep, then yield for the last stretch so
/// pacing is accurate to a few microseconds without burning a core).
pub fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep(left - Duration::from_micros(100));
        } else {
            std::thread::yield_now();
        }
    }
}

/// The period of a rate, refusing zero and absurd rates.
pub fn period_of(rate_hz: f64) -> Result<Duration, BenchError> {
    if !(rate_hz.is_finite() && rate_hz > 0.0 && rate_hz <= 1_000_000.0) {
        return Err(BenchError::InvalidArg {
            flag: "rate",
            reason: format!("{rate_hz} Hz: must be greater than 0 and at most 1000000"),
        });
    }
    Ok(Duration::from_secs_f64(1.0 / rate_hz))
}

/// Number of warm-up messages excluded from statistics for `count` measured.
pub fn warmup_for(count: u64) -> u64 {
    (count / 10).clamp(2, 100)
}

/// Human-readable rate for configs ("10Hz", "1kHz").
pub fn rate_label(rate: f64) -> String {
    if rate >= 1000.0 && (rate / 1000.0).fract() == 0.0 {
        format!("{}kHz", rate / 1000.0)
    } else {
        format!("{rate}Hz")
    }
}

/// Human-readable size ("64B", "4KiB", "4665600B").
pub fn size_label(size: usize) -> String {
    if size >= 1024 && size % (1024 * 1024) == 0 {
        format!("{}MiB", size / (1024 * 1024))
    } else if size >= 1024 && size % 1024 == 0 {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

/// The standard suite: every scenario at a modest size, every system.
/// `quick` shrinks counts for CI and smoke tests.
pub fn suite(quick: bool, systems: &[System]) -> Result<Vec<Job>, BenchError> {
    let mut jobs = dispatch::plan(
        dispatch::DispatchParams {
            samples: if quick { 100_000 } else { 200_000 },
        },
        systems,
    )?;
    for (rate, count, quick_count) in [(1000.0, 1000, 300), (100.0, 200, 60), (10.0, 30, 10)] {
        jobs.extend(relay::plan(
            relay::RelayParams {
                hops: 5,
                rate,
                count: if quick { quick_count } else { count },
                size: 64,
            },
            systems,
        )?);
    }
    jobs.extend(rpc::plan(
        relay::RelayParams {
            hops: 5,
            rate: 1000.0,
            count: if quick { 300 } else { 1000 },
            size: 64,
        },
        systems,
    )?);
    jobs.extend(fanout::plan(
        fanout::FanoutParams {
            rate: 100.0,
            duration: Duration::from_secs(if quick { 1 } else { 3 }),
            nodes: None,
        },
        systems,
    )?);
    jobs.extend(image::plan(
        image::ImageParams {
            rate: 30.0,
            frames: if quick { 20 } else { 60 },
        },
        systems,
    )?);
    Ok(jobs)
}
