//! A memory device allocates all of its memory when asked (`EmuDevice::prefault`), keeps what
//! was written before, and behaves as before afterwards; an image has nothing to allocate.

mod common;

use common::block_on;
use emu::{EmuConfig, EmuDevice};
use zns::{Geometry, ZonedDevice};

/// A device of 8 MiB of data, several of the memory store's 1 MiB chunks, so that one write
/// allocates only part of it.
fn device() -> EmuDevice {
    let g = Geometry {
        block_size: 4096,
        zone_size: 256,
        zone_capacity: 256,
        mdts_blocks: 256,
        ..common::small_geometry()
    };
    EmuDevice::new_memory(EmuConfig::new(g)).expect("valid geometry")
}

#[test]
fn prefault_allocates_everything_once_and_keeps_data() {
    block_on(async {
        let dev = device();
        let g = dev.geometry();
        let bs = g.block_size as usize;
        let first = common::block(bs, 0, 1);
        dev.write(0, &first, None, false).await.expect("write");
        let before = dev.footprint_bytes();
        let total = g.total_blocks() * u64::from(g.block_size + g.oob_size);
        assert!(before < total, "a memory device starts sparse");
        let fresh = dev.prefault();
        assert!(fresh > 0 && fresh <= total, "allocated {fresh} of {total}");
        let after = dev.footprint_bytes();
        assert_eq!(after, before + fresh);
        assert!(after >= total, "every byte has memory: {after} of {total}");
        assert_eq!(dev.prefault(), 0, "nothing is allocated twice");
        let mut got = vec![0u8; bs];
        dev.read(0, &mut got, None).await.expect("read");
        assert_eq!(got, first, "data written before is kept");
        let second = common::block(bs, 1, 1);
        dev.write(1, &second, None, false).await.expect("write");
        dev.read(1, &mut got, None).await.expect("read");
        assert_eq!(got, second);
        assert_eq!(
            dev.footprint_bytes(),
            after,
            "writes after it allocate nothing"
        );
    });
}
