//! Zone Append at queue depth on one RAIZN zone (docs/DESIGN.md, "Zone Append at queue
//! depth"): append throughput of one job filling one logical zone of a 5-member array at
//! queue depth 1 and 8, in virtual time on timed zn540 members, for appends smaller than a
//! stripe unit, of one unit and of one stripe. The paper serialises the appends of a zone, so
//! its QD8 equals its QD1 (the ratio 1 in the paper column); the pipeline overlaps the member
//! writes of appends that land on different members and the partial-parity and commit step of
//! one append with the member writes of the next.

use std::sync::Arc;

use emu::SimRuntime;
use raizn::Member;

use crate::paper::{Options, Row};
use crate::workload::{self, Job, Limits, Pattern};

const MEMBERS: usize = 5;
const KIB: u64 = 1024;
/// The array's stripe unit, as in raizn-seq.
const UNIT_BYTES: u64 = 128 * KIB;
/// Append sizes: inside a unit, one unit, one stripe (4 data units).
const SIZES: [u64; 3] = [16 * KIB, UNIT_BYTES, 4 * UNIT_BYTES];

/// MiB/s and the appends' pipeline counters of one job appending `block_bytes` at
/// `queue_depth` to logical zone 0 of a fresh array, `bytes` in all.
async fn one(
    o: &Options,
    block_bytes: u64,
    queue_depth: u32,
    bytes: u64,
) -> Result<(f64, raizn::AppendStats), String> {
    let mut g = emu::profile("zn540").ok_or("the zn540 geometry is missing")?;
    g.zone_count = 40;
    let members = (0..MEMBERS)
        .map(|i| crate::paper::timed_zn540(g, o.seed + 1 + i as u64).map(|d| Arc::new(d) as Member))
        .collect::<Result<Vec<_>, _>>()?;
    let vol = crate::paper::raizn_array(members, UNIT_BYTES, o.seed).await?;
    let job = Job {
        pattern: Pattern::Append,
        zones: vec![0],
        block_bytes,
        queue_depth,
        bytes,
        read_extent_bytes: 0,
        seed: o.seed,
        random_percent: 100,
        zipf_theta: None,
        limits: Limits::default(),
    };
    let r = workload::run(&vol, &[job], bytes / 8)
        .await
        .map_err(|e| format!("append: {e}"))?;
    Ok((r.mib_per_sec, vol.append_stats()))
}

/// The rows: QD8 over QD1 append throughput on one zone, per append size.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for bs in SIZES {
        // The smallest appends move less data in the same number of commands.
        let bytes = if bs < UNIT_BYTES {
            o.bytes_per_point / 8
        } else {
            o.bytes_per_point
        };
        let mut rate = [0f64; 2];
        let mut depth = 0;
        for (k, qd) in [1u32, 8].into_iter().enumerate() {
            let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
            let (mib, stats) = rt.block_on(one(o, bs, qd, bytes))?;
            rate[k] = mib;
            depth = stats.depth_max;
        }
        rows.push(Row::new(
            format!(
                "raizn-append {} KiB appends, one zone: QD8 / QD1 throughput (x; QD1 {:.0} MiB/s, \
                 QD8 {:.0} MiB/s, {depth} in flight at most)",
                bs / KIB,
                rate[0],
                rate[1]
            ),
            1.0,
            rate[1] / rate[0],
        ));
    }
    Ok(rows)
}
