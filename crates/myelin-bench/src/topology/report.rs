//! What a topology run reports: per subscription, received / late / too
//! late / lost and latency, the totals over all of them, CPU and memory,
//! and the table `myelin bench topology` prints.

use serde::{Deserialize, Serialize};

use super::runner::PartResult;
use crate::harness::stats::LatencyRecorder;
use crate::harness::sys::MachineInfo;

/// One subscription's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubResult {
    /// The node.
    pub node: String,
    /// The topic.
    pub topic: String,
    /// Message bytes.
    pub size: usize,
    /// Messages received.
    pub received: u64,
    /// Later than min(5 ms, 20% of the period).
    pub late: u64,
    /// Later than min(50 ms, the period) (not in the latency figures).
    pub too_late: u64,
    /// Gaps in tracking numbers.
    pub lost: u64,
    /// Latency (on-time and late messages).
    pub latency: crate::LatencySummary,
    /// Messages expected from the run's duration (rate x time).
    pub expected: u64,
}

/// A topology run.
#[derive(Debug, Clone, Serialize)]
pub struct TopologyReport {
    /// The machine.
    pub machine: MachineInfo,
    /// The file.
    pub file: String,
    /// Placement (`one process`).
    pub placement: String,
    /// Seconds measured.
    pub duration_s: f64,
    /// Per subscription.
    pub subscriptions: Vec<SubResult>,
    /// All subscriptions together.
    pub total: crate::LatencySummary,
    /// Total received / late / too late / lost.
    pub received: u64,
    /// Late.
    pub late: u64,
    /// Too late.
    pub too_late: u64,
    /// Lost.
    pub lost: u64,
    /// CPU time / wall time, percent of one core.
    pub cpu_percent_of_one_core: f64,
    /// The same as a share of all cores (iRobot's definition).
    pub cpu_percent_of_all_cores: f64,
    /// Of `cpu_percent_of_one_core`, the runner's own code on executor
    /// threads (filling payloads, statistics, the callbacks' busy work),
    /// percent of one core: what is left is myelin's.
    pub runner_percent_of_one_core: f64,
    /// Resident memory at the end (bytes).
    pub rss_bytes: u64,
    /// Stopped early (Ctrl-C).
    pub interrupted: bool,
    /// Every sample (for plots).
    #[serde(skip)]
    pub recorder: LatencyRecorder,
}

pub(super) fn report_of(file: &str, placement: String, parts: Vec<PartResult>) -> TopologyReport {
    let mut rec = LatencyRecorder::with_time_series();
    let mut subs = Vec::new();
    let (mut cpu_ns, mut runner_ns, mut rss, mut elapsed, mut interrupted) =
        (0u64, 0u64, 0u64, 0f64, false);
    for p in parts {
        for (t, ns) in &p.samples {
            rec.record_at(*t, *ns);
        }
        subs.extend(p.subscriptions);
        cpu_ns += p.cpu_ns;
        runner_ns += p.runner_ns;
        rss += p.rss_bytes;
        elapsed = elapsed.max(p.elapsed_s);
        interrupted |= p.interrupted;
    }
    let sum = |f: fn(&SubResult) -> u64| subs.iter().map(f).sum::<u64>();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let one = cpu_ns as f64 / (elapsed * 1e9).max(1.0) * 100.0;
    let runner = runner_ns as f64 / (elapsed * 1e9).max(1.0) * 100.0;
    TopologyReport {
        machine: MachineInfo::detect(),
        file: file.into(),
        placement,
        duration_s: elapsed,
        received: sum(|s| s.received),
        late: sum(|s| s.late),
        too_late: sum(|s| s.too_late),
        lost: sum(|s| s.lost),
        subscriptions: subs,
        total: rec.summary(),
        cpu_percent_of_one_core: one,
        cpu_percent_of_all_cores: one / cores,
        runner_percent_of_one_core: runner,
        rss_bytes: rss,
        interrupted,
        recorder: rec,
    }
}

/// The report as a table (one row per subscription, then the total).
pub fn render(r: &TopologyReport) -> String {
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
    let mut out = format!(
        "{:<14} {:<12} {:>8} {:>8} {:>6} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9}\n",
        "node",
        "topic",
        "size",
        "received",
        "late",
        "too_late",
        "lost",
        "mean us",
        "p50 us",
        "p99 us",
        "max us"
    );
    for s in &r.subscriptions {
        out += &format!(
            "{:<14} {:<12} {:>8} {:>8} {:>6} {:>8} {:>6} {:>9.1} {:>9} {:>9} {:>9}\n",
            s.node,
            s.topic,
            s.size,
            s.received,
            s.late,
            s.too_late,
            s.lost,
            s.latency.mean / 1000.0,
            us(s.latency.p50),
            us(s.latency.p99),
            us(s.latency.max)
        );
    }
    out += &format!(
        "total: {} received, {} late ({:.2}%), {} too late, {} lost; latency mean {:.1} us, p50 {} us, p99 {} us, max {} us\n",
        r.received,
        r.late,
        r.late as f64 * 100.0 / r.received.max(1) as f64,
        r.too_late,
        r.lost,
        r.total.mean / 1000.0,
        us(r.total.p50),
        us(r.total.p99),
        us(r.total.max)
    );
    out += &format!(
        "cpu: {:.2}% of one core ({:.2}% of all cores; the runner's own code {:.2}%, myelin and the OS {:.2}%); rss {:.1} MB; {} over {:.1} s{}\n",
        r.cpu_percent_of_one_core,
        r.cpu_percent_of_all_cores,
        r.runner_percent_of_one_core,
        (r.cpu_percent_of_one_core - r.runner_percent_of_one_core).max(0.0),
        r.rss_bytes as f64 / 1e6,
        r.placement,
        r.duration_s,
        if r.interrupted { " (interrupted)" } else { "" }
    );
    out
}
