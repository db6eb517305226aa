//! Garbage collection on a ZNS+ device: the FTL relocates with `zone_compaction`, and with
//! copyback-aware destinations (paper Fig. 5) most internal copies are copybacks on the
//! timing model, while destinations packed in source order rarely are. Virtual time, seeded.

mod common;

use std::sync::Arc;

use emu::{EmuConfig, EmuDevice};
use ftl::compaction::Placement;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, Geometry, SimRng, ZonedDevice};

/// 28 zones of 256 blocks of 4 KiB on the femu-mlc model (16 KiB chunks over 16 chips, so a
/// zone is 4 stripes), with 16 B of metadata per block and every zone openable.
fn device(zns_plus: bool) -> Arc<EmuDevice> {
    let g = Geometry {
        block_size: 4096,
        oob_size: 16,
        zone_count: 28,
        zone_size: 256,
        zone_capacity: 256,
        max_open: 28,
        max_active: 28,
        zasl_blocks: 64,
        mdts_blocks: 64,
        copy_max_ranges: 16,
        copy_max_range_blocks: 64,
        copy_max_blocks: 64,
        cross_zone_reads: false,
    };
    let cfg = EmuConfig {
        seed: 3,
        zns_plus,
        ..EmuConfig::new(g)
    };
    let p = emu::timing::timing_profile("femu-mlc").expect("femu-mlc");
    Arc::new(
        EmuDevice::new_memory(cfg)
            .and_then(|d| d.with_timing(p, emu::ClockMode::Virtual))
            .expect("timed device"),
    )
}

/// What one run measured.
struct Run {
    copyback_ratio: f64,
    compactions: u64,
    /// Blocks moved by Simple Copy.
    copies: u64,
    gc_zones: u64,
}

/// Fills the volume, overwrites it at random in 32-block writes (so victims hold many fully
/// valid chunks, as a file system's segments do), checks every block, and reads the counters.
async fn run(dev: Arc<EmuDevice>, compaction: Option<Placement>, use_copy: bool) -> Run {
    ftl::format(dev.as_ref(), FormatOptions::with_op(250), 7, false)
        .await
        .expect("format");
    let opts = MountOptions {
        compaction,
        use_copy,
        hot_cold: false,
        // 4, not small_opts' 5: a full volume of these 28 zones at 25% leaves at most 3
        // free, and a mount refuses a watermark no full volume reaches.
        gc_background_free_zones: 4,
        ..common::small_opts()
    };
    let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
    let bs = vol.block_size() as usize;
    let per = 32u64;
    let slots = vol.size_blocks() / per;
    let mut versions = vec![0u64; (slots * per) as usize];
    let mut version = 0u64;
    let mut rng = SimRng::new(42);
    for i in 0..slots * 3 {
        let slot = if i < slots { i } else { rng.below(slots) };
        let mut data = Vec::with_capacity(per as usize * bs);
        for b in 0..per {
            version += 1;
            versions[(slot * per + b) as usize] = version;
            data.extend(common::block(bs, version));
        }
        vol.write(slot * per, &data, false).await.expect("write");
    }
    let mut buf = vec![0u8; bs];
    for (lba, &v) in versions.iter().enumerate() {
        vol.read(lba as u64, &mut buf).await.expect("read");
        assert_eq!(common::version_of(&buf), Some(v), "LBA {lba}");
    }
    let gc_zones = vol.stats().counters.gc_zones;
    vol.unmount().await.expect("unmount");
    let t = dev.timing_counters().expect("timing on");
    let chunk = dev
        .identify_mapping()
        .map_or(0, |m| u64::from(m.chunk_blocks));
    let compacted = dev.stats().blocks_compacted;
    Run {
        // Of blocks, as znsplus-fig6 counts it: the model counts a read-and-program copy per
        // piece (one block of a partly valid chunk is one), which would weigh those by their
        // number rather than their size.
        copyback_ratio: (t.flash.copybacks * chunk) as f64 / compacted.max(1) as f64,
        compactions: dev.stats().compactions,
        copies: dev.stats().blocks_copied - dev.stats().blocks_compacted,
        gc_zones,
    }
}

fn measure(zns_plus: bool, compaction: Option<Placement>, use_copy: bool) -> Run {
    let rt = emu::timing::SimRuntime::new().expect("runtime");
    rt.block_on(run(device(zns_plus), compaction, use_copy))
}

#[test]
fn copyback_aware_destinations_make_most_copies_copybacks() {
    let cab = measure(true, Some(Placement::CopybackAware), true);
    let packed = measure(true, Some(Placement::SourceOrder), true);
    println!(
        "copyback ratio: copyback-aware {:.3} ({} compactions, {} zones collected), \
         source order {:.3}",
        cab.copyback_ratio, cab.compactions, cab.gc_zones, packed.copyback_ratio
    );
    assert!(cab.gc_zones >= 20, "only {} zones collected", cab.gc_zones);
    assert!(cab.compactions > 0 && packed.compactions > 0);
    assert_eq!(cab.copies, 0, "relocated with Simple Copy on a ZNS+ device");
    assert!(
        cab.copyback_ratio > 0.8,
        "copyback ratio {:.3} with copyback-aware destinations",
        cab.copyback_ratio
    );
    assert!(
        packed.copyback_ratio < cab.copyback_ratio - 0.3,
        "source order {:.3} vs copyback-aware {:.3}",
        packed.copyback_ratio,
        cab.copyback_ratio
    );
}

#[test]
fn without_zns_plus_or_with_it_off_collection_copies_as_before() {
    // The same option on a device without the commands: Simple Copy, no compaction.
    let plain = measure(false, Some(Placement::CopybackAware), true);
    assert_eq!(plain.compactions, 0);
    assert!(plain.copies > 0, "no Simple Copy on a plain device");
    // Compaction switched off on a ZNS+ device: read + write, neither command.
    let off = measure(true, None, false);
    assert_eq!((off.compactions, off.copies), (0, 0));
    assert!(off.gc_zones > 0);
}
