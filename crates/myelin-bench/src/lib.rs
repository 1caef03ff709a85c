//! `myelin-bench`: myelin's benchmark suite.
//!
//! The suite runs benchmark *scenarios* (ping-pong, fan-out, chains, ...)
//! against myelin and against peer systems side by side, and reports latency
//! percentiles, CPU cost and memory for each run.
//!
//! The crate is laid out by role:
//!
//! - [`harness`]: what every run shares: a planned run ([`harness::Job`])
//!   and its result, the clock and pacing, [`LatencyRecorder`] (HDR
//!   histogram at ns resolution plus an optional bounded latency-over-time
//!   series) and [`LatencySummary`], process CPU time, context switches and
//!   RSS ([`CpuSnapshot`], [`CpuUsage`]) with the [`MachineInfo`] report
//!   header, [`Record`]/[`Report`] with JSON persistence and an aligned
//!   plain-text table ([`render_table`]), and SVG plots ([`write_plots`]).
//! - [`scenarios`]: the experiments (dispatch, relay, rpc, fanout, image,
//!   ipc, pingpong, net): their parameters and what every system's run
//!   shares, planned as jobs for the chosen systems.
//! - [`systems`]: the registry of systems measured side by side (myelin,
//!   zenoh, gRPC, iceoryx2, CycloneDDS, channels, this machine's raw
//!   limits), each a module with its runs of every scenario it measures;
//!   peers behind their cargo feature at their line of the table.
//! - [`topology`]: whole robot graphs from a topology file.
//! - [`perf`]: `myelin perf ping` / `pong`, one row per second.
//! - [`testbed`]: hosts as network namespaces on one machine, with link
//!   faults, for multi-host tests and `bench net --hosts`.
//!
//! # Example
//!
//! ```
//! use myelin_bench::{CpuSnapshot, LatencyRecorder, MachineInfo, Record, Report, render_table};
//!
//! let mut rec = LatencyRecorder::new();
//! let cpu_before = CpuSnapshot::now();
//! for i in 1..=10_000u64 {
//!     // A real scenario records measured send-to-receive times here.
//!     rec.record(1_000 + i % 100);
//! }
//! let cpu = CpuSnapshot::now().since(&cpu_before);
//!
//! let latency = rec.summary();
//! assert_eq!(latency.count, 10_000);
//! assert!(latency.p50 >= 1_000 && latency.p99 <= latency.max);
//!
//! let record = Record {
//!     scenario: "example".into(),
//!     system: "none".into(),
//!     config: "in-loop".into(),
//!     count: latency.count,
//!     lost: 0,
//!     latency_ns: latency,
//!     cpu_percent: cpu.cpu_percent,
//!     cpu_ns_per_msg: cpu.cpu_ns_per(latency.count),
//!     rss_bytes: myelin_bench::current_rss_bytes(),
//!     hops: Some(2),
//!     per_hop_ns: Some(latency.scaled(2.0)),
//!     notes: vec![],
//! };
//! let table = render_table(std::slice::from_ref(&record));
//! assert!(table.starts_with("scenario"));
//!
//! let report = Report { header: MachineInfo::default(), records: vec![record] };
//! let json = serde_json::to_string(&report).unwrap();
//! assert!(json.contains("\"p99\""));
//! ```

pub mod harness;
pub mod perf;
pub mod scenarios;
pub mod systems;
pub mod testbed;
pub mod topology;

pub use harness::plot::{
    PlotError, RowPoint, sanitize_stem, write_comparison_charts, write_plots, write_rows_plot,
};
pub use harness::report::{Record, Report, ReportError, format_ns, render_legend, render_table};
pub use harness::stats::{LatencyRecorder, LatencySummary};
pub use harness::sys::{CpuSnapshot, CpuUsage, MachineInfo, current_rss_bytes, peak_rss_bytes};

/// Run as a helper process of a multi-process benchmark (a pong, a relay,
/// a `net` stage, a topology process) if this process was started as one:
/// call it first thing in `main`; it returns only if not.
pub fn child_if_requested() {
    topology::child_if_requested();
    scenarios::scale::member_if_requested();
    scenarios::icount::workload_if_requested();
    #[cfg(feature = "zenoh")]
    scenarios::net::stage_if_requested();
    for role in systems::roles() {
        harness::processes::run_role(role.env, role.name, role.run);
    }
}
