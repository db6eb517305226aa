//! `zonestack quickstart`: a tour of the emulated ZNS SSD on an embedded default. Creates a
//! device image in a temporary directory, runs a short mixed workload (queued writes,
//! concurrent appends, Simple Copy, zone management, a power loss, a clean reopen), verifies
//! what it reads back, and prints the zone report and the counters.

use std::io::Write;

use emu::{EmuConfig, EmuDevice};
use futures::future::join_all;
use zns::{CopyRange, ReportFilter, SimRng, ZoneAction, ZonedDevice};

use crate::args::{Cmd, QuickstartArgs, Target, ZoneCmd};
use crate::commands;
use crate::error::{CliError, CliResult};

fn pattern(lba: u64, bs: usize) -> Vec<u8> {
    (0..bs).map(|i| (lba as usize * 31 + i) as u8).collect()
}

fn other(e: impl std::fmt::Display) -> CliError {
    CliError::Other(e.to_string())
}

/// What the quickstart suggests after its tour: the README's first steps.
const TRY_NEXT: &str = "\
try next:
  zonestack device create zns0.img --zones 16
  zonestack zone open zns0.img --zone 2
  zonestack zone report zns0.img
  zonestack --help";

pub async fn run(a: &QuickstartArgs, out: &mut impl Write) -> CliResult {
    let dir = tempfile::Builder::new()
        .prefix("zonestack-quickstart")
        .tempdir()?;
    let path = dir.path().join("zns0.img");
    let mut geo = emu::profile("small").ok_or_else(|| other("profile small is missing"))?;
    geo.zone_count = 16;
    let cfg = EmuConfig {
        seed: a.seed,
        ..EmuConfig::new(geo)
    };
    let dev = EmuDevice::create_file(&path, cfg, false).map_err(other)?;
    let bs = geo.block_size as usize;
    writeln!(
        out,
        "created {} ({} zones x {} blocks, {} writable, {} B blocks){}",
        path.display(),
        geo.zone_count,
        geo.zone_size,
        geo.zone_capacity,
        bs,
        if a.keep {
            ""
        } else {
            "; the directory is removed at the end (--keep keeps it)"
        }
    )?;

    // Queue depth 8 of Zone Writes per zone, submitted in write-pointer order.
    for z in 0..4u32 {
        let start = geo.zone_start(z);
        let bufs: Vec<(u64, Vec<u8>)> = (0..64)
            .map(|i| (start + i, pattern(start + i, bs)))
            .collect();
        for batch in bufs.chunks(8) {
            let r = join_all(batch.iter().map(|(lba, d)| dev.write(*lba, d, None, false))).await;
            r.into_iter().collect::<Result<Vec<_>, _>>()?;
        }
    }
    writeln!(out, "wrote 4 zones x 64 blocks at queue depth 8")?;

    // Sixteen appends in flight to one zone: the device picks the order.
    let z4 = geo.zone_start(4);
    let payloads: Vec<Vec<u8>> = (0..16u64).map(|i| vec![i as u8 + 1; bs]).collect();
    let lbas = join_all(payloads.iter().map(|d| dev.append(z4, d, None, false))).await;
    let lbas: Vec<u64> = lbas.into_iter().collect::<Result<_, _>>()?;
    writeln!(
        out,
        "16 concurrent appends to zone 4 landed at offsets {:?}",
        lbas.iter().map(|l| l - z4).collect::<Vec<_>>()
    )?;
    let mut buf = vec![0u8; bs];
    for (i, lba) in lbas.iter().enumerate() {
        dev.read(*lba, &mut buf, None).await?;
        if buf != payloads[i] {
            return Err(other(format!(
                "append {i} read back wrong data at lba {lba}"
            )));
        }
    }

    // Simple Copy of two ranges into zone 5, then verify.
    let z5 = geo.zone_start(5);
    let ranges = [
        CopyRange { lba: 10, blocks: 8 },
        CopyRange {
            lba: geo.zone_start(1) + 3,
            blocks: 4,
        },
    ];
    dev.copy(&ranges, z5, false).await?;
    for (i, src) in (10..18)
        .chain(geo.zone_start(1) + 3..geo.zone_start(1) + 7)
        .enumerate()
    {
        dev.read(z5 + i as u64, &mut buf, None).await?;
        if buf != pattern(src, bs) {
            return Err(other(format!(
                "copied block {i} differs from its source {src}"
            )));
        }
    }
    writeln!(
        out,
        "copied 12 blocks from zones 0 and 1 into zone 5 inside the device"
    )?;

    dev.zone_mgmt(ZoneAction::Finish, geo.zone_start(1), false)
        .await?;
    dev.zone_mgmt(ZoneAction::Reset, geo.zone_start(2), false)
        .await?;
    dev.flush().await?;
    writeln!(
        out,
        "finished zone 1 (now full), reset zone 2 (now empty, its data gone), flushed"
    )?;

    // Unflushed writes, then a power cut: the device keeps a prefix of each zone.
    let z6 = geo.zone_start(6);
    let mut rng = SimRng::new(a.seed);
    for i in 0..32 {
        let mut d = vec![0u8; bs];
        rng.fill(&mut d);
        dev.write(z6 + i, &d, None, i == 7).await?;
    }
    let cut = dev.power_loss(a.seed).map_err(other)?;
    let kept = dev
        .report_zones(z6, ReportFilter::All, true, 1)
        .await?
        .zones[0]
        .wp
        - z6;
    writeln!(
        out,
        "power loss: zone 6 kept {kept} of 32 unflushed blocks (8 were FUA-durable); {} cut",
        commands::plural(cut.len() as u64, "zone")
    )?;

    commands::print_stats(&dev, out)?;

    // Clean shutdown and reopen: the report must come back identical.
    let before = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await?;
    dev.shutdown().map_err(other)?;
    drop(dev);
    let dev = EmuDevice::open_file(&path, false).map_err(other)?;
    let after = dev
        .report_zones(0, ReportFilter::All, false, usize::MAX)
        .await?;
    if before != after {
        return Err(other("zone report changed across a clean reopen"));
    }
    for lba in [geo.zone_start(3) + 63, z4 + 15] {
        dev.read(lba, &mut buf, None).await?;
    }
    writeln!(out, "reopened {}: zone report identical\n", path.display())?;

    let report = Cmd::Zone(ZoneCmd::Report {
        target: Target {
            path: Some(path.clone()),
            raizn: Vec::new(),
        },
        state: None,
        start: 0,
        count: None,
        json: false,
    });
    commands::execute(&dev, &report, out).await?;
    dev.shutdown().map_err(other)?;
    if a.keep {
        let kept = dir.keep();
        writeln!(out, "\nkept {}", kept.display())?;
    } else {
        writeln!(
            out,
            "\nremoved {} (run with --keep to keep it)",
            dir.path().display()
        )?;
    }
    writeln!(out, "{TRY_NEXT}")?;
    Ok(())
}
