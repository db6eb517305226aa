//! ZNS+ (OSDI '21) Fig. 8: throughput and WAF of a fileserver-like workload at 80-95%
//! utilisation, host-copy garbage collection (ZNS) against in-storage zone compaction (IZC),
//! with the same host FTL on the same ZNS+ device. The paper's IZC (copyback-aware
//! allocation on, its default) ran 1.47x, 1.73x, 1.89x and 2.65x ZNS at 80, 85, 90 and 95%
//! (the figure's labels), with similar WAF, and ZNS+ (threaded logging) 1.87x, 2.33x, 2.91x
//! and 3.93x.
//!
//! Setup, in virtual time on the `femu-mlc` profile (Table 2: 16 chips, 16 KiB pages, one
//! zone striped over all 16 chips; `--profile` runs the figure on Table 2's TLC or ZNAND
//! instead, for which the paper has only Table 4's IZC / ZNS at 90%): 64 zones of 32 MiB,
//! the paper's zone (one 128-page flash block on each of the 16 chips; 4 MiB zones, used
//! before, paid a whole block erase on each chip per 16 pages programmed, eight times the
//! paper's erase share), a 2 GiB device, and the host FTL formatted with 15%
//! over-provisioning (its checkpoint and reserve zones, 4 of the 64, come out of it;
//! utilisation is of the volume the FTL exports, as the paper's is of the file system).
//! Files of 64-256 KiB (mean 128 KiB, the paper's fileserver file size) fill `utilisation`
//! of the volume; then 16 writers rewrite whole files picked uniformly at random, a warm-up
//! of one footprint and then the measured bytes. Five setups on fresh devices from the same
//! seed:
//! - ZNS: collection reads the live blocks to the host and writes them back;
//! - IZC, source order: `zone_compaction` with destinations packed in source order;
//! - IZC, copyback-aware: `zone_compaction` placed as the paper's Fig. 5;
//! - ZNS+: copyback-aware IZC on a volume formatted with threaded logging (hybrid recycling),
//!   the device plugging PPA-ordered in idle chip time (PP, the paper's default);
//! - ZNS+ (LP): the same with LBA-ordered plugging, for the paper's Fig. 9 comparison.
//!
//! There is no file system: no node or metadata blocks (the FTL's own checkpoints and zone
//! headers play their part), and no reads, stats or deletes beside the writes; the paper's
//! 50 threads become 16 writers.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use emu::timing::{timing_profile, MovePaths, PlugOrder};
use emu::{ClockMode, EmuConfig, EmuDevice, SimRuntime};
use ftl::compaction::Placement;
use ftl::{FormatOptions, FtlVolume, MountOptions};
use futures::stream::{FuturesUnordered, StreamExt};
use zns::{BlockDevice, Geometry, SimRng, ZonedDevice};

use crate::paper::{Options, Row};

/// The profile of the paper's default setup (Table 2, MLC), the only medium of its Fig. 8.
pub const PROFILE: &str = "femu-mlc";
/// The media of the paper's Table 2, each a timing profile.
pub const PROFILES: [&str; 3] = ["femu-mlc", "femu-tlc", "znand"];
/// Paper Table 4: fileserver at the default utilisation (90%), IZC-D (every copy offloaded,
/// as the FTL's: it has no page cache) over ZNS, per medium; IZC-H (cached chunks written by
/// the host) in the comment: 1.43, 1.83, 2.10.
pub const PAPER_TABLE4_IZC_D_OVER_ZNS: [(&str, f64); 3] =
    [("femu-tlc", 1.12), ("femu-mlc", 1.75), ("znand", 2.33)];
const BLOCK_BYTES: u32 = 4096;
/// The figure's device: zones, blocks in each (32 MiB, the paper's zone), and the FTL's
/// over-provisioning (the FTL's two checkpoint zones and two reserve zones are paid from it).
pub const SHAPE: Shape = Shape {
    zones: 64,
    zone_blocks: 8192,
    op_permille: 150,
};

/// The size of a point's device and volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub zones: u32,
    pub zone_blocks: u64,
    pub op_permille: u32,
}
const WRITERS: usize = 16;

/// The block workload of a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Fig. 8's fileserver-like load: files of 64-256 KiB (mean 128 KiB, paper Table 3)
    /// rewritten whole, no flushes.
    Fileserver,
    /// An imitation of filebench's varmail (paper Table 3: 28 KiB files, 16 threads; an
    /// fsync after each append): files of 16-40 KiB (mean 28 KiB) rewritten whole, each
    /// write followed by a Flush before that writer's next one, so the chips idle between
    /// small synchronous requests. No file system: no creates, deletes or appends.
    VarmailLike,
}

impl Workload {
    /// File sizes in blocks, smallest and largest.
    fn file_blocks(self) -> (u64, u64) {
        match self {
            Workload::Fileserver => (16, 64),
            Workload::VarmailLike => (4, 10),
        }
    }

    /// Each write is followed by a Flush (fsync).
    fn syncs(self) -> bool {
        self == Workload::VarmailLike
    }

    fn name(self) -> &'static str {
        match self {
            Workload::Fileserver => "fileserver",
            Workload::VarmailLike => "varmail-like",
        }
    }
}

/// The utilisations of the figure, and the paper's IZC/ZNS throughput at each.
pub const PAPER_IZC_OVER_ZNS: [(u32, f64); 4] = [(80, 1.47), (85, 1.73), (90, 1.89), (95, 2.65)];
/// The paper's ZNS+/ZNS throughput at the same utilisations (the figure's labels).
pub const PAPER_ZNSPLUS_OVER_ZNS: [(u32, f64); 4] =
    [(80, 1.87), (85, 2.33), (90, 2.91), (95, 3.93)];
/// The copyback ratio section 4.1 gives for the fileserver workload.
pub const PAPER_COPYBACK_RATIO: f64 = 0.87;
/// "The WAF values of IZC and ZNS are similar" (section 4.2).
pub const PAPER_WAF_IZC_OVER_ZNS: f64 = 1.0;

/// How the FTL collects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    Zns,
    IzcSourceOrder,
    IzcCopybackAware,
    /// IZC copyback-aware with threaded logging and hybrid recycling (the paper's ZNS+),
    /// PPA-ordered plugging in idle chip time.
    ZnsPlus,
    /// ZNS+ with LBA-ordered plugging.
    ZnsPlusLp,
    /// Copyback-aware IZC on a device whose copies never use copyback (paper Fig. 7(a)'s
    /// "IZC (w/o cpbk)").
    IzcNoCopyback,
    /// ZNS+ on a device whose copies and plugs never use copyback ("ZNS+ (w/o cpbk)").
    ZnsPlusNoCopyback,
    /// ZNS with the paper's foreground compaction: a write that finds collection due waits,
    /// with every writer after it, until collection has freed what it wanted and a
    /// checkpoint is written (F2FS's foreground segment compaction, paper section 2.3).
    ZnsFg,
    /// Copyback-aware IZC with foreground compaction.
    IzcFg,
    /// ZNS+ with foreground compaction: threaded logging reclaims without the stop, and
    /// only a compaction hybrid recycling chooses (or one due while no re-opened zone has
    /// room) stops the writes.
    ZnsPlusFg,
}

impl Setup {
    pub const ALL: [Setup; 5] = [
        Setup::Zns,
        Setup::IzcSourceOrder,
        Setup::IzcCopybackAware,
        Setup::ZnsPlus,
        Setup::ZnsPlusLp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Setup::Zns => "ZNS",
            Setup::IzcSourceOrder => "IZC source order",
            Setup::IzcCopybackAware => "IZC copyback-aware",
            Setup::ZnsPlus => "ZNS+",
            Setup::ZnsPlusLp => "ZNS+ (LP)",
            Setup::IzcNoCopyback => "IZC w/o copyback",
            Setup::ZnsPlusNoCopyback => "ZNS+ w/o copyback",
            Setup::ZnsFg => "ZNS-fg",
            Setup::IzcFg => "IZC-fg",
            Setup::ZnsPlusFg => "ZNS+-fg",
        }
    }

    /// The device copies whole units by copyback where it can.
    fn copyback(self) -> bool {
        !matches!(self, Setup::IzcNoCopyback | Setup::ZnsPlusNoCopyback)
    }

    /// The volume is formatted with threaded logging.
    fn threaded(self) -> bool {
        matches!(
            self,
            Setup::ZnsPlus | Setup::ZnsPlusLp | Setup::ZnsPlusNoCopyback | Setup::ZnsPlusFg
        )
    }

    /// Writes stop for foreground compaction, as the paper's F2FS does.
    pub fn foreground(self) -> bool {
        matches!(self, Setup::ZnsFg | Setup::IzcFg | Setup::ZnsPlusFg)
    }

    /// The foreground-compaction setups, the paper's configuration (labelled rows).
    pub const FOREGROUND: [Setup; 3] = [Setup::ZnsFg, Setup::IzcFg, Setup::ZnsPlusFg];

    /// How the device plugs TL-opened zones (only threaded logging opens any).
    fn plug_order(self) -> PlugOrder {
        if self == Setup::ZnsPlusLp {
            PlugOrder::Lba
        } else {
            PlugOrder::Ppa
        }
    }

    /// The volume's mount options; `host_copy_ns` is the host time per block a host-level
    /// copy costs (only the ZNS setups copy through the host; the others are given it too and
    /// never pay it, as the same host would).
    fn options(self, host_copy_ns: u32) -> MountOptions {
        let (use_copy, compaction) = match self {
            Setup::Zns | Setup::ZnsFg => (false, None),
            Setup::IzcSourceOrder => (false, Some(Placement::SourceOrder)),
            Setup::IzcCopybackAware
            | Setup::ZnsPlus
            | Setup::ZnsPlusLp
            | Setup::IzcNoCopyback
            | Setup::ZnsPlusNoCopyback
            | Setup::IzcFg
            | Setup::ZnsPlusFg => (false, Some(Placement::CopybackAware)),
        };
        MountOptions {
            use_copy,
            compaction,
            // F2FS's foreground compaction takes one victim at a time, each ended by a
            // checkpoint before the next is chosen.
            serial_collection: self.foreground(),
            // The reproduction's checkpoints are full ones: the checkpoint after each victim
            // stands for F2FS's node and metadata update (paper Fig. 3 step 4, alpha = 20% of
            // the blocks moved), which a delta of a few pages would not (docs/BENCHMARKS.md).
            delta_checkpoints: false,
            host_copy_ns_per_block: host_copy_ns,
            ..MountOptions::default()
        }
    }
}

/// One measured point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub setup: Setup,
    /// The timing profile (medium) the point ran on.
    pub profile: &'static str,
    pub utilisation_pct: u32,
    pub mib_per_sec: f64,
    /// Device blocks written, copied or plugged per user block written, in the measured
    /// phase.
    pub waf: f64,
    /// Share of compacted and plugged blocks moved by copyback (0 when none was).
    pub copyback_ratio: f64,
    /// Share of die time busy over the measured phase (paper Fig. 9).
    pub chip_utilisation: f64,
    /// Blocks the device plugged (threaded logging) per user block, in the measured phase.
    pub plugged_per_user: f64,
    /// Share of the plugged blocks copied ahead in idle chip time (PP; paper Table 5 "BP"
    /// gives it among all copied blocks).
    pub plugged_idle_share: f64,
    /// The same bytes as a share of every block copied inside the device (compacted or
    /// plugged), as the paper's Table 5 "BP" counts them.
    pub copied_idle_share: f64,
    /// Partial units programmed padded (by Flush or FUA) per 1,000 user blocks.
    pub padded_per_kblock: f64,
    /// User blocks written in the measured phase.
    pub user_blocks: u64,
    /// Blocks moved (or read by the host) and their die time, by path, in the measured phase.
    pub paths: MovePaths,
    /// Die time of every program, read, erase and copyback in the measured phase.
    pub die_busy_ns: u64,
    /// Die time of the erases in the measured phase.
    pub erase_ns: u64,
    /// The FTL's own metadata blocks per user block in the measured phase: zone headers,
    /// summaries, trim records and checkpoints (paper Fig. 7(b)'s node and metadata
    /// overhead has no other counterpart here).
    pub meta_per_user: f64,
    /// Checkpoint blocks the FTL wrote per user block in the measured phase.
    pub checkpoint_per_user: f64,
    /// Foreground compactions the writes stopped for, per GiB of user writes (0 unless
    /// `Setup::foreground`).
    pub fg_stops_per_gib: f64,
    /// Share of the measured time the writes were stopped for foreground compaction.
    pub fg_stopped_share: f64,
    /// Share of die time busy while the writes were stopped (paper Fig. 10's point: the
    /// chips idle during a segment compaction).
    pub fg_stop_chip_utilisation: f64,
    /// Victims collected one at a time (`MountOptions::serial_collection`) per GiB of user
    /// writes.
    pub serial_victims_per_gib: f64,
    /// Mean model time of such a victim's copies, checkpoint and reset, in ms (paper Fig. 6's
    /// phases).
    pub serial_ms: [f64; 3],
    /// Plugged blocks invalidated while their re-opened zone waited for the hot stream
    /// (`TlCounters::stale_plugged_blocks`), per user block.
    pub stale_plugged_per_user: f64,
    /// Blocks the device programmed for host writes (user data, the FTL's metadata and
    /// checkpoints, host-level copies) in the measured phase: with `user_blocks`,
    /// `checkpoint_per_user` and `meta_per_user` it splits the programs' die time.
    pub blocks_programmed: u64,
    /// Zones reset per GiB of user writes (collection's victims, and zones the user's
    /// overwrites emptied) and zones re-opened by threaded logging for the hot stream, in
    /// the measured phase.
    pub resets_per_gib: f64,
    pub threaded_per_gib: f64,
    /// Turns of threaded logging (each re-opens one or more zones behind one record or
    /// checkpoint) per GiB, and the volume's hot user slots, each of which takes a zone of
    /// its own.
    pub threaded_turns_per_gib: f64,
    /// Of those turns, the ones that wrote a checkpoint instead of a record, per GiB.
    pub checkpoint_turns_per_gib: f64,
    pub hot_zones: u32,
    /// Times hybrid recycling chose compaction over threaded logging, per GiB.
    pub compaction_chosen_per_gib: f64,
    /// Share of the user blocks the FTL placed in its cold user stream (threaded logging
    /// serves the hot stream only).
    pub user_cold_share: f64,
}

/// The device: `profile`'s timing over `zones` zones of `zone_blocks` 4 KiB blocks.
pub fn device(
    profile: &str,
    zones: u32,
    zone_blocks: u64,
    seed: u64,
) -> Result<Arc<EmuDevice>, String> {
    let p = timing_profile(profile)
        .ok_or_else(|| format!("the {profile} timing profile is missing"))?;
    let g = Geometry {
        block_size: BLOCK_BYTES,
        oob_size: 16,
        zone_count: zones,
        zone_size: zone_blocks,
        zone_capacity: zone_blocks,
        max_open: zones.min(14),
        max_active: zones.min(14),
        zasl_blocks: 64,
        mdts_blocks: 64,
        copy_max_ranges: 16,
        copy_max_range_blocks: 64,
        copy_max_blocks: 64,
        cross_zone_reads: false,
    };
    let cfg = EmuConfig {
        seed,
        zns_plus: true,
        ..EmuConfig::new(g)
    };
    EmuDevice::new_memory(cfg)
        .and_then(|d| d.with_timing(p, ClockMode::Virtual))
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// Files of `w`'s sizes laid out back to back over `blocks`: (first block, length) each.
fn files(blocks: u64, w: Workload, rng: &mut SimRng) -> Vec<(u64, u64)> {
    let (min, max) = w.file_blocks();
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let n = rng.range_inclusive(min, max);
        if at + n > blocks {
            return out;
        }
        out.push((at, n));
        at += n;
    }
}

/// The writers' stop for foreground compaction: each write of a foreground setup first
/// takes the gate, and the one that finds a compaction due (`FtlVolume::compaction_due`)
/// holds it until the compaction and its checkpoint are done (with the setups' serial
/// collection: every victim's copies, checkpoint and reset, one victim after another), so
/// no later write starts meanwhile (F2FS's writers stop so in `f2fs_balance_fs`). Writes
/// already issued go on.
struct Gate {
    on: bool,
    lock: tokio::sync::Mutex<()>,
    /// The device, read before and after each stop (the dies' busy time during stops).
    dev: Arc<EmuDevice>,
    /// Compactions the writes stopped for.
    stops: AtomicU64,
    /// Model time the writes stopped for (the volume's clock), the device's model time
    /// over the same stops, and the die time spent in them.
    stopped_ns: AtomicU64,
    stopped_dev_ns: AtomicU64,
    stopped_die_ns: AtomicU64,
}

/// What a gate counted up to a moment: stops, their model time, the device's model time in
/// them and the die time spent in them.
#[derive(Clone, Copy, Debug, Default)]
struct StopCounts {
    stops: u64,
    ns: u64,
    dev_ns: u64,
    die_ns: u64,
}

impl StopCounts {
    fn since(self, before: StopCounts) -> StopCounts {
        StopCounts {
            stops: self.stops - before.stops,
            ns: self.ns - before.ns,
            dev_ns: self.dev_ns - before.dev_ns,
            die_ns: self.die_ns - before.die_ns,
        }
    }
}

impl Gate {
    fn new(on: bool, dev: Arc<EmuDevice>) -> Gate {
        Gate {
            on,
            lock: tokio::sync::Mutex::new(()),
            dev,
            stops: Default::default(),
            stopped_ns: Default::default(),
            stopped_dev_ns: Default::default(),
            stopped_die_ns: Default::default(),
        }
    }

    fn counts(&self) -> StopCounts {
        StopCounts {
            stops: self.stops.load(Relaxed),
            ns: self.stopped_ns.load(Relaxed),
            dev_ns: self.stopped_dev_ns.load(Relaxed),
            die_ns: self.stopped_die_ns.load(Relaxed),
        }
    }

    async fn pass(&self, vol: &FtlVolume) -> Result<(), zns::BlockError> {
        if !self.on {
            return Ok(());
        }
        let _held = self.lock.lock().await;
        if !vol.compaction_due() {
            return Ok(());
        }
        let (t0, began) = (self.dev.timing_counters(), tokio::time::Instant::now());
        if vol.compact_and_wait().await? {
            self.stops.fetch_add(1, Relaxed);
            let ns = began.elapsed().as_nanos() as u64;
            self.stopped_ns.fetch_add(ns, Relaxed);
            if let (Some(t0), Some(t1)) = (t0, self.dev.timing_counters()) {
                self.stopped_dev_ns
                    .fetch_add(t1.now_ns.saturating_sub(t0.now_ns), Relaxed);
                self.stopped_die_ns
                    .fetch_add(t1.die_done_ns().saturating_sub(t0.die_done_ns()), Relaxed);
            }
        }
        Ok(())
    }
}

/// Rewrites files picked at random until `bytes` are written, `WRITERS` at a time, each
/// write followed by a Flush when `sync`, each passing `gate` first.
async fn rewrite(
    vol: &FtlVolume,
    files: &[(u64, u64)],
    bytes: u64,
    (w, sync, gate): (Workload, bool, &Gate),
    rng: &mut SimRng,
) -> Result<(), String> {
    let bs = u64::from(BLOCK_BYTES);
    let data = vec![0x6du8; (w.file_blocks().1 * bs) as usize];
    let mut inflight = FuturesUnordered::new();
    let mut issued = 0u64;
    loop {
        while inflight.len() < WRITERS && issued < bytes && !files.is_empty() {
            let (lba, n) = files[rng.below(files.len() as u64) as usize];
            let buf = &data[..(n * bs) as usize];
            inflight.push(async move {
                gate.pass(vol).await?;
                vol.write(lba, buf, false).await?;
                if sync {
                    vol.flush().await?;
                }
                Ok::<(), zns::BlockError>(())
            });
            issued += n * bs;
        }
        match inflight.next().await {
            Some(r) => r.map_err(|e| format!("znsplus-fig8 write: {e}"))?,
            None => return Ok(()),
        }
    }
}

/// One point of the fileserver-like workload: `setup` at `utilisation_pct`, `bytes`
/// measured after the warm-up.
pub fn measure(
    setup: Setup,
    utilisation_pct: u32,
    bytes: u64,
    shape: Shape,
    seed: u64,
) -> Result<Point, String> {
    measure_workload(
        (PROFILE, setup),
        Workload::Fileserver,
        utilisation_pct,
        bytes,
        shape,
        seed,
    )
}

/// One point of workload `w`: `setup` on timing profile `profile` at `utilisation_pct`,
/// `bytes` measured after the warm-up, a host-level copy costing the host
/// `znsplus_fig6::HOST_COPY_NS_PER_BLOCK` per block.
pub fn measure_workload(
    (profile, setup): (&'static str, Setup),
    w: Workload,
    utilisation_pct: u32,
    bytes: u64,
    shape: Shape,
    seed: u64,
) -> Result<Point, String> {
    measure_workload_host(
        (profile, setup),
        w,
        utilisation_pct,
        bytes,
        shape,
        seed,
        crate::znsplus_fig6::HOST_COPY_NS_PER_BLOCK,
    )
}

/// The host's clock in virtual time: waits exactly on the device's clock (tokio's timer
/// would round each wait up to a whole millisecond).
pub struct VirtualHost;

impl ftl::HostClock for VirtualHost {
    fn wait(&self, d: std::time::Duration) -> ftl::host::HostWait {
        Box::pin(emu::timing::wait_until(
            ClockMode::Virtual,
            tokio::time::Instant::now() + d,
        ))
    }
}

/// `measure_workload` with a host-level copy costing the host `host_copy_ns` per block
/// moved (`ftl::MountOptions::host_copy_ns_per_block`; 0 charges nothing).
pub fn measure_workload_host(
    (profile, setup): (&'static str, Setup),
    w: Workload,
    utilisation_pct: u32,
    bytes: u64,
    shape: Shape,
    seed: u64,
    host_copy_ns: u32,
) -> Result<Point, String> {
    let rt = SimRuntime::new().map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(async {
        let dev = device(profile, shape.zones, shape.zone_blocks, seed)?;
        dev.set_plug_order(setup.plug_order());
        dev.set_copyback(setup.copyback());
        let err = |e: ftl::FtlError| format!("znsplus {} {}: {e}", w.name(), setup.name());
        let fmt = FormatOptions {
            threaded_logging: setup.threaded(),
            ..FormatOptions::with_op(shape.op_permille)
        };
        ftl::format(dev.as_ref(), fmt, seed, false)
            .await
            .map_err(err)?;
        let (vol, _) = FtlVolume::mount_with_clock(
            dev.clone(),
            setup.options(host_copy_ns),
            Arc::new(VirtualHost),
        )
        .await
        .map_err(err)?;
        let mut rng = SimRng::new(seed);
        let footprint = vol.size_blocks() * u64::from(utilisation_pct) / 100;
        let files = files(footprint, w, &mut rng);
        let written: u64 = files.iter().map(|f| f.1).sum();
        let bs = u64::from(BLOCK_BYTES);
        // Fill every file once, then warm up to a steady state of collection.
        // The warm-up does not sync: it only brings collection to a steady state (syncing
        // it would multiply a point's wall time for the same state).
        rewrite_all(&vol, &files, w).await?;
        let gate = Gate::new(setup.foreground(), dev.clone());
        rewrite(&vol, &files, written * bs, (w, false, &gate), &mut rng).await?;
        let stops0 = gate.counts();
        let (s0, t0) = (dev.stats(), dev.timing_counters().ok_or("timing is off")?);
        let (c0, tl0, ckpt0) = {
            let st = vol.stats();
            (st.counters, st.threaded, st.checkpoint_bytes)
        };
        let began = tokio::time::Instant::now();
        rewrite(&vol, &files, bytes, (w, w.syncs(), &gate), &mut rng).await?;
        let stopped = gate.counts().since(stops0);
        let secs = began.elapsed().as_secs_f64();
        let (s1, t1) = (dev.stats(), dev.timing_counters().ok_or("timing is off")?);
        let (c1, tl1, ckpt1, hot_zones) = {
            let st = vol.stats();
            (st.counters, st.threaded, st.checkpoint_bytes, st.hot_zones)
        };
        let user = c1.user_blocks - c0.user_blocks;
        let victims = c1.serial_victims - c0.serial_victims;
        let per_victim_ms = |a: u64, b: u64| (a - b) as f64 / 1e6 / victims.max(1) as f64;
        let serial_ms = [
            per_victim_ms(c1.serial_copy_ns, c0.serial_copy_ns),
            per_victim_ms(c1.serial_checkpoint_ns, c0.serial_checkpoint_ns),
            per_victim_ms(c1.serial_reset_ns, c0.serial_reset_ns),
        ];
        let checkpoint_blocks = (ckpt1 - ckpt0) / bs;
        let per_gib = |n: u64| n as f64 * (1u64 << 30) as f64 / (user.max(1) * bs) as f64;
        // Every metadata block the FTL wrote: zone headers, summaries, trim records and
        // checkpoints (`meta_blocks` counts the first three).
        let meta = c1.meta_blocks - c0.meta_blocks + checkpoint_blocks;
        vol.unmount().await.map_err(err)?;
        let chunk = dev
            .identify_mapping()
            .map_or(0, |m| u64::from(m.chunk_blocks));
        // Plugging programs flash too (threaded logging's copies inside the device).
        let plugged = s1.blocks_plugged - s0.blocks_plugged;
        let flash = (s1.blocks_written - s0.blocks_written)
            + (s1.blocks_copied - s0.blocks_copied)
            + plugged;
        let compacted = s1.blocks_compacted - s0.blocks_compacted;
        let copybacks = t1.flash.copybacks - t0.flash.copybacks;
        let tp = timing_profile(profile).ok_or("timing profile")?;
        let dies = tp.dies();
        let plugged_bytes = t1.plugged_bytes - t0.plugged_bytes;
        let idle_bytes = t1.plugged_idle_bytes - t0.plugged_idle_bytes;
        let copied_bytes = (compacted + plugged) * bs;
        let p = |a: fn(&MovePaths) -> emu::timing::PathCost| a(&t1.paths).since(&a(&t0.paths));
        let paths = MovePaths {
            copy_copyback: p(|m| m.copy_copyback),
            copy_read_program: p(|m| m.copy_read_program),
            plug_copyback: p(|m| m.plug_copyback),
            plug_ahead: p(|m| m.plug_ahead),
            plug_merged: p(|m| m.plug_merged),
            host_read: p(|m| m.host_read),
        };
        Ok(Point {
            setup,
            profile,
            user_blocks: user,
            paths,
            die_busy_ns: t1.flash.die_busy_ns - t0.flash.die_busy_ns,
            erase_ns: (t1.flash.erases - t0.flash.erases) * tp.block_erase_ns,
            meta_per_user: meta as f64 / user.max(1) as f64,
            checkpoint_per_user: checkpoint_blocks as f64 / user.max(1) as f64,
            stale_plugged_per_user: (tl1.stale_plugged_blocks - tl0.stale_plugged_blocks) as f64
                / user.max(1) as f64,
            blocks_programmed: s1.blocks_written - s0.blocks_written,
            resets_per_gib: per_gib(c1.gc_zones - c0.gc_zones),
            threaded_per_gib: per_gib(tl1.opens - tl0.opens),
            threaded_turns_per_gib: per_gib(tl1.turns - tl0.turns),
            checkpoint_turns_per_gib: per_gib(tl1.checkpoint_turns - tl0.checkpoint_turns),
            hot_zones,
            compaction_chosen_per_gib: per_gib(tl1.compaction_chosen - tl0.compaction_chosen),
            user_cold_share: (c1.stream_blocks[1] - c0.stream_blocks[1]) as f64
                / user.max(1) as f64,
            fg_stops_per_gib: stopped.stops as f64 * (1u64 << 30) as f64
                / (user.max(1) * bs) as f64,
            fg_stopped_share: stopped.ns as f64 / 1e9 / secs.max(1e-9),
            fg_stop_chip_utilisation: if stopped.dev_ns == 0 {
                0.0
            } else {
                stopped.die_ns as f64 / (stopped.dev_ns * u64::from(dies)) as f64
            },
            serial_victims_per_gib: victims as f64 * (1u64 << 30) as f64
                / (user.max(1) * bs) as f64,
            serial_ms,
            utilisation_pct,
            mib_per_sec: (user * bs) as f64 / (1 << 20) as f64 / secs.max(1e-9),
            waf: flash as f64 / user.max(1) as f64,
            // Plugging copies whole valid chunks by copyback too.
            copyback_ratio: if compacted + plugged == 0 {
                0.0
            } else {
                (copybacks * chunk) as f64 / (compacted + plugged) as f64
            },
            // Die time spent in the measured phase over the dies' time in it (model time of
            // its first and last submission): work booked past its end is not counted.
            chip_utilisation: t1.chip_utilisation_since(&t0, dies),
            plugged_per_user: plugged as f64 / user.max(1) as f64,
            padded_per_kblock: (t1.padded_programs - t0.padded_programs) as f64 * 1000.0
                / user.max(1) as f64,
            plugged_idle_share: if plugged_bytes == 0 {
                0.0
            } else {
                idle_bytes as f64 / plugged_bytes as f64
            },
            copied_idle_share: if copied_bytes == 0 {
                0.0
            } else {
                idle_bytes as f64 / copied_bytes as f64
            },
        })
    })
}

/// Writes every file once, `WRITERS` at a time, without flushes.
async fn rewrite_all(vol: &FtlVolume, files: &[(u64, u64)], w: Workload) -> Result<(), String> {
    let bs = u64::from(BLOCK_BYTES);
    let data = vec![0x6du8; (w.file_blocks().1 * bs) as usize];
    let mut inflight = FuturesUnordered::new();
    let mut next = files.iter();
    loop {
        while inflight.len() < WRITERS {
            let Some(&(lba, n)) = next.next() else {
                break;
            };
            let buf = &data[..(n * bs) as usize];
            inflight.push(async move { vol.write(lba, buf, false).await });
        }
        match inflight.next().await {
            Some(r) => r.map_err(|e| format!("znsplus-fig8 fill: {e}"))?,
            None => return Ok(()),
        }
    }
}

/// Every setup at every utilisation of the figure, on `o.profile` (femu-mlc by default).
pub fn points(o: &Options, shape: Shape) -> Result<Vec<Point>, String> {
    let profile = o.profile.unwrap_or(PROFILE);
    let mut out = Vec::new();
    for (u, _) in PAPER_IZC_OVER_ZNS {
        for s in Setup::ALL.into_iter().chain(Setup::FOREGROUND) {
            out.push(measure_workload_host(
                (profile, s),
                Workload::Fileserver,
                u,
                o.bytes_per_point,
                shape,
                o.seed,
                o.host_copy_ns_per_block(),
            )?);
        }
    }
    Ok(out)
}

/// The stops of foreground setups, each "setup: share of the time stopped, chip utilisation
/// while stopped, checkpoint blocks per user block, copyback ratio, victims per GiB and each
/// victim's copies / checkpoint / reset in ms".
fn stops_of(points: &[&Point]) -> String {
    let one = |p: &Point| {
        format!(
            "{} stopped {:.0}% of the time, chips {:.0}% busy then, checkpoint blocks per user block {:.3}, copyback ratio {:.2}, {:.1} victims per GiB of {:.1} / {:.1} / {:.1} ms copies / checkpoint / reset",
            p.setup.name(),
            p.fg_stopped_share * 100.0,
            p.fg_stop_chip_utilisation * 100.0,
            p.checkpoint_per_user,
            p.copyback_ratio,
            p.serial_victims_per_gib,
            p.serial_ms[0],
            p.serial_ms[1],
            p.serial_ms[2]
        )
    };
    points.iter().map(|p| one(p)).collect::<Vec<_>>().join("; ")
}

/// Where a point's die time went, per user block: "total us (moved per user block x us per
/// moved block, by path; programs of host writes split by what they carry; erases us)".
fn breakdown(p: &Point) -> String {
    let user = p.user_blocks.max(1) as f64;
    let m = &p.paths;
    let mut parts = Vec::new();
    let mut moved_ns = 0;
    for (name, c) in [
        ("compaction copyback", m.copy_copyback),
        ("compaction read+program", m.copy_read_program),
        ("plug copyback at WP", m.plug_copyback),
        ("plug copyback ahead", m.plug_ahead),
        ("plug merged", m.plug_merged),
        ("host read", m.host_read),
    ] {
        moved_ns += c.die_ns;
        if c.blocks > 0 {
            parts.push(format!(
                "{name} {:.2} x {:.0}",
                c.blocks as f64 / user,
                c.us_per_block()
            ));
        }
    }
    // The rest of the die time is the programs of what the host wrote (the merged plugs'
    // share of their pages is in their path): user data, checkpoints, other metadata
    // (zone headers, records) and host-level copies, split by blocks at the mean per block.
    let programs_ns = p.die_busy_ns.saturating_sub(moved_ns + p.erase_ns);
    let programmed = p.blocks_programmed.max(1) as f64;
    let us_per = programs_ns as f64 / 1000.0 / programmed;
    let ckpt = p.checkpoint_per_user;
    let other_meta = (p.meta_per_user - ckpt).max(0.0);
    let host_copies = (programmed / user - 1.0 - p.meta_per_user).max(0.0);
    parts.push(format!(
        "programs {:.1} us per block: user 1.00, checkpoints {ckpt:.3}, other metadata {other_meta:.3}, host copies {host_copies:.2} per user block",
        us_per
    ));
    format!(
        "{}; erases {:.0} us; zones reset {:.1} and re-opened by threaded logging {:.1} per GiB, compaction chosen over it {:.1} times per GiB; cold user stream {:.0}% of user blocks",
        parts.join(", "),
        p.erase_ns as f64 / 1000.0 / user,
        p.resets_per_gib,
        p.threaded_per_gib,
        p.compaction_chosen_per_gib,
        p.user_cold_share * 100.0
    )
}

/// The rows: per utilisation, IZC (copyback-aware, the paper's IZC) over ZNS throughput
/// against the paper, the WAF ratio, and the copyback ratio; the source-order IZC in the
/// labels. The paper's Fig. 8 is on MLC only: on another profile the Fig. 8 rows have no
/// paper value (NaN) and Table 4's IZC-D / ZNS at 90% is the one comparison the paper has.
/// Last, per utilisation, each setup's die time per user block and where it went.
pub fn rows_of(points: &[Point]) -> Vec<Row> {
    let mut rows = Vec::new();
    let Some(profile) = points.first().map(|p| p.profile) else {
        return rows;
    };
    let mlc = profile == PROFILE;
    let fig8 = |v: f64| if mlc { v } else { f64::NAN };
    let tag = if mlc {
        String::new()
    } else {
        format!(" [{profile}]")
    };
    for ((u, paper), (_, paper_plus)) in PAPER_IZC_OVER_ZNS.into_iter().zip(PAPER_ZNSPLUS_OVER_ZNS)
    {
        let at = |s: Setup| {
            points
                .iter()
                .find(|p| p.utilisation_pct == u && p.setup == s)
        };
        let (Some(zns), Some(cub), Some(cab)) = (
            at(Setup::Zns),
            at(Setup::IzcSourceOrder),
            at(Setup::IzcCopybackAware),
        ) else {
            continue;
        };
        let izc_over_zns = cab.mib_per_sec / zns.mib_per_sec.max(1e-9);
        rows.push(Row::new(
            format!(
                "znsplus-fig8{tag} IZC / ZNS throughput, {u}% utilisation ({:.1} / {:.1} MiB/s; source-order IZC {:.1}; chip utilisation {:.0}% / {:.0}%)",
                cab.mib_per_sec,
                zns.mib_per_sec,
                cub.mib_per_sec,
                cab.chip_utilisation * 100.0,
                zns.chip_utilisation * 100.0
            ),
            fig8(paper),
            izc_over_zns,
        ));
        if u == 90 {
            if let Some(&(_, t4)) = PAPER_TABLE4_IZC_D_OVER_ZNS
                .iter()
                .find(|(n, _)| *n == profile)
            {
                rows.push(Row::new(
                    format!(
                        "znsplus-fig8{tag} IZC / ZNS throughput, {u}% utilisation, against Table 4's IZC-D on {profile}"
                    ),
                    t4,
                    izc_over_zns,
                ));
            }
        }
        if let Some(plus) = at(Setup::ZnsPlus) {
            let lp = at(Setup::ZnsPlusLp).map_or(String::new(), |lp| {
                format!(
                    "; LP {:.1} MiB/s, chip utilisation {:.0}%",
                    lp.mib_per_sec,
                    lp.chip_utilisation * 100.0
                )
            });
            rows.push(Row::new(
                format!(
                    "znsplus-fig8{tag} ZNS+ / ZNS throughput, {u}% utilisation ({:.1} / {:.1} MiB/s; WAF {:.2}, plugged {:.2} per user block ({:.2} invalidated while its zone waited), {:.0}% of it ahead in idle chip time; chip utilisation {:.0}%{lp})",
                    plus.mib_per_sec,
                    zns.mib_per_sec,
                    plus.waf,
                    plus.plugged_per_user,
                    plus.stale_plugged_per_user,
                    plus.plugged_idle_share * 100.0,
                    plus.chip_utilisation * 100.0
                ),
                fig8(paper_plus),
                plus.mib_per_sec / zns.mib_per_sec.max(1e-9),
            ));
            rows.push(Row::new(
                format!(
                    "znsplus-fig8{tag} ZNS+ / IZC throughput, {u}% utilisation ({:.1} / {:.1} MiB/s; padded programs per 1,000 user blocks {:.1} / {:.1})",
                    plus.mib_per_sec, cab.mib_per_sec, plus.padded_per_kblock, cab.padded_per_kblock
                ),
                fig8(paper_plus / paper),
                plus.mib_per_sec / cab.mib_per_sec.max(1e-9),
            ));
        }
        rows.push(Row::new(
            format!(
                "znsplus-fig8{tag} IZC / ZNS WAF, {u}% utilisation ({:.2} / {:.2})",
                cab.waf, zns.waf
            ),
            PAPER_WAF_IZC_OVER_ZNS,
            cab.waf / zns.waf.max(1e-9),
        ));
        rows.push(Row::new(
            format!(
                "znsplus-fig8{tag} copyback ratio, copyback-aware IZC, {u}% utilisation (source order: {:.3})",
                cub.copyback_ratio
            ),
            PAPER_COPYBACK_RATIO,
            cab.copyback_ratio,
        ));
        // The paper's configuration: writes stop for foreground compaction (labelled rows).
        if let (Some(zf), Some(izf), Some(pf)) =
            (at(Setup::ZnsFg), at(Setup::IzcFg), at(Setup::ZnsPlusFg))
        {
            let chip = |p: &Point| p.chip_utilisation * 100.0;
            let ratio = |a: &Point, b: &Point| a.mib_per_sec / b.mib_per_sec.max(1e-9);
            rows.push(Row::new(
                format!(
                    "znsplus-fig8{tag} IZC-fg / ZNS-fg throughput, {u}% utilisation, foreground compaction ({:.1} / {:.1} MiB/s; stops per GiB {:.1} / {:.1}; WAF {:.2} / {:.2}; chip utilisation {:.0}% / {:.0}%; {})",
                    izf.mib_per_sec, zf.mib_per_sec, izf.fg_stops_per_gib, zf.fg_stops_per_gib, izf.waf, zf.waf, chip(izf), chip(zf), stops_of(&[izf, zf])
                ),
                fig8(paper),
                ratio(izf, zf),
            ));
            rows.push(Row::new(
                format!(
                    "znsplus-fig8{tag} ZNS+-fg / ZNS-fg throughput, {u}% utilisation, foreground compaction ({:.1} / {:.1} MiB/s)",
                    pf.mib_per_sec, zf.mib_per_sec
                ),
                fig8(paper_plus),
                ratio(pf, zf),
            ));
            rows.push(Row::new(
                format!(
                    "znsplus-fig8{tag} ZNS+-fg / IZC-fg throughput, {u}% utilisation, foreground compaction ({:.1} / {:.1} MiB/s; stops per GiB {:.1} / {:.1}; WAF {:.2} / {:.2}; plugged {:.2} per user block, {:.2} of it invalidated while its zone waited; chip utilisation {:.0}% / {:.0}%; {})",
                    pf.mib_per_sec, izf.mib_per_sec, pf.fg_stops_per_gib, izf.fg_stops_per_gib, pf.waf, izf.waf, pf.plugged_per_user, pf.stale_plugged_per_user, chip(pf), chip(izf), stops_of(&[pf, izf])
                ),
                fig8(paper_plus / paper),
                ratio(pf, izf),
            ));
        }
        let die_rows = [Setup::ZnsPlus, Setup::ZnsFg, Setup::IzcFg, Setup::ZnsPlusFg];
        for p in [zns, cab]
            .into_iter()
            .chain(die_rows.into_iter().filter_map(at))
        {
            rows.push(Row::new(
                format!(
                    "znsplus-fig8{tag} die time per user block (us), {}, {u}% utilisation (moved per user block x us per moved block: {})",
                    p.setup.name(),
                    breakdown(p)
                ),
                f64::NAN,
                p.die_busy_ns as f64 / 1000.0 / p.user_blocks.max(1) as f64,
            ));
        }
    }
    rows
}

/// The figure's rows at the paper's utilisations.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    Ok(rows_of(&points(o, SHAPE)?))
}
