//! Regression: in summary mode (devices without per-block metadata) a zone's summary blocks
//! were counted as invalid data, so every full zone looked collectable and garbage collection
//! copied zones whose data was all valid, for nothing. A zone is a victim only when some of
//! its data blocks are invalid.

use ftl::layout::Layout;
use ftl::map::{Mapping, Stream};
use ftl::VictimPolicy;
use zns::Geometry;

fn layout() -> Layout {
    let g = Geometry {
        block_size: 512,
        oob_size: 0,
        zone_count: 12,
        zone_size: 64,
        zone_capacity: 64,
        max_open: 0,
        max_active: 0,
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 8,
        copy_max_range_blocks: 16,
        copy_max_blocks: 16,
        cross_zone_reads: false,
    };
    Layout::new(g, 1180, 2).expect("layout")
}

/// Fills one zone with data and summaries the way the FTL does; returns it. `overwrite`
/// rewrites that many of its LBAs afterwards (into another zone).
fn fill_zone(m: &mut Mapping, overwrite: u64) -> u32 {
    let (z, _) = m.open_zone(Stream::Hot).expect("open");
    m.header_written(z);
    let mut lba = 0;
    loop {
        let room = m.data_room(z);
        if room == 0 {
            let r = m.reserve(z, 1);
            if r.blocks == 0 {
                break;
            }
            let tags = m.summary_tags(z).len();
            m.summary_written(z, r.offset, tags);
            continue;
        }
        let r = m.reserve(z, room.min(8));
        let seq = m.take_seq();
        m.complete_write(z, r.offset, lba, r.blocks, seq);
        let tags = (0..r.blocks).map(|i| ftl::records::Tag::Data { lba: lba + i, seq });
        m.note_tags(z, tags, false);
        lba += r.blocks;
    }
    assert!(m.zone(z).summaries >= 2, "the zone holds several summaries");
    let (other, _) = m.open_zone(Stream::Hot).expect("open");
    m.header_written(other);
    for l in 0..overwrite {
        let r = m.reserve(other, 1);
        let seq = m.take_seq();
        m.complete_write(other, r.offset, l, 1, seq);
    }
    z
}

#[test]
fn a_zone_full_of_valid_data_and_summaries_is_not_a_victim() {
    let mut m = Mapping::new(layout());
    let z = fill_zone(&mut m, 0);
    assert_eq!(m.zone(z).use_, ftl::map::ZoneUse::Full);
    for policy in [VictimPolicy::Greedy, VictimPolicy::CostBenefit] {
        assert_eq!(m.pick_victim(policy), None, "{policy:?}");
    }
}

#[test]
fn one_invalid_data_block_makes_it_a_victim() {
    let mut m = Mapping::new(layout());
    let z = fill_zone(&mut m, 1);
    for policy in [VictimPolicy::Greedy, VictimPolicy::CostBenefit] {
        assert_eq!(m.pick_victim(policy), Some(z), "{policy:?}");
    }
}
