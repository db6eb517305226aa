//! Virtual-time benchmarks repeat to the last digit: the same seed gives identical JSON rows.
//! A run on a shared, noisy machine must not change a single figure.

use bench::paper;

fn rows_json(name: &str, seed: u64) -> String {
    let o = bench::Options {
        bytes_per_point: 16 << 20,
        seed,
        profile: None,
        host_copy_ns: None,
    };
    match paper::run(name, &o) {
        Ok(rows) => serde_json::to_string(&rows).unwrap_or_default(),
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn the_same_seed_gives_identical_rows() {
    let a = rows_json("zapraid-fig1", 7);
    assert!(a.contains("\"diff_pct\""), "{a}");
    assert_eq!(a, rows_json("zapraid-fig1", 7));
}

#[test]
fn every_figure_set_runs_and_gives_finite_figures() {
    // zns-fig1 needs a larger array; zns_fig1_shape.rs runs it. The ZNS+ Fig. 7, Fig. 8 and
    // varmail sets fill a 2 GiB device per point (the paper's 32 MiB zones); their shape
    // tests run the same code on a small device. raizn-fua's bulk writers fill three zones of
    // five zn540 members (1,077 MiB each) at any size: 26 s of a debug build and 3.7 GiB of
    // memory (docs/BENCHMARKS.md), too much beside the other tests.
    let big = [
        "zns-fig1",
        "raizn-fua",
        "znsplus-fig7",
        "znsplus-fig8",
        "znsplus-varmail",
    ];
    for (name, _) in bench::PAPERS.iter().filter(|p| !big.contains(&p.0)) {
        let o = bench::Options {
            bytes_per_point: 8 << 20,
            seed: 1,
            profile: None,
            host_copy_ns: None,
        };
        let rows = paper::run(name, &o).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!rows.is_empty(), "{name}");
        for r in rows {
            assert!(r.measured.is_finite() && r.measured > 0.0, "{r:?}");
            assert!(r.figure.starts_with(name), "{r:?}");
        }
    }
    assert!(paper::run(
        "no-such-paper",
        &bench::Options {
            bytes_per_point: 1 << 20,
            seed: 0,
            profile: None,
            host_copy_ns: None,
        }
    )
    .is_err());
}
