//! A partial-parity log collected while a write is in flight keeps its record. A write ending
//! inside a stripe appends its record, then (FUA) flushes every member, and only then moves
//! the zone's write pointer (an append also waits for the appends before it to commit); a
//! write to another zone whose record finds the same member's log full collects it
//! meanwhile. The collection kept only records of the stripe the write pointer was in, so it
//! dropped the record of a write into the next stripe: the write was acknowledged
//! unprotected, and with the member of its data failed it could not be read back (crash
//! schedules 7168, 10674).

mod common;

use raizn::RaiznVolume;
use zns::ZonedDevice;

use common::assert_blocks;

async fn write(v: &RaiznVolume, lba: u64, n: u64, salt: u64, fua: bool) {
    common::write_blocks(v, lba..lba + n, salt, fua).await
}

/// Zone 2 written to 12 blocks, then (`common::collect_while`) zone 1 to 16 and `fill`
/// one-block writes into its second stripe; then at once a FUA write of zone 2's blocks 12..20
/// (into its second stripe: its record, then a flush, then the write pointer moves) and,
/// `after` ms later, one-block writes to zone 1. Returns whether a collection ran while they
/// were in flight.
async fn run(fill: u64, after: u64, seed: u64) -> bool {
    let (_emus, _faulty, v) = common::delayed_small_array(seed, 14).await;
    let z2 = v.geometry().zone_start(2);
    write(&v, z2, 12, 2, false).await;
    let collected = common::collect_while(&v, fill, after, write(&v, z2 + 12, 8, 2, true)).await;
    // The FUA write is durable and protected: with the member of its second stripe's data
    // failed, it reads back from that stripe's record.
    let lost = v.layout().place(2, 16).member;
    if let Err(e) = v.fail_member(lost).await {
        panic!("fail member {lost}: {e}");
    }
    assert_blocks(
        &v,
        z2..z2 + 20,
        2,
        &format!("fill {fill}, after {after} ms, seed {seed}, member {lost} failed"),
    )
    .await;
    collected
}

#[test]
fn collection_keeps_the_record_of_a_write_in_flight() {
    let mut collected = 0;
    for fill in 0..12 {
        for after in 0..4 {
            for seed in 0..3 {
                collected += u64::from(common::block_on_paused(run(fill, after, seed)));
            }
        }
    }
    assert!(
        collected >= 5,
        "collections among the writes in flight: {collected}"
    );
}
