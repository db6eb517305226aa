//! Reproductions of the device figures in the papers, on the `zn540` timing profile in
//! virtual time. Each figure is one row: what the paper measured on a Western Digital ZN540,
//! what the emulator measures with the same workload, and the difference. Every point runs
//! on a fresh device in a fresh `SimRuntime`, so points do not disturb each other and a run
//! repeats exactly from its seed.

use emu::timing::timing_profile;
use emu::{ClockMode, EmuConfig, EmuDevice, SimRuntime};
use serde::Serialize;
use zns::{Geometry, ZonedDevice};

use crate::workload::{self, Job, Limits, Pattern, Report};

/// One figure: the paper's value, ours, and the difference in percent of the paper's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub figure: String,
    pub paper: f64,
    pub measured: f64,
    pub diff_pct: f64,
}

/// How much each point moves, and the seed of the devices and workloads.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub bytes_per_point: u64,
    pub seed: u64,
    /// The timing profile of `znsplus-fig7`, `-fig8` and `-varmail`: one of
    /// `znsplus_fig8::PROFILES`; None is the paper's default medium, femu-mlc. The other sets
    /// ignore it.
    pub profile: Option<&'static str>,
    /// Host time per block moved by a host-level copy in the ZNS setups of the `znsplus-*`
    /// sets, in ns (`ftl::MountOptions::host_copy_ns_per_block`); None is the value calibrated
    /// on Fig. 6, `znsplus_fig6::HOST_COPY_NS_PER_BLOCK`, and 0 the model without it. The
    /// other sets ignore it.
    pub host_copy_ns: Option<u32>,
}

impl Options {
    /// The host time per block a host-level copy costs in the `znsplus-*` sets.
    pub fn host_copy_ns_per_block(&self) -> u32 {
        self.host_copy_ns
            .unwrap_or(crate::znsplus_fig6::HOST_COPY_NS_PER_BLOCK)
    }
}

/// The reproducible figure sets: name and what they reproduce.
pub const PAPERS: &[(&str, &str)] = &[
    (
        "zapraid-fig1",
        "ZapRAID (APSys '23) Fig. 1: Zone Write vs Zone Append throughput, one zone and several",
    ),
    (
        "zapraid-exp1",
        "ZapRAID (APSys '23) Exp#1: 4 KiB random writes QD16 on 3+1, G=256 against ZoneWrite-only and ZoneAppend-only",
    ),
    (
        "zapraid-exp2",
        "ZapRAID (APSys '23) Exp#2: degraded 4 KiB reads at QD1 against normal reads, grouped and static layouts",
    ),
    (
        "zapraid-exp3",
        "ZapRAID (APSys '23) Exp#3: full-drive recovery time proportional to the logical space written",
    ),
    (
        "zapraid-compare",
        "ZapRAID 3+1 against the host FTL on one drive and the host FTL on RAIZN 3+1: sequential and random writes, random reads (one table)",
    ),
    (
        "raizn-raw",
        "RAIZN (ASPLOS '23) section 6.1: raw ZN540 sequential write and read throughput",
    ),
    (
        "raizn-fig9",
        "RAIZN (ASPLOS '23) Fig. 9: block-size sweep of write, read and random read, RAIZN against mdraid",
    ),
    (
        "raizn-fig10",
        "RAIZN (ASPLOS '23) Fig. 10: full overwrite, RAIZN flat while mdraid on conventional SSDs collapses under device GC",
    ),
    (
        "raizn-fig12",
        "RAIZN (ASPLOS '23) Fig. 12: rebuild time proportional to valid data, at the replacement's write bandwidth",
    ),
    (
        "raizn-append",
        "RAIZN Zone Append at queue depth: one zone's append throughput at QD8 against QD1 (the paper serialises appends)",
    ),
    (
        "raizn-fua",
        "RAIZN persistence bitmap (ASPLOS '23 Fig. 6): 4 KiB FUA writes on one zone and on four, against flushing every member",
    ),
    (
        "raizn-seq",
        "RAIZN (ASPLOS '23) section 6.1: 5-member array sequential write and read against 4x and 5x one device",
    ),
    (
        "raizn-xor",
        "RAIZN parity (XOR of a stripe's data units) against a memory copy, real time, same run",
    ),
    (
        "vroom-5.2.1",
        "vroom thesis section 5.2.1: 4 KiB write and append IOPS peaks on a ZNS drive",
    ),
    (
        "zns-5.1",
        "ZNS (ATC '21) section 5.1: 4 KiB random read latency with no writes",
    ),
    (
        "zns-fig1",
        "ZNS (ATC '21) Fig. 1: ZNS vs block interface with 7% and 28% OP, overwritten 4 times",
    ),
    (
        "znsplus-fig6",
        "ZNS+ (OSDI '21) Fig. 6: segment compaction time, host copy vs in-storage zone compaction with and without copyback (femu-mlc)",
    ),
    (
        "znsplus-fig7",
        "ZNS+ (OSDI '21) Fig. 7 at block level: fileserver-like and varmail-like rewrites at 90%, ZNS / IZC / ZNS+ with and without copyback, and the FTL's metadata writes (femu-mlc)",
    ),
    (
        "znsplus-fig8",
        "ZNS+ (OSDI '21) Fig. 8: host FTL throughput and WAF at 80-95% utilisation, host-copy GC vs zone_compaction vs threaded logging (femu-mlc)",
    ),
    (
        "znsplus-varmail",
        "ZNS+ (OSDI '21) varmail imitation (Table 5, Fig. 7(a) setups): small synchronous rewrites, background plugging share and copyback ratio (femu-mlc)",
    ),
];

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// What one point measures.
#[derive(Clone, Copy)]
enum Unit {
    MibPerSec,
    Kiops,
    LatencyUs,
}

struct Point {
    figure: &'static str,
    paper: f64,
    unit: Unit,
    pattern: Pattern,
    block_bytes: u64,
    jobs: u32,
    queue_depth: u32,
    /// Zones written (and flushed) before the measurement, for reads.
    prefill_zones: u32,
}

fn point(
    figure: &'static str,
    paper: f64,
    unit: Unit,
    pattern: Pattern,
    block_kib: u64,
    jobs: u32,
    queue_depth: u32,
) -> Point {
    Point {
        figure,
        paper,
        unit,
        pattern,
        block_bytes: block_kib * KIB,
        jobs,
        queue_depth,
        prefill_zones: 0,
    }
}

fn points(name: &str) -> Option<Vec<Point>> {
    use Pattern::{Append, RandRead, SeqRead, Write};
    use Unit::{Kiops, LatencyUs, MibPerSec};
    let m = MibPerSec;
    Some(match name {
        "zapraid-fig1" => vec![
            point(
                "fig1a write 4 KiB, QD1, 1 zone (MiB/s)",
                337.6,
                m,
                Write,
                4,
                1,
                1,
            ),
            point(
                "fig1a write 8 KiB, QD1, 1 zone (MiB/s)",
                613.6,
                m,
                Write,
                8,
                1,
                1,
            ),
            point(
                "fig1a write 16 KiB, QD1, 1 zone (MiB/s)",
                1050.0,
                m,
                Write,
                16,
                1,
                1,
            ),
            point(
                "fig1a append 4 KiB, QD4, 1 zone (MiB/s)",
                541.5,
                m,
                Append,
                4,
                1,
                4,
            ),
            point(
                "fig1a append 8 KiB, QD4, 1 zone (MiB/s)",
                1026.7,
                m,
                Append,
                8,
                1,
                4,
            ),
            point(
                "fig1a append 16 KiB, QD4, 1 zone (MiB/s)",
                1050.1,
                m,
                Append,
                16,
                1,
                4,
            ),
            point(
                "fig1b append 4 KiB, QD4 per zone, 2 zones (MiB/s)",
                577.5,
                m,
                Append,
                4,
                2,
                4,
            ),
            point(
                "fig1b write 4 KiB, QD1 per zone, 6 zones (MiB/s)",
                777.2,
                m,
                Write,
                4,
                6,
                1,
            ),
        ],
        "raizn-raw" => vec![
            point(
                "6.1 sequential write 128 KiB, 8 jobs (MiB/s)",
                1052.0,
                m,
                Write,
                128,
                8,
                1,
            ),
            Point {
                prefill_zones: 8,
                ..point(
                    "6.1 sequential read 128 KiB, 8 jobs x QD64 (MiB/s)",
                    3265.0,
                    m,
                    SeqRead,
                    128,
                    8,
                    64,
                )
            },
        ],
        "vroom-5.2.1" => vec![
            point(
                "write 4 KiB, 4 zones x QD1 (KIOPS)",
                200.0,
                Kiops,
                Write,
                4,
                4,
                1,
            ),
            point(
                "write 4 KiB, 12 zones x QD1 (KIOPS)",
                200.0,
                Kiops,
                Write,
                4,
                12,
                1,
            ),
            point(
                "append 4 KiB inter-zone, 4 zones x QD4 (KIOPS)",
                150.0,
                Kiops,
                Append,
                4,
                4,
                4,
            ),
            point(
                "append 4 KiB inter-zone, 12 zones x QD4 (KIOPS)",
                150.0,
                Kiops,
                Append,
                4,
                12,
                4,
            ),
            point(
                "append 4 KiB intra-zone, 1 zone x QD16 (KIOPS)",
                150.0,
                Kiops,
                Append,
                4,
                1,
                16,
            ),
            point(
                "append 4 KiB intra-zone, 1 zone x QD64 (KIOPS)",
                150.0,
                Kiops,
                Append,
                4,
                1,
                64,
            ),
        ],
        "zns-5.1" => vec![Point {
            prefill_zones: 1,
            ..point(
                "4 KiB random read, QD1, no writes (us)",
                85.0,
                LatencyUs,
                RandRead,
                4,
                1,
                1,
            )
        }],
        _ => return None,
    })
}

/// The timed ZN540 every point runs on: the zn540 geometry with 40 zones.
pub(crate) fn device(seed: u64) -> Result<EmuDevice, String> {
    let mut g = emu::profile("zn540").ok_or("the zn540 geometry is missing")?;
    g.zone_count = 40;
    timed_zn540(g, seed)
}

/// A device of geometry `g` on the zn540 timing model in virtual time: the member every
/// RAIZN and ZapRAID figure set builds its arrays from.
pub(crate) fn timed_zn540(g: Geometry, seed: u64) -> Result<EmuDevice, String> {
    let cfg = EmuConfig {
        seed,
        ..EmuConfig::new(g)
    };
    let p = timing_profile("zn540").ok_or("the zn540 timing profile is missing")?;
    EmuDevice::new_memory(cfg)
        .and_then(|d| d.with_timing(p, ClockMode::Virtual))
        .map_err(|e| e.to_string())
}

/// `timed_zn540` keeping the block data of zones `0..kept_zones` only
/// (`EmuDevice::new_memory_keeping_data_of`): the timing is the same, and a read of the
/// other zones' data fails. For a figure whose writers fill more than memory holds.
pub(crate) fn timed_zn540_keeping_data_of(
    g: Geometry,
    seed: u64,
    kept_zones: u32,
) -> Result<EmuDevice, String> {
    let cfg = EmuConfig {
        seed,
        ..EmuConfig::new(g)
    };
    let p = timing_profile("zn540").ok_or("the zn540 timing profile is missing")?;
    EmuDevice::new_memory_keeping_data_of(cfg, kept_zones)
        .and_then(|d| d.with_timing(p, ClockMode::Virtual))
        .map_err(|e| e.to_string())
}

/// Formats the RAIZN array a figure runs on: `members` in order, stripe unit `unit_bytes`, the
/// array UUID derived from `seed` so that a run is repeatable.
pub(crate) async fn raizn_array(
    members: Vec<raizn::Member>,
    unit_bytes: u64,
    seed: u64,
) -> Result<raizn::RaiznVolume, String> {
    raizn_array_with_parity(members, unit_bytes, 1, seed).await
}

/// `raizn_array` with `parity` parity units per stripe (1: XOR, 2: Reed-Solomon).
pub(crate) async fn raizn_array_with_parity(
    members: Vec<raizn::Member>,
    unit_bytes: u64,
    parity: u32,
    seed: u64,
) -> Result<raizn::RaiznVolume, String> {
    let cfg = raizn::RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: unit_bytes,
        parity,
        ..raizn::RaiznConfig::new([seed as u8 | 1; 16])
    };
    raizn::RaiznVolume::format(members, cfg, false)
        .await
        .map_err(|e| format!("format: {e}"))
}

fn jobs_of(p: &Point, o: &Options, zone_count: u32) -> Vec<Job> {
    let per_job = o.bytes_per_point / u64::from(p.jobs);
    (0..p.jobs)
        .map(|j| Job {
            pattern: p.pattern,
            zones: (j..zone_count).step_by(p.jobs as usize).collect(),
            block_bytes: p.block_bytes,
            queue_depth: p.queue_depth,
            bytes: per_job,
            read_extent_bytes: prefill_bytes(o, p),
            seed: o.seed ^ u64::from(j).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            random_percent: 100,
            zipf_theta: None,
            limits: Limits::default(),
        })
        .collect()
}

/// Bytes written into each prefilled zone before a read measurement.
fn prefill_bytes(o: &Options, p: &Point) -> u64 {
    if p.prefill_zones == 0 {
        return 0;
    }
    (o.bytes_per_point / u64::from(p.prefill_zones)).clamp(MIB, 1024 * MIB)
}

async fn measure(p: &Point, o: &Options) -> Result<Report, String> {
    let dev = device(o.seed)?;
    let zones = dev.geometry().zone_count;
    let err = |e: zns::NvmeStatus| format!("{}: {e}", p.figure);
    if p.prefill_zones > 0 {
        let fill: Vec<Job> = (0..p.prefill_zones)
            .map(|z| Job {
                pattern: Pattern::Write,
                zones: vec![z],
                block_bytes: 128 * KIB,
                queue_depth: 1,
                bytes: prefill_bytes(o, p),
                read_extent_bytes: 0,
                seed: 0,
                random_percent: 100,
                zipf_theta: None,
                limits: Limits::default(),
            })
            .collect();
        workload::run(&dev, &fill, 0).await.map_err(err)?;
        dev.flush().await.map_err(err)?;
    }
    let jobs = jobs_of(
        p,
        o,
        if p.prefill_zones > 0 {
            p.prefill_zones
        } else {
            zones
        },
    );
    workload::run(&dev, &jobs, ramp_bytes(o.bytes_per_point))
        .await
        .map_err(err)
}

/// Bytes left out at the start of a measurement: while the write buffer first fills, writes
/// run faster than flash drains them. An eighth of the run, at least four buffers' worth,
/// at most half the run.
fn ramp_bytes(total: u64) -> u64 {
    (total / 8).max(32 * MIB).min(total / 2)
}

impl Row {
    /// A row with the difference computed and the figures rounded for printing.
    pub fn new(figure: String, paper: f64, measured: f64) -> Row {
        Row {
            figure,
            paper,
            measured: round(measured, 3),
            diff_pct: round((measured - paper) / paper * 100.0, 2),
        }
    }
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// Runs every point of the figure set `name`.
pub fn run(name: &str, o: &Options) -> Result<Vec<Row>, String> {
    if name == "zns-fig1" {
        return crate::zns_fig1::rows(o);
    }
    if name == "raizn-fig9" {
        return crate::raizn_fig9::rows(o);
    }
    if name == "raizn-fig10" {
        return crate::raizn_fig10::rows(o);
    }
    if name == "raizn-fig12" {
        return crate::raizn_fig12::rows(o);
    }
    if name == "raizn-append" {
        return crate::raizn_append::rows(o);
    }
    if name == "raizn-fua" {
        return crate::raizn_fua::rows(o);
    }
    if name == "raizn-seq" {
        return crate::raizn_seq::rows(o);
    }
    if name == "raizn-xor" {
        return crate::raizn_xor::rows(o);
    }
    if name == "zapraid-exp1" {
        return crate::zapraid_exp1::rows(o);
    }
    if name == "zapraid-compare" {
        return crate::zapraid_compare::rows(o);
    }
    if name == "zapraid-exp2" {
        return crate::zapraid_exp2::rows(o);
    }
    if name == "zapraid-exp3" {
        return crate::zapraid_exp3::rows(o);
    }
    if name == "znsplus-fig6" {
        return crate::znsplus_fig6::rows(o);
    }
    if name == "znsplus-fig7" {
        return crate::znsplus_fig7::rows(o);
    }
    if name == "znsplus-fig8" {
        return crate::znsplus_fig8::rows(o);
    }
    if name == "znsplus-varmail" {
        return crate::znsplus_varmail::rows(o);
    }
    let pts = points(name).ok_or_else(|| {
        let names: Vec<&str> = PAPERS.iter().map(|p| p.0).collect();
        format!("unknown figure set '{name}' (known: {})", names.join(", "))
    })?;
    let mut rows = Vec::new();
    for p in &pts {
        let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
        let r = rt.block_on(measure(p, o))?;
        let measured = match p.unit {
            Unit::MibPerSec => r.mib_per_sec,
            Unit::Kiops => r.iops / 1000.0,
            Unit::LatencyUs => r.mean_latency_us,
        };
        rows.push(Row::new(format!("{name} {}", p.figure), p.paper, measured));
    }
    Ok(rows)
}
