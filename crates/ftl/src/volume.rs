//! `FtlVolume`: formatting, mounting, unmounting, and the `BlockDevice` face of the FTL. The
//! work is done by the parts it assembles (shared.rs lists them and their lock order).

use std::sync::Arc;

use async_trait::async_trait;
use zns::{BlockDevice, BlockError, BlockResult, Lba, ZoneAction, ZonedDevice};

use crate::checkpoint::{self, CkptError};
use crate::gc::Maintenance;
use crate::io::StreamWriter;
use crate::layout::{FormatOptions, Layout, MountOptions};
use crate::map::{Counters, Mapping};
use crate::read;
use crate::recovery;
use crate::shared::Shared;
use crate::FtlError;

use crate::layout::RESERVE_ZONES_DEFAULT as RESERVE_ZONES;

/// A mounted FTL volume.
pub struct FtlVolume {
    shared: Arc<Shared>,
    writer: Arc<StreamWriter>,
    maint: Arc<Maintenance>,
}

/// What a mount found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountReport {
    /// The newest checkpoint's number (its last applied delta's, if any).
    pub checkpoint_number: u64,
    /// Delta checkpoints applied after the newest full one.
    pub deltas_applied: u64,
    pub scanned_zones: u32,
    pub scanned_blocks: u64,
    /// Blocks of checkpoint the mount read (full checkpoints and deltas).
    pub checkpoint_blocks_read: u64,
    /// Where the mount's wall time went; `checkpoint_write` is the checkpoint the mount
    /// wrote (zero if it wrote none).
    pub times: crate::recovery::RecoveryTimes,
    pub checkpoint_write: std::time::Duration,
    pub finished_partial_zones: u32,
    /// Whether the mount wrote a checkpoint: it does unless the device holds nothing the
    /// newest checkpoint on disk does not record (`Recovered::unchanged`: just formatted,
    /// or unmounted cleanly with its zones finished).
    pub checkpoint_written: bool,
    /// Data zones the device retired (Read Only or Offline).
    pub retired_zones: u32,
    /// Written zones without a header of this volume (mounted empty, collected later).
    pub headerless_zones: u32,
    /// Logical ranges (first LBA, blocks) whose data sits in Offline zones: lost.
    pub lost_ranges: Vec<(u64, u64)>,
}

/// Where a volume stands against its next periodic checkpoint (`FtlVolume::checkpoint_progress`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointProgress {
    /// User blocks written since the last checkpoint.
    pub user_blocks_since: u64,
    /// Garbage collection's copies since the last checkpoint.
    pub gc_blocks_since: u64,
    /// User blocks that pay for a full checkpoint (`MountOptions::checkpoint_every_zones`
    /// zones' worth).
    pub interval_blocks: u64,
    /// User blocks and copies since the last checkpoint at which one is due whatever the
    /// user blocks (`MountOptions::checkpoint_scan_intervals` intervals; u64::MAX: none).
    pub scan_bound_blocks: u64,
    /// Mapping pages changed since the last checkpoint.
    pub dirty_pages: u64,
    /// Blocks of the deltas after the newest full checkpoint (None: the next is full).
    pub chain_delta_blocks: Option<u64>,
    /// Whether the next checkpoint is a full one.
    pub next_full: bool,
    /// Whether one would be due after the blocks and pages asked about.
    pub due_after: bool,
    /// Checkpoints written since mount.
    pub checkpoints: u64,
}

/// Counters and sizes of a mounted volume.
#[derive(Clone, Debug, PartialEq)]
pub struct FtlStats {
    pub volume_blocks: u64,
    pub block_size: u32,
    pub data_zones: u32,
    pub free_zones: u32,
    pub mapped_blocks: u64,
    pub counters: Counters,
    /// Checkpoints written since mount, full and delta (`counters.delta_checkpoints`).
    pub checkpoints: u64,
    /// Bytes those checkpoints wrote (whole blocks: the whole mapping for a full one, the
    /// dirty pages and the zone table for a delta, `counters.delta_checkpoint_bytes`).
    pub checkpoint_bytes: u64,
    /// (user + GC copies) / user writes.
    pub write_amplification: f64,
    /// Blocks of flash the volume's zones hold (all of them, checkpoint zones included).
    pub flash_blocks: u64,
    /// Where the spare (flash - volume) goes now: the open zones' unwritten tails
    /// (`open_tail_blocks`) are in `spare.open_tails`, not in `spare.collectable`.
    pub spare: crate::layout::SpareBlocks,
    /// Unwritten blocks of the zones open now: spare garbage collection cannot use yet.
    pub open_tail_blocks: u64,
    /// Open zones the streams may hold (hot zones and the other streams).
    pub hot_zones: u32,
    /// Whether user writes are separated into hot and cold streams now.
    pub separating: bool,
    /// How the device stripes a zone over its dies, as this mount knows it (the mount
    /// option, else the device's hint); None when it does not know.
    pub stripe: Option<crate::layout::Stripe>,
    /// Checkpoint interval this mount uses, in zones' worth of user blocks.
    pub checkpoint_every_zones: u32,
    /// Whether the volume uses threaded logging, and what it did since mount.
    pub threaded_logging: bool,
    pub threaded: crate::threaded::TlCounters,
    /// Where the volume's tasks spent their time since mount (zero for a volume not mounted).
    pub activity: crate::activity::ActivityStats,
}

impl FtlStats {
    /// The figures of `m` (a mounted volume's mapping, or one recovered read-only), running
    /// with `opts` after `checkpoints` checkpoints.
    pub fn of(m: &Mapping, opts: &MountOptions, checkpoints: u64) -> FtlStats {
        let layout = &m.layout;
        let c = m.counters;
        FtlStats {
            volume_blocks: layout.volume_blocks,
            block_size: layout.geometry.block_size,
            data_zones: layout.data_zones,
            free_zones: m.free_zones(),
            mapped_blocks: (0..layout.volume_blocks)
                .filter(|l| m.lookup(*l).is_some())
                .count() as u64,
            counters: c,
            checkpoints,
            checkpoint_bytes: checkpoints
                .saturating_sub(c.delta_checkpoints)
                .saturating_mul(layout.checkpoint_blocks().unwrap_or(u64::MAX))
                .saturating_mul(u64::from(layout.geometry.block_size))
                .saturating_add(c.delta_checkpoint_bytes),
            write_amplification: if c.user_blocks == 0 {
                1.0
            } else {
                (c.user_blocks + c.gc_blocks) as f64 / c.user_blocks as f64
            },
            flash_blocks: u64::from(layout.geometry.zone_count) * layout.zone_blocks,
            spare: layout
                .spare()
                .unwrap_or_default()
                .with_open_tails(m.open_tail_blocks()),
            open_tail_blocks: m.open_tail_blocks(),
            hot_zones: opts.hot_zones,
            separating: m.separating(),
            stripe: opts.stripe,
            checkpoint_every_zones: opts.checkpoint_every_zones,
            threaded_logging: m.threaded.enabled,
            threaded: m.threaded.counters,
            activity: Default::default(),
        }
    }

    /// Checkpoint bytes written per GiB of user writes (0 before any user write). Periodic
    /// checkpoints come every so many user blocks, so this stays within
    /// `plan::CHECKPOINT_PERCENT_MAX` whatever garbage collection copies; checkpoints written
    /// on demand (a flush after a failed summary, threaded logging, foreground compaction,
    /// live trim records pinning space, a mount after a crash) come on top.
    pub fn checkpoint_bytes_per_user_gib(&self) -> f64 {
        let user_bytes = self.counters.user_blocks * u64::from(self.block_size);
        if user_bytes == 0 {
            return 0.0;
        }
        self.checkpoint_bytes as f64 * f64::from(1u32 << 30) / user_bytes as f64
    }

    /// Over-provisioning as (flash - logical) / logical.
    pub fn op_real(&self) -> f64 {
        self.spare.total() as f64 / self.volume_blocks.max(1) as f64
    }
}

fn layout_for(dev: &dyn ZonedDevice, op_permille: u32) -> Result<Layout, FtlError> {
    Ok(Layout::new(dev.geometry(), op_permille, RESERVE_ZONES)?)
}

/// Formats a new volume. A device holding any data is refused unless `force`.
pub async fn format(
    dev: &dyn ZonedDevice,
    fmt: FormatOptions,
    volume_id: u64,
    force: bool,
) -> Result<Layout, FtlError> {
    let mut layout = layout_for(dev, fmt.op_permille)?;
    if let Some(blocks) = fmt.volume_blocks {
        layout = layout.with_volume_blocks(blocks)?;
    }
    if !force {
        let used = dev
            .report_zones(0, zns::ReportFilter::State(zns::ZoneState::Empty), false, 0)
            .await?;
        if used.nr_zones != u64::from(layout.geometry.zone_count) {
            return Err(FtlError::NotEmpty);
        }
    }
    if fmt.threaded_logging {
        crate::threaded::check_device(dev, &layout, crate::layout::WriteMode::ZoneWrite)?;
    }
    dev.zone_mgmt(ZoneAction::Reset, 0, true).await?;
    let mut m = Mapping::new(layout);
    m.threaded.enabled = fmt.threaded_logging;
    // No delta follows the format's checkpoint (a mount's first checkpoint is full).
    let ck = checkpoint::snapshot(&m, 1, volume_id);
    checkpoint::write_slot(dev, &layout, 0, &ck, false).await?;
    Ok(layout)
}

/// Finds the layout of the volume on `dev` from whichever checkpoint header is readable.
pub async fn probe(dev: &dyn ZonedDevice) -> Result<Layout, FtlError> {
    let g = dev.geometry();
    let mut block = vec![0u8; g.block_size as usize];
    let mut last_err = CkptError::NoCheckpoint;
    // Slot 0 starts at zone 0; slot 1 starts at zone `slot_zones`, unknown if slot 0 is torn.
    for zone in 0..g.zone_count.min(64) {
        dev.read(g.zone_start(zone), &mut block, None).await?;
        let mut header = block.clone();
        header.resize(crate::layout::CKPT_HEADER_BYTES as usize, 0);
        match checkpoint::decode_header(&header) {
            Ok(h) if zone == 0 || h.slot_zones == zone => {
                let mut layout = Layout::new(g, h.op_permille, h.reserve_zones)?;
                if h.volume_blocks < layout.volume_blocks {
                    layout = layout.with_volume_blocks(h.volume_blocks)?;
                }
                checkpoint::check_layout(&h, &layout)?;
                return Ok(layout);
            }
            Ok(_) => {}
            Err(e) => {
                if zone == 0 {
                    last_err = e;
                }
            }
        }
    }
    Err(last_err.into())
}

impl FtlVolume {
    /// Mounts the volume on `dev`: recovers the mapping, finishes zones a crash left open,
    /// writes a fresh checkpoint unless nothing changed since the newest one on disk, and
    /// starts garbage collection.
    pub async fn mount(
        dev: Arc<dyn ZonedDevice>,
        opts: MountOptions,
    ) -> Result<(Arc<FtlVolume>, MountReport), FtlError> {
        FtlVolume::mount_with_clock(dev, opts, Arc::new(crate::host::TokioClock)).await
    }

    /// `mount`, spending the host time of the model paths (`MountOptions::
    /// host_copy_ns_per_block`) on `host` instead of tokio's timer: a simulation passes its
    /// own clock, which waits exactly.
    pub async fn mount_with_clock(
        dev: Arc<dyn ZonedDevice>,
        opts: MountOptions,
        host: Arc<dyn crate::host::HostClock>,
    ) -> Result<(Arc<FtlVolume>, MountReport), FtlError> {
        let layout = probe(dev.as_ref()).await?;
        // Options that cannot work are refused before recovery changes anything.
        crate::plan::check_watermarks(&layout, &opts, &crate::plan::tune_mount(&layout, opts))?;
        let mut rec = recovery::recover(dev.as_ref(), &layout).await?;
        rec.mapping.placement = opts.placement;
        rec.mapping.scan_bound_intervals = opts.checkpoint_scan_intervals;
        for z in &rec.partial_zones {
            dev.zone_mgmt(ZoneAction::Finish, layout.data_zone_start(*z), false)
                .await?;
        }
        let mut report = MountReport {
            checkpoint_number: rec.checkpoint_number,
            deltas_applied: rec.chain.deltas,
            scanned_zones: rec.scanned_zones,
            scanned_blocks: rec.scanned_blocks,
            checkpoint_blocks_read: rec.checkpoint_blocks_read,
            times: rec.times,
            checkpoint_write: std::time::Duration::ZERO,
            finished_partial_zones: (rec.partial_zones.len() + rec.threaded_zones.len()) as u32,
            checkpoint_written: !rec.unchanged,
            retired_zones: rec.retired_zones,
            headerless_zones: rec.headerless_zones,
            lost_ranges: rec.mapping.lost_ranges(),
        };
        if !report.lost_ranges.is_empty() {
            tracing::error!(
                "mounted with data lost in offline zones: {:?}",
                report.lost_ranges
            );
        }
        let run_on_auto = opts.gc_run_on.is_none();
        let mut opts = crate::plan::tune_mount(&layout, opts);
        // The device's die stripe, unless the caller said otherwise.
        opts.stripe = opts.stripe.or_else(|| dev.die_stripe());
        // Collection runs on by default only where its copies go through Simple Copy
        // pipelines (io/pipeline.rs): not by read + write, not by ZNS+ zone compaction, not in
        // summary mode, whose collection it was not measured on.
        let plus = opts.compaction.is_some() && dev.identify_mapping().is_some();
        if run_on_auto && (!opts.use_copy || plus || layout.summary_mode()) {
            opts.gc_run_on = Some(false);
        }
        // Open zones the FTL keeps: the hot ones, cold, two for garbage collection, and one
        // checkpoint zone while a checkpoint is written. They must fit the device's limits.
        let g = layout.geometry;
        let limit = [g.max_open, g.max_active]
            .into_iter()
            .filter(|l| *l != 0)
            .min();
        if let Some(limit) = limit {
            if limit < 5 {
                return Err(FtlError::Layout(crate::layout::LayoutError(format!(
                    "the device allows {limit} open or active zones; the FTL needs at least 5"
                ))));
            }
            opts.hot_zones = opts.hot_zones.clamp(1, limit - 4);
        }
        if layout.summary_mode() {
            // In-band summaries follow their blocks, which needs the host to place them.
            opts.write_mode = crate::layout::WriteMode::ZoneWrite;
        }
        if rec.mapping.threaded.enabled {
            crate::threaded::check_device(dev.as_ref(), &layout, opts.write_mode)?;
        }
        let threaded_zones = rec.threaded_zones.clone();
        let unchanged = rec.unchanged;
        let vol = Arc::new(FtlVolume::assemble(dev.clone(), layout, opts, rec, host));
        // A mount that found anything the newest checkpoint does not record writes one, so
        // that the next mount need not scan again; one that found nothing new writes none,
        // so a mount costs no checkpoint of the user's budget (`plan::CHECKPOINT_PERCENT_MAX`).
        if !unchanged {
            let t = std::time::Instant::now();
            vol.maint.checkpoint().await?;
            report.checkpoint_write = t.elapsed();
        }
        for z in &threaded_zones {
            dev.zone_mgmt(ZoneAction::Finish, layout.data_zone_start(*z), false)
                .await?;
        }
        vol.maint.start();
        Ok((vol, report))
    }

    fn assemble(
        dev: Arc<dyn ZonedDevice>,
        layout: Layout,
        opts: MountOptions,
        rec: recovery::Recovered,
        host: Arc<dyn crate::host::HostClock>,
    ) -> FtlVolume {
        let mut versions = [None; 2];
        versions[rec.checkpoint_slot as usize] = Some(rec.checkpoint_version);
        versions[1 - rec.checkpoint_slot as usize] = rec.other_slot_version;
        let shared = Arc::new(Shared::new(
            dev,
            layout,
            opts,
            rec.volume_id,
            rec.mapping,
            host,
        ));
        let writer = Arc::new(StreamWriter::new(Arc::clone(&shared)));
        let maint = Arc::new(Maintenance::new(
            Arc::clone(&shared),
            Arc::clone(&writer),
            rec.checkpoint_slot,
            rec.checkpoint_number,
            versions,
        ));
        FtlVolume {
            shared,
            writer,
            maint,
        }
    }

    pub fn layout(&self) -> &Layout {
        self.shared.layout()
    }

    /// Stops garbage collection, flushes, and writes a final checkpoint (a clean unmount).
    pub async fn unmount(&self) -> Result<(), FtlError> {
        // Let the maintenance task finish the collection or checkpoint it is in.
        self.maint.stop().await;
        // A failed volume's state may be inconsistent: checkpointing it would make that
        // durable, so unmount reports the cause instead.
        self.shared.check_failed()?;
        self.maint.flush().await?;
        self.maint.checkpoint().await
    }

    /// Stops garbage collection wherever it is, without writing anything: what a crash leaves
    /// behind. The volume must not be used afterwards; mount the device again.
    pub async fn crash(&self) {
        self.maint.abort().await;
    }

    /// Whether a write should wait for a foreground compaction now (`compact_and_wait`):
    /// collection is wanted and threaded logging gives no room. For a caller that imitates a
    /// file system which stops its writes for collection (F2FS, ZNS+ paper section 2.3);
    /// the FTL's own collection runs beside the writes either way.
    pub fn compaction_due(&self) -> bool {
        self.maint.compaction_due()
    }

    /// Foreground compaction: waits until collection has freed what it wanted, then writes
    /// a checkpoint; false (nothing written) when none was due. The caller holds its writes
    /// meanwhile; the FTL does not.
    pub async fn compact_and_wait(&self) -> Result<bool, FtlError> {
        self.maint.compact_and_wait().await
    }

    pub fn stats(&self) -> FtlStats {
        let opts = *self.shared.opts();
        let checkpoints = self.maint.checkpoints();
        let mut stats = self.shared.map(|m| FtlStats::of(m, &opts, checkpoints));
        stats.activity = self.activity();
        stats
    }

    /// Where the volume stands against its next periodic checkpoint, and whether one would
    /// be due after `blocks` more user blocks dirtying `pages` more mapping pages (a
    /// benchmark cuts power just before one is due: the most a mount after a crash scans).
    pub fn checkpoint_progress(&self, blocks: u64, pages: u64) -> CheckpointProgress {
        let every = self.shared.opts().checkpoint_every_zones;
        let checkpoints = self.maint.checkpoints();
        self.shared.map(|m| CheckpointProgress {
            checkpoints,
            user_blocks_since: m.user_blocks_since_ckpt,
            gc_blocks_since: m.gc_blocks_since_ckpt,
            interval_blocks: u64::from(every).saturating_mul(m.layout.zone_blocks),
            scan_bound_blocks: m.scan_bound_blocks(every).unwrap_or(u64::MAX),
            dirty_pages: m.dirty_pages,
            chain_delta_blocks: m.delta_chain.map(|c| c.delta_blocks),
            next_full: m.next_checkpoint() == crate::map::CkptKind::Full,
            due_after: m.checkpoint_due_after(every, blocks, pages),
        })
    }

    /// The mapping's counters since mount (cheap: no scan of the mapping).
    pub fn counters(&self) -> crate::map::Counters {
        self.shared.map(|m| m.counters)
    }

    /// Where the volume's tasks spent their time since mount (cheap: no scan of the mapping).
    pub fn activity(&self) -> crate::activity::ActivityStats {
        self.shared.activity().stats()
    }

    /// Checks the mapping's internal invariants.
    pub fn verify(&self) -> Result<(), String> {
        self.shared.map(|m| m.verify())
    }

    fn check_io(&self, lba: Lba, bytes: usize) -> BlockResult<u64> {
        let bs = self.shared.layout().geometry.block_size as usize;
        if !bytes.is_multiple_of(bs) {
            return Err(BlockError::Misaligned);
        }
        let blocks = (bytes / bs) as u64;
        match lba.checked_add(blocks) {
            Some(end) if end <= self.size_blocks() => Ok(blocks),
            _ => Err(BlockError::OutOfRange),
        }
    }
}

#[async_trait]
impl BlockDevice for FtlVolume {
    fn block_size(&self) -> u32 {
        self.shared.layout().geometry.block_size
    }

    fn size_blocks(&self) -> u64 {
        self.shared.layout().volume_blocks
    }

    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        let blocks = self.check_io(lba, buf.len())?;
        if blocks == 0 {
            return Ok(());
        }
        Ok(read::read_blocks(&self.shared, lba, buf).await?)
    }

    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        let blocks = self.check_io(lba, data.len())?;
        if blocks == 0 {
            return Ok(());
        }
        Ok(self.writer.write_blocks(lba, data, fua).await?)
    }

    async fn flush(&self) -> BlockResult<()> {
        self.shared.check_failed()?;
        Ok(self.maint.flush().await?)
    }

    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        self.check_io(lba, 0)?;
        if lba
            .checked_add(blocks)
            .is_none_or(|e| e > self.size_blocks())
        {
            return Err(BlockError::OutOfRange);
        }
        self.writer.trim_blocks(lba, blocks, false).await?;
        Ok(())
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        if lba
            .checked_add(blocks)
            .is_none_or(|e| e > self.size_blocks())
        {
            return Err(BlockError::OutOfRange);
        }
        let recorded = self.writer.trim_blocks(lba, blocks, fua).await?;
        // Nothing in the range was mapped: its zeros may come from a trim whose record is
        // not durable yet, and a FUA command promises them durable now.
        if fua && !recorded && blocks > 0 {
            self.maint.flush().await?;
        }
        Ok(())
    }
}
