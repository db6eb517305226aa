//! The ZNS conformance kit against a RAIZN volume whose members keep a pool of three
//! partial-parity log zones (K = 3, `raizn create --log-zones 3`; the pool is what create
//! takes by default where the members have the zones): three in-memory emulated members,
//! each with the two zones more the pool takes, so the logical geometry is the one of
//! `conformance_raizn.rs`. Item 38 is left out for the reason that file gives (a capacity
//! of 33 blocks cannot be split over two data units; it asserts that is the only
//! difference). Fewer random seeds than there: the pool changes where records go, at
//! rotation and collection of the log, and what open reads.

mod common;

use std::sync::LazyLock;

use common::RaiznFactory;
use zns::conformance::{
    __block_on_check, differential, power_loss_prefix, reopen_identical, run_item, KitFailure,
};

static FACTORY: LazyLock<RaiznFactory> = LazyLock::new(|| RaiznFactory::with_log_zones(3, 3));

#[test]
fn every_item_but_38_passes() {
    for item in (1..=44u32).filter(|i| *i != 38) {
        __block_on_check(run_item(&*FACTORY, item));
    }
}

#[test]
fn differential_random_seeds_1_to_16() {
    __block_on_check(async {
        for seed in 1..=16u64 {
            differential(&*FACTORY, seed, 1000).await?;
        }
        Ok::<(), KitFailure>(())
    });
}

#[test]
fn power_loss_prefix_and_reopen_seeds_1_to_8() {
    __block_on_check(async {
        for seed in 1..=8u64 {
            power_loss_prefix(&*FACTORY, seed).await?;
            reopen_identical(&*FACTORY, seed).await?;
        }
        Ok::<(), KitFailure>(())
    });
}

/// The arrays the kit gets do keep a pool.
#[test]
fn the_factory_builds_arrays_with_a_pool() {
    __block_on_check(async {
        use zns::conformance::DeviceFactory;
        let g = zns::conformance::kit_geometry();
        let v = FACTORY.create(&g).await;
        assert_eq!(v.layout().log_zones(), 3);
        assert_eq!(zns::ZonedDevice::geometry(&v).zone_count, g.zone_count);
        Ok::<(), KitFailure>(())
    });
}
