//! Helpers shared by the FTL's integration tests: a small emulated device and a runtime.
#![allow(dead_code)]

use std::sync::Arc;

use emu::{EmuConfig, EmuDevice};
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::Geometry;

/// 20 zones of 64 blocks of 512 bytes, 16 B metadata, 12 open / 12 active.
pub fn geometry() -> Geometry {
    Geometry {
        block_size: 512,
        oob_size: 16,
        zone_count: 20,
        zone_size: 64,
        zone_capacity: 64,
        max_open: 12,
        max_active: 12,
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 8,
        copy_max_range_blocks: 16,
        copy_max_blocks: 16,
        cross_zone_reads: false,
    }
}

pub fn device(geometry: Geometry, seed: u64) -> Arc<EmuDevice> {
    Arc::new(
        EmuDevice::new_memory(EmuConfig {
            seed,
            ..EmuConfig::new(geometry)
        })
        .expect("device"),
    )
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub fn small_opts() -> MountOptions {
    MountOptions {
        hot_zones: 2,
        gc_background_free_zones: 5,
        gc_foreground_free_zones: 3,
        checkpoint_every_zones: 3,
        ..MountOptions::default()
    }
}

pub async fn fresh(dev: &Arc<EmuDevice>, op_permille: u32, opts: MountOptions) -> Arc<FtlVolume> {
    ftl::format(dev.as_ref(), FormatOptions::with_op(op_permille), 7, false)
        .await
        .expect("format");
    FtlVolume::mount(dev.clone(), opts).await.expect("mount").0
}

/// A block whose every 8 bytes hold `version` (0 reads as a never-written block).
pub fn block(bs: usize, version: u64) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    if version != 0 {
        for c in b.chunks_mut(8) {
            c.copy_from_slice(&version.to_le_bytes());
        }
    }
    b
}

/// The version a block holds, or None if it is not a well-formed versioned block.
pub fn version_of(b: &[u8]) -> Option<u64> {
    let v = u64::from_le_bytes(b[..8].try_into().ok()?);
    b.chunks(8).all(|c| c == v.to_le_bytes()).then_some(v)
}
