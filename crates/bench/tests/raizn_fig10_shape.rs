//! RAIZN Fig. 10's shape at a small size (`bench paper raizn-fig10 --size 256M`, scaled
//! drives of 128 MiB of raw flash): during the full overwrite the mdraid-like RAID-5 of
//! conventional SSDs loses much of its first-phase throughput to device garbage collection
//! and recovers by the end, while RAIZN stays flat; in virtual time, so the figures repeat.

use bench::raizn_fig10::run;
use bench::Options;

#[test]
fn raizn_stays_flat_while_mdraid_collapses_under_device_gc() {
    let o = Options {
        bytes_per_point: 256 << 20,
        seed: 1,
        profile: None,
        host_copy_ns: None,
    };
    let f = match run(&o) {
        Ok(f) => f,
        Err(e) => panic!("raizn-fig10: {e}"),
    };
    for r in &f.rows {
        println!("{} | paper {} | measured {}", r.figure, r.paper, r.measured);
    }
    let measured = |i: usize| f.rows.get(i).map_or(f64::NAN, |r| r.measured);
    // mdraid's lowest window of the overwrite against its first phase (%).
    assert!(
        measured(0) < 70.0,
        "mdraid did not collapse: {}",
        measured(0)
    );
    // RAIZN's lowest window of the overwrite against its mean there (%).
    assert!(measured(1) > 90.0, "RAIZN is not flat: {}", measured(1));
    // RAIZN over mdraid where mdraid is lowest (x).
    assert!(
        measured(2) > 1.3,
        "RAIZN not ahead at mdraid's low: {}",
        measured(2)
    );
    // mdraid back near its first phase once 90% is overwritten (%).
    assert!(
        measured(3) > 85.0,
        "mdraid did not recover: {}",
        measured(3)
    );
    // Both arrays were written twice over (the last window may be cut short and left out).
    for run in [&f.raizn, &f.mdraid] {
        let last = run.series.bytes.last().copied().unwrap_or(0);
        let window = run.series.bytes.first().copied().unwrap_or(0);
        assert!(
            last + window >= 2 * run.capacity_bytes && last <= 2 * run.capacity_bytes,
            "{last} bytes recorded of twice {}",
            run.capacity_bytes
        );
    }
}
