//! ZNS+ Fig. 8's foreground-compaction rows (the paper's configuration: F2FS stops its
//! writes until a segment compaction and its checkpoint are done, threaded logging reclaims
//! without the stop) on a small device, on the `znand` profile, the one medium on which
//! these rows show the paper's direction at this size (docs/BENCHMARKS.md "ZNS+ Fig. 8": on
//! femu-mlc and femu-tlc the chips stay 97% busy through the stops under IZC, and ZNS+-fg
//! runs 0.98-1.06x IZC-fg). At 90%: IZC-fg well ahead of ZNS-fg; ZNS+-fg ahead of IZC-fg,
//! stopping less often, with the chips busier.

use bench::znsplus_fig8::{measure_workload, Setup, Shape, Workload};

#[test]
fn threaded_logging_outruns_foreground_compaction_on_fast_flash() {
    let shape = Shape {
        zones: 24,
        zone_blocks: 8192,
        op_permille: 250,
    };
    let m = |s| {
        measure_workload(("znand", s), Workload::Fileserver, 90, 32 << 20, shape, 5)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let (zns, izc, plus) = (m(Setup::ZnsFg), m(Setup::IzcFg), m(Setup::ZnsPlusFg));
    println!("{zns:?}\n{izc:?}\n{plus:?}");
    assert!(
        izc.mib_per_sec > zns.mib_per_sec * 1.5,
        "IZC-fg {izc:?} vs ZNS-fg {zns:?}"
    );
    let ratio = plus.mib_per_sec / izc.mib_per_sec;
    assert!(ratio > 1.08, "ZNS+-fg / IZC-fg {ratio}");
    assert!(izc.fg_stops_per_gib > 0.0, "IZC-fg never stopped: {izc:?}");
    assert!(
        plus.plugged_per_user > 0.5,
        "little threaded logging: {plus:?}"
    );
    assert!(
        plus.fg_stops_per_gib < izc.fg_stops_per_gib,
        "ZNS+-fg stopped as often as IZC-fg"
    );
    assert!(
        plus.chip_utilisation > izc.chip_utilisation,
        "chips no busier under ZNS+-fg: {} vs {}",
        plus.chip_utilisation,
        izc.chip_utilisation
    );
}
