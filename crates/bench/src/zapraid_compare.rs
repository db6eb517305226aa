//! ZapRAID against the host FTL on one drive and the host FTL over RAIZN (issue 11, item 8:
//! "one table"), in virtual time on timed zn540 members of one geometry: ZapRAID `3 + 1`
//! (`G = 256`), the host FTL on one member, and the host FTL over a RAIZN `3 + 1` array (a
//! zoned volume, used as a library). Each system gets the same block workload on the same
//! logical range, in its own runtime on fresh members: the range written once in 128 KiB
//! sequential writes at QD4 (which also fills it), then 4 KiB random writes at QD16, then
//! 4 KiB random reads at QD16, each moving the point's bytes. The paper has no such table:
//! the rows carry no paper value (NaN), and the ratios say what redundancy costs and what
//! three more drives buy.

use std::sync::Arc;

use emu::SimRuntime;
use zapraid::GroupMode;
use zns::{BlockDevice, Geometry, ZonedDevice};

use crate::blockload::{self, BlockJob};
use crate::jobfile::Distribution;
use crate::paper::{Options, Row};
use crate::workload::Ramp;
use crate::zapraid_array as array;

const RANDOM_BYTES: u64 = 4096;
const SEQUENTIAL_BYTES: u64 = 128 * 1024;
const RANDOM_QD: u32 = 16;
const SEQUENTIAL_QD: u32 = 4;
/// Over-provisioning of the FTL volumes (permille): their checkpoint and reserve zones come
/// out of it, which on these scaled-down members takes more than ZapRAID's 10%. Only the
/// measured range is written, so it changes how much room garbage collection has, not
/// whether it runs: none of the three volumes fills.
const FTL_OP_PERMILLE: u32 = 300;

/// The systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    ZapRaid,
    FtlOneDrive,
    FtlOverRaizn,
}

impl System {
    pub fn name(self) -> &'static str {
        match self {
            System::ZapRaid => "ZapRAID 3+1 (G=256)",
            System::FtlOneDrive => "host FTL on one drive",
            System::FtlOverRaizn => "host FTL on RAIZN 3+1",
        }
    }
}

/// Throughput of each phase, MiB/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    pub seq_write: f64,
    pub rand_write: f64,
    pub rand_read: f64,
}

/// The member geometry for a point of `bytes`: zones as Exp#1's, enough of them for one
/// drive to hold the range and the random writes with room to spare (so the single-drive
/// FTL is not starved of space; the arrays have four times the room).
pub fn member_geometry(bytes: u64) -> Result<Geometry, String> {
    let cap = crate::zapraid_exp1::zone_capacity_blocks(bytes);
    let zone_bytes = cap * 4096;
    let zones = (span_bytes(bytes) + bytes)
        .saturating_mul(2)
        .div_ceil(zone_bytes)
        + 16;
    array::member_geometry(cap, u32::try_from(zones).map_err(|_| "too many zones")?)
}

/// The logical range every system is measured on: half the point's bytes, in blocks of the
/// sequential transfer.
pub fn span_bytes(bytes: u64) -> u64 {
    (bytes / 2).max(SEQUENTIAL_BYTES) / SEQUENTIAL_BYTES * SEQUENTIAL_BYTES
}

fn job(span_blocks: u64, block_bytes: u64, qd: u32, bytes: u64, read: bool, seed: u64) -> BlockJob {
    let random = block_bytes == RANDOM_BYTES;
    BlockJob {
        first_lba: 0,
        blocks: span_blocks,
        block_bytes,
        queue_depth: qd,
        bytes,
        read_percent: if read { 100 } else { 0 },
        random_percent: if random { 100 } else { 0 },
        distribution: Distribution::Random,
        seed,
        runtime_ns: None,
        rate_bytes_per_sec: None,
    }
}

/// Runs the three phases on `vol` over the first `span_bytes(bytes)` of it.
pub async fn phases(vol: &dyn BlockDevice, bytes: u64, seed: u64) -> Result<Figures, String> {
    let span_blocks = span_bytes(bytes) / u64::from(vol.block_size());
    if span_blocks > vol.size_blocks() {
        return Err(format!(
            "the volume ({} blocks) is smaller than the range ({span_blocks})",
            vol.size_blocks()
        ));
    }
    let no_ramp = [Ramp { bytes: 0, ns: 0 }];
    let mut out = [0.0f64; 3];
    let plan = [
        (SEQUENTIAL_BYTES, SEQUENTIAL_QD, span_bytes(bytes), false),
        (RANDOM_BYTES, RANDOM_QD, bytes, false),
        (RANDOM_BYTES, RANDOM_QD, bytes, true),
    ];
    for (i, (bs, qd, moved, read)) in plan.into_iter().enumerate() {
        let j = job(span_blocks, bs, qd, moved, read, seed ^ i as u64);
        let r = blockload::run_groups(vol, &[&[j]], &no_ramp)
            .await
            .map_err(|e| format!("phase {i}: {e}"))?;
        let r = r.first().ok_or("no report")?;
        out[i] = if read {
            r.read.mib_per_sec
        } else {
            r.write.mib_per_sec
        };
        if !read {
            vol.flush().await.map_err(|e| format!("flush: {e}"))?;
        }
    }
    Ok(Figures {
        seq_write: out[0],
        rand_write: out[1],
        rand_read: out[2],
    })
}

async fn ftl_on(dev: Arc<dyn ZonedDevice>, seed: u64) -> Result<Arc<ftl::FtlVolume>, String> {
    ftl::format(
        dev.as_ref(),
        ftl::FormatOptions::with_op(FTL_OP_PERMILLE),
        seed,
        false,
    )
    .await
    .map_err(|e| format!("host FTL format: {e}"))?;
    let (vol, _) = ftl::FtlVolume::mount(dev, ftl::MountOptions::default())
        .await
        .map_err(|e| format!("host FTL mount: {e}"))?;
    Ok(vol)
}

/// Measures `system` on fresh members for a point of `bytes`.
pub async fn measure(system: System, bytes: u64, seed: u64) -> Result<Figures, String> {
    let g = member_geometry(bytes)?;
    match system {
        System::ZapRaid => {
            let vol =
                array::format(g, GroupMode::Grouped(crate::zapraid_exp1::GROUP), seed).await?;
            phases(&vol, bytes, seed).await
        }
        System::FtlOneDrive => {
            let dev = array::timed(g, seed.wrapping_mul(16))?;
            let vol = ftl_on(dev as Arc<dyn ZonedDevice>, seed).await?;
            phases(vol.as_ref(), bytes, seed).await
        }
        System::FtlOverRaizn => {
            let members = array::members(g, seed)?
                .into_iter()
                .map(|d| d as raizn::Member)
                .collect();
            let unit_bytes = raizn::layout::DEFAULT_STRIPE_UNIT_BYTES.into();
            let r = crate::paper::raizn_array(members, unit_bytes, seed).await?;
            let vol = ftl_on(Arc::new(r) as Arc<dyn ZonedDevice>, seed).await?;
            phases(vol.as_ref(), bytes, seed).await
        }
    }
}

fn in_runtime(system: System, o: &Options) -> Result<Figures, String> {
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(measure(system, o.bytes_per_point, o.seed))
        .map_err(|e| format!("{}: {e}", system.name()))
}

/// The table (see the module comment): each system's three figures, then ZapRAID's over
/// the FTL on RAIZN's (the other redundant layout on the same four drives) and over the one
/// drive's.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let systems = [System::ZapRaid, System::FtlOneDrive, System::FtlOverRaizn];
    let mut figs = Vec::new();
    for s in systems {
        figs.push((s, in_runtime(s, o)?));
    }
    let mib = o.bytes_per_point >> 20;
    let span = span_bytes(o.bytes_per_point) >> 20;
    let mut rows = Vec::new();
    for (s, f) in &figs {
        for (what, v) in [
            ("128 KiB sequential writes QD4", f.seq_write),
            ("4 KiB random writes QD16", f.rand_write),
            ("4 KiB random reads QD16", f.rand_read),
        ] {
            rows.push(Row::new(
                format!(
                    "zapraid-compare {}: {what}, {span} MiB range, {mib} MiB (MiB/s)",
                    s.name()
                ),
                f64::NAN,
                v,
            ));
        }
    }
    let get = |s: System| figs.iter().find(|(x, _)| *x == s).map(|(_, f)| *f);
    let (Some(z), Some(one), Some(rz)) = (
        get(System::ZapRaid),
        get(System::FtlOneDrive),
        get(System::FtlOverRaizn),
    ) else {
        return Err("a system was not measured".into());
    };
    for (base, name) in [(rz, "host FTL on RAIZN"), (one, "host FTL on one drive")] {
        for (what, a, b) in [
            ("sequential writes", z.seq_write, base.seq_write),
            ("random writes", z.rand_write, base.rand_write),
            ("random reads", z.rand_read, base.rand_read),
        ] {
            rows.push(Row::new(
                format!("zapraid-compare ZapRAID / {name}: {what} (ratio)"),
                f64::NAN,
                a / b,
            ));
        }
    }
    Ok(rows)
}
