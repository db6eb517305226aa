//! `bench paper raizn-seq` on a small size: the array's sequential write and read figures
//! (one and two parity units per stripe) come out finite and repeat exactly from the seed
//! (virtual time).

#[test]
fn raizn_seq_rows_are_finite_and_repeat() {
    let o = bench::Options {
        bytes_per_point: 64 << 20,
        seed: 3,
        profile: None,
        host_copy_ns: None,
    };
    let a = bench::paper::run("raizn-seq", &o).expect("raizn-seq");
    assert_eq!(a.len(), 4);
    for r in &a {
        println!("{r:?}");
        assert!(r.measured.is_finite() && r.measured > 0.0, "{r:?}");
    }
    assert_eq!(bench::paper::run("raizn-seq", &o).expect("again"), a);
}
