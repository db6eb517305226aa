//! The workload driver measures what the device's model says: one job of QD1 writes runs at
//! exactly one write per modelled latency, and jobs keep their own zones.

use bench::workload::{run, Job, Limits, Pattern};
use emu::timing::resource::transfer_ns;
use emu::timing::timing_profile;
use emu::{ClockMode, EmuConfig, EmuDevice, SimRuntime};
use zns::{ReportFilter, ZonedDevice};

fn device() -> EmuDevice {
    let mut g = emu::profile("small").expect("small geometry");
    g.oob_size = 0;
    let p = timing_profile("zn540").expect("zn540");
    EmuDevice::new_memory(EmuConfig::new(g))
        .and_then(|d| d.with_timing(p, ClockMode::Virtual))
        .expect("timed device")
}

#[test]
fn qd1_writes_run_at_one_per_modelled_latency() {
    let p = timing_profile("zn540").expect("zn540");
    let lat_ns =
        p.submit_ns + p.ctrl_write_ns + transfer_ns(4096, p.host_bytes_per_sec) + p.complete_ns;
    let report = SimRuntime::new().expect("runtime").block_on(async {
        let dev = device();
        let job = Job {
            pattern: Pattern::Write,
            zones: vec![0, 1],
            block_bytes: 4096,
            queue_depth: 1,
            bytes: 1 << 20,
            read_extent_bytes: 0,
            seed: 0,
            random_percent: 100,
            zipf_theta: None,
            limits: Limits::default(),
        };
        run(&dev, &[job], 0).await.expect("run")
    });
    assert_eq!(report.ops, 256);
    assert_eq!(report.bytes, 1 << 20);
    let expect_iops = 1e9 / lat_ns as f64;
    assert!(
        (report.iops - expect_iops).abs() / expect_iops < 1e-9,
        "{report:?}"
    );
    assert!((report.mean_latency_us - lat_ns as f64 / 1000.0).abs() < 1e-6);
}

#[test]
fn append_jobs_fill_their_own_zones_without_overflowing() {
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = device();
        let g = dev.geometry();
        let cap = g.zone_capacity * u64::from(g.block_size);
        let jobs: Vec<Job> = (0..2)
            .map(|j| Job {
                pattern: Pattern::Append,
                zones: vec![j, j + 2],
                block_bytes: 8192,
                queue_depth: 8,
                bytes: cap + cap / 2,
                read_extent_bytes: 0,
                seed: 0,
                random_percent: 100,
                zipf_theta: None,
                limits: Limits::default(),
            })
            .collect();
        let r = run(&dev, &jobs, 0).await.expect("run");
        assert_eq!(r.bytes, 3 * cap);
        let rep = dev
            .report_zones(0, ReportFilter::All, false, 4)
            .await
            .expect("report");
        let wps: Vec<u64> = rep.zones.iter().map(|z| z.wp - z.start).collect();
        assert_eq!(
            wps,
            vec![
                g.zone_capacity,
                g.zone_capacity,
                g.zone_capacity / 2,
                g.zone_capacity / 2
            ]
        );
    });
}
