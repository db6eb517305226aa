//! The life of an emulated device: create (memory or image file), open, restart, power loss,
//! clean shutdown and process kill.
//!
//! Fault model: a process kill of a file-backed device (`kill`) keeps exactly what was
//! durable: while the device runs, the image's zone table only records durable write
//! pointers (the restart form, see `core::restart_form`) and its superblock says "in use", so
//! the next open applies the restart rule, as after a power loss. A power loss keeps a random
//! prefix of each zone's unflushed data, drawn from a seed, and is persisted like a restart.
//!
//! Between commands the image behaves like a drive that stays powered: a clean shutdown
//! flushes, records each open zone's open state in its entry and marks the image clean, and
//! the next open of a clean image brings those zones back open (with the open and active
//! resources they hold). A restart or power loss happens only when asked for.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use zns::{Geometry, Lba, ZoneState};

use super::admission::Admission;
use super::core::Core;
use super::EmuDevice;
use crate::image::{ImageError, Superblock, ZoneEntry};
use crate::inflight::CachePadded;
use crate::store::{CompactStore, FileStore, MemStore, Store};
use crate::zones::{Zone, ZoneTable};
use crate::{EmuConfig, EmuError};

impl EmuDevice {
    /// A device in memory.
    pub fn new_memory(cfg: EmuConfig) -> Result<EmuDevice, EmuError> {
        let zones = cfg.geometry.zone_count;
        Self::new_memory_keeping_data_of(cfg, zones)
    }

    /// A device in memory that keeps the block data of zones `0..kept_zones` only (the
    /// metadata of every block, and the zones' state, as `new_memory`): writes to the other
    /// zones are accepted, timed and counted as usual and their data dropped, and a read of
    /// their data fails with Unrecovered Read Error. For benchmarks that fill large zones they
    /// never read back (an array's metadata lives in its members' first zones).
    pub fn new_memory_keeping_data_of(
        cfg: EmuConfig,
        kept_zones: u32,
    ) -> Result<EmuDevice, EmuError> {
        Self::in_memory(cfg, |g, data, meta| {
            let kept = g.zone_start(kept_zones.min(g.zone_count)) * u64::from(g.block_size);
            Arc::new(MemStore::keeping_data_below(data, meta, kept))
        })
    }

    /// A device in memory that stores a block whose bytes are all one value in one byte
    /// (`store::CompactStore`); reads return what was written, as `new_memory`'s do. For
    /// benchmarks that write one pattern over more flash than the host has memory for.
    pub fn new_memory_compact(cfg: EmuConfig) -> Result<EmuDevice, EmuError> {
        Self::in_memory(cfg, |g, data, meta| {
            Arc::new(CompactStore::new(data, meta, g.block_size as usize))
        })
    }

    /// A device in memory on the store `make` builds for its geometry, data bytes and
    /// metadata bytes, its geometry checked first.
    fn in_memory(
        cfg: EmuConfig,
        make: impl FnOnce(&Geometry, u64, u64) -> Arc<dyn Store>,
    ) -> Result<EmuDevice, EmuError> {
        cfg.geometry.validate()?;
        let g = cfg.geometry;
        let store = make(
            &g,
            g.total_blocks() * u64::from(g.block_size),
            g.total_blocks() * u64::from(g.oob_size),
        );
        Ok(Self::assemble(cfg, None, store, ZoneTable::new(g), false))
    }

    /// Creates a file image at `path`. An existing file is refused unless `force`. With
    /// `cfg.zns_plus` the image records it and holds the valid bitmaps of TL-opened zones
    /// (docs/FORMAT.md), so the next open has the ZNS+ commands too.
    pub fn create_file(path: &Path, cfg: EmuConfig, force: bool) -> Result<EmuDevice, EmuError> {
        cfg.geometry.validate()?;
        let sb = Superblock {
            geometry: cfg.geometry,
            volatile_cache: cfg.volatile_cache,
            clean: false,
            seed: cfg.seed,
            zns_plus: cfg.zns_plus,
            lba_plugging: cfg.plug_order == crate::timing::PlugOrder::Lba,
        };
        let store = FileStore::create(path, sb, cfg.host_sync, force)?;
        Ok(Self::assemble(
            cfg,
            Some(path.to_path_buf()),
            Arc::new(store),
            ZoneTable::new(cfg.geometry),
            false,
        ))
    }

    /// Opens an existing image. After a clean shutdown its zones come back as they were,
    /// open ones open; after a process kill they come back by the restart rule (item 37).
    pub fn open_file(path: &Path, host_sync: bool) -> Result<EmuDevice, EmuError> {
        let (store, image) = FileStore::open(path, host_sync)?;
        let sb = store.superblock();
        let zones = zones_at_open(&sb, &image.entries)?;
        store.set_clean(false)?;
        let cfg = EmuConfig {
            geometry: sb.geometry,
            volatile_cache: sb.volatile_cache,
            seed: sb.seed,
            reorder_appends: true,
            host_sync,
            zns_plus: sb.zns_plus,
            plug_order: if sb.lba_plugging {
                crate::timing::PlugOrder::Lba
            } else {
                crate::timing::PlugOrder::Ppa
            },
        };
        Ok(Self::assemble(
            cfg,
            Some(path.to_path_buf()),
            Arc::new(store),
            ZoneTable::from_zones_tl(sb.geometry, zones, image.tl),
            false,
        ))
    }

    /// Opens an existing image read-only: O_RDONLY with a shared lock, so it works on a
    /// read-only file or mount and beside other readers (never beside a writer). Reads,
    /// Report Zones and Flush work; every command that would change the medium fails with
    /// Namespace is Write Protected, and power loss, restart and zone faults are refused.
    /// Nothing is ever written to the image, not even at shutdown.
    pub fn open_file_read_only(path: &Path) -> Result<EmuDevice, EmuError> {
        let (store, image) = FileStore::open_read_only(path)?;
        let sb = store.superblock();
        let zones = zones_at_open(&sb, &image.entries)?;
        let cfg = EmuConfig {
            geometry: sb.geometry,
            volatile_cache: sb.volatile_cache,
            seed: sb.seed,
            reorder_appends: true,
            host_sync: false,
            zns_plus: sb.zns_plus,
            plug_order: if sb.lba_plugging {
                crate::timing::PlugOrder::Lba
            } else {
                crate::timing::PlugOrder::Ppa
            },
        };
        Ok(Self::assemble(
            cfg,
            Some(path.to_path_buf()),
            Arc::new(store),
            ZoneTable::from_zones_tl(sb.geometry, zones, image.tl),
            true,
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
        let (store, _) = FileStore::open_read_only(path)?;
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
        let (store, _) = FileStore::open_read_only(path)?;
        Ok(store.superblock().clean)
    }

    fn assemble(
        cfg: EmuConfig,
        path: Option<std::path::PathBuf>,
        store: Arc<dyn Store>,
        zones: ZoneTable,
        read_only: bool,
    ) -> EmuDevice {
        let zone_locks = (0..cfg.geometry.zone_count)
            .map(|_| CachePadded(Mutex::new(())))
            .collect();
        let admission = Arc::new(Admission::new(read_only));
        let uncopied = zones.uncopied();
        EmuDevice {
            geo: cfg.geometry,
            cfg,
            core: Mutex::new(Core::new(
                cfg,
                Arc::clone(&store),
                zones,
                path.clone(),
                read_only,
                Arc::clone(&admission),
            )),
            admission,
            uncopied,
            zone_locks,
            store,
            path,
            timing: None,
        }
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
        let _zones = self.lock_all_zones();
        self.core.lock().force_zone_state(zone, state)
    }

    /// Power loss with the volatile write cache's contents lost: each zone keeps a random
    /// prefix (drawn from `seed`) at least up to its durable point; appends in flight are
    /// aborted; then the device restarts. Returns (zone, kept WP, lost WP) per cut zone.
    pub fn power_loss(&self, seed: u64) -> Result<Vec<(u32, Lba, Lba)>, EmuError> {
        let _zones = self.lock_all_zones();
        let mut c = self.core.lock();
        let cut = c.power_cut(seed)?;
        self.resync_timing(&c);
        Ok(cut)
    }

    /// Clean controller shutdown and restart, in place: the cache is flushed and open zones
    /// come back Closed (Empty if unwritten), as item 37 requires. Persisted, so the next
    /// open of the image finds them so too.
    pub fn restart(&self) -> Result<(), EmuError> {
        let _zones = self.lock_all_zones();
        let mut c = self.core.lock();
        c.restart()?;
        self.resync_timing(&c);
        Ok(())
    }

    /// Clean shutdown: flush, persist every zone with its open state, mark the image clean
    /// (the next open finds the zones as they are now). Idempotent; also run when the device
    /// is dropped. A read-only device writes nothing. A device that failed
    /// on a host I/O error writes nothing either, and returns that error (its image is then
    /// as after a process kill at the failure).
    pub fn shutdown(&self) -> Result<(), EmuError> {
        let _zones = self.lock_all_zones();
        self.core.lock().shutdown()
    }

    /// Process kill: the device goes away without a shutdown. An image keeps what was
    /// durable; nothing else is written.
    pub fn kill(self) {
        let _zones = self.lock_all_zones();
        self.core.lock().kill();
    }
}

impl Drop for EmuDevice {
    fn drop(&mut self) {
        // A drop is a clean shutdown; an error here has nobody to report to, and the image
        // then simply comes back as after a power loss at the last durable point.
        let _ = self.shutdown();
    }
}

/// The zones an open of an image starts from: as they were at a clean shutdown, or the
/// restart form (a power loss) when the image was in use, that is, its process was killed.
/// Open zones beyond the device's open or active limits mean a corrupt image.
fn zones_at_open(sb: &Superblock, entries: &[ZoneEntry]) -> Result<Vec<Zone>, EmuError> {
    if !sb.clean {
        return Ok(entries.iter().map(|e| e.zone).collect());
    }
    let zones: Vec<Zone> = entries
        .iter()
        .map(ZoneEntry::after_clean_shutdown)
        .collect();
    let g = &sb.geometry;
    let open = zones.iter().filter(|z| z.state.is_open()).count() as u64;
    let active = zones.iter().filter(|z| z.state.is_active()).count() as u64;
    let over = |n: u64, limit: u32| limit != 0 && n > u64::from(limit);
    if over(open, g.max_open) || over(active, g.max_active) {
        return Err(ImageError::BadGeometry(format!(
            "the zone table holds {open} open and {active} active zones, more than the \
             device's limits ({} open, {} active)",
            g.max_open, g.max_active
        ))
        .into());
    }
    Ok(zones)
}

/// The first geometry field in which `a` and `b` differ, with both values.
fn first_difference(a: &Geometry, b: &Geometry) -> Option<String> {
    a.first_difference(b)
        .map(|(name, x, y)| format!("{name} (expected {x}, found {y})"))
}
