//! RAIZN (ASPLOS '23) section 6.1 on an array: sequential write and read throughput of a
//! 5-member RAIZN volume against one member device, measured in the same run, in virtual
//! time on timed zn540 members. The paper finds the array within 2% of the aggregate raw
//! throughput: 4x a device's for writes (one unit of every stripe is parity) and 5x for
//! reads (every member serves data; parity units are skipped). Each job writes or reads its
//! own zone in commands of one stripe unit per data member, so every member sees the same
//! command size as the single device. The same 5 members with two parity units per stripe
//! (Reed-Solomon; the paper has one only) should write at 3x a device and read at 5x.

use std::sync::Arc;

use emu::{EmuDevice, SimRuntime};
use raizn::Member;
use zns::{Geometry, ZonedDevice};

use crate::paper::{Options, Row};
use crate::workload::{self, Job, Limits, Pattern};

/// Members of the array: 4 data units and 1 parity unit per stripe.
pub const MEMBERS: usize = 5;
const KIB: u64 = 1024;
/// The single device's command size (RAIZN 6.1's 128 KiB) and the array's stripe unit.
const UNIT_BYTES: u64 = 128 * KIB;
const JOBS: u32 = 8;

fn geometry() -> Result<Geometry, String> {
    let mut g = emu::profile("zn540").ok_or("the zn540 geometry is missing")?;
    g.zone_count = 40;
    Ok(g)
}

fn timed(seed: u64) -> Result<Arc<EmuDevice>, String> {
    crate::paper::timed_zn540(geometry()?, seed).map(Arc::new)
}

/// Jobs of `pattern` on `dev`: `JOBS` jobs, each in its own zone, `block_bytes` commands at
/// `queue_depth`, `bytes` in all; reads within the first `extent` bytes of each zone.
fn jobs(pattern: Pattern, block_bytes: u64, queue_depth: u32, bytes: u64, extent: u64) -> Vec<Job> {
    (0..JOBS)
        .map(|j| Job {
            pattern,
            zones: vec![j],
            block_bytes,
            queue_depth,
            bytes: bytes / u64::from(JOBS),
            read_extent_bytes: extent,
            seed: u64::from(j),
            random_percent: 100,
            zipf_theta: None,
            limits: Limits::default(),
        })
        .collect()
}

/// Write then read MiB/s of `dev` with commands of `block_bytes`, `bytes` each way.
async fn write_read(
    dev: &dyn ZonedDevice,
    block_bytes: u64,
    bytes: u64,
) -> Result<(f64, f64), String> {
    let ramp = (bytes / 8).max(32 << 20).min(bytes / 2);
    let w = workload::run(dev, &jobs(Pattern::Write, block_bytes, 1, bytes, 0), ramp)
        .await
        .map_err(|e| format!("write: {e}"))?;
    dev.flush().await.map_err(|e| format!("flush: {e}"))?;
    let extent = bytes / u64::from(JOBS);
    let r = workload::run(
        dev,
        &jobs(Pattern::SeqRead, block_bytes, 64, bytes, extent),
        ramp,
    )
    .await
    .map_err(|e| format!("read: {e}"))?;
    Ok((w.mib_per_sec, r.mib_per_sec))
}

async fn single(o: &Options) -> Result<(f64, f64), String> {
    let dev = timed(o.seed)?;
    write_read(dev.as_ref(), UNIT_BYTES, o.bytes_per_point).await
}

async fn array(o: &Options, parity: u32) -> Result<(f64, f64), String> {
    let members = (0..MEMBERS)
        .map(|i| timed(o.seed + 1 + i as u64).map(|d| d as Member))
        .collect::<Result<Vec<_>, _>>()?;
    let vol = crate::paper::raizn_array_with_parity(members, UNIT_BYTES, parity, o.seed).await?;
    let data_units = (MEMBERS - parity as usize) as u64;
    write_read(
        &vol,
        UNIT_BYTES * data_units,
        o.bytes_per_point * data_units,
    )
    .await
}

/// The rows: array write over (data units) x the device's, array read over 5x the device's
/// (percent), with one parity unit per stripe and then with two.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    let (dw, dr) = rt.block_on(single(o))?;
    let mut rows = Vec::new();
    for parity in [1u32, 2] {
        let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
        let (aw, ar) = rt.block_on(array(o, parity))?;
        let d = MEMBERS - parity as usize;
        let m = match parity {
            1 => String::new(),
            _ => format!(" (m = {parity}, Reed-Solomon)"),
        };
        rows.push(Row::new(
            format!("raizn-seq write, 5 members{m} / ({d} x one device: {dw:.0} MiB/s), {JOBS} jobs (%)"),
            100.0,
            aw / (d as f64 * dw) * 100.0,
        ));
        rows.push(Row::new(
            format!("raizn-seq read, 5 members{m} / (5 x one device: {dr:.0} MiB/s), {JOBS} jobs x QD64 (%)"),
            100.0,
            ar / (5.0 * dr) * 100.0,
        ));
    }
    Ok(rows)
}
