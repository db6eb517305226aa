//! Checklist items 22-25 and 31: the open and active resource limits, for writes, appends,
//! write zeroes, copies and explicit opens.

use super::check::{Ck, KitResult};
use super::geometries::{kit_geometry, open_limit_geometry};
use super::pattern::pattern;
use super::DeviceFactory;
use crate::device::ZonedDevice;
use crate::status::{NvmeResult, NvmeStatus as E};
use crate::types::{CopyRange, Lba, ZoneAction as A, ZoneState as S};

pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult {
    match item {
        22 => active_limit_refuses(f).await,
        23 => open_limit_closes_oldest_implicit(f).await,
        24 => open_limit_all_explicit_fails(f).await,
        25 => closed_zone_needs_only_open_slot(f).await,
        _ => append_opens_under_limits(f).await,
    }
}

/// An append of one pattern block to the zone starting at `zslba`.
async fn append1<D: ZonedDevice>(ck: &Ck, dev: &D, zslba: Lba) -> NvmeResult<Lba> {
    let (data, meta) = pattern(&ck.geo, zslba, 1, 7);
    dev.append(zslba, &data, Some(&meta), false).await
}

/// Every way of writing to an Empty or Closed `zone` must fail with `want` and change no zone.
async fn every_write_refused<D: ZonedDevice>(
    ck: &Ck,
    dev: &D,
    zone: u32,
    src: u32,
    want: E,
) -> KitResult {
    let before = ck.zones(dev).await?;
    let wp = before[zone as usize].wp;
    ck.write_err(dev, wp, 1, want).await?;
    ck.err(
        "explicit open",
        dev.zone_mgmt(A::Open, ck.zslba(zone), false).await,
        want,
    )?;
    ck.err("append", append1(ck, dev, ck.zslba(zone)).await, want)?;
    ck.err("write zeroes", dev.write_zeroes(wp, 1, false).await, want)?;
    let r = dev
        .copy(
            &[CopyRange {
                lba: ck.zslba(src),
                blocks: 1,
            }],
            wp,
            false,
        )
        .await;
    ck.err("copy", r, want)?;
    let after = ck.zones(dev).await?;
    ck.ensure(before == after, || {
        format!("a refused command changed zones: {before:?} -> {after:?}")
    })
}

async fn active_limit_refuses<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(22, g);
    let dev = f.create(&g).await;
    ck.write(&dev, ck.zslba(0), 4).await?;
    ck.mgmt(&dev, A::Close, 0).await?;
    for z in 1..4 {
        ck.write(&dev, ck.zslba(z), 4).await?;
    }
    ck.expect_counts(&dev, 3, 4).await?;
    // Both limits are reached and implicitly opened zones exist: the active limit must be
    // checked first, so nothing is implicitly closed.
    every_write_refused(&ck, &dev, 4, 1, E::TooManyActiveZones).await?;
    ck.expect_all(
        &dev,
        &[
            (S::Closed, 4),
            (S::ImplicitlyOpened, 4),
            (S::ImplicitlyOpened, 4),
            (S::ImplicitlyOpened, 4),
            (S::Empty, 0),
            (S::Empty, 0),
            (S::Empty, 0),
            (S::Empty, 0),
        ],
    )
    .await
}

async fn open_limit_closes_oldest_implicit<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&open_limit_geometry());
    let ck = Ck::new(23, g);
    let dev = f.create(&g).await;
    let (io, eo, cl, em) = (
        S::ImplicitlyOpened,
        S::ExplicitlyOpened,
        S::Closed,
        S::Empty,
    );
    for z in 0..3 {
        ck.write(&dev, ck.zslba(z), 4).await?;
    }
    // Zone 0 became implicitly opened first, so it is the one closed; it keeps its WP.
    ck.write(&dev, ck.zslba(3), 4).await?;
    let mut want = vec![
        (cl, 4),
        (io, 4),
        (io, 4),
        (io, 4),
        (em, 0),
        (em, 0),
        (em, 0),
        (em, 0),
    ];
    ck.expect_all(&dev, &want).await?;
    // An explicit open that needs a slot closes the next oldest.
    ck.mgmt(&dev, A::Open, 4).await?;
    want[1] = (cl, 4);
    want[4] = (eo, 0);
    ck.expect_all(&dev, &want).await?;
    // A Closed zone written again needs a slot too.
    ck.write(&dev, ck.zslba(0) + 4, 2).await?;
    want[0] = (io, 6);
    want[2] = (cl, 4);
    ck.expect_all(&dev, &want).await?;
    // Explicitly opened zones are never chosen, however old.
    ck.mgmt(&dev, A::Open, 1).await?;
    want[1] = (eo, 4);
    want[3] = (cl, 4);
    ck.expect_all(&dev, &want).await?;
    ck.write(&dev, ck.zslba(5), 1).await?;
    want[0] = (cl, 6);
    want[5] = (io, 1);
    ck.expect_all(&dev, &want).await?;
    for z in 0..4 {
        let wp = if z == 0 { 6 } else { 4 };
        ck.expect_pattern(&dev, ck.zslba(z), wp, 0).await?;
    }
    Ok(())
}

async fn open_limit_all_explicit_fails<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&open_limit_geometry());
    let ck = Ck::new(24, g);
    let dev = f.create(&g).await;
    ck.write(&dev, ck.zslba(6), 2).await?;
    ck.mgmt(&dev, A::Close, 6).await?;
    for z in 0..3 {
        ck.mgmt(&dev, A::Open, z).await?;
    }
    ck.write(&dev, ck.zslba(0), 2).await?;
    every_write_refused(&ck, &dev, 3, 6, E::TooManyOpenZones).await?;
    // A Closed zone needs an open slot as well.
    ck.mgmt(&dev, A::Close, 0).await?;
    ck.mgmt(&dev, A::Open, 3).await?;
    every_write_refused(&ck, &dev, 0, 6, E::TooManyOpenZones).await?;
    ck.expect_counts(&dev, 3, 5).await
}

async fn closed_zone_needs_only_open_slot<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(25, g);
    let dev = f.create(&g).await;
    for z in 0..3 {
        ck.write(&dev, ck.zslba(z), 4).await?;
        ck.mgmt(&dev, A::Close, z).await?;
    }
    ck.write(&dev, ck.zslba(3), 4).await?;
    ck.expect_counts(&dev, 1, 4).await?;
    // At the active limit, a Closed zone can still be written: it is already active.
    ck.write(&dev, ck.zslba(0) + 4, 4).await?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 8).await?;
    ck.expect_counts(&dev, 2, 4).await?;
    ck.mgmt(&dev, A::Open, 1).await?;
    ck.expect_counts(&dev, 3, 4).await?;
    let (data, meta) = pattern(&g, 99, 2, 3);
    let at = ck.ok(
        "append to a closed zone",
        dev.append(ck.zslba(2), &data, Some(&meta), false).await,
    )?;
    ck.eq("append landing LBA", at, ck.zslba(2) + 4)?;
    // The append took the slot of zone 3, the implicitly opened zone opened longest ago.
    ck.expect_zone(&dev, 3, S::Closed, 4).await?;
    ck.expect_counts(&dev, 3, 4).await
}

async fn append_opens_under_limits<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(31, g);
    let dev = f.create(&g).await;
    let at = ck.ok(
        "append to an empty zone",
        append1(&ck, &dev, ck.zslba(0)).await,
    )?;
    ck.eq("append landing LBA", at, ck.zslba(0))?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 1).await?;
    ck.expect_counts(&dev, 1, 1).await?;
    ck.mgmt(&dev, A::Close, 0).await?;
    for z in 1..4 {
        ck.ok("append", append1(&ck, &dev, ck.zslba(z)).await)?;
    }
    ck.expect_counts(&dev, 3, 4).await?;
    let before = ck.zones(&dev).await?;
    ck.err(
        "append at the active limit",
        append1(&ck, &dev, ck.zslba(4)).await,
        E::TooManyActiveZones,
    )?;
    ck.eq(
        "zones after a refused append",
        ck.zones(&dev).await?,
        before,
    )?;

    let g = f.geometry_for(&open_limit_geometry());
    let ck = Ck::new(31, g);
    let dev = f.create(&g).await;
    for z in 0..4 {
        ck.ok("append", append1(&ck, &dev, ck.zslba(z)).await)?;
    }
    ck.expect_zone(&dev, 0, S::Closed, 1).await?;
    ck.expect_counts(&dev, 3, 4).await?;
    for z in 1..4 {
        ck.mgmt(&dev, A::Open, z).await?;
    }
    ck.err(
        "append at the open limit",
        append1(&ck, &dev, ck.zslba(4)).await,
        E::TooManyOpenZones,
    )?;
    ck.err(
        "append to a closed zone",
        append1(&ck, &dev, ck.zslba(0)).await,
        E::TooManyOpenZones,
    )?;
    ck.expect_zone(&dev, 4, S::Empty, 0).await?;
    ck.expect_zone(&dev, 0, S::Closed, 1).await
}
