//! A delta checkpoint that fails to be written must leave the mapping pages it would have
//! carried dirty: the next delta (after the error is reported and the caller tries again)
//! must carry them, or its zone table, whose scan starts lie past the blocks those pages
//! map, makes the next mount miss the writes.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::{block, device, runtime, version_of, BeforeWrite, Watched};
use emu::EmuDevice;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, Geometry, NvmeResult, NvmeStatus};

/// 24 zones of 128 blocks of 4 KiB: a full checkpoint of 8 blocks, a slot of 128.
fn geometry() -> Geometry {
    Geometry {
        block_size: 4096,
        zone_count: 24,
        zone_size: 128,
        zone_capacity: 128,
        ..common::geometry()
    }
}

/// Once armed, refuses the first write of a checkpoint header starting with `magic`
/// (`ZSTKFTLD` a delta's, `ZSTKFTLC` a full one's).
struct FailCheckpoint {
    magic: &'static [u8; 8],
    armed: AtomicBool,
    failed: AtomicBool,
}

impl FailCheckpoint {
    fn new(magic: &'static [u8; 8]) -> FailCheckpoint {
        FailCheckpoint {
            magic,
            armed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        }
    }
}

#[async_trait]
impl BeforeWrite for FailCheckpoint {
    async fn before_write(&self, _: &EmuDevice, data: &[u8]) -> NvmeResult<()> {
        if data.starts_with(self.magic) && self.armed.swap(false, Ordering::SeqCst) {
            self.failed.store(true, Ordering::SeqCst);
            return Err(NvmeStatus::InternalError);
        }
        Ok(())
    }
}

async fn read_version(vol: &FtlVolume, lba: u64, bs: usize) -> Option<u64> {
    let mut buf = vec![0u8; bs];
    vol.read(lba, &mut buf).await.expect("read");
    version_of(&buf)
}

/// Formats `dev` (over `emu`) with `seed`, mounts it, makes a first write durable, cuts the
/// power and mounts again: that mount writes a full checkpoint, so its checkpoints may be
/// deltas. Returns the second mount.
async fn mounted_after_a_cut<W: BeforeWrite + Send + Sync + 'static>(
    emu: &Arc<EmuDevice>,
    dev: &Arc<Watched<W>>,
    seed: u64,
    opts: impl Fn() -> MountOptions,
) -> Arc<FtlVolume> {
    ftl::format(dev.as_ref(), FormatOptions::with_op(300), seed, false)
        .await
        .expect("format");
    let vol = FtlVolume::mount(dev.clone(), opts())
        .await
        .expect("mount")
        .0;
    let bs = vol.block_size() as usize;
    vol.write(0, &block(bs, 1), false).await.expect("write");
    vol.flush().await.expect("flush");
    vol.crash().await;
    drop(vol);
    emu.power_loss(seed).expect("power loss");
    FtlVolume::mount(dev.clone(), opts())
        .await
        .expect("mount")
        .0
}

/// Arms `dev`, so the unmount's checkpoint (a `what`) is refused and the unmount fails;
/// then the caller tries the unmount again, and the device writes again.
async fn unmount_refused_then_retried(
    vol: Arc<FtlVolume>,
    dev: &Watched<FailCheckpoint>,
    what: &str,
) {
    dev.watch.armed.store(true, Ordering::SeqCst);
    let first = vol.unmount().await;
    assert!(
        dev.watch.failed.load(Ordering::SeqCst),
        "no {what} was refused"
    );
    assert!(first.is_err(), "the unmount reported no error");
    vol.unmount().await.expect("the unmount tried again");
}

#[test]
fn a_retried_unmount_after_a_failed_delta_loses_no_write() {
    runtime().block_on(async {
        let emu = device(geometry(), 7);
        let dev = Arc::new(Watched {
            inner: Arc::clone(&emu),
            watch: FailCheckpoint::new(b"ZSTKFTLD"),
        });
        let opts = MountOptions::default;
        let vol = mounted_after_a_cut(&emu, &dev, 7, opts).await;
        assert!(
            ftl::probe(dev.as_ref())
                .await
                .expect("probe")
                .has_delta_room(),
            "the test needs deltas"
        );
        let bs = vol.block_size() as usize;
        // LBA 0 overwritten; the unmount's checkpoint, a delta, fails to be written.
        vol.write(0, &block(bs, 2), false).await.expect("write");
        unmount_refused_then_retried(vol, &dev, "delta").await;
        let (vol, report) = FtlVolume::mount(dev.clone(), opts()).await.expect("mount");
        assert_eq!(
            read_version(&vol, 0, bs).await,
            Some(2),
            "LBA 0 after a clean unmount ({report:?})"
        );
        vol.unmount().await.expect("unmount");
    });
}

/// A full checkpoint that fails after the chain's slot was sealed (its partly written zone
/// finished) must not leave the next checkpoint a delta into that slot, nor one without
/// the pages the failed copy cleared.
#[test]
fn a_retried_unmount_after_a_failed_full_checkpoint_succeeds_and_loses_no_write() {
    runtime().block_on(async {
        let emu = device(geometry(), 8);
        let dev = Arc::new(Watched {
            inner: Arc::clone(&emu),
            watch: FailCheckpoint::new(b"ZSTKFTLC"),
        });
        let opts = || MountOptions {
            checkpoint_every_zones: 1,
            ..MountOptions::default()
        };
        // Overwrites of one page after the mount's full checkpoint then bring deltas.
        let vol = mounted_after_a_cut(&emu, &dev, 8, opts).await;
        let bs = vol.block_size() as usize;
        let n = vol.size_blocks();
        let mut version = 1;
        while vol.stats().counters.delta_checkpoints == 0 && version < 2_000 {
            version += 1;
            vol.write(0, &block(bs, version), false)
                .await
                .expect("write");
            tokio::task::yield_now().await;
        }
        assert!(
            vol.stats().counters.delta_checkpoints > 0,
            "no delta written"
        );
        // Every page dirty: the next checkpoint is a full one, and it fails.
        let mut lbas = Vec::new();
        for lba in (1..n).step_by(256) {
            version += 1;
            vol.write(lba, &block(bs, version), false)
                .await
                .expect("write");
            lbas.push((lba, version));
        }
        unmount_refused_then_retried(vol, &dev, "full checkpoint").await;
        let (vol, report) = FtlVolume::mount(dev.clone(), opts()).await.expect("mount");
        for (lba, v) in lbas {
            assert_eq!(
                read_version(&vol, lba, bs).await,
                Some(v),
                "LBA {lba} after a clean unmount ({report:?})"
            );
        }
        vol.unmount().await.expect("unmount");
    });
}

/// Holds the first delta checkpoint's header forever once armed (a device that does not
/// answer: the caller gives up on the request).
struct HangDelta {
    armed: AtomicBool,
    hung: tokio::sync::Notify,
}

#[async_trait]
impl BeforeWrite for HangDelta {
    async fn before_write(&self, _: &EmuDevice, data: &[u8]) -> NvmeResult<()> {
        if data.starts_with(b"ZSTKFTLD") && self.armed.swap(false, Ordering::SeqCst) {
            self.hung.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

/// A checkpoint abandoned while its delta is written (its future dropped, as a server that
/// stops waiting for a request does) must leave the pages its snapshot took dirty.
#[test]
fn an_abandoned_delta_leaves_the_next_checkpoint_with_every_change() {
    runtime().block_on(async {
        let emu = device(geometry(), 9);
        let dev = Arc::new(Watched {
            inner: Arc::clone(&emu),
            watch: HangDelta {
                armed: AtomicBool::new(false),
                hung: tokio::sync::Notify::new(),
            },
        });
        let opts = MountOptions::default;
        let vol = mounted_after_a_cut(&emu, &dev, 9, opts).await;
        let bs = vol.block_size() as usize;
        vol.write(0, &block(bs, 2), false).await.expect("write");
        dev.watch.armed.store(true, Ordering::SeqCst);
        // The unmount is given up once its delta is held.
        tokio::select! {
            r = vol.unmount() => panic!("the unmount finished: {r:?}"),
            () = dev.watch.hung.notified() => {}
        }
        vol.unmount().await.expect("the unmount tried again");
        drop(vol);
        let (vol, report) = FtlVolume::mount(dev.clone(), opts()).await.expect("mount");
        assert_eq!(
            read_version(&vol, 0, bs).await,
            Some(2),
            "LBA 0 after a clean unmount ({report:?})"
        );
        vol.unmount().await.expect("unmount");
    });
}
