//! A fio job file describing ZapRAID Fig. 1a's first point (Zone Write, 4 KiB, QD1, one open
//! zone) measures the same bandwidth as `bench paper zapraid-fig1` does for that setup, and
//! two runs of a job file give identical results.

use bench::fio::{run, to_json, Target, Volume};
use bench::jobfile::parse;

const FIG1A: &str = "\
; ZapRAID Fig. 1a: Zone Write, 4 KiB, QD1, one zone
[global]
ioengine=io_uring
direct=1
filename=/dev/nvme0n2
zonemode=zbd
max_open_zones=1

[fig1a-write-4k]
rw=write
bs=4k
iodepth=1
size=256m
";

fn target() -> Target {
    Target {
        profile: "zn540".into(),
        size_bytes: None,
        seed: 1,
        volume: Volume::Zns,
        image: None,
    }
}

#[test]
fn fig1a_job_file_matches_the_paper_reproduction() {
    let jobs = parse(FIG1A).expect("parses");
    let results = run(&jobs, &target()).expect("runs");
    assert_eq!(results.len(), 1);
    let ours = results[0].write.mib_per_sec;
    assert_eq!(results[0].write.bytes, 256 << 20);
    assert_eq!(results[0].read.ops, 0);
    let rows = bench::paper::run(
        "zapraid-fig1",
        &bench::Options {
            bytes_per_point: 256 << 20,
            seed: 1,
            profile: None,
            host_copy_ns: None,
        },
    )
    .expect("paper figures");
    let paper = rows[0].measured;
    assert!(rows[0].figure.contains("write 4 KiB, QD1, 1 zone"));
    let diff = (ours - paper).abs() / paper;
    assert!(
        diff < 0.01,
        "job file {ours:.3} MiB/s vs paper run {paper:.3} MiB/s"
    );
}

#[test]
fn two_runs_give_identical_json() {
    let text =
        "[global]\nzonemode=zbd\nbs=8k\nsize=64m\n[w]\nrw=write\n[r]\nrw=randread\niodepth=4\noffset=2g\n";
    let jobs = parse(text).expect("parses");
    let a = to_json(&run(&jobs, &target()).expect("runs"));
    let b = to_json(&run(&jobs, &target()).expect("runs"));
    assert_eq!(a, b);
    assert!(
        a["jobs"][1]["read"]["iops"].as_f64().unwrap_or(0.0) > 0.0,
        "{a}"
    );
    assert!(a["jobs"][0]["write"]["bw"].as_u64().unwrap_or(0) > 0, "{a}");
}

#[test]
fn time_based_jobs_stop_at_their_runtime_and_rate_caps_bandwidth() {
    let text = "[global]\nzonemode=zbd\nbs=4k\ntime_based\nruntime=20ms\n\
                [free]\nrw=write\nsize=2g\n[capped]\nrw=write\noffset=2g\nrate=100m\n";
    let results = run(&parse(text).expect("parses"), &target()).expect("runs");
    let (free, capped) = (&results[0].write, &results[1].write);
    assert!(free.seconds <= 0.021 && free.seconds >= 0.019, "{free:?}");
    assert!(free.mib_per_sec > 200.0, "{free:?}");
    let diff = (capped.mib_per_sec - 100.0).abs() / 100.0;
    assert!(diff < 0.02, "{capped:?}");
}

#[test]
fn jobs_that_cannot_run_here_are_refused_clearly() {
    let e = run(&parse("[a]\nrw=write\n").expect("parses"), &target()).unwrap_err();
    assert!(e.contains("zonemode=zbd") && e.contains("'a'"), "{e}");
    let e = run(
        &parse("[m]\nzonemode=zbd\nrw=randrw\n").expect("parses"),
        &target(),
    )
    .unwrap_err();
    assert!(e.contains("randrw"), "{e}");
    // A block size below the device's used to divide by zero in the read offsets.
    for bad in ["bs=1000", "bs=2g", "iodepth=100000"] {
        let text = format!("[r]\nzonemode=zbd\nrw=randread\nsize=8m\n{bad}\n");
        let e = run(&parse(&text).expect("parses"), &target()).unwrap_err();
        assert!(e.contains(bad.split('=').next().unwrap_or("")), "{e}");
    }
    // Two concurrent jobs on the same zone used to fail with a bare "Zone Invalid Write".
    let text = "[global]\nzonemode=zbd\nsize=64m\n[w]\nrw=write\n[r]\nrw=read\n";
    let e = run(&parse(text).expect("parses"), &target()).unwrap_err();
    assert!(e.contains("'w' and 'r'") && e.contains("zone 0"), "{e}");
    let ok = format!("{text}stonewall\n");
    assert!(run(&parse(&ok).expect("parses"), &target()).is_ok());
}

#[test]
fn throughput_series_accounts_for_every_byte_and_tracks_the_rate() {
    let text = "[w]\nzonemode=zbd\nrw=write\nbs=4k\nsize=32m\n";
    let results = run(&parse(text).expect("parses"), &target()).expect("runs");
    let series = bench::fio::throughput_series(&results, 10);
    let (name, points) = &series[0];
    assert_eq!((name.as_str(), points.len()), ("w", 10));
    let width_s = points[0].0;
    let mib: f64 = points.iter().map(|(_, y)| y * width_s).sum();
    assert!((mib - 32.0).abs() < 1e-6, "{mib}");
    let rate = results[0].write.mib_per_sec;
    assert!(
        (points[4].1 - rate).abs() / rate < 0.02,
        "{points:?} vs {rate}"
    );
}

/// A job larger than its zones used to stop (or fail with Zone Full) when the last zone
/// filled; fio resets the zones and keeps writing, and so must the runner.
#[test]
fn jobs_larger_than_their_zones_reset_them_and_keep_writing() {
    for kind in ["", "zone_append=1\niodepth=4\n"] {
        let text = format!("[w]\nzonemode=zbd\nrw=write\nbs=128k\nsize=2g\n{kind}");
        let results = run(&parse(&text).expect("parses"), &target()).expect("runs");
        assert_eq!(results[0].write.bytes, 2 << 30, "{kind}");
    }
}

#[test]
fn zipf_random_reads_run_and_differ_from_uniform_ones() {
    let job = |dist: &str| {
        format!("[r]\nzonemode=zbd\nrw=randread\nbs=4k\niodepth=8\nsize=64m\nio_size=16m\n{dist}")
    };
    let uniform = run(&parse(&job("")).expect("parses"), &target()).expect("runs");
    let zipf = run(
        &parse(&job("random_distribution=zipf:1.2\n")).expect("parses"),
        &target(),
    )
    .expect("runs");
    assert_eq!(zipf[0].read.bytes, 16 << 20);
    assert_ne!(zipf[0].done_ns, uniform[0].done_ns);
    let e = run(
        &parse("[w]\nzonemode=zbd\nrw=write\nrandom_distribution=zipf:1.2\n").expect("parses"),
        &target(),
    )
    .unwrap_err();
    assert!(e.contains("randread"), "{e}");
}

#[test]
fn percentage_random_is_accepted_for_random_reads_only() {
    let text = "[r]\nzonemode=zbd\nrw=randread\nsize=64m\nio_size=1m\npercentage_random=30\n";
    let results = run(&parse(text).expect("parses"), &target()).expect("runs");
    assert_eq!(results[0].read.bytes, 1 << 20);
    let text = "[w]\nzonemode=zbd\nrw=write\npercentage_random=30\n";
    let e = run(&parse(text).expect("parses"), &target()).unwrap_err();
    assert!(e.contains("percentage_random"), "{e}");
}
