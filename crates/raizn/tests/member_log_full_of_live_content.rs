//! A member's partial-parity log zone full (relocation state and the records of incomplete
//! stripes) must not refuse a relocation, part of a write the volume has accepted, while it
//! is within the member's relocation budget (docs/DESIGN.md, "Room in the member log" and
//! "The one-zone log's active limit"): a collection writes the relocated blocks of the write
//! that did not fit before any partial-parity record, and no record is dropped. Members: 3,
//! 48-block zones, 8-block stripe units, so member 0 holds the parity (and the log records)
//! of stripe 2 of every zone, and five zones written to 40 blocks fill 45 of its 48 log
//! blocks with records; the array's active limit is 3, so the first four are finished once
//! written (their records dead, still in the log) and the fifth stays active.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use raizn::layout::{GENERAL_ZONE, MIN_META_ZONES, PARTIAL_PARITY_ZONE, SWAP_ZONE};
use raizn::meta::{self, RecordType};
use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{ReportFilter, ZonedDevice};

use common::{assert_blocks, block_on_paused, blocks, write_blocks, Faulty, BS};

/// Zones written to 40 blocks (stripe 2 incomplete, its record on member 0).
const FILLERS: std::ops::Range<u64> = 1..6;

struct Array {
    emus: Vec<Arc<EmuDevice>>,
    faulty: Vec<Arc<Faulty>>,
    v: RaiznVolume,
}

fn members(faulty: &[Arc<Faulty>]) -> Vec<Member> {
    faulty.iter().map(|f| f.clone() as Member).collect()
}

async fn format(seed: u64) -> Array {
    let g = common::unlimited_member_geometry(BS, common::OOB, MIN_META_ZONES + 8, 48);
    let emus = common::emu_members(&g, 3, seed);
    let faulty = common::faulty_members(&emus, seed * 5);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([0x4c; 16])
    };
    let v = match RaiznVolume::format(members(&faulty), cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("seed {seed}: format: {e}"),
    };
    Array { emus, faulty, v }
}

fn power_loss(emus: &[Arc<EmuDevice>], seed: u64) {
    for (i, e) in emus.iter().enumerate() {
        if let Err(err) = e.power_loss(seed + i as u64) {
            panic!("power loss: {err}");
        }
    }
}

async fn reopen(a: Array, seed: u64, what: &str) -> Array {
    let Array { emus, faulty, v } = a;
    drop(v);
    power_loss(&emus, seed);
    for f in &faulty {
        f.clear_errors();
        f.restore_power();
    }
    let v = match RaiznVolume::open(members(&faulty)).await {
        Ok(v) => v,
        Err(e) => panic!("{what}: reopen: {e}"),
    };
    Array { emus, faulty, v }
}

async fn wp(v: &RaiznVolume, zone: u64) -> u64 {
    let start = zone * v.geometry().zone_size;
    match v.report_zones(start, ReportFilter::All, false, 1).await {
        Ok(r) => r.zones[0].wp - start,
        Err(e) => panic!("report zone {zone}: {e}"),
    }
}

/// Zone 0 holds blocks 0..20 and a torn stripe: member 0 holds its unit of logical 24..32
/// (member blocks 8..16) of a write the cut lost elsewhere, so those blocks are stale and a
/// write of them is relocated into member 0's log. Then zones 1..6 are written to 40 blocks
/// (zones 1 to 4 finished after, within the array's active limit of 3) and flushed: member
/// 0's log holds the stale range and five 9-block records, zone 5's live.
async fn torn_and_full(seed: u64) -> Array {
    let a = format(seed).await;
    write_blocks(&a.v, 0..20, 0, false).await;
    if let Err(e) = a.v.flush().await {
        panic!("flush: {e}");
    }
    let l = *a.v.layout();
    let torn = l.place(0, 24);
    assert_eq!((torn.member, torn.lba - l.member_zone_start(0)), (0, 8));
    let (d, m) = blocks(24..32, 77);
    if let Err(e) = a.emus[0].write(torn.lba, &d, Some(&m), false).await {
        panic!("torn unit: {e}");
    }
    if let Err(e) = a.emus[0].flush().await {
        panic!("flush torn unit: {e}");
    }
    let a = reopen(a, seed, "after the tear").await;
    assert_eq!(wp(&a.v, 0).await, 20, "recovered prefix");
    let zs = a.v.geometry().zone_size;
    assert_eq!(a.v.geometry().max_active, 3);
    for z in FILLERS {
        for s in 0..5 {
            let lbas = z * zs + s * 8..z * zs + s * 8 + 8;
            write_blocks(&a.v, lbas, 0, false).await;
        }
        if z + 1 < FILLERS.end {
            if let Err(e) = a.v.zone_mgmt(zns::ZoneAction::Finish, z * zs, false).await {
                panic!("finish zone {z}: {e}");
            }
        }
    }
    if let Err(e) = a.v.flush().await {
        panic!("flush: {e}");
    }
    a
}

async fn check_fillers(v: &RaiznVolume, what: &str) {
    let zs = v.geometry().zone_size;
    for z in FILLERS {
        assert!(wp(v, z).await >= 40, "{what}: zone {z}");
        assert_blocks(v, z * zs..z * zs + 40, 0, what).await;
    }
}

async fn relocation_into_a_full_log(seed: u64) {
    let a = torn_and_full(seed).await;
    let before = a.v.pp_stats();
    // Blocks 24..32 go to member 0's log: 9 blocks that the live content leaves no room for.
    let (d, m) = blocks(20..32, 1);
    let r = a.v.write(20, &d, Some(&m), false).await;
    assert_eq!(r, Ok(()), "the relocation must not be refused");
    assert!(a.v.reloc_stats().blocks >= 8, "{:?}", a.v.reloc_stats());
    let after = a.v.pp_stats();
    assert!(after.collections > before.collections, "{after:?}");
    // The relocated unit is data and within the budget; the live record keeps its room.
    assert_eq!(after.unprotected, before.unprotected, "{after:?}");
    assert_eq!(a.v.reloc_stats().refused, 0, "{:?}", a.v.reloc_stats());
    assert_blocks(&a.v, 0..20, 0, "old data").await;
    assert_blocks(&a.v, 20..32, 1, "relocated write").await;
    check_fillers(&a.v, "before the cut").await;
    if let Err(e) = a.v.flush().await {
        panic!("flush: {e}");
    }
    let a = reopen(a, seed * 3, "after the relocation").await;
    assert_eq!(wp(&a.v, 0).await, 32);
    assert_blocks(&a.v, 0..20, 0, "old data after the cut").await;
    assert_blocks(&a.v, 20..32, 1, "relocated write after the cut").await;
    check_fillers(&a.v, "after the cut").await;
}

#[test]
fn a_relocation_into_a_log_full_of_live_records_is_not_refused() {
    for seed in 1..4 {
        block_on_paused(relocation_into_a_full_log(seed));
    }
}

/// Power cut at every command of member 0 from the relocating write on (the collection
/// that writes the relocation: flush, swap, log, swap reset), then reopen: zone 0 holds its
/// old blocks and a prefix of the write, the filler zones everything, and the reopen never
/// trips over a half-written log or swap zone.
async fn cut_at(seed: u64, cut: Option<u64>) -> u64 {
    let a = torn_and_full(seed).await;
    let start = a.faulty[0].counters().commands;
    if let Some(n) = cut {
        common::cut_power_at(&a.faulty[0], n);
    }
    let (d, m) = blocks(20..32, 1);
    let r = a.v.write(20, &d, Some(&m), false).await;
    if cut.is_none() {
        assert_eq!(r, Ok(()), "seed {seed}: the relocation must not be refused");
    }
    let commands = a.faulty[0].counters().commands - start;
    for f in &a.faulty {
        f.cut_power();
    }
    let what = format!("seed {seed} cut {cut:?}");
    let a = reopen(a, seed * 7 + cut.unwrap_or(0), &what).await;
    let w = wp(&a.v, 0).await;
    assert!((20..=32).contains(&w), "{what}: zone 0 back at {w}");
    assert_blocks(&a.v, 0..20, 0, &what).await;
    assert_blocks(&a.v, 20..w, 1, &what).await;
    check_fillers(&a.v, &what).await;
    commands
}

#[test]
fn every_cut_point_of_a_relocating_collection_keeps_the_log() {
    block_on_paused(async {
        let seed = 11;
        let total = cut_at(seed, None).await;
        assert!(total > 10, "member 0 saw only {total} commands");
        for cut in 1..=total {
            cut_at(seed, Some(cut)).await;
        }
    });
}

/// The array of `torn_and_full` after the relocating write and a flush, its power then cut:
/// member 0's log holds the relocated unit (data a flush made durable) and the records.
async fn relocated_and_cut(seed: u64) -> (Vec<Arc<EmuDevice>>, Vec<Arc<Faulty>>) {
    let a = torn_and_full(seed).await;
    write_blocks(&a.v, 20..32, 1, false).await;
    if let Err(e) = a.v.flush().await {
        panic!("flush: {e}");
    }
    let Array { emus, faulty, v } = a;
    drop(v);
    power_loss(&emus, seed);
    (emus, faulty)
}

/// Opens the array with member 0 failing from its `cut`-th command of the open on as a
/// power cut would (never with None), then cuts the power; returns member 0's commands.
async fn open_cut(emus: &[Arc<EmuDevice>], faulty: &[Arc<Faulty>], cut: Option<u64>) -> u64 {
    for f in faulty {
        f.clear_errors();
        f.restore_power();
    }
    let start = faulty[0].counters().commands;
    if let Some(n) = cut {
        common::cut_power_at(&faulty[0], n);
    }
    let opened = RaiznVolume::open(members(faulty)).await;
    if cut.is_none() {
        if let Err(e) = &opened {
            panic!("open without a cut: {e}");
        }
    }
    drop(opened);
    let commands = faulty[0].counters().commands - start;
    for f in faulty {
        f.cut_power();
    }
    power_loss(emus, commands);
    commands
}

/// Blocks member 0's metadata zone `zone` holds.
async fn zone_blocks(emu: &EmuDevice, zone: u32) -> u64 {
    let start = emu.geometry().zone_start(zone);
    match emu.report_zones(start, ReportFilter::All, false, 1).await {
        Ok(r) => r.zones[0].wp - start,
        Err(e) => panic!("report: {e}"),
    }
}

/// Whether member 0's swap zone holds more than the zone it was collected for (the general
/// zone or the log, by its first record's type): a collection cut after that zone's reset,
/// the swap zone's image the only whole one.
async fn swap_ahead(emu: &EmuDevice) -> bool {
    let swap = zone_blocks(emu, SWAP_ZONE).await;
    if swap == 0 {
        return false;
    }
    let mut b = vec![0u8; BS];
    if let Err(e) = emu
        .read(emu.geometry().zone_start(SWAP_ZONE), &mut b, None)
        .await
    {
        panic!("read swap: {e}");
    }
    let home = match meta::decode_record(&b) {
        Ok((h, _)) if matches!(h.kind, RecordType::PartialParity | RecordType::Relocated) => {
            PARTIAL_PARITY_ZONE
        }
        _ => GENERAL_ZONE,
    };
    zone_blocks(emu, home).await < swap
}

/// After every cut: a clean open brings zone 0 back with its old blocks and the relocated
/// write, and the filler zones whole.
async fn check_after_cuts(faulty: &[Arc<Faulty>], what: &str) {
    for f in faulty {
        f.clear_errors();
        f.restore_power();
    }
    let v = match RaiznVolume::open(members(faulty)).await {
        Ok(v) => v,
        Err(e) => panic!("{what}: open: {e}"),
    };
    assert_eq!(wp(&v, 0).await, 32, "{what}: zone 0");
    assert_blocks(&v, 0..20, 0, what).await;
    assert_blocks(&v, 20..32, 1, what).await;
    check_fillers(&v, what).await;
}

/// An open collects every log and general zone through the swap zone. A cut after the home
/// zone's reset leaves the swap zone holding the only complete image (member 0's: the
/// relocated unit, or its general checkpoint); the next open must not reset the swap zone
/// before the image is home again. Every cut point of that open is tried after every cut
/// point of the first open that leaves member 0's swap zone ahead of its home zone.
#[test]
fn an_open_cut_after_a_collection_cut_keeps_the_swap_zone_image() {
    block_on_paused(async {
        let seed = 5;
        let (emus, faulty) = relocated_and_cut(seed).await;
        let total = open_cut(&emus, &faulty, None).await;
        assert!(total > 20, "member 0 saw only {total} commands at open");
        let mut left_in_swap = 0;
        for n in 1..=total {
            let (emus, faulty) = relocated_and_cut(seed).await;
            open_cut(&emus, &faulty, Some(n)).await;
            if !swap_ahead(&emus[0]).await {
                check_after_cuts(&faulty, &format!("cut {n}")).await;
                continue;
            }
            left_in_swap += 1;
            let second = open_cut(&emus, &faulty, None).await;
            check_after_cuts(&faulty, &format!("cut {n}, then none")).await;
            for k in 1..=second {
                let (emus, faulty) = relocated_and_cut(seed).await;
                open_cut(&emus, &faulty, Some(n)).await;
                open_cut(&emus, &faulty, Some(k)).await;
                check_after_cuts(&faulty, &format!("cut {n}, then {k}")).await;
            }
        }
        assert!(
            left_in_swap >= 4,
            "only {left_in_swap} cuts left the swap zone written"
        );
    });
}
