//! Process resource usage (CPU time, context switches, RSS) and a
//! description of the machine a benchmark ran on.
//!
//! Linux is the supported platform. Elsewhere CPU time still works (through
//! `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`), but context switches and RSS
//! read as 0 and the `/proc`-based [`MachineInfo`] fields read `"unknown"`.

use std::path::Path;
use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// `getrusage(RUSAGE_SELF)`: process-wide CPU split, context switches
/// (including threads that already exited) and peak RSS.
#[cfg(target_os = "linux")]
mod ffi {
    pub(super) use libc::{rusage as Rusage, timeval as Timeval};

    /// `getrusage(RUSAGE_SELF)`, or `None` if the call fails.
    pub(super) fn rusage_self() -> Option<Rusage> {
        // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
        let mut ru: Rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable `struct rusage` that outlives the
        // call; getrusage only writes into it.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        (rc == 0).then_some(ru)
    }
}

fn nonneg(v: impl TryInto<u64>) -> u64 {
    v.try_into().unwrap_or(0)
}

/// Process CPU time in ns from `CLOCK_PROCESS_CPUTIME_ID` (user + system,
/// all threads, nanosecond resolution).
fn process_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    nonneg(ts.tv_sec)
        .saturating_mul(1_000_000_000)
        .saturating_add(nonneg(ts.tv_nsec))
}

/// A point-in-time reading of this process's resource usage.
///
/// Take one before and one after the measured section and call
/// [`since`](Self::since):
///
/// ```
/// use myelin_bench::harness::sys::CpuSnapshot;
///
/// let before = CpuSnapshot::now();
/// let mut x = 0u64;
/// for i in 0..100_000u64 {
///     x = x.wrapping_add(std::hint::black_box(i));
/// }
/// let usage = CpuSnapshot::now().since(&before);
/// assert!(usage.wall_ns > 0);
/// # let _ = x;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct CpuSnapshot {
    /// User + system CPU time of all threads (ns), from
    /// `CLOCK_PROCESS_CPUTIME_ID` (ns resolution).
    pub cpu_ns: u64,
    /// User CPU time (ns, microsecond resolution, from `getrusage`).
    pub user_ns: u64,
    /// System CPU time (ns, microsecond resolution, from `getrusage`).
    pub sys_ns: u64,
    /// Voluntary context switches (blocking waits), process-wide.
    pub vol_ctx_switches: u64,
    /// Involuntary context switches (preemptions), process-wide.
    pub invol_ctx_switches: u64,
    /// Minor page faults, process-wide.
    pub minor_faults: u64,
    /// Major page faults, process-wide.
    pub major_faults: u64,
    /// Wall-clock time of the reading.
    pub wall: Instant,
}

impl CpuSnapshot {
    /// Reads the current usage of the whole process (`RUSAGE_SELF`).
    #[must_use]
    pub fn now() -> Self {
        #[cfg(target_os = "linux")]
        let ru = ffi::rusage_self();
        let wall = Instant::now();
        let cpu_ns = process_cpu_ns();
        let mut snap = CpuSnapshot {
            cpu_ns,
            user_ns: 0,
            sys_ns: 0,
            vol_ctx_switches: 0,
            invol_ctx_switches: 0,
            minor_faults: 0,
            major_faults: 0,
            wall,
        };
        #[cfg(target_os = "linux")]
        if let Some(ru) = ru {
            let tv_ns = |tv: ffi::Timeval| {
                nonneg(tv.tv_sec)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(nonneg(tv.tv_usec).saturating_mul(1_000))
            };
            snap.user_ns = tv_ns(ru.ru_utime);
            snap.sys_ns = tv_ns(ru.ru_stime);
            snap.vol_ctx_switches = nonneg(ru.ru_nvcsw);
            snap.invol_ctx_switches = nonneg(ru.ru_nivcsw);
            snap.minor_faults = nonneg(ru.ru_minflt);
            snap.major_faults = nonneg(ru.ru_majflt);
        }
        snap
    }

    /// Usage between `earlier` and `self` (`self` taken later).
    #[must_use]
    pub fn since(&self, earlier: &CpuSnapshot) -> CpuUsage {
        let wall_ns = nonneg(self.wall.saturating_duration_since(earlier.wall).as_nanos());
        let cpu_ns = self.cpu_ns.saturating_sub(earlier.cpu_ns);
        let cpu_percent = if wall_ns == 0 {
            0.0
        } else {
            cpu_ns as f64 * 100.0 / wall_ns as f64
        };
        CpuUsage {
            cpu_ns,
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            sys_ns: self.sys_ns.saturating_sub(earlier.sys_ns),
            wall_ns,
            cpu_percent,
            vol_ctx_switches: self
                .vol_ctx_switches
                .saturating_sub(earlier.vol_ctx_switches),
            invol_ctx_switches: self
                .invol_ctx_switches
                .saturating_sub(earlier.invol_ctx_switches),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
        }
    }
}

/// Resource usage over an interval, from [`CpuSnapshot::since`].
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuUsage {
    /// User + system CPU time of the process (ns).
    pub cpu_ns: u64,
    /// User CPU time (ns, microsecond resolution).
    pub user_ns: u64,
    /// System CPU time (ns, microsecond resolution).
    pub sys_ns: u64,
    /// Elapsed wall-clock time (ns).
    pub wall_ns: u64,
    /// `cpu_ns / wall_ns` in percent of one core (200 = two cores busy).
    pub cpu_percent: f64,
    /// Voluntary context switches.
    pub vol_ctx_switches: u64,
    /// Involuntary context switches.
    pub invol_ctx_switches: u64,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Major page faults.
    pub major_faults: u64,
}

impl CpuUsage {
    /// Add `other` (a later slice of the same measurement): times and
    /// counts sum, the percentage is of the summed wall-clock time.
    ///
    /// ```
    /// use myelin_bench::CpuUsage;
    /// let mut a = CpuUsage { cpu_ns: 10, wall_ns: 100, ..Default::default() };
    /// a.add(&CpuUsage { cpu_ns: 30, wall_ns: 100, ..Default::default() });
    /// assert_eq!((a.cpu_ns, a.wall_ns), (40, 200));
    /// assert_eq!(a.cpu_percent, 20.0);
    /// ```
    pub fn add(&mut self, other: &CpuUsage) {
        self.cpu_ns += other.cpu_ns;
        self.user_ns += other.user_ns;
        self.sys_ns += other.sys_ns;
        self.wall_ns += other.wall_ns;
        self.vol_ctx_switches += other.vol_ctx_switches;
        self.invol_ctx_switches += other.invol_ctx_switches;
        self.minor_faults += other.minor_faults;
        self.major_faults += other.major_faults;
        self.cpu_percent = if self.wall_ns == 0 {
            0.0
        } else {
            self.cpu_ns as f64 * 100.0 / self.wall_ns as f64
        };
    }

    /// CPU time per message in ns (`cpu_ns / messages`); 0 if `messages == 0`.
    #[must_use]
    pub fn cpu_ns_per(&self, messages: u64) -> f64 {
        if messages == 0 {
            0.0
        } else {
            self.cpu_ns as f64 / messages as f64
        }
    }
}

/// Peak resident set size of this process in bytes (`ru_maxrss`, which Linux
/// reports in KiB). 0 if unavailable.
#[must_use]
pub fn peak_rss_bytes() -> u64 {
    #[cfg(target_os = "linux")]
    if let Some(ru) = ffi::rusage_self() {
        return nonneg(ru.ru_maxrss).saturating_mul(1024);
    }
    0
}

/// Current resident set size of this process in bytes (resident pages from
/// `/proc/self/statm` times the page size). 0 if unavailable.
#[must_use]
pub fn current_rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    pages.saturating_mul(page_size())
}

/// The system page size, from `AT_PAGESZ` in `/proc/self/auxv` (avoids an
/// FFI `sysconf` call); 4096 if that cannot be read.
fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| auxv_page_size().filter(|&p| p > 0).unwrap_or(4096))
}

fn auxv_page_size() -> Option<u64> {
    const AT_PAGESZ: usize = 6;
    const W: usize = size_of::<usize>();
    let auxv = std::fs::read("/proc/self/auxv").ok()?;
    for pair in auxv.chunks_exact(2 * W) {
        let key = usize::from_ne_bytes(pair[..W].try_into().ok()?);
        if key == AT_PAGESZ {
            let val = usize::from_ne_bytes(pair[W..].try_into().ok()?);
            return u64::try_from(val).ok();
        }
    }
    None
}

/// Where and with what a benchmark ran; the header of a report.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(default)]
pub struct MachineInfo {
    /// CPU model (`model name` in `/proc/cpuinfo`).
    pub cpu_model: String,
    /// Logical CPUs available to this process.
    pub nproc: usize,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// `rustc --version` of the toolchain on `PATH` (or `$RUSTC`).
    pub rustc: String,
    /// `git rev-parse --short HEAD` of the source tree.
    pub git_commit: String,
    /// UTC time of detection, ISO-8601 (`2025-01-31T12:34:56Z`).
    pub date: String,
    /// Host name.
    pub hostname: String,
    /// The CPU wake-up latency request in force (`/dev/cpu_dma_latency`,
    /// all requests combined): `none`, `N us`, or `unknown` (not
    /// readable: not root).
    pub cpu_wakeup_latency: String,
}

const UNKNOWN: &str = "unknown";

impl MachineInfo {
    /// Gathers the machine description. Never fails: anything that cannot be
    /// determined reads `"unknown"` (or 1 for `nproc`). Runs `rustc` and
    /// `git` as subprocesses, so call it once per run, not in a hot loop.
    #[must_use]
    pub fn detect() -> Self {
        MachineInfo {
            cpu_model: cpu_model().unwrap_or_else(|| UNKNOWN.into()),
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| UNKNOWN.into()),
            rustc: rustc_version().unwrap_or_else(|| UNKNOWN.into()),
            git_commit: git_commit().unwrap_or_else(|| UNKNOWN.into()),
            date: iso8601_utc(SystemTime::now()),
            hostname: hostname().unwrap_or_else(|| UNKNOWN.into()),
            cpu_wakeup_latency: match myelin::CpuWakeupLatency::in_force() {
                Ok(d) if d >= myelin::sched::MAX_CPU_WAKEUP_LATENCY => "none".into(),
                Ok(d) => format!("{} us", d.as_micros()),
                Err(_) => UNKNOWN.into(),
            },
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    // x86 has "model name"; some ARM kernels only have "Hardware"/"Processor".
    ["model name", "Hardware", "Processor"]
        .iter()
        .find_map(|key| {
            info.lines().find_map(|line| {
                let (k, v) = line.split_once(':')?;
                let v = v.trim();
                (k.trim() == *key && !v.is_empty()).then(|| v.to_owned())
            })
        })
}

fn hostname() -> Option<String> {
    read_trimmed("/proc/sys/kernel/hostname")
        .or_else(|| read_trimmed("/etc/hostname"))
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
}

/// Runs a command and returns its trimmed stdout if it succeeded.
fn command_output(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(std::process::Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

fn rustc_version() -> Option<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    command_output(Command::new(rustc).arg("--version"))
}

fn git_commit() -> Option<String> {
    let mut cmd = Command::new("git");
    cmd.args(["rev-parse", "--short", "HEAD"]);
    // Prefer the tree this crate was built from; fall back to the cwd.
    let src = Path::new(env!("CARGO_MANIFEST_DIR"));
    if src.is_dir() {
        cmd.current_dir(src);
    }
    command_output(&mut cmd)
}

/// Formats `t` as UTC ISO-8601 with second precision, e.g.
/// `2025-01-31T12:34:56Z`. Times before 1970 are formatted as the epoch.
#[must_use]
pub fn iso8601_utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn iso8601_known_dates() {
        let at = |s: u64| iso8601_utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(at(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(
            iso8601_utc(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn cpu_usage_of_a_busy_loop() {
        let before = CpuSnapshot::now();
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let u = CpuSnapshot::now().since(&before);
        assert!(u.wall_ns >= 30_000_000, "{u:?}");
        assert!(u.cpu_ns >= 10_000_000, "{u:?}");
        // Single-threaded spin, other test threads may add a little.
        assert!(u.cpu_percent > 20.0, "{u:?}");
        assert!(u.cpu_ns_per(0) == 0.0);
        assert!(u.cpu_ns_per(2) > 0.0);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn context_switches_are_counted() {
        let before = CpuSnapshot::now();
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let u = CpuSnapshot::now().since(&before);
        assert!(u.vol_ctx_switches >= 5, "{u:?}");
        // user/sys come from getrusage, so they must be populated.
        assert!(CpuSnapshot::now().user_ns + CpuSnapshot::now().sys_ns > 0);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn rss_is_plausible() {
        let peak = peak_rss_bytes();
        let cur = current_rss_bytes();
        assert!(cur > 100 * 1024, "current rss {cur}");
        assert!(peak >= cur / 2, "peak {peak} current {cur}");
        assert!(page_size().is_power_of_two());
        // Touching 32 MiB raises the peak.
        let v = vec![1u8; 32 << 20];
        std::hint::black_box(&v);
        assert!(peak_rss_bytes() >= 32 << 20);
    }

    #[test]
    fn machine_info_detects_and_serialises() {
        let m = MachineInfo::detect();
        assert!(m.nproc >= 1);
        assert_eq!(m.date.len(), "2025-01-31T12:34:56Z".len());
        assert!(m.date.ends_with('Z'));
        for s in [
            &m.cpu_model,
            &m.kernel,
            &m.rustc,
            &m.git_commit,
            &m.hostname,
        ] {
            assert!(!s.is_empty());
        }
        let json = serde_json::to_string(&m).unwrap();
        let back: MachineInfo = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
        // Missing fields default (forward compatible reading).
        let partial: MachineInfo = serde_json::from_str(r#"{"nproc":4}"#).unwrap();
        assert_eq!(partial.nproc, 4);
    }
}
