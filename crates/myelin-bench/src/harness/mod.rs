//! The harness: what every benchmark run shares, whatever the scenario
//! and the system.
//!
//! - [`run`]: a planned run ([`Job`]), its result ([`Outcome`]), the CPU
//!   meter that turns samples into a [`Record`](report::Record), and
//!   [`BenchError`].
//! - [`pacing`]: the host-wide clock every message stamp uses
//!   ([`now_ns`]), rate pacing and warm-up lengths.
//! - [`message`]: [`Stamped`], the timestamped message most runs send.
//! - [`stats`]: latency histograms and time series.
//! - [`sys`]: process CPU time, context switches, RSS and the machine
//!   header of a report.
//! - [`report`]: records, the JSON report and the plain-text table.
//! - [`plot`]: SVG latency histograms and latency-over-time plots.
//! - `processes`: the other processes of multi-process runs (helper
//!   processes started with a role, forked children).

pub mod message;
pub mod pacing;
pub mod plot;
pub(crate) mod processes;
pub mod report;
pub mod run;
pub mod stats;
pub mod sys;
pub mod verdict;

pub use message::{STAMPED_HEADER, Stamped};
pub use pacing::{now_ns, period_of, sleep_until, spin_until, warmup_for};
pub use report::{rate_label, size_label};
pub(crate) use run::Meter;
pub use run::{BenchError, Job, Outcome};
