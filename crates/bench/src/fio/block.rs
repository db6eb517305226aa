//! Block jobs on a block volume (the host FTL or the conventional SSD): report groups, the
//! writes that lay out what jobs read, and the phases that run them through `blockload`.

use super::*;

/// One report group of block jobs, and the range its reads need written first.
pub(super) struct BlockGroup {
    pub(super) name: String,
    pub(super) jobs: Vec<BlockJob>,
    pub(super) ramp: Ramp,
    pub(super) block_bytes: u64,
    pub(super) fill: Option<(u64, u64)>,
}

/// Why a job cannot run on a block volume, if it cannot.
pub(super) fn check_block(s: &JobSpec, block_size: u32) -> Result<(), String> {
    let refuse = |what: String| Err(format!("job '{}' (line {}): {what}", s.name, s.line));
    if s.zoned || s.zone_append || s.max_open_zones.is_some() {
        return refuse(
            "zonemode=zbd, zone_append and max_open_zones need the ZNS drive (--target zns)".into(),
        );
    }
    if s.time_based && s.runtime_ms.is_none() {
        return refuse("time_based needs a runtime".into());
    }
    let bs = u64::from(block_size);
    if !s.block_bytes.is_multiple_of(bs) || s.block_bytes > 64 << 20 {
        return refuse(format!(
            "bs={} is not a multiple of the {bs}-byte block size up to 64 MiB",
            s.block_bytes
        ));
    }
    if !s.offset_bytes.is_multiple_of(bs) {
        return refuse(format!(
            "offset={} is not a multiple of the {bs}-byte block size",
            s.offset_bytes
        ));
    }
    if s.iodepth > IODEPTH_MAX {
        return refuse(format!(
            "iodepth={} is above the limit of {IODEPTH_MAX}",
            s.iodepth
        ));
    }
    Ok(())
}

pub(super) fn block_groups_of(
    s: &JobSpec,
    dev: &dyn BlockDevice,
    seed: u64,
) -> Result<Vec<BlockGroup>, String> {
    check_block(s, dev.block_size())?;
    let bs = u64::from(dev.block_size());
    let device_bytes = dev.size_blocks() * bs;
    let end = s
        .offset_bytes
        .saturating_add(s.size_bytes.unwrap_or(device_bytes))
        .min(device_bytes);
    let range_bytes = end.saturating_sub(s.offset_bytes) / s.block_bytes * s.block_bytes;
    if range_bytes == 0 {
        return Err(format!(
            "job '{}' (line {}): offset {} and size leave no room for one bs={} command on the {device_bytes}-byte volume",
            s.name, s.line, s.offset_bytes, s.block_bytes
        ));
    }
    let (first_lba, blocks) = (s.offset_bytes / bs, range_bytes / bs);
    let read_percent = match s.rw {
        Rw::Read | Rw::RandRead => 100,
        Rw::Write | Rw::RandWrite => 0,
        Rw::ReadWrite | Rw::RandRw => s.rwmixread,
    };
    let job = |c: u64| BlockJob {
        first_lba,
        blocks,
        block_bytes: s.block_bytes,
        queue_depth: s.iodepth,
        bytes: if s.time_based {
            u64::MAX
        } else {
            s.io_size_bytes.or(s.size_bytes).unwrap_or(range_bytes)
        },
        read_percent,
        random_percent: if s.rw.random() {
            s.percentage_random
        } else {
            0
        },
        distribution: s.distribution,
        seed: seed ^ c.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        runtime_ns: runtime_ns(s),
        rate_bytes_per_sec: s.rate_bytes_per_sec,
    };
    let group = |jobs| BlockGroup {
        name: s.name.clone(),
        jobs,
        ramp: ramp_of(s),
        block_bytes: s.block_bytes,
        fill: (read_percent > 0).then_some((first_lba, blocks)),
    };
    let clones = (0..u64::from(s.numjobs)).map(job);
    Ok(if s.group_reporting {
        vec![group(clones.collect())]
    } else {
        clones.map(|j| group(vec![j])).collect()
    })
}

/// The ranges a phase's reading groups need written first, each once.
pub(super) fn distinct_fills(groups: &[BlockGroup]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for range in groups.iter().filter_map(|g| g.fill) {
        if !out.contains(&range) {
            out.push(range);
        }
    }
    out
}

/// Runs one stonewall phase of block jobs: their reads' ranges written first, then the
/// groups concurrently.
pub(super) async fn block_phase(
    dev: &dyn BlockDevice,
    groups: Vec<BlockGroup>,
    origin: Instant,
) -> Result<Vec<JobResult>, String> {
    for (first, blocks) in distinct_fills(&groups) {
        blockload::fill(dev, first, blocks, PREFILL_BLOCK_BYTES, 8)
            .await
            .map_err(|e| format!("writing the range to read: {e}"))?;
    }
    let slices: Vec<&[BlockJob]> = groups.iter().map(|g| g.jobs.as_slice()).collect();
    let ramps: Vec<Ramp> = groups.iter().map(|g| g.ramp).collect();
    let offset_ns = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let reports = blockload::run_groups(dev, &slices, &ramps)
        .await
        .map_err(|e| format!("a job failed: {e}"))?;
    Ok(groups
        .iter()
        .zip(reports)
        .map(|(grp, r)| JobResult {
            name: grp.name.clone(),
            read: r.read,
            write: r.write,
            block_bytes: grp.block_bytes,
            done_ns: r
                .done_ns
                .iter()
                .map(|t| t.saturating_add(offset_ns))
                .collect(),
            read_latencies_ns: r.read_latencies_ns,
            write_latencies_ns: r.write_latencies_ns,
        })
        .collect())
}

/// Runs the block jobs of `specs` phase by phase; returns their results and each phase's
/// figures from `probe` (`phases::phase_json`).
pub(super) async fn run_block(
    specs: &[JobSpec],
    t: &Target,
    dev: &dyn BlockDevice,
    p: &Progress,
    probe: Probe<'_>,
) -> Result<(Vec<JobResult>, Vec<Value>), String> {
    let mut phases: Vec<Vec<BlockGroup>> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let groups = block_groups_of(s, dev, job_seed(t, i))?;
        match phases.last_mut() {
            Some(ph) if !s.stonewall => ph.extend(groups),
            _ => phases.push(groups),
        }
    }
    let bs = u64::from(dev.block_size());
    let fills = phases
        .iter()
        .flat_map(|ph| distinct_fills(ph))
        .map(|(_, n)| n * bs);
    let jobs = phases
        .iter()
        .flatten()
        .flat_map(|g| g.jobs.iter().map(|j| j.bytes));
    p.total.store(planned(jobs.chain(fills)), Ordering::Relaxed);
    let mut results = Vec::new();
    let mut figures = Vec::new();
    let origin = Instant::now();
    for ph in phases {
        let name = ph.first().map(|g| g.name.clone()).unwrap_or_default();
        let before = probe();
        results.extend(block_phase(dev, ph, origin).await?);
        figures.push(phases::phase_json(&name, &before, &probe()));
    }
    Ok((results, figures))
}
