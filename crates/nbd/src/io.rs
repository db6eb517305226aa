//! Byte-addressed I/O on a block device: NBD clients may address any byte, a `BlockDevice`
//! only whole blocks. Whole blocks go straight to the device; a partial block at either end of
//! a request is read, patched and written back (read-modify-write).
//!
//! Concurrency: every piece that writes takes the block locks of `locks.rs`: a read-modify-write
//! holds its block exclusively for the whole read-patch-write (two requests writing different
//! bytes of one block must both land, and a whole-block write must not be undone by an older
//! write-back); whole-block writes, write zeroes and trims hold their blocks shared, which
//! excludes read-modify-write but not each other. Reads take no lock.

use zns::{BlockDevice, BlockResult};

use crate::locks::BlockLocks;
use crate::span::{split, Partial, Span};

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
    let _guard = locks.exclusive(p.lba).await;
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
        let _guard = locks.shared(w.lba, w.blocks).await;
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
        let _guard = locks.shared(w.lba, w.blocks).await;
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
pub async fn trim(
    dev: &dyn BlockDevice,
    locks: &BlockLocks,
    offset: u64,
    len: usize,
    fua: bool,
) -> BlockResult<()> {
    let s = span(dev, offset, len);
    if let Some(w) = s.whole {
        // Trimmed blocks read as zeros on most volumes: a write that old bytes must not undo.
        let guard = locks.shared(w.lba, w.blocks).await;
        dev.trim(w.lba, w.blocks).await?;
        drop(guard);
        if fua {
            dev.flush().await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use async_trait::async_trait;
    use futures::poll;
    use tokio::sync::Semaphore;
    use zns::Lba;

    use super::*;
    use crate::MemDisk;

    const BS: usize = 4096;

    /// A `MemDisk` whose reads complete only at a gate the test opens, so a read-modify-write can be
    /// stopped between its read and its write-back.
    struct HeldReads {
        inner: MemDisk,
        gate: Semaphore,
    }

    #[async_trait]
    impl BlockDevice for HeldReads {
        fn block_size(&self) -> u32 {
            self.inner.block_size()
        }
        fn size_blocks(&self) -> u64 {
            self.inner.size_blocks()
        }
        async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
            // The data is read first, then held: the caller gets bytes that are already old
            // if the block is written while it waits.
            let read = self.inner.read(lba, buf).await;
            if let Ok(permit) = self.gate.acquire().await {
                permit.forget();
            }
            read
        }
        async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
            self.inner.write(lba, data, fua).await
        }
        async fn flush(&self) -> BlockResult<()> {
            self.inner.flush().await
        }
        async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
            self.inner.trim(lba, blocks).await
        }
        async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
            self.inner.write_zeroes(lba, blocks, fua).await
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum WholeOp {
        Write,
        Zeroes,
        Trim,
    }

    async fn whole(dev: &HeldReads, locks: &BlockLocks, op: WholeOp) -> BlockResult<()> {
        match op {
            WholeOp::Write => write(dev, locks, BS as u64, &[3u8; BS], false).await,
            WholeOp::Zeroes => write_zeroes(dev, locks, BS as u64, BS, false).await,
            WholeOp::Trim => trim(dev, locks, BS as u64, BS, false).await,
        }
    }

    /// Regression guard: whole-block writes, write zeroes and trims used to take no lock, so
    /// one landing between a read-modify-write's read and its write-back was undone by the
    /// write-back's old bytes, a result no serial order of the two requests gives. Here the
    /// read-modify-write is stopped after its read while the whole-block command is polled.
    #[tokio::test]
    async fn a_whole_block_command_never_lands_inside_a_read_modify_write() {
        for op in [WholeOp::Write, WholeOp::Zeroes, WholeOp::Trim] {
            let dev = HeldReads {
                inner: MemDisk::new(BS as u32, 4).expect("memdisk"),
                gate: Semaphore::new(0),
            };
            let locks = BlockLocks::default();
            dev.inner.write(1, &[1u8; BS], false).await.expect("setup");
            // Bytes 10..110 of block 1, read-modify-write; it stops at the gate after taking
            // its lock.
            let mut rmw = pin!(write(&dev, &locks, BS as u64 + 10, &[2u8; 100], false));
            assert!(poll!(rmw.as_mut()).is_pending());
            let mut other = pin!(whole(&dev, &locks, op));
            let early = poll!(other.as_mut());
            dev.gate.add_permits(1);
            rmw.await.expect("patch");
            if early.is_pending() {
                other.await.expect("whole-block command");
            }
            let mut got = vec![0u8; BS];
            dev.inner.read(1, &mut got).await.expect("read");
            let after = if let WholeOp::Write = op { 3 } else { 0 };
            let whole_last = vec![after; BS];
            let mut patch_last = whole_last.clone();
            patch_last[10..110].fill(2);
            assert!(
                got == whole_last || got == patch_last,
                "{op:?}: block 1 holds {:?}..., which no serial order gives",
                &got[..16]
            );
        }
    }
}
