//! `myelin-bench`: myelin's benchmark suite.
//!
//! The suite runs benchmark *scenarios* (ping-pong, fan-out, chains, ...)
//! against myelin and against peer systems side by side, and reports latency
//! percentiles, CPU cost and memory for each run.
//!
//! This part of the crate is the measurement foundation shared by all
//! scenarios:
//!
//! - [`stats`]: [`LatencyRecorder`] (HDR histogram at ns resolution plus an
//!   optional bounded latency-over-time series) and [`LatencySummary`].
//! - [`sys`]: process CPU time, context switches and RSS
//!   ([`CpuSnapshot`], [`CpuUsage`]) and the [`MachineInfo`] report header.
//! - [`report`]: [`Record`]/[`Report`] with JSON persistence and an aligned
//!   plain-text table ([`render_table`]).
//! - [`scenarios`]: the experiments (dispatch, relay, fanout, image) planned
//!   as [`scenarios::Job`]s for the chosen systems.
//! - [`plot`]: SVG latency histograms and latency-over-time plots
//!   ([`write_plots`]).
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
//!     rss_bytes: myelin_bench::sys::current_rss_bytes(),
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

pub mod perf;
pub mod plot;
pub mod report;
pub mod stats;
pub mod sys;
pub mod topology;

pub mod scenarios;

pub use plot::{PlotError, RowPoint, sanitize_stem, write_plots, write_rows_plot};
pub use report::{Record, Report, ReportError, format_ns, render_table};
pub use stats::{LatencyRecorder, LatencySummary};
pub use sys::{CpuSnapshot, CpuUsage, MachineInfo, current_rss_bytes, peak_rss_bytes};
