//! Fuzz target: the emulator image decoders (superblock, zone table entries and ZNS+ valid
//! bitmap slots) must return
//! errors, never panic, on any bytes; anything they accept must re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = emu::image::decode_superblock(data) {
        let again = emu::image::encode_superblock(&sb);
        assert_eq!(&again[..128], &data[..128]);
        for (i, entry) in data[128..].chunks(emu::image::ZONE_ENTRY_BYTES).enumerate().take(64) {
            let _ = emu::image::decode_zone(&sb.geometry, i as u32, entry);
        }
    }
    let g = emu::profile("small").unwrap_or_else(|| unreachable!());
    if data.len() >= 4 {
        let index = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) % g.zone_count;
        if let Ok(e) = emu::image::decode_zone_entry(&g, index, &data[4..]) {
            assert_eq!(&emu::image::encode_zone_entry(index, &e)[..], &data[4..4 + emu::image::ZONE_ENTRY_BYTES]);
        }
        if let Ok(map) = emu::image::decode_tl_slot(&g, index, &data[4..], g.zone_capacity) {
            let again = emu::image::encode_tl_slot(index, map.as_bytes(), 0);
            assert_eq!(&again[..], &data[4..4 + again.len()]);
        }
    }
});
