//! The monotonic clock of timers, message expiry (lifespan) and
//! liveliness assertions: nanoseconds since a process-wide base instant,
//! so deadlines fit in one atomic word.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The process-wide instant every `*_ns` value is counted from.
fn clock_base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Nanoseconds since [`clock_base`] now: the clock of message expiry and
/// liveliness assertions.
pub(crate) fn now_ns() -> u64 {
    mono_ns(Instant::now())
}

/// Nanoseconds from the base to `t` (timer deadlines).
pub(crate) fn mono_ns(t: Instant) -> u64 {
    t.saturating_duration_since(clock_base())
        .as_nanos()
        .min(u128::from(u64::MAX - 1)) as u64
}

/// The instant `ns` nanoseconds after the base.
pub(crate) fn from_mono_ns(ns: u64) -> Instant {
    clock_base() + Duration::from_nanos(ns)
}
