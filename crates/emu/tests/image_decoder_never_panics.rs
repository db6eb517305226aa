//! The image decoders meet random and corrupted bytes: they return errors, never panic, and
//! accept only what round-trips.

use emu::image::{
    decode_superblock, decode_tl_slot, decode_zone, encode_superblock, encode_tl_slot, Superblock,
};
use proptest::prelude::*;
use zns::Geometry;

fn geometry() -> Geometry {
    emu::profile("small").expect("profile")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..4200)) {
        let _ = decode_superblock(&bytes);
        let _ = decode_zone(&geometry(), 0, &bytes);
        let _ = decode_tl_slot(&geometry(), 0, &bytes, geometry().zone_capacity);
    }

    #[test]
    fn corrupted_valid_bitmap_slots(flip in 0usize..32, v in 1u8..=255, zone in 0u32..32) {
        let g = geometry();
        let mut map = zns::ValidBitmap::empty(g.zone_capacity);
        map.set(u64::from(zone), true);
        let mut b = encode_tl_slot(zone, map.as_bytes(), 4096);
        prop_assert_eq!(decode_tl_slot(&g, zone, &b, g.zone_capacity), Ok(map));
        b[flip] ^= v;
        prop_assert!(decode_tl_slot(&g, zone, &b, g.zone_capacity).is_err());
    }

    #[test]
    fn corrupted_superblocks(flips in proptest::collection::vec((0usize..4096, any::<u8>()), 1..6), cut in 0usize..4200) {
        let sb = Superblock { geometry: geometry(), volatile_cache: true, clean: true, seed: 1, zns_plus: false, lba_plugging: false };
        let mut b = encode_superblock(&sb);
        for (at, v) in &flips {
            b[*at] ^= v;
        }
        b.truncate(cut.max(1));
        match decode_superblock(&b) {
            Ok(got) => prop_assert_eq!(got, sb),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn corrupted_zone_entries(flip in 0usize..32, v in 1u8..=255, zone in 0u32..32) {
        let g = geometry();
        let z = emu::zones::ZoneTable::new(g).zone(zone).to_owned();
        let mut b = emu::image::encode_zone(zone, &z);
        prop_assert_eq!(decode_zone(&g, zone, &b), Ok(z));
        b[flip] ^= v;
        prop_assert!(decode_zone(&g, zone, &b).is_err());
    }
}
