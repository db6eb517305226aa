//! Long write runs measured as a throughput time series, for ZNS paper Fig. 1: concurrent
//! jobs overwrite a device's usable capacity several times, and the throughput of every
//! window of bytes is recorded so the collapse when device garbage collection starts shows.
//!
//! On a `BlockDevice` each job writes random aligned blocks over the whole device; on a
//! `ZonedDevice` each job owns every n-th zone and writes them in turn at queue depth 1,
//! resetting a zone before it writes it again (a circular log, as a ZNS host does).

use std::cell::RefCell;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use zns::{BlockDevice, BlockResult, NvmeResult, SimRng, ZoneAction, ZonedDevice};

/// Throughput of consecutive windows of the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Bytes written when each window ended.
    pub bytes: Vec<u64>,
    /// MiB/s within each window.
    pub mib_per_sec: Vec<f64>,
}

impl Series {
    /// Throughput over the windows that end after `from` of the bytes written.
    pub fn mean_after(&self, from: f64) -> f64 {
        let total = self.bytes.last().copied().unwrap_or(0) as f64;
        let (mut n, mut sum) = (0usize, 0.0);
        for (b, r) in self.bytes.iter().zip(&self.mib_per_sec) {
            if *b as f64 > from * total {
                n += 1;
                sum += r;
            }
        }
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    }
}

/// Cuts completed bytes into windows of `window_bytes` and records each window's throughput.
pub(crate) struct Recorder {
    window_bytes: u64,
    bytes: u64,
    mark: (Instant, u64),
    series: Series,
}

impl Recorder {
    pub(crate) fn new(window_bytes: u64) -> Recorder {
        Recorder {
            window_bytes,
            bytes: 0,
            mark: (Instant::now(), 0),
            series: Series::default(),
        }
    }

    /// The windows recorded so far.
    pub(crate) fn into_series(self) -> Series {
        self.series
    }

    pub(crate) fn done(&mut self, bytes: u64) {
        self.bytes += bytes;
        if self.bytes - self.mark.1 >= self.window_bytes {
            let now = Instant::now();
            let secs = now.saturating_duration_since(self.mark.0).as_secs_f64();
            let mib = (self.bytes - self.mark.1) as f64 / (1u64 << 20) as f64;
            self.series.bytes.push(self.bytes);
            self.series
                .mib_per_sec
                .push(if secs > 0.0 { mib / secs } else { 0.0 });
            self.mark = (now, self.bytes);
        }
    }
}

/// `jobs` jobs each keep `queue_depth` random `block_bytes` writes in flight on `dev` until
/// together they have written `total_bytes`.
pub async fn block_random_writes(
    dev: &dyn BlockDevice,
    jobs: u32,
    queue_depth: u32,
    block_bytes: u64,
    total_bytes: u64,
    window_bytes: u64,
    seed: u64,
) -> BlockResult<Series> {
    let rec = RefCell::new(Recorder::new(window_bytes));
    let slots = dev.size_blocks() * u64::from(dev.block_size()) / block_bytes;
    let per_job = total_bytes / u64::from(jobs);
    let data = vec![0xa5u8; block_bytes as usize];
    let job = |j: u32| {
        let (rec, data) = (&rec, &data);
        async move {
            let mut rng = SimRng::new(seed ^ u64::from(j).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut inflight = FuturesUnordered::new();
            let mut issued = 0u64;
            loop {
                while inflight.len() < queue_depth as usize && issued < per_job {
                    let lba = rng.below(slots) * block_bytes / u64::from(dev.block_size());
                    issued += block_bytes;
                    inflight.push(async move {
                        dev.write(lba, data, false).await?;
                        rec.borrow_mut().done(block_bytes);
                        BlockResult::Ok(())
                    });
                }
                match inflight.next().await {
                    Some(r) => r?,
                    None => return BlockResult::Ok(()),
                }
            }
        }
    };
    let results = futures::future::join_all((0..jobs).map(job)).await;
    results.into_iter().collect::<BlockResult<Vec<()>>>()?;
    Ok(rec.into_inner().series)
}

/// `jobs` jobs each write their own zones (job j: zones j, j + jobs, ...) in turn with
/// `block_bytes` Zone Writes at queue depth 1, resetting a zone before rewriting it, until
/// together they have written `total_bytes`.
pub async fn zoned_log_writes(
    dev: &dyn ZonedDevice,
    jobs: u32,
    block_bytes: u64,
    total_bytes: u64,
    window_bytes: u64,
) -> NvmeResult<Series> {
    let g = dev.geometry();
    let rec = RefCell::new(Recorder::new(window_bytes));
    let per_job = total_bytes / u64::from(jobs);
    let data = vec![0xa5u8; block_bytes as usize];
    let step = block_bytes / u64::from(g.block_size);
    let job = |j: u32| {
        let (rec, data) = (&rec, &data);
        async move {
            let zones: Vec<u32> = (j..g.zone_count).step_by(jobs as usize).collect();
            let (mut written, mut turn) = (0u64, 0usize);
            while written < per_job && !zones.is_empty() {
                let start = g.zone_start(zones[turn % zones.len()]);
                if turn >= zones.len() {
                    dev.zone_mgmt(ZoneAction::Reset, start, false).await?;
                }
                let mut lba = start;
                while lba + step <= start + g.zone_capacity && written < per_job {
                    dev.write(lba, data, None, false).await?;
                    rec.borrow_mut().done(block_bytes);
                    (lba, written) = (lba + step, written + block_bytes);
                }
                turn += 1;
            }
            NvmeResult::Ok(())
        }
    };
    let results = futures::future::join_all((0..jobs).map(job)).await;
    results.into_iter().collect::<NvmeResult<Vec<()>>>()?;
    Ok(rec.into_inner().series)
}
