//! The conformance kit against devices with the timing model on: timing decides only when
//! commands complete, so every checklist item and the differential and power-loss properties
//! must hold exactly as without it. Runs in virtual time (`SimRuntime`), for every profile.

use async_trait::async_trait;
use emu::timing::{sim_steps, timing_profiles, TimingProfile};
use emu::{ClockMode, EmuConfig, EmuDevice, SimRuntime};
use zns::conformance::{differential, power_loss_prefix, run_item, DeviceFactory};
use zns::{Geometry, ZoneState};

struct TimedFactory(TimingProfile);

#[async_trait]
impl DeviceFactory for TimedFactory {
    type Device = EmuDevice;

    async fn create(&self, geometry: &Geometry) -> EmuDevice {
        let cfg = EmuConfig {
            seed: 0x5eed,
            ..EmuConfig::new(*geometry)
        };
        match EmuDevice::new_memory(cfg).and_then(|d| d.with_timing(self.0, ClockMode::Virtual)) {
            Ok(d) => d,
            Err(e) => panic!("the kit asked for a device timing refuses: {e}"),
        }
    }

    async fn restart(&self, dev: EmuDevice) -> EmuDevice {
        if let Err(e) = dev.restart() {
            panic!("restart failed: {e}");
        }
        dev
    }

    async fn power_cycle(&self, dev: EmuDevice, seed: u64) -> EmuDevice {
        if let Err(e) = dev.power_loss(seed) {
            panic!("power loss failed: {e}");
        }
        dev
    }

    async fn set_zone_state(&self, dev: &EmuDevice, zone: u32, state: ZoneState) {
        if let Err(e) = dev.set_zone_state(zone, state) {
            panic!("fault injection failed: {e}");
        }
    }
}

#[test]
fn every_item_and_property_holds_with_timing_on() {
    for p in timing_profiles() {
        let f = TimedFactory(p);
        let rt = SimRuntime::new().expect("runtime");
        let r = rt.block_on(async {
            for item in 1..=44 {
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
