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

/// `zones` zones of `zone_blocks` 4 KiB blocks, capacity = size, every zone may be open at
/// once, copies of up to 4 ranges and 64 blocks: the geometry of the ZNS+ tests.
pub fn znsplus_geometry(zones: u32, zone_blocks: u64) -> Geometry {
    Geometry {
        block_size: 4096,
        oob_size: 0,
        zone_count: zones,
        zone_size: zone_blocks,
        zone_capacity: zone_blocks,
        max_open: zones,
        max_active: zones,
        zasl_blocks: 64,
        mdts_blocks: 64,
        copy_max_ranges: 4,
        copy_max_range_blocks: 64,
        copy_max_blocks: 64,
        cross_zone_reads: false,
    }
}

/// A ZNS+ device of `zones` zones of `zone_blocks` 4 KiB blocks on the femu-mlc timing model
/// (ZNS+ Table 2) in virtual time; every zone may be open at once.
pub fn timed_znsplus(zones: u32, zone_blocks: u64) -> EmuDevice {
    let g = znsplus_geometry(zones, zone_blocks);
    let cfg = EmuConfig {
        zns_plus: true,
        ..EmuConfig::new(g)
    };
    let p = emu::timing::timing_profile("femu-mlc").expect("femu-mlc");
    EmuDevice::new_memory(cfg)
        .and_then(|d| d.with_timing(p, emu::ClockMode::Virtual))
        .expect("timed ZNS+ device")
}
