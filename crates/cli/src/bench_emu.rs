//! `zonestack bench emu`: how fast the emulator itself is. Measures, on one thread with the
//! memory backend, 4 KiB write/append/read IOPS and 128 KiB write bandwidth beside a plain
//! memcpy loop of the same sizes into a buffer of the same size (the baseline of the same
//! run), and compares the file backend with fio (psync, queue depth 1, same file size and
//! block size) when fio is installed. A benchmark prints figures; it asserts nothing.

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use bench::jobfile::parse_size;
use clap::Args;
use emu::{EmuConfig, EmuDevice};
use serde_json::json;
use zns::{Geometry, ZoneAction, ZonedDevice};

use crate::error::{CliError, CliResult};

#[derive(Args, Clone, Debug)]
pub struct BenchEmuArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Bytes written per measurement (the memory device is this large).
    #[arg(long, value_parser = parse_size, default_value = "512M")]
    pub size: u64,
    /// Bytes of the file-backend and fio comparison.
    #[arg(long, value_parser = parse_size, default_value = "256M")]
    pub file_size: u64,
    /// Repetitions of each measurement; the best is reported.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Skip the fio comparison.
    #[arg(long)]
    pub no_fio: bool,
    /// Also measure N writer threads, each on its own zones, against one thread in the same
    /// run (memory backend, 4 KiB and 128 KiB writes).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: u32,
}

const ZONE_BLOCKS: u64 = 16384; // 64 MiB zones of 4 KiB blocks

fn bench_geometry(bytes: u64) -> Geometry {
    let (zasl_blocks, copy_max_ranges, copy_max_range_blocks, copy_max_blocks) =
        emu::config::reference_limits(4096);
    Geometry {
        block_size: 4096,
        oob_size: 0,
        zone_count: (bytes / (ZONE_BLOCKS * 4096)).max(1) as u32,
        zone_size: ZONE_BLOCKS,
        zone_capacity: ZONE_BLOCKS,
        max_open: 0,
        max_active: 0,
        zasl_blocks,
        mdts_blocks: 512,
        copy_max_ranges,
        copy_max_range_blocks,
        copy_max_blocks,
        cross_zone_reads: false,
    }
}

fn other(e: impl std::fmt::Display) -> CliError {
    CliError::Other(e.to_string())
}

/// Runs `f` `reps` times and returns the best rate (units per second).
async fn best<F, Fut>(reps: u32, units: f64, mut f: F) -> Result<f64, CliError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), CliError>>,
{
    let mut rate: f64 = 0.0;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f().await?;
        rate = rate.max(units / t.elapsed().as_secs_f64());
    }
    Ok(rate)
}

async fn sequential_writes(
    dev: &EmuDevice,
    g: &Geometry,
    bs: usize,
    append: bool,
) -> Result<(), CliError> {
    dev.zone_mgmt(ZoneAction::Reset, 0, true).await?;
    let buf = vec![0x5au8; bs];
    let step = (bs / g.block_size as usize) as u64;
    for z in 0..g.zone_count {
        let start = g.zone_start(z);
        let mut lba = start;
        while lba < start + g.zone_capacity {
            if append {
                dev.append(start, &buf, None, false).await?;
            } else {
                dev.write(lba, &buf, None, false).await?;
            }
            lba += step;
        }
    }
    Ok(())
}

async fn sequential_reads(dev: &EmuDevice, g: &Geometry, bs: usize) -> Result<(), CliError> {
    let mut buf = vec![0u8; bs];
    let step = (bs / g.block_size as usize) as u64;
    for z in 0..g.zone_count {
        let start = g.zone_start(z);
        let mut lba = start;
        while lba < start + g.zone_capacity {
            dev.read(lba, &mut buf, None).await?;
            black_box(&buf);
            lba += step;
        }
    }
    Ok(())
}

/// Writes every zone once with `threads` OS threads, thread t taking the zones z with
/// z mod threads == t, each thread driving the device from its own runtime at queue depth
/// one; returns bytes per second over the whole pass.
fn threaded_pass(dev: &EmuDevice, g: &Geometry, bs: usize, threads: u32) -> Result<f64, CliError> {
    block_on(dev.zone_mgmt(ZoneAction::Reset, 0, true))?;
    let step = (bs / g.block_size as usize) as u64;
    let start = std::sync::Barrier::new(threads as usize + 1);
    let t0 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                scope.spawn(move || -> Result<(), CliError> {
                    let buf = vec![0x5au8; bs];
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .map_err(other)?;
                    start.wait();
                    rt.block_on(async {
                        for z in (t..g.zone_count).step_by(threads as usize) {
                            let zs = g.zone_start(z);
                            let mut lba = zs;
                            while lba < zs + g.zone_capacity {
                                dev.write(lba, &buf, None, false).await?;
                                lba += step;
                            }
                        }
                        Ok(())
                    })
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        for w in workers {
            w.join()
                .map_err(|_| CliError::Other("a writer thread panicked".into()))??;
        }
        Ok::<_, CliError>(t0)
    })?;
    Ok(g.capacity_bytes() as f64 / t0.elapsed().as_secs_f64())
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    futures::executor::block_on(f)
}

/// The best of `reps` passes with one thread and with `threads`, per block size:
/// (block size, one-thread bytes/s, N-thread bytes/s).
fn thread_scaling(a: &BenchEmuArgs) -> Result<Vec<(usize, f64, f64)>, CliError> {
    let g = bench_geometry(a.size);
    let dev = EmuDevice::new_memory(EmuConfig::new(g)).map_err(other)?;
    // Warm-up: touch every byte once so no measurement pays first-touch faults.
    threaded_pass(&dev, &g, 128 * 1024, 1)?;
    let mut rows = Vec::new();
    for bs in [4096usize, 128 * 1024] {
        let (mut one, mut many) = (0f64, 0f64);
        for _ in 0..a.reps.max(1) {
            one = one.max(threaded_pass(&dev, &g, bs, 1)?);
            many = many.max(threaded_pass(&dev, &g, bs, a.threads)?);
        }
        rows.push((bs, one, many));
    }
    Ok(rows)
}

/// The baseline: copy `bs`-byte buffers sequentially through a prefaulted buffer of `bytes`.
fn memcpy_rate(bytes: u64, bs: usize, reps: u32) -> f64 {
    let mut dst = vec![1u8; bytes as usize];
    let src = vec![0x5au8; bs];
    let ops = bytes as usize / bs;
    let mut rate: f64 = 0.0;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        for i in 0..ops {
            dst[i * bs..(i + 1) * bs].copy_from_slice(black_box(&src));
        }
        black_box(&dst);
        rate = rate.max(ops as f64 / t.elapsed().as_secs_f64());
    }
    rate
}

struct FileFigures {
    ours_write: f64,
    ours_read: f64,
    fio_write: Option<f64>,
    fio_read: Option<f64>,
}

fn fio_iops(file: &Path, rw: &str, size: u64) -> Option<f64> {
    let out = Command::new("fio")
        .args([
            "--name=cmp",
            "--ioengine=psync",
            "--iodepth=1",
            "--bs=4k",
            "--fallocate=none",
            "--output-format=json",
        ])
        .arg(format!("--rw={rw}"))
        .arg(format!("--size={size}"))
        .arg(format!("--filename={}", file.display()))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let side = if rw == "write" { "write" } else { "read" };
    v["jobs"][0][side]["iops"].as_f64()
}

async fn file_figures(a: &BenchEmuArgs) -> Result<FileFigures, CliError> {
    let dir = tempfile::Builder::new()
        .prefix("zonestack-bench")
        .tempdir()?;
    let g = bench_geometry(a.file_size);
    let bytes = g.capacity_bytes();
    let img = dir.path().join("emu.img");
    let dev = EmuDevice::create_file(&img, EmuConfig::new(g), false).map_err(other)?;
    let ops = (bytes / 4096) as f64;
    let ours_write = best(a.reps, ops, || sequential_writes(&dev, &g, 4096, false)).await?;
    let ours_read = best(a.reps, ops, || sequential_reads(&dev, &g, 4096)).await?;
    drop(dev);
    let (mut fio_write, mut fio_read) = (None, None);
    if !a.no_fio {
        let plain = dir.path().join("fio.dat");
        std::fs::File::create(&plain)?.set_len(bytes)?;
        for _ in 0..a.reps.max(1) {
            fio_write = fio_iops(&plain, "write", bytes).map(|v| v.max(fio_write.unwrap_or(0.0)));
            fio_read = fio_iops(&plain, "read", bytes).map(|v| v.max(fio_read.unwrap_or(0.0)));
        }
    }
    Ok(FileFigures {
        ours_write,
        ours_read,
        fio_write,
        fio_read,
    })
}

pub async fn run(a: &BenchEmuArgs, out: &mut impl Write) -> CliResult {
    let g = bench_geometry(a.size);
    let bytes = g.capacity_bytes();
    let cfg = EmuConfig::new(g);
    let dev = EmuDevice::new_memory(cfg).map_err(other)?;
    // Warm-up: touch every byte of the backend once so no measurement pays first-touch faults.
    sequential_writes(&dev, &g, 128 * 1024, false).await?;
    let ops4k = (bytes / 4096) as f64;
    let write_4k = best(a.reps, ops4k, || sequential_writes(&dev, &g, 4096, false)).await?;
    let read_4k = best(a.reps, ops4k, || sequential_reads(&dev, &g, 4096)).await?;
    let append_4k = best(a.reps, ops4k, || sequential_writes(&dev, &g, 4096, true)).await?;
    let mib = bytes as f64 / (1 << 20) as f64;
    let write_128k = best(a.reps, mib, || {
        sequential_writes(&dev, &g, 128 * 1024, false)
    })
    .await?;
    drop(dev);
    let memcpy_4k = memcpy_rate(bytes, 4096, a.reps);
    let memcpy_128k = memcpy_rate(bytes, 128 * 1024, a.reps) * (128.0 / 1024.0);
    let f = file_figures(a).await?;
    let scaling = if a.threads > 1 {
        // Threads of their own, each with a runtime: not inside this runtime's thread.
        let a2 = BenchEmuArgs { ..a.clone() };
        tokio::task::spawn_blocking(move || thread_scaling(&a2))
            .await
            .map_err(other)??
    } else {
        Vec::new()
    };
    let ratio = |x: f64, y: Option<f64>| y.map(|y| x / y);
    let threads_json: Vec<_> = scaling
        .iter()
        .map(|(bs, one, many)| {
            json!({
                "block_bytes": bs,
                "one_thread_mibps": (one / (1 << 20) as f64).round(),
                "threads_mibps": (many / (1 << 20) as f64).round(),
                "one_thread_iops": (one / *bs as f64).round(),
                "threads_iops": (many / *bs as f64).round(),
                "speedup": many / one,
            })
        })
        .collect();
    let v = json!({
        "threads": a.threads,
        "thread_scaling": threads_json,
        "write_4k_iops": write_4k.round(),
        "append_4k_iops": append_4k.round(),
        "read_4k_iops": read_4k.round(),
        "write_128k_mibps": write_128k.round(),
        "memcpy_4k_ops": memcpy_4k.round(),
        "memcpy_128k_mibps": memcpy_128k.round(),
        "write_4k_vs_memcpy": write_4k / memcpy_4k,
        "write_128k_vs_memcpy": write_128k / memcpy_128k,
        "bytes": bytes,
        "file_write_4k_iops": f.ours_write.round(),
        "file_read_4k_iops": f.ours_read.round(),
        "fio_write_4k_iops": f.fio_write.map(f64::round),
        "fio_read_4k_iops": f.fio_read.map(f64::round),
        "file_vs_fio_write": ratio(f.ours_write, f.fio_write),
        "file_vs_fio_read": ratio(f.ours_read, f.fio_read),
        "file_bytes": a.file_size,
    });
    if a.json {
        writeln!(out, "{v}")?;
        return Ok(());
    }
    writeln!(
        out,
        "memory backend, one thread, {} MiB per pass, best of {}:",
        bytes >> 20,
        a.reps
    )?;
    writeln!(
        out,
        "  4 KiB write   {:>12.0} IOPS   memcpy {:>12.0} ops/s   ratio {:.2}",
        write_4k,
        memcpy_4k,
        write_4k / memcpy_4k
    )?;
    writeln!(out, "  4 KiB append  {:>12.0} IOPS", append_4k)?;
    writeln!(out, "  4 KiB read    {:>12.0} IOPS", read_4k)?;
    writeln!(
        out,
        "  128 KiB write {:>12.0} MiB/s  memcpy {:>12.0} MiB/s  ratio {:.2}",
        write_128k,
        memcpy_128k,
        write_128k / memcpy_128k
    )?;
    writeln!(
        out,
        "file backend vs fio psync QD1 4 KiB, {} MiB file:",
        a.file_size >> 20
    )?;
    let show =
        |o: Option<f64>, unit: &str| o.map_or("n/a".to_string(), |v| format!("{v:.0}{unit}"));
    for (name, ours, fio) in [
        ("write", f.ours_write, f.fio_write),
        ("read ", f.ours_read, f.fio_read),
    ] {
        let pct = ratio(ours, fio).map(|r| r * 100.0);
        writeln!(
            out,
            "  {name} {ours:>10.0} IOPS  fio {:>10} IOPS  ratio {}",
            show(fio, ""),
            show(pct, "%")
        )?;
    }
    if !scaling.is_empty() {
        writeln!(
            out,
            "memory backend, writers on their own zones, 1 thread vs {} (best of {}):",
            a.threads, a.reps
        )?;
        for (bs, one, many) in &scaling {
            writeln!(
                out,
                "  {:>3} KiB write {:>12.0} IOPS   {} threads {:>12.0} IOPS   speedup {:.2}x",
                bs / 1024,
                one / *bs as f64,
                a.threads,
                many / *bs as f64,
                many / one
            )?;
        }
    }
    Ok(())
}
