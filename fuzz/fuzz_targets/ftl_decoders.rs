//! Fuzz target: the host FTL's decoders of on-disk bytes (block tag, zone header, trim record,
//! summary block, checkpoint header and body) must return values or errors, never panic, on
//! any bytes; what decodes must re-encode to the same bytes.
//!
//! The first byte picks the decoder; its top bit asks for the record's CRC-32C to be
//! recomputed first, so that inputs get past the checksum and reach the field validation.
#![no_main]

use ftl::checkpoint;
use ftl::records::{self, SummaryPlace};
use libfuzzer_sys::fuzz_target;

fn reseal(b: &mut [u8], covered: usize) {
    if b.len() >= covered + 4 {
        let crc = crc32c::crc32c(&b[..covered]);
        b[covered..covered + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |s| u32::from_le_bytes(s.try_into().unwrap_or([0; 4])))
}

fuzz_target!(|data: &[u8]| {
    let Some((&select, rest)) = data.split_first() else {
        return;
    };
    let fix = select & 0x80 != 0;
    let mut b = rest.to_vec();
    match select % 5 {
        0 => {
            if let Ok(t) = records::decode_tag(&b) {
                let mut again = [0u8; 16];
                records::encode_tag(t, &mut again);
                assert_eq!(&again[..], &b[..16]);
            }
        }
        1 => {
            if fix {
                reseal(&mut b, 28);
            }
            if let Ok(h) = records::decode_header(&b) {
                let mut again = vec![0u8; b.len()];
                records::encode_header(&h, &mut again);
                assert_eq!(&again[..32], &b[..32]);
            }
            if fix {
                reseal(&mut b, 32);
            }
            if let Ok(t) = records::decode_trim(&b) {
                let mut again = vec![0u8; b.len()];
                records::encode_trim(&t, &mut again);
                assert_eq!(&again[..36], &b[..36]);
            }
        }
        2 | 3 => {
            // The summary names its own place, so take the place from the bytes: then
            // only the count, the checksum and the tags stand in the way.
            let place = SummaryPlace {
                volume_id: u64_at(&b, 8),
                data_zone: u32_at(&b, 16),
                generation: u64_at(&b, 24),
                offset: u64_at(&b, 32),
            };
            let count = u32_at(&b, 20) as usize;
            if fix && count <= records::summary_capacity(b.len()) {
                reseal(&mut b, 40 + 16 * count);
            }
            if let Ok(tags) = records::decode_summary(&place, &b) {
                let mut again = vec![0u8; b.len()];
                records::encode_summary(&place, &tags, &mut again);
                let end = 44 + 16 * tags.len();
                assert_eq!(&again[..end], &b[..end]);
            }
        }
        _ => {
            // A 96-byte header (the rest of its 4096 bytes is zeros) and the body after it.
            if b.len() < 96 {
                return;
            }
            let (head, body) = b.split_at_mut(96);
            if fix {
                let n = u64_at(head, 80);
                if let Some(covered) = usize::try_from(n).ok().and_then(|n| body.get(..n)) {
                    let crc = crc32c::crc32c(covered);
                    head[88..92].copy_from_slice(&crc.to_le_bytes());
                }
                reseal(head, 92);
            }
            let Ok(h) = checkpoint::decode_header(head) else {
                return;
            };
            assert_eq!(&checkpoint::encode_header(&h)[..96], &head[..]);
            if let Ok(ck) = checkpoint::decode_body(&h, body) {
                let again = checkpoint::encode(&ck);
                assert_eq!(&again[..96], &head[..]);
                assert_eq!(&again[4096..], &body[..again.len() - 4096]);
            }
        }
    }
});
