//! SVG plots of a [`LatencyRecorder`]: a latency histogram and a
//! latency-over-time scatter.
//!
//! Only plotters' SVG backend is used. Text is emitted as SVG `<text>`
//! elements with a generic `sans-serif` family, so no system fonts are needed
//! at render time (plotters' font-less build estimates text extents for
//! layout; the viewer picks the real font).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::combinators::WithKeyPoints;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::report::format_ns;
use super::stats::LatencyRecorder;

/// Plot size in pixels.
const SIZE: (u32, u32) = (1000, 600);
/// Number of logarithmic histogram buckets between min and max.
const HIST_BUCKETS: usize = 80;
/// Above this many time-series points, plot per-time-bin min and max only.
const MAX_SCATTER_POINTS: usize = 20_000;
/// Number of time bins when reducing the time series.
const TIME_BINS: usize = 5_000;
/// Font for all text.
const FONT: &str = "sans-serif";

/// Failure to write a plot; always names the file.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The output directory could not be created.
    #[error("cannot create plot directory {}: {source}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Drawing or writing the SVG failed.
    #[error("cannot draw plot {}: {message}", path.display())]
    Draw {
        /// The SVG file.
        path: PathBuf,
        /// plotters' error message.
        message: String,
    },
}

/// Makes `s` safe as a file-name stem: ASCII letters, digits, `-`, `_` and
/// `.` are kept, every other run of characters becomes a single `_`, leading
/// dots and underscores are dropped, the result is at most 100 bytes and
/// never empty (`"plot"` instead).
#[must_use]
pub fn sanitize_stem(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_start_matches(['.', '_']);
    let mut out = out[..out.len().min(100)].trim_end_matches('_').to_owned();
    if out.is_empty() {
        out.push_str("plot");
    }
    out
}

/// Writes `<stem>-hist.svg` (latency histogram, logarithmic buckets, x in
/// microseconds) and `<stem>-time.svg` (latency over time, x in seconds, y in
/// microseconds) into `dir`, creating it if needed. `stem` is passed through
/// [`sanitize_stem`]. Returns the written paths (histogram first).
///
/// An empty recorder, or one without a time series, still yields both files
/// with a "no samples" note.
///
/// # Errors
///
/// [`PlotError`] naming the directory or file that could not be written.
pub fn write_plots(
    dir: &Path,
    stem: &str,
    rec: &LatencyRecorder,
    title: &str,
) -> Result<Vec<PathBuf>, PlotError> {
    std::fs::create_dir_all(dir).map_err(|source| PlotError::Dir {
        path: dir.to_owned(),
        source,
    })?;
    let stem = sanitize_stem(stem);
    let hist_path = dir.join(format!("{stem}-hist.svg"));
    let time_path = dir.join(format!("{stem}-time.svg"));
    draw_to(&hist_path, |root| draw_histogram(root, rec, title))?;
    draw_to(&time_path, |root| draw_time_series(root, rec, title))?;
    Ok(vec![hist_path, time_path])
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;
type Root<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Renders into an SVG file at `path`, mapping any failure to
/// [`PlotError::Draw`].
fn draw_to(path: &Path, draw: impl FnOnce(&Root<'_>) -> DrawResult) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    draw(&root).map_err(|e| err(&e))?;
    // `present` writes the file; without it the write would happen (and its
    // error be lost) on drop.
    root.present().map_err(|e| err(&e))
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

/// Axis label for a value in microseconds: 3 significant digits without
/// trailing zeros (`"5 us"`, `"2.5 ms"`).
fn us_label(v: f64) -> String {
    let ns = v * 1_000.0;
    let (value, unit) = if ns < 999.5 {
        (ns, "ns")
    } else if ns < 999_995.0 {
        (ns / 1e3, "us")
    } else if ns < 999_995_000.0 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if value >= 99.95 {
        0
    } else if value >= 9.995 {
        1
    } else {
        2
    };
    let text = format!("{value:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text} {unit}")
}

/// Tick positions for a logarithmic axis over `[lo, hi]` (both > 0): the
/// 1-2-5 sequence, thinned to 1-per-decade (or sparser) on wide ranges, or
/// evenly spaced "nice" values when the range spans too little for that.
/// plotters' own log-axis ticks crowd and overlap on some ranges.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const MAX_TICKS: usize = 12;
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let in_range = |v: &f64| *v >= lo && *v <= hi;
    let decade = |mults: &'static [f64], step: usize| {
        (d0..=d1)
            .step_by(step)
            .flat_map(move |d| mults.iter().map(move |m| m * 10f64.powi(d)))
            .filter(in_range)
            .collect::<Vec<f64>>()
    };
    let ticks = decade(&[1.0, 2.0, 5.0], 1);
    if ticks.len() > MAX_TICKS {
        let step = usize::try_from(d1 - d0).unwrap_or(1) / MAX_TICKS + 1;
        return decade(&[1.0], step);
    }
    if ticks.len() >= 4 {
        return ticks;
    }
    // Narrow range: linear nice steps (1, 2 or 5 x 10^k) giving ~5 ticks.
    let raw = (hi - lo) / 5.0;
    if raw.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

fn no_samples(root: &Root<'_>, title: &str, what: &str) -> DrawResult {
    let area = root.titled(title, (FONT, 22))?;
    let (w, h) = area.dim_in_pixel();
    let style = TextStyle::from((FONT, 18).into_font()).color(&BLACK).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    area.draw(&Text::new(
        what.to_owned(),
        (i32::try_from(w / 2)?, i32::try_from(h / 2)?),
        style,
    ))?;
    Ok(())
}

/// Percentile marker lines: (label, value in ns, colour).
fn markers(rec: &LatencyRecorder) -> [(String, u64, RGBColor); 4] {
    let s = rec.summary();
    [
        (format!("p50  {}", format_ns(s.p50 as f64)), s.p50, GREEN),
        (
            format!("p99  {}", format_ns(s.p99 as f64)),
            s.p99,
            RGBColor(230, 140, 0),
        ),
        (format!("p99.9 {}", format_ns(s.p999 as f64)), s.p999, RED),
        (format!("max  {}", format_ns(s.max as f64)), s.max, MAGENTA),
    ]
}

fn draw_histogram(root: &Root<'_>, rec: &LatencyRecorder, title: &str) -> DrawResult {
    let title = format!("{title}: latency histogram");
    if rec.is_empty() {
        return no_samples(root, &title, "no samples");
    }
    let s = rec.summary();
    let (lo, hi) = (s.min as f64, s.max as f64);

    // Logarithmic buckets from min to max (a single bucket if they coincide).
    let n = if hi > lo { HIST_BUCKETS } else { 1 };
    let ratio = if hi > lo { hi / lo } else { 1.0 };
    let edge = |i: usize| lo * ratio.powf(i as f64 / n as f64);
    let mut counts = vec![0u64; n];
    for v in rec.histogram().iter_recorded() {
        let value = (v.value_iterated_to() as f64).clamp(lo, hi);
        let idx = if n == 1 {
            0
        } else {
            ((value / lo).ln() / ratio.ln() * n as f64) as usize
        };
        counts[idx.min(n - 1)] += v.count_at_value();
    }
    let bars: Vec<(f64, f64, u64)> = (0..n)
        .filter(|&i| counts[i] > 0)
        .map(|i| {
            if n == 1 {
                (us(s.min) / 1.05, us(s.max) * 1.05, counts[i])
            } else {
                (edge(i) / 1_000.0, edge(i + 1) / 1_000.0, counts[i])
            }
        })
        .collect();
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64;

    let x_range = (us(s.min) / 1.25)..(us(s.max) * 1.25);
    let y_range = 0.8..(top * 3.0);
    let mut chart = ChartBuilder::on(root)
        .caption(&title, (FONT, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            x_range
                .clone()
                .log_scale()
                .with_key_points(log_ticks(x_range.start, x_range.end)),
            y_range
                .clone()
                .log_scale()
                .with_key_points(log_ticks(y_range.start, y_range.end)),
        )?;
    chart
        .configure_mesh()
        .x_desc("latency (log scale)")
        .y_desc("samples (log scale)")
        .x_label_formatter(&|v| us_label(*v))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()?;

    let bar_style = BLUE.mix(0.6).filled();
    chart.draw_series(
        bars.iter()
            .map(|&(x0, x1, c)| Rectangle::new([(x0, 0.8), (x1, c as f64)], bar_style)),
    )?;

    // Highest percentile first, so coinciding lines show the lower one.
    for (label, ns, color) in markers(rec).into_iter().rev() {
        let x = us(ns);
        chart
            .draw_series(LineSeries::new(
                [(x, 0.8), (x, top * 3.0)],
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    legend(&mut chart)
}

/// Reduces the series to per-time-bin minimum and maximum points when it is
/// too dense to scatter, so both the floor and the spikes stay visible.
fn reduce_series(points: &[(f64, u64)]) -> Vec<(f64, u64)> {
    if points.len() <= MAX_SCATTER_POINTS {
        return points.to_vec();
    }
    let (t0, t1) = (points[0].0, points[points.len() - 1].0);
    let span = (t1 - t0).max(f64::MIN_POSITIVE);
    type Point = (f64, u64);
    // Per bin: (lowest-latency point, highest-latency point).
    let mut bins: Vec<Option<(Point, Point)>> = vec![None; TIME_BINS];
    for &p in points {
        let i = (((p.0 - t0) / span) * TIME_BINS as f64) as usize;
        let bin = &mut bins[i.min(TIME_BINS - 1)];
        match bin {
            None => *bin = Some((p, p)),
            Some((min, max)) => {
                if p.1 < min.1 {
                    *min = p;
                }
                if p.1 > max.1 {
                    *max = p;
                }
            }
        }
    }
    bins.into_iter()
        .flatten()
        .flat_map(|(min, max)| {
            if min == max {
                vec![min]
            } else {
                vec![min, max]
            }
        })
        .collect()
}

fn draw_time_series(root: &Root<'_>, rec: &LatencyRecorder, title: &str) -> DrawResult {
    let title = format!("{title}: latency over time");
    let series = rec.time_series();
    if series.is_empty() {
        let why = if rec.has_time_series() {
            "no samples"
        } else {
            "no time series recorded"
        };
        return no_samples(root, &title, why);
    }
    let points = reduce_series(series);
    let (t_min, t_max) = series
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let (y_min, y_max) = series
        .iter()
        .fold((u64::MAX, 0), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let t_lo = t_min.min(0.0);
    let t_hi = if t_max > t_lo { t_max } else { t_lo + 1e-3 };
    let y_range = (us(y_min) / 1.5)..(us(y_max) * 1.5);

    let mut chart = time_chart(root, &title, t_lo..t_hi, y_range, "latency (log scale)", 2)?;

    // Overall p50 / p99 from the full histogram, not just the kept points;
    // drawn first so the samples stay visible on top.
    for (label, ns, color) in markers(rec).into_iter().take(2) {
        let y = us(ns);
        chart
            .draw_series(LineSeries::new(
                [(t_lo, y), (t_hi, y)],
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }

    let dot = BLUE.mix(0.5).filled();
    chart
        .draw_series(
            points
                .iter()
                .map(|&(t, ns)| Circle::new((t, us(ns)), 1, dot)),
        )?
        .label(if points.len() < series.len() {
            "samples (min/max per time bin)"
        } else {
            "samples"
        })
        .legend(move |(x, y)| Circle::new((x + 10, y), 3, dot));

    legend(&mut chart)
}

/// The series legend every plot draws in its upper right corner.
fn legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Time (s) against latency (us, log scale).
type TimeChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, WithKeyPoints<LogCoord<f64>>>>;

/// A chart of time (s) against latency (us, log scale) with its mesh
/// drawn: the frame of the latency-over-time and per-second plots.
fn time_chart<'a, 'b>(
    root: &'a Root<'b>,
    title: &str,
    t: std::ops::Range<f64>,
    y_range: std::ops::Range<f64>,
    y_desc: &str,
    t_decimals: usize,
) -> Result<TimeChart<'a, 'b>, DrawingAreaErrorKind<std::io::Error>> {
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            t,
            y_range
                .clone()
                .log_scale()
                .with_key_points(log_ticks(y_range.start, y_range.end)),
        )?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc(y_desc)
        .x_label_formatter(&|v| format!("{v:.t_decimals$}"))
        .y_label_formatter(&|v| us_label(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()?;
    Ok(chart)
}

/// One per-second row of a `perf ping` run, for [`write_rows_plot`].
#[derive(Debug, Clone, Copy)]
pub struct RowPoint {
    /// Seconds since the measurement started (end of the row's second).
    pub t: f64,
    /// Median (ns).
    pub p50: u64,
    /// 99th percentile (ns).
    pub p99: u64,
    /// Maximum (ns).
    pub max: u64,
}

/// Per-second P50 / P99 / max lines (the ddsperf-style ping-pong's
/// latency-over-time figure), as an SVG.
pub fn write_rows_plot(path: &Path, rows: &[RowPoint], title: &str) -> Result<(), PlotError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| PlotError::Dir {
            path: dir.to_owned(),
            source,
        })?;
    }
    draw_to(path, |root| draw_rows(root, rows, title))
}

fn draw_rows(root: &Root<'_>, rows: &[RowPoint], title: &str) -> DrawResult {
    let title = format!("{title}: per-second latency");
    if rows.is_empty() {
        return no_samples(root, &title, "no rows");
    }
    let t_hi = rows.iter().map(|r| r.t).fold(1.0, f64::max);
    let y_lo = rows.iter().map(|r| r.p50).min().unwrap_or(1).max(1);
    let y_hi = rows.iter().map(|r| r.max).max().unwrap_or(1).max(y_lo + 1);
    let y_range = (us(y_lo) / 1.5)..(us(y_hi) * 1.5);
    let mut chart = time_chart(
        root,
        &title,
        0.0..t_hi,
        y_range,
        "one-way latency (log scale)",
        1,
    )?;
    type Line = (&'static str, RGBColor, fn(&RowPoint) -> u64);
    let lines: [Line; 3] = [
        ("P50", BLUE, |r| r.p50),
        ("P99", RGBColor(230, 120, 0), |r| r.p99),
        ("max", RED, |r| r.max),
    ];
    for (label, color, pick) in lines {
        chart
            .draw_series(LineSeries::new(
                rows.iter().map(|r| (r.t, us(pick(r)))),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    legend(&mut chart)
}

/// `myelin bench scale`'s chart: against the number of processes, one
/// line per transport, the idle CPU per process (left) and the late
/// joiner's time to its first message (right), both on log scales.
pub(crate) fn write_scale_chart(
    path: &Path,
    rows: &[crate::scenarios::scale::ScaleRow],
) -> Result<(), PlotError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| PlotError::Dir {
            path: dir.to_owned(),
            source,
        })?;
    }
    draw_to(path, |root| {
        let panels = root.split_evenly((1, 2));
        type Pick = fn(&crate::scenarios::scale::ScaleRow) -> f64;
        let charts: [(&str, &str, Pick); 2] = [
            (
                "idle CPU per process",
                "ms of CPU per second (log scale)",
                |r| r.idle_per_process_ms_per_s,
            ),
            (
                "late joiner: first message",
                "ms after it started (log scale)",
                |r| r.joiner_first_ms,
            ),
        ];
        for (panel, (title, y_desc, pick)) in panels.iter().zip(charts) {
            draw_scale_panel(panel, rows, title, y_desc, pick)?;
        }
        Ok(())
    })
}

fn draw_scale_panel(
    root: &Root<'_>,
    rows: &[crate::scenarios::scale::ScaleRow],
    title: &str,
    y_desc: &str,
    pick: fn(&crate::scenarios::scale::ScaleRow) -> f64,
) -> DrawResult {
    let values: Vec<f64> = rows
        .iter()
        .map(pick)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if values.is_empty() {
        return no_samples(root, title, "no rows");
    }
    let n_hi = rows.iter().map(|r| r.n).max().unwrap_or(2) as f64;
    let n_lo = rows.iter().map(|r| r.n).min().unwrap_or(1) as f64;
    let y_lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let y_hi = values.iter().copied().fold(0.0, f64::max);
    // Labels at the measured populations only (a log axis would label
    // every tenth and crowd 60..100).
    let mut populations: Vec<f64> = rows.iter().map(|r| r.n as f64).collect();
    populations.sort_by(f64::total_cmp);
    populations.dedup();
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            ((n_lo / 1.3)..(n_hi * 1.3))
                .log_scale()
                .with_key_points(populations),
            ((y_lo / 2.0)..(y_hi * 2.0)).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("processes (log scale)")
        .y_desc(y_desc)
        .max_light_lines(1)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| match *v {
            v if v >= 10.0 => format!("{v:.0}"),
            v if v >= 1.0 => format!("{v:.1}"),
            v if v >= 0.1 => format!("{v:.2}"),
            v => format!("{v:.3}"),
        })
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()?;
    let colors = [BLUE, RGBColor(230, 120, 0), RGBColor(0, 150, 60), RED];
    let mut transports: Vec<_> = rows.iter().map(|r| r.transport).collect();
    transports.dedup();
    for (i, t) in transports.into_iter().enumerate() {
        let color = colors[i % colors.len()];
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.transport == t)
            .map(|r| (r.n as f64, pick(r)))
            .filter(|(_, v)| v.is_finite() && *v > 0.0)
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(t.name())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 4, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// A colour per system, the same in every comparison chart.
fn system_color(system: &str) -> RGBColor {
    match system {
        "myelin" => RGBColor(31, 119, 180),
        "zenoh" => RGBColor(255, 127, 14),
        "iceoryx2" => RGBColor(44, 160, 44),
        "cyclonedds" => RGBColor(148, 103, 189),
        "libxr" => RGBColor(140, 86, 75),
        "channel" => RGBColor(127, 127, 127),
        "raw" => RGBColor(40, 40, 40),
        _ => RGBColor(214, 39, 40),
    }
}

/// `myelin bench --plot`'s comparison charts: one SVG per scenario,
/// `compare-<scenario>.svg`, every run of the scenario on one row so the
/// systems sit side by side. Left, the latency distribution as a box plot
/// on a log scale (box from P50 to P90, whisker to P99, a cross at the
/// maximum); right, CPU time per message (bars, log scale). A run that
/// measured nothing says so on its row. Returns the files written.
///
/// ```no_run
/// # fn records() -> Vec<myelin_bench::Record> { Vec::new() }
/// let files = myelin_bench::write_comparison_charts("plots".as_ref(), &records())?;
/// # Ok::<(), myelin_bench::PlotError>(())
/// ```
pub fn write_comparison_charts(
    dir: &Path,
    records: &[super::report::Record],
) -> Result<Vec<PathBuf>, PlotError> {
    let mut scenarios: Vec<&str> = records.iter().map(|r| r.scenario.as_str()).collect();
    scenarios.dedup();
    scenarios.sort_unstable();
    scenarios.dedup();
    if !scenarios.is_empty() {
        std::fs::create_dir_all(dir).map_err(|source| PlotError::Dir {
            path: dir.to_owned(),
            source,
        })?;
    }
    let mut files = Vec::new();
    for scenario in scenarios {
        let rows: Vec<&super::report::Record> =
            records.iter().filter(|r| r.scenario == scenario).collect();
        let path = dir.join(format!("compare-{}.svg", sanitize_stem(scenario)));
        let size = (
            1200,
            110 + 30 * u32::try_from(rows.len()).unwrap_or(u32::MAX / 64),
        );
        draw_sized(&path, size, |root| draw_comparison(root, scenario, &rows))?;
        files.push(path);
    }
    Ok(files)
}

/// [`draw_to`] with a size of its own.
fn draw_sized(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&Root<'_>) -> DrawResult,
) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    draw(&root).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// A comparison panel: `n` rows (y from 0 to `n`, unlabelled), a
/// microsecond range on a log x axis, the mesh drawn.
type RowChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<WithKeyPoints<LogCoord<f64>>, RangedCoordf64>>;

fn row_panel<'a, 'b>(
    area: &'a Root<'b>,
    caption: &str,
    x: std::ops::Range<f64>,
    n: usize,
    label_area: u32,
) -> Result<RowChart<'a, 'b>, DrawingAreaErrorKind<std::io::Error>> {
    let ticks = log_ticks(x.start, x.end);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(label_area)
        .build_cartesian_2d(x.log_scale().with_key_points(ticks), 0.0..n as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_label_formatter(&|v| us_label(*v))
        .label_style((FONT, 13))
        .draw()?;
    Ok(chart)
}

/// Row `i` of `n`, as the y coordinate of its centre (the first on top).
fn row_y(i: usize, n: usize) -> f64 {
    (n - 1 - i) as f64 + 0.5
}

fn draw_comparison(root: &Root<'_>, scenario: &str, rows: &[&super::report::Record]) -> DrawResult {
    let root = root.titled(&format!("{scenario}: every system in one run"), (FONT, 22))?;
    let n = rows.len();
    let (w, _) = root.dim_in_pixel();
    let (left, right) = root.split_horizontally(w * 7 / 10);
    let measured = |r: &super::report::Record| r.count > 0 && r.latency_ns.max > 0;

    // Latency: P50..P90 box, whisker to P99, a cross at the maximum.
    let lo = rows
        .iter()
        .filter(|r| measured(r))
        .map(|r| r.latency_ns.p50.max(1))
        .min();
    let hi = rows
        .iter()
        .filter(|r| measured(r))
        .map(|r| r.latency_ns.max)
        .max();
    let (x_lo, x_hi) = match (lo, hi) {
        (Some(lo), Some(hi)) => (us(lo) / 1.5, us(hi.max(lo + 1)) * 1.5),
        _ => (0.001, 1.0),
    };
    let mut chart = row_panel(
        &left,
        "latency: box P50-P90, whisker to P99, x = max (log scale)",
        x_lo..x_hi,
        n,
        330,
    )?;
    // Row labels, right-aligned left of the plotting area (plotters' own
    // labels go at tick values, not at categories).
    let (base_x, base_y) = left.get_base_pixel();
    let label_style =
        TextStyle::from((FONT, 13).into_font()).pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Right,
            plotters::style::text_anchor::VPos::Center,
        ));
    for (i, r) in rows.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(x_lo, row_y(i, n)));
        left.draw(&Text::new(
            format!("{} {}", r.system, r.config),
            (px - base_x - 8, py - base_y),
            label_style.clone(),
        ))?;
    }
    for (i, r) in rows.iter().enumerate() {
        let y = row_y(i, n);
        if !measured(r) {
            chart.draw_series(std::iter::once(Text::new(
                "no samples",
                (x_lo * 1.1, y),
                (FONT, 13).into_font().color(&RED),
            )))?;
            continue;
        }
        let c = system_color(&r.system);
        let s = &r.latency_ns;
        let (p50, p90, p99, max) = (us(s.p50.max(1)), us(s.p90), us(s.p99), us(s.max));
        chart.draw_series(std::iter::once(PathElement::new(
            [(p90, y), (p99.max(p90), y)],
            c.stroke_width(2),
        )))?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(p50, y - 0.3), (p90.max(p50), y + 0.3)],
            c.mix(0.75).filled(),
        )))?;
        chart.draw_series(std::iter::once(PathElement::new(
            [(p50, y - 0.3), (p50, y + 0.3)],
            BLACK.stroke_width(2),
        )))?;
        chart.draw_series(std::iter::once(Cross::new(
            (max.max(p50), y),
            4,
            c.stroke_width(2),
        )))?;
    }

    // CPU time per message.
    let cpu: Vec<f64> = rows
        .iter()
        .map(|r| r.cpu_ns_per_msg)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let c_lo = cpu.iter().copied().fold(f64::INFINITY, f64::min);
    let c_hi = cpu.iter().copied().fold(0.0, f64::max);
    let (c_lo, c_hi) = if cpu.is_empty() {
        (0.001, 1.0)
    } else {
        // Bars start a factor of 3 below the smallest: on a log scale a
        // bar's length is a ratio to that origin, the same for every row.
        ((c_lo / 1e3) / 3.0, (c_hi / 1e3) * 2.0)
    };
    let mut chart = row_panel(&right, "CPU per message (log scale)", c_lo..c_hi, n, 10)?;
    for (i, r) in rows.iter().enumerate() {
        let v = r.cpu_ns_per_msg;
        if !(v.is_finite() && v > 0.0) {
            continue;
        }
        let y = row_y(i, n);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(c_lo, y - 0.3), (v / 1e3, y + 0.3)],
            system_color(&r.system).mix(0.75).filled(),
        )))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("myelin-bench-plot-{name}-{}", std::process::id()))
    }

    fn is_svg(path: &Path) -> bool {
        let text = std::fs::read_to_string(path).unwrap();
        let t = text.trim_start();
        t.starts_with("<svg") || t.starts_with("<?xml")
    }

    #[test]
    fn sanitize() {
        assert_eq!(sanitize_stem("pingpong"), "pingpong");
        assert_eq!(
            sanitize_stem("chain/myelin payload=64B"),
            "chain_myelin_payload_64B"
        );
        assert_eq!(sanitize_stem("../../etc/passwd"), "etc_passwd");
        assert_eq!(sanitize_stem("a  <>|:*?b"), "a_b");
        assert_eq!(sanitize_stem("µs-latency"), "s-latency");
        assert_eq!(sanitize_stem(""), "plot");
        assert_eq!(sanitize_stem("///"), "plot");
        assert!(sanitize_stem(&"x".repeat(500)).len() <= 100);
    }

    #[test]
    fn axis_labels_and_ticks() {
        assert_eq!(us_label(0.042), "42 ns");
        assert_eq!(us_label(5.0), "5 us");
        assert_eq!(us_label(5.35), "5.35 us");
        assert_eq!(us_label(12.5), "12.5 us");
        assert_eq!(us_label(250.0), "250 us");
        assert_eq!(us_label(2_500.0), "2.5 ms");
        assert_eq!(us_label(3e6), "3 s");
        // 1-2-5 sequence on a medium range.
        assert_eq!(log_ticks(4.0, 300.0), [5.0, 10.0, 20.0, 50.0, 100.0, 200.0]);
        // Wide ranges thin out to one tick per decade.
        let wide = log_ticks(0.8, 3e6);
        assert_eq!(wide.len(), 7);
        assert_eq!(wide[0], 1.0);
        // Narrow ranges fall back to linear nice steps.
        assert_eq!(log_ticks(33.6, 52.5), [35.0, 40.0, 45.0, 50.0]);
        assert_eq!(log_ticks(7.0, 7.0), [7.0]);
    }

    #[test]
    fn writes_both_svgs() {
        let dir = temp_dir("full");
        let mut rec = LatencyRecorder::with_time_series();
        for i in 0..50_000u64 {
            // A 5 us floor with periodic spikes.
            let ns = if i % 997 == 0 {
                250_000
            } else {
                5_000 + i % 700
            };
            rec.record_at(i as f64 * 1e-4, ns);
        }
        let paths = write_plots(&dir, "pingpong/myelin 64B", &rec, "pingpong <64B> & co").unwrap();
        assert_eq!(paths.len(), 2);
        assert!(paths[0].ends_with("pingpong_myelin_64B-hist.svg"));
        assert!(paths[1].ends_with("pingpong_myelin_64B-time.svg"));
        for p in &paths {
            assert!(is_svg(p), "{} is not SVG", p.display());
            let text = std::fs::read_to_string(p).unwrap();
            // Text renders as SVG <text> without system fonts, escaped.
            assert!(text.contains("<text"), "{}", p.display());
            assert!(text.contains("pingpong &lt;64B&gt; &amp; co"));
        }
        // The time plot is reduced to a bounded number of points.
        let time = std::fs::read_to_string(&paths[1]).unwrap();
        assert!(time.matches("<circle").count() <= 2 * TIME_BINS + 10);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn record(scenario: &str, system: &str, config: &str, p50: u64) -> crate::Record {
        let mut rec = LatencyRecorder::new();
        for v in [p50, p50 * 2, p50 * 3, p50 * 10] {
            rec.record(v);
        }
        crate::Record {
            scenario: scenario.into(),
            system: system.into(),
            config: config.into(),
            count: if p50 == 0 { 0 } else { 4 },
            lost: 0,
            latency_ns: if p50 == 0 {
                Default::default()
            } else {
                rec.summary()
            },
            cpu_percent: 1.0,
            cpu_ns_per_msg: p50 as f64 * 4.0,
            rss_bytes: 0,
            hops: None,
            per_hop_ns: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn one_comparison_chart_per_scenario_with_a_row_per_run() {
        let dir = temp_dir("compare");
        let records = [
            record("pingpong", "myelin", "64B", 300),
            record("relay", "myelin", "1kHz 64B", 1_000),
            record("pingpong", "zenoh", "64B", 9_000),
            record("pingpong", "iceoryx2", "64B", 0),
        ];
        let files = write_comparison_charts(&dir, &records).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["compare-pingpong.svg", "compare-relay.svg"]);
        let ping = std::fs::read_to_string(&files[0]).unwrap();
        for label in ["myelin 64B", "zenoh 64B", "iceoryx2 64B"] {
            assert!(ping.contains(label), "{label} missing");
        }
        // The run that measured nothing is marked, not drawn as a bar.
        assert!(ping.contains("no samples"));
        let relay = std::fs::read_to_string(&files[1]).unwrap();
        assert!(relay.contains("myelin 1kHz 64B") && !relay.contains("zenoh"));
        assert!(!relay.contains("no samples"));
        // Nothing to compare: no files, no directory.
        let none = temp_dir("compare-none");
        assert!(write_comparison_charts(&none, &[]).unwrap().is_empty());
        assert!(!none.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn degenerate_inputs_still_plot() {
        let dir = temp_dir("degenerate");
        // Empty, histogram-only, and single-valued recorders.
        let empty = LatencyRecorder::with_time_series();
        let mut hist_only = LatencyRecorder::new();
        hist_only.record(1_000);
        let mut single = LatencyRecorder::with_time_series();
        single.record_at(0.0, 42);
        for (stem, rec) in [
            ("empty", &empty),
            ("hist-only", &hist_only),
            ("single", &single),
        ] {
            let paths = write_plots(&dir, stem, rec, stem).unwrap();
            assert_eq!(paths.len(), 2);
            assert!(paths.iter().all(|p| is_svg(p)), "{stem}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
