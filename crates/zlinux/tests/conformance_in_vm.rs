//! The ZNS conformance kit against QEMU's NVMe ZNS namespaces through `LinuxZoned`: the host
//! test boots the VM with one namespace per kit geometry, copies this test binary in and runs
//! `guest_conformance_kit`, which prints one line per checklist item (pass, fail with the
//! difference, or not applicable with the reason) and fails on any failure not listed in
//! `EXPECTED_FAILURES`, each with the reason it fails (docs/TESTING.md).

use std::sync::Arc;

use async_trait::async_trait;
use unsupported_note::Note;
use zlinux::LinuxZoned;
use zns::conformance::{check_item, DeviceFactory, Outcome, ITEMS};
use zns::{Geometry, ZoneAction, ZoneState, ZonedDevice};

mod common;

/// One namespace per kit geometry (crates/zns/src/conformance/geometries.rs): kit,
/// unlimited, open limit only, full capacity, 512 B cross-read, reference. 4 KiB blocks and
/// 8 zones of 64 blocks with 48 writable unless said otherwise; the kit's Copy limits (4
/// ranges, 16 blocks per range, 32 in all) but on the reference one (QEMU's defaults, 128
/// each, which are the reference's).
const NAMESPACES: &[&str] = &[
    "zones=8,zone_size=256K,zone_capacity=192K,max_open=3,max_active=4,mssrl=16,mcl=32,msrc=3",
    "zones=8,zone_size=256K,zone_capacity=192K,mssrl=16,mcl=32,msrc=3",
    "zones=8,zone_size=256K,zone_capacity=192K,max_open=3,mssrl=16,mcl=32,msrc=3",
    "zones=8,zone_size=256K,zone_capacity=256K,mssrl=16,mcl=32,msrc=3",
    "zones=8,zone_size=32K,zone_capacity=24K,lbs=512,mssrl=16,mcl=32,msrc=3",
    "zones=8,zone_size=1M,zone_capacity=768K,max_open=4,max_active=6",
];

#[test]
fn conformance_kit_on_qemu_zns() {
    let exe = std::env::current_exe().expect("current_exe");
    let file = format!("{}:/bin/zt", exe.display());
    let mut args: Vec<&str> = Vec::new();
    for ns in NAMESPACES {
        args.extend(["--ns", ns]);
    }
    args.extend(["--file", &file, "--timeout", "300"]);
    let devices: Vec<String> = (1..=NAMESPACES.len())
        .map(|k| format!("/dev/nvme0n{k}"))
        .collect();
    let script = format!(
        "ZLINUX_DEVICES='{}' /bin/zt --ignored --nocapture guest_conformance_kit\n",
        devices.join(" ")
    );
    let Some(run) = common::run_vm(&args, &script) else {
        return;
    };
    println!("{}", run.stdout);
    assert_eq!(
        run.status, 0,
        "conformance kit in the VM failed:\n{}\n{}",
        run.stdout, run.stderr
    );
    let lines = run
        .stdout
        .lines()
        // The first line may follow libtest's "test guest_conformance_kit ... ".
        .filter(|l| {
            l.contains("item ")
                && [" pass: ", " FAIL: ", " not applicable: "]
                    .iter()
                    .any(|k| l.contains(k))
        })
        .count();
    assert_eq!(lines, ITEMS.len(), "one line per checklist item");
}

mod unsupported_note {
    //! What the factory could not do for the current item.
    use std::sync::Mutex;

    #[derive(Default)]
    pub struct Note(Mutex<Option<String>>);

    impl Note {
        pub fn set(&self, what: String) {
            if let Ok(mut n) = self.0.lock() {
                n.get_or_insert(what);
            }
        }
        pub fn take(&self) -> Option<String> {
            self.0.lock().ok().and_then(|mut n| n.take())
        }
    }
}

/// The namespaces in the VM as a kit factory: `create` picks the namespace whose zone layout
/// is the one asked for and resets all its zones.
struct Drives {
    devices: Vec<Arc<LinuxZoned>>,
    note: Note,
}

fn same_layout(a: &Geometry, b: &Geometry) -> bool {
    (
        a.block_size,
        a.zone_count,
        a.zone_size,
        a.zone_capacity,
        a.max_open,
        a.max_active,
    ) == (
        b.block_size,
        b.zone_count,
        b.zone_size,
        b.zone_capacity,
        b.max_open,
        b.max_active,
    )
}

impl Drives {
    fn find(&self, wanted: &Geometry) -> Option<&Arc<LinuxZoned>> {
        self.devices
            .iter()
            .find(|d| same_layout(&d.geometry(), wanted))
    }
}

#[async_trait]
impl DeviceFactory for Drives {
    type Device = Arc<LinuxZoned>;

    async fn create(&self, geometry: &Geometry) -> Arc<LinuxZoned> {
        // Only the exact geometry: items that build their own (metadata, other zone counts)
        // are not applicable rather than run against a device they did not ask for.
        let dev = match self.find(geometry).filter(|d| d.geometry() == *geometry) {
            Some(d) => Arc::clone(d),
            None => {
                self.note
                    .set(format!("needs a device with geometry {geometry:?}"));
                Arc::clone(&self.devices[0])
            }
        };
        dev.zone_mgmt(ZoneAction::Reset, 0, true)
            .await
            .expect("reset all zones");
        dev
    }
    async fn restart(&self, dev: Arc<LinuxZoned>) -> Arc<LinuxZoned> {
        self.note.set("needs a controller restart".into());
        dev
    }
    async fn power_cycle(&self, dev: Arc<LinuxZoned>, _seed: u64) -> Arc<LinuxZoned> {
        self.note.set("needs power-loss control".into());
        dev
    }
    async fn set_zone_state(&self, _dev: &Arc<LinuxZoned>, _zone: u32, state: ZoneState) {
        self.note
            .set(format!("needs a device-side fault (zone made {state})"));
    }
    fn geometry_for(&self, wanted: &Geometry) -> Geometry {
        match self.find(wanted) {
            Some(d) => d.geometry(),
            None => *wanted,
        }
    }
    fn take_unsupported(&self) -> Option<String> {
        self.note.take()
    }
}

#[tokio::test]
#[ignore]
async fn guest_conformance_kit() {
    let paths = std::env::var("ZLINUX_DEVICES")
        .expect("guest_conformance_kit runs inside the VM, started by conformance_kit_on_qemu_zns");
    let devices = paths
        .split_whitespace()
        .map(|p| {
            LinuxZoned::open(std::path::Path::new(p))
                .map(Arc::new)
                .expect("open")
        })
        .collect();
    let f = Drives {
        devices,
        note: Note::default(),
    };
    // Items that fail on QEMU ZNS through this backend, and why (zlinux::known): every
    // namespace is on the same controller, so they all offer the same.
    let expected = zlinux::known_kit_failures(f.devices[0].traits());
    let mut unexpected = Vec::new();
    for (item, name) in ITEMS {
        match check_item(&f, *item).await {
            Outcome::Pass => println!("item {item:2} pass: {name}"),
            Outcome::NotApplicable(why) => println!("item {item:2} not applicable: {name}: {why}"),
            Outcome::Fail(e) => {
                let known = expected.iter().find(|(n, _)| n == item);
                let why = known
                    .map(|(_, why)| format!(" [known: {why}]"))
                    .unwrap_or_default();
                println!("item {item:2} FAIL: {}{why}", e.message);
                if known.is_none() {
                    unexpected.push(*item);
                }
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "unexpected failures: items {unexpected:?}"
    );
}
