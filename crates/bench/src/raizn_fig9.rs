//! RAIZN (ASPLOS '23) Fig. 9 in virtual time: the block-size sweep of RAIZN against mdraid.
//! At each block size (4 KiB to 1 MiB) a fresh 5-member RAIZN array on timed zn540 members
//! and a fresh `MdRaid5` of five conventional SSDs on the same flash array (both with 64 KiB
//! stripe units, the paper's choice) run the paper's three workloads in turn: sequential
//! write (8 jobs x QD64, each at its own offset), sequential read of that data (8 jobs x
//! QD64), random read within it (1 job x QD256). Each row is RAIZN's throughput over
//! mdraid's, in percent. At 4 KiB one more row reads, the same way, an mdraid whose write
//! used 64 KiB blocks: the conventional drives place data in arrival order, so the 4 KiB
//! write's interleaving of the jobs spreads each job's range over more dies than a zone's
//! sequential layout does, and that, not RAIZN's read path, is the 4 KiB read gap.
//!
//! The figure's text gives no numbers, only its shape: throughput and latency comparable
//! (paper 100%) at large blocks (256 KiB to 1 MiB, RAIZN slightly ahead), mdraid ahead at
//! small ones (4 to 64 KiB: RAIZN's partial-parity log costs a header per small write; those
//! rows have no paper value and say so in their name).
//!
//! Each point moves `--size` bytes or 16,384 commands, whichever is less, so small blocks
//! stay quick in debug builds; the first eighth is left out as ramp. The conventional drives
//! are the zn540 flash array scaled to twice the data a member receives (`zns_fig1::profile`),
//! so no device garbage collection runs: Fig. 9 compares the interfaces, not the collector.

use std::sync::Arc;

use emu::{ClockMode, ConvSsd, SimRuntime};
use raizn::Member;
use zns::{BlockDevice, ZonedDevice};

use crate::blockload::{self, BlockJob};
use crate::jobfile::Distribution;
use crate::mdraid::MdRaid5;
use crate::paper::{Options, Row};
use crate::workload::{self, Job, Limits, Pattern, Ramp};

/// Members of each array.
pub const MEMBERS: usize = 5;
const KIB: u64 = 1024;
/// Stripe unit of both arrays (the paper's choice after Figs. 7 and 8).
pub const UNIT_BYTES: u64 = 64 * KIB;
/// Block sizes of the sweep, in KiB.
pub const BLOCK_KIB: [u64; 5] = [4, 16, 64, 256, 1024];
const JOBS: u32 = 8;
const QD: u32 = 64;
const RAND_QD: u32 = 256;
/// Commands a point issues at most.
const COMMANDS_MAX: u64 = 16_384;

/// Throughput (MiB/s) of the three workloads on one array.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sweep {
    pub write: f64,
    pub read: f64,
    pub rand_read: f64,
}

/// Bytes one point moves at `block_bytes`.
pub fn point_bytes(o: &Options, block_bytes: u64) -> u64 {
    let b = o.bytes_per_point.min(block_bytes * COMMANDS_MAX);
    // Whole blocks per job.
    b / (block_bytes * u64::from(JOBS)) * block_bytes * u64::from(JOBS)
}

fn ramp(bytes: u64) -> u64 {
    bytes / 8
}

fn zoned_member(seed: u64) -> Result<Member, String> {
    crate::paper::device(seed).map(|d| Arc::new(d) as Member)
}

/// RAIZN's sweep point: `bytes` written by 8 jobs in their own logical zones, read back.
pub async fn raizn(block_bytes: u64, bytes: u64, seed: u64) -> Result<Sweep, String> {
    let members = (0..MEMBERS)
        .map(|i| zoned_member(seed + i as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let vol = crate::paper::raizn_array(members, UNIT_BYTES, seed).await?;
    let per_job = bytes / u64::from(JOBS);
    let job = |pattern, j: u32, qd| Job {
        pattern,
        zones: vec![j],
        block_bytes,
        queue_depth: qd,
        bytes: per_job,
        read_extent_bytes: per_job,
        seed: seed ^ u64::from(j),
        random_percent: 100,
        zipf_theta: None,
        limits: Limits::default(),
    };
    let writes: Vec<Job> = (0..JOBS).map(|j| job(Pattern::Write, j, QD)).collect();
    let w = workload::run(&vol, &writes, ramp(bytes))
        .await
        .map_err(|e| format!("RAIZN write: {e}"))?;
    vol.flush().await.map_err(|e| format!("RAIZN flush: {e}"))?;
    let reads: Vec<Job> = (0..JOBS).map(|j| job(Pattern::SeqRead, j, QD)).collect();
    let r = workload::run(&vol, &reads, ramp(bytes))
        .await
        .map_err(|e| format!("RAIZN read: {e}"))?;
    let rand = Job {
        zones: (0..JOBS).collect(),
        bytes,
        ..job(Pattern::RandRead, 0, RAND_QD)
    };
    let rr = workload::run(&vol, &[rand], ramp(bytes))
        .await
        .map_err(|e| format!("RAIZN random read: {e}"))?;
    Ok(Sweep {
        write: w.mib_per_sec,
        read: r.mib_per_sec,
        rand_read: rr.mib_per_sec,
    })
}

/// A conventional SSD on the zn540 flash array holding at least `logical_bytes`, with as
/// much spare again, so writing it once never starts its collector.
pub fn conv_member(logical_bytes: u64) -> Result<Arc<dyn BlockDevice>, String> {
    let p = crate::zns_fig1::profile(4 * logical_bytes)?;
    let blocks = (p.raw_bytes() / 2 / 4096).max(logical_bytes / 4096);
    ConvSsd::with_blocks(p, 4096, blocks, ClockMode::Virtual)
        .map(|d| Arc::new(d) as Arc<dyn BlockDevice>)
        .map_err(|e| e.to_string())
}

/// mdraid's sweep point: the same workloads over `MdRaid5`, each job at its own offset.
pub async fn mdraid(block_bytes: u64, bytes: u64, seed: u64) -> Result<Sweep, String> {
    mdraid_written_in(block_bytes, block_bytes, bytes, seed).await
}

/// `mdraid` whose sequential write lays the data down in `write_bytes` blocks; the reads
/// use `block_bytes`. The conventional drives place data in the order it arrives, so the
/// write's block size decides how a job's range spreads over the dies the reads then use.
pub async fn mdraid_written_in(
    block_bytes: u64,
    write_bytes: u64,
    bytes: u64,
    seed: u64,
) -> Result<Sweep, String> {
    // Each member receives a fifth of the data and parity: a quarter of the data.
    let per_member = (bytes / (MEMBERS as u64 - 1)).max(64 << 20);
    let members = (0..MEMBERS)
        .map(|_| conv_member(per_member))
        .collect::<Result<Vec<_>, _>>()?;
    let raid = MdRaid5::new(members, UNIT_BYTES)?;
    let per_job = bytes / u64::from(JOBS) / 4096;
    let job = |j: u32, read_percent, random_percent, qd| BlockJob {
        first_lba: u64::from(j) * per_job,
        blocks: per_job,
        block_bytes,
        queue_depth: qd,
        bytes: per_job * 4096,
        read_percent,
        random_percent,
        distribution: Distribution::Random,
        seed: seed ^ u64::from(j),
        runtime_ns: None,
        rate_bytes_per_sec: None,
    };
    let rp = [Ramp {
        bytes: ramp(bytes),
        ns: 0,
    }];
    let measure = |jobs: Vec<BlockJob>| {
        let raid = &raid;
        async move {
            let reports = blockload::run_groups(raid, &[&jobs], &rp)
                .await
                .map_err(|e| format!("mdraid: {e}"))?;
            reports
                .into_iter()
                .next()
                .ok_or_else(|| "mdraid: no report".to_string())
        }
    };
    let writes = (0..JOBS).map(|j| BlockJob {
        block_bytes: write_bytes,
        ..job(j, 0, 0, QD)
    });
    let w = measure(writes.collect()).await?;
    raid.flush()
        .await
        .map_err(|e| format!("mdraid flush: {e}"))?;
    let r = measure((0..JOBS).map(|j| job(j, 100, 0, QD)).collect()).await?;
    let rand = BlockJob {
        first_lba: 0,
        blocks: per_job * u64::from(JOBS),
        bytes,
        ..job(0, 100, 100, RAND_QD)
    };
    let rr = measure(vec![rand]).await?;
    Ok(Sweep {
        write: w.write.mib_per_sec,
        read: r.read.mib_per_sec,
        rand_read: rr.read.mib_per_sec,
    })
}

/// The paper's value for a row at `kib`: comparable at 256 KiB and above, none below.
fn paper_at(kib: u64) -> f64 {
    if kib >= 256 {
        100.0
    } else {
        f64::NAN
    }
}

/// The sweep's rows: RAIZN over mdraid for each workload and block size.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for kib in BLOCK_KIB {
        let bytes = point_bytes(o, kib * KIB);
        let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
        let z = rt.block_on(raizn(kib * KIB, bytes, o.seed))?;
        let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
        let m = rt.block_on(mdraid(kib * KIB, bytes, o.seed))?;
        let note = if kib >= 256 {
            ""
        } else {
            ", paper: mdraid ahead"
        };
        let row = |what: &str, zv: f64, mv: f64| {
            Row::new(
                format!(
                    "raizn-fig9 {what} {kib} KiB, RAIZN {zv:.0} / mdraid {mv:.0} MiB/s{note} (%)"
                ),
                paper_at(kib),
                zv / mv * 100.0,
            )
        };
        rows.push(row("seq write", z.write, m.write));
        rows.push(row("seq read", z.read, m.read));
        rows.push(row("rand read", z.rand_read, m.rand_read));
        if kib == BLOCK_KIB[0] {
            // The small-block read gap is mdraid's placement, not RAIZN's read path: the
            // same reads of data mdraid wrote in stripe units (docs/BENCHMARKS.md).
            let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
            let m64 = rt.block_on(mdraid_written_in(kib * KIB, UNIT_BYTES, bytes, o.seed))?;
            rows.push(Row::new(
                format!(
                    "raizn-fig9 seq read {kib} KiB, mdraid written in {} KiB blocks, RAIZN {:.0} / mdraid {:.0} MiB/s, no paper value (%)",
                    UNIT_BYTES / KIB,
                    z.read,
                    m64.read
                ),
                f64::NAN,
                z.read / m64.read * 100.0,
            ));
        }
    }
    Ok(rows)
}
