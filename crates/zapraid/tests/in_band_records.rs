//! In-band block records (docs/DESIGN.md, "In-band records"): on members without per-block
//! metadata (or with `RecordPlace::InBand`) each group's last stripe is its summary, and
//! everything the per-block records served must still work: restarts after power loss
//! (flushed writes read back, the open segment's records found in its summaries), degraded
//! reads, recovery onto a replacement, and the refusal of out-of-band records on members
//! with too little metadata.

mod common;

use std::sync::Arc;

use common::{
    as_zoned, block, check, emu_members, emu_members_with, emu_members_without_metadata, geometry,
    opts, runtime, write_some,
};
use zapraid::{FormatOptions, GroupMode, LayoutError, RecordPlace, ZapRaidError, ZapRaidVolume};
use zns::{BlockDevice, Geometry, SimRng, ZonedDevice};

const ZONES: u32 = 12;

#[test]
fn members_without_metadata_get_in_band_records_and_out_of_band_is_refused() {
    runtime().block_on(async {
        let emus = emu_members_without_metadata(4, ZONES, 1);
        let refused = ZapRaidVolume::format(
            as_zoned(&emus),
            &FormatOptions {
                records: RecordPlace::OutOfBand,
                ..FormatOptions::new(3, 1)
            },
        )
        .await;
        assert!(
            matches!(
                refused,
                Err(ZapRaidError::Layout(LayoutError::MetadataTooSmall(0)))
            ),
            "{:?}",
            refused.err()
        );
        let vol = ZapRaidVolume::format(as_zoned(&emus), &FormatOptions::new(3, 1))
            .await
            .expect("format chooses in-band records");
        let l = vol.layout();
        assert!(l.in_band);
        assert_eq!(
            l.group, 15,
            "the in-band default group: a quarter of 62 stripes"
        );
        let mut model = vec![0u64; (vol.size_blocks() / 2) as usize];
        let mut version = 0;
        write_some(&vol, &mut model, &mut version, 7, 200).await;
        check(&vol, &model, "before the restart").await;
        vol.close().await.expect("close");
        let vol = ZapRaidVolume::open(as_zoned(&emus)).await.expect("open");
        assert!(vol.layout().in_band, "the header records the choice");
        vol.verify().expect("index");
        check(&vol, &model, "after the restart").await;
    });
}

/// Forced on members that have metadata: the records are not in it (every data block's
/// metadata reads as zeros), and open takes the choice from the headers.
#[test]
fn forced_in_band_records_leave_per_block_metadata_unused() {
    runtime().block_on(async {
        let emus = emu_members(4, ZONES, 2);
        let o = FormatOptions {
            records: RecordPlace::InBand,
            mode: GroupMode::Grouped(4),
            ..FormatOptions::new(3, 1)
        };
        let vol = ZapRaidVolume::format(as_zoned(&emus), &o)
            .await
            .expect("format");
        let mut model = vec![0u64; 120];
        let mut version = 0;
        write_some(&vol, &mut model, &mut version, 3, 60).await;
        vol.close().await.expect("close");
        let g = geometry(ZONES);
        for e in &emus {
            let mut data = vec![0u8; 16 * 4096];
            let mut meta = vec![0u8; 16 * g.oob_size as usize];
            for z in 0..3u64 {
                e.read(z * g.zone_size + 1, &mut data, Some(&mut meta))
                    .await
                    .expect("read");
                assert!(
                    meta.iter().all(|b| *b == 0),
                    "zone {z} has per-block records"
                );
            }
        }
        let vol = ZapRaidVolume::open(as_zoned(&emus)).await.expect("open");
        assert!(vol.layout().in_band && vol.layout().group == 4);
        check(&vol, &model, "reopened").await;
    });
}

/// Guards against a flush that left the open group's summary unwritten: the flushed blocks
/// were on the members but nothing named them, so after a power cut the open could not find
/// them. A flush pads the group to its summary; power loss then keeps them.
#[test]
fn a_flush_writes_the_open_groups_summary_and_power_loss_keeps_what_it_flushed() {
    let mut padded = 0;
    for seed in 0..24u64 {
        runtime().block_on(async {
            let emus = emu_members_without_metadata(4, ZONES, seed);
            let mode = GroupMode::Grouped(2 + (seed % 7) as u32);
            let mut vol = ZapRaidVolume::format(as_zoned(&emus), &opts(mode))
                .await
                .expect("format");
            let bs = vol.block_size() as usize;
            let mut rng = SimRng::new(seed);
            let mut model = vec![0u64; 96];
            let mut version = 0u64;
            for round in 0..4 {
                let what = format!("seed {seed} {mode:?} round {round}");
                // Flushed writes, then some unflushed ones that may read old or new.
                let flushed = model.clone();
                write_some(
                    &vol,
                    &mut model,
                    &mut version,
                    rng.next_u64(),
                    rng.range_inclusive(1, 6) as usize,
                )
                .await;
                let durable = model.clone();
                let mut maybe = Vec::new();
                for _ in 0..rng.below(4) {
                    let lba = rng.below(90);
                    version += 1;
                    vol.write(lba, &block(bs, lba, version), false)
                        .await
                        .expect("write");
                    maybe.push((lba, version));
                }
                drop(flushed);
                padded = padded.max(vol.stats().padding_blocks);
                vol.crash();
                drop(vol);
                for e in &emus {
                    e.power_loss(rng.next_u64()).expect("power loss");
                }
                vol = ZapRaidVolume::open(as_zoned(&emus))
                    .await
                    .unwrap_or_else(|e| panic!("{what}: open: {e}"));
                vol.verify()
                    .unwrap_or_else(|e| panic!("{what}: index: {e}"));
                for (lba, v) in durable.iter().enumerate() {
                    let mut b = vec![0u8; bs];
                    vol.read(lba as u64, &mut b).await.expect("read");
                    let newer: Vec<u64> = maybe
                        .iter()
                        .filter(|(l, _)| *l == lba as u64)
                        .map(|(_, v)| *v)
                        .collect();
                    let ok = |v: u64| {
                        if v == 0 {
                            b.iter().all(|x| *x == 0)
                        } else {
                            b == block(bs, lba as u64, v)
                        }
                    };
                    let hit = std::iter::once(*v)
                        .chain(newer.iter().copied())
                        .rev()
                        .find(|v| ok(*v));
                    let Some(got) = hit else {
                        panic!("{what}: LBA {lba} lost its flushed version {v}");
                    };
                    model[lba] = got;
                }
            }
            vol.close().await.expect("close");
        });
    }
    assert!(padded > 0, "no flush padded a group");
}

/// Degraded reads find a lost block's stripe through the stripe table, and a recovery onto a
/// replacement without metadata rebuilds the member with its summaries: after it, another
/// member fails and every block still reads back (from the replacement's blocks).
/// Also guards against a recovery that rebuilt the open segment while its open group had no
/// summaries on the other members: it found no records for the group's stripes and wrote
/// holes for them on the replacement, whose blocks then read as zeros once another member
/// failed. The recovery's last step now closes the open group first.
#[test]
fn degraded_reads_and_recovery_onto_a_replacement_in_band() {
    runtime().block_on(async {
        let geo = Geometry {
            oob_size: 0,
            ..geometry(ZONES)
        };
        let emus = emu_members_with(5, geo, 4);
        let members = as_zoned(&emus[..4]);
        let vol = ZapRaidVolume::format(members.clone(), &opts(GroupMode::Grouped(8)))
            .await
            .expect("format");
        let mut model = vec![0u64; 160];
        let mut version = 0;
        write_some(&vol, &mut model, &mut version, 11, 150).await;
        vol.fail_member_durably(1).await.expect("fail member 1");
        check(&vol, &model, "degraded").await;
        write_some(&vol, &mut model, &mut version, 12, 60).await;
        check(&vol, &model, "degraded, after degraded writes").await;
        vol.close().await.expect("close");
        // The failure is recorded in-band too: the reopen comes up degraded.
        let vol = ZapRaidVolume::open(members.clone()).await.expect("open");
        assert_eq!(vol.failed_members(), vec![1]);
        check(&vol, &model, "reopened degraded").await;
        // Unflushed writes: the open group's stripes have no summary yet when the recovery
        // reaches the open segment.
        let bs = vol.block_size() as usize;
        for lba in [3u64, 50, 97] {
            version += 1;
            model[lba as usize] = version;
            vol.write(lba, &block(bs, lba, version), false)
                .await
                .expect("write");
        }
        let spare: Arc<dyn ZonedDevice> = emus[4].clone();
        // More unflushed writes while the recovery runs, so that some sit in the open group
        // when its last step rebuilds the open segment.
        let writer = async {
            let mut written = Vec::new();
            for i in 0..120u64 {
                let lba = (i * 37) % 160;
                let v = 1_000_000 + i;
                vol.write(lba, &block(bs, lba, v), false)
                    .await
                    .expect("write during the recovery");
                written.push((lba, v));
                tokio::task::yield_now().await;
            }
            written
        };
        let (r, written) = tokio::join!(vol.replace_member(1, spare.clone(), false), writer);
        r.expect("recovery onto the replacement");
        for (lba, v) in written {
            model[lba as usize] = v;
        }
        version = version.max(2_000_000);
        assert!(vol.failed_members().is_empty());
        write_some(&vol, &mut model, &mut version, 13, 40).await;
        vol.fail_member_durably(2).await.expect("fail member 2");
        check(&vol, &model, "recovered, member 2 failed").await;
        vol.close().await.expect("close");
        let mut members = members;
        members[1] = spare;
        let vol = ZapRaidVolume::open(members)
            .await
            .expect("open after recovery");
        check(&vol, &model, "reopened after recovery").await;
    });
}
