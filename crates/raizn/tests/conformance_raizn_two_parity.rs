//! The ZNS conformance kit against a RAIZN volume with two parity units per stripe
//! (Reed-Solomon): four in-memory emulated members, two data units and two parity units.
//!
//! The logical geometry is the one of the three-member RAID-5 array of
//! `conformance_raizn.rs` (two data units), so item 38 is left out for the same reason
//! (a capacity of 33 blocks cannot be split over two data units; that file asserts it is
//! the only difference). Fewer random seeds than there: the m = 1 file covers the kit's
//! randomized runs, and this one what the second parity unit changes on the write path.

mod common;

use std::sync::LazyLock;

use common::RaiznFactory;
use zns::conformance::{
    __block_on_check, differential, power_loss_prefix, reopen_identical, run_item, KitFailure,
};

static FACTORY: LazyLock<RaiznFactory> = LazyLock::new(|| RaiznFactory::with_parity(4, 2));

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
