//! Checklist items 35, 36, 38 and 39: Report Zones, zone descriptor fields, Identify, and
//! namespace range checks.

use super::check::{Ck, KitResult};
use super::geometries::{
    cross_read_geometry, kit_geometry, open_limit_geometry, reference_geometry, unlimited_geometry,
};
use super::pattern::pattern;
use super::{DeviceFactory, KitFailure};
use crate::device::ZonedDevice;
use crate::status::NvmeStatus as E;
use crate::types::{CopyRange, Geometry, ReportFilter as RF, ZoneAction as A, ZoneState as S};

pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult {
    match item {
        35 => report_zones(f).await,
        36 => descriptor_fields(f).await,
        38 => identify(f).await,
        _ => lba_out_of_range(f).await,
    }
}

/// (lba, filter, partial, max, expected zones, expected nr_zones).
type ReportCase = (u64, RF, bool, usize, &'static [u32], u64);

async fn report_zones<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&unlimited_geometry());
    let ck = Ck::new(35, g);
    let dev = f.create(&g).await;
    for z in [1, 3, 5] {
        ck.write(&dev, ck.zslba(z), 2).await?;
        ck.mgmt(&dev, A::Close, z).await?;
    }
    ck.write(&dev, ck.zslba(2), 2).await?;
    ck.mgmt(&dev, A::Finish, 4).await?;
    let closed = RF::State(S::Closed);
    let cases: [ReportCase; 12] = [
        (ck.zslba(2) + 5, RF::All, false, 100, &[2, 3, 4, 5, 6, 7], 6),
        (ck.zslba(2) + 5, RF::All, false, 2, &[2, 3], 6),
        (ck.zslba(2) + 5, RF::All, true, 2, &[2, 3], 2),
        (1, closed, false, 1, &[1], 3),
        (1, closed, true, 1, &[1], 1),
        (ck.zslba(2), closed, false, 8, &[3, 5], 2),
        (ck.zslba(5), RF::State(S::Full), false, 8, &[], 0),
        (ck.zslba(3), RF::State(S::Full), true, 8, &[4], 1),
        (ck.zslba(1), RF::State(S::Empty), false, 8, &[6, 7], 2),
        (
            ck.zslba(0),
            RF::State(S::ImplicitlyOpened),
            false,
            8,
            &[2],
            1,
        ),
        (ck.zslba(0), RF::All, false, 0, &[], 8),
        (g.total_blocks() - 1, RF::All, false, 8, &[7], 1),
    ];
    for (lba, filter, partial, max, zones, nr) in cases {
        let what =
            format!("report from LBA {lba}, filter {filter:?}, partial {partial}, max {max}");
        let report = ck.ok(&what, dev.report_zones(lba, filter, partial, max).await)?;
        let starts: Vec<u64> = report.zones.iter().map(|d| d.start).collect();
        let want: Vec<u64> = zones.iter().map(|z| ck.zslba(*z)).collect();
        ck.eq(&format!("{what}: zone starts"), starts, want)?;
        ck.eq(&format!("{what}: nr_zones"), report.nr_zones, nr)?;
        for d in &report.zones {
            ck.ensure(filter.matches(d.state), || {
                format!("{what}: {d:?} does not match the filter")
            })?;
        }
    }
    for lba in [g.total_blocks(), u64::MAX] {
        let r = dev.report_zones(lba, RF::All, false, 8).await;
        ck.err(&format!("report from LBA {lba}"), r, E::LbaOutOfRange)?;
    }
    Ok(())
}

async fn descriptor_fields<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&unlimited_geometry());
    let ck = Ck::new(36, g);
    let dev = f.create(&g).await;
    let (cap, size) = (g.zone_capacity, g.zone_size);
    ck.write(&dev, ck.zslba(0), 5).await?;
    ck.fill(&dev, 1, cap).await?;
    ck.write(&dev, ck.zslba(2), 3).await?;
    ck.mgmt(&dev, A::Finish, 2).await?;
    ck.write(&dev, ck.zslba(3), 7).await?;
    f.set_zone_state(&dev, 3, S::ReadOnly).await;
    f.set_zone_state(&dev, 4, S::Offline).await;
    ck.write(&dev, ck.zslba(5), 9).await?;
    ck.mgmt(&dev, A::Close, 5).await?;
    ck.mgmt(&dev, A::Open, 6).await?;
    let want = [
        (S::ImplicitlyOpened, 5),
        (S::Full, cap),
        (S::Full, cap),
        (S::ReadOnly, 7),
        (S::Offline, size),
        (S::Closed, 9),
        (S::ExplicitlyOpened, 0),
        (S::Empty, 0),
    ];
    ck.expect_all(&dev, &want).await?;
    for (z, d) in ck.zones(&dev).await?.iter().enumerate() {
        ck.eq(&format!("zone {z} start"), d.start, g.zone_start(z as u32))?;
        ck.eq(&format!("zone {z} capacity"), d.capacity, cap)?;
        // Only the host finished zones here, so Zone Finished by Controller stays clear.
        ck.eq(&format!("zone {z} attributes"), d.attributes, 0)?;
    }
    // The WP reflects every completed write, append and copy as soon as it completes.
    let zs = ck.zslba(0);
    ck.write(&dev, zs + 5, 1).await?;
    ck.eq("WP after a write", ck.zone(&dev, 0).await?.wp, zs + 6)?;
    let (data, meta) = pattern(&g, 0, 2, 36);
    ck.ok("append", dev.append(zs, &data, Some(&meta), false).await)?;
    ck.eq("WP after an append", ck.zone(&dev, 0).await?.wp, zs + 8)?;
    let r = dev
        .copy(&[CopyRange { lba: zs, blocks: 3 }], zs + 8, false)
        .await;
    ck.ok("copy", r)?;
    ck.eq("WP after a copy", ck.zone(&dev, 0).await?.wp, zs + 11)
}

async fn identify<F: DeviceFactory>(f: &F) -> KitResult {
    let variants = [
        kit_geometry(),
        open_limit_geometry(),
        cross_read_geometry(),
        reference_geometry(),
        Geometry {
            block_size: 512,
            oob_size: 8,
            zone_count: 5,
            zone_capacity: 33,
            ..kit_geometry()
        },
        Geometry {
            oob_size: 0,
            zone_count: 3,
            zone_size: 32,
            zone_capacity: 32,
            ..unlimited_geometry()
        },
        Geometry {
            block_size: 512,
            oob_size: 64,
            max_open: 2,
            max_active: 2,
            ..kit_geometry()
        },
    ];
    for g in variants {
        identify_one(f, g)
            .await
            .map_err(|e| KitFailure::new(38, format!("with geometry {g:?}: {}", e.message)))?;
    }
    Ok(())
}

async fn identify_one<F: DeviceFactory>(f: &F, g: Geometry) -> KitResult {
    let ck = Ck::new(38, g);
    let dev = f.create(&g).await;
    let got = dev.geometry();
    ck.eq("Identify geometry", got, g)?;
    // Behaviour agrees with what Identify says.
    for (z, d) in ck.zones(&dev).await?.iter().enumerate() {
        ck.eq(&format!("zone {z} start"), d.start, z as u64 * g.zone_size)?;
        ck.eq(&format!("zone {z} capacity"), d.capacity, g.zone_capacity)?;
    }
    let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
    let mut buf = vec![0u8; bs];
    let mut meta = vec![0u8; oob];
    ck.ok(
        "read of one block with metadata",
        dev.read(0, &mut buf, Some(&mut meta)).await,
    )?;
    let mut half = vec![0u8; bs / 2];
    ck.err(
        "read of half a block",
        dev.read(0, &mut half, None).await,
        E::InvalidField,
    )?;
    let mut long_meta = vec![0u8; oob + 1];
    let r = dev.read(0, &mut buf, Some(&mut long_meta)).await;
    ck.err("read with one byte too much metadata", r, E::InvalidField)?;
    if g.max_open > 0 {
        for z in 0..g.max_open {
            ck.mgmt(&dev, A::Open, z).await?;
        }
        // The active limit is checked first, so it answers when both are reached.
        let want = if g.max_active == g.max_open {
            E::TooManyActiveZones
        } else {
            E::TooManyOpenZones
        };
        ck.mgmt_err(&dev, A::Open, g.max_open, want).await?;
    }
    Ok(())
}

async fn lba_out_of_range<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(39, g);
    let dev = f.create(&g).await;
    let total = g.total_blocks();
    let bs = g.block_size as usize;
    let mut buf = vec![0u8; 2 * bs];
    for (lba, blocks) in [
        (total, 1usize),
        (total - 1, 2),
        (total + 100, 1),
        (u64::MAX, 1),
        (u64::MAX - 1, 2),
    ] {
        let r = dev.read(lba, &mut buf[..blocks * bs], None).await;
        ck.err(
            &format!("read of {blocks} blocks at {lba}"),
            r,
            E::LbaOutOfRange,
        )?;
        ck.write_err(&dev, lba, blocks as u64, E::LbaOutOfRange)
            .await?;
        let r = dev.write_zeroes(lba, blocks as u64, false).await;
        ck.err(
            &format!("write zeroes of {blocks} blocks at {lba}"),
            r,
            E::LbaOutOfRange,
        )?;
    }
    let (data, meta) = pattern(&g, 0, 1, 39);
    ck.err(
        "append beyond the namespace",
        dev.append(total, &data, Some(&meta), false).await,
        E::LbaOutOfRange,
    )?;
    let src = |lba| [CopyRange { lba, blocks: 1 }];
    ck.write(&dev, ck.zslba(7), 1).await?;
    ck.err(
        "copy from beyond",
        dev.copy(&src(total), ck.zslba(7) + 1, false).await,
        E::LbaOutOfRange,
    )?;
    ck.err(
        "copy to beyond",
        dev.copy(&src(ck.zslba(7)), total, false).await,
        E::LbaOutOfRange,
    )?;
    // The last block of the namespace is in range.
    ck.ok(
        "read of the last block",
        dev.read(total - 1, &mut buf[..bs], None).await,
    )?;
    ck.expect_zone(&dev, 7, S::ImplicitlyOpened, 1).await
}
