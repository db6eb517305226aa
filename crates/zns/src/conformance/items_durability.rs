//! Checklist items 37, 40, 41 and 42: clean restart, flush and FUA durability, power loss,
//! and per-block metadata.
//!
//! Fault model: power loss with the volatile write cache on, injected through the factory;
//! the device may lose any block above a zone's last durable point, but only as a suffix.

use super::check::{Ck, KitResult};
use super::geometries::{kit_geometry, unlimited_geometry};
use super::pattern::pattern;
use super::power::power_loss_prefix;
use super::{DeviceFactory, KitFailure};
use crate::device::ZonedDevice;
use crate::status::NvmeStatus as E;
use crate::types::{Geometry, ZoneAction as A, ZoneState as S};

pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult {
    match item {
        37 => clean_restart(f).await,
        40 => flush_and_fua_are_durable(f).await,
        41 => power_loss_keeps_prefix(f).await,
        _ => metadata_round_trips(f).await,
    }
}

async fn clean_restart<F: DeviceFactory>(f: &F) -> KitResult {
    let g = Geometry {
        zone_count: 10,
        ..unlimited_geometry()
    };
    let ck = Ck::new(37, g);
    let dev = f.create(&g).await;
    let (cap, size) = (g.zone_capacity, g.zone_size);
    ck.write(&dev, ck.zslba(1), 5).await?;
    ck.mgmt(&dev, A::Open, 2).await?;
    ck.write(&dev, ck.zslba(2), 3).await?;
    ck.mgmt(&dev, A::Open, 3).await?;
    ck.write(&dev, ck.zslba(4), 6).await?;
    ck.mgmt(&dev, A::Close, 4).await?;
    ck.mgmt(&dev, A::Open, 5).await?;
    ck.mgmt(&dev, A::Close, 5).await?;
    ck.fill(&dev, 6, cap).await?;
    ck.write(&dev, ck.zslba(7), 2).await?;
    f.set_zone_state(&dev, 7, S::ReadOnly).await;
    f.set_zone_state(&dev, 8, S::Offline).await;
    let (data, meta) = pattern(&g, 777, 4, 37);
    ck.ok(
        "append",
        dev.append(ck.zslba(9), &data, Some(&meta), false).await,
    )?;
    let dev = f.restart(dev).await;
    let want = [
        (S::Empty, 0),
        (S::Closed, 5),
        (S::Closed, 3),
        (S::Empty, 0),
        (S::Closed, 6),
        (S::Closed, 0),
        (S::Full, cap),
        (S::ReadOnly, 2),
        (S::Offline, size),
        (S::Closed, 4),
    ];
    ck.expect_all(&dev, &want).await?;
    for (z, blocks) in [(1, 5), (2, 3), (4, 6), (6, cap), (7, 2)] {
        ck.expect_pattern(&dev, ck.zslba(z), blocks, 0).await?;
        ck.expect_zeros(&dev, ck.zslba(z) + blocks, size - blocks)
            .await?;
    }
    ck.expect_content(&dev, ck.zslba(9), &data, &meta).await?;
    ck.write(&dev, ck.zslba(1) + 5, 1).await?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 6).await?;
    restart_recounts_resources(f).await
}

/// After a restart the open count is zero and Closed zones still hold active slots.
async fn restart_recounts_resources<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(37, g);
    let dev = f.create(&g).await;
    for z in 0..3 {
        ck.mgmt(&dev, A::Open, z).await?;
    }
    ck.write(&dev, ck.zslba(0), 4).await?;
    ck.write(&dev, ck.zslba(1), 2).await?;
    let dev = f.restart(dev).await;
    ck.expect_zone(&dev, 0, S::Closed, 4).await?;
    ck.expect_zone(&dev, 1, S::Closed, 2).await?;
    ck.expect_zone(&dev, 2, S::Empty, 0).await?;
    ck.expect_counts(&dev, 0, 2).await?;
    ck.mgmt(&dev, A::Open, 3).await?;
    ck.mgmt(&dev, A::Open, 4).await?;
    ck.mgmt_err(&dev, A::Open, 5, E::TooManyActiveZones).await?;
    ck.write(&dev, ck.zslba(0) + 4, 1).await?;
    ck.expect_counts(&dev, 3, 4).await
}

/// After a power cycle `zone` must hold the salt-0 pattern up to a WP within
/// [`lo`, `hi`] blocks of its start, zeros above, and be Closed (Empty if nothing is left).
/// Returns the WP offset.
async fn expect_prefix<D: ZonedDevice>(
    ck: &Ck,
    dev: &D,
    zone: u32,
    lo: u64,
    hi: u64,
) -> KitResult<u64> {
    let d = ck.zone(dev, zone).await?;
    let wp = d.wp - d.start;
    ck.ensure(lo <= wp && wp <= hi, || {
        format!("zone {zone} write pointer offset {wp} after power loss is outside [{lo}, {hi}]")
    })?;
    let state = if wp == 0 { S::Empty } else { S::Closed };
    ck.eq(
        &format!("state of zone {zone} after power loss"),
        d.state,
        state,
    )?;
    ck.expect_pattern(dev, d.start, wp, 0).await?;
    ck.expect_zeros(dev, d.start + wp, ck.geo.zone_size - wp)
        .await?;
    Ok(wp)
}

async fn flush_and_fua_are_durable<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&unlimited_geometry());
    let ck = Ck::new(40, g);
    for seed in 40..45u64 {
        let dev = f.create(&g).await;
        let w = |z: u32, off: u64, n: u64, fua: bool| {
            let dev = &dev;
            async move { ck.write_salted(dev, ck.zslba(z) + off, n, 0, fua).await }
        };
        w(0, 0, 16, false).await?;
        ck.ok("flush", dev.flush().await)?;
        w(0, 16, 8, false).await?;
        w(1, 0, 8, false).await?;
        w(1, 8, 8, true).await?;
        w(2, 0, 8, true).await?;
        w(2, 8, 8, false).await?;
        w(3, 0, 4, false).await?;
        w(4, 0, 8, false).await?;
        ck.ok("flush", dev.flush().await)?;
        w(4, 8, 4, true).await?;
        w(4, 12, 4, false).await?;
        let dev = f.power_cycle(dev, seed).await;
        let mut wps = Vec::new();
        for (z, lo, hi) in [(0, 16, 24), (1, 16, 16), (2, 8, 16), (3, 0, 4), (4, 12, 16)] {
            wps.push(expect_prefix(&ck, &dev, z, lo, hi).await?);
        }
        // What survived a power loss is durable; a flush makes new writes durable.
        ck.write_salted(&dev, ck.zslba(5), 8, 0, false).await?;
        ck.ok("flush", dev.flush().await)?;
        ck.write_salted(&dev, ck.zslba(6), 8, 0, true).await?;
        let dev = f.power_cycle(dev, seed ^ 0xFFFF).await;
        for (z, wp) in wps.iter().enumerate() {
            expect_prefix(&ck, &dev, z as u32, *wp, *wp).await?;
        }
        expect_prefix(&ck, &dev, 5, 8, 8).await?;
        expect_prefix(&ck, &dev, 6, 8, 8).await?;
    }
    Ok(())
}

async fn power_loss_keeps_prefix<F: DeviceFactory>(f: &F) -> KitResult {
    for seed in [41u64, 4141, 414141] {
        power_loss_prefix(f, seed)
            .await
            .map_err(|e| KitFailure::new(41, e.message))?;
    }
    Ok(())
}

async fn metadata_round_trips<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(42, g);
    ck.ensure(g.oob_size > 0, || {
        "the device has no per-block metadata (metadata size 0)".into()
    })?;
    let dev = f.create(&g).await;
    let zs = ck.zslba(0);
    let oob = g.oob_size as usize;
    ck.write(&dev, zs, 8).await?;
    ck.expect_pattern(&dev, zs, 8, 0).await?;
    let (want, _) = pattern(&g, zs, 8, 0);
    let mut buf = vec![0u8; want.len()];
    ck.ok(
        "read without a metadata buffer",
        dev.read(zs, &mut buf, None).await,
    )?;
    ck.ensure(buf == want, || "data read without metadata differs".into())?;
    // A write without metadata stores zero metadata.
    let (data, _) = pattern(&g, zs + 8, 4, 0);
    ck.ok(
        "write without metadata",
        dev.write(zs + 8, &data, None, false).await,
    )?;
    let (_, meta) = ck.read(&dev, zs + 8, 4).await?;
    ck.ensure(meta.iter().all(|b| *b == 0), || {
        "metadata of a write without metadata is not zero".into()
    })?;
    let (data, meta) = pattern(&g, zs + 12, 8, 0);
    for len in [meta.len() - 1, meta.len() + oob] {
        let r = dev
            .write(zs + 12, &data, Some(&vec![1u8; len]), false)
            .await;
        ck.err(
            &format!("write with {len} metadata bytes for 8 blocks"),
            r,
            E::InvalidField,
        )?;
        let mut m = vec![0u8; len];
        let r = dev.read(zs, &mut buf, Some(&mut m)).await;
        ck.err(
            &format!("read with {len} metadata bytes for 8 blocks"),
            r,
            E::InvalidField,
        )?;
    }
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 12).await?;
    let (adata, ameta) = pattern(&g, 4242, 3, 42);
    let at = ck.ok(
        "append with metadata",
        dev.append(zs, &adata, Some(&ameta), false).await,
    )?;
    ck.expect_content(&dev, at, &adata, &ameta).await?;
    ck.mgmt(&dev, A::Reset, 0).await?;
    ck.expect_zeros(&dev, zs, 16).await?;
    ck.write_salted(&dev, zs, 8, 2, false).await?;
    ck.expect_pattern(&dev, zs, 8, 2).await?;
    ck.ok(
        "write with metadata",
        dev.write(zs + 8, &data, Some(&meta), false).await,
    )?;
    ck.expect_content(&dev, zs + 8, &data, &meta).await?;

    let g = Geometry {
        block_size: 512,
        oob_size: 64,
        ..kit_geometry()
    };
    let ck = Ck::new(42, g);
    let dev = f.create(&g).await;
    ck.write(&dev, ck.zslba(3), 5).await?;
    ck.expect_pattern(&dev, ck.zslba(3), 5, 0).await
}
