//! Whether separating user writes by update frequency pays, measured from the workload: the
//! spread of update intervals (lifespans, in user writes between two writes of the same LBA).
//!
//! Why the spread: under uniform random overwrites every LBA is rewritten at the same rate, so
//! its lifespan is geometrically distributed and the squared coefficient of variation
//! (variance / mean^2) is about 1; separating such data by "written recently" only splits one
//! population into zones that age alike, and each extra open zone costs spare. A skewed
//! workload (80/20, Zipf) mixes short and long lifespans: a hyperexponential mix with a
//! coefficient well above 1 (80/20 gives about 5.5), where separation lowers write
//! amplification. Sequential overwrites give lifespans all alike (coefficient near 0), where
//! separation has nothing to separate either.
//!
//! The statistics decay (halved every `window` samples) so that a workload that changes
//! character changes the decision, and the decision has hysteresis so it does not flap.

/// Squared coefficient of variation above which separation turns on.
pub const SEPARATE_ON_CV2: f64 = 2.0;
/// Below this it turns off again.
pub const SEPARATE_OFF_CV2: f64 = 1.5;

/// Decayed moments of observed lifespans.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LifespanStats {
    /// Samples since the last halving (`weight` counts them decayed).
    samples: u64,
    weight: f64,
    sum: f64,
    sum_sq: f64,
    /// Samples between halvings, and the fewest (decayed) before any decision.
    window: u64,
    /// The current decision.
    separate: bool,
}

impl LifespanStats {
    /// Statistics over about `window` recent samples (at least 64).
    pub fn new(window: u64) -> LifespanStats {
        LifespanStats {
            samples: 0,
            weight: 0.0,
            sum: 0.0,
            sum_sq: 0.0,
            window: window.max(64),
            separate: false,
        }
    }

    /// Records one overwrite of an LBA last written `lifespan` user writes ago.
    pub fn observe(&mut self, lifespan: u64) {
        let x = lifespan as f64;
        self.weight += 1.0;
        self.sum += x;
        self.sum_sq += x * x;
        self.samples += 1;
        if self.samples >= self.window {
            self.samples = 0;
            self.weight /= 2.0;
            self.sum /= 2.0;
            self.sum_sq /= 2.0;
            self.decide();
        } else if self.samples.is_multiple_of(self.window.div_ceil(8)) {
            self.decide();
        }
    }

    /// The squared coefficient of variation of the recent lifespans, None with too few.
    pub fn cv2(&self) -> Option<f64> {
        if self.weight < (self.window / 2) as f64 || self.sum <= 0.0 {
            return None;
        }
        let mean = self.sum / self.weight;
        Some((self.sum_sq / self.weight - mean * mean).max(0.0) / (mean * mean))
    }

    fn decide(&mut self) {
        if let Some(cv2) = self.cv2() {
            let threshold = if self.separate {
                SEPARATE_OFF_CV2
            } else {
                SEPARATE_ON_CV2
            };
            self.separate = cv2 > threshold;
        }
    }

    /// Whether hot and cold data go to separate streams now.
    pub fn separate(&self) -> bool {
        self.separate
    }
}

/// Per logical block, one bit: whether its previous update interval was short (shorter than
/// the hot threshold). A user write is placed with the hot data only when both its latest
/// interval and the one before were short: one short interval says little about a block
/// that is usually rewritten rarely (under 80/20 a cold block comes back within a volume's
/// worth of writes 22% of the time, a hot one misses that 2% of the time), so requiring two
/// keeps most cold blocks out of the hot zones, where they would be copied again and again
/// (the idea of SepBIT, Wang et al., FAST '22: infer a block's lifespan from its history).
/// Memory: one bit per block. Not persisted: after a mount every block starts with a long
/// history and is placed with the cold data until it has been rewritten twice quickly.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntervalHistory {
    bits: Vec<u64>,
}

impl IntervalHistory {
    /// No history for `blocks` blocks: every previous interval counts as long.
    pub fn new(blocks: u64) -> IntervalHistory {
        IntervalHistory {
            bits: vec![0; blocks.div_ceil(64) as usize],
        }
    }

    /// Whether the interval before the latest write of `lba` was short; false out of range.
    pub fn was_short(&self, lba: u64) -> bool {
        self.bits
            .get((lba / 64) as usize)
            .is_some_and(|w| w >> (lba % 64) & 1 == 1)
    }

    /// Records whether the interval that `lba`'s write now ends was short.
    pub fn record(&mut self, lba: u64, short: bool) {
        if let Some(w) = self.bits.get_mut((lba / 64) as usize) {
            let bit = 1u64 << (lba % 64);
            if short {
                *w |= bit;
            } else {
                *w &= !bit;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zns::SimRng;

    /// Lifespans of `writes` random overwrites of `blocks` LBAs, the hot `hot_lbas` of them
    /// taking `hot_share` of the writes.
    fn run(blocks: u64, hot_lbas: u64, hot_share: f64, writes: u64) -> LifespanStats {
        let mut rng = SimRng::new(7);
        let mut last = vec![0u64; blocks as usize];
        let mut s = LifespanStats::new(blocks);
        for now in 1..=writes {
            let hot = (rng.next_u64() % 1000) as f64 / 1000.0 < hot_share;
            let lba = if hot {
                rng.next_u64() % hot_lbas
            } else {
                hot_lbas + rng.next_u64() % (blocks - hot_lbas)
            };
            let prev = last[lba as usize];
            if prev != 0 {
                s.observe(now - prev);
            }
            last[lba as usize] = now;
        }
        s
    }

    #[test]
    fn uniform_overwrites_do_not_separate() {
        let s = run(4096, 2048, 0.5, 40_000);
        let cv2 = s.cv2().expect("enough samples");
        assert!((0.7..1.4).contains(&cv2), "uniform cv2 {cv2}");
        assert!(!s.separate());
    }

    #[test]
    fn skewed_overwrites_separate() {
        let s = run(4096, 819, 0.8, 40_000);
        let cv2 = s.cv2().expect("enough samples");
        assert!(cv2 > SEPARATE_ON_CV2, "80/20 cv2 {cv2}");
        assert!(s.separate());
    }

    #[test]
    fn sequential_overwrites_do_not_separate_and_a_change_turns_it_off() {
        let mut s = LifespanStats::new(1000);
        for _ in 0..5000 {
            s.observe(1000);
        }
        assert_eq!(s.cv2().map(|c| c < 0.01), Some(true));
        assert!(!s.separate());
        // Skewed, then sequential again: on, then off once the old samples decay.
        for i in 0..5000u64 {
            s.observe(if i % 5 == 0 { 20_000 } else { 50 });
        }
        assert!(s.separate());
        for _ in 0..20_000 {
            s.observe(1000);
        }
        assert!(!s.separate());
    }

    #[test]
    fn no_decision_without_samples() {
        let mut s = LifespanStats::new(1000);
        for _ in 0..100 {
            s.observe(5);
            s.observe(100_000);
        }
        assert_eq!(s.cv2(), None);
        assert!(!s.separate());
    }

    /// A volume of 40 zones of 64 blocks, and a writer that records each write's class.
    fn mapping() -> crate::map::Mapping {
        let g = crate::layout::tests::geo(40, 64);
        let l = crate::Layout::new(g, 1000, crate::layout::RESERVE_ZONES_DEFAULT).expect("layout");
        crate::map::Mapping::new(l)
    }

    fn write(m: &mut crate::map::Mapping, lba: u64) -> crate::map::Stream {
        let stream = m.classify(lba, true);
        m.note_update(lba);
        let seq = m.take_seq();
        m.seq[lba as usize] = seq;
        stream
    }

    #[test]
    fn interval_history_keeps_one_bit_per_block() {
        let mut h = IntervalHistory::new(130);
        assert!(!h.was_short(0));
        h.record(129, true);
        h.record(64, true);
        assert!(h.was_short(129) && h.was_short(64) && !h.was_short(65));
        h.record(64, false);
        assert!(!h.was_short(64) && h.was_short(129));
        // Out of range is no history, never a panic.
        h.record(1000, true);
        assert!(!h.was_short(1000));
    }

    // Regression: a user write went to the hot stream whenever its block had been written
    // within the last volume's worth of writes, so under 80/20 about a fifth of the cold
    // blocks' writes (those that happened to come back early) landed in hot zones, where they
    // outlived their neighbours and were copied by every collection of those zones. A block
    // is hot only when its last two intervals were both short.
    #[test]
    fn a_cold_block_that_comes_back_once_early_stays_cold() {
        use crate::map::Stream;
        let mut m = mapping();
        let n = m.layout.volume_blocks;
        let hot = n / 5;
        let mut rng = SimRng::new(11);
        let pick = |rng: &mut SimRng| {
            if rng.chance(0.8) {
                rng.below(hot)
            } else {
                hot + rng.below(n - hot)
            }
        };
        for _ in 0..20 * n {
            let lba = pick(&mut rng);
            write(&mut m, lba);
        }
        assert!(m.separating(), "80/20 must turn separation on");
        // Per region, the share of writes placed with the hot data.
        let mut placed = [[0u64; 2]; 2];
        for _ in 0..40 * n {
            let lba = pick(&mut rng);
            let region = usize::from(lba >= hot);
            placed[region][usize::from(write(&mut m, lba) == Stream::Hot)] += 1;
        }
        let share = |r: [u64; 2]| r[1] as f64 / (r[0] + r[1]) as f64;
        assert!(share(placed[0]) > 0.9, "hot region: {placed:?}");
        assert!(share(placed[1]) < 0.1, "cold region: {placed:?}");
        // One block step by step: long absent, back once early (still cold), and again
        // (now hot).
        let c = n - 1;
        write(&mut m, c);
        for lba in 0..n {
            write(&mut m, lba % hot);
        }
        assert_eq!(write(&mut m, c), Stream::Cold);
        assert_eq!(write(&mut m, c), Stream::Cold);
        assert_eq!(write(&mut m, c), Stream::Hot);
    }

    // Regression: a GC copy went to the hot GC stream whenever its block had been written
    // within the last volume's worth of writes. A cold zone is collected about that long
    // after it was written, so many of its survivors still counted as young and moved into
    // hot zones, where they were copied again (80/20: the hot zones held 37,500 live blocks
    // for 26,000 hot ones). Copies out of a cold zone go to the cold GC stream, and so do
    // young blocks whose latest interval was long.
    #[test]
    fn copies_out_of_cold_zones_and_of_blocks_back_early_go_cold() {
        use crate::map::Stream;
        let mut m = mapping();
        let n = m.layout.volume_blocks;
        let hot = n / 5;
        let mut rng = SimRng::new(5);
        for _ in 0..20 * n {
            let lba = if rng.chance(0.8) {
                rng.below(hot)
            } else {
                hot + rng.below(n - hot)
            };
            write(&mut m, lba);
        }
        assert!(m.separating(), "80/20 must turn separation on");
        let (hot_zone, _) = m.open_zone(Stream::Hot).expect("a free zone");
        let (young_copies, _) = m.open_zone(Stream::Gc).expect("a free zone");
        let (cold_zone, _) = m.open_zone(Stream::Cold).expect("a free zone");
        let (old_copies, _) = m.open_zone(Stream::GcCold).expect("a free zone");
        let found = m.free.back().copied().expect("a zone never opened");
        // A hot block, rewritten twice in quick succession: young with a short interval.
        write(&mut m, 0);
        write(&mut m, 0);
        assert_eq!(m.classify_copy(0, true, hot_zone), Stream::Gc);
        assert_eq!(m.classify_copy(0, true, young_copies), Stream::Gc);
        // The same block out of a cold zone, or of a zone a mount found, stays cold.
        assert_eq!(m.classify_copy(0, true, cold_zone), Stream::GcCold);
        assert_eq!(m.classify_copy(0, true, old_copies), Stream::GcCold);
        assert_eq!(m.classify_copy(0, true, found), Stream::GcCold);
        // A block back after a long absence: young, but its interval was long.
        let c = n - 1;
        write(&mut m, c);
        for lba in 0..n {
            write(&mut m, lba % hot);
        }
        write(&mut m, c);
        assert_eq!(m.classify_copy(c, true, hot_zone), Stream::GcCold);
        // Without separation, one GC stream.
        assert_eq!(m.classify_copy(0, false, cold_zone), Stream::Gc);
    }
}
