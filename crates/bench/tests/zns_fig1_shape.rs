//! ZNS paper Fig. 1's shape: identical flash behind a block interface runs as fast as the
//! ZNS drive until its garbage collector starts, then collapses, less with more
//! over-provisioning; the ZNS drive never collapses.

use bench::zns_fig1::series;

#[test]
fn block_drives_collapse_when_collection_starts_and_zns_does_not() {
    let o = bench::Options {
        bytes_per_point: 512 << 20,
        seed: 5,
        profile: None,
        host_copy_ns: None,
    };
    let [zns, op7, op28] = series(&o).unwrap_or_else(|e| panic!("{e}"));
    let early = |s: &bench::series::Series| s.mib_per_sec[1..6].iter().sum::<f64>() / 5.0;
    let (z0, z1) = (early(&zns), zns.mean_after(0.75));
    assert!(z1 > 0.97 * z0, "the ZNS drive slowed down: {z0} -> {z1}");
    for s in [&op7, &op28] {
        assert!(
            early(s) > 0.95 * z0,
            "a block drive was slow before collecting: {s:?}"
        );
        assert!(s.mean_after(0.75) < 0.75 * early(s), "no collapse: {s:?}");
    }
    let (s7, s28) = (op7.mean_after(0.75), op28.mean_after(0.75));
    assert!(
        s7 < s28 && s28 < z1,
        "steady states out of order: {s7} {s28} {z1}"
    );
}
