//! ZNS+ Fig. 7's block-level rows: turning the device's copyback off slows copyback-aware
//! IZC on a small femu-mlc device with the paper's 32 MiB zones (its compacted chunks go
//! through the controller instead) and ZNS+ then plugs nothing by copyback nor ahead; and
//! the rows of a set of points are the ten the figure prints, finite, three with a paper
//! value.

use bench::znsplus_fig7::{rows_of, SETUPS, UTILISATION};
use bench::znsplus_fig8::{measure_workload, Setup, Shape, Workload};

#[test]
fn copyback_off_is_slower_and_every_row_is_finite() {
    let shape = Shape {
        zones: 24,
        zone_blocks: 8192,
        op_permille: 250,
    };
    // The measured phase spans two zones of user data. A phase shorter than one zone (it was
    // 16 MiB, half a zone) can fall within the fresh blocks of one open zone, where nothing
    // is collected, re-opened nor plugged: with a Copy that senses each source unit once,
    // seed 5's 16 MiB phase of "ZNS+ w/o copyback" did (WAF 1.30, no block plugged) while
    // its 48 and 96 MiB phases, and seeds 6 and 7 at 16 MiB, plugged 1.5-4.4 blocks per
    // user block: where the phase fell, not a change in threaded logging.
    let m = |s| {
        measure_workload(
            ("femu-mlc", s),
            Workload::Fileserver,
            UTILISATION,
            64 << 20,
            shape,
            5,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let (izc, izc0, plus0) = (
        m(Setup::IzcCopybackAware),
        m(Setup::IzcNoCopyback),
        m(Setup::ZnsPlusNoCopyback),
    );
    println!("{izc:?}\n{izc0:?}\n{plus0:?}");
    assert!(izc.copyback_ratio > 0.8, "{izc:?}");
    assert_eq!(izc0.copyback_ratio, 0.0, "{izc0:?}");
    // The same blocks move (the FTL does not know), only the device's path differs.
    assert_eq!(izc.waf, izc0.waf);
    assert!(izc.mib_per_sec > izc0.mib_per_sec, "{izc:?} vs {izc0:?}");
    assert_eq!(plus0.copyback_ratio, 0.0, "{plus0:?}");
    assert!(plus0.plugged_per_user > 0.0 && plus0.plugged_idle_share == 0.0);
    // The rows, from these points standing in for every setup and both workloads.
    let points: Vec<_> = [Workload::Fileserver, Workload::VarmailLike]
        .into_iter()
        .flat_map(|w| SETUPS.map(|setup| (w, bench::znsplus_fig8::Point { setup, ..izc })))
        .collect();
    let rows = rows_of(&points);
    assert_eq!(rows.len(), 10, "{rows:?}");
    for r in &rows {
        assert!(r.figure.starts_with("znsplus-fig7"), "{r:?}");
        assert!(r.measured.is_finite() && r.measured > 0.0, "{r:?}");
    }
    // The paper's values: the fileserver's two throughput ratios and varmail's metadata.
    assert_eq!(rows.iter().filter(|r| r.paper.is_finite()).count(), 3);
}

/// Fig. 7(b)'s direction: under ZNS+ the FTL writes no more metadata per user block than under
/// IZC (the paper: 48% less node and metadata traffic). Threaded logging used to write a full
/// checkpoint per turn, which made ZNS+ write several times IZC's metadata; a turn now writes
/// one record block (docs/DESIGN.md, "ZNS+").
#[test]
fn threaded_logging_writes_no_more_metadata_than_compaction() {
    // Fig. 8's device (64 zones of 32 MiB): on the 24-zone one above a quarter of the zones is
    // written between two periodic checkpoints, and turns on them write a checkpoint.
    let shape = bench::znsplus_fig8::SHAPE;
    let m = |s| {
        measure_workload(
            ("femu-mlc", s),
            Workload::Fileserver,
            UTILISATION,
            256 << 20,
            shape,
            5,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let (izc, plus) = (m(Setup::IzcCopybackAware), m(Setup::ZnsPlus));
    println!("IZC {izc:?}\nZNS+ {plus:?}");
    assert!(
        plus.plugged_per_user > 0.0,
        "threaded logging ran: {plus:?}"
    );
    assert!(
        plus.meta_per_user <= izc.meta_per_user * 1.05,
        "ZNS+ {} against IZC {} metadata blocks per user block",
        plus.meta_per_user,
        izc.meta_per_user
    );
}
