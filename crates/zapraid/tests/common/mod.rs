//! Helpers shared by ZapRAID's integration tests: emulated memory members and block contents.
#![allow(dead_code)]

use std::sync::Arc;

use emu::{EmuConfig, EmuDevice};
use zns::{Geometry, ZonedDevice};

/// 4 KiB blocks with 64 B metadata; zones of 64 blocks: 1 header, 62 data, 1 footer block.
pub fn geometry(zones: u32) -> Geometry {
    Geometry {
        block_size: 4096,
        oob_size: 64,
        zone_count: zones,
        zone_size: 64,
        zone_capacity: 64,
        max_open: zones.min(8),
        max_active: zones.min(8),
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 4,
        copy_max_range_blocks: 16,
        copy_max_blocks: 16,
        cross_zone_reads: false,
    }
}

pub fn emu_members(n: usize, zones: u32, seed: u64) -> Vec<Arc<EmuDevice>> {
    (0..n)
        .map(|i| {
            Arc::new(
                EmuDevice::new_memory(EmuConfig {
                    seed: seed * 31 + i as u64,
                    ..EmuConfig::new(geometry(zones))
                })
                .expect("emulated member"),
            )
        })
        .collect()
}

pub fn as_zoned<D: ZonedDevice + 'static>(m: &[Arc<D>]) -> Vec<Arc<dyn ZonedDevice>> {
    m.iter()
        .map(|d| d.clone() as Arc<dyn ZonedDevice>)
        .collect()
}

/// A block naming its LBA and version, so a misplaced or stale block is recognised.
pub fn block(bs: usize, lba: u64, version: u64) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    for (i, c) in b.chunks_mut(16).enumerate() {
        c[..8].copy_from_slice(&lba.to_le_bytes());
        c[8..16].copy_from_slice(&(version ^ (i as u64) << 48).to_le_bytes());
    }
    b
}

/// Paused-clock current-thread runtime: a run repeats exactly.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}
