//! `zonestack serve --zapraid a.img,b.img,c.img,d.img`: a ZapRAID block volume exported over
//! NBD as it is (ZapRAID is a block volume; no FTL runs on it). Shuts down as `serve` does:
//! on SIGINT or SIGTERM in-flight requests finish, the volume is flushed on every member and
//! the images are closed; a failed step is reported with its cause and exits 1. With
//! `--fail-member I --fail-after N` member I dies mid-run, as `serve --raizn` does it.

use std::io::Write;
use std::sync::Arc;

use nbd::{NbdServer, ServerConfig};
use tracing::info;
use zapraid::ZapRaidVolume;
use zns::BlockDevice;

use crate::cmd_zapraid::{open_array, zapraid_error};
use crate::error::{CliError, CliResult};
use crate::members::Members;
use crate::serve::{signalled, ServeArgs};
use crate::units::format_size;

/// Flushes the volume, then closes the member images; both run whatever the first did.
async fn close(vol: Arc<ZapRaidVolume>, m: Members) -> Vec<String> {
    let mut problems = Vec::new();
    match vol.flush().await {
        Ok(()) => info!("ZapRAID volume flushed"),
        Err(e) => problems.push(format!("the volume could not be flushed: {e}")),
    }
    // The volume's stripe tasks hold the members until it is gone.
    drop(vol);
    if let Err(e) = m.close() {
        problems.push(format!(
            "the member images could not be closed: {}",
            e.message()
        ));
    }
    problems
}

/// Opens the array over `m`; with `--fail-member I --fail-after N` member I dies at its N-th
/// command from the start of serving (the volume degrades and goes on).
async fn open_served(a: &ServeArgs, m: &Members) -> Result<ZapRaidVolume, CliError> {
    let Some((devs, arm)) = crate::serve::faulty_members(a, m)? else {
        return open_array(m).await;
    };
    let vol = ZapRaidVolume::open_with_missing(devs)
        .await
        .map_err(|e| zapraid_error(m, e))?;
    arm()?;
    Ok(vol)
}

/// What the startup line says about member failures: those recorded, and the one armed.
fn failure_note(a: &ServeArgs, m: &Members, vol: &ZapRaidVolume) -> String {
    let mut what = String::new();
    let failed = vol.failed_members();
    if !failed.is_empty() {
        let names: Vec<String> = failed.iter().map(|i| m.name(*i)).collect();
        what += &format!(", degraded: {} failed", names.join(", "));
    }
    if let (Some(i), Some(n)) = (a.fail_member, a.fail_after) {
        what += &format!(", {} set to fail at its command {n}", m.name(i));
    }
    what
}

pub async fn run(a: &ServeArgs, config: ServerConfig, out: &mut impl Write) -> CliResult {
    let timing = a
        .timing
        .as_deref()
        .map(crate::timing::profile_named)
        .transpose()?;
    let m = Members::open(&a.zapraid, false, true)?.with_timing(timing)?;
    let vol = match open_served(a, &m).await {
        Ok(v) => Arc::new(v),
        Err(e) => {
            let closed = m.close().err().map(|c| format!("; {}", c.message()));
            return Err(CliError::Other(format!(
                "{}{}",
                e.message(),
                closed.unwrap_or_default()
            )));
        }
    };
    let blockdev: Arc<dyn BlockDevice> = vol.clone();
    let server = match NbdServer::bind(config, blockdev) {
        Ok(s) => s,
        Err(e) => {
            let mut problems = vec![e.to_string()];
            problems.extend(close(vol, m).await);
            return Err(CliError::Other(problems.join("; ")));
        }
    };
    let l = vol.layout();
    let size = format_size(vol.size_blocks() * u64::from(vol.block_size()));
    info!(
        "serving a {size} ZapRAID volume at {} over k = {} + m = {} members",
        server.local_uri(),
        l.k,
        l.m
    );
    let stop = signalled();
    writeln!(
        out,
        "serving {size} ZapRAID volume over k = {} + m = {} members ({} segments, groups of {} stripes){}{}\n{}",
        l.k,
        l.m,
        l.segments(),
        l.group,
        failure_note(a, &m, &vol),
        timing
            .map(|p| format!(", members with {}", crate::timing::describe(&p)))
            .unwrap_or_default(),
        server.local_uri()
    )?;
    out.flush()?;
    let served = server.serve_until(stop).await;
    let stats = crate::cmd_zapraid::status_of(&vol, false);
    info!("NBD server stopped: flushing the volume\n{stats}");
    let mut problems = Vec::new();
    if let Err(e) = served {
        problems.push(format!("the NBD server failed: {e}"));
    }
    problems.extend(close(vol, m).await);
    if problems.is_empty() {
        writeln!(out, "stopped: volume flushed")?;
        return Ok(());
    }
    Err(CliError::Other(format!(
        "stopped with errors: {}",
        problems.join("; ")
    )))
}
