//! ZNS+ Fig. 8's shape on a small femu-mlc device: with the same host FTL, garbage
//! collection by zone_compaction gives more throughput than by host read + write at a high
//! utilisation, the copyback-aware placement makes most compacted blocks copybacks, and the
//! write amplification stays about the same (the same blocks move, only the path differs).

use bench::znsplus_fig8::{measure, Setup, Shape};

#[test]
fn izc_outruns_the_host_copy_and_copyback_aware_placement_uses_copyback() {
    let shape = Shape {
        zones: 32,
        zone_blocks: 256,
        op_permille: 250,
    };
    let m = |s| measure(s, 90, 24 << 20, shape, 5).unwrap_or_else(|e| panic!("{e}"));
    let (zns, cub, cab) = (
        m(Setup::Zns),
        m(Setup::IzcSourceOrder),
        m(Setup::IzcCopybackAware),
    );
    println!("{zns:?}\n{cub:?}\n{cab:?}");
    assert!(zns.waf > 1.5, "little collection at 90%: {zns:?}");
    assert!(
        cab.mib_per_sec > zns.mib_per_sec * 1.1,
        "IZC {cab:?} vs ZNS {zns:?}"
    );
    assert!(cab.copyback_ratio > 0.8, "{cab:?}");
    assert!(cub.copyback_ratio < cab.copyback_ratio - 0.3, "{cub:?}");
    assert_eq!(zns.copyback_ratio, 0.0);
    let waf = cab.waf / zns.waf;
    assert!((0.8..1.25).contains(&waf), "WAF ratio {waf}");
}
