//! The conformance kit's factory for in-memory emulated devices, with or without the timing
//! model; restart and power loss happen in place.

use async_trait::async_trait;
use emu::timing::TimingProfile;
use emu::{ClockMode, EmuConfig, EmuDevice};
use zns::conformance::DeviceFactory;
use zns::{Geometry, ZoneState};

/// Builds memory-backed devices; `timing` turns the timing model on in virtual time,
/// `zns_plus` the ZNS+ commands.
pub struct MemoryFactory {
    pub timing: Option<TimingProfile>,
    pub zns_plus: bool,
}

#[async_trait]
impl DeviceFactory for MemoryFactory {
    type Device = EmuDevice;

    async fn create(&self, geometry: &Geometry) -> EmuDevice {
        let cfg = EmuConfig {
            seed: 0x5eed,
            zns_plus: self.zns_plus,
            ..EmuConfig::new(*geometry)
        };
        let dev = EmuDevice::new_memory(cfg).and_then(|d| match self.timing {
            Some(p) => d.with_timing(p, ClockMode::Virtual),
            None => Ok(d),
        });
        match dev {
            Ok(d) => d,
            Err(e) => panic!("the kit asked for a device the emulator refuses: {e}"),
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
