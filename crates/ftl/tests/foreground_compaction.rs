//! Foreground compaction (`FtlVolume::compaction_due`, `compact_and_wait`), the path a caller
//! imitating F2FS's stop of its writes uses: once collection is due, the wait ends only when
//! collection has freed what it wanted, a checkpoint follows, and nothing is written when
//! none was due. A failure while waiting (collection's copies failing for good) or of the
//! checkpoint (its flush failing) returns the volume's failure instead of hanging. With
//! serial collection (`MountOptions::serial_collection`, F2FS's one victim at a time) every
//! round takes one victim and ends with its own checkpoint, and the same failures are
//! returned.

mod common;

use std::sync::Arc;

use common::{block, device, fresh, geometry, runtime, small_opts, version_of};
use ftl::{FormatOptions, FtlVolume, MountOptions};
use zns::{BlockDevice, ErrorPlan, FaultyZoned, NvmeStatus, OpKind, OpSet, SimRng, ZonedDevice};

/// Over-provisioning of the volumes here: 58%, where a full volume of the small geometry
/// keeps up to 5 zones free, so `small_opts`' watermarks (collection from 5, floor 3) are
/// reachable and leave a throttled band of 2 zones. At 30% (2 zones at most) a mount refuses
/// them, and lowering the background watermark to 4 instead (no band) takes the other path
/// to the volume's failure, which
/// `collection_against_a_device_refusing_every_write_fails_the_volume` covers. With the
/// band, user writes wait for collection's copies, so when the failures begin collection's
/// zone is open and its copies fail the volume.
const OP_PERMILLE: u32 = 580;

#[test]
fn a_foreground_compaction_waits_until_collection_is_no_longer_due_then_checkpoints() {
    runtime().block_on(async {
        let dev = device(geometry(), 3);
        let vol = fresh(&dev, OP_PERMILLE, small_opts()).await;
        let n = vol.size_blocks();
        let bs = vol.block_size() as usize;
        assert!(!vol.compaction_due(), "a fresh volume needs no compaction");
        let before = vol.stats().checkpoints;
        assert!(!vol.compact_and_wait().await.expect("nothing due"));
        assert_eq!(
            vol.stats().checkpoints,
            before,
            "nothing due, nothing written"
        );
        let mut latest = vec![0u64; n as usize];
        let mut rng = SimRng::new(3);
        let mut stops = 0;
        for version in 1..=(6 * n) {
            if vol.compaction_due() {
                let before = vol.stats().checkpoints;
                assert!(vol.compact_and_wait().await.expect("compaction"));
                assert!(
                    !vol.compaction_due(),
                    "the wait ended with collection still due"
                );
                assert!(vol.stats().checkpoints > before, "no checkpoint after it");
                stops += 1;
            }
            let lba = rng.below(n);
            vol.write(lba, &block(bs, version), false)
                .await
                .expect("write");
            latest[lba as usize] = version;
        }
        assert!(stops > 3, "only {stops} foreground compactions");
        let mut buf = vec![0u8; bs];
        for (lba, &v) in latest.iter().enumerate() {
            vol.read(lba as u64, &mut buf).await.expect("read");
            assert_eq!(version_of(&buf), Some(v), "block {lba}");
        }
        vol.unmount().await.expect("unmount");
    });
}

fn serial_opts() -> MountOptions {
    MountOptions {
        serial_collection: true,
        ..small_opts()
    }
}

#[test]
fn serial_collection_takes_one_victim_at_a_time_each_ended_by_a_checkpoint() {
    runtime().block_on(async {
        let dev = device(geometry(), 4);
        let vol = fresh(&dev, OP_PERMILLE, serial_opts()).await;
        let n = vol.size_blocks();
        let bs = vol.block_size() as usize;
        let mut latest = vec![0u64; n as usize];
        let mut rng = SimRng::new(4);
        let mut stops = 0;
        for version in 1..=(6 * n) {
            if vol.compaction_due() {
                let before = vol.stats();
                assert!(vol.compact_and_wait().await.expect("compaction"));
                let after = vol.stats();
                assert!(!vol.compaction_due(), "the wait ended with collection due");
                let victims = after.counters.serial_victims - before.counters.serial_victims;
                assert!(victims >= 1, "a stop collected no victim");
                assert!(
                    after.checkpoints - before.checkpoints >= victims,
                    "{victims} victims but {} checkpoints",
                    after.checkpoints - before.checkpoints
                );
                stops += 1;
            }
            let lba = rng.below(n);
            vol.write(lba, &block(bs, version), false)
                .await
                .expect("write");
            latest[lba as usize] = version;
        }
        assert!(stops > 3, "only {stops} foreground compactions");
        let c = vol.stats().counters;
        assert!(c.serial_victims >= stops, "{c:?}");
        // Every round was one victim, never overlapping another's finish.
        assert_eq!(c.gc_zones, c.serial_victims, "{c:?}");
        assert_eq!(c.gc_rounds, c.serial_victims, "{c:?}");
        assert_eq!(c.gc_rounds_overlapped, 0, "{c:?}");
        assert!(c.serial_copy_ns > 0 && c.serial_checkpoint_ns > 0, "{c:?}");
        let mut buf = vec![0u8; bs];
        for (lba, &v) in latest.iter().enumerate() {
            vol.read(lba as u64, &mut buf).await.expect("read");
            assert_eq!(version_of(&buf), Some(v), "block {lba}");
        }
        vol.unmount().await.expect("unmount");
    });
}

/// Writes at random until a compaction is due, then installs `plan` and waits for it.
async fn wait_under(plan: ErrorPlan, opts: MountOptions) -> String {
    wait_under_at(plan, opts, OP_PERMILLE).await
}

/// `wait_under` on a volume of `op_permille` over-provisioning.
async fn wait_under_at(plan: ErrorPlan, opts: MountOptions, op_permille: u32) -> String {
    let emu = device(geometry(), 5);
    let faulty = Arc::new(FaultyZoned::new(emu, 5));
    let dev: Arc<dyn ZonedDevice> = faulty.clone();
    ftl::format(dev.as_ref(), FormatOptions::with_op(op_permille), 5, false)
        .await
        .expect("format");
    let (vol, _) = FtlVolume::mount(dev, opts).await.expect("mount");
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut rng = SimRng::new(5);
    let mut version = 0;
    while !vol.compaction_due() {
        version += 1;
        assert!(version < 20 * n, "no compaction ever due");
        vol.write(rng.below(n), &block(bs, version), false)
            .await
            .expect("write");
    }
    faulty.set_errors(plan).expect("plan");
    let e = vol
        .compact_and_wait()
        .await
        .expect_err("a compaction that cannot succeed succeeded");
    vol.crash().await;
    e.to_string()
}

#[test]
fn a_failure_while_waiting_or_of_the_checkpoint_is_returned() {
    for opts in [small_opts(), serial_opts()] {
        failures_are_returned(opts);
    }
}

fn failures_are_returned(opts: MountOptions) {
    runtime().block_on(async {
        // Every copy and write fails for good: collection gives up and fails the volume,
        // which wakes the waiter.
        let e = wait_under(
            ErrorPlan {
                ops: OpSet::of(&[OpKind::Write, OpKind::Copy, OpKind::Append]),
                probability: 1.0,
                status: NvmeStatus::InternalError,
                ..ErrorPlan::default()
            },
            opts,
        )
        .await;
        assert!(e.to_lowercase().contains("internal"), "{e}");
        // Every flush fails: the round's flush or the checkpoint's fails (with serial
        // collection, the victim's checkpoint, which comes before its reset).
        let e = wait_under(
            ErrorPlan {
                ops: OpSet::of(&[OpKind::Flush]),
                probability: 1.0,
                status: NvmeStatus::DataTransferError,
                ..ErrorPlan::default()
            },
            opts,
        )
        .await;
        assert!(e.to_lowercase().contains("transfer"), "{e}");
    });
}

/// Guards against collection cycling for good against a device that refuses every write:
/// at 30% with the background watermark at 4 over a floor of 3 (no throttled band), user
/// writes reach the floor before collection has opened a zone, so each round's first act,
/// its destination's header, is refused and seals that zone, the round ends early, and the
/// next one resets the sealed zone as an empty victim and opens another. Before
/// `REFUSED_ROUNDS_MAX` that never ended and the waiter hung; now the volume fails after a
/// few refused rounds (the empty rounds between them do not count as progress), with the
/// device's status in its error. The timeout bounds the test
/// instead of letting a regression hang it.
#[test]
fn collection_against_a_device_refusing_every_write_fails_the_volume() {
    runtime().block_on(async {
        let opts = MountOptions {
            gc_background_free_zones: 4,
            ..small_opts()
        };
        let plan = ErrorPlan {
            ops: OpSet::of(&[OpKind::Write, OpKind::Copy, OpKind::Append]),
            probability: 1.0,
            status: NvmeStatus::InternalError,
            ..ErrorPlan::default()
        };
        let e = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            wait_under_at(plan, opts, 300),
        )
        .await
        .expect("collection kept cycling against a device that refuses every write");
        assert!(e.to_lowercase().contains("internal"), "{e}");
        assert!(e.contains("rounds without one moving its copies"), "{e}");
    });
}
