//! `EmuDevice`: the emulated ZNS SSD. An async `ZonedDevice` shell around the zone state
//! machine (`zones`), a storage backend (`store`), fault injection and counters, all behind
//! one lock so every command is atomic with respect to the others.
//!
//! Fault model: see `zones` (durability and power loss) and `fault` (injected errors). A
//! process kill of a file-backed device (`kill`) keeps exactly what was durable: the image's
//! zone table only ever records durable write pointers.
//!
//! In-flight commands: a command takes effect when it is first polled, in that order, so
//! writes submitted in write-pointer order succeed at any queue depth. Zone Appends are the
//! exception the ZNS model exists for: an append waits one poll, and all appends then waiting
//! are executed in an order drawn from the device seed, so callers see the device choose.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_trait::async_trait;
use parking_lot::Mutex;
use zns::{
    CopyRange, Geometry, Lba, NvmeResult, NvmeStatus, ReportFilter, SimRng, ZoneAction, ZoneReport,
    ZoneState, ZonedDevice,
};

use crate::fault::{FaultPlan, FaultState, Verdict};
use crate::stats::{Op, Stats};
use crate::store::{FileStore, MemStore, Store};
use crate::timed::Timing;
use crate::timing::{ClockMode, TimedCmd, TimingCounters, TimingProfile};
use crate::zones::{Zone, ZoneTable};
use crate::{EmuConfig, EmuError};

/// Which backend a device keeps its bytes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Memory,
    File,
}

/// The bytes of a write: data (zeros when absent, for Write Zeroes) and per-block metadata
/// (zeros when absent).
#[derive(Clone, Copy)]
struct Payload<'a> {
    data: Option<&'a [u8]>,
    meta: Option<&'a [u8]>,
}

struct PendingAppend {
    id: u64,
    zslba: Lba,
    data: Vec<u8>,
    meta: Option<Vec<u8>>,
    fua: bool,
}

struct Core {
    geo: Geometry,
    cfg: EmuConfig,
    zones: ZoneTable,
    store: Box<dyn Store>,
    rng: SimRng,
    faults: FaultState,
    stats: Stats,
    pending: Vec<PendingAppend>,
    finished: Vec<(u64, NvmeResult<Lba>)>,
    next_id: u64,
    /// The restart form of each zone last written to the backend.
    persisted: Vec<Zone>,
    zero: Vec<u8>,
    /// Set once the device is shut down or killed; commands then fail.
    closed: bool,
}

/// An emulated ZNS SSD.
pub struct EmuDevice {
    geo: Geometry,
    cfg: EmuConfig,
    /// The image file, for a file-backed device.
    path: Option<std::path::PathBuf>,
    core: Mutex<Core>,
    /// The performance model, when enabled: decides when each command completes.
    timing: Option<Timing>,
}

/// The restart form of a zone: what the image records, and what power loss leaves.
fn restart_form(geo: &Geometry, index: u32, z: &Zone) -> Zone {
    let start = geo.zone_start(index);
    let mut p = Zone {
        wp: z.durable_wp,
        data_end: z.data_end.min(z.durable_wp),
        durable_wp: z.durable_wp,
        opened_seq: 0,
        ..*z
    };
    if z.state.is_open() {
        p.state = if p.wp == start {
            ZoneState::Empty
        } else {
            ZoneState::Closed
        };
    }
    p
}

impl EmuDevice {
    /// A device in memory.
    pub fn new_memory(cfg: EmuConfig) -> Result<EmuDevice, EmuError> {
        cfg.geometry.validate()?;
        let g = cfg.geometry;
        let store = MemStore::new(
            g.total_blocks() * u64::from(g.block_size),
            g.total_blocks() * u64::from(g.oob_size),
        );
        Ok(Self::assemble(
            cfg,
            None,
            Box::new(store),
            ZoneTable::new(g),
        ))
    }

    /// Creates a file image at `path`. An existing file is refused unless `force`.
    pub fn create_file(path: &Path, cfg: EmuConfig, force: bool) -> Result<EmuDevice, EmuError> {
        cfg.geometry.validate()?;
        if !force && path.exists() {
            return Err(EmuError::Exists(path.display().to_string()));
        }
        let sb = crate::image::Superblock {
            geometry: cfg.geometry,
            volatile_cache: cfg.volatile_cache,
            clean: false,
            seed: cfg.seed,
        };
        let store = FileStore::create(path, sb, cfg.host_sync)?;
        Ok(Self::assemble(
            cfg,
            Some(path.to_path_buf()),
            Box::new(store),
            ZoneTable::new(cfg.geometry),
        ))
    }

    /// Opens an existing image. Its zones come back by the restart rule (item 37).
    pub fn open_file(path: &Path, host_sync: bool) -> Result<EmuDevice, EmuError> {
        let (mut store, zones) = FileStore::open(path, host_sync)?;
        let sb = store.superblock();
        store.set_clean(false)?;
        let cfg = EmuConfig {
            geometry: sb.geometry,
            volatile_cache: sb.volatile_cache,
            seed: sb.seed,
            reorder_appends: true,
            host_sync,
        };
        Ok(Self::assemble(
            cfg,
            Some(path.to_path_buf()),
            Box::new(store),
            ZoneTable::from_zones(sb.geometry, zones),
        ))
    }

    /// Opens an existing image that must have exactly the geometry `expected` (for a caller
    /// that formatted something on it, or stripes over several). A different geometry is an
    /// error naming the first field that differs; the image is not touched.
    pub fn open_file_expecting(
        path: &Path,
        expected: &Geometry,
        host_sync: bool,
    ) -> Result<EmuDevice, EmuError> {
        let (store, _) = FileStore::open(path, false)?;
        let found = store.superblock().geometry;
        drop(store);
        if let Some(field) = first_difference(expected, &found) {
            return Err(EmuError::Mismatch(format!(
                "{}: {field} differs from what was expected",
                path.display()
            )));
        }
        Self::open_file(path, host_sync)
    }

    /// Whether the image at `path` was shut down cleanly, without opening it for writing.
    pub fn image_was_clean(path: &Path) -> Result<bool, EmuError> {
        let (store, _) = FileStore::open(path, false)?;
        Ok(store.superblock().clean)
    }

    fn assemble(
        cfg: EmuConfig,
        path: Option<std::path::PathBuf>,
        store: Box<dyn Store>,
        zones: ZoneTable,
    ) -> EmuDevice {
        let g = cfg.geometry;
        let persisted = (0..g.zone_count)
            .map(|i| restart_form(&g, i, zones.zone(i)))
            .collect();
        let core = Core {
            geo: g,
            cfg,
            zones,
            store,
            rng: SimRng::new(cfg.seed),
            faults: FaultState::new(FaultPlan::default()),
            stats: Stats::new(g.zone_count),
            pending: Vec::new(),
            finished: Vec::new(),
            next_id: 0,
            persisted,
            zero: Vec::new(),
            closed: false,
        };
        EmuDevice {
            geo: g,
            cfg,
            path,
            core: Mutex::new(core),
            timing: None,
        }
    }

    /// Enables the timing model: every command then completes when the model says, on the
    /// given clock. Zone states and data behave exactly as without.
    pub fn with_timing(
        mut self,
        profile: TimingProfile,
        mode: ClockMode,
    ) -> Result<EmuDevice, EmuError> {
        self.timing = Some(Timing::new(profile, self.geo, mode).map_err(EmuError::Config)?);
        // The device may already hold data (an image opened from disk): the model must count
        // it as on flash, or it would book programs for data whose buffer space it never took.
        let core = self.core.lock();
        self.resync_timing(&core);
        drop(core);
        Ok(self)
    }

    /// The timing model's counters, when timing is enabled.
    pub fn timing_counters(&self) -> Option<TimingCounters> {
        self.timing.as_ref().map(Timing::counters)
    }

    /// The timing profile and clock, when timing is enabled.
    pub fn timing(&self) -> Option<(TimingProfile, ClockMode)> {
        self.timing.as_ref().map(|t| (t.profile(), t.mode()))
    }

    /// Tells the timing model that the buffer is gone and every zone is on flash as it is.
    fn resync_timing(&self, c: &Core) {
        if let Some(t) = &self.timing {
            let g = self.geo;
            t.resync((0..g.zone_count).map(|z| c.zones.zone(z).wp - g.zone_start(z)));
        }
    }

    pub fn config(&self) -> EmuConfig {
        self.cfg
    }

    pub fn backend(&self) -> Backend {
        match self.path {
            Some(_) => Backend::File,
            None => Backend::Memory,
        }
    }

    /// The image file of a file-backed device.
    pub fn image_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.core.lock().stats.clone()
    }

    /// Bytes of host memory (memory backend) or image size (file backend) in use.
    pub fn footprint_bytes(&self) -> u64 {
        self.core.lock().store.footprint_bytes()
    }

    /// Installs a fault plan, replacing the previous one.
    pub fn set_faults(&self, plan: FaultPlan) -> Result<(), EmuError> {
        plan.validate().map_err(EmuError::Config)?;
        let mut c = self.core.lock();
        let failed = c.faults.device_failed();
        c.faults = FaultState::new(plan);
        if failed {
            c.faults.fail_device();
        }
        Ok(())
    }

    /// Whole-device failure: every later command fails with Namespace Not Ready.
    pub fn fail_device(&self) {
        self.core.lock().faults.fail_device();
    }

    /// Device-side fault: moves `zone` to Read Only or Offline. Persisted in an image.
    pub fn set_zone_state(&self, zone: u32, state: ZoneState) -> Result<(), EmuError> {
        if zone >= self.geo.zone_count {
            return Err(EmuError::Config(format!(
                "zone {zone} does not exist ({} zones)",
                self.geo.zone_count
            )));
        }
        if !matches!(state, ZoneState::ReadOnly | ZoneState::Offline) {
            return Err(EmuError::Config(format!(
                "a fault can move a zone to read_only or offline, not {state}"
            )));
        }
        let mut c = self.core.lock();
        c.drain_appends();
        c.zones
            .force_state(zone, state)
            .map_err(|e| EmuError::Config(format!("zone {zone} cannot become {state}: {e}")))?;
        c.persist(zone)?;
        Ok(())
    }

    /// Power loss with the volatile write cache's contents lost: each zone keeps a random
    /// prefix (drawn from `seed`) at least up to its durable point; appends in flight are
    /// aborted; then the device restarts. Returns (zone, kept WP, lost WP) per cut zone.
    pub fn power_loss(&self, seed: u64) -> Result<Vec<(u32, Lba, Lba)>, EmuError> {
        let mut c = self.core.lock();
        let aborted: Vec<u64> = c.pending.drain(..).map(|p| p.id).collect();
        for id in aborted {
            c.finished.push((id, Err(NvmeStatus::AbortedPowerLoss)));
        }
        let cut = c.zones.power_cut(&mut SimRng::new(seed));
        c.stats.power_losses += 1;
        c.persist_all()?;
        self.resync_timing(&c);
        Ok(cut)
    }

    /// Clean controller shutdown and restart, in place: the cache is flushed and open zones
    /// come back Closed (Empty if unwritten), as item 37 requires.
    pub fn restart(&self) -> Result<(), EmuError> {
        let mut c = self.core.lock();
        c.drain_appends();
        c.zones.flush();
        c.zones.restart();
        c.persist_all()?;
        self.resync_timing(&c);
        Ok(())
    }

    /// Clean shutdown: flush, persist every zone, mark the image clean. Idempotent; also run
    /// when the device is dropped.
    pub fn shutdown(&self) -> Result<(), EmuError> {
        let mut c = self.core.lock();
        if c.closed {
            return Ok(());
        }
        c.drain_appends();
        c.zones.flush();
        c.zones.restart();
        c.persist_all()?;
        c.store.set_clean(true)?;
        c.closed = true;
        Ok(())
    }

    /// Process kill: the device goes away without a shutdown. An image keeps what was
    /// durable; nothing else is written.
    pub fn kill(self) {
        self.core.lock().closed = true;
    }

    /// Admission: fault injection and counters. Returns the delay to apply, if any.
    fn admit(&self, op: Op) -> NvmeResult<Option<std::time::Duration>> {
        let mut c = self.core.lock();
        c.stats.command(op);
        if c.closed {
            c.stats.error(op);
            return Err(NvmeStatus::NamespaceNotReady);
        }
        match c.faults.admit() {
            Verdict::Proceed => Ok(None),
            Verdict::Delay(d) => Ok(Some(d)),
            Verdict::Fail(s) => {
                c.stats.error(op);
                Err(s)
            }
        }
    }

    async fn enter(&self, op: Op) -> NvmeResult<()> {
        if let Some(d) = self.admit(op)? {
            tokio::time::sleep(d).await;
        }
        Ok(())
    }

    /// The block count of a transfer at `lba`: the namespace range first (in whole blocks),
    /// then the byte counts of data and metadata.
    fn blocks_of(&self, lba: Lba, len: usize, meta: Option<usize>) -> NvmeResult<u64> {
        let bs = self.geo.block_size as usize;
        let blocks = (len / bs) as u64;
        zns::check_range(&self.geo, lba, blocks)?;
        if len == 0 || !len.is_multiple_of(bs) {
            return Err(NvmeStatus::InvalidField);
        }
        if let Some(m) = meta {
            if m != blocks as usize * self.geo.oob_size as usize {
                return Err(NvmeStatus::InvalidField);
            }
        }
        Ok(blocks)
    }

    fn mdts_check(&self, blocks: u64) -> NvmeResult<()> {
        if blocks > u64::from(self.geo.mdts_blocks) {
            return Err(NvmeStatus::InvalidField);
        }
        Ok(())
    }

    fn record(&self, op: Op, r: &NvmeResult<impl Sized>) {
        if r.is_err() {
            self.core.lock().stats.error(op);
        }
    }
}

/// The name of the first geometry field in which `a` and `b` differ.
fn first_difference(a: &Geometry, b: &Geometry) -> Option<String> {
    let fields: [(&str, u64, u64); 12] = [
        ("block size", a.block_size.into(), b.block_size.into()),
        ("metadata size", a.oob_size.into(), b.oob_size.into()),
        ("zone count", a.zone_count.into(), b.zone_count.into()),
        ("zone size", a.zone_size, b.zone_size),
        ("zone capacity", a.zone_capacity, b.zone_capacity),
        ("max open zones", a.max_open.into(), b.max_open.into()),
        ("max active zones", a.max_active.into(), b.max_active.into()),
        (
            "append size limit",
            a.zasl_blocks.into(),
            b.zasl_blocks.into(),
        ),
        (
            "max transfer size",
            a.mdts_blocks.into(),
            b.mdts_blocks.into(),
        ),
        (
            "copy range limit",
            a.copy_max_ranges.into(),
            b.copy_max_ranges.into(),
        ),
        (
            "copy blocks per range",
            a.copy_max_range_blocks.into(),
            b.copy_max_range_blocks.into(),
        ),
        (
            "copy block limit",
            a.copy_max_blocks.into(),
            b.copy_max_blocks.into(),
        ),
    ];
    fields
        .iter()
        .find(|(_, x, y)| x != y)
        .map(|(name, x, y)| format!("{name} (expected {x}, found {y})"))
        .or_else(|| {
            (a.cross_zone_reads != b.cross_zone_reads).then(|| "cross-zone reads".to_string())
        })
}

impl Drop for EmuDevice {
    fn drop(&mut self) {
        // A drop is a clean shutdown; an error here has nobody to report to, and the image
        // then simply comes back as after a power loss at the last durable point.
        let _ = self.shutdown();
    }
}

impl Core {
    /// A host I/O error on the backing store is a media failure from the device's view.
    fn io_err(_: std::io::Error) -> NvmeStatus {
        NvmeStatus::InternalError
    }

    /// Writes a zone's restart form to the backend if it changed.
    fn persist(&mut self, z: u32) -> std::io::Result<()> {
        let form = restart_form(&self.geo, z, self.zones.zone(z));
        if self.persisted[z as usize] != form {
            self.store.persist_zone(z, &form)?;
            self.persisted[z as usize] = form;
        }
        Ok(())
    }

    fn persist_all(&mut self) -> std::io::Result<()> {
        for z in 0..self.geo.zone_count {
            self.persist(z)?;
        }
        self.store.sync()
    }

    /// Reads `buf.len()` bytes of blocks at `lba` (already validated), zeroing what lies above
    /// each zone's write pointer.
    fn read_blocks(
        &mut self,
        lba: Lba,
        buf: &mut [u8],
        mut meta: Option<&mut [u8]>,
    ) -> NvmeResult<()> {
        let geo = self.geo;
        let bs = u64::from(geo.block_size);
        let oob = u64::from(geo.oob_size);
        let blocks = buf.len() as u64 / bs;
        let mut done = 0u64;
        while done < blocks {
            let at = lba + done;
            let z = geo.zone_of(at).ok_or(NvmeStatus::LbaOutOfRange)?;
            let zone_end = geo.zone_start(z) + geo.zone_size;
            let n = (zone_end - at).min(blocks - done);
            let valid = self.zones.zone(z).data_end.saturating_sub(at).min(n);
            let (b0, b1, b2) = (done * bs, (done + valid) * bs, (done + n) * bs);
            self.store
                .read_data(at * bs, &mut buf[b0 as usize..b1 as usize])
                .map_err(Self::io_err)?;
            buf[b1 as usize..b2 as usize].fill(0);
            if let Some(m) = meta.as_deref_mut() {
                let (m0, m1, m2) = (done * oob, (done + valid) * oob, (done + n) * oob);
                self.store
                    .read_meta(at * oob, &mut m[m0 as usize..m1 as usize])
                    .map_err(Self::io_err)?;
                m[m1 as usize..m2 as usize].fill(0);
            }
            done += n;
        }
        self.stats.blocks_read += blocks;
        Ok(())
    }

    /// Stores data (and metadata, zeros when absent) for blocks at `lba` in zone `z`, whose
    /// write was begun, then completes the write in the state machine.
    fn store_blocks(
        &mut self,
        z: u32,
        lba: Lba,
        blocks: u64,
        payload: Payload<'_>,
        fua: bool,
    ) -> NvmeResult<()> {
        let bs = u64::from(self.geo.block_size);
        let oob = u64::from(self.geo.oob_size);
        let Payload { data, meta } = payload;
        match data {
            Some(d) => self.store.write_data(lba * bs, d),
            None => {
                let len = (blocks * bs) as usize;
                if self.zero.len() < len {
                    self.zero.resize(len, 0);
                }
                self.store.write_data(lba * bs, &self.zero[..len])
            }
        }
        .map_err(Self::io_err)?;
        if oob > 0 {
            let r = match meta {
                Some(m) => self.store.write_meta(lba * oob, m),
                None => {
                    let len = (blocks * oob) as usize;
                    if self.zero.len() < len {
                        self.zero.resize(len, 0);
                    }
                    self.store.write_meta(lba * oob, &self.zero[..len])
                }
            };
            r.map_err(Self::io_err)?;
        }
        let durable = fua || !self.cfg.volatile_cache;
        self.zones.finish_write(z, blocks, durable);
        self.stats.blocks_written += blocks;
        self.stats.zone_writes[z as usize] += 1;
        self.persist(z).map_err(Self::io_err)?;
        if durable {
            self.store.sync().map_err(Self::io_err)?;
        }
        Ok(())
    }

    /// A zoned write at `lba` (Zone Write, Write Zeroes, Copy destination): validates it
    /// against the zone, stores it and completes it.
    fn zoned_write(
        &mut self,
        lba: Lba,
        blocks: u64,
        payload: Payload<'_>,
        fua: bool,
    ) -> NvmeResult<()> {
        let z = self.zones.begin_write(lba, blocks)?;
        self.store_blocks(z, lba, blocks, payload, fua)
    }

    fn append_now(&mut self, zslba: Lba, payload: Payload<'_>, fua: bool) -> NvmeResult<Lba> {
        let len = payload.data.map_or(0, <[u8]>::len);
        let blocks = len as u64 / u64::from(self.geo.block_size);
        let (z, lba) = self.zones.begin_append(zslba, blocks)?;
        self.store_blocks(z, lba, blocks, payload, fua)?;
        Ok(lba)
    }

    /// Executes every waiting append, in an order drawn from the device seed.
    fn drain_appends(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.pending);
        self.rng.shuffle(&mut batch);
        for p in batch {
            let payload = Payload {
                data: Some(&p.data),
                meta: p.meta.as_deref(),
            };
            let r = self.append_now(p.zslba, payload, p.fua);
            self.finished.push((p.id, r));
        }
    }

    fn take_finished(&mut self, id: u64) -> Option<NvmeResult<Lba>> {
        let i = self.finished.iter().position(|(f, _)| *f == id)?;
        Some(self.finished.swap_remove(i).1)
    }
}

/// Completes after being polled twice: lets every other command submitted in the same round
/// reach the device before an append is scheduled.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Removes an abandoned append from the device if its future is dropped early.
struct AppendGuard<'a> {
    dev: &'a EmuDevice,
    id: u64,
    done: bool,
}

impl Drop for AppendGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut c = self.dev.core.lock();
            c.pending.retain(|p| p.id != self.id);
            c.take_finished(self.id);
        }
    }
}

#[async_trait]
impl ZonedDevice for EmuDevice {
    fn geometry(&self) -> Geometry {
        self.geo
    }

    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        self.enter(Op::Read).await?;
        let r = (|| {
            let blocks = self.blocks_of(lba, buf.len(), meta.as_ref().map(|m| m.len()))?;
            let mut c = self.core.lock();
            c.drain_appends();
            c.zones.check_read(lba, blocks)?;
            self.mdts_check(blocks)?;
            c.read_blocks(lba, buf, meta)
        })();
        self.record(Op::Read, &r);
        if let Some(t) = &self.timing {
            let blocks = (buf.len() / self.geo.block_size as usize) as u64;
            t.complete(TimedCmd::Read { lba, blocks }, r.is_ok()).await;
        }
        r
    }

    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        self.enter(Op::Write).await?;
        let r = (|| {
            let blocks = self.blocks_of(lba, data.len(), meta.map(|m| m.len()))?;
            self.mdts_check(blocks)?;
            let mut c = self.core.lock();
            c.drain_appends();
            c.zoned_write(
                lba,
                blocks,
                Payload {
                    data: Some(data),
                    meta,
                },
                fua,
            )
        })();
        self.record(Op::Write, &r);
        if let Some(t) = &self.timing {
            let blocks = (data.len() / self.geo.block_size as usize) as u64;
            let cmd = TimedCmd::Write {
                lba,
                blocks,
                fua,
                host_data: true,
            };
            t.complete(cmd, r.is_ok()).await;
        }
        r
    }

    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        self.enter(Op::Append).await?;
        let blocks = match self.blocks_of(zslba, data.len(), meta.map(|m| m.len())) {
            Ok(b) => b,
            Err(e) => {
                self.record(Op::Append, &Err::<(), _>(e));
                return Err(e);
            }
        };
        if !self.cfg.reorder_appends {
            let r = (|| {
                self.mdts_check(blocks)?;
                self.core.lock().append_now(
                    zslba,
                    Payload {
                        data: Some(data),
                        meta,
                    },
                    fua,
                )
            })();
            self.record(Op::Append, &r);
            self.time_append(&r, blocks, fua).await;
            return r;
        }
        let id = {
            let mut c = self.core.lock();
            c.next_id += 1;
            let id = c.next_id;
            c.pending.push(PendingAppend {
                id,
                zslba,
                data: data.to_vec(),
                meta: meta.map(<[u8]>::to_vec),
                fua,
            });
            id
        };
        let mut guard = AppendGuard {
            dev: self,
            id,
            done: false,
        };
        YieldOnce(false).await;
        let r = {
            let mut c = self.core.lock();
            c.drain_appends();
            c.take_finished(id)
                .unwrap_or(Err(NvmeStatus::AbortedPowerLoss))
        };
        guard.done = true;
        self.record(Op::Append, &r);
        self.time_append(&r, blocks, fua).await;
        r
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        self.enter(Op::WriteZeroes).await?;
        let r = (|| {
            zns::check_range(&self.geo, lba, blocks)?;
            if blocks == 0 {
                return Err(NvmeStatus::InvalidField);
            }
            self.mdts_check(blocks)?;
            let mut c = self.core.lock();
            c.drain_appends();
            c.zoned_write(
                lba,
                blocks,
                Payload {
                    data: None,
                    meta: None,
                },
                fua,
            )
        })();
        self.record(Op::WriteZeroes, &r);
        if let Some(t) = &self.timing {
            let cmd = TimedCmd::Write {
                lba,
                blocks,
                fua,
                host_data: false,
            };
            t.complete(cmd, r.is_ok()).await;
        }
        r
    }

    async fn flush(&self) -> NvmeResult<()> {
        self.enter(Op::Flush).await?;
        let r = {
            let mut c = self.core.lock();
            c.drain_appends();
            c.zones.flush();
            c.persist_all().map_err(Core::io_err)
        };
        self.record(Op::Flush, &r);
        if let Some(t) = &self.timing {
            t.complete(TimedCmd::Flush, r.is_ok()).await;
        }
        r
    }

    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        self.enter(Op::Copy).await?;
        let r = self.copy_now(sources, dest, fua);
        self.record(Op::Copy, &r);
        if let Some(t) = &self.timing {
            let cmd = TimedCmd::Copy { sources, dest, fua };
            t.complete(cmd, r.is_ok()).await;
        }
        r
    }

    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        self.enter(Op::ZoneMgmt).await?;
        // Zones that became Empty or Full, for the timing model (erase, last program).
        let mut changed: Vec<(u32, ZoneState)> = Vec::new();
        let r = (|| {
            let mut c = self.core.lock();
            c.drain_appends();
            let before: Vec<ZoneState> = c.zones.zones().iter().map(|z| z.state).collect();
            let outcome = c.zones.manage(action, zslba, select_all);
            if self.timing.is_some() {
                changed.extend(
                    (0..self.geo.zone_count)
                        .map(|z| (z, c.zones.zone(z).state))
                        .filter(|&(z, s)| s != before[z as usize]),
                );
            }
            // Select All may have changed zones before failing; persist whatever changed.
            for z in 0..self.geo.zone_count {
                if c.zones.zone(z).state != before[z as usize]
                    || outcome.as_ref().is_ok_and(|r| r.contains(&z))
                {
                    c.persist(z).map_err(Core::io_err)?;
                }
            }
            for z in outcome.as_ref().map(Vec::as_slice).unwrap_or(&[]) {
                c.stats.zone_resets[*z as usize] += 1;
                let g = &self.geo;
                let start = g.zone_start(*z);
                let data = (
                    start * u64::from(g.block_size),
                    g.zone_size * u64::from(g.block_size),
                );
                let meta = (
                    start * u64::from(g.oob_size),
                    g.zone_size * u64::from(g.oob_size),
                );
                c.store.discard(data, meta).map_err(Core::io_err)?;
            }
            outcome.map(|_| ())
        })();
        self.record(Op::ZoneMgmt, &r);
        if let Some(t) = &self.timing {
            let pick = |s: ZoneState| -> Vec<u32> {
                changed.iter().filter(|c| c.1 == s).map(|c| c.0).collect()
            };
            let (reset, finished) = (pick(ZoneState::Empty), pick(ZoneState::Full));
            let cmd = match action {
                ZoneAction::Reset => TimedCmd::Reset { zones: &reset },
                ZoneAction::Finish => TimedCmd::Finish { zones: &finished },
                _ => TimedCmd::Admin,
            };
            // Select All may fail after changing zones; those changes still cost their time.
            t.complete(cmd, r.is_ok() || !changed.is_empty()).await;
        }
        r
    }

    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        self.enter(Op::Report).await?;
        let r = {
            let mut c = self.core.lock();
            c.drain_appends();
            let r = c.zones.report(lba, filter, partial, max_zones);
            if r.is_err() {
                c.stats.error(Op::Report);
            }
            r
        };
        if let Some(t) = &self.timing {
            t.complete(TimedCmd::Admin, r.is_ok()).await;
        }
        r
    }
}

impl EmuDevice {
    /// Books a finished Zone Append with the timing model, at the LBA it landed at.
    async fn time_append(&self, r: &NvmeResult<Lba>, blocks: u64, fua: bool) {
        if let Some(t) = &self.timing {
            let lba = *r.as_ref().unwrap_or(&0);
            t.complete(TimedCmd::Append { lba, blocks, fua }, r.is_ok())
                .await;
        }
    }

    fn copy_now(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        let g = &self.geo;
        if sources.is_empty() || sources.len() > g.copy_max_ranges as usize {
            return Err(NvmeStatus::CommandSizeLimitExceeded);
        }
        let mut total = 0u64;
        for s in sources {
            if s.blocks == 0 || s.blocks > u64::from(g.copy_max_range_blocks) {
                return Err(NvmeStatus::CommandSizeLimitExceeded);
            }
            total += s.blocks;
        }
        if total > u64::from(g.copy_max_blocks) {
            return Err(NvmeStatus::CommandSizeLimitExceeded);
        }
        let mut c = self.core.lock();
        c.drain_appends();
        for s in sources {
            c.zones.check_read(s.lba, s.blocks)?;
        }
        let bs = g.block_size as usize;
        let oob = g.oob_size as usize;
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
            c.read_blocks(s.lba, &mut data[at * bs..(at + n) * bs], m)?;
            at += n;
        }
        c.stats.blocks_read -= total;
        let payload = Payload {
            data: Some(&data),
            meta: (oob > 0).then_some(&meta[..]),
        };
        c.zoned_write(dest, total, payload, fua)?;
        c.stats.blocks_written -= total;
        c.stats.blocks_copied += total;
        Ok(())
    }
}
