//! `MdRaid5`: an mdraid-like RAID-5 over block devices (conventional SSDs), the baseline
//! RAIZN (ASPLOS '23) compares against in Figs. 9 and 10. It is a performance model, not a
//! volume to keep data on: no superblock, no degraded mode, no journal (the paper runs mdraid
//! without one), so it tolerates no faults and claims to survive none.
//!
//! Layout as mdraid's default (`left-symmetric`): stripe `s` keeps its parity chunk on member
//! `n - 1 - s mod n` and its data chunks on the members after it, wrapping; chunk `c` of a
//! stripe sits at member LBA `s x chunk`. A write covering a whole stripe computes its parity
//! from the new data and writes all `n` chunks; a write covering part of a stripe does a
//! read-modify-write: it reads the old data of the blocks it replaces and the parity over
//! the same range, folds old and new data into the parity, and writes data and parity. Writes
//! to one stripe hold that stripe's lock (one of `LOCK_SHARDS`, chosen by stripe number), so a
//! read-modify-write never reads a parity another write is changing. Unlike mdraid there is
//! no stripe cache that merges small sequential writes into whole stripes before computing
//! parity: every partial-stripe write pays its reads.

use std::sync::Arc;

use async_trait::async_trait;
use futures::future::try_join_all;
use tokio::sync::Mutex;
use zns::{BlockDevice, BlockError, BlockResult, Lba};

/// Stripe locks: a bounded set shared by stripe number.
const LOCK_SHARDS: usize = 256;

/// A RAID-5 of `n` block devices with rotating parity.
pub struct MdRaid5 {
    members: Vec<Arc<dyn BlockDevice>>,
    block_size: u32,
    chunk_blocks: u64,
    stripes: u64,
    locks: Vec<Mutex<()>>,
}

/// The part of a logical write that falls in one stripe: the stripe, the first block within
/// its data (0 .. (n - 1) x chunk) and the bytes.
struct Piece<'a> {
    stripe: u64,
    first: u64,
    data: &'a [u8],
}

impl MdRaid5 {
    /// An array of `members` (at least 3, one block size) with chunks of `chunk_bytes`.
    pub fn new(members: Vec<Arc<dyn BlockDevice>>, chunk_bytes: u64) -> Result<MdRaid5, String> {
        let first = members.first().ok_or("an array needs members")?;
        if members.len() < 3 {
            return Err(format!(
                "RAID-5 needs 3 members or more, not {}",
                members.len()
            ));
        }
        let block_size = first.block_size();
        if members.iter().any(|m| m.block_size() != block_size) {
            return Err("members have different block sizes".into());
        }
        let bs = u64::from(block_size);
        if chunk_bytes == 0 || !chunk_bytes.is_multiple_of(bs) {
            return Err(format!(
                "chunk of {chunk_bytes} bytes is not whole blocks of {bs}"
            ));
        }
        let chunk_blocks = chunk_bytes / bs;
        let smallest = members.iter().map(|m| m.size_blocks()).min().unwrap_or(0);
        let stripes = smallest / chunk_blocks;
        if stripes == 0 {
            return Err("members are smaller than one chunk".into());
        }
        Ok(MdRaid5 {
            members,
            block_size,
            chunk_blocks,
            stripes,
            locks: (0..LOCK_SHARDS).map(|_| Mutex::new(())).collect(),
        })
    }

    fn n(&self) -> u64 {
        self.members.len() as u64
    }

    fn data_blocks_per_stripe(&self) -> u64 {
        (self.n() - 1) * self.chunk_blocks
    }

    /// Member holding the parity of `stripe`.
    pub fn parity_member(&self, stripe: u64) -> usize {
        (self.n() - 1 - stripe % self.n()) as usize
    }

    /// Member holding data chunk `chunk` of `stripe`.
    pub fn data_member(&self, stripe: u64, chunk: u64) -> usize {
        ((self.parity_member(stripe) as u64 + 1 + chunk) % self.n()) as usize
    }

    fn member(&self, i: usize) -> BlockResult<&Arc<dyn BlockDevice>> {
        self.members
            .get(i)
            .ok_or_else(|| BlockError::Failed(format!("no member {i}")))
    }

    fn check(&self, lba: Lba, bytes: usize) -> BlockResult<u64> {
        let bs = self.block_size as usize;
        if !bytes.is_multiple_of(bs) {
            return Err(BlockError::Misaligned);
        }
        let blocks = (bytes / bs) as u64;
        match lba.checked_add(blocks) {
            Some(end) if end <= self.size_blocks() => Ok(blocks),
            _ => Err(BlockError::OutOfRange),
        }
    }

    /// Splits `data` at `lba` into the parts of each stripe it touches.
    fn pieces<'a>(&self, lba: Lba, data: &'a [u8]) -> Vec<Piece<'a>> {
        let bs = self.block_size as usize;
        let per = self.data_blocks_per_stripe();
        let mut out = Vec::new();
        let (mut at, mut rest) = (lba, data);
        while !rest.is_empty() {
            let (stripe, first) = (at / per, at % per);
            let n = ((per - first) as usize * bs).min(rest.len());
            let (here, after) = rest.split_at(n);
            out.push(Piece {
                stripe,
                first,
                data: here,
            });
            at += (n / bs) as u64;
            rest = after;
        }
        out
    }

    /// The runs of a piece within its data chunks: chunk, first block in it, byte range of
    /// the piece's data.
    fn runs(&self, p: &Piece<'_>) -> Vec<(u64, u64, std::ops::Range<usize>)> {
        let bs = self.block_size as usize;
        let mut out = Vec::new();
        let (mut blk, mut off) = (p.first, 0usize);
        while off < p.data.len() {
            let (chunk, within) = (blk / self.chunk_blocks, blk % self.chunk_blocks);
            let n = ((self.chunk_blocks - within) as usize * bs).min(p.data.len() - off);
            out.push((chunk, within, off..off + n));
            off += n;
            blk += (n / bs) as u64;
        }
        out
    }

    async fn write_piece(&self, p: Piece<'_>, fua: bool) -> BlockResult<()> {
        let shard = (p.stripe % LOCK_SHARDS as u64) as usize;
        let _held = self
            .locks
            .get(shard)
            .ok_or_else(|| BlockError::Failed("no stripe lock".into()))?
            .lock()
            .await;
        if p.first == 0
            && p.data.len() as u64 == self.data_blocks_per_stripe() * u64::from(self.block_size)
        {
            self.write_full(&p, fua).await
        } else {
            self.read_modify_write(&p, fua).await
        }
    }

    async fn write_full(&self, p: &Piece<'_>, fua: bool) -> BlockResult<()> {
        let chunk_bytes = (self.chunk_blocks * u64::from(self.block_size)) as usize;
        let units: Vec<&[u8]> = p.data.chunks(chunk_bytes).collect();
        let mut parity = vec![0u8; chunk_bytes];
        zns::parity::parity_into(&mut parity, &units);
        let base = p.stripe * self.chunk_blocks;
        let mut writes = Vec::new();
        for (c, unit) in units.iter().enumerate() {
            let m = self.member(self.data_member(p.stripe, c as u64))?;
            writes.push(m.write(base, unit, fua));
        }
        let pm = self.member(self.parity_member(p.stripe))?;
        writes.push(pm.write(base, &parity, fua));
        try_join_all(writes).await.map(|_| ())
    }

    async fn read_modify_write(&self, p: &Piece<'_>, fua: bool) -> BlockResult<()> {
        let bs = self.block_size as usize;
        let runs = self.runs(p);
        let base = p.stripe * self.chunk_blocks;
        // The parity range covers the union of the runs' offsets within their chunks.
        let lo = runs.iter().map(|r| r.1).min().unwrap_or(0);
        let hi = runs
            .iter()
            .map(|r| r.1 + (r.2.len() / bs) as u64)
            .max()
            .unwrap_or(0);
        let mut parity = vec![0u8; (hi - lo) as usize * bs];
        let mut old: Vec<Vec<u8>> = runs.iter().map(|r| vec![0u8; r.2.len()]).collect();
        {
            let pm = self.member(self.parity_member(p.stripe))?;
            let mut reads = vec![pm.read(base + lo, &mut parity)];
            for (r, buf) in runs.iter().zip(old.iter_mut()) {
                let m = self.member(self.data_member(p.stripe, r.0))?;
                reads.push(m.read(base + r.1, buf));
            }
            try_join_all(reads).await?;
        }
        for (r, buf) in runs.iter().zip(old.iter_mut()) {
            let new = p.data.get(r.2.clone()).ok_or(BlockError::OutOfRange)?;
            zns::parity::xor_into(buf, new);
            let at = (r.1 - lo) as usize * bs;
            let dst = parity
                .get_mut(at..at + buf.len())
                .ok_or(BlockError::OutOfRange)?;
            zns::parity::xor_into(dst, buf);
        }
        let pm = self.member(self.parity_member(p.stripe))?;
        let mut writes = vec![pm.write(base + lo, &parity, fua)];
        for r in &runs {
            let m = self.member(self.data_member(p.stripe, r.0))?;
            let new = p.data.get(r.2.clone()).ok_or(BlockError::OutOfRange)?;
            writes.push(m.write(base + r.1, new, fua));
        }
        try_join_all(writes).await.map(|_| ())
    }
}

#[async_trait]
impl BlockDevice for MdRaid5 {
    fn block_size(&self) -> u32 {
        self.block_size
    }

    fn size_blocks(&self) -> u64 {
        self.stripes * self.data_blocks_per_stripe()
    }

    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        self.check(lba, buf.len())?;
        let bs = self.block_size as usize;
        let mut reads = Vec::new();
        let (mut at, mut rest) = (lba, buf);
        while !rest.is_empty() {
            let per = self.data_blocks_per_stripe();
            let (stripe, within) = (at / per, at % per);
            let (chunk, off) = (within / self.chunk_blocks, within % self.chunk_blocks);
            let n = ((self.chunk_blocks - off) as usize * bs).min(rest.len());
            let (here, after) = rest.split_at_mut(n);
            let m = self.member(self.data_member(stripe, chunk))?;
            reads.push(m.read(stripe * self.chunk_blocks + off, here));
            at += (n / bs) as u64;
            rest = after;
        }
        try_join_all(reads).await.map(|_| ())
    }

    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        self.check(lba, data.len())?;
        let pieces = self.pieces(lba, data);
        try_join_all(pieces.into_iter().map(|p| self.write_piece(p, fua)))
            .await
            .map(|_| ())
    }

    async fn flush(&self) -> BlockResult<()> {
        try_join_all(self.members.iter().map(|m| m.flush()))
            .await
            .map(|_| ())
    }

    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        // Parity must keep matching the data, so a trim writes zeroes through the array.
        self.write_zeroes(lba, blocks, false).await
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        let bytes = usize::try_from(blocks * u64::from(self.block_size))
            .map_err(|_| BlockError::OutOfRange)?;
        self.write(lba, &vec![0u8; bytes], fua).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member in memory that yields before every command completes, so commands of
    /// concurrent writes interleave.
    struct Mem(std::sync::Mutex<Vec<u8>>);

    impl Mem {
        fn bytes(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    #[async_trait]
    impl BlockDevice for Mem {
        fn block_size(&self) -> u32 {
            512
        }
        fn size_blocks(&self) -> u64 {
            self.bytes().len() as u64 / 512
        }
        async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
            tokio::task::yield_now().await;
            let at = lba as usize * 512;
            let v = self.bytes();
            buf.copy_from_slice(v.get(at..at + buf.len()).ok_or(BlockError::OutOfRange)?);
            Ok(())
        }
        async fn write(&self, lba: Lba, data: &[u8], _fua: bool) -> BlockResult<()> {
            tokio::task::yield_now().await;
            let at = lba as usize * 512;
            let mut v = self.bytes();
            v.get_mut(at..at + data.len())
                .ok_or(BlockError::OutOfRange)?
                .copy_from_slice(data);
            Ok(())
        }
        async fn flush(&self) -> BlockResult<()> {
            Ok(())
        }
        async fn trim(&self, _lba: Lba, _blocks: u64) -> BlockResult<()> {
            Ok(())
        }
        async fn write_zeroes(&self, _lba: Lba, _blocks: u64, _fua: bool) -> BlockResult<()> {
            Ok(())
        }
    }

    /// After writes of every size and alignment, four at a time (often in one stripe), each
    /// stripe's parity is the XOR of its data chunks and the data reads back. Without the
    /// stripe lock two read-modify-writes of one stripe read the same old parity and the
    /// second undoes the first's update.
    #[test]
    fn parity_matches_data_after_partial_and_full_writes() {
        let members: Vec<Arc<Mem>> = (0..4)
            .map(|_| Arc::new(Mem(std::sync::Mutex::new(vec![0u8; 64 * 512]))))
            .collect();
        let dyns: Vec<Arc<dyn BlockDevice>> = members
            .iter()
            .map(|m| m.clone() as Arc<dyn BlockDevice>)
            .collect();
        let raid = MdRaid5::new(dyns, 4 * 512).expect("array");
        let size = raid.size_blocks() as usize * 512;
        let mut model = vec![0u8; size];
        let mut rng = zns::SimRng::new(5);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            for round in 0..40u64 {
                // Four writes at once: different stripes or the same one.
                let mut batch: Vec<(u64, Vec<u8>)> = Vec::new();
                for k in 0..4u64 {
                    let blocks = 1 + rng.below(20);
                    let lba = rng.below(raid.size_blocks() - blocks + 1);
                    let overlaps = batch
                        .iter()
                        .any(|(l, d)| lba < l + d.len() as u64 / 512 && *l < lba + blocks);
                    if !overlaps {
                        let fill = (round * 4 + k) as u8 | 1;
                        batch.push((lba, vec![fill; blocks as usize * 512]));
                    }
                }
                for (lba, d) in &batch {
                    let at = *lba as usize * 512;
                    model[at..at + d.len()].copy_from_slice(d);
                }
                let writes = batch.iter().map(|(lba, d)| raid.write(*lba, d, false));
                futures::future::try_join_all(writes).await.expect("write");
            }
            let mut back = vec![0u8; size];
            raid.read(0, &mut back).await.expect("read");
            assert_eq!(back, model, "data reads back");
        });
        for s in 0..raid.stripes {
            let at = (s * 4 * 512) as usize..((s + 1) * 4 * 512) as usize;
            let mut x = vec![0u8; 4 * 512];
            for m in &members {
                zns::parity::xor_into(&mut x, &m.bytes()[at.clone()]);
            }
            assert!(
                x.iter().all(|b| *b == 0),
                "stripe {s}: parity is not the XOR of its data"
            );
        }
    }
}
