//! Live trim records take flash until a checkpoint covers them, and the periodic checkpoint
//! counts only user data blocks: a workload that trims as often as it writes must still never
//! run out of space while a checkpoint would free the records' blocks. Each step writes one
//! block and trims it again, so the volume holds almost nothing while trim records fill the
//! zones, on a small volume whose automatic checkpoint interval is longer than the volume.

mod common;

use common::{block, formatted, small_opts};
use ftl::{FtlVolume, MountOptions};
use zns::{BlockDevice, SimRng};

async fn run(oob_size: u32, seed: u64) {
    let what = format!("oob {oob_size}, seed {seed}");
    let dev = formatted(oob_size, 40, 400, seed).await;
    let opts = MountOptions {
        checkpoint_every_zones: 0,
        ..small_opts()
    };
    let (vol, _) = FtlVolume::mount(dev.clone(), opts).await.expect("mount");
    let l = *vol.layout();
    let every = vol.stats().checkpoint_every_zones;
    // The interval is longer than the whole flash: records alone would fill it first.
    assert!(
        u64::from(every) * l.zone_blocks > u64::from(l.data_zones) * l.zone_blocks / 2,
        "{what}: every {every} of {} zones",
        l.data_zones
    );
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut rng = SimRng::new(seed);
    // Three times the flash in trim records (and as many data blocks).
    let steps = 3 * u64::from(l.data_zones) * l.zone_blocks;
    for step in 0..steps {
        let lba = rng.below(n);
        vol.write(lba, &block(bs, step + 1), false)
            .await
            .unwrap_or_else(|e| panic!("{what}: write {step} of {steps}: {e}"));
        vol.trim(lba, 1)
            .await
            .unwrap_or_else(|e| panic!("{what}: trim {step} of {steps}: {e}"));
    }
    let s = vol.stats();
    assert!(s.counters.trims >= steps, "{what}: {:?}", s.counters);
    vol.verify().unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut buf = vec![0xffu8; bs];
    for lba in 0..n {
        vol.read(lba, &mut buf).await.expect("read");
        assert!(buf.iter().all(|b| *b == 0), "{what}: LBA {lba} was trimmed");
    }
    vol.unmount().await.expect("unmount");
}

#[test]
fn trim_records_never_pin_the_space_writes_need() {
    let rt = common::runtime();
    for (oob, seed) in [(16, 3), (0, 4)] {
        rt.block_on(run(oob, seed));
    }
}
