//! Guards `MountOptions::host_copy_ns_per_block`: the host time a host-level copy costs is
//! charged once per block garbage collection moves by reading it to the host and writing it
//! back, and never to user writes and reads, to Simple Copy or to ZNS+ zone compaction, nor
//! at all when it is 0. The volume's clock records what it is asked to wait (and waits for
//! nothing), so the check is of the charges themselves; untimed devices.

mod common;

use std::sync::Arc;
use std::time::Duration;

use ftl::compaction::Placement;
use ftl::host::{HostClock, HostWait};
use ftl::{FtlVolume, MountOptions};
use parking_lot::Mutex;
use zns::BlockDevice;

const NS: u32 = 2_500;

/// A clock that records every wait asked of it.
#[derive(Default)]
struct Recorder {
    waits: Mutex<Vec<Duration>>,
}

impl HostClock for Recorder {
    fn wait(&self, d: Duration) -> HostWait {
        self.waits.lock().push(d);
        Box::pin(async {})
    }
}

impl Recorder {
    fn total_ns(&self) -> u128 {
        self.waits.lock().iter().map(|d| d.as_nanos()).sum()
    }
    fn count(&self) -> usize {
        self.waits.lock().len()
    }
}

/// How garbage collection moves blocks in a case.
#[derive(Clone, Copy, Debug)]
enum Path {
    ReadWrite,
    SimpleCopy,
    ZoneCompaction,
}

/// Mounts a fresh volume copying by `path` with `ns` per host-copied block, writes a few
/// blocks and reads them back (no collection yet), then overwrites the volume until garbage
/// collection has moved blocks. Returns the clock's record after the user I/O alone, the
/// clock, and the blocks collection moved.
async fn run(path: Path, ns: u32) -> (u128, Arc<Recorder>, u64) {
    let g = zns::Geometry {
        block_size: 4096,
        zone_count: 40,
        ..common::geometry()
    };
    let dev = match path {
        Path::ZoneCompaction => common::device_plus(g, 3),
        _ => common::device(g, 3),
    };
    ftl::format(dev.as_ref(), ftl::FormatOptions::with_op(300), 7, false)
        .await
        .expect("format");
    let opts = MountOptions {
        use_copy: matches!(path, Path::SimpleCopy),
        compaction: match path {
            Path::ZoneCompaction => Some(Placement::CopybackAware),
            _ => None,
        },
        host_copy_ns_per_block: ns,
        ..common::small_opts()
    };
    let clock = Arc::new(Recorder::default());
    let (vol, _) = FtlVolume::mount_with_clock(dev.clone(), opts, clock.clone())
        .await
        .expect("mount");
    let bs = vol.block_size() as usize;
    for lba in 0..8 {
        vol.write(lba, &common::block(bs, lba + 1), false)
            .await
            .expect("write");
    }
    vol.flush().await.expect("flush");
    let mut buf = vec![0u8; bs];
    for lba in 0..8 {
        vol.read(lba, &mut buf).await.expect("read");
    }
    assert_eq!(
        vol.stats().counters.gc_blocks,
        0,
        "{path:?}: no collection yet"
    );
    let user_only = clock.total_ns();
    let versions = common::overwrite_everywhere(&vol, 5, 3)
        .await
        .expect("overwrites");
    common::check_versions(&vol, &versions, "after the overwrites").await;
    vol.unmount().await.expect("unmount");
    let moved = vol.stats().counters.gc_blocks;
    assert!(moved > 0, "{path:?}: collection moved nothing");
    (user_only, clock, moved)
}

#[test]
fn the_host_copy_pays_per_block_moved() {
    common::paused_runtime().block_on(async {
        let (user_only, clock, moved) = run(Path::ReadWrite, NS).await;
        assert_eq!(user_only, 0, "user writes and reads were charged host time");
        assert!(clock.count() > 0, "the host copy was not charged");
        assert_eq!(
            clock.total_ns(),
            u128::from(moved) * u128::from(NS),
            "not {NS} ns per block moved ({moved} blocks, {} waits)",
            clock.count()
        );
        // One wait per copy, each of a whole number of blocks.
        for d in clock.waits.lock().iter() {
            assert!(!d.is_zero() && d.as_nanos() % u128::from(NS) == 0, "{d:?}");
        }
    });
}

#[test]
fn device_copies_and_a_zero_cost_pay_nothing() {
    common::paused_runtime().block_on(async {
        for (path, ns) in [
            (Path::SimpleCopy, NS),
            (Path::ZoneCompaction, NS),
            (Path::ReadWrite, 0),
        ] {
            let (_, clock, moved) = run(path, ns).await;
            assert_eq!(
                clock.count(),
                0,
                "{path:?} at {ns} ns per block was charged host time ({moved} blocks moved)"
            );
        }
    });
}
