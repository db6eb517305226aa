//! A device with timing completes commands when its model says, in exact virtual time under
//! a `SimRuntime`, repeatably from its seed; without timing it takes no virtual time at all;
//! tokio's own timers keep their time beside it; and the fallbacks (a plain paused runtime,
//! real time) still wait at least as long as the model says.

use std::time::Duration;

use emu::timing::resource::transfer_ns;
use emu::timing::{sim_steps, timing_profile};
use emu::{ClockMode, EmuConfig, EmuDevice, SimRuntime};
use futures::future::join_all;
use tokio::time::Instant;
use zns::{Geometry, ZoneAction, ZonedDevice};

fn geometry() -> Geometry {
    Geometry {
        block_size: 4096,
        oob_size: 0,
        zone_count: 8,
        zone_size: 4096,
        zone_capacity: 4096,
        max_open: 8,
        max_active: 8,
        zasl_blocks: 64,
        mdts_blocks: 64,
        copy_max_ranges: 4,
        copy_max_range_blocks: 64,
        copy_max_blocks: 64,
        cross_zone_reads: false,
    }
}

fn device(seed: u64, mode: ClockMode) -> EmuDevice {
    let cfg = EmuConfig {
        seed,
        ..EmuConfig::new(geometry())
    };
    let p = timing_profile("zn540").expect("zn540");
    EmuDevice::new_memory(cfg)
        .and_then(|d| d.with_timing(p, mode))
        .expect("timed device")
}

#[test]
fn qd1_writes_take_exactly_the_modelled_latency() {
    let p = timing_profile("zn540").expect("zn540");
    let expect =
        p.submit_ns + p.ctrl_write_ns + transfer_ns(4096, p.host_bytes_per_sec) + p.complete_ns;
    let rt = SimRuntime::new().expect("runtime");
    let lat = rt.block_on(async {
        let dev = device(0, ClockMode::Virtual);
        let buf = vec![7u8; 4096];
        let mut lat = Vec::new();
        for i in 0..64 {
            let t = Instant::now();
            dev.write(i, &buf, None, false).await.expect("write");
            lat.push(t.elapsed().as_nanos() as u64);
        }
        assert!(sim_steps() >= 64);
        lat
    });
    assert!(lat.iter().all(|&l| l == expect), "{lat:?} vs {expect}");
}

/// A mixed run: appends at QD4 into two zones, QD1 writes into two more, reads and a reset.
/// Returns every command's completion instant (ns from the start) and the append LBAs.
fn mixed_run(seed: u64) -> (Vec<u64>, Vec<u64>) {
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = device(seed, ClockMode::Virtual);
        let g = dev.geometry();
        let t0 = Instant::now();
        let buf = vec![1u8; 8192];
        let appends = (0..2u32).map(|z| {
            let (dev, buf) = (&dev, &buf);
            async move {
                let mut out = Vec::new();
                for _ in 0..16 {
                    let batch = (0..4).map(|_| dev.append(g.zone_start(z), buf, None, false));
                    for r in join_all(batch).await {
                        out.push((r.expect("append"), t0.elapsed().as_nanos() as u64));
                    }
                }
                out
            }
        });
        let writes = (2..4u32).map(|z| {
            let (dev, buf) = (&dev, &buf);
            async move {
                let mut out = Vec::new();
                for i in 0..48 {
                    let lba = g.zone_start(z) + 2 * i;
                    dev.write(lba, buf, None, false).await.expect("write");
                    out.push((lba, t0.elapsed().as_nanos() as u64));
                }
                let mut rbuf = vec![0u8; 4096];
                dev.read(g.zone_start(z), &mut rbuf, None)
                    .await
                    .expect("read");
                dev.zone_mgmt(ZoneAction::Reset, g.zone_start(z), false)
                    .await
                    .expect("reset");
                out.push((0, t0.elapsed().as_nanos() as u64));
                out
            }
        });
        let (a, w) = futures::join!(join_all(appends), join_all(writes));
        let lbas = a.iter().flatten().map(|x| x.0).collect();
        let times = a.iter().chain(w.iter()).flatten().map(|x| x.1).collect();
        (times, lbas)
    })
}

#[test]
fn the_same_seed_gives_the_same_run_to_the_nanosecond() {
    let a = mixed_run(3);
    assert_eq!(a, mixed_run(3));
    assert!(a.0.iter().all(|&t| t > 0));
    // Appends in flight are placed in a device-chosen order drawn from the seed.
    assert_ne!(a.1, mixed_run(4).1);
}

#[test]
fn without_timing_commands_take_no_virtual_time() {
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = EmuDevice::new_memory(EmuConfig::new(geometry())).expect("device");
        let t = Instant::now();
        for i in 0..100 {
            dev.write(i, &[0u8; 4096], None, false)
                .await
                .expect("write");
        }
        assert_eq!(t.elapsed(), Duration::ZERO);
        assert!(dev.timing().is_none() && dev.timing_counters().is_none());
    });
}

#[test]
fn tokio_timers_keep_their_time_beside_device_commands() {
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = device(0, ClockMode::Virtual);
        let t0 = Instant::now();
        let timer = async {
            tokio::time::sleep(Duration::from_millis(3)).await;
            t0.elapsed()
        };
        let io = async {
            for i in 0..400 {
                dev.write(i, &[0u8; 4096], None, false)
                    .await
                    .expect("write");
            }
            t0.elapsed()
        };
        let (slept, busy) = futures::join!(timer, io);
        assert_eq!(slept, Duration::from_millis(3));
        // 400 QD1 writes of ~11.6 us each run past the timer.
        assert!(busy > Duration::from_millis(4), "{busy:?}");
    });
}

#[tokio::test(start_paused = true)]
async fn outside_a_sim_runtime_virtual_time_falls_back_to_whole_milliseconds() {
    let dev = device(0, ClockMode::Virtual);
    let t = Instant::now();
    dev.write(0, &[0u8; 4096], None, false)
        .await
        .expect("write");
    let took = t.elapsed();
    assert!(
        took >= Duration::from_micros(11) && took <= Duration::from_millis(2),
        "{took:?}"
    );
}

#[test]
fn real_time_mode_waits_at_least_the_modelled_latency() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dev = device(0, ClockMode::RealTime);
        dev.write(0, &[0u8; 4096], None, false)
            .await
            .expect("write");
        // After a clean restart the data is on flash, not in the write buffer.
        dev.restart().expect("restart");
        let mut buf = vec![0u8; 4096];
        let t = std::time::Instant::now();
        dev.read(0, &mut buf, None).await.expect("read");
        // A page read: about 85 us.
        assert!(
            t.elapsed() >= Duration::from_micros(84),
            "{:?}",
            t.elapsed()
        );
    });
}

#[test]
fn timing_switched_on_over_existing_data_counts_it_as_on_flash() {
    // Zones hold data (a partial program unit in each) before the model is switched on, as
    // in an image opened from disk; writes after it must cost a normal write and never book
    // buffer space for data the model did not see arrive.
    let cfg = EmuConfig::new(geometry());
    let rt = SimRuntime::new().expect("runtime");
    rt.block_on(async {
        let dev = EmuDevice::new_memory(cfg).expect("device");
        let buf = vec![3u8; 4096];
        for z in 0..4u64 {
            for i in 0..5 {
                dev.write(z * 4096 + i, &buf, None, false)
                    .await
                    .expect("write");
            }
        }
        let p = timing_profile("zn540").expect("zn540");
        let dev = dev.with_timing(p, ClockMode::Virtual).expect("timed");
        let t = Instant::now();
        for z in 0..4u64 {
            for i in 5..600 {
                dev.write(z * 4096 + i, &buf, None, false)
                    .await
                    .expect("write");
            }
        }
        dev.flush().await.expect("flush");
        // Admissions after the programs ended release their space from the buffer's count.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for z in 0..4u64 {
            dev.write(z * 4096 + 600, &buf, None, false)
                .await
                .expect("write");
        }
        // 2,380 blocks of 4 KiB: at least the array's program time for them.
        let program_floor = 2380.0 * 4096.0 / p.program_bytes_per_sec();
        assert!(t.elapsed().as_secs_f64() >= program_floor * 0.9);
        let counters = dev.timing_counters().expect("timing counters");
        assert_eq!(counters.buffer_overcommits, 0, "{counters:?}");
    });
}
