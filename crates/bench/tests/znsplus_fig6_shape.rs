//! ZNS+ Fig. 6's shape on the femu-mlc profile: one segment compaction by in-storage zone
//! compaction takes less time than the host-level copy, copyback-aware destinations make
//! most copies copybacks (in source order almost none are) and so take less time again; the
//! time splits into the paper's phases.

use bench::znsplus_fig6::{measure, Method};

#[test]
fn izc_beats_the_host_copy_and_copyback_aware_placement_beats_source_order() {
    let seed = 3;
    let m = |method| measure(method, 0.5, seed).unwrap_or_else(|e| panic!("{e}"));
    let (zns, aware, plain) = (
        m(Method::HostCopy),
        m(Method::IzcCopybackAware),
        m(Method::IzcSourceOrder),
    );
    assert_eq!(zns.valid_blocks, aware.valid_blocks);
    let ratio = aware.time_ms / zns.time_ms;
    assert!(
        (0.3..0.9).contains(&ratio),
        "IZC / ZNS = {ratio} ({aware:?} vs {zns:?})"
    );
    assert!(
        aware.time_ms < plain.time_ms,
        "copyback-aware {aware:?}, source order {plain:?}"
    );
    assert!(aware.copyback_ratio > 0.7, "{aware:?}");
    assert!(plain.copyback_ratio < 0.2, "{plain:?}");
    assert_eq!(zns.copyback_ratio, 0.0);
    // The Fig. 6 split: the host copy reads, writes and flushes; IZC has no read phase,
    // and the phases add up to the whole.
    for c in [zns, aware] {
        let sum: f64 = c.phases_ms.iter().sum();
        assert!((sum - c.time_ms).abs() < 1e-6, "{c:?}");
    }
    assert!(zns.phases_ms.iter().all(|&p| p > 0.0), "{zns:?}");
    assert_eq!(aware.phases_ms[0], 0.0, "{aware:?}");
    assert!(aware.phases_ms[1] > 0.0, "{aware:?}");
}
