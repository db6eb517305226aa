//! The logical zone state machine of a RAIZN volume: states, write pointers, open/active
//! resources with implicit close of the oldest implicitly opened zone, and the zone
//! management transitions, as ZNS-CONFORMANCE.md and `zns::RefModel` define them.
//!
//! Sans-IO: the volume asks `check_write`/`prepare_write` before it sends member commands and
//! calls `commit_write` once they all completed; for Finish and Reset it asks `check_action`
//! first, does the member I/O, then `apply_action`, so a failed member command changes no
//! logical state.

use zns::{
    NvmeResult, NvmeStatus, ReportFilter, ZoneAction, ZoneDescriptor, ZoneReport, ZoneState,
};

/// One logical zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogicalZone {
    pub state: ZoneState,
    /// Blocks written, from the zone start (capacity for Full zones).
    pub wp: u64,
    /// When the zone last became Implicitly Opened; the smallest is closed first.
    pub open_seq: u64,
}

/// All logical zones and the resource limits.
#[derive(Clone, Debug)]
pub struct ZoneTable {
    zones: Vec<LogicalZone>,
    zone_size: u64,
    capacity: u64,
    max_open: u32,
    max_active: u32,
    next_seq: u64,
}

impl ZoneTable {
    /// A table of `count` zones in the given states and write pointers.
    pub fn new(
        zones: Vec<LogicalZone>,
        zone_size: u64,
        capacity: u64,
        max_open: u32,
        max_active: u32,
    ) -> ZoneTable {
        ZoneTable {
            zones,
            zone_size,
            capacity,
            max_open,
            max_active,
            next_seq: 1,
        }
    }

    pub fn zone(&self, zone: u32) -> Option<LogicalZone> {
        self.zones.get(zone as usize).copied()
    }

    pub fn len(&self) -> usize {
        self.zones.len()
    }

    pub fn is_empty(&self) -> bool {
        self.zones.is_empty()
    }

    fn open_count(&self) -> u32 {
        self.zones.iter().filter(|z| z.state.is_open()).count() as u32
    }

    fn active_count(&self) -> u32 {
        self.zones.iter().filter(|z| z.state.is_active()).count() as u32
    }

    fn get(&self, zone: u32) -> NvmeResult<&LogicalZone> {
        self.zones
            .get(zone as usize)
            .ok_or(NvmeStatus::LbaOutOfRange)
    }

    /// State and boundary checks of a write of `nlb` blocks at offset `at` (None: append).
    /// Returns the offset the data lands at.
    pub fn check_write(&self, zone: u32, at: Option<u64>, nlb: u64) -> NvmeResult<u64> {
        let z = self.writable(zone)?;
        let at = at.unwrap_or(z.wp);
        if at != z.wp {
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        if at + nlb > self.capacity {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        Ok(at)
    }

    /// State and boundary checks of an append of `nlb` blocks while appends in flight have
    /// reserved the zone up to `reserved` (the write pointer when none is in flight).
    /// Returns the offset the data lands at: `reserved`.
    pub fn check_append(&self, zone: u32, reserved: u64, nlb: u64) -> NvmeResult<u64> {
        let z = self.writable(zone)?;
        debug_assert!(reserved >= z.wp, "reservations start at the write pointer");
        if reserved < z.wp || reserved + nlb > self.capacity {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        Ok(reserved)
    }

    /// The zone, if its state takes writes.
    fn writable(&self, zone: u32) -> NvmeResult<&LogicalZone> {
        let z = self.get(zone)?;
        match z.state {
            ZoneState::Full => Err(NvmeStatus::ZoneIsFull),
            ZoneState::ReadOnly => Err(NvmeStatus::ZoneIsReadOnly),
            ZoneState::Offline => Err(NvmeStatus::ZoneIsOffline),
            _ => Ok(z),
        }
    }

    /// Takes the resources a write needs and marks the zone Implicitly Opened (unless it is
    /// open already). Call after `check_write`.
    pub fn prepare_write(&mut self, zone: u32) -> NvmeResult<()> {
        self.ensure_open_resources(zone)?;
        let z = self.get(zone)?;
        if matches!(z.state, ZoneState::Empty | ZoneState::Closed) {
            self.mark_implicitly_opened(zone);
        }
        Ok(())
    }

    /// Records that `nlb` blocks were written at the zone's write pointer.
    pub fn commit_write(&mut self, zone: u32, nlb: u64) {
        let cap = self.capacity;
        if let Some(z) = self.zones.get_mut(zone as usize) {
            z.wp += nlb;
            debug_assert!(z.wp <= cap, "write beyond the zone capacity");
            if z.wp >= cap {
                z.state = ZoneState::Full;
                z.wp = cap;
            }
        }
    }

    fn take_open_slot(&mut self) -> NvmeResult<()> {
        if self.max_open == 0 || self.open_count() < self.max_open {
            return Ok(());
        }
        let victim = self
            .zones
            .iter_mut()
            .filter(|z| z.state == ZoneState::ImplicitlyOpened)
            .min_by_key(|z| z.open_seq)
            .ok_or(NvmeStatus::TooManyOpenZones)?;
        victim.state = ZoneState::Closed;
        Ok(())
    }

    fn ensure_open_resources(&mut self, zone: u32) -> NvmeResult<()> {
        match self.get(zone)?.state {
            ZoneState::Empty => {
                if self.max_active != 0 && self.active_count() >= self.max_active {
                    return Err(NvmeStatus::TooManyActiveZones);
                }
                self.take_open_slot()
            }
            ZoneState::Closed => self.take_open_slot(),
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened => Ok(()),
            _ => Err(NvmeStatus::InvalidZoneStateTransition),
        }
    }

    fn mark_implicitly_opened(&mut self, zone: u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(z) = self.zones.get_mut(zone as usize) {
            z.state = ZoneState::ImplicitlyOpened;
            z.open_seq = seq;
        }
    }

    /// Whether Select All applies `action` to a zone in `state`.
    pub fn selected(action: ZoneAction, state: ZoneState) -> bool {
        match action {
            ZoneAction::Open => state == ZoneState::Closed,
            ZoneAction::Close => state.is_open(),
            ZoneAction::Finish => state.is_active(),
            ZoneAction::Reset => state.is_active() || state == ZoneState::Full,
            ZoneAction::Offline => state == ZoneState::ReadOnly,
        }
    }

    /// Checks `action` on `zone`; returns whether the members must be told (Finish and
    /// Reset of a zone they hold data in, Offline).
    pub fn check_action(&self, action: ZoneAction, zone: u32) -> NvmeResult<bool> {
        use ZoneState::*;
        let s = self.get(zone)?.state;
        let invalid = Err(NvmeStatus::InvalidZoneStateTransition);
        match action {
            ZoneAction::Open | ZoneAction::Close => Ok(false),
            ZoneAction::Finish => match s {
                Empty | ImplicitlyOpened | ExplicitlyOpened | Closed => Ok(true),
                Full => Ok(false),
                ReadOnly | Offline => invalid,
            },
            ZoneAction::Reset => match s {
                ImplicitlyOpened | ExplicitlyOpened | Closed | Full => Ok(true),
                Empty => Ok(false),
                ReadOnly | Offline => invalid,
            },
            ZoneAction::Offline => match s {
                ReadOnly => Ok(true),
                Offline => Ok(false),
                _ => invalid,
            },
        }
    }

    /// Applies `action` to `zone` (after the member I/O `check_action` asked for).
    pub fn apply_action(&mut self, action: ZoneAction, zone: u32) -> NvmeResult<()> {
        use ZoneState::*;
        let s = self.get(zone)?.state;
        let invalid = Err(NvmeStatus::InvalidZoneStateTransition);
        let cap = self.capacity;
        let set = |t: &mut ZoneTable, state: ZoneState, wp: Option<u64>| {
            if let Some(z) = t.zones.get_mut(zone as usize) {
                z.state = state;
                if let Some(wp) = wp {
                    z.wp = wp;
                }
            }
        };
        match action {
            ZoneAction::Open => match s {
                Empty | Closed => {
                    self.ensure_open_resources(zone)?;
                    set(self, ExplicitlyOpened, None);
                }
                ImplicitlyOpened => set(self, ExplicitlyOpened, None),
                ExplicitlyOpened => {}
                Full | ReadOnly | Offline => return invalid,
            },
            ZoneAction::Close => match s {
                ImplicitlyOpened | ExplicitlyOpened => set(self, Closed, None),
                Closed => {}
                Empty | Full | ReadOnly | Offline => return invalid,
            },
            ZoneAction::Finish => match s {
                Empty | ImplicitlyOpened | ExplicitlyOpened | Closed => set(self, Full, Some(cap)),
                Full => {}
                ReadOnly | Offline => return invalid,
            },
            ZoneAction::Reset => match s {
                ImplicitlyOpened | ExplicitlyOpened | Closed | Full => set(self, Empty, Some(0)),
                Empty => {}
                ReadOnly | Offline => return invalid,
            },
            ZoneAction::Offline => match s {
                ReadOnly | Offline => set(self, Offline, None),
                _ => return invalid,
            },
        }
        Ok(())
    }

    /// Device-side fault folded in from the members: the zone becomes Read Only or Offline.
    pub fn set_fault(&mut self, zone: u32, state: ZoneState) {
        if let Some(z) = self.zones.get_mut(zone as usize) {
            z.state = state;
        }
    }

    /// Clean restart: open zones become Closed, or Empty when nothing was written.
    pub fn restart(&mut self) {
        for z in &mut self.zones {
            if z.state.is_open() {
                z.state = if z.wp == 0 {
                    ZoneState::Empty
                } else {
                    ZoneState::Closed
                };
            }
        }
    }

    fn descriptor(&self, zone: usize, z: &LogicalZone) -> ZoneDescriptor {
        let start = zone as u64 * self.zone_size;
        let wp = match z.state {
            ZoneState::Full => start + self.capacity,
            ZoneState::Offline => start + self.zone_size,
            _ => start + z.wp,
        };
        ZoneDescriptor {
            state: z.state,
            attributes: 0,
            capacity: self.capacity,
            start,
            wp,
        }
    }

    /// Report Zones from `first`.
    pub fn report(
        &self,
        first: u32,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> ZoneReport {
        let matching = self
            .zones
            .iter()
            .enumerate()
            .skip(first as usize)
            .filter(|(_, z)| filter.matches(z.state));
        let zones: Vec<ZoneDescriptor> = matching
            .clone()
            .take(max_zones)
            .map(|(i, z)| self.descriptor(i, z))
            .collect();
        let nr_zones = if partial {
            zones.len()
        } else {
            matching.count()
        } as u64;
        ZoneReport { nr_zones, zones }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(n: usize, open: u32, active: u32) -> ZoneTable {
        let z = LogicalZone {
            state: ZoneState::Empty,
            wp: 0,
            open_seq: 0,
        };
        ZoneTable::new(vec![z; n], 64, 48, open, active)
    }

    #[test]
    fn appends_reserve_from_the_reserved_pointer_up_to_the_capacity() {
        let mut t = table(2, 0, 0);
        // Nothing in flight: the reserved pointer is the write pointer.
        assert_eq!(t.check_append(0, 0, 10), Ok(0));
        assert_eq!(t.prepare_write(0), Ok(()));
        // Appends in flight have reserved 40 of the 48 blocks; nothing is committed yet.
        assert_eq!(t.check_append(0, 40, 8), Ok(40));
        assert_eq!(t.check_append(0, 40, 9), Err(NvmeStatus::ZoneBoundaryError));
        assert_eq!(t.zone(0).map(|z| z.wp), Some(0));
        // Commits fill the zone; then it refuses as Full.
        t.commit_write(0, 40);
        t.commit_write(0, 8);
        assert_eq!(t.zone(0).map(|z| z.state), Some(ZoneState::Full));
        assert_eq!(t.check_append(0, 48, 1), Err(NvmeStatus::ZoneIsFull));
    }

    #[test]
    fn open_limit_closes_the_oldest_implicitly_opened_zone() {
        let mut t = table(4, 2, 0);
        for zone in 0..3 {
            assert_eq!(t.check_write(zone, Some(0), 1), Ok(0));
            assert_eq!(t.prepare_write(zone), Ok(()));
            t.commit_write(zone, 1);
        }
        let states: Vec<ZoneState> = (0..3).filter_map(|z| t.zone(z)).map(|z| z.state).collect();
        assert_eq!(
            states,
            [
                ZoneState::Closed,
                ZoneState::ImplicitlyOpened,
                ZoneState::ImplicitlyOpened
            ]
        );
    }

    #[test]
    fn active_limit_refuses_and_changes_nothing() {
        let mut t = table(3, 1, 1);
        assert_eq!(t.prepare_write(0), Ok(()));
        t.commit_write(0, 1);
        assert_eq!(t.prepare_write(1), Err(NvmeStatus::TooManyActiveZones));
        assert_eq!(t.zone(1).map(|z| z.state), Some(ZoneState::Empty));
    }

    #[test]
    fn writes_are_checked_against_state_wp_and_capacity() {
        let mut t = table(2, 0, 0);
        assert_eq!(
            t.check_write(0, Some(1), 1),
            Err(NvmeStatus::ZoneInvalidWrite)
        );
        assert_eq!(
            t.check_write(0, Some(0), 49),
            Err(NvmeStatus::ZoneBoundaryError)
        );
        assert_eq!(t.prepare_write(0), Ok(()));
        t.commit_write(0, 48);
        assert_eq!(t.zone(0).map(|z| z.state), Some(ZoneState::Full));
        assert_eq!(t.check_write(0, None, 1), Err(NvmeStatus::ZoneIsFull));
        assert_eq!(t.check_action(ZoneAction::Reset, 0), Ok(true));
        assert_eq!(t.apply_action(ZoneAction::Reset, 0), Ok(()));
        assert_eq!(
            t.zone(0).map(|z| (z.state, z.wp)),
            Some((ZoneState::Empty, 0))
        );
        assert_eq!(t.check_action(ZoneAction::Reset, 0), Ok(false));
    }
}
