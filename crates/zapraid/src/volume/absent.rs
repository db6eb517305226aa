//! A stand-in for a member whose device is gone (its image lost, the drive pulled): every
//! command fails with Namespace Not Ready, so open takes the member for absent, records it
//! failed, and the volume runs degraded exactly as after a run-time failure.
//!
//! Fault model: none of its own; it is the fault (a member that never answers).

use async_trait::async_trait;
use zns::{
    CopyRange, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter, ZoneAction, ZoneReport,
    ZonedDevice,
};

/// A member that is not there, with the geometry the other members report.
pub(crate) struct Absent {
    pub(crate) geo: Geometry,
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
