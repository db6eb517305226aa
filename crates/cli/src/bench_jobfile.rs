//! `zonestack bench JOBFILE`: runs an fio job file (the subset `bench::jobfile` parses) in
//! virtual time on the timing model: on the emulated ZNS drive (zoned jobs), a conventional
//! SSD on the same flash, or the host FTL on the ZNS drive (block jobs), or with `--device`
//! on an existing device image; or, with `--device` naming a zoned block device
//! (`/dev/nvme0n2`), zoned jobs on that drive or block jobs on the host FTL volume on it, in
//! real time with no timing model, so the same job file measures the emulator and a drive. Prints fio's text report or, with
//! `--output-format=json`, fio's JSON shape.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use bench::jobfile::parse_size;
use clap::Parser;

use crate::error::{CliError, CliResult};

/// The arguments after `zonestack bench`, when the first one is a job file.
#[derive(Parser, Debug)]
#[command(
    name = "zonestack bench",
    about = "Run an fio job file on the emulator"
)]
pub struct BenchJobArgs {
    /// The fio job file.
    pub jobfile: PathBuf,
    /// Device geometry and timing profile.
    #[arg(long, default_value = "zn540")]
    pub profile: String,
    /// What the jobs run on: zns (the emulated ZNS drive; zoned jobs), ftl (the host FTL on
    /// it) or conv (a conventional SSD on the same flash); the last two take block jobs.
    #[arg(long, default_value = "zns")]
    pub target: String,
    /// Over-provisioning in percent of the ftl or conv volume the runner formats (a volume
    /// on a --device image keeps the over-provisioning it was formatted with).
    #[arg(long, default_value_t = 7.0)]
    pub op: f64,
    /// Size (K/M/G/T suffixes): of the zns drive, rounded up to whole zones (default 40
    /// zones), or of the ftl or conv volume (default 4G). Not with --device.
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Run on this existing device image (`zonestack device create`) instead of a fresh
    /// in-memory device: its zones with --target zns, or with --target ftl the volume
    /// `zonestack ftl format` made on it. The image keeps its geometry; --profile gives the
    /// timing. The jobs overwrite the image's data, as fio overwrites a device. A zoned block
    /// device (/dev/nvme0n2, /dev/nullb0) runs, in real time with no timing model, zoned jobs
    /// (--target zns) on the drive itself, or block jobs (--target ftl) on the FTL volume
    /// `zonestack ftl format` made on it.
    #[arg(long, value_name = "IMAGE|DEVICE")]
    pub device: Option<PathBuf>,
    /// With --device on a drive: run even though its zones (zoned jobs) or its FTL volume
    /// (block jobs) hold data, which the jobs overwrite.
    #[arg(long)]
    pub force: bool,
    /// normal (fio's text report) or json (fio's JSON shape).
    #[arg(long, default_value = "normal")]
    pub output_format: String,
    /// Seed of the device and the random offsets.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also draw each job's throughput over virtual time into this PNG file.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
}

/// Parses the words after `bench` and runs the job file they name.
pub fn run_args(words: &[OsString], out: &mut impl Write) -> CliResult {
    let argv = std::iter::once(OsString::from("zonestack bench")).chain(words.iter().cloned());
    match BenchJobArgs::try_parse_from(argv) {
        Ok(a) => run(&a, out),
        Err(e) if !e.use_stderr() => {
            write!(out, "{e}")?;
            Ok(())
        }
        Err(e) => Err(CliError::Usage(
            e.to_string()
                .lines()
                .next()
                .unwrap_or("bad arguments")
                .to_string(),
        )),
    }
}

pub fn run(a: &BenchJobArgs, out: &mut impl Write) -> CliResult {
    let json = match a.output_format.as_str() {
        "normal" => false,
        "json" => true,
        f => {
            return Err(CliError::Usage(format!(
                "--output-format {f} is not supported; use normal or json"
            )))
        }
    };
    let text = std::fs::read_to_string(&a.jobfile)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", a.jobfile.display())))?;
    let specs = bench::jobfile::parse(&text)
        .map_err(|e| CliError::Usage(format!("{}: {e}", a.jobfile.display())))?;
    if let Some(path) = a
        .device
        .as_ref()
        .filter(|p| crate::opened::is_block_device(p))
    {
        let (results, volume) = crate::bench_drive::run(a, path, specs)?;
        return print_results(&results, volume.as_ref(), json, out);
    }
    // A job file written for a real drive names it; say that it is not what runs.
    for s in &specs {
        if let Some(f) = &s.filename {
            eprintln!(
                "zonestack: job '{}': filename={f} is not opened; the job runs on {}",
                s.name,
                a.device
                    .as_ref()
                    .map_or("a fresh emulated device".to_string(), |d| d
                        .display()
                        .to_string())
            );
        }
    }
    let volume = match a.target.as_str() {
        "zns" => bench::fio::Volume::Zns,
        "ftl" => bench::fio::Volume::Ftl { op_percent: a.op },
        "conv" => bench::fio::Volume::Conv { op_percent: a.op },
        t => {
            return Err(CliError::Usage(format!(
                "--target {t} is not known; use zns, ftl or conv"
            )))
        }
    };
    check_image(a, volume)?;
    let target = bench::fio::Target {
        profile: a.profile.clone(),
        size_bytes: a.size,
        seed: a.seed,
        volume,
        image: a.device.clone(),
    };
    let progress = std::sync::Arc::new(bench::fio::Progress::default());
    let counted = std::sync::Arc::clone(&progress);
    // The jobs run on their own virtual-time runtime, which cannot nest inside this one.
    let runner =
        std::thread::spawn(move || bench::fio::run_with_progress(&specs, &target, &counted));
    if let Some(bar) = spinner() {
        let mut sized = false;
        while !runner.is_finished() {
            let total = progress.total.load(Ordering::Relaxed);
            let done = progress.done.load(Ordering::Relaxed);
            if total > 0 && !sized {
                // The runner knows how much the jobs will move once it has laid them out.
                bar.set_style(bar_style());
                bar.set_length(total);
                bar.set_message("");
                sized = true;
            }
            if sized {
                bar.set_position(done.min(total));
            } else if done > 0 {
                bar.set_message(format!("{} MiB done in virtual time", done >> 20));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        bar.finish_and_clear();
    }
    let outcome = runner
        .join()
        .map_err(|_| CliError::Other("the benchmark thread panicked".into()))?
        .map_err(CliError::Usage)?;
    let results = outcome.results;
    if let Some(path) = &a.plot {
        crate::plot::jobs(path, &results)?;
        eprintln!("zonestack: wrote the plot to {}", path.display());
    }
    if let Some(w) = dropped_writes_warning(outcome.volume.as_ref()) {
        eprintln!("{w}");
    }
    print_results(&results, outcome.volume.as_ref(), json, out)
}

/// fio's text report or JSON shape of `results`, with the block volume's figures if any.
fn print_results(
    results: &[bench::fio::JobResult],
    volume: Option<&serde_json::Value>,
    json: bool,
    out: &mut impl Write,
) -> CliResult {
    if json {
        let mut v = bench::fio::to_json(results);
        if let (Some(vol), Some(obj)) = (volume, v.as_object_mut()) {
            obj.insert("volume".into(), vol.clone());
        }
        let s = serde_json::to_string_pretty(&v).map_err(|e| CliError::Other(e.to_string()))?;
        writeln!(out, "{s}")?;
    } else {
        write!(out, "{}", bench::fio::to_text(results))?;
        if let Some(vol) = volume {
            write!(out, "{}", volume_text(vol))?;
        }
    }
    Ok(())
}

/// The block volume's figures after the jobs, in a few lines.
fn volume_text(v: &serde_json::Value) -> String {
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    let mut s = format!(
        "volume: {} logical blocks on {} blocks of flash (over-provisioning {:.2}%)\n  write amplification {:.3}, {} blocks relocated\n",
        n("volume_blocks"),
        n("flash_blocks"),
        f("op_percent"),
        f("write_amplification"),
        n("blocks_relocated"),
    );
    if let Some(spare) = v.get("spare_blocks").and_then(serde_json::Value::as_object) {
        let parts: Vec<String> = spare.iter().map(|(k, x)| format!("{k} {x}")).collect();
        s += &format!("  spare blocks: {}\n", parts.join(", "));
    }
    if v.get("checkpoint_bytes").is_some() {
        s += &format!(
            "  checkpoints: {} ({:.1} MiB; {} deltas of {:.1} MiB; {:.2} MiB per GiB of user writes)\n",
            n("checkpoints"),
            n("checkpoint_bytes") as f64 / f64::from(1u32 << 20),
            n("delta_checkpoints"),
            n("delta_checkpoint_bytes") as f64 / f64::from(1u32 << 20),
            f("checkpoint_bytes_per_user_gib") / f64::from(1u32 << 20),
        );
    }
    if let Some(phases) = v.get("phases").and_then(serde_json::Value::as_array) {
        s += &bench::fio::phases_text(phases);
    }
    if let Some(lost) = v.get("host_slots_lost").and_then(serde_json::Value::as_u64) {
        s += &format!("  host writes dropped by the drive model (host_slots_lost): {lost}\n");
        if lost > 0 {
            s += &format!(
                "  WARNING: the conventional drive model dropped {lost} host writes: it ran out of free blocks, so these figures are not credible; give it more spare (--op)\n"
            );
        }
    }
    s
}

/// Refuses what does not go with `--device`, before any job runs.
fn check_image(a: &BenchJobArgs, volume: bench::fio::Volume) -> CliResult {
    let Some(path) = &a.device else {
        return Ok(());
    };
    if a.size.is_some() {
        return Err(CliError::Usage(
            "--size does not apply with --device: the image has its own size".into(),
        ));
    }
    if matches!(volume, bench::fio::Volume::Conv { .. }) {
        return Err(CliError::Usage(
            "--target conv does not take --device: a conventional SSD is not an image; use zns or ftl"
                .into(),
        ));
    }
    if !path.exists() {
        return Err(CliError::Other(format!(
            "{} does not exist; create it with `zonestack device create {}`",
            path.display(),
            path.display()
        )));
    }
    Ok(())
}

/// A spinner on stderr while the jobs are laid out, only when stderr is a terminal; it
/// becomes a bar of bytes done once the runner knows how many the jobs will move (it stays a
/// spinner with a byte count for time-based jobs).
fn spinner() -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message("laying out the jobs");
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    Some(bar)
}

fn bar_style() -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(
        "{bar:40} {percent:>3}% {bytes}/{total_bytes} in virtual time",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
}

/// The warning for a conventional drive model that dropped host writes (`host_slots_lost` in
/// its volume JSON). The model keeps enough spare that it should never happen; if it does,
/// the figures count writes that were never stored, and the user must hear it.
fn dropped_writes_warning(volume: Option<&serde_json::Value>) -> Option<String> {
    let lost = volume?
        .get("host_slots_lost")?
        .as_u64()
        .filter(|lost| *lost > 0)?;
    Some(format!(
        "zonestack: warning: the conventional drive model dropped {lost} host writes (host_slots_lost): its figures are not credible; give it more spare (--op)"
    ))
}

#[cfg(test)]
mod tests {
    use super::{dropped_writes_warning, volume_text};

    #[test]
    fn dropped_host_writes_are_warned_about_and_none_are_not() {
        let v = |lost: u64| serde_json::json!({ "host_slots_lost": lost });
        let w = dropped_writes_warning(Some(&v(816))).expect("a warning");
        assert!(
            w.contains("dropped 816 host writes") && w.contains("--op"),
            "{w}"
        );
        assert_eq!(dropped_writes_warning(Some(&v(0))), None);
        assert_eq!(dropped_writes_warning(Some(&serde_json::json!({}))), None);
        assert_eq!(dropped_writes_warning(None), None);
        let text = volume_text(&v(816));
        assert!(
            text.contains("(host_slots_lost): 816\n") && text.contains("WARNING"),
            "{text}"
        );
        let text = volume_text(&v(0));
        assert!(
            text.contains("(host_slots_lost): 0\n") && !text.contains("WARNING"),
            "{text}"
        );
    }
}
