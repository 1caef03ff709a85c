//! One run of the suite: planned as a [`Job`], measured with a `Meter`,
//! finished as an [`Outcome`] (the report's [`Record`] and the samples for
//! plots), or failed with a [`BenchError`] that names the flag or the
//! system.

use super::report::Record;
use super::stats::LatencyRecorder;
use super::sys::{CpuSnapshot, CpuUsage, peak_rss_bytes};

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
    /// Further rows the same job measured: rows compared with each other
    /// in a goal, measured alternately in one process so that what the
    /// machine does meanwhile falls on both (see `fanout`'s paired job).
    pub more: Vec<Outcome>,
}

impl Outcome {
    /// This outcome's record and those of [`more`](Self::more), in order.
    ///
    /// ```
    /// use myelin_bench::harness::Outcome;
    /// use myelin_bench::{LatencyRecorder, Record};
    /// let row = |config: &str| Outcome {
    ///     record: Record {
    ///         scenario: "fanout".into(),
    ///         system: "myelin".into(),
    ///         config: config.into(),
    ///         count: 0,
    ///         lost: 0,
    ///         latency_ns: LatencyRecorder::new().summary(),
    ///         cpu_percent: 0.0,
    ///         cpu_ns_per_msg: 0.0,
    ///         rss_bytes: 0,
    ///         hops: None,
    ///         per_hop_ns: None,
    ///         notes: Vec::new(),
    ///     },
    ///     recorder: LatencyRecorder::new(),
    ///     more: Vec::new(),
    /// };
    /// let mut paired = row("nodes=1");
    /// paired.more.push(row("nodes=10"));
    /// let configs: Vec<String> = paired.records().into_iter().map(|r| r.config).collect();
    /// assert_eq!(configs, ["nodes=1", "nodes=10"]);
    /// ```
    pub fn records(self) -> Vec<Record> {
        let mut out = vec![self.record];
        out.extend(self.more.into_iter().flat_map(Outcome::records));
        out
    }
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

    /// [`finish`](Self::finish) with CPU usage measured elsewhere (the sum
    /// of a paired job's slices).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_with(
        cpu: CpuUsage,
        scenario: &str,
        system: &str,
        config: String,
        recorder: LatencyRecorder,
        messages: u64,
        lost: u64,
        notes: Vec<String>,
    ) -> Outcome {
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
            // Each job is its own process (see the CLI), so this is the
            // job's peak (a paired job's rows share it).
            rss_bytes: peak_rss_bytes(),
            hops: None,
            per_hop_ns: None,
            notes,
        };
        Outcome {
            record,
            recorder,
            more: Vec::new(),
        }
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
        let mut out = Self::finish_with(
            self.usage(),
            scenario,
            system,
            config,
            recorder,
            messages,
            lost,
            notes,
        );
        out.record.hops = hops;
        out.record.per_hop_ns = hops.map(|h| out.record.latency_ns.scaled(f64::from(h.max(1))));
        out
    }
}
