//! The emulator tells a host how its timing model stripes a zone over the dies
//! (`ZonedDevice::die_stripe`), untimed it says nothing, and the wrappers that pass a device
//! on pass the hint on.

mod common;

use std::sync::Arc;

use emu::timing::{timing_profile, TimingProfile};
use emu::{ClockMode, EmuConfig, EmuDevice};
use zns::{
    DieStripe, FaultyZoned, Geometry, Hook, Hooked, NvmeResult, OpKind, ZoneAction, ZonedDevice,
};

/// The ZNS+ tests' geometry (8 zones of 4,096 blocks) at `block_size`.
fn geometry(block_size: u32) -> Geometry {
    Geometry {
        block_size,
        ..common::znsplus_geometry(8, 4096)
    }
}

fn device(block_size: u32, timing: Option<TimingProfile>) -> EmuDevice {
    let dev = EmuDevice::new_memory(EmuConfig::new(geometry(block_size))).expect("device");
    match timing {
        Some(p) => dev
            .with_timing(p, ClockMode::Virtual)
            .expect("timed device"),
        None => dev,
    }
}

#[test]
fn the_hint_is_the_timing_models_stripe_and_none_untimed() {
    let zn540 = timing_profile("zn540").expect("zn540");
    // zn540: 2 planes of 16 KiB pages per die op, 8 channels x 4 dies, zones over all 32.
    assert_eq!(
        device(4096, Some(zn540)).die_stripe(),
        Some(DieStripe {
            unit_blocks: 8,
            dies: 32
        })
    );
    assert_eq!(
        device(512, Some(zn540)).die_stripe(),
        Some(DieStripe {
            unit_blocks: 64,
            dies: 32
        })
    );
    // Zones over a group of 8 dies: the stripe is over those 8.
    let grouped = TimingProfile {
        zone_dies: 8,
        ..zn540
    };
    let d = device(4096, Some(grouped));
    assert_eq!(
        d.die_stripe(),
        Some(DieStripe {
            unit_blocks: 8,
            dies: 8
        })
    );
    // Block 8 * 8 + 3 of a zone is on its group's die 0 again.
    assert_eq!(d.die_stripe().map(|s| s.die(8 * 8 + 3)), Some(0));
    assert_eq!(d.die_stripe().map(|s| s.die(8 * 7)), Some(7));
    assert_eq!(device(4096, None).die_stripe(), None);
}

struct Pass;
#[async_trait::async_trait]
impl Hook for Pass {
    async fn before(&self, _op: OpKind, _action: Option<ZoneAction>) -> NvmeResult<()> {
        Ok(())
    }
}

#[test]
fn wrappers_pass_the_hint_on() {
    let zn540 = timing_profile("zn540").expect("zn540");
    let timed = Arc::new(device(4096, Some(zn540)));
    let want = timed.die_stripe();
    assert!(want.is_some());
    let shared: Arc<dyn ZonedDevice> = Arc::clone(&timed) as Arc<dyn ZonedDevice>;
    assert_eq!(shared.die_stripe(), want);
    let faulty = FaultyZoned::new(Arc::clone(&timed), 1);
    assert_eq!(faulty.die_stripe(), want);
    let hooked = Hooked::new(Arc::clone(&timed), Pass);
    assert_eq!(hooked.die_stripe(), want);
    let untimed = FaultyZoned::new(device(4096, None), 1);
    assert_eq!(untimed.die_stripe(), None);
}
