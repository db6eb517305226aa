//! Checklist items 1-12: zone states under writes, write pointer rules, Read Only and
//! Offline zones, and what reads return.

use super::check::{Ck, KitResult};
use super::geometries::{
    cross_read_geometry, full_capacity_geometry, kit_geometry, unlimited_geometry,
};
use super::pattern::pattern;
use super::DeviceFactory;
use crate::device::ZonedDevice;
use crate::status::NvmeStatus as E;
use crate::types::{CopyRange, ZoneAction as A, ZoneState as S};

pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult {
    match item {
        1 => fresh_zone_is_empty(f).await,
        2 => write_away_from_wp_fails(f).await,
        3 => write_at_wp_implicitly_opens(f).await,
        4 => commands_advance_wp_exactly(f).await,
        5 => reaching_capacity_makes_full(f).await,
        6 => write_to_full_fails(f).await,
        7 => write_past_capacity_fails(f).await,
        8 => write_spanning_zones_fails(f).await,
        9 => read_only_zone(f).await,
        10 => offline_zone(f).await,
        11 => cross_zone_reads(f).await,
        _ => reads_above_wp_are_zeros(f).await,
    }
}

async fn fresh_zone_is_empty<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(1, g);
    let dev = f.create(&g).await;
    for (z, d) in ck.zones(&dev).await?.iter().enumerate() {
        ck.eq(&format!("state of fresh zone {z}"), d.state, S::Empty)?;
        ck.eq(
            &format!("start of zone {z}"),
            d.start,
            g.zone_start(z as u32),
        )?;
        ck.eq(&format!("write pointer of fresh zone {z}"), d.wp, d.start)?;
        ck.eq(
            &format!("capacity of zone {z}"),
            d.capacity,
            g.zone_capacity,
        )?;
        ck.ensure(d.capacity <= g.zone_size, || {
            format!("zone {z} capacity exceeds zone size")
        })?;
    }
    ck.write(&dev, 0, 8).await?;
    ck.eq(
        "capacity after a write",
        ck.zone(&dev, 0).await?.capacity,
        g.zone_capacity,
    )?;
    ck.fill(&dev, 0, g.zone_capacity).await?;
    let d = ck.zone(&dev, 0).await?;
    ck.eq("capacity once full", d.capacity, g.zone_capacity)?;
    ck.eq("state once written to capacity", d.state, S::Full)
}

async fn write_away_from_wp_fails<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(2, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(1);
    ck.write_err(&dev, zs + 1, 4, E::ZoneInvalidWrite).await?;
    ck.write_err(&dev, zs + 20, 1, E::ZoneInvalidWrite).await?;
    ck.expect_zone(&dev, 1, S::Empty, 0).await?;
    ck.expect_counts(&dev, 0, 0).await?;
    ck.write(&dev, zs, 8).await?;
    for lba in [zs, zs + 7, zs + 9, zs + 20] {
        ck.write_err(&dev, lba, 2, E::ZoneInvalidWrite).await?;
    }
    let r = dev.write_zeroes(zs + 9, 1, false).await;
    ck.err(
        "write zeroes one block past the write pointer",
        r,
        E::ZoneInvalidWrite,
    )?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 8).await?;
    ck.expect_pattern(&dev, zs, 8, 0).await?;
    ck.expect_zeros(&dev, zs + 8, 16).await
}

async fn write_at_wp_implicitly_opens<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(3, g);
    let dev = f.create(&g).await;
    ck.expect_counts(&dev, 0, 0).await?;
    ck.write(&dev, ck.zslba(2), 4).await?;
    ck.expect_zone(&dev, 2, S::ImplicitlyOpened, 4).await?;
    ck.expect_counts(&dev, 1, 1).await?;
    ck.write(&dev, ck.zslba(5), 1).await?;
    ck.expect_zone(&dev, 5, S::ImplicitlyOpened, 1).await?;
    ck.expect_counts(&dev, 2, 2).await?;
    // A second write to an open zone takes no further slot.
    ck.write(&dev, ck.zslba(2) + 4, 4).await?;
    ck.expect_counts(&dev, 2, 2).await
}

async fn commands_advance_wp_exactly<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&unlimited_geometry());
    let ck = Ck::new(4, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(0);
    ck.write(&dev, zs, 5).await?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 5).await?;
    let (data, meta) = pattern(&g, 1000, 3, 4);
    let at = ck.ok(
        "append of 3 blocks",
        dev.append(zs, &data, Some(&meta), false).await,
    )?;
    ck.eq("append landing LBA", at, zs + 5)?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 8).await?;
    ck.ok(
        "write zeroes of 4 blocks",
        dev.write_zeroes(zs + 8, 4, false).await,
    )?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 12).await?;
    let sources = [
        CopyRange { lba: zs, blocks: 2 },
        CopyRange {
            lba: zs + 5,
            blocks: 3,
        },
    ];
    ck.ok("copy of 5 blocks", dev.copy(&sources, zs + 12, false).await)?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 17).await?;
    ck.write(&dev, zs + 17, 1).await?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 18).await
}

async fn reaching_capacity_makes_full<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(5, g);
    let dev = f.create(&g).await;
    for z in 0..3 {
        ck.mgmt(&dev, A::Open, z).await?;
    }
    ck.expect_counts(&dev, 3, 3).await?;
    ck.fill(&dev, 0, g.zone_capacity).await?;
    ck.expect_zone(&dev, 0, S::Full, g.zone_capacity).await?;
    ck.expect_counts(&dev, 2, 2).await?;
    // Every open zone is explicitly opened, so this open succeeds only if zone 0 gave its
    // open slot back.
    ck.mgmt(&dev, A::Open, 3).await?;
    ck.mgmt_err(&dev, A::Open, 4, E::TooManyOpenZones).await?;
    ck.mgmt(&dev, A::Close, 3).await?;
    // Zones 1, 2 and 3 are active; a fourth fits only if zone 0 gave its active slot back.
    ck.mgmt(&dev, A::Open, 4).await?;
    ck.expect_counts(&dev, 3, 4).await?;
    ck.mgmt(&dev, A::Close, 4).await?;
    ck.mgmt_err(&dev, A::Open, 5, E::TooManyActiveZones).await?;
    ck.expect_pattern(&dev, ck.zslba(0), g.zone_capacity, 0)
        .await
}

async fn write_to_full_fails<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(6, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(0);
    ck.fill(&dev, 0, g.zone_capacity).await?;
    for lba in [zs + g.zone_capacity, zs, zs + 10] {
        ck.write_err(&dev, lba, 1, E::ZoneIsFull).await?;
    }
    let (data, meta) = pattern(&g, zs, 1, 0);
    ck.err(
        "append to a full zone",
        dev.append(zs, &data, Some(&meta), false).await,
        E::ZoneIsFull,
    )?;
    let r = dev.write_zeroes(zs + g.zone_capacity, 1, false).await;
    ck.err("write zeroes to a full zone", r, E::ZoneIsFull)?;
    ck.expect_zone(&dev, 0, S::Full, g.zone_capacity).await?;
    ck.mgmt(&dev, A::Finish, 1).await?;
    ck.write_err(&dev, ck.zslba(1), 1, E::ZoneIsFull).await?;
    ck.expect_zone(&dev, 1, S::Full, g.zone_capacity).await
}

async fn write_past_capacity_fails<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(7, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(0);
    let cap = g.zone_capacity;
    ck.fill(&dev, 0, cap - 4).await?;
    ck.write_err(&dev, zs + cap - 4, 8, E::ZoneBoundaryError)
        .await?;
    ck.write_err(&dev, zs + cap - 4, 5, E::ZoneBoundaryError)
        .await?;
    let r = dev.write_zeroes(zs + cap - 4, 5, false).await;
    ck.err("write zeroes past capacity", r, E::ZoneBoundaryError)?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, cap - 4)
        .await?;
    // Nothing of the failed writes may have landed.
    ck.expect_zeros(&dev, zs + cap - 4, 4).await?;
    ck.write(&dev, zs + cap - 4, 4).await?;
    ck.expect_zone(&dev, 0, S::Full, cap).await?;
    ck.write(&dev, ck.zslba(1), 32).await?;
    ck.write_err(&dev, ck.zslba(1) + 32, cap - 31, E::ZoneBoundaryError)
        .await?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 32).await
}

async fn write_spanning_zones_fails<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&full_capacity_geometry());
    let ck = Ck::new(8, g);
    let dev = f.create(&g).await;
    ck.fill(&dev, 0, g.zone_size - 4).await?;
    ck.write_err(&dev, ck.zslba(1) - 4, 8, E::ZoneBoundaryError)
        .await?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, g.zone_size - 4)
        .await?;
    ck.expect_zone(&dev, 1, S::Empty, 0).await?;
    ck.expect_zeros(&dev, ck.zslba(1), 4).await?;
    // With capacity below zone size, a write that would run from one zone into the next.
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(8, g);
    let dev = f.create(&g).await;
    ck.fill(&dev, 2, 40).await?;
    ck.write_err(&dev, ck.zslba(2) + 40, 32, E::ZoneBoundaryError)
        .await?;
    ck.expect_zone(&dev, 2, S::ImplicitlyOpened, 40).await?;
    ck.expect_zone(&dev, 3, S::Empty, 0).await
}

async fn read_only_zone<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(9, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(2);
    ck.write(&dev, zs, 8).await?;
    ck.expect_counts(&dev, 1, 1).await?;
    f.set_zone_state(&dev, 2, S::ReadOnly).await;
    ck.expect_zone(&dev, 2, S::ReadOnly, 8).await?;
    ck.expect_counts(&dev, 0, 0).await?;
    ck.write_err(&dev, zs + 8, 1, E::ZoneIsReadOnly).await?;
    ck.write_err(&dev, zs, 1, E::ZoneIsReadOnly).await?;
    let (data, meta) = pattern(&g, zs, 1, 0);
    let r = dev.append(zs, &data, Some(&meta), false).await;
    ck.err("append to a read only zone", r, E::ZoneIsReadOnly)?;
    let r = dev.write_zeroes(zs + 8, 1, false).await;
    ck.err("write zeroes to a read only zone", r, E::ZoneIsReadOnly)?;
    ck.write(&dev, ck.zslba(3), 2).await?;
    let r = dev
        .copy(
            &[CopyRange {
                lba: ck.zslba(3),
                blocks: 2,
            }],
            zs + 8,
            false,
        )
        .await;
    ck.err("copy into a read only zone", r, E::ZoneIsReadOnly)?;
    ck.expect_pattern(&dev, zs, 8, 0).await?;
    ck.expect_zeros(&dev, zs + 8, 8).await?;
    // A read only zone is a valid copy source.
    let r = dev
        .copy(&[CopyRange { lba: zs, blocks: 4 }], ck.zslba(3) + 2, false)
        .await;
    ck.ok("copy out of a read only zone", r)?;
    let (data, meta) = pattern(&g, zs, 4, 0);
    ck.expect_content(&dev, ck.zslba(3) + 2, &data, &meta)
        .await?;
    ck.expect_zone(&dev, 2, S::ReadOnly, 8).await
}

async fn offline_zone<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(10, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(3);
    ck.write(&dev, zs, 8).await?;
    f.set_zone_state(&dev, 3, S::Offline).await;
    ck.expect_zone(&dev, 3, S::Offline, g.zone_size).await?;
    ck.expect_counts(&dev, 0, 0).await?;
    expect_offline_io(&ck, &dev, 3, 6).await?;
    // The same through the host route: Read Only, then Zone Management Offline.
    ck.write(&dev, ck.zslba(4), 4).await?;
    f.set_zone_state(&dev, 4, S::ReadOnly).await;
    ck.mgmt(&dev, A::Offline, 4).await?;
    ck.expect_zone(&dev, 4, S::Offline, g.zone_size).await?;
    expect_offline_io(&ck, &dev, 4, 7).await
}

/// Every read and write touching offline `zone` fails with Zone Is Offline; `other` is an
/// empty zone used as the other end of copies.
async fn expect_offline_io<D: ZonedDevice>(ck: &Ck, dev: &D, zone: u32, other: u32) -> KitResult {
    let g = ck.geo;
    let zs = ck.zslba(zone);
    let mut buf = vec![0u8; g.block_size as usize];
    for lba in [zs, zs + 20, zs + g.zone_size - 1] {
        let r = dev.read(lba, &mut buf, None).await;
        ck.err(&format!("read of offline LBA {lba}"), r, E::ZoneIsOffline)?;
    }
    for lba in [zs, zs + 8] {
        ck.write_err(dev, lba, 1, E::ZoneIsOffline).await?;
    }
    let (data, meta) = pattern(&g, zs, 1, 0);
    ck.err(
        "append to an offline zone",
        dev.append(zs, &data, Some(&meta), false).await,
        E::ZoneIsOffline,
    )?;
    ck.err(
        "write zeroes to an offline zone",
        dev.write_zeroes(zs, 1, false).await,
        E::ZoneIsOffline,
    )?;
    let src = [CopyRange { lba: zs, blocks: 1 }];
    let other = ck.zslba(other);
    ck.err(
        "copy out of an offline zone",
        dev.copy(&src, other, false).await,
        E::ZoneIsOffline,
    )?;
    ck.write(dev, other, 1).await?;
    let src = [CopyRange {
        lba: other,
        blocks: 1,
    }];
    ck.err(
        "copy into an offline zone",
        dev.copy(&src, zs, false).await,
        E::ZoneIsOffline,
    )
}

async fn cross_zone_reads<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(11, g);
    let dev = f.create(&g).await;
    ck.write(&dev, ck.zslba(1), 4).await?;
    let mut buf = vec![0u8; 4 * g.block_size as usize];
    for lba in [ck.zslba(1) - 2, ck.zslba(1) - 1, ck.zslba(2) - 3] {
        let r = dev.read(lba, &mut buf, None).await;
        let what = format!("read of 4 blocks at {lba} across a zone boundary");
        // A real device may allow such reads in every geometry (a Linux block device does:
        // the block layer splits reads at zone boundaries); the item checks what it reports.
        if g.cross_zone_reads {
            ck.ok(&what, r)?;
        } else {
            ck.err(&what, r, E::ZoneBoundaryError)?;
        }
    }
    ck.expect_pattern(&dev, ck.zslba(1), 4, 0).await?;

    let g = f.geometry_for(&cross_read_geometry());
    let ck = Ck::new(11, g);
    let dev = f.create(&g).await;
    ck.write(&dev, ck.zslba(1), 4).await?;
    // Zone 0 is empty, so its last blocks are zeros, then zone 1's data follows.
    let (data, meta) = ck.read(&dev, ck.zslba(1) - 2, 6).await?;
    let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
    let (want, want_meta) = pattern(&g, ck.zslba(1), 4, 0);
    ck.ensure(data[..2 * bs].iter().all(|b| *b == 0), || {
        "zone 0 tail did not read as zeros".into()
    })?;
    ck.ensure(meta[..2 * oob].iter().all(|b| *b == 0), || {
        "zone 0 tail metadata not zeros".into()
    })?;
    ck.ensure(data[2 * bs..] == want[..], || {
        "zone 1 data differs in a cross-zone read".into()
    })?;
    ck.ensure(meta[2 * oob..] == want_meta[..], || {
        "zone 1 metadata differs in a cross-zone read".into()
    })?;
    f.set_zone_state(&dev, 2, S::Offline).await;
    let mut buf = vec![0u8; 2 * bs];
    let r = dev.read(ck.zslba(2) - 1, &mut buf, None).await;
    ck.err("cross-zone read into an offline zone", r, E::ZoneIsOffline)
}

async fn reads_above_wp_are_zeros<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(12, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(0);
    ck.write(&dev, zs, 10).await?;
    ck.expect_pattern(&dev, zs, 10, 0).await?;
    ck.expect_zeros(&dev, zs + 10, g.zone_size - 10).await?;
    ck.expect_zeros(&dev, ck.zslba(5), g.zone_size).await?;
    ck.mgmt(&dev, A::Finish, 0).await?;
    ck.expect_pattern(&dev, zs, 10, 0).await?;
    ck.expect_zeros(&dev, zs + 10, g.zone_size - 10).await?;
    ck.fill(&dev, 1, g.zone_capacity).await?;
    ck.expect_pattern(&dev, ck.zslba(1), g.zone_capacity, 0)
        .await?;
    ck.expect_zeros(
        &dev,
        ck.zslba(1) + g.zone_capacity,
        g.zone_size - g.zone_capacity,
    )
    .await
}
