//! The two traits every layer speaks: `ZonedDevice` (the NVMe ZNS command set) and
//! `BlockDevice` (what a block client such as an NBD peer sees).
//!
//! Both are async and object safe, so a caller can keep many commands in flight on one
//! device (`futures::join_all`, tasks sharing an `Arc`) and layers can stack as trait objects.
//! Buffers are borrowed for the duration of a command, as NVMe PRPs are.

use async_trait::async_trait;

use crate::plus::{ChunkMapping, CompactionExtent};
use crate::status::{NvmeResult, NvmeStatus};
use crate::types::{CopyRange, DieStripe, Geometry, Lba, ReportFilter, ZoneAction, ZoneReport};

/// A zoned namespace.
///
/// Durability contract: a write completed without FUA may sit in a volatile write cache
/// until the next `flush`; a write with FUA is durable when it completes; `flush` makes every
/// write completed before it was submitted durable.
#[async_trait]
pub trait ZonedDevice: Send + Sync {
    /// Identify: geometry and limits. Constant for the life of the device.
    fn geometry(&self) -> Geometry;

    /// Reads `buf.len() / block_size` blocks at `lba`. When `meta` is given it receives
    /// `oob_size` bytes per block. Blocks above the write pointer read as zeros.
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()>;

    /// Zone Write: `data` must start at the zone's write pointer.
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()>;

    /// Zone Append to the zone starting at `zslba`; returns the LBA the data landed at.
    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba>;

    /// Write Zeroes: a zoned write of `blocks` zero blocks at the write pointer.
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()>;

    /// Flush the volatile write cache.
    async fn flush(&self) -> NvmeResult<()>;

    /// Simple Copy: copies `sources` in order to `dest`, which must be a zone's write pointer.
    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()>;

    /// Zone Management Send. With `select_all` the `zslba` is ignored and the action applies to
    /// every zone in a state the action selects.
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()>;

    /// Zone Management Receive (Report Zones) from the zone holding `lba`, at most
    /// `max_zones` descriptors.
    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport>;

    /// How the device stripes a zone's blocks over its flash dies, as a hint to a host that
    /// places writes (the FTL's hot zones: `ftl::plan::hot_zone_gives_way`). No NVMe command
    /// reports this: real drives return None (the default), and so do layers whose blocks
    /// are not one device's (a RAIZN volume); the emulator returns its timing model's stripe
    /// when timing is on. Wrappers that pass a device on forward it. Constant for the life
    /// of the device; it changes no command's result.
    fn die_stripe(&self) -> Option<DieStripe> {
        None
    }

    /// ZNS+ identify_mapping (docs/ZNSPLUS.md): how chunks map to chips, or None when the
    /// device lacks the ZNS+ commands. Constant for the life of the device.
    fn identify_mapping(&self) -> Option<ChunkMapping> {
        None
    }

    /// ZNS+ zone_compaction: copies each extent's source blocks to its destination, in
    /// order, inside the device. A device without ZNS+ answers Invalid Command Opcode, and
    /// the caller falls back to Simple Copy or read + write.
    async fn zone_compaction(&self, _extents: &[CompactionExtent]) -> NvmeResult<()> {
        Err(NvmeStatus::InvalidOpcode)
    }

    /// ZNS+ TL_open: opens the zone at `zslba` for threaded logging with the bitmap of its
    /// blocks the host still needs (`plus::ValidBitmap` layout). A device without ZNS+
    /// answers Invalid Command Opcode.
    async fn tl_open(&self, _zslba: Lba, _valid: &[u8]) -> NvmeResult<()> {
        Err(NvmeStatus::InvalidOpcode)
    }
}

/// A shared device is a device: layers and wrappers hold their members as `Arc`s.
#[async_trait]
impl<T: ZonedDevice + ?Sized> ZonedDevice for std::sync::Arc<T> {
    fn geometry(&self) -> Geometry {
        (**self).geometry()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        (**self).read(lba, buf, meta).await
    }
    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        (**self).write(lba, data, meta, fua).await
    }
    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        (**self).append(zslba, data, meta, fua).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        (**self).write_zeroes(lba, blocks, fua).await
    }
    async fn flush(&self) -> NvmeResult<()> {
        (**self).flush().await
    }
    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        (**self).copy(sources, dest, fua).await
    }
    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        (**self).zone_mgmt(action, zslba, select_all).await
    }
    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        (**self).report_zones(lba, filter, partial, max_zones).await
    }
    fn die_stripe(&self) -> Option<DieStripe> {
        (**self).die_stripe()
    }
    fn identify_mapping(&self) -> Option<ChunkMapping> {
        (**self).identify_mapping()
    }
    async fn zone_compaction(&self, extents: &[CompactionExtent]) -> NvmeResult<()> {
        (**self).zone_compaction(extents).await
    }
    async fn tl_open(&self, zslba: Lba, valid: &[u8]) -> NvmeResult<()> {
        (**self).tl_open(zslba, valid).await
    }
}

/// Errors of a block volume, each with the errno an NBD server replies with.
///
/// A volume that failed for good says why in `Failed`, so the cause reaches the client's log
/// and the operator, not only an errno.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("request beyond the end of the volume")]
    OutOfRange,
    #[error("request not aligned to the block size")]
    Misaligned,
    #[error("no space left on the volume")]
    NoSpace,
    #[error("the volume is read only")]
    ReadOnly,
    #[error("device error: {0}")]
    Device(NvmeStatus),
    /// The volume stopped serving after an error it could not recover from; the text names
    /// the cause. Every later command fails the same way until the volume is mounted again.
    #[error("the volume has failed: {0}")]
    Failed(String),
    /// The data at these blocks is lost (for example its zone went offline); the rest of the
    /// volume works.
    #[error("data lost: {0}")]
    DataLost(String),
}

impl BlockError {
    /// The errno value an NBD reply carries for this error.
    pub fn errno(&self) -> u32 {
        match self {
            BlockError::OutOfRange | BlockError::Misaligned => 22, // EINVAL
            BlockError::NoSpace => 28,                             // ENOSPC
            BlockError::ReadOnly => 1,                             // EPERM (NBD has no EROFS)
            BlockError::Device(_) | BlockError::Failed(_) | BlockError::DataLost(_) => 5, // EIO
        }
    }
}

impl From<NvmeStatus> for BlockError {
    fn from(s: NvmeStatus) -> Self {
        BlockError::Device(s)
    }
}

/// Result of a block-volume command.
pub type BlockResult<T> = Result<T, BlockError>;

/// A random-access block volume.
///
/// Durability contract: as for [`ZonedDevice`]: completed writes are durable after `flush`,
/// FUA writes when they complete.
#[async_trait]
pub trait BlockDevice: Send + Sync {
    fn block_size(&self) -> u32;
    fn size_blocks(&self) -> u64;
    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()>;
    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()>;
    async fn flush(&self) -> BlockResult<()>;
    /// Discard: the blocks' contents become unspecified (zeros for most volumes).
    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()>;
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()>;
}
