//! ZNS+ Fig. 8's shape on a small femu-mlc device: with the same host FTL, garbage
//! collection by zone_compaction gives more throughput than by host read + write at a high
//! utilisation, the copyback-aware placement makes most compacted blocks copybacks, and the
//! write amplification stays about the same (the same blocks move, only the path differs);
//! with threaded logging on as well (ZNS+) throughput rises again, and PPA-ordered plugging
//! copies part of the plugged chunks in idle chip time where LBA-ordered plugging copies none.

use bench::znsplus_fig8::{measure, Setup, Shape};

#[test]
fn izc_outruns_the_host_copy_and_copyback_aware_placement_uses_copyback() {
    let shape = Shape {
        zones: 32,
        zone_blocks: 256,
        op_permille: 250,
    };
    let m = |s| measure(s, 90, 24 << 20, shape, 5).unwrap_or_else(|e| panic!("{e}"));
    let (zns, cub, cab, plus) = (
        m(Setup::Zns),
        m(Setup::IzcSourceOrder),
        m(Setup::IzcCopybackAware),
        m(Setup::ZnsPlus),
    );
    println!("{zns:?}\n{cub:?}\n{cab:?}\n{plus:?}");
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
    // Threaded logging writes into holes the device plugs around, instead of copying
    // every victim: more throughput than IZC. It writes a little more flash than IZC (each
    // turn fixes its zones' bitmaps when it chooses them, so a zone taken later plugs
    // blocks invalidated while it waited); before turns shared their checkpoint it wrote
    // less but ran barely faster. With the collector's rounds overlapping, threaded logging
    // is chosen more often on this small device (1.66 plugged blocks per user block against
    // 1.04): WAF 1.14x IZC's for 1.23x its throughput (measured 2026-11-24).
    assert!(plus.plugged_per_user > 0.1, "no threaded logging: {plus:?}");
    assert!(
        plus.mib_per_sec > cab.mib_per_sec * 1.1,
        "ZNS+ {plus:?} vs IZC {cab:?}"
    );
    assert!(plus.waf < cab.waf * 1.2, "ZNS+ {plus:?} vs IZC {cab:?}");
    // PPA-ordered plugging copies some chunks ahead in idle chip time; LBA-ordered none.
    let lp = m(Setup::ZnsPlusLp);
    println!("{lp:?}");
    assert!(plus.plugged_idle_share > 0.05, "{plus:?}");
    assert_eq!(lp.plugged_idle_share, 0.0, "{lp:?}");
    assert!(lp.plugged_per_user > 0.1, "{lp:?}");
}
