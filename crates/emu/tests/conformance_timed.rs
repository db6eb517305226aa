//! The conformance kit against devices with the timing model on: timing decides only when
//! commands complete, so every checklist item and the differential and power-loss properties
//! must hold exactly as without it, the ZNS+ items (45-53) included. Runs in virtual time
//! (`SimRuntime`), for every profile.

mod memory_factory;

use emu::timing::{sim_steps, timing_profiles};
use emu::SimRuntime;
use memory_factory::MemoryFactory;
use zns::conformance::{differential, power_loss_prefix, run_item};

#[test]
fn every_item_and_property_holds_with_timing_on() {
    for p in timing_profiles() {
        let f = MemoryFactory {
            timing: Some(p),
            zns_plus: true,
        };
        let rt = SimRuntime::new().expect("runtime");
        let r = rt.block_on(async {
            for item in 1..=53 {
                run_item(&f, item).await?;
            }
            for seed in 1..=4u64 {
                differential(&f, seed, 500).await?;
                power_loss_prefix(&f, seed).await?;
            }
            // The devices really were timed: virtual time moved from event to event.
            assert!(sim_steps() > 1000, "only {} clock steps", sim_steps());
            Ok::<(), zns::conformance::KitFailure>(())
        });
        if let Err(e) = r {
            panic!("profile {}: {e}", p.name);
        }
    }
}
