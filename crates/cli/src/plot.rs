//! `--plot FILE.png` of `zonestack bench JOBFILE`: each job's throughput over virtual time
//! and its latency distribution (CDF); `bench paper --results`: measured against the paper
//! per row, and series over time; drawn with plotters' bitmap backend. Text needs a TrueType font; DejaVu Sans (Debian's
//! fonts-dejavu-core, installed by scripts/test) is loaded at run time, never bundled.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::error::CliError;

const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const BUCKETS: usize = 100;

/// Loads DejaVu Sans as plotters' "sans-serif", once per process.
fn load_font() -> Result<(), CliError> {
    static LOADED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            let bytes = std::fs::read(FONT_PATH).map_err(|e| {
                format!("--plot needs the font {FONT_PATH} ({e}); install the Debian package fonts-dejavu-core")
            })?;
            // plotters keeps registered fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{FONT_PATH} is not a usable TrueType font"))
        })
        .clone()
        .map_err(CliError::Other)
}

/// Draws each job's MiB/s over seconds of virtual time (top) and the distribution of its
/// latencies per direction (bottom) into the PNG file `path`.
pub fn jobs(path: &Path, results: &[bench::fio::JobResult]) -> Result<(), CliError> {
    load_font()?;
    let err = |e: String| CliError::Other(format!("drawing {}: {e}", path.display()));
    let root = BitMapBackend::new(path, (1000, 1100)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (top, bottom) = root.split_vertically(540);
    let panels = [
        (
            top,
            "throughput over virtual time",
            "time (s)",
            "MiB/s",
            bench::fio::throughput_series(results, BUCKETS),
            1.1,
            SeriesLabelPosition::UpperRight,
        ),
        (
            bottom,
            "latency distribution up to the slowest 99th percentile (after ramp)",
            "latency (us)",
            "fraction of commands",
            up_to_p99(bench::fio::latency_cdfs(results, 200)),
            1.0,
            SeriesLabelPosition::LowerRight,
        ),
    ];
    for (area, caption, x_desc, y_desc, series, headroom, legend) in panels {
        draw_lines(&area, caption, x_desc, y_desc, series, headroom, legend).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))
}

/// The CDFs cut at 1.2 times the largest 99th percentile among them, so a long tail does not
/// squash every curve against the axis.
fn up_to_p99(cdfs: Vec<(String, Vec<(f64, f64)>)>) -> Vec<(String, Vec<(f64, f64)>)> {
    let p99 = |pts: &[(f64, f64)]| pts.iter().find(|(_, y)| *y >= 0.99).map_or(0.0, |p| p.0);
    let cap = cdfs.iter().map(|(_, p)| p99(p)).fold(0.0, f64::max) * 1.2;
    cdfs.into_iter()
        .map(|(name, pts)| (name, pts.into_iter().filter(|(x, _)| *x <= cap).collect()))
        .collect()
}

/// A line chart of named series of (x, y) points into the PNG file `path`.
pub fn lines(
    path: &Path,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    series: Vec<(String, Vec<(f64, f64)>)>,
) -> Result<(), CliError> {
    load_font()?;
    let err = |e: String| CliError::Other(format!("drawing {}: {e}", path.display()));
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let legend = SeriesLabelPosition::UpperRight;
    draw_lines(&root, caption, x_desc, y_desc, series, 1.1, legend).map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))
}

/// One bar of a paper-against-measured chart: the figure row's name and measured / paper.
#[derive(Debug, PartialEq)]
pub struct Ratio {
    pub name: String,
    pub ratio: f64,
}

/// The rows of a figure set as ratios: rows measure different things in different units, so
/// the one scale they share is measured / paper (1.0 = as the paper printed it). A row whose
/// paper value is zero has no ratio and is left out; the caller says how many were.
pub fn ratios_of(rows: &[bench::Row]) -> Vec<Ratio> {
    rows.iter()
        .filter(|r| r.paper != 0.0 && r.paper.is_finite() && r.measured.is_finite())
        .map(|r| Ratio {
            name: r.figure.clone(),
            ratio: r.measured / r.paper,
        })
        .collect()
}

/// A horizontal bar per row (measured / paper) with a line at 1.0 into the PNG file `path`:
/// separate bars, because the rows are unrelated measurements that a line would join.
pub fn ratio_bars(path: &Path, caption: &str, bars: &[Ratio]) -> Result<(), CliError> {
    load_font()?;
    let err = |e: String| CliError::Other(format!("drawing {}: {e}", path.display()));
    let height = 140 + 44 * bars.len().max(1) as u32;
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    draw_ratio_bars(&root, caption, bars).map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))
}

fn draw_ratio_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    bars: &[Ratio],
) -> Result<(), String> {
    let x_max = bars.iter().map(|b| b.ratio).fold(1.0, f64::max) * 1.15;
    let n = bars.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(10)
        .build_cartesian_2d(0.0..x_max, 0.0..n)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("measured / paper (1.0 = as printed in the paper)")
        .draw()
        .map_err(|e| e.to_string())?;
    let color = Palette99::pick(0).to_rgba();
    for (i, b) in bars.iter().enumerate() {
        // First row at the top, as in the printed table.
        let top = n - i as f64 - 0.15;
        let bottom = n - i as f64 - 0.85;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, bottom), (b.ratio.max(0.0), top)],
                color.mix(0.5).filled(),
            )))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{}  ({:.2}x)", b.name, b.ratio),
                (x_max * 0.01, n - i as f64 - 0.38),
                ("sans-serif", 16).into_font(),
            )))
            .map_err(|e| e.to_string())?;
    }
    chart
        .draw_series(LineSeries::new(
            vec![(1.0, 0.0), (1.0, n)],
            BLACK.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Draws the series on `area`, the y axis up to `headroom` times the largest y.
fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    series: Vec<(String, Vec<(f64, f64)>)>,
    headroom: f64,
    legend: SeriesLabelPosition,
) -> Result<(), String> {
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .fold(0.0, f64::max)
        .max(1e-6);
    let y_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(0.0, f64::max)
        .max(if headroom > 1.0 { 1.0 } else { 1e-6 })
        * headroom;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (name, points)) in series.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let marks = points.len() <= 40;
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        if marks {
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 4, color.filled())),
                )
                .map_err(|e| e.to_string())?;
        }
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(figure: &str, paper: f64, measured: f64) -> bench::Row {
        bench::Row {
            figure: figure.into(),
            paper,
            measured,
            diff_pct: 0.0,
        }
    }

    // The paper-against-measured chart once joined unrelated rows (MiB/s next to ratios) into
    // one line over an axis called "row"; each row is now its own measured / paper bar.
    #[test]
    fn each_row_becomes_its_own_ratio_and_rows_without_a_paper_value_are_left_out() {
        let rows = [
            row("ZNS 0% OP", 1000.0, 950.0),
            row("block 7% OP", 200.0, 260.0),
            row("no paper value", 0.0, 5.0),
        ];
        let bars = ratios_of(&rows);
        assert_eq!(
            bars,
            vec![
                Ratio {
                    name: "ZNS 0% OP".into(),
                    ratio: 0.95
                },
                Ratio {
                    name: "block 7% OP".into(),
                    ratio: 1.3
                },
            ]
        );
    }

    #[test]
    fn ratio_bars_write_a_png() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rows.png");
        let bars = ratios_of(&[row("a", 2.0, 1.0), row("b", 1.0, 1.5)]);
        ratio_bars(&path, "test", &bars).expect("drawn");
        let bytes = std::fs::read(&path).expect("written");
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    }
}
