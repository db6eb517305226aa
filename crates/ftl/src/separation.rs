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

/// How blocks are classed hot or cold while user writes are separated
/// (`MountOptions::placement`). Both infer a block's lifespan from its history, the idea of
/// SepBIT (Wang et al., FAST '22); they differ in how much history they weigh.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// A user write is hot when the update interval it ends and the one before were each
    /// shorter than a volume's worth of writes; a copy is hot when its victim zone is hot, the
    /// block was written within a volume's worth of writes and its latest interval was short.
    /// The default: `Lifespans` writes less under `zonestack bench ftl`'s 80/20 but lost 4%
    /// of the 80/20 phase of the 7% skewed fio job (docs/BENCHMARKS.md).
    #[default]
    TwoShort,
    /// By expected lifespan: a user write is hot when the interval it ends and the block's
    /// three recorded intervals before it add up to less than `HOT_LIFESPANS_VOLUMES`
    /// volumes' worth of writes (their mean under 0.8 volumes); a copy is hot when its victim
    /// zone is hot and the block's age plus its three recorded intervals do. For lifespans
    /// drawn from two exponential populations (a skewed workload's hot and cold blocks) the
    /// likelihood that a block is hot depends on its lifespans only through their sum, so a
    /// sum over four of them tells the classes apart better than two (docs/DESIGN.md, Write
    /// path).
    Lifespans,
}

/// `Placement::Lifespans`: four lifespans adding up to less than this many volumes' worth of
/// writes are hot. Under 80/20 a hot block's mean lifespan is a quarter volume and a cold
/// one's four volumes; sums of four lifespans under 3.2 volumes are then 99.9% of the hot
/// blocks' and 0.9% of the cold blocks' (Erlang distributions). 3.0, 3.6 and 4 measured no
/// better (docs/BENCHMARKS.md).
pub const HOT_LIFESPANS_VOLUMES: f64 = 3.2;

/// Recorded intervals are kept in units of a 64th of the volume's blocks, at most 255 units
/// (about four volumes' worth of writes: any interval that long is cold under either rule).
const INTERVAL_UNITS_PER_VOLUME: u64 = 64;

/// Per logical block, the update interval its latest write ended and the two before that (in
/// user writes, rounded up to a 64th of a volume's worth and saturating at about four
/// volumes: an interval of a volume's worth or more never counts as short, one a 64th
/// shorter may). A block never overwritten since the mount has the longest intervals, so it is
/// placed with the cold data until its history says otherwise. Memory: three bytes per block.
/// Not persisted: a mount starts every block's history afresh.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntervalHistory {
    intervals: Vec<[u8; 3]>,
    /// Writes per recorded unit.
    unit: u64,
    /// Writes in a volume's worth.
    volume: u64,
}

impl IntervalHistory {
    /// No history for `blocks` blocks: every interval counts as the longest.
    pub fn new(blocks: u64) -> IntervalHistory {
        IntervalHistory {
            intervals: vec![[u8::MAX; 3]; blocks as usize],
            unit: (blocks / INTERVAL_UNITS_PER_VOLUME).max(1),
            volume: blocks.max(1),
        }
    }

    /// Whether the interval `lba`'s latest write ended was shorter than a volume's worth of
    /// writes; false out of range.
    pub fn was_short(&self, lba: u64) -> bool {
        self.intervals
            .get(lba as usize)
            .is_some_and(|i| u64::from(i[0]) * self.unit < self.volume)
    }

    /// The three recorded intervals of `lba` added, in writes (each at most 255 units; out of
    /// range as if the longest).
    pub fn recorded_sum(&self, lba: u64) -> u64 {
        let i = self
            .intervals
            .get(lba as usize)
            .copied()
            .unwrap_or([u8::MAX; 3]);
        i.iter().map(|q| u64::from(*q)).sum::<u64>() * self.unit
    }

    /// Records the interval `lba`'s write now ends (None: the block had not been written),
    /// which becomes its latest; the oldest of the three recorded is dropped.
    pub fn record(&mut self, lba: u64, interval: Option<u64>) {
        let unit = self.unit;
        if let Some(i) = self.intervals.get_mut(lba as usize) {
            let q = interval.map_or(u8::MAX, |x| {
                u8::try_from(x.div_ceil(unit)).unwrap_or(u8::MAX)
            });
            *i = [q, i[0], i[1]];
        }
    }

    /// Whether lifespans of `sum` writes in all (four of them) are hot under
    /// `Placement::Lifespans`.
    pub fn lifespans_hot(&self, sum: u64) -> bool {
        (sum as f64) < HOT_LIFESPANS_VOLUMES * self.volume as f64
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
    fn interval_history_keeps_three_intervals_per_block() {
        // 6,400 blocks: units of 100 writes.
        let mut h = IntervalHistory::new(6400);
        let longest = 255 * 100;
        assert!(!h.was_short(0));
        assert_eq!(h.recorded_sum(0), 3 * longest);
        h.record(129, Some(50));
        h.record(64, Some(6300));
        h.record(65, Some(6399));
        // Rounded up, an interval less than a unit short of a volume is not short.
        assert!(h.was_short(129) && h.was_short(64) && !h.was_short(65));
        // Rounded up to whole units: 50 writes count as 100.
        assert_eq!(h.recorded_sum(129), 100 + 2 * longest);
        // The latest becomes the one before; a volume's worth is never short.
        h.record(64, Some(6400));
        assert!(!h.was_short(64) && h.was_short(129));
        assert_eq!(h.recorded_sum(64), 6400 + 6300 + longest);
        // The oldest of three drops out.
        h.record(64, Some(100));
        h.record(64, Some(100));
        assert_eq!(h.recorded_sum(64), 100 + 100 + 6400);
        // A first write (no interval) and intervals beyond four volumes saturate.
        h.record(64, None);
        h.record(129, Some(1 << 40));
        assert_eq!(h.recorded_sum(64), longest + 100 + 100);
        assert_eq!(h.recorded_sum(129), longest + 100 + longest);
        // Out of range is no history, never a panic.
        h.record(10_000, Some(1));
        assert!(!h.was_short(10_000));
        assert_eq!(h.recorded_sum(10_000), 3 * longest);
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
        m.placement = Placement::TwoShort;
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
        let (mut m, hot, _) = skewed(Placement::TwoShort, 5);
        let n = m.layout.volume_blocks;
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

    /// A mapping under 80/20 overwrites long enough for separation to be on, the LBAs below
    /// the returned bound taking 80% of the writes.
    fn skewed(placement: Placement, seed: u64) -> (crate::map::Mapping, u64, SimRng) {
        let mut m = mapping();
        m.placement = placement;
        let n = m.layout.volume_blocks;
        let hot = n / 5;
        let mut rng = SimRng::new(seed);
        for _ in 0..20 * n {
            let lba = if rng.chance(0.8) {
                rng.below(hot)
            } else {
                hot + rng.below(n - hot)
            };
            write(&mut m, lba);
        }
        assert!(m.separating(), "80/20 must turn separation on");
        (m, hot, rng)
    }

    /// `count` more 80/20 writes to blocks other than `except`: time passing while the
    /// workload keeps separation on.
    fn pass(m: &mut crate::map::Mapping, rng: &mut SimRng, hot: u64, except: u64, count: u64) {
        let n = m.layout.volume_blocks;
        for _ in 0..count {
            let lba = if rng.chance(0.8) {
                rng.below(hot)
            } else {
                hot + rng.below(n - hot - 1)
            };
            assert_ne!(lba, except);
            write(m, lba);
        }
    }

    // The lifespan rule's decisions one write at a time: a block is hot when the interval its
    // write ends and the three before add up to less than 3.2 volumes' worth of writes, where
    // the two-interval rule looked only at the last two, each against a volume's worth.
    #[test]
    fn lifespans_class_a_write_by_its_last_four_intervals() {
        use crate::map::Stream;
        let (mut m, hot, mut rng) = skewed(Placement::Lifespans, 3);
        let n = m.layout.volume_blocks;
        let c = n - 1;
        // Four volumes away, then back four times in quick succession: the long interval
        // keeps it cold until three short ones follow it.
        write(&mut m, c);
        pass(&mut m, &mut rng, hot, c, 4 * n);
        assert_eq!(write(&mut m, c), Stream::Cold);
        assert_eq!(write(&mut m, c), Stream::Cold);
        assert_eq!(write(&mut m, c), Stream::Cold);
        assert_eq!(write(&mut m, c), Stream::Cold, "one long interval of four");
        assert_eq!(write(&mut m, c), Stream::Hot);
        // The two-interval rule calls the third write hot already.
        m.placement = Placement::TwoShort;
        write(&mut m, c);
        pass(&mut m, &mut rng, hot, c, 4 * n);
        write(&mut m, c);
        write(&mut m, c);
        assert_eq!(write(&mut m, c), Stream::Hot);
        // Intervals of 0.9 volumes: each short, but their mean is not under 0.8 volumes.
        let gap = n * 9 / 10;
        for placement in [Placement::TwoShort, Placement::Lifespans] {
            m.placement = placement;
            let mut last = Stream::Cold;
            for _ in 0..5 {
                pass(&mut m, &mut rng, hot, c, gap);
                last = write(&mut m, c);
            }
            let want = if placement == Placement::TwoShort {
                Stream::Hot
            } else {
                Stream::Cold
            };
            assert_eq!(last, want, "{placement:?}");
        }
        // Intervals of half a volume: hot under both.
        for placement in [Placement::TwoShort, Placement::Lifespans] {
            m.placement = placement;
            let mut last = Stream::Cold;
            for _ in 0..5 {
                pass(&mut m, &mut rng, hot, c, n / 2);
                last = write(&mut m, c);
            }
            assert_eq!(last, Stream::Hot, "{placement:?}");
        }
        // Not separating: one user stream, whatever the history.
        assert_eq!(m.classify(n - 2, false), Stream::Hot);
    }

    // A copy under the lifespan rule: hot only out of a hot zone, and only while the block's
    // age and three recorded intervals add up to less than 3.2 volumes' worth of writes; a
    // block that stays unwritten long enough turns cold as it ages.
    #[test]
    fn lifespans_class_a_copy_by_its_age_and_intervals() {
        use crate::map::Stream;
        let (mut m, hot, mut rng) = skewed(Placement::Lifespans, 5);
        let n = m.layout.volume_blocks;
        let (hot_zone, _) = m.open_zone(Stream::Hot).expect("a free zone");
        let (young_copies, _) = m.open_zone(Stream::Gc).expect("a free zone");
        let (cold_zone, _) = m.open_zone(Stream::Cold).expect("a free zone");
        let found = m.free.back().copied().expect("a zone never opened");
        let c = n - 1;
        // Intervals of a quarter volume: hot out of hot zones.
        for _ in 0..4 {
            pass(&mut m, &mut rng, hot, c, n / 4);
            write(&mut m, c);
        }
        assert_eq!(m.classify_copy(c, true, hot_zone), Stream::Gc);
        assert_eq!(m.classify_copy(c, true, young_copies), Stream::Gc);
        assert_eq!(m.classify_copy(c, true, cold_zone), Stream::GcCold);
        assert_eq!(m.classify_copy(c, true, found), Stream::GcCold);
        // Four volumes later its age says it has outlived a hot block's lifespan.
        pass(&mut m, &mut rng, hot, c, 4 * n);
        assert_eq!(m.classify_copy(c, true, hot_zone), Stream::GcCold);
        // A young block with one long interval among the three recorded: cold, until three
        // short ones have pushed it out.
        for _ in 0..3 {
            write(&mut m, c);
            assert_eq!(m.classify_copy(c, true, hot_zone), Stream::GcCold);
        }
        write(&mut m, c);
        assert_eq!(m.classify_copy(c, true, hot_zone), Stream::Gc);
        assert_eq!(m.classify_copy(c, false, cold_zone), Stream::Gc);
    }

    // What the lifespan rule is for: under 80/20 it places fewer of the cold blocks' writes
    // with the hot data than the two-interval rule, and as many of the hot blocks'.
    #[test]
    fn lifespans_place_fewer_cold_writes_with_the_hot_data_under_80_20() {
        use crate::map::Stream;
        let mut shares = Vec::new();
        for placement in [Placement::TwoShort, Placement::Lifespans] {
            let (mut m, hot, mut rng) = skewed(placement, 9);
            let n = m.layout.volume_blocks;
            let mut placed = [[0u64; 2]; 2];
            for _ in 0..40 * n {
                let lba = if rng.chance(0.8) {
                    rng.below(hot)
                } else {
                    hot + rng.below(n - hot)
                };
                let region = usize::from(lba >= hot);
                placed[region][usize::from(write(&mut m, lba) == Stream::Hot)] += 1;
            }
            let share = |r: [u64; 2]| r[1] as f64 / (r[0] + r[1]) as f64;
            shares.push((share(placed[0]), share(placed[1])));
        }
        let (two_short, lifespans) = (shares[0], shares[1]);
        assert!(lifespans.0 > 0.94, "hot blocks placed hot: {shares:?}");
        assert!(lifespans.1 < 0.035, "cold blocks placed hot: {shares:?}");
        assert!(lifespans.1 < two_short.1 * 0.7, "{shares:?}");
    }
}
