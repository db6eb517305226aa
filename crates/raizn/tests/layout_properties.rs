//! Properties of the array layout: the logical <-> physical mapping is a bijection onto the
//! members' data blocks, every stripe puts its units on distinct members, and parity rotates
//! over every member.

use proptest::prelude::*;
use raizn::layout::{ArrayLayout, MIN_META_ZONES};
use zns::Geometry;

fn member_geo(zone_count: u32, su: u64, stripes: u64, block_size: u32) -> Geometry {
    Geometry {
        block_size,
        oob_size: 16,
        zone_count,
        zone_size: su * stripes + 3,
        zone_capacity: su * stripes,
        max_open: 0,
        max_active: 0,
        zasl_blocks: 16,
        mdts_blocks: 32,
        copy_max_ranges: 4,
        copy_max_range_blocks: 16,
        copy_max_blocks: 32,
        cross_zone_reads: false,
    }
}

fn layout(n: usize, su: u64, stripes: u64) -> ArrayLayout {
    let g = member_geo(MIN_META_ZONES + 3, su, stripes, 512);
    match ArrayLayout::new(&vec![g; n], 1, su * 512) {
        Ok(l) => l,
        Err(e) => panic!("{e}"),
    }
}

proptest! {
    #[test]
    fn place_and_logical_of_are_inverse(n in 3usize..9, su in 1u64..9, stripes in 1u64..7,
                                        zone in 0u32..3, pick in any::<u64>()) {
        let l = layout(n, su, stripes);
        let cap = l.logical_geometry().zone_capacity;
        let offset = pick % cap;
        let p = l.place(zone, offset);
        prop_assert!(p.member < n);
        prop_assert_eq!(l.logical_of(p.member, p.lba), Some((zone, offset)));
    }

    #[test]
    fn every_data_block_of_a_zone_is_hit_exactly_once(n in 3usize..8, su in 1u64..6, stripes in 1u64..5) {
        let l = layout(n, su, stripes);
        let cap = l.logical_geometry().zone_capacity;
        let mut seen = std::collections::HashSet::new();
        for o in 0..cap {
            prop_assert!(seen.insert(l.place(1, o)), "offset {} placed twice", o);
        }
        // Exactly the non-parity blocks of the members' zones are used.
        let per_member = l.member_geometry().zone_capacity;
        prop_assert_eq!(seen.len() as u64, per_member * (n as u64 - 1));
        for m in 0..n {
            let start = l.member_zone_start(1);
            for b in 0..per_member {
                let s = b / su;
                let is_parity = l.parity_member(s) == m;
                prop_assert_eq!(l.logical_of(m, start + b).is_none(), is_parity);
            }
        }
    }

    #[test]
    fn stripes_use_distinct_members_and_parity_rotates(n in 3usize..12, s0 in 0u64..1000) {
        let l = layout(n, 2, 4);
        let mut members: Vec<usize> = (0..l.data_units()).map(|k| l.data_member(s0, k)).collect();
        members.push(l.parity_member(s0));
        members.sort_unstable();
        prop_assert_eq!(members, (0..n).collect::<Vec<_>>());
        let window: std::collections::HashSet<usize> =
            (s0..s0 + n as u64).map(|s| l.parity_member(s)).collect();
        prop_assert_eq!(window.len(), n, "N consecutive stripes put parity on every member once");
    }

    #[test]
    fn member_write_pointers_give_back_the_logical_one(n in 3usize..8, su in 1u64..6,
                                                      stripes in 1u64..5, pick in any::<u64>()) {
        let l = layout(n, su, stripes);
        let wp = pick % (l.logical_geometry().zone_capacity + 1);
        let wps: Vec<u64> = (0..n).map(|m| l.member_blocks_at(m, wp)).collect();
        prop_assert_eq!(l.readable_prefix(&wps), wp);
        let total: u64 = wps.iter().sum();
        let full = wp / l.stripe_data_blocks();
        prop_assert_eq!(total, wp + full * su, "data plus one parity unit per complete stripe");
    }
}
