//! `CompactStore`: block data in memory, where a block whose bytes are all one value takes
//! one byte instead of a block. For benchmarks that write patterned data over more flash
//! than the host has memory for, and still read back exactly what they wrote (a mount after
//! a crash reads every header, record and checkpoint it finds). Metadata is kept as
//! `MemStore` keeps it.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use super::{spans, SparseBytes, Store};
use crate::image::ZoneEntry;

/// Blocks per chunk: a chunk is materialised whole once any of its blocks is not uniform.
const CHUNK_BLOCKS: usize = 256;

enum Chunk {
    /// Every block is one byte repeated: that byte per block (0 until written).
    Fills(Box<[u8]>),
    /// The chunk's bytes.
    Bytes(Box<[u8]>),
}

/// A byte array of blocks stored as one byte each while they are uniform.
pub struct UniformBlocks {
    block: usize,
    chunks: Vec<RwLock<Option<Chunk>>>,
    /// Bytes of host memory the chunks take.
    footprint: AtomicU64,
}

/// The byte `b` repeats, if it does.
fn uniform(b: &[u8]) -> Option<u8> {
    let first = *b.first()?;
    b.iter().all(|x| *x == first).then_some(first)
}

impl UniformBlocks {
    pub fn new(len: u64, block: usize) -> UniformBlocks {
        let chunk = (block * CHUNK_BLOCKS) as u64;
        let n = len.div_ceil(chunk) as usize;
        UniformBlocks {
            block,
            chunks: (0..n).map(|_| RwLock::new(None)).collect(),
            footprint: AtomicU64::new(0),
        }
    }

    fn chunk_bytes(&self) -> usize {
        self.block * CHUNK_BLOCKS
    }

    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let bs = self.block;
        for (ci, co, bo, n) in spans(self.chunk_bytes(), offset, buf.len()) {
            let out = &mut buf[bo..bo + n];
            match &*self.chunks[ci].read() {
                None => out.fill(0),
                Some(Chunk::Bytes(b)) => out.copy_from_slice(&b[co..co + n]),
                Some(Chunk::Fills(f)) => {
                    let mut done = 0;
                    while done < n {
                        let at = co + done;
                        let k = (bs - at % bs).min(n - done);
                        out[done..done + k].fill(f[at / bs]);
                        done += k;
                    }
                }
            }
        }
    }

    pub fn write(&self, offset: u64, data: &[u8]) {
        let bs = self.block;
        let cb = self.chunk_bytes();
        for (ci, co, bo, n) in spans(cb, offset, data.len()) {
            let part = &data[bo..bo + n];
            let mut guard = self.chunks[ci].write();
            let chunk = guard.get_or_insert_with(|| {
                self.footprint
                    .fetch_add(CHUNK_BLOCKS as u64, Ordering::Relaxed);
                Chunk::Fills(vec![0u8; CHUNK_BLOCKS].into_boxed_slice())
            });
            if let Chunk::Fills(f) = chunk {
                // Whole blocks, each one byte repeated, stay compact.
                let fills: Option<Vec<u8>> = (co % bs == 0 && n % bs == 0)
                    .then(|| part.chunks_exact(bs).map(uniform).collect())
                    .flatten();
                if let Some(fills) = fills {
                    f[co / bs..co / bs + fills.len()].copy_from_slice(&fills);
                    continue;
                }
                let mut bytes = vec![0u8; cb].into_boxed_slice();
                for (b, v) in bytes.chunks_exact_mut(bs).zip(f.iter()) {
                    b.fill(*v);
                }
                self.footprint
                    .fetch_add((cb - CHUNK_BLOCKS) as u64, Ordering::Relaxed);
                *chunk = Chunk::Bytes(bytes);
            }
            if let Chunk::Bytes(b) = chunk {
                b[co..co + n].copy_from_slice(part);
            }
        }
    }

    pub fn footprint_bytes(&self) -> u64 {
        self.footprint.load(Ordering::Relaxed)
    }
}

/// Data in `UniformBlocks`, metadata in `SparseBytes`; the zone table lives only in the
/// device. Reads return exactly what was written, as `MemStore`'s do.
pub struct CompactStore {
    data: UniformBlocks,
    meta: SparseBytes,
}

impl CompactStore {
    pub fn new(data_bytes: u64, meta_bytes: u64, block_size: usize) -> CompactStore {
        CompactStore {
            data: UniformBlocks::new(data_bytes.max(1), block_size.max(1)),
            meta: SparseBytes::new(meta_bytes.max(1), 1 << 16),
        }
    }
}

impl Store for CompactStore {
    fn read_data(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.data.read(offset, buf);
        Ok(())
    }
    fn write_data(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.data.write(offset, data);
        Ok(())
    }
    fn read_meta(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.meta.read(offset, buf);
        Ok(())
    }
    fn write_meta(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.meta.write(offset, data);
        Ok(())
    }
    fn discard(&self, _data: (u64, u64), _meta: (u64, u64)) -> io::Result<()> {
        // As `MemStore`: the device never reads above a write pointer.
        Ok(())
    }
    fn persist_zone(&self, _index: u32, _entry: &ZoneEntry) -> io::Result<()> {
        Ok(())
    }
    fn persist_valid_bitmap(&self, _index: u32, _bits: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn set_clean(&self, _clean: bool) -> io::Result<()> {
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn footprint_bytes(&self) -> u64 {
        self.data.footprint_bytes() + self.meta.allocated_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uniform whole blocks take a byte each; a write that is not (a partial block, or
    /// mixed bytes) materialises its chunk, keeping what the chunk held; reads return what
    /// was written either way.
    #[test]
    fn uniform_blocks_stay_compact_and_read_back_exactly() {
        let bs = 16;
        let s = UniformBlocks::new(4 * 256 * 16, bs);
        let mut buf = vec![9u8; 64];
        s.read(100, &mut buf);
        assert!(buf.iter().all(|b| *b == 0), "unwritten reads as zeros");
        s.write(32, &[0xa5u8; 48]);
        s.write(80, &[0x11u8; 16]);
        assert_eq!(s.footprint_bytes(), 256, "one chunk of fill bytes");
        let mut got = vec![0u8; 80];
        s.read(20, &mut got);
        let mut want = vec![0u8; 12];
        want.extend([0xa5u8; 48]);
        want.extend([0x11u8; 16]);
        want.extend([0u8; 4]);
        assert_eq!(got, want);
        // A mixed block materialises the chunk; the other blocks keep their bytes.
        let mixed: Vec<u8> = (0..16u8).collect();
        s.write(96, &mixed);
        assert_eq!(s.footprint_bytes(), 256 * 16);
        let mut got = vec![0u8; 48];
        s.read(64, &mut got);
        assert_eq!(&got[..16], &[0xa5u8; 16]);
        assert_eq!(&got[16..32], &[0x11u8; 16]);
        assert_eq!(&got[32..], &mixed[..]);
        // A partial block in another chunk materialises that chunk too.
        s.write(256 * 16 + 3, &[7u8; 2]);
        assert_eq!(s.footprint_bytes(), 2 * 256 * 16);
        let mut got = [1u8; 6];
        s.read(256 * 16 + 1, &mut got);
        assert_eq!(got, [0, 0, 7, 7, 0, 0]);
    }

    #[test]
    fn the_store_keeps_data_and_metadata() {
        let s = CompactStore::new(1 << 20, 1 << 16, 4096);
        s.write_data(4096, &[3u8; 8192]).expect("write");
        s.write_meta(64, &[5u8; 64]).expect("meta");
        let mut b = vec![0u8; 4096];
        s.read_data(8192, &mut b).expect("read");
        assert!(b.iter().all(|x| *x == 3));
        let mut m = [0u8; 64];
        s.read_meta(64, &mut m).expect("meta");
        assert_eq!(m, [5u8; 64]);
        assert_eq!(s.footprint_bytes(), 256 + (1 << 16));
    }
}
