//! Assertion helpers of the conformance kit: each failure names the checklist item and says
//! what was expected and what the device did.

use std::fmt::Debug;

use super::pattern::pattern;
use super::KitFailure;
use crate::device::ZonedDevice;
use crate::status::{NvmeResult, NvmeStatus};
use crate::types::{Geometry, Lba, ReportFilter, ZoneAction, ZoneDescriptor, ZoneState};

pub(crate) type KitResult<T = ()> = Result<T, KitFailure>;

/// The item being checked and the geometry of the device under test.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ck {
    pub item: u32,
    pub geo: Geometry,
}

impl Ck {
    pub fn new(item: u32, geo: Geometry) -> Ck {
        Ck { item, geo }
    }

    pub fn fail(&self, message: impl Into<String>) -> KitFailure {
        KitFailure::new(self.item, message)
    }

    pub fn ensure(&self, cond: bool, message: impl FnOnce() -> String) -> KitResult {
        if cond {
            Ok(())
        } else {
            Err(self.fail(message()))
        }
    }

    pub fn eq<T: PartialEq + Debug>(&self, what: &str, got: T, expected: T) -> KitResult {
        self.ensure(got == expected, || {
            format!("{what}: expected {expected:?}, got {got:?}")
        })
    }

    /// The command must have succeeded; returns its value.
    pub fn ok<T>(&self, what: &str, result: NvmeResult<T>) -> KitResult<T> {
        result.map_err(|s| {
            self.fail(format!(
                "{what}: expected success, got {s} ({:#x})",
                s.code()
            ))
        })
    }

    /// The command must have failed with exactly `expected`.
    pub fn err<T: Debug>(
        &self,
        what: &str,
        result: NvmeResult<T>,
        expected: NvmeStatus,
    ) -> KitResult {
        match result {
            Err(s) if s == expected => Ok(()),
            Err(s) => Err(self.fail(format!(
                "{what}: expected {expected} ({:#x}), got {s} ({:#x})",
                expected.code(),
                s.code()
            ))),
            Ok(v) => Err(self.fail(format!(
                "{what}: expected {expected} ({:#x}), got success {v:?}",
                expected.code()
            ))),
        }
    }

    pub fn zslba(&self, zone: u32) -> Lba {
        self.geo.zone_start(zone)
    }

    /// The descriptor of one zone, from a one-zone report at its start.
    pub async fn zone<D: ZonedDevice>(&self, dev: &D, zone: u32) -> KitResult<ZoneDescriptor> {
        let start = self.zslba(zone);
        let what = format!("report of zone {zone}");
        let report = self.ok(
            &what,
            dev.report_zones(start, ReportFilter::All, true, 1).await,
        )?;
        match report.zones.first() {
            Some(d) if d.start == start => Ok(*d),
            other => Err(self.fail(format!(
                "{what}: expected the descriptor at {start}, got {other:?}"
            ))),
        }
    }

    /// Every zone's descriptor, in order.
    pub async fn zones<D: ZonedDevice>(&self, dev: &D) -> KitResult<Vec<ZoneDescriptor>> {
        let count = self.geo.zone_count as usize;
        let report = self.ok(
            "report of all zones",
            dev.report_zones(0, ReportFilter::All, false, count).await,
        )?;
        self.eq("number of zones reported", report.zones.len(), count)?;
        self.eq("nr_zones of a full report", report.nr_zones, count as u64)?;
        Ok(report.zones)
    }

    /// Checks state and reported write pointer (as an offset from the zone start).
    pub async fn expect_zone<D: ZonedDevice>(
        &self,
        dev: &D,
        zone: u32,
        state: ZoneState,
        wp_off: u64,
    ) -> KitResult {
        let d = self.zone(dev, zone).await?;
        self.eq(&format!("state of zone {zone}"), d.state, state)?;
        self.eq(
            &format!("write pointer of zone {zone}"),
            d.wp,
            self.zslba(zone) + wp_off,
        )
    }

    /// Every zone's state and reported write pointer (offset from its start), in order.
    pub async fn expect_all<D: ZonedDevice>(
        &self,
        dev: &D,
        expected: &[(ZoneState, u64)],
    ) -> KitResult {
        let zones = self.zones(dev).await?;
        for (z, (d, (state, wp_off))) in zones.iter().zip(expected).enumerate() {
            let got = (d.state, d.wp - d.start);
            self.eq(
                &format!("(state, write pointer offset) of zone {z}"),
                got,
                (*state, *wp_off),
            )?;
        }
        Ok(())
    }

    /// (open, active) zone counts derived from a full report.
    pub async fn counts<D: ZonedDevice>(&self, dev: &D) -> KitResult<(u32, u32)> {
        let zones = self.zones(dev).await?;
        let open = zones.iter().filter(|d| d.state.is_open()).count() as u32;
        let active = zones.iter().filter(|d| d.state.is_active()).count() as u32;
        Ok((open, active))
    }

    pub async fn expect_counts<D: ZonedDevice>(
        &self,
        dev: &D,
        open: u32,
        active: u32,
    ) -> KitResult {
        let got = self.counts(dev).await?;
        self.eq("(open, active) zone counts", got, (open, active))
    }

    /// Writes the salt-0 pattern with metadata at `lba`; it must succeed.
    pub async fn write<D: ZonedDevice>(&self, dev: &D, lba: Lba, blocks: u64) -> KitResult {
        self.write_salted(dev, lba, blocks, 0, false).await
    }

    pub async fn write_salted<D: ZonedDevice>(
        &self,
        dev: &D,
        lba: Lba,
        blocks: u64,
        salt: u64,
        fua: bool,
    ) -> KitResult {
        let (data, meta) = pattern(&self.geo, lba, blocks, salt);
        let what = format!("write of {blocks} blocks at LBA {lba}");
        self.ok(&what, dev.write(lba, &data, Some(&meta), fua).await)
    }

    /// A write of `blocks` blocks at `lba` must fail with `expected`.
    pub async fn write_err<D: ZonedDevice>(
        &self,
        dev: &D,
        lba: Lba,
        blocks: u64,
        expected: NvmeStatus,
    ) -> KitResult {
        let (data, meta) = pattern(&self.geo, lba, blocks, 0);
        let what = format!("write of {blocks} blocks at LBA {lba}");
        self.err(
            &what,
            dev.write(lba, &data, Some(&meta), false).await,
            expected,
        )
    }

    /// Writes the pattern from the zone's write pointer up to `wp_off` blocks into the zone.
    pub async fn fill<D: ZonedDevice>(&self, dev: &D, zone: u32, wp_off: u64) -> KitResult {
        let end = self.zslba(zone) + wp_off;
        let mut wp = self.zone(dev, zone).await?.wp;
        while wp < end {
            let n = (end - wp).min(u64::from(self.geo.mdts_blocks));
            self.write(dev, wp, n).await?;
            wp += n;
        }
        Ok(())
    }

    /// Reads `blocks` blocks (one command) with metadata; the buffers start non-zero so that
    /// zeros in the result were put there by the device.
    pub async fn read<D: ZonedDevice>(
        &self,
        dev: &D,
        lba: Lba,
        blocks: u64,
    ) -> KitResult<(Vec<u8>, Vec<u8>)> {
        let mut data = vec![0xA5u8; blocks as usize * self.geo.block_size as usize];
        let mut meta = vec![0x5Au8; blocks as usize * self.geo.oob_size as usize];
        let what = format!("read of {blocks} blocks at LBA {lba}");
        self.ok(&what, dev.read(lba, &mut data, Some(&mut meta)).await)?;
        Ok((data, meta))
    }

    /// Reads `blocks` blocks at `lba` in commands of at most MDTS and compares them with the
    /// expected data and metadata.
    pub async fn expect_content<D: ZonedDevice>(
        &self,
        dev: &D,
        lba: Lba,
        data: &[u8],
        meta: &[u8],
    ) -> KitResult {
        let (bs, oob) = (self.geo.block_size as usize, self.geo.oob_size as usize);
        let blocks = (data.len() / bs) as u64;
        let mut done = 0u64;
        while done < blocks {
            let n = (blocks - done).min(u64::from(self.geo.mdts_blocks));
            let (got, got_meta) = self.read(dev, lba + done, n).await?;
            for i in 0..n as usize {
                let at = done as usize + i;
                let b = lba + at as u64;
                self.ensure(
                    got[i * bs..(i + 1) * bs] == data[at * bs..(at + 1) * bs],
                    || format!("data of LBA {b} differs from what was written (or zeros expected)"),
                )?;
                self.ensure(
                    got_meta[i * oob..(i + 1) * oob] == meta[at * oob..(at + 1) * oob],
                    || {
                        format!(
                            "metadata of LBA {b} differs from what was written (or zeros expected)"
                        )
                    },
                )?;
            }
            done += n;
        }
        Ok(())
    }

    /// The blocks must read back as the pattern written with `salt`.
    pub async fn expect_pattern<D: ZonedDevice>(
        &self,
        dev: &D,
        lba: Lba,
        blocks: u64,
        salt: u64,
    ) -> KitResult {
        let (data, meta) = pattern(&self.geo, lba, blocks, salt);
        self.expect_content(dev, lba, &data, &meta).await
    }

    /// The blocks must read back as zeros, data and metadata.
    pub async fn expect_zeros<D: ZonedDevice>(&self, dev: &D, lba: Lba, blocks: u64) -> KitResult {
        let data = vec![0u8; blocks as usize * self.geo.block_size as usize];
        let meta = vec![0u8; blocks as usize * self.geo.oob_size as usize];
        self.expect_content(dev, lba, &data, &meta).await
    }

    pub async fn mgmt<D: ZonedDevice>(&self, dev: &D, action: ZoneAction, zone: u32) -> KitResult {
        let what = format!("{} of zone {zone}", action.name());
        self.ok(&what, dev.zone_mgmt(action, self.zslba(zone), false).await)
    }

    pub async fn mgmt_err<D: ZonedDevice>(
        &self,
        dev: &D,
        action: ZoneAction,
        zone: u32,
        expected: NvmeStatus,
    ) -> KitResult {
        let what = format!("{} of zone {zone}", action.name());
        self.err(
            &what,
            dev.zone_mgmt(action, self.zslba(zone), false).await,
            expected,
        )
    }
}
