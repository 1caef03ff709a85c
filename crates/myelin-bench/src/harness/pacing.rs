//! Time in a run: the clock every stamp uses, pacing a source at a rate,
//! and how many warm-up messages to leave out of the statistics.

use std::time::{Duration, Instant};

use super::BenchError;

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

/// Spin (no sleep, no system call) until `deadline`: the sending side of
/// the low-latency rows, which must not be woken.
pub fn spin_until(deadline: Instant) {
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// The period of a rate, refusing zero and absurd rates (a period of at
/// most 1000 s keeps every deadline computable).
pub fn period_of(rate_hz: f64) -> Result<Duration, BenchError> {
    if !(rate_hz.is_finite() && (1e-3..=1_000_000.0).contains(&rate_hz)) {
        return Err(BenchError::InvalidArg {
            flag: "rate",
            reason: format!("{rate_hz} Hz: must be 0.001 to 1000000"),
        });
    }
    Ok(Duration::from_secs_f64(1.0 / rate_hz))
}

/// Number of warm-up messages excluded from statistics for `count` measured.
pub fn warmup_for(count: u64) -> u64 {
    (count / 10).clamp(2, 100)
}
