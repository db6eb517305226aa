//! Helpers shared by the FTL's integration tests: a small emulated device and a runtime.
#![allow(dead_code)]

use std::sync::Arc;

use emu::{EmuConfig, EmuDevice};
use ftl::{FormatOptions, FtlVolume, MountOptions, VictimPolicy, WriteMode};
use zns::{BlockDevice, Geometry};

/// 20 zones of 64 blocks of 512 bytes, 16 B metadata, 12 open / 12 active.
pub fn geometry() -> Geometry {
    Geometry {
        block_size: 512,
        oob_size: 16,
        zone_count: 20,
        zone_size: 64,
        zone_capacity: 64,
        max_open: 12,
        max_active: 12,
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 8,
        copy_max_range_blocks: 16,
        copy_max_blocks: 16,
        cross_zone_reads: false,
    }
}

pub fn device(geometry: Geometry, seed: u64) -> Arc<EmuDevice> {
    Arc::new(
        EmuDevice::new_memory(EmuConfig {
            seed,
            ..EmuConfig::new(geometry)
        })
        .expect("device"),
    )
}

/// `zone_count` zones of 256 blocks of 4 KiB with 16 B metadata, `max_open` open and active,
/// transfers and copies of up to 64 blocks: a zn540-like shape small enough for a test.
pub fn geometry_4k(zone_count: u32, max_open: u32) -> Geometry {
    Geometry {
        block_size: 4096,
        oob_size: 16,
        zone_count,
        zone_size: 256,
        zone_capacity: 256,
        max_open,
        max_active: max_open,
        zasl_blocks: 64,
        mdts_blocks: 64,
        copy_max_ranges: 64,
        copy_max_range_blocks: 64,
        copy_max_blocks: 64,
        cross_zone_reads: false,
    }
}

/// A compact in-memory device (`EmuDevice::new_memory_compact`) of `zone_count` zones of
/// `zone_blocks` blocks of 4 KiB with 16 B metadata, 14 open / 14 active: large volumes for
/// little memory.
pub fn compact_4k(zone_count: u32, zone_blocks: u64) -> Arc<EmuDevice> {
    let g = Geometry {
        block_size: 4096,
        oob_size: 16,
        zone_count,
        zone_size: zone_blocks,
        zone_capacity: zone_blocks,
        max_open: 14,
        max_active: 14,
        ..geometry()
    };
    Arc::new(EmuDevice::new_memory_compact(EmuConfig::new(g)).expect("device"))
}

/// A device of `geometry` on the zn540 timing model in virtual time.
pub fn timed_zn540(geometry: Geometry, seed: u64) -> Arc<EmuDevice> {
    let cfg = EmuConfig {
        seed,
        ..EmuConfig::new(geometry)
    };
    let p = emu::timing::timing_profile("zn540").expect("zn540");
    Arc::new(
        EmuDevice::new_memory(cfg)
            .and_then(|d| d.with_timing(p, emu::ClockMode::Virtual))
            .expect("timed device"),
    )
}

/// An untimed device of `geometry` with the ZNS+ commands (docs/ZNSPLUS.md).
pub fn device_plus(geometry: Geometry, seed: u64) -> Arc<EmuDevice> {
    Arc::new(
        EmuDevice::new_memory(EmuConfig {
            seed,
            zns_plus: true,
            ..EmuConfig::new(geometry)
        })
        .expect("device"),
    )
}

/// A device of `zone_count` zones of the small geometry with `oob_size` bytes of per-block
/// metadata (0: the FTL keeps summaries in band), formatted with `op_permille`.
pub async fn formatted(
    oob_size: u32,
    zone_count: u32,
    op_permille: u32,
    seed: u64,
) -> Arc<EmuDevice> {
    let g = Geometry {
        oob_size,
        zone_count,
        ..geometry()
    };
    let dev = device(g, seed);
    ftl::format(
        dev.as_ref(),
        FormatOptions::with_op(op_permille),
        seed,
        false,
    )
    .await
    .expect("format");
    dev
}

/// A device of 40 zones of 256 blocks formatted with live data at 80% of the data zones'
/// payload.
pub async fn formatted_live_80() -> Arc<EmuDevice> {
    let g = Geometry {
        block_size: 4096,
        zone_count: 40,
        zone_size: 256,
        zone_capacity: 256,
        mdts_blocks: 64,
        copy_max_blocks: 64,
        copy_max_range_blocks: 64,
        ..geometry()
    };
    let dev = device(g, 1);
    let reserve = ftl::layout::RESERVE_ZONES_DEFAULT;
    let data_zones = ftl::Layout::new(g, 1000, reserve)
        .expect("layout")
        .data_zones;
    let want = u64::from(data_zones) * (g.zone_capacity - 1) * 8 / 10;
    ftl::format(dev.as_ref(), format_holding(g, want), 1, false)
        .await
        .expect("format");
    dev
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A runtime on a paused clock: time advances only when every task waits, so a run repeats
/// exactly.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}

/// Writes every block of `vol` once, then `rounds` times the volume's size in random
/// overwrites from 16 writers at once; returns the version each LBA holds. The first error
/// ends it.
pub async fn overwrite_everywhere(
    vol: &Arc<FtlVolume>,
    seed: u64,
    rounds: u64,
) -> Result<Vec<u64>, String> {
    let n = vol.size_blocks();
    let bs = vol.block_size() as usize;
    let mut versions = vec![0u64; n as usize];
    let mut rng = zns::SimRng::new(seed);
    let mut next = 0u64;
    let mut lbas: Vec<u64> = (0..n).collect();
    for _ in 0..rounds {
        lbas.extend((0..n).map(|_| rng.below(n)));
    }
    for batch in lbas.chunks(16) {
        // One version per LBA of a batch: writes in flight together never race on a block.
        let mut batch = batch.to_vec();
        batch.sort_unstable();
        batch.dedup();
        let writes = batch.iter().map(|&lba| {
            next += 1;
            let version = next;
            let vol = vol.clone();
            async move {
                vol.write(lba, &block(bs, version), false)
                    .await
                    .map(|()| (lba, version))
                    .map_err(|e| format!("write of LBA {lba}: {e}"))
            }
        });
        for r in futures::future::join_all(writes).await {
            let (lba, version) = r?;
            versions[lba as usize] = version;
        }
    }
    Ok(versions)
}

/// Every LBA of `vol` reads the version `versions` gives it, and the mapping verifies.
pub async fn check_versions(vol: &FtlVolume, versions: &[u64], when: &str) {
    let mut buf = vec![0u8; vol.block_size() as usize];
    for (lba, &v) in versions.iter().enumerate() {
        vol.read(lba as u64, &mut buf)
            .await
            .unwrap_or_else(|e| panic!("{when}: read of LBA {lba}: {e}"));
        assert_eq!(version_of(&buf), Some(v), "{when}: LBA {lba}");
    }
    vol.verify().unwrap_or_else(|e| panic!("{when}: {e}"));
}

pub fn small_opts() -> MountOptions {
    MountOptions {
        hot_zones: 2,
        gc_background_free_zones: 5,
        gc_foreground_free_zones: 3,
        checkpoint_every_zones: 3,
        ..MountOptions::default()
    }
}

pub async fn fresh(dev: &Arc<EmuDevice>, op_permille: u32, opts: MountOptions) -> Arc<FtlVolume> {
    ftl::format(dev.as_ref(), FormatOptions::with_op(op_permille), 7, false)
        .await
        .expect("format");
    FtlVolume::mount(dev.clone(), opts).await.expect("mount").0
}

/// A block whose every 8 bytes hold `version` (0 reads as a never-written block).
pub fn block(bs: usize, version: u64) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    if version != 0 {
        for c in b.chunks_mut(8) {
            c.copy_from_slice(&version.to_le_bytes());
        }
    }
    b
}

/// The version a block holds, or None if it is not a well-formed versioned block.
pub fn version_of(b: &[u8]) -> Option<u64> {
    let v = u64::from_le_bytes(b[..8].try_into().ok()?);
    b.chunks(8).all(|c| c == v.to_le_bytes()).then_some(v)
}

/// Per logical block, the versions a read may return after a crash, oldest first, each marked
/// certain (its write completed) or not (it failed or was in flight: it may or may not be there).
/// A flush keeps the newest certain version and what came after it; a read without a crash may
/// return the newest certain version or any uncertain one after it.
pub struct FaultModel {
    versions: Vec<Vec<(u64, bool)>>,
}

impl FaultModel {
    pub fn new(blocks: u64) -> FaultModel {
        FaultModel {
            versions: vec![vec![(0, true)]; blocks as usize],
        }
    }

    /// A write of `version` was submitted: until it completes, it may or may not be there.
    pub fn submitted(&mut self, lba: u64, version: u64) {
        self.versions[lba as usize].push((version, false));
    }

    /// The write of `version` completed; with FUA nothing older can come back.
    pub fn completed(&mut self, lba: u64, version: u64, fua: bool) {
        let v = &mut self.versions[lba as usize];
        if let Some(e) = v.iter_mut().find(|e| e.0 == version) {
            e.1 = true;
        }
        if fua {
            let at = v.iter().position(|e| e.0 == version).unwrap_or(0);
            v.drain(..at);
        }
    }

    /// The newest write of zeros (version 0) to `lba` completed.
    pub fn completed_last(&mut self, lba: u64, fua: bool) {
        let v = &mut self.versions[lba as usize];
        if let Some(at) = v.iter().rposition(|e| e.0 == 0 && !e.1) {
            v[at].1 = true;
            if fua {
                v.drain(..at);
            }
        }
    }

    /// A flush completed: everything completed before it is durable.
    pub fn flushed(&mut self) {
        for v in &mut self.versions {
            Self::collapse(v);
        }
    }

    fn collapse(v: &mut Vec<(u64, bool)>) {
        if let Some(at) = v.iter().rposition(|e| e.1) {
            v.drain(..at);
        }
    }

    /// The versions a read may return now (no crash since the writes).
    pub fn readable(&self, lba: u64) -> Vec<u64> {
        let v = &self.versions[lba as usize];
        let at = v.iter().rposition(|e| e.1).unwrap_or(0);
        v[at..].iter().map(|e| e.0).collect()
    }

    /// The versions a read may return after a crash.
    pub fn after_crash(&self, lba: u64) -> Vec<u64> {
        self.versions[lba as usize].iter().map(|e| e.0).collect()
    }

    /// A read after a crash returned `version`: from now on that is the block's only
    /// (durable, certain) content, since recovery made its choice.
    pub fn settle(&mut self, lba: u64, version: u64) {
        self.versions[lba as usize] = vec![(version, true)];
    }
}

/// Reads every block after a remount and checks it against the model, settling each block
/// to what it read; also checks the mapping's invariants.
pub async fn check_after_crash(vol: &FtlVolume, model: &mut FaultModel, what: &str) {
    use zns::BlockDevice;
    let bs = vol.block_size() as usize;
    let mut buf = vec![0u8; bs];
    for lba in 0..vol.size_blocks() {
        vol.read(lba, &mut buf)
            .await
            .unwrap_or_else(|e| panic!("{what}: read of LBA {lba} failed: {e}"));
        let got = version_of(&buf)
            .unwrap_or_else(|| panic!("{what}: LBA {lba} holds a torn or foreign block"));
        let allowed = model.after_crash(lba);
        assert!(
            allowed.contains(&got),
            "{what}: LBA {lba} reads version {got}, allowed {allowed:?}"
        );
        model.settle(lba, got);
    }
    if let Err(e) = vol.verify() {
        panic!("{what}: {e}");
    }
}

/// The background watermark of `small_opts` and `random_options` on the small geometry at
/// 58% with `oob` bytes of per-block metadata: 5, or 4 in summary mode (0), whose summary
/// blocks leave a full volume at most 4 free zones where a mount refuses more
/// (`ftl::plan::check_watermarks`).
pub fn background_free_zones(oob: u32) -> u32 {
    if oob == 0 {
        4
    } else {
        5
    }
}

/// Mount options drawn from `rng`: both write modes (summary mode forces Zone Write), both
/// victim policies, 1-3 hot zones, hot/cold on or off, 1-6 zones between checkpoints, Simple
/// Copy or read + write.
pub fn random_options(rng: &mut zns::SimRng) -> MountOptions {
    MountOptions {
        write_mode: if rng.chance(0.5) {
            WriteMode::ZoneWrite
        } else {
            WriteMode::ZoneAppend
        },
        victim_policy: if rng.chance(0.5) {
            VictimPolicy::Greedy
        } else {
            VictimPolicy::CostBenefit
        },
        hot_zones: rng.range_inclusive(1, 3) as u32,
        hot_cold: rng.chance(0.5),
        gc_background_free_zones: 5,
        gc_foreground_free_zones: 3,
        checkpoint_every_zones: rng.range_inclusive(1, 6) as u32,
        use_copy: rng.chance(0.7),
        ..MountOptions::default()
    }
}

/// Per logical block, the versions a read may return after a power cut: the last durable one
/// first, then every version written after it (for the crash schedules, whose blocks carry
/// their version: `block`, `version_of`).
pub struct VersionModel {
    pub allowed: Vec<Vec<u64>>,
}

impl VersionModel {
    /// `blocks` blocks, each holding version 0 (zeros) durably.
    pub fn new(blocks: u64) -> VersionModel {
        VersionModel {
            allowed: vec![vec![0]; blocks as usize],
        }
    }

    /// A write of `version` to `lba` completed; `durable` (FUA) drops every older version.
    pub fn write(&mut self, lba: u64, version: u64, durable: bool) {
        let a = &mut self.allowed[lba as usize];
        if durable {
            a.clear();
        }
        a.push(version);
    }

    /// A flush completed: the newest version of every block is the durable one.
    pub fn flush(&mut self) {
        for a in &mut self.allowed {
            let last = a[a.len() - 1];
            a.clear();
            a.push(last);
        }
    }

    pub fn latest(&self, lba: u64) -> u64 {
        let a = &self.allowed[lba as usize];
        a[a.len() - 1]
    }

    /// Reads every block of `vol`: each must hold an allowed version, which becomes the only
    /// one; then the volume's own consistency check. Failures name `seed` and `when`.
    pub async fn check_all(&mut self, vol: &FtlVolume, seed: u64, when: &str) {
        let bs = vol.block_size() as usize;
        let mut buf = vec![0u8; bs];
        for lba in 0..vol.size_blocks() {
            vol.read(lba, &mut buf)
                .await
                .unwrap_or_else(|e| panic!("seed {seed} {when}: read of LBA {lba} failed: {e}"));
            let got = version_of(&buf).unwrap_or_else(|| {
                panic!("seed {seed} {when}: LBA {lba} holds a torn or foreign block")
            });
            let allowed = &self.allowed[lba as usize];
            assert!(
                allowed.contains(&got),
                "seed {seed} {when}: LBA {lba} reads version {got}, allowed {allowed:?}"
            );
            self.allowed[lba as usize] = vec![got];
        }
        if let Err(e) = vol.verify() {
            panic!("seed {seed} {when}: {e}");
        }
    }
}

/// What a `Watched` device does before each write it passes on: count it, look at the
/// device, or refuse it (an error is the write's, and the write is not sent).
#[async_trait::async_trait]
pub trait BeforeWrite: Send + Sync {
    async fn before_write(&self, inner: &EmuDevice, data: &[u8]) -> zns::NvmeResult<()>;
}

/// The emulator, ZNS+ commands included, with `watch` run before each write. (`zns::Hooked`
/// sees no data and passes no ZNS+ command on.)
pub struct Watched<W> {
    pub inner: Arc<EmuDevice>,
    pub watch: W,
}

#[async_trait::async_trait]
impl<W: BeforeWrite> zns::ZonedDevice for Watched<W> {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    async fn read(
        &self,
        lba: zns::Lba,
        buf: &mut [u8],
        meta: Option<&mut [u8]>,
    ) -> zns::NvmeResult<()> {
        self.inner.read(lba, buf, meta).await
    }
    async fn write(
        &self,
        lba: zns::Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> zns::NvmeResult<()> {
        self.watch.before_write(&self.inner, data).await?;
        self.inner.write(lba, data, meta, fua).await
    }
    async fn append(
        &self,
        zslba: zns::Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> zns::NvmeResult<zns::Lba> {
        self.inner.append(zslba, data, meta, fua).await
    }
    async fn write_zeroes(&self, lba: zns::Lba, blocks: u64, fua: bool) -> zns::NvmeResult<()> {
        self.inner.write_zeroes(lba, blocks, fua).await
    }
    async fn flush(&self) -> zns::NvmeResult<()> {
        self.inner.flush().await
    }
    async fn copy(
        &self,
        sources: &[zns::CopyRange],
        dest: zns::Lba,
        fua: bool,
    ) -> zns::NvmeResult<()> {
        self.inner.copy(sources, dest, fua).await
    }
    async fn zone_mgmt(
        &self,
        action: zns::ZoneAction,
        zslba: zns::Lba,
        select_all: bool,
    ) -> zns::NvmeResult<()> {
        self.inner.zone_mgmt(action, zslba, select_all).await
    }
    async fn report_zones(
        &self,
        lba: zns::Lba,
        filter: zns::ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> zns::NvmeResult<zns::ZoneReport> {
        self.inner
            .report_zones(lba, filter, partial, max_zones)
            .await
    }
    fn die_stripe(&self) -> Option<zns::DieStripe> {
        self.inner.die_stripe()
    }
    fn identify_mapping(&self) -> Option<zns::plus::ChunkMapping> {
        self.inner.identify_mapping()
    }
    async fn zone_compaction(
        &self,
        extents: &[zns::plus::CompactionExtent],
    ) -> zns::NvmeResult<()> {
        self.inner.zone_compaction(extents).await
    }
    async fn tl_open(&self, zslba: zns::Lba, valid: &[u8]) -> zns::NvmeResult<()> {
        self.inner.tl_open(zslba, valid).await
    }
}

/// Format options exporting `want` blocks, from the smallest over-provisioning (in steps of
/// 0.5%) whose layout of `g` with the default reserve holds them.
pub fn format_holding(g: Geometry, want: u64) -> FormatOptions {
    let reserve = ftl::layout::RESERVE_ZONES_DEFAULT;
    let op = (10..=1000)
        .step_by(5)
        .find(|&op| ftl::Layout::new(g, op, reserve).is_ok_and(|l| l.volume_blocks >= want))
        .expect("an over-provisioning that holds the volume");
    FormatOptions {
        volume_blocks: Some(want),
        ..FormatOptions::with_op(op)
    }
}
