//! Byte-addressed I/O on a block device: NBD clients may address any byte, a `BlockDevice`
//! only whole blocks. Whole blocks go straight to the device; a partial block at either end of
//! a request is read, patched and written back (read-modify-write).
//!
//! Concurrency: two requests that write different bytes of one block (a client using 512-byte
//! sectors on a 4 KiB device does this all the time) must both land, so every
//! read-modify-write holds a lock on its block for the whole read-patch-write, shared by all
//! connections of a server. Requests that write the same bytes concurrently have no defined
//! order in NBD (or in any block layer), so whole-block writes take no lock.

use tokio::sync::{Mutex, MutexGuard};
use zns::{BlockDevice, BlockResult};

use crate::span::{split, Partial, Span};

/// How many locks the blocks of a volume hash onto.
const LOCK_SHARDS: usize = 256;

/// Locks that serialise read-modify-write per block. Blocks hash onto a fixed number of
/// shards, so memory stays bounded; two blocks sharing a shard merely wait for each other.
pub struct BlockLocks {
    shards: Box<[Mutex<()>; LOCK_SHARDS]>,
}

impl Default for BlockLocks {
    fn default() -> BlockLocks {
        BlockLocks {
            shards: Box::new(std::array::from_fn(|_| Mutex::new(()))),
        }
    }
}

impl BlockLocks {
    async fn lock(&self, lba: u64) -> MutexGuard<'_, ()> {
        // The remainder is below LOCK_SHARDS, so the index is always in bounds.
        self.shards[(lba % LOCK_SHARDS as u64) as usize]
            .lock()
            .await
    }
}

fn span(dev: &dyn BlockDevice, offset: u64, len: usize) -> Span {
    split(offset, len as u64, dev.block_size())
}

async fn read_partial(dev: &dyn BlockDevice, p: Partial, out: &mut [u8]) -> BlockResult<()> {
    let mut block = vec![0u8; dev.block_size() as usize];
    dev.read(p.lba, &mut block).await?;
    if let (Some(src), Some(dst)) = (block.get(p.start..p.start + p.len), out.get_mut(..p.len)) {
        dst.copy_from_slice(src);
    }
    Ok(())
}

/// Reads `buf.len()` bytes at byte `offset`.
pub async fn read(dev: &dyn BlockDevice, offset: u64, buf: &mut [u8]) -> BlockResult<()> {
    let s = span(dev, offset, buf.len());
    let (head, rest) = buf.split_at_mut(s.head_len());
    let (whole, tail) = rest.split_at_mut(s.whole_len());
    if let Some(p) = s.head {
        read_partial(dev, p, head).await?;
    }
    if let Some(w) = s.whole {
        dev.read(w.lba, whole).await?;
    }
    if let Some(p) = s.tail {
        read_partial(dev, p, tail).await?;
    }
    Ok(())
}

/// Read-modify-write of one partial block; `data` of `None` writes zeros.
async fn patch(
    dev: &dyn BlockDevice,
    locks: &BlockLocks,
    p: Partial,
    data: Option<&[u8]>,
    fua: bool,
) -> BlockResult<()> {
    let _guard = locks.lock(p.lba).await;
    let mut block = vec![0u8; dev.block_size() as usize];
    dev.read(p.lba, &mut block).await?;
    if let Some(dst) = block.get_mut(p.start..p.start + p.len) {
        match data.and_then(|d| d.get(..p.len)) {
            Some(src) => dst.copy_from_slice(src),
            None => dst.fill(0),
        }
    }
    dev.write(p.lba, &block, fua).await
}

/// Writes `data` at byte `offset`; with `fua` every piece is written with FUA.
pub async fn write(
    dev: &dyn BlockDevice,
    locks: &BlockLocks,
    offset: u64,
    data: &[u8],
    fua: bool,
) -> BlockResult<()> {
    let s = span(dev, offset, data.len());
    let (head, rest) = data.split_at(s.head_len());
    let (whole, tail) = rest.split_at(s.whole_len());
    if let Some(p) = s.head {
        patch(dev, locks, p, Some(head), fua).await?;
    }
    if let Some(w) = s.whole {
        dev.write(w.lba, whole, fua).await?;
    }
    if let Some(p) = s.tail {
        patch(dev, locks, p, Some(tail), fua).await?;
    }
    Ok(())
}

/// Writes `len` zero bytes at byte `offset`: the device's write zeroes for whole blocks, a
/// read-modify-write for partial ones.
pub async fn write_zeroes(
    dev: &dyn BlockDevice,
    locks: &BlockLocks,
    offset: u64,
    len: usize,
    fua: bool,
) -> BlockResult<()> {
    let s = span(dev, offset, len);
    if let Some(p) = s.head {
        patch(dev, locks, p, None, fua).await?;
    }
    if let Some(w) = s.whole {
        dev.write_zeroes(w.lba, w.blocks, fua).await?;
    }
    if let Some(p) = s.tail {
        patch(dev, locks, p, None, fua).await?;
    }
    Ok(())
}

/// Discards the whole blocks inside the range. Partial blocks at the ends are left as they
/// are: trim is a hint, and the protocol lets a server discard less than was asked. The
/// trait's trim has no FUA, so a FUA trim is followed by a flush.
pub async fn trim(dev: &dyn BlockDevice, offset: u64, len: usize, fua: bool) -> BlockResult<()> {
    let s = span(dev, offset, len);
    if let Some(w) = s.whole {
        dev.trim(w.lba, w.blocks).await?;
        if fua {
            dev.flush().await?;
        }
    }
    Ok(())
}
