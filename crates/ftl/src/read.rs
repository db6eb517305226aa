//! The read path: whole blocks through the mapping, pinning the zones read from so garbage
//! collection does not reset them underneath.
//!
//! Fault model: a transient read error is retried (bounded); a read from an Offline zone fails
//! with the LBA range it lost; any other device error goes to the caller. The pins are released
//! whatever the outcome.

use zns::{Lba, NvmeStatus};

use crate::retry::read_retry;
use crate::shared::Shared;
use crate::FtlError;

/// Reads whole blocks at `lba` through the mapping; unmapped blocks read as zeros.
pub(crate) async fn read_blocks(shared: &Shared, lba: Lba, buf: &mut [u8]) -> Result<(), FtlError> {
    shared.check_failed()?;
    let layout = *shared.layout();
    let bs = layout.geometry.block_size as usize;
    let blocks = (buf.len() / bs) as u64;
    // Runs of blocks contiguous on the device within one zone:
    // (first buffer block, device LBA, count, data zone).
    let mut runs: Vec<(usize, Lba, u64, u32)> = Vec::new();
    let mut pinned = Vec::new();
    shared.map(|m| {
        for i in 0..blocks {
            match m.lookup(lba + i) {
                None => buf[i as usize * bs..(i as usize + 1) * bs].fill(0),
                Some(pba) => {
                    let dev_lba = layout.pba_to_lba(pba);
                    let zone = (u64::from(pba) / layout.zone_blocks) as u32;
                    match runs.last_mut() {
                        Some((first, at, n, z))
                            if *first as u64 + *n == i
                                && *at + *n == dev_lba
                                && *z == zone
                                && *n < 256 =>
                        {
                            *n += 1
                        }
                        _ => {
                            pinned.push(m.pin(pba));
                            runs.push((i as usize, dev_lba, 1, zone));
                        }
                    }
                }
            }
        }
    });
    let mut result = Ok(());
    for (first, at, n, _) in &runs {
        let part = &mut buf[first * bs..(first + *n as usize) * bs];
        match read_retry(shared.dev(), *at, part, None).await {
            Ok(()) => {}
            Err(NvmeStatus::ZoneIsOffline) => {
                let from = lba + *first as u64;
                result = Err(FtlError::DataLost(format!(
                    "LBAs {from}..{} sit in a data zone that went offline",
                    from + n
                )));
                break;
            }
            Err(e) => {
                result = Err(e.into());
                break;
            }
        }
    }
    shared.map(|m| {
        for z in pinned {
            m.unpin(z);
        }
    });
    shared.space_changed();
    result
}
