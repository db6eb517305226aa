//! A turn of threaded logging whose record cannot be written writes a checkpoint instead
//! (gc/tl.rs): the volume goes on, the hot stream still writes into the re-opened zones, and
//! after a power cut every durable write reads back. The device here refuses every write of
//! a threaded-logging record block (its magic), so every turn takes that path.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::{block, geometry, BeforeWrite, VersionModel, Watched};
use emu::EmuDevice;
use ftl::threaded::TlPolicy;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, Geometry, NvmeResult, NvmeStatus, SimRng};

/// Refuses every write of a threaded-logging record.
struct NoRecords {
    refused: AtomicU64,
}

#[async_trait]
impl BeforeWrite for NoRecords {
    async fn before_write(&self, _: &EmuDevice, data: &[u8]) -> NvmeResult<()> {
        if data.starts_with(b"ZSTKTLRC") {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(NvmeStatus::InternalError);
        }
        Ok(())
    }
}

async fn schedule(seed: u64) -> (u64, u64) {
    let mut rng = SimRng::new(seed);
    let emu_dev = common::device_plus(
        Geometry {
            block_size: 4096,
            ..geometry()
        },
        seed,
    );
    let dev = Arc::new(Watched {
        inner: emu_dev.clone(),
        watch: NoRecords {
            refused: AtomicU64::new(0),
        },
    });
    let fmt = FormatOptions {
        threaded_logging: true,
        ..FormatOptions::with_op(580)
    };
    ftl::format(dev.as_ref(), fmt, seed, false)
        .await
        .expect("format");
    let small = common::small_opts();
    let opts = MountOptions {
        write_mode: ftl::WriteMode::ZoneWrite,
        threaded: TlPolicy::Always,
        // Collection from one zone above the floor, as the automatic watermarks on a
        // threaded volume: a turn comes when collection would, and with `small_opts`' two
        // zones above the floor collection took the zones with holes first and no seed made
        // a turn.
        gc_background_free_zones: small.gc_foreground_free_zones + 1,
        ..small
    };
    let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut model = VersionModel::new(n);
    let mut version = 0;
    for i in 0..8 * n {
        let lba = rng.below(n);
        let fua = rng.chance(0.1);
        version += 1;
        vol.write(lba, &block(bs, version), fua)
            .await
            .unwrap_or_else(|e| panic!("seed {seed} write {i}: {e}"));
        model.write(lba, version, fua);
        if rng.chance(0.05) {
            vol.flush().await.expect("flush");
            model.flush();
        }
    }
    let s = vol.stats();
    assert_eq!(s.threaded.records, 0, "seed {seed}: no record was written");
    emu_dev.power_loss(rng.next_u64()).expect("power loss");
    vol.crash().await;
    let (vol, _) = FtlVolume::mount(dev.clone(), opts)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: mount after the cut: {e}"));
    model.check_all(&vol, seed, "after the power loss").await;
    assert!(dev.watch.refused.load(Ordering::Relaxed) >= s.threaded.record_failures);
    (s.threaded.record_failures, s.threaded.hole_blocks)
}

#[test]
fn a_turn_whose_record_fails_writes_a_checkpoint_instead() {
    let (mut failures, mut holes) = (0, 0);
    for seed in 0..4 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let (f, h) = rt.block_on(schedule(seed));
        failures += f;
        holes += h;
    }
    assert!(failures >= 4, "only {failures} turns lost their record");
    assert!(holes >= 100, "only {holes} blocks written into holes");
}
