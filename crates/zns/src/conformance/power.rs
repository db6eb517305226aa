//! Randomized durability properties: after a power loss every zone holds a prefix of what
//! was written to it, at least up to its last durable point; after a clean restart the
//! device is identical apart from open zones becoming Closed.
//!
//! Fault model: power loss with the volatile write cache on and a clean restart, both
//! through the factory; plus device-side Read Only / Offline faults in `reopen_identical`.
//! Durable points follow the kit's rules: a flush covers every zone, a FUA write its zone up
//! to its end, a zone that becomes Full (written to capacity or finished) is sealed, and a
//! reset is durable at once.

use super::check::{Ck, KitResult};
use super::geometries::{kit_geometry, unlimited_geometry};
use super::pattern::random_blocks;
use super::{DeviceFactory, KitFailure};
use crate::device::ZonedDevice;
use crate::rng::SimRng;
use crate::types::{Geometry, ZoneAction as A, ZoneDescriptor, ZoneState as S};

/// What the host knows about one zone: every block it wrote and its durable point.
#[derive(Clone, Debug, Default)]
struct Shadow {
    data: Vec<u8>,
    meta: Vec<u8>,
    written_blocks: u64,
    durable_blocks: u64,
    full: bool,
}

/// Zones the power-loss workload writes to.
const POWER_ZONES: u32 = 6;
/// Commands in one power-loss workload.
const POWER_STEPS: usize = 60;

fn with_seed(seed: u64, what: &str) -> impl Fn(KitFailure) -> KitFailure + '_ {
    move |e| KitFailure::new(e.item, format!("{what} seed {seed}: {}", e.message))
}

/// Writes random data to several zones with random flushes, FUA writes, finishes and
/// resets, cuts power, and checks every zone holds a durable prefix of what was written.
pub async fn power_loss_prefix<F: DeviceFactory>(f: &F, seed: u64) -> Result<(), KitFailure> {
    let g = Geometry {
        block_size: 512,
        ..unlimited_geometry()
    };
    let ck = Ck::new(0, g);
    let mut rng = SimRng::new(seed);
    let dev = f.create(&g).await;
    let mut shadows = vec![Shadow::default(); g.zone_count as usize];
    for step in 0..POWER_STEPS {
        power_step(&ck, &dev, &mut rng, &mut shadows)
            .await
            .map_err(with_seed(seed, &format!("power_loss_prefix step {step}")))?;
    }
    let before = ck
        .zones(&dev)
        .await
        .map_err(with_seed(seed, "power_loss_prefix"))?;
    let dev = f.power_cycle(dev, rng.next_u64()).await;
    for z in 0..g.zone_count {
        let s = &shadows[z as usize];
        check_after_power_loss(&ck, &dev, z, s, &before[z as usize])
            .await
            .map_err(with_seed(seed, "power_loss_prefix after power loss:"))?;
    }
    Ok(())
}

/// One random command of the power-loss workload, mirrored in the shadows.
async fn power_step<D: ZonedDevice>(
    ck: &Ck,
    dev: &D,
    rng: &mut SimRng,
    shadows: &mut [Shadow],
) -> KitResult {
    let g = ck.geo;
    let z = rng.below(u64::from(POWER_ZONES)) as u32;
    let s = &mut shadows[z as usize];
    let roll = rng.below(100);
    if roll < 70 && !s.full {
        let room = g.zone_capacity - s.written_blocks;
        let n = rng.range_inclusive(1, room.min(8));
        let (data, meta) = random_blocks(&g, n, rng);
        let fua = rng.chance(0.2);
        let with_meta = rng.chance(0.8);
        let lba = ck.zslba(z) + s.written_blocks;
        let what = format!("write of {n} blocks at {lba} (fua {fua})");
        ck.ok(
            &what,
            dev.write(lba, &data, with_meta.then_some(&meta[..]), fua)
                .await,
        )?;
        s.data.extend(&data);
        if with_meta {
            s.meta.extend(&meta);
        } else {
            s.meta.extend(vec![0u8; meta.len()]);
        }
        s.written_blocks += n;
        if fua {
            s.durable_blocks = s.written_blocks;
        }
        if s.written_blocks == g.zone_capacity {
            s.full = true;
            s.durable_blocks = s.written_blocks;
        }
    } else if roll < 82 {
        ck.ok("flush", dev.flush().await)?;
        for s in shadows.iter_mut() {
            s.durable_blocks = s.written_blocks;
        }
    } else if roll < 87 {
        ck.mgmt(dev, A::Finish, z).await?;
        s.full = true;
        s.durable_blocks = s.written_blocks;
    } else if roll < 92 {
        ck.mgmt(dev, A::Reset, z).await?;
        *s = Shadow::default();
    } else if roll < 96 {
        // Close is refused for Empty and Full zones; either outcome is fine here.
        let _ = dev.zone_mgmt(A::Close, ck.zslba(z), false).await;
    } else if !s.full {
        ck.mgmt(dev, A::Open, z).await?;
    }
    Ok(())
}

async fn check_after_power_loss<D: ZonedDevice>(
    ck: &Ck,
    dev: &D,
    zone: u32,
    s: &Shadow,
    before: &ZoneDescriptor,
) -> KitResult {
    let g = ck.geo;
    let d = ck.zone(dev, zone).await?;
    let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
    let kept = if s.full {
        ck.eq(&format!("zone {zone} state"), d.state, S::Full)?;
        ck.eq(&format!("zone {zone} WP"), d.wp, d.start + g.zone_capacity)?;
        s.written_blocks
    } else {
        let wp = d.wp - d.start;
        ck.ensure(s.durable_blocks <= wp && wp <= s.written_blocks, || {
            format!(
                "zone {zone}: WP offset {wp} outside [durable {}, written {}]",
                s.durable_blocks, s.written_blocks
            )
        })?;
        let state = match before.state {
            S::ImplicitlyOpened | S::ExplicitlyOpened if wp == 0 => S::Empty,
            S::ImplicitlyOpened | S::ExplicitlyOpened => S::Closed,
            other => other,
        };
        ck.eq(
            &format!("zone {zone} state after power loss (was {})", before.state),
            d.state,
            state,
        )?;
        wp
    };
    let mut data = vec![0u8; g.zone_size as usize * bs];
    let mut meta = vec![0u8; g.zone_size as usize * oob];
    let k = kept as usize;
    data[..k * bs].copy_from_slice(&s.data[..k * bs]);
    meta[..k * oob].copy_from_slice(&s.meta[..k * oob]);
    ck.expect_content(dev, d.start, &data, &meta).await
}

/// Full data and metadata of every zone that can be read (Offline zones cannot).
async fn snapshot<D: ZonedDevice>(ck: &Ck, dev: &D) -> KitResult<Vec<Option<(Vec<u8>, Vec<u8>)>>> {
    let mut out = Vec::new();
    for d in ck.zones(dev).await? {
        if d.state == S::Offline {
            out.push(None);
            continue;
        }
        let (mut data, mut meta) = (Vec::new(), Vec::new());
        let step = u64::from(ck.geo.mdts_blocks);
        let mut lba = d.start;
        while lba < d.start + ck.geo.zone_size {
            let n = step.min(d.start + ck.geo.zone_size - lba);
            let (dd, mm) = ck.read(dev, lba, n).await?;
            data.extend(dd);
            meta.extend(mm);
            lba += n;
        }
        out.push(Some((data, meta)));
    }
    Ok(out)
}

/// A random workload of writes, appends, zone management, flushes and faults, then a clean
/// restart: the report must change only as item 37 says and every block must be identical.
pub async fn reopen_identical<F: DeviceFactory>(f: &F, seed: u64) -> Result<(), KitFailure> {
    let g = Geometry {
        block_size: 512,
        ..kit_geometry()
    };
    let ck = Ck::new(0, g);
    let mut rng = SimRng::new(seed);
    let dev = f.create(&g).await;
    for _ in 0..80 {
        reopen_step(&ck, f, &dev, &mut rng).await;
    }
    let fail = with_seed(seed, "reopen_identical");
    let before = ck.zones(&dev).await.map_err(&fail)?;
    let contents = snapshot(&ck, &dev).await.map_err(&fail)?;
    let dev = f.restart(dev).await;
    let expected: Vec<ZoneDescriptor> = before
        .iter()
        .map(|d| {
            let mut d = *d;
            if d.state.is_open() {
                d.state = if d.wp == d.start { S::Empty } else { S::Closed };
            }
            d
        })
        .collect();
    let after = ck.zones(&dev).await.map_err(&fail)?;
    ck.eq("zones after restart", after, expected)
        .map_err(&fail)?;
    let again = snapshot(&ck, &dev).await.map_err(&fail)?;
    for (z, (a, b)) in contents.iter().zip(&again).enumerate() {
        ck.ensure(a == b, || {
            format!("zone {z} content changed across a clean restart")
        })
        .map_err(&fail)?;
    }
    Ok(())
}

/// One random command; its outcome does not matter, only the state it leaves behind.
async fn reopen_step<F: DeviceFactory>(ck: &Ck, f: &F, dev: &F::Device, rng: &mut SimRng) {
    let g = ck.geo;
    let z = rng.below(u64::from(g.zone_count)) as u32;
    let zs = ck.zslba(z);
    let roll = rng.below(100);
    if roll < 45 {
        let wp = dev
            .report_zones(zs, Default::default(), true, 1)
            .await
            .ok()
            .and_then(|r| r.zones.first().map(|d| d.wp));
        let n = rng.range_inclusive(1, 8);
        let (data, meta) = random_blocks(&g, n, rng);
        let _ = dev
            .write(wp.unwrap_or(zs), &data, Some(&meta), rng.chance(0.2))
            .await;
    } else if roll < 65 {
        let n = rng.range_inclusive(1, u64::from(g.zasl_blocks));
        let (data, meta) = random_blocks(&g, n, rng);
        let _ = dev.append(zs, &data, Some(&meta), false).await;
    } else if roll < 90 {
        let action = A::ALL[rng.index(4)];
        let _ = dev.zone_mgmt(action, zs, rng.chance(0.05)).await;
    } else if roll < 97 {
        let _ = dev.flush().await;
    } else {
        let state = if rng.chance(0.5) {
            S::ReadOnly
        } else {
            S::Offline
        };
        let current = dev
            .report_zones(zs, Default::default(), true, 1)
            .await
            .ok()
            .and_then(|r| r.zones.first().map(|d| d.state));
        if current != Some(S::Offline) {
            f.set_zone_state(dev, z, state).await;
        }
    }
}
