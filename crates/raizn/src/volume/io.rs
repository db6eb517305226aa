//! The member I/O of a RAIZN volume: the striped write path with its stripe buffer and
//! parity, reads (degraded reads by reconstruction), flush, and the member side of Finish
//! and Reset.

use futures::future::join_all;
use zns::{Lba, NvmeResult, NvmeStatus, ReportFilter, ZoneAction, ZoneState};

use super::append::MemberTurns;
use super::pplog::PpRecord;
use super::{RaiznVolume, StripeBuffer, ZoneIo};
use zns::parity::xor_into;

/// Part of a member's run, sent as one unit of ordering.
struct Piece<'a> {
    member: usize,
    off: u64,
    data: &'a [u8],
    meta: &'a [u8],
    /// Whether the member's next append may write once this piece is written (its last
    /// piece of the write).
    passes_turn: bool,
}

/// The contiguous range one member receives for one logical write.
#[derive(Default)]
pub(super) struct MemberRun {
    pub(super) start: Option<Lba>,
    blocks: u64,
    data: Vec<u8>,
    meta: Vec<u8>,
}

impl MemberRun {
    /// Appends a piece; pieces of one write are contiguous on each member by construction
    /// (each member holds one unit per stripe), so a gap is a bug and is refused.
    fn push(&mut self, lba: Lba, blocks: u64, data: &[u8], meta: &[u8]) -> NvmeResult<()> {
        let expected = self.start.map(|s| s + self.blocks).unwrap_or(lba);
        if expected != lba {
            debug_assert_eq!(expected, lba, "member pieces must be contiguous");
            return Err(NvmeStatus::InternalError);
        }
        self.start.get_or_insert(lba);
        self.blocks += blocks;
        self.data.extend_from_slice(data);
        self.meta.extend_from_slice(meta);
        Ok(())
    }
}

impl RaiznVolume {
    /// The write path shared by write, append, Write Zeroes and Copy: `nlb` blocks at offset
    /// `at` of `zone` (None: at the write pointer). Returns the offset written.
    pub(super) async fn zoned_write(
        &self,
        zone: u32,
        at: Option<u64>,
        nlb: u64,
        data: Option<&[u8]>,
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<u64> {
        let mut zio = self.lock_settled(zone).await?;
        let off = {
            let mut st = self.state.lock();
            let off = st.table.check_write(zone, at, nlb)?;
            st.table.prepare_write(zone)?;
            off
        };
        let (bs, oob) = (self.block_size(), self.oob());
        let zeros;
        let data = match data {
            Some(d) => d,
            None => {
                zeros = vec![0u8; nlb as usize * bs];
                &zeros[..]
            }
        };
        let zero_meta;
        let meta = match meta {
            Some(m) => m,
            None => {
                zero_meta = vec![0u8; nlb as usize * oob];
                &zero_meta[..]
            }
        };
        let result = match self.build_runs(zone, &mut zio, off, nlb, data, meta).await {
            Ok(runs) => self.send_runs(zone, runs, None).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            // The buffer may hold data that never reached the members; reload it next time.
            zio.buffer = None;
            return Err(e);
        }
        let end = off + nlb;
        if !end.is_multiple_of(self.layout.stripe_data_blocks()) {
            let recs = self.partial_parity_of(zone, &zio, end)?;
            if let Err(e) = self.log_partial_parity(recs).await {
                zio.buffer = None;
                return Err(e);
            }
        }
        if fua {
            // Everything before this write in its zone must be durable too, and what it
            // depends on: the members holding any of it not known durable are flushed
            // (docs/DESIGN.md, "Durability contract").
            self.flush_zone(zone).await?;
        } else {
            // A failure met by this write is recorded before the write completes.
            self.persist_health().await?;
        }
        let mut st = self.state.lock();
        st.table.commit_write(zone, nlb);
        if st.table.zone(zone).map(|z| z.state) == Some(ZoneState::Full) {
            zio.buffer = None;
        }
        Ok(off)
    }

    /// The partial-parity records of the stripe `end` (not a stripe boundary) is in, one per
    /// parity unit (P first), from the stripe buffer, which holds that stripe with zeros
    /// beyond `end`.
    pub(super) fn partial_parity_of(
        &self,
        zone: u32,
        zio: &ZoneIo,
        end: u64,
    ) -> NvmeResult<Vec<PpRecord>> {
        let sdb = self.layout.stripe_data_blocks();
        let buf = zio.buffer.as_ref().ok_or(NvmeStatus::InternalError)?;
        if buf.stripe != end / sdb {
            return Err(NvmeStatus::InternalError);
        }
        let within = end % sdb;
        let generation = self.generation(zone).ok_or(NvmeStatus::InternalError)?;
        Ok(self
            .pp_bulk_of(buf, within)?
            .into_iter()
            .map(|(data, meta)| PpRecord {
                zone,
                stripe: end / sdb,
                generation,
                seq: 0,
                end: within,
                data,
                meta,
            })
            .collect())
    }

    /// The bulk of the partial-parity records of a stripe whose first `within` data blocks
    /// are in `buf` (zeros after): every parity unit, cut to `pp_bulk(within)` blocks (the
    /// rest of each unit is zeros).
    pub(super) fn pp_bulk_of(
        &self,
        buf: &StripeBuffer,
        within: u64,
    ) -> NvmeResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let bulk = self.pp_bulk(within) as usize;
        let (bs, oob) = (self.block_size(), self.oob());
        let mut units = self.stripe_parity(buf)?;
        for (pd, pm) in units.iter_mut() {
            pd.truncate(bulk * bs);
            pm.truncate(bulk * oob);
        }
        Ok(units)
    }

    /// The m parity units (data, metadata) of a stripe buffer, P first.
    pub(super) fn stripe_parity(&self, buf: &StripeBuffer) -> NvmeResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let l = self.layout;
        let su = l.su_blocks() as usize;
        let (bs, oob) = (self.block_size(), self.oob());
        stripe_parity(&l.code(), buf, su * bs, su * oob)
    }

    /// Makes `zio.buffer` hold stripe `stripe` of `zone` with its data below offset `upto`.
    pub(super) async fn load_buffer(
        &self,
        zone: u32,
        zio: &mut ZoneIo,
        stripe: u64,
        upto: u64,
    ) -> NvmeResult<()> {
        if zio.buffer.as_ref().is_some_and(|b| b.stripe == stripe) {
            return Ok(());
        }
        let sdb = self.layout.stripe_data_blocks();
        let (bs, oob) = (self.block_size(), self.oob());
        let mut b = StripeBuffer {
            stripe,
            data: vec![0u8; sdb as usize * bs],
            meta: vec![0u8; sdb as usize * oob],
        };
        let have = upto - stripe * sdb;
        if have > 0 {
            let n = have as usize;
            self.read_zone(
                zone,
                stripe * sdb,
                have,
                &mut b.data[..n * bs],
                &mut b.meta[..n * oob],
                false,
            )
            .await?;
        }
        zio.buffer = Some(b);
        Ok(())
    }

    /// Cuts the write into unit pieces, fills the stripe buffer, and adds the parity of every
    /// stripe the write completes: every member's contiguous run, to send.
    pub(super) async fn build_runs(
        &self,
        zone: u32,
        zio: &mut ZoneIo,
        off: u64,
        nlb: u64,
        data: &[u8],
        meta: &[u8],
    ) -> NvmeResult<Vec<MemberRun>> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let (bs, oob) = (self.block_size(), self.oob());
        let zstart = l.member_zone_start(zone);
        self.load_buffer(zone, zio, off / sdb, off).await?;
        let mut runs: Vec<MemberRun> = (0..l.members()).map(|_| MemberRun::default()).collect();
        let end = off + nlb;
        let mut cur = off;
        while cur < end {
            let s = cur / sdb;
            let within = cur % sdb;
            let n = (su - within % su).min(end - cur);
            let p = l.place(zone, cur);
            let i = (cur - off) as usize;
            let (dn, mn) = (n as usize * bs, n as usize * oob);
            let (d, m) = (&data[i * bs..i * bs + dn], &meta[i * oob..i * oob + mn]);
            runs[p.member].push(p.lba, n, d, m)?;
            let buf = zio.buffer.as_mut().ok_or(NvmeStatus::InternalError)?;
            let w = within as usize;
            buf.data[w * bs..w * bs + dn].copy_from_slice(d);
            buf.meta[w * oob..w * oob + mn].copy_from_slice(m);
            cur += n;
            if cur.is_multiple_of(sdb) {
                let parity = stripe_parity(&l.code(), buf, su as usize * bs, su as usize * oob)?;
                for (j, (pd, pm)) in (0..).zip(parity) {
                    runs[l.parity_member_at(s, j)].push(zstart + s * su, su, &pd, &pm)?;
                }
                zio.buffer = None;
                if cur < l.logical_geometry().zone_capacity {
                    self.load_buffer(zone, zio, s + 1, cur).await?;
                }
            }
        }
        Ok(runs)
    }

    /// Sends every member its run of `zone`, in MDTS-sized commands in order, members
    /// concurrently; the member that counts as failed for the zone is skipped. With `turns`
    /// (an append in flight with others), each member's run waits for its turn on that
    /// member zone and passes the turn on once written.
    pub(super) async fn send_runs(
        &self,
        zone: u32,
        runs: Vec<MemberRun>,
        turns: Option<&MemberTurns>,
    ) -> NvmeResult<()> {
        let zstart = self.layout.member_zone_start(zone);
        let cap = self.layout.member_geometry().zone_capacity;
        let (bs, oob) = (self.block_size(), self.oob());
        let mut first: Vec<Piece> = Vec::new();
        let mut last: Vec<Piece> = Vec::new();
        for (m, run) in runs.iter().enumerate() {
            let Some(start) = run.start else { continue };
            let off = start - zstart;
            // A member zone filled in place is sealed: open counts every block of a zone
            // whose member zones are all Full. So in a zone with relocated blocks, the
            // block that fills a member zone goes last, after every relocation record of
            // the write is flushed.
            let fills = off + run.blocks == cap && self.fills_in_place(m, zone, cap);
            if fills && run.blocks > 1 {
                let k = run.blocks as usize - 1;
                first.push(Piece {
                    member: m,
                    off,
                    data: &run.data[..k * bs],
                    meta: &run.meta[..k * oob],
                    passes_turn: false,
                });
                last.push(Piece {
                    member: m,
                    off: off + k as u64,
                    data: &run.data[k * bs..],
                    meta: &run.meta[k * oob..],
                    passes_turn: true,
                });
            } else {
                let piece = Piece {
                    member: m,
                    off,
                    data: &run.data[..],
                    meta: &run.meta[..],
                    passes_turn: true,
                };
                if fills {
                    last.push(piece);
                } else {
                    first.push(piece);
                }
            }
        }
        self.send_member_runs(zone, first, turns).await?;
        if !last.is_empty() {
            self.flush_members().await?;
            self.send_member_runs(zone, last, turns).await?;
        }
        Ok(())
    }

    /// Whether member `m`'s zone of `zone` has relocation state and would be filled by an
    /// in-place write (it is not Full already).
    fn fills_in_place(&self, m: usize, zone: u32, cap: u64) -> bool {
        let r = self.reloc.lock();
        let any = (0..self.layout.members()).any(|j| r.get(zone, j).is_some());
        any && r.get(zone, m).is_none_or(|e| e.device_wp < cap)
    }

    /// Sends `pieces` of `zone`, members concurrently, each after its turn on its member
    /// zone (with `turns`); the member that counts as failed for the zone is skipped.
    async fn send_member_runs(
        &self,
        zone: u32,
        pieces: Vec<Piece<'_>>,
        turns: Option<&MemberTurns>,
    ) -> NvmeResult<()> {
        let failed = self.failed_in(zone);
        let sends = pieces
            .into_iter()
            .filter(|p| !failed.contains(p.member))
            .map(|p| async move {
                if let Some(t) = turns {
                    t.wait(p.member).await;
                }
                let r = self
                    .write_member_run(p.member, zone, p.off, p.data, p.meta, true)
                    .await
                    .map_err(|e| (p.member, e));
                if let Some(t) = turns.filter(|_| p.passes_turn) {
                    t.done(p.member);
                }
                r
            });
        let results = join_all(sends).await;
        for r in results {
            if let Err((m, status)) = r {
                self.note_member_error(m, status)?;
            }
        }
        Ok(())
    }

    /// Applies `action` to `zone` on every member that has not failed.
    pub(super) async fn members_mgmt(&self, action: ZoneAction, zone: u32) -> NvmeResult<()> {
        let failed = self.failed_in(zone);
        let zslba = self.layout.member_zone_start(zone);
        let ops = self
            .members
            .iter()
            .enumerate()
            .filter(|(m, _)| !failed.contains(*m))
            .map(
                |(m, d)| async move { d.zone_mgmt(action, zslba, false).await.map_err(|e| (m, e)) },
            );
        for r in join_all(ops).await {
            if let Err((m, status)) = r {
                self.note_member_error(m, status)?;
            }
        }
        self.persist_health().await
    }

    /// Finish: the parity of a partial stripe (missing data as zeros, which is what the
    /// finished members read there), then Finish on every member.
    pub(super) async fn finish_members(&self, zone: u32, zio: &mut ZoneIo) -> NvmeResult<()> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let wp = self
            .state
            .lock()
            .table
            .zone(zone)
            .map(|z| z.wp)
            .unwrap_or(0);
        if !wp.is_multiple_of(sdb) {
            let s = wp / sdb;
            self.load_buffer(zone, zio, s, wp).await?;
            let (bs, oob) = (self.block_size(), self.oob());
            let buf = zio.buffer.as_ref().ok_or(NvmeStatus::InternalError)?;
            let parity = stripe_parity(&l.code(), buf, su as usize * bs, su as usize * oob)?;
            let mut runs: Vec<MemberRun> = (0..l.members()).map(|_| MemberRun::default()).collect();
            for (j, (pd, pm)) in (0..).zip(parity) {
                let at = l.member_zone_start(zone) + s * su;
                runs[l.parity_member_at(s, j)].push(at, su, &pd, &pm)?;
            }
            self.send_runs_sealed(zone, runs).await?;
        }
        self.members_mgmt(ZoneAction::Finish, zone).await
    }

    /// `send_runs` for the writes a Finish seals: Finish makes a member zone's own blocks
    /// durable, not a relocation record in its log, so a record written here is flushed
    /// before the Finish completes (else a power cut after the Finish could lose it).
    async fn send_runs_sealed(&self, zone: u32, runs: Vec<MemberRun>) -> NvmeResult<()> {
        let before = self.reloc_stats.lock().records;
        self.send_runs(zone, runs, None).await?;
        if self.reloc_stats.lock().records != before {
            self.flush_members().await?;
        }
        Ok(())
    }

    /// Member `m`'s descriptor of the physical zone of logical zone `zone`.
    async fn member_zone(&self, m: usize, zone: u32) -> NvmeResult<zns::ZoneDescriptor> {
        let dev = self.members.get(m).ok_or(NvmeStatus::InternalError)?;
        let start = self.layout.member_zone_start(zone);
        let r = dev.report_zones(start, ReportFilter::All, false, 1).await?;
        r.zones
            .first()
            .copied()
            .filter(|d| d.start == start)
            .ok_or(NvmeStatus::InternalError)
    }

    /// Completes a logged Finish that a power cut interrupted (at open, once the logs are
    /// open, so a degraded read of the partial stripe can use its record): the partial
    /// stripe's parity where its member lacks it, then Finish on every member zone not Full.
    pub(super) async fn complete_finish(&self, zone: u32) -> NvmeResult<()> {
        let mut zio = self.lock_settled(zone).await?;
        let z = self
            .state
            .lock()
            .table
            .zone(zone)
            .ok_or(NvmeStatus::LbaOutOfRange)?;
        if !(z.state.is_active() || z.state == ZoneState::Empty) {
            return Ok(());
        }
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let failed = self.failed_in(zone);
        let zslba = l.member_zone_start(zone);
        let mut descs = Vec::new();
        for m in 0..l.members() {
            if failed.contains(m) {
                descs.push(None);
                continue;
            }
            // A member failing here degrades the array like any command's, and the finish
            // goes on without it.
            match self.member_zone(m, zone).await {
                Ok(d) => descs.push(Some(d)),
                Err(status) => {
                    self.note_member_error(m, status)?;
                    descs.push(None);
                }
            }
        }
        if !z.wp.is_multiple_of(sdb) {
            let s = z.wp / sdb;
            let mut runs: Vec<MemberRun> = (0..l.members()).map(|_| MemberRun::default()).collect();
            let mut any = false;
            let member_cap = l.member_geometry().zone_capacity;
            for j in 0..l.parity() {
                let pm = l.parity_member_at(s, j);
                let Some(d) = descs.get(pm).copied().flatten() else {
                    continue;
                };
                // A member zone Full by writing may still lack the parity: a torn stripe
                // left its unit stale, and only a relocated copy stands in for it.
                let device_wp = match d.state {
                    ZoneState::Full => member_cap,
                    _ => d.wp - d.start,
                };
                let held = self.member_valid_wp(pm, zone, device_wp);
                let from = held.max(s * su);
                if from >= (s + 1) * su {
                    continue;
                }
                self.load_buffer(zone, &mut zio, s, z.wp).await?;
                let (bs, oob) = (self.block_size(), self.oob());
                let buf = zio.buffer.as_ref().ok_or(NvmeStatus::InternalError)?;
                let parity = stripe_parity(&l.code(), buf, su as usize * bs, su as usize * oob)?;
                let (pd, pmeta) = parity.get(j as usize).ok_or(NvmeStatus::InternalError)?;
                let skip = (from - s * su) as usize;
                runs[pm].push(
                    zslba + from,
                    su - skip as u64,
                    &pd[skip * bs..],
                    &pmeta[skip * oob..],
                )?;
                any = true;
            }
            if any {
                self.send_runs_sealed(zone, runs).await?;
            }
        }
        let finishes = descs.iter().enumerate().filter_map(|(m, d)| {
            let d = (*d)?;
            let dev = self.members.get(m)?;
            (d.state != ZoneState::Full).then_some(async move {
                dev.zone_mgmt(ZoneAction::Finish, zslba, false)
                    .await
                    .map_err(|e| (m, e))
            })
        });
        for r in join_all(finishes).await {
            if let Err((m, status)) = r {
                self.note_member_error(m, status)?;
            }
        }
        self.persist_health().await?;
        zio.buffer = None;
        self.state
            .lock()
            .table
            .apply_action(ZoneAction::Finish, zone)
    }

    /// Reads `nlb` logical blocks at `lba` (already validated), zone by zone; blocks at or
    /// above a zone's write pointer read as zeros without touching the members.
    pub(super) async fn read_range(
        &self,
        lba: Lba,
        nlb: u64,
        buf: &mut [u8],
        mut meta: Option<&mut [u8]>,
    ) -> NvmeResult<()> {
        let (bs, oob) = (self.block_size(), self.oob());
        let mut done = 0u64;
        while done < nlb {
            let at = lba + done;
            let zone = self.zone_of(at)?;
            let zstart = self.geo.zone_start(zone);
            let off = at - zstart;
            let n = (self.geo.zone_size - off).min(nlb - done);
            let z = self
                .state
                .lock()
                .table
                .zone(zone)
                .ok_or(NvmeStatus::LbaOutOfRange)?;
            let limit = match z.state {
                ZoneState::Full => self.geo.zone_capacity,
                _ => z.wp,
            };
            let readable = limit.saturating_sub(off).min(n);
            let (a, b) = (done as usize, (done + n) as usize);
            let dst = &mut buf[a * bs..b * bs];
            let mut scratch;
            let mdst: &mut [u8] = match meta.as_deref_mut() {
                Some(m) => &mut m[a * oob..b * oob],
                None => {
                    scratch = vec![0u8; n as usize * oob];
                    &mut scratch[..]
                }
            };
            let r = readable as usize;
            dst[r * bs..].fill(0);
            mdst[r * oob..].fill(0);
            if readable > 0 {
                let full = z.state == ZoneState::Full;
                self.read_zone(
                    zone,
                    off,
                    readable,
                    &mut dst[..r * bs],
                    &mut mdst[..r * oob],
                    full,
                )
                .await?;
            }
            done += n;
        }
        Ok(())
    }

    /// Reads `n` blocks at offset `off` of `zone`, all below what the zone holds, unit piece
    /// by unit piece, concurrently; a piece whose member fails is reconstructed.
    pub(super) async fn read_zone(
        &self,
        zone: u32,
        off: u64,
        n: u64,
        data: &mut [u8],
        meta: &mut [u8],
        zone_full: bool,
    ) -> NvmeResult<()> {
        let l = self.layout;
        let su = l.su_blocks();
        let (bs, oob) = (self.block_size(), self.oob());
        let failed = self.failed_in(zone);
        // On a failed array (more members lost than the parity covers) no unit of a lost
        // member can be rebuilt: the survivors' units are read, the others fail. The member
        // that broke the array is not in `failed`; it may answer again with stale data.
        let broken = self.state.lock().health.broken;
        let mut pieces = Vec::new();
        let (mut drest, mut mrest) = (data, meta);
        let mut cur = off;
        while cur < off + n {
            let k = (su - cur % su).min(off + n - cur);
            let (d, dr) = std::mem::take(&mut drest).split_at_mut(k as usize * bs);
            let (m, mr) = std::mem::take(&mut mrest).split_at_mut(k as usize * oob);
            (drest, mrest) = (dr, mr);
            pieces.push((cur, k, d, m));
            cur += k;
        }
        let reads = pieces.into_iter().map(|(cur, k, d, m)| async move {
            let p = l.place(zone, cur);
            if let Some((lost, last)) = broken {
                // Nor is a unit rebuilt from the others: with more members lost than the
                // parity covers, a rebuild would read a lost member (which `read_member` does
                // not refuse: a member recorded failed may still answer, with stale data).
                if lost.contains(p.member) || p.member == last || failed.contains(p.member) {
                    return Err(NvmeStatus::UnrecoveredReadError);
                }
            }
            if failed.contains(p.member) {
                // Known failed (for this zone): not asked, and not noted again (noting the
                // member a rebuild fills would stop the rebuild).
                return self.reconstruct(zone, cur, k, d, m, zone_full).await;
            }
            let off = p.lba - l.member_zone_start(zone);
            let direct = self.read_member(p.member, zone, off, d, m).await;
            match direct {
                Ok(()) => Ok(()),
                Err(status) => {
                    self.note_member_error(p.member, status)?;
                    if broken.is_some() {
                        return Err(NvmeStatus::UnrecoveredReadError);
                    }
                    self.reconstruct(zone, cur, k, d, m, zone_full).await
                }
            }
        });
        for r in join_all(reads).await {
            r?;
        }
        match self.persist_health().await {
            // Every piece was read from a member that answered, or rebuilt from members that
            // did: the data is right even if the array failed meanwhile, and a failed array
            // has no superblock generation left to write.
            Err(_) if self.state.lock().health.broken.is_some() => Ok(()),
            r => r,
        }
    }

    /// Rebuilds `k` blocks at offset `cur` of `zone` (within one unit) from the other units
    /// of the stripe and its parity (`reconstruct_once`). A member that another command
    /// fails while this reads it may have answered with what it no longer holds (it failed
    /// on a write the stripe depends on, or lost its data): when a member failed meanwhile
    /// the rebuild is done again without it, and when the array failed meanwhile the read
    /// fails (Unrecovered Read Error, as a failed array's reads of lost units do), so no
    /// data is made up from a member the array no longer trusts. At most m + 1 tries: each
    /// retry follows a new failure, and one more than the parity fails the array.
    async fn reconstruct(
        &self,
        zone: u32,
        cur: u64,
        k: u64,
        data: &mut [u8],
        meta: &mut [u8],
        zone_full: bool,
    ) -> NvmeResult<()> {
        let health = |v: &RaiznVolume| (v.failed_in(zone), v.state.lock().health.broken);
        for _ in 0..=self.layout.parity() {
            let (before, _) = health(self);
            self.reconstruct_once(zone, cur, k, data, meta, zone_full)
                .await?;
            let (after, broken) = health(self);
            if broken.is_some() {
                return Err(NvmeStatus::UnrecoveredReadError);
            }
            if after.as_slice().iter().all(|m| before.contains(*m)) {
                return Ok(());
            }
        }
        Err(NvmeStatus::UnrecoveredReadError)
    }

    /// One try of `reconstruct`. Only complete stripes (and those of a Full zone, whose
    /// parity Finish wrote) have parity on the members.
    async fn reconstruct_once(
        &self,
        zone: u32,
        cur: u64,
        k: u64,
        data: &mut [u8],
        meta: &mut [u8],
        zone_full: bool,
    ) -> NvmeResult<()> {
        let l = self.layout;
        let sdb = l.stripe_data_blocks();
        let s = cur / sdb;
        let wp = self
            .state
            .lock()
            .table
            .zone(zone)
            .map(|z| z.wp)
            .unwrap_or(0);
        if !zone_full && (s + 1) * sdb > wp {
            // The stripe's parity is not on the members yet: its partial parity is.
            return self.reconstruct_from_pp(zone, cur, k, data, meta).await;
        }
        let target = l.place(zone, cur);
        if l.parity() > 1 {
            return self.reconstruct_rs(zone, cur, data, meta).await;
        }
        let bs = self.block_size();
        data.fill(0);
        meta.fill(0);
        let mut d = vec![0u8; data.len()];
        let mut m = vec![0u8; meta.len()];
        let off = target.lba - l.member_zone_start(zone);
        for j in 0..self.members.len() {
            if j == target.member {
                continue;
            }
            if let Err(status) = self.read_member(j, zone, off, &mut d, &mut m).await {
                // A second member failing here makes the array failed; no data is made up.
                self.note_member_error(j, status)?;
                return Err(status);
            }
            xor_into(data, &d);
            xor_into(meta, &m);
        }
        debug_assert_eq!(data.len(), k as usize * bs);
        Ok(())
    }

    /// `reconstruct` of a complete stripe with m = 2: the whole unit holding offset `cur`
    /// rebuilt by Reed-Solomon from `D` units of the members not failed for the zone (a
    /// member failing on the way is noted and skipped while `D` remain), then the blocks
    /// asked for cut out of it.
    async fn reconstruct_rs(
        &self,
        zone: u32,
        cur: u64,
        data: &mut [u8],
        meta: &mut [u8],
    ) -> NvmeResult<()> {
        let l = self.layout;
        let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
        let (bs, oob) = (self.block_size(), self.oob());
        let s = cur / sdb;
        let target = l.place(zone, cur);
        let d = l.data_units() as usize;
        let mut have: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::with_capacity(d);
        for j in 0..self.members.len() {
            if have.len() == d {
                break;
            }
            if j == target.member || self.failed_in(zone).contains(j) {
                continue;
            }
            let mut ud = vec![0u8; su as usize * bs];
            let mut um = vec![0u8; su as usize * oob];
            match self.read_member(j, zone, s * su, &mut ud, &mut um).await {
                Ok(()) => have.push((l.code_position(s, j), ud, um)),
                // Within the parity's reach this degrades the array and the read goes on
                // with the other members; beyond it the array is failed.
                Err(status) => self.note_member_error(j, status)?,
            }
        }
        let want = l.code_position(s, target.member);
        let x0 = (cur % su) as usize;
        match l
            .code()
            .rebuild_blocks(&have, want, x0, (bs, oob), data, meta)?
        {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::error!(zone, stripe = s, %e, "RAIZN stripe cannot be rebuilt");
                Err(NvmeStatus::UnrecoveredReadError)
            }
        }
    }
}

/// The m parity units (data, metadata) of a full stripe buffer of `d` units of
/// `unit_bytes` (and `unit_meta` bytes of metadata), P first: XOR for m = 1,
/// Reed-Solomon for m = 2 (`code.rs`).
pub(super) fn stripe_parity(
    code: &crate::code::StripeCode,
    buf: &StripeBuffer,
    unit_bytes: usize,
    unit_meta: usize,
) -> NvmeResult<Vec<(Vec<u8>, Vec<u8>)>> {
    fn units(all: &[u8], d: usize, size: usize) -> Vec<&[u8]> {
        (0..d)
            .map(|k| all.get(k * size..(k + 1) * size).unwrap_or(&[]))
            .collect()
    }
    let d = code.data_units();
    let bad = |e: crate::code::CodeError| {
        tracing::error!(%e, "RAIZN parity could not be computed");
        NvmeStatus::InternalError
    };
    let pd = code.encode(&units(&buf.data, d, unit_bytes)).map_err(bad)?;
    let pm = code.encode(&units(&buf.meta, d, unit_meta)).map_err(bad)?;
    Ok(pd.into_iter().zip(pm).collect())
}
