//! Every FTL decoder of on-disk bytes (block tag, zone header, trim record, summary block,
//! checkpoint header and body), fuzz-style: random bytes never panic; valid encodings
//! round-trip; and valid encodings with a byte or a field changed and the CRC-32C recomputed
//! are either refused or decode to exactly what re-encodes to those bytes, so it is the field
//! validation, not the checksum, that stands between a bad value and its use.

use ftl::checkpoint::{self, Checkpoint, CkptError, CkptHeader, CkptZone};
use ftl::map::UNMAPPED;
use ftl::records::{
    self, RecordError, SummaryPlace, Tag, TlEntry, TlRecord, TrimRecord, ZoneHeader, COUNTER_LIMIT,
};
use ftl::Layout;
use proptest::prelude::*;
use zns::Geometry;

const BS: usize = 512;

fn geometry(zones: u32, cap: u64) -> Geometry {
    Geometry {
        block_size: BS as u32,
        oob_size: 16,
        zone_count: zones,
        zone_size: cap.next_power_of_two(),
        zone_capacity: cap,
        max_open: 12,
        max_active: 12,
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 8,
        copy_max_range_blocks: 16,
        copy_max_blocks: 16,
        cross_zone_reads: false,
    }
}

fn layouts() -> impl Strategy<Value = Layout> {
    (6u32..24, 8u64..48, 10u32..=900, 0u32..3).prop_filter_map(
        "the device must hold a volume",
        |(zones, cap, op, reserve)| Layout::new(geometry(zones, cap), op, reserve).ok(),
    )
}

/// A small deterministic generator, so one proptest seed picks a whole checkpoint.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A checkpoint that satisfies every rule of docs/FORMAT.md: distinct mapped blocks in used
/// zones past their header block, sequence numbers below the header's, valid counts that
/// cover the mapped blocks.
fn valid_checkpoint(l: &Layout, seed: u64) -> Checkpoint {
    let mut r = Rng(seed | 1);
    let cap = l.zone_blocks;
    let next_seq = 2 + r.below(1 << 40);
    let mut zones: Vec<CkptZone> = (0..l.data_zones)
        .map(|_| match r.below(3) as u8 {
            checkpoint::ZONE_FREE => CkptZone {
                use_: checkpoint::ZONE_FREE,
                generation: r.below(1000),
                scan_from: 0,
                valid: 0,
            },
            use_ => CkptZone {
                use_,
                generation: 1 + r.below(1000),
                scan_from: if use_ == checkpoint::ZONE_FULL {
                    cap
                } else {
                    r.below(cap + 1)
                },
                valid: 0,
            },
        })
        .collect();
    let mut free_pbas: Vec<u32> = (0..l.physical_blocks())
        .filter(|p| {
            zones[(p / cap) as usize].use_ != checkpoint::ZONE_FREE && p % cap != 0 && {
                r.below(2) == 0
            }
        })
        .map(|p| p as u32)
        .collect();
    let mut l2p = Vec::new();
    let mut seq = Vec::new();
    for _ in 0..l.volume_blocks {
        let mapped = r.below(2) == 0 && !free_pbas.is_empty();
        if mapped {
            let i = r.below(free_pbas.len() as u64) as usize;
            let pba = free_pbas.swap_remove(i);
            zones[(u64::from(pba) / cap) as usize].valid += 1;
            l2p.push(pba);
            seq.push(1 + r.below(next_seq - 1));
        } else {
            l2p.push(UNMAPPED);
            seq.push(r.below(next_seq));
        }
    }
    // Live trim records also count as valid.
    for z in zones.iter_mut() {
        if z.use_ != checkpoint::ZONE_FREE {
            z.valid += r.below(cap - 1 - z.valid);
        }
    }
    let flags = (r.below(2) as u32) * checkpoint::FLAG_THREADED_LOGGING;
    Checkpoint {
        header: CkptHeader {
            version: checkpoint::version_for(flags),
            number: 1 + r.below(1 << 30),
            volume_id: r.next(),
            seq: next_seq,
            volume_blocks: l.volume_blocks,
            data_zones: l.data_zones,
            op_permille: l.op_permille,
            first_data_zone: l.first_data_zone,
            slot_zones: l.slot_zones,
            reserve_zones: l.reserve_zones,
            zone_blocks: l.zone_blocks,
            body_bytes: 0,
            body_crc: 0,
            flags,
        },
        l2p,
        seq,
        zones,
    }
}

fn decode_checkpoint(bytes: &[u8]) -> Result<Checkpoint, CkptError> {
    let h = checkpoint::decode_header(bytes)?;
    checkpoint::decode_body(&h, bytes.get(4096..).unwrap_or_default())
}

/// Recomputes both checksums of an encoded checkpoint after its bytes were changed.
fn reseal_checkpoint(bytes: &mut [u8]) {
    let body_crc = crc32c::crc32c(&bytes[4096..]);
    bytes[88..92].copy_from_slice(&body_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&bytes[..92]);
    bytes[92..96].copy_from_slice(&header_crc.to_le_bytes());
}

fn reseal(block: &mut [u8], covered: usize) {
    let crc = crc32c::crc32c(&block[..covered]);
    block[covered..covered + 4].copy_from_slice(&crc.to_le_bytes());
}

fn tags() -> impl Strategy<Value = Tag> {
    prop_oneof![
        (0..u64::MAX - 2, 1..COUNTER_LIMIT).prop_map(|(lba, seq)| Tag::Data { lba, seq }),
        (1..COUNTER_LIMIT).prop_map(|seq| Tag::Trim { seq }),
        Just(Tag::Unknown),
    ]
}

proptest! {
    #[test]
    fn block_tags(meta in prop::collection::vec(any::<u8>(), 0..40), a: u64, b: u64, tag in tags()) {
        let _ = records::decode_tag(&meta);
        let mut m = [0u8; 16];
        m[..8].copy_from_slice(&a.to_le_bytes());
        m[8..].copy_from_slice(&b.to_le_bytes());
        match records::decode_tag(&m) {
            Ok(t) => {
                let mut again = [0u8; 16];
                records::encode_tag(t, &mut again);
                prop_assert_eq!(again, m, "{:?} does not re-encode", t);
                prop_assert!(b < COUNTER_LIMIT && (b > 0 || a == 0));
            }
            Err(e) => prop_assert!(matches!(e, RecordError::Invalid(_)), "{e}"),
        }
        records::encode_tag(tag, &mut m);
        prop_assert_eq!(records::decode_tag(&m), Ok(tag));
    }

    #[test]
    fn zone_headers(
        noise in prop::collection::vec(any::<u8>(), 0..64),
        h in (any::<u64>(), any::<u32>(), 1..COUNTER_LIMIT)
            .prop_map(|(volume_id, data_zone, generation)| ZoneHeader { volume_id, data_zone, generation }),
        at in 0usize..28,
        flip in 1u8..=255,
        generation in prop_oneof![Just(0u64), COUNTER_LIMIT..=u64::MAX],
    ) {
        let _ = records::decode_header(&noise);
        let mut b = vec![0u8; BS];
        records::encode_header(&h, &mut b);
        prop_assert_eq!(records::decode_header(&b), Ok(h));
        let mut bad = b.clone();
        bad[at] ^= flip;
        reseal(&mut bad, 28);
        if let Ok(d) = records::decode_header(&bad) {
            let mut again = vec![0u8; BS];
            records::encode_header(&d, &mut again);
            prop_assert_eq!(again, bad);
        }
        records::encode_header(&ZoneHeader { generation, ..h }, &mut b);
        prop_assert!(matches!(records::decode_header(&b), Err(RecordError::Invalid(_))));
    }

    #[test]
    fn trim_records(
        noise in prop::collection::vec(any::<u8>(), 0..64),
        t in (0..u64::MAX / 2, 1..u64::MAX / 2, 1..COUNTER_LIMIT)
            .prop_map(|(lba, blocks, seq)| TrimRecord { lba, blocks, seq }),
        at in 0usize..32,
        flip in 1u8..=255,
    ) {
        let _ = records::decode_trim(&noise);
        let mut b = vec![0u8; BS];
        records::encode_trim(&t, &mut b);
        prop_assert_eq!(records::decode_trim(&b), Ok(t));
        let mut bad = b.clone();
        bad[at] ^= flip;
        reseal(&mut bad, 32);
        if let Ok(d) = records::decode_trim(&bad) {
            let mut again = vec![0u8; BS];
            records::encode_trim(&d, &mut again);
            prop_assert_eq!(again, bad);
        }
        for wrong in [
            TrimRecord { blocks: 0, ..t },
            TrimRecord { lba: u64::MAX, ..t },
            TrimRecord { seq: 0, ..t },
            TrimRecord { seq: u64::MAX, ..t },
        ] {
            records::encode_trim(&wrong, &mut b);
            prop_assert!(matches!(records::decode_trim(&b), Err(RecordError::Invalid(_))), "{:?}", wrong);
        }
    }

    #[test]
    fn threaded_logging_records(
        noise in prop::collection::vec(any::<u8>(), 0..200),
        seq in 1..COUNTER_LIMIT,
        entries in prop::collection::vec(
            (any::<u32>(), 1..COUNTER_LIMIT, 1..u64::MAX)
                .prop_map(|(data_zone, generation, first_hole)| TlEntry { data_zone, generation, first_hole }),
            1..=records::TL_RECORD_ZONES,
        ),
        at in 0usize..120,
        flip in 1u8..=255,
    ) {
        let _ = records::decode_tl_record(&noise);
        let mut r = TlRecord { seq, count: entries.len(), zones: [TlEntry::default(); records::TL_RECORD_ZONES] };
        r.zones[..entries.len()].copy_from_slice(&entries);
        let mut b = vec![0u8; BS];
        records::encode_tl_record(&r, &mut b);
        prop_assert_eq!(records::decode_tl_record(&b), Ok(r));
        // Any change the checksum is made to cover decodes as a record that encodes to the
        // same bytes, or is refused; never a panic.
        let covered = 24 + 24 * entries.len();
        let mut bad = b.clone();
        bad[at % covered] ^= flip;
        reseal(&mut bad, covered);
        if let Ok(d) = records::decode_tl_record(&bad) {
            let mut again = vec![0u8; BS];
            records::encode_tl_record(&d, &mut again);
            prop_assert_eq!(again, bad);
        }
    }

    #[test]
    fn summary_blocks(
        noise in prop::collection::vec(any::<u8>(), 0..600),
        tag_list in prop::collection::vec(tags(), 0..=records::summary_capacity(BS)),
        volume_id: u64,
        data_zone: u32,
        generation in 1..COUNTER_LIMIT,
        gap in 1u64..1000,
        at in 0usize..BS,
        flip in 1u8..=255,
    ) {
        let place = SummaryPlace { volume_id, data_zone, generation, offset: tag_list.len() as u64 + gap };
        let _ = records::decode_summary(&place, &noise);
        let mut b = vec![0u8; BS];
        records::encode_summary(&place, &tag_list, &mut b);
        prop_assert_eq!(records::decode_summary(&place, &b), Ok(tag_list.clone()));
        let covered = 40 + 16 * tag_list.len();
        let mut bad = b.clone();
        bad[at % covered] ^= flip;
        reseal(&mut bad, covered);
        if let Ok(d) = records::decode_summary(&place, &bad) {
            let mut again = vec![0u8; BS];
            records::encode_summary(&place, &d, &mut again);
            prop_assert_eq!(again, bad);
        }
        // A summary claiming the zone header block (or blocks before the zone) among its
        // tags is refused, not just skipped.
        let early = SummaryPlace { offset: tag_list.len() as u64, ..place };
        records::encode_summary(&early, &tag_list, &mut b);
        prop_assert!(matches!(records::decode_summary(&early, &b), Err(RecordError::Invalid(_))));
    }

    #[test]
    fn checkpoint_headers(
        noise in prop::collection::vec(any::<u8>(), 0..200),
        fields in prop::collection::vec(any::<u8>(), 96),
        l in layouts(),
        seed: u64,
        at in 8usize..92,
        flip in 1u8..=255,
    ) {
        let _ = checkpoint::decode_header(&noise);
        // Random fields under a good magic, version and checksum.
        let mut b = fields;
        b[..8].copy_from_slice(b"ZSTKFTLC");
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        reseal(&mut b, 92);
        if let Ok(h) = checkpoint::decode_header(&b) {
            prop_assert_eq!(&checkpoint::encode_header(&h)[..96], &b[..]);
        }
        let bytes = checkpoint::encode(&valid_checkpoint(&l, seed));
        let h = checkpoint::decode_header(&bytes);
        prop_assert!(h.is_ok(), "{:?}", h);
        let mut bad = bytes[..4096].to_vec();
        bad[at] ^= flip;
        reseal(&mut bad, 92);
        match checkpoint::decode_header(&bad) {
            Ok(d) => prop_assert_eq!(checkpoint::encode_header(&d), bad),
            Err(e) => prop_assert!(
                matches!(e, CkptError::Corrupt(_) | CkptError::Version(_)),
                "{e}"
            ),
        }
    }

    #[test]
    fn checkpoint_bodies(
        l in layouts(),
        seed: u64,
        at: usize,
        flip in 1u8..=255,
        entry: u32,
        noise in prop::collection::vec(any::<u8>(), 0..2000),
        raw in (any::<u64>(), any::<u32>(), any::<u32>(), any::<u64>(), any::<u64>()),
    ) {
        let ck = valid_checkpoint(&l, seed);
        let bytes = checkpoint::encode(&ck);
        let decoded = decode_checkpoint(&bytes);
        prop_assert!(decoded.is_ok(), "{:?}", decoded.as_ref().err());
        let decoded = decoded.expect("checked above");
        prop_assert_eq!(&decoded.l2p, &ck.l2p);
        prop_assert_eq!(&decoded.seq, &ck.seq);
        prop_assert_eq!(&decoded.zones, &ck.zones);
        prop_assert_eq!(checkpoint::encode(&decoded), bytes.clone());

        // One body byte changed, both checksums recomputed.
        let mut bad = bytes.clone();
        let i = 4096 + at % (bytes.len() - 4096);
        bad[i] ^= flip;
        reseal_checkpoint(&mut bad);
        if let Ok(d) = decode_checkpoint(&bad) {
            prop_assert_eq!(checkpoint::encode(&d), bad);
        }

        // One L2P entry replaced: accepted only if it obeys the rules, and an entry beyond
        // the data area is refused naming the LBA.
        let lba = (at as u64 % l.volume_blocks) as usize;
        let mut bad = bytes.clone();
        bad[4096 + 4 * lba..4096 + 4 * lba + 4].copy_from_slice(&entry.to_le_bytes());
        reseal_checkpoint(&mut bad);
        let result = decode_checkpoint(&bad);
        if entry != UNMAPPED && u64::from(entry) >= l.physical_blocks() {
            match &result {
                Err(CkptError::Corrupt(m)) => prop_assert!(m.contains(&format!("LBA {lba} ")), "{m}"),
                other => prop_assert!(false, "entry {entry} of LBA {lba}: {:?}", other),
            }
        }
        if let Ok(d) = result {
            prop_assert_eq!(checkpoint::encode(&d), bad);
        }

        // A hostile header (checksums aside) with random bytes as the body.
        let h = CkptHeader {
            volume_blocks: raw.0,
            data_zones: raw.1,
            reserve_zones: raw.2,
            zone_blocks: raw.3,
            body_bytes: raw.4,
            ..ck.header
        };
        let _ = checkpoint::decode_body(&h, &noise);
        let _ = checkpoint::decode_body(&ck.header, &noise);
    }
}

/// A freshly formatted volume's checkpoint (nothing mapped) decodes and matches its layout;
/// so does the header of a large drive's layout (ZN540-like zones, as many as 32-bit physical
/// block addresses allow), whose sizes are at the limits the header validation enforces.
#[test]
fn checkpoints_of_real_layouts_decode() {
    // Over-provisioning counts the checkpoint and reserve zones, so small layouts need more.
    for (zones, cap, op) in [(10, 16, 1000), (20, 64, 500), (64, 192, 200)] {
        let l = Layout::new(geometry(zones, cap), op, 2).expect("layout");
        let bytes = checkpoint::snapshot(&ftl::map::Mapping::new(l), 1, 9);
        let ck = decode_checkpoint(&bytes).expect("decodes");
        assert!(ck.l2p.iter().all(|p| *p == UNMAPPED));
        checkpoint::check_layout(&ck.header, &l).expect("matches its layout");
    }
    let big = Geometry {
        block_size: 4096,
        ..geometry(15_577, 275_712)
    };
    for op in [70, 900] {
        let l = Layout::new(big, op, 2).expect("large layout");
        assert!(l.physical_blocks() <= u64::from(u32::MAX));
        let h = CkptHeader {
            version: checkpoint::VERSION_1,
            number: 1,
            volume_id: 1,
            seq: 1,
            volume_blocks: l.volume_blocks,
            data_zones: l.data_zones,
            op_permille: l.op_permille,
            first_data_zone: l.first_data_zone,
            slot_zones: l.slot_zones,
            reserve_zones: l.reserve_zones,
            zone_blocks: l.zone_blocks,
            body_bytes: 12 * l.volume_blocks + 32 * u64::from(l.data_zones),
            body_crc: 0,
            flags: 0,
        };
        assert_eq!(
            checkpoint::decode_header(&checkpoint::encode_header(&h)),
            Ok(h)
        );
    }
}
