//! FUA writes on RAIZN with and without the persistence state (docs/DESIGN.md, "Durability
//! contract"; the paper's persistence bitmap, Fig. 6): 4 KiB FUA writes at queue depth 1 on
//! one logical zone, and on four zones at once (one writer each), of a 5-member array of
//! timed zn540 members, in virtual time. Each point runs twice on a fresh array: flushing
//! every member after every FUA write (a volume's default, `set_flush_every_member(true)`),
//! and flushing only the members holding something of the write's zone not known durable.
//! The row is the second's IOPS over the first's, measured in the same run.

use std::sync::Arc;

use emu::SimRuntime;
use raizn::Member;
use zns::ZonedDevice;

use crate::paper::{Options, Row};

const MEMBERS: usize = 5;
const KIB: u64 = 1024;
/// The array's stripe unit: the default, 64 KiB.
const UNIT_BYTES: u64 = 64 * KIB;
const WRITE_BYTES: u64 = 4 * KIB;

/// What one point measured.
struct Point {
    /// FUA writes per second.
    iops: f64,
    /// Member flushes per FUA write.
    flushes_per_write: f64,
    /// The background writers' MiB/s (0 without them).
    background_mib: f64,
}

/// Bytes of each background write: two stripe units, so writes without FUA keep the
/// members busy the way a bulk writer does.
const BACKGROUND_BYTES: u64 = 128 * KIB;

/// `writes` 4 KiB FUA writes, one after another on each of `zones` zones (all zones at
/// once), on a fresh array, with `background` more zones taking 128 KiB writes without FUA
/// meanwhile (one writer each, until the FUA writers are done); `every`: flush every member
/// after each FUA write.
async fn one(
    o: &Options,
    zones: u32,
    background: u32,
    writes: u64,
    every: bool,
) -> Result<Point, String> {
    let mut g = emu::profile("zn540").ok_or("the zn540 geometry is missing")?;
    g.zone_count = 40;
    let members = (0..MEMBERS)
        .map(|i| crate::paper::timed_zn540(g, o.seed + 1 + i as u64).map(|d| Arc::new(d) as Member))
        .collect::<Result<Vec<_>, _>>()?;
    let vol = crate::paper::raizn_array(members, UNIT_BYTES, o.seed).await?;
    vol.set_flush_every_member(every);
    vol.flush().await.map_err(|e| format!("flush: {e}"))?;
    let before = vol.persist_stats();
    let lg = vol.geometry();
    let per_zone = writes / u64::from(zones);
    let data = vec![0x5au8; WRITE_BYTES as usize];
    let bulk = vec![0xa5u8; BACKGROUND_BYTES as usize];
    let bs = u64::from(lg.block_size);
    let done = std::sync::atomic::AtomicBool::new(false);
    let bulk_bytes = std::sync::atomic::AtomicU64::new(0);
    let start = tokio::time::Instant::now();
    let fua_writers = (0..zones).map(|z| {
        let (vol, data) = (&vol, &data);
        async move {
            let zslba = lg.zone_start(z);
            for k in 0..per_zone {
                vol.write(zslba + k * (WRITE_BYTES / bs), data, None, true)
                    .await?;
            }
            Ok::<(), zns::NvmeStatus>(())
        }
    });
    let bulk_writers = (zones..zones + background).map(|z| {
        let (vol, bulk, done, bulk_bytes) = (&vol, &bulk, &done, &bulk_bytes);
        async move {
            let zslba = lg.zone_start(z);
            let mut at = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed)
                && at + BACKGROUND_BYTES / bs <= lg.zone_capacity
            {
                vol.write(zslba + at, bulk, None, false).await?;
                at += BACKGROUND_BYTES / bs;
                bulk_bytes.fetch_add(BACKGROUND_BYTES, std::sync::atomic::Ordering::Relaxed);
            }
            Ok::<(), zns::NvmeStatus>(())
        }
    });
    let fua = async {
        let r = futures::future::join_all(fua_writers).await;
        let secs = start.elapsed().as_secs_f64();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (r, secs)
    };
    let ((fua_results, secs), bulk_results) =
        futures::join!(fua, futures::future::join_all(bulk_writers));
    for r in fua_results.into_iter().chain(bulk_results) {
        r.map_err(|e| format!("write: {e}"))?;
    }
    let n = per_zone * u64::from(zones);
    let s = vol.persist_stats();
    let secs = secs.max(1e-9);
    Ok(Point {
        iops: n as f64 / secs,
        flushes_per_write: (s.fua_flushes - before.fua_flushes) as f64 / n as f64,
        background_mib: bulk_bytes.load(std::sync::atomic::Ordering::Relaxed) as f64
            / (1024.0 * 1024.0)
            / secs,
    })
}

/// The rows: FUA IOPS with the persistence state over flushing every member, on one zone
/// alone, four zones, and one zone beside three bulk writers (then also their MiB/s).
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    // 2,048 writes (8 MiB) per point at the default size of 1 GiB, at least 256.
    let writes = (o.bytes_per_point / (128 * WRITE_BYTES)).max(256);
    let mut rows = Vec::new();
    for (zones, background) in [(1u32, 0u32), (4, 0), (1, 3)] {
        let mut p = Vec::new();
        for every in [true, false] {
            let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
            p.push(rt.block_on(one(o, zones, background, writes, every))?);
        }
        let beside = match background {
            0 => String::new(),
            b => format!(" beside {b} zones of 128 KiB writes"),
        };
        rows.push(Row::new(
            format!(
                "raizn-fua 4 KiB FUA writes QD1, {zones} zone(s){beside}: persistence state / \
                 flush every member, FUA IOPS (x; {:.0} -> {:.0} IOPS, member flushes per write \
                 {:.2} -> {:.2})",
                p[0].iops, p[1].iops, p[0].flushes_per_write, p[1].flushes_per_write
            ),
            1.0,
            p[1].iops / p[0].iops,
        ));
        if background > 0 {
            rows.push(Row::new(
                format!(
                    "raizn-fua {background} zones of 128 KiB writes beside 4 KiB FUA writes on \
                     one: persistence state / flush every member, their MiB/s (x; {:.0} -> {:.0} \
                     MiB/s)",
                    p[0].background_mib, p[1].background_mib
                ),
                1.0,
                p[1].background_mib / p[0].background_mib,
            ));
        }
    }
    Ok(rows)
}
