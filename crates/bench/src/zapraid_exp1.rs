//! ZapRAID (APSys '23) Exp#1 in virtual time: 4 KiB random writes at QD16 on a `3 + 1` array of
//! timed zn540 members, in the three layouts the paper compares: ZoneWrite-only (`G = 1`),
//! ZapRAID's grouped layout (`G = 256`) and ZoneAppend-only (`G = S`), each on fresh members in
//! its own runtime, so the ratios compare runs with the same workload and seed. The paper's
//! claims become rows: grouped throughput over ZoneWrite-only's (2.34x), over ZoneAppend-only's
//! (similar: 1.0), its p95 latency below ZoneWrite-only's (52.3% lower), and the compact stripe
//! table's memory at the paper's scale for `G = 256` and `G = S` from the formula (3.77 and
//! 8.95 GiB; computed, not measured). One row is not the paper's: the grouped layout with
//! in-band records (the default `G = 32`, one stripe of each group its summary) over `G = 256`
//! with records in per-block metadata, the in-band form's cost on drives that have metadata.
//!
//! No garbage collection runs: the array has room for every write (as the paper's 4 TiB
//! drives do for its 64 GiB), so the layouts' write paths are what is compared.

use emu::SimRuntime;
use zapraid::{GroupMode, RecordPlace};

use crate::blockload::{self, BlockJob};
use crate::jobfile::Distribution;
use crate::paper::{Options, Row};
use crate::workload::{percentile_us, Ramp};
use crate::zapraid_array::{self as array, K, M};

/// The paper's default group size.
pub const GROUP: u32 = 256;
const QUEUE_DEPTH: u32 = 16;
const BLOCK_BYTES: u64 = 4096;
/// The ZN540 the paper's stripe-table figures are for: stripes per segment and zones (the
/// text prints Z = 1,351, the footer's size; its figures are those of Z = 3,690).
const PAPER_STRIPES: u32 = 274_160;
const PAPER_ZONES: u32 = 3_690;

/// Throughput and tail latency of one layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Writes {
    pub mib_per_sec: f64,
    pub p95_us: f64,
    /// Padding blocks written per client block (stripes sealed by the timeout).
    pub padding_per_block: f64,
}

/// Member zone capacity for `bytes` of writes: a 32nd of them, from 4 MiB (above two groups
/// of 256 stripes) to 64 MiB, in blocks.
pub fn zone_capacity_blocks(bytes: u64) -> u64 {
    (bytes / 32).clamp(4 << 20, 64 << 20) / BLOCK_BYTES
}

/// Writes `bytes` of 4 KiB random writes at QD16 over the whole volume of a fresh array in
/// `mode`; the first eighth is the ramp.
pub async fn random_writes(mode: GroupMode, bytes: u64, seed: u64) -> Result<Writes, String> {
    random_writes_with(mode, RecordPlace::Auto, bytes, seed).await
}

/// As `random_writes`, with the block records in `records` (in-band: one stripe of every
/// group is its summary).
pub async fn random_writes_with(
    mode: GroupMode,
    records: RecordPlace,
    bytes: u64,
    seed: u64,
) -> Result<Writes, String> {
    let cap = zone_capacity_blocks(bytes);
    let g = array::member_geometry(cap, array::zones_for(bytes, cap))?;
    let vol = array::format_with(array::members(g, seed)?, mode, records, seed).await?;
    let job = BlockJob {
        first_lba: 0,
        blocks: zns::BlockDevice::size_blocks(&vol),
        block_bytes: BLOCK_BYTES,
        queue_depth: QUEUE_DEPTH,
        bytes,
        read_percent: 0,
        random_percent: 100,
        distribution: Distribution::Random,
        seed,
        runtime_ns: None,
        rate_bytes_per_sec: None,
    };
    let ramp = Ramp {
        bytes: bytes / 8,
        ns: 0,
    };
    let r = blockload::run_groups(&vol, &[&[job]], &[ramp])
        .await
        .map_err(|e| format!("random writes ({mode:?}): {e}"))?;
    let r = r.first().ok_or("no report")?;
    let st = vol.stats();
    if st.segments_collected > 0 {
        return Err(format!(
            "{mode:?}: garbage collection ran ({} segments); the array is too small",
            st.segments_collected
        ));
    }
    Ok(Writes {
        mib_per_sec: r.write.mib_per_sec,
        p95_us: percentile_us(&r.write_latencies_ns, 95.0),
        padding_per_block: st.padding_blocks as f64 / st.client_blocks.max(1) as f64,
    })
}

fn in_runtime(mode: GroupMode, o: &Options) -> Result<Writes, String> {
    in_runtime_with(mode, RecordPlace::Auto, o)
}

fn in_runtime_with(mode: GroupMode, records: RecordPlace, o: &Options) -> Result<Writes, String> {
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(random_writes_with(mode, records, o.bytes_per_point, o.seed))
}

/// The stripe table's bound at the paper's scale for group size `group`, in GiB.
pub fn paper_stripe_table_gib(group: u32) -> f64 {
    let bits = zapraid::index::stripe_table_bits(K, M, PAPER_STRIPES, PAPER_ZONES, group);
    bits as f64 / 8.0 / f64::from(1u32 << 30)
}

/// The rows (see the module comment).
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let zw = in_runtime(GroupMode::ZoneWriteOnly, o)?;
    let gr = in_runtime(GroupMode::Grouped(GROUP), o)?;
    let za = in_runtime(GroupMode::ZoneAppendOnly, o)?;
    // The in-band form's cost on the same drives: its default group (32 stripes, one of
    // them the summary) against G = 256 with records in per-block metadata. No flushes run,
    // so no group is padded.
    let ib = in_runtime_with(GroupMode::DEFAULT, RecordPlace::InBand, o)?;
    let mib = o.bytes_per_point >> 20;
    Ok(vec![
        Row::new(
            format!(
                "zapraid-exp1 throughput G=256 ({:.0} MiB/s) / ZoneWrite-only ({:.0} MiB/s), 4 KiB random writes QD16, {mib} MiB (ratio)",
                gr.mib_per_sec, zw.mib_per_sec
            ),
            2.34,
            gr.mib_per_sec / zw.mib_per_sec,
        ),
        Row::new(
            format!(
                "zapraid-exp1 throughput G=256 / ZoneAppend-only ({:.0} MiB/s) (ratio)",
                za.mib_per_sec
            ),
            1.0,
            gr.mib_per_sec / za.mib_per_sec,
        ),
        Row::new(
            format!(
                "zapraid-exp1 p95 latency G=256 ({:.0} us) below ZoneWrite-only ({:.0} us) (%)",
                gr.p95_us, zw.p95_us
            ),
            52.3,
            (1.0 - gr.p95_us / zw.p95_us) * 100.0,
        ),
        Row::new(
            format!(
                "zapraid-exp1 in-band records, G=32 ({:.0} MiB/s) / per-block metadata, G=256 (ratio; not in the paper)",
                ib.mib_per_sec
            ),
            f64::NAN,
            ib.mib_per_sec / gr.mib_per_sec,
        ),
        Row::new(
            "zapraid-exp1 stripe table at the paper's scale, G=256, from the formula (GiB)".into(),
            3.77,
            paper_stripe_table_gib(GROUP),
        ),
        Row::new(
            "zapraid-exp1 stripe table at the paper's scale, G=S, from the formula (GiB)".into(),
            8.95,
            paper_stripe_table_gib(PAPER_STRIPES),
        ),
    ])
}
