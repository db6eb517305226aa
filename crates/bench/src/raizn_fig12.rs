//! RAIZN (ASPLOS '23) Fig. 12 in virtual time: the time to rebuild a replaced member of a
//! 5-member array on timed zn540 members, at several amounts of valid data. The paper's
//! claims become two rows per fill level: the rebuild is bottlenecked by the replacement's
//! write bandwidth (rebuild bandwidth over the replacement's sequential write bandwidth,
//! measured in the same run on a fresh member with the same bytes; paper: 100%), and the
//! rebuild time scales linearly with the valid data (time per byte relative to the full
//! array's; paper: 1.0). Two more rows rebuild the full array with two parity units per
//! stripe (Reed-Solomon), which the paper does not have: against the replacement's write
//! bandwidth, and against the one-parity rebuild's time.
//!
//! The members are the zn540 timing profile with small zones (`--size` / 32 writable, 32 MiB
//! at the default 1 GiB; zones twice that), so that every fill level fits in memory; the
//! zone size does not change the per-command and flash timings the figure depends on, only
//! how often the per-zone costs (a finish, a flush and a record) come.

use std::sync::Arc;

use emu::{EmuDevice, SimRuntime};
use raizn::{Member, RaiznVolume};
use tokio::time::Instant;
use zns::{Geometry, ZonedDevice};

use crate::paper::{Options, Row};

/// Members of the array: 4 data units and 1 parity unit per stripe.
pub const MEMBERS: usize = 5;
/// Logical zones of the array (member zones above the metadata zones).
pub const DATA_ZONES: u32 = 12;
/// Full logical zones at each fill level.
pub const FILL_ZONES: [u32; 4] = [3, 6, 9, 12];
/// The member that fails and is replaced.
const REPLACED: usize = 1;

/// Member zone capacity for `bytes_per_point`: a 32nd of it, in whole 64 KiB stripe units,
/// from 1 MiB to 64 MiB.
pub fn zone_capacity_bytes(bytes_per_point: u64) -> u64 {
    let su = 64 * 1024;
    (bytes_per_point / 32 / su * su).clamp(1 << 20, 64 << 20)
}

/// The zn540 geometry with zones of `capacity_bytes` writable (twice that in size) and room
/// for `DATA_ZONES`.
pub fn member_geometry(capacity_bytes: u64) -> Result<Geometry, String> {
    let mut g = emu::profile("zn540").ok_or("the zn540 geometry is missing")?;
    g.zone_count = raizn::layout::MIN_META_ZONES + DATA_ZONES;
    g.zone_capacity = capacity_bytes / u64::from(g.block_size);
    g.zone_size = 2 * g.zone_capacity;
    Ok(g)
}

fn timed(g: Geometry, seed: u64) -> Result<Arc<EmuDevice>, String> {
    crate::paper::timed_zn540(g, seed).map(Arc::new)
}

/// One rebuild: member bytes written to the replacement and the virtual seconds it took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rebuild {
    pub bytes: u64,
    pub secs: f64,
}

impl Rebuild {
    pub fn mib_per_sec(&self) -> f64 {
        self.bytes as f64 / (1u64 << 20) as f64 / self.secs
    }
}

/// Writes `zones` full logical zones of `vol`, each in transfer-sized writes.
async fn fill(vol: &RaiznVolume, zones: u32) -> Result<(), String> {
    let g = vol.geometry();
    let chunk = u64::from(g.mdts_blocks);
    let buf = vec![0x5au8; (chunk * u64::from(g.block_size)) as usize];
    for z in 0..zones {
        let mut at = 0;
        while at < g.zone_capacity {
            let n = chunk.min(g.zone_capacity - at);
            let bytes = (n * u64::from(g.block_size)) as usize;
            vol.write(g.zone_start(z) + at, &buf[..bytes], None, false)
                .await
                .map_err(|e| format!("filling zone {z}: {e}"))?;
            at += n;
        }
    }
    vol.flush().await.map_err(|e| format!("flush: {e}"))
}

/// Fills `zones` logical zones of a fresh array, fails a member, and times the rebuild of
/// its replacement.
pub async fn rebuild(g: Geometry, zones: u32, seed: u64) -> Result<Rebuild, String> {
    rebuild_with_parity(g, zones, 1, seed).await
}

/// `rebuild` on an array with `parity` parity units per stripe (with 2, every unit of the
/// replaced member is rebuilt by Reed-Solomon from 3 of the 4 survivors).
pub async fn rebuild_with_parity(
    g: Geometry,
    zones: u32,
    parity: u32,
    seed: u64,
) -> Result<Rebuild, String> {
    let members = (0..MEMBERS)
        .map(|i| timed(g, seed + i as u64).map(|d| d as Member))
        .collect::<Result<Vec<_>, _>>()?;
    let unit_bytes = raizn::layout::DEFAULT_STRIPE_UNIT_BYTES.into();
    let vol = crate::paper::raizn_array_with_parity(members, unit_bytes, parity, seed).await?;
    fill(&vol, zones).await?;
    vol.fail_member(REPLACED)
        .await
        .map_err(|e| format!("fail: {e}"))?;
    let new = timed(g, seed + 100)?;
    let t0 = Instant::now();
    let report = vol
        .replace_member_up_to(REPLACED, new.clone() as Member, u32::MAX)
        .await
        .map_err(|e| format!("rebuild: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    if !report.whole {
        return Err("the rebuild did not complete".into());
    }
    Ok(Rebuild {
        bytes: report.progress.blocks_done * u64::from(g.block_size),
        secs,
    })
}

/// The replacement's sequential write bandwidth for `bytes`: a fresh member written zone by
/// zone from the first data zone in transfer-sized commands, then flushed.
pub async fn write_baseline(g: Geometry, bytes: u64, seed: u64) -> Result<Rebuild, String> {
    let dev = timed(g, seed + 200)?;
    let bs = u64::from(g.block_size);
    let chunk = u64::from(g.mdts_blocks);
    let buf = vec![0xa5u8; (chunk * bs) as usize];
    let md = vec![0u8; (chunk * u64::from(g.oob_size)) as usize];
    let t0 = Instant::now();
    let mut left = bytes / bs;
    let mut zone = raizn::layout::MIN_META_ZONES;
    while left > 0 {
        let mut at = 0;
        while at < g.zone_capacity && left > 0 {
            let n = chunk.min(g.zone_capacity - at).min(left);
            let meta = (g.oob_size > 0).then(|| &md[..(n * u64::from(g.oob_size)) as usize]);
            dev.write(
                g.zone_start(zone) + at,
                &buf[..(n * bs) as usize],
                meta,
                false,
            )
            .await
            .map_err(|e| format!("baseline write: {e}"))?;
            at += n;
            left -= n;
        }
        zone += 1;
    }
    dev.flush()
        .await
        .map_err(|e| format!("baseline flush: {e}"))?;
    Ok(Rebuild {
        bytes,
        secs: t0.elapsed().as_secs_f64(),
    })
}

/// The figure's rows: for every fill level, rebuild bandwidth against the replacement's write
/// bandwidth, and rebuild time per byte against the full array's.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let g = member_geometry(zone_capacity_bytes(o.bytes_per_point))?;
    let mut runs = Vec::new();
    for zones in FILL_ZONES {
        let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
        let r = rt.block_on(rebuild(g, zones, o.seed))?;
        let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
        let b = rt.block_on(write_baseline(g, r.bytes, o.seed))?;
        runs.push((zones, r, b));
    }
    let per_byte = |r: &Rebuild| r.secs / r.bytes as f64;
    let full = runs
        .last()
        .map(|(_, r, _)| per_byte(r))
        .ok_or("no fill levels")?;
    let mut rows = Vec::new();
    for (zones, r, b) in &runs {
        let pct = zones * 100 / DATA_ZONES;
        rows.push(Row::new(
            format!(
                "raizn-fig12 rebuild bandwidth / replacement write bandwidth, {pct}% full, {} MiB rebuilt (%)",
                r.bytes >> 20
            ),
            100.0,
            r.mib_per_sec() / b.mib_per_sec() * 100.0,
        ));
        rows.push(Row::new(
            format!("raizn-fig12 rebuild time per GiB / at 100% full, {pct}% full (ratio)"),
            1.0,
            per_byte(r) / full,
        ));
    }
    // Two parity units per stripe (the paper has one): the full array again, rebuilt by
    // Reed-Solomon; the replacement's writes should still be the bottleneck.
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    let r2 = rt.block_on(rebuild_with_parity(g, DATA_ZONES, 2, o.seed))?;
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    let b2 = rt.block_on(write_baseline(g, r2.bytes, o.seed))?;
    rows.push(Row::new(
        format!(
            "raizn-fig12 m = 2 rebuild bandwidth / replacement write bandwidth, 100% full, {} MiB rebuilt (%)",
            r2.bytes >> 20
        ),
        100.0,
        r2.mib_per_sec() / b2.mib_per_sec() * 100.0,
    ));
    rows.push(Row::new(
        "raizn-fig12 m = 2 rebuild time / m = 1 rebuild time, 100% full (ratio)".to_string(),
        1.0,
        r2.secs
            / runs
                .last()
                .map(|(_, r, _)| r.secs)
                .ok_or("no fill levels")?,
    ));
    Ok(rows)
}
