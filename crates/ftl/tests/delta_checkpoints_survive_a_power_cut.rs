//! Delta checkpoints (docs/FORMAT.md, "Delta checkpoint") under power cuts: a small volume
//! is filled, its second half trimmed, then random overwrites, trims and flushes go into
//! one mapping page, so chains of small deltas follow each full checkpoint while garbage
//! collection resets zones (those the trim emptied, those whose trim records a delta made
//! dead). The body of the 2nd to 5th delta after the trim fails to be written (torn: its
//! header is on the device, its body is not), the volume fails, power is cut. The remount
//! applies the deltas before the torn one and scans from there: every flushed write reads
//! back and every trim stays trimmed. A mount that ignored the deltas finds entries of the
//! full checkpoint into zones reset since and fails (seed 0).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::{block, check_after_crash, device, runtime, BeforeWrite, FaultModel, Watched};
use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, Geometry, NvmeResult, NvmeStatus, SimRng};

/// 4 KiB blocks written one at a time (so a delta's header and body are separate writes),
/// 24 zones of 128 blocks: a full checkpoint of 8 blocks, a slot of 128.
fn geometry() -> Geometry {
    Geometry {
        block_size: 4096,
        zone_count: 24,
        zone_size: 128,
        zone_capacity: 128,
        zasl_blocks: 1,
        mdts_blocks: 1,
        ..common::geometry()
    }
}

/// Counts full and delta checkpoints written (their headers) and, once the `tear_at`th
/// delta's header went out, refuses the next write that is not a user block or a record:
/// the delta's body.
struct Tear {
    fulls: AtomicU64,
    deltas: AtomicU64,
    /// Deltas written since the newest full checkpoint.
    in_chain: AtomicU64,
    /// Set once the volume is full (collection runs from then on).
    tear_at: AtomicU64,
    armed: AtomicBool,
    torn: AtomicBool,
}

#[async_trait]
impl BeforeWrite for Tear {
    async fn before_write(&self, _: &EmuDevice, data: &[u8]) -> NvmeResult<()> {
        if data.starts_with(b"ZSTKFTLC") {
            self.fulls.fetch_add(1, Ordering::SeqCst);
            self.in_chain.store(0, Ordering::SeqCst);
        } else if data.starts_with(b"ZSTKFTLD") {
            self.in_chain.fetch_add(1, Ordering::SeqCst);
            if self.deltas.fetch_add(1, Ordering::SeqCst) + 1 == self.tear_at.load(Ordering::SeqCst)
            {
                self.armed.store(true, Ordering::SeqCst);
            }
        } else if self.armed.load(Ordering::SeqCst)
            && !data.starts_with(b"ZSTK")
            && common::version_of(data).is_none()
        {
            self.armed.store(false, Ordering::SeqCst);
            self.torn.store(true, Ordering::SeqCst);
            return Err(NvmeStatus::InternalError);
        }
        Ok(())
    }
}

fn opts() -> MountOptions {
    MountOptions {
        hot_zones: 2,
        // 4, not 5: a full volume of these 24 zones at 30% leaves at most 3 free, and a
        // mount refuses a watermark no full volume reaches (`ftl::plan::check_watermarks`).
        gc_background_free_zones: 4,
        gc_foreground_free_zones: 3,
        checkpoint_every_zones: 2,
        ..MountOptions::default()
    }
}

#[test]
fn a_torn_delta_ends_the_chain_and_nothing_flushed_is_lost() {
    runtime().block_on(async {
        let (mut torn_seeds, mut applied) = (0, 0);
        for seed in 0..16u64 {
            let emu = device(geometry(), seed);
            let watch = Tear {
                fulls: AtomicU64::new(0),
                deltas: AtomicU64::new(0),
                in_chain: AtomicU64::new(0),
                tear_at: AtomicU64::new(u64::MAX),
                armed: AtomicBool::new(false),
                torn: AtomicBool::new(false),
            };
            let dev = Arc::new(Watched {
                inner: Arc::clone(&emu),
                watch,
            });
            ftl::format(dev.as_ref(), FormatOptions::with_op(300), seed, false)
                .await
                .expect("format");
            let layout = ftl::probe(dev.as_ref()).await.expect("probe");
            assert!(layout.has_delta_room(), "the test needs deltas");
            let vol = FtlVolume::mount(dev.clone(), opts())
                .await
                .expect("mount")
                .0;
            let n = vol.size_blocks();
            let bs = vol.block_size() as usize;
            let mut model = FaultModel::new(n);
            let mut rng = SimRng::new(seed);
            let mut version = 0u64;
            // Fill the volume, so that collection resets zones from then on.
            for lba in 0..n {
                version += 1;
                vol.write(lba, &block(bs, version), false)
                    .await
                    .expect("fill");
                model.submitted(lba, version);
                model.completed(lba, version, false);
            }
            let so_far = dev.watch.deltas.load(Ordering::SeqCst);
            dev.watch
                .tear_at
                .store(so_far + 4 + seed % 4, Ordering::SeqCst);
            // Writes cluster in the first mapping page, so deltas stay small and chains long.
            for _ in 0..50_000 {
                if dev.watch.torn.load(Ordering::SeqCst) {
                    break;
                }
                let lba = rng.below(256);
                let r = rng.below(100);
                let ok = if r < 15 {
                    let len = rng.range_inclusive(1, 8).min(n - lba);
                    for l in lba..lba + len {
                        model.submitted(l, 0);
                    }
                    let ok = vol.trim(lba, len).await.is_ok();
                    if ok {
                        for l in lba..lba + len {
                            model.completed_last(l, false);
                        }
                    }
                    ok
                } else if r < 17 {
                    let ok = vol.flush().await.is_ok();
                    if ok {
                        model.flushed();
                    }
                    ok
                } else {
                    version += 1;
                    model.submitted(lba, version);
                    let ok = vol.write(lba, &block(bs, version), false).await.is_ok();
                    if ok {
                        model.completed(lba, version, false);
                    }
                    ok
                };
                if !ok {
                    break;
                }
            }
            let torn = dev.watch.torn.load(Ordering::SeqCst);
            let in_chain = dev.watch.in_chain.load(Ordering::SeqCst);
            vol.crash().await;
            drop(vol);
            emu.power_loss(seed).expect("power loss");
            let what = format!("seed {seed}");
            let (vol, report) = FtlVolume::mount(dev.clone(), opts())
                .await
                .unwrap_or_else(|e| panic!("{what}: mount after the cut: {e}"));
            if torn {
                torn_seeds += 1;
                assert!(
                    report.deltas_applied < in_chain,
                    "{what}: the torn delta was applied ({report:?}, {in_chain} in the chain)"
                );
            }
            applied += report.deltas_applied;
            check_after_crash(&vol, &mut model, &what).await;
            vol.unmount().await.expect("unmount");
            let fulls = dev.watch.fulls.load(Ordering::SeqCst);
            assert!(fulls >= 2, "{what}: {fulls} full checkpoints");
        }
        println!("{torn_seeds} seeds tore a delta, mounts applied {applied} deltas");
        assert!(torn_seeds >= 12, "only {torn_seeds} seeds tore a delta");
        assert!(applied >= 6, "mounts applied only {applied} deltas");
    });
}
