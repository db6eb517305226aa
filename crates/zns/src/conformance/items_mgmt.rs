//! Checklist items 13-21: Zone Management Send transitions, address checks and Select All.

use super::check::{Ck, KitResult};
use super::geometries::{kit_geometry, unlimited_geometry};
use super::DeviceFactory;
use crate::device::ZonedDevice;
use crate::status::NvmeStatus as E;
use crate::types::{Geometry, ZoneAction as A, ZoneState as S};

pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult {
    match item {
        13 => open_transitions(f).await,
        14 => invalid_transitions(f).await,
        15 => close_keeps_active_slot(f).await,
        16 => close_on_empty_and_closed(f).await,
        17 => finish_transitions(f).await,
        18 => reset_transitions(f).await,
        19 => offline_only_from_read_only(f).await,
        20 => management_address_checks(f).await,
        _ => select_all(f).await,
    }
}

async fn open_transitions<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(13, g);
    let dev = f.create(&g).await;
    ck.mgmt(&dev, A::Open, 0).await?;
    ck.expect_zone(&dev, 0, S::ExplicitlyOpened, 0).await?;
    ck.expect_counts(&dev, 1, 1).await?;
    ck.write(&dev, ck.zslba(1), 4).await?;
    ck.mgmt(&dev, A::Close, 1).await?;
    ck.mgmt(&dev, A::Open, 1).await?;
    ck.expect_zone(&dev, 1, S::ExplicitlyOpened, 4).await?;
    ck.expect_counts(&dev, 2, 2).await?;
    ck.write(&dev, ck.zslba(2), 4).await?;
    ck.expect_counts(&dev, 3, 3).await?;
    // At the open limit with every other open zone explicitly opened: this open can only
    // succeed if it takes no new slot.
    ck.mgmt(&dev, A::Open, 2).await?;
    ck.expect_zone(&dev, 2, S::ExplicitlyOpened, 4).await?;
    ck.expect_counts(&dev, 3, 3).await?;
    ck.mgmt(&dev, A::Open, 0).await?;
    ck.expect_zone(&dev, 0, S::ExplicitlyOpened, 0).await?;
    ck.expect_counts(&dev, 3, 3).await?;
    // Writes keep an explicitly opened zone explicitly opened.
    ck.write(&dev, ck.zslba(0), 2).await?;
    ck.expect_zone(&dev, 0, S::ExplicitlyOpened, 2).await
}

async fn invalid_transitions<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&unlimited_geometry());
    let ck = Ck::new(14, g);
    let dev = f.create(&g).await;
    ck.fill(&dev, 0, g.zone_capacity).await?;
    ck.write(&dev, ck.zslba(1), 4).await?;
    f.set_zone_state(&dev, 1, S::ReadOnly).await;
    f.set_zone_state(&dev, 2, S::Offline).await;
    for action in [A::Open, A::Close] {
        ck.mgmt_err(&dev, action, 0, E::InvalidZoneStateTransition)
            .await?;
    }
    for action in [A::Open, A::Close, A::Finish, A::Reset] {
        ck.mgmt_err(&dev, action, 1, E::InvalidZoneStateTransition)
            .await?;
        ck.mgmt_err(&dev, action, 2, E::InvalidZoneStateTransition)
            .await?;
    }
    ck.expect_zone(&dev, 0, S::Full, g.zone_capacity).await?;
    ck.expect_zone(&dev, 1, S::ReadOnly, 4).await?;
    ck.expect_zone(&dev, 2, S::Offline, g.zone_size).await?;
    ck.expect_pattern(&dev, ck.zslba(1), 4, 0).await
}

async fn close_keeps_active_slot<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(15, g);
    let dev = f.create(&g).await;
    for z in 0..3 {
        ck.mgmt(&dev, A::Open, z).await?;
    }
    ck.mgmt(&dev, A::Close, 0).await?;
    // Closed even with nothing written (the reference; null_blk would return it to Empty).
    ck.expect_zone(&dev, 0, S::Closed, 0).await?;
    ck.expect_counts(&dev, 2, 3).await?;
    // Every open zone is explicitly opened: this needs the open slot zone 0 gave back.
    ck.mgmt(&dev, A::Open, 3).await?;
    ck.expect_counts(&dev, 3, 4).await?;
    ck.mgmt(&dev, A::Close, 3).await?;
    // Zone 0 and 3 still hold active slots, so a fifth active zone is refused.
    ck.mgmt_err(&dev, A::Open, 4, E::TooManyActiveZones).await?;
    ck.write(&dev, ck.zslba(1), 4).await?;
    ck.mgmt(&dev, A::Close, 1).await?;
    ck.expect_zone(&dev, 1, S::Closed, 4).await?;
    ck.expect_counts(&dev, 1, 4).await?;
    ck.expect_pattern(&dev, ck.zslba(1), 4, 0).await
}

async fn close_on_empty_and_closed<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(16, g);
    let dev = f.create(&g).await;
    ck.mgmt_err(&dev, A::Close, 0, E::InvalidZoneStateTransition)
        .await?;
    ck.expect_zone(&dev, 0, S::Empty, 0).await?;
    ck.expect_counts(&dev, 0, 0).await?;
    ck.write(&dev, ck.zslba(1), 4).await?;
    ck.mgmt(&dev, A::Close, 1).await?;
    ck.mgmt(&dev, A::Close, 1).await?;
    ck.expect_zone(&dev, 1, S::Closed, 4).await?;
    ck.expect_counts(&dev, 0, 1).await
}

async fn finish_transitions<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(17, g);
    let dev = f.create(&g).await;
    let cap = g.zone_capacity;
    for z in 0..3 {
        ck.mgmt(&dev, A::Open, z).await?;
    }
    ck.mgmt(&dev, A::Close, 0).await?;
    ck.mgmt(&dev, A::Open, 3).await?;
    ck.expect_counts(&dev, 3, 4).await?;
    // At both limits, Finish of an Empty zone still succeeds: it needs no resources.
    ck.mgmt(&dev, A::Finish, 4).await?;
    ck.expect_zone(&dev, 4, S::Full, cap).await?;
    ck.expect_counts(&dev, 3, 4).await?;
    ck.mgmt(&dev, A::Finish, 1).await?;
    ck.expect_zone(&dev, 1, S::Full, cap).await?;
    ck.expect_counts(&dev, 2, 3).await?;
    ck.write(&dev, ck.zslba(5), 4).await?;
    ck.expect_counts(&dev, 3, 4).await?;
    ck.mgmt(&dev, A::Finish, 0).await?;
    ck.expect_zone(&dev, 0, S::Full, cap).await?;
    ck.expect_counts(&dev, 3, 3).await?;
    ck.mgmt(&dev, A::Finish, 5).await?;
    ck.expect_zone(&dev, 5, S::Full, cap).await?;
    ck.expect_counts(&dev, 2, 2).await?;
    ck.expect_pattern(&dev, ck.zslba(5), 4, 0).await?;
    ck.expect_zeros(&dev, ck.zslba(5) + 4, g.zone_size - 4)
        .await?;
    ck.mgmt(&dev, A::Finish, 4).await?;
    ck.expect_zone(&dev, 4, S::Full, cap).await?;
    ck.mgmt(&dev, A::Open, 6).await?;
    ck.expect_counts(&dev, 3, 3).await
}

async fn reset_transitions<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(18, g);
    let dev = f.create(&g).await;
    ck.write(&dev, ck.zslba(0), 8).await?;
    ck.mgmt(&dev, A::Open, 1).await?;
    ck.write(&dev, ck.zslba(1), 4).await?;
    ck.write(&dev, ck.zslba(2), 4).await?;
    ck.mgmt(&dev, A::Close, 2).await?;
    ck.fill(&dev, 3, g.zone_capacity).await?;
    ck.expect_counts(&dev, 2, 3).await?;
    for z in 0..4 {
        ck.mgmt(&dev, A::Reset, z).await?;
        ck.expect_zone(&dev, z, S::Empty, 0).await?;
        ck.eq(
            &format!("attributes of reset zone {z}"),
            ck.zone(&dev, z).await?.attributes,
            0,
        )?;
        ck.expect_zeros(&dev, ck.zslba(z), g.zone_size).await?;
    }
    ck.expect_counts(&dev, 0, 0).await?;
    ck.mgmt(&dev, A::Reset, 4).await?;
    ck.expect_zone(&dev, 4, S::Empty, 0).await?;
    ck.write_salted(&dev, ck.zslba(3), 6, 1, false).await?;
    ck.expect_pattern(&dev, ck.zslba(3), 6, 1).await?;
    ck.expect_zone(&dev, 3, S::ImplicitlyOpened, 6).await
}

async fn offline_only_from_read_only<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&unlimited_geometry());
    let ck = Ck::new(19, g);
    let dev = f.create(&g).await;
    let layout = build_layout(&ck, f, &dev).await?;
    for z in [0, 1, 2, 3, 4, 7] {
        ck.mgmt_err(&dev, A::Offline, z, E::InvalidZoneStateTransition)
            .await?;
    }
    ck.expect_all(&dev, &layout).await?;
    ck.mgmt(&dev, A::Offline, 5).await?;
    ck.expect_zone(&dev, 5, S::Offline, g.zone_size).await?;
    ck.mgmt(&dev, A::Offline, 6).await?;
    ck.expect_zone(&dev, 6, S::Offline, g.zone_size).await
}

async fn management_address_checks<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(20, g);
    let dev = f.create(&g).await;
    let total = g.total_blocks();
    for action in crate::types::ZoneAction::ALL {
        for (lba, want) in [
            (ck.zslba(1) + 1, E::InvalidField),
            (total - 1, E::InvalidField),
            (total, E::LbaOutOfRange),
            (total + 3, E::LbaOutOfRange),
            (u64::MAX, E::LbaOutOfRange),
        ] {
            let what = format!("{} at LBA {lba}", action.name());
            ck.err(&what, dev.zone_mgmt(action, lba, false).await, want)?;
        }
    }
    ck.expect_counts(&dev, 0, 0).await?;
    ck.expect_zone(&dev, 1, S::Empty, 0).await
}

/// Puts the zones of an 8-zone device with no limits into every state and returns each
/// zone's (state, WP offset): 0 Empty, 1 Implicitly Opened, 2 Explicitly Opened, 3 Closed,
/// 4 Full, 5 Read Only, 6 Offline, 7 Closed with nothing written.
async fn build_layout<F: DeviceFactory>(
    ck: &Ck,
    f: &F,
    dev: &F::Device,
) -> KitResult<Vec<(S, u64)>> {
    let g = ck.geo;
    ck.write(dev, ck.zslba(1), 4).await?;
    ck.mgmt(dev, A::Open, 2).await?;
    ck.write(dev, ck.zslba(2), 4).await?;
    ck.write(dev, ck.zslba(3), 4).await?;
    ck.mgmt(dev, A::Close, 3).await?;
    ck.fill(dev, 4, g.zone_capacity).await?;
    ck.write(dev, ck.zslba(5), 4).await?;
    f.set_zone_state(dev, 5, S::ReadOnly).await;
    f.set_zone_state(dev, 6, S::Offline).await;
    ck.mgmt(dev, A::Open, 7).await?;
    ck.mgmt(dev, A::Close, 7).await?;
    let layout = vec![
        (S::Empty, 0),
        (S::ImplicitlyOpened, 4),
        (S::ExplicitlyOpened, 4),
        (S::Closed, 4),
        (S::Full, g.zone_capacity),
        (S::ReadOnly, 4),
        (S::Offline, g.zone_size),
        (S::Closed, 0),
    ];
    ck.expect_all(dev, &layout).await?;
    Ok(layout)
}

/// A zone (index) whose (state, WP offset) an action changes.
type Change = (usize, S, u64);

async fn select_all<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&unlimited_geometry());
    let ck = Ck::new(21, g);
    let (cap, size) = (g.zone_capacity, g.zone_size);
    let changes: [(A, &[Change]); 5] = [
        (
            A::Open,
            &[(3, S::ExplicitlyOpened, 4), (7, S::ExplicitlyOpened, 0)],
        ),
        (A::Close, &[(1, S::Closed, 4), (2, S::Closed, 4)]),
        (
            A::Finish,
            &[
                (1, S::Full, cap),
                (2, S::Full, cap),
                (3, S::Full, cap),
                (7, S::Full, cap),
            ],
        ),
        (
            A::Reset,
            &[
                (1, S::Empty, 0),
                (2, S::Empty, 0),
                (3, S::Empty, 0),
                (4, S::Empty, 0),
                (7, S::Empty, 0),
            ],
        ),
        (A::Offline, &[(5, S::Offline, size)]),
    ];
    for (action, changed) in changes {
        let dev = f.create(&g).await;
        let mut expected = build_layout(&ck, f, &dev).await?;
        for (z, state, wp) in changed {
            expected[*z] = (*state, *wp);
        }
        // The SLBA is ignored with Select All, so an address that is no zone start is fine.
        let r = dev.zone_mgmt(action, 5, true).await;
        ck.ok(&format!("select all {}", action.name()), r)?;
        ck.expect_all(&dev, &expected).await?;
    }
    select_all_stops_at_first_error(f).await
}

/// Select All Open at the open limit: zones are opened in ascending order until the first
/// failure, which is returned; the zones opened before it stay open.
async fn select_all_stops_at_first_error<F: DeviceFactory>(f: &F) -> KitResult {
    let g: Geometry = f.geometry_for(&kit_geometry());
    let ck = Ck::new(21, g);
    let dev = f.create(&g).await;
    for z in 0..4 {
        ck.mgmt(&dev, A::Open, z).await?;
        ck.mgmt(&dev, A::Close, z).await?;
    }
    ck.expect_counts(&dev, 0, 4).await?;
    let r = dev.zone_mgmt(A::Open, 0, true).await;
    ck.err(
        "select all open beyond the open limit",
        r,
        E::TooManyOpenZones,
    )?;
    let mut expected = vec![(S::ExplicitlyOpened, 0); 3];
    expected.push((S::Closed, 0));
    expected.extend([(S::Empty, 0); 4]);
    ck.expect_all(&dev, &expected).await
}
