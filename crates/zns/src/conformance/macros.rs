//! `conformance_tests!`: expands to one `#[test]` per checklist item plus the randomized
//! property tests, for any `DeviceFactory`. The crate using it needs only `zns`.

use std::future::Future;

use super::KitFailure;

/// Runs one kit check on a fresh current-thread runtime and panics with its failure, which
/// is how a `#[test]` reports it.
pub fn block_on_check(check: impl Future<Output = Result<(), KitFailure>>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("cannot build a tokio runtime for the conformance kit: {e}"),
    };
    if let Err(failure) = runtime.block_on(check) {
        panic!("{failure}");
    }
}

/// Expands to one test for checklist item `$n` named `$name`.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_item_test {
    ($factory:expr, $n:literal, $name:ident) => {
        #[test]
        fn $name() {
            $crate::conformance::__block_on_check($crate::conformance::run_item(&$factory, $n));
        }
    };
}

/// Generates the conformance test suite for a `DeviceFactory` expression:
/// `item_01_...` to `item_53_...` (45-53: ZNS+, passing on devices without it once item 45
/// checked they refuse it cleanly), `differential_random_*`, `power_loss_prefix_*` and
/// `reopen_identical_*`.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::__conformance_item_test!($factory, 1, item_01_fresh_zone_is_empty);
        $crate::__conformance_item_test!($factory, 2, item_02_write_away_from_wp_fails);
        $crate::__conformance_item_test!($factory, 3, item_03_write_at_wp_implicitly_opens);
        $crate::__conformance_item_test!($factory, 4, item_04_commands_advance_wp_exactly);
        $crate::__conformance_item_test!($factory, 5, item_05_reaching_capacity_makes_full);
        $crate::__conformance_item_test!($factory, 6, item_06_write_to_full_zone_fails);
        $crate::__conformance_item_test!($factory, 7, item_07_write_past_capacity_fails);
        $crate::__conformance_item_test!($factory, 8, item_08_write_spanning_zones_fails);
        $crate::__conformance_item_test!($factory, 9, item_09_read_only_zone);
        $crate::__conformance_item_test!($factory, 10, item_10_offline_zone);
        $crate::__conformance_item_test!($factory, 11, item_11_cross_zone_reads);
        $crate::__conformance_item_test!($factory, 12, item_12_reads_above_wp_are_zeros);
        $crate::__conformance_item_test!($factory, 13, item_13_open_transitions);
        $crate::__conformance_item_test!($factory, 14, item_14_invalid_transitions);
        $crate::__conformance_item_test!($factory, 15, item_15_close_keeps_active_slot);
        $crate::__conformance_item_test!($factory, 16, item_16_close_on_empty_and_closed);
        $crate::__conformance_item_test!($factory, 17, item_17_finish_transitions);
        $crate::__conformance_item_test!($factory, 18, item_18_reset_transitions);
        $crate::__conformance_item_test!($factory, 19, item_19_offline_only_from_read_only);
        $crate::__conformance_item_test!($factory, 20, item_20_management_address_checks);
        $crate::__conformance_item_test!($factory, 21, item_21_select_all);
        $crate::__conformance_item_test!($factory, 22, item_22_active_limit_refuses);
        $crate::__conformance_item_test!($factory, 23, item_23_open_limit_closes_oldest_implicit);
        $crate::__conformance_item_test!($factory, 24, item_24_open_limit_all_explicit_fails);
        $crate::__conformance_item_test!($factory, 25, item_25_closed_zone_needs_only_open_slot);
        $crate::__conformance_item_test!($factory, 26, item_26_append_needs_zone_start);
        $crate::__conformance_item_test!($factory, 27, item_27_append_size_limit);
        $crate::__conformance_item_test!($factory, 28, item_28_append_returns_landing_lba);
        $crate::__conformance_item_test!($factory, 29, item_29_concurrent_appends);
        $crate::__conformance_item_test!($factory, 30, item_30_append_never_split);
        $crate::__conformance_item_test!($factory, 31, item_31_append_opens_under_limits);
        $crate::__conformance_item_test!($factory, 32, item_32_writes_in_flight);
        $crate::__conformance_item_test!($factory, 33, item_33_simple_copy);
        $crate::__conformance_item_test!($factory, 34, item_34_write_zeroes_is_zoned);
        $crate::__conformance_item_test!($factory, 35, item_35_report_zones);
        $crate::__conformance_item_test!($factory, 36, item_36_descriptor_fields);
        $crate::__conformance_item_test!($factory, 37, item_37_clean_restart);
        $crate::__conformance_item_test!($factory, 38, item_38_identify);
        $crate::__conformance_item_test!($factory, 39, item_39_lba_out_of_range);
        $crate::__conformance_item_test!($factory, 40, item_40_flush_and_fua_durable);
        $crate::__conformance_item_test!($factory, 41, item_41_power_loss_keeps_prefix);
        $crate::__conformance_item_test!($factory, 42, item_42_metadata_round_trips);
        $crate::__conformance_item_test!($factory, 43, item_43_status_codes);
        $crate::__conformance_item_test!($factory, 44, item_44_reference_defaults);
        $crate::__conformance_item_test!($factory, 45, item_45_zns_plus_capability);
        $crate::__conformance_item_test!($factory, 46, item_46_zone_compaction_copies);
        $crate::__conformance_item_test!($factory, 47, item_47_zone_compaction_errors);
        $crate::__conformance_item_test!($factory, 48, item_48_tl_open_errors);
        $crate::__conformance_item_test!($factory, 49, item_49_tl_open_effect);
        $crate::__conformance_item_test!($factory, 50, item_50_tl_writes);
        $crate::__conformance_item_test!($factory, 51, item_51_tl_management);
        $crate::__conformance_item_test!($factory, 52, item_52_tl_clean_restart);
        $crate::__conformance_item_test!($factory, 53, item_53_tl_power_loss);

        #[test]
        fn differential_random_seeds_1_to_64() {
            $crate::conformance::__block_on_check(async {
                for seed in 1..=64u64 {
                    $crate::conformance::differential(&$factory, seed, 1000).await?;
                }
                Ok::<(), $crate::conformance::KitFailure>(())
            });
        }

        #[test]
        fn differential_random_seeds_1001_to_1032() {
            $crate::conformance::__block_on_check(async {
                for seed in 1001..=1032u64 {
                    $crate::conformance::differential(&$factory, seed, 1000).await?;
                }
                Ok::<(), $crate::conformance::KitFailure>(())
            });
        }

        #[test]
        fn power_loss_prefix_seeds_1_to_16() {
            $crate::conformance::__block_on_check(async {
                for seed in 1..=16u64 {
                    $crate::conformance::power_loss_prefix(&$factory, seed).await?;
                }
                Ok::<(), $crate::conformance::KitFailure>(())
            });
        }

        #[test]
        fn power_loss_prefix_seeds_9001_to_9016() {
            $crate::conformance::__block_on_check(async {
                for seed in 9001..=9016u64 {
                    $crate::conformance::power_loss_prefix(&$factory, seed).await?;
                }
                Ok::<(), $crate::conformance::KitFailure>(())
            });
        }

        #[test]
        fn reopen_identical_seeds_1_to_8() {
            $crate::conformance::__block_on_check(async {
                for seed in 1..=8u64 {
                    $crate::conformance::reopen_identical(&$factory, seed).await?;
                }
                Ok::<(), $crate::conformance::KitFailure>(())
            });
        }
    };
}
