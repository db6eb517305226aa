//! The workload driver: N concurrent jobs against one `ZonedDevice`, each keeping its own
//! queue depth of commands in flight, measured on tokio's clock. Under a `SimRuntime` that
//! clock is the devices' virtual time, so figures are exact and repeat from their seeds.
//!
//! A write job fills its zones in order with Zone Writes at the write pointer (queue depth 1
//! per zone is how hosts keep writes in order, and is what the papers measure); an append job
//! fills them with Zone Appends, reserving room per zone so no append overflows; read jobs
//! read the zones' first `read_extent_bytes` sequentially (wrapping) or at random.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use zns::{Geometry, NvmeResult, SimRng, ZoneAction, ZonedDevice};

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
    /// Random reads pick blocks with a Zipf distribution of this exponent (hot blocks
    /// scattered over the read area) instead of uniformly.
    pub zipf_theta: Option<f64>,
    /// Percent of a random read job's reads that are random; the rest continue sequentially
    /// from the previous read (fio's `percentage_random`).
    pub random_percent: u32,
    /// How a write or append job keeps going, and how fast.
    pub limits: Limits,
}

/// Optional bounds on a job, as fio's `time_based`, `runtime` and `rate` set them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// When a write or append job has filled its last zone, it resets its first zone and
    /// starts over (as fio does in zoned mode) instead of stopping.
    pub wrap: bool,
    /// The job issues nothing once this much time has passed since it started.
    pub runtime_ns: Option<u64>,
    /// The job issues no faster than this many bytes per second.
    pub rate_bytes_per_sec: Option<u64>,
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
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    pub latency_p999_us: f64,
}

thread_local! {
    /// Where this thread's drivers add the bytes their commands complete, for a progress bar
    /// on another thread; a runtime's tasks all run on the thread that set it.
    static PROGRESS: RefCell<Option<Arc<AtomicU64>>> = const { RefCell::new(None) };
}

/// Makes the drivers running on this thread add every completed command's bytes to `c`
/// (or stop counting, with `None`).
pub fn count_progress_into(c: Option<Arc<AtomicU64>>) {
    PROGRESS.with(|p| *p.borrow_mut() = c);
}

/// Adds completed bytes to this thread's progress counter, if it has one.
pub(crate) fn progress(bytes: u64) {
    PROGRESS.with(|p| {
        if let Some(c) = p.borrow().as_ref() {
            c.fetch_add(bytes, Ordering::Relaxed);
        }
    });
}

/// What a meter leaves out of its figures: the completions until `bytes` have completed, or
/// until `ns` of time have passed since it started (fio's `ramp_time`), whichever is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ramp {
    pub bytes: u64,
    pub ns: u64,
}

#[derive(Default)]
pub(crate) struct Meter {
    start: Option<Instant>,
    bytes: u64,
    ops: u64,
    latency_ns: u128,
    /// Every completion's latency, in completion order, for percentiles.
    latencies_ns: Vec<u64>,
    /// When each command completed, in nanoseconds since the meter started.
    done_ns: Vec<u64>,
    /// Completions counted until the ramp ends are left out of the figures.
    ramp: Ramp,
    /// When the ramp ended, and the bytes, operations and latency counted by then.
    ramp_end: Option<(Instant, u64, u64, u128)>,
    last: Option<Instant>,
}

impl Meter {
    /// A meter that starts now.
    pub(crate) fn new(ramp: Ramp) -> Meter {
        let start = Instant::now();
        Meter {
            start: Some(start),
            ramp,
            // A timed ramp ends at its deadline whatever completed before it.
            ramp_end: (ramp.ns > 0)
                .then(|| (start + std::time::Duration::from_nanos(ramp.ns), 0, 0, 0)),
            ..Meter::default()
        }
    }

    pub(crate) fn done(&mut self, bytes: u64, latency_ns: u128) {
        progress(bytes);
        let now = Instant::now();
        self.bytes += bytes;
        self.ops += 1;
        self.latency_ns += latency_ns;
        self.latencies_ns
            .push(u64::try_from(latency_ns).unwrap_or(u64::MAX));
        if let Some(start) = self.start {
            let since = now.saturating_duration_since(start).as_nanos();
            self.done_ns.push(u64::try_from(since).unwrap_or(u64::MAX));
        }
        self.last = Some(now);
        match self.ramp_end {
            Some((end, ..)) if self.ramp.ns > 0 && now < end => {
                self.ramp_end = Some((end, self.bytes, self.ops, self.latency_ns));
            }
            None if self.ramp.bytes > 0 && self.bytes >= self.ramp.bytes => {
                self.ramp_end = Some((now, self.bytes, self.ops, self.latency_ns));
            }
            _ => {}
        }
    }

    /// When each command completed, in nanoseconds since the meter started, and the sorted
    /// latencies of the commands measured after the ramp.
    pub(crate) fn into_traces(self) -> (Vec<u64>, Vec<u64>) {
        let lat = self.measured_latencies_ns();
        (self.done_ns, lat)
    }

    /// The first operation counted after the ramp, its time, and the totals before it.
    fn after_ramp(&self) -> (Instant, u64, u64, u128) {
        let start = self.start.unwrap_or_else(Instant::now);
        match self.ramp_end {
            // A ramp that took the whole run would leave nothing to measure.
            Some(r) if r.2 < self.ops => r,
            _ => (start, 0, 0, 0),
        }
    }

    /// Latencies of the commands measured after the ramp, sorted.
    fn measured_latencies_ns(&self) -> Vec<u64> {
        let o0 = self.after_ramp().2;
        let mut measured: Vec<u64> = self
            .latencies_ns
            .get(usize::try_from(o0).unwrap_or(usize::MAX)..)
            .unwrap_or_default()
            .to_vec();
        measured.sort_unstable();
        measured
    }

    pub(crate) fn report(&self) -> Report {
        let (t0, b0, o0, l0) = self.after_ramp();
        let end = self.last.unwrap_or(t0);
        let seconds = end.saturating_duration_since(t0).as_secs_f64();
        let (bytes, ops) = (self.bytes - b0, self.ops - o0);
        let measured = self.measured_latencies_ns();
        let pct = |p: f64| percentile_us(&measured, p);
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
            latency_p50_us: pct(50.0),
            latency_p99_us: pct(99.0),
            latency_p999_us: pct(99.9),
        }
    }
}

/// The `p`th percentile of sorted latencies in microseconds: the smallest sample that at
/// least `p` percent of the samples do not exceed (fio's definition), 0 with no samples.
pub fn percentile_us(sorted_ns: &[u64], p: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let rank = (p / 100.0 * sorted_ns.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted_ns.len()) - 1;
    sorted_ns.get(i).map_or(0.0, |ns| *ns as f64 / 1000.0)
}

/// Where a job's next command goes.
struct Cursor {
    zone_index: usize,
    /// Blocks issued into the current zone (writes, appends) or read position (reads).
    offset_blocks: u64,
    rng: SimRng,
    issued_bytes: u64,
    started: Instant,
    /// A wrapping job has filled all its zones at least once.
    lapped: bool,
}

enum Cmd {
    Write(u64),
    Append(u64),
    Read(u64),
}

/// A command, and the zone to reset first when a wrapping job starts over on it.
struct Next {
    cmd: Cmd,
    reset_first: Option<u64>,
}

fn next_cmd(job: &Job, g: &Geometry, c: &mut Cursor) -> Option<Next> {
    if c.issued_bytes >= job.bytes || job.zones.is_empty() {
        return None;
    }
    if let Some(ns) = job.limits.runtime_ns {
        if c.started.elapsed().as_nanos() >= u128::from(ns) {
            return None;
        }
    }
    let blocks = job.block_bytes / u64::from(g.block_size);
    let extent = (job.read_extent_bytes / u64::from(g.block_size)).min(g.zone_capacity);
    let mut reset_first = None;
    let cmd = match job.pattern {
        Pattern::Write | Pattern::Append => {
            if c.offset_blocks + blocks > g.zone_capacity {
                c.zone_index += 1;
                c.offset_blocks = 0;
                if c.zone_index == job.zones.len() && job.limits.wrap {
                    c.zone_index = 0;
                    c.lapped = true;
                }
                if c.lapped {
                    // Past the first lap every zone was filled before: empty it again.
                    reset_first = Some(g.zone_start(*job.zones.get(c.zone_index)?));
                }
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
        Pattern::RandRead if !c.rng.chance(f64::from(job.random_percent.min(100)) / 100.0) => {
            let slots = (extent / blocks).max(1);
            c.offset_blocks = (c.offset_blocks + blocks) % (slots * blocks);
            Cmd::Read(g.zone_start(*job.zones.get(c.zone_index)?) + c.offset_blocks)
        }
        Pattern::RandRead => {
            let slots = (extent / blocks).max(1);
            let (zone_index, slot) = match job.zipf_theta {
                Some(theta) => {
                    let items = slots * job.zones.len() as u64;
                    let item = scatter(zipf_rank(unit(&mut c.rng), items, theta), items);
                    (usize::try_from(item / slots).ok()?, item % slots)
                }
                None => (c.rng.index(job.zones.len()), c.rng.below(slots)),
            };
            (c.zone_index, c.offset_blocks) = (zone_index, slot * blocks);
            Cmd::Read(g.zone_start(*job.zones.get(zone_index)?) + slot * blocks)
        }
    };
    c.issued_bytes += job.block_bytes;
    Some(Next { cmd, reset_first })
}

/// A uniform sample in [0, 1).
pub(crate) fn unit(rng: &mut SimRng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A 0-based rank in `[0, n)` for the uniform sample `u`, by inverting the continuous
/// power law `x^-theta` on `[1, n]` (theta > 0, not 1): rank 0 is the most popular.
pub fn zipf_rank(u: f64, n: u64, theta: f64) -> u64 {
    let a = 1.0 - theta;
    let x = (((n as f64).powf(a) - 1.0) * u + 1.0).powf(1.0 / a);
    (x.floor() as u64).clamp(1, n.max(1)) - 1
}

/// Spreads ranks over `[0, n)` one-to-one, so the popular blocks are not all adjacent (fio
/// scrambles its Zipf ranks for the same reason): multiplication by a prime modulo `n`.
pub fn scatter(rank: u64, n: u64) -> u64 {
    const PRIME: u64 = 2_147_483_647;
    if n <= 1 || n.is_multiple_of(PRIME) {
        return rank;
    }
    ((u128::from(rank) * u128::from(PRIME)) % u128::from(n)) as u64
}

async fn one(
    dev: &dyn ZonedDevice,
    next: Next,
    data: &[u8],
    meter: &RefCell<Meter>,
) -> NvmeResult<()> {
    if let Some(zslba) = next.reset_first {
        dev.zone_mgmt(ZoneAction::Reset, zslba, false).await?;
    }
    let t = Instant::now();
    match next.cmd {
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
        started: Instant::now(),
        lapped: false,
    };
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < job.queue_depth.max(1) as usize {
            if let Some(rate) = job.limits.rate_bytes_per_sec {
                // Issue the next command no earlier than the rate allows for what went before.
                let due_ns = u128::from(cursor.issued_bytes) * 1_000_000_000 / u128::from(rate);
                let due = cursor.started
                    + std::time::Duration::from_nanos(u64::try_from(due_ns).unwrap_or(u64::MAX));
                if due > Instant::now() {
                    if inflight.is_empty() {
                        emu::timing::wait_until(emu::ClockMode::Virtual, due).await;
                    } else {
                        break;
                    }
                }
            }
            match next_cmd(job, &g, &mut cursor) {
                Some(next) => inflight.push(one(dev, next, &data, meter)),
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
    let reports = run_groups(dev, &[jobs], ramp_bytes).await?;
    Ok(reports.into_iter().next().unwrap_or_default())
}

/// Runs every job of every group concurrently and reports each group's figures on its own:
/// one report per group, in order. `ramp_bytes` applies to each group.
pub async fn run_groups(
    dev: &dyn ZonedDevice,
    groups: &[&[Job]],
    ramp_bytes: u64,
) -> NvmeResult<Vec<Report>> {
    let ramp = Ramp {
        bytes: ramp_bytes,
        ns: 0,
    };
    let ramps = vec![ramp; groups.len()];
    let traced = run_groups_traced(dev, groups, &ramps).await?;
    Ok(traced.into_iter().map(|t| t.report).collect())
}

/// A group's figures and the traces behind them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Traced {
    pub report: Report,
    /// When each command completed, in nanoseconds since the groups started (ramp included).
    pub done_ns: Vec<u64>,
    /// Latencies of the commands measured after the ramp, sorted.
    pub latencies_ns: Vec<u64>,
}

/// `run_groups` with a ramp per group, also returning each group's traces (for throughput
/// over time and latency distributions).
pub async fn run_groups_traced(
    dev: &dyn ZonedDevice,
    groups: &[&[Job]],
    ramps: &[Ramp],
) -> NvmeResult<Vec<Traced>> {
    let meters: Vec<RefCell<Meter>> = (0..groups.len())
        .map(|i| RefCell::new(Meter::new(ramps.get(i).copied().unwrap_or_default())))
        .collect();
    let all = groups
        .iter()
        .zip(&meters)
        .flat_map(|(jobs, meter)| jobs.iter().map(move |j| run_job(dev, j, meter)));
    let results = futures::future::join_all(all).await;
    results.into_iter().collect::<NvmeResult<Vec<()>>>()?;
    Ok(meters
        .into_iter()
        .map(|m| {
            let m = m.into_inner();
            let report = m.report();
            let (done_ns, latencies_ns) = m.into_traces();
            Traced {
                report,
                done_ns,
                latencies_ns,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_ranks_stay_in_range_and_favour_the_first() {
        let mut rng = SimRng::new(7);
        let n = 1_000_000;
        let draws = 20_000;
        let mut first = 0;
        for _ in 0..draws {
            let r = zipf_rank(unit(&mut rng), n, 1.2);
            assert!(r < n);
            first += u32::from(r == 0);
        }
        // The power law gives rank 0 about 13.8% of draws; uniform would give 0.0001%.
        let share = f64::from(first) / f64::from(draws);
        assert!((0.12..0.16).contains(&share), "{share}");
        assert_eq!(zipf_rank(0.0, n, 0.8), 0);
        assert!(zipf_rank(0.999_999_999, n, 0.8) >= n - 2);
    }

    /// The read addresses of a random read job over 4 zones of 64 blocks, 1 block each.
    fn read_lbas(random_percent: u32) -> Vec<u64> {
        let mut g = emu::profile("zn540").expect("zn540 geometry");
        g.zone_count = 4;
        let job = Job {
            pattern: Pattern::RandRead,
            zones: vec![0, 1, 2, 3],
            block_bytes: u64::from(g.block_size),
            queue_depth: 1,
            bytes: 400 * u64::from(g.block_size),
            read_extent_bytes: 64 * u64::from(g.block_size),
            seed: 3,
            random_percent,
            zipf_theta: None,
            limits: Limits::default(),
        };
        let mut c = Cursor {
            zone_index: 0,
            offset_blocks: 0,
            rng: SimRng::new(job.seed),
            issued_bytes: 0,
            started: Instant::now(),
            lapped: false,
        };
        std::iter::from_fn(|| match next_cmd(&job, &g, &mut c)?.cmd {
            Cmd::Read(lba) => Some(lba),
            _ => None,
        })
        .collect()
    }

    #[test]
    fn percentage_random_mixes_sequential_and_random_reads() {
        let sequential_share = |lbas: &[u64]| {
            let next = lbas.windows(2).filter(|w| w[1] == w[0] + 1).count();
            next as f64 / (lbas.len() - 1) as f64
        };
        let (all, half, none) = (read_lbas(100), read_lbas(50), read_lbas(0));
        assert_eq!(none.len(), 400);
        assert!(sequential_share(&all) < 0.05, "{}", sequential_share(&all));
        let h = sequential_share(&half);
        assert!((0.4..0.6).contains(&h), "{h}");
        // Sequential reads wrap within the 64-block read area of the zone they are in.
        assert!(
            sequential_share(&none) > 0.95,
            "{}",
            sequential_share(&none)
        );
    }

    #[test]
    fn scatter_is_one_to_one() {
        for n in [1u64, 2, 7, 96, 1000] {
            let mut seen: Vec<u64> = (0..n).map(|r| scatter(r, n)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n={n}");
        }
    }
}
