//! The charts, drawn with plotters into SVG and PNG side by side, for bench
//! sweeps and scenario runs alike:
//!
//! - throughput: total op/s against threads, one line per lock (or
//!   scenario variant), log scale: they differ by orders of magnitude once
//!   threads outnumber cores;
//! - fairness: per-thread op/s at each thread count, a bar from the slowest
//!   to the fastest thread with a dot at the mean; a short bar is a fair
//!   lock.
//!
//! A [`Panel`] is one chart's data: its caller picks, per series and thread
//! count, the run to show (the one with the median total rate over the
//! rounds) and the throughput to draw (the median rate, as the tables). Text uses the DejaVu Sans font shipped in `assets/` (through
//! ab_glyph), so no system font configuration is needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::combinators::{LogCoord, WithKeyPoints};
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::stats::Stats;
const SIZE: (u32, u32) = (1100, 650);
const FONT: &str = "sans-serif";
/// Extra x range, in thread-count columns, kept free for the legend.
const LEGEND_ROOM: f64 = 0.9;

/// Distinct line colours, scalelock's locks first.
const COLORS: [RGBColor; 12] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(255, 187, 120),
];

/// Registers the shipped font once.
fn font_ready() -> Result<(), String> {
    static READY: OnceLock<bool> = OnceLock::new();
    let ok = *READY.get_or_init(|| {
        let bytes: &'static [u8] = include_bytes!("../assets/DejaVuSans.ttf");
        plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err("the shipped DejaVu Sans font did not load".into())
    }
}

/// One chart pair's data.
pub struct Panel<'a> {
    /// File name stem: `throughput-STEM.svg`, `fairness-STEM.png`...
    pub stem: String,
    /// What the chart shows, after "Throughput: ".
    pub title: String,
    /// The thread counts on the x axis, ascending.
    pub threads: Vec<usize>,
    /// The lines.
    pub series: Vec<Series<'a>>,
}

/// One line of a chart.
pub struct Series<'a> {
    /// Legend text.
    pub name: String,
    /// Drawn thicker: scalelock's own locks and designs.
    pub ours: bool,
    /// The run shown at each x index (position in `Panel::threads`): the
    /// fairness chart's bars.
    pub points: BTreeMap<usize, &'a Stats>,
    /// The total op/s at each x index that the throughput chart draws: the
    /// median of the rounds' rates (for an even count of rounds the mean
    /// of the middle two, which no single run has), as the tables print.
    pub rates: BTreeMap<usize, f64>,
}

/// 1234567.0 -> "1.2M".
fn human(v: f64) -> String {
    let (scaled, unit) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if scaled >= 10.0 || scaled == scaled.trunc() {
        format!("{scaled:.0}{unit}")
    } else if scaled < 1.0 {
        // Below 1 op/s (a starved thread in a long run): as many decimals
        // as the first digit needs (0.05, not 0.1; 0.02, not 0.0).
        let decimals = (-scaled.log10()).ceil().max(1.0) as usize;
        format!("{scaled:.decimals$}{unit}")
    } else {
        format!("{scaled:.1}{unit}")
    }
}

/// A log-scale range covering every value, with some room.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in values.filter(|v| *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    (lo / 2.0, hi * 2.0)
}

/// A log axis from `lo` to `hi` labelled at 1, 2 and 5 times powers of ten
/// (plotters' own log key points skip or repeat some).
fn log_axis(lo: f64, hi: f64) -> WithKeyPoints<LogCoord<f64>> {
    let mut keys = Vec::new();
    let mut decade = 10f64.powi(lo.log10().floor() as i32);
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = decade * m;
            if v >= lo && v <= hi {
                keys.push(v);
            }
        }
        decade *= 10.0;
    }
    (lo..hi).log_scale().with_key_points(keys)
}

fn x_label(threads: &[usize], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    threads
        .get(i as usize)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn throughput<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &Panel) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let (lo, hi) = log_range(p.series.iter().flat_map(|s| s.rates.values().copied()));
    let n = p.threads.len() as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(format!("Throughput: {}", p.title), (FONT, 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n - 0.5 + LEGEND_ROOM, log_axis(lo, hi))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(p.threads.len() * 2 + 3)
        .x_label_formatter(&|x| x_label(&p.threads, *x))
        .y_label_formatter(&|y| human(*y))
        .x_desc("threads")
        .y_desc("total op/s (log)")
        .label_style((FONT, 16))
        .draw()
        .map_err(err)?;
    for (i, s) in p.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let width = if s.ours { 4 } else { 2 };
        let line: Vec<(f64, f64)> = s
            .rates
            .iter()
            .map(|(x, r)| (*x as f64, r.max(lo)))
            .collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(width)))
            .map_err(err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width))
            });
        chart
            .draw_series(
                line.into_iter()
                    .map(|pt| Circle::new(pt, 4, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 15))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn fairness<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &Panel) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let (lo, hi) = log_range(p.series.iter().flat_map(|s| {
        s.points
            .values()
            .flat_map(|r| [r.per_second(r.min), r.per_second(r.max)])
    }));
    let n = p.threads.len() as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(format!("Per-thread fairness: {}", p.title), (FONT, 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n - 0.5 + LEGEND_ROOM, log_axis(lo, hi))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(p.threads.len() * 2 + 3)
        .x_label_formatter(&|x| x_label(&p.threads, *x))
        .y_label_formatter(&|y| human(*y))
        .x_desc("threads (bar: slowest to fastest thread, dot: mean)")
        .y_desc("op/s per thread (log)")
        .label_style((FONT, 16))
        .draw()
        .map_err(err)?;
    let m = p.series.len().max(1) as f64;
    let slot = 0.8 / m;
    for (i, s) in p.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let width = if s.ours { 4 } else { 2 };
        let dx = (i as f64 - (m - 1.0) / 2.0) * slot;
        let bars: Vec<PathElement<(f64, f64)>> = s
            .points
            .iter()
            .map(|(x, r)| {
                let x = *x as f64 + dx;
                PathElement::new(
                    vec![
                        (x, r.per_second(r.min).max(lo)),
                        (x, r.per_second(r.max).max(lo)),
                    ],
                    color.stroke_width(width),
                )
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width))
            });
        chart
            .draw_series(s.points.iter().map(|(x, r)| {
                Circle::new(
                    (*x as f64 + dx, r.per_second(r.mean).max(lo)),
                    4,
                    color.filled(),
                )
            }))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 15))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn located(path: &Path, e: String) -> String {
    format!("{}: {e}", path.display())
}

/// Draws every panel into `dir` as SVG and PNG; returns the files written.
pub fn draw_all(panels: &[Panel], dir: &Path) -> Result<Vec<PathBuf>, String> {
    font_ready()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for p in panels {
        let file = |chart: &str, ext: &str| dir.join(format!("{chart}-{}.{ext}", p.stem));

        let path = file("throughput", "svg");
        throughput(&SVGBackend::new(&path, SIZE).into_drawing_area(), p)
            .map_err(|e| located(&path, e))?;
        files.push(path);
        let path = file("throughput", "png");
        throughput(&BitMapBackend::new(&path, SIZE).into_drawing_area(), p)
            .map_err(|e| located(&path, e))?;
        files.push(path);
        let path = file("fairness", "svg");
        fairness(&SVGBackend::new(&path, SIZE).into_drawing_area(), p)
            .map_err(|e| located(&path, e))?;
        files.push(path);
        let path = file("fairness", "png");
        fairness(&BitMapBackend::new(&path, SIZE).into_drawing_area(), p)
            .map_err(|e| located(&path, e))?;
        files.push(path);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn human_numbers() {
        assert_eq!(human(5.0), "5");
        assert_eq!(human(1500.0), "1.5k");
        assert_eq!(human(2_000_000.0), "2M");
        assert_eq!(human(12_300_000.0), "12M");
        // A log axis's labels below 1 (0.02, 0.05, 0.1, 0.2, 0.5) printed
        // as 0.0, 0.1, 0.1, 0.2, 0.5.
        assert_eq!(human(0.5), "0.5");
        assert_eq!(human(0.1), "0.1");
        assert_eq!(human(0.05), "0.05");
        assert_eq!(human(0.02), "0.02");
        assert_eq!(human(0.002), "0.002");
    }
}
