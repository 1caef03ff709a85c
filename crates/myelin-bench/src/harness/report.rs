//! Benchmark results: one [`Record`] per (scenario, system, config) run, a
//! [`Report`] of records under a [`MachineInfo`] header, JSON persistence and
//! a plain-text table.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::stats::LatencySummary;
use super::sys::MachineInfo;

/// The result of one benchmark run.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Record {
    /// Scenario name, e.g. `"pingpong"`.
    pub scenario: String,
    /// System under test, e.g. `"myelin"` or `"crossbeam-channel"`.
    pub system: String,
    /// Scenario parameters, e.g. `"payload=64B rate=10kHz"`.
    pub config: String,
    /// Messages measured (received).
    pub count: u64,
    /// Messages sent but never received.
    pub lost: u64,
    /// End-to-end latency (ns).
    pub latency_ns: LatencySummary,
    /// Process CPU use during the run, percent of one core.
    pub cpu_percent: f64,
    /// Process CPU time per message (ns).
    pub cpu_ns_per_msg: f64,
    /// Resident set size (bytes) at the end of the run.
    pub rss_bytes: u64,
    /// Number of hops for chain scenarios.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hops: Option<u32>,
    /// Latency per hop (ns), usually `latency_ns.scaled(hops)`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub per_hop_ns: Option<LatencySummary>,
    /// Free-form remarks (warnings, caveats).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A set of benchmark results with a description of the machine.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Report {
    /// Machine, toolchain, commit and date.
    pub header: MachineInfo,
    /// One entry per run.
    pub records: Vec<Record>,
}

/// Failure to write or read a report file; always names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The file (or its directory) could not be written.
    #[error("cannot write report {}: {source}", path.display())]
    Write {
        /// The report file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be read.
    #[error("cannot read report {}: {source}", path.display())]
    Read {
        /// The report file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The report could not be encoded as JSON.
    #[error("cannot encode report {} as JSON: {source}", path.display())]
    Encode {
        /// The report file.
        path: PathBuf,
        /// The serialisation error.
        #[source]
        source: serde_json::Error,
    },
    /// The file is not a valid report.
    #[error("invalid report {}: {source}", path.display())]
    Parse {
        /// The report file.
        path: PathBuf,
        /// The parse error (with line/column).
        #[source]
        source: serde_json::Error,
    },
}

impl Report {
    /// An empty report with the given header.
    #[must_use]
    pub fn new(header: MachineInfo) -> Self {
        Report {
            header,
            records: Vec::new(),
        }
    }

    /// Writes the report as pretty-printed JSON, creating the parent
    /// directory if needed.
    ///
    /// # Errors
    ///
    /// [`ReportError::Write`] or [`ReportError::Encode`], naming `path`.
    pub fn write_json(&self, path: impl AsRef<Path>) -> Result<(), ReportError> {
        let path = path.as_ref();
        let mut json =
            serde_json::to_string_pretty(self).map_err(|source| ReportError::Encode {
                path: path.to_owned(),
                source,
            })?;
        json.push('\n');
        let write_err = |source| ReportError::Write {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(write_err)?;
        }
        fs::write(path, json).map_err(write_err)
    }

    /// Reads a report written by [`write_json`](Self::write_json).
    ///
    /// # Errors
    ///
    /// [`ReportError::Read`] or [`ReportError::Parse`], naming `path`.
    pub fn read_json(path: impl AsRef<Path>) -> Result<Report, ReportError> {
        let path = path.as_ref();
        let text = fs::read_to_string(path).map_err(|source| ReportError::Read {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ReportError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// [`render_table`] of this report's records.
    #[must_use]
    pub fn table(&self) -> String {
        render_table(&self.records)
    }
}

/// Formats a duration in ns for humans with 3 significant digits:
/// `"123 ns"`, `"4.56 us"`, `"1.23 ms"`, `"2.50 s"`. Non-finite or negative
/// input gives `"-"`.
#[must_use]
pub fn format_ns(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return "-".to_owned();
    }
    // Pick the unit after rounding so 999.7 ns prints as "1.00 us".
    if ns < 999.5 {
        format!("{ns:.0} ns")
    } else if ns < 999_995.0 {
        format!("{:.2} us", ns / 1e3)
    } else if ns < 999_995_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// How a config names a rate: `"10Hz"`, `"1kHz"`.
pub fn rate_label(rate: f64) -> String {
    if rate >= 1000.0 && (rate / 1000.0).fract() == 0.0 {
        format!("{}kHz", rate / 1000.0)
    } else {
        format!("{rate}Hz")
    }
}

/// How a config names a message size: `"64B"`, `"4KiB"`, `"4665600B"`.
pub fn size_label(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024 * 1024) {
        format!("{}MiB", size / (1024 * 1024))
    } else if size >= 1024 && size.is_multiple_of(1024) {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

/// Column alignment in [`render_table`].
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// What the table's systems and columns are: the systems present in
/// `records`, in report order, each in a line, then the columns.
pub fn render_legend(records: &[Record]) -> String {
    let mut out = String::from("legend:\n");
    for sys in crate::systems::ALL {
        if records.iter().any(|r| r.system == sys.name) && !sys.what.is_empty() {
            out.push_str(&format!("  {:<10} {}\n", sys.name, sys.what));
        }
    }
    out.push_str(
        "  p50..max   end-to-end latency over the run's messages (percentiles, worst); \
         hop p50/p90: the same per hop of a chain\n  \
         lost       messages sent and never received\n  \
         cpu%       the process's CPU during the run, percent of one core; cpu/msg: \
         its CPU time per message\n",
    );
    out
}

/// Renders records as an aligned plain-text table:
///
/// ```text
/// scenario  system  config  count  lost     p50      p90      p99      max  cpu%  cpu/msg
/// --------  ------  ------  -----  ----  ------  -------  -------  -------  ----  -------
/// pingpong  myelin  64B      1000     0  4.56 us  5.00 us  ...
/// ```
///
/// When any record has `per_hop_ns`, two extra columns `hop p50` and
/// `hop p90` follow `max` (`-` for records without per-hop figures).
#[must_use]
pub fn render_table(records: &[Record]) -> String {
    let with_hops = records.iter().any(|r| r.per_hop_ns.is_some());
    let mut header: Vec<(&str, Align)> = vec![
        ("scenario", Align::Left),
        ("system", Align::Left),
        ("config", Align::Left),
        ("count", Align::Right),
        ("lost", Align::Right),
        ("p50", Align::Right),
        ("p90", Align::Right),
        ("p99", Align::Right),
        ("max", Align::Right),
    ];
    if with_hops {
        header.push(("hop p50", Align::Right));
        header.push(("hop p90", Align::Right));
    }
    header.push(("cpu%", Align::Right));
    header.push(("cpu/msg", Align::Right));

    let lat = |v: u64| format_ns(v as f64);
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let l = &r.latency_ns;
            let mut row = vec![
                r.scenario.clone(),
                r.system.clone(),
                r.config.clone(),
                r.count.to_string(),
                r.lost.to_string(),
                lat(l.p50),
                lat(l.p90),
                lat(l.p99),
                lat(l.max),
            ];
            if with_hops {
                match &r.per_hop_ns {
                    Some(h) => {
                        row.push(lat(h.p50));
                        row.push(lat(h.p90));
                    }
                    None => {
                        row.push("-".into());
                        row.push("-".into());
                    }
                }
            }
            row.push(if r.cpu_percent.is_finite() {
                format!("{:.1}", r.cpu_percent)
            } else {
                "-".into()
            });
            row.push(format_ns(r.cpu_ns_per_msg));
            row
        })
        .collect();

    render_columns(&header, &rows)
}

/// Lays out `rows` under `header` (names and alignments): columns two
/// spaces apart, each as wide as its widest cell, a rule of dashes under
/// the header, trailing spaces trimmed.
pub(crate) fn render_columns(header: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let width = |s: &str| s.chars().count();
    let widths: Vec<usize> = header
        .iter()
        .enumerate()
        .map(|(i, (h, _))| {
            rows.iter()
                .map(|row| width(&row[i]))
                .chain([width(h)])
                .max()
                .unwrap_or(0)
        })
        .collect();

    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            let pad = widths[i].saturating_sub(width(cell));
            match header[i].1 {
                Align::Left => {
                    out.push_str(cell);
                    out.extend(std::iter::repeat_n(' ', pad));
                }
                Align::Right => {
                    out.extend(std::iter::repeat_n(' ', pad));
                    out.push_str(cell);
                }
            }
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
        out
    };

    let mut out = line(&mut header.iter().map(|(h, _)| *h));
    let rules: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    out.push_str(&line(&mut rules.iter().map(String::as_str)));
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(base: u64) -> LatencySummary {
        LatencySummary {
            p50: base,
            p90: base * 2,
            p99: base * 4,
            p999: base * 8,
            max: base * 100,
            min: base / 2,
            mean: base as f64 * 1.5,
            count: 1000,
        }
    }

    fn header() -> MachineInfo {
        MachineInfo {
            cpu_model: "Test CPU @ 3.00GHz".into(),
            nproc: 2,
            kernel: "6.1.0-test".into(),
            rustc: "rustc 1.95.0".into(),
            git_commit: "abc1234".into(),
            date: "2025-01-31T12:34:56Z".into(),
            hostname: "bench-host".into(),
            cpu_wakeup_latency: "none".into(),
        }
    }

    fn sample_report() -> Report {
        Report {
            header: header(),
            records: vec![
                Record {
                    scenario: "pingpong".into(),
                    system: "myelin".into(),
                    config: "payload=64B".into(),
                    count: 100_000,
                    lost: 0,
                    latency_ns: summary(4_560),
                    cpu_percent: 187.3,
                    cpu_ns_per_msg: 812.4,
                    rss_bytes: 12 << 20,
                    hops: None,
                    per_hop_ns: None,
                    notes: vec![],
                },
                Record {
                    scenario: "chain".into(),
                    system: "crossbeam-channel".into(),
                    config: "hops=8".into(),
                    count: 50_000,
                    lost: 3,
                    latency_ns: summary(80_000),
                    cpu_percent: 99.5,
                    cpu_ns_per_msg: 1_234_567.0,
                    rss_bytes: 8 << 20,
                    hops: Some(8),
                    per_hop_ns: Some(summary(80_000).scaled(8.0)),
                    notes: vec!["warm-up skipped".into()],
                },
            ],
        }
    }

    #[test]
    fn json_round_trip() {
        let dir = std::env::temp_dir().join(format!("myelin-bench-report-{}", std::process::id()));
        let path = dir.join("nested").join("report.json");
        let report = sample_report();
        report.write_json(&path).unwrap();
        let back = Report::read_json(&path).unwrap();
        assert_eq!(back, report);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn schema_has_required_keys() {
        let v = serde_json::to_value(sample_report()).unwrap();
        for key in [
            "cpu_model",
            "nproc",
            "kernel",
            "rustc",
            "git_commit",
            "date",
        ] {
            assert!(v["header"].get(key).is_some(), "header.{key} missing");
        }
        let records = v["records"].as_array().unwrap();
        assert_eq!(records.len(), 2);
        for r in records {
            for key in [
                "scenario",
                "system",
                "config",
                "count",
                "lost",
                "cpu_percent",
                "cpu_ns_per_msg",
                "rss_bytes",
            ] {
                assert!(r.get(key).is_some(), "record.{key} missing");
            }
            for key in ["p50", "p90", "p99", "p999", "max", "mean"] {
                assert!(
                    r["latency_ns"].get(key).is_some(),
                    "record.latency_ns.{key} missing"
                );
            }
        }
        // Optional fields are omitted when absent, present when set.
        assert!(records[0].get("hops").is_none());
        assert!(records[0].get("per_hop_ns").is_none());
        assert_eq!(records[1]["hops"], 8);
        assert_eq!(records[1]["per_hop_ns"]["p50"], 10_000);
    }

    #[test]
    fn optional_fields_default_when_missing() {
        let mut v = serde_json::to_value(sample_report()).unwrap();
        v["records"][0].as_object_mut().unwrap().remove("notes");
        let r: Report = serde_json::from_value(v).unwrap();
        assert!(r.records[0].notes.is_empty());
        assert_eq!(r.records[0].hops, None);
    }

    #[test]
    fn errors_name_the_path() {
        let missing = Path::new("/nonexistent-myelin-bench/dir/report.json");
        let e = Report::read_json(missing).unwrap_err();
        assert!(matches!(e, ReportError::Read { .. }));
        assert!(
            e.to_string()
                .contains("/nonexistent-myelin-bench/dir/report.json")
        );

        let dir = std::env::temp_dir().join(format!("myelin-bench-bad-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.json");
        fs::write(&bad, "{ not json").unwrap();
        let e = Report::read_json(&bad).unwrap_err();
        assert!(matches!(e, ReportError::Parse { .. }));
        assert!(e.to_string().contains("bad.json"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn human_latency_format() {
        assert_eq!(format_ns(0.0), "0 ns");
        assert_eq!(format_ns(123.0), "123 ns");
        assert_eq!(format_ns(999.7), "1.00 us");
        assert_eq!(format_ns(4_560.0), "4.56 us");
        assert_eq!(format_ns(1_234_567.0), "1.23 ms");
        assert_eq!(format_ns(2.5e9), "2.50 s");
        assert_eq!(format_ns(f64::NAN), "-");
    }

    #[test]
    fn table_is_aligned() {
        let report = sample_report();
        let t = report.table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        let head = lines[0];
        for col in [
            "scenario", "system", "config", "count", "lost", "p50", "p90", "p99", "max", "hop p50",
            "hop p90", "cpu%", "cpu/msg",
        ] {
            assert!(head.contains(col), "missing column {col}: {head}");
        }
        // Right-aligned columns end at the same offset on every line.
        let end_of = |line: &str, needle: &str| line.find(needle).map(|i| i + needle.len());
        let cpu_end = end_of(head, "cpu%").unwrap();
        assert_eq!(end_of(lines[2], "187.3"), Some(cpu_end));
        assert_eq!(end_of(lines[3], "99.5"), Some(cpu_end));
        // Latencies are human-readable, '-' where there is no per-hop figure.
        assert!(lines[2].contains("4.56 us"));
        assert!(lines[2].contains(" - "));
        assert!(lines[3].contains("80.00 us"));
        assert!(lines[3].contains("10.00 us")); // hop p50
        assert!(lines[3].contains("1.23 ms")); // cpu/msg

        // Without any per-hop figures the hop columns are omitted.
        let plain = render_table(&report.records[..1]);
        assert!(!plain.contains("hop p50"));
        assert!(render_table(&[]).lines().count() == 2);
    }
}
