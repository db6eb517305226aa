//! Reports of finished fio jobs: fio's JSON shape, its text report, and the latency and
//! throughput series that `--plot` draws.

use super::*;

pub(super) fn direction_json(r: &Report) -> Value {
    let ns = |us: f64| (us * 1000.0).round() as u64;
    json!({
        "io_bytes": r.bytes,
        "bw": (r.mib_per_sec * 1024.0).round() as u64,
        "iops": r.iops,
        "runtime": (r.seconds * 1000.0).round() as u64,
        "lat_ns": {
            "mean": r.mean_latency_us * 1000.0,
            "percentile": {
                "50.000000": ns(r.latency_p50_us),
                "99.000000": ns(r.latency_p99_us),
                "99.900000": ns(r.latency_p999_us),
            },
        },
    })
}

/// The results in fio's `--output-format=json` shape (the fields this runner measures).
pub fn to_json(results: &[JobResult]) -> Value {
    let jobs: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "jobname": r.name,
                "read": direction_json(&r.read),
                "write": direction_json(&r.write),
            })
        })
        .collect();
    json!({ "jobs": jobs })
}

/// The results as a text report in the manner of fio's.
pub fn to_text(results: &[JobResult]) -> String {
    let mut s = String::new();
    for r in results {
        s.push_str(&format!("{}:\n", r.name));
        for (dir, rep) in [("read", &r.read), ("write", &r.write)] {
            if rep.ops == 0 {
                continue;
            }
            s.push_str(&format!(
                "  {dir}: IOPS={:.0}, BW={:.1}MiB/s ({} MiB/{:.0}msec)\n",
                rep.iops,
                rep.mib_per_sec,
                rep.bytes >> 20,
                rep.seconds * 1000.0
            ));
            s.push_str(&format!(
                "    lat (usec): avg={:.2}, p50={:.2}, p99={:.2}, p99.9={:.2}\n",
                rep.mean_latency_us, rep.latency_p50_us, rep.latency_p99_us, rep.latency_p999_us
            ));
        }
    }
    s
}

/// Each job's latency distribution per direction it measured: up to `points` + 1 points of
/// (latency in microseconds, fraction of commands at most that slow), named "JOB read" or
/// "JOB write".
pub fn latency_cdfs(results: &[JobResult], points: usize) -> Vec<(String, Vec<(f64, f64)>)> {
    let n = points.max(1);
    let mut out = Vec::new();
    for r in results {
        for (dir, lat) in [
            ("read", &r.read_latencies_ns),
            ("write", &r.write_latencies_ns),
        ] {
            if lat.is_empty() {
                continue;
            }
            let cdf = (0..=n)
                .map(|q| {
                    let i = q * (lat.len() - 1) / n;
                    let us = lat.get(i).copied().unwrap_or(0) as f64 / 1000.0;
                    (us, (i + 1) as f64 / lat.len() as f64)
                })
                .collect();
            out.push((format!("{} {dir}", r.name), cdf));
        }
    }
    out
}

/// Each job's throughput over time in MiB/s: `buckets` equal intervals from the start of the
/// run to its last completion, as (interval end in seconds, MiB/s) points.
pub fn throughput_series(results: &[JobResult], buckets: usize) -> Vec<(String, Vec<(f64, f64)>)> {
    let end_ns = results
        .iter()
        .filter_map(|r| r.done_ns.iter().max())
        .max()
        .copied()
        .unwrap_or(0)
        .max(1);
    let n = buckets.max(1);
    let width_ns = end_ns.div_ceil(n as u64).max(1);
    let width_s = width_ns as f64 / 1e9;
    results
        .iter()
        .map(|r| {
            let mut bytes = vec![0u64; n];
            for t in &r.done_ns {
                let i = usize::try_from(t / width_ns).unwrap_or(n - 1).min(n - 1);
                if let Some(b) = bytes.get_mut(i) {
                    *b += r.block_bytes;
                }
            }
            let points = bytes
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    (
                        (i + 1) as f64 * width_s,
                        *b as f64 / (1u64 << 20) as f64 / width_s,
                    )
                })
                .collect();
            (r.name.clone(), points)
        })
        .collect()
}

/// A host FTL volume's figures as one JSON object (`zonestack ftl stats --json`, the bench
/// report): sizes, spare blocks by purpose, write amplification, relocations, streams.
pub fn ftl_stats_json(s: &ftl::FtlStats) -> Value {
    let c = &s.counters;
    let streams: serde_json::Map<String, Value> = ftl::map::Stream::ALL
        .iter()
        .map(|stream| {
            let i = stream.index();
            let v = json!({"blocks": c.stream_blocks[i], "zones_opened": c.stream_zones[i]});
            (stream.name().to_string(), v)
        })
        .collect();
    json!({
        "volume_blocks": s.volume_blocks,
        "block_size": s.block_size,
        "flash_blocks": s.flash_blocks,
        "op_percent": s.op_real() * 100.0,
        "spare_blocks": {
            "total": s.spare.total(),
            "checkpoint": s.spare.checkpoint,
            "reserve": s.spare.reserve,
            "headers": s.spare.headers,
            "summaries": s.spare.summaries,
            "open_zone_tails": s.spare.open_tails,
            "collectable": s.spare.collectable,
        },
        "data_zones": s.data_zones,
        "free_zones": s.free_zones,
        "mapped_blocks": s.mapped_blocks,
        "user_blocks_written": c.user_blocks,
        "blocks_relocated": c.gc_blocks,
        "zones_collected": c.gc_zones,
        "write_amplification": s.write_amplification,
        "meta_blocks_written": c.meta_blocks,
        "checkpoints": s.checkpoints,
        "checkpoint_bytes": s.checkpoint_bytes,
        "checkpoint_bytes_per_user_gib": s.checkpoint_bytes_per_user_gib(),
        "delta_checkpoints": c.delta_checkpoints,
        "delta_checkpoint_bytes": c.delta_checkpoint_bytes,
        "checkpoint_every_zones": s.checkpoint_every_zones,
        "hot_zones": s.hot_zones,
        "separating_hot_cold": s.separating,
        "die_stripe": s.stripe.map(|d| json!({"unit_blocks": d.unit_blocks, "dies": d.dies})),
        "streams": streams,
    })
}
