//! Anticipation: an idle executor that learns the period of its work
//! (a 30 Hz camera, a 100 Hz control loop) sleeps until shortly before the
//! next arrival is due, then spins until it comes, so the message finds a
//! running thread with warm caches instead of one asleep in the kernel.
//!
//! Work arrives in *bursts*: the first ready entry after the executor went
//! idle. [`Anticipation::arrived`] takes each burst's time; the intervals
//! between bursts give a period (an average that follows slow drift) and
//! a jitter (the average distance of an interval from the period).
//! [`Anticipation::plan`] turns them into what an idle worker does now:
//! block as usual (no steady period yet), sleep until the spin window
//! opens, or spin.
//!
//! The window opens `lead` before the predicted arrival and closes
//! `window` after it; both grow with the jitter (twice its average) and
//! never exceed a quarter period, so the spinning costs at most about half
//! a core at the highest rate anticipated and a few percent at robot rates
//! (the smallest window spins for at most 350 us per period: 1% at 30 Hz,
//! 3.5% at 100 Hz; the work usually ends it sooner). A burst that does not come
//! within the window costs one window of spinning and then the usual
//! blocking wait; intervals that are whole multiples of the period (a
//! dropped message) keep the period; anything else starts learning again.
//!
//! The state is a few relaxed atomics: it is advice on when to wait, read
//! and written once per burst, so a race between two workers mistimes one
//! wait and nothing else.

use myelin_sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The shortest period anticipated: faster work is as good as continuous,
/// and a worker that runs it is seldom idle long enough to sleep.
const MIN_PERIOD_NS: u64 = 400_000;
/// Consistent intervals needed before anticipating.
const STEADY_AFTER: u32 = 3;
/// The least time the window opens before the predicted arrival: the
/// timed sleep before it ends late by the time to be scheduled on a vCPU
/// that was idle (50-100 us on the VM this was tuned on). With 100 us,
/// and 50 us after, 12-28% of 30 Hz frames came outside the window there;
/// with these values 1-5%.
const MIN_LEAD_NS: u64 = 200_000;
/// The least time the window stays open after the predicted arrival.
const MIN_WINDOW_NS: u64 = 150_000;

/// What an idle worker does now (see [`Anticipation::plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// No steady period: sleep until work comes.
    Block,
    /// Sleep at most until this monotonic time (ns), when the window opens.
    SleepUntil(u64),
    /// The window is open: look for work again at once.
    Spin,
}

/// The learned period of one executor's work.
#[derive(Default)]
pub(crate) struct Anticipation {
    // SYNC: every field Relaxed: see the module docs.
    /// The last burst's time (monotonic ns); 0 before the first.
    last: AtomicU64,
    /// The estimated period (ns); 0 before the first interval.
    period: AtomicU64,
    /// The average distance of an interval from the period (ns).
    jitter: AtomicU64,
    /// Consecutive intervals that matched the period.
    steady: AtomicU32,
    /// A worker is spinning in the window (the others block).
    spinning: AtomicBool,
    /// Bursts found by a worker spinning in the window.
    caught: AtomicU64,
    /// Bursts that came while the period was steady but no worker was in
    /// the window (they paid a wake-up).
    missed: AtomicU64,
}

/// How well an executor anticipates its work (see
/// [`Executor::anticipation`](crate::Executor::anticipation)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Anticipated {
    /// The period learned, once steady.
    pub period: Option<std::time::Duration>,
    /// Bursts of work found by a thread spinning in the window: no
    /// wake-up paid.
    pub caught: u64,
    /// Bursts that came, with the period steady, while every thread slept
    /// (early, late, or a thread's timed sleep ended late).
    pub missed: u64,
}

impl Anticipation {
    /// A burst of work arrived at `now` (monotonic ns).
    pub(crate) fn arrived(&self, now: u64) {
        let last = self.last.swap(now, Ordering::Relaxed);
        if last == 0 || now <= last {
            return;
        }
        let interval = now - last;
        let period = self.period.load(Ordering::Relaxed);
        if period == 0 {
            self.period.store(interval, Ordering::Relaxed);
            return;
        }
        let quarter = period / 4;
        let (cycles, rest) = (interval / period, interval % period);
        // Distance to the nearest whole number of periods.
        let (n, dev) = if rest <= period - rest {
            (cycles, rest)
        } else {
            (cycles + 1, period - rest)
        };
        if n == 0 || dev > quarter || n > 4 {
            // Not this period (a new rate, or irregular work): learn again.
            self.period.store(interval, Ordering::Relaxed);
            self.jitter.store(0, Ordering::Relaxed);
            self.steady.store(0, Ordering::Relaxed);
            return;
        }
        let jitter = self.jitter.load(Ordering::Relaxed);
        self.jitter
            .store(jitter - jitter / 16 + dev / 16, Ordering::Relaxed);
        if n == 1 {
            // Follow slow drift: an eighth of the way to this interval.
            let p = (period as i64 + (interval as i64 - period as i64) / 8) as u64;
            self.period.store(p, Ordering::Relaxed);
            let s = self.steady.load(Ordering::Relaxed);
            self.steady.store(s.saturating_add(1), Ordering::Relaxed);
        }
        // n in 2..=4: messages were skipped or lost; the period stands.
    }

    /// Count a burst found at the end of an anticipating wait: by a worker
    /// in the window (`caught`) or, with a steady period, by one that
    /// slept through its arrival.
    pub(crate) fn count(&self, caught: bool, steady: bool) {
        if caught {
            self.caught.fetch_add(1, Ordering::Relaxed);
        } else if steady {
            self.missed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The figures so far.
    pub(crate) fn report(&self) -> Anticipated {
        let steady = self.steady.load(Ordering::Relaxed) >= STEADY_AFTER;
        let period = self.period.load(Ordering::Relaxed);
        Anticipated {
            period: (steady && period >= MIN_PERIOD_NS)
                .then(|| std::time::Duration::from_nanos(period)),
            caught: self.caught.load(Ordering::Relaxed),
            missed: self.missed.load(Ordering::Relaxed),
        }
    }

    /// What an idle worker does at `now` (monotonic ns).
    pub(crate) fn plan(&self, now: u64) -> Plan {
        let period = self.period.load(Ordering::Relaxed);
        if self.steady.load(Ordering::Relaxed) < STEADY_AFTER || period < MIN_PERIOD_NS {
            return Plan::Block;
        }
        let last = self.last.load(Ordering::Relaxed);
        let jitter = self.jitter.load(Ordering::Relaxed);
        let lead = (2 * jitter + MIN_LEAD_NS).min(period / 4);
        let window = (2 * jitter + MIN_WINDOW_NS).min(period / 4);
        let mut due = last + period;
        if now > due + window {
            // The burst did not come: expect the next one (at most four
            // periods on; after that, block until work shows the rate).
            let missed = (now - due - window) / period + 1;
            if missed > 4 {
                return Plan::Block;
            }
            due += missed * period;
        }
        if now + lead < due {
            Plan::SleepUntil(due - lead)
        } else {
            Plan::Spin
        }
    }

    /// Claim the window for this worker; false when another one spins.
    pub(crate) fn claim(&self) -> bool {
        !self.spinning.swap(true, Ordering::Relaxed)
    }

    /// Give the window up (after a claim).
    pub(crate) fn release(&self) {
        self.spinning.store(false, Ordering::Relaxed);
    }
}

/// The window held by one worker while it spins in it: claimed with
/// [`hold`](Self::hold), given up by [`give_up`](Self::give_up) or when
/// dropped, so no way out of a turn leaves it claimed.
#[derive(Default)]
pub(crate) struct Window<'a> {
    held: Option<&'a Anticipation>,
}

impl<'a> Window<'a> {
    /// Whether this worker holds the window.
    pub(crate) fn held(&self) -> bool {
        self.held.is_some()
    }

    /// Hold `a`'s window unless another worker does; true while held.
    pub(crate) fn hold(&mut self, a: &'a Anticipation) -> bool {
        if self.held.is_none() && a.claim() {
            self.held = Some(a);
        }
        self.held.is_some()
    }

    /// Give the window up, if held.
    pub(crate) fn give_up(&mut self) {
        if let Some(a) = self.held.take() {
            a.release();
        }
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        self.give_up();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    #[test]
    fn one_worker_holds_the_window_until_it_gives_it_up_or_leaves() {
        let a = Anticipation::default();
        let mut first = Window::default();
        assert!(first.hold(&a));
        assert!(first.hold(&a), "holding it again keeps it");
        {
            let mut second = Window::default();
            assert!(!second.hold(&a), "another worker spins");
            assert!(!second.held());
        } // dropping a window not held releases nothing
        assert!(!Window::default().hold(&a));
        first.give_up();
        let mut third = Window::default();
        assert!(third.hold(&a));
        drop(third); // a turn that returns early
        assert!(Window::default().hold(&a));
    }

    fn learned(period: u64, bursts: u64) -> Anticipation {
        let a = Anticipation::default();
        for k in 1..=bursts {
            a.arrived(k * period);
        }
        a
    }

    #[test]
    fn blocks_until_the_period_is_steady() {
        let a = Anticipation::default();
        assert_eq!(a.plan(5 * MS), Plan::Block);
        // The first burst gives no interval, the second a period, and
        // three more intervals must match it.
        for k in 1..=4 {
            a.arrived(k * 10 * MS);
            assert_eq!(a.plan(k * 10 * MS + MS), Plan::Block, "after {k} bursts");
        }
        a.arrived(50 * MS);
        assert_eq!(a.plan(51 * MS), Plan::SleepUntil(60 * MS - MIN_LEAD_NS));
    }

    #[test]
    fn spins_in_the_window_around_the_predicted_arrival() {
        let a = learned(10 * MS, 10); // last burst at 100 ms
        assert_eq!(
            a.plan(100 * MS + 50 * US),
            Plan::SleepUntil(110 * MS - MIN_LEAD_NS)
        );
        assert_eq!(a.plan(110 * MS - MIN_LEAD_NS), Plan::Spin);
        assert_eq!(a.plan(110 * MS + MIN_WINDOW_NS), Plan::Spin);
        // Past the window: sleep until the next period's window.
        assert_eq!(
            a.plan(110 * MS + MIN_WINDOW_NS + 1),
            Plan::SleepUntil(120 * MS - MIN_LEAD_NS)
        );
        // Long silence: block.
        assert_eq!(a.plan(200 * MS), Plan::Block);
    }

    #[test]
    fn jitter_widens_the_window_up_to_a_quarter_period() {
        let a = Anticipation::default();
        let mut t = 0;
        for k in 0..40u64 {
            t += 10 * MS + if k % 2 == 0 { 300 * US } else { 0 };
            a.arrived(t);
        }
        let Plan::SleepUntil(open) = a.plan(t + 10 * US) else {
            panic!("steady despite jitter: {:?}", a.plan(t + 10 * US));
        };
        let p = a.period.load(Ordering::Relaxed);
        let lead = t + p - open;
        assert!(lead > MIN_LEAD_NS && lead <= p / 4, "lead {lead} ns");
        // Jitter beyond a quarter period is not a period.
        let b = Anticipation::default();
        let mut t = 0;
        for k in 0..40u64 {
            t += if k % 2 == 0 { 4 * MS } else { 10 * MS };
            b.arrived(t);
        }
        assert_eq!(b.plan(t + 10 * US), Plan::Block);
    }

    #[test]
    fn a_dropped_message_keeps_the_period_and_a_new_rate_is_learned() {
        let a = learned(10 * MS, 10);
        a.arrived(120 * MS); // 110 ms never came
        assert_eq!(a.plan(121 * MS), Plan::SleepUntil(130 * MS - MIN_LEAD_NS));
        // The camera switches to 30 Hz.
        let mut t = 120 * MS;
        for _ in 0..4 {
            t += 33 * MS;
            a.arrived(t);
        }
        assert_eq!(a.plan(t + MS), Plan::SleepUntil(t + 33 * MS - MIN_LEAD_NS));
    }

    #[test]
    fn work_faster_than_the_shortest_period_is_not_anticipated() {
        let a = learned(100 * US, 20);
        assert_eq!(a.plan(2 * MS + 10 * US), Plan::Block);
    }

    #[test]
    fn the_report_counts_caught_and_missed_bursts() {
        let a = learned(10 * MS, 10);
        a.count(true, true);
        a.count(false, true);
        a.count(false, false); // before the period was steady: neither
        let r = a.report();
        assert_eq!((r.caught, r.missed), (1, 1));
        assert_eq!(r.period, Some(std::time::Duration::from_millis(10)));
        assert_eq!(Anticipation::default().report().period, None);
    }

    #[test]
    fn one_worker_claims_the_window() {
        let a = Anticipation::default();
        assert!(a.claim());
        assert!(!a.claim());
        a.release();
        assert!(a.claim());
    }
}
