//! A zone whose member zones are all Full is not always Full. A torn stripe can fill the
//! surviving member zones: the member of the last stripe's second data unit kept units of a
//! write the cut took from the others, up to its zone's capacity (recovery declares them
//! stale), the member of the first data unit was already Full, and the member holding the
//! stripe's parity then fails. On the survivors this looks exactly like a zone a Finish
//! sealed after such a tear; a degraded open took it as Full, so the zone grew past what was
//! written and blocks the cut never kept read as data (crash schedule 4741). Open now takes
//! all-Full member zones as a Full zone only when they hold every data block or the zone
//! was finished in its current generation, which the general zones record (the Finish's
//! zone-log record, and once a checkpoint dropped that, a finished-zones record).
//!
//! Arrays written by format version 1, which had no finished-zones record, still open as
//! that version did, and are written as version 2 from then on; a newer version is refused
//! by name.

mod common;

use std::sync::Arc;

use emu::EmuDevice;
use raizn::meta::{self, RecordType};
use raizn::{Member, RaiznVolume};
use zns::{ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use common::{assert_blocks, block, reopen, small_array, BS};

/// Logical blocks written when the tear comes: five whole stripes of 16 and 5 blocks of the
/// last (its first data unit partly).
const TORN_AT: u64 = 85;
/// Logical blocks written in the end: the last stripe's first data unit whole.
const WRITTEN: u64 = 88;
/// The blocks' salt.
const SALT: u64 = 3;

async fn zone0(v: &RaiznVolume) -> (ZoneState, u64) {
    match v.report_zones(0, ReportFilter::All, false, 1).await {
        Ok(r) => (r.zones[0].state, r.zones[0].wp),
        Err(e) => panic!("report: {e}"),
    }
}

/// The last stripe's parity member and the member of its second data unit.
struct Torn {
    emus: Vec<Arc<EmuDevice>>,
    parity: usize,
    second: usize,
}

/// Zone 0 written to `TORN_AT` and flushed, then torn: the member of the last stripe's
/// second data unit keeps its unit of a later write, which fills its zone; reopened (the
/// tear found and declared stale), the zone is Closed at `TORN_AT`; then written to
/// `WRITTEN` (the first data unit's member zone full too) and flushed.
async fn torn_zone(seed: u64) -> (Torn, RaiznVolume) {
    let (emus, v) = small_array(seed, 17).await;
    let l = *v.layout();
    let (su, sdb) = (l.su_blocks(), l.stripe_data_blocks());
    let s = WRITTEN / sdb;
    assert_eq!(s + 1, l.stripes_per_zone(), "the last stripe");
    for at in (0..TORN_AT).step_by(10) {
        let n = 10.min(TORN_AT - at);
        common::write_blocks(&v, at..at + n, SALT, false).await;
    }
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    drop(v);
    let parity = l.parity_member(s);
    let first = l.place(0, s * sdb).member;
    let second = l.place(0, WRITTEN).member;
    assert_ne!(first, second, "two data units in the last stripe");
    let cap = l.member_geometry().zone_capacity;
    let (mut d, mut m) = (Vec::new(), Vec::new());
    for b in s * su..cap {
        let (bd, bm) = block(7000 + b, 8);
        d.extend(bd);
        m.extend(bm);
    }
    let lba = l.member_zone_start(0) + s * su;
    if let Err(e) = emus[second].write(lba, &d, Some(&m), true).await {
        panic!("torn units: {e}");
    }
    let v = reopen(&emus, None, "after the tear").await;
    assert_eq!(
        zone0(&v).await,
        (ZoneState::Closed, TORN_AT),
        "seed {seed}: after the tear"
    );
    common::write_blocks(&v, TORN_AT..WRITTEN, SALT, false).await;
    if let Err(e) = v.flush().await {
        panic!("flush: {e}");
    }
    (
        Torn {
            emus,
            parity,
            second,
        },
        v,
    )
}

/// Every block of zone 0 from `WRITTEN` to the capacity reads as zeros.
async fn assert_zeros_after(v: &RaiznVolume, cap: u64, what: &str) {
    for lba in WRITTEN..cap {
        let mut d = vec![1u8; BS];
        if let Err(e) = v.read(lba, &mut d, None).await {
            panic!("{what}: read {lba}: {e}");
        }
        assert!(
            d.iter().all(|b| *b == 0),
            "{what}: block {lba} is not zeros"
        );
    }
}

#[test]
fn degraded_open_does_not_count_a_zone_filled_by_a_tear_as_full() {
    for seed in 0..4 {
        common::block_on_paused(async {
            let (t, v) = torn_zone(seed).await;
            assert_eq!(zone0(&v).await.1, WRITTEN, "seed {seed}: written");
            drop(v);
            // The parity member of the last stripe gone: both survivors' zones are Full.
            let what = format!("seed {seed}: without member {}", t.parity);
            let v = reopen(&t.emus, Some(t.parity), &what).await;
            assert_eq!(zone0(&v).await, (ZoneState::Closed, WRITTEN), "{what}");
            assert_blocks(&v, 0..WRITTEN, SALT, &what).await;
            // The zone takes writes at its write pointer (relocated on the torn member).
            common::write_blocks(&v, WRITTEN..WRITTEN + 3, SALT, true).await;
            assert_blocks(&v, 0..WRITTEN + 3, SALT, &what).await;
        });
    }
}

#[test]
fn a_finished_torn_zone_stays_full_across_checkpoints_and_failures() {
    for seed in 0..4 {
        for lose_parity in [true, false] {
            common::block_on_paused(finished_torn_zone(seed, lose_parity));
        }
    }
}

/// A torn zone 0 (`torn_zone`) finished and the array closed; the zone's capacity.
async fn torn_zone_finished(seed: u64) -> (Torn, u64) {
    let (t, v) = torn_zone(seed).await;
    assert_eq!(v.layout().log_zones(), 1);
    let cap = v.geometry().zone_capacity;
    if let Err(e) = v.zone_mgmt(ZoneAction::Finish, 0, false).await {
        panic!("seed {seed}: finish: {e}");
    }
    (t, cap)
}

async fn finished_torn_zone(seed: u64, lose_parity: bool) {
    let (t, cap) = torn_zone_finished(seed).await;
    // Each open checkpoints the general zones, which drops the Finish's zone-log record:
    // the second open knows the zone finished only from the checkpoint.
    for k in 0..2 {
        let v = reopen(&t.emus, None, "after the finish").await;
        assert_eq!(
            zone0(&v).await,
            (ZoneState::Full, cap),
            "seed {seed}: open {k} after the finish"
        );
    }
    let lost = if lose_parity { t.parity } else { t.second };
    let what = format!("seed {seed}: finished, without member {lost}");
    let v = reopen(&t.emus, Some(lost), &what).await;
    assert_eq!(zone0(&v).await, (ZoneState::Full, cap), "{what}");
    assert_blocks(&v, 0..WRITTEN, SALT, &what).await;
    assert_zeros_after(&v, cap, &what).await;
}

/// `b` (a header block) as format version `version` wrote it: the version field and the
/// header CRC changed, nothing else.
fn as_version(b: &[u8], version: u16) -> Vec<u8> {
    let mut b = b.to_vec();
    b[8..10].copy_from_slice(&version.to_le_bytes());
    let inline = u32::from_le_bytes([b[12], b[13], b[14], b[15]]) as usize;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[..60]), &b[64..64 + inline]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Every record of `dev`'s general zone (zone 0), as header blocks.
async fn general_records(dev: &EmuDevice) -> Vec<Vec<u8>> {
    let r = match dev.report_zones(0, ReportFilter::All, false, 1).await {
        Ok(r) => r,
        Err(e) => panic!("report: {e}"),
    };
    let mut out = Vec::new();
    for lba in 0..r.zones[0].wp {
        let mut b = vec![0u8; BS];
        if let Err(e) = dev.read(lba, &mut b, None).await {
            panic!("read general zone: {e}");
        }
        if meta::decode_record(&b).is_ok() {
            out.push(b);
        }
    }
    out
}

/// Rewrites `dev`'s general zone with `blocks`.
async fn rewrite_general(dev: &EmuDevice, blocks: &[Vec<u8>]) {
    if let Err(e) = dev.zone_mgmt(ZoneAction::Reset, 0, false).await {
        panic!("reset general zone: {e}");
    }
    let md = vec![0u8; common::OOB];
    for (k, b) in blocks.iter().enumerate() {
        if let Err(e) = dev.write(k as u64, b, Some(&md), true).await {
            panic!("rewrite general zone: {e}");
        }
    }
}

#[test]
fn a_version_1_array_opens_as_before_and_is_written_as_version_2() {
    common::block_on_paused(async {
        let (t, cap) = torn_zone_finished(9).await;
        drop(reopen(&t.emus, None, "after the finish").await);
        // What version 1 left: the same records (without the finished-zones one, which it
        // did not have) stamped version 1.
        for e in &t.emus {
            let old: Vec<Vec<u8>> = general_records(e)
                .await
                .iter()
                .filter(|b| {
                    meta::decode_record(b).map(|(h, _)| h.kind) != Ok(RecordType::FinishedZones)
                })
                .map(|b| as_version(b, 1))
                .collect();
            rewrite_general(e, &old).await;
        }
        let v = reopen(&t.emus, None, "version 1").await;
        assert_eq!(zone0(&v).await, (ZoneState::Full, cap), "version 1");
        assert_blocks(&v, 0..WRITTEN, SALT, "version 1").await;
        drop(v);
        // That open wrote version 2, naming the zone finished.
        for (i, e) in t.emus.iter().enumerate() {
            let recs = general_records(e).await;
            assert!(
                recs.iter()
                    .all(|b| meta::record_version(b) == meta::VERSION),
                "member {i}: a record of another version after the open"
            );
            let finished = recs.iter().any(|b| match meta::decode_record(b) {
                Ok((h, p)) if h.kind == RecordType::FinishedZones => {
                    meta::FinishedZones::decode(p, 5)
                        .is_ok_and(|f| f.zones.iter().any(|(z, _)| *z == 0))
                }
                _ => false,
            });
            assert!(finished, "member {i}: no record of zone 0 finished");
        }
        let what = format!("upgraded, without member {}", t.parity);
        let v = reopen(&t.emus, Some(t.parity), &what).await;
        assert_eq!(zone0(&v).await, (ZoneState::Full, cap), "{what}");
        assert_blocks(&v, 0..WRITTEN, SALT, &what).await;
        drop(v);
        // A record of a version newer than this build's: refused, saying so.
        let e = &t.emus[0];
        let mut recs = general_records(e).await;
        recs[0] = as_version(&recs[0], meta::VERSION + 1);
        rewrite_general(e, &recs).await;
        let members: Vec<Option<Member>> =
            t.emus.iter().map(|e| Some(e.clone() as Member)).collect();
        match RaiznVolume::open_degraded(members).await {
            Ok(_) => panic!(
                "an array with a version {} record opened",
                meta::VERSION + 1
            ),
            Err(e) => assert!(
                e.to_string().contains("newer than this build"),
                "refused for another reason: {e}"
            ),
        }
    });
}

/// Format version 3 lets the superblock's metadata-zone count (bytes 32..36) be `2 + K`; a
/// version 2 array (every record stamped 2, the count 3) opens as K = 1 and reads back, and
/// a version 2 superblock naming another count is refused as corrupt.
#[test]
fn a_version_2_array_opens_with_one_log_zone() {
    common::block_on_paused(async {
        let (t, cap) = torn_zone_finished(11).await;
        drop(reopen(&t.emus, None, "after the finish").await);
        for e in &t.emus {
            let old: Vec<Vec<u8>> = general_records(e)
                .await
                .iter()
                .map(|b| as_version(b, 2))
                .collect();
            rewrite_general(e, &old).await;
        }
        let v = reopen(&t.emus, None, "version 2").await;
        assert_eq!(v.layout().log_zones(), 1, "version 2");
        assert_eq!(v.layout().meta_zones(), 3, "version 2");
        assert_eq!(zone0(&v).await, (ZoneState::Full, cap), "version 2");
        assert_blocks(&v, 0..WRITTEN, SALT, "version 2").await;
        drop(v);
        for (i, e) in t.emus.iter().enumerate() {
            let recs = general_records(e).await;
            assert!(
                recs.iter()
                    .all(|b| meta::record_version(b) == meta::VERSION),
                "member {i}: a record of another version after the open"
            );
        }
        // The superblock of a version 2 member naming 4 metadata zones.
        let recs = general_records(&t.emus[0]).await;
        let sb = recs
            .iter()
            .find(|b| meta::decode_record(b).map(|(h, _)| h.kind) == Ok(RecordType::Superblock));
        let Some(sb) = sb else {
            panic!("no superblock on member 0");
        };
        let mut four = sb.clone();
        four[64 + 32..64 + 36].copy_from_slice(&4u32.to_le_bytes());
        let v3 = as_version(&four, meta::VERSION);
        assert!(
            raizn::Superblock::decode(&v3).is_ok_and(|s| s.meta_zones == 4),
            "a version 3 superblock with 4 metadata zones decodes"
        );
        match raizn::Superblock::decode(&as_version(&four, 2)) {
            Err(meta::MetaError::Corrupt(why)) => {
                assert!(why.contains("4 metadata zones"), "refused for: {why}")
            }
            r => panic!("a version 2 superblock with 4 metadata zones: {r:?}"),
        }
    });
}
