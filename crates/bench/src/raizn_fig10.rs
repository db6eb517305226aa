//! RAIZN (ASPLOS '23) Fig. 10 in virtual time: a full overwrite of a 5-member RAIZN array
//! and of an mdraid-like RAID-5 (`MdRaid5`) of five conventional SSDs with device-side
//! garbage collection, on the same flash. The paper's workload: first 5 jobs each write a
//! fifth of the array's capacity sequentially (job i from i x 20%), then one job overwrites
//! the whole capacity sequentially. The conventional drives run out of spare blocks during
//! the overwrite: erase blocks written in the first phase mix the five jobs' data, so the
//! first victims are about 80% valid and mdraid's throughput collapses, recovering as more
//! of the capacity is overwritten. RAIZN's logical zones map to whole member zones that the
//! overwrite resets, so there is nothing to collect and its throughput stays flat.
//!
//! Throughput is recorded per window of host bytes written (a 64th of the capacity): the
//! paper samples once a second, which at these sizes would give too few points. The rows:
//! mdraid's lowest window of the overwrite against its first phase (the paper: down by up to
//! 93%, so 7%), RAIZN's lowest window of the overwrite (after the first, where the write
//! buffers filled by the first phase drain) against its own median there (flat: 100%),
//! RAIZN over mdraid at mdraid's lowest window (the paper: up to 14x), and mdraid once 90%
//! is overwritten against its first phase (back to steady state after point D: 100%).
//!
//! Sizes are scaled: each drive is the zn540 flash array with `--size` / 2 of raw flash
//! (`zns_fig1::profile`: 64 blocks per die of fewer pages), the conventional drives with the
//! spare of ZNS Fig. 1's 7%-OP drive (1.92 TB exposed of 2 TiB of media), the ZNS members
//! with zones of one erase block per die. Both arrays use 64 KiB stripe units and 1 MiB
//! writes at queue depth 4 per job.

use std::cell::RefCell;
use std::sync::Arc;

use emu::timing::TimingProfile;
use emu::{ClockMode, ConvSsd, EmuConfig, EmuDevice, SimRuntime};
use futures::stream::{FuturesUnordered, StreamExt};
use raizn::Member;
use zns::{BlockDevice, BlockResult, NvmeResult, ZoneAction, ZonedDevice};

use crate::mdraid::MdRaid5;
use crate::paper::{Options, Row};
use crate::series::{Recorder, Series};

/// Members of each array.
pub const MEMBERS: usize = 5;
/// Jobs of the first phase, each writing its fifth of the capacity.
pub const JOBS: u64 = 5;
const UNIT_BYTES: u64 = 64 * 1024;
const BLOCK_BYTES: u64 = 1 << 20;
const QD: usize = 4;
/// Logical zones of the RAIZN array (a multiple of `JOBS`).
const DATA_ZONES: u32 = 60;
/// Windows per capacity written.
const WINDOWS: u64 = 64;

/// One array's run: throughput per window over both phases and where the overwrite began.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    pub series: Series,
    /// Host bytes of the array's capacity (written once in each phase).
    pub capacity_bytes: u64,
}

impl Run {
    /// Windows ending within `(from, to]` of the capacity written (0 to 2).
    fn windows(&self, from: f64, to: f64) -> impl Iterator<Item = f64> + '_ {
        let cap = self.capacity_bytes as f64;
        self.series
            .bytes
            .iter()
            .zip(&self.series.mib_per_sec)
            .filter(move |(b, _)| **b as f64 > from * cap && **b as f64 <= to * cap)
            .map(|(_, r)| *r)
    }

    fn mean(&self, from: f64, to: f64) -> f64 {
        let (n, sum) = self
            .windows(from, to)
            .fold((0, 0.0), |(n, s), r| (n + 1, s + r));
        if n == 0 {
            0.0
        } else {
            sum / f64::from(n)
        }
    }

    /// The median window within `(from, to]`: unlike the mean, not moved by the odd window
    /// that ends just after a burst of completions.
    fn median(&self, from: f64, to: f64) -> f64 {
        let mut w: Vec<f64> = self.windows(from, to).collect();
        w.sort_by(f64::total_cmp);
        w.get(w.len() / 2).copied().unwrap_or(0.0)
    }

    fn lowest(&self, from: f64, to: f64) -> (f64, u64) {
        let cap = self.capacity_bytes as f64;
        self.series
            .bytes
            .iter()
            .zip(&self.series.mib_per_sec)
            .filter(|(b, _)| **b as f64 > from * cap && **b as f64 <= to * cap)
            .fold((f64::INFINITY, 0), |(lo, at), (b, r)| {
                if *r < lo {
                    (*r, *b)
                } else {
                    (lo, at)
                }
            })
    }

    /// Throughput of the window that ends nearest after `fraction` of the capacity.
    fn at(&self, fraction: f64) -> f64 {
        let cap = self.capacity_bytes as f64;
        self.series
            .bytes
            .iter()
            .zip(&self.series.mib_per_sec)
            .find(|(b, _)| **b as f64 >= fraction * cap)
            .map_or(0.0, |(_, r)| *r)
    }
}

/// A window: a 64th of the capacity in whole writes, so every window holds the same number of
/// completions (a window cut inside a write would alternate long and short ones).
fn window_bytes(capacity_bytes: u64) -> u64 {
    (capacity_bytes / WINDOWS / BLOCK_BYTES).max(1) * BLOCK_BYTES
}

/// The flash every drive has: the zn540 array scaled to `raw_bytes` of raw flash.
fn flash(o: &Options) -> Result<TimingProfile, String> {
    crate::zns_fig1::profile((o.bytes_per_point / 2).max(128 << 20))
}

/// Writes `[first, first + blocks)` of `dev` sequentially, `QD` writes in flight.
async fn block_seq(
    dev: &dyn BlockDevice,
    first: u64,
    blocks: u64,
    rec: &RefCell<Recorder>,
) -> BlockResult<()> {
    let per = BLOCK_BYTES / u64::from(dev.block_size());
    let data = vec![0x6du8; BLOCK_BYTES as usize];
    let (mut next, end) = (first, first + blocks);
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < QD && next + per <= end {
            let (lba, data) = (next, &data);
            inflight.push(async move {
                dev.write(lba, data, false).await?;
                rec.borrow_mut().done(BLOCK_BYTES);
                BlockResult::Ok(())
            });
            next += per;
        }
        match inflight.next().await {
            Some(r) => r?,
            None => return Ok(()),
        }
    }
}

/// The mdraid run: both phases over five conventional drives.
pub async fn mdraid(p: TimingProfile) -> Result<Run, String> {
    let op = crate::zns_fig1::op_of(1.92e12);
    let members = (0..MEMBERS)
        .map(|_| {
            ConvSsd::new(p, op, ClockMode::Virtual)
                .map(|d| Arc::new(d) as Arc<dyn BlockDevice>)
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let raid = MdRaid5::new(members, UNIT_BYTES)?;
    let bs = u64::from(raid.block_size());
    let per = BLOCK_BYTES / bs;
    let region = raid.size_blocks() / JOBS / per * per;
    let capacity_bytes = region * JOBS * bs;
    let rec = RefCell::new(Recorder::new(window_bytes(capacity_bytes)));
    let first = (0..JOBS).map(|j| block_seq(&raid, j * region, region, &rec));
    let done = futures::future::join_all(first).await;
    done.into_iter()
        .collect::<BlockResult<Vec<()>>>()
        .map_err(|e| format!("mdraid first phase: {e}"))?;
    block_seq(&raid, 0, region * JOBS, &rec)
        .await
        .map_err(|e| format!("mdraid overwrite: {e}"))?;
    Ok(Run {
        series: rec.into_inner().into_series(),
        capacity_bytes,
    })
}

/// Writes the logical zones `zones` of `dev` in turn, each from its start to its capacity,
/// resetting it first if `reset`; `QD` writes in flight.
async fn zoned_seq(
    dev: &dyn ZonedDevice,
    zones: &[u32],
    reset: bool,
    rec: &RefCell<Recorder>,
) -> NvmeResult<()> {
    let g = dev.geometry();
    let per = BLOCK_BYTES / u64::from(g.block_size);
    let data = vec![0x6du8; BLOCK_BYTES as usize];
    for z in zones {
        let start = g.zone_start(*z);
        if reset {
            dev.zone_mgmt(ZoneAction::Reset, start, false).await?;
        }
        let (mut next, end) = (start, start + g.zone_capacity);
        let mut inflight = FuturesUnordered::new();
        loop {
            while inflight.len() < QD && next + per <= end {
                let (lba, data) = (next, &data);
                inflight.push(async move {
                    dev.write(lba, data, None, false).await?;
                    rec.borrow_mut().done(BLOCK_BYTES);
                    NvmeResult::Ok(())
                });
                next += per;
            }
            match inflight.next().await {
                Some(r) => r?,
                None => break,
            }
        }
    }
    Ok(())
}

/// The RAIZN run: both phases over five ZNS members on the same flash.
pub async fn raizn(p: TimingProfile, seed: u64) -> Result<Run, String> {
    let mut g = emu::profile("zn540").ok_or("the zn540 geometry is missing")?;
    let zone_blocks = p.block_bytes() * u64::from(p.dies()) / u64::from(g.block_size);
    g.zone_count = raizn::layout::MIN_META_ZONES + DATA_ZONES;
    if g.zone_count > p.blocks_per_die {
        return Err(format!(
            "{} zones do not fit {} blocks per die",
            g.zone_count, p.blocks_per_die
        ));
    }
    g.zone_size = zone_blocks;
    g.zone_capacity = zone_blocks;
    let members = (0..MEMBERS)
        .map(|i| {
            let cfg = EmuConfig {
                seed: seed + i as u64,
                ..EmuConfig::new(g)
            };
            EmuDevice::new_memory(cfg)
                .and_then(|d| d.with_timing(p, ClockMode::Virtual))
                .map(|d| Arc::new(d) as Member)
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let vol = crate::paper::raizn_array(members, UNIT_BYTES, seed).await?;
    let lg = vol.geometry();
    let zones = lg.zone_count;
    let capacity_bytes = lg.zone_capacity / (BLOCK_BYTES / u64::from(lg.block_size))
        * BLOCK_BYTES
        * u64::from(zones);
    let rec = RefCell::new(Recorder::new(window_bytes(capacity_bytes)));
    let share = zones / JOBS as u32;
    let groups: Vec<Vec<u32>> = (0..JOBS as u32)
        .map(|j| (j * share..(j + 1) * share).collect())
        .collect();
    let first = groups.iter().map(|zs| zoned_seq(&vol, zs, false, &rec));
    let done = futures::future::join_all(first).await;
    done.into_iter()
        .collect::<NvmeResult<Vec<()>>>()
        .map_err(|e| format!("RAIZN first phase: {e}"))?;
    let all: Vec<u32> = (0..share * JOBS as u32).collect();
    zoned_seq(&vol, &all, true, &rec)
        .await
        .map_err(|e| format!("RAIZN overwrite: {e}"))?;
    Ok(Run {
        series: rec.into_inner().into_series(),
        capacity_bytes,
    })
}

/// Both runs and the rows.
pub struct Fig10 {
    pub rows: Vec<Row>,
    pub raizn: Run,
    pub mdraid: Run,
}

impl Fig10 {
    /// The series as CSV: array, capacity overwritten when the window ended (0 to 2; the
    /// overwrite starts at 1), MiB/s within it.
    pub fn series_csv(&self) -> String {
        let mut out = String::from("array,capacity_written,mibps\n");
        for (name, run) in [("raizn", &self.raizn), ("mdraid", &self.mdraid)] {
            for (b, r) in run.series.bytes.iter().zip(&run.series.mib_per_sec) {
                let x = *b as f64 / run.capacity_bytes as f64;
                out.push_str(&format!("{name},{x:.4},{r:.1}\n"));
            }
        }
        out
    }

    /// Points (capacity written, MiB/s) of each array, for a plot.
    pub fn points(&self) -> Vec<(String, Vec<(f64, f64)>)> {
        [
            ("RAIZN (ZNS)", &self.raizn),
            ("mdraid (conventional, device GC)", &self.mdraid),
        ]
        .iter()
        .map(|(name, run)| {
            let pts = run
                .series
                .bytes
                .iter()
                .zip(&run.series.mib_per_sec)
                .map(|(b, r)| (*b as f64 / run.capacity_bytes as f64, *r))
                .collect();
            (name.to_string(), pts)
        })
        .collect()
    }
}

/// Runs both arrays.
pub fn run(o: &Options) -> Result<Fig10, String> {
    let p = flash(o)?;
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    let z = rt.block_on(raizn(p, o.seed))?;
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    let m = rt.block_on(mdraid(p))?;
    // The first phase's mean leaves out its first eighth (the write buffers' first fill).
    let m_first = m.mean(0.125, 1.0);
    let (m_low, m_low_at) = m.lowest(1.0, 2.0);
    // RAIZN's overwrite leaves out its first window, where the members' write buffers, full
    // from the first phase, drain.
    let z_from = 1.0 + 1.0 / WINDOWS as f64;
    let z_over = z.median(z_from, 2.0);
    let (z_low, _) = z.lowest(z_from, 2.0);
    let low_fraction = m_low_at as f64 / m.capacity_bytes as f64;
    let z_there = z.at(low_fraction);
    let mib = |b: u64| b >> 20;
    let sizes = format!(
        "RAIZN {} MiB, mdraid {} MiB",
        mib(z.capacity_bytes),
        mib(m.capacity_bytes)
    );
    let rows = vec![
        Row::new(
            format!("raizn-fig10 mdraid lowest window of the overwrite / first phase ({m_low:.0} / {m_first:.0} MiB/s, {sizes}) (%)"),
            7.0,
            m_low / m_first * 100.0,
        ),
        Row::new(
            format!("raizn-fig10 RAIZN lowest window of the overwrite after its first / its median there ({z_low:.0} / {z_over:.0} MiB/s) (%)"),
            100.0,
            z_low / z_over * 100.0,
        ),
        Row::new(
            format!("raizn-fig10 RAIZN / mdraid at mdraid's lowest window ({:.2} of capacity written) (x)", low_fraction),
            14.0,
            z_there / m_low,
        ),
        Row::new(
            "raizn-fig10 mdraid after 90% overwritten / first phase (%)".to_string(),
            100.0,
            m.mean(1.9, 2.0) / m_first * 100.0,
        ),
    ];
    Ok(Fig10 {
        rows,
        raizn: z,
        mdraid: m,
    })
}

/// The rows only.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    run(o).map(|f| f.rows)
}
