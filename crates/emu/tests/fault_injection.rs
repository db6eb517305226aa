//! Injected faults are deterministic from their seed: the N-th command fails once, a
//! probability fails the same commands for the same seed, a failed device refuses every
//! command, and extra latency delays completions in virtual time.

mod common;

use std::time::Duration;

use common::block_on;
use emu::{FaultPlan, Op};
use zns::{NvmeStatus, ZoneState, ZonedDevice};

#[test]
fn the_nth_command_fails_once_with_a_retryable_status() {
    block_on(async {
        let dev = common::memory(0);
        dev.set_faults(FaultPlan {
            fail_nth: Some(3),
            ..Default::default()
        })
        .expect("plan");
        let data = vec![1u8; 512];
        let mut results = Vec::new();
        for lba in 0..4 {
            results.push(dev.write(lba, &data, None, false).await);
        }
        assert_eq!(results[2], Err(NvmeStatus::InternalError));
        assert!(NvmeStatus::InternalError.is_transient());
        // The failed write changed nothing, so the retry at the same LBA succeeds.
        assert_eq!(results[3], Err(NvmeStatus::ZoneInvalidWrite));
        dev.write(2, &data, None, false).await.expect("retry");
        assert_eq!(dev.stats().errors[Op::Write as usize], 2);
    });
}

fn failures(seed: u64) -> Vec<bool> {
    block_on(async {
        let dev = common::memory(0);
        dev.set_faults(FaultPlan {
            seed,
            fail_probability: 0.25,
            ..Default::default()
        })
        .expect("plan");
        let mut buf = vec![0u8; 512];
        let mut v = Vec::new();
        for _ in 0..200 {
            v.push(dev.read(0, &mut buf, None).await.is_err());
        }
        v
    })
}

#[test]
fn probabilistic_faults_repeat_from_their_seed() {
    let a = failures(4);
    assert_eq!(a, failures(4));
    assert_ne!(a, failures(5));
    let n = a.iter().filter(|f| **f).count();
    assert!((25..=75).contains(&n), "{n} of 200 failed at p = 0.25");
}

#[test]
fn a_failed_device_refuses_every_command() {
    block_on(async {
        let dev = common::memory(0);
        dev.fail_device();
        assert_eq!(
            dev.write(0, &[0u8; 512], None, false).await,
            Err(NvmeStatus::NamespaceNotReady)
        );
        assert_eq!(dev.flush().await, Err(NvmeStatus::NamespaceNotReady));
        assert!(!NvmeStatus::NamespaceNotReady.is_transient());
        assert!(dev.set_faults(FaultPlan::default()).is_ok());
        assert_eq!(
            dev.flush().await,
            Err(NvmeStatus::NamespaceNotReady),
            "a new plan must not revive a failed device"
        );
    });
}

#[test]
fn extra_latency_delays_completion_in_virtual_time() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dev = common::memory(0);
        dev.set_faults(FaultPlan {
            extra_latency: Duration::from_millis(40),
            latency_probability: 1.0,
            ..Default::default()
        })
        .expect("plan");
        let t0 = tokio::time::Instant::now();
        dev.flush().await.expect("flush");
        assert_eq!(t0.elapsed(), Duration::from_millis(40));
    });
}

#[test]
fn zones_forced_read_only_or_offline_behave_as_the_states_require() {
    block_on(async {
        let dev = common::memory(0);
        dev.write(0, &[5u8; 1024], None, false)
            .await
            .expect("write");
        dev.set_zone_state(0, ZoneState::ReadOnly).expect("fault");
        let mut buf = [0u8; 1024];
        dev.read(0, &mut buf, None)
            .await
            .expect("read-only zones stay readable");
        assert_eq!(buf, [5u8; 1024]);
        assert_eq!(
            dev.write(2, &[0u8; 512], None, false).await,
            Err(NvmeStatus::ZoneIsReadOnly)
        );
        dev.set_zone_state(1, ZoneState::Offline).expect("fault");
        assert_eq!(
            dev.read(32, &mut buf, None).await,
            Err(NvmeStatus::ZoneIsOffline)
        );
        assert!(dev.set_zone_state(0, ZoneState::Full).is_err());
        assert!(dev.set_zone_state(99, ZoneState::Offline).is_err());
    });
}
