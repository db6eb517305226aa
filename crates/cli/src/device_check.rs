//! `zonestack device check PATH [--destructive]`: the ZNS conformance kit (crates/zns/src/
//! conformance) against one device, an emulator image or a zoned block device, printing one
//! line per checklist item: pass, FAIL with the difference, or not applicable with why.
//!
//! The kit builds a fresh device for every item with the geometry the item needs. Here there
//! is one device, so an item runs only when the device has that item's zone layout (block
//! size, zone count, zone size and capacity, open and active limits; metadata size, size
//! limits and cross-zone reads may differ and the items check against the device's own), and
//! is not applicable
//! otherwise. "Fresh" means: every zone reset (a drive), or a scratch image with the image's
//! configuration (an image, which itself is never written). A drive cannot be power-cycled
//! or have zones forced Read Only or Offline from here, so those items are not applicable on
//! a drive; an emulator can do both.
//!
//! Fault model: the kit injects only what the checklist says a device survives; a command
//! that fails while the factory prepares an item (a reset, an image re-creation) fails that
//! item with the cause rather than passing or skipping it.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use emu::{EmuConfig, EmuDevice};
use zlinux::LinuxZoned;
use zns::conformance::{check_item, DeviceFactory, KitFailure, Outcome, ITEMS};
use zns::{Geometry, ZoneAction, ZoneState, ZonedDevice};

use crate::args::CheckArgs;
use crate::commands;
use crate::error::{CliError, CliResult};
use crate::opened::{used_zone_among, Opened};

/// What the factory could not do for the current item, and what went wrong preparing it.
#[derive(Default)]
struct Notes {
    unsupported: Mutex<Option<String>>,
    setup_error: Mutex<Option<String>>,
}

impl Notes {
    fn unsupported(&self, what: String) {
        if let Ok(mut n) = self.unsupported.lock() {
            n.get_or_insert(what);
        }
    }
    fn setup_failed(&self, what: String) {
        if let Ok(mut n) = self.setup_error.lock() {
            n.get_or_insert(what);
        }
    }
    fn take_unsupported(&self) -> Option<String> {
        self.unsupported.lock().ok().and_then(|mut n| n.take())
    }
    fn take_setup_error(&self) -> Option<String> {
        self.setup_error.lock().ok().and_then(|mut n| n.take())
    }
}

/// The zone layout an item needs: what must match for it to run on this device. Whether reads
/// may cross zones is not part of it: the Linux block layer always allows them, and the items
/// check against the device's own setting.
fn same_layout(a: &Geometry, b: &Geometry) -> bool {
    let key = |g: &Geometry| {
        (
            g.block_size,
            g.zone_count,
            g.zone_size,
            g.zone_capacity,
            g.max_open,
            g.max_active,
        )
    };
    key(a) == key(b)
}

/// A geometry in a few words, for "not applicable" lines.
fn layout_text(g: &Geometry) -> String {
    let limit = |n: u32| match n {
        0 => "unlimited".to_string(),
        n => n.to_string(),
    };
    format!(
        "{} zones of {} blocks ({} writable) of {} B, {} B metadata, max open {}, max active {}{}",
        g.zone_count,
        g.zone_size,
        g.zone_capacity,
        g.block_size,
        g.oob_size,
        limit(g.max_open),
        limit(g.max_active),
        if g.cross_zone_reads {
            ", cross-zone reads"
        } else {
            ""
        }
    )
}

/// The geometry an item gets on `dev`: the device's own when its layout is the one wanted.
fn geometry_on(dev: Geometry, wanted: &Geometry) -> Geometry {
    if same_layout(&dev, wanted) {
        dev
    } else {
        *wanted
    }
}

/// Notes the item not applicable when `wanted` is not exactly what `dev` is.
fn note_mismatch(notes: &Notes, dev: &Geometry, wanted: &Geometry) {
    if dev != wanted {
        notes.unsupported(format!("needs {}", layout_text(wanted)));
    }
}

/// One zoned block device, every zone reset for each item.
struct DriveFactory {
    dev: Arc<LinuxZoned>,
    notes: Notes,
    /// Every item runs on the device's own layout (--any-layout).
    any_layout: bool,
}

#[async_trait]
impl DeviceFactory for DriveFactory {
    type Device = Arc<LinuxZoned>;

    async fn create(&self, geometry: &Geometry) -> Arc<LinuxZoned> {
        if !self.any_layout {
            note_mismatch(&self.notes, &self.dev.geometry(), geometry);
        }
        if let Err(s) = self.dev.zone_mgmt(ZoneAction::Reset, 0, true).await {
            self.notes
                .setup_failed(format!("resetting every zone before the item failed: {s}"));
        }
        Arc::clone(&self.dev)
    }
    async fn restart(&self, dev: Arc<LinuxZoned>) -> Arc<LinuxZoned> {
        self.notes
            .unsupported("needs a controller restart, which a drive cannot do from here".into());
        dev
    }
    async fn power_cycle(&self, dev: Arc<LinuxZoned>, _seed: u64) -> Arc<LinuxZoned> {
        self.notes
            .unsupported("needs power-loss control, which a real drive does not offer".into());
        dev
    }
    async fn set_zone_state(&self, _dev: &Arc<LinuxZoned>, _zone: u32, state: ZoneState) {
        self.notes.unsupported(format!(
            "needs a device-side fault (a zone made {state}), which a real drive does not offer"
        ));
    }
    fn geometry_for(&self, wanted: &Geometry) -> Geometry {
        if self.any_layout {
            return self.dev.geometry();
        }
        geometry_on(self.dev.geometry(), wanted)
    }
    fn take_unsupported(&self) -> Option<String> {
        self.notes.take_unsupported()
    }
}

/// One emulator image's configuration: every item gets a scratch image of it in a temporary
/// directory (the kit may hold two devices at once, and the image itself is never written);
/// restart, power loss and zone faults are the emulator's own, in place.
struct ImageFactory {
    dir: tempfile::TempDir,
    cfg: EmuConfig,
    next: AtomicU64,
    notes: Notes,
}

impl ImageFactory {
    /// A scratch image; a memory device with the same configuration when the file cannot be
    /// created (the item then fails with that cause).
    fn fresh(&self) -> EmuDevice {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.path().join(format!("item{n}.img"));
        match EmuDevice::create_file(&path, self.cfg, false) {
            Ok(d) => d,
            Err(e) => {
                self.notes
                    .setup_failed(format!("creating {} failed: {e}", path.display()));
                match EmuDevice::new_memory(self.cfg) {
                    Ok(d) => d,
                    Err(e) => {
                        // The configuration came from a valid image: only exhausted memory
                        // fails here, and there is no device left to run anything on.
                        eprintln!("zonestack: cannot build a device to check: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
}

#[async_trait]
impl DeviceFactory for ImageFactory {
    type Device = EmuDevice;

    async fn create(&self, geometry: &Geometry) -> EmuDevice {
        note_mismatch(&self.notes, &self.cfg.geometry, geometry);
        self.fresh()
    }
    async fn restart(&self, dev: EmuDevice) -> EmuDevice {
        if let Err(e) = dev.restart() {
            self.notes.setup_failed(format!("restart failed: {e}"));
        }
        dev
    }
    async fn power_cycle(&self, dev: EmuDevice, seed: u64) -> EmuDevice {
        if let Err(e) = dev.power_loss(seed) {
            self.notes.setup_failed(format!("power loss failed: {e}"));
        }
        dev
    }
    async fn set_zone_state(&self, dev: &EmuDevice, zone: u32, state: ZoneState) {
        if let Err(e) = dev.set_zone_state(zone, state) {
            self.notes
                .setup_failed(format!("zone fault injection failed: {e}"));
        }
    }
    fn geometry_for(&self, wanted: &Geometry) -> Geometry {
        geometry_on(self.cfg.geometry, wanted)
    }
    fn take_unsupported(&self) -> Option<String> {
        self.notes.take_unsupported()
    }
}

/// How many items passed, failed and did not apply.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: u32,
    pub failed: u32,
    pub not_applicable: u32,
}

/// Runs every checklist item, one line each. A setup error recorded during an item turns it
/// into a failure with that cause.
async fn run_items<F: DeviceFactory>(
    f: &F,
    notes: &Notes,
    known: &[(u32, &str)],
    out: &mut impl Write,
) -> Result<Tally, CliError> {
    let mut t = Tally::default();
    for (item, name) in ITEMS {
        notes.take_setup_error();
        // An item that did not apply ran against a device it did not ask for, so what went
        // wrong preparing it says nothing about the device.
        let outcome = match (check_item(f, *item).await, notes.take_setup_error()) {
            (o @ Outcome::NotApplicable(_), _) => o,
            (_, Some(e)) => Outcome::Fail(KitFailure::new(*item, e)),
            (o, None) => o,
        };
        match outcome {
            Outcome::Pass => {
                t.passed += 1;
                writeln!(out, "item {item:2} pass: {name}")?;
            }
            Outcome::NotApplicable(why) => {
                t.not_applicable += 1;
                writeln!(out, "item {item:2} not applicable: {name}: {why}")?;
            }
            Outcome::Fail(e) => {
                t.failed += 1;
                let why = known
                    .iter()
                    .find(|(n, _)| n == item)
                    .map(|(_, why)| format!(" [known: {why}]"))
                    .unwrap_or_default();
                writeln!(out, "item {item:2} FAIL: {name}: {}{why}", e.message)?;
            }
        }
        out.flush()?;
    }
    Ok(t)
}

/// Refuses a drive holding data unless --destructive: the kit writes and resets every zone.
async fn refuse_used(dev: &Opened, a: &CheckArgs) -> CliResult {
    if a.destructive || !dev.is_drive() {
        return Ok(());
    }
    match used_zone_among(dev, |_| true).await? {
        Some(why) => Err(CliError::Other(format!(
            "{}: {why}: the check writes and resets every zone, so its data would be lost; \
             pass --destructive to run it anyway",
            a.path.display()
        ))),
        None => Ok(()),
    }
}

pub async fn run(a: &CheckArgs, out: &mut impl Write) -> CliResult {
    let dev = commands::open_read_only(&a.path)?;
    if let Err(e) = refuse_used(&dev, a).await {
        return Err(close_after(e, dev.shutdown()));
    }
    let t = match dev {
        Opened::Drive(d) => {
            let g = d.geometry();
            writeln!(
                out,
                "{}: a zoned block device, {}",
                a.path.display(),
                layout_text(&g)
            )?;
            let known = zlinux::known_kit_failures(d.traits());
            let f = DriveFactory {
                dev: Arc::new(d),
                notes: Notes::default(),
                any_layout: a.any_layout,
            };
            run_items(&f, &f.notes, &known, out).await?
        }
        Opened::Image(img) => {
            let cfg = img.config();
            img.shutdown()
                .map_err(|e| CliError::Other(format!("closing {}: {e}", a.path.display())))?;
            drop(img);
            writeln!(
                out,
                "{}: an emulator image, {}; each item runs on a scratch image of this \
                 configuration (the image is not written)",
                a.path.display(),
                layout_text(&cfg.geometry)
            )?;
            let f = ImageFactory {
                dir: tempfile::tempdir().map_err(|e| {
                    CliError::Other(format!("cannot make a scratch directory: {e}"))
                })?,
                cfg: EmuConfig {
                    host_sync: false,
                    ..cfg
                },
                next: AtomicU64::new(0),
                notes: Notes::default(),
            };
            run_items(&f, &f.notes, &[], out).await?
        }
    };
    summarize(&a.path, &t, out)
}

fn summarize(path: &Path, t: &Tally, out: &mut impl Write) -> CliResult {
    writeln!(
        out,
        "{}: {} passed, {} failed, {} not applicable (of {} items)",
        path.display(),
        t.passed,
        t.failed,
        t.not_applicable,
        ITEMS.len()
    )?;
    if t.not_applicable > 0 {
        writeln!(
            out,
            "items run only on the zone layout they were written for; the kit's main one is \
             8 zones of 64 blocks (48 writable) of 4 KiB, max open 3, max active 4"
        )?;
    }
    match t.failed {
        0 => Ok(()),
        n => Err(CliError::Other(format!(
            "{}: {} failed",
            path.display(),
            commands::plural(u64::from(n), "checklist item")
        ))),
    }
}

/// `e`, with the cause when closing the device failed as well.
fn close_after(e: CliError, closed: CliResult) -> CliError {
    match closed {
        Ok(()) => e,
        Err(c) => CliError::Other(format!(
            "{}; closing the device: {}",
            e.message(),
            c.message()
        )),
    }
}
