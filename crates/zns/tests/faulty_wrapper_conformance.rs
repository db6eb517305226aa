//! The fault-injecting wrapper is transparent when it injects nothing: the whole conformance
//! kit runs against `FaultyZoned<ModelDevice>` and must see the model's behaviour exactly. The
//! kit's zone faults are applied to the model underneath; the wrapper's own Read Only and
//! Offline zones are checked by the unit tests in faulty.rs (they refuse commands before the
//! device sees them, so the order of status checks differs from a device's for commands that
//! are wrong in several ways at once).

use async_trait::async_trait;
use zns::conformance::DeviceFactory;
use zns::{FaultyZoned, Geometry, ModelDevice, ZoneState};

struct FaultyFactory;

#[async_trait]
impl DeviceFactory for FaultyFactory {
    type Device = FaultyZoned<ModelDevice>;

    async fn create(&self, geometry: &Geometry) -> FaultyZoned<ModelDevice> {
        match ModelDevice::new(*geometry) {
            Ok(dev) => FaultyZoned::new(dev, 1),
            Err(e) => panic!("the kit asked for an invalid geometry: {e}"),
        }
    }

    async fn restart(&self, dev: FaultyZoned<ModelDevice>) -> FaultyZoned<ModelDevice> {
        let faults = dev.zone_faults();
        let mut model = dev.into_inner().into_model();
        model.restart();
        FaultyZoned::new(ModelDevice::from_model(model), 1).with_zone_faults(&faults)
    }

    async fn power_cycle(
        &self,
        dev: FaultyZoned<ModelDevice>,
        seed: u64,
    ) -> FaultyZoned<ModelDevice> {
        let faults = dev.zone_faults();
        let mut model = dev.into_inner().into_model();
        model.power_cycle(seed);
        FaultyZoned::new(ModelDevice::from_model(model), 1).with_zone_faults(&faults)
    }

    async fn set_zone_state(&self, dev: &FaultyZoned<ModelDevice>, zone: u32, state: ZoneState) {
        if let Err(e) = dev.inner().with_model(|m| m.set_zone_state(zone, state)) {
            panic!("zone fault refused: {e}");
        }
    }
}

zns::conformance_tests!(FaultyFactory);
