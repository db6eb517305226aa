//! Device counters: commands by type, blocks moved, and per-zone resets and writes.

/// Command kinds the counters distinguish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write,
    Append,
    WriteZeroes,
    Flush,
    Copy,
    ZoneMgmt,
    Report,
}

impl Op {
    pub const ALL: [Op; 8] = [
        Op::Read,
        Op::Write,
        Op::Append,
        Op::WriteZeroes,
        Op::Flush,
        Op::Copy,
        Op::ZoneMgmt,
        Op::Report,
    ];

    /// Whether the command changes the medium (refused on a device opened read-only).
    pub fn mutates(self) -> bool {
        matches!(
            self,
            Op::Write | Op::Append | Op::WriteZeroes | Op::Copy | Op::ZoneMgmt
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Append => "append",
            Op::WriteZeroes => "write_zeroes",
            Op::Flush => "flush",
            Op::Copy => "copy",
            Op::ZoneMgmt => "zone_mgmt",
            Op::Report => "report_zones",
        }
    }
}

/// A snapshot of the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Commands submitted, by `Op` index.
    pub commands: [u64; 8],
    /// Commands that completed with an error, by `Op` index.
    pub errors: [u64; 8],
    pub blocks_read: u64,
    pub blocks_written: u64,
    /// Blocks the device copied internally (Simple Copy).
    pub blocks_copied: u64,
    pub zone_resets: Vec<u64>,
    /// Write-type commands (write, append, write zeroes, copy) that landed in each zone.
    pub zone_writes: Vec<u64>,
    pub power_losses: u64,
    /// ZNS+ zone_compaction commands that succeeded (admitted as Copy).
    pub compactions: u64,
    /// Blocks copied by zone_compaction (also in `blocks_copied`).
    pub blocks_compacted: u64,
    /// ZNS+ tl_open commands that succeeded (admitted as zone management).
    pub tl_opens: u64,
    /// Valid blocks of TL-opened zones the device plugged (kept in place as the WP passed).
    pub blocks_plugged: u64,
}

impl Stats {
    pub fn new(zones: u32) -> Stats {
        Stats {
            zone_resets: vec![0; zones as usize],
            zone_writes: vec![0; zones as usize],
            ..Default::default()
        }
    }

    pub fn command(&mut self, op: Op) {
        self.commands[op as usize] += 1;
    }

    pub fn error(&mut self, op: Op) {
        self.errors[op as usize] += 1;
    }

    pub fn count(&self, op: Op) -> u64 {
        self.commands[op as usize]
    }
}
