//! `Hooked`: a device that passes every command of the ZNS command set to the device it
//! wraps, after a `Hook` that may delay it, refuse it, count it or stop on it. For tests
//! that need a drive different from the one they wrap in one respect only (slower, gated,
//! without Simple Copy), so that none writes out the whole trait to forward it.
//!
//! The ZNS+ extensions (`identify_mapping`, `zone_compaction`, `tl_open`) are not passed
//! on: a hooked device is a plain ZNS drive, with the trait's defaults for them. Its die
//! stripe hint (`die_stripe`) is the wrapped device's: the flash under it is the same.

use async_trait::async_trait;

use crate::device::ZonedDevice;
use crate::faulty::OpKind;
use crate::status::NvmeResult;
use crate::types::{CopyRange, Geometry, Lba, ReportFilter, ZoneAction, ZoneReport};

/// What a `Hooked` device does before each command.
#[async_trait]
pub trait Hook: Send + Sync {
    /// Runs before a command of kind `op` goes to the wrapped device (`action` is the Zone
    /// Management action, None for other kinds); an error refuses the command, unsent.
    async fn before(&self, op: OpKind, action: Option<ZoneAction>) -> NvmeResult<()>;
}

/// `inner` with `hook` run before each of its commands.
pub struct Hooked<D, H> {
    pub inner: D,
    pub hook: H,
}

impl<D, H> Hooked<D, H> {
    pub fn new(inner: D, hook: H) -> Hooked<D, H> {
        Hooked { inner, hook }
    }
}

#[async_trait]
impl<D: ZonedDevice, H: Hook> ZonedDevice for Hooked<D, H> {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    fn die_stripe(&self) -> Option<crate::types::DieStripe> {
        self.inner.die_stripe()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.hook.before(OpKind::Read, None).await?;
        self.inner.read(lba, buf, meta).await
    }
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.hook.before(OpKind::Write, None).await?;
        self.inner.write(lba, data, meta, fua).await
    }
    async fn append(&self, z: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<Lba> {
        self.hook.before(OpKind::Append, None).await?;
        self.inner.append(z, data, meta, fua).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.hook.before(OpKind::WriteZeroes, None).await?;
        self.inner.write_zeroes(lba, blocks, fua).await
    }
    async fn flush(&self) -> NvmeResult<()> {
        self.hook.before(OpKind::Flush, None).await?;
        self.inner.flush().await
    }
    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        self.hook.before(OpKind::Copy, None).await?;
        self.inner.copy(sources, dest, fua).await
    }
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, all: bool) -> NvmeResult<()> {
        self.hook.before(OpKind::ZoneMgmt, Some(action)).await?;
        self.inner.zone_mgmt(action, zslba, all).await
    }
    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.hook.before(OpKind::Report, None).await?;
        self.inner
            .report_zones(lba, filter, partial, max_zones)
            .await
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;
    use crate::model::ModelDevice;
    use crate::status::NvmeStatus;

    /// Records every command it sees and refuses Copy and Zone Reset.
    #[derive(Default)]
    struct Log(Mutex<Vec<(OpKind, Option<ZoneAction>)>>);

    #[async_trait]
    impl Hook for Log {
        async fn before(&self, op: OpKind, action: Option<ZoneAction>) -> NvmeResult<()> {
            self.0.lock().push((op, action));
            match (op, action) {
                (OpKind::Copy, _) | (_, Some(ZoneAction::Reset)) => Err(NvmeStatus::InvalidOpcode),
                _ => Ok(()),
            }
        }
    }

    fn geometry() -> Geometry {
        Geometry {
            block_size: 512,
            oob_size: 0,
            zone_count: 4,
            zone_size: 16,
            zone_capacity: 16,
            max_open: 0,
            max_active: 0,
            zasl_blocks: 8,
            mdts_blocks: 8,
            copy_max_ranges: 1,
            copy_max_range_blocks: 8,
            copy_max_blocks: 8,
            cross_zone_reads: false,
        }
    }

    #[tokio::test]
    async fn every_command_passes_the_hook_and_a_refusal_never_reaches_the_device() {
        {
            let model = ModelDevice::new(geometry()).expect("geometry");
            let d = Hooked::new(model, Log::default());
            let bs = 512;
            d.write(0, &vec![7u8; 2 * bs], None, false)
                .await
                .expect("write");
            d.append(16, &vec![8u8; bs], None, false)
                .await
                .expect("append");
            d.write_zeroes(2, 1, false).await.expect("write zeroes");
            d.flush().await.expect("flush");
            let mut buf = vec![0u8; 3 * bs];
            d.read(0, &mut buf, None).await.expect("read");
            assert!(buf[..2 * bs].iter().all(|b| *b == 7) && buf[2 * bs..].iter().all(|b| *b == 0));
            let src = [CopyRange { lba: 0, blocks: 1 }];
            assert_eq!(d.copy(&src, 3, false).await, Err(NvmeStatus::InvalidOpcode));
            assert_eq!(
                d.zone_mgmt(ZoneAction::Reset, 0, false).await,
                Err(NvmeStatus::InvalidOpcode)
            );
            d.zone_mgmt(ZoneAction::Finish, 16, false)
                .await
                .expect("finish");
            let r = d
                .report_zones(0, ReportFilter::All, false, 4)
                .await
                .expect("report");
            // The refused Copy and Reset never reached the device: zone 0 still holds its
            // three blocks, and nothing was copied to block 3.
            assert_eq!(r.zones[0].wp, 3);
            assert_eq!(r.zones[1].wp, 32);
            assert!(d.identify_mapping().is_none());
            use OpKind::*;
            assert_eq!(
                *d.hook.0.lock(),
                vec![
                    (Write, None),
                    (Append, None),
                    (WriteZeroes, None),
                    (Flush, None),
                    (Read, None),
                    (Copy, None),
                    (ZoneMgmt, Some(ZoneAction::Reset)),
                    (ZoneMgmt, Some(ZoneAction::Finish)),
                    (Report, None),
                ]
            );
        }
    }
}
