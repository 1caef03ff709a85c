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

/// The system clock (`CLOCK_REALTIME`) in nanoseconds since the Unix
/// epoch, as ROS 2 stamps messages (0 before 1970, which no host is in).
#[cfg_attr(not(any(feature = "shm", feature = "zenoh")), allow(dead_code))]
pub(crate) fn realtime_ns() -> i64 {
    // clock_gettime directly (every shared-memory message is stamped):
    // `SystemTime::now().duration_since(UNIX_EPOCH)` costs ~90
    // instructions of checks around the same call. Through libc, as
    // `myelin_shm::monotonic_ns` (rustix's vDSO lookup faults under
    // valgrind).
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes one timespec through a valid,
    // exclusive pointer; CLOCK_REALTIME always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if ts.tv_sec < 0 {
        return 0;
    }
    ts.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec)
}

/// The deadline `d` after `now`, on a nanosecond clock whose 0 means
/// "never" (message expiry): saturating, and never 0 itself.
pub(crate) fn deadline_ns(now: u64, d: Duration) -> u64 {
    now.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .max(1)
}

/// How long from `now` until `deadline` (0: never, `None`); zero once it
/// has passed.
pub(crate) fn left_ns(now: u64, deadline: u64) -> Option<Duration> {
    (deadline != 0).then(|| Duration::from_nanos(deadline.saturating_sub(now)))
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

/// Timeouts to deadlines, `Duration::MAX` as forever (a century).
pub(crate) use myelin_sync::deadline::{FOREVER, after as deadline_after};

/// Waits for a condition another thread or process makes true, up to a
/// deadline, without a wake-up channel: a few spins, then yields, then
/// sleeps that double from 10 us to 1 ms. A reliable publisher paced by a
/// slow keep_all reader waits this way (the reader frees room at its own
/// rate, so the cost is at most one check per sleep).
pub(crate) struct Pacer {
    deadline: Instant,
    round: u32,
}

impl Pacer {
    /// A pacer that gives up `wait` from now.
    pub(crate) fn new(wait: Duration) -> Pacer {
        Pacer {
            deadline: deadline_after(wait),
            round: 0,
        }
    }

    /// Wait a little; false once the deadline has passed.
    pub(crate) fn pause(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        self.round += 1;
        match self.round {
            0..=16 => std::hint::spin_loop(),
            17..=24 => std::thread::yield_now(),
            r => {
                let us = 10u64 << (r - 25).min(7);
                std::thread::sleep(Duration::from_micros(us).min(self.deadline - now));
            }
        }
        true
    }

    /// Wait until `ready()` holds (true) or the deadline passes (false).
    pub(crate) fn until(&mut self, mut ready: impl FnMut() -> bool) -> bool {
        loop {
            if ready() {
                return true;
            }
            if !self.pause() {
                return ready();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pacer_gives_up_at_its_deadline_and_sees_a_late_condition() {
        let mut never = Pacer::new(Duration::from_millis(5));
        assert!(!never.until(|| false));
        let mut n = 0;
        let mut soon = Pacer::new(Duration::from_secs(60));
        assert!(soon.until(|| {
            n += 1;
            n == 40
        }));
        let mut zero = Pacer::new(Duration::ZERO);
        assert!(!zero.until(|| false));
    }

    /// Expiry deadlines and what is left of them: 0 is "never" both ways,
    /// a deadline is never 0, nothing overflows, a passed one leaves zero.
    #[test]
    fn deadlines_and_what_is_left() {
        assert_eq!(deadline_ns(100, Duration::from_nanos(50)), 150);
        assert_eq!(deadline_ns(0, Duration::ZERO), 1, "never 0 (never)");
        assert_eq!(deadline_ns(u64::MAX - 1, Duration::MAX), u64::MAX);
        assert_eq!(left_ns(100, 0), None);
        assert_eq!(left_ns(100, 150), Some(Duration::from_nanos(50)));
        assert_eq!(left_ns(150, 150), Some(Duration::ZERO));
        assert_eq!(left_ns(200, 150), Some(Duration::ZERO));
    }
}

/// Make this thread's timed sleeps end on time: the kernel lets a timer
/// fire up to the thread's *timer slack* late (50 us by default), which
/// would make an executor's timers and an anticipating window late. Set
/// to 1 us once per thread (an executor's thread, the first time it
/// sleeps until a deadline); its other timed sleeps then end on time too,
/// at the cost of the kernel coalescing fewer of them.
pub(crate) fn tighten_timer_slack() {
    if !SLACK_TIGHTENED.replace(true) {
        // A failure leaves the default slack: timers fire later.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1_000));
    }
}

/// The kernel set this thread's slack back to its default (it does when a
/// thread leaves a real-time policy): tighten it again at the next timed
/// sleep.
pub(crate) fn forget_timer_slack() {
    SLACK_TIGHTENED.set(false);
}

thread_local! {
    /// Whether this thread's timer slack was set to 1 us
    /// ([`tighten_timer_slack`]).
    static SLACK_TIGHTENED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
