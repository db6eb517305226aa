//! Helpers shared by the emulator's integration tests.
#![allow(dead_code)]

use emu::{EmuConfig, EmuDevice};
use zns::Geometry;

/// A small geometry: 8 zones of 32 blocks (24 writable), 512-byte blocks, 8 B metadata.
pub fn small_geometry() -> Geometry {
    Geometry {
        block_size: 512,
        oob_size: 8,
        zone_count: 8,
        zone_size: 32,
        zone_capacity: 24,
        max_open: 3,
        max_active: 4,
        zasl_blocks: 8,
        mdts_blocks: 32,
        copy_max_ranges: 4,
        copy_max_range_blocks: 16,
        copy_max_blocks: 24,
        cross_zone_reads: false,
    }
}

pub fn memory(seed: u64) -> EmuDevice {
    let cfg = EmuConfig {
        seed,
        ..EmuConfig::new(small_geometry())
    };
    EmuDevice::new_memory(cfg).expect("valid test geometry")
}

/// Runs a future to completion on a current-thread runtime (deterministic polling order).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// The content of block `lba` written in round `round`.
pub fn block(bs: usize, lba: u64, round: u64) -> Vec<u8> {
    (0..bs)
        .map(|i| (lba.wrapping_mul(131) ^ round.wrapping_mul(7) ^ i as u64) as u8)
        .collect()
}
