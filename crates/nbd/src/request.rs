//! What a transmission request means, decided before any I/O: which bytes follow its header
//! on the wire, and which device operation it asks for or which errno answers it.
//!
//! Fault model: the client is untrusted. Any field may hold any value; the header's magic was
//! already checked by `proto::decode_request`. A request we refuse gets an errno and the
//! connection goes on; only a payload too large to skip safely ends the connection, because
//! the protocol gives no other way to stay in step with the byte stream.

use crate::proto::{self, Command, Request};

/// Limits a request is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Export size in bytes.
    pub size: u64,
    /// Largest READ or WRITE length served (the advertised maximum block size).
    pub max_request: u32,
    /// Largest WRITE payload skipped to answer `EINVAL`; anything longer ends the connection.
    pub max_drain: u32,
}

/// What follows a request header on the wire and what to do with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    None,
    /// WRITE data within the limit: read it into a buffer.
    Data(u32),
    /// WRITE data over the limit but small enough to skip, keeping the stream in step.
    Drain(u32),
    /// WRITE data so large that skipping it is itself the denial of service; hang up.
    Disconnect,
}

/// A request that passed every check, in bytes (the I/O layer maps bytes to blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read { offset: u64, len: u32 },
    Write { offset: u64, len: u32, fua: bool },
    Flush,
    Trim { offset: u64, len: u32, fua: bool },
    WriteZeroes { offset: u64, len: u32, fua: bool },
    Disconnect,
}

impl Op {
    /// The NBD command's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Read { .. } => "READ",
            Op::Write { .. } => "WRITE",
            Op::Flush => "FLUSH",
            Op::Trim { .. } => "TRIM",
            Op::WriteZeroes { .. } => "WRITE_ZEROES",
            Op::Disconnect => "DISC",
        }
    }

    /// The byte range addressed: (offset, length), zeros for commands without one.
    pub fn range(&self) -> (u64, u32) {
        match *self {
            Op::Read { offset, len }
            | Op::Write { offset, len, .. }
            | Op::Trim { offset, len, .. }
            | Op::WriteZeroes { offset, len, .. } => (offset, len),
            Op::Flush | Op::Disconnect => (0, 0),
        }
    }
}

/// Decides what follows the header. Only WRITE carries data; for an unknown command we cannot
/// know, so we assume nothing follows (a wrong guess shows up as bad magic next, and ends the
/// connection cleanly).
pub fn payload(req: &Request, limits: &Limits) -> Payload {
    if req.command != Command::Write {
        return Payload::None;
    }
    if req.length <= limits.max_request {
        Payload::Data(req.length)
    } else if req.length <= limits.max_drain {
        Payload::Drain(req.length)
    } else {
        Payload::Disconnect
    }
}

/// The command flags each command accepts. FUA is accepted on every command because the
/// protocol says a server that advertises `SEND_FUA` must accept it anywhere (some clients set
/// it on reads); NO_HOLE only means something to WRITE_ZEROES.
fn allowed_flags(command: Command) -> u16 {
    match command {
        Command::WriteZeroes => proto::CMD_FLAG_FUA | proto::CMD_FLAG_NO_HOLE,
        _ => proto::CMD_FLAG_FUA,
    }
}

fn beyond_end(offset: u64, len: u32, size: u64) -> bool {
    match offset.checked_add(u64::from(len)) {
        Some(end) => end > size,
        None => true,
    }
}

/// Checks a request against the export. `Err` carries the errno to reply with.
pub fn check(req: &Request, limits: &Limits) -> Result<Op, u32> {
    if req.flags & !allowed_flags(req.command) != 0 {
        return Err(proto::EINVAL);
    }
    let fua = req.flags & proto::CMD_FLAG_FUA != 0;
    let (offset, len) = (req.offset, req.length);
    match req.command {
        Command::Read => {
            if len > limits.max_request || beyond_end(offset, len, limits.size) {
                return Err(proto::EINVAL);
            }
            Ok(Op::Read { offset, len })
        }
        Command::Write => {
            if len > limits.max_request {
                return Err(proto::EINVAL);
            }
            // The protocol asks for ENOSPC on writes past the end, EINVAL for other commands.
            if beyond_end(offset, len, limits.size) {
                return Err(proto::ENOSPC);
            }
            Ok(Op::Write { offset, len, fua })
        }
        Command::WriteZeroes => {
            if beyond_end(offset, len, limits.size) {
                return Err(proto::ENOSPC);
            }
            Ok(Op::WriteZeroes { offset, len, fua })
        }
        Command::Trim => {
            if beyond_end(offset, len, limits.size) {
                return Err(proto::EINVAL);
            }
            Ok(Op::Trim { offset, len, fua })
        }
        Command::Flush => {
            // Offset and length are reserved and must be zero.
            if offset != 0 || len != 0 {
                return Err(proto::EINVAL);
            }
            Ok(Op::Flush)
        }
        Command::Disc => Ok(Op::Disconnect),
        // CACHE and BLOCK_STATUS are not advertised (BLOCK_STATUS needs structured replies).
        Command::Cache | Command::BlockStatus | Command::Unknown(_) => Err(proto::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        size: 1 << 20,
        max_request: 1 << 16,
        max_drain: 1 << 18,
    };

    fn req(command: Command, flags: u16, offset: u64, length: u32) -> Request {
        Request {
            flags,
            command,
            handle: 7,
            offset,
            length,
        }
    }

    #[test]
    fn in_range_requests_pass_with_their_fua_bit() {
        let r = req(Command::Write, proto::CMD_FLAG_FUA, 4096, 512);
        assert_eq!(
            check(&r, &LIMITS),
            Ok(Op::Write {
                offset: 4096,
                len: 512,
                fua: true
            })
        );
        let r = req(Command::Read, 0, (1 << 20) - 1, 1);
        assert_eq!(
            check(&r, &LIMITS),
            Ok(Op::Read {
                offset: (1 << 20) - 1,
                len: 1
            })
        );
        let r = req(Command::WriteZeroes, proto::CMD_FLAG_NO_HOLE, 0, 1 << 20);
        assert_eq!(
            check(&r, &LIMITS),
            Ok(Op::WriteZeroes {
                offset: 0,
                len: 1 << 20,
                fua: false
            })
        );
        assert_eq!(check(&req(Command::Flush, 0, 0, 0), &LIMITS), Ok(Op::Flush));
        assert_eq!(
            check(&req(Command::Disc, 0, 0, 0), &LIMITS),
            Ok(Op::Disconnect)
        );
    }

    #[test]
    fn out_of_range_is_enospc_for_writes_and_einval_otherwise() {
        let end = 1u64 << 20;
        assert_eq!(
            check(&req(Command::Write, 0, end, 1), &LIMITS),
            Err(proto::ENOSPC)
        );
        assert_eq!(
            check(&req(Command::WriteZeroes, 0, end - 1, 2), &LIMITS),
            Err(proto::ENOSPC)
        );
        assert_eq!(
            check(&req(Command::Read, 0, end, 1), &LIMITS),
            Err(proto::EINVAL)
        );
        assert_eq!(
            check(&req(Command::Trim, 0, u64::MAX, 1), &LIMITS),
            Err(proto::EINVAL)
        );
        // Offset + length overflowing u64 is out of range, not a wrap-around.
        assert_eq!(
            check(&req(Command::Read, 0, u64::MAX, 2), &LIMITS),
            Err(proto::EINVAL)
        );
    }

    #[test]
    fn bad_flags_and_unknown_commands_are_einval() {
        let r = req(Command::Read, proto::CMD_FLAG_NO_HOLE, 0, 512);
        assert_eq!(check(&r, &LIMITS), Err(proto::EINVAL));
        let r = req(Command::Read, proto::CMD_FLAG_DF, 0, 512);
        assert_eq!(check(&r, &LIMITS), Err(proto::EINVAL));
        for c in [Command::Cache, Command::BlockStatus, Command::Unknown(99)] {
            assert_eq!(check(&req(c, 0, 0, 0), &LIMITS), Err(proto::EINVAL));
        }
        assert_eq!(
            check(&req(Command::Flush, 0, 0, 1), &LIMITS),
            Err(proto::EINVAL)
        );
    }

    #[test]
    fn oversized_requests_are_refused_and_their_payload_skipped_or_not() {
        let big = req(Command::Write, 0, 0, (1 << 16) + 1);
        assert_eq!(payload(&big, &LIMITS), Payload::Drain((1 << 16) + 1));
        assert_eq!(check(&big, &LIMITS), Err(proto::EINVAL));
        let absurd = req(Command::Write, 0, 0, u32::MAX);
        assert_eq!(payload(&absurd, &LIMITS), Payload::Disconnect);
        let read = req(Command::Read, 0, 0, u32::MAX);
        assert_eq!(payload(&read, &LIMITS), Payload::None);
        assert_eq!(check(&read, &LIMITS), Err(proto::EINVAL));
        assert_eq!(
            payload(&req(Command::Write, 0, 0, 512), &LIMITS),
            Payload::Data(512)
        );
    }
}
