//! Helpers shared by ZapRAID's integration tests: emulated memory members and block contents.
#![allow(dead_code)]

use std::sync::Arc;

use emu::{EmuConfig, EmuDevice};
use zns::{BlockDevice, ErrorPlan, FaultyZoned, Geometry, NvmeStatus, OpSet, ZonedDevice};

/// 4 KiB blocks with 64 B metadata; zones of 64 blocks: 1 header, 62 data, 1 footer block.
pub fn geometry(zones: u32) -> Geometry {
    Geometry {
        block_size: 4096,
        oob_size: 64,
        zone_count: zones,
        zone_size: 64,
        zone_capacity: 64,
        max_open: zones.min(8),
        max_active: zones.min(8),
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 4,
        copy_max_range_blocks: 16,
        copy_max_blocks: 16,
        cross_zone_reads: false,
    }
}

pub fn emu_members(n: usize, zones: u32, seed: u64) -> Vec<Arc<EmuDevice>> {
    emu_members_with(n, geometry(zones), seed)
}

/// As `emu_members`, without per-block metadata (as most drives are formatted): ZapRAID
/// keeps its records in-band there.
pub fn emu_members_without_metadata(n: usize, zones: u32, seed: u64) -> Vec<Arc<EmuDevice>> {
    emu_members_with(
        n,
        Geometry {
            oob_size: 0,
            ..geometry(zones)
        },
        seed,
    )
}

pub fn emu_members_with(n: usize, geo: Geometry, seed: u64) -> Vec<Arc<EmuDevice>> {
    (0..n)
        .map(|i| {
            Arc::new(
                EmuDevice::new_memory(EmuConfig {
                    seed: seed * 31 + i as u64,
                    ..EmuConfig::new(geo)
                })
                .expect("emulated member"),
            )
        })
        .collect()
}

pub fn as_zoned<D: ZonedDevice + 'static>(m: &[Arc<D>]) -> Vec<Arc<dyn ZonedDevice>> {
    m.iter()
        .map(|d| d.clone() as Arc<dyn ZonedDevice>)
        .collect()
}

/// A block naming its LBA and version, so a misplaced or stale block is recognised.
pub fn block(bs: usize, lba: u64, version: u64) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    for (i, c) in b.chunks_mut(16).enumerate() {
        c[..8].copy_from_slice(&lba.to_le_bytes());
        c[8..16].copy_from_slice(&(version ^ (i as u64) << 48).to_le_bytes());
    }
    b
}

/// Paused-clock current-thread runtime: a run repeats exactly.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}

/// Format options of a 3 + 1 array in `mode`.
pub fn opts(mode: zapraid::GroupMode) -> zapraid::FormatOptions {
    zapraid::FormatOptions {
        mode,
        ..zapraid::FormatOptions::new(3, 1)
    }
}

/// The members of `devs` with those at the indexes in `gone` left out (given as missing).
pub fn with_gone(
    devs: &[Arc<dyn ZonedDevice>],
    gone: &[usize],
) -> Vec<Option<Arc<dyn ZonedDevice>>> {
    devs.iter()
        .enumerate()
        .map(|(i, d)| (!gone.contains(&i)).then(|| d.clone()))
        .collect()
}

/// Overwrites `writes` random ranges of 1-8 blocks below the model's length with ever newer
/// versions (recorded in `model`), then flushes.
pub async fn write_some(
    vol: &zapraid::ZapRaidVolume,
    model: &mut [u64],
    version: &mut u64,
    seed: u64,
    writes: usize,
) {
    let bs = vol.block_size() as usize;
    let span = model.len() as u64;
    let mut rng = zns::SimRng::new(seed);
    for _ in 0..writes {
        let lba = rng.below(span - 8);
        let len = rng.range_inclusive(1, 8);
        let mut data = Vec::new();
        for l in lba..lba + len {
            *version += 1;
            model[l as usize] = *version;
            data.extend(block(bs, l, *version));
        }
        vol.write(lba, &data, false).await.expect("write");
    }
    vol.flush().await.expect("flush");
}

/// Reads every block and checks it holds its version in `model` (0: zeros).
pub async fn check(vol: &zapraid::ZapRaidVolume, model: &[u64], what: &str) {
    let bs = vol.block_size() as usize;
    for (lba, v) in model.iter().enumerate() {
        let mut b = vec![0u8; bs];
        vol.read(lba as u64, &mut b)
            .await
            .unwrap_or_else(|e| panic!("{what}: read {lba}: {e}"));
        let want = if *v == 0 {
            vec![0u8; bs]
        } else {
            block(bs, lba as u64, *v)
        };
        assert!(b == want, "{what}: LBA {lba} does not hold version {v}");
    }
}

/// A member behind a fault injector.
pub type Faulty = FaultyZoned<Arc<EmuDevice>>;

/// Four members and a spare (index 4) of `zones` zones, each behind a fault injector.
pub struct SpareArray {
    pub emus: Vec<Arc<EmuDevice>>,
    pub faulty: Vec<Arc<Faulty>>,
}

impl SpareArray {
    pub fn new(zones: u32, seed: u64) -> SpareArray {
        let emus = emu_members(5, zones, seed);
        let faulty = emus
            .iter()
            .enumerate()
            .map(|(i, e)| Arc::new(FaultyZoned::new(e.clone(), seed * 7 + i as u64)))
            .collect();
        SpareArray { emus, faulty }
    }

    /// The members, with the spare in position `spare_at` when given.
    pub fn members(&self, spare_at: Option<usize>) -> Vec<Arc<dyn ZonedDevice>> {
        (0..4)
            .map(|i| {
                let j = if Some(i) == spare_at { 4 } else { i };
                self.faulty[j].clone() as Arc<dyn ZonedDevice>
            })
            .collect()
    }

    pub fn spare(&self) -> Arc<dyn ZonedDevice> {
        self.faulty[4].clone()
    }

    pub fn spare_blocks_written(&self) -> u64 {
        self.emus[4].stats().blocks_written
    }

    /// Device `i` fails every command of `ops` from its `nth` on with `status`.
    pub fn fail_from(&self, i: usize, ops: OpSet, nth: u64, status: NvmeStatus) {
        self.faulty[i]
            .set_errors(ErrorPlan {
                ops,
                fail_nth: Some(nth),
                repeat: 1 << 40,
                status,
                ..ErrorPlan::default()
            })
            .expect("error plan");
    }
}
