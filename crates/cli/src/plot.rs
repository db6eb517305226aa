//! `--plot FILE.png` of `zonestack bench JOBFILE`: each job's throughput over virtual time,
//! drawn with plotters' bitmap backend. Text needs a TrueType font; DejaVu Sans (Debian's
//! fonts-dejavu-core, installed by scripts/test) is loaded at run time, never bundled.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::commands::CliError;

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

/// Draws each job's MiB/s over seconds of virtual time into the PNG file `path`.
pub fn throughput(path: &Path, results: &[bench::fio::JobResult]) -> Result<(), CliError> {
    let series = bench::fio::throughput_series(results, BUCKETS);
    lines(
        path,
        "throughput over virtual time",
        "time (s)",
        "MiB/s",
        series,
    )
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
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .fold(0.0, f64::max)
        .max(1e-6);
    let y_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let err = |e: String| CliError::Other(format!("drawing {}: {e}", path.display()));
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (i, (name, points)) in series.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let marks = points.len() <= 40;
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        if marks {
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 4, color.filled())),
                )
                .map_err(|e| err(e.to_string()))?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}
