//! Which member writes are known durable: RAIZN's persistence bitmap (paper section 5.3,
//! Fig. 6) in the form this volume keeps it, one member at a time, as plain synchronous code.
//!
//! Fault model: a member loses, at a power cut, every write that no completed flush covers.
//! A flush covers exactly the writes that completed before it started: a write still in
//! flight when a flush starts, or completing while it runs, may be lost even after that
//! flush completes. So a write counts as *pending* from its submission (`begin`) until a
//! flush that started after its completion (`end`) has completed (`flush_end`), and never
//! less: the stamps below only ever make that window longer, never shorter. A write that was
//! given up (its future dropped) may still have reached the member; it ends as if it had
//! completed at that moment. A flush that failed covers nothing.
//!
//! The paper keeps one bit per stripe unit of every open zone and asks, before a FUA write
//! completes, which members hold units not yet durable from the stripe before the write on.
//! Each member zone is written sequentially, so what is durable of one member zone is a
//! prefix, and "every unit of member m below the write's end is durable" is "member m's
//! newest completed write to the zone is durable": one completion stamp per member and zone
//! answers the same question, and answers it for the writes in flight too, which a bit per
//! unit cannot (a bit set at completion would not say whether the flush that set it started
//! before or after the write completed). Metadata records a zone's data depends on (its
//! partial-parity and relocation records, its generation record) are tracked under the same
//! zone on the member whose log holds them; other metadata under `Scope::All`, which every
//! zone depends on.
//!
//! Stamps: every member has a flush *epoch*. A write completing records the current epoch; a
//! flush starting takes the current epoch `g` and moves the epoch to `g + 1`, so a write that
//! completed before it has a stamp <= `g` and one completing after it a stamp > `g`; when the
//! flush completes, every stamp <= `g` is durable. Memory: one entry per (member, scope) with
//! a write not yet known durable; entries are dropped once durable, so the map holds at most
//! the zones written since the member's last flush.

use std::collections::BTreeMap;

/// What a member write is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Data, parity or a record of this logical zone: a FUA write to the zone depends on it.
    Zone(u32),
    /// Metadata every zone depends on (superblocks, checkpoints, log collections).
    All,
}

/// The writes of one scope not yet known durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pending {
    /// Writes submitted and not yet ended.
    in_flight: u32,
    /// The epoch the newest ended write completed in (0: none since the entry was made).
    done_epoch: u64,
}

/// The persistence state of one member.
#[derive(Clone, Debug)]
pub struct MemberPersist {
    /// The epoch writes completing now record; > every flush epoch started so far.
    epoch: u64,
    /// Every write whose stamp is at most this is durable.
    durable_epoch: u64,
    pending: BTreeMap<Scope, Pending>,
}

impl Default for MemberPersist {
    fn default() -> MemberPersist {
        MemberPersist::new()
    }
}

/// A flush's ticket: the epoch it covers (every write stamped at most this).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushTicket(u64);

impl MemberPersist {
    /// A member with nothing pending: what it holds is durable (at open, the write pointers
    /// are all there is, and the open's own writes are tracked from the start).
    pub fn new() -> MemberPersist {
        MemberPersist {
            epoch: 1,
            durable_epoch: 0,
            pending: BTreeMap::new(),
        }
    }

    /// A write of `scope` is submitted.
    pub fn begin(&mut self, scope: Scope) {
        let p = self.pending.entry(scope).or_default();
        // Bounded by the commands in flight to one member, far below u32::MAX.
        p.in_flight = p.in_flight.saturating_add(1);
    }

    /// A write of `scope` begun earlier has ended (completed, failed or been given up);
    /// `durable` when the member made it durable itself (a FUA write that succeeded).
    pub fn end(&mut self, scope: Scope, durable: bool) {
        let epoch = self.epoch;
        let Some(p) = self.pending.get_mut(&scope) else {
            debug_assert!(false, "a write ended that never began");
            return;
        };
        debug_assert!(p.in_flight > 0, "a write ended twice");
        p.in_flight = p.in_flight.saturating_sub(1);
        if !durable {
            p.done_epoch = epoch;
        }
        self.prune(scope);
    }

    /// A flush is about to be sent: it will cover the writes completed so far.
    pub fn flush_begin(&mut self) -> FlushTicket {
        let t = FlushTicket(self.epoch);
        self.epoch += 1;
        t
    }

    /// The flush of `ticket` completed successfully.
    pub fn flush_end(&mut self, ticket: FlushTicket) {
        debug_assert!(ticket.0 < self.epoch, "a ticket from the future");
        self.durable_epoch = self.durable_epoch.max(ticket.0);
        let durable = self.durable_epoch;
        self.pending
            .retain(|_, p| p.in_flight > 0 || p.done_epoch > durable);
    }

    /// Whether a write of `scope` is in flight or not yet covered by a completed flush.
    fn is_pending(&self, scope: Scope) -> bool {
        self.pending
            .get(&scope)
            .is_some_and(|p| p.in_flight > 0 || p.done_epoch > self.durable_epoch)
    }

    /// Whether a write to `zone`'s data depends on something of this member that is not
    /// known durable: a write of the zone's scope, or of `Scope::All`.
    pub fn zone_pending(&self, zone: u32) -> bool {
        self.is_pending(Scope::Zone(zone)) || self.is_pending(Scope::All)
    }

    /// Whether anything written to this member is not known durable (a Flush must flush it).
    pub fn any_pending(&self) -> bool {
        self.pending.keys().any(|s| self.is_pending(*s))
    }

    /// Scopes held in memory (for the bound in docs/DESIGN.md and the tests).
    pub fn entries(&self) -> usize {
        self.pending.len()
    }

    /// Drops `scope`'s entry when nothing of it is pending.
    fn prune(&mut self, scope: Scope) {
        if !self.is_pending(scope) {
            self.pending.remove(&scope);
        }
    }

    /// Checks the invariants: stamps never ahead of the epoch, the durable epoch behind it,
    /// and no entry kept that holds nothing pending.
    pub fn verify(&self) -> Result<(), String> {
        if self.durable_epoch >= self.epoch {
            return Err(format!(
                "durable epoch {} is not behind the epoch {}",
                self.durable_epoch, self.epoch
            ));
        }
        for (s, p) in &self.pending {
            if p.done_epoch > self.epoch {
                return Err(format!(
                    "{s:?} completed in epoch {} > {}",
                    p.done_epoch, self.epoch
                ));
            }
            if p.in_flight == 0 && p.done_epoch <= self.durable_epoch {
                return Err(format!("{s:?} kept with nothing pending"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Z: Scope = Scope::Zone(3);

    #[test]
    fn a_fresh_member_is_clean() {
        let m = MemberPersist::new();
        assert!(!m.any_pending());
        assert!(!m.zone_pending(3));
        assert_eq!(m.verify(), Ok(()));
    }

    #[test]
    fn a_write_is_pending_from_submission_until_a_later_flush_completes() {
        let mut m = MemberPersist::new();
        m.begin(Z);
        assert!(m.zone_pending(3) && m.any_pending());
        assert!(!m.zone_pending(4), "another zone does not depend on it");
        m.end(Z, false);
        assert!(m.zone_pending(3));
        let t = m.flush_begin();
        assert!(m.zone_pending(3), "pending until the flush completes");
        m.flush_end(t);
        assert!(!m.zone_pending(3) && !m.any_pending());
        assert_eq!(m.entries(), 0);
        assert_eq!(m.verify(), Ok(()));
    }

    #[test]
    fn a_flush_started_before_a_write_completed_does_not_cover_it() {
        let mut m = MemberPersist::new();
        m.begin(Z);
        let early = m.flush_begin();
        m.end(Z, false);
        m.flush_end(early);
        assert!(
            m.zone_pending(3),
            "the write completed after the flush started"
        );
        // Also when the write was still in flight when the flush completed.
        m.begin(Z);
        let t = m.flush_begin();
        m.flush_end(t);
        m.end(Z, false);
        assert!(m.zone_pending(3));
        let late = m.flush_begin();
        m.flush_end(late);
        assert!(!m.zone_pending(3));
        assert_eq!(m.verify(), Ok(()));
    }

    #[test]
    fn flushes_completing_out_of_order_keep_the_newest_cover() {
        let mut m = MemberPersist::new();
        m.begin(Z);
        m.end(Z, false);
        let a = m.flush_begin();
        let b = m.flush_begin();
        m.flush_end(b);
        assert!(!m.zone_pending(3));
        m.begin(Z);
        m.end(Z, false);
        m.flush_end(a);
        assert!(
            m.zone_pending(3),
            "an older flush does not cover a newer write"
        );
        assert_eq!(m.verify(), Ok(()));
    }

    #[test]
    fn a_fua_write_is_pending_only_while_in_flight() {
        let mut m = MemberPersist::new();
        m.begin(Z);
        assert!(m.zone_pending(3));
        m.end(Z, true);
        assert!(!m.zone_pending(3));
        assert_eq!(m.entries(), 0);
    }

    #[test]
    fn scope_all_makes_every_zone_depend_on_it() {
        let mut m = MemberPersist::new();
        m.begin(Scope::All);
        m.end(Scope::All, false);
        assert!(m.zone_pending(0) && m.zone_pending(9));
        let t = m.flush_begin();
        m.flush_end(t);
        assert!(!m.zone_pending(0));
    }

    #[test]
    fn a_failed_flush_covers_nothing() {
        let mut m = MemberPersist::new();
        m.begin(Z);
        m.end(Z, false);
        let _failed = m.flush_begin();
        assert!(m.zone_pending(3));
        let t = m.flush_begin();
        m.flush_end(t);
        assert!(!m.zone_pending(3));
    }

    /// Random interleavings against a model that keeps every write: a scope is pending
    /// exactly when one of its writes is in flight, or completed after the start of every
    /// flush completed since.
    #[test]
    fn random_interleavings_match_the_model() {
        let mut rng = zns::SimRng::new(7);
        let mut checked = 0u64;
        for _ in 0..200 {
            let mut m = MemberPersist::new();
            // Per write: (scope, completed at step, fua); flushes: (started at, completed at).
            let mut writes: Vec<(Scope, Option<u64>, bool)> = Vec::new();
            let mut flushes: Vec<(FlushTicket, u64)> = Vec::new();
            let mut covers: Vec<u64> = Vec::new();
            for step in 0..60u64 {
                match rng.below(5) {
                    0 => {
                        let s = match rng.below(4) {
                            0 => Scope::All,
                            k => Scope::Zone(k as u32),
                        };
                        m.begin(s);
                        writes.push((s, None, rng.chance(0.2)));
                    }
                    1 | 2 => {
                        let open: Vec<usize> = (0..writes.len())
                            .filter(|i| writes[*i].1.is_none())
                            .collect();
                        if let Some(&i) = open.get(rng.below(open.len().max(1) as u64) as usize) {
                            m.end(writes[i].0, writes[i].2);
                            writes[i].1 = Some(step);
                        }
                    }
                    3 => flushes.push((m.flush_begin(), step)),
                    _ => {
                        if !flushes.is_empty() {
                            let k = rng.below(flushes.len() as u64) as usize;
                            let (t, started) = flushes.swap_remove(k);
                            m.flush_end(t);
                            covers.push(started);
                        }
                    }
                }
                let newest_cover = covers.iter().max().copied();
                let pending = |s: Scope| {
                    writes.iter().any(|(ws, done, fua)| {
                        *ws == s
                            && match done {
                                None => true,
                                Some(_) if *fua => false,
                                Some(d) => newest_cover.is_none_or(|c| *d >= c),
                            }
                    })
                };
                for z in 1..4 {
                    let want = pending(Scope::Zone(z)) || pending(Scope::All);
                    assert_eq!(m.zone_pending(z), want, "zone {z} at step {step}");
                    checked += 1;
                }
                assert_eq!(m.verify(), Ok(()));
            }
        }
        assert!(checked >= 30_000, "{checked}");
    }
}
