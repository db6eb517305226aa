//! The metadata decoders on arbitrary bytes: they return an error or a record, never panic,
//! and every encoded record decodes to itself.

use proptest::prelude::*;
use raizn::meta::{self, MetaError, RecordHeader, RecordType, Superblock};
use zns::Geometry;

fn geo(block_size: u32) -> Geometry {
    Geometry {
        block_size,
        oob_size: 16,
        zone_count: 11,
        zone_size: 32,
        zone_capacity: 24,
        max_open: 5,
        max_active: 6,
        zasl_blocks: 16,
        mdts_blocks: 32,
        copy_max_ranges: 4,
        copy_max_range_blocks: 16,
        copy_max_blocks: 32,
        cross_zone_reads: true,
    }
}

fn superblock(uuid: [u8; 16], members: u32, index: u32, bs: u32) -> Superblock {
    Superblock {
        array_uuid: uuid,
        members,
        member_index: index,
        parity: 1,
        su_blocks: 8,
        meta_zones: 3,
        member_geometry: geo(bs),
        generation: 1,
        failed_member: None,
        second_failed_member: None,
    }
}

proptest! {
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = meta::decode_record(&bytes);
        let _ = Superblock::decode(&bytes);
        let _ = meta::decode_generations(&bytes, 100);
        let _ = meta::decode_zone_log(&bytes, 100);
        let _ = meta::RebuiltZones::decode(&bytes, 5, 100);
        let _ = meta::FinishedZones::decode(&bytes, 100);
        let bulk = bytes.first().copied().map_or(0, u32::from);
        let _ = meta::RelocInline::decode(&bytes, bulk, 5, 48);
    }

    #[test]
    fn relocation_payload_round_trips(member in 0u32..5, stale in any::<bool>(),
                                      first in 0u64..47, len in 1u64..48,
                                      epoch in 0u64..(1 << 63)) {
        let end = (first + len).min(48);
        let kind = if stale { meta::RelocKind::Stale } else { meta::RelocKind::Blocks };
        let r = meta::RelocInline { member, kind, first, end, epoch };
        let bulk = if stale { 0 } else { (end - first) as u32 };
        prop_assert_eq!(meta::RelocInline::decode(&r.encode(), bulk, 5, 48), Ok(r));
        // A member outside the array, a range past the zone, or bulk that does not match
        // the kind is corruption.
        prop_assert!(meta::RelocInline::decode(&r.encode(), bulk, member, 48).is_err());
        prop_assert!(meta::RelocInline::decode(&r.encode(), bulk, 5, end - 1).is_err());
        prop_assert!(meta::RelocInline::decode(&r.encode(), bulk + 1, 5, 48).is_err());
    }

    #[test]
    fn rebuilt_zones_round_trip(member in 0u32..5, target in 1u64..(1 << 63),
                                zones in proptest::collection::vec((0u32..100, 0u64..(1 << 63)), 0..300)) {
        let r = meta::RebuiltZones { member, target_generation: target, zones };
        prop_assert_eq!(meta::RebuiltZones::decode(&r.encode(), 5, 100), Ok(r.clone()));
        // One more member or zone than the array has is corruption.
        if !r.zones.is_empty() {
            prop_assert!(meta::RebuiltZones::decode(&r.encode(), 5, r.zones[0].0).is_err());
        }
        prop_assert!(meta::RebuiltZones::decode(&r.encode(), member, 100).is_err());
    }

    #[test]
    fn finished_zones_round_trip(zones in proptest::collection::vec((0u32..100, 0u64..(1 << 63)), 1..40)) {
        let f = meta::FinishedZones { zones };
        prop_assert_eq!(meta::FinishedZones::decode(&f.encode(), 100), Ok(f.clone()));
        // A zone beyond the array, no entries, or a cut payload: corruption.
        let top = f.zones.iter().map(|(z, _)| *z).max().unwrap_or(0);
        prop_assert!(meta::FinishedZones::decode(&f.encode(), top).is_err());
        prop_assert!(meta::FinishedZones::decode(&meta::FinishedZones::default().encode(), 100).is_err());
        let e = f.encode();
        prop_assert!(meta::FinishedZones::decode(&e[..e.len() - 1], 100).is_err());
    }

    #[test]
    fn damaged_records_with_magic_never_panic(tail in proptest::collection::vec(any::<u8>(), 56..600)) {
        let mut b = meta::MAGIC.to_vec();
        b.extend(tail);
        let _ = meta::decode_record(&b);
        let _ = Superblock::decode(&b);
    }

    #[test]
    fn superblock_round_trips(uuid in any::<[u8; 16]>(), members in 3u32..20, pick in any::<u32>(),
                              big in any::<bool>(), gen in 1u64..(1 << 63), lost in any::<u32>()) {
        let bs = if big { 4096 } else { 512 };
        let mut sb = superblock(uuid, members, pick % members, bs);
        sb.generation = gen;
        let lost = lost % members;
        sb.failed_member = (lost != sb.member_index).then_some(lost);
        let bytes = sb.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(bytes.len(), bs as usize);
        prop_assert_eq!(Superblock::decode(&bytes), Ok(sb));
    }

    #[test]
    fn superblock_with_two_failed_members_round_trips(members in 4u32..20, pick in any::<u32>(),
                                                      a in any::<u32>(), b in any::<u32>()) {
        let mut sb = superblock([3; 16], members, pick % members, 4096);
        sb.parity = 2;
        let others: Vec<u32> = (0..members).filter(|m| *m != sb.member_index).collect();
        let first = others[a as usize % others.len()];
        let rest: Vec<u32> = others.iter().copied().filter(|m| *m != first).collect();
        sb.failed_member = Some(first);
        sb.second_failed_member = Some(rest[b as usize % rest.len()]);
        let bytes = sb.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(Superblock::decode(&bytes), Ok(sb));
        // A second failed member in a RAID-5 array's superblock is corruption.
        sb.parity = 1;
        let bytes = sb.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(Superblock::decode(&bytes).is_err());
    }

    #[test]
    fn a_flipped_bit_is_never_accepted_silently(byte in 0usize..168, bit in 0u8..8) {
        let mut sb = superblock([7; 16], 4, 2, 512);
        sb.failed_member = Some(1);
        let mut bytes = sb.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
        bytes[byte] ^= 1 << bit;
        prop_assert!(Superblock::decode(&bytes).is_err(), "bit {} of byte {}", bit, byte);
    }

    #[test]
    fn generations_round_trip(first in 0u32..50, gens in proptest::collection::vec(0u64..(1 << 63), 1..50)) {
        let p = meta::encode_generations(first, &gens);
        prop_assert_eq!(meta::decode_generations(&p, 100), Ok((first, gens)));
    }

    #[test]
    fn headers_round_trip(start in 0u64..1 << 40, len in 0u64..1000, generation in 0u64..(1 << 63),
                          sequence in 1u64..(1 << 63), bulk in 0u32..100, crc in any::<u32>(),
                          inline in proptest::collection::vec(any::<u8>(), 0..448)) {
        let h = RecordHeader {
            kind: RecordType::PartialParity,
            inline_len: inline.len() as u32,
            start_lba: start,
            end_lba: start + len,
            generation,
            sequence,
            bulk_blocks: bulk,
            bulk_crc: crc,
            flags: meta::FLAG_CHECKPOINT,
        };
        let b = meta::encode_record(&h, &inline, 512).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (d, p) = meta::decode_record(&b).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(d, h);
        prop_assert_eq!(p, &inline[..]);
    }
}

#[test]
fn typed_errors_name_what_is_wrong() {
    assert_eq!(meta::decode_record(&[0u8; 512]), Err(MetaError::NotARecord));
    let sb = superblock([1; 16], 3, 0, 512);
    let good = match sb.encode() {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    let mut torn = good.clone();
    torn[100] ^= 0xFF;
    assert_eq!(Superblock::decode(&torn), Err(MetaError::Checksum));
    // A newer version with a valid CRC is refused as newer, not as damage.
    let mut newer = good.clone();
    newer[8..10].copy_from_slice(&(meta::VERSION + 1).to_le_bytes());
    let crc = crc32c::crc32c_append(
        crc32c::crc32c(&newer[..60]),
        &newer[64..64 + meta::SUPERBLOCK_BYTES],
    );
    newer[60..64].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        Superblock::decode(&newer),
        Err(MetaError::NewerVersion(meta::VERSION + 1))
    );
    // Version 1 (the records this version did not change) is still read.
    let mut v1 = good.clone();
    v1[8..10].copy_from_slice(&1u16.to_le_bytes());
    let crc = crc32c::crc32c_append(
        crc32c::crc32c(&v1[..60]),
        &v1[64..64 + meta::SUPERBLOCK_BYTES],
    );
    v1[60..64].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(Superblock::decode(&v1), Ok(sb));
    assert_eq!(meta::record_version(&v1), 1);
    assert_eq!(meta::record_version(&good), meta::VERSION);
    use meta::ZoneLogAction::{Finish, Reset};
    assert!(matches!(
        meta::decode_zone_log(&meta::encode_zone_log(100, Reset), 100),
        Err(MetaError::Corrupt(_))
    ));
    assert_eq!(
        meta::decode_zone_log(&meta::encode_zone_log(99, Reset), 100),
        Ok((99, Reset))
    );
    assert_eq!(
        meta::decode_zone_log(&meta::encode_zone_log(0, Finish), 100),
        Ok((0, Finish))
    );
    let mut bad = meta::encode_zone_log(0, Finish);
    bad[4] = 2;
    assert!(matches!(
        meta::decode_zone_log(&bad, 100),
        Err(MetaError::Corrupt(_))
    ));
}
