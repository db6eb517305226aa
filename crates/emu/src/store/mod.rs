//! Storage backends of the emulated device: where block data, per-block metadata and the
//! persisted zone table live. `MemStore` keeps them in sparse memory; `FileStore` in an image
//! file laid out as docs/FORMAT.md says.
//!
//! A backend only stores bytes; the zone state machine decides what is visible (reads above a
//! zone's write pointer are zeroed by the device, not the backend), so stale bytes left above
//! a write pointer after a reset or power loss are never returned.

mod compact;
mod file;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::RwLock;

pub use compact::{CompactStore, UniformBlocks};
pub use file::{describe_io_error, FileStore, ImageZones};

use crate::image::ZoneEntry;

/// Where a device keeps its bytes. Shared between threads: the device copies a write's data
/// into the store outside its state lock (so writers of different zones copy in parallel),
/// and the zone state machine keeps any two writers off the same bytes.
pub trait Store: Send + Sync {
    fn read_data(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write_data(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    fn read_meta(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write_meta(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// The zone's data may be dropped (after a reset).
    fn discard(&self, data: (u64, u64), meta: (u64, u64)) -> io::Result<()>;
    /// Persists the entry of zone `index`: its restart form, and its open state when written
    /// at a clean shutdown.
    fn persist_zone(&self, index: u32, entry: &ZoneEntry) -> io::Result<()>;
    /// Persists the valid bitmap (its bytes, docs/ZNSPLUS.md) of TL-opened zone `index`,
    /// before the zone's entry says TL-opened.
    fn persist_valid_bitmap(&self, index: u32, bits: &[u8]) -> io::Result<()>;
    /// Records a clean shutdown (true) or that the image is in use (false).
    fn set_clean(&self, clean: bool) -> io::Result<()>;
    /// Pushes everything to stable host storage when the device is configured to.
    fn sync(&self) -> io::Result<()>;
    /// Bytes of host memory or disk the backend currently uses for data.
    fn footprint_bytes(&self) -> u64;
    /// Allocates and touches all the memory the backend may ever use, so that no later
    /// write pays a page fault; returns the bytes this allocated. Backends that keep their
    /// bytes elsewhere have nothing to do.
    fn prefault(&self) -> u64 {
        0
    }
}

/// Splits `len` bytes at `offset` into per-chunk pieces:
/// (chunk index, offset in chunk, offset in the caller's buffer, length).
fn spans(
    chunk_bytes: usize,
    offset: u64,
    len: usize,
) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    let cb = chunk_bytes as u64;
    let mut done = 0usize;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let pos = offset + done as u64;
        let co = (pos % cb) as usize;
        let n = (chunk_bytes - co).min(len - done);
        let item = ((pos / cb) as usize, co, done, n);
        done += n;
        Some(item)
    })
}

type Chunk = RwLock<Option<Aligned>>;

/// The smallest page size of the hosts we run on; touching one byte per page maps it.
const PAGE_BYTES: usize = 4096;

/// A zeroed chunk whose first byte is page-aligned, so every block in it is too. Copies into
/// the store then have a destination at a known alignment: a copy whose source sits at the
/// same offset in a cache line runs about a third faster than one whose offsets differ, and
/// callers can place their buffers to match (the NBD server's write payloads do). Made of
/// one page more than asked, starting at the first page boundary in it.
struct Aligned {
    raw: Box<[u8]>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn zeroed(len: usize) -> Aligned {
        let raw = vec![0u8; len + PAGE_BYTES].into_boxed_slice();
        let start = (PAGE_BYTES - raw.as_ptr() as usize % PAGE_BYTES) % PAGE_BYTES;
        Aligned { raw, start, len }
    }

    fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// A sparse byte array of fixed-size chunks allocated on first write. Each chunk has its own
/// lock, so threads copying into different chunks do not wait for each other.
pub struct SparseBytes {
    chunk_bytes: usize,
    chunks: Vec<Chunk>,
    allocated: AtomicUsize,
}

impl SparseBytes {
    pub fn new(len: u64, chunk_bytes: usize) -> SparseBytes {
        let n = len.div_ceil(chunk_bytes as u64) as usize;
        SparseBytes {
            chunk_bytes,
            chunks: (0..n).map(|_| RwLock::new(None)).collect(),
            allocated: AtomicUsize::new(0),
        }
    }

    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        for (ci, co, bo, n) in spans(self.chunk_bytes, offset, buf.len()) {
            match &*self.chunks[ci].read() {
                Some(c) => buf[bo..bo + n].copy_from_slice(&c.bytes()[co..co + n]),
                None => buf[bo..bo + n].fill(0),
            }
        }
    }

    pub fn write(&self, offset: u64, data: &[u8]) {
        for (ci, co, bo, n) in spans(self.chunk_bytes, offset, data.len()) {
            self.write_chunk(ci, co, &data[bo..bo + n]);
        }
    }

    fn write_chunk(&self, ci: usize, co: usize, data: &[u8]) {
        let mut guard = self.chunks[ci].write();
        let chunk = guard.get_or_insert_with(|| self.new_chunk());
        chunk.bytes_mut()[co..co + data.len()].copy_from_slice(data);
    }

    fn new_chunk(&self) -> Aligned {
        self.allocated.fetch_add(1, Ordering::Relaxed);
        Aligned::zeroed(self.chunk_bytes)
    }

    /// Allocates every chunk not yet allocated and writes one byte of each of its pages.
    /// A zeroed allocation is mapped lazily: the first write to each page faults and the
    /// kernel clears the page, which under a write-heavy load costs more CPU than copying
    /// the data. Returns the bytes allocated here.
    pub fn prefault(&self) -> u64 {
        let mut fresh = 0u64;
        for chunk in &self.chunks {
            let mut guard = chunk.write();
            if guard.is_some() {
                continue;
            }
            let mut c = self.new_chunk();
            // `black_box` keeps the compiler from dropping zero stores into memory it knows
            // was allocated zeroed; the stores are what make the kernel map the pages.
            for page in std::hint::black_box(c.bytes_mut()).chunks_mut(PAGE_BYTES) {
                if let Some(b) = page.first_mut() {
                    *b = 0;
                }
            }
            *guard = Some(c);
            fresh += self.chunk_bytes as u64;
        }
        fresh
    }

    /// Zeroes a range, freeing the chunks it covers whole.
    pub fn discard(&self, offset: u64, len: u64) {
        let cb = self.chunk_bytes as u64;
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let ci = (pos / cb) as usize;
            let co = pos % cb;
            let n = (cb - co).min(end - pos);
            let mut guard = self.chunks[ci].write();
            if co == 0 && n == cb {
                if guard.take().is_some() {
                    self.allocated.fetch_sub(1, Ordering::Relaxed);
                }
            } else if let Some(c) = &mut *guard {
                c.bytes_mut()[co as usize..(co + n) as usize].fill(0);
            }
            pos += n;
        }
    }

    pub fn allocated_bytes(&self) -> u64 {
        (self.allocated.load(Ordering::Relaxed) * self.chunk_bytes) as u64
    }
}

/// Data and metadata in sparse memory; the zone table lives only in the device.
pub struct MemStore {
    data: SparseBytes,
    meta: SparseBytes,
    /// Data bytes at or beyond this offset are not kept (`MemStore::keeping_data_below`).
    kept_data: u64,
}

impl MemStore {
    pub fn new(data_bytes: u64, meta_bytes: u64) -> MemStore {
        Self::keeping_data_below(data_bytes, meta_bytes, data_bytes)
    }

    /// A store that keeps block data only below byte `kept` (metadata everywhere): a write
    /// beyond it is accepted and its data dropped, and a read of data beyond it fails (it
    /// never returns bytes the device does not hold). For benchmarks whose timing does not
    /// depend on what the bulk of their writes hold and that never read it back.
    pub fn keeping_data_below(data_bytes: u64, meta_bytes: u64, kept: u64) -> MemStore {
        let kept_data = kept.min(data_bytes);
        MemStore {
            data: SparseBytes::new(kept_data.max(1), 1 << 20),
            meta: SparseBytes::new(meta_bytes.max(1), 1 << 16),
            kept_data,
        }
    }
}

impl Store for MemStore {
    fn read_data(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if !buf.is_empty() && offset.saturating_add(buf.len() as u64) > self.kept_data {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "the data at byte {offset} ({} bytes) is not kept: this memory device keeps only the data below byte {}",
                    buf.len(),
                    self.kept_data
                ),
            ));
        }
        self.data.read(offset, buf);
        Ok(())
    }
    fn write_data(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        // The part below `kept_data` is kept; the rest is dropped.
        let kept = self.kept_data.saturating_sub(offset).min(data.len() as u64) as usize;
        if kept > 0 {
            self.data.write(offset, &data[..kept]);
        }
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
        // Chunks stay allocated across a reset: the device never reads above a write pointer,
        // and keeping them spares the next writes the page faults of fresh memory (the host
        // FTL resets zones continuously). Memory use is bounded by the high-water mark.
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
        self.data.allocated_bytes() + self.meta.allocated_bytes()
    }
    fn prefault(&self) -> u64 {
        self.data.prefault() + self.meta.prefault()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_bytes_reads_zeros_until_written_and_frees_whole_chunks() {
        let s = SparseBytes::new(10_000, 1000);
        let mut buf = vec![1u8; 2500];
        s.read(500, &mut buf);
        assert!(buf.iter().all(|b| *b == 0));
        let data: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
        s.write(500, &data);
        s.read(500, &mut buf);
        assert_eq!(buf, data);
        assert_eq!(s.allocated_bytes(), 3000);
        s.discard(1000, 1000);
        assert_eq!(s.allocated_bytes(), 2000);
        s.read(500, &mut buf);
        assert_eq!(&buf[..500], &data[..500]);
        assert!(buf[500..1500].iter().all(|b| *b == 0));
        assert_eq!(&buf[1500..], &data[1500..]);
        s.discard(2900, 50);
        let mut one = [9u8; 1];
        s.read(2920, &mut one);
        assert_eq!(one, [0]);
    }

    #[test]
    fn a_store_keeping_data_below_a_bound_drops_the_rest_and_refuses_to_read_it() {
        let s = MemStore::keeping_data_below(1 << 24, 1 << 16, 3 << 20);
        let data = vec![7u8; 2 << 20];
        // Straddles the bound: the first MiB is kept, the second dropped.
        s.write_data(2 << 20, &data).unwrap();
        s.write_data(8 << 20, &data).unwrap();
        s.write_meta(1 << 15, &[5u8; 16]).unwrap();
        assert_eq!(s.footprint_bytes(), (1 << 20) + (1 << 16));
        let mut buf = vec![0u8; 1 << 20];
        s.read_data(2 << 20, &mut buf).unwrap();
        assert!(buf.iter().all(|b| *b == 7));
        let e = s.read_data((2 << 20) + 1, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(e.to_string().contains("not kept"), "{e}");
        assert!(s.read_data(8 << 20, &mut buf).is_err());
        let mut meta = [0u8; 16];
        s.read_meta(1 << 15, &mut meta).unwrap();
        assert_eq!(meta, [5u8; 16]);
        // The ordinary store keeps everything.
        let all = MemStore::new(1 << 24, 1 << 16);
        all.write_data(8 << 20, &data).unwrap();
        all.read_data(8 << 20, &mut buf).unwrap();
        assert!(buf.iter().all(|b| *b == 7));
    }

    #[test]
    fn every_chunk_starts_on_a_page() {
        let s = SparseBytes::new(1 << 22, 1 << 20);
        s.write(5 << 20 >> 2, &[1]);
        s.prefault();
        for chunk in &s.chunks {
            let guard = chunk.read();
            let c = guard.as_ref().expect("allocated");
            assert_eq!(c.bytes().as_ptr() as usize % PAGE_BYTES, 0);
            assert_eq!(c.bytes().len(), 1 << 20);
        }
    }

    #[test]
    fn prefault_allocates_the_missing_chunks_and_keeps_written_bytes() {
        let s = SparseBytes::new(10_000, 1000);
        let data = [7u8; 1500];
        s.write(2500, &data);
        assert_eq!(s.allocated_bytes(), 2000);
        assert_eq!(s.prefault(), 8000, "only the chunks not yet allocated");
        assert_eq!(s.allocated_bytes(), 10_000);
        assert_eq!(s.prefault(), 0, "nothing left to allocate");
        let mut buf = vec![1u8; 10_000];
        s.read(0, &mut buf);
        assert!(buf[..2500].iter().all(|b| *b == 0));
        assert_eq!(&buf[2500..4000], &data[..]);
        assert!(buf[4000..].iter().all(|b| *b == 0));
    }
}
