//! Block jobs (no zonemode) on the two block volumes of the timing model: the host FTL on the
//! emulated ZNS drive and a conventional SSD on the same flash, in virtual time.

use bench::fio::{run, to_json, JobResult, Target, Volume};
use bench::jobfile::parse;

fn on(volume: Volume, size: u64) -> Target {
    Target {
        profile: "zn540".into(),
        size_bytes: Some(size),
        seed: 3,
        volume,
        image: None,
    }
}

const FTL: Volume = Volume::Ftl { op_percent: 7.0 };
const CONV: Volume = Volume::Conv { op_percent: 7.0 };
/// The smallest size used here that the FTL accepts at 7% over-provisioning.
const SMALL: u64 = 128 << 20;

fn run_text(text: &str, t: &Target) -> Result<Vec<JobResult>, String> {
    run(&parse(text).expect("parses"), t)
}

#[test]
fn rwmixread_splits_a_mixed_job_and_reads_reach_the_flash() {
    let text = "[mix]\nrw=randrw\nrwmixread=70\nbs=4k\niodepth=8\nio_size=16m\n";
    for volume in [FTL, CONV] {
        let r = run_text(text, &on(volume, 128 << 20)).expect("runs");
        let (rd, wr) = (&r[0].read, &r[0].write);
        assert_eq!(rd.bytes + wr.bytes, 16 << 20, "{volume:?}");
        let share = rd.ops as f64 / (rd.ops + wr.ops) as f64;
        assert!(
            (0.67..0.73).contains(&share),
            "{volume:?}: read share {share}"
        );
        // The range was written before the job, so reads pay a flash page read (85 us on the
        // zn540), where a read of unwritten blocks would return at once.
        assert!(rd.latency_p50_us > 80.0, "{volume:?}: {rd:?}");
        assert!(wr.mib_per_sec > 0.0 && rd.mib_per_sec > 0.0);
    }
}

#[test]
fn same_seed_gives_identical_json_on_both_volumes() {
    let text =
        "[global]\nbs=8k\nsize=32m\n[w]\nrw=randwrite\nrandom_distribution=zipf:1.1\niodepth=4\n\
                [r]\nstonewall\nrw=randread\npercentage_random=50\niodepth=2\nio_size=8m\n";
    // 128 MiB: at 7% the FTL's spare must pay two checkpoint and two reserve zones; 64 MiB
    // is too small for that and is refused.
    for volume in [FTL, CONV] {
        let a = to_json(&run_text(text, &on(volume, SMALL)).expect("runs"));
        let b = to_json(&run_text(text, &on(volume, SMALL)).expect("runs"));
        assert_eq!(a, b, "{volume:?}");
        assert!(a["jobs"][0]["write"]["iops"].as_f64().unwrap_or(0.0) > 0.0);
        assert!(a["jobs"][1]["read"]["iops"].as_f64().unwrap_or(0.0) > 0.0);
        let other = to_json(
            &run_text(
                text,
                &Target {
                    seed: 4,
                    ..on(volume, SMALL)
                },
            )
            .expect("runs"),
        );
        assert_ne!(a, other, "{volume:?}: the seed must matter");
    }
}

#[test]
fn ramp_time_is_left_out_of_the_figures() {
    // The write buffer takes the first writes at the host link's speed; a ramp leaves that
    // burst out, so the ramped job measures the flash alone.
    let job =
        |ramp: &str| format!("[w]\nrw=write\nbs=128k\niodepth=8\ntime_based\nruntime=30ms\n{ramp}");
    let plain = run_text(&job(""), &on(CONV, 1 << 30)).expect("runs");
    let ramped = run_text(&job("ramp_time=10ms\n"), &on(CONV, 1 << 30)).expect("runs");
    let (p, r) = (&plain[0].write, &ramped[0].write);
    assert!((0.030..0.032).contains(&p.seconds), "{p:?}");
    assert!((0.030..0.032).contains(&r.seconds), "{r:?}");
    assert!(r.mib_per_sec < p.mib_per_sec, "ramped {r:?} vs plain {p:?}");
}

/// Fill the volume sequentially, then overwrite it once at random: with 7% spare the
/// collector must copy live data to make room, so the random phase runs well below the fill.
fn random_overwrites_cost_garbage_collection(volume: Volume) {
    let text = "[global]\nbs=128k\niodepth=8\n[fill]\nrw=write\n\
                [over]\nstonewall\nrw=randwrite\nbs=4k\niodepth=16\nio_size=256m\n";
    {
        let specs = parse(text).expect("parses");
        let out = bench::fio::run_with_progress(
            &specs,
            &on(volume, 256 << 20),
            &bench::fio::Progress::default(),
        )
        .expect("runs");
        let r = &out.results;
        let v = out.volume.expect("the volume's figures");
        let n = |k: &str| v[k].as_u64().unwrap_or(u64::MAX);
        if matches!(volume, Volume::Conv { .. }) {
            assert_eq!(n("host_slots_lost"), 0, "the drive dropped writes: {v}");
        } else {
            // Every full checkpoint writes the whole mapping: their count times its size,
            // plus the deltas' bytes, reported per GiB of user writes too.
            let fulls = n("checkpoints") - n("delta_checkpoints");
            let blocks = (n("checkpoint_bytes") - n("delta_checkpoint_bytes")) / 4096;
            assert!(fulls >= 1 && blocks % fulls == 0, "{v}");
            let per_gib = v["checkpoint_bytes_per_user_gib"].as_f64().unwrap_or(-1.0);
            let user_gib = (n("user_blocks_written") * 4096) as f64 / f64::from(1u32 << 30);
            assert!(
                (per_gib * user_gib - n("checkpoint_bytes") as f64).abs() < 1.0,
                "{v}"
            );
        }
        let (fill, over) = (&r[0].write, &r[1].write);
        assert_eq!(fill.bytes, 256 << 20);
        assert!(fill.mib_per_sec > 900.0, "{volume:?}: fill {fill:?}");
        assert!(
            over.mib_per_sec < 0.5 * fill.mib_per_sec,
            "{volume:?}: fill {fill:?} overwrite {over:?}"
        );
    }
}

#[test]
fn random_overwrites_of_a_full_volume_cost_garbage_collection_on_the_ftl() {
    random_overwrites_cost_garbage_collection(FTL);
}

// At 7% a 256 MiB conventional drive gives each of the array's 32 dies 3.6 erase blocks of
// spare; its collector used to count its reserve in whole blocks and dropped host writes there
// (`host_slots_lost`, which the run below asserts is 0), so this ran at 28%. The reserve is
// now counted in slots and a host write waits for collection instead, so it runs at the
// default 7%. The collector's defects are tested in crates/emu/src/timing/pagemap.rs.
#[test]
fn random_overwrites_of_a_full_volume_cost_garbage_collection_on_the_conventional_drive() {
    random_overwrites_cost_garbage_collection(Volume::Conv { op_percent: 7.0 });
}

#[test]
fn zoned_options_and_block_jobs_go_to_the_right_target() {
    let zoned = parse("[z]\nzonemode=zbd\nrw=write\n").expect("parses");
    for volume in [FTL, CONV] {
        let e = run(&zoned, &on(volume, SMALL)).expect_err("refused");
        assert!(e.contains("--target zns") && e.contains("'z'"), "{e}");
    }
    let block = parse("[b]\nrw=randrw\n").expect("parses");
    let e = run(&block, &on(Volume::Zns, 4 << 30)).expect_err("refused");
    assert!(e.contains("--target ftl"), "{e}");
    let e = run_text("[b]\nrw=write\noffset=1000\n", &on(CONV, 64 << 20)).expect_err("refused");
    assert!(e.contains("offset=1000"), "{e}");
}

#[test]
fn latency_cdfs_cover_every_measured_command_in_order() {
    let text = "[mix]\nrw=randrw\nrwmixread=50\nbs=4k\niodepth=8\nio_size=8m\n";
    let r = run_text(text, &on(CONV, 64 << 20)).expect("runs");
    assert_eq!(r[0].read_latencies_ns.len() as u64, r[0].read.ops);
    assert_eq!(r[0].write_latencies_ns.len() as u64, r[0].write.ops);
    let cdfs = bench::fio::latency_cdfs(&r, 100);
    let names: Vec<&str> = cdfs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["mix read", "mix write"]);
    for (name, pts) in &cdfs {
        assert_eq!(pts.len(), 101, "{name}");
        assert!(
            pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1),
            "{name}"
        );
        assert_eq!(pts.last().map(|p| p.1), Some(1.0), "{name}");
    }
    // The median point of the read CDF is the report's p50 (both nearest-rank).
    let p50 = cdfs[0].1[50].0;
    assert!((p50 - r[0].read.latency_p50_us).abs() / r[0].read.latency_p50_us < 0.02);
}
