//! The command core of the emulated device: the state behind the device's one lock (zone
//! table, backend, counters, append queue) and the synchronous steps every command is made
//! of (read blocks, store blocks, persist a zone). The async shell in `commands.rs` only
//! validates, takes the lock and calls these.
//!
//! Fault model of the host: every pread/pwrite/fdatasync on an image can fail (host file
//! system full, host disk failing). Such an error is never retryable, is logged with
//! `tracing::error!` naming the image, the operation and the cause, and the first one is kept
//! for `EmuDevice::host_error`. What it does to the device depends on when it strikes:
//! - a failed read (of data or metadata) fails that command with Unrecovered Read Error;
//!   nothing changed, and the device goes on;
//! - a failed write of a command's data or metadata fails that command with Write Fault
//!   before its write pointer moves, so the zone still says exactly what the image holds
//!   (bytes that did land above the write pointer are never read back); the device goes on,
//!   and a later write to the same place may succeed once the host has room again;
//! - a failed write of the zone table or superblock, or a failed fdatasync, strikes after the
//!   device's state moved on, when what the image holds is no longer known (after a failed
//!   fdatasync the host may drop the unwritten pages). The command fails with Write Fault and
//!   the device fails: every later command returns Namespace Not Ready and nothing more is
//!   written, not even at shutdown. The image is then as after a process kill at that
//!   instant: its zone table records only write pointers whose data was written before them,
//!   so reopening it (after the host is fixed) gives a consistent device, which may or may
//!   not hold the failed command's data, as NVMe allows for a failed write.
//!
//! Read-only devices (an image opened O_RDONLY) refuse every command that would change the
//! medium with Namespace is Write Protected; Flush has nothing to do and succeeds.
//!
//! Ownership: only this file and `append.rs` (the append queue) change `Core`'s fields; the
//! lifecycle (`lifecycle.rs`) and the commands go through its methods. There is one lock, the
//! device's `Mutex<Core>`; nothing else is locked while it is held except the timing model's
//! own lock, which is taken after it and never the other way round. Two things the core
//! shares are atomics, not behind it: the admission counters and gate (`admission.rs`; the
//! core shuts the gate whenever a command could be refused or faulted) and the claims of
//! writes copying outside it (`crate::inflight`).

use std::path::PathBuf;
use std::sync::Arc;

use zns::{
    CompactionExtent, CopyRange, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter, SimRng,
    ZoneAction, ZoneReport, ZoneState,
};

use super::admission::Admission;
use super::append::AppendQueue;
use crate::fault::{FaultPlan, FaultState, Verdict};
use crate::image::{OpenAtShutdown, ZoneEntry};
use crate::stats::{Op, Stats};
use crate::store::Store;
use crate::zones::{Zone, ZoneTable};
use crate::{EmuConfig, EmuError};

/// The bytes of a write: data (zeros when absent, for Write Zeroes) and per-block metadata
/// (zeros when absent).
#[derive(Clone, Copy)]
pub(super) struct Payload<'a> {
    pub(super) data: Option<&'a [u8]>,
    pub(super) meta: Option<&'a [u8]>,
}

/// Everything behind the device's lock.
pub(super) struct Core {
    pub(super) geo: Geometry,
    pub(super) cfg: EmuConfig,
    pub(super) zones: ZoneTable,
    pub(super) store: Arc<dyn Store>,
    pub(super) rng: SimRng,
    pub(super) faults: FaultState,
    /// Every counter but commands and errors by type, which live in `admission`.
    pub(super) stats: Stats,
    /// The lock-free admission counters and gate, shared with the device handle.
    pub(super) admission: Arc<Admission>,
    pub(super) appends: AppendQueue,
    /// The entry of each zone last written to the backend.
    persisted: Vec<ZoneEntry>,
    zero: Vec<u8>,
    /// Set once the device is shut down or killed; commands then fail.
    closed: bool,
    /// The image file, to name in host errors.
    image: Option<PathBuf>,
    /// Opened read-only: commands that change the medium are refused.
    read_only: bool,
    /// The first host I/O error, in words.
    host_error: Option<String>,
    /// A host I/O error left the image in an unknown state: the device has failed.
    host_failed: bool,
    /// ZNS+ work for the timing model (LogFBG allocations, plugged ranges), recorded only
    /// when it is on (`Some`) and drained after every command that may add to it.
    pub(super) plug_log: Option<Vec<PlugEvent>>,
}

/// Device-internal ZNS+ work the timing model books.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PlugEvent {
    /// A TL_open of the zone, with its valid bitmap.
    TlOpen(u32, Vec<u8>),
    Plug(Lba, u64),
}

/// What the device was doing on the host when an I/O error struck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HostOp {
    ReadData,
    ReadMeta,
    WriteData,
    WriteMeta,
    ZoneTable,
    Superblock,
    Sync,
}

impl HostOp {
    fn name(self) -> &'static str {
        match self {
            HostOp::ReadData => "reading block data",
            HostOp::ReadMeta => "reading block metadata",
            HostOp::WriteData => "writing block data",
            HostOp::WriteMeta => "writing block metadata",
            HostOp::ZoneTable => "writing the zone table",
            HostOp::Superblock => "writing the superblock",
            HostOp::Sync => "syncing (fdatasync)",
        }
    }

    /// Whether the device's state may already be ahead of the image when this fails.
    fn fails_device(self) -> bool {
        matches!(self, HostOp::ZoneTable | HostOp::Superblock | HostOp::Sync)
    }
}

/// The restart form of a zone: what the image records, and what power loss leaves.
pub(super) fn restart_form(geo: &Geometry, index: u32, z: &Zone) -> Zone {
    let start = geo.zone_start(index);
    // A TL-opened zone keeps its old data above the WP, and is never Empty (ZNS+ item 52).
    let tl = z.attributes & zns::zone_attr::TLO != 0;
    let mut p = Zone {
        wp: z.durable_wp,
        data_end: if tl {
            z.data_end
        } else {
            z.data_end.min(z.durable_wp)
        },
        durable_wp: z.durable_wp,
        opened_seq: 0,
        ..*z
    };
    if z.state.is_open() {
        p.state = if p.wp == start && !tl {
            ZoneState::Empty
        } else {
            ZoneState::Closed
        };
    }
    p
}

/// The entry a running device keeps in the image for a zone: its restart form only, so a
/// process killed at any instant leaves an image that reopens as after a power loss.
fn running_entry(geo: &Geometry, index: u32, z: &Zone) -> ZoneEntry {
    ZoneEntry {
        zone: restart_form(geo, index, z),
        open: None,
    }
}

/// The entries a clean shutdown writes: the restart form plus, for an open zone, its open
/// state and (Implicitly Opened) its rank in opening order, so the next clean open finds the
/// zones, and the open and active resources they hold, as they were.
fn shutdown_entries(geo: &Geometry, zones: &[Zone]) -> Vec<ZoneEntry> {
    let mut implicit: Vec<(u64, usize)> = zones
        .iter()
        .enumerate()
        .filter(|(_, z)| z.state == ZoneState::ImplicitlyOpened)
        .map(|(i, z)| (z.opened_seq, i))
        .collect();
    implicit.sort_unstable();
    let mut order = vec![0u32; zones.len()];
    for (rank, (_, i)) in implicit.iter().enumerate() {
        if let Some(o) = order.get_mut(*i) {
            *o = rank as u32 + 1;
        }
    }
    zones
        .iter()
        .zip(order)
        .enumerate()
        .map(|(i, (z, order))| ZoneEntry {
            zone: restart_form(geo, i as u32, z),
            open: z.state.is_open().then_some(OpenAtShutdown {
                state: z.state,
                order,
            }),
        })
        .collect()
}

impl Core {
    pub(super) fn new(
        cfg: EmuConfig,
        store: Arc<dyn Store>,
        zones: ZoneTable,
        image: Option<PathBuf>,
        read_only: bool,
        admission: Arc<Admission>,
    ) -> Core {
        let g = cfg.geometry;
        // A zone that is open now was restored from a clean shutdown's entry, which says so.
        let persisted = shutdown_entries(&g, zones.zones());
        Core {
            geo: g,
            cfg,
            zones,
            store,
            rng: SimRng::new(cfg.seed),
            faults: FaultState::new(FaultPlan::default()),
            stats: Stats::new(g.zone_count),
            admission,
            appends: AppendQueue::default(),
            persisted,
            zero: Vec::new(),
            closed: false,
            image,
            read_only,
            host_error: None,
            host_failed: false,
            plug_log: None,
        }
    }

    /// Installs a fault plan; a device that has failed stays failed.
    pub(super) fn set_faults(&mut self, plan: FaultPlan) {
        let failed = self.faults.device_failed();
        self.faults = FaultState::new(plan);
        if failed {
            self.faults.fail_device();
        }
        self.refresh_gate();
    }

    pub(super) fn fail_device(&mut self) {
        self.faults.fail_device();
        self.refresh_gate();
    }

    /// Shuts the lock-free admission path while a command could be refused or faulted at
    /// admission; called after every change to what `admit` decides on.
    pub(super) fn refresh_gate(&self) {
        let slow = self.closed || self.host_failed || self.read_only || self.faults.injects();
        self.admission.set_slow(slow);
    }

    /// Admission of a command: counters, then a closed device or an injected fault. Returns
    /// the extra delay to apply, if any. The device takes this path only while the gate is
    /// shut (see `admission`).
    pub(super) fn admit(&mut self, op: Op) -> NvmeResult<Option<std::time::Duration>> {
        self.admission.count_command(op);
        if self.closed || self.host_failed {
            self.admission.count_error(op);
            return Err(NvmeStatus::NamespaceNotReady);
        }
        if self.read_only && op.mutates() {
            self.admission.count_error(op);
            return Err(NvmeStatus::NamespaceWriteProtected);
        }
        match self.faults.admit() {
            Verdict::Proceed => Ok(None),
            Verdict::Delay(d) => Ok(Some(d)),
            Verdict::Fail(s) => {
                self.admission.count_error(op);
                Err(s)
            }
        }
    }

    /// Handles a host I/O error: logs it, keeps the first, fails the device when the image
    /// may now be behind the device's state, and returns the command status (never
    /// retryable).
    pub(super) fn host_fault(&mut self, op: HostOp, e: std::io::Error) -> NvmeStatus {
        let image = self.image.as_ref().map_or_else(
            || "the memory backend".to_string(),
            |p| p.display().to_string(),
        );
        let text = format!(
            "{} of {image} failed: {}",
            op.name(),
            crate::store::describe_io_error(&e)
        );
        tracing::error!(image = %image, operation = op.name(), error = %e, "{text}");
        if op.fails_device() && !self.host_failed {
            self.host_failed = true;
            self.refresh_gate();
            tracing::error!(image = %image, "the device has failed: it writes nothing more to its image");
        }
        self.host_error.get_or_insert(text);
        match op {
            HostOp::ReadData | HostOp::ReadMeta => NvmeStatus::UnrecoveredReadError,
            _ => NvmeStatus::WriteFault,
        }
    }

    /// The first host I/O error, in words.
    pub(super) fn host_error(&self) -> Option<String> {
        self.host_error.clone()
    }

    pub(super) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The lifecycle error for a failed command-core step.
    fn lifecycle_err(&self, s: NvmeStatus) -> EmuError {
        match &self.host_error {
            Some(text) => EmuError::Host(text.clone()),
            None => EmuError::Config(format!("the device failed: {s}")),
        }
    }

    fn refuse_if_read_only(&self, what: &'static str) -> Result<(), EmuError> {
        if self.read_only {
            let image = self
                .image
                .as_ref()
                .map_or_else(|| "the device".to_string(), |p| p.display().to_string());
            return Err(EmuError::ReadOnly(image, what));
        }
        Ok(())
    }

    /// Writes a zone's restart form to the backend if its entry changed.
    pub(super) fn persist(&mut self, z: u32) -> NvmeResult<()> {
        let entry = running_entry(&self.geo, z, self.zones.zone(z));
        self.persist_entry(z, entry)
    }

    fn persist_entry(&mut self, z: u32, entry: ZoneEntry) -> NvmeResult<()> {
        if self.persisted[z as usize] != entry {
            let r = self.store.persist_zone(z, &entry);
            r.map_err(|e| self.host_fault(HostOp::ZoneTable, e))?;
            self.persisted[z as usize] = entry;
        }
        Ok(())
    }

    pub(super) fn persist_all(&mut self) -> NvmeResult<()> {
        for z in 0..self.geo.zone_count {
            self.persist(z)?;
        }
        self.sync()
    }

    fn sync(&mut self) -> NvmeResult<()> {
        let r = self.store.sync();
        r.map_err(|e| self.host_fault(HostOp::Sync, e))
    }

    /// Flush: every zone's data becomes durable and the backend records it.
    pub(super) fn flush(&mut self) -> NvmeResult<()> {
        if self.read_only {
            return Ok(());
        }
        self.drain_appends();
        self.zones.flush();
        self.persist_all()
    }

    /// Power loss: appends in flight are aborted, each zone keeps a random prefix drawn from
    /// `seed` at least up to its durable point, and the backend records the result.
    pub(super) fn power_cut(&mut self, seed: u64) -> Result<Vec<(u32, Lba, Lba)>, EmuError> {
        self.refuse_if_read_only("a power loss")?;
        self.refuse_if_failed()?;
        self.appends.abort_all();
        let cut = self.zones.power_cut(&mut SimRng::new(seed));
        self.stats.power_losses += 1;
        self.persist_all().map_err(|s| self.lifecycle_err(s))?;
        Ok(cut)
    }

    /// Clean controller restart: flush, then the restart rule (item 37), persisted.
    pub(super) fn restart(&mut self) -> Result<(), EmuError> {
        self.refuse_if_read_only("a restart")?;
        self.refuse_if_failed()?;
        self.drain_appends();
        self.zones.flush();
        self.zones.restart();
        self.persist_all().map_err(|s| self.lifecycle_err(s))
    }

    /// A device that failed on a host error refuses to write its image again.
    fn refuse_if_failed(&self) -> Result<(), EmuError> {
        if self.host_failed {
            return Err(self.lifecycle_err(NvmeStatus::WriteFault));
        }
        Ok(())
    }

    /// Clean shutdown: the cache flushed, every zone's entry written with its open state (a
    /// drive that stays powered: the next clean open finds open zones open), image marked
    /// clean, device closed. Idempotent. The entries are written, and synced, before the
    /// superblock says clean, so a kill in between leaves an image in use, which reopens in
    /// the restart form. A read-only device writes nothing; one that failed on a host error
    /// writes nothing and says why (its image is then as after a process kill).
    pub(super) fn shutdown(&mut self) -> Result<(), EmuError> {
        if self.closed {
            return Ok(());
        }
        if self.read_only || self.host_failed {
            self.closed = true;
            self.refresh_gate();
            return self.refuse_if_failed();
        }
        self.drain_appends();
        self.zones.flush();
        let entries = shutdown_entries(&self.geo, self.zones.zones());
        for (z, entry) in entries.into_iter().enumerate() {
            self.persist_entry(z as u32, entry)
                .map_err(|s| self.lifecycle_err(s))?;
        }
        self.sync().map_err(|s| self.lifecycle_err(s))?;
        let r = self.store.set_clean(true);
        r.map_err(|e| self.host_fault(HostOp::Superblock, e))
            .map_err(|s| self.lifecycle_err(s))?;
        self.closed = true;
        self.refresh_gate();
        Ok(())
    }

    /// Process kill: nothing more is written; commands fail from now on.
    pub(super) fn kill(&mut self) {
        self.closed = true;
        self.refresh_gate();
    }

    /// Device-side fault: moves `zone` to Read Only or Offline and persists it.
    pub(super) fn force_zone_state(&mut self, zone: u32, state: ZoneState) -> Result<(), EmuError> {
        self.refuse_if_read_only("a zone fault")?;
        self.refuse_if_failed()?;
        self.drain_appends();
        self.zones
            .force_state(zone, state)
            .map_err(|e| EmuError::Config(format!("zone {zone} cannot become {state}: {e}")))?;
        self.persist(zone).map_err(|s| self.lifecycle_err(s))
    }

    /// Plans a read of `blocks` at `lba` (already validated): per zone touched, (first LBA,
    /// blocks, blocks below the zone's written data). What lies above is read as zeros.
    pub(super) fn plan_read(&mut self, lba: Lba, blocks: u64) -> NvmeResult<Vec<ReadPiece>> {
        let geo = self.geo;
        let mut pieces = Vec::with_capacity(1);
        let mut done = 0u64;
        while done < blocks {
            let at = lba + done;
            let z = geo.zone_of(at).ok_or(NvmeStatus::LbaOutOfRange)?;
            let zone_end = geo.zone_start(z) + geo.zone_size;
            let n = (zone_end - at).min(blocks - done);
            let valid = self.zones.zone(z).data_end.saturating_sub(at).min(n);
            pieces.push(ReadPiece { at, n, valid });
            done += n;
        }
        self.stats.blocks_read += blocks;
        Ok(pieces)
    }

    /// Reads `buf.len()` bytes of blocks at `lba` (already validated), zeroing what lies above
    /// each zone's write pointer.
    pub(super) fn read_blocks(
        &mut self,
        lba: Lba,
        buf: &mut [u8],
        meta: Option<&mut [u8]>,
    ) -> NvmeResult<()> {
        let blocks = buf.len() as u64 / u64::from(self.geo.block_size);
        let pieces = self.plan_read(lba, blocks)?;
        let store = Arc::clone(&self.store);
        read_pieces(&*store, &self.geo, lba, &pieces, buf, meta)
            .map_err(|(op, e)| self.host_fault(op, e))
    }

    /// Grows the zero buffer (the payload of Write Zeroes) to at least `len` bytes.
    pub(super) fn grow_zeros(&mut self, len: usize) {
        if self.zero.len() < len {
            self.zero.resize(len, 0);
        }
    }

    /// Stores data (and metadata, zeros when absent) for blocks at `lba` in zone `z`, whose
    /// write was begun, then completes the write in the state machine.
    pub(super) fn store_blocks(
        &mut self,
        z: u32,
        lba: Lba,
        blocks: u64,
        payload: Payload<'_>,
        fua: bool,
    ) -> NvmeResult<()> {
        self.grow_zeros(zeros_needed(&self.geo, blocks, payload));
        let store = Arc::clone(&self.store);
        // The write pointer has not moved: a failure here leaves the zone as the image has it.
        store_payload(&*store, &self.geo, lba, blocks, payload, &self.zero)
            .map_err(|(op, e)| self.host_fault(op, e))?;
        self.complete_write(z, blocks, fua)
    }

    /// Completes a write whose bytes are in the store: the write pointer moves, and from
    /// here on a host failure fails the device (see the fault model above).
    pub(super) fn complete_write(&mut self, z: u32, blocks: u64, fua: bool) -> NvmeResult<()> {
        let durable = fua || !self.cfg.volatile_cache;
        let plugged = self.zones.finish_write(z, blocks, durable);
        self.stats.blocks_plugged += plugged;
        if plugged > 0 {
            let wp = self.zones.zone(z).wp;
            if let Some(log) = self.plug_log.as_mut() {
                log.push(PlugEvent::Plug(wp - plugged, plugged));
            }
        }
        self.stats.blocks_written += blocks;
        self.stats.zone_writes[z as usize] += 1;
        self.persist(z)?;
        if durable {
            self.sync()?;
        }
        Ok(())
    }

    /// Begins a Zone Write or Write Zeroes whose bytes the caller copies without the core
    /// lock: validated, zone opened, then either claimed (completed at once, its blocks
    /// claimed until the caller clears them, see `inflight`: returns true) or marked busy
    /// for `complete_write` after the copy (returns false). Only a write that changes
    /// nothing but the write pointer is claimed, so its zone entry in the image, which
    /// records durable data only, is persisted now exactly as it would be after the copy.
    pub(super) fn begin_zoned_write(
        &mut self,
        lba: Lba,
        blocks: u64,
        fua: bool,
    ) -> NvmeResult<(u32, bool)> {
        let z = self.zones.begin_write(lba, blocks)?;
        let durable = fua || !self.cfg.volatile_cache;
        if !self.zones.claim_write(z, blocks, durable) {
            self.zones.set_busy(z, true);
            return Ok((z, false));
        }
        self.stats.blocks_written += blocks;
        self.stats.zone_writes[z as usize] += 1;
        if let Err(s) = self.persist(z) {
            // The device has failed (a zone table write); the claim goes back so nothing
            // waits on it, and the command fails as a failed completion did before.
            self.undo_claim(z, blocks);
            return Err(s);
        }
        Ok((z, true))
    }

    /// Gives back a claimed write whose copy failed: the zone and the counters return to
    /// where they were before the write began (the zone stays open).
    pub(super) fn undo_claim(&mut self, z: u32, blocks: u64) {
        self.zones.undo_claim(z, blocks);
        self.stats.blocks_written -= blocks;
        self.stats.zone_writes[z as usize] -= 1;
    }

    /// A zoned write at `lba` (Zone Write, Write Zeroes, Copy destination): validates it
    /// against the zone, stores it and completes it.
    pub(super) fn zoned_write(
        &mut self,
        lba: Lba,
        blocks: u64,
        payload: Payload<'_>,
        fua: bool,
    ) -> NvmeResult<()> {
        let z = self.zones.begin_write(lba, blocks)?;
        self.store_blocks(z, lba, blocks, payload, fua)
    }

    /// A Zone Append, now: the device picks the LBA (the zone's write pointer).
    pub(super) fn append_now(
        &mut self,
        zslba: Lba,
        payload: Payload<'_>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        let len = payload.data.map_or(0, <[u8]>::len);
        let blocks = len as u64 / u64::from(self.geo.block_size);
        let (z, lba) = self.zones.begin_append(zslba, blocks)?;
        self.store_blocks(z, lba, blocks, payload, fua)?;
        Ok(lba)
    }
}

impl Core {
    /// Zone Management Send. Returns the outcome and every zone whose state changed (Select
    /// All may change zones and then fail; those changes stand, and are persisted).
    pub(super) fn manage(
        &mut self,
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    ) -> (NvmeResult<()>, Vec<(u32, ZoneState)>) {
        self.drain_appends();
        let before: Vec<ZoneState> = self.zones.zones().iter().map(|z| z.state).collect();
        let outcome = self.zones.manage(action, zslba, select_all);
        let changed: Vec<(u32, ZoneState)> = (0..self.geo.zone_count)
            .map(|z| (z, self.zones.zone(z).state))
            .filter(|&(z, s)| s != before[z as usize])
            .collect();
        let reset = outcome.as_ref().map(Vec::as_slice).unwrap_or(&[]).to_vec();
        let r = self
            .persist_managed(&changed, &reset)
            .and(outcome.map(|_| ()));
        (r, changed)
    }

    /// Persists the zones a management command changed or reset, and lets the backend drop
    /// the data of reset zones.
    fn persist_managed(&mut self, changed: &[(u32, ZoneState)], reset: &[u32]) -> NvmeResult<()> {
        for z in changed.iter().map(|c| c.0).chain(reset.iter().copied()) {
            self.persist(z)?;
        }
        let g = self.geo;
        for &z in reset {
            self.stats.zone_resets[z as usize] += 1;
            let start = g.zone_start(z);
            let data = (
                start * u64::from(g.block_size),
                g.zone_size * u64::from(g.block_size),
            );
            let meta = (
                start * u64::from(g.oob_size),
                g.zone_size * u64::from(g.oob_size),
            );
            let r = self.store.discard(data, meta);
            r.map_err(|e| self.host_fault(HostOp::WriteData, e))?;
        }
        Ok(())
    }

    /// Zone Management Receive (Report Zones).
    pub(super) fn report(
        &mut self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.drain_appends();
        self.zones.report(lba, filter, partial, max_zones)
    }

    /// Copy of `total` blocks from `sources` (sizes already validated) to `dest`.
    pub(super) fn copy(
        &mut self,
        sources: &[CopyRange],
        total: u64,
        dest: Lba,
        fua: bool,
    ) -> NvmeResult<()> {
        self.drain_appends();
        for s in sources {
            self.zones.check_read(s.lba, s.blocks)?;
        }
        let bs = self.geo.block_size as usize;
        let oob = self.geo.oob_size as usize;
        let mut data = vec![0u8; total as usize * bs];
        let mut meta = vec![0u8; total as usize * oob];
        let mut at = 0usize;
        for s in sources {
            let n = s.blocks as usize;
            let m = if oob > 0 {
                Some(&mut meta[at * oob..(at + n) * oob])
            } else {
                None
            };
            self.read_blocks(s.lba, &mut data[at * bs..(at + n) * bs], m)?;
            at += n;
        }
        self.stats.blocks_read -= total;
        let payload = Payload {
            data: Some(&data),
            meta: (oob > 0).then_some(&meta[..]),
        };
        self.zoned_write(dest, total, payload, fua)?;
        self.stats.blocks_written -= total;
        self.stats.blocks_copied += total;
        Ok(())
    }
}

impl Core {
    /// ZNS+ TL_open (docs/ZNSPLUS.md items 48, 49), persisted at once like an Open.
    pub(super) fn tl_open(&mut self, zslba: Lba, valid: &[u8]) -> NvmeResult<()> {
        self.drain_appends();
        let before: Vec<ZoneState> = self.zones.zones().iter().map(|z| z.state).collect();
        let (z, plugged) = self.zones.tl_open(zslba, valid)?;
        // The bitmap is on the image before the entry that refers to it: a kill in between
        // leaves the zone as it was before this command.
        let r = self.store.persist_valid_bitmap(z, valid);
        r.map_err(|e| self.host_fault(HostOp::ZoneTable, e))?;
        self.stats.tl_opens += 1;
        self.stats.blocks_plugged += plugged;
        if let Some(log) = self.plug_log.as_mut() {
            log.push(PlugEvent::TlOpen(z, valid.to_vec()));
            if plugged > 0 {
                log.push(PlugEvent::Plug(zslba, plugged));
            }
        }
        // An open slot may have come from implicitly closing another zone.
        for other in 0..self.geo.zone_count {
            if other == z || self.zones.zone(other).state != before[other as usize] {
                self.persist(other)?;
            }
        }
        Ok(())
    }

    /// ZNS+ zone_compaction (items 46, 47) of `extents` whose sizes are validated: the whole
    /// command is first run on a copy of the zone table, so an error changes nothing; then
    /// each extent is copied in pieces of at most MDTS blocks.
    pub(super) fn compaction(&mut self, extents: &[CompactionExtent]) -> NvmeResult<()> {
        self.drain_appends();
        let mut trial = self.zones.clone();
        for e in extents {
            trial.check_read(e.src, e.blocks)?;
            let z = trial.begin_write(e.dst, e.blocks)?;
            trial.finish_write(z, e.blocks, false);
        }
        let (bs, oob) = (self.geo.block_size as usize, self.geo.oob_size as usize);
        let piece_max = u64::from(self.geo.mdts_blocks.max(1));
        let mut data = vec![0u8; piece_max as usize * bs];
        let mut meta = vec![0u8; piece_max as usize * oob];
        let mut total = 0u64;
        for e in extents {
            let mut done = 0u64;
            while done < e.blocks {
                let n = (e.blocks - done).min(piece_max);
                let (d, m) = (&mut data[..n as usize * bs], &mut meta[..n as usize * oob]);
                self.read_blocks(e.src + done, d, (oob > 0).then_some(&mut *m))?;
                let payload = Payload {
                    data: Some(d),
                    meta: (oob > 0).then_some(&*m),
                };
                self.zoned_write(e.dst + done, n, payload, false)?;
                done += n;
            }
            total += e.blocks;
        }
        self.stats.blocks_read -= total;
        self.stats.blocks_written -= total;
        self.stats.blocks_copied += total;
        self.stats.blocks_compacted += total;
        self.stats.compactions += 1;
        Ok(())
    }
}

/// One zone's part of a read: `n` blocks at `at`, of which the first `valid` hold data.
pub(super) struct ReadPiece {
    at: Lba,
    n: u64,
    valid: u64,
}

/// Reads planned pieces from the store into `buf` (and `meta`), zeroing what lies above each
/// zone's data. Needs no device lock: the store is shared, and the plan was made under it.
pub(super) fn read_pieces(
    store: &dyn Store,
    geo: &Geometry,
    lba: Lba,
    pieces: &[ReadPiece],
    buf: &mut [u8],
    mut meta: Option<&mut [u8]>,
) -> Result<(), (HostOp, std::io::Error)> {
    let bs = u64::from(geo.block_size);
    let oob = u64::from(geo.oob_size);
    for p in pieces {
        let done = p.at - lba;
        let (b0, b1, b2) = (done * bs, (done + p.valid) * bs, (done + p.n) * bs);
        store
            .read_data(p.at * bs, &mut buf[b0 as usize..b1 as usize])
            .map_err(|e| (HostOp::ReadData, e))?;
        buf[b1 as usize..b2 as usize].fill(0);
        if let Some(m) = meta.as_deref_mut() {
            let (m0, m1, m2) = (done * oob, (done + p.valid) * oob, (done + p.n) * oob);
            store
                .read_meta(p.at * oob, &mut m[m0 as usize..m1 as usize])
                .map_err(|e| (HostOp::ReadMeta, e))?;
            m[m1 as usize..m2 as usize].fill(0);
        }
    }
    Ok(())
}

/// How many zero bytes a write of `blocks` needs for what its payload lacks.
pub(super) fn zeros_needed(geo: &Geometry, blocks: u64, payload: Payload<'_>) -> usize {
    let data = if payload.data.is_none() {
        blocks * u64::from(geo.block_size)
    } else {
        0
    };
    let meta = if payload.meta.is_none() {
        blocks * u64::from(geo.oob_size)
    } else {
        0
    };
    data.max(meta) as usize
}

/// Copies a write's data and metadata into the store; `zeros` (at least as long as either)
/// stands in for what the payload lacks.
pub(super) fn store_payload(
    store: &dyn Store,
    geo: &Geometry,
    lba: Lba,
    blocks: u64,
    payload: Payload<'_>,
    zeros: &[u8],
) -> Result<(), (HostOp, std::io::Error)> {
    let bs = u64::from(geo.block_size);
    let oob = u64::from(geo.oob_size);
    // Lazily: `zeros` is empty when the payload lacks nothing.
    let data = match payload.data {
        Some(d) => d,
        None => &zeros[..(blocks * bs) as usize],
    };
    store
        .write_data(lba * bs, data)
        .map_err(|e| (HostOp::WriteData, e))?;
    if oob > 0 {
        let meta = match payload.meta {
            Some(m) => m,
            None => &zeros[..(blocks * oob) as usize],
        };
        store
            .write_meta(lba * oob, meta)
            .map_err(|e| (HostOp::WriteMeta, e))?;
    }
    Ok(())
}
