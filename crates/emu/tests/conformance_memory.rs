//! The ZNS conformance kit, every checklist item and the property tests, against the
//! emulator's memory backend.

use async_trait::async_trait;
use emu::{EmuConfig, EmuDevice};
use zns::conformance::DeviceFactory;
use zns::{Geometry, ZoneState};

struct MemoryFactory;

#[async_trait]
impl DeviceFactory for MemoryFactory {
    type Device = EmuDevice;

    async fn create(&self, geometry: &Geometry) -> EmuDevice {
        match EmuDevice::new_memory(EmuConfig {
            seed: 0x5eed,
            ..EmuConfig::new(*geometry)
        }) {
            Ok(d) => d,
            Err(e) => panic!("the kit asked for an invalid geometry: {e}"),
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

zns::conformance_tests!(MemoryFactory);
