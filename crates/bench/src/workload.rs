//! The workload driver: N concurrent jobs against one `ZonedDevice`, each keeping its own
//! queue depth of commands in flight, measured on tokio's clock. Under a `SimRuntime` that
//! clock is the devices' virtual time, so figures are exact and repeat from their seeds.
//!
//! A write job fills its zones in order with Zone Writes at the write pointer (queue depth 1
//! per zone is how hosts keep writes in order, and is what the papers measure); an append job
//! fills them with Zone Appends, reserving room per zone so no append overflows; read jobs
//! read the zones' first `read_extent_bytes` sequentially (wrapping) or at random.

use std::cell::RefCell;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use zns::{Geometry, NvmeResult, SimRng, ZonedDevice};

/// What a job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Write,
    Append,
    SeqRead,
    RandRead,
}

/// One job: a stream of commands with `queue_depth` in flight.
#[derive(Clone, Debug)]
pub struct Job {
    pub pattern: Pattern,
    /// Zones the job uses, in order.
    pub zones: Vec<u32>,
    pub block_bytes: u64,
    pub queue_depth: u32,
    /// Bytes the job moves in total (it stops early when its zones are full).
    pub bytes: u64,
    /// Reads stay within the first this-many bytes of each zone.
    pub read_extent_bytes: u64,
    pub seed: u64,
}

/// Throughput and latency of a run, after its ramp.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Report {
    pub bytes: u64,
    pub ops: u64,
    pub seconds: f64,
    pub mib_per_sec: f64,
    pub iops: f64,
    pub mean_latency_us: f64,
}

#[derive(Default)]
struct Meter {
    start: Option<Instant>,
    bytes: u64,
    ops: u64,
    latency_ns: u128,
    /// Completions counted until the ramp ends are left out of the figures.
    ramp_bytes: u64,
    ramp_end: Option<(Instant, u64, u64, u128)>,
    last: Option<Instant>,
}

impl Meter {
    fn done(&mut self, bytes: u64, latency_ns: u128) {
        let now = Instant::now();
        self.bytes += bytes;
        self.ops += 1;
        self.latency_ns += latency_ns;
        self.last = Some(now);
        if self.ramp_bytes > 0 && self.ramp_end.is_none() && self.bytes >= self.ramp_bytes {
            self.ramp_end = Some((now, self.bytes, self.ops, self.latency_ns));
        }
    }

    fn report(&self) -> Report {
        let start = self.start.unwrap_or_else(Instant::now);
        let (t0, b0, o0, l0) = match self.ramp_end {
            // A ramp that took the whole run would leave nothing to measure.
            Some(r) if r.2 < self.ops => r,
            _ => (start, 0, 0, 0),
        };
        let end = self.last.unwrap_or(t0);
        let seconds = end.saturating_duration_since(t0).as_secs_f64();
        let (bytes, ops) = (self.bytes - b0, self.ops - o0);
        let per = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
        Report {
            bytes,
            ops,
            seconds,
            mib_per_sec: per(bytes as f64 / (1u64 << 20) as f64),
            iops: per(ops as f64),
            mean_latency_us: if ops > 0 {
                (self.latency_ns - l0) as f64 / ops as f64 / 1000.0
            } else {
                0.0
            },
        }
    }
}

/// Where a job's next command goes.
struct Cursor {
    zone_index: usize,
    /// Blocks issued into the current zone (writes, appends) or read position (reads).
    offset_blocks: u64,
    rng: SimRng,
    issued_bytes: u64,
}

enum Cmd {
    Write(u64),
    Append(u64),
    Read(u64),
}

fn next_cmd(job: &Job, g: &Geometry, c: &mut Cursor) -> Option<Cmd> {
    if c.issued_bytes >= job.bytes || job.zones.is_empty() {
        return None;
    }
    let blocks = job.block_bytes / u64::from(g.block_size);
    let extent = (job.read_extent_bytes / u64::from(g.block_size)).min(g.zone_capacity);
    let cmd = match job.pattern {
        Pattern::Write | Pattern::Append => {
            if c.offset_blocks + blocks > g.zone_capacity {
                c.zone_index += 1;
                c.offset_blocks = 0;
            }
            let start = g.zone_start(*job.zones.get(c.zone_index)?);
            let lba = start + c.offset_blocks;
            c.offset_blocks += blocks;
            match job.pattern {
                Pattern::Write => Cmd::Write(lba),
                _ => Cmd::Append(start),
            }
        }
        Pattern::SeqRead => {
            if c.offset_blocks + blocks > extent {
                c.zone_index = (c.zone_index + 1) % job.zones.len();
                c.offset_blocks = 0;
            }
            let lba = g.zone_start(job.zones[c.zone_index]) + c.offset_blocks;
            c.offset_blocks += blocks;
            Cmd::Read(lba)
        }
        Pattern::RandRead => {
            let zone = job.zones[c.rng.index(job.zones.len())];
            let slots = (extent / blocks).max(1);
            Cmd::Read(g.zone_start(zone) + c.rng.below(slots) * blocks)
        }
    };
    c.issued_bytes += job.block_bytes;
    Some(cmd)
}

async fn one(
    dev: &dyn ZonedDevice,
    cmd: Cmd,
    data: &[u8],
    meter: &RefCell<Meter>,
) -> NvmeResult<()> {
    let t = Instant::now();
    match cmd {
        Cmd::Write(lba) => dev.write(lba, data, None, false).await?,
        Cmd::Append(zslba) => dev.append(zslba, data, None, false).await.map(|_| ())?,
        Cmd::Read(lba) => {
            let mut buf = vec![0u8; data.len()];
            dev.read(lba, &mut buf, None).await?
        }
    }
    let lat = t.elapsed().as_nanos();
    meter.borrow_mut().done(data.len() as u64, lat);
    Ok(())
}

async fn run_job(dev: &dyn ZonedDevice, job: &Job, meter: &RefCell<Meter>) -> NvmeResult<()> {
    let g = dev.geometry();
    let data = vec![0x5au8; job.block_bytes as usize];
    let mut cursor = Cursor {
        zone_index: 0,
        offset_blocks: 0,
        rng: SimRng::new(job.seed),
        issued_bytes: 0,
    };
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < job.queue_depth.max(1) as usize {
            match next_cmd(job, &g, &mut cursor) {
                Some(cmd) => inflight.push(one(dev, cmd, &data, meter)),
                None => break,
            }
        }
        match inflight.next().await {
            Some(r) => r?,
            None => return Ok(()),
        }
    }
}

/// Runs `jobs` concurrently to completion and reports the figures measured after the first
/// `ramp_bytes` completed (so a write buffer's initial fill does not flatter a run).
pub async fn run(dev: &dyn ZonedDevice, jobs: &[Job], ramp_bytes: u64) -> NvmeResult<Report> {
    let meter = RefCell::new(Meter {
        start: Some(Instant::now()),
        ramp_bytes,
        ..Meter::default()
    });
    let results = futures::future::join_all(jobs.iter().map(|j| run_job(dev, j, &meter))).await;
    results.into_iter().collect::<NvmeResult<Vec<()>>>()?;
    let report = meter.borrow().report();
    Ok(report)
}
