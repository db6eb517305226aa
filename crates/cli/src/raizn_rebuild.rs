//! `zonestack raizn replace` and `zonestack raizn rebuild`: a new device image takes a failed
//! member's place and is rebuilt from the survivors, with the rebuild's progress on stderr
//! (a bar on a terminal, plain periodic lines otherwise, nothing with --quiet).
//!
//! `replace` formats the newcomer into the array (refusing an image holding data unless
//! --force) and rebuilds it; `rebuild` goes on with a rebuild that was cut short (the
//! process stopped, the power went): the image at the failed member's position is the
//! newcomer, named in the member list in its place.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use raizn::{RaiznVolume, RebuildProgress};
use zns::ZonedDevice;

use crate::cmd_raizn::{member_index, open_array, raizn_error, used_because};
use crate::error::{CliError, CliResult};
use crate::members::{finish, Members};

/// How often a plain progress line is printed when stderr is not a terminal.
const LINE_PERIOD: Duration = Duration::from_secs(5);
/// How often the progress is sampled.
const TICK: Duration = Duration::from_millis(100);

/// What `replace` and `rebuild` share from the command line.
pub struct RebuildArgs<'a> {
    pub members: &'a [PathBuf],
    pub quiet: bool,
    /// Rebuild at most this many zones, then stop as if interrupted (hidden; for tests and
    /// rebuilds in slices).
    pub stop_after_zones: Option<u32>,
}

/// `zonestack raizn replace MEMBERS... --member I --with NEW [--force]`.
pub async fn replace(
    a: &RebuildArgs<'_>,
    spec: &str,
    new: &Path,
    force: bool,
    out: &mut impl Write,
) -> CliResult {
    let i = member_index(a.members, spec)?;
    let same = |p: &Path| {
        !crate::members::is_missing(p)
            && (p == new
                || matches!((p.canonicalize(), new.canonicalize()), (Ok(x), Ok(y)) if x == y))
    };
    if let Some(j) = a.members.iter().position(|p| same(p)) {
        return Err(CliError::Usage(format!(
            "--with {} is member {j} of the array itself; give a new device image",
            new.display()
        )));
    }
    let newdev = Arc::new(crate::commands::open(new)?);
    let m = match Members::open(a.members, false, true) {
        Ok(m) => m,
        Err(e) => {
            close_image(new, &newdev)?;
            return Err(e);
        }
    };
    let r = replace_on(a, &m, i, new, &newdev, force).await;
    let closed = close_image(new, &newdev);
    let text = finish(m, r)?;
    closed?;
    writeln!(out, "{text}")?;
    Ok(())
}

fn close_image(path: &Path, dev: &crate::opened::Opened) -> CliResult {
    dev.shutdown().map_err(|e| match e {
        CliError::Other(m) => CliError::Other(format!("closing {}: {m}", path.display())),
        e => e,
    })
}

async fn replace_on(
    a: &RebuildArgs<'_>,
    m: &Members,
    i: usize,
    new: &Path,
    newdev: &Arc<crate::opened::Opened>,
    force: bool,
) -> Result<String, CliError> {
    let vol = open_array(m).await?;
    match vol.failed_member() {
        Some(f) if f == i => {}
        Some(f) => {
            return Err(CliError::Other(format!(
                "{} is the failed member, not {}; replace {} instead",
                m.name(f),
                m.name(i),
                m.name(f)
            )))
        }
        None => {
            return Err(CliError::Other(format!(
                "the array is not degraded; record {} failed first with `zonestack raizn fail \
                 --member {i}` if it must go",
                m.name(i)
            )))
        }
    }
    let ours = crate::raizn_inspect::newest_superblock(newdev.as_ref())
        .await
        .ok()
        .flatten()
        .is_some_and(|sb| sb.array_uuid == vol.array_uuid() && sb.member_index as usize == i);
    if !ours {
        if let Some(why) = used_because(newdev.as_ref()).await? {
            if !force {
                return Err(CliError::Other(format!(
                    "{} holds data ({why}); pass --force to destroy it",
                    new.display()
                )));
            }
            newdev.zone_mgmt(zns::ZoneAction::Reset, 0, true).await?;
        }
    }
    let whole = run_rebuild(a, m, &vol, i, newdev.clone() as raizn::Member).await?;
    let mut names: Vec<String> = a.members.iter().map(|p| p.display().to_string()).collect();
    if let Some(n) = names.get_mut(i) {
        *n = new.display().to_string();
    }
    let list = names.join(" ");
    Ok(match whole {
        true => format!(
            "{} replaced member {i}; the array is whole; its members are now: {list}",
            new.display()
        ),
        false => format!(
            "rebuild of member {i} onto {} stopped before its end; the array stays degraded; \
             continue it with `zonestack raizn rebuild {list}`",
            new.display()
        ),
    })
}

/// `zonestack raizn rebuild MEMBERS...`: continues the rebuild of the failed member onto the
/// image given at its position.
pub async fn rebuild(a: &RebuildArgs<'_>, out: &mut impl Write) -> CliResult {
    let m = Members::open(a.members, false, true)?;
    let r = async {
        let vol = open_array(&m).await?;
        let Some(f) = vol.failed_member() else {
            return Ok("the array is whole: nothing to rebuild".to_string());
        };
        let Some(dev) = m.devs.get(f).cloned().flatten() else {
            return Err(CliError::Other(format!(
                "{} is missing; give a new image with `zonestack raizn replace --member {f} \
                 --with NEW.img`",
                m.name(f)
            )));
        };
        let ours = crate::raizn_inspect::newest_superblock(dev.as_ref())
            .await
            .ok()
            .flatten()
            .is_some_and(|sb| sb.array_uuid == vol.array_uuid() && sb.member_index as usize == f);
        if !ours {
            return Err(CliError::Other(format!(
                "{} is not a replacement being rebuilt into this array; start one with \
                 `zonestack raizn replace --member {f} --with NEW.img`",
                m.name(f)
            )));
        }
        let whole = run_rebuild(a, &m, &vol, f, dev as raizn::Member).await?;
        Ok(match whole {
            true => format!("{} rebuilt; the array is whole", m.name(f)),
            false => format!(
                "rebuild of {} stopped before its end; the array stays degraded; run \
                 `zonestack raizn rebuild` again to continue",
                m.name(f)
            ),
        })
    }
    .await;
    let text = finish(m, r)?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// Runs the rebuild of member `i` onto `dev` while reporting its progress; then makes what
/// it wrote durable. Returns whether the array is whole.
async fn run_rebuild(
    a: &RebuildArgs<'_>,
    m: &Members,
    vol: &RaiznVolume,
    i: usize,
    dev: raizn::Member,
) -> Result<bool, CliError> {
    let bs = u64::from(vol.layout().member_geometry().block_size);
    let mut report = Reporter::new(a.quiet, m.name(i), bs);
    let zones_max = a.stop_after_zones.unwrap_or(u32::MAX);
    let work = vol.replace_member_up_to(i, dev, zones_max);
    tokio::pin!(work);
    let mut tick = tokio::time::interval(TICK);
    let r = loop {
        tokio::select! {
            r = &mut work => break r,
            _ = tick.tick() => report.show(vol.rebuild_progress()),
        }
    };
    let done = match r {
        Ok(d) => d,
        Err(e) => {
            report.end(None);
            return Err(raizn_error(m, e));
        }
    };
    vol.flush().await?;
    report.last = Some(done.progress);
    report.end(Some(done.whole));
    Ok(done.whole)
}

/// Shows a rebuild's progress on stderr: a bar on a terminal, a plain line every
/// `LINE_PERIOD` otherwise, nothing when quiet.
struct Reporter {
    who: String,
    block_bytes: u64,
    bar: Option<indicatif::ProgressBar>,
    plain: bool,
    last_line: Option<Instant>,
    last: Option<RebuildProgress>,
}

impl Reporter {
    fn new(quiet: bool, who: String, block_bytes: u64) -> Reporter {
        let tty = std::io::stderr().is_terminal();
        let bar = (!quiet && tty).then(|| {
            let b = indicatif::ProgressBar::new(0);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "rebuild {msg} {bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Reporter {
            who,
            block_bytes,
            bar,
            plain: !quiet && !tty,
            last_line: None,
            last: None,
        }
    }

    fn show(&mut self, p: Option<RebuildProgress>) {
        let Some(p) = p else { return };
        self.last = Some(p);
        if let Some(b) = &self.bar {
            let bs = self.block_bytes;
            b.set_length(p.blocks_total * bs);
            b.set_position(p.blocks_done * bs);
            b.set_message(format!(
                "of {} (zone {}/{})",
                self.who, p.zones_done, p.zones_total
            ));
        }
        if self.plain && self.last_line.is_none_or(|t| t.elapsed() >= LINE_PERIOD) {
            self.last_line = Some(Instant::now());
            eprintln!("{}", line(&self.who, &p));
        }
    }

    /// The rebuild ended: Some(whole) when it worked, None when it failed.
    fn end(&mut self, whole: Option<bool>) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if !self.plain {
            return;
        }
        if let Some(p) = self.last.filter(|p| p.zones_resumed > 0) {
            eprintln!(
                "rebuild of {}: {} zone(s) ({} member blocks) kept from the run cut short",
                self.who, p.zones_resumed, p.blocks_resumed
            );
        }
        match (whole, self.last) {
            (Some(true), _) => eprintln!("rebuild of {}: 100%, done", self.who),
            (_, Some(p)) => eprintln!("{} (stopped)", line(&self.who, &p)),
            (_, None) => {}
        }
    }
}

/// One plain progress line: "rebuild of member 1 (b.img): 42% (1.2 MiB of 2.9 MiB), zone
/// 3 of 5".
fn line(who: &str, p: &RebuildProgress) -> String {
    let pct = (p.blocks_done * 100)
        .checked_div(p.blocks_total)
        .unwrap_or(100)
        .min(100);
    format!(
        "rebuild of {who}: {pct}% ({} of {} member blocks), zone {} of {}",
        p.blocks_done, p.blocks_total, p.zones_done, p.zones_total
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_how_far() {
        let p = RebuildProgress {
            member: 1,
            blocks_done: 50,
            blocks_total: 200,
            zones_done: 2,
            zones_total: 5,
            blocks_resumed: 0,
            zones_resumed: 0,
        };
        assert_eq!(
            line("member 1 (b.img)", &p),
            "rebuild of member 1 (b.img): 25% (50 of 200 member blocks), zone 2 of 5"
        );
        let empty = RebuildProgress::default();
        assert!(line("m", &empty).contains("100%"));
    }
}
