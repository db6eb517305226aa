//! One log zone per member holds the live partial-parity records of so many active zones
//! and no more, so the array's active limit is lowered to what it protects (docs/DESIGN.md,
//! "The one-zone log's active limit"): 48-block members allowing 4 active data zones and
//! 8-block stripe units give 3. The limit is derived, not persisted: an array holding more
//! active zones than that (as one formatted before could) opens with the lower limit, its
//! active zones stay writable, and a zone is opened again once enough are finished.

mod common;

use raizn::RaiznVolume;
use zns::{NvmeStatus, ZoneAction, ZonedDevice};

use common::{assert_blocks, block_on_paused, blocks, small_array, write_blocks, OOB};

async fn write_one(v: &RaiznVolume, lba: u64) -> Result<(), NvmeStatus> {
    let (d, m) = blocks(lba..lba + 1, 5);
    v.write(lba, &d, Some(&m), false).await
}

#[test]
fn the_active_limit_is_what_one_log_zone_protects_and_older_arrays_open_with_it() {
    block_on_paused(async {
        let (emus, v) = small_array(3, 0x41).await;
        let l = *v.layout();
        let g = v.geometry();
        let zs = g.zone_size;
        assert_eq!(l.members_active_limit(), 4);
        assert_eq!((g.max_open, g.max_active), (3, 3));
        for z in 0..3 {
            write_blocks(&v, z * zs..z * zs + 4, 0, true).await;
        }
        assert_eq!(
            write_one(&v, 3 * zs).await,
            Err(NvmeStatus::TooManyActiveZones)
        );
        drop(v);
        // Zone 3's first stripe written on the members directly (its parity is repaired at
        // the open): four active zones, one more than the limit.
        let z3 = 3 * zs;
        for k in 0..2u64 {
            let p = l.place(3, k * 8);
            let (d, m) = blocks(z3 + k * 8..z3 + k * 8 + 8, 0);
            assert_eq!(m.len(), 8 * OOB);
            if let Err(e) = emus[p.member].write(p.lba, &d, Some(&m), true).await {
                panic!("member write: {e}");
            }
        }
        let v = match RaiznVolume::open(common::as_members(&emus)).await {
            Ok(v) => v,
            Err(e) => panic!("open with four active zones: {e}"),
        };
        assert_eq!(v.geometry().max_active, 3);
        for z in 0..3 {
            assert_blocks(&v, z * zs..z * zs + 4, 0, "zone written before").await;
        }
        assert_blocks(&v, z3..z3 + 16, 0, "zone 3").await;
        // The active zones take writes; a fifth zone is refused until two are finished.
        write_blocks(&v, z3 + 16..z3 + 20, 0, true).await;
        write_blocks(&v, 4..6, 0, false).await;
        assert_eq!(
            write_one(&v, 4 * zs).await,
            Err(NvmeStatus::TooManyActiveZones)
        );
        for z in 0..2 {
            if let Err(e) = v.zone_mgmt(ZoneAction::Finish, z * zs, false).await {
                panic!("finish zone {z}: {e}");
            }
            let want = match z {
                0 => Err(NvmeStatus::TooManyActiveZones),
                _ => Ok(()),
            };
            assert_eq!(
                write_one(&v, 4 * zs).await,
                want,
                "after finishing zone {z}"
            );
        }
        assert_blocks(&v, z3..z3 + 20, 0, "zone 3 written on").await;
        assert_eq!(v.pp_stats().unprotected, 0);
    });
}
