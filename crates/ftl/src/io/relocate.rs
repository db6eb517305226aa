//! Garbage-collection copies: moving a victim's live blocks into a GC stream's zone with the
//! device's Simple Copy, or by reading and writing them when Copy is not used.
//!
//! Fault model: as for every data-zone write (io.rs): a copy that fails for good seals its
//! destination zone and returns the error; the caller (`gc.rs`) decides what it means for the
//! victim. The mapping moves only for sources still current when the copy completes.

use zns::CopyRange;

use super::StreamWriter;
use crate::map::Stream;
use crate::plan::WriteKind;
use crate::retry::{read_retry, retry};
use crate::FtlError;

impl StreamWriter {
    /// Moves a prefix of `srcs` (sorted physical blocks) into the zone of lane `lane` of
    /// `stream` (`StreamWriter::lanes`); returns how many. With `durable`, a batch that moves
    /// the rest of `srcs` is written with FUA, so the zone holds its copies durably.
    pub(crate) async fn relocate(
        &self,
        srcs: &[u32],
        stream: Stream,
        lane: usize,
        durable: bool,
    ) -> Result<usize, FtlError> {
        let g = self.shared.layout().geometry;
        let gc_slot = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.stream == stream)
            .map(|(i, _)| i)
            .nth(lane)
            .ok_or_else(|| {
                FtlError::Corrupt(format!("stream {} has no lane {lane}", stream.name()))
            })?;
        let (mut guard, z) = self.acquire_zone(&self.slots[gc_slot], stream).await?;
        let use_copy = self.shared.opts().use_copy;
        let max = if use_copy {
            g.copy_max_blocks.min(g.mdts_blocks)
        } else {
            g.mdts_blocks.min(256)
        };
        let want = (srcs.len() as u64).min(u64::from(max));
        let ranges_for = |n: usize| -> Vec<CopyRange> {
            let mut ranges: Vec<CopyRange> = Vec::new();
            for (k, &p) in srcs[..n].iter().enumerate() {
                let lba = self.shared.layout().pba_to_lba(p);
                match ranges.last_mut() {
                    Some(r)
                        if r.lba + r.blocks == lba
                            && r.blocks < u64::from(g.copy_max_range_blocks)
                            && k > 0 =>
                    {
                        r.blocks += 1
                    }
                    _ => ranges.push(CopyRange { lba, blocks: 1 }),
                }
            }
            ranges
        };
        // Shrink the batch until its ranges fit the device's Copy limits.
        let mut n = want as usize;
        while use_copy && n > 1 && ranges_for(n).len() > g.copy_max_ranges as usize {
            n = n.div_ceil(2);
        }
        if self.shared.layout().summary_mode() {
            let room = self.data_room(z);
            if room == 0 {
                self.write_summary(z, false).await?;
                return Ok(0);
            }
            n = n.min(room as usize);
        }
        let r = self.shared.map(|m| m.reserve(z, n as u64));
        if r.blocks == 0 {
            *guard = None;
            return Ok(0);
        }
        let n = r.blocks as usize;
        let fua = durable && n == srcs.len();
        let dest = self.shared.layout().data_zone_start(z) + r.offset;
        let result = if use_copy {
            let ranges = ranges_for(n);
            retry(|| self.shared.dev().copy(&ranges, dest, fua)).await
        } else {
            self.read_write_copy(&srcs[..n], dest, fua).await
        };
        if let Err(e) = result {
            *guard = None;
            self.write_failed(z, WriteKind::Copy).await;
            return Err(e.into());
        }
        let tags: Vec<_> = self.shared.map(|m| {
            let tags = srcs[..n]
                .iter()
                .enumerate()
                .map(|(k, &src)| m.complete_move(src, z, r.offset + k as u64))
                .collect();
            m.end_gc_write(z, r.offset, n as u64);
            if fua {
                m.fua_ended(z);
            }
            tags
        });
        self.write_ended();
        self.note_tags(z, tags.into_iter(), false).await?;
        Ok(n)
    }

    /// Relocation without Simple Copy: read data and metadata, write them unchanged.
    async fn read_write_copy(
        &self,
        srcs: &[u32],
        dest: zns::Lba,
        fua: bool,
    ) -> Result<(), zns::NvmeStatus> {
        let g = self.shared.layout().geometry;
        let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
        let mut data = vec![0u8; srcs.len() * bs];
        let mut meta = vec![0u8; srcs.len() * oob];
        for (k, &p) in srcs.iter().enumerate() {
            let at = self.shared.layout().pba_to_lba(p);
            let (d, m) = (
                &mut data[k * bs..(k + 1) * bs],
                &mut meta[k * oob..(k + 1) * oob],
            );
            read_retry(self.shared.dev(), at, d, Some(m)).await?;
        }
        retry(|| self.shared.dev().write(dest, &data, Some(&meta), fua)).await
    }
}
