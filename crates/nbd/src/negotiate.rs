//! Option haggling as a pure function: given the export and one option the client sent, the
//! exact bytes to answer with and whether to go on haggling, hang up, or start transmission.
//!
//! Fault model: the client is untrusted; option data may be any bytes. Malformed data is
//! answered with `NBD_REP_ERR_INVALID` and haggling continues, as the protocol asks; the only
//! option that ends the session on a bad name is `NBD_OPT_EXPORT_NAME`, which has no way to
//! report an error.

use crate::proto::{self, ClientFlags, ExportNameReply};

/// What the server exports, as the handshake describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    pub name: Vec<u8>,
    pub size: u64,
    pub transmission_flags: u16,
    pub min_block: u32,
    pub preferred_block: u32,
    pub max_block: u32,
}

/// Where the session goes after an answer has been sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Read the next option.
    Continue,
    /// Close the connection (after `NBD_OPT_ABORT`, or an `NBD_OPT_EXPORT_NAME` we refuse).
    Close,
    /// Enter the transmission phase.
    Transmit,
}

/// The bytes to send for one option and what follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub next: Next,
}

impl Answer {
    fn error(option: u32, reply_type: u32, message: &str) -> Answer {
        Answer {
            bytes: proto::encode_option_reply(option, reply_type, message.as_bytes()),
            next: Next::Continue,
        }
    }
}

/// Answers one option.
pub fn answer(export: &ExportInfo, client: ClientFlags, option: u32, data: &[u8]) -> Answer {
    match option {
        proto::OPT_EXPORT_NAME => export_name(export, client, data),
        proto::OPT_ABORT => Answer {
            bytes: proto::encode_option_reply(option, proto::REP_ACK, &[]),
            next: Next::Close,
        },
        proto::OPT_LIST => list(export, data),
        proto::OPT_INFO | proto::OPT_GO => info(export, option, data),
        proto::OPT_STRUCTURED_REPLY => Answer::error(
            option,
            proto::REP_ERR_UNSUP,
            "this server sends simple replies only",
        ),
        proto::OPT_STARTTLS => Answer::error(option, proto::REP_ERR_UNSUP, "TLS is not supported"),
        _ => Answer::error(option, proto::REP_ERR_UNSUP, "option not supported"),
    }
}

fn export_name(export: &ExportInfo, client: ClientFlags, data: &[u8]) -> Answer {
    if data != export.name.as_slice() {
        // The protocol leaves no way to say "unknown export" here except hanging up.
        return Answer {
            bytes: Vec::new(),
            next: Next::Close,
        };
    }
    let reply = ExportNameReply {
        size: export.size,
        flags: export.transmission_flags,
    };
    Answer {
        bytes: proto::encode_export_name_reply(&reply, client.no_zeroes),
        next: Next::Transmit,
    }
}

fn list(export: &ExportInfo, data: &[u8]) -> Answer {
    if !data.is_empty() {
        return Answer::error(
            proto::OPT_LIST,
            proto::REP_ERR_INVALID,
            "NBD_OPT_LIST takes no data",
        );
    }
    let Ok(server) = proto::encode_rep_server(&export.name) else {
        return Answer::error(
            proto::OPT_LIST,
            proto::REP_ERR_INVALID,
            "export name too long",
        );
    };
    let mut bytes = proto::encode_option_reply(proto::OPT_LIST, proto::REP_SERVER, &server);
    bytes.extend(proto::encode_option_reply(
        proto::OPT_LIST,
        proto::REP_ACK,
        &[],
    ));
    Answer {
        bytes,
        next: Next::Continue,
    }
}

fn info(export: &ExportInfo, option: u32, data: &[u8]) -> Answer {
    let Ok(request) = proto::decode_info_request(data) else {
        return Answer::error(
            option,
            proto::REP_ERR_INVALID,
            "malformed NBD_OPT_INFO/GO data",
        );
    };
    if request.name != export.name {
        return Answer::error(option, proto::REP_ERR_UNKNOWN, "no export by that name");
    }
    let mut bytes = Vec::new();
    let mut push = |payload: Vec<u8>| {
        bytes.extend(proto::encode_option_reply(
            option,
            proto::REP_INFO,
            &payload,
        ));
    };
    push(proto::encode_info_export(
        export.size,
        export.transmission_flags,
    ));
    // Block sizes are sent whether asked for or not: the protocol allows it, and a client
    // that did not ask still learns the preferred size.
    push(proto::encode_info_block_size(
        export.min_block,
        export.preferred_block,
        export.max_block,
    ));
    if request.requests.contains(&proto::INFO_NAME) {
        if let Ok(name) = proto::encode_info_name(&export.name) {
            push(name);
        }
    }
    bytes.extend(proto::encode_option_reply(option, proto::REP_ACK, &[]));
    let next = if option == proto::OPT_GO {
        Next::Transmit
    } else {
        Next::Continue
    };
    Answer { bytes, next }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{InfoRequest, REP_ACK, REP_INFO};

    fn export() -> ExportInfo {
        ExportInfo {
            name: b"vol".to_vec(),
            size: 1 << 20,
            transmission_flags: proto::FLAG_HAS_FLAGS | proto::FLAG_SEND_FLUSH,
            min_block: 1,
            preferred_block: 4096,
            max_block: 1 << 25,
        }
    }

    /// Splits a run of option replies into (reply type, data) pairs.
    fn replies(mut b: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let h = proto::decode_option_reply_header(b).expect("reply header");
            let end = proto::OPTION_REPLY_HEADER_LEN + h.length as usize;
            out.push((
                h.reply_type,
                b[proto::OPTION_REPLY_HEADER_LEN..end].to_vec(),
            ));
            b = &b[end..];
        }
        out
    }

    fn go_data(name: &[u8], requests: Vec<u16>) -> Vec<u8> {
        proto::encode_info_request(&InfoRequest {
            name: name.to_vec(),
            requests,
        })
    }

    #[test]
    fn go_sends_export_and_block_size_then_ack_and_transmits() {
        let data = go_data(b"vol", vec![proto::INFO_BLOCK_SIZE, proto::INFO_NAME]);
        let a = answer(&export(), ClientFlags::default(), proto::OPT_GO, &data);
        assert_eq!(a.next, Next::Transmit);
        let r = replies(&a.bytes);
        let types: Vec<u32> = r.iter().map(|(t, _)| *t).collect();
        assert_eq!(types, vec![REP_INFO, REP_INFO, REP_INFO, REP_ACK]);
        assert_eq!(
            proto::decode_info(&r[0].1),
            Ok(proto::Info::Export {
                size: 1 << 20,
                flags: export().transmission_flags
            })
        );
        assert_eq!(
            proto::decode_info(&r[1].1),
            Ok(proto::Info::BlockSize {
                min: 1,
                preferred: 4096,
                max: 1 << 25
            })
        );
        assert_eq!(
            proto::decode_info(&r[2].1),
            Ok(proto::Info::Name(b"vol".to_vec()))
        );
    }

    #[test]
    fn info_does_not_transmit_and_unknown_names_are_err_unknown() {
        let a = answer(
            &export(),
            ClientFlags::default(),
            proto::OPT_INFO,
            &go_data(b"vol", vec![]),
        );
        assert_eq!(a.next, Next::Continue);
        let a = answer(
            &export(),
            ClientFlags::default(),
            proto::OPT_GO,
            &go_data(b"other", vec![]),
        );
        assert_eq!(a.next, Next::Continue);
        assert_eq!(replies(&a.bytes)[0].0, proto::REP_ERR_UNKNOWN);
        let a = answer(&export(), ClientFlags::default(), proto::OPT_GO, &[0, 0, 0]);
        assert_eq!(replies(&a.bytes)[0].0, proto::REP_ERR_INVALID);
    }

    #[test]
    fn export_name_replies_or_hangs_up() {
        let e = export();
        let a = answer(
            &e,
            ClientFlags {
                fixed_newstyle: true,
                no_zeroes: true,
            },
            1,
            b"vol",
        );
        assert_eq!((a.bytes.len(), a.next), (10, Next::Transmit));
        let a = answer(&e, ClientFlags::default(), proto::OPT_EXPORT_NAME, b"vol");
        assert_eq!(a.bytes.len(), 10 + proto::ZERO_PAD_LEN);
        let a = answer(&e, ClientFlags::default(), proto::OPT_EXPORT_NAME, b"nope");
        assert_eq!(
            a,
            Answer {
                bytes: Vec::new(),
                next: Next::Close
            }
        );
    }

    #[test]
    fn list_abort_and_unsupported_options() {
        let e = export();
        let c = ClientFlags::default();
        let r = replies(&answer(&e, c, proto::OPT_LIST, &[]).bytes);
        assert_eq!(r[0].0, proto::REP_SERVER);
        assert_eq!(proto::decode_rep_server(&r[0].1), Ok(b"vol".to_vec()));
        assert_eq!(r[1].0, REP_ACK);
        assert_eq!(
            replies(&answer(&e, c, proto::OPT_LIST, b"x").bytes)[0].0,
            proto::REP_ERR_INVALID
        );
        let a = answer(&e, c, proto::OPT_ABORT, &[]);
        assert_eq!((replies(&a.bytes)[0].0, a.next), (REP_ACK, Next::Close));
        for opt in [
            proto::OPT_STRUCTURED_REPLY,
            proto::OPT_STARTTLS,
            0,
            99,
            u32::MAX,
        ] {
            let a = answer(&e, c, opt, &[]);
            assert_eq!(
                (replies(&a.bytes)[0].0, a.next),
                (proto::REP_ERR_UNSUP, Next::Continue)
            );
        }
    }
}
