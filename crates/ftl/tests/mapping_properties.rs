//! Property tests of the sans-IO mapping core: random interleavings of reservations, user
//! write completions (in any order), trims, garbage-collection moves and zone resets keep
//! L2P, P2L and valid counts consistent, and every LBA maps to the data of its newest
//! submitted write or trim, never to an older one.

use ftl::layout::Layout;
use ftl::map::{Mapping, Stream, ZoneUse};
use zns::{Geometry, SimRng};

fn layout() -> Layout {
    let g = Geometry {
        block_size: 512,
        oob_size: 16,
        zone_count: 12,
        zone_size: 16,
        zone_capacity: 16,
        max_open: 0,
        max_active: 0,
        zasl_blocks: 8,
        mdts_blocks: 16,
        copy_max_ranges: 8,
        copy_max_range_blocks: 16,
        copy_max_blocks: 16,
        cross_zone_reads: false,
    };
    Layout::new(g, 1280, 2).expect("layout")
}

/// A write in flight: where it landed and what it was for.
struct Pending {
    zone: u32,
    offset: u64,
    lba: u64,
    blocks: u64,
    seq: u64,
}

fn run(seed: u64, steps: usize) -> ftl::map::Counters {
    let mut rng = SimRng::new(seed);
    let mut m = Mapping::new(layout());
    let n = m.layout.volume_blocks;
    // The newest submitted (seq, is_trim) per LBA, and the newest *completed* one.
    let mut newest_done = vec![0u64; n as usize];
    let mut open: Option<u32> = None;
    let mut pending: Vec<Pending> = Vec::new();
    for step in 0..steps {
        match rng.below(10) {
            0..=4 => {
                // Submit a write into the open zone (opening one when needed).
                let z = match open.filter(|z| m.zone(*z).reserved < m.layout.zone_blocks) {
                    Some(z) => z,
                    None if m.free_zones() <= 2 => continue,
                    None => match m.open_zone(Stream::Hot) {
                        Some((z, _)) => {
                            m.header_written(z);
                            open = Some(z);
                            z
                        }
                        None => continue,
                    },
                };
                let want = rng.range_inclusive(1, 3);
                let lba = rng.below(n - want + 1);
                let seq = m.take_seq();
                let r = m.reserve(z, want);
                if r.blocks > 0 {
                    pending.push(Pending {
                        zone: z,
                        offset: r.offset,
                        lba,
                        blocks: r.blocks,
                        seq,
                    });
                }
            }
            5 | 6 if !pending.is_empty() => {
                // Complete a random in-flight write: completions come in any order.
                let p = pending.swap_remove(rng.index(pending.len()));
                m.complete_write(p.zone, p.offset, p.lba, p.blocks, p.seq);
                for l in p.lba..p.lba + p.blocks {
                    newest_done[l as usize] = newest_done[l as usize].max(p.seq);
                }
            }
            7 => {
                // A trim that completes at once (its record lands in the open zone).
                let len = rng.range_inclusive(1, 4);
                let lba = rng.below(n - len + 1);
                if let (Some(seq), Some(z)) = (m.trim(lba, len), open) {
                    let r = m.reserve(z, 1);
                    if r.blocks == 1 {
                        m.complete_trim_record(z, r.offset, lba, len, seq);
                        for l in lba..lba + len {
                            newest_done[l as usize] = newest_done[l as usize].max(seq);
                        }
                    }
                }
            }
            _ => {
                // Garbage collection: move a victim's live blocks into a fresh zone, reset it.
                let Some(v) = m.pick_victim(ftl::VictimPolicy::Greedy) else {
                    continue;
                };
                m.start_collecting(v);
                let (data, trims) = m.live_blocks(v);
                let live: Vec<u32> = data
                    .iter()
                    .map(|(p, _)| *p)
                    .chain(trims.iter().map(|(p, _)| *p))
                    .collect();
                let Some((g, _)) = m.open_zone(Stream::Gc) else {
                    continue;
                };
                m.header_written(g);
                let r = m.reserve(g, live.len() as u64);
                assert_eq!(
                    r.blocks,
                    live.len() as u64,
                    "seed {seed} step {step}: a victim's live blocks fit one zone"
                );
                for (i, src) in live.iter().enumerate() {
                    m.complete_move(*src, g, r.offset + i as u64);
                }
                if r.blocks > 0 {
                    m.end_gc_write(g, r.offset, r.blocks);
                }
                m.abandon(g);
                assert_eq!(
                    m.zone(v).valid,
                    0,
                    "seed {seed} step {step}: victim still valid"
                );
                m.zone_reset(v);
            }
        }
        if let Err(e) = m.verify() {
            panic!("seed {seed} step {step}: {e}");
        }
        for l in 0..n {
            assert_eq!(
                m.lba_seq(l),
                newest_done[l as usize],
                "seed {seed} step {step}: LBA {l} is not at its newest completed version"
            );
        }
    }
    for p in pending.drain(..) {
        m.complete_write(p.zone, p.offset, p.lba, p.blocks, p.seq);
    }
    m.verify().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let used = (0..m.layout.data_zones)
        .filter(|z| m.zone(*z).use_ != ZoneUse::Free)
        .count();
    assert!(used > 0);
    m.counters
}

#[test]
fn mapping_stays_consistent_under_random_interleavings() {
    let mut total = ftl::map::Counters::default();
    for seed in 0..300u64 {
        let c = run(seed, 400);
        total.user_blocks += c.user_blocks;
        total.trims += c.trims;
        total.gc_zones += c.gc_zones;
    }
    // The runs must have written, trimmed and collected, or they proved nothing.
    assert!(
        total.user_blocks > 30_000 && total.trims > 3_000 && total.gc_zones > 3_000,
        "too little happened: {total:?}"
    );
}
