//! ZNS+ plugging policies for TL-opened zones, and the state PPA-ordered plugging keeps.
//!
//! A TL-opened zone's skipped (valid) blocks must reach its LogFBG. LBA-ordered plugging (LP)
//! copies them when the write pointer passes them, right after the write that moved it. PPA-
//! ordered plugging (PP, ZNS+ section 3.2.2 and the paper's default) copies a *fully valid*
//! unit ahead of the write pointer as soon as the flash rules allow, in time its die is idle:
//! a unit may be programmed once every lower unit of the zone on the same die (its flash
//! block's lower pages) is programmed. What the write pointer then passes is already there and
//! costs nothing; what PP could not do (partly valid units, units whose die never idled in
//! time) is plugged as LP plugs it. Only the timing differs: the data the host reads is the
//! same under both (plugging copies a block to its own LBA).
//!
//! "Idle" is exact in the discrete-event model: at each submission, the interval since the
//! previous one is past, so no command can be booked in its gaps any more; PP books its
//! copybacks there. They therefore never delay a command, which is what running plugging in
//! the background at a lower priority than host I/O gives a real controller, and they count
//! as die busy time (chip utilisation, paper Fig. 9).

/// How a device plugs the valid blocks of TL-opened zones (timing only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlugOrder {
    /// LBA-ordered (LP): skipped blocks are copied when the write pointer passes them.
    Lba,
    /// PPA-ordered in idle chip time (PP), with LP for what it could not do in advance.
    #[default]
    Ppa,
}

impl PlugOrder {
    /// The name the command line and reports use: `lp` or `pp`.
    pub fn name(self) -> &'static str {
        match self {
            PlugOrder::Lba => "lp",
            PlugOrder::Ppa => "pp",
        }
    }

    /// The policy named `lp` or `pp`.
    pub fn from_name(name: &str) -> Option<PlugOrder> {
        match name {
            "lp" => Some(PlugOrder::Lba),
            "pp" => Some(PlugOrder::Ppa),
            _ => None,
        }
    }
}

/// PP's view of one TL-opened zone: which units it may copy ahead, which it has copied.
#[derive(Clone, Debug)]
pub(crate) struct AheadPlugs {
    /// Unit i holds only valid blocks (and lies wholly below the zone capacity).
    full: Vec<bool>,
    /// Unit i was copied into the LogFBG ahead of the write pointer.
    done: Vec<bool>,
    /// Per die of the zone (unit mod dies per zone): when the last ahead copy on it ends.
    slot_end_ns: Vec<u64>,
    /// One past the highest unit copied ahead (0 when none), for the erase at reset.
    done_end: u64,
}

impl AheadPlugs {
    /// The state for a zone opened with `valid` (bit i = block i valid, least significant
    /// bit first), `unit_blocks` blocks per unit, `cap_blocks` blocks of capacity, over
    /// `slots` dies.
    pub(crate) fn new(valid: &[u8], unit_blocks: u64, cap_blocks: u64, slots: u64) -> Self {
        let is_valid = |b: u64| {
            let byte = valid.get((b / 8) as usize).copied().unwrap_or(0);
            byte & (1 << (b % 8)) != 0
        };
        let units = cap_blocks / unit_blocks.max(1);
        let full: Vec<bool> = (0..units)
            .map(|u| (u * unit_blocks..(u + 1) * unit_blocks).all(is_valid))
            .collect();
        AheadPlugs {
            done: vec![false; full.len()],
            full,
            slot_end_ns: vec![0; slots as usize],
            done_end: 0,
        }
    }

    pub(crate) fn is_done(&self, unit: u64) -> bool {
        self.done.get(unit as usize).copied().unwrap_or(false)
    }

    /// The next unit PP may copy on die slot `slot` (of `slots`), given that units below
    /// `first_free` are already programmed or booked: the first unit of that slot at or above
    /// `first_free` not yet copied ahead, if it is fully valid.
    pub(crate) fn candidate(&self, slot: u64, slots: u64, first_free: u64) -> Option<u64> {
        let mut u = first_free + (slot + slots - first_free % slots) % slots;
        while self.is_done(u) {
            u += slots;
        }
        self.full
            .get(u as usize)
            .copied()
            .unwrap_or(false)
            .then_some(u)
    }

    /// When the last ahead copy on `slot` ends.
    pub(crate) fn slot_end_ns(&self, slot: u64) -> u64 {
        self.slot_end_ns.get(slot as usize).copied().unwrap_or(0)
    }

    /// Records unit `unit` (on `slot`) as copied ahead, its copy ending at `end_ns`.
    pub(crate) fn mark_done(&mut self, unit: u64, slot: u64, end_ns: u64) {
        if let Some(d) = self.done.get_mut(unit as usize) {
            *d = true;
        }
        if let Some(e) = self.slot_end_ns.get_mut(slot as usize) {
            *e = (*e).max(end_ns);
        }
        self.done_end = self.done_end.max(unit + 1);
    }

    /// One past the highest unit copied ahead.
    pub(crate) fn done_end(&self) -> u64 {
        self.done_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_each_die_in_page_order() {
        // 4 blocks per unit, 8 units, 2 dies: units 1, 3, 4, 5 fully valid; unit 6 partly.
        let mut valid = vec![0u8; 4];
        for b in (4..8).chain(12..24).chain([25]) {
            valid[b / 8] |= 1 << (b % 8);
        }
        let mut a = AheadPlugs::new(&valid, 4, 32, 2);
        // Die 0 holds units 0, 2, 4, 6: unit 0 is not valid, so nothing goes ahead on it.
        assert_eq!(a.candidate(0, 2, 0), None);
        // Die 1 holds units 1, 3, 5, 7: 1 first, then 3 once 1 is done, then 5.
        assert_eq!(a.candidate(1, 2, 0), Some(1));
        a.mark_done(1, 1, 10);
        assert_eq!(a.candidate(1, 2, 0), Some(3));
        a.mark_done(3, 1, 20);
        assert_eq!(a.candidate(1, 2, 0), Some(5));
        a.mark_done(5, 1, 30);
        assert_eq!(a.candidate(1, 2, 0), None, "unit 7 is not valid");
        assert_eq!((a.slot_end_ns(1), a.done_end()), (30, 6));
        // Once the host's data fills units 0..4, die 0's next unit is 4, fully valid.
        assert_eq!(a.candidate(0, 2, 4), Some(4));
        assert!(a.is_done(3) && !a.is_done(4));
        assert_eq!(PlugOrder::from_name("pp"), Some(PlugOrder::Ppa));
        assert_eq!(PlugOrder::Lba.name(), "lp");
    }
}
