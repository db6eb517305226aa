//! A stand-in for a device that is gone (its image lost, the drive pulled): every command
//! fails with Namespace Not Ready, as a drive that no longer answers does. The RAID volumes
//! put it where a member is absent at open, so the member counts as failed and the volume
//! runs degraded exactly as after a failure at run time.
//!
//! Fault model: none of its own; it is the fault (a device that never answers).

use async_trait::async_trait;

use crate::{
    CopyRange, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter, ZoneAction, ZoneReport,
    ZonedDevice,
};

/// A device that is not there, with the geometry it would have (the other members').
pub struct Absent {
    pub geo: Geometry,
}

#[async_trait]
impl ZonedDevice for Absent {
    fn geometry(&self) -> Geometry {
        self.geo
    }
    async fn read(&self, _: Lba, _: &mut [u8], _: Option<&mut [u8]>) -> NvmeResult<()> {
        Err(NvmeStatus::NamespaceNotReady)
    }
    async fn write(&self, _: Lba, _: &[u8], _: Option<&[u8]>, _: bool) -> NvmeResult<()> {
        Err(NvmeStatus::NamespaceNotReady)
    }
    async fn append(&self, _: Lba, _: &[u8], _: Option<&[u8]>, _: bool) -> NvmeResult<Lba> {
        Err(NvmeStatus::NamespaceNotReady)
    }
    async fn write_zeroes(&self, _: Lba, _: u64, _: bool) -> NvmeResult<()> {
        Err(NvmeStatus::NamespaceNotReady)
    }
    async fn flush(&self) -> NvmeResult<()> {
        Err(NvmeStatus::NamespaceNotReady)
    }
    async fn copy(&self, _: &[CopyRange], _: Lba, _: bool) -> NvmeResult<()> {
        Err(NvmeStatus::NamespaceNotReady)
    }
    async fn zone_mgmt(&self, _: ZoneAction, _: Lba, _: bool) -> NvmeResult<()> {
        Err(NvmeStatus::NamespaceNotReady)
    }
    async fn report_zones(
        &self,
        _: Lba,
        _: ReportFilter,
        _: bool,
        _: usize,
    ) -> NvmeResult<ZoneReport> {
        Err(NvmeStatus::NamespaceNotReady)
    }
}
