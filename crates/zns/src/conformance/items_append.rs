//! Checklist items 26-30 and 32: Zone Append and commands in flight together.

use futures::future::join_all;

use super::check::{Ck, KitResult};
use super::geometries::{kit_geometry, unlimited_geometry};
use super::pattern::pattern;
use super::DeviceFactory;
use crate::device::ZonedDevice;
use crate::status::NvmeStatus as E;
use crate::types::ZoneState as S;

pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult {
    match item {
        26 => append_needs_zone_start(f).await,
        27 => append_size_limit(f).await,
        28 => append_returns_landing_lba(f).await,
        29 => concurrent_appends(f).await,
        30 => append_never_split(f).await,
        _ => writes_in_flight(f).await,
    }
}

async fn append_needs_zone_start<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(26, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(1);
    ck.write(&dev, zs, 4).await?;
    let (data, meta) = pattern(&g, 0, 2, 26);
    for lba in [zs + 1, zs + 4, zs + g.zone_size - 1] {
        let r = dev.append(lba, &data, Some(&meta), false).await;
        ck.err(
            &format!("append at non zone start {lba}"),
            r,
            E::InvalidField,
        )?;
    }
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 4).await?;
    ck.expect_zone(&dev, 2, S::Empty, 0).await?;
    let at = ck.ok(
        "append at the zone start",
        dev.append(zs, &data, Some(&meta), false).await,
    )?;
    ck.eq("append landing LBA", at, zs + 4)
}

async fn append_size_limit<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(27, g);
    let dev = f.create(&g).await;
    let zasl = u64::from(g.zasl_blocks);
    let zs = ck.zslba(0);
    for blocks in [zasl + 1, u64::from(g.mdts_blocks)] {
        let (data, meta) = pattern(&g, 0, blocks, 27);
        let r = dev.append(zs, &data, Some(&meta), false).await;
        ck.err(
            &format!("append of {blocks} blocks (limit {zasl})"),
            r,
            E::InvalidField,
        )?;
    }
    ck.expect_zone(&dev, 0, S::Empty, 0).await?;
    let (data, meta) = pattern(&g, 0, zasl, 27);
    let at = ck.ok(
        "append at the size limit",
        dev.append(zs, &data, Some(&meta), false).await,
    )?;
    ck.eq("append landing LBA", at, zs)?;
    // The limit is the append's own: a plain write of the same size is fine.
    ck.write(&dev, zs + zasl, zasl + 1).await?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 2 * zasl + 1)
        .await
}

async fn append_returns_landing_lba<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(28, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(2);
    let mut expected_at = zs;
    for (i, blocks) in [3u64, 5, 0, 1, 7].into_iter().enumerate() {
        if blocks == 0 {
            // A plain write in between moves the WP the next append lands at.
            ck.write(&dev, expected_at, 2).await?;
            expected_at += 2;
            continue;
        }
        let (data, meta) = pattern(&g, 5000 + i as u64, blocks, 28);
        let at = ck.ok(
            "append",
            dev.append(zs, &data, Some(&meta), i % 2 == 0).await,
        )?;
        ck.eq("append landing LBA", at, expected_at)?;
        ck.expect_content(&dev, at, &data, &meta).await?;
        expected_at += blocks;
    }
    ck.expect_zone(&dev, 2, S::ImplicitlyOpened, expected_at - zs)
        .await
}

/// Submits appends of `sizes` blocks to `zone` all at once, then checks that they landed in
/// disjoint ranges that together cover exactly the WP advance, each holding its own data.
async fn append_batch<D: ZonedDevice>(
    ck: &Ck,
    dev: &D,
    zone: u32,
    sizes: &[u64],
    salt: u64,
) -> KitResult {
    let zs = ck.zslba(zone);
    let wp0 = ck.zone(dev, zone).await?.wp;
    let payloads: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| pattern(&ck.geo, 10_000 + i as u64, *n, salt))
        .collect();
    let results = join_all(
        payloads
            .iter()
            .map(|(d, m)| dev.append(zs, d, Some(m), false)),
    )
    .await;
    let mut landed = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        let at = ck.ok(&format!("concurrent append {i} to zone {zone}"), r)?;
        landed.push((at, i));
    }
    landed.sort_unstable();
    let mut next = wp0;
    for (at, i) in &landed {
        ck.eq(
            &format!("start of concurrent append {i} (sorted by LBA)"),
            *at,
            next,
        )?;
        next += sizes[*i];
        let (data, meta) = &payloads[*i];
        ck.expect_content(dev, *at, data, meta).await?;
    }
    ck.eq(
        &format!("write pointer of zone {zone} after the batch"),
        ck.zone(dev, zone).await?.wp,
        next,
    )
}

async fn concurrent_appends<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&unlimited_geometry());
    let ck = Ck::new(29, g);
    let dev = f.create(&g).await;
    append_batch(&ck, &dev, 0, &[1, 2, 3, 4, 5, 6], 1).await?;
    append_batch(&ck, &dev, 0, &[8, 1, 8, 1, 8], 2).await?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 47).await?;
    // Appends to several zones interleaved in one batch.
    let zones = [1u32, 2, 3, 1, 2, 3, 1];
    let payloads: Vec<_> = zones
        .iter()
        .map(|z| pattern(&g, u64::from(*z), 3, 29))
        .collect();
    let futs = zones
        .iter()
        .zip(&payloads)
        .map(|(z, (d, m))| dev.append(ck.zslba(*z), d, Some(m), false));
    let results = join_all(futs).await;
    for (i, r) in results.into_iter().enumerate() {
        let z = zones[i];
        let at = ck.ok(&format!("append {i} to zone {z}"), r)?;
        ck.ensure(at >= ck.zslba(z) && at + 3 <= ck.zslba(z) + 9, || {
            format!("append {i} to zone {z} landed at {at}, outside the zone's first 9 blocks")
        })?;
    }
    for z in 1..4 {
        ck.expect_zone(&dev, z, S::ImplicitlyOpened, if z == 1 { 9 } else { 6 })
            .await?;
    }
    Ok(())
}

async fn append_never_split<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(30, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(0);
    let cap = g.zone_capacity;
    ck.fill(&dev, 0, cap - 3).await?;
    let (data, meta) = pattern(&g, 0, 4, 30);
    ck.err(
        "append past capacity",
        dev.append(zs, &data, Some(&meta), false).await,
        E::ZoneBoundaryError,
    )?;
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, cap - 3)
        .await?;
    ck.expect_zeros(&dev, zs + cap - 3, g.zone_size - cap + 3)
        .await?;
    let (data, meta) = pattern(&g, 0, 3, 30);
    let at = ck.ok(
        "append of the remaining capacity",
        dev.append(zs, &data, Some(&meta), false).await,
    )?;
    ck.eq("append landing LBA", at, zs + cap - 3)?;
    ck.expect_zone(&dev, 0, S::Full, cap).await?;
    ck.expect_content(&dev, at, &data, &meta).await
}

async fn writes_in_flight<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(32, g);
    let dev = f.create(&g).await;
    let zs = ck.zslba(0);
    // (offset, blocks, expected to succeed), submitted in this order.
    let batches: [&[(u64, u64, bool)]; 2] = [
        &[
            (0, 4, true),
            (4, 1, true),
            (5, 7, true),
            (12, 2, true),
            (14, 8, true),
        ],
        &[
            (22, 3, true),
            (25, 2, true),
            (29, 1, false),
            (27, 2, true),
            (27, 1, false),
        ],
    ];
    for batch in batches {
        let payloads: Vec<_> = batch
            .iter()
            .map(|(off, n, _)| pattern(&g, zs + off, *n, 0))
            .collect();
        let futs = batch
            .iter()
            .zip(&payloads)
            .map(|((off, _, _), (d, m))| dev.write(zs + off, d, Some(m), false));
        let results = join_all(futs).await;
        for ((off, n, good), r) in batch.iter().zip(results) {
            let what = format!("in-flight write of {n} blocks at offset {off}");
            if *good {
                ck.ok(&what, r)?;
            } else {
                ck.err(&what, r, E::ZoneInvalidWrite)?;
            }
        }
    }
    ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 29).await?;
    ck.expect_pattern(&dev, zs, 29, 0).await?;
    ck.expect_zeros(&dev, zs + 29, 3).await
}
