//! `zonestack bench paper NAME`: reproduces a paper's device figures on the emulator's
//! `zn540` timing profile in virtual time, and prints paper vs measured vs difference as a
//! table or, with `--json`, as `{"rows":[{"figure","paper","measured","diff_pct"}]}`.

use std::io::Write;
use std::path::PathBuf;

use bench::jobfile::parse_size;
use clap::Args;

use crate::error::{CliError, CliResult};

#[derive(Args, Debug)]
pub struct BenchPaperArgs {
    /// Figure set: zapraid-fig1, zapraid-exp1, zapraid-exp2, zapraid-exp3, zapraid-compare,
    /// raizn-raw, raizn-fig9, raizn-fig10, raizn-fig12, raizn-seq, raizn-append, raizn-fua,
    /// raizn-xor, vroom-5.2.1, zns-5.1, zns-fig1, znsplus-fig6, znsplus-fig7, znsplus-fig8,
    /// znsplus-varmail (an imitation of the paper's fsync-heavy varmail; the ZNS+ sets on the
    /// femu-mlc profile, --profile changing fig7, fig8 and varmail), or all.
    pub name: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Bytes each point moves (K/M/G suffixes).
    #[arg(long, value_parser = parse_size, default_value = "1G")]
    pub size: u64,
    /// Seed of the devices and workloads.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timing profile of znsplus-fig7, znsplus-fig8 and znsplus-varmail: femu-mlc (the
    /// paper's default, and the only medium of its Fig. 7 and 8), femu-tlc or znand (its
    /// Table 2). znsplus-fig6 stays on femu-mlc and the other sets on zn540.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Host time per block moved by a host-level copy (the ZNS setups of the znsplus sets:
    /// read to the host, written back), in ns; the default is the value calibrated on
    /// znsplus-fig6, and 0 charges the host copy only its commands' latencies.
    #[arg(long, value_name = "NS")]
    pub host_copy_ns: Option<u32>,
    /// Also write the rows as CSV and a plot to DIR/NAME.csv and DIR/NAME.png (and the
    /// throughput series of zns-fig1 and raizn-fig10 to DIR/FIGURE-series.csv and .png).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
}

/// A figure's throughput series, written next to its rows with `--results`.
struct Series {
    file: &'static str,
    csv: String,
    points: Vec<(String, Vec<(f64, f64)>)>,
    caption: &'static str,
    x_label: &'static str,
}

fn names(name: &str) -> Result<Vec<&'static str>, CliError> {
    let known: Vec<&'static str> = bench::PAPERS.iter().map(|p| p.0).collect();
    if name == "all" {
        return Ok(known);
    }
    match known.iter().find(|k| **k == name) {
        Some(k) => Ok(vec![*k]),
        None => Err(CliError::Usage(format!(
            "unknown figure set '{name}'; use one of: {}, all",
            known.join(", ")
        ))),
    }
}

fn csv(rows: &[bench::Row]) -> String {
    let mut s = String::from("figure,paper,measured,diff_pct\n");
    for r in rows {
        let figure = r.figure.replace('"', "\"\"");
        s.push_str(&format!(
            "\"{figure}\",{},{},{}\n",
            r.paper, r.measured, r.diff_pct
        ));
    }
    s
}

pub async fn run(a: &BenchPaperArgs, out: &mut impl Write) -> CliResult {
    if a.size < (1 << 20) {
        return Err(CliError::Usage(format!(
            "--size {} is too small; give at least 1M per point",
            a.size
        )));
    }
    let sets = names(&a.name)?;
    let profile = match &a.profile {
        None => None,
        Some(p) => Some(
            *bench::znsplus_fig8::PROFILES
                .iter()
                .find(|k| **k == p.as_str())
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "unknown --profile '{p}'; the ZNS+ sets run on one of: {}",
                        bench::znsplus_fig8::PROFILES.join(", ")
                    ))
                })?,
        ),
    };
    let o = bench::Options {
        bytes_per_point: a.size,
        seed: a.seed,
        profile,
        host_copy_ns: a.host_copy_ns,
    };
    // The figures run on their own virtual-time runtime, which cannot nest inside this one.
    let (rows, series) = std::thread::spawn(move || {
        let (mut rows, mut series) = (Vec::new(), Vec::new());
        for name in sets {
            if name == "zns-fig1" {
                let f = bench::zns_fig1::run(&o)?;
                let names = ["ZNS (0% OP)", "block, 7% OP", "block, 28% OP"];
                let points: Vec<(String, Vec<(f64, f64)>)> = names
                    .iter()
                    .zip(&f.series)
                    .map(|(n, s)| {
                        let pts = s
                            .bytes
                            .iter()
                            .zip(&s.mib_per_sec)
                            .map(|(b, r)| (*b as f64 / (1u64 << 30) as f64, *r))
                            .collect();
                        (n.to_string(), pts)
                    })
                    .collect();
                series.push(Series {
                    file: "zns-fig1-series",
                    csv: f.series_csv(),
                    points,
                    caption: "ZNS paper Fig. 1: throughput while overwriting the capacity",
                    x_label: "GiB written",
                });
                rows.extend(f.rows);
            } else if name == "raizn-fig10" {
                let f = bench::raizn_fig10::run(&o)?;
                series.push(Series {
                    file: "raizn-fig10-series",
                    csv: f.series_csv(),
                    points: f.points(),
                    caption:
                        "RAIZN Fig. 10: write then overwrite the capacity (overwrite from 1.0)",
                    x_label: "capacity written",
                });
                rows.extend(f.rows);
            } else {
                rows.extend(bench::paper::run(name, &o)?);
            }
        }
        Ok::<_, String>((rows, series))
    })
    .join()
    .map_err(|_| CliError::Other("the benchmark thread panicked".into()))?
    .map_err(CliError::Other)?;
    if let Some(dir) = &a.results {
        std::fs::create_dir_all(dir)?;
        // A ZNS+ set on another medium than the paper's default is its own file.
        let file = match o.profile.filter(|p| *p != "femu-mlc") {
            Some(p) if a.name.starts_with("znsplus-") => format!("{}-{p}", a.name),
            _ => a.name.clone(),
        };
        std::fs::write(dir.join(format!("{file}.csv")), csv(&rows))?;
        // Paper against measured, one bar per figure row (rows are unrelated measurements).
        let bars = crate::plot::ratios_of(&rows);
        let skipped = rows.len() - bars.len();
        let caption = if skipped == 0 {
            format!("{}: measured against the paper, per row", a.name)
        } else {
            format!(
                "{}: measured against the paper, per row ({} without a paper value left out)",
                a.name, skipped
            )
        };
        crate::plot::ratio_bars(&dir.join(format!("{file}.png")), &caption, &bars)?;
        for s in series {
            std::fs::write(dir.join(format!("{}.csv", s.file)), s.csv)?;
            crate::plot::lines(
                &dir.join(format!("{}.png", s.file)),
                s.caption,
                s.x_label,
                "MiB/s",
                s.points,
            )?;
        }
    }
    if a.json {
        // Serialized from the struct, so each row's keys keep their documented order.
        #[derive(serde::Serialize)]
        struct Rows<'a> {
            rows: &'a [bench::Row],
        }
        let text = serde_json::to_string(&Rows { rows: &rows })
            .map_err(|e| CliError::Other(e.to_string()))?;
        writeln!(out, "{text}")?;
        return Ok(());
    }
    let width = rows.iter().map(|r| r.figure.len()).max().unwrap_or(6);
    writeln!(
        out,
        "{:<width$}  {:>10}  {:>10}  {:>8}",
        "figure", "paper", "measured", "diff"
    )?;
    for r in &rows {
        // Ratios (znsplus-fig6) need their decimals; throughputs and latencies do not.
        // A row without a paper value (NaN) goes by its measured value.
        let scale = if r.paper.is_finite() {
            r.paper
        } else {
            r.measured
        };
        let places = if scale.abs() < 10.0 { 3 } else { 1 };
        writeln!(
            out,
            "{:<width$}  {:>10.places$}  {:>10.places$}  {:>+7.2}%",
            r.figure, r.paper, r.measured, r.diff_pct
        )?;
    }
    let worst = rows.iter().map(|r| r.diff_pct.abs()).fold(0.0, f64::max);
    // raizn-xor is CPU work timed in real time; every other set runs in virtual time.
    let real = rows
        .iter()
        .filter(|r| r.figure.starts_with("raizn-xor"))
        .count();
    // znsplus-* run on the paper's own flash (femu-mlc unless --profile); the others on the
    // zn540.
    let plus = o.profile.unwrap_or("femu-mlc");
    let mlc = rows
        .iter()
        .filter(|r| r.figure.starts_with("znsplus-"))
        .count();
    let how: String = match (real, mlc, rows.len() - real - mlc) {
        (0, 0, _) => "on the zn540 timing profile in virtual time".into(),
        (0, _, 0) => format!("on the {plus} timing profile in virtual time"),
        (_, 0, 0) => "in real time (CPU work)".into(),
        _ => format!("in virtual time on the zn540 timing profile (znsplus-* on {plus}, raizn-xor in real time)"),
    };
    writeln!(
        out,
        "{} {how}, {} MiB per point, seed {}; largest difference {worst:.2}%",
        crate::commands::plural(rows.len() as u64, "figure"),
        a.size >> 20,
        a.seed
    )?;
    Ok(())
}
