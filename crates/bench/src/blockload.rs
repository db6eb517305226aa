//! The workload driver for block volumes (`BlockDevice`: a conventional SSD, the host FTL):
//! jobs over a range of blocks that read, write, or mix the two (fio's `rwmixread`), each
//! command going on from the previous one in its direction or to a random block (fio's
//! `percentage_random`), uniformly or skewed (Zipf, Pareto, fio's zoned percentages). Measured on tokio's clock like
//! `workload`, so under a `SimRuntime` the figures are virtual time and repeat from the seed.

use std::cell::RefCell;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use zns::{BlockDevice, BlockResult, SimRng};

use crate::jobfile::Distribution;
use crate::workload::{scatter, unit, zipf_rank, Meter, Ramp, Report};

/// fio's Pareto rank in `[0, n)` for the uniform sample `u`: (n - 1) * u^(ln h / ln(1 - h)),
/// rank 0 the most popular.
pub fn pareto_rank(u: f64, n: u64, h: f64) -> u64 {
    let pow = h.ln() / (1.0 - h).ln();
    ((n.saturating_sub(1)) as f64 * u.powf(pow)) as u64
}

/// One job: commands over `[first_lba, first_lba + blocks)` with `queue_depth` in flight.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockJob {
    pub first_lba: u64,
    /// Blocks of the job's range (device blocks).
    pub blocks: u64,
    pub block_bytes: u64,
    pub queue_depth: u32,
    /// Bytes the job moves in total, reads and writes together.
    pub bytes: u64,
    /// Percent of the commands that read; the rest write.
    pub read_percent: u32,
    /// Percent of the commands that go to a random place; the rest go on sequentially from
    /// the previous command of their direction (wrapping at the end of the range).
    pub random_percent: u32,
    /// How random commands pick their place (fio's `random_distribution`).
    pub distribution: Distribution,
    pub seed: u64,
    /// The job issues nothing once this much time has passed since it started.
    pub runtime_ns: Option<u64>,
    /// The job issues no faster than this many bytes per second.
    pub rate_bytes_per_sec: Option<u64>,
}

/// Where a job's commands go next.
struct Cursor {
    rng: SimRng,
    /// Next sequential place of reads and of writes, in slots of the job's block size.
    next_slot: [u64; 2],
    issued_bytes: u64,
    started: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Read = 0,
    Write = 1,
}

/// The next command of `job`: its direction and first block, or `None` when the job is done.
fn next_cmd(job: &BlockJob, block_size: u32, c: &mut Cursor) -> Option<(Dir, u64)> {
    if c.issued_bytes >= job.bytes {
        return None;
    }
    if let Some(ns) = job.runtime_ns {
        if c.started.elapsed().as_nanos() >= u128::from(ns) {
            return None;
        }
    }
    let per = job.block_bytes / u64::from(block_size);
    let slots = job.blocks / per.max(1);
    if slots == 0 {
        return None;
    }
    let dir = match job.read_percent {
        100.. => Dir::Read,
        0 => Dir::Write,
        p => {
            if c.rng.chance(f64::from(p) / 100.0) {
                Dir::Read
            } else {
                Dir::Write
            }
        }
    };
    let random = match job.random_percent {
        100.. => true,
        0 => false,
        p => c.rng.chance(f64::from(p) / 100.0),
    };
    let slot = if random {
        match job.distribution {
            Distribution::Random => c.rng.below(slots),
            Distribution::Zipf(theta) => scatter(zipf_rank(unit(&mut c.rng), slots, theta), slots),
            Distribution::Pareto(h) => scatter(pareto_rank(unit(&mut c.rng), slots, h), slots),
            Distribution::Zoned(split) => {
                let which = unit(&mut c.rng);
                split.pick(which, unit(&mut c.rng), slots)
            }
        }
    } else {
        c.next_slot[dir as usize] % slots
    };
    c.next_slot[dir as usize] = (slot + 1) % slots;
    c.issued_bytes += job.block_bytes;
    Some((dir, job.first_lba + slot * per))
}

/// The two meters of a report group: reads and writes.
pub(crate) struct Meters {
    read: RefCell<Meter>,
    write: RefCell<Meter>,
}

async fn one(
    dev: &dyn BlockDevice,
    dir: Dir,
    lba: u64,
    data: &[u8],
    meters: &Meters,
) -> BlockResult<()> {
    let t = Instant::now();
    let meter = match dir {
        Dir::Read => {
            let mut buf = vec![0u8; data.len()];
            dev.read(lba, &mut buf).await?;
            &meters.read
        }
        Dir::Write => {
            dev.write(lba, data, false).await?;
            &meters.write
        }
    };
    meter
        .borrow_mut()
        .done(data.len() as u64, t.elapsed().as_nanos());
    Ok(())
}

async fn run_job(dev: &dyn BlockDevice, job: &BlockJob, meters: &Meters) -> BlockResult<()> {
    let data = vec![0xa5u8; usize::try_from(job.block_bytes).unwrap_or(0)];
    let mut c = Cursor {
        rng: SimRng::new(job.seed),
        next_slot: [0, 0],
        issued_bytes: 0,
        started: Instant::now(),
    };
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < job.queue_depth.max(1) as usize {
            if let Some(rate) = job.rate_bytes_per_sec {
                let due_ns = u128::from(c.issued_bytes) * 1_000_000_000 / u128::from(rate.max(1));
                let due =
                    c.started + Duration::from_nanos(u64::try_from(due_ns).unwrap_or(u64::MAX));
                if due > Instant::now() {
                    if inflight.is_empty() {
                        emu::timing::wait_until(emu::ClockMode::Virtual, due).await;
                    } else {
                        break;
                    }
                }
            }
            match next_cmd(job, dev.block_size(), &mut c) {
                Some((dir, lba)) => inflight.push(one(dev, dir, lba, &data, meters)),
                None => break,
            }
        }
        match inflight.next().await {
            Some(r) => r?,
            None => return Ok(()),
        }
    }
}

/// One group's figures: reads, writes, and when each command completed (nanoseconds since
/// the groups started, both directions, in no particular order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupReport {
    pub read: Report,
    pub write: Report,
    pub done_ns: Vec<u64>,
    /// Latencies of the reads and of the writes measured after the ramp, sorted.
    pub read_latencies_ns: Vec<u64>,
    pub write_latencies_ns: Vec<u64>,
}

/// Runs every job of every group concurrently; one report per group, each after its ramp.
pub async fn run_groups(
    dev: &dyn BlockDevice,
    groups: &[&[BlockJob]],
    ramps: &[Ramp],
) -> BlockResult<Vec<GroupReport>> {
    let meters: Vec<Meters> = (0..groups.len())
        .map(|i| {
            let ramp = ramps.get(i).copied().unwrap_or_default();
            Meters {
                read: RefCell::new(Meter::new(ramp)),
                write: RefCell::new(Meter::new(ramp)),
            }
        })
        .collect();
    let all = groups
        .iter()
        .zip(&meters)
        .flat_map(|(jobs, m)| jobs.iter().map(move |j| run_job(dev, j, m)));
    let results = futures::future::join_all(all).await;
    results.into_iter().collect::<BlockResult<Vec<()>>>()?;
    Ok(meters
        .into_iter()
        .map(|m| {
            let (r, w) = (m.read.into_inner(), m.write.into_inner());
            let (read, write) = (r.report(), w.report());
            let (mut done_ns, read_latencies_ns) = r.into_traces();
            let (write_done, write_latencies_ns) = w.into_traces();
            done_ns.extend(write_done);
            GroupReport {
                read,
                write,
                done_ns,
                read_latencies_ns,
                write_latencies_ns,
            }
        })
        .collect())
}

/// The byte every block `fill` writes holds.
pub const FILL_BYTE: u8 = 0x3c;

/// Writes `[first_lba, first_lba + blocks)` once, sequentially, `block_bytes` at a time with
/// `queue_depth` in flight, and flushes: what a read job needs before it reads.
pub async fn fill(
    dev: &dyn BlockDevice,
    first_lba: u64,
    blocks: u64,
    block_bytes: u64,
    queue_depth: u32,
) -> BlockResult<()> {
    let bs = u64::from(dev.block_size());
    let per = (block_bytes / bs).max(1);
    let data = vec![FILL_BYTE; usize::try_from(per * bs).unwrap_or(0)];
    let end = first_lba + blocks;
    let mut next = first_lba;
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < queue_depth.max(1) as usize && next < end {
            let n = per.min(end - next);
            let buf = &data[..usize::try_from(n * bs).unwrap_or(0)];
            let lba = next;
            inflight.push(async move { dev.write(lba, buf, false).await.map(|()| n * bs) });
            next += n;
        }
        match inflight.next().await {
            Some(r) => crate::workload::progress(r?),
            None => break,
        }
    }
    dev.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmds(read_percent: u32, random_percent: u32, n: u64) -> Vec<(Dir, u64)> {
        let job = BlockJob {
            first_lba: 1000,
            blocks: 64,
            block_bytes: 8192,
            queue_depth: 1,
            bytes: n * 8192,
            read_percent,
            random_percent,
            distribution: Distribution::Random,
            seed: 9,
            runtime_ns: None,
            rate_bytes_per_sec: None,
        };
        let mut c = Cursor {
            rng: SimRng::new(job.seed),
            next_slot: [0, 0],
            issued_bytes: 0,
            started: Instant::now(),
        };
        std::iter::from_fn(|| next_cmd(&job, 4096, &mut c)).collect()
    }

    #[test]
    fn sequential_commands_wrap_within_the_range_per_direction() {
        let w = cmds(0, 0, 40);
        assert_eq!(w.len(), 40);
        let lbas: Vec<u64> = w.iter().map(|(_, l)| *l).collect();
        // 32 slots of two blocks from LBA 1000, then around again.
        assert_eq!(&lbas[..3], &[1000, 1002, 1004]);
        assert_eq!(lbas[31], 1062);
        assert_eq!(lbas[32], 1000);
        assert!(w.iter().all(|(d, _)| *d == Dir::Write));
        // Mixed and sequential: each direction goes on from its own previous command.
        let m = cmds(50, 0, 400);
        for dir in [Dir::Read, Dir::Write] {
            let l: Vec<u64> = m.iter().filter(|c| c.0 == dir).map(|c| c.1).collect();
            assert!(l
                .windows(2)
                .all(|p| p[1] == p[0] + 2 || (p[0] == 1062 && p[1] == 1000)));
        }
    }

    #[test]
    fn rwmixread_sets_the_share_of_reads() {
        let m = cmds(70, 100, 10_000);
        let reads = m.iter().filter(|c| c.0 == Dir::Read).count();
        assert!((6_700..7_300).contains(&reads), "{reads}");
        assert!(m
            .iter()
            .all(|(_, l)| (1000..1064).contains(l) && l % 2 == 0));
        assert!(cmds(100, 100, 100).iter().all(|c| c.0 == Dir::Read));
    }

    #[test]
    fn percentage_random_mixes_sequential_and_random_commands() {
        let share = |v: &[(Dir, u64)]| {
            let next = v.windows(2).filter(|w| w[1].1 == w[0].1 + 2).count();
            next as f64 / (v.len() - 1) as f64
        };
        assert!(share(&cmds(0, 100, 2000)) < 0.1);
        let half = share(&cmds(0, 50, 2000));
        assert!((0.4..0.62).contains(&half), "{half}");
        assert!(share(&cmds(0, 0, 2000)) > 0.95);
    }
}
