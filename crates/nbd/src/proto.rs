//! The NBD wire format as pure functions over byte slices: the protocol's constants and the
//! encoders and decoders of every message a server and a client exchange.
//!
//! There is no I/O here. Every decoder takes the bytes it was given, checks lengths and magic
//! numbers, and returns a `ProtoError` on anything it cannot accept; none of them panics or
//! allocates more than the input it was handed. All integers are big-endian (network order).
//! Both directions are here (the server's and the client's) so that tests, a fuzz run and a
//! test client share one definition of the bytes.

/// `NBDMAGIC`, the first eight bytes a server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: second word of the greeting and the magic of every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every fixed-newstyle option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flags (server, 16 bits).
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags (32 bits).
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags (16 bits).
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_SEND_DF: u16 = 1 << 7;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Option types.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 10;
pub const OPT_SET_META_CONTEXT: u32 = 11;

/// Option reply types. Errors have bit 31 set.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_FLAG_ERROR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
pub const REP_ERR_PLATFORM: u32 = REP_FLAG_ERROR | 4;
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
pub const REP_ERR_SHUTDOWN: u32 = REP_FLAG_ERROR | 7;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_FLAG_ERROR | 8;
pub const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

/// Information types carried by `REP_INFO` and requested by `OPT_INFO` / `OPT_GO`.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

/// Error values of a reply (the protocol fixes these numbers, whatever the host's errno is).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ESHUTDOWN: u32 = 108;

/// Byte counts of the fixed-size messages.
pub const GREETING_LEN: usize = 18;
pub const CLIENT_FLAGS_LEN: usize = 4;
pub const OPTION_HEADER_LEN: usize = 16;
pub const OPTION_REPLY_HEADER_LEN: usize = 20;
pub const REQUEST_LEN: usize = 28;
pub const SIMPLE_REPLY_LEN: usize = 16;
/// The reserved zeroes after an `OPT_EXPORT_NAME` reply unless `NO_ZEROES` was agreed.
pub const ZERO_PAD_LEN: usize = 124;
/// Longest string (export name, message) the protocol allows.
pub const MAX_STRING_LEN: usize = 4096;

/// Why a run of bytes is not the message it was supposed to be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("message truncated: need {need} bytes, have {got}")]
    Truncated { need: usize, got: usize },
    #[error("bad magic {got:#x} (expected {expected:#x})")]
    BadMagic { expected: u64, got: u64 },
    #[error("client flags {0:#x} set bits the server did not offer")]
    BadClientFlags(u32),
    #[error("string of {0} bytes is longer than the protocol's 4096-byte limit")]
    StringTooLong(usize),
    #[error("option data of {got} bytes does not match its {expected}-byte layout")]
    LengthMismatch { expected: usize, got: usize },
}

/// A transmission-phase command type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    Read,
    Write,
    Disc,
    Flush,
    Trim,
    Cache,
    WriteZeroes,
    BlockStatus,
    /// A type this server does not know; replied to with `EINVAL`.
    Unknown(u16),
}

impl Command {
    pub fn from_wire(v: u16) -> Command {
        match v {
            0 => Command::Read,
            1 => Command::Write,
            2 => Command::Disc,
            3 => Command::Flush,
            4 => Command::Trim,
            5 => Command::Cache,
            6 => Command::WriteZeroes,
            7 => Command::BlockStatus,
            other => Command::Unknown(other),
        }
    }

    pub fn to_wire(self) -> u16 {
        match self {
            Command::Read => 0,
            Command::Write => 1,
            Command::Disc => 2,
            Command::Flush => 3,
            Command::Trim => 4,
            Command::Cache => 5,
            Command::WriteZeroes => 6,
            Command::BlockStatus => 7,
            Command::Unknown(v) => v,
        }
    }
}

/// The 28-byte header of a transmission request (a `WRITE` payload follows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub command: Command,
    /// Opaque to the server; echoed in the reply (newer texts call it the cookie).
    pub handle: u64,
    pub offset: u64,
    pub length: u32,
}

/// A simple reply header (`READ` data follows it on success).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimpleReply {
    pub error: u32,
    pub handle: u64,
}

/// The client's flags, once checked against what the server offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientFlags {
    pub fixed_newstyle: bool,
    pub no_zeroes: bool,
}

/// The header of an option request (its data follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub length: u32,
}

/// The header of an option reply (its data follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionReplyHeader {
    pub option: u32,
    pub reply_type: u32,
    pub length: u32,
}

/// The data of an `OPT_INFO` or `OPT_GO` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: Vec<u8>,
    pub requests: Vec<u16>,
}

/// One `REP_INFO` payload, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Info {
    Export {
        size: u64,
        flags: u16,
    },
    Name(Vec<u8>),
    Description(Vec<u8>),
    BlockSize {
        min: u32,
        preferred: u32,
        max: u32,
    },
    /// An information type this decoder does not know (clients must ignore these).
    Other(u16),
}

/// What the server sends after `OPT_EXPORT_NAME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportNameReply {
    pub size: u64,
    pub flags: u16,
}

fn need(bytes: &[u8], n: usize) -> Result<(), ProtoError> {
    if bytes.len() < n {
        return Err(ProtoError::Truncated {
            need: n,
            got: bytes.len(),
        });
    }
    Ok(())
}

// The getters below are only called after `need` proved the slice long enough; they still
// fall back to zero rather than index out of bounds, so a mistake here cannot panic.
fn be16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_be_bytes)
}

fn be32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

fn be64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

fn check_string(s: &[u8]) -> Result<(), ProtoError> {
    if s.len() > MAX_STRING_LEN {
        return Err(ProtoError::StringTooLong(s.len()));
    }
    Ok(())
}

/// Server greeting: `NBDMAGIC`, `IHAVEOPT`, handshake flags.
pub fn encode_greeting(handshake_flags: u16) -> [u8; GREETING_LEN] {
    let mut b = [0u8; GREETING_LEN];
    b[0..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..18].copy_from_slice(&handshake_flags.to_be_bytes());
    b
}

/// Decodes a server greeting, returning the handshake flags.
pub fn decode_greeting(b: &[u8]) -> Result<u16, ProtoError> {
    need(b, GREETING_LEN)?;
    let magic = be64(b, 0);
    if magic != NBDMAGIC {
        return Err(ProtoError::BadMagic {
            expected: NBDMAGIC,
            got: magic,
        });
    }
    let opt = be64(b, 8);
    if opt != IHAVEOPT {
        return Err(ProtoError::BadMagic {
            expected: IHAVEOPT,
            got: opt,
        });
    }
    Ok(be16(b, 16))
}

/// Checks the client's 32-bit flags against the handshake flags the server offered. The
/// protocol requires the server to drop a client that sets a flag it does not know or a flag
/// the server did not advertise.
pub fn decode_client_flags(b: &[u8], offered: u16) -> Result<ClientFlags, ProtoError> {
    need(b, CLIENT_FLAGS_LEN)?;
    let raw = be32(b, 0);
    let mut allowed = FLAG_C_FIXED_NEWSTYLE;
    if offered & FLAG_NO_ZEROES != 0 {
        allowed |= FLAG_C_NO_ZEROES;
    }
    if raw & !allowed != 0 {
        return Err(ProtoError::BadClientFlags(raw));
    }
    Ok(ClientFlags {
        fixed_newstyle: raw & FLAG_C_FIXED_NEWSTYLE != 0,
        no_zeroes: raw & FLAG_C_NO_ZEROES != 0,
    })
}

pub fn encode_client_flags(flags: u32) -> [u8; CLIENT_FLAGS_LEN] {
    flags.to_be_bytes()
}

pub fn encode_option_header(h: &OptionHeader) -> [u8; OPTION_HEADER_LEN] {
    let mut b = [0u8; OPTION_HEADER_LEN];
    b[0..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[8..12].copy_from_slice(&h.option.to_be_bytes());
    b[12..16].copy_from_slice(&h.length.to_be_bytes());
    b
}

pub fn decode_option_header(b: &[u8]) -> Result<OptionHeader, ProtoError> {
    need(b, OPTION_HEADER_LEN)?;
    let magic = be64(b, 0);
    if magic != IHAVEOPT {
        return Err(ProtoError::BadMagic {
            expected: IHAVEOPT,
            got: magic,
        });
    }
    Ok(OptionHeader {
        option: be32(b, 8),
        length: be32(b, 12),
    })
}

/// One complete option reply: header and data.
pub fn encode_option_reply(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(OPTION_REPLY_HEADER_LEN + data.len());
    b.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply_type.to_be_bytes());
    // Option reply data is built by this module from bounded pieces (names of at most 4096
    // bytes, fixed-size info records), so it always fits the 32-bit length field.
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
    b.extend_from_slice(&len.to_be_bytes());
    b.extend_from_slice(data);
    b
}

pub fn decode_option_reply_header(b: &[u8]) -> Result<OptionReplyHeader, ProtoError> {
    need(b, OPTION_REPLY_HEADER_LEN)?;
    let magic = be64(b, 0);
    if magic != OPTION_REPLY_MAGIC {
        return Err(ProtoError::BadMagic {
            expected: OPTION_REPLY_MAGIC,
            got: magic,
        });
    }
    Ok(OptionReplyHeader {
        option: be32(b, 8),
        reply_type: be32(b, 12),
        length: be32(b, 16),
    })
}

/// Data of `OPT_INFO` / `OPT_GO`: name length, name, request count, requested info types.
pub fn encode_info_request(r: &InfoRequest) -> Vec<u8> {
    let mut b = Vec::with_capacity(6 + r.name.len() + 2 * r.requests.len());
    b.extend_from_slice(&(r.name.len() as u32).to_be_bytes());
    b.extend_from_slice(&r.name);
    b.extend_from_slice(&(r.requests.len() as u16).to_be_bytes());
    for t in &r.requests {
        b.extend_from_slice(&t.to_be_bytes());
    }
    b
}

/// Decodes `OPT_INFO` / `OPT_GO` data; the lengths inside must account for every byte.
pub fn decode_info_request(b: &[u8]) -> Result<InfoRequest, ProtoError> {
    need(b, 4)?;
    let name_len = be32(b, 0) as usize;
    if name_len > MAX_STRING_LEN {
        return Err(ProtoError::StringTooLong(name_len));
    }
    need(b, 4 + name_len + 2)?;
    let name = b.get(4..4 + name_len).unwrap_or_default().to_vec();
    let count = be16(b, 4 + name_len) as usize;
    let expected = 4 + name_len + 2 + 2 * count;
    if b.len() != expected {
        return Err(ProtoError::LengthMismatch {
            expected,
            got: b.len(),
        });
    }
    let requests = (0..count).map(|i| be16(b, 6 + name_len + 2 * i)).collect();
    Ok(InfoRequest { name, requests })
}

/// `REP_INFO` data for `INFO_EXPORT`: export size and transmission flags.
pub fn encode_info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(12);
    b.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b
}

/// `REP_INFO` data for `INFO_BLOCK_SIZE`: minimum, preferred and maximum block size.
pub fn encode_info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(14);
    b.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    b.extend_from_slice(&min.to_be_bytes());
    b.extend_from_slice(&preferred.to_be_bytes());
    b.extend_from_slice(&max.to_be_bytes());
    b
}

/// `REP_INFO` data for `INFO_NAME`.
pub fn encode_info_name(name: &[u8]) -> Result<Vec<u8>, ProtoError> {
    check_string(name)?;
    let mut b = Vec::with_capacity(2 + name.len());
    b.extend_from_slice(&INFO_NAME.to_be_bytes());
    b.extend_from_slice(name);
    Ok(b)
}

/// Decodes the data of a `REP_INFO` reply, checking each known type's exact length.
pub fn decode_info(b: &[u8]) -> Result<Info, ProtoError> {
    need(b, 2)?;
    let exact = |n: usize| {
        if b.len() == n {
            Ok(())
        } else {
            Err(ProtoError::LengthMismatch {
                expected: n,
                got: b.len(),
            })
        }
    };
    let rest = || b.get(2..).unwrap_or_default().to_vec();
    match be16(b, 0) {
        INFO_EXPORT => {
            exact(12)?;
            Ok(Info::Export {
                size: be64(b, 2),
                flags: be16(b, 10),
            })
        }
        INFO_NAME => {
            check_string(b.get(2..).unwrap_or_default())?;
            Ok(Info::Name(rest()))
        }
        INFO_DESCRIPTION => {
            check_string(b.get(2..).unwrap_or_default())?;
            Ok(Info::Description(rest()))
        }
        INFO_BLOCK_SIZE => {
            exact(14)?;
            Ok(Info::BlockSize {
                min: be32(b, 2),
                preferred: be32(b, 6),
                max: be32(b, 10),
            })
        }
        other => Ok(Info::Other(other)),
    }
}

/// `REP_SERVER` data: the export's name (no description).
pub fn encode_rep_server(name: &[u8]) -> Result<Vec<u8>, ProtoError> {
    check_string(name)?;
    let mut b = Vec::with_capacity(4 + name.len());
    b.extend_from_slice(&(name.len() as u32).to_be_bytes());
    b.extend_from_slice(name);
    Ok(b)
}

/// Decodes `REP_SERVER` data, returning the export name (any description is dropped).
pub fn decode_rep_server(b: &[u8]) -> Result<Vec<u8>, ProtoError> {
    need(b, 4)?;
    let len = be32(b, 0) as usize;
    if len > MAX_STRING_LEN {
        return Err(ProtoError::StringTooLong(len));
    }
    need(b, 4 + len)?;
    Ok(b.get(4..4 + len).unwrap_or_default().to_vec())
}

/// The reply to `OPT_EXPORT_NAME`: size, transmission flags, and 124 zeroes unless the client
/// agreed to `NO_ZEROES`.
pub fn encode_export_name_reply(r: &ExportNameReply, no_zeroes: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(10 + ZERO_PAD_LEN);
    b.extend_from_slice(&r.size.to_be_bytes());
    b.extend_from_slice(&r.flags.to_be_bytes());
    if !no_zeroes {
        b.resize(10 + ZERO_PAD_LEN, 0);
    }
    b
}

/// Decodes the first ten bytes of an `OPT_EXPORT_NAME` reply (the caller skips any padding).
pub fn decode_export_name_reply(b: &[u8]) -> Result<ExportNameReply, ProtoError> {
    need(b, 10)?;
    Ok(ExportNameReply {
        size: be64(b, 0),
        flags: be16(b, 8),
    })
}

pub fn encode_request(r: &Request) -> [u8; REQUEST_LEN] {
    let mut b = [0u8; REQUEST_LEN];
    b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&r.flags.to_be_bytes());
    b[6..8].copy_from_slice(&r.command.to_wire().to_be_bytes());
    b[8..16].copy_from_slice(&r.handle.to_be_bytes());
    b[16..24].copy_from_slice(&r.offset.to_be_bytes());
    b[24..28].copy_from_slice(&r.length.to_be_bytes());
    b
}

/// Decodes a request header. Only the magic is checked here: flags, command and range are the
/// business of `request::check`, which answers them with an errno instead of a disconnect.
pub fn decode_request(b: &[u8]) -> Result<Request, ProtoError> {
    need(b, REQUEST_LEN)?;
    let magic = be32(b, 0);
    if magic != REQUEST_MAGIC {
        return Err(ProtoError::BadMagic {
            expected: REQUEST_MAGIC.into(),
            got: magic.into(),
        });
    }
    Ok(Request {
        flags: be16(b, 4),
        command: Command::from_wire(be16(b, 6)),
        handle: be64(b, 8),
        offset: be64(b, 16),
        length: be32(b, 24),
    })
}

pub fn encode_simple_reply(r: &SimpleReply) -> [u8; SIMPLE_REPLY_LEN] {
    let mut b = [0u8; SIMPLE_REPLY_LEN];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&r.error.to_be_bytes());
    b[8..16].copy_from_slice(&r.handle.to_be_bytes());
    b
}

pub fn decode_simple_reply(b: &[u8]) -> Result<SimpleReply, ProtoError> {
    need(b, SIMPLE_REPLY_LEN)?;
    let magic = be32(b, 0);
    if magic != SIMPLE_REPLY_MAGIC {
        return Err(ProtoError::BadMagic {
            expected: SIMPLE_REPLY_MAGIC.into(),
            got: magic.into(),
        });
    }
    Ok(SimpleReply {
        error: be32(b, 4),
        handle: be64(b, 8),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_round_trips_and_starts_with_nbdmagic() {
        let g = encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(decode_greeting(&g), Ok(3));
        let mut bad = g;
        bad[0] ^= 1;
        assert!(matches!(
            decode_greeting(&bad),
            Err(ProtoError::BadMagic { .. })
        ));
        assert!(matches!(
            decode_greeting(&g[..17]),
            Err(ProtoError::Truncated { .. })
        ));
    }

    #[test]
    fn client_flags_must_be_offered() {
        let both = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
        let offered = FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES;
        let f = decode_client_flags(&both.to_be_bytes(), offered);
        assert_eq!(
            f,
            Ok(ClientFlags {
                fixed_newstyle: true,
                no_zeroes: true
            })
        );
        // NO_ZEROES without the server offering it, and an unknown bit, are both refused.
        assert!(decode_client_flags(&both.to_be_bytes(), FLAG_FIXED_NEWSTYLE).is_err());
        assert!(decode_client_flags(&(1u32 << 2).to_be_bytes(), offered).is_err());
        assert_eq!(
            decode_client_flags(&0u32.to_be_bytes(), offered),
            Ok(ClientFlags::default())
        );
    }

    #[test]
    fn request_round_trips_with_exact_bytes() {
        let r = Request {
            flags: CMD_FLAG_FUA,
            command: Command::Write,
            handle: 0x0102_0304_0506_0708,
            offset: 4096,
            length: 512,
        };
        let b = encode_request(&r);
        assert_eq!(&b[..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(&b[4..8], &[0, 1, 0, 1]);
        assert_eq!(decode_request(&b), Ok(r));
        let mut bad = b;
        bad[3] = 0;
        assert!(decode_request(&bad).is_err());
    }

    #[test]
    fn unknown_commands_survive_a_round_trip() {
        for v in [5u16, 7, 8, 0xffff] {
            assert_eq!(Command::from_wire(v).to_wire(), v);
        }
        assert_eq!(Command::from_wire(9), Command::Unknown(9));
    }

    #[test]
    fn info_request_lengths_must_account_for_every_byte() {
        let r = InfoRequest {
            name: b"disk".to_vec(),
            requests: vec![INFO_BLOCK_SIZE, INFO_NAME],
        };
        let b = encode_info_request(&r);
        assert_eq!(decode_info_request(&b), Ok(r));
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode_info_request(&longer).is_err());
        assert!(decode_info_request(&b[..b.len() - 1]).is_err());
        let huge = (MAX_STRING_LEN as u32 + 1).to_be_bytes();
        assert_eq!(
            decode_info_request(&huge),
            Err(ProtoError::StringTooLong(4097))
        );
    }

    #[test]
    fn info_replies_round_trip() {
        let e = encode_info_export(1 << 30, FLAG_HAS_FLAGS | FLAG_SEND_FLUSH);
        assert_eq!(e.len(), 12);
        assert_eq!(
            decode_info(&e),
            Ok(Info::Export {
                size: 1 << 30,
                flags: 5
            })
        );
        let bs = encode_info_block_size(1, 4096, 32 << 20);
        assert_eq!(bs.len(), 14);
        assert_eq!(
            decode_info(&bs),
            Ok(Info::BlockSize {
                min: 1,
                preferred: 4096,
                max: 32 << 20
            })
        );
        assert!(decode_info(&bs[..13]).is_err());
        let n = encode_info_name(b"x").expect("short name");
        assert_eq!(decode_info(&n), Ok(Info::Name(b"x".to_vec())));
        assert_eq!(decode_info(&[0, 99]), Ok(Info::Other(99)));
    }

    #[test]
    fn export_name_reply_pads_unless_no_zeroes() {
        let r = ExportNameReply {
            size: 8192,
            flags: FLAG_HAS_FLAGS,
        };
        assert_eq!(encode_export_name_reply(&r, false).len(), 134);
        let short = encode_export_name_reply(&r, true);
        assert_eq!(short.len(), 10);
        assert_eq!(decode_export_name_reply(&short), Ok(r));
    }

    #[test]
    fn option_messages_round_trip() {
        let h = OptionHeader {
            option: OPT_GO,
            length: 7,
        };
        assert_eq!(decode_option_header(&encode_option_header(&h)), Ok(h));
        let rep = encode_option_reply(OPT_LIST, REP_SERVER, b"abc");
        let rh = decode_option_reply_header(&rep);
        assert_eq!(
            rh,
            Ok(OptionReplyHeader {
                option: OPT_LIST,
                reply_type: REP_SERVER,
                length: 3
            })
        );
        let srv = encode_rep_server(b"name").expect("short name");
        assert_eq!(decode_rep_server(&srv), Ok(b"name".to_vec()));
        assert!(encode_rep_server(&[b'a'; 4097]).is_err());
    }

    #[test]
    fn simple_reply_round_trips() {
        let r = SimpleReply {
            error: EINVAL,
            handle: 42,
        };
        let b = encode_simple_reply(&r);
        assert_eq!(&b[..4], &[0x67, 0x44, 0x66, 0x98]);
        assert_eq!(decode_simple_reply(&b), Ok(r));
    }
}
