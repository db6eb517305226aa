//! The random command generator of the differential test: which geometry a seed runs on and
//! which command comes next, biased toward the interesting places (at, near and away from
//! write pointers, zone ends, limits).

use super::pattern::random_blocks;
use crate::model::RefModel;
use crate::rng::SimRng;
use crate::types::{CopyRange, Geometry, Lba, ReportFilter, ZoneAction, ZoneState};

/// How a command passes per-block metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MetaMode {
    With,
    Without,
    /// One byte too many: the command must fail with Invalid Field.
    WrongLength,
}

/// One generated command. Data is derived from `salt` so that the op prints briefly.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    Write {
        lba: Lba,
        blocks: u64,
        salt: u64,
        meta: MetaMode,
        odd_len: bool,
        fua: bool,
    },
    Append {
        zslba: Lba,
        blocks: u64,
        salt: u64,
        meta: MetaMode,
        fua: bool,
    },
    WriteZeroes {
        lba: Lba,
        blocks: u64,
        fua: bool,
    },
    Copy {
        sources: Vec<CopyRange>,
        dest: Lba,
        fua: bool,
    },
    Read {
        lba: Lba,
        blocks: u64,
        meta: MetaMode,
        odd_len: bool,
    },
    Mgmt {
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    },
    Report {
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max: usize,
    },
    Flush,
    Fault {
        zone: u32,
        state: ZoneState,
    },
    Restart,
    AppendBatch {
        zone: u32,
        sizes: Vec<u64>,
        salt: u64,
    },
    WriteBatch {
        zone: u32,
        sizes: Vec<u64>,
        salt: u64,
    },
}

/// A small geometry drawn from the seed: 8 zones of 32 blocks of 512 bytes, with or without
/// a capacity gap, metadata, limits and cross-zone reads.
pub(crate) fn pick_geometry(rng: &mut SimRng) -> Geometry {
    let (max_open, max_active) = [(3, 4), (2, 2), (0, 0), (2, 5)][rng.index(4)];
    Geometry {
        block_size: 512,
        oob_size: [0, 8, 16][rng.index(3)],
        zone_count: 8,
        zone_size: 32,
        zone_capacity: [24, 32][rng.index(2)],
        max_open,
        max_active,
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 4,
        copy_max_range_blocks: 8,
        copy_max_blocks: 16,
        cross_zone_reads: rng.chance(0.5),
    }
}

/// Data and metadata for a command of `blocks` blocks; `odd_len` adds half a block.
pub(crate) fn payload(
    g: &Geometry,
    blocks: u64,
    salt: u64,
    meta: MetaMode,
    odd_len: bool,
) -> (Vec<u8>, Vec<u8>) {
    let (mut data, mut m) = random_blocks(g, blocks, &mut SimRng::new(salt));
    if odd_len {
        data.extend(vec![7u8; g.block_size as usize / 2]);
    }
    if meta == MetaMode::WrongLength {
        m.push(0);
    }
    (data, m)
}

fn meta_mode(rng: &mut SimRng) -> MetaMode {
    match rng.below(20) {
        0..=14 => MetaMode::With,
        15..=18 => MetaMode::Without,
        _ => MetaMode::WrongLength,
    }
}

/// An LBA for a zoned write into `zone`: mostly its WP, sometimes near it, sometimes anywhere
/// (including just beyond the namespace).
fn write_lba(rng: &mut SimRng, model: &RefModel, zone: u32) -> Lba {
    let g = model.geometry();
    let wp = model.wp(zone).unwrap_or(0);
    match rng.below(20) {
        0..=13 => wp,
        14..=16 => {
            let delta = rng.range_inclusive(1, 3);
            if rng.chance(0.5) {
                wp.saturating_sub(delta)
            } else {
                wp + delta
            }
        }
        17..=18 => rng.below(g.total_blocks()),
        _ => g.total_blocks() - 1 + rng.below(3),
    }
}

/// A block count, mostly small, sometimes at or just past `limit`.
fn blocks(rng: &mut SimRng, limit: u64) -> u64 {
    match rng.below(20) {
        0..=16 => rng.range_inclusive(1, limit.min(6)),
        17..=18 => limit,
        _ => limit + 1,
    }
}

/// Makes a command with a malformed length only where the namespace range check passes
/// however a device counts the partial block, so the expected status is unambiguous.
fn odd_len_allowed(g: &Geometry, lba: Lba, blocks: u64) -> bool {
    lba + blocks < g.total_blocks()
}

fn zone_start_lba(rng: &mut SimRng, g: &Geometry, zone: u32) -> Lba {
    match rng.below(20) {
        0..=17 => g.zone_start(zone),
        18 => g.zone_start(zone) + 1,
        _ => g.total_blocks() + rng.below(2) * g.zone_size,
    }
}

/// The next command, given the model's current state. Faults are only generated while
/// `faults_allowed`.
pub(crate) fn gen_op(rng: &mut SimRng, model: &RefModel, faults_allowed: bool) -> Op {
    let g = model.geometry();
    let zone = rng.below(u64::from(g.zone_count)) as u32;
    let mdts = u64::from(g.mdts_blocks);
    let salt = rng.next_u64();
    match rng.below(1000) {
        0..=339 => {
            let lba = write_lba(rng, model, zone);
            let blocks = blocks(rng, mdts);
            let odd_len = rng.chance(0.03) && odd_len_allowed(&g, lba, blocks);
            Op::Write {
                lba,
                blocks,
                salt,
                meta: meta_mode(rng),
                odd_len,
                fua: rng.chance(0.2),
            }
        }
        340..=469 => {
            let zslba = zone_start_lba(rng, &g, zone);
            Op::Append {
                zslba,
                blocks: blocks(rng, u64::from(g.zasl_blocks)),
                salt,
                meta: meta_mode(rng),
                fua: rng.chance(0.2),
            }
        }
        470..=519 => {
            let lba = write_lba(rng, model, zone);
            let blocks = if rng.chance(0.05) && lba < g.total_blocks() {
                0
            } else {
                blocks(rng, mdts)
            };
            Op::WriteZeroes {
                lba,
                blocks,
                fua: rng.chance(0.2),
            }
        }
        520..=589 => gen_copy(rng, model, zone),
        590..=719 => gen_read(rng, &g, zone),
        720..=839 => Op::Mgmt {
            // Full zones are reset more often than chance would, so that zones get reused.
            action: if model.zone_state(zone) == Some(ZoneState::Full) && rng.chance(0.5) {
                ZoneAction::Reset
            } else {
                ZoneAction::ALL[rng.index(ZoneAction::ALL.len())]
            },
            zslba: zone_start_lba(rng, &g, zone),
            select_all: rng.chance(0.15),
        },
        840..=889 => gen_report(rng, &g),
        890..=924 => Op::Flush,
        925..=934 if faults_allowed => gen_fault(rng, model, zone),
        935..=944 => Op::Restart,
        945..=974 => Op::AppendBatch {
            zone,
            sizes: batch_sizes(rng, u64::from(g.zasl_blocks), mdts),
            salt,
        },
        975..=999 => Op::WriteBatch {
            zone,
            sizes: batch_sizes(rng, mdts, mdts),
            salt,
        },
        _ => Op::Flush,
    }
}

/// 2 to 4 sizes, each at most `each` blocks (and 4), summing to at most `total`.
fn batch_sizes(rng: &mut SimRng, each: u64, total: u64) -> Vec<u64> {
    let count = rng.range_inclusive(2, 4);
    let mut sizes = Vec::new();
    let mut sum = 0;
    for _ in 0..count {
        let n = rng.range_inclusive(1, each.min(4));
        if sum + n > total {
            break;
        }
        sum += n;
        sizes.push(n);
    }
    sizes
}

fn gen_read(rng: &mut SimRng, g: &Geometry, zone: u32) -> Op {
    let mdts = u64::from(g.mdts_blocks);
    let blocks = rng.range_inclusive(1, mdts);
    let lba = match rng.below(10) {
        0..=6 => g.zone_start(zone) + rng.below(g.zone_size),
        7..=8 => g.zone_start(zone) + g.zone_size - rng.range_inclusive(1, blocks),
        _ => g.total_blocks() - 1 + rng.below(2),
    };
    let odd_len = rng.chance(0.03) && odd_len_allowed(g, lba, blocks);
    Op::Read {
        lba,
        blocks,
        meta: meta_mode(rng),
        odd_len,
    }
}

fn gen_copy(rng: &mut SimRng, model: &RefModel, zone: u32) -> Op {
    let g = model.geometry();
    let count = if rng.chance(0.05) {
        u64::from(g.copy_max_ranges) + 1
    } else {
        rng.range_inclusive(1, 3)
    };
    let per = u64::from(g.copy_max_range_blocks);
    let sources = (0..count)
        .map(|_| {
            let src_zone = rng.below(u64::from(g.zone_count)) as u32;
            let blocks = blocks(rng, per);
            let lba = match rng.below(10) {
                0..=7 => g.zone_start(src_zone) + rng.below(g.zone_capacity),
                8 => g.zone_start(src_zone) + g.zone_size - 1,
                _ => g.total_blocks() - 1,
            };
            CopyRange { lba, blocks }
        })
        .collect();
    Op::Copy {
        sources,
        dest: write_lba(rng, model, zone),
        fua: rng.chance(0.2),
    }
}

fn gen_report(rng: &mut SimRng, g: &Geometry) -> Op {
    let lba = if rng.chance(0.05) {
        g.total_blocks()
    } else {
        rng.below(g.total_blocks())
    };
    let filter = if rng.chance(0.4) {
        ReportFilter::All
    } else {
        ReportFilter::State(ZoneState::ALL[rng.index(ZoneState::ALL.len())])
    };
    let max = rng.below(u64::from(g.zone_count) + 2) as usize;
    Op::Report {
        lba,
        filter,
        partial: rng.chance(0.5),
        max,
    }
}

fn gen_fault(rng: &mut SimRng, model: &RefModel, zone: u32) -> Op {
    match model.zone_state(zone) {
        Some(ZoneState::Offline) | None => Op::Flush,
        Some(ZoneState::ReadOnly) => Op::Fault {
            zone,
            state: ZoneState::Offline,
        },
        Some(_) if rng.chance(0.75) => Op::Fault {
            zone,
            state: ZoneState::ReadOnly,
        },
        Some(_) => Op::Fault {
            zone,
            state: ZoneState::Offline,
        },
    }
}
