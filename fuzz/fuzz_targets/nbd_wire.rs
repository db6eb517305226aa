//! Fuzz target: the NBD wire decoders, option haggling and request checks must return values
//! or errors, never panic, on any bytes; what decodes must re-encode to the same bytes, and
//! an accepted request must lie inside the export.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nbd::negotiate::{answer, ExportInfo};
use nbd::proto::{self, ClientFlags};
use nbd::request::{check, payload, Limits, Op};

fuzz_target!(|data: &[u8]| {
    let _ = proto::decode_greeting(data);
    let _ = proto::decode_client_flags(data, proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
    let _ = proto::decode_option_reply_header(data);
    let _ = proto::decode_info(data);
    let _ = proto::decode_rep_server(data);
    let _ = proto::decode_simple_reply(data);
    if let Ok(r) = proto::decode_info_request(data) {
        assert_eq!(proto::encode_info_request(&r), data);
    }
    if let Ok(h) = proto::decode_option_header(data) {
        let export = ExportInfo {
            name: b"vol".to_vec(),
            size: 1 << 30,
            transmission_flags: proto::FLAG_HAS_FLAGS,
            min_block: 1,
            preferred_block: 4096,
            max_block: 1 << 25,
        };
        let client = ClientFlags { fixed_newstyle: true, no_zeroes: h.length % 2 == 0 };
        let _ = answer(&export, client, h.option, &data[proto::OPTION_HEADER_LEN..]);
    }
    if let Ok(r) = proto::decode_request(data) {
        assert_eq!(&proto::encode_request(&r)[..], &data[..proto::REQUEST_LEN]);
        let limits = Limits { size: 1 << 30, max_request: 1 << 25, max_drain: 1 << 27 };
        let _ = payload(&r, &limits);
        if let Ok(Op::Read { offset, len } | Op::Write { offset, len, .. }) = check(&r, &limits) {
            assert!(offset + u64::from(len) <= limits.size && len <= limits.max_request);
        }
    }
});
