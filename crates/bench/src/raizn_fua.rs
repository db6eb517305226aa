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
    /// Bytes of memory the members hold for what was written, at the end (the test's).
    #[cfg_attr(not(test), allow(dead_code))]
    held_bytes: u64,
}

/// What the members keep of the data written to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    /// Every block's data, as any emulated member (the test's reference).
    #[cfg_attr(not(test), allow(dead_code))]
    All,
    /// Only the data of the array's metadata zones (superblock, partial-parity and other
    /// records, which the array reads back): the three bulk writers fill a zone of 1,077 MiB
    /// on each of the five members, 16 GiB a point, that nothing reads. The timing model does
    /// not look at the data, so the figures are the same (`dropping_the_data_zones_..`
    /// below), and a read of a data zone fails rather than return what was never kept.
    MetadataZones,
}

/// A member of the array: a timed zn540 of geometry `g`, keeping what `keep` says.
fn member(g: zns::Geometry, seed: u64, keep: Keep) -> Result<emu::EmuDevice, String> {
    match keep {
        Keep::All => crate::paper::timed_zn540(g, seed),
        // The array's metadata zones: `log_zones` 1 (`paper::raizn_array`), so M = 3.
        Keep::MetadataZones => {
            crate::paper::timed_zn540_keeping_data_of(g, seed, raizn::layout::MIN_META_ZONES)
        }
    }
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
    keep: Keep,
) -> Result<Point, String> {
    let mut g = emu::profile("zn540").ok_or("the zn540 geometry is missing")?;
    g.zone_count = 40;
    let devices = (0..MEMBERS)
        .map(|i| member(g, o.seed + 1 + i as u64, keep).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let members = devices.iter().map(|d| d.clone() as Member).collect();
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
        held_bytes: devices.iter().map(|d| d.footprint_bytes()).sum(),
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
            p.push(rt.block_on(one(
                o,
                zones,
                background,
                writes,
                every,
                Keep::MetadataZones,
            ))?);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One point with members that keep every block's data and with members that keep only
    /// the metadata zones' gives the same figures to the last digit, beside a bulk writer and
    /// with the persistence state (a small run: 8 FUA writes), holding far less memory.
    #[test]
    fn dropping_the_data_zones_data_changes_no_figure() {
        let o = Options {
            bytes_per_point: 8 << 20,
            seed: 3,
            profile: None,
            host_copy_ns: None,
        };
        let run = |keep| {
            let rt = SimRuntime::new().expect("runtime");
            let p = rt.block_on(one(&o, 1, 1, 8, false, keep)).expect("point");
            (
                (p.iops, p.flushes_per_write, p.background_mib),
                p.held_bytes,
            )
        };
        let (all, all_bytes) = run(Keep::All);
        assert!(all.0 > 0.0 && all.2 > 0.0, "{all:?}");
        let (metadata, metadata_bytes) = run(Keep::MetadataZones);
        assert_eq!(metadata, all);
        assert!(
            metadata_bytes * 2 < all_bytes,
            "{metadata_bytes} bytes held with the data zones' data dropped, {all_bytes} without"
        );
    }
}
