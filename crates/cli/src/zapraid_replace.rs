//! `zonestack zapraid replace ARRAY... --member I --with NEWIMG [--force] [--quiet]`: rebuilds
//! a failed ZapRAID member onto a new device image (`ZapRaidVolume::replace_member`), with a
//! progress bar on a terminal and a plain line every few seconds otherwise. A member that has
//! not failed is recorded failed first (a drive replaced before it dies). A recovery cut
//! short (power, a signal) leaves the array degraded; running the command again restarts it.
//!
//! `zonestack zapraid recover ARRAY... [--member I] [--force] [--quiet]` is the same recovery
//! onto the image named in the member's own place (a new image swapped in for a dead drive,
//! or the replacement of a recovery cut short), after the crash recovery every open runs:
//! without `--member` it rebuilds every member the array records failed whose place names an
//! image; with it, that member is first recorded failed (the image in its place is never read
//! as the member).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zapraid::{RecoveryProgress, ZapRaidError, ZapRaidVolume};
use zns::ZonedDevice;

use crate::cmd_zapraid::{close_array, open_array, zapraid_error};
use crate::error::{CliError, CliResult};
use crate::members::{finish, Members};

/// Seconds between two plain progress lines when the output is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(2);

/// What `zapraid replace` was asked.
pub struct Request<'a> {
    pub paths: &'a [PathBuf],
    pub spec: &'a str,
    pub with: &'a PathBuf,
    pub force: bool,
    pub quiet: bool,
}

fn percent(p: &RecoveryProgress) -> u64 {
    (p.blocks_done * 100)
        .checked_div(p.blocks_total)
        .unwrap_or(0)
        .min(100)
}

fn progress_line(p: &RecoveryProgress) -> String {
    format!(
        "recovering member {}: {}% ({} of {} stripes, {} segments done)",
        p.member,
        percent(p),
        p.blocks_done,
        p.blocks_total,
        p.segments_done
    )
}

/// How progress is shown: a bar on a terminal, plain lines otherwise, nothing when quiet.
enum Display {
    Bar(indicatif::ProgressBar),
    Lines(Instant),
    Quiet,
}

impl Display {
    fn new(quiet: bool) -> Display {
        if quiet {
            return Display::Quiet;
        }
        if !std::io::stderr().is_terminal() {
            return Display::Lines(Instant::now());
        }
        let bar = indicatif::ProgressBar::new(0);
        let style = indicatif::ProgressStyle::with_template(
            "{bar:40} {percent:>3}% {pos}/{len} stripes rebuilt, {msg} ({elapsed})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        bar.set_style(style);
        Display::Bar(bar)
    }

    fn show(&mut self, p: &RecoveryProgress, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Display::Bar(bar) => {
                bar.set_length(p.blocks_total);
                bar.set_position(p.blocks_done);
                bar.set_message(format!("{} segments done", p.segments_done));
            }
            Display::Lines(last) if last.elapsed() >= LINE_EVERY => {
                writeln!(out, "{}", progress_line(p))?;
                out.flush()?;
                *last = Instant::now();
            }
            _ => {}
        }
        Ok(())
    }

    fn end(self, p: Option<&RecoveryProgress>, out: &mut impl Write) -> std::io::Result<()> {
        match (self, p) {
            // The finished bar stays on the terminal (a short recovery is drawn at least once).
            (Display::Bar(bar), Some(p)) => {
                bar.set_length(p.blocks_total);
                bar.set_position(p.blocks_done);
                bar.finish_with_message(format!("{} segments done", p.segments_done));
            }
            (Display::Bar(bar), None) => bar.abandon(),
            (Display::Lines(_), Some(p)) => writeln!(out, "{}", progress_line(p))?,
            _ => {}
        }
        Ok(())
    }
}

/// Runs the recovery, showing its progress until it ends.
async fn recover(
    vol: &ZapRaidVolume,
    i: usize,
    dev: Arc<dyn ZonedDevice>,
    force: bool,
    quiet: bool,
    out: &mut impl Write,
) -> Result<(), ZapRaidError> {
    let mut display = Display::new(quiet);
    let rec = vol.replace_member(i, dev, force);
    tokio::pin!(rec);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let result = loop {
        tokio::select! {
            res = &mut rec => break res,
            _ = tick.tick() => {
                if let Some(p) = vol.recovery_progress() {
                    // Progress output that cannot be written does not stop the recovery.
                    if let Err(e) = display.show(&p, out) {
                        tracing::warn!("progress output: {e}");
                    }
                }
            }
        }
    };
    let last = vol.recovery_progress();
    if let Err(e) = display.end(last.as_ref().filter(|_| result.is_ok()), out) {
        tracing::warn!("progress output: {e}");
    }
    result
}

/// The error of a recovery of member `i` onto `with`, naming both.
fn replace_error(m: &Members, i: usize, with: &Path, e: ZapRaidError) -> CliError {
    match e {
        ZapRaidError::ReplacementHoldsData { zone, state } => CliError::Other(format!(
            "{} holds data (zone {zone} is {}) that is not {}'s; pass --force to destroy it",
            with.display(),
            state.name(),
            m.name(i)
        )),
        e => zapraid_error(m, e),
    }
}

/// Records member `i` failed when it is not yet (a replacement of a working drive).
async fn fail_first(vol: &ZapRaidVolume, m: &Members, i: usize) -> Result<(), CliError> {
    let failed = vol.failed_members();
    if failed.contains(&i) {
        return Ok(());
    }
    if let Some(f) = failed.first() {
        return Err(CliError::Other(format!(
            "{} has failed: replace it first (replacing {} now would leave the array \
             without its data)",
            m.name(*f),
            m.name(i)
        )));
    }
    vol.fail_member_durably(i)
        .await
        .map_err(|e| CliError::Other(format!("recording {} failed: {e}", m.name(i))))
}

pub async fn run(r: &Request<'_>, out: &mut impl Write) -> CliResult {
    let i = crate::cmd_raizn::member_index(r.paths, r.spec)?;
    if r.paths.iter().any(|p| p == r.with) {
        return Err(CliError::Usage(format!(
            "--with {}: that image is a member of the array already",
            r.with.display()
        )));
    }
    let m = Members::open(r.paths, false, true)?;
    let dev = match crate::commands::open(r.with) {
        Ok(d) => Arc::new(d),
        Err(e) => return finish(m, Err(e)),
    };
    let started = Instant::now();
    let res = async {
        let vol = open_array(&m).await?;
        fail_first(&vol, &m, i).await?;
        if !r.quiet {
            writeln!(out, "rebuilding {} onto {}", m.name(i), r.with.display())?;
            out.flush()?;
        }
        let done = recover(
            &vol,
            i,
            dev.clone() as Arc<dyn ZonedDevice>,
            r.force,
            r.quiet,
            out,
        )
        .await;
        let p = vol.recovery_progress();
        done.map_err(|e| replace_error(&m, i, r.with, e))?;
        close_array(vol).await?;
        Ok(p)
    }
    .await;
    let closed = dev.shutdown().map_err(|e| match e {
        CliError::Other(m) => CliError::Other(format!("closing {}: {m}", r.with.display())),
        e => e,
    });
    let p = finish(m, res)?;
    closed?;
    let (blocks, segments) = p.map_or((0, 0), |p| (p.blocks_done, p.segments_done));
    let mut list: Vec<String> = r.paths.iter().map(|p| p.display().to_string()).collect();
    if let Some(slot) = list.get_mut(i) {
        *slot = r.with.display().to_string();
    }
    writeln!(
        out,
        "member {i} rebuilt onto {}: {blocks} stripes in {segments} segments in {:.1} s; the \
         array is healthy. Name the new image in its place from now on: {}",
        r.with.display(),
        started.elapsed().as_secs_f64(),
        list.join(" ")
    )?;
    Ok(())
}

/// What `zapraid recover` was asked.
pub struct InPlace<'a> {
    pub paths: &'a [PathBuf],
    pub spec: Option<&'a str>,
    pub force: bool,
    pub quiet: bool,
}

/// The members `zapraid recover` rebuilds on an open array: the one named, or every member
/// recorded failed. A failed member given as `missing` has no image to rebuild onto.
fn to_rebuild(
    vol: &ZapRaidVolume,
    m: &Members,
    named: Option<usize>,
) -> Result<Vec<usize>, CliError> {
    let failed = match named {
        Some(i) => vec![i],
        None => vol.failed_members(),
    };
    let missing = |i: usize| m.paths.get(i).is_none_or(|p| crate::members::is_missing(p));
    if let Some(f) = failed.iter().find(|f| missing(**f)) {
        return Err(CliError::Usage(format!(
            "{} has no image to rebuild onto: name a new image in its place, or use \
             `zonestack zapraid replace --member {f} --with NEWIMG`",
            m.name(*f)
        )));
    }
    Ok(failed)
}

pub async fn run_in_place(r: &InPlace<'_>, out: &mut impl Write) -> CliResult {
    let named = match r.spec {
        Some(spec) => Some(crate::cmd_raizn::member_index(r.paths, spec)?),
        None => None,
    };
    // The named member's image is opened apart and the array opened with that member
    // `missing`, so the open records it failed and never reads the image as the member.
    let mut open_paths = r.paths.to_vec();
    let mut apart = None;
    if let Some(i) = named {
        let p = r
            .paths
            .get(i)
            .ok_or_else(|| CliError::Usage(format!("--member {i}: no such member")))?;
        if crate::members::is_missing(p) {
            return Err(CliError::Usage(format!(
                "--member {i} is `missing`: name the new image in its place"
            )));
        }
        apart = Some(Arc::new(crate::commands::open(p)?));
        open_paths[i] = PathBuf::from(crate::members::MISSING);
    }
    let m = match Members::open(&open_paths, false, true) {
        Ok(mut m) => {
            m.paths = r.paths.to_vec();
            m
        }
        Err(e) => {
            if let Some(d) = apart {
                d.shutdown()?;
            }
            return Err(e);
        }
    };
    let started = Instant::now();
    let res = async {
        let vol = open_array(&m).await?;
        let members = to_rebuild(&vol, &m, named)?;
        let mut done = Vec::new();
        for i in members {
            let dev: Arc<dyn ZonedDevice> = match (&apart, m.zoned().get(i).cloned().flatten()) {
                (Some(d), _) => d.clone(),
                (None, Some(d)) => d,
                (None, None) => return Err(CliError::Other(format!("{}: not open", m.name(i)))),
            };
            if !r.quiet {
                writeln!(out, "rebuilding {} in place", m.name(i))?;
                out.flush()?;
            }
            let rebuilt = recover(&vol, i, dev, r.force, r.quiet, out).await;
            let image = m.paths.get(i).cloned().unwrap_or_default();
            rebuilt.map_err(|e| replace_error(&m, i, &image, e))?;
            let p = vol.recovery_progress();
            done.push((i, p.map_or(0, |p| p.blocks_done)));
        }
        close_array(vol).await?;
        Ok(done)
    }
    .await;
    let closed = apart.map_or(Ok(()), |d| d.shutdown());
    let done = finish(m, res)?;
    closed?;
    if done.is_empty() {
        writeln!(
            out,
            "no member is recorded failed: the array is healthy (the open recovered it from \
             any power cut)"
        )?;
        return Ok(());
    }
    for (i, blocks) in &done {
        writeln!(out, "member {i} rebuilt in place: {blocks} stripes")?;
    }
    writeln!(
        out,
        "the array is healthy ({:.1} s)",
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}
