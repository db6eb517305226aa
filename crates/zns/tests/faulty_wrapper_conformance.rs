//! The fault-injecting wrapper is transparent when it injects nothing, and its Read Only and
//! Offline zones behave as the checklist says: the whole conformance kit runs against
//! `FaultyZoned<ModelDevice>` with the kit's zone faults applied by the wrapper, not the model.

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
        if let Err(e) = dev.fault_zone(zone, state).await {
            panic!("zone fault refused: {e}");
        }
    }
}

zns::conformance_tests!(FaultyFactory);
