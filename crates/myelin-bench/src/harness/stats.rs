//! Latency statistics: an HDR histogram at nanosecond resolution plus an
//! optional, bounded latency-over-time series for plots.
//!
//! Percentiles come from [`hdrhistogram`] with 3 significant figures, so a
//! reported percentile is within 0.1 % of the true sample value (values below
//! 2048 ns are exact). `min`, `max`, `mean` and `count` are tracked exactly
//! alongside the histogram.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant figures kept by the histogram (relative error <= 0.1 %).
const SIGFIG: u8 = 3;

/// Highest value the histogram is sized for up front (1 s); it grows beyond.
const PRESIZED_MAX_NS: u64 = 1_000_000_000;

/// Default cap on the number of retained time-series samples.
pub const DEFAULT_SERIES_CAPACITY: usize = 200_000;

/// Latency percentiles of one run, all in nanoseconds.
///
/// Produced by [`LatencyRecorder::summary`]. An empty recorder yields an
/// all-zero summary (`count == 0`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencySummary {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample (exact).
    pub max: u64,
    /// Smallest sample (exact).
    pub min: u64,
    /// Arithmetic mean (exact).
    pub mean: f64,
    /// Number of samples.
    pub count: u64,
}

impl LatencySummary {
    /// Divides every latency figure by `divisor` (rounding to the nearest ns),
    /// leaving `count` unchanged. Used for per-hop figures of an `n`-hop chain:
    /// `summary.scaled(n as f64)`.
    ///
    /// # Panics
    ///
    /// Panics if `divisor` is not a finite number greater than zero.
    #[must_use]
    pub fn scaled(&self, divisor: f64) -> LatencySummary {
        assert!(
            divisor.is_finite() && divisor > 0.0,
            "LatencySummary::scaled: divisor must be finite and > 0, got {divisor}"
        );
        // `as u64` saturates; inputs are non-negative so this is exact rounding.
        let div = |v: u64| (v as f64 / divisor).round() as u64;
        LatencySummary {
            p50: div(self.p50),
            p90: div(self.p90),
            p99: div(self.p99),
            p999: div(self.p999),
            max: div(self.max),
            min: div(self.min),
            mean: self.mean / divisor,
            count: self.count,
        }
    }
}

/// Bounded, evenly decimated `(seconds since start, latency ns)` series.
#[derive(Debug, Clone)]
struct TimeSeries {
    /// Retained points, in recording order.
    points: Vec<(f64, u64)>,
    /// Maximum number of retained points (>= 2).
    capacity: usize,
    /// Keep one sample out of `stride`; doubles each time the buffer fills.
    stride: u64,
    /// Samples offered so far (kept or not).
    seen: u64,
}

impl TimeSeries {
    fn new(capacity: usize) -> Self {
        let capacity = capacity.max(2);
        TimeSeries {
            points: Vec::new(),
            capacity,
            stride: 1,
            seen: 0,
        }
    }

    /// Whether the next offered sample will be kept (lets callers skip
    /// reading the clock for samples that would be dropped).
    #[inline]
    fn wants_next(&self) -> bool {
        self.seen.is_multiple_of(self.stride)
    }

    #[inline]
    fn push(&mut self, t: f64, ns: u64) {
        let keep = self.wants_next();
        self.seen += 1;
        if !keep {
            return;
        }
        if self.points.len() >= self.capacity {
            self.halve();
            // The halving made the stride coarser; this sample may no longer
            // be on the grid.
            if !(self.seen - 1).is_multiple_of(self.stride) {
                return;
            }
        }
        self.points.push((t, ns));
    }

    /// Drops every other point and doubles the stride.
    fn halve(&mut self) {
        let mut i = 0usize;
        self.points.retain(|_| {
            let keep = i.is_multiple_of(2);
            i += 1;
            keep
        });
        self.stride = self.stride.saturating_mul(2);
    }

    /// Adds `other`'s points shifted by `offset` seconds, keeping time order
    /// and the capacity bound.
    fn merge(&mut self, other: &TimeSeries, offset: f64) {
        self.points
            .extend(other.points.iter().map(|&(t, ns)| (t + offset, ns)));
        self.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.seen += other.seen;
        self.stride = self.stride.max(other.stride);
        while self.points.len() > self.capacity {
            self.halve();
        }
    }
}

/// Records latencies (in ns) into an HDR histogram, and optionally into a
/// bounded latency-over-time series for plots.
///
/// Values are clamped to at least 1 ns; the histogram grows automatically, so
/// any `u64` can be recorded.
///
/// ```
/// use myelin_bench::harness::stats::LatencyRecorder;
///
/// let mut rec = LatencyRecorder::new();
/// for ns in 1..=1000 {
///     rec.record(ns);
/// }
/// let s = rec.summary();
/// assert_eq!((s.p50, s.p99, s.max, s.count), (500, 990, 1000, 1000));
/// ```
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    /// Exact sum of recorded values (for an exact mean).
    sum: u128,
    /// Exact smallest value (`u64::MAX` while empty).
    min: u64,
    /// Exact largest value (0 while empty).
    max: u64,
    /// Time origin of the series (creation time of the recorder).
    start: Instant,
    series: Option<TimeSeries>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// A recorder with a histogram only (no time series).
    #[must_use]
    pub fn new() -> Self {
        // Pre-sized to 1 s (~160 KiB of counters) so typical runs never
        // resize while measuring; larger values grow the histogram.
        let mut hist = Histogram::<u64>::new_with_bounds(1, PRESIZED_MAX_NS, SIGFIG)
            .expect("1..=1s at 3 significant figures is a valid configuration");
        hist.auto(true);
        LatencyRecorder {
            hist,
            sum: 0,
            min: u64::MAX,
            max: 0,
            start: Instant::now(),
            series: None,
        }
    }

    /// A recorder that also keeps a latency-over-time series of at most
    /// [`DEFAULT_SERIES_CAPACITY`] points. The time origin is "now".
    #[must_use]
    pub fn with_time_series() -> Self {
        Self::with_time_series_capacity(DEFAULT_SERIES_CAPACITY)
    }

    /// Like [`with_time_series`](Self::with_time_series) with a custom cap
    /// (at least 2). Every sample is kept until the cap is reached; after
    /// that the series is decimated evenly (every other point dropped, then
    /// only every 2nd, 4th, ... new sample kept), so it always spans the
    /// whole run.
    #[must_use]
    pub fn with_time_series_capacity(capacity: usize) -> Self {
        let mut r = Self::new();
        r.series = Some(TimeSeries::new(capacity));
        r
    }

    /// Records one latency in nanoseconds. With a time series enabled the
    /// sample is timestamped with the time since the recorder was created
    /// (the clock is only read for samples that are kept).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_hist(ns);
        if let Some(series) = &mut self.series {
            let t = if series.wants_next() {
                self.start.elapsed().as_secs_f64()
            } else {
                0.0 // dropped by `push`
            };
            series.push(t, ns.max(1));
        }
    }

    /// Records one latency with an explicit timestamp (seconds since the
    /// start of the run) for the time series. The histogram is updated as
    /// with [`record`](Self::record).
    #[inline]
    pub fn record_at(&mut self, secs_since_start: f64, ns: u64) {
        self.record_hist(ns);
        if let Some(series) = &mut self.series {
            series.push(secs_since_start, ns.max(1));
        }
    }

    /// Records a [`Duration`] (saturating at `u64::MAX` ns).
    #[inline]
    pub fn record_duration(&mut self, d: Duration) {
        self.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    #[inline]
    fn record_hist(&mut self, ns: u64) {
        let v = ns.max(1);
        // Note: `saturating_record` would clamp instead of auto-resizing, so
        // use `record` (which grows the histogram) and only clamp if growing
        // is impossible (values above ~u64::MAX / 2).
        if self.hist.record(v).is_err() {
            self.hist.saturating_record(v);
        }
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Number of recorded samples.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// True if nothing was recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The underlying histogram (ns).
    #[must_use]
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// The retained `(seconds since start, ns)` points, in time order; empty
    /// when the time series is disabled.
    #[must_use]
    pub fn time_series(&self) -> &[(f64, u64)] {
        self.series.as_ref().map_or(&[], |s| &s.points)
    }

    /// Whether this recorder keeps a time series.
    #[must_use]
    pub fn has_time_series(&self) -> bool {
        self.series.is_some()
    }

    /// Latency at `quantile` (0.0..=1.0) in ns, within 3 significant figures,
    /// never above the exact maximum. 0 when empty.
    #[must_use]
    pub fn value_at_quantile(&self, quantile: f64) -> u64 {
        if self.is_empty() {
            return 0;
        }
        // hdrhistogram reports the highest value equivalent to the bucket,
        // which can exceed the largest sample; clamp into [min, max].
        self.hist
            .value_at_quantile(quantile)
            .clamp(self.min, self.max)
    }

    /// Percentiles, extremes, mean and count of everything recorded.
    #[must_use]
    pub fn summary(&self) -> LatencySummary {
        let count = self.count();
        if count == 0 {
            return LatencySummary::default();
        }
        LatencySummary {
            p50: self.value_at_quantile(0.50),
            p90: self.value_at_quantile(0.90),
            p99: self.value_at_quantile(0.99),
            p999: self.value_at_quantile(0.999),
            max: self.max,
            min: self.min,
            mean: self.sum as f64 / count as f64,
            count,
        }
    }

    /// Adds all of `other`'s samples to `self` (e.g. per-thread recorders).
    ///
    /// If both keep a time series, `other`'s points are re-based onto
    /// `self`'s time origin and interleaved by time, then decimated to the
    /// cap. If only `other` has one, `self` does not gain one.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        if other.is_empty() {
            return;
        }
        // `add` grows `self` as needed; it only fails (before changing
        // anything) if growing is impossible, in which case clamp instead.
        if self.hist.add(&other.hist).is_err() {
            for v in other.hist.iter_recorded() {
                self.hist
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        if let (Some(mine), Some(theirs)) = (&mut self.series, &other.series) {
            let offset = if other.start >= self.start {
                other.start.duration_since(self.start).as_secs_f64()
            } else {
                -self.start.duration_since(other.start).as_secs_f64()
            };
            mine.merge(theirs, offset);
        }
    }

    /// Forgets every sample and restarts the time origin at "now".
    pub fn reset(&mut self) {
        self.hist.reset();
        self.sum = 0;
        self.min = u64::MAX;
        self.max = 0;
        self.start = Instant::now();
        if let Some(s) = &mut self.series {
            *s = TimeSeries::new(s.capacity);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True if `got` is within hdrhistogram's 3-significant-figure precision
    /// of `want` (buckets are at most value/1024 wide; allow 0.1 % + 1 ns).
    fn close(got: u64, want: u64) -> bool {
        let tol = want / 1000 + 1;
        got.abs_diff(want) <= tol
    }

    fn rec_of(values: impl IntoIterator<Item = u64>) -> LatencyRecorder {
        let mut r = LatencyRecorder::new();
        for v in values {
            r.record(v);
        }
        r
    }

    #[test]
    fn empty_summary_is_zero() {
        let r = LatencyRecorder::new();
        assert!(r.is_empty());
        assert_eq!(r.summary(), LatencySummary::default());
        assert_eq!(r.value_at_quantile(0.5), 0);
    }

    #[test]
    fn uniform_1_to_1000_is_exact() {
        let s = rec_of(1..=1000).summary();
        // Values < 2048 are exact at 3 significant figures.
        // Nearest-rank percentile: the ceil(q * n)-th smallest sample.
        assert_eq!(s.p50, 500);
        assert_eq!(s.p90, 900);
        assert_eq!(s.p99, 990);
        assert_eq!(s.p999, 999);
        assert_eq!(s.min, 1);
        assert_eq!(s.max, 1000);
        assert_eq!(s.count, 1000);
        assert!((s.mean - 500.5).abs() < 1e-9);
    }

    #[test]
    fn scaled_uniform_microseconds() {
        // 1..=1000 us: above the exact range, so compare within precision.
        let s = rec_of((1..=1000).map(|us| us * 1000)).summary();
        assert!(close(s.p50, 500_000), "p50 {}", s.p50);
        assert!(close(s.p90, 900_000), "p90 {}", s.p90);
        assert!(close(s.p99, 990_000), "p99 {}", s.p99);
        assert!(close(s.p999, 999_000), "p999 {}", s.p999);
        assert_eq!(s.max, 1_000_000);
        assert_eq!(s.min, 1000);
        assert!((s.mean - 500_500.0).abs() < 1e-6);
    }

    #[test]
    fn outliers_only_move_the_tail() {
        // 9_990 samples at 5 us, 9 at 2 ms, 1 at 50 ms (10_000 total).
        let mut values = vec![5_000u64; 9_990];
        values.extend([2_000_000u64; 9]);
        values.push(50_000_000);
        let s = rec_of(values).summary();
        assert!(close(s.p50, 5_000), "p50 {}", s.p50);
        assert!(close(s.p90, 5_000), "p90 {}", s.p90);
        assert!(close(s.p99, 5_000), "p99 {}", s.p99);
        // rank ceil(0.999 * 10_000) = 9_990 -> still 5 us.
        assert!(close(s.p999, 5_000), "p999 {}", s.p999);
        assert_eq!(s.max, 50_000_000);
        assert_eq!(s.min, 5_000);
        let mean = (9_990.0 * 5_000.0 + 9.0 * 2_000_000.0 + 50_000_000.0) / 10_000.0;
        assert!((s.mean - mean).abs() < 1e-6);
        assert_eq!(s.count, 10_000);

        // Quantile just past the bulk lands in the 2 ms cluster.
        let r = rec_of(
            std::iter::repeat_n(5_000u64, 9_990)
                .chain(std::iter::repeat_n(2_000_000, 9))
                .chain([50_000_000]),
        );
        assert!(close(r.value_at_quantile(0.9995), 2_000_000));
        assert_eq!(r.value_at_quantile(1.0), 50_000_000);
    }

    #[test]
    fn zero_is_clamped_to_one() {
        let s = rec_of([0, 0, 0]).summary();
        assert_eq!((s.min, s.max, s.p50, s.count), (1, 1, 1, 3));
    }

    #[test]
    fn huge_values_auto_resize() {
        let big = u64::MAX / 4;
        let s = rec_of([1, 10_000_000_000, big]).summary();
        assert_eq!(s.max, big);
        assert_eq!(s.count, 3);
        // The percentiles must see the grown range, not a clamped value.
        assert!(close(s.p50, 10_000_000_000), "p50 {}", s.p50);
        assert_eq!(s.p99, big);
    }

    #[test]
    fn scaled_divides_everything_but_count() {
        let s = LatencySummary {
            p50: 300,
            p90: 600,
            p99: 900,
            p999: 1200,
            max: 3000,
            min: 3,
            mean: 450.0,
            count: 7,
        };
        let h = s.scaled(3.0);
        assert_eq!(
            h,
            LatencySummary {
                p50: 100,
                p90: 200,
                p99: 300,
                p999: 400,
                max: 1000,
                min: 1,
                mean: 150.0,
                count: 7,
            }
        );
    }

    #[test]
    #[should_panic(expected = "divisor")]
    fn scaled_rejects_zero() {
        let _ = LatencySummary::default().scaled(0.0);
    }

    #[test]
    fn merge_equals_recording_everything() {
        let mut a = rec_of(1..=500);
        let b = rec_of(501..=1000);
        a.merge(&b);
        assert_eq!(a.summary(), rec_of(1..=1000).summary());
        // Merging a wider range grows the histogram.
        let mut small = rec_of([10]);
        small.merge(&rec_of([50_000_000_000, 50_000_000_000]));
        assert!(close(small.summary().p50, 50_000_000_000));
        // Merging an empty recorder changes nothing.
        a.merge(&LatencyRecorder::new());
        assert_eq!(a.count(), 1000);
    }

    #[test]
    fn time_series_keeps_everything_below_cap() {
        let mut r = LatencyRecorder::with_time_series_capacity(100);
        for i in 0..100u64 {
            r.record_at(i as f64, i + 1);
        }
        let ts = r.time_series();
        assert_eq!(ts.len(), 100);
        assert_eq!(ts[0], (0.0, 1));
        assert_eq!(ts[99], (99.0, 100));
    }

    #[test]
    fn time_series_decimates_evenly_and_spans_the_run() {
        let cap = 1000;
        let mut r = LatencyRecorder::with_time_series_capacity(cap);
        let n = 100_000u64;
        for i in 0..n {
            r.record_at(i as f64, i + 1);
        }
        let ts = r.time_series();
        assert!(ts.len() <= cap && ts.len() >= cap / 2, "len {}", ts.len());
        assert_eq!(ts[0].0, 0.0);
        // Evenly spaced: constant step between retained points.
        let step = ts[1].0 - ts[0].0;
        assert!(step >= 1.0);
        for w in ts.windows(2) {
            assert_eq!(w[1].0 - w[0].0, step);
        }
        // Covers (nearly) the whole run.
        assert!(ts.last().unwrap().0 >= (n as f64) - step);
        assert_eq!(r.count(), n);
    }

    #[test]
    fn record_timestamps_are_monotonic() {
        let mut r = LatencyRecorder::with_time_series();
        for i in 0..1000 {
            r.record(i);
        }
        let ts = r.time_series();
        assert_eq!(ts.len(), 1000);
        assert!(ts.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(LatencyRecorder::new().time_series().is_empty());
    }

    #[test]
    fn merge_time_series_stays_sorted_and_capped() {
        let mut a = LatencyRecorder::with_time_series_capacity(50);
        let mut b = LatencyRecorder::with_time_series_capacity(50);
        for i in 0..40 {
            a.record_at(f64::from(i), 10);
            b.record_at(f64::from(i) + 0.5, 20);
        }
        a.merge(&b);
        let ts = a.time_series();
        assert!(ts.len() <= 50);
        assert!(ts.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(a.count(), 80);
    }

    #[test]
    fn reset_forgets() {
        let mut r = rec_of(1..=10);
        r.reset();
        assert!(r.is_empty());
        assert_eq!(r.summary(), LatencySummary::default());
        r.record(7);
        assert_eq!(r.summary().min, 7);
    }
}
