//! The conventional-SSD mode behaves as a block device: data reads back after any number of
//! overwrites and collections, trimmed blocks read as zeros, bad requests fail cleanly; and
//! in virtual time its writes slow down once garbage collection starts.

use emu::timing::{timing_profile, TimingProfile};
use emu::{ClockMode, ConvSsd, SimRuntime};
use zns::{BlockDevice, BlockError, SimRng};

fn small_profile() -> TimingProfile {
    TimingProfile {
        channels: 2,
        dies_per_channel: 2,
        pages_per_block: 8,
        blocks_per_die: 32,
        ..timing_profile("femu-mlc").expect("femu-mlc")
    }
}

#[test]
fn data_survives_overwrites_and_collection() {
    SimRuntime::new().expect("runtime").block_on(async {
        let dev = ConvSsd::new(small_profile(), 0.25, ClockMode::Virtual).expect("drive");
        let n = dev.size_blocks();
        let mut shadow = vec![0u8; n as usize];
        let mut rng = SimRng::new(9);
        for round in 1..=(6 * n) {
            let lba = rng.below(n - 1);
            let tag = (round % 251) as u8 + 1;
            dev.write(lba, &vec![tag; 2 * 4096], false)
                .await
                .expect("write");
            shadow[lba as usize] = tag;
            shadow[lba as usize + 1] = tag;
        }
        assert!(dev.gc_counters().collections > 0, "{:?}", dev.gc_counters());
        dev.trim(0, 4).await.expect("trim");
        shadow[..4].fill(0);
        let mut buf = vec![0u8; 4096];
        for lba in 0..n {
            dev.read(lba, &mut buf).await.expect("read");
            assert!(
                buf.iter().all(|&b| b == shadow[lba as usize]),
                "block {lba}"
            );
        }
        dev.flush().await.expect("flush");
        assert_eq!(dev.read(n, &mut buf).await, Err(BlockError::OutOfRange));
        assert_eq!(
            dev.write(0, &[0u8; 100], false).await,
            Err(BlockError::Misaligned)
        );
        assert_eq!(dev.trim(n - 1, 2).await, Err(BlockError::OutOfRange));
    });
}

#[test]
fn too_little_spare_is_refused() {
    let p = small_profile();
    assert!(ConvSsd::new(p, 0.0, ClockMode::Virtual).is_err());
    assert!(ConvSsd::new(p, 0.01, ClockMode::Virtual).is_err());
    assert!(ConvSsd::new(p, 0.07, ClockMode::Virtual).is_ok());
}
