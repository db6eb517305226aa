//! A mounted volume's spare figures (`FtlStats::spare`) keep the open zones' unwritten tails
//! apart from the collectable spare.
//!
//! Regression: `FtlStats::spare.collectable` was the layout's figure, which counts the open
//! zones' tails although garbage collection cannot use them until those zones fill; the bench
//! report and `zonestack ftl stats` each subtracted the tails themselves, and any other
//! reader over-counted the room collection works in.

mod common;

use common::{block, formatted, small_opts};
use ftl::FtlVolume;
use zns::BlockDevice;

#[test]
fn open_zone_tails_are_not_counted_as_collectable() {
    let rt = common::runtime();
    rt.block_on(async {
        let dev = formatted(16, 20, 580, 3).await;
        let (vol, _) = FtlVolume::mount(dev.clone(), small_opts())
            .await
            .expect("mount");
        let layout = vol.layout();
        let fixed = layout.spare().expect("the layout's spare");
        assert_eq!(fixed.open_tails, 0, "a layout knows no open zone");
        let bs = vol.block_size() as usize;
        // A few blocks: a hot zone is open with most of its blocks unwritten.
        for lba in 0..5u64 {
            vol.write(lba, &block(bs, lba + 1), false)
                .await
                .expect("write");
        }
        let s = vol.stats();
        assert!(s.open_tail_blocks > 0, "no open zone after writes");
        assert_eq!(s.spare.open_tails, s.open_tail_blocks);
        assert_eq!(s.spare.collectable + s.spare.open_tails, fixed.collectable);
        assert_eq!(s.spare.total(), s.flash_blocks - s.volume_blocks);
        vol.unmount().await.expect("unmount");
    });
}
