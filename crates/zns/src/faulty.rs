//! `FaultyZoned`: a fault-injecting wrapper over any `ZonedDevice`, deterministic from a seed,
//! for the crash and fault suites of every layer (host FTL, RAIZN, ZapRAID).
//!
//! Fault model. The wrapper injects only faults a real ZNS drive shows and a layer above may
//! claim to survive:
//! - a command fails with a chosen status, either the N-th command of the selected kinds
//!   (counted from when the plan is installed, SQLite's ioerr sweep) or each such command with
//!   probability p; `ErrorTiming::Before` fails it without reaching the device (nothing
//!   changed), `ErrorTiming::After` runs it and then reports the error (the drive did the work
//!   but the completion says it failed, so a write's blocks may or may not be there: the
//!   contract of a failed write in NVMe and in every block layer);
//! - a zone becomes Read Only (readable, refuses writes and state changes) or Offline (refuses
//!   everything), as a drive retires worn zones; the change survives power cycles;
//! - power is cut: from `cut_power` on, every command, including those already submitted
//!   whose completion has not been returned, fails with Commands Aborted due to Power Loss
//!   and never reaches the device, so what the device holds is exactly what it held at the
//!   cut. Commands wait a seeded delay before reaching the device (`in_flight_delay`), so a
//!   cut finds some submitted and not yet executed, and others executed but not acknowledged.
//!   The caller then applies the device's own power loss (what its write cache loses) and
//!   calls `restore_power`.
//!
//! No fault corrupts data silently: nothing above is designed to survive that.

use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::device::ZonedDevice;
use crate::plus::{ChunkMapping, CompactionExtent};
use crate::rng::SimRng;
use crate::status::{NvmeResult, NvmeStatus};
use crate::types::{CopyRange, Geometry, Lba, ReportFilter, ZoneAction, ZoneReport, ZoneState};

/// The kinds of command a plan selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Read,
    Write,
    Append,
    WriteZeroes,
    Flush,
    Copy,
    ZoneMgmt,
    Report,
}

impl OpKind {
    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// A set of command kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpSet(u16);

impl OpSet {
    pub const ALL: OpSet = OpSet(0xff);
    pub const NONE: OpSet = OpSet(0);
    /// Commands that change zone contents: write, append, write zeroes, copy.
    pub const WRITES: OpSet = OpSet(
        OpKind::Write.bit() | OpKind::Append.bit() | OpKind::WriteZeroes.bit() | OpKind::Copy.bit(),
    );

    pub fn of(kinds: &[OpKind]) -> OpSet {
        OpSet(kinds.iter().fold(0, |acc, k| acc | k.bit()))
    }

    pub fn contains(self, kind: OpKind) -> bool {
        self.0 & kind.bit() != 0
    }
}

/// When an injected error strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorTiming {
    /// The command fails without reaching the device.
    Before,
    /// The command runs on the device, then its completion reports the error.
    After,
}

/// Which commands fail, and how. The default fails nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorPlan {
    pub seed: u64,
    /// The command kinds the plan counts and may fail.
    pub ops: OpSet,
    /// Fail the N-th selected command (1-based, counted from installation).
    pub fail_nth: Option<u64>,
    /// After the N-th, fail this many more selected commands in a row (so a layer's bounded
    /// retries of a transient error can be exhausted); 0 fails the N-th alone.
    pub repeat: u64,
    /// Fail each selected command with this probability.
    pub probability: f64,
    pub status: NvmeStatus,
    pub timing: ErrorTiming,
}

impl Default for ErrorPlan {
    fn default() -> ErrorPlan {
        ErrorPlan {
            seed: 0,
            ops: OpSet::ALL,
            fail_nth: None,
            repeat: 0,
            probability: 0.0,
            status: NvmeStatus::InternalError,
            timing: ErrorTiming::Before,
        }
    }
}

impl ErrorPlan {
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.probability) {
            return Err(format!(
                "probability {} is not within 0..=1",
                self.probability
            ));
        }
        if self.fail_nth == Some(0) {
            return Err("fail_nth counts from 1".into());
        }
        Ok(())
    }
}

/// What the wrapper did, so a suite can assert its coverage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounters {
    /// Commands seen, of any kind.
    pub commands: u64,
    /// Errors injected by the plan.
    pub errors_injected: u64,
    /// Commands refused because of a zone fault.
    pub zone_fault_refusals: u64,
    /// Commands aborted by a power cut (submitted before it or after it).
    pub aborted_by_cut: u64,
    /// Power cuts that found commands submitted and not yet completed.
    pub cuts_with_io_in_flight: u64,
    pub cuts: u64,
}

struct State {
    plan: ErrorPlan,
    rng: SimRng,
    /// Selected commands counted since the plan was installed.
    counted: u64,
    /// Zones faulted to Read Only or Offline.
    zone_faults: std::collections::BTreeMap<u32, (ZoneState, Lba)>,
    powered: bool,
    /// Power cuts so far; a command that started in one power epoch never completes in another.
    epoch: u64,
    in_flight: u64,
    delay_max: Duration,
    delay_rng: SimRng,
    counters: FaultCounters,
}

/// A fault-injecting `ZonedDevice` over `D`.
pub struct FaultyZoned<D> {
    inner: D,
    geometry: Geometry,
    st: Mutex<State>,
}

/// A command admitted and not yet ended; dropping it (completion, or the caller giving the
/// command up) takes it out of the in-flight count of its power epoch.
struct InFlight<'a> {
    st: &'a Mutex<State>,
    epoch: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut st = self.st.lock();
        // A cut already emptied the count of an older epoch.
        if st.epoch == self.epoch {
            st.in_flight = st.in_flight.saturating_sub(1);
        }
    }
}

/// The verdict on one command before it reaches the device.
enum Pass {
    Go {
        epoch: u64,
        after: Option<NvmeStatus>,
    },
    Fail(NvmeStatus),
}

impl<D: ZonedDevice> FaultyZoned<D> {
    pub fn new(inner: D, seed: u64) -> FaultyZoned<D> {
        let geometry = inner.geometry();
        FaultyZoned {
            inner,
            geometry,
            st: Mutex::new(State {
                plan: ErrorPlan::default(),
                rng: SimRng::new(seed),
                counted: 0,
                zone_faults: Default::default(),
                powered: true,
                epoch: 0,
                in_flight: 0,
                delay_max: Duration::ZERO,
                delay_rng: SimRng::new(seed ^ 0x5eed_de1a_u64),
                counters: FaultCounters::default(),
            }),
        }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Installs an error plan; its command count starts at zero.
    pub fn set_errors(&self, plan: ErrorPlan) -> Result<(), String> {
        plan.validate()?;
        let mut st = self.st.lock();
        st.rng = SimRng::new(plan.seed);
        st.plan = plan;
        st.counted = 0;
        Ok(())
    }

    /// Stops injecting errors.
    pub fn clear_errors(&self) {
        self.st.lock().plan = ErrorPlan::default();
    }

    /// Every command waits up to `max` (seeded, uniform, in whole milliseconds; tokio time,
    /// exact under a paused clock) before it reaches the device, so a power cut finds commands
    /// in flight.
    pub fn set_in_flight_delay(&self, max: Duration) {
        self.st.lock().delay_max = max;
    }

    /// Moves `zone` to Read Only or Offline. A Read Only zone may go Offline later; nothing
    /// brings either back, as on a drive. An active zone is finished on the device first, so
    /// it stops counting against the open and active limits (a faulted zone is neither); its
    /// write pointer as it was is what reports show.
    pub async fn fault_zone(&self, zone: u32, state: ZoneState) -> Result<(), String> {
        if zone >= self.geometry.zone_count {
            return Err(format!("zone {zone} does not exist"));
        }
        if !matches!(state, ZoneState::ReadOnly | ZoneState::Offline) {
            return Err(format!(
                "a zone can be faulted to Read Only or Offline, not {}",
                state.name()
            ));
        }
        match self.st.lock().zone_faults.get(&zone) {
            Some((ZoneState::Offline, _)) if state == ZoneState::ReadOnly => {
                return Err(format!(
                    "zone {zone} is Offline and cannot become Read Only"
                ));
            }
            Some((_, wp)) => {
                let wp = *wp;
                self.st.lock().zone_faults.insert(zone, (state, wp));
                return Ok(());
            }
            None => {}
        }
        let start = self.geometry.zone_start(zone);
        let report = self
            .inner
            .report_zones(start, ReportFilter::All, true, 1)
            .await
            .map_err(|e| format!("report of zone {zone}: {e}"))?;
        let d = report
            .zones
            .first()
            .ok_or_else(|| format!("the device reported nothing for zone {zone}"))?;
        if d.state.is_active() {
            self.inner
                .zone_mgmt(ZoneAction::Finish, start, false)
                .await
                .map_err(|e| format!("finishing zone {zone}: {e}"))?;
        }
        self.st.lock().zone_faults.insert(zone, (state, d.wp));
        Ok(())
    }

    /// The zones faulted so far, with their state and write pointer, to carry over to a new
    /// wrapper around a restarted device.
    pub fn zone_faults(&self) -> Vec<(u32, ZoneState, Lba)> {
        let st = self.st.lock();
        st.zone_faults
            .iter()
            .map(|(z, (s, wp))| (*z, *s, *wp))
            .collect()
    }

    /// Carries over zone faults from an earlier wrapper (see `zone_faults`).
    pub fn with_zone_faults(self, faults: &[(u32, ZoneState, Lba)]) -> FaultyZoned<D> {
        {
            let mut st = self.st.lock();
            for (z, s, wp) in faults {
                st.zone_faults.insert(*z, (*s, *wp));
            }
        }
        self
    }

    /// The wrapped device, for a restart; keep `zone_faults()` first.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// Cuts power: every command not yet completed, and every later one, fails with Commands
    /// Aborted due to Power Loss without reaching the device. Returns how many commands were
    /// in flight.
    pub fn cut_power(&self) -> u64 {
        let mut st = self.st.lock();
        st.powered = false;
        st.epoch += 1;
        st.counters.cuts += 1;
        if st.in_flight > 0 {
            st.counters.cuts_with_io_in_flight += 1;
        }
        // Commands of the old power epoch complete as aborted and are not counted again.
        std::mem::take(&mut st.in_flight)
    }

    /// Power is back: commands reach the device again (apply the device's own power loss
    /// first).
    pub fn restore_power(&self) {
        self.st.lock().powered = true;
    }

    pub fn counters(&self) -> FaultCounters {
        self.st.lock().counters
    }

    fn zone_of(&self, lba: Lba) -> u32 {
        (lba / self.geometry.zone_size.max(1)) as u32
    }

    /// Decides a command's fate at submission.
    fn admit(&self, kind: OpKind) -> Pass {
        let mut st = self.st.lock();
        st.counters.commands += 1;
        if !st.powered {
            st.counters.aborted_by_cut += 1;
            return Pass::Fail(NvmeStatus::AbortedPowerLoss);
        }
        let mut inject = false;
        if st.plan.ops.contains(kind) {
            st.counted += 1;
            if let Some(n) = st.plan.fail_nth {
                inject = st.counted >= n && st.counted <= n + st.plan.repeat;
            }
            if st.plan.probability > 0.0 {
                let p = st.plan.probability;
                inject |= st.rng.chance(p);
            }
        }
        if inject {
            st.counters.errors_injected += 1;
            let status = st.plan.status;
            if st.plan.timing == ErrorTiming::Before {
                return Pass::Fail(status);
            }
            st.in_flight += 1;
            return Pass::Go {
                epoch: st.epoch,
                after: Some(status),
            };
        }
        st.in_flight += 1;
        Pass::Go {
            epoch: st.epoch,
            after: None,
        }
    }

    /// Waits the seeded in-flight delay; false if power was cut meanwhile.
    async fn reach_device(&self, epoch: u64) -> bool {
        // Whole milliseconds: tokio's timer counts them, and a finer delay would be rounded
        // from an origin that differs between processes, so a seed would not repeat its
        // interleaving.
        let delay_ms = {
            let mut st = self.st.lock();
            let max = st.delay_max.as_millis() as u64;
            if max == 0 {
                0
            } else {
                st.delay_rng.below(max + 1)
            }
        };
        if delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
        self.st.lock().epoch == epoch
    }

    /// Ends a command: its result, unless power was cut since it started.
    fn complete<T>(
        &self,
        epoch: u64,
        after: Option<NvmeStatus>,
        r: NvmeResult<T>,
    ) -> NvmeResult<T> {
        let mut st = self.st.lock();
        if st.epoch != epoch {
            st.counters.aborted_by_cut += 1;
            return Err(NvmeStatus::AbortedPowerLoss);
        }
        match after {
            Some(status) => Err(status),
            None => r,
        }
    }

    /// Runs `f` on the inner device under the fault plan, power state and in-flight delay.
    async fn run<T, F, Fut>(&self, kind: OpKind, zone_check: NvmeResult<()>, f: F) -> NvmeResult<T>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = NvmeResult<T>>,
    {
        let (epoch, after) = match self.admit(kind) {
            Pass::Fail(s) => return Err(s),
            Pass::Go { epoch, after } => (epoch, after),
        };
        // Counted in flight until it completes or its caller drops it.
        let _in_flight = InFlight {
            st: &self.st,
            epoch,
        };
        if !self.reach_device(epoch).await {
            return self.complete(epoch, None, Err(NvmeStatus::AbortedPowerLoss));
        }
        if let Err(s) = zone_check {
            self.st.lock().counters.zone_fault_refusals += 1;
            return self.complete(epoch, None, Err(s));
        }
        let r = f().await;
        self.complete(epoch, after, r)
    }

    fn fault_of(&self, zone: u32) -> Option<ZoneState> {
        self.st.lock().zone_faults.get(&zone).map(|(s, _)| *s)
    }

    /// Reads touching an Offline zone fail.
    fn check_read(&self, lba: Lba, blocks: u64) -> NvmeResult<()> {
        if blocks == 0 {
            return Ok(());
        }
        // A range past the namespace is the device's to refuse.
        let Some(end) = lba.checked_add(blocks - 1) else {
            return Ok(());
        };
        let (first, last) = (self.zone_of(lba), self.zone_of(end));
        let st = self.st.lock();
        let offline = st
            .zone_faults
            .range(first..=last)
            .any(|(_, (s, _))| *s == ZoneState::Offline);
        if offline {
            Err(NvmeStatus::ZoneIsOffline)
        } else {
            Ok(())
        }
    }

    /// Writes into a faulted zone fail with its status.
    fn check_write(&self, lba: Lba) -> NvmeResult<()> {
        match self.fault_of(self.zone_of(lba)) {
            Some(ZoneState::ReadOnly) => Err(NvmeStatus::ZoneIsReadOnly),
            Some(_) => Err(NvmeStatus::ZoneIsOffline),
            None => Ok(()),
        }
    }

    fn blocks(&self, bytes: usize) -> u64 {
        bytes as u64 / u64::from(self.geometry.block_size.max(1))
    }

    /// Select All applied zone by zone, so faulted zones keep their state.
    async fn mgmt_all(&self, action: ZoneAction) -> NvmeResult<()> {
        if self.st.lock().zone_faults.is_empty() {
            return self.inner.zone_mgmt(action, 0, true).await;
        }
        let report = self
            .inner
            .report_zones(0, ReportFilter::All, false, usize::MAX)
            .await?;
        for (z, d) in report.zones.iter().enumerate() {
            if self.fault_of(z as u32).is_some() {
                continue;
            }
            let selected = match action {
                ZoneAction::Open => d.state == ZoneState::Closed,
                ZoneAction::Close => d.state.is_open(),
                ZoneAction::Finish => d.state.is_open() || d.state == ZoneState::Closed,
                ZoneAction::Reset => d.state.is_active() || d.state == ZoneState::Full,
                ZoneAction::Offline => d.state == ZoneState::ReadOnly,
            };
            if selected {
                self.inner.zone_mgmt(action, d.start, false).await?;
            }
        }
        if action == ZoneAction::Offline {
            let mut st = self.st.lock();
            for (s, _) in st.zone_faults.values_mut() {
                *s = ZoneState::Offline;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl<D: ZonedDevice> ZonedDevice for FaultyZoned<D> {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    async fn read(&self, lba: Lba, buf: &mut [u8], meta: Option<&mut [u8]>) -> NvmeResult<()> {
        let check = self.check_read(lba, self.blocks(buf.len()));
        self.run(OpKind::Read, check, || self.inner.read(lba, buf, meta))
            .await
    }

    async fn write(&self, lba: Lba, data: &[u8], meta: Option<&[u8]>, fua: bool) -> NvmeResult<()> {
        let check = self.check_write(lba);
        self.run(OpKind::Write, check, || {
            self.inner.write(lba, data, meta, fua)
        })
        .await
    }

    async fn append(
        &self,
        zslba: Lba,
        data: &[u8],
        meta: Option<&[u8]>,
        fua: bool,
    ) -> NvmeResult<Lba> {
        let check = self.check_write(zslba);
        self.run(OpKind::Append, check, || {
            self.inner.append(zslba, data, meta, fua)
        })
        .await
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> NvmeResult<()> {
        let check = self.check_write(lba);
        self.run(OpKind::WriteZeroes, check, || {
            self.inner.write_zeroes(lba, blocks, fua)
        })
        .await
    }

    async fn flush(&self) -> NvmeResult<()> {
        self.run(OpKind::Flush, Ok(()), || self.inner.flush()).await
    }

    async fn copy(&self, sources: &[CopyRange], dest: Lba, fua: bool) -> NvmeResult<()> {
        let check = sources
            .iter()
            .try_for_each(|r| self.check_read(r.lba, r.blocks))
            .and_then(|()| self.check_write(dest));
        self.run(OpKind::Copy, check, || self.inner.copy(sources, dest, fua))
            .await
    }

    fn die_stripe(&self) -> Option<crate::types::DieStripe> {
        self.inner.die_stripe()
    }

    fn identify_mapping(&self) -> Option<ChunkMapping> {
        self.inner.identify_mapping()
    }

    /// Counted and faulted as a Copy: it is one, with its destinations spread out.
    async fn zone_compaction(&self, extents: &[CompactionExtent]) -> NvmeResult<()> {
        let check = extents.iter().try_for_each(|e| {
            self.check_read(e.src, e.blocks)
                .and_then(|()| self.check_write(e.dst))
        });
        self.run(OpKind::Copy, check, || self.inner.zone_compaction(extents))
            .await
    }

    /// Counted and faulted as a zone management command, which it is (an Open with a bitmap).
    async fn tl_open(&self, zslba: Lba, valid: &[u8]) -> NvmeResult<()> {
        let check = match self.fault_of(self.zone_of(zslba)) {
            Some(_) => Err(NvmeStatus::InvalidZoneStateTransition),
            None => Ok(()),
        };
        self.run(OpKind::ZoneMgmt, check, || self.inner.tl_open(zslba, valid))
            .await
    }

    async fn zone_mgmt(&self, action: ZoneAction, zslba: Lba, select_all: bool) -> NvmeResult<()> {
        if select_all {
            return self
                .run(OpKind::ZoneMgmt, Ok(()), || self.mgmt_all(action))
                .await;
        }
        let zone = self.zone_of(zslba);
        let check = match (self.fault_of(zone), action) {
            (None, _) => Ok(()),
            // Offline is the one transition a Read Only zone takes.
            (Some(ZoneState::ReadOnly), ZoneAction::Offline) => {
                let r = self
                    .run(OpKind::ZoneMgmt, Ok(()), || async { Ok(()) })
                    .await;
                if r.is_ok() {
                    if let Some((s, _)) = self.st.lock().zone_faults.get_mut(&zone) {
                        *s = ZoneState::Offline;
                    }
                }
                return r;
            }
            (Some(_), _) => Err(NvmeStatus::InvalidZoneStateTransition),
        };
        self.run(OpKind::ZoneMgmt, check, || {
            self.inner.zone_mgmt(action, zslba, false)
        })
        .await
    }

    async fn report_zones(
        &self,
        lba: Lba,
        filter: ReportFilter,
        partial: bool,
        max_zones: usize,
    ) -> NvmeResult<ZoneReport> {
        let report = self
            .run(OpKind::Report, Ok(()), || {
                self.inner
                    .report_zones(lba, ReportFilter::All, false, usize::MAX)
            })
            .await?;
        let faults = self.st.lock().zone_faults.clone();
        let mut zones: Vec<_> = report
            .zones
            .into_iter()
            .map(|mut d| {
                match faults.get(&self.zone_of(d.start)) {
                    Some((ZoneState::ReadOnly, wp)) => {
                        d.state = ZoneState::ReadOnly;
                        d.wp = *wp;
                    }
                    Some(_) => {
                        d.state = ZoneState::Offline;
                        d.wp = d.start + self.geometry.zone_size;
                    }
                    None => {}
                }
                d
            })
            .filter(|d| filter.matches(d.state))
            .collect();
        let matching = zones.len() as u64;
        zones.truncate(max_zones);
        Ok(ZoneReport {
            nr_zones: if partial {
                zones.len() as u64
            } else {
                matching
            },
            zones,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelDevice;

    fn geo() -> Geometry {
        Geometry {
            block_size: 512,
            oob_size: 0,
            zone_count: 4,
            zone_size: 16,
            zone_capacity: 16,
            max_open: 0,
            max_active: 0,
            zasl_blocks: 8,
            mdts_blocks: 8,
            copy_max_ranges: 4,
            copy_max_range_blocks: 8,
            copy_max_blocks: 8,
            cross_zone_reads: false,
        }
    }

    fn dev() -> FaultyZoned<ModelDevice> {
        FaultyZoned::new(ModelDevice::new(geo()).expect("model"), 7)
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime")
    }

    async fn wp(d: &FaultyZoned<ModelDevice>, zone: u32) -> (ZoneState, Lba) {
        let r = d
            .report_zones(geo().zone_start(zone), ReportFilter::All, true, 1)
            .await
            .expect("report");
        (r.zones[0].state, r.zones[0].wp - r.zones[0].start)
    }

    #[test]
    fn the_nth_selected_command_fails_before_or_after_it_runs() {
        rt().block_on(async {
            let d = dev();
            let block = [1u8; 512];
            d.set_errors(ErrorPlan {
                ops: OpSet::WRITES,
                fail_nth: Some(2),
                repeat: 1,
                ..ErrorPlan::default()
            })
            .expect("plan");
            // Reads are not selected and do not count.
            let mut buf = [0u8; 512];
            d.read(0, &mut buf, None).await.expect("read");
            d.write(0, &block, None, false).await.expect("1st write");
            // The 2nd and 3rd fail without reaching the device.
            assert_eq!(
                d.write(1, &block, None, false).await,
                Err(NvmeStatus::InternalError)
            );
            assert_eq!(
                d.write(1, &block, None, false).await,
                Err(NvmeStatus::InternalError)
            );
            assert_eq!(wp(&d, 0).await.1, 1);
            d.write(1, &block, None, false).await.expect("4th write");
            d.set_errors(ErrorPlan {
                ops: OpSet::of(&[OpKind::Append]),
                fail_nth: Some(1),
                timing: ErrorTiming::After,
                status: NvmeStatus::NamespaceNotReady,
                ..ErrorPlan::default()
            })
            .expect("plan");
            // After: the device did the append, the completion says it failed.
            assert_eq!(
                d.append(0, &block, None, false).await,
                Err(NvmeStatus::NamespaceNotReady)
            );
            assert_eq!(wp(&d, 0).await.1, 3);
            let c = d.counters();
            assert_eq!(c.errors_injected, 3);
        });
    }

    #[test]
    fn probability_faults_repeat_from_the_seed() {
        let run = || {
            rt().block_on(async {
                let d = dev();
                d.set_errors(ErrorPlan {
                    seed: 99,
                    ops: OpSet::of(&[OpKind::Read]),
                    probability: 0.3,
                    ..ErrorPlan::default()
                })
                .expect("plan");
                let mut buf = [0u8; 512];
                let mut failed = Vec::new();
                for _ in 0..100 {
                    failed.push(u8::from(d.read(0, &mut buf, None).await.is_err()));
                }
                failed
            })
        };
        let a = run();
        assert_eq!(a, run());
        let n = a.iter().filter(|f| **f == 1).count();
        assert!((15..=45).contains(&n), "{n} of 100 failed at p = 0.3");
    }

    #[test]
    fn read_only_and_offline_zones_refuse_what_a_drive_refuses() {
        rt().block_on(async {
            let d = dev();
            let block = [3u8; 512];
            d.write(16, &block, None, false).await.expect("write");
            d.fault_zone(1, ZoneState::ReadOnly).await.expect("fault");
            assert_eq!(wp(&d, 1).await, (ZoneState::ReadOnly, 1));
            let mut buf = [0u8; 512];
            d.read(16, &mut buf, None)
                .await
                .expect("read only zones read");
            assert_eq!(buf, block);
            assert_eq!(
                d.write(17, &block, None, false).await,
                Err(NvmeStatus::ZoneIsReadOnly)
            );
            assert_eq!(
                d.zone_mgmt(ZoneAction::Reset, 16, false).await,
                Err(NvmeStatus::InvalidZoneStateTransition)
            );
            // The device finished the zone underneath: it holds no open resource.
            assert_eq!(d.inner().with_model(|m| m.open_count()), 0);
            // Offline is the one way on; reads fail then, and the report says so.
            d.zone_mgmt(ZoneAction::Offline, 16, false)
                .await
                .expect("offline");
            assert_eq!(wp(&d, 1).await, (ZoneState::Offline, 16));
            assert_eq!(
                d.read(16, &mut buf, None).await,
                Err(NvmeStatus::ZoneIsOffline)
            );
            assert!(d.fault_zone(1, ZoneState::ReadOnly).await.is_err());
            let offline = d
                .report_zones(0, ReportFilter::State(ZoneState::Offline), false, 8)
                .await
                .expect("report");
            assert_eq!(offline.nr_zones, 1);
            // Select All leaves faulted zones alone.
            d.write(0, &block, None, false).await.expect("write");
            d.zone_mgmt(ZoneAction::Reset, 0, true)
                .await
                .expect("reset all");
            assert_eq!(wp(&d, 0).await, (ZoneState::Empty, 0));
            assert_eq!(wp(&d, 1).await.0, ZoneState::Offline);
            assert!(d.counters().zone_fault_refusals >= 3);
        });
    }

    #[test]
    fn a_power_cut_aborts_commands_in_flight_before_they_reach_the_device() {
        rt().block_on(async {
            let d = std::sync::Arc::new(dev());
            // Tokio's timer counts whole milliseconds.
            d.set_in_flight_delay(Duration::from_millis(10));
            let block = [5u8; 512];
            let writer = {
                let d = std::sync::Arc::clone(&d);
                tokio::spawn(async move {
                    let mut results = Vec::new();
                    for i in 0..8u64 {
                        results.push(d.write(i, &block, None, false).await);
                    }
                    results
                })
            };
            tokio::time::sleep(Duration::from_millis(25)).await;
            assert!(d.cut_power() > 0, "a command was in flight");
            let results = writer.await.expect("writer");
            // With power off the wrapper answers nothing; the device underneath tells.
            assert_eq!(
                d.report_zones(0, ReportFilter::All, true, 1).await,
                Err(NvmeStatus::AbortedPowerLoss)
            );
            let inner = d
                .inner()
                .report_zones(0, ReportFilter::All, true, 1)
                .await
                .expect("report");
            let landed = (inner.zones[0].state, inner.zones[0].wp);
            assert!(landed.1 >= 1 && landed.1 < 8, "{landed:?}");
            // Everything after the cut was aborted and the device saw none of it.
            let aborted = results.iter().filter(|r| r.is_err()).count() as u64;
            assert_eq!(aborted + landed.1, 8);
            assert!(results
                .iter()
                .all(|r| r.is_ok() || *r == Err(NvmeStatus::AbortedPowerLoss)));
            d.restore_power();
            d.write(landed.1, &block, None, false)
                .await
                .expect("write after power is back");
            assert_eq!(d.counters().cuts_with_io_in_flight, 1);
        });
    }
}
