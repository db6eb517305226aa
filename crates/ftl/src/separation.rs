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
}
