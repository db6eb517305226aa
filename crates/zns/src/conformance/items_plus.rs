//! Checklist items 45-53 (docs/ZNSPLUS.md): the ZNS+ commands `identify_mapping`,
//! `zone_compaction` and `tl_open`. Item 45 applies to every device (one without the
//! commands must refuse them cleanly); the others are not applicable to such a device.
//!
//! Fault model: as for the ZNS items, a clean restart and a power loss with the volatile
//! write cache on, through the factory, plus device-side Read Only and Offline zones.

use futures::future::join;

use super::check::{Ck, KitResult};
use super::geometries::kit_geometry;
use super::pattern::pattern;
use super::DeviceFactory;
use crate::device::ZonedDevice;
use crate::plus::{ChunkMapping, CompactionExtent, ValidBitmap};
use crate::status::NvmeStatus as E;
use crate::types::{zone_attr, Lba, ZoneAction as A, ZoneState as S};

/// Why a ZNS+ item does not apply to a device without the commands.
pub(super) const NOT_ZNS_PLUS: &str = "the device has no ZNS+ commands (identify_mapping is None)";

/// Runs one item; Ok(Some(why)) when it does not apply to the factory's devices.
pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult<Option<String>> {
    if item == 45 {
        return capability(f).await.map(|()| None);
    }
    let g = f.geometry_for(&kit_geometry());
    let probe = f.create(&g).await;
    if probe.identify_mapping().is_none() {
        return Ok(Some(NOT_ZNS_PLUS.to_string()));
    }
    drop(probe);
    match item {
        46 => compaction_copies(f).await,
        47 => compaction_errors(f).await,
        48 => tl_open_errors(f).await,
        49 => tl_open_effect(f).await,
        50 => tl_writes(f).await,
        51 => tl_management(f).await,
        52 => tl_clean_restart(f).await,
        _ => tl_power_loss(f).await,
    }
    .map(|()| None)
}

fn ext(src: Lba, dst: Lba, blocks: u64) -> CompactionExtent {
    CompactionExtent { src, dst, blocks }
}

/// A bitmap for the kit geometry's capacity with the blocks in `ranges` valid.
fn bitmap(ck: &Ck, ranges: &[(u64, u64)]) -> Vec<u8> {
    let mut map = ValidBitmap::empty(ck.geo.zone_capacity);
    for &(from, to) in ranges {
        for b in from..to {
            map.set(b, true);
        }
    }
    map.as_bytes().to_vec()
}

/// Fills `zone` to capacity with the salt-0 pattern, then TL-opens it with `valid`.
async fn fill_and_tl_open<D: ZonedDevice>(
    ck: &Ck,
    dev: &D,
    zone: u32,
    valid: &[(u64, u64)],
) -> KitResult {
    ck.fill(dev, zone, ck.geo.zone_capacity).await?;
    let what = format!("tl_open of zone {zone}");
    ck.ok(&what, dev.tl_open(ck.zslba(zone), &bitmap(ck, valid)).await)
}

/// The zone's state, WP offset and whether it carries the TLO attribute.
async fn expect_tl<D: ZonedDevice>(
    ck: &Ck,
    dev: &D,
    zone: u32,
    state: S,
    wp_off: u64,
    tlo: bool,
) -> KitResult {
    ck.expect_zone(dev, zone, state, wp_off).await?;
    let d = ck.zone(dev, zone).await?;
    ck.eq(
        &format!("TLO attribute of zone {zone}"),
        d.attributes & zone_attr::TLO != 0,
        tlo,
    )
}

fn mapping_ok(ck: &Ck, m: &ChunkMapping) -> KitResult {
    ck.ensure(m.validate().is_ok(), || {
        format!("identify_mapping returned an invalid mapping: {m:?}")
    })
}

async fn capability<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(45, g);
    let dev = f.create(&g).await;
    let Some(m) = dev.identify_mapping() else {
        ck.write(&dev, ck.zslba(0), 4).await?;
        ck.fill(&dev, 1, g.zone_capacity).await?;
        let r = dev
            .zone_compaction(&[ext(ck.zslba(0), ck.zslba(0) + 4, 2)])
            .await;
        ck.err("zone_compaction without ZNS+", r, E::InvalidOpcode)?;
        let r = dev.tl_open(ck.zslba(1), &bitmap(&ck, &[])).await;
        ck.err("tl_open without ZNS+", r, E::InvalidOpcode)?;
        ck.expect_zone(&dev, 0, S::ImplicitlyOpened, 4).await?;
        ck.expect_zone(&dev, 1, S::Full, g.zone_capacity).await?;
        return ck.expect_pattern(&dev, ck.zslba(0), 4, 0).await;
    };
    mapping_ok(&ck, &m)?;
    ck.eq(
        "identify_mapping asked twice",
        dev.identify_mapping(),
        Some(m),
    )
}

async fn compaction_copies<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(46, g);
    let dev = f.create(&g).await;
    let (z0, z1, z2) = (ck.zslba(0), ck.zslba(1), ck.zslba(2));
    ck.write(&dev, z0, 20).await?;
    ck.write_salted(&dev, z1, 2, 1, false).await?;
    // Four extents over two destination zones, one reading above zone 0's data end.
    let extents = [
        ext(z0, z1 + 2, 3),
        ext(z0 + 10, z2, 4),
        ext(z0 + 5, z1 + 5, 2),
        ext(z0 + 18, z1 + 7, 4),
    ];
    ck.ok(
        "compaction of four extents",
        dev.zone_compaction(&extents).await,
    )?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 11).await?;
    ck.expect_zone(&dev, 2, S::ImplicitlyOpened, 4).await?;
    ck.expect_pattern(&dev, z1, 2, 1).await?;
    for e in extents {
        let (mut data, mut meta) = pattern(&g, e.src, e.blocks, 0);
        let above = (z0 + 20).saturating_sub(e.src).min(e.blocks) as usize;
        data[above * g.block_size as usize..].fill(0);
        meta[above * g.oob_size as usize..].fill(0);
        ck.expect_content(&dev, e.dst, &data, &meta).await?;
    }
    // Two commands in flight at once, to different zones; then one that fills a zone.
    let (a, b) = join(
        dev.zone_compaction(&[ext(z0, z1 + 11, 2)]),
        dev.zone_compaction(&[ext(z0 + 2, z2 + 4, 2)]),
    )
    .await;
    ck.ok("first of two compactions in flight", a)?;
    ck.ok("second of two compactions in flight", b)?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 13).await?;
    ck.expect_zone(&dev, 2, S::ImplicitlyOpened, 6).await?;
    let (data, meta) = pattern(&g, z0 + 2, 2, 0);
    ck.expect_content(&dev, z2 + 4, &data, &meta).await?;
    let cap = g.zone_capacity;
    ck.fill(&dev, 2, cap - 3).await?;
    let r = dev.zone_compaction(&[ext(z0, z2 + cap - 3, 3)]).await;
    ck.ok("compaction up to the capacity", r)?;
    ck.expect_zone(&dev, 2, S::Full, cap).await?;
    let (data, meta) = pattern(&g, z0, 3, 0);
    ck.expect_content(&dev, z2 + cap - 3, &data, &meta).await
}

async fn compaction_errors<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(47, g);
    let dev = f.create(&g).await;
    let m = dev.identify_mapping().unwrap_or(ChunkMapping {
        chunk_blocks: 1,
        zone_chips: 1,
        chip_groups: 1,
        compaction_max_extents: 1,
        compaction_max_blocks: 1,
    });
    let (z0, z1) = (ck.zslba(0), ck.zslba(1));
    ck.write(&dev, z0, 10).await?;
    ck.write(&dev, z1, 2).await?;
    let (max_ext, max_blocks) = (
        m.compaction_max_extents as usize,
        u64::from(m.compaction_max_blocks),
    );
    let too_big: [(&str, Vec<CompactionExtent>); 4] = [
        ("no extents", vec![]),
        (
            "an extent of no blocks",
            vec![ext(z0, z1 + 2, 1), ext(z0, z1 + 3, 0)],
        ),
        ("one extent too many", vec![ext(z0, z1 + 2, 1); max_ext + 1]),
        (
            "blocks over the limit",
            vec![ext(z0, z1 + 2, max_blocks + 1)],
        ),
    ];
    for (what, extents) in too_big {
        let r = dev.zone_compaction(&extents).await;
        ck.err(what, r, E::CommandSizeLimitExceeded)?;
    }
    let total = g.total_blocks();
    let cap = g.zone_capacity;
    ck.fill(&dev, 2, cap - 1).await?;
    ck.fill(&dev, 3, cap).await?;
    f.set_zone_state(&dev, 6, S::ReadOnly).await;
    f.set_zone_state(&dev, 7, S::Offline).await;
    let good = ext(z0, z1 + 2, 2);
    let bad: [(&str, CompactionExtent, E); 9] = [
        (
            "source across a zone boundary",
            ext(z1 - 2, z1 + 4, 4),
            E::ZoneBoundaryError,
        ),
        (
            "source beyond the namespace",
            ext(total - 1, z1 + 4, 2),
            E::LbaOutOfRange,
        ),
        (
            "destination beyond the namespace",
            ext(z0, total, 1),
            E::LbaOutOfRange,
        ),
        (
            "source in an offline zone",
            ext(ck.zslba(7), z1 + 4, 1),
            E::ZoneIsOffline,
        ),
        (
            "destination away from the WP",
            ext(z0, z1 + 2, 1),
            E::ZoneInvalidWrite,
        ),
        (
            "destination past capacity",
            ext(z0, ck.zslba(2) + cap - 1, 2),
            E::ZoneBoundaryError,
        ),
        (
            "destination in a full zone",
            ext(z0, ck.zslba(3) + cap, 1),
            E::ZoneIsFull,
        ),
        (
            "destination in a read only zone",
            ext(z0, ck.zslba(6), 1),
            E::ZoneIsReadOnly,
        ),
        (
            "destination in an offline zone",
            ext(z0, ck.zslba(7), 1),
            E::ZoneIsOffline,
        ),
    ];
    for (what, second, want) in bad {
        // The first extent is fine: the command must still change nothing.
        let r = dev.zone_compaction(&[good, second]).await;
        ck.err(what, r, want)?;
        ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 2).await?;
    }
    // Zones 0, 1, 2 active; a fourth makes the active limit.
    ck.mgmt(&dev, A::Open, 4).await?;
    let r = dev.zone_compaction(&[good, ext(z0, ck.zslba(5), 1)]).await;
    ck.err(
        "destination zone over the active limit",
        r,
        E::TooManyActiveZones,
    )?;
    ck.expect_zone(&dev, 1, S::ImplicitlyOpened, 2).await?;
    ck.expect_zone(&dev, 5, S::Empty, 0).await?;
    ck.expect_zeros(&dev, z1 + 2, 4).await
}

async fn tl_open_errors<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(48, g);
    let dev = f.create(&g).await;
    let none = bitmap(&ck, &[]);
    let r = dev.tl_open(g.total_blocks(), &none).await;
    ck.err("tl_open beyond the namespace", r, E::LbaOutOfRange)?;
    let r = dev.tl_open(ck.zslba(1) + 1, &none).await;
    ck.err("tl_open away from a zone start", r, E::InvalidField)?;
    ck.fill(&dev, 5, g.zone_capacity).await?;
    ck.write(&dev, ck.zslba(1), 4).await?;
    ck.mgmt(&dev, A::Open, 2).await?;
    ck.write(&dev, ck.zslba(3), 10).await?;
    ck.mgmt(&dev, A::Close, 3).await?;
    ck.mgmt(&dev, A::Open, 4).await?;
    ck.mgmt(&dev, A::Close, 4).await?;
    f.set_zone_state(&dev, 6, S::ReadOnly).await;
    f.set_zone_state(&dev, 7, S::Offline).await;
    for (zone, what) in [
        (0, "an empty zone"),
        (1, "an implicitly opened zone"),
        (2, "an explicitly opened zone"),
        (4, "a closed zone without data"),
        (6, "a read only zone"),
        (7, "an offline zone"),
    ] {
        let r = dev.tl_open(ck.zslba(zone), &none).await;
        ck.err(
            &format!("tl_open of {what}"),
            r,
            E::InvalidZoneStateTransition,
        )?;
    }
    let r = dev.tl_open(ck.zslba(5), &none[1..]).await;
    ck.err("tl_open with a short bitmap", r, E::InvalidField)?;
    let r = dev.tl_open(ck.zslba(3), &bitmap(&ck, &[(10, 11)])).await;
    ck.err(
        "tl_open keeping a block above the data end",
        r,
        E::InvalidField,
    )?;
    // Zones 1, 2, 3 and 4 are active: the limit.
    let r = dev.tl_open(ck.zslba(5), &none).await;
    ck.err(
        "tl_open of a full zone at the active limit",
        r,
        E::TooManyActiveZones,
    )?;
    ck.expect_zone(&dev, 5, S::Full, g.zone_capacity).await?;
    ck.mgmt(&dev, A::Reset, 4).await?;
    ck.ok(
        "tl_open of a full zone",
        dev.tl_open(ck.zslba(5), &none).await,
    )?;
    let r = dev.tl_open(ck.zslba(5), &none).await;
    ck.err(
        "tl_open of a TL-opened zone",
        r,
        E::InvalidZoneStateTransition,
    )?;
    // Open limit reached (1 implicit, 2 and 5 explicit): zone 1 is closed to make room.
    let keep = bitmap(&ck, &[(0, 2)]);
    ck.ok(
        "tl_open of a closed zone",
        dev.tl_open(ck.zslba(3), &keep).await,
    )?;
    expect_tl(&ck, &dev, 1, S::Closed, 4, false).await?;
    expect_tl(&ck, &dev, 3, S::ExplicitlyOpened, 2, true).await?;
    let r = dev.tl_open(ck.zslba(1), &none).await;
    ck.err(
        "tl_open with only explicit zones open",
        r,
        E::TooManyOpenZones,
    )?;
    expect_tl(&ck, &dev, 1, S::Closed, 4, false).await?;
    ck.mgmt(&dev, A::Close, 3).await?;
    let r = dev.tl_open(ck.zslba(3), &keep).await;
    ck.err(
        "tl_open of a closed TL-opened zone",
        r,
        E::InvalidZoneStateTransition,
    )?;
    ck.expect_counts(&dev, 2, 4).await
}

async fn tl_open_effect<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(49, g);
    let dev = f.create(&g).await;
    let cap = g.zone_capacity;
    fill_and_tl_open(&ck, &dev, 0, &[(0, 3), (5, 6), (10, 13), (40, cap)]).await?;
    expect_tl(&ck, &dev, 0, S::ExplicitlyOpened, 3, true).await?;
    ck.expect_counts(&dev, 1, 1).await?;
    ck.expect_pattern(&dev, ck.zslba(0), cap, 0).await?;
    fill_and_tl_open(&ck, &dev, 1, &[(0, cap)]).await?;
    expect_tl(&ck, &dev, 1, S::Full, cap, false).await?;
    ck.expect_counts(&dev, 1, 1).await?;
    ck.expect_pattern(&dev, ck.zslba(1), cap, 0).await
}

async fn tl_writes<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(50, g);
    let dev = f.create(&g).await;
    let cap = g.zone_capacity;
    let (z0, z1) = (ck.zslba(0), ck.zslba(1));
    ck.write_salted(&dev, z1, 4, 2, false).await?;
    fill_and_tl_open(&ck, &dev, 0, &[(0, 3), (5, 7), (10, 13), (40, cap)]).await?;
    ck.write_err(&dev, z0 + 4, 1, E::ZoneInvalidWrite).await?;
    ck.write_err(&dev, z0 + 3, 3, E::ZoneInvalidWrite).await?;
    ck.write_salted(&dev, z0 + 3, 2, 1, false).await?;
    expect_tl(&ck, &dev, 0, S::ExplicitlyOpened, 7, true).await?;
    ck.ok(
        "write zeroes at the WP",
        dev.write_zeroes(z0 + 7, 1, false).await,
    )?;
    let (data, meta) = pattern(&g, z0 + 8, 2, 1);
    let landed = ck.ok("append", dev.append(z0, &data, Some(&meta), false).await)?;
    ck.eq("append landing LBA", landed, z0 + 8)?;
    expect_tl(&ck, &dev, 0, S::ExplicitlyOpened, 13, true).await?;
    let range = crate::types::CopyRange { lba: z1, blocks: 3 };
    ck.ok(
        "simple copy into the zone",
        dev.copy(&[range], z0 + 13, false).await,
    )?;
    let r = dev.zone_compaction(&[ext(z1, z0 + 16, 2)]).await;
    ck.ok("compaction into the zone", r)?;
    expect_tl(&ck, &dev, 0, S::ExplicitlyOpened, 18, true).await?;
    ck.write_err(&dev, z0 + 18, 23, E::ZoneInvalidWrite).await?;
    ck.expect_pattern(&dev, z0, 3, 0).await?;
    ck.expect_pattern(&dev, z0 + 3, 2, 1).await?;
    ck.expect_pattern(&dev, z0 + 5, 2, 0).await?;
    ck.expect_zeros(&dev, z0 + 7, 1).await?;
    ck.expect_pattern(&dev, z0 + 8, 2, 1).await?;
    ck.expect_pattern(&dev, z0 + 10, 3, 0).await?;
    let (d1, m1) = pattern(&g, z1, 3, 2);
    ck.expect_content(&dev, z0 + 13, &d1, &m1).await?;
    let (d2, m2) = pattern(&g, z1, 2, 2);
    ck.expect_content(&dev, z0 + 16, &d2, &m2).await?;
    ck.expect_pattern(&dev, z0 + 18, cap - 18, 0).await?;
    // Writing the last invalid run plugs the valid tail: the zone is Full.
    ck.write_salted(&dev, z0 + 18, 22, 3, false).await?;
    expect_tl(&ck, &dev, 0, S::Full, cap, false).await?;
    ck.expect_pattern(&dev, z0 + 18, 22, 3).await?;
    ck.expect_pattern(&dev, z0 + 40, cap - 40, 0).await?;
    // A write past the capacity over an invalid tail.
    let z2 = ck.zslba(2);
    fill_and_tl_open(&ck, &dev, 2, &[(0, 20)]).await?;
    ck.write_err(&dev, z2 + 20, cap - 19, E::ZoneBoundaryError)
        .await?;
    ck.write_salted(&dev, z2 + 20, cap - 20, 4, false).await?;
    expect_tl(&ck, &dev, 2, S::Full, cap, false).await?;
    ck.expect_pattern(&dev, z2, 20, 0).await?;
    ck.expect_pattern(&dev, z2 + 20, cap - 20, 4).await
}

async fn tl_management<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(51, g);
    let dev = f.create(&g).await;
    let cap = g.zone_capacity;
    let z0 = ck.zslba(0);
    fill_and_tl_open(&ck, &dev, 0, &[(0, 4), (8, 9)]).await?;
    ck.write_salted(&dev, z0 + 4, 2, 1, false).await?;
    ck.mgmt(&dev, A::Close, 0).await?;
    expect_tl(&ck, &dev, 0, S::Closed, 6, true).await?;
    ck.write_salted(&dev, z0 + 6, 1, 1, false).await?;
    expect_tl(&ck, &dev, 0, S::ImplicitlyOpened, 7, true).await?;
    ck.mgmt(&dev, A::Close, 0).await?;
    ck.mgmt(&dev, A::Open, 0).await?;
    expect_tl(&ck, &dev, 0, S::ExplicitlyOpened, 7, true).await?;
    // The bitmap survived the close: block 8 is still valid.
    ck.write_err(&dev, z0 + 7, 2, E::ZoneInvalidWrite).await?;
    ck.mgmt(&dev, A::Finish, 0).await?;
    expect_tl(&ck, &dev, 0, S::Full, cap, false).await?;
    ck.expect_pattern(&dev, z0, 4, 0).await?;
    ck.expect_pattern(&dev, z0 + 4, 3, 1).await?;
    ck.expect_pattern(&dev, z0 + 8, 1, 0).await?;
    fill_and_tl_open(&ck, &dev, 1, &[(0, 3)]).await?;
    ck.mgmt(&dev, A::Reset, 1).await?;
    expect_tl(&ck, &dev, 1, S::Empty, 0, false).await?;
    ck.expect_zeros(&dev, ck.zslba(1), g.zone_size).await?;
    fill_and_tl_open(&ck, &dev, 2, &[(0, 3)]).await?;
    f.set_zone_state(&dev, 2, S::ReadOnly).await;
    let d = ck.zone(&dev, 2).await?;
    ck.eq("state of zone 2", d.state, S::ReadOnly)?;
    ck.eq("TLO of a read only zone", d.attributes & zone_attr::TLO, 0)?;
    ck.expect_pattern(&dev, ck.zslba(2), 3, 0).await
}

async fn tl_clean_restart<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(52, g);
    let dev = f.create(&g).await;
    let z0 = ck.zslba(0);
    fill_and_tl_open(&ck, &dev, 0, &[(0, 1), (10, 20)]).await?;
    ck.write_salted(&dev, z0 + 1, 4, 1, false).await?;
    fill_and_tl_open(&ck, &dev, 1, &[]).await?;
    let dev = f.restart(dev).await;
    expect_tl(&ck, &dev, 0, S::Closed, 5, true).await?;
    expect_tl(&ck, &dev, 1, S::Closed, 0, true).await?;
    ck.expect_pattern(&dev, z0 + 1, 4, 1).await?;
    ck.expect_pattern(&dev, z0 + 10, 10, 0).await?;
    ck.expect_pattern(&dev, ck.zslba(1), g.zone_capacity, 0)
        .await?;
    // The bitmap came back too: block 10 is valid, 5..10 are not.
    ck.write_err(&dev, z0 + 5, 6, E::ZoneInvalidWrite).await?;
    ck.write_salted(&dev, z0 + 5, 5, 2, false).await?;
    expect_tl(&ck, &dev, 0, S::ImplicitlyOpened, 20, true).await
}

async fn tl_power_loss<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(53, g);
    let z0 = ck.zslba(0);
    let valid = [(0, 4), (8, 12), (20, 30)];
    for seed in 1..=8u64 {
        let dev = f.create(&g).await;
        fill_and_tl_open(&ck, &dev, 0, &valid).await?;
        ck.write_salted(&dev, z0 + 4, 4, 1, true).await?;
        ck.write_salted(&dev, z0 + 12, 8, 1, false).await?;
        ck.write_salted(&dev, z0 + 30, 5, 1, false).await?;
        fill_and_tl_open(&ck, &dev, 1, &[(0, 2)]).await?;
        let dev = f.power_cycle(dev, seed).await;
        let d = ck.zone(&dev, 0).await?;
        let wp = d.wp - z0;
        let ok_wp = (12..20).contains(&wp) || (30..=35).contains(&wp);
        ck.ensure(ok_wp, || {
            format!("seed {seed}: zone 0's WP {wp} is not a kept prefix past the valid blocks")
        })?;
        expect_tl(&ck, &dev, 0, S::Closed, wp, true).await?;
        for (from, to) in valid {
            ck.expect_pattern(&dev, z0 + from, to - from, 0).await?;
        }
        ck.expect_pattern(&dev, z0 + 4, 4, 1).await?;
        let kept_12 = wp.min(20) - 12;
        ck.expect_pattern(&dev, z0 + 12, kept_12, 1).await?;
        if wp >= 30 {
            ck.expect_pattern(&dev, z0 + 30, wp - 30, 1).await?;
        }
        expect_tl(&ck, &dev, 1, S::Closed, 2, true).await?;
        ck.expect_pattern(&dev, ck.zslba(1), 2, 0).await?;
    }
    Ok(())
}
