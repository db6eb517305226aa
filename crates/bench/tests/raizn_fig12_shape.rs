//! RAIZN Fig. 12's measurement on two full zones of 32 MiB members (`bench paper raizn-fig12`
//! at its default size): the rebuild completes, writes the replaced member's share of the
//! valid data, and keeps up with the replacement's sequential write bandwidth (>= 90%), in
//! virtual time, repeatably. Before the survivors' reads overlapped the new member's
//! writes, and before a zone's record overlapped the next zone's rebuild, it ran at 81%.

use bench::raizn_fig12::{member_geometry, rebuild, write_baseline};

const CAPACITY_BYTES: u64 = 32 << 20;

#[test]
fn rebuild_keeps_up_with_the_replacement_write_bandwidth() {
    let g = member_geometry(CAPACITY_BYTES).expect("geometry");
    let run = || {
        let rt = emu::SimRuntime::new().expect("runtime");
        let r = rt.block_on(rebuild(g, 2, 7)).expect("rebuild");
        let rt = emu::SimRuntime::new().expect("runtime");
        let b = rt
            .block_on(write_baseline(g, r.bytes, 7))
            .expect("baseline");
        (r, b)
    };
    let (r, b) = run();
    // Two full logical zones: one member zone each on the replacement.
    assert_eq!(r.bytes, 2 * g.zone_capacity * u64::from(g.block_size));
    let ratio = r.mib_per_sec() / b.mib_per_sec();
    println!(
        "rebuild {:.1} MiB/s, replacement write {:.1} MiB/s, ratio {ratio:.3}",
        r.mib_per_sec(),
        b.mib_per_sec()
    );
    assert!(ratio >= 0.9, "rebuild at {ratio:.3} of the write bandwidth");
    assert_eq!(run(), (r, b), "virtual time repeats exactly");
}
