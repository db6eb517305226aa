//! ZapRAID (APSys '23) Exp#2 in virtual time: normal and degraded 4 KiB random reads at QD1 on
//! a full `3 + 1` array of timed zn540 members. The logical space is written whole first;
//! normal reads (NR) go to random blocks, degraded reads to random blocks of a failed member,
//! rebuilt from the other three: under ZapRAID's grouped layout (DR-ZapRAID, `G = 256`: the
//! stripe is found by searching its group in the compact stripe table) and under the static
//! mapping of Log-RAID (DR-Log-RAID: `G = 1`, every stripe at one offset on every member). The
//! paper finds all three within 5% of each other; each row is a ratio to the normal reads of
//! the same volume (paper: 100%).

use emu::SimRuntime;
use tokio::time::Instant;
use zapraid::{GroupMode, ZapRaidVolume};
use zns::{BlockDevice, SimRng};

use crate::paper::{Options, Row};
use crate::workload::percentile_us;
use crate::zapraid_array as array;

/// The member failed for the degraded reads.
pub const FAILED: usize = 1;
const GROUP: u32 = 256;

/// Throughput and tail latency of one kind of read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reads {
    pub kiops: f64,
    pub p95_us: f64,
}

/// Normal and degraded reads of one layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exp2 {
    pub normal: Reads,
    pub degraded: Reads,
}

/// Member zone capacity for `bytes` per point: a 32nd of it, from 4 MiB to 32 MiB, in blocks.
pub fn zone_capacity_blocks(bytes: u64) -> u64 {
    (bytes / 32).clamp(4 << 20, 32 << 20) / 4096
}

/// Reads at QD1, one 4 KiB read of each of `lbas` in turn, timed one by one; each must hold
/// what `array::fill` wrote.
async fn reads_qd1(vol: &ZapRaidVolume, lbas: &[u64]) -> Result<Reads, String> {
    let mut buf = vec![0u8; array::block_bytes(vol) as usize];
    let mut lat = Vec::with_capacity(lbas.len());
    let t0 = Instant::now();
    for lba in lbas {
        let t = Instant::now();
        vol.read(*lba, &mut buf)
            .await
            .map_err(|e| format!("read of LBA {lba}: {e}"))?;
        lat.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
        if buf.iter().any(|b| *b != crate::blockload::FILL_BYTE) {
            return Err(format!("LBA {lba} does not hold what the fill wrote"));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    lat.sort_unstable();
    Ok(Reads {
        kiops: if secs > 0.0 {
            lbas.len() as f64 / secs / 1000.0
        } else {
            0.0
        },
        p95_us: percentile_us(&lat, 95.0),
    })
}

/// `count` random LBAs of `vol` whose blocks live on `member` (any member: `None`).
fn pick(vol: &ZapRaidVolume, member: Option<usize>, count: usize, seed: u64) -> Vec<u64> {
    let mut rng = SimRng::new(seed);
    let blocks = vol.size_blocks();
    let mut out = Vec::with_capacity(count);
    // Every fourth block lives on a given member; the bound only stops a volume holding none.
    for _ in 0..count.saturating_mul(64) {
        if out.len() == count {
            break;
        }
        let lba = rng.below(blocks);
        let on = vol.address_of(lba).map(|p| usize::from(p.member));
        if on.is_some() && (member.is_none() || on == member) {
            out.push(lba);
        }
    }
    out
}

/// Fills a fresh array in `mode` whose zones hold a 32nd of `bytes`, then reads `reads`
/// random blocks at QD1 normally and `reads` blocks of member `FAILED` after failing it.
pub async fn normal_and_degraded(
    mode: GroupMode,
    bytes: u64,
    reads: usize,
    seed: u64,
) -> Result<Exp2, String> {
    let cap = zone_capacity_blocks(bytes);
    let g = array::member_geometry(cap, 8)?;
    let devs = array::members(g, seed)?;
    let vol = array::format_on(devs.clone(), mode, seed).await?;
    array::fill(&vol, vol.size_blocks()).await?;
    let normal_lbas = pick(&vol, None, reads, seed);
    let lost_lbas = pick(&vol, Some(FAILED), reads, seed ^ 0xdead);
    if normal_lbas.len() < reads || lost_lbas.len() < reads {
        return Err(format!(
            "{mode:?}: found {} and {} of {reads} blocks to read",
            normal_lbas.len(),
            lost_lbas.len()
        ));
    }
    let normal = reads_qd1(&vol, &normal_lbas).await?;
    vol.fail_member(FAILED);
    let before: Vec<u64> = devs.iter().map(|d| d.stats().blocks_read).collect();
    let degraded = reads_qd1(&vol, &lost_lbas).await?;
    // Every degraded read rebuilt its block from the three other members, none touched the
    // failed one.
    for (i, d) in devs.iter().enumerate() {
        let read = d.stats().blocks_read - before.get(i).copied().unwrap_or(0);
        let want = if i == FAILED { 0 } else { reads as u64 };
        if read != want {
            return Err(format!(
                "{mode:?}: member {i} read {read} blocks for {reads} degraded reads (want {want})"
            ));
        }
    }
    Ok(Exp2 { normal, degraded })
}

fn in_runtime(mode: GroupMode, o: &Options, reads: usize) -> Result<Exp2, String> {
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(normal_and_degraded(mode, o.bytes_per_point, reads, o.seed))
}

/// Reads per kind for `bytes` per point: one per 256 KiB, at least 256.
pub fn reads_for(bytes: u64) -> usize {
    usize::try_from(bytes / (256 << 10))
        .unwrap_or(usize::MAX)
        .max(256)
}

/// The rows (see the module comment).
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let reads = reads_for(o.bytes_per_point);
    let zap = in_runtime(GroupMode::Grouped(GROUP), o, reads)?;
    let log = in_runtime(GroupMode::ZoneWriteOnly, o, reads)?;
    let pct = |a: f64, b: f64| a / b * 100.0;
    Ok(vec![
        Row::new(
            format!(
                "zapraid-exp2 DR-ZapRAID (G=256) / NR throughput ({:.2} KIOPS), 4 KiB QD1, {reads} reads (%)",
                zap.normal.kiops
            ),
            100.0,
            pct(zap.degraded.kiops, zap.normal.kiops),
        ),
        Row::new(
            format!(
                "zapraid-exp2 DR-ZapRAID / NR p95 latency ({:.0} us) (%)",
                zap.normal.p95_us
            ),
            100.0,
            pct(zap.degraded.p95_us, zap.normal.p95_us),
        ),
        Row::new(
            format!(
                "zapraid-exp2 DR-Log-RAID (G=1) / NR throughput ({:.2} KIOPS) (%)",
                log.normal.kiops
            ),
            100.0,
            pct(log.degraded.kiops, log.normal.kiops),
        ),
        Row::new(
            "zapraid-exp2 DR-ZapRAID / DR-Log-RAID throughput (%)".into(),
            100.0,
            pct(zap.degraded.kiops, log.degraded.kiops),
        ),
    ])
}
