//! A partial-parity log collection keeps the record of a stripe that a write completed while
//! the collection's flush ran. The collection flushes every member, then keeps the records
//! of the stripes at or past each zone's write pointer. It read the write pointers after the
//! flush, so a write that completed a stripe meanwhile (its units and parity not covered by
//! the flush) got the stripe's record dropped: after a power cut, with a member of that
//! stripe's data failed, the durable prefix could be rebuilt neither from the parity (not
//! durable) nor from the record (gone), and the zone came back below it (crash schedule
//! 8762 under the `dirty` flush rule).

mod common;

use raizn::RaiznVolume;
use zns::ZonedDevice;

use common::assert_blocks;

async fn write(v: &RaiznVolume, lba: u64, n: u64, salt: u64, fua: bool) {
    common::write_blocks(v, lba..lba + n, salt, fua).await
}

/// Zone 2 written to 28 blocks (into its second stripe, whose record member 1 holds with 3
/// members) and flushed, zone 1 to 16; `fill` one-block writes into zone 1's second stripe
/// (their records fill member 1's log); then at once a write of zone 2's blocks 28..36
/// (completing the second stripe) and, `after` ms later, one-block writes to zone 1 (their
/// records collect member 1's log). Then power is cut on every member, and the array is
/// opened without the member of zone 2's second-stripe data unit `lost_unit`: zone 2's 28
/// flushed blocks read back. Returns whether a collection ran while the writes were in
/// flight.
async fn run(fill: u64, after: u64, seed: u64, lost_unit: u64) -> bool {
    let what = format!("fill {fill}, after {after} ms, seed {seed}, unit {lost_unit} lost");
    let (emus, faulty, v) = common::delayed_small_array(seed, 15).await;
    // The flush rule under which the schedule failed: only members holding something not
    // durable are flushed.
    v.set_flush_every_member(false);
    let z2 = v.geometry().zone_start(2);
    write(&v, z2, 28, 2, false).await;
    if let Err(e) = v.flush().await {
        panic!("{what}: flush: {e}");
    }
    let collected = common::collect_while(&v, fill, after, write(&v, z2 + 28, 8, 3, false)).await;
    let lost = v.layout().place(2, 16 + lost_unit * 8).member;
    drop(v);
    for (i, e) in emus.iter().enumerate() {
        if let Err(err) = e.power_loss(seed * 7 + i as u64) {
            panic!("{what}: power loss: {err}");
        }
    }
    for f in &faulty {
        f.restore_power();
    }
    let v = common::reopen(&emus, Some(lost), &what).await;
    assert_blocks(
        &v,
        z2..z2 + 28,
        2,
        &format!("{what}: member {lost} left out"),
    )
    .await;
    collected
}

#[test]
fn collection_keeps_the_record_of_a_stripe_completed_during_its_flush() {
    let mut collected = 0;
    for fill in 0..12 {
        for after in 0..4 {
            for seed in 0..3 {
                for lost_unit in 0..2 {
                    collected +=
                        u64::from(common::block_on_paused(run(fill, after, seed, lost_unit)));
                }
            }
        }
    }
    assert!(
        collected >= 5,
        "collections among the writes in flight: {collected}"
    );
}
