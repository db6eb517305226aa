//! Garbage-collection copies: moving a victim's live blocks into a GC stream's zone with the
//! device's ZNS+ `zone_compaction` (placed by `compaction.rs`), its Simple Copy, or by
//! reading and writing them when neither is used.
//!
//! Fault model: as for every data-zone write (io.rs): a copy that fails for good seals its
//! destination zone and returns the error; the caller (`gc.rs`) decides what it means for the
//! victim. The mapping moves only for sources still current when the copy completes.

use zns::{ChunkMapping, CopyRange};

use super::StreamWriter;
use crate::activity::Gauge;
use crate::compaction::{self, Placement};
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
        let (mut guard, z, _) = self.acquire_zone(&self.slots[gc_slot], stream).await?;
        let use_copy = self.shared.opts().use_copy;
        // The mapping is static for the device's life, so asking here costs nothing.
        let plus = self
            .shared
            .opts()
            .compaction
            .and_then(|p| self.shared.dev().identify_mapping().map(|m| (m, p)));
        let max = match (plus, use_copy) {
            (Some((m, _)), _) => m.compaction_max_blocks,
            (None, true) => g.copy_max_blocks.min(g.mdts_blocks),
            (None, false) => g.mdts_blocks.min(256),
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
        match plus {
            // Half the extent limit for the source runs leaves room for the runs a
            // copyback-aware placement splits; `compaction_extents` falls back to source order
            // (which needs exactly the runs) if it still needs too many.
            Some((m, placement)) => {
                let lbas: Vec<zns::Lba> = srcs[..n]
                    .iter()
                    .map(|&p| self.shared.layout().pba_to_lba(p))
                    .collect();
                let limit = (m.compaction_max_extents as usize / 2).max(1);
                while n > 1 && compaction::source_runs(&g, &lbas[..n]) > limit {
                    n = n.div_ceil(2);
                }
                // And until the placement itself fits one command: the batch lands at the
                // zone's next free block (this writer holds the zone).
                let at = self.shared.map(|mm| mm.zone(z).reserved);
                let dst = self.shared.layout().data_zone_start(z) + at;
                let max = m.compaction_max_extents as usize;
                n = compaction::batch_fitting(&g, &m, &lbas[..n], dst, placement, max);
            }
            None => {
                while use_copy && n > 1 && ranges_for(n).len() > g.copy_max_ranges as usize {
                    n = n.div_ceil(2);
                }
            }
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
        // Zone Compaction has no FUA: its destination is made durable by the round's flush,
        // which the durability tracker then still asks for.
        let fua = durable && n == srcs.len() && plus.is_none();
        let dest = self.shared.layout().data_zone_start(z) + r.offset;
        // Destination block k holds srcs[order[k]].
        let mut order: Vec<usize> = (0..n).collect();
        let copying = self.shared.activity().enter(Gauge::Copies);
        let result = if let Some((m, placement)) = plus {
            let (o, extents) = self.compaction_extents(&m, placement, &srcs[..n], dest);
            order = o;
            retry(|| self.shared.dev().zone_compaction(&extents)).await
        } else if use_copy {
            let ranges = ranges_for(n);
            retry(|| self.shared.dev().copy(&ranges, dest, fua)).await
        } else {
            self.read_write_copy(&srcs[..n], dest, fua).await
        };
        drop(copying);
        if let Err(e) = result {
            *guard = None;
            self.write_failed(z, WriteKind::Copy).await;
            return Err(e.into());
        }
        let tags: Vec<_> = self.shared.map(|m| {
            let tags = order
                .iter()
                .enumerate()
                .map(|(k, &i)| m.complete_move(srcs[i], z, r.offset + k as u64))
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

    /// The destination order of `srcs` moved to `dest ..` by `placement`, and the
    /// `zone_compaction` extents that do it; source order when the placement needs more
    /// extents than one command takes (the caller kept the source runs within the limit).
    fn compaction_extents(
        &self,
        m: &ChunkMapping,
        placement: Placement,
        srcs: &[u32],
        dest: zns::Lba,
    ) -> (Vec<usize>, Vec<zns::CompactionExtent>) {
        let g = self.shared.layout().geometry;
        let lbas: Vec<zns::Lba> = srcs
            .iter()
            .map(|&p| self.shared.layout().pba_to_lba(p))
            .collect();
        let order = compaction::place(&g, m, &lbas, dest, placement);
        let extents = compaction::extents(&g, &lbas, &order, dest);
        if extents.len() <= m.compaction_max_extents as usize {
            return (order, extents);
        }
        let order: Vec<usize> = (0..srcs.len()).collect();
        let extents = compaction::extents(&g, &lbas, &order, dest);
        (order, extents)
    }

    /// Relocation without Simple Copy: read data and metadata, write them unchanged. The
    /// reads go one per run of contiguous blocks, all in flight together (at most one
    /// batch's blocks), as a file system's cleaner issues them; read one block after another
    /// they kept the flash chips mostly idle. Between the reads and the write the host spends
    /// `MountOptions::host_copy_ns_per_block` per block (host.rs).
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
        let lbas: Vec<zns::Lba> = srcs
            .iter()
            .map(|&p| self.shared.layout().pba_to_lba(p))
            .collect();
        let mut reads = Vec::new();
        let (mut d_rest, mut m_rest) = (&mut data[..], &mut meta[..]);
        let mut k = 0;
        while k < lbas.len() {
            let at = lbas[k];
            let mut n = 1;
            while k + n < lbas.len()
                && lbas[k + n] == at + n as u64
                && n < g.mdts_blocks.max(1) as usize
                && g.zone_of(at) == g.zone_of(at + n as u64)
            {
                n += 1;
            }
            let (d, dr) = std::mem::take(&mut d_rest).split_at_mut(n * bs);
            let (m, mr) = std::mem::take(&mut m_rest).split_at_mut(n * oob);
            (d_rest, m_rest) = (dr, mr);
            reads.push(read_retry(self.shared.dev(), at, d, Some(m)));
            k += n;
        }
        for r in futures::future::join_all(reads).await {
            r?;
        }
        // The host's own time for the blocks now in its memory (host.rs); only this path
        // moves blocks through the host.
        self.shared.host_copy_time(srcs.len() as u64).await;
        retry(|| self.shared.dev().write(dest, &data, Some(&meta), fua)).await
    }
}
