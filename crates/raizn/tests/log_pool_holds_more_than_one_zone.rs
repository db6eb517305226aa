//! A pool of K log zones per member (docs/DESIGN.md, "A pool of log zones per member"): live
//! content beyond one log zone (a relocated unit, a stale range and the records of many
//! incomplete stripes) is kept whole, with nothing refused or dropped, through rotations
//! and collections of the pool; a power cut at any member command of them loses nothing
//! acknowledged. Members: 3, 48-block zones, 8-block stripe units, so member 0 holds the
//! parity (and the log records) of stripe 2 of every zone.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use raizn::meta::{self, RecordHeader, RecordType};
use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::{ReportFilter, ZonedDevice};

use common::{assert_blocks, block_on_paused, blocks, write_blocks, Faulty, BS};

/// Data zones of the array.
const ZONES: u32 = 12;
/// Zones written to 40 blocks, stripe 2 one block at a time (eight records on member 0,
/// the last live): eight live 9-block records, 72 blocks, more than one 48-block zone.
const FILLERS: std::ops::Range<u64> = 1..9;

struct Array {
    emus: Vec<Arc<EmuDevice>>,
    faulty: Vec<Arc<Faulty>>,
    v: RaiznVolume,
}

fn members(faulty: &[Arc<Faulty>]) -> Vec<Member> {
    faulty.iter().map(|f| f.clone() as Member).collect()
}

async fn format(seed: u64, log_zones: u32) -> Array {
    let zones = 2 + log_zones + ZONES;
    let g = common::unlimited_member_geometry(BS, common::OOB, zones, 48);
    let emus = common::emu_members(&g, 3, seed);
    let faulty = common::faulty_members(&emus, seed * 5);
    let cfg = RaiznConfig {
        log_zones,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([0x50; 16])
    };
    let v = match RaiznVolume::format(members(&faulty), cfg, false).await {
        Ok(v) => v,
        Err(e) => panic!("seed {seed}: format: {e}"),
    };
    assert_eq!(v.layout().log_zones(), log_zones);
    Array { emus, faulty, v }
}

async fn reopen(a: Array, seed: u64, what: &str) -> Array {
    let Array { emus, faulty, v } = a;
    drop(v);
    for (i, e) in emus.iter().enumerate() {
        if let Err(err) = e.power_loss(seed + i as u64) {
            panic!("power loss: {err}");
        }
    }
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

/// Zone 0 holds blocks 0..20 and a torn stripe (member 0's unit of logical 24..32 written
/// by a write the cut lost elsewhere), so a write of 20..32 relocates member 0's unit into
/// its log. Returns the array reopened after the tear.
async fn torn(seed: u64, log_zones: u32) -> Array {
    let a = format(seed, log_zones).await;
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
    a
}

/// The writes after the tear, FUA, in order: the relocating write, then every filler zone
/// to 32 blocks in units and its stripe 2 a block at a time.
fn writes() -> Vec<(std::ops::Range<u64>, u64)> {
    let zs = 1u64 << 40;
    let mut out = vec![(20..32, 1)];
    for z in FILLERS {
        for s in 0..4 {
            out.push((z * zs + s * 8..z * zs + s * 8 + 8, 0));
        }
        for b in 32..40 {
            out.push((z * zs + b..z * zs + b + 1, 0));
        }
    }
    out
}

/// `writes()` with the array's zone size; stops at the first that fails. Returns how many
/// completed.
async fn write_all(v: &RaiznVolume) -> usize {
    let zs = v.geometry().zone_size;
    for (k, (r, salt)) in writes().into_iter().enumerate() {
        let (z, off) = (r.start >> 40, r.start & ((1 << 40) - 1));
        let lbas = z * zs + off..z * zs + off + (r.end - r.start);
        let (d, m) = blocks(lbas.clone(), salt);
        if v.write(lbas.start, &d, Some(&m), true).await.is_err() {
            return k;
        }
    }
    writes().len()
}

/// Every write of the first `done` of `writes()` reads back.
async fn check(v: &RaiznVolume, done: usize, what: &str) {
    let zs = v.geometry().zone_size;
    assert_blocks(v, 0..20, 0, what).await;
    for (r, salt) in writes().into_iter().take(done) {
        let (z, off) = (r.start >> 40, r.start & ((1 << 40) - 1));
        let lbas = z * zs + off..z * zs + off + (r.end - r.start);
        assert!(
            wp(v, z).await >= off + (r.end - r.start),
            "{what}: zone {z} short of {lbas:?}"
        );
        assert_blocks(v, lbas, salt, what).await;
    }
}

async fn live_beyond_one_zone(seed: u64, log_zones: u32) -> raizn::volume::PpStats {
    let a = torn(seed, log_zones).await;
    let done = write_all(&a.v).await;
    assert_eq!(done, writes().len(), "seed {seed}: a write failed");
    let stats = a.v.pp_stats();
    assert!(a.v.reloc_stats().blocks >= 8, "{:?}", a.v.reloc_stats());
    check(&a.v, done, "before the cut").await;
    let a = reopen(a, seed * 3, "after the writes").await;
    check(&a.v, done, "after the cut").await;
    assert_eq!(wp(&a.v, 0).await, 32);
    stats
}

#[test]
fn a_pool_keeps_live_content_beyond_one_zone() {
    block_on_paused(async {
        for seed in 1..3 {
            let stats = live_beyond_one_zone(seed, 3).await;
            assert_eq!(stats.unprotected, 0, "seed {seed}: {stats:?}");
            assert!(stats.collections >= 2, "seed {seed}: {stats:?}");
        }
        // One log zone cannot hold it, so the array does not take it: its active limit
        // keeps the live records within the zone (docs/DESIGN.md, "The one-zone log's
        // active limit"). Zone 0 and two fillers are written; the third filler's first
        // write is refused (Too Many Active Zones), and no record was dropped.
        let a = torn(1, 1).await;
        assert_eq!(a.v.geometry().max_active, 3);
        let done = write_all(&a.v).await;
        assert_eq!(done, 1 + 2 * 12, "one log zone");
        let (d, m) = blocks(
            3 * a.v.geometry().zone_size..3 * a.v.geometry().zone_size + 1,
            0,
        );
        let refused =
            a.v.write(3 * a.v.geometry().zone_size, &d, Some(&m), true)
                .await;
        assert_eq!(refused, Err(zns::NvmeStatus::TooManyActiveZones));
        assert_eq!(a.v.pp_stats().unprotected, 0, "{:?}", a.v.pp_stats());
        assert!(a.v.reloc_stats().blocks >= 8, "{:?}", a.v.reloc_stats());
        check(&a.v, done, "one log zone").await;
    });
}

/// Power cut at member 0's `cut`-th command from the first write after the tear on, then
/// reopen: every write acknowledged before the cut reads back. Returns member 0's commands.
async fn cut_at(seed: u64, cut: Option<u64>) -> u64 {
    let a = torn(seed, 3).await;
    let start = a.faulty[0].counters().commands;
    if let Some(n) = cut {
        common::cut_power_at(&a.faulty[0], n);
    }
    let done = write_all(&a.v).await;
    if cut.is_none() {
        assert_eq!(
            done,
            writes().len(),
            "seed {seed}: a write failed without a cut"
        );
        let stats = a.v.pp_stats();
        assert!(stats.collections >= 2, "seed {seed}: {stats:?}");
        assert_eq!(stats.unprotected, 0, "seed {seed}: {stats:?}");
    }
    let commands = a.faulty[0].counters().commands - start;
    for f in &a.faulty {
        f.cut_power();
    }
    let what = format!("seed {seed} cut {cut:?} after {done} writes");
    let a = reopen(a, seed * 7 + cut.unwrap_or(0), &what).await;
    check(&a.v, done, &what).await;
    // The pool still takes records after the reopen.
    let zs = a.v.geometry().zone_size;
    let z = 10;
    write_blocks(&a.v, z * zs..z * zs + 20, 5, true).await;
    assert_blocks(&a.v, z * zs..z * zs + 20, 5, &what).await;
    commands
}

#[test]
fn every_cut_point_of_rotations_and_collections_keeps_what_was_acknowledged() {
    block_on_paused(async {
        let seed = 5;
        let total = cut_at(seed, None).await;
        assert!(total > 100, "member 0 saw only {total} commands");
        for cut in 1..=total {
            cut_at(seed, Some(cut)).await;
        }
    });
}

/// Every whole record in `member`'s pool of log zones: (header, inline payload, bulk data,
/// bulk metadata, member LBA of the header).
async fn pool_records(
    a: &Array,
    member: usize,
) -> Vec<(RecordHeader, Vec<u8>, Vec<u8>, Vec<u8>, u64)> {
    let l = *a.v.layout();
    let mg = l.member_geometry();
    let e = &a.emus[member];
    let mut out = Vec::new();
    for p in 0..l.log_zones() {
        let start = mg.zone_start(l.log_zone(p));
        let wp = match e.report_zones(start, ReportFilter::All, false, 1).await {
            Ok(r) => r.zones[0].wp - start,
            Err(err) => panic!("report log zone {p}: {err}"),
        };
        let mut at = 0;
        while at < wp {
            let mut b = vec![0u8; BS];
            if let Err(err) = e.read(start + at, &mut b, None).await {
                panic!("read log zone {p}: {err}");
            }
            let Ok((h, inline)) = meta::decode_record(&b) else {
                break;
            };
            let n = u64::from(h.bulk_blocks);
            let mut d = vec![0u8; n as usize * BS];
            let mut m = vec![0u8; n as usize * common::OOB];
            if n > 0 {
                if let Err(err) = e.read(start + at + 1, &mut d, Some(&mut m)).await {
                    panic!("read log zone {p} bulk: {err}");
                }
            }
            out.push((h, inline.to_vec(), d, m, start + at));
            at += 1 + n;
        }
    }
    out
}

/// A record below the fence never counts again, not even as a degraded open's fallback.
/// Zone 0 holds 5 blocks (all in stripe 0's first data unit) and an open has written its
/// fence; then a partial-parity record of that stripe covering 7 blocks, numbered below the
/// fence (as a record written before that open and superseded by its rewrite is), is put
/// in the parity member's pool. A degraded open without the member of those blocks takes
/// the newest end its surviving data agrees with: 7 from that record, had it counted (the
/// zone came back at 7 over blocks never written); 5 with the fence.
#[test]
fn a_record_below_the_fence_never_counts() {
    block_on_paused(async {
        let seed = 9;
        let a = format(seed, 2).await;
        write_blocks(&a.v, 0..5, 3, true).await;
        let a = reopen(a, seed, "after the writes").await;
        assert_eq!(wp(&a.v, 0).await, 5);
        let l = *a.v.layout();
        let (pm, dm) = (l.parity_member(0), l.data_member(0, 0));
        let recs = pool_records(&a, pm).await;
        let fence = recs
            .iter()
            .filter(|(h, ..)| h.kind == RecordType::LogFence)
            .map(
                |(h, inline, ..)| match meta::LogFence::decode(inline, h.sequence) {
                    Ok(f) => f.fence,
                    Err(e) => panic!("fence record: {e}"),
                },
            )
            .max()
            .unwrap_or_else(|| panic!("no fence in member {pm}'s pool: {recs:?}"));
        let (h, ..) = recs
            .iter()
            .find(|(h, ..)| h.kind == RecordType::PartialParity && h.start_lba == 0)
            .unwrap_or_else(|| panic!("no record of zone 0 stripe 0: {recs:?}"))
            .clone();
        assert!(fence >= 2, "fence {fence}");
        let head = recs
            .iter()
            .map(|r| r.4 + 1 + u64::from(r.0.bulk_blocks))
            .max();
        let Array { emus, faulty, v } = a;
        drop(v);
        // The superseded record: 7 blocks of parity from the zone's generation.
        let (d, m) = blocks(100..107, 9);
        let old = RecordHeader {
            end_lba: 7,
            sequence: fence - 1,
            bulk_blocks: 7,
            bulk_crc: meta::bulk_crc(&d, &m),
            ..h
        };
        let hb = match meta::encode_record(&old, &[], BS) {
            Ok(b) => b,
            Err(e) => panic!("encode: {e}"),
        };
        let mut data = hb;
        data.extend_from_slice(&d);
        let mut md = vec![0u8; common::OOB];
        md.extend_from_slice(&m);
        let at = head.unwrap_or_else(|| panic!("empty pool"));
        if let Err(e) = emus[pm].write(at, &data, Some(&md), false).await {
            panic!("put the old record: {e}");
        }
        if let Err(e) = emus[pm].flush().await {
            panic!("flush: {e}");
        }
        let members: Vec<Option<Member>> = faulty
            .iter()
            .enumerate()
            .map(|(i, f)| (i != dm).then(|| f.clone() as Member))
            .collect();
        let v = match RaiznVolume::open_degraded(members).await {
            Ok(v) => v,
            Err(e) => panic!("degraded open without member {dm}: {e}"),
        };
        let a = Array { emus, faulty, v };
        assert_eq!(wp(&a.v, 0).await, 5, "zone 0 without member {dm}");
        assert_blocks(&a.v, 0..5, 3, "degraded").await;
    });
}
