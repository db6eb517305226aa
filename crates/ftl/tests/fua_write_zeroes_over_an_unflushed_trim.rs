//! A FUA Write Zeroes of a range that an earlier trim already unmapped in memory, while that
//! trim's record was not yet flushed: the FTL writes no record for a range with nothing
//! mapped, so the zeros it acknowledges as durable rest on the earlier record, which must be
//! made durable before the command completes. (A power-cut schedule found it: a trim, then a
//! FUA Write Zeroes inside it, then a cut; the old data came back.)

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use common::{block, device, fresh, geometry, runtime, small_opts, version_of};
use ftl::{FormatOptions, FtlVolume};
use zns::{BlockDevice, Hook, Hooked, NvmeResult, NvmeStatus, OpKind, ZoneAction, ZonedDevice};

#[test]
fn fua_write_zeroes_over_an_unflushed_trim_survives_a_power_cut() {
    runtime().block_on(async {
        // Power loss keeps a seeded share of what was not flushed; over these seeds at least
        // one drops the trim's record.
        for seed in 0..16u64 {
            let dev = device(geometry(), seed);
            let vol = fresh(&dev, 580, small_opts()).await;
            let bs = vol.block_size() as usize;
            for lba in 0..16u64 {
                vol.write(lba, &block(bs, lba + 1), false)
                    .await
                    .expect("write");
            }
            vol.flush().await.expect("flush");
            vol.trim(0, 16).await.expect("trim");
            vol.write_zeroes(4, 8, true)
                .await
                .expect("FUA write zeroes");
            vol.crash().await;
            dev.power_loss(seed).expect("power loss");
            drop(vol);
            let vol = FtlVolume::mount(dev.clone(), small_opts())
                .await
                .expect("mount after the cut")
                .0;
            let mut buf = vec![0u8; bs];
            for lba in 4..12u64 {
                vol.read(lba, &mut buf).await.expect("read");
                assert_eq!(
                    version_of(&buf),
                    Some(0),
                    "seed {seed}: LBA {lba} was zeroed by an acknowledged FUA Write Zeroes"
                );
            }
            vol.unmount().await.expect("unmount");
        }
    });
}

/// Refuses every flush once armed.
#[derive(Default)]
struct FailFlushes {
    armed: AtomicBool,
}

#[async_trait]
impl Hook for FailFlushes {
    async fn before(&self, op: OpKind, _: Option<ZoneAction>) -> NvmeResult<()> {
        if op == OpKind::Flush && self.armed.load(Ordering::SeqCst) {
            return Err(NvmeStatus::InternalError);
        }
        Ok(())
    }
}

/// The flush that makes those zeros durable fails: the FUA Write Zeroes must fail with it,
/// not report durable zeros.
#[test]
fn fua_write_zeroes_fails_when_its_flush_fails() {
    runtime().block_on(async {
        let dev = Arc::new(Hooked::new(device(geometry(), 3), FailFlushes::default()));
        ftl::format(dev.as_ref(), FormatOptions::with_op(580), 3, false)
            .await
            .expect("format");
        let as_dyn: Arc<dyn ZonedDevice> = dev.clone();
        let vol = FtlVolume::mount(as_dyn, small_opts())
            .await
            .expect("mount")
            .0;
        let bs = vol.block_size() as usize;
        vol.write(0, &block(bs, 1), false).await.expect("write");
        vol.trim(0, 1).await.expect("trim");
        dev.hook.armed.store(true, Ordering::SeqCst);
        let err = vol
            .write_zeroes(0, 1, true)
            .await
            .expect_err("a FUA Write Zeroes whose flush failed must fail");
        assert!(
            err.to_string().contains("Internal"),
            "the flush's status reaches the caller: {err}"
        );
    });
}
