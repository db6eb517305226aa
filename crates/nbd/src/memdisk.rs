//! `MemDisk`: a sparse in-memory block volume, for tests and for measuring the NBD server
//! without a real volume underneath.
//!
//! Durability: everything a command does is durable when it completes (there is no cache to
//! lose), so `flush` has nothing to do and FUA changes nothing. Trim and write zeroes both
//! leave the range reading as zeros and free fully covered chunks. Memory is allocated in
//! chunks on first write, so it is bounded by the bytes written, not the volume size.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use parking_lot::RwLock;
use zns::{BlockDevice, BlockError, BlockResult, Lba};

/// Bytes per allocation unit (or one block, when blocks are larger).
const CHUNK_BYTES: u64 = 256 * 1024;
/// Independent locks over the chunks, so that concurrent commands rarely contend.
const SHARDS: usize = 64;

/// Why a `MemDisk` could not be created.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemDiskError {
    #[error("block size {0} is not a power of two between 512 and 65536")]
    BlockSize(u32),
    #[error("a volume of {blocks} blocks of {block_size} bytes is empty or 2^63 bytes or larger")]
    Size { blocks: u64, block_size: u32 },
}

/// Commands a `MemDisk` has completed, by type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemDiskCounters {
    pub reads: u64,
    pub writes: u64,
    pub fua_writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub write_zeroes: u64,
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    fua_writes: AtomicU64,
    flushes: AtomicU64,
    trims: AtomicU64,
    write_zeroes: AtomicU64,
}

type Shard = RwLock<HashMap<u64, Box<[u8]>>>;

/// A sparse, immediately durable, in-memory block volume.
pub struct MemDisk {
    block_size: u32,
    size_blocks: u64,
    chunk_bytes: u64,
    shards: Box<[Shard]>,
    counters: Counters,
}

impl MemDisk {
    /// A zero-filled volume of `size_blocks` blocks of `block_size` bytes.
    pub fn new(block_size: u32, size_blocks: u64) -> Result<MemDisk, MemDiskError> {
        if !block_size.is_power_of_two() || !(512..=65536).contains(&block_size) {
            return Err(MemDiskError::BlockSize(block_size));
        }
        // Clients such as qemu hold sizes in signed 64-bit integers, hence the 2^63 limit.
        let bytes = size_blocks.checked_mul(u64::from(block_size));
        let too_large = bytes.is_none() || bytes > Some(i64::MAX as u64);
        if size_blocks == 0 || too_large {
            return Err(MemDiskError::Size {
                blocks: size_blocks,
                block_size,
            });
        }
        Ok(MemDisk {
            block_size,
            size_blocks,
            chunk_bytes: CHUNK_BYTES.max(u64::from(block_size)),
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            counters: Counters::default(),
        })
    }

    /// Bytes of memory holding data (whole chunks), for checking that the volume is sparse.
    pub fn allocated_bytes(&self) -> u64 {
        let chunks: usize = self.shards.iter().map(|s| s.read().len()).sum();
        chunks as u64 * self.chunk_bytes
    }

    pub fn counters(&self) -> MemDiskCounters {
        let c = &self.counters;
        MemDiskCounters {
            reads: c.reads.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            fua_writes: c.fua_writes.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
            trims: c.trims.load(Ordering::Relaxed),
            write_zeroes: c.write_zeroes.load(Ordering::Relaxed),
        }
    }

    fn shard(&self, chunk: u64) -> &Shard {
        // The remainder is below the shard count, so the index is in bounds.
        &self.shards[(chunk % self.shards.len() as u64) as usize]
    }

    /// Checks a command's range and returns its byte offset.
    fn range(&self, lba: Lba, bytes: u64) -> BlockResult<u64> {
        let bs = u64::from(self.block_size);
        if !bytes.is_multiple_of(bs) {
            return Err(BlockError::Misaligned);
        }
        match lba.checked_add(bytes / bs) {
            Some(end) if end <= self.size_blocks => Ok(lba * bs),
            _ => Err(BlockError::OutOfRange),
        }
    }

    /// Calls `f(chunk, offset in chunk, offset in the command, length)` for each chunk piece
    /// of `len` bytes at byte `offset`.
    fn pieces(&self, offset: u64, len: u64, mut f: impl FnMut(u64, usize, usize, usize)) {
        let mut done = 0u64;
        while done < len {
            let at = offset + done;
            let chunk = at / self.chunk_bytes;
            let in_chunk = at % self.chunk_bytes;
            let n = (self.chunk_bytes - in_chunk).min(len - done);
            f(chunk, in_chunk as usize, done as usize, n as usize);
            done += n;
        }
    }

    fn zero(&self, offset: u64, len: u64) {
        let chunk_bytes = self.chunk_bytes as usize;
        self.pieces(offset, len, |chunk, at, _, n| {
            let mut shard = self.shard(chunk).write();
            if n == chunk_bytes {
                shard.remove(&chunk);
            } else if let Some(dst) = shard.get_mut(&chunk).and_then(|c| c.get_mut(at..at + n)) {
                dst.fill(0);
            }
        });
    }
}

#[async_trait]
impl BlockDevice for MemDisk {
    fn block_size(&self) -> u32 {
        self.block_size
    }

    fn size_blocks(&self) -> u64 {
        self.size_blocks
    }

    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        let offset = self.range(lba, buf.len() as u64)?;
        self.pieces(offset, buf.len() as u64, |chunk, at, pos, n| {
            let Some(dst) = buf.get_mut(pos..pos + n) else {
                return;
            };
            let shard = self.shard(chunk).read();
            match shard.get(&chunk).and_then(|c| c.get(at..at + n)) {
                Some(src) => dst.copy_from_slice(src),
                None => dst.fill(0),
            }
        });
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        let offset = self.range(lba, data.len() as u64)?;
        let chunk_bytes = self.chunk_bytes as usize;
        self.pieces(offset, data.len() as u64, |chunk, at, pos, n| {
            let Some(src) = data.get(pos..pos + n) else {
                return;
            };
            let mut shard = self.shard(chunk).write();
            let c = shard
                .entry(chunk)
                .or_insert_with(|| vec![0u8; chunk_bytes].into());
            if let Some(dst) = c.get_mut(at..at + n) {
                dst.copy_from_slice(src);
            }
        });
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        if fua {
            self.counters.fua_writes.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn flush(&self) -> BlockResult<()> {
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        let bytes = blocks
            .checked_mul(u64::from(self.block_size))
            .ok_or(BlockError::OutOfRange)?;
        let offset = self.range(lba, bytes)?;
        self.zero(offset, bytes);
        self.counters.trims.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, _fua: bool) -> BlockResult<()> {
        let bytes = blocks
            .checked_mul(u64::from(self.block_size))
            .ok_or(BlockError::OutOfRange)?;
        let offset = self.range(lba, bytes)?;
        self.zero(offset, bytes);
        self.counters.write_zeroes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
