//! Fixed newstyle negotiation as the protocol text describes it: the greeting, client flags,
//! `NBD_OPT_GO`, `INFO`, `LIST`, `ABORT`, `EXPORT_NAME`, refused and unknown options, and the
//! transmission flags the server advertises.

mod common;

use std::sync::Arc;

use common::{greet, info_or_go, read_option_reply, send_option, Client, Socket, TestServer};
use nbd::proto::{self, InfoRequest};
use nbd::MemDisk;

const SIZE: u64 = 1 << 20;

fn server(tweak: impl FnOnce(&mut nbd::ServerConfig)) -> TestServer {
    let disk = Arc::new(MemDisk::new(4096, SIZE / 4096).expect("memdisk"));
    TestServer::unix(disk, tweak)
}

fn fixed(s: &TestServer) -> Socket {
    let mut sock = Socket::connect(&s.addr).expect("connect");
    let flags = greet(
        &mut sock,
        proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES,
    )
    .expect("greet");
    assert_eq!(flags, proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
    sock
}

const BASE_FLAGS: u16 = proto::FLAG_HAS_FLAGS
    | proto::FLAG_SEND_FLUSH
    | proto::FLAG_SEND_FUA
    | proto::FLAG_SEND_TRIM
    | proto::FLAG_SEND_WRITE_ZEROES;

#[test]
fn go_reports_size_flags_and_block_sizes() {
    let s = server(|c| c.export_name = "vol".into());
    let mut c = Client::go(&s.addr, "vol").expect("go");
    assert_eq!(c.export.size, SIZE);
    assert_eq!(c.export.flags, BASE_FLAGS);
    assert_eq!(c.export.block, Some((1, 4096, 32 << 20)));
    // The connection is in transmission: a read works.
    assert_eq!(c.read(0, 4096), Ok(vec![0u8; 4096]));
    c.disconnect();
}

#[test]
fn multi_conn_is_advertised_only_when_configured() {
    let s = server(|c| c.multi_conn = true);
    assert_eq!(
        s.connect().export.flags,
        BASE_FLAGS | proto::FLAG_CAN_MULTI_CONN
    );
    let s = server(|_| {});
    assert_eq!(s.connect().export.flags & proto::FLAG_CAN_MULTI_CONN, 0);
}

#[test]
fn info_keeps_haggling_and_go_follows() {
    let s = server(|_| {});
    let mut sock = fixed(&s);
    let seen = info_or_go(&mut sock, proto::OPT_INFO, "")
        .expect("io")
        .expect("info");
    assert_eq!((seen.size, seen.block), (SIZE, Some((1, 4096, 32 << 20))));
    let seen = info_or_go(&mut sock, proto::OPT_GO, "")
        .expect("io")
        .expect("go");
    assert_eq!(seen.size, SIZE);
}

#[test]
fn unknown_export_names_get_err_unknown_and_haggling_continues() {
    let s = server(|c| c.export_name = "right".into());
    let mut sock = fixed(&s);
    assert_eq!(
        info_or_go(&mut sock, proto::OPT_GO, "wrong").expect("io"),
        Err(proto::REP_ERR_UNKNOWN)
    );
    assert_eq!(
        info_or_go(&mut sock, proto::OPT_INFO, "").expect("io"),
        Err(proto::REP_ERR_UNKNOWN)
    );
    assert!(info_or_go(&mut sock, proto::OPT_GO, "right")
        .expect("io")
        .is_ok());
}

#[test]
fn list_names_the_single_export() {
    let s = server(|c| c.export_name = "zonevol".into());
    let mut sock = fixed(&s);
    send_option(&mut sock, proto::OPT_LIST, &[]).expect("send");
    let (t, data) = read_option_reply(&mut sock, proto::OPT_LIST).expect("reply");
    assert_eq!(t, proto::REP_SERVER);
    assert_eq!(proto::decode_rep_server(&data), Ok(b"zonevol".to_vec()));
    assert_eq!(
        read_option_reply(&mut sock, proto::OPT_LIST)
            .expect("ack")
            .0,
        proto::REP_ACK
    );
    // LIST with data is malformed.
    send_option(&mut sock, proto::OPT_LIST, b"x").expect("send");
    assert_eq!(
        read_option_reply(&mut sock, proto::OPT_LIST)
            .expect("err")
            .0,
        proto::REP_ERR_INVALID
    );
}

#[test]
fn unsupported_options_get_err_unsup() {
    let s = server(|_| {});
    let mut sock = fixed(&s);
    for opt in [
        proto::OPT_STRUCTURED_REPLY,
        proto::OPT_STARTTLS,
        proto::OPT_SET_META_CONTEXT,
        77,
    ] {
        send_option(&mut sock, opt, &[]).expect("send");
        let (t, msg) = read_option_reply(&mut sock, opt).expect("reply");
        assert_eq!(t, proto::REP_ERR_UNSUP, "option {opt}");
        assert!(!msg.is_empty(), "error replies carry a message for people");
    }
    // Malformed GO data is ERR_INVALID, not a disconnect.
    send_option(&mut sock, proto::OPT_GO, &[0, 0, 0, 9]).expect("send");
    assert_eq!(
        read_option_reply(&mut sock, proto::OPT_GO)
            .expect("reply")
            .0,
        proto::REP_ERR_INVALID
    );
    assert!(info_or_go(&mut sock, proto::OPT_GO, "")
        .expect("io")
        .is_ok());
}

#[test]
fn abort_is_acknowledged_then_closed() {
    let s = server(|_| {});
    let mut sock = fixed(&s);
    send_option(&mut sock, proto::OPT_ABORT, &[]).expect("send");
    assert_eq!(
        read_option_reply(&mut sock, proto::OPT_ABORT)
            .expect("ack")
            .0,
        proto::REP_ACK
    );
    assert!(sock.is_closed_by_server());
}

fn export_name(s: &TestServer, client_flags: u32, name: &[u8]) -> Socket {
    let mut sock = Socket::connect(&s.addr).expect("connect");
    greet(&mut sock, client_flags).expect("greet");
    send_option(&mut sock, proto::OPT_EXPORT_NAME, name).expect("send");
    sock
}

#[test]
fn export_name_enters_transmission_with_or_without_zeroes() {
    let s = server(|c| c.export_name = "v".into());
    for (flags, pad) in [
        (proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES, 0),
        (0, 124),
    ] {
        let mut sock = export_name(&s, flags, b"v");
        let reply = sock.read_n(10 + pad).expect("export name reply");
        let r = proto::decode_export_name_reply(&reply).expect("decode");
        assert_eq!((r.size, r.flags), (SIZE, BASE_FLAGS));
        assert!(reply[10..].iter().all(|b| *b == 0));
        let mut c = Client::from_socket(sock);
        c.write(512, b"hello").expect("write");
        assert_eq!(c.read(512, 5), Ok(b"hello".to_vec()));
    }
}

#[test]
fn export_name_for_an_unknown_export_hangs_up() {
    let s = server(|c| c.export_name = "v".into());
    let mut sock = export_name(&s, proto::FLAG_C_FIXED_NEWSTYLE, b"other");
    assert!(sock.is_closed_by_server());
}

#[test]
fn client_flags_the_server_did_not_offer_end_the_connection() {
    let s = server(|_| {});
    for bad in [1u32 << 2, 1 << 31, proto::FLAG_C_FIXED_NEWSTYLE | 1 << 5] {
        let mut sock = Socket::connect(&s.addr).expect("connect");
        greet(&mut sock, bad).expect("greet");
        assert!(sock.is_closed_by_server(), "client flags {bad:#x}");
    }
    s.wait_for_connections(0);
    assert_eq!(s.handle.stats().protocol_errors, 3);
}

#[test]
fn bad_option_magic_and_oversized_option_data_end_the_connection() {
    let s = server(|_| {});
    let mut sock = fixed(&s);
    std::io::Write::write_all(&mut sock.w, &[0u8; 16]).expect("send");
    assert!(sock.is_closed_by_server());

    let mut sock = fixed(&s);
    let h = proto::OptionHeader {
        option: proto::OPT_GO,
        length: 1 << 20,
    };
    std::io::Write::write_all(&mut sock.w, &proto::encode_option_header(&h)).expect("send");
    assert!(sock.is_closed_by_server());
}

#[test]
fn go_answers_info_name_when_asked() {
    let s = server(|c| c.export_name = "named".into());
    let mut sock = fixed(&s);
    let req = InfoRequest {
        name: b"named".to_vec(),
        requests: vec![proto::INFO_NAME],
    };
    send_option(
        &mut sock,
        proto::OPT_INFO,
        &proto::encode_info_request(&req),
    )
    .expect("send");
    let mut infos = Vec::new();
    loop {
        let (t, data) = read_option_reply(&mut sock, proto::OPT_INFO).expect("reply");
        if t == proto::REP_ACK {
            break;
        }
        assert_eq!(t, proto::REP_INFO);
        infos.push(proto::decode_info(&data).expect("info"));
    }
    assert!(
        infos.contains(&proto::Info::Name(b"named".to_vec())),
        "{infos:?}"
    );
    assert!(infos
        .iter()
        .any(|i| matches!(i, proto::Info::Export { size: SIZE, .. })));
}

#[test]
fn a_client_that_never_finishes_the_handshake_is_dropped() {
    let s = server(|c| {
        c.handshake_timeout = std::time::Duration::from_millis(100);
        c.max_connections = 1;
    });
    // Greets, then says nothing more: it would hold the only connection slot forever.
    let mut silent = fixed(&s);
    assert!(silent.is_closed_by_server());
    s.wait_for_connections(0);
    assert_eq!(s.handle.stats().protocol_errors, 1);
    // The slot is free again.
    assert_eq!(s.connect().export.size, SIZE);
}
