//! `zonestack zapraid replace ARRAY... --member I --with NEWIMG [--force] [--quiet]`: rebuilds
//! a failed ZapRAID member onto a new device image (`ZapRaidVolume::replace_member`), with a
//! progress bar on a terminal and a plain line every few seconds otherwise. A member that has
//! not failed is recorded failed first (a drive replaced before it dies). A recovery cut
//! short (power, a signal) leaves the array degraded; running the command again restarts it.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zapraid::{RecoveryProgress, ZapRaidError, ZapRaidVolume};

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
    dev: Arc<crate::opened::Opened>,
    r: &Request<'_>,
    out: &mut impl Write,
) -> Result<(), ZapRaidError> {
    let mut display = Display::new(r.quiet);
    let rec = vol.replace_member(i, dev, r.force);
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
        let done = recover(&vol, i, dev.clone(), r, out).await;
        let p = vol.recovery_progress();
        if let Err(e) = done {
            let e = match e {
                ZapRaidError::ReplacementHoldsData { zone, state } => CliError::Other(format!(
                    "{} holds data (zone {zone} is {}) that is not {}'s; pass --force to \
                     destroy it",
                    r.with.display(),
                    state.name(),
                    m.name(i)
                )),
                e => zapraid_error(&m, e),
            };
            return Err(e);
        }
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
