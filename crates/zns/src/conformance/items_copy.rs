//! Checklist items 33 and 34: Simple Copy and Write Zeroes, the two zoned writes whose data
//! does not come from the host.

use super::check::{Ck, KitResult};
use super::geometries::kit_geometry;
use super::pattern::pattern;
use super::DeviceFactory;
use crate::device::ZonedDevice;
use crate::status::NvmeStatus as E;
use crate::types::{CopyRange, Lba, ZoneState as S};

pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult {
    match item {
        33 => simple_copy(f).await,
        _ => write_zeroes_is_zoned(f).await,
    }
}

async fn write_zeroes_is_zoned<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(34, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(0);
    ck.write(&dev, zs, 4).await?;
    for lba in [zs, zs + 5] {
        let r = dev.write_zeroes(lba, 2, false).await;
        ck.err(
            &format!("write zeroes at {lba}, away from the WP"),
            r,
            E::ZoneInvalidWrite,
        )?;
    }
    ck.ok(
        "write zeroes at the WP",
        dev.write_zeroes(zs + 4, 6, false).await,
    )?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 10).await?;
    ck.write(&dev, zs + 10, 2).await?;
    ck.expect_pattern(&dev, zs, 4, 0).await?;
    ck.expect_zeros(&dev, zs + 4, 6).await?;
    ck.expect_pattern(&dev, zs + 10, 2, 0).await?;
    let z1 = ck.zslba(1);
    ck.ok(
        "write zeroes to an empty zone",
        dev.write_zeroes(z1, 3, false).await,
    )?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 3).await?;
    ck.expect_counts(&dev, 2, 2).await?;
    let mdts = u64::from(g.mdts_blocks);
    ck.err(
        "write zeroes of 0 blocks",
        dev.write_zeroes(z1 + 3, 0, false).await,
        E::InvalidField,
    )?;
    ck.err(
        "write zeroes over MDTS",
        dev.write_zeroes(z1 + 3, mdts + 1, false).await,
        E::InvalidField,
    )?;
    ck.ok(
        "write zeroes of MDTS",
        dev.write_zeroes(z1 + 3, mdts, false).await,
    )?;
    let left = g.zone_capacity - 3 - mdts;
    let r = dev.write_zeroes(z1 + 3 + mdts, left + 1, false).await;
    ck.err("write zeroes past capacity", r, E::ZoneBoundaryError)?;
    ck.ok(
        "write zeroes to capacity",
        dev.write_zeroes(z1 + 3 + mdts, left, true).await,
    )?;
    ck.expect_zone(&dev, 1, S::Full, g.zone_capacity).await?;
    ck.expect_zeros(&dev, z1, g.zone_size).await
}

/// Expected content of a copy: the sources' pattern data (zeros above `written_end`).
fn copy_expectation(ck: &Ck, sources: &[CopyRange], written_end: Lba) -> (Vec<u8>, Vec<u8>) {
    let (mut data, mut meta) = (Vec::new(), Vec::new());
    for r in sources {
        for lba in r.lba..r.lba + r.blocks {
            let (mut d, mut m) = pattern(&ck.geo, lba, 1, 0);
            if lba >= written_end {
                d.fill(0);
                m.fill(0);
            }
            data.extend(d);
            meta.extend(m);
        }
    }
    (data, meta)
}

async fn simple_copy<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(33, g);
    let dev = f.create(&g).await;
    let (z0, z1) = (ck.zslba(0), ck.zslba(1));
    ck.write(&dev, z0, 32).await?;
    ck.write(&dev, z0 + 32, 8).await?;
    let r = |lba: Lba, blocks: u64| CopyRange { lba, blocks };
    let sources = [r(z0, 4), r(z0 + 10, 6), r(z0 + 30, 2), r(z0 + 38, 4)];
    ck.ok("copy of four ranges", dev.copy(&sources, z1, false).await)?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 16).await?;
    let (data, meta) = copy_expectation(&ck, &sources, z0 + 40);
    ck.expect_content(&dev, z1, &data, &meta).await?;
    for dest in [z1, z1 + 17, z1 + 15] {
        let r = dev.copy(&[r(z0, 1)], dest, false).await;
        ck.err(
            &format!("copy to {dest}, away from the WP"),
            r,
            E::ZoneInvalidWrite,
        )?;
    }
    let (mr, mrb, mb) = (
        g.copy_max_ranges as usize,
        u64::from(g.copy_max_range_blocks),
        u64::from(g.copy_max_blocks),
    );
    let too_big: [(&str, Vec<CopyRange>); 5] = [
        ("no ranges", vec![]),
        ("one range too many", vec![r(z0, 1); mr + 1]),
        ("a range over the per-range limit", vec![r(z0, mrb + 1)]),
        (
            "ranges over the total limit",
            vec![r(z0, mrb); (mb / mrb) as usize + 1],
        ),
        ("a range of no blocks", vec![r(z0, 1), r(z0, 0)]),
    ];
    for (what, sources) in too_big {
        ck.err(
            what,
            dev.copy(&sources, z1 + 16, false).await,
            E::CommandSizeLimitExceeded,
        )?;
    }
    let total = g.total_blocks();
    f.set_zone_state(&dev, 7, S::Offline).await;
    let bad_sources = [
        (
            "source across a zone boundary",
            r(z1 - 2, 4),
            E::ZoneBoundaryError,
        ),
        (
            "source beyond the namespace",
            r(total - 1, 2),
            E::LbaOutOfRange,
        ),
        (
            "source in an offline zone",
            r(ck.zslba(7), 1),
            E::ZoneIsOffline,
        ),
    ];
    for (what, source, want) in bad_sources {
        ck.err(
            what,
            dev.copy(&[r(z0, 1), source], z1 + 16, false).await,
            want,
        )?;
    }
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 16).await?;
    // Within one zone; the range above zone 0's WP copies zeros.
    let sources = [r(z1, 2), r(z0 + 39, 3)];
    ck.ok(
        "copy within the destination zone",
        dev.copy(&sources, z1 + 16, true).await,
    )?;
    let (d0, m0) = copy_expectation(&ck, &[r(z0, 2)], z0 + 40);
    let (d1, m1) = copy_expectation(&ck, &[r(z0 + 39, 3)], z0 + 40);
    ck.expect_content(&dev, z1 + 16, &[d0, d1].concat(), &[m0, m1].concat())
        .await?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 21).await?;
    ck.fill(&dev, 1, 40).await?;
    ck.err(
        "copy past capacity",
        dev.copy(&[r(z0, 9)], z1 + 40, false).await,
        E::ZoneBoundaryError,
    )?;
    ck.fill(&dev, 2, g.zone_capacity).await?;
    let r2 = dev
        .copy(&[r(z0, 1)], ck.zslba(2) + g.zone_capacity, false)
        .await;
    ck.err("copy into a full zone", r2, E::ZoneIsFull)?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 40).await
}
