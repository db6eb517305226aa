//! Randomized differential test: the same random command sequence runs on the device and on
//! the reference model (`RefModel`); every status, every read and the whole zone report
//! after every command must be identical.
//!
//! Fault model: device-side Read Only / Offline faults and clean restarts, applied to both
//! sides at the same point. Batches of commands in flight together are checked for what the
//! checklist allows a device to choose (append order), then replayed on the model in the
//! order the device chose.

use futures::future::join_all;

use super::ops::{gen_op, payload, MetaMode, Op};
use super::{DeviceFactory, KitFailure};
use crate::device::ZonedDevice;
use crate::model::RefModel;
use crate::rng::SimRng;
use crate::status::NvmeResult;
use crate::types::{Geometry, Lba, ReportFilter};

/// Most faults injected in one run, so that enough zones stay usable.
const MAX_FAULTS: u32 = 3;

type Step = Result<(), String>;

fn same<T: PartialEq + std::fmt::Debug>(what: &str, dev: &T, model: &T) -> Step {
    if dev == model {
        Ok(())
    } else {
        Err(format!("{what}: device gave {dev:?}, model {model:?}"))
    }
}

fn meta_arg(mode: MetaMode, meta: &[u8]) -> Option<&[u8]> {
    match mode {
        MetaMode::Without => None,
        MetaMode::With | MetaMode::WrongLength => Some(meta),
    }
}

/// Runs `ops` random commands from `seed` on a device from `f` and on the model.
pub async fn differential<F: DeviceFactory>(
    f: &F,
    seed: u64,
    ops: usize,
) -> Result<(), KitFailure> {
    let mut rng = SimRng::new(seed);
    let g = super::ops::pick_geometry(&mut rng);
    let fail = |i: usize, op: &str, msg: String| {
        KitFailure::new(
            0,
            format!("differential seed {seed} op {i} {op}: {msg}; geometry {g:?}"),
        )
    };
    let mut model = RefModel::new(g).map_err(|e| fail(0, "setup", e.to_string()))?;
    let mut dev = f.create(&g).await;
    let mut faults = 0u32;
    for i in 0..ops {
        let op = gen_op(&mut rng, &model, faults < MAX_FAULTS);
        let step = match &op {
            Op::Restart => {
                dev = f.restart(dev).await;
                model.restart();
                Ok(())
            }
            Op::Fault { zone, state } => {
                faults += 1;
                f.set_zone_state(&dev, *zone, *state).await;
                model
                    .set_zone_state(*zone, *state)
                    .map_err(|s| format!("model refused the fault: {s}"))
            }
            op => apply(&dev, &mut model, op).await,
        };
        let step = match step {
            Ok(()) => compare_reports(&dev, &model, &g).await,
            Err(e) => Err(e),
        };
        step.map_err(|msg| fail(i, &format!("{op:?}"), msg))?;
    }
    Ok(())
}

async fn compare_reports<D: ZonedDevice>(dev: &D, model: &RefModel, g: &Geometry) -> Step {
    let n = g.zone_count as usize;
    let d = dev.report_zones(0, ReportFilter::All, false, n).await;
    let m = model.report_zones(0, ReportFilter::All, false, n);
    same("zone report after the command", &d, &m)
}

/// Applies one command (not a restart or fault) to both sides.
async fn apply<D: ZonedDevice>(dev: &D, model: &mut RefModel, op: &Op) -> Step {
    let g = model.geometry();
    match op {
        Op::Write {
            lba,
            blocks,
            salt,
            meta,
            odd_len,
            fua,
        } => {
            let (data, m) = payload(&g, *blocks, *salt, *meta, *odd_len);
            let md = meta_arg(*meta, &m);
            let d = dev.write(*lba, &data, md, *fua).await;
            same("write status", &d, &model.write(*lba, &data, md, *fua))
        }
        Op::Append {
            zslba,
            blocks,
            salt,
            meta,
            fua,
        } => {
            let (data, m) = payload(&g, *blocks, *salt, *meta, false);
            let md = meta_arg(*meta, &m);
            let d = dev.append(*zslba, &data, md, *fua).await;
            same("append result", &d, &model.append(*zslba, &data, md, *fua))
        }
        Op::WriteZeroes { lba, blocks, fua } => {
            let d = dev.write_zeroes(*lba, *blocks, *fua).await;
            same(
                "write zeroes status",
                &d,
                &model.write_zeroes(*lba, *blocks, *fua),
            )
        }
        Op::Copy { sources, dest, fua } => {
            let d = dev.copy(sources, *dest, *fua).await;
            same("copy status", &d, &model.copy(sources, *dest, *fua))
        }
        Op::Read {
            lba,
            blocks,
            meta,
            odd_len,
        } => read_both(dev, model, *lba, *blocks, *meta, *odd_len).await,
        Op::Mgmt {
            action,
            zslba,
            select_all,
        } => {
            let d = dev.zone_mgmt(*action, *zslba, *select_all).await;
            same(
                "zone management status",
                &d,
                &model.zone_mgmt(*action, *zslba, *select_all),
            )
        }
        Op::Report {
            lba,
            filter,
            partial,
            max,
        } => {
            let d = dev.report_zones(*lba, *filter, *partial, *max).await;
            same(
                "report",
                &d,
                &model.report_zones(*lba, *filter, *partial, *max),
            )
        }
        Op::Flush => same("flush status", &dev.flush().await, &model.flush()),
        Op::AppendBatch { zone, sizes, salt } => {
            append_batch(dev, model, *zone, sizes, *salt).await
        }
        Op::WriteBatch { zone, sizes, salt } => write_batch(dev, model, *zone, sizes, *salt).await,
        Op::Restart | Op::Fault { .. } => Ok(()),
    }
}

async fn read_both<D: ZonedDevice>(
    dev: &D,
    model: &RefModel,
    lba: Lba,
    blocks: u64,
    meta: MetaMode,
    odd: bool,
) -> Step {
    let g = model.geometry();
    let len =
        blocks as usize * g.block_size as usize + if odd { g.block_size as usize / 2 } else { 0 };
    let mlen = blocks as usize * g.oob_size as usize + usize::from(meta == MetaMode::WrongLength);
    let (mut dd, mut dm) = (vec![0xA5u8; len], vec![0x5Au8; mlen]);
    let (mut md, mut mm) = (vec![0xA5u8; len], vec![0x5Au8; mlen]);
    let with = meta != MetaMode::Without;
    let d = dev.read(lba, &mut dd, with.then_some(&mut dm[..])).await;
    let m = model.read(lba, &mut md, with.then_some(&mut mm[..]));
    same("read status", &d, &m)?;
    if d.is_ok() {
        if dd != md {
            return Err(format!("read of {blocks} blocks at {lba}: data differs"));
        }
        if with && dm != mm {
            return Err(format!(
                "read of {blocks} blocks at {lba}: metadata differs"
            ));
        }
    }
    Ok(())
}

/// Whether every command of a batch would succeed when run in submission order.
fn batch_succeeds(
    model: &RefModel,
    run: impl Fn(&mut RefModel, usize) -> NvmeResult<()>,
    n: usize,
) -> bool {
    let mut trial = model.clone();
    (0..n).all(|i| run(&mut trial, i).is_ok())
}

/// Compares `len` blocks at `lba` on both sides.
async fn compare_range<D: ZonedDevice>(dev: &D, model: &RefModel, lba: Lba, blocks: u64) -> Step {
    read_both(dev, model, lba, blocks.max(1), MetaMode::With, false).await
}

async fn append_batch<D: ZonedDevice>(
    dev: &D,
    model: &mut RefModel,
    zone: u32,
    sizes: &[u64],
    salt: u64,
) -> Step {
    let g = model.geometry();
    let zs = g.zone_start(zone);
    let payloads: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| payload(&g, *n, salt + i as u64, MetaMode::With, false))
        .collect();
    let all_ok = batch_succeeds(
        model,
        |m, i| {
            m.append(zs, &payloads[i].0, Some(&payloads[i].1), false)
                .map(|_| ())
        },
        sizes.len(),
    );
    if !all_ok {
        // Some append would fail, so the outcome depends on the order; run them one by one.
        for (d, m) in &payloads {
            let got = dev.append(zs, d, Some(m), false).await;
            same(
                "sequential append",
                &got,
                &model.append(zs, d, Some(m), false),
            )?;
        }
        return Ok(());
    }
    let wp0 = model.wp(zone).unwrap_or(zs);
    let results = join_all(
        payloads
            .iter()
            .map(|(d, m)| dev.append(zs, d, Some(m), false)),
    )
    .await;
    let mut landed = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        landed.push((
            r.map_err(|s| format!("concurrent append {i} failed with {s}"))?,
            i,
        ));
    }
    landed.sort_unstable();
    let mut next = wp0;
    for (at, i) in landed {
        if at != next {
            return Err(format!(
                "concurrent append {i} landed at {at}, expected the next free LBA {next}"
            ));
        }
        let (d, m) = &payloads[i];
        same(
            "replayed append",
            &Ok(at),
            &model.append(zs, d, Some(m), false),
        )?;
        next += sizes[i];
    }
    compare_range(dev, model, wp0, next - wp0).await
}

async fn write_batch<D: ZonedDevice>(
    dev: &D,
    model: &mut RefModel,
    zone: u32,
    sizes: &[u64],
    salt: u64,
) -> Step {
    let g = model.geometry();
    let wp0 = model.wp(zone).unwrap_or(g.zone_start(zone));
    let mut at = wp0;
    let mut writes = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        let (d, m) = payload(&g, *n, salt + i as u64, MetaMode::With, false);
        writes.push((at, d, m));
        at += n;
    }
    let all_ok = batch_succeeds(
        model,
        |m, i| m.write(writes[i].0, &writes[i].1, Some(&writes[i].2), false),
        writes.len(),
    );
    if !all_ok {
        for (lba, d, m) in &writes {
            let got = dev.write(*lba, d, Some(m), false).await;
            same(
                "sequential write",
                &got,
                &model.write(*lba, d, Some(m), false),
            )?;
        }
        return Ok(());
    }
    let results = join_all(
        writes
            .iter()
            .map(|(lba, d, m)| dev.write(*lba, d, Some(m), false)),
    )
    .await;
    for (i, r) in results.into_iter().enumerate() {
        r.map_err(|s| format!("write {i} of a batch in WP order failed with {s}"))?;
        let (lba, d, m) = &writes[i];
        same(
            "replayed write",
            &Ok(()),
            &model.write(*lba, d, Some(m), false),
        )?;
    }
    compare_range(dev, model, wp0, at - wp0).await
}
