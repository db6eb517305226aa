//! The protocol core meets random bytes, in the manner of a fuzz target: every decoder
//! returns a value or an error and never panics; what decodes re-encodes to the same bytes;
//! option answers to random options are always well-formed reply streams; and request checks
//! never let a range past the end through.

use nbd::negotiate::{self, ExportInfo, Next};
use nbd::proto::{self, ClientFlags, Command, Request};
use nbd::request::{self, Limits, Op, Payload};
use proptest::prelude::*;

fn export() -> ExportInfo {
    ExportInfo {
        name: b"vol".to_vec(),
        size: 1 << 30,
        transmission_flags: proto::FLAG_HAS_FLAGS | proto::FLAG_SEND_FLUSH,
        min_block: 1,
        preferred_block: 4096,
        max_block: 32 << 20,
    }
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn decoders_take_any_bytes(b in bytes(200)) {
        let _ = proto::decode_greeting(&b);
        let _ = proto::decode_client_flags(&b, proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
        let _ = proto::decode_option_header(&b);
        let _ = proto::decode_option_reply_header(&b);
        let _ = proto::decode_info(&b);
        let _ = proto::decode_rep_server(&b);
        let _ = proto::decode_export_name_reply(&b);
        let _ = proto::decode_simple_reply(&b);
        if let Ok(r) = proto::decode_info_request(&b) {
            prop_assert_eq!(proto::encode_info_request(&r), b.clone());
        }
        if let Ok(r) = proto::decode_request(&b) {
            prop_assert_eq!(&proto::encode_request(&r)[..], &b[..proto::REQUEST_LEN]);
        }
    }

    #[test]
    fn requests_with_the_right_magic_round_trip(mut b in proptest::collection::vec(any::<u8>(), 28)) {
        b[..4].copy_from_slice(&proto::REQUEST_MAGIC.to_be_bytes());
        let r = proto::decode_request(&b).expect("right magic, right length");
        prop_assert_eq!(&proto::encode_request(&r)[..], &b[..]);
    }

    #[test]
    fn answers_to_any_option_are_well_formed(option in any::<u32>(), small in 0u32..16, data in bytes(300), fixed: bool, nz: bool) {
        // Small option numbers hit the known options; any other is an unknown one.
        let option = if option % 2 == 0 { small } else { option };
        let a = negotiate::answer(&export(), ClientFlags { fixed_newstyle: fixed, no_zeroes: nz }, option, &data);
        if option == proto::OPT_EXPORT_NAME {
            // The only answer without the option reply framing.
            prop_assert!(a.bytes.is_empty() || a.bytes.len() == 10 || a.bytes.len() == 134);
            return Ok(());
        }
        let mut rest = &a.bytes[..];
        let mut last = 0;
        while !rest.is_empty() {
            let h = proto::decode_option_reply_header(rest).expect("framed reply");
            prop_assert_eq!(h.option, option);
            let end = proto::OPTION_REPLY_HEADER_LEN + h.length as usize;
            prop_assert!(end <= rest.len());
            if h.reply_type == proto::REP_INFO {
                let info = &rest[proto::OPTION_REPLY_HEADER_LEN..end];
                prop_assert!(proto::decode_info(info).is_ok());
            }
            last = h.reply_type;
            rest = &rest[end..];
        }
        // Every answer ends in a final reply: an ACK or an error.
        prop_assert!(last == proto::REP_ACK || last & proto::REP_FLAG_ERROR != 0, "last {last:#x}");
        prop_assert!(a.next != Next::Transmit || option == proto::OPT_GO);
    }

    #[test]
    fn request_checks_never_pass_a_range_past_the_end(flags: u16, cmd in 0u16..10, offset: u64, length: u32, near_end: bool) {
        let limits = Limits { size: 1 << 20, max_request: 1 << 16, max_drain: 1 << 18 };
        let offset = if near_end { (1 << 20) - (offset % 8192) } else { offset };
        let req = Request { flags, command: Command::from_wire(cmd), handle: 1, offset, length };
        let within = |o: u64, l: u32| o.checked_add(u64::from(l)).is_some_and(|e| e <= limits.size);
        match request::check(&req, &limits) {
            Ok(Op::Read { offset, len }) | Ok(Op::Write { offset, len, .. }) => {
                prop_assert!(within(offset, len) && len <= limits.max_request);
            }
            Ok(Op::Trim { offset, len, .. }) | Ok(Op::WriteZeroes { offset, len, .. }) => {
                prop_assert!(within(offset, len));
            }
            Ok(Op::Flush) => prop_assert!(offset == 0 && length == 0),
            Ok(Op::Disconnect) => prop_assert_eq!(req.command, Command::Disc),
            Err(errno) => prop_assert!([proto::EINVAL, proto::ENOSPC].contains(&errno)),
        }
        match request::payload(&req, &limits) {
            Payload::Data(n) => prop_assert!(n <= limits.max_request),
            Payload::Drain(n) => prop_assert!(n <= limits.max_drain && n > limits.max_request),
            Payload::None | Payload::Disconnect => {}
        }
    }
}
