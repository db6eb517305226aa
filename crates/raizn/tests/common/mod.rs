//! Arrays of in-memory emulated members for the tests, and the conformance kit's factory.
//!
//! The kit asks for logical geometries; an array of N members exports zones D = N - 1 times
//! the member's size and capacity, and needs 3 metadata zones and 3 open/active zones per
//! member besides. So the factory builds members with 1/D of the kit's zone size and
//! capacity, 3 more zones, and limits 3 higher; the logical geometry is then exactly the
//! kit's when D divides the kit's zone size and capacity. When it does not (item 38 asks for
//! a capacity of 33 blocks, which no array of equal members with D = 2 can export), the
//! closest geometry below it is used (capacity rounded down to a multiple of D) and item 38
//! reports the difference. The stripe unit is the largest divisor of the member capacity that is at most
//! 64 KiB and at most a third of it, so every kit zone holds at least three stripes; with one
//! log zone per member, the largest of those whose log holds the records of the kit's active
//! zones (`one_log_member_geometry`), and where none does, a pool of 3 log zones.

#![allow(dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use emu::{EmuConfig, EmuDevice};
use parking_lot::Mutex;
use raizn::layout::{META_ZONES_OPEN, MIN_META_ZONES};
use raizn::{Member, RaiznConfig, RaiznVolume};
use zns::conformance::DeviceFactory;
use zns::{Geometry, ZoneState};

/// Block and metadata sizes of the members the regression tests build.
pub const BS: usize = 4096;
pub const OOB: usize = 16;

/// The data and metadata a test writes at `lba`: different for every block and every `salt`.
pub fn block(lba: u64, salt: u64) -> (Vec<u8>, Vec<u8>) {
    let mut d = vec![0u8; BS];
    for c in d.chunks_mut(8) {
        c.copy_from_slice(&(lba + salt).wrapping_mul(0x9E37_79B9).to_le_bytes());
    }
    let mut m = vec![0u8; OOB];
    m[..8].copy_from_slice(&(lba ^ salt.wrapping_mul(0x55)).to_le_bytes());
    (d, m)
}

/// The data and metadata of `block` for each of `lbas`, in one buffer each.
pub fn blocks(lbas: Range<u64>, salt: u64) -> (Vec<u8>, Vec<u8>) {
    let (mut d, mut m) = (Vec::new(), Vec::new());
    for lba in lbas {
        let (bd, bm) = block(lba, salt);
        d.extend(bd);
        m.extend(bm);
    }
    (d, m)
}

/// Writes `blocks(lbas, salt)` to `v` in one command; a failure panics naming the range.
pub async fn write_blocks(v: &RaiznVolume, lbas: Range<u64>, salt: u64, fua: bool) {
    let (d, m) = blocks(lbas.clone(), salt);
    if let Err(e) = zns::ZonedDevice::write(v, lbas.start, &d, Some(&m), fua).await {
        panic!("write {lbas:?}: {e}");
    }
}

/// Reads `lbas` of `v` with their metadata and checks each against `block(lba, salt)`; a
/// failure names `what` and the block.
pub async fn assert_blocks(v: &RaiznVolume, lbas: Range<u64>, salt: u64, what: &str) {
    for lba in lbas {
        let (d, m) = block(lba, salt);
        let (mut gd, mut gm) = (vec![0u8; BS], vec![0u8; OOB]);
        if let Err(e) = zns::ZonedDevice::read(v, lba, &mut gd, Some(&mut gm)).await {
            panic!("{what}: read {lba}: {e}");
        }
        assert!(gd == d && gm == m, "{what}: block {lba} reads wrong");
    }
}

/// Three fresh `small_member_geometry` members (seeded) and a RAIZN array formatted on them
/// with a stripe unit of 8 blocks, for the open and rebuild regression tests.
pub async fn small_array(seed: u64, uuid: u8) -> (Vec<Arc<EmuDevice>>, RaiznVolume) {
    let emus = emu_members(&small_member_geometry(), 3, seed);
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([uuid; 16])
    };
    match RaiznVolume::format(as_members(&emus), cfg, false).await {
        Ok(v) => (emus, v),
        Err(e) => panic!("format: {e}"),
    }
}

/// Three `small_member_geometry` members (seeded), each behind fault injection whose commands
/// wait 2 ms on their way to the device (so a collection can start while a write is in
/// flight), and a RAIZN array formatted on them with a stripe unit of 8 blocks.
pub async fn delayed_small_array(
    seed: u64,
    uuid: u8,
) -> (Vec<Arc<EmuDevice>>, Vec<Arc<Faulty>>, RaiznVolume) {
    let emus = emu_members(&small_member_geometry(), 3, seed);
    let faulty = faulty_members(&emus, seed * 3);
    for f in &faulty {
        f.set_in_flight_delay(std::time::Duration::from_millis(2));
    }
    let cfg = RaiznConfig {
        log_zones: 1,
        stripe_unit_bytes: 8 * BS as u64,
        ..RaiznConfig::new([uuid; 16])
    };
    match RaiznVolume::format(as_members(&faulty), cfg, false).await {
        Ok(v) => (emus, faulty, v),
        Err(e) => panic!("seed {seed}: format: {e}"),
    }
}

/// On an array of `delayed_small_array`: zone 1 written to 16 blocks, then `fill` one-block
/// writes into its second stripe (their records fill the log of member 1, which holds the
/// parity of every zone's second stripe with 3 members); then `other` runs while, `after` ms
/// later, four more one-block writes to zone 1 log records that collect that log. Returns
/// whether a collection ran meanwhile.
pub async fn collect_while<F: Future<Output = ()>>(
    v: &RaiznVolume,
    fill: u64,
    after: u64,
    other: F,
) -> bool {
    let z1 = zns::ZonedDevice::geometry(v).zone_start(1);
    write_blocks(v, z1..z1 + 16, 1, false).await;
    for k in 16..16 + fill {
        write_blocks(v, z1 + k..z1 + k + 1, 1, false).await;
    }
    let before = v.pp_stats().collections;
    let later = async {
        tokio::time::sleep(std::time::Duration::from_millis(after)).await;
        for k in 16 + fill..20 + fill {
            write_blocks(v, z1 + k..z1 + k + 1, 1, false).await;
        }
    };
    futures::future::join(other, later).await;
    v.pp_stats().collections > before
}

/// Opens the array on `emus`, every member but `leave_out` present (a degraded open when
/// one is left out); a failure panics naming `what`.
pub async fn reopen(emus: &[Arc<EmuDevice>], leave_out: Option<usize>, what: &str) -> RaiznVolume {
    let members: Vec<Option<Member>> = emus
        .iter()
        .enumerate()
        .map(|(i, e)| (leave_out != Some(i)).then(|| e.clone() as Member))
        .collect();
    match RaiznVolume::open_degraded(members).await {
        Ok(v) => v,
        Err(e) => panic!("{what}: reopen: {e}"),
    }
}

/// Runs `f` to completion on a current-thread runtime whose clock is paused, so that the
/// volume's timers fire at once and a run is repeatable.
pub fn block_on_paused<F: Future>(f: F) -> F::Output {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt.block_on(f),
        Err(e) => panic!("runtime: {e}"),
    }
}

/// The member geometry and stripe unit (bytes) for an array of `n` with `parity` parity
/// units per stripe exporting `logical`.
pub fn member_geometry(logical: &Geometry, n: usize, parity: u32) -> (Geometry, u64) {
    let d = n as u64 - u64::from(parity);
    let cap = logical.zone_capacity / d;
    let more = |l: u32| if l == 0 { 0 } else { l + META_ZONES_OPEN };
    let g = Geometry {
        zone_count: logical.zone_count + MIN_META_ZONES,
        zone_size: logical.zone_size / d,
        zone_capacity: cap,
        max_open: more(logical.max_open),
        max_active: more(logical.max_active),
        ..*logical
    };
    let bs = u64::from(logical.block_size);
    let limit = (64 * 1024 / bs).min((cap / 3).max(1));
    let su = (1..=limit)
        .rev()
        .find(|s| cap.is_multiple_of(*s))
        .unwrap_or(1);
    (g, su * bs)
}

/// `member_geometry` for an array with one log zone per member: the stripe unit is the
/// largest of those that leaves the one-zone log room for the records of the kit's active
/// zones (every zone when unlimited) and the least relocation budget,
/// `(A + 1)(1 + su) + (su + 2) <= C` (docs/DESIGN.md, "The one-zone log's active limit"), so
/// the array reports the kit's limits.
/// None when no stripe unit fits (the kit's zones are too small for that many active zones
/// on one log zone).
pub fn one_log_member_geometry(
    logical: &Geometry,
    n: usize,
    parity: u32,
) -> Option<(Geometry, u64)> {
    let (g, su_bytes) = member_geometry(logical, n, parity);
    let bs = u64::from(logical.block_size);
    let cap = g.zone_capacity;
    let active = match logical.max_active {
        0 => u64::from(logical.zone_count),
        a => u64::from(a),
    };
    let fits = |s: u64| (active + 1) * (1 + s) + s + 2 <= cap;
    let su = (1..=su_bytes / bs)
        .rev()
        .find(|s| cap.is_multiple_of(*s) && fits(*s))?;
    Some((g, su * bs))
}

/// `n` fresh memory members of geometry `g`, seeded.
pub fn emu_members(g: &Geometry, n: usize, seed: u64) -> Vec<Arc<EmuDevice>> {
    (0..n)
        .map(|i| {
            let cfg = EmuConfig {
                seed: seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ..EmuConfig::new(*g)
            };
            match EmuDevice::new_memory(cfg) {
                Ok(d) => Arc::new(d),
                Err(e) => panic!("member geometry {g:?} refused: {e}"),
            }
        })
        .collect()
}

/// `devs` as the members a volume takes.
pub fn as_members<D: zns::ZonedDevice + 'static>(devs: &[Arc<D>]) -> Vec<Member> {
    devs.iter().map(|d| d.clone() as Member).collect()
}

/// An emulated member behind fault injection.
pub type Faulty = zns::FaultyZoned<Arc<EmuDevice>>;

/// `emus`, each behind its own `FaultyZoned`, seeded `first_seed`, `first_seed + 1`, ...
pub fn faulty_members(emus: &[Arc<EmuDevice>], first_seed: u64) -> Vec<Arc<Faulty>> {
    emus.iter()
        .enumerate()
        .map(|(i, e)| Arc::new(zns::FaultyZoned::new(e.clone(), first_seed + i as u64)))
        .collect()
}

/// From the `n`-th command on (counted from now), every command to `member` fails as if
/// power were lost (Aborted: Power Loss), as a member the power left first.
pub fn cut_power_at(member: &Faulty, n: u64) {
    let plan = zns::ErrorPlan {
        ops: zns::OpSet::ALL,
        fail_nth: Some(n),
        repeat: u64::MAX / 2,
        status: zns::NvmeStatus::AbortedPowerLoss,
        ..zns::ErrorPlan::default()
    };
    if let Err(e) = member.set_errors(plan) {
        panic!("{e}");
    }
}

/// Builds RAIZN arrays of `members` memory devices for the conformance kit.
pub struct RaiznFactory {
    pub members: usize,
    pub parity: u32,
    /// Partial-parity log zones per member (1, or a pool).
    pub log_zones: u32,
    arrays: Mutex<HashMap<[u8; 16], Vec<Arc<EmuDevice>>>>,
    next: Mutex<u64>,
}

impl RaiznFactory {
    pub fn new(members: usize) -> RaiznFactory {
        RaiznFactory::with_parity(members, 1)
    }

    /// Arrays of `members` with `parity` parity units per stripe.
    pub fn with_parity(members: usize, parity: u32) -> RaiznFactory {
        RaiznFactory {
            members,
            parity,
            log_zones: 1,
            arrays: Mutex::new(HashMap::new()),
            next: Mutex::new(1),
        }
    }

    /// Arrays of `members` (one parity unit) with a pool of `log_zones` log zones per
    /// member: each member has the `log_zones - 1` zones more that the pool takes.
    pub fn with_log_zones(members: usize, log_zones: u32) -> RaiznFactory {
        RaiznFactory {
            log_zones,
            ..RaiznFactory::with_parity(members, 1)
        }
    }

    fn emus(&self, dev: &RaiznVolume) -> Vec<Arc<EmuDevice>> {
        match self.arrays.lock().get(&dev.array_uuid()) {
            Some(e) => e.clone(),
            None => panic!("an array this factory did not build"),
        }
    }

    async fn reopen(&self, emus: &[Arc<EmuDevice>]) -> RaiznVolume {
        match RaiznVolume::open(as_members(emus)).await {
            Ok(v) => v,
            Err(e) => panic!("reopening the array failed: {e}"),
        }
    }
}

#[async_trait]
impl DeviceFactory for RaiznFactory {
    type Device = RaiznVolume;

    async fn create(&self, geometry: &Geometry) -> RaiznVolume {
        // One log zone cannot report the kit's active limit when its zones are too small
        // for that many records (the kit's unlimited 8-zone geometries of 16-block member
        // zones): the closest array is then one with a pool of 3 log zones, which keeps the
        // members' limits (docs/DESIGN.md, "The one-zone log's active limit").
        let one = match self.log_zones {
            1 => one_log_member_geometry(geometry, self.members, self.parity),
            _ => None,
        };
        let log_zones = match (self.log_zones, one) {
            (1, None) => 3,
            (k, _) => k,
        };
        let (mut g, su) =
            one.unwrap_or_else(|| member_geometry(geometry, self.members, self.parity));
        g.zone_count += log_zones - 1;
        let id = {
            let mut n = self.next.lock();
            *n += 1;
            *n
        };
        let mut uuid = [0u8; 16];
        uuid[..8].copy_from_slice(&id.to_le_bytes());
        let emus = emu_members(&g, self.members, 0x5eed ^ id);
        let cfg = RaiznConfig {
            log_zones,
            stripe_unit_bytes: su,
            parity: self.parity,
            ..RaiznConfig::new(uuid)
        };
        let vol = match RaiznVolume::format(as_members(&emus), cfg, false).await {
            Ok(v) => v,
            Err(e) => panic!("format refused the kit's array: {e}"),
        };
        self.arrays.lock().insert(uuid, emus);
        vol
    }

    async fn restart(&self, dev: RaiznVolume) -> RaiznVolume {
        let emus = self.emus(&dev);
        drop(dev);
        for e in &emus {
            if let Err(err) = e.restart() {
                panic!("member restart failed: {err}");
            }
        }
        self.reopen(&emus).await
    }

    async fn power_cycle(&self, dev: RaiznVolume, seed: u64) -> RaiznVolume {
        let emus = self.emus(&dev);
        drop(dev);
        for (i, e) in emus.iter().enumerate() {
            if let Err(err) = e.power_loss(seed ^ (i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D)) {
                panic!("member power loss failed: {err}");
            }
        }
        self.reopen(&emus).await
    }

    async fn set_zone_state(&self, dev: &RaiznVolume, zone: u32, state: ZoneState) {
        for e in self.emus(dev) {
            if let Err(err) = e.set_zone_state(zone + dev.layout().meta_zones(), state) {
                panic!("member fault injection failed: {err}");
            }
        }
        if let Err(e) = dev.refresh_faults().await {
            panic!("folding member faults failed: {e}");
        }
    }
}

/// The small member geometry the partial-parity, collection and member-failure tests share:
/// 4 KiB blocks, 16 B metadata, 8 zones of 64 blocks (48 writable), 6 open / 7 active.
pub fn small_member_geometry() -> Geometry {
    Geometry {
        block_size: 4096,
        oob_size: 16,
        zone_count: 8,
        zone_size: 64,
        zone_capacity: 48,
        max_open: 6,
        max_active: 7,
        zasl_blocks: 16,
        mdts_blocks: 32,
        copy_max_ranges: 4,
        copy_max_range_blocks: 32,
        copy_max_blocks: 32,
        cross_zone_reads: false,
    }
}

/// Members with zones of 64 blocks (`capacity` of them writable), no open or active limit,
/// `block_size`-byte blocks and `oob` bytes of metadata: the geometry the crash and append
/// tests vary.
pub fn unlimited_member_geometry(
    block_size: usize,
    oob: usize,
    zone_count: u32,
    capacity: u64,
) -> Geometry {
    Geometry {
        block_size: block_size as u32,
        oob_size: oob as u32,
        zone_count,
        zone_capacity: capacity,
        max_open: 0,
        max_active: 0,
        zasl_blocks: 32,
        ..small_member_geometry()
    }
}
