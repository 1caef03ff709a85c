//! CycloneDDS, measured with its `ddsperf` tool, as a peer of `myelin bench
//! pingpong` (Debian package `cyclonedds-tools`; the system is available
//! when `ddsperf` is on the PATH): a `ddsperf pong` and a `ddsperf ping`
//! process on loopback only (a generated CycloneDDS XML selects `lo`,
//! disables multicast and names 127.0.0.1 as the only peer), their
//! per-second rows parsed into a [`Record`].
//!
//! ddsperf prints, per second and per peer, a line like
//! `[361] 2.000  vm:350 size 64 mean 25.912us min 3.660us 50% 34.848us 90% 41.438us 99% 57.808us max 738.909us cnt 19236`
//! with latencies already one way (half the round trip).

use std::process::{Command, Stdio};
use std::time::Duration;

use super::Runs;
use crate::harness::report::Record;
use crate::harness::stats::LatencySummary;
use crate::harness::{BenchError, Job, Outcome, size_label};
use crate::scenarios::pingpong::PingPongParams;

pub(super) const RUNS: Runs = Runs {
    pingpong: Some(jobs),
    ..Runs::NONE
};

/// How to get `ddsperf` (for the error when it is missing).
pub(super) const INSTALL: &str = "install ddsperf (Debian: apt-get install cyclonedds-tools)";

/// The job for one size: ddsperf ping/pong for `ddsperf_secs`.
fn jobs(p: &PingPongParams, size: usize) -> Vec<Job> {
    let secs = p.ddsperf_secs;
    vec![Job::new(
        format!("pingpong/cyclonedds/ddsperf {}", size_label(size)),
        move || run(size, secs),
    )]
}

/// One per-second row of `ddsperf ping`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdsperfRow {
    /// Seconds since ddsperf started.
    pub t_s: f64,
    /// Message size.
    pub size: u64,
    /// Mean (ns).
    pub mean_ns: f64,
    /// Minimum (ns).
    pub min_ns: u64,
    /// Median (ns).
    pub p50_ns: u64,
    /// 90th percentile (ns).
    pub p90_ns: u64,
    /// 99th percentile (ns).
    pub p99_ns: u64,
    /// Maximum (ns).
    pub max_ns: u64,
    /// Round trips in the second.
    pub count: u64,
}

fn ns(v: &str) -> Option<f64> {
    let (num, mult) = if let Some(x) = v.strip_suffix("ns") {
        (x, 1.0)
    } else if let Some(x) = v.strip_suffix("us") {
        (x, 1e3)
    } else if let Some(x) = v.strip_suffix("ms") {
        (x, 1e6)
    } else if let Some(x) = v.strip_suffix('s') {
        (x, 1e9)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|n| n * mult)
}

/// Parse one line of `ddsperf ping` output; `None` for anything that is not
/// a latency row (participant notices, rss/ctx-switch lines, ...).
pub fn parse_line(line: &str) -> Option<DdsperfRow> {
    let mut words = line.split_whitespace().peekable();
    // Optional "[pid]" prefix.
    if words.peek()?.starts_with('[') {
        words.next();
    }
    let t_s: f64 = words.next()?.parse().ok()?;
    let _peer = words.next()?;
    let rest: Vec<&str> = words.collect();
    let get = |key: &str| -> Option<&str> {
        rest.iter()
            .position(|w| *w == key)
            .and_then(|i| rest.get(i + 1).copied())
    };
    Some(DdsperfRow {
        t_s,
        size: get("size")?.parse().ok()?,
        mean_ns: ns(get("mean")?)?,
        min_ns: ns(get("min")?)? as u64,
        p50_ns: ns(get("50%")?)? as u64,
        p90_ns: ns(get("90%")?)? as u64,
        p99_ns: ns(get("99%")?)? as u64,
        max_ns: ns(get("max")?)? as u64,
        count: get("cnt")?.parse().ok()?,
    })
}

/// Combine per-second rows: percentiles as the count-weighted median of
/// the rows' percentiles, exact min / max / mean / count.
pub fn summarize(rows: &[DdsperfRow]) -> LatencySummary {
    let count: u64 = rows.iter().map(|r| r.count).sum();
    if count == 0 {
        return LatencySummary::default();
    }
    let weighted = |pick: fn(&DdsperfRow) -> u64| {
        let mut v: Vec<(u64, u64)> = rows.iter().map(|r| (pick(r), r.count)).collect();
        v.sort_unstable();
        let mut acc = 0;
        for (x, c) in &v {
            acc += c;
            if acc * 2 >= count {
                return *x;
            }
        }
        v.last().map_or(0, |x| x.0)
    };
    LatencySummary {
        p50: weighted(|r| r.p50_ns),
        p90: weighted(|r| r.p90_ns),
        p99: weighted(|r| r.p99_ns),
        p999: 0,
        max: rows.iter().map(|r| r.max_ns).max().unwrap_or(0),
        min: rows.iter().map(|r| r.min_ns).min().unwrap_or(0),
        mean: rows.iter().map(|r| r.mean_ns * r.count as f64).sum::<f64>() / count as f64,
        count,
    }
}

/// Whether `ddsperf` is on the PATH.
pub(super) fn installed() -> bool {
    Command::new("ddsperf")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

const LOOPBACK_XML: &str = r#"<CycloneDDS>
  <Domain id="any">
    <General>
      <Interfaces><NetworkInterface name="lo"/></Interfaces>
      <AllowMulticast>false</AllowMulticast>
    </General>
    <Discovery>
      <ParticipantIndex>auto</ParticipantIndex>
      <MaxAutoParticipantIndex>20</MaxAutoParticipantIndex>
      <Peers><Peer address="127.0.0.1"/></Peers>
    </Discovery>
  </Domain>
</CycloneDDS>
"#;

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("ddsperf", e)
}

/// Run ddsperf ping/pong for `secs` seconds at `size` bytes.
fn run(size: usize, secs: u32) -> Result<Outcome, BenchError> {
    let rows = ping_pong(size, secs, LOOPBACK_XML, LOOPBACK_XML, |_| {
        Command::new("ddsperf")
    })?;
    let latency = summarize(&rows);
    Ok(outcome(
        "pingpong",
        format!("ddsperf udp-loopback {}", size_label(size.max(12))),
        latency,
        None,
        "CycloneDDS ddsperf ping/pong over UDP on lo (multicast off); one way = round trip / 2 as ddsperf prints it; percentiles are the count-weighted median of its per-second rows; CPU not measured",
    ))
}

/// The configuration of a ddsperf on a test-bed host: its `eth0`, no
/// multicast, the other host as its only peer.
#[cfg(feature = "zenoh")]
fn host_xml(peer: std::net::Ipv4Addr) -> String {
    format!(
        r#"<CycloneDDS>
  <Domain id="any">
    <General>
      <Interfaces><NetworkInterface name="eth0"/></Interfaces>
      <AllowMulticast>false</AllowMulticast>
    </General>
    <Discovery>
      <ParticipantIndex>auto</ParticipantIndex>
      <MaxAutoParticipantIndex>20</MaxAutoParticipantIndex>
      <Peers><Peer address="{peer}"/></Peers>
    </Discovery>
  </Domain>
</CycloneDDS>
"#
    )
}

/// ddsperf ping on host 0 and pong on host 1 of a test bed (`bench net
/// --hosts`): reported as a round trip, like the other `net` rows (hop =
/// one way).
#[cfg(feature = "zenoh")]
pub fn run_hosts(size: usize, secs: u32) -> Result<Outcome, BenchError> {
    let bed = crate::testbed::TestBed::new(2).map_err(err)?;
    // Gigabit Ethernet between the hosts, as for the other `net --hosts` rows.
    for h in 0..2 {
        bed.limit_rate(h, Some(1_000_000_000)).map_err(err)?;
    }
    let (a, b) = (bed.host(0).addr, bed.host(1).addr);
    // Each names the other as its peer.
    let rows = ping_pong(size, secs, &host_xml(b), &host_xml(a), |host| {
        bed.command(host, "ddsperf")
    })?;
    let one_way = summarize(&rows);
    let twice = |v: u64| v * 2;
    let latency = LatencySummary {
        p50: twice(one_way.p50),
        p90: twice(one_way.p90),
        p99: twice(one_way.p99),
        p999: 0,
        max: twice(one_way.max),
        min: twice(one_way.min),
        mean: one_way.mean * 2.0,
        count: one_way.count,
    };
    Ok(outcome(
        "net",
        format!("ddsperf hosts pingpong {}", size_label(size.max(12))),
        latency,
        Some((2, one_way)),
        "CycloneDDS ddsperf ping (host 0) / pong (host 1) over UDP on the test bed's veths, limited to 1 Gbit/s (multicast off, each other as the only peer); round trip = 2 x ddsperf's one way; count-weighted median of its per-second rows; CPU not measured",
    ))
}

/// `ddsperf pong` (configured with `pong_xml`, started by `cmd(1)`) and
/// `ddsperf ping` (`ping_xml`, `cmd(0)`) for `secs` seconds: ping's
/// per-second rows after the first (discovery).
fn ping_pong(
    size: usize,
    secs: u32,
    ping_xml: &str,
    pong_xml: &str,
    cmd: impl Fn(usize) -> Command,
) -> Result<Vec<DdsperfRow>, BenchError> {
    let dir = std::env::temp_dir().join(format!("myelin-ddsperf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(err)?;
    let uri = |name: &str, xml: &str| -> Result<String, BenchError> {
        let path = dir.join(name);
        std::fs::write(&path, xml).map_err(err)?;
        Ok(format!("file://{}", path.display()))
    };
    let (ping_uri, pong_uri) = (uri("ping.xml", ping_xml)?, uri("pong.xml", pong_xml)?);
    let size = size.max(12); // ddsperf's smallest message
    let mut pong = cmd(1)
        .args(["-D", &(secs + 4).to_string(), "pong"])
        .env("CYCLONEDDS_URI", &pong_uri)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(err)?;
    std::thread::sleep(Duration::from_millis(300));
    let out = cmd(0)
        .args([
            "-D",
            &(secs + 1).to_string(),
            "ping",
            "size",
            &size.to_string(),
        ])
        .env("CYCLONEDDS_URI", &ping_uri)
        .output();
    let _ = pong.kill();
    let _ = pong.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(err)?;
    let text = String::from_utf8_lossy(&out.stdout);
    // The first second includes discovery: skip it.
    let rows: Vec<DdsperfRow> = text
        .lines()
        .filter_map(parse_line)
        .filter(|r| r.t_s > 1.5)
        .collect();
    if rows.is_empty() {
        return Err(err(format!(
            "ddsperf printed no latency rows (exit {}); is another DDS domain interfering?",
            out.status
        )));
    }
    Ok(rows)
}

fn outcome(
    scenario: &str,
    config: String,
    latency: LatencySummary,
    hops: Option<(u32, LatencySummary)>,
    note: &str,
) -> Outcome {
    Outcome {
        record: Record {
            scenario: scenario.into(),
            system: "cyclonedds".into(),
            config,
            count: latency.count,
            lost: 0,
            per_hop_ns: hops.map(|h| h.1),
            latency_ns: latency,
            cpu_percent: 0.0,
            cpu_ns_per_msg: 0.0,
            rss_bytes: 0,
            hops: hops.map(|h| h.0),
            notes: vec![note.into()],
        },
        recorder: crate::harness::stats::LatencyRecorder::new(),
        more: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from `ddsperf -D 4 ping size 64` (cyclonedds-tools 0.10.2).
    const CAPTURED: &str = "\
[361] participant vm:361: new (self)
[361] participant vm:350: new
[361] 2.000  vm:350 size 64 mean 25.912us min 3.660us 50% 34.848us 90% 41.438us 99% 57.808us max 738.909us cnt 19236
[361] 2.000  rss:7.6MB vcsw:14714 ivcsw:4546 recvUC:11%+30%
[361] 3.000  vm:350 size 64 mean 37.339us min 11.859us 50% 36.284us 90% 41.087us 99% 57.153us max 1674.524us cnt 13369
[361] 3.000  rss:7.9MB vcsw:13336 ivcsw:65 recvUC:11%+29%
[361] 4.000  vm:350 size 64 mean 37.690us min 4.038us 50% 36.395us 90% 42.371us 99% 61.420us max 848.131us cnt 13242
";

    #[test]
    fn parses_captured_ddsperf_rows_and_skips_the_rest() {
        let rows: Vec<_> = CAPTURED.lines().filter_map(parse_line).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows[0],
            DdsperfRow {
                t_s: 2.0,
                size: 64,
                mean_ns: 25912.0,
                min_ns: 3660,
                p50_ns: 34848,
                p90_ns: 41438,
                p99_ns: 57808,
                max_ns: 738909,
                count: 19236,
            }
        );
        let s = summarize(&rows);
        assert_eq!(s.count, 19236 + 13369 + 13242);
        assert_eq!(s.max, 1674524);
        assert_eq!(s.min, 3660);
        assert_eq!(s.p50, 36284);
    }

    #[test]
    fn units_and_garbage() {
        assert_eq!(
            parse_line("1.0 h:1 size 8 mean 1ms min 500ns 50% 1ms 90% 2ms 99% 3ms max 1s cnt 5")
                .map(|r| (r.mean_ns, r.min_ns, r.max_ns)),
            Some((1e6, 500, 1_000_000_000))
        );
        assert_eq!(parse_line(""), None);
        assert_eq!(parse_line("[1] 2.0 rss:7.6MB vcsw:1"), None);
        assert_eq!(parse_line("[1] x vm size 64"), None);
    }
}
