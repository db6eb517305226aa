//! The kit says "not applicable" for an item that needs what a factory cannot do (a real
//! drive has no power-loss control and cannot force zone states), instead of passing or
//! failing it, and still passes and fails the items the factory can run.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use zns::conformance::{check_item, DeviceFactory, Outcome};
use zns::{Geometry, ModelDevice, ZoneState};

/// Model devices that cannot be power-cycled or have zone states forced, like a real drive;
/// `break_reports` makes every device report zone 0 wrongly (a device defect).
#[derive(Default)]
struct DriveLike {
    unsupported: Mutex<Option<String>>,
    break_capacity: AtomicBool,
}

impl DriveLike {
    fn note(&self, what: &str) {
        self.unsupported
            .lock()
            .get_or_insert_with(|| what.to_string());
    }
}

#[async_trait]
impl DeviceFactory for DriveLike {
    type Device = ModelDevice;

    async fn create(&self, geometry: &Geometry) -> ModelDevice {
        let mut g = *geometry;
        if self.break_capacity.load(Ordering::Relaxed) {
            g.zone_capacity -= 1;
        }
        ModelDevice::new(g).expect("valid geometry")
    }
    async fn restart(&self, dev: ModelDevice) -> ModelDevice {
        dev
    }
    async fn power_cycle(&self, dev: ModelDevice, _seed: u64) -> ModelDevice {
        self.note("needs power-loss control");
        dev
    }
    async fn set_zone_state(&self, _dev: &ModelDevice, _zone: u32, _state: ZoneState) {
        self.note("needs device-side zone faults");
    }
    fn take_unsupported(&self) -> Option<String> {
        self.unsupported.lock().take()
    }
}

fn run(f: &DriveLike, item: u32) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(check_item(f, item))
}

#[test]
fn power_loss_and_zone_fault_items_are_not_applicable_not_passed() {
    let f = DriveLike::default();
    assert_eq!(
        run(&f, 41),
        Outcome::NotApplicable("needs power-loss control".into())
    );
    assert_eq!(
        run(&f, 10),
        Outcome::NotApplicable("needs device-side zone faults".into())
    );
    // What the factory can do still passes, and nothing carries over from the items before.
    assert_eq!(run(&f, 1), Outcome::Pass);
    assert_eq!(run(&f, 38), Outcome::Pass);
}

#[test]
fn runnable_items_still_fail_on_a_defective_device() {
    let f = DriveLike::default();
    f.break_capacity.store(true, Ordering::Relaxed);
    assert!(
        matches!(run(&f, 1), Outcome::Fail(e) if e.item == 1),
        "capacity differs from the geometry"
    );
}
