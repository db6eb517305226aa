//! The command-line grammar of `zonestack`. Session lines parse with the same grammar, so a
//! line in `zonestack session` means exactly what the subcommand means.

use std::ffi::OsString;
use std::path::PathBuf;

use bench::jobfile::parse_size;
use clap::{Args, Parser, Subcommand};

use crate::units::{parse_blocks, parse_byte, parse_u64};

#[derive(Parser, Debug)]
#[command(
    name = "zonestack",
    version,
    about = "A user-space storage stack for zoned-namespace (ZNS) SSDs",
    propagate_version = true
)]
pub struct Cli {
    /// Log to stderr at this level and above (RUST_LOG, when set, wins) [default: warn].
    #[arg(long, global = true, value_enum, value_name = "LEVEL")]
    pub log_level: Option<crate::logging::LogLevel>,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Create emulated devices in a temporary directory, run a short mixed workload, and print
    /// the zone report and statistics.
    Quickstart(QuickstartArgs),
    /// Create and inspect emulated ZNS device images; check any device against the ZNS checklist.
    #[command(subcommand)]
    Device(DeviceCmd),
    /// Report zones and send zone management commands.
    #[command(subcommand)]
    Zone(ZoneCmd),
    /// Read, write and append blocks.
    #[command(subcommand)]
    Io(IoCmd),
    /// Inject a device-side fault: move a zone to read_only or offline.
    Fault(FaultArgs),
    /// Run commands read from stdin, one per line, against one open device or RAIZN array.
    Session {
        /// Device image, or zoned block device (/dev/...); or give --raizn.
        #[arg(required_unless_present = "raizn")]
        path: Option<PathBuf>,
        /// Run the session on a RAIZN array instead: its member images in order, comma
        /// separated (a.img,b.img,c.img; `missing` for an absent member). The array stays
        /// open between lines; zone, io and flush lines address it.
        #[arg(
            long,
            value_delimiter = ',',
            conflicts_with = "path",
            value_name = "IMG,IMG,..."
        )]
        raizn: Vec<PathBuf>,
        /// Delay completions in real time as this flash timing profile says (see `zonestack
        /// device profiles`); off by default.
        #[arg(long, value_name = "PROFILE")]
        timing: Option<String>,
    },
    /// Export a host FTL volume over NBD (default: 1 GiB in memory on 127.0.0.1:10809).
    Serve(crate::serve::ServeArgs),
    /// The host FTL: a random-access block volume on a zoned device image.
    #[command(subcommand)]
    Ftl(crate::cmd_ftl::FtlCmd),
    /// RAIZN: a zoned RAID-5 array over device images (itself a zoned device).
    #[command(subcommand)]
    Raizn(crate::cmd_raizn::RaiznCmd),
    /// ZapRAID: a log-structured RAID block volume over k + m device images.
    #[command(subcommand)]
    Zapraid(crate::cmd_zapraid::ZapraidCmd),
    /// Benchmarks (they print figures; they are not tests). `zonestack bench JOBFILE` runs
    /// an fio job file on the emulator (`zonestack bench JOBFILE --help` for its options).
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Session only: flush the volatile write cache.
    #[command(hide = true)]
    Flush {
        /// Device image file.
        path: PathBuf,
    },
    /// Session only: cut power; unflushed writes are partly lost, as drawn from the seed.
    #[command(hide = true, name = "power-loss")]
    PowerLoss {
        /// Device image file (made by `zonestack device create`).
        path: PathBuf,
        /// Seed that draws how much of each zone's unflushed data survives.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

#[derive(Args, Debug)]
pub struct QuickstartArgs {
    /// Seed for the workload and the devices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the temporary directory and print its path.
    #[arg(long)]
    pub keep: bool,
}

#[derive(Subcommand, Debug)]
pub enum DeviceCmd {
    /// Create a device image.
    Create(CreateArgs),
    /// Show a device's geometry and limits.
    Info {
        /// Device image file (made by `zonestack device create`) or zoned block device.
        path: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Restart the device's controller: flush the write cache, then open zones become Closed
    /// (Empty if nothing was written), as after a clean power cycle. Between other commands
    /// the image stays "powered": open zones stay open.
    Restart {
        /// Device image file (made by `zonestack device create`).
        path: PathBuf,
    },
    /// List the named profiles.
    Profiles,
    /// Run the ZNS conformance kit against a device (image or /dev path): one line per
    /// checklist item (pass, FAIL with the difference, or not applicable with why); exits 1
    /// on any failure. The kit writes and resets zones.
    Check(CheckArgs),
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Device image file or zoned block device (/dev/...).
    pub path: PathBuf,
    /// Allow the check on a device holding data (any zone not Empty): the data is lost.
    #[arg(long)]
    pub destructive: bool,
    /// Run every item on the device's own zone layout, not only on the layout it was written
    /// for (a device whose zones cannot take the kit's layout, e.g. null_blk's MiB-sized
    /// zones); a failure may then come from the item's assumptions rather than the device.
    #[arg(long)]
    pub any_layout: bool,
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Image file to create.
    pub path: PathBuf,
    /// Named profile the other options adjust (see `zonestack device profiles`).
    #[arg(long, default_value = "small")]
    pub profile: String,
    /// Number of zones (default: the profile's).
    #[arg(long)]
    pub zones: Option<u32>,
    /// Zone size in bytes (K/M/G suffixes).
    #[arg(long, value_parser = parse_size)]
    pub zone_size: Option<u64>,
    /// Writable zone capacity in bytes; defaults to the profile's ratio, or the zone size
    /// when --zone-size is given.
    #[arg(long, value_parser = parse_size)]
    pub zone_cap: Option<u64>,
    /// Logical block size: 512 or 4096.
    #[arg(long)]
    pub block_size: Option<u32>,
    /// Per-block metadata bytes: 0, 8, 16 or 64.
    #[arg(long)]
    pub oob: Option<u32>,
    /// Maximum open zones, 0 for unlimited.
    #[arg(long)]
    pub max_open: Option<u32>,
    /// Maximum active zones, 0 for unlimited.
    #[arg(long)]
    pub max_active: Option<u32>,
    /// Zone Append size limit in bytes.
    #[arg(long, value_parser = parse_size)]
    pub zasl: Option<u64>,
    /// Disable the volatile write cache (every completed write is durable).
    #[arg(long)]
    pub no_write_cache: bool,
    /// Give the device the ZNS+ commands (zone compaction, TL_open, identify mapping;
    /// docs/ZNSPLUS.md); the image records it.
    #[arg(long)]
    pub zns_plus: bool,
    /// How the device plugs the valid blocks of TL-opened zones on the timing model
    /// (`--timing`): pp, PPA-ordered ahead of the write pointer in idle chip time (default),
    /// or lp, LBA-ordered when the write pointer passes them. Timing only, never data; the
    /// image records it. Needs --zns-plus.
    #[arg(
        long,
        requires = "zns_plus",
        value_name = "pp|lp",
        value_parser = crate::zone_plus::parse_plug_order
    )]
    pub plug_order: Option<emu::timing::PlugOrder>,
    /// Seed for the device's own choices (append order, power-loss cut points).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug, Clone, Copy)]
#[group(required = true, multiple = false)]
pub struct ZoneSelect {
    /// Zone index.
    #[arg(long)]
    pub zone: Option<u32>,
    /// Every zone the action selects (Select All).
    #[arg(long)]
    pub all: bool,
}

/// The device a zone or I/O command addresses: one device image, or a RAIZN array named by
/// its member images (the array is a zoned device too).
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// Device image file (made by `zonestack device create`) or zoned block device
    /// (/dev/...); or give --raizn.
    #[arg(required_unless_present = "raizn")]
    pub path: Option<PathBuf>,
    /// Address a RAIZN array instead: its member images in order, comma separated
    /// (a.img,b.img,c.img; `missing` for an absent member), as `zonestack raizn create` made it.
    #[arg(
        long,
        value_delimiter = ',',
        conflicts_with = "path",
        value_name = "IMG,IMG,..."
    )]
    pub raizn: Vec<PathBuf>,
}

impl Target {
    /// The image path of a single-device target ("" for an array).
    pub fn path(&self) -> &std::path::Path {
        self.path.as_deref().unwrap_or(std::path::Path::new(""))
    }
}

#[derive(Subcommand, Debug)]
pub enum ZoneCmd {
    /// Report zones, like `blkzone report` (positions in blocks).
    Report {
        #[command(flatten)]
        target: Target,
        /// Only zones in this state (empty, implicitly_opened, explicitly_opened, closed,
        /// full, read_only, offline).
        #[arg(long)]
        state: Option<String>,
        /// First zone to report.
        #[arg(long, default_value_t = 0)]
        start: u32,
        /// At most this many zones.
        #[arg(long)]
        count: Option<usize>,
        /// Print one JSON object (zone, start, capacity, wp, state per zone) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Explicitly open zones.
    Open {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        sel: ZoneSelect,
    },
    /// Close open zones.
    Close {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        sel: ZoneSelect,
    },
    /// Finish zones (make them Full).
    Finish {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        sel: ZoneSelect,
    },
    /// Reset zones (make them Empty; their data is gone).
    Reset {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        sel: ZoneSelect,
        /// Reset zones holding data on a real device (/dev/...); without it such a reset is
        /// refused. Images need no --force.
        #[arg(long)]
        force: bool,
    },
    /// Take read-only zones offline (a zone becomes read only by `zonestack fault`).
    Offline {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        sel: ZoneSelect,
    },
    /// ZNS+ zone compaction: copy extents inside the device (data and metadata; a copyback
    /// on the chip where source and destination share one), each landing at its destination
    /// zone's write pointer. Needs a device created with --zns-plus.
    Compact {
        #[command(flatten)]
        target: Target,
        /// One extent SRC:DST:BLOCKS (LBAs and count in decimal or 0x hex): copy BLOCKS
        /// blocks from SRC to DST, which must be its zone's write pointer as the earlier
        /// extents leave it. Repeat for more extents; they run in order, all or none.
        #[arg(
            long = "extent",
            value_name = "SRC:DST:BLOCKS",
            required = true,
            value_parser = crate::zone_plus::parse_extent
        )]
        extents: Vec<zns::CompactionExtent>,
    },
    /// ZNS+ TL_open: open a Full zone, or a Closed one with data, for threaded logging: its
    /// write pointer goes back to the first invalid block, writes fill the invalid blocks in
    /// order and the device keeps (plugs) the valid ones. Needs a device created with
    /// --zns-plus.
    #[command(name = "tl-open")]
    TlOpen {
        #[command(flatten)]
        target: Target,
        /// Zone index to TL-open.
        #[arg(long)]
        zone: u32,
        /// Blocks whose data the device must keep, relative to the zone start: inclusive
        /// ranges and single blocks (0-15,32,40-47), or `none`; every other block may be
        /// overwritten.
        #[arg(
            long,
            value_name = "RANGES",
            required_unless_present = "valid_file",
            conflicts_with = "valid_file"
        )]
        valid: Option<String>,
        /// Read the valid bitmap from this file instead: ceil(zone capacity / 8) bytes, bit i
        /// (byte i / 8, least significant bit first) set for block i valid.
        #[arg(long, value_name = "FILE")]
        valid_file: Option<PathBuf>,
    },
}

#[derive(Args, Debug, Clone)]
#[group(required = true, multiple = false, id = "source")]
pub struct DataSource {
    /// Fill every block with this byte (0xab, 171); needs --blocks.
    #[arg(long, value_parser = parse_byte, requires = "blocks")]
    pub pattern: Option<u8>,
    /// Write this file's bytes (a whole number of blocks).
    #[arg(long)]
    pub data_file: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum IoCmd {
    /// Zone Write at an LBA (it must be the zone's write pointer).
    Write {
        #[command(flatten)]
        target: Target,
        /// First logical block to write: the zone's write pointer (decimal or 0x hex).
        #[arg(long, value_parser = parse_u64)]
        lba: u64,
        /// Number of blocks to write (needed with --pattern; with --data-file, must match it).
        #[arg(long, value_parser = parse_blocks)]
        blocks: Option<u64>,
        #[command(flatten)]
        source: DataSource,
        /// Force Unit Access: durable when it completes.
        #[arg(long)]
        fua: bool,
    },
    /// Zone Append to a zone; prints the LBA the data landed at.
    Append {
        #[command(flatten)]
        target: Target,
        /// Zone index to append to.
        #[arg(long)]
        zone: u32,
        /// Number of blocks to append (needed with --pattern; with --data-file, must match it).
        #[arg(long, value_parser = parse_blocks)]
        blocks: Option<u64>,
        #[command(flatten)]
        source: DataSource,
        /// Force Unit Access: durable when it completes.
        #[arg(long)]
        fua: bool,
    },
    /// Read blocks; hexdump to stdout, or raw bytes to --out.
    Read {
        #[command(flatten)]
        target: Target,
        /// First logical block to read (decimal or 0x hex).
        #[arg(long, value_parser = parse_u64)]
        lba: u64,
        /// Number of blocks to read.
        #[arg(long, value_parser = parse_blocks)]
        blocks: u64,
        /// Write the raw bytes to this file instead of a hexdump on stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write Zeroes at the write pointer.
    Zeroes {
        #[command(flatten)]
        target: Target,
        /// First logical block: the zone's write pointer (decimal or 0x hex).
        #[arg(long, value_parser = parse_u64)]
        lba: u64,
        /// Number of blocks to zero.
        #[arg(long, value_parser = parse_blocks)]
        blocks: u64,
        /// Force Unit Access: durable when it completes.
        #[arg(long)]
        fua: bool,
    },
    /// Fill zones to capacity with a pattern (a progress bar on terminals).
    Fill {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        sel: ZoneSelect,
        /// Byte every block is filled with (0x5a or 90).
        #[arg(long, value_parser = parse_byte, default_value = "0x5a")]
        pattern: u8,
    },
}

#[derive(Args, Debug)]
pub struct FaultArgs {
    /// Device image file (made by `zonestack device create`).
    pub path: PathBuf,
    /// Zone index to fault.
    #[arg(long)]
    pub zone: u32,
    /// read_only or offline.
    #[arg(long)]
    pub state: String,
}

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// The emulator's own speed against a memcpy loop, and its file backend against fio.
    Emu(crate::bench_emu::BenchEmuArgs),
    /// Write amplification of the host FTL under random overwrites.
    Ftl(crate::bench_ftl::BenchFtlArgs),
    /// Host FTL mount time after a crash, by zones written since the last checkpoint.
    FtlMount(crate::bench_ftl::BenchMountArgs),
    /// Reproduce a paper's device figures on the zn540 timing profile, in virtual time.
    Paper(crate::bench_paper::BenchPaperArgs),
    /// Any other word is an fio job file: `zonestack bench JOBFILE [OPTIONS]`.
    #[command(external_subcommand)]
    JobFile(Vec<OsString>),
}
