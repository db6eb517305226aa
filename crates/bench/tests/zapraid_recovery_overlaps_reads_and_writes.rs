//! ZapRAID's full-drive recovery keeps the replacement busy: on timed zn540 members in
//! virtual time it writes the rebuilt blocks at most of the drive's sequential write
//! bandwidth (1,052 MiB/s in the profile; 781 MiB/s measured on these 4 MiB zones, whose
//! per-segment header, flush and Finish weigh more than at full size, where it is 996
//! MiB/s). Regression: the recovery read each group from
//! the survivors and only then wrote it, one group at a time, so reads and writes never
//! overlapped and the replacement was written at about half that rate (533 MiB/s in
//! `bench paper zapraid-exp3`).

use bench::zapraid_exp3::recovery;

/// A small array: zones of 4 MiB (the smallest `zapraid_exp3` makes), all of it written.
const BYTES: u64 = 128 << 20;
/// The profile's sequential write bandwidth (docs/BENCHMARKS.md, timing profile).
const WRITE_MIB_PER_SEC: f64 = 1052.0;

#[test]
fn recovery_writes_the_replacement_at_most_of_its_write_bandwidth() {
    let rt = emu::SimRuntime::new().expect("runtime");
    let r = rt.block_on(recovery(BYTES, 4, 3)).expect("recovery");
    let mib = (r.blocks_rebuilt * 4096) as f64 / f64::from(1 << 20);
    let rate = mib / r.secs;
    println!("{r:?}: {mib:.1} MiB onto the replacement at {rate:.0} MiB/s");
    assert!(r.blocks_rebuilt > 0, "nothing was rebuilt");
    assert!(
        rate >= 0.65 * WRITE_MIB_PER_SEC,
        "the replacement was written at {rate:.0} MiB/s, below 65% of {WRITE_MIB_PER_SEC} MiB/s"
    );
}
