//! `ConvSsd`: a conventional (block-interface) SSD on the timing model's flash array, with a
//! page-mapped device FTL and greedy garbage collection (`timing::pagemap`), exposed as a
//! `BlockDevice`. It exists to compare a ZNS drive with the same hardware behind a block
//! interface (ZNS paper Fig. 1): same flash, same controller, and over-provisioning for the
//! device's garbage collector.
//!
//! Data lives in sparse memory and is never lost: this device models performance, not power
//! loss, so every completed write is durable and Flush only costs time. Trim and Write Zeroes
//! zero their blocks.

use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::time::Instant;
use zns::{BlockDevice, BlockError, BlockResult, Lba};

use crate::store::SparseBytes;
use crate::timing::{wait_until, ClockMode, ConvCmd, GcCounters, PageMapped, TimingProfile};
use crate::EmuError;

/// Largest piece the model books as one command; a longer write is booked piece by piece so
/// the write buffer can always admit it.
const PIECE_BYTES: u64 = 1 << 20;

/// A conventional SSD with device-side garbage collection.
pub struct ConvSsd {
    block_size: u32,
    blocks: u64,
    data: Mutex<SparseBytes>,
    model: Mutex<PageMapped>,
    mode: ClockMode,
    epoch: OnceLock<Instant>,
}

impl ConvSsd {
    /// A drive on the array of `profile` whose spare flash is `op` of its logical capacity
    /// (over-provisioning: physical = logical x (1 + op)), with 4 KiB blocks.
    pub fn new(profile: TimingProfile, op: f64, mode: ClockMode) -> Result<ConvSsd, EmuError> {
        if !(op.is_finite() && op > 0.0) {
            return Err(EmuError::Config(format!(
                "over-provisioning {op} must be above 0"
            )));
        }
        let block_size = 4096u32;
        let physical = profile.raw_bytes() / u64::from(block_size);
        let logical = (physical as f64 / (1.0 + op)) as u64;
        Self::with_blocks(profile, block_size, logical, mode)
    }

    /// A drive exposing exactly `blocks` logical blocks of `block_size` bytes.
    pub fn with_blocks(
        profile: TimingProfile,
        block_size: u32,
        blocks: u64,
        mode: ClockMode,
    ) -> Result<ConvSsd, EmuError> {
        let model = PageMapped::new(profile, block_size, blocks).map_err(EmuError::Config)?;
        Ok(ConvSsd {
            block_size,
            blocks,
            data: Mutex::new(SparseBytes::new(blocks * u64::from(block_size), 1 << 20)),
            model: Mutex::new(model),
            mode,
            epoch: OnceLock::new(),
        })
    }

    pub fn gc_counters(&self) -> GcCounters {
        self.model.lock().gc_counters()
    }

    /// The timing model's counters (flash operations, buffer waits).
    pub fn timing_counters(&self) -> crate::timing::TimingCounters {
        self.model.lock().counters()
    }

    fn check(&self, lba: Lba, bytes: usize) -> BlockResult<u64> {
        let bs = self.block_size as usize;
        if bytes == 0 || !bytes.is_multiple_of(bs) {
            return Err(BlockError::Misaligned);
        }
        let n = (bytes / bs) as u64;
        match lba.checked_add(n) {
            Some(end) if end <= self.blocks => Ok(n),
            _ => Err(BlockError::OutOfRange),
        }
    }

    fn check_blocks(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        match lba.checked_add(blocks) {
            Some(end) if end <= self.blocks && blocks > 0 => Ok(()),
            _ => Err(BlockError::OutOfRange),
        }
    }

    /// Books `cmds` (submitted now) with the model and waits for the last to complete.
    async fn complete(&self, cmds: &[ConvCmd]) {
        let now = Instant::now();
        let epoch = *self.epoch.get_or_init(|| now);
        let now_ns = now.saturating_duration_since(epoch).as_nanos() as u64;
        let done = {
            let mut m = self.model.lock();
            cmds.iter()
                .map(|c| m.submit(now_ns, c))
                .max()
                .unwrap_or(now_ns)
        };
        wait_until(self.mode, epoch + Duration::from_nanos(done)).await;
    }

    /// The model commands for a write of `blocks` at `lba`, in pieces the buffer can admit.
    fn write_pieces(&self, lba: Lba, blocks: u64, fua: bool) -> Vec<ConvCmd> {
        let per = (PIECE_BYTES / u64::from(self.block_size)).max(1);
        (0..blocks.div_ceil(per))
            .map(|i| {
                let at = lba + i * per;
                let n = per.min(lba + blocks - at);
                ConvCmd::Write {
                    lba: at,
                    blocks: n,
                    fua,
                }
            })
            .collect()
    }
}

#[async_trait]
impl BlockDevice for ConvSsd {
    fn block_size(&self) -> u32 {
        self.block_size
    }

    fn size_blocks(&self) -> u64 {
        self.blocks
    }

    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        let r = self.check(lba, buf.len());
        if let Ok(n) = r {
            self.data.lock().read(lba * u64::from(self.block_size), buf);
            self.complete(&[ConvCmd::Read { lba, blocks: n }]).await;
        } else {
            self.complete(&[ConvCmd::Rejected]).await;
        }
        r.map(|_| ())
    }

    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        let r = self.check(lba, data.len());
        match r {
            Ok(n) => {
                self.data
                    .lock()
                    .write(lba * u64::from(self.block_size), data);
                let cmds = self.write_pieces(lba, n, fua);
                self.complete(&cmds).await;
            }
            Err(_) => self.complete(&[ConvCmd::Rejected]).await,
        }
        r.map(|_| ())
    }

    async fn flush(&self) -> BlockResult<()> {
        self.complete(&[ConvCmd::Flush]).await;
        Ok(())
    }

    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        let r = self.check_blocks(lba, blocks);
        if r.is_ok() {
            let bs = u64::from(self.block_size);
            self.data.lock().discard(lba * bs, blocks * bs);
            self.complete(&[ConvCmd::Trim { lba, blocks }]).await;
        } else {
            self.complete(&[ConvCmd::Rejected]).await;
        }
        r
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, _fua: bool) -> BlockResult<()> {
        // A block device may implement Write Zeroes as a deallocation, as SSDs commonly do.
        self.trim(lba, blocks).await
    }
}
