//! Property tests of ZapRAID's on-disk codecs (docs/FORMAT.md, "ZapRAID array"): every
//! decoder returns a typed error on arbitrary bytes and never panics, every encoder round
//! trips, and a flipped bit in an encoded structure is never accepted as the same value.

use proptest::prelude::*;
use zapraid::meta::{
    BlockRecord, FooterBlock, MetaError, RecordKind, SegmentHeader, TrimRecord, NO_LBA,
};

fn header() -> impl Strategy<Value = SegmentHeader> {
    (
        2u16..20,
        0u16..64,
        any::<[u8; 16]>(),
        1u32..1000,
        any::<u64>(),
        0u64..(1 << 63),
        any::<bool>(),
    )
        .prop_flat_map(
            |(k, member, uuid, stripes, volume_blocks, seq_floor, in_band)| {
                let n = usize::from(k) + 1;
                (1..=stripes, prop::collection::vec(0u32..500, n)).prop_map(
                    move |(group, zones)| SegmentHeader {
                        member: member % n as u16,
                        uuid,
                        segment: 7,
                        k,
                        m: 1,
                        group,
                        stripes,
                        footer_blocks: stripes.div_ceil(127),
                        volume_blocks,
                        seq_floor,
                        block_size: 4096,
                        oob_size: 64,
                        zone_count: 500,
                        zone_size: 4096,
                        zone_capacity: 2000,
                        zones,
                        state_gen: 0,
                        failed: 0,
                        in_band,
                    },
                )
            },
        )
}

fn record() -> impl Strategy<Value = BlockRecord> {
    prop_oneof![
        (0u64..NO_LBA, 1u64..(1 << 63), any::<u32>()).prop_map(|(lba, seq, stripe)| BlockRecord {
            kind: RecordKind::Data,
            lba,
            seq,
            stripe,
            kinds: 0,
        }),
        (any::<u64>(), any::<u64>(), any::<u32>(), any::<u16>()).prop_map(
            |(lba, seq, stripe, kinds)| BlockRecord {
                kind: RecordKind::Parity,
                lba,
                seq,
                stripe,
                kinds,
            }
        ),
        (0u64..NO_LBA, 1u64..(1 << 63), any::<u32>()).prop_map(|(lba, seq, stripe)| BlockRecord {
            kind: RecordKind::Trim,
            lba,
            seq,
            stripe,
            kinds: 0,
        }),
        any::<u32>().prop_map(BlockRecord::padding),
    ]
}

fn meta_of(r: &BlockRecord) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[..32].copy_from_slice(&r.encode());
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(b in prop::collection::vec(any::<u8>(), 0..4200)) {
        let _ = SegmentHeader::decode(&b);
        let _ = FooterBlock::decode(&b);
        let _ = TrimRecord::decode(&b);
        let _ = BlockRecord::decode(&b);
    }

    #[test]
    fn header_round_trips_and_rejects_flips(h in header(), bit in 0usize..(8 * 356)) {
        let b = h.encode(4096);
        prop_assert_eq!(SegmentHeader::decode(&b), Ok(h.clone()));
        let mut c = b.clone();
        c[bit / 8] ^= 1 << (bit % 8);
        prop_assert_ne!(SegmentHeader::decode(&c), Ok(h));
    }

    #[test]
    fn record_round_trips_and_rejects_flips(r in record(), bit in 0usize..(8 * 64)) {
        let b = meta_of(&r);
        prop_assert_eq!(BlockRecord::decode(&b), Ok(r));
        let mut c = b.clone();
        c[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(BlockRecord::decode(&c).is_err());
    }

    #[test]
    fn footer_round_trips_and_rejects_flips(
        rs in prop::collection::vec(prop::option::of(record()), 1..=127),
        bit in 0usize..(8 * 4096),
    ) {
        let f = FooterBlock { member: 2, segment: 9, first: 254, records: rs };
        let b = f.encode(4096);
        prop_assert_eq!(FooterBlock::decode(&b), Ok(f.clone()));
        let mut c = b.clone();
        c[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(FooterBlock::decode(&c).is_err());
    }

    #[test]
    fn trim_round_trips_and_rejects_flips(first in 0u64..(1 << 40), count in 1u64..(1 << 40), seq in 1u64..(1 << 63), bit in 0usize..(8 * 512)) {
        let t = TrimRecord { first, count, seq };
        let b = t.encode(512);
        prop_assert_eq!(TrimRecord::decode(&b), Ok(t));
        let mut c = b.clone();
        c[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(TrimRecord::decode(&c).is_err());
    }
}

#[test]
fn errors_are_typed() {
    let h = SegmentHeader {
        member: 0,
        uuid: [1; 16],
        segment: 0,
        k: 3,
        m: 1,
        group: 8,
        stripes: 98,
        footer_blocks: 1,
        volume_blocks: 100,
        seq_floor: 1,
        block_size: 4096,
        oob_size: 64,
        zone_count: 8,
        zone_size: 128,
        zone_capacity: 100,
        zones: vec![0; 4],
        state_gen: 3,
        failed: 0b10,
        in_band: false,
    };
    let mut b = h.encode(4096);
    assert_eq!(SegmentHeader::decode(&b), Ok(h.clone()));
    let with = |b: &mut Vec<u8>, version: u8, flags: u8| {
        b[8] = version;
        b[76] = flags;
        let crc = crc32c::crc32c(&b[..128]);
        b[128..132].copy_from_slice(&crc.to_le_bytes());
    };
    with(&mut b, 4, 0);
    assert_eq!(SegmentHeader::decode(&b), Err(MetaError::NewerVersion(4)));
    // Version 3 is the in-band form: flags bit 0 set, nothing else; version 2 has no flags.
    with(&mut b, 3, 1);
    assert_eq!(
        SegmentHeader::decode(&b),
        Ok(SegmentHeader {
            in_band: true,
            ..h.clone()
        })
    );
    assert_eq!(
        b,
        SegmentHeader {
            in_band: true,
            ..h.clone()
        }
        .encode(4096)
    );
    for (version, flags) in [(3, 0), (3, 3), (2, 1)] {
        with(&mut b, version, flags);
        assert!(
            matches!(SegmentHeader::decode(&b), Err(MetaError::Corrupt(_))),
            "version {version} flags {flags}"
        );
    }
    let bad = SegmentHeader { group: 99, ..h };
    assert!(matches!(
        SegmentHeader::decode(&bad.encode(4096)),
        Err(MetaError::Corrupt(_))
    ));
}
