//! Runs the whole conformance kit against the reference model, so that the kit itself is
//! checked: every item must pass on `ModelDevice`.

use async_trait::async_trait;
use zns::conformance::DeviceFactory;
use zns::{Geometry, ModelDevice, ZoneState};

/// Builds `ModelDevice`s; restart and power loss go through the model's own rules.
struct ModelFactory;

#[async_trait]
impl DeviceFactory for ModelFactory {
    type Device = ModelDevice;

    async fn create(&self, geometry: &Geometry) -> ModelDevice {
        match ModelDevice::new(*geometry) {
            Ok(dev) => dev,
            Err(e) => panic!("the kit asked for an invalid geometry: {e}"),
        }
    }

    async fn restart(&self, dev: ModelDevice) -> ModelDevice {
        let mut model = dev.into_model();
        model.restart();
        ModelDevice::from_model(model)
    }

    async fn power_cycle(&self, dev: ModelDevice, seed: u64) -> ModelDevice {
        let mut model = dev.into_model();
        model.power_cycle(seed);
        ModelDevice::from_model(model)
    }

    async fn set_zone_state(&self, dev: &ModelDevice, zone: u32, state: ZoneState) {
        if let Err(e) = dev.with_model(|m| m.set_zone_state(zone, state)) {
            panic!("the kit asked for an impossible fault on zone {zone} ({state}): {e}");
        }
    }
}

zns::conformance_tests!(ModelFactory);
