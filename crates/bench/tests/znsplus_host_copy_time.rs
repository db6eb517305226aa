//! Guards the host time of a host-level copy in the ZNS+ reproductions
//! (`znsplus_fig6::HOST_COPY_NS_PER_BLOCK`, `ftl::MountOptions::host_copy_ns_per_block`), in
//! virtual time: Fig. 6's host copy takes exactly its per-block time more for each valid
//! block it moves, while in-storage compaction takes exactly as long; and in Fig. 8's
//! workload the ZNS setup slows down with it while the IZC setup, whose copies never pass
//! through the host, runs the same to the last digit.

use bench::znsplus_fig6::{measure_host, Method};
use bench::znsplus_fig8::{measure_workload_host, Setup, Shape, Workload};

const NS: u32 = 5_000;

#[test]
fn fig6_host_copy_pays_per_valid_block_and_izc_pays_nothing() {
    let m = |method, ns| measure_host(method, 0.5, 3, ns).unwrap_or_else(|e| panic!("{e}"));
    let (zns0, zns1) = (m(Method::HostCopy, 0), m(Method::HostCopy, NS));
    let extra_ms = zns1.time_ms - zns0.time_ms;
    let want_ms = zns1.valid_blocks as f64 * f64::from(NS) / 1e6;
    assert!(
        (extra_ms - want_ms).abs() < 1e-6,
        "host copy {extra_ms} ms longer, want {want_ms} ({zns0:?} vs {zns1:?})"
    );
    // The time falls in the host copy's first phase (reading to the host and the host's
    // time); writing back and the flush take what they took.
    assert!((zns1.phases_ms[0] - zns0.phases_ms[0] - want_ms).abs() < 1e-6);
    for method in [Method::IzcCopybackAware, Method::IzcSourceOrder] {
        assert_eq!(m(method, 0), m(method, NS), "{method:?}");
    }
}

#[test]
fn fig8_only_the_host_copy_setup_slows_down() {
    let shape = Shape {
        zones: 24,
        zone_blocks: 1024,
        op_permille: 250,
    };
    let m = |s, ns| {
        measure_workload_host(
            ("femu-mlc", s),
            Workload::Fileserver,
            80,
            8 << 20,
            shape,
            5,
            ns,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let (zns0, zns1) = (m(Setup::Zns, 0), m(Setup::Zns, NS));
    assert!(
        zns1.mib_per_sec < zns0.mib_per_sec * 0.98,
        "ZNS did not slow down: {} -> {} MiB/s",
        zns0.mib_per_sec,
        zns1.mib_per_sec
    );
    let (izc0, izc1) = (
        m(Setup::IzcCopybackAware, 0),
        m(Setup::IzcCopybackAware, NS),
    );
    assert_eq!(izc0, izc1, "IZC paid host time");
}
