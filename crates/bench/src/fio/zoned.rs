//! Zoned jobs (`zonemode=zbd`) on the emulated ZNS drive: which zones each clone of a job
//! takes, the writes that lay out what jobs read, and the phases that run them through the
//! workload driver.

use super::*;

/// Why a job cannot run here, if it cannot.
pub(super) fn check(s: &JobSpec) -> Result<(), String> {
    let refuse = |what: &str| Err(format!("job '{}' (line {}): {what}", s.name, s.line));
    if !s.zoned {
        return refuse(
            "the ZNS drive takes zoned jobs only: add zonemode=zbd, or run block jobs on a volume (--target ftl or --target conv)",
        );
    }
    if matches!(s.rw, Rw::ReadWrite | Rw::RandRw) {
        return refuse(
            "readwrite and randrw are not supported on zones; run them on a volume (--target ftl or --target conv)",
        );
    }
    if s.percentage_random != 100 && s.rw != Rw::RandRead {
        return refuse("percentage_random below 100 needs rw=randread");
    }
    if s.distribution != Distribution::Random && s.rw != Rw::RandRead {
        return refuse(
            "random_distribution=zipf needs rw=randread (zoned writes go to the write pointer)",
        );
    }
    if !matches!(s.distribution, Distribution::Random | Distribution::Zipf(_)) {
        return refuse(
            "on zones random_distribution takes random or zipf; pareto and zoned run on a volume (--target ftl or --target conv)",
        );
    }
    if s.time_based && s.runtime_ms.is_none() {
        return refuse("time_based needs a runtime");
    }
    if s.zone_append && !s.rw.writes() {
        return refuse("zone_append=1 needs a write job");
    }
    Ok(())
}

/// Why the job's block size or queue depth does not fit the device, if it does not.
pub(super) fn check_sizes(s: &JobSpec, g: &Geometry) -> Result<(), String> {
    let block = u64::from(g.block_size);
    let cap_bytes = g.zone_capacity * block;
    if !s.block_bytes.is_multiple_of(block) || s.block_bytes > cap_bytes {
        return Err(format!(
            "job '{}' (line {}): bs={} is not a multiple of the {block}-byte block size up to the {cap_bytes}-byte zone capacity",
            s.name, s.line, s.block_bytes
        ));
    }
    if s.iodepth > IODEPTH_MAX {
        return Err(format!(
            "job '{}' (line {}): iodepth={} is above the limit of {IODEPTH_MAX}",
            s.name, s.line, s.iodepth
        ));
    }
    Ok(())
}

/// The zones of a job's region, `[offset, offset + size)` rounded out to whole zones.
pub(super) fn region(s: &JobSpec, g: &Geometry) -> Result<Vec<u32>, String> {
    let zone_bytes = g.zone_size * u64::from(g.block_size);
    let device_bytes = zone_bytes * u64::from(g.zone_count);
    let end = s
        .offset_bytes
        .saturating_add(s.size_bytes.unwrap_or(device_bytes))
        .min(device_bytes);
    let first = s.offset_bytes / zone_bytes;
    let last = end.div_ceil(zone_bytes);
    if first >= last {
        return Err(format!(
            "job '{}': offset {} is past the end of the {device_bytes}-byte device",
            s.name, s.offset_bytes
        ));
    }
    Ok((first..last)
        .filter_map(|z| u32::try_from(z).ok())
        .collect())
}

/// Every `n`-th element of `v`, starting at `k`.
pub(super) fn stride(v: &[u32], k: usize, n: usize) -> Vec<u32> {
    v.iter().skip(k).step_by(n.max(1)).copied().collect()
}

/// The driver jobs of one clone, and the bytes its reads need written first (per zone).
pub(super) fn clone_jobs(s: &JobSpec, g: &Geometry, zones: &[u32], seed: u64) -> (Vec<Job>, u64) {
    let cap_bytes = g.zone_capacity * u64::from(g.block_size);
    let capacity = cap_bytes * zones.len() as u64;
    let io = s.io_size_bytes.or(s.size_bytes).unwrap_or(capacity);
    let bytes = if s.time_based { u64::MAX } else { io };
    let (pattern, subjobs, qd) = match (s.rw.writes(), s.zone_append) {
        (true, false) => {
            let open = s.max_open_zones.unwrap_or(s.iodepth).min(s.iodepth);
            (Pattern::Write, open, 1)
        }
        (true, true) => {
            let open = s.max_open_zones.unwrap_or(1);
            (Pattern::Append, open, s.iodepth.div_ceil(open))
        }
        (false, _) if s.rw.random() => (Pattern::RandRead, 1, s.iodepth),
        (false, _) => (Pattern::SeqRead, 1, s.iodepth),
    };
    let n = (subjobs as usize).clamp(1, zones.len().max(1));
    let extent = if pattern == Pattern::Write || pattern == Pattern::Append {
        0
    } else {
        (io / zones.len().max(1) as u64).clamp(s.block_bytes, cap_bytes)
    };
    let jobs = (0..n)
        .map(|k| {
            let mine = stride(zones, k, n);
            let my_bytes = if bytes == u64::MAX {
                bytes
            } else {
                bytes / n as u64
            };
            Job {
                pattern,
                block_bytes: s.block_bytes,
                queue_depth: qd,
                bytes: my_bytes,
                read_extent_bytes: extent,
                seed: seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                random_percent: s.percentage_random,
                zipf_theta: match s.distribution {
                    Distribution::Zipf(theta) => Some(theta),
                    _ => None,
                },
                limits: Limits {
                    wrap: my_bytes > cap_bytes * mine.len() as u64,
                    runtime_ns: runtime_ns(s),
                    rate_bytes_per_sec: s.rate_bytes_per_sec.map(|r| (r / n as u64).max(1)),
                },
                zones: mine,
            }
        })
        .collect();
    (jobs, extent)
}

/// A report group: the reported name, its driver jobs, and whether it writes.
pub(super) struct Group {
    pub(super) name: String,
    pub(super) jobs: Vec<Job>,
    pub(super) ramp: Ramp,
    pub(super) writes: bool,
    pub(super) block_bytes: u64,
    /// Zones to fill, and how many bytes of each, before the reads start.
    pub(super) prefill: Vec<(u32, u64)>,
}

pub(super) fn groups_of(s: &JobSpec, g: &Geometry, seed: u64) -> Result<Vec<Group>, String> {
    check(s)?;
    check_sizes(s, g)?;
    let zones = region(s, g)?;
    let clones = s.numjobs as usize;
    if clones > zones.len() {
        return Err(format!(
            "job '{}': numjobs={clones} needs at least as many zones, its region has {}",
            s.name,
            zones.len()
        ));
    }
    let mut out: Vec<Group> = Vec::new();
    for c in 0..clones {
        let mine = stride(&zones, c, clones);
        let (jobs, extent) = clone_jobs(s, g, &mine, seed ^ (c as u64) << 32);
        let prefill = if extent > 0 {
            mine.iter().map(|z| (*z, extent)).collect()
        } else {
            Vec::new()
        };
        match out.last_mut() {
            Some(grp) if s.group_reporting => {
                grp.jobs.extend(jobs);
                grp.prefill.extend(prefill);
            }
            _ => out.push(Group {
                name: s.name.clone(),
                jobs,
                ramp: ramp_of(s),
                writes: s.rw.writes(),
                block_bytes: s.block_bytes,
                prefill,
            }),
        }
    }
    Ok(out)
}

pub(super) async fn prefill(dev: &dyn ZonedDevice, groups: &[Group]) -> Result<(), String> {
    let fill: Vec<Job> = groups
        .iter()
        .flat_map(|grp| &grp.prefill)
        .map(|(zone, bytes)| Job {
            pattern: Pattern::Write,
            zones: vec![*zone],
            block_bytes: PREFILL_BLOCK_BYTES,
            queue_depth: 1,
            bytes: *bytes,
            read_extent_bytes: 0,
            seed: 0,
            random_percent: 100,
            zipf_theta: None,
            limits: Limits::default(),
        })
        .collect();
    if fill.is_empty() {
        return Ok(());
    }
    let err = |e: zns::NvmeStatus| format!("filling the zones to read: {e}");
    // An earlier phase may have written these zones; the reads only need written data, so
    // start them over rather than track where each write pointer stands.
    let g = dev.geometry();
    for j in &fill {
        for z in &j.zones {
            dev.zone_mgmt(ZoneAction::Reset, g.zone_start(*z), false)
                .await
                .map_err(err)?;
        }
    }
    workload::run(dev, &fill, 0).await.map_err(err)?;
    dev.flush().await.map_err(err)
}

/// Resets the zones that the phase's writing jobs write and that already hold data (an
/// image's, or an earlier phase's): the jobs write from the start of each zone, as fio
/// resets the zones of a zoned device before writing them.
pub(super) async fn empty_written_zones(
    dev: &dyn ZonedDevice,
    groups: &[Group],
) -> Result<(), String> {
    let g = dev.geometry();
    let err = |e: zns::NvmeStatus| format!("emptying the zones to write: {e}");
    let zones = groups
        .iter()
        .filter(|grp| grp.writes)
        .flat_map(|grp| grp.jobs.iter().flat_map(|j| j.zones.iter().copied()));
    for z in zones {
        let start = g.zone_start(z);
        let report = dev
            .report_zones(start, ReportFilter::All, true, 1)
            .await
            .map_err(err)?;
        let state = report.zones.first().map(|d| d.state);
        if state != Some(ZoneState::Empty) {
            dev.zone_mgmt(ZoneAction::Reset, start, false)
                .await
                .map_err(err)?;
        }
    }
    Ok(())
}

/// Runs one stonewall phase: its groups concurrently.
pub(super) async fn phase(
    dev: &dyn ZonedDevice,
    groups: Vec<Group>,
    origin: Instant,
) -> Result<Vec<JobResult>, String> {
    empty_written_zones(dev, &groups).await?;
    prefill(dev, &groups).await?;
    let slices: Vec<&[Job]> = groups.iter().map(|grp| grp.jobs.as_slice()).collect();
    let ramps: Vec<Ramp> = groups.iter().map(|grp| grp.ramp).collect();
    let offset_ns = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let reports = workload::run_groups_traced(dev, &slices, &ramps)
        .await
        .map_err(|e| format!("a job failed: {e}"))?;
    Ok(groups
        .iter()
        .zip(reports)
        .map(|(grp, t)| {
            let (r, lat) = (t.report, t.latencies_ns);
            let (read, write, read_lat, write_lat) = if grp.writes {
                (Report::default(), r, Vec::new(), lat)
            } else {
                (r, Report::default(), lat, Vec::new())
            };
            JobResult {
                name: grp.name.clone(),
                read,
                write,
                block_bytes: grp.block_bytes,
                done_ns: t
                    .done_ns
                    .iter()
                    .map(|t| t.saturating_add(offset_ns))
                    .collect(),
                read_latencies_ns: read_lat,
                write_latencies_ns: write_lat,
            }
        })
        .collect())
}

/// Jobs that run at the same time must not share zones: one's writes would move the other's
/// write pointer, and the device would fail them with a status that names neither job.
pub(super) fn refuse_shared_zones(running: &[Group], new: &[Group]) -> Result<(), String> {
    let zones = |g: &Group| -> Vec<u32> { g.jobs.iter().flat_map(|j| j.zones.clone()).collect() };
    for n in new {
        let mine = zones(n);
        for r in running {
            if let Some(z) = zones(r).iter().find(|z| mine.contains(z)) {
                return Err(format!(
                    "jobs '{}' and '{}' run at the same time on zone {z}; give them different offset= ranges or separate them with stonewall",
                    r.name, n.name
                ));
            }
        }
    }
    Ok(())
}

pub(super) async fn run_zoned(
    specs: &[JobSpec],
    t: &Target,
    dev: &dyn ZonedDevice,
    p: &Progress,
) -> Result<Vec<JobResult>, String> {
    let g = dev.geometry();
    let mut phases: Vec<Vec<Group>> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let groups = groups_of(s, &g, job_seed(t, i))?;
        match phases.last_mut() {
            Some(p) if !s.stonewall => {
                refuse_shared_zones(p, &groups)?;
                p.extend(groups)
            }
            _ => phases.push(groups),
        }
    }
    let groups = phases.iter().flatten();
    p.total.store(
        planned(groups.flat_map(|g| {
            let fill = g.prefill.iter().map(|(_, b)| *b);
            g.jobs.iter().map(|j| j.bytes).chain(fill)
        })),
        Ordering::Relaxed,
    );
    let mut results = Vec::new();
    let origin = Instant::now();
    for ph in phases {
        results.extend(phase(dev, ph, origin).await?);
    }
    Ok(results)
}
