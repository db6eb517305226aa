//! Zone Append at queue depth: many appends in flight on one logical zone, each reserved
//! under the zone's lock, its member writes ordered per member zone, and committed in
//! reservation order (docs/DESIGN.md, "Zone Append at queue depth").
//!
//! Fault model: as the write path's. A member failing while appends are in flight degrades
//! the array and the appends go on without it. An append that fails (any other error, the
//! array failing) or whose future is dropped breaks the zone's pipeline: it and every append
//! reserved after it fail, because their blocks lie beyond a hole the logical write pointer
//! cannot cross. Once the pipeline has drained, the next command of the zone drops the stripe
//! buffer and reserves from the committed write pointer again.
//!
//! Lock order: the zone's `ZoneIo` lock (reservation only, never held by an append once it
//! holds a ticket), then the `State` lock, then the zone's `Pipe` lock, a leaf never held
//! across an await. An append waits only for tickets taken before its own (per member zone,
//! then for the commit), so the waits cannot form a cycle.

use parking_lot::Mutex;
use tokio::sync::{oneshot, MutexGuard, Notify};
use zns::{NvmeResult, NvmeStatus};

use super::io::MemberRun;
use super::pplog::PpRecord;
use super::{RaiznVolume, ZoneIo};

/// The append pipeline of one logical zone.
pub(super) struct ZonePipe {
    pipe: Mutex<Pipe>,
    /// Woken whenever the last append in flight leaves.
    drained: Notify,
}

/// What the appends in flight on a zone share.
struct Pipe {
    /// The end of the last reserved append; meaningful while `in_flight > 0`.
    reserved: u64,
    in_flight: u32,
    /// The status of the first append of this pipeline that failed.
    broken: Option<NvmeStatus>,
    /// Per member: completes when the last ticket holder of that member zone has written.
    member_tail: Vec<Option<oneshot::Receiver<()>>>,
    /// Completes when the last ticket holder has committed (or failed).
    commit_tail: Option<oneshot::Receiver<()>>,
    stats: AppendStats,
}

/// Counters of the append pipelines, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppendStats {
    /// Appends that reserved a range.
    pub appends: u64,
    /// Appends that reserved while another append was in flight on their zone.
    pub overlapped: u64,
    /// The most appends in flight on one zone at once.
    pub depth_max: u32,
    /// Appends that failed because an earlier one of their pipeline did.
    pub failed_behind: u64,
}

impl AppendStats {
    fn add(&mut self, o: &AppendStats) {
        self.appends += o.appends;
        self.overlapped += o.overlapped;
        self.depth_max = self.depth_max.max(o.depth_max);
        self.failed_behind += o.failed_behind;
    }
}

impl ZonePipe {
    pub(super) fn new(members: usize) -> ZonePipe {
        ZonePipe {
            pipe: Mutex::new(Pipe {
                reserved: 0,
                in_flight: 0,
                broken: None,
                member_tail: (0..members).map(|_| None).collect(),
                commit_tail: None,
                stats: AppendStats::default(),
            }),
            drained: Notify::new(),
        }
    }

    fn stats(&self) -> AppendStats {
        self.pipe.lock().stats
    }

    /// Waits until no append is in flight, or (`only_broken`) until the pipeline is not
    /// broken with appends still in flight; the caller holds the zone's lock, so no append
    /// can join meanwhile.
    async fn wait_drained(&self, only_broken: bool) {
        loop {
            // Created before the check: `notify_waiters` wakes it even before its first poll.
            let woken = self.drained.notified();
            {
                let p = self.pipe.lock();
                if p.in_flight == 0 || (only_broken && p.broken.is_none()) {
                    return;
                }
            }
            woken.await;
        }
    }

    /// With no append in flight: forgets a broken pipeline (its reserved data never
    /// committed, so the stripe buffer holding it is dropped) and restarts the reserved
    /// pointer at the committed write pointer `wp`.
    fn restart_if_idle(&self, wp: u64, zio: &mut ZoneIo) {
        let mut p = self.pipe.lock();
        if p.in_flight == 0 {
            p.reserved = wp;
            if p.broken.take().is_some() {
                zio.buffer = None;
            }
        }
    }
}

/// The ordering of one append's member writes: its turn on each member zone it writes to.
pub(super) struct MemberTurns {
    wait: Vec<Mutex<Option<oneshot::Receiver<()>>>>,
    done: Vec<Mutex<Option<oneshot::Sender<()>>>>,
}

impl MemberTurns {
    /// Waits until the previous append writing to member `m`'s zone has written there (or
    /// left: a dropped predecessor leaves the member zone's write pointer to tell).
    pub(super) async fn wait(&self, m: usize) {
        let rx = self.wait.get(m).and_then(|w| w.lock().take());
        if let Some(rx) = rx {
            // An error only says the predecessor is gone; either way it will not write.
            let _gone = rx.await;
        }
    }

    /// Lets the next append write to member `m`'s zone.
    pub(super) fn done(&self, m: usize) {
        if let Some(d) = self.done.get(m) {
            d.lock().take();
        }
    }
}

/// An append once reserved: its ticket, offset, member runs and partial-parity records
/// (none when it ends on a stripe boundary).
struct Reserved<'a> {
    ticket: Ticket<'a>,
    off: u64,
    runs: Vec<MemberRun>,
    pp: Vec<PpRecord>,
}

/// One append's place in its zone's pipeline, from reservation to commit. Dropped without
/// `finish` (a failure, or the append's future dropped), it breaks the pipeline.
pub(super) struct Ticket<'a> {
    zp: &'a ZonePipe,
    pub(super) turns: MemberTurns,
    commit_wait: Option<oneshot::Receiver<()>>,
    /// Dropped (after `Drop` has run) to let the next append commit.
    _commit_done: Option<oneshot::Sender<()>>,
    failure: Option<NvmeStatus>,
    finished: bool,
}

impl Ticket<'_> {
    /// Waits for the previous append's commit; returns the status of the first failed
    /// append of the pipeline, if one failed.
    pub(super) async fn wait_commit(&mut self) -> NvmeResult<()> {
        if let Some(rx) = self.commit_wait.take() {
            // A dropped predecessor marks the pipeline broken before it lets go.
            let _gone = rx.await;
        }
        let mut p = self.zp.pipe.lock();
        match p.broken {
            Some(status) => {
                p.stats.failed_behind += 1;
                Err(status)
            }
            None => Ok(()),
        }
    }

    /// This append failed with `status`: it and the appends after it will fail.
    pub(super) fn fail(mut self, status: NvmeStatus) {
        self.failure = Some(status);
    }

    /// This append committed.
    pub(super) fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut p = self.zp.pipe.lock();
        if !self.finished {
            // A dropped append says nothing about why; Internal Error stands for it.
            let status = self.failure.unwrap_or(NvmeStatus::InternalError);
            p.broken.get_or_insert(status);
        }
        p.in_flight = p.in_flight.saturating_sub(1);
        if p.in_flight == 0 {
            self.zp.drained.notify_waiters();
        }
    }
}

impl RaiznVolume {
    /// What the append pipelines of every zone did since open.
    pub fn append_stats(&self) -> AppendStats {
        let mut all = AppendStats::default();
        for zp in &self.pipes {
            all.add(&zp.stats());
        }
        all
    }

    fn pipe_of(&self, zone: u32) -> NvmeResult<&ZonePipe> {
        self.pipes
            .get(zone as usize)
            .ok_or(NvmeStatus::LbaOutOfRange)
    }

    /// The zone's lock for a command that needs the zone as the serial path leaves it (a
    /// write, Copy, zone action, rebuild step): taken, then held until no append is in
    /// flight, with a broken pipeline forgotten.
    pub(super) async fn lock_settled(&self, zone: u32) -> NvmeResult<MutexGuard<'_, ZoneIo>> {
        let mut zio = self.zone_lock(zone)?.lock().await;
        let zp = self.pipe_of(zone)?;
        zp.wait_drained(false).await;
        let wp = self.committed_wp(zone)?;
        zp.restart_if_idle(wp, &mut zio);
        Ok(zio)
    }

    fn committed_wp(&self, zone: u32) -> NvmeResult<u64> {
        let st = self.state.lock();
        let z = st.table.zone(zone).ok_or(NvmeStatus::LbaOutOfRange)?;
        Ok(z.wp)
    }

    /// An append of `nlb` blocks to `zone` (validated by the caller): reserved, built and
    /// ticketed under the zone's lock, then written and committed with others in flight.
    /// Returns the offset it landed at.
    pub(super) async fn zoned_append(
        &self,
        zone: u32,
        nlb: u64,
        data: &[u8],
        meta: &[u8],
        fua: bool,
    ) -> NvmeResult<u64> {
        let Reserved {
            mut ticket,
            off,
            runs,
            pp,
        } = self.reserve(zone, nlb, data, meta).await?;
        let sent = self.send_runs(zone, runs, Some(&ticket.turns)).await;
        let committed = async {
            ticket.wait_commit().await?;
            sent?;
            self.log_partial_parity(pp).await?;
            if !fua {
                // A failure met by this append is recorded before it completes.
                self.persist_health().await?;
            }
            self.state.lock().table.commit_write(zone, nlb);
            Ok(())
        }
        .await;
        match committed {
            Ok(()) => ticket.finish(),
            Err(status) => {
                ticket.fail(status);
                return Err(status);
            }
        }
        if fua {
            // Every earlier append of the zone has committed: their blocks and records are
            // written (their member writes completed), and this flush of the members
            // holding any of them not known durable makes them durable with this one's.
            self.flush_zone(zone).await?;
        }
        Ok(off)
    }

    /// Reserves `nlb` blocks at the zone's reserved pointer under the zone's lock, fills the
    /// stripe buffer, builds the member runs and the partial-parity record as the serial
    /// path would at that offset, and takes the append's ticket.
    async fn reserve(
        &self,
        zone: u32,
        nlb: u64,
        data: &[u8],
        meta: &[u8],
    ) -> NvmeResult<Reserved<'_>> {
        let zp = self.pipe_of(zone)?;
        let mut zio = self.zone_lock(zone)?.lock().await;
        zp.wait_drained(true).await;
        if zio.buffer.is_none() {
            // The buffer is reloaded from the members, which must then hold everything
            // reserved (normally it is there: a buffer is dropped only when its zone is full,
            // by a zone action, which drains, or by an append that failed to reserve).
            zp.wait_drained(false).await;
        }
        let wp = self.committed_wp(zone)?;
        zp.restart_if_idle(wp, &mut zio);
        let off = {
            let mut st = self.state.lock();
            let reserved = zp.pipe.lock().reserved;
            let off = st.table.check_append(zone, reserved, nlb)?;
            st.table.prepare_write(zone)?;
            off
        };
        let end = off + nlb;
        let built = async {
            let runs = self
                .build_runs(zone, &mut zio, off, nlb, data, meta)
                .await?;
            let pp = if end.is_multiple_of(self.layout.stripe_data_blocks()) {
                Vec::new()
            } else {
                self.partial_parity_of(zone, &zio, end)?
            };
            Ok((runs, pp))
        }
        .await;
        // The buffer may hold data of this append, which is not going to be written.
        let (runs, pp) = built.inspect_err(|_: &NvmeStatus| zio.buffer = None)?;
        let writes: Vec<bool> = runs.iter().map(|r| r.start.is_some()).collect();
        Ok(Reserved {
            ticket: self.take_ticket(zp, end, &writes),
            off,
            runs,
            pp,
        })
    }

    /// Takes the next ticket of `zp` for an append ending at `end` that writes to the
    /// members marked in `writes`. Called with the zone's lock held, in reservation order.
    fn take_ticket<'a>(&self, zp: &'a ZonePipe, end: u64, writes: &[bool]) -> Ticket<'a> {
        let mut p = zp.pipe.lock();
        p.reserved = end;
        p.stats.appends += 1;
        if p.in_flight > 0 {
            p.stats.overlapped += 1;
        }
        p.in_flight += 1;
        p.stats.depth_max = p.stats.depth_max.max(p.in_flight);
        let mut wait = Vec::with_capacity(writes.len());
        let mut done = Vec::with_capacity(writes.len());
        for (m, &w) in writes.iter().enumerate() {
            if !w {
                wait.push(Mutex::new(None));
                done.push(Mutex::new(None));
                continue;
            }
            let (tx, rx) = oneshot::channel();
            let prev = p.member_tail.get_mut(m).and_then(|t| t.replace(rx));
            wait.push(Mutex::new(prev));
            done.push(Mutex::new(Some(tx)));
        }
        let (tx, rx) = oneshot::channel();
        let commit_wait = p.commit_tail.replace(rx);
        Ticket {
            zp,
            turns: MemberTurns { wait, done },
            commit_wait,
            _commit_done: Some(tx),
            failure: None,
            finished: false,
        }
    }
}
