//! `EmuDevice`: the emulated ZNS SSD. An async `ZonedDevice` shell around the zone state
//! machine (`zones`), a storage backend (`store`), fault injection and counters.
//!
//! Locks. The state (zones, counters, faults, append queue) is behind one lock, the core,
//! held only for the short synchronous steps of a command, so every command is atomic with
//! respect to the others. The bytes of a Zone Write or Write Zeroes are copied into the shared
//! store outside it, and reads copy out of the store outside it too: writers and readers of
//! different zones run in parallel on different threads. A write to an open zone that moves
//! nothing but the write pointer takes the core lock once: the pointer moves before the copy
//! and the blocks stay claimed until the copy is done (`inflight`); other writes are marked
//! busy before the copy and finished under the core lock after it. Admission takes no lock
//! while nothing can be refused or injected (`admission`: per-thread counters and a gate).
//! Every command that writes a zone or changes its state holds that zone's lock first
//! (lifecycle commands and Select All hold all of them), so no two writers of one zone
//! overlap; the order is zone locks ascending, then the core, then the timing model's lock.
//! The zone locks, the claims and the admission counters each sit on their own cache lines,
//! so threads working on different zones share no written line but the core lock's.
//! Single-threaded, nothing changes: a write begins and finishes without a poll in between.
//!
//! One concept per file: `lifecycle` (create, open, restart, power loss, shutdown, kill),
//! `core` (the state behind the lock and the synchronous steps of every command), `append`
//! (the Zone Append queue, whose order the device chooses), `admission` (the lock-free
//! admission path and command counters), `commands` (the `ZonedDevice` implementation),
//! and this file (the device handle, its accessors, and command admission).
//!
//! Fault model: see `zones` (durability and power loss), `fault` (injected errors) and
//! `lifecycle` (process kill).
//!
//! In-flight commands: a command takes effect when it is first polled, in that order, so
//! writes submitted in write-pointer order succeed at any queue depth. Zone Appends are the
//! exception the ZNS model exists for (see `append`).

mod admission;
mod append;
mod commands;
mod core;
mod lifecycle;

use std::path::Path;

use parking_lot::Mutex;
use zns::{Geometry, Lba, NvmeResult, NvmeStatus};

use self::core::Core;
use crate::fault::FaultPlan;
use crate::stats::{Op, Stats};
use crate::timed::Timing;
use crate::timing::{ClockMode, TimingCounters, TimingProfile};
use crate::{EmuConfig, EmuError};

/// Which backend a device keeps its bytes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Memory,
    File,
}

/// An emulated ZNS SSD.
pub struct EmuDevice {
    geo: Geometry,
    cfg: EmuConfig,
    /// The image file, for a file-backed device.
    path: Option<std::path::PathBuf>,
    core: Mutex<Core>,
    /// Admission counters and gate, also held by the core (which shuts the gate).
    admission: std::sync::Arc<admission::Admission>,
    /// The claims of writes copying outside the core lock (`inflight`), shared with the
    /// core's zone table.
    uncopied: std::sync::Arc<crate::inflight::Uncopied>,
    /// One per zone, each on its own cache line; see "Locks" above.
    zone_locks: Box<[crate::inflight::CachePadded<Mutex<()>>]>,
    /// The store the core also holds, for the copies made outside the core lock.
    store: std::sync::Arc<dyn crate::store::Store>,
    /// The performance model, when enabled: decides when each command completes.
    timing: Option<Timing>,
}

impl EmuDevice {
    /// Enables the timing model: every command then completes when the model says, on the
    /// given clock. Zone states and data behave exactly as without.
    pub fn with_timing(
        mut self,
        profile: TimingProfile,
        mode: ClockMode,
    ) -> Result<EmuDevice, EmuError> {
        let timing = Timing::new(profile, self.geo, mode).map_err(EmuError::Config)?;
        // The image's plugging order, before the resync that rebuilds TL-opened zones.
        timing.set_plug_order(self.cfg.plug_order);
        self.timing = Some(timing);
        // The device may already hold data (an image opened from disk): the model must count
        // it as on flash, or it would book programs for data whose buffer space it never took.
        let mut core = self.core.lock();
        self.resync_timing(&core);
        if self.cfg.zns_plus {
            core.plug_log = Some(Vec::new());
        }
        drop(core);
        Ok(self)
    }

    /// Books the ZNS+ work (LogFBG allocations, LBA-ordered plugging) the last commands left
    /// for the timing model; nothing waits for it, but it occupies the flash.
    fn book_plugs(&self) {
        let Some(t) = &self.timing else {
            return;
        };
        let events = match self.core.lock().plug_log.as_mut() {
            Some(log) => std::mem::take(log),
            None => return,
        };
        for e in &events {
            let cmd = match *e {
                core::PlugEvent::TlOpen(zone, ref valid) => {
                    crate::timing::TimedCmd::TlOpen { zone, valid }
                }
                core::PlugEvent::Plug(lba, blocks) => crate::timing::TimedCmd::Plug { lba, blocks },
            };
            t.book(cmd);
        }
    }

    /// Chooses how the timing model plugs TL-opened zones from the next TL_open on:
    /// PPA-ordered in idle chip time (the default) or LBA-ordered. No effect without timing,
    /// and never on data.
    pub fn set_plug_order(&self, order: crate::timing::PlugOrder) {
        if let Some(t) = &self.timing {
            t.set_plug_order(order);
        }
    }

    /// Turns the timing model's copyback on (the default) or off: off, every copy inside the
    /// device is a read to the controller and a program, as on a controller without the
    /// flash's copyback command (ZNS+ Fig. 7(a)'s "w/o cpbk"). No effect without timing, and
    /// never on data.
    pub fn set_copyback(&self, enabled: bool) {
        if let Some(t) = &self.timing {
            t.set_copyback(enabled);
        }
    }

    /// The ZNS+ chunk mapping (docs/ZNSPLUS.md) when the device has the ZNS+ commands: the
    /// timing model's units, dies per zone and die groups when timing is on, so the host
    /// places copies where the model does copybacks; `untimed_chunk_mapping` otherwise.
    pub fn chunk_mapping(&self) -> Option<zns::ChunkMapping> {
        if !self.cfg.zns_plus {
            return None;
        }
        let untimed = crate::config::untimed_chunk_mapping(&self.geo);
        Some(match &self.timing {
            None => untimed,
            Some(t) => {
                let p = t.profile();
                let per_zone = p.dies_per_zone().max(1);
                zns::ChunkMapping {
                    chunk_blocks: (p.unit_bytes() / u64::from(self.geo.block_size.max(1)))
                        .clamp(1, u64::from(u32::MAX)) as u32,
                    zone_chips: per_zone,
                    chip_groups: (p.dies() / per_zone).max(1),
                    ..untimed
                }
            }
        })
    }

    /// How the timing model stripes a zone over its dies (`ZonedDevice::die_stripe`): units
    /// of one page per plane (at least one block) over the dies a zone spans; None untimed.
    /// With die groups (`zone_dies` below the array's dies) zones of different groups are on
    /// different dies, which the hint does not say: a host taking it treats every zone as on
    /// the same dies, as cautious as the hint can make it.
    pub fn timed_die_stripe(&self) -> Option<zns::DieStripe> {
        self.timing.as_ref().map(|t| {
            let p = t.profile();
            zns::DieStripe {
                unit_blocks: (p.unit_bytes() / u64::from(self.geo.block_size.max(1))).max(1),
                dies: u64::from(p.dies_per_zone().max(1)),
            }
        })
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
            // TL-opened zones keep their bitmap and old data across a restart.
            for z in 0..g.zone_count {
                if let Some(map) = c.zones.tl_map(z) {
                    let old = c.zones.zone(z).data_end - g.zone_start(z);
                    t.resync_tl(z, old, map.as_bytes());
                }
            }
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

    /// The first host I/O error on the image (a full host file system, a failing host disk),
    /// in one line naming the operation, the image and the cause; `None` while there was
    /// none. The first is kept because later ones are usually its consequences. Commands
    /// report such errors as Write Fault or Unrecovered Read Error, which name no cause.
    pub fn host_error(&self) -> Option<String> {
        self.core.lock().host_error()
    }

    /// Whether the device was opened read-only (`open_file_read_only`).
    pub fn is_read_only(&self) -> bool {
        self.core.lock().is_read_only()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let mut s = self.core.lock().stats.clone();
        self.admission.add_to(&mut s);
        s
    }

    /// Bytes of host memory (memory backend) or image size (file backend) in use.
    pub fn footprint_bytes(&self) -> u64 {
        self.core.lock().store.footprint_bytes()
    }

    /// Allocates all the host memory a memory-backed device may use now, instead of on each
    /// block's first write (a page fault and a page clear inside that write); returns the
    /// bytes allocated. A file-backed device has nothing to do. Data already written is
    /// kept, and the device may serve commands meanwhile.
    pub fn prefault(&self) -> u64 {
        self.store.prefault()
    }

    /// Installs a fault plan, replacing the previous one.
    pub fn set_faults(&self, plan: FaultPlan) -> Result<(), EmuError> {
        plan.validate().map_err(EmuError::Config)?;
        self.core.lock().set_faults(plan);
        Ok(())
    }

    /// Whole-device failure: every later command fails with Namespace Not Ready.
    pub fn fail_device(&self) {
        self.core.lock().fail_device();
    }

    /// Admission: fault injection and counters. Returns the delay to apply, if any. Without
    /// the core lock while nothing can be refused or injected (see `admission`).
    fn admit(&self, op: Op) -> NvmeResult<Option<std::time::Duration>> {
        if self.admission.try_fast(op) {
            return Ok(None);
        }
        self.core.lock().admit(op)
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

    /// The lock of the zone holding `lba`, if `lba` is in the namespace (a command at an LBA
    /// outside it fails validation and touches no zone).
    fn lock_zone_of(&self, lba: Lba) -> Option<parking_lot::MutexGuard<'_, ()>> {
        let z = self.geo.zone_of(lba)?;
        self.zone_locks.get(z as usize).map(|l| l.lock())
    }

    /// Every zone's lock, in ascending order: for Select All and lifecycle commands.
    fn lock_all_zones(&self) -> Vec<parking_lot::MutexGuard<'_, ()>> {
        self.zone_locks.iter().map(|l| l.lock()).collect()
    }

    fn record(&self, op: Op, r: &NvmeResult<impl Sized>) {
        if r.is_err() {
            self.admission.count_error(op);
        }
    }
}
