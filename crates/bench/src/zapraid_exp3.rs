//! ZapRAID (APSys '23) Exp#3 in virtual time: full-drive recovery time against the logical
//! space written. A `3 + 1` array (`G = 256`) of timed zn540 members is written sequentially
//! at four sizes (a quarter, half, three quarters and all of its logical space); member 1
//! fails and a fresh member replaces it; `replace_member` is timed from the call until the
//! member is healthy again and that is recorded on every member. The paper's claims become
//! rows: recovery time per GiB at each size over the largest's (linear: 1.0), and the time
//! per 100 GiB of logical space next to the paper's 81.9 s (and per 1,000 GiB next to its
//! 813.2 s), extrapolated from the largest size's time per GiB.

use emu::SimRuntime;
use tokio::time::Instant;
use zapraid::GroupMode;
use zns::BlockDevice;

use crate::paper::{Options, Row};
use crate::zapraid_array as array;

/// The member that fails and is replaced.
pub const REPLACED: usize = 1;
const GROUP: u32 = 256;
/// Quarters of the logical space written at each point.
pub const QUARTERS: [u64; 4] = [1, 2, 3, 4];
const ZONES: u32 = 12;
const GIB: f64 = (1u64 << 30) as f64;

/// One recovery: logical bytes written before it and the virtual seconds it took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recovery {
    pub logical_bytes: u64,
    /// Blocks written to the replacement (one per stripe rebuilt).
    pub blocks_rebuilt: u64,
    pub secs: f64,
}

impl Recovery {
    pub fn secs_per_gib(&self) -> f64 {
        self.secs / (self.logical_bytes as f64 / GIB)
    }
}

/// Member zone capacity for `bytes` per point: a 32nd of it, from 4 MiB to 32 MiB, in blocks.
pub fn zone_capacity_blocks(bytes: u64) -> u64 {
    (bytes / 32).clamp(4 << 20, 32 << 20) / 4096
}

/// Writes `quarters` quarters of the logical space of a fresh array whose zones hold a 32nd
/// of `bytes`, fails member `REPLACED` and times its recovery onto a fresh member.
pub async fn recovery(bytes: u64, quarters: u64, seed: u64) -> Result<Recovery, String> {
    let cap = zone_capacity_blocks(bytes);
    let g = array::member_geometry(cap, ZONES)?;
    let vol = array::format(g, GroupMode::Grouped(GROUP), seed).await?;
    let blocks = vol.size_blocks() * quarters / 4;
    array::fill(&vol, blocks).await?;
    vol.fail_member_durably(REPLACED)
        .await
        .map_err(|e| format!("fail member {REPLACED}: {e}"))?;
    let fresh = array::timed(g, seed.wrapping_mul(16) + 100)?;
    let t0 = Instant::now();
    vol.replace_member(REPLACED, fresh, false)
        .await
        .map_err(|e| format!("recovery: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    let p = vol
        .recovery_progress()
        .ok_or("the recovery left no progress")?;
    if !p.finished {
        return Err("the recovery did not finish".into());
    }
    Ok(Recovery {
        logical_bytes: blocks * array::block_bytes(&vol),
        blocks_rebuilt: p.blocks_done,
        secs,
    })
}

/// The rows (see the module comment).
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let mut runs = Vec::new();
    for q in QUARTERS {
        let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
        runs.push(rt.block_on(recovery(o.bytes_per_point, q, o.seed))?);
    }
    let full = runs.last().ok_or("no sizes")?.secs_per_gib();
    let mut rows = Vec::new();
    for r in &runs {
        rows.push(Row::new(
            format!(
                "zapraid-exp3 recovery time per GiB / at the largest size, {} MiB logical, {:.3} s (ratio)",
                r.logical_bytes >> 20,
                r.secs
            ),
            1.0,
            r.secs_per_gib() / full,
        ));
    }
    rows.push(Row::new(
        "zapraid-exp3 recovery time per 100 GiB of logical space, from the largest size (s)".into(),
        81.9,
        full * 100.0,
    ));
    rows.push(Row::new(
        "zapraid-exp3 recovery time per 1,000 GiB of logical space, from the largest size (s)"
            .into(),
        813.2,
        full * 1000.0,
    ));
    Ok(rows)
}
