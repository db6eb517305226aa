//! `Maintenance`: garbage collection and checkpoints, run by one maintenance task per mounted
//! volume; flush; and the decision to fail the volume when maintenance cannot go on.
//!
//! Fault model: power can fail at any point of a collection. Copies keep their original
//! sequence numbers and are flushed before the victim zone is reset, so at every instant
//! each live block has a durable copy that recovery will find (docs/DESIGN.md). A victim the
//! device retired is not reused: a reset refused because the zone went Read Only or Offline
//! retires it, and a victim that went Offline mid-collection keeps its remaining entries as
//! lost data. Any other error, and a panic, fails the volume with its cause.
//!
//! Locks: the checkpoint lock, then the map lock (shared.rs has the volume's whole lock
//! order). Collection writes only through the `StreamWriter`, one slot at a time, and holds
//! no slot while it flushes or waits for readers.

mod tl;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use zns::{NvmeStatus, ZoneAction};

use crate::activity::Gauge;
use crate::checkpoint;
use crate::io::StreamWriter;
use crate::map::{CkptKind, Stream};
use crate::plan::{FlushPlan, Round, SpacePolicy, ROUND_VICTIMS_MAX};
use crate::retry::retry;
use crate::shared::Shared;
use crate::FtlError;

/// Failed copy batches each GC stream of a round tolerates (each seals its destination zone).
const DEST_FAILURES_MAX: u32 = 3;

/// Rounds that may end early because the device refused a copy destination's write, with
/// no round moving its copies between them, before collection gives up and fails the
/// volume. Each such round seals at least one zone, and the next resets those zones as
/// empty victims and opens others; against a device that refuses every write that cycle
/// never ends and never frees a block, so the volume has to fail (with the device's
/// status) for waiting writers to hear of it.
const REFUSED_ROUNDS_MAX: u32 = 4;

/// Collected victims whose resets may wait for their invalidating writes to become durable
/// (`Maintenance::reset_collected`), at most.
const DEFERRED_VICTIMS_MAX: usize = 2 * ROUND_VICTIMS_MAX;

/// A round whose copies are done and whose victims await their reset (`finish_round`).
#[derive(Debug, Default)]
struct Copied {
    /// Its victims still to reset (none went Offline).
    victims: Vec<u32>,
    /// Whether the copies were written durable (FUA on each lane's last copy).
    durable: bool,
    /// Blocks the round copied, and how long that took (for the log).
    blocks: usize,
    copy_us: u64,
}

/// A round's finish (flush and resets) running while the next round copies.
type Finish<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), FtlError>> + Send + 'a>>;

/// Clears `Mapping::resets_owed` when a finish ends, and wakes the GC lanes that waited for
/// its resets (with nothing freed they then report no space instead of waiting forever).
struct OwedResets<'a>(&'a Shared);

impl Drop for OwedResets<'_> {
    fn drop(&mut self) {
        self.0.map(|m| m.resets_owed = 0);
        self.0.space_changed();
    }
}

/// Where the newest checkpoint is: its slot and number, and its slot's chain.
struct CkptCursor {
    slot: u32,
    number: u64,
    /// The number of the full checkpoint the slot's chain starts with.
    base: u64,
    /// Blocks the chain takes from the slot's start (where the next delta goes), and those
    /// of its deltas.
    end_block: u64,
    delta_blocks: u64,
    /// Each slot's format version (None: empty or torn).
    versions: [Option<u32>; 2],
    /// Deltas may follow: this mount wrote the chain's full checkpoint (a mount's chain may
    /// end in a torn delta, so its first checkpoint is full).
    chained: bool,
    /// The slot's last zone may be left partly written and active (unknown at mount).
    slot_open: bool,
}

impl CkptCursor {
    /// The chain the next checkpoint may extend: the slot's full checkpoint is version 3
    /// and the other slot holds no older version (a build of that version would mount it,
    /// not knowing deltas; docs/FORMAT.md, "Versions").
    fn delta_chain(&self, layout: &crate::Layout) -> Option<crate::map::DeltaChain> {
        let s = self.slot as usize;
        let newest = self.versions[s] == Some(checkpoint::VERSION_3);
        let other = self.versions[1 - s].is_none_or(|v| v >= checkpoint::VERSION_3);
        (self.chained && newest && other).then(|| crate::map::DeltaChain {
            room_blocks: layout.slot_blocks().saturating_sub(self.end_block),
            delta_blocks: self.delta_blocks,
        })
    }
}

/// Garbage collection, checkpoints and flush of a mounted volume.
pub(crate) struct Maintenance {
    shared: Arc<Shared>,
    writer: Arc<StreamWriter>,
    /// The checkpoint lock: held across a checkpoint's flush and write.
    ckpt: tokio::sync::Mutex<CkptCursor>,
    /// Checkpoints written since mount.
    checkpoints: AtomicU64,
    /// Set by unmount and crash: the task stops after what it is doing.
    closed: AtomicBool,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The watermarks that say when to collect (the writers wait by the same ones).
    policy: SpacePolicy,
    /// Collected victims whose reset waits until the writes that invalidated their blocks
    /// are durable (a leaf lock, never held across an await).
    deferred: Mutex<Vec<u32>>,
    /// A victim of serial collection (`MountOptions::serial_collection`) is being collected:
    /// set from its choice until its checkpoint is written and it is reset.
    serial_busy: AtomicBool,
    /// Rounds that ended early on a refused copy destination since a round last moved its
    /// copies (`REFUSED_ROUNDS_MAX`).
    refused_rounds: AtomicU32,
    /// The status of the last copy destination the device refused, for the volume's failure.
    last_refusal: Mutex<Option<NvmeStatus>>,
}

impl Maintenance {
    /// Maintenance of a volume whose newest checkpoint is `number` in `slot` (its slots'
    /// format versions `versions`); not running yet.
    pub(crate) fn new(
        shared: Arc<Shared>,
        writer: Arc<StreamWriter>,
        slot: u32,
        number: u64,
        versions: [Option<u32>; 2],
    ) -> Maintenance {
        let policy = SpacePolicy::new(shared.opts(), shared.layout());
        Maintenance {
            shared,
            writer,
            ckpt: tokio::sync::Mutex::new(CkptCursor {
                slot,
                number,
                base: number,
                end_block: 0,
                delta_blocks: 0,
                versions,
                chained: false,
                slot_open: true,
            }),
            checkpoints: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            task: Mutex::new(None),
            policy,
            deferred: Mutex::new(Vec::new()),
            serial_busy: AtomicBool::new(false),
            refused_rounds: AtomicU32::new(0),
            last_refusal: Mutex::new(None),
        }
    }

    /// Starts the maintenance task.
    pub(crate) fn start(self: &Arc<Self>) {
        let task = tokio::spawn(Arc::clone(self).maintenance());
        *self.task.lock() = Some(task);
    }

    /// Stops the maintenance task after the collection or checkpoint it is in; a task that
    /// ended by a panic or cancellation fails the volume.
    pub(crate) async fn stop(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.shared.wake_maintenance();
        let task = self.task.lock().take();
        if let Some(t) = task {
            if let Err(e) = t.await {
                self.shared.fail(&FtlError::Failed(format!(
                    "the maintenance task ended: {e}"
                )));
            }
        }
    }

    /// Stops the maintenance task wherever it is, without writing anything (a crash).
    pub(crate) async fn abort(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.shared.wake_maintenance();
        let task = self.task.lock().take();
        if let Some(t) = task {
            t.abort();
            let _ = t.await;
        }
    }

    /// Checkpoints written since mount.
    pub(crate) fn checkpoints(&self) -> u64 {
        self.checkpoints.load(Ordering::Relaxed)
    }

    /// Flush: in summary mode first every open zone's pending summary, then the device. Blocks
    /// whose summary failed (their zone is sealed, their tags still pending) are made durable
    /// by a checkpoint instead, and only then does the flush succeed.
    pub(crate) async fn flush(&self) -> Result<(), FtlError> {
        self.writer.write_summaries(|_| true).await?;
        match self.shared.map(|m| m.plan_flush()) {
            FlushPlan::Device => self.flush_device().await?,
            FlushPlan::Checkpoint { zones } => {
                // The checkpoint flushes the device before it is written, then maps those
                // blocks.
                self.checkpoint().await?;
                self.shared.map(|m| m.forget_tags(&zones));
            }
        }
        Ok(())
    }

    /// Flushes the device, and records which writes that made durable.
    async fn flush_device(&self) -> Result<(), FtlError> {
        let at = self.shared.map(|m| m.durability.flush_submitted());
        let flushing = self.shared.activity().enter(Gauge::Flushes);
        retry(|| self.shared.dev().flush()).await?;
        drop(flushing);
        self.shared.map(|m| m.durability.flushed(at));
        Ok(())
    }

    /// Runs the maintenance loop; if it panics (a broken invariant), the volume fails with
    /// the panic's message instead of silently losing garbage collection.
    async fn maintenance(self: Arc<Self>) {
        if let Err(what) = zns::panic::caught(Arc::clone(&self).maintenance_loop()).await {
            self.shared.fail(&FtlError::Failed(format!(
                "garbage collection stopped: {what}"
            )));
        }
    }

    /// The maintenance loop: collect while free zones are short, checkpoint when enough zones
    /// filled, otherwise sleep until woken. A round's finish (its flush and resets) runs while
    /// the next round copies, so the copies do not stop while the device flushes; it is
    /// awaited before anything else (a checkpoint, sleeping, stopping).
    async fn maintenance_loop(self: Arc<Self>) {
        let mut finishing: Option<Finish<'_>> = None;
        while !self.closed.load(Ordering::SeqCst) {
            if let Err(e) = self.maintenance_turn(&mut finishing).await {
                self.shared.fail(&e);
                return;
            }
        }
        if let Some(f) = finishing.take() {
            if let Err(e) = f.await {
                self.shared.fail(&e);
            }
        }
    }

    /// One turn of the maintenance loop (`maintenance_loop`); `finishing` is the finish of
    /// the last round if it is still under way, and may be left with this turn's.
    async fn maintenance_turn<'a>(
        &'a self,
        finishing: &mut Option<Finish<'a>>,
    ) -> Result<(), FtlError> {
        let every = self.shared.opts().checkpoint_every_zones;
        let (free, resetting, ckpt_due, trims_pin, users) = self.shared.map(|m| {
            (
                m.free_zones(),
                m.collecting_zones(),
                m.checkpoint_due(every),
                m.trims_pin_space(),
                // Only a mount with a lead looks at the users' room (a scan of the zones).
                match self.policy.gc_lead_blocks {
                    Some(_) => m.user_room(),
                    None => Default::default(),
                },
            )
        });
        // While a finish is to come, its resets count as space (`gc_wanted_after_finish`),
        // unless collection runs on across rounds (`MountOptions::gc_run_on`): then the next
        // round copies while that finish flushes and resets, as long as the free zones alone
        // want collection. At the floor it may wait for the users to need the space
        // (`gc_may_wait`).
        let need_gc = match finishing {
            Some(_) if self.policy.run_on => self.policy.gc_wanted(free),
            Some(_) => self.policy.gc_wanted_after_finish(free, resetting),
            None => self.policy.gc_wanted(free),
        } && !self
            .policy
            .gc_may_wait(free + finishing.as_ref().map_or(0, |_| resetting), users);
        // The periodic checkpoint, or one that turns live trim records into garbage when
        // space is short and they hold much of it.
        let mut need_ckpt = ckpt_due || (need_gc && trims_pin);
        let mut progressed = false;
        // Threaded logging gives the hot stream room without a free zone (gc/tl.rs).
        // It comes when collection would (`SpacePolicy::gc_wanted`: at the user streams'
        // floor, or below the background watermark where one is set above it).
        let floor = self
            .policy
            .floor(Stream::Hot, true)
            .max(self.policy.gc_background_free_zones.saturating_sub(1));
        if self.shared.map(|m| m.tl_wanted(free, floor)) {
            progressed |= self.threaded_turn().await?;
        }
        // Hybrid recycling chose threaded logging for the hot stream's next zone: no
        // compaction beside it unless a user writer waits for a zone all the same (F2FS
        // recycles a segment one way or the other, never both for one need).
        // Writers paced or throttled by collection's copies (`plan_admit`) wait for them
        // without saying so: collection runs for them as before.
        let paced = self.policy.pace_rounds || self.policy.owed(free) > 0;
        let need_gc = need_gc && (paced || !self.shared.map(|m| m.tl_covers_users()));
        if need_gc && self.shared.opts().serial_collection {
            // One victim, ended by its own checkpoint (`serial_victim`).
            if self.serial_victim().await? {
                progressed = true;
                need_ckpt = false;
            }
        } else if need_gc {
            let copied = match finishing.take() {
                Some(f) => {
                    // The finish is polled first: running on, it has said which victims it
                    // resets (`reset_collected`) before this round is planned.
                    let (finished, copied) =
                        futures::join!(f, self.copy_round(true, ROUND_VICTIMS_MAX));
                    finished?;
                    progressed = true;
                    copied?
                }
                None => self.copy_round(false, ROUND_VICTIMS_MAX).await?,
            };
            // Nothing reclaimable: not a change of space, so waiting writers are not woken
            // (they wait for a write in flight to end, which signals). Waking them here made
            // a writer and this task wake each other forever without ever letting that write
            // complete (a livelock under a virtual clock).
            if let Some(c) = copied {
                *finishing = Some(Box::pin(self.finish_round(c)));
                progressed = true;
            }
        }
        if need_ckpt || !progressed || !need_gc {
            if let Some(f) = finishing.take() {
                f.await?;
                progressed = true;
            }
        }
        if need_ckpt {
            self.checkpoint().await?;
            progressed = true;
        }
        if !progressed {
            self.shared.maintenance_wanted().await;
        }
        Ok(())
    }

    /// Copies one round of at most `victims_max` victims (`Mapping::plan_round`) out through
    /// both GC streams at once; the round still has to be finished (`finish_round`: one
    /// device flush if needed, then the resets together). With `overlapping` the previous
    /// round's finish is still under way, so its victims are not free yet: a round is taken
    /// only if even its first victim's copies fit the space left (the reserve may be in use).
    /// None when no zone has anything to reclaim (or, overlapping, nothing fits).
    async fn copy_round(
        &self,
        overlapping: bool,
        victims_max: usize,
    ) -> Result<Option<Copied>, FtlError> {
        let opts = self.shared.opts();
        let policy = SpacePolicy::new(opts, self.shared.layout());
        let lanes_max = self.writer.lanes(Stream::Gc);
        let picked = self
            .shared
            .map(|m| m.plan_round(&policy, opts.hot_cold, victims_max, lanes_max, overlapping));
        if overlapping && picked.is_some() {
            self.shared.map(|m| m.counters.gc_rounds_overlapped += 1);
        }
        let Some(round) = picked else {
            // Deferred victims are all that is left to reclaim: reset them now.
            if overlapping || self.deferred.lock().is_empty() {
                return Ok(None);
            }
            return Ok(Some(Copied::default()));
        };
        let collecting = self.shared.activity().enter(Gauge::Rounds);
        let began = tokio::time::Instant::now();
        // With per-block metadata each lane's last copy is written with FUA, so the copies
        // are durable without a flush of every open zone. In summary mode the copies' tags
        // become durable only with their summaries, which the flush of the finish writes.
        let durable = !self.shared.layout().summary_mode();
        // Each lane is a zone with its own copies in flight; the lanes and the cold stream
        // run at once, so the device has several copies queued.
        let chunk = round.hot.len().div_ceil(round.lanes.max(1)).max(1);
        // Set when the device refuses a copy of any lane, sealing its destination.
        let sealed = AtomicBool::new(false);
        let hot =
            futures::future::join_all(round.hot.chunks(chunk).enumerate().map(|(lane, list)| {
                self.move_out(&round, list, Stream::Gc, lane, durable, &sealed)
            }));
        let (hot, cold) = futures::join!(
            hot,
            self.move_out(&round, &round.cold, Stream::GcCold, 0, durable, &sealed),
        );
        drop(collecting);
        let mut ended_early = false;
        for r in hot {
            ended_early |= !r?;
        }
        ended_early |= !cold?;
        let copies = round.hot.len() + round.cold.len();
        self.count_refused_round(sealed.load(Ordering::SeqCst), copies)?;
        // Victims the device took Offline meanwhile keep their remaining entries as lost data;
        // they were retired and are not reset.
        let victims: Vec<u32> = self.shared.map(|m| {
            if ended_early {
                return m.end_round_early(&round.victims);
            }
            round
                .victims
                .iter()
                .copied()
                .filter(|&v| !m.zone(v).lost)
                .collect()
        });
        if ended_early {
            tracing::warn!(
                victims = round.victims.len(),
                emptied = victims.len(),
                "a garbage collection round ended early: the device retired or sealed zones it counted \
                 on; the victims it did not empty wait for a later round"
            );
        }
        Ok(Some(Copied {
            victims,
            durable,
            blocks: round.hot.len() + round.cold.len(),
            copy_us: began.elapsed().as_micros() as u64,
        }))
    }

    /// Counts a round whose copy destination the device refused (`refused`), or resets the
    /// count after a round that moved its `copies` without a refusal (a round of empty
    /// victims, such as the zones the refused ones sealed, changes nothing); an error failing
    /// the volume once `REFUSED_ROUNDS_MAX` rounds were refused with none moving its copies
    /// between them, naming the device's last status.
    fn count_refused_round(&self, refused: bool, copies: usize) -> Result<(), FtlError> {
        if !refused {
            if copies > 0 {
                self.refused_rounds.store(0, Ordering::SeqCst);
            }
            return Ok(());
        }
        let n = self.refused_rounds.fetch_add(1, Ordering::SeqCst) + 1;
        if n < REFUSED_ROUNDS_MAX {
            return Ok(());
        }
        let last = match *self.last_refusal.lock() {
            Some(s) => s.to_string(),
            None => "no status".into(),
        };
        Err(FtlError::Failed(format!(
            "garbage collection gave up: the device refused the copies' destination zones in \
             {n} rounds without one moving its copies (last: {last})"
        )))
    }

    /// Collects one victim as F2FS's foreground segment compaction does
    /// (`MountOptions::serial_collection`, ZNS+ paper section 3.1): its copies (both GC
    /// streams), then a checkpoint, which flushes the device first and so waits for the
    /// copies to be durable and records where they went (F2FS's metadata update), then the
    /// victim's reset, which that flush leaves needing no flush of its own. Nothing else
    /// copies meanwhile. False, with nothing written, when nothing was reclaimable.
    async fn serial_victim(&self) -> Result<bool, FtlError> {
        self.serial_busy.store(true, Ordering::SeqCst);
        let collected = async {
            let began = tokio::time::Instant::now();
            let Some(copied) = self.copy_round(false, 1).await? else {
                return Ok(false);
            };
            let copied_at = tokio::time::Instant::now();
            // Only deferred victims left to reset (`copy_round`): no copies to record.
            let victim = !copied.victims.is_empty();
            if victim {
                self.checkpoint().await?;
            }
            let checkpointed_at = tokio::time::Instant::now();
            self.finish_round(copied).await?;
            let ns = |a: tokio::time::Instant, b: tokio::time::Instant| {
                b.duration_since(a).as_nanos() as u64
            };
            let reset_ns = ns(checkpointed_at, tokio::time::Instant::now());
            self.shared.map(|m| {
                if !victim {
                    return;
                }
                let c = &mut m.counters;
                c.serial_victims += 1;
                c.serial_copy_ns += ns(began, copied_at);
                c.serial_checkpoint_ns += ns(copied_at, checkpointed_at);
                c.serial_reset_ns += reset_ns;
            });
            Ok(true)
        }
        .await;
        self.serial_busy.store(false, Ordering::SeqCst);
        // A writer stopped for this victim (`compact_and_wait`) sees it end. Nothing
        // reclaimable is no change of space (see `maintenance_turn`).
        if !matches!(collected, Ok(false)) {
            self.shared.space_changed();
        }
        collected
    }

    /// Finishes a round whose copies are done: resets its victims (and the deferred ones that
    /// are ready) after one device flush if their copies or invalidating writes need it.
    async fn finish_round(&self, copied: Copied) -> Result<(), FtlError> {
        let began = tokio::time::Instant::now();
        let deferred_before = self.deferred.lock().len();
        let flush = self
            .reset_collected(copied.victims.clone(), copied.durable)
            .await;
        let free = self.shared.map(|m| m.free_zones());
        tracing::debug!(
            victims = copied.victims.len(),
            blocks = copied.blocks,
            deferred_before,
            copy_us = copied.copy_us,
            reset_us = began.elapsed().as_micros() as u64,
            free,
            "garbage collection round"
        );
        flush
    }

    /// Resets collected victims (their copies done) and the deferred ones that are ready.
    /// The copies must be durable before the only other copy goes away, and so must the
    /// newer versions that made the victims' other blocks invalid: in summary mode that
    /// takes every open zone's pending summary (no writer holds a slot while it waits for
    /// space, so this cannot wait on a writer that waits for this collection). One flush
    /// covers them all, and none is needed when the copies' FUA and earlier flushes and
    /// filled zones made all of it durable (`Durability::reset_needs_flush`). With
    /// `durable` (per-block metadata) victims not yet ready wait for a later round instead
    /// (user zones fill and become durable meanwhile), unless space is short.
    async fn reset_collected(&self, mut victims: Vec<u32>, durable: bool) -> Result<(), FtlError> {
        victims.append(&mut self.deferred.lock());
        if victims.is_empty() {
            return Ok(());
        }
        let floor = self.policy.floor(Stream::Hot, true);
        let (ready, waiting, short) = self.shared.map(|m| {
            let (ready, waiting): (Vec<u32>, Vec<u32>) = victims
                .iter()
                .partition(|&&v| durable && !m.durability.reset_needs_flush(&[v]));
            (ready, waiting, m.free_zones() <= floor + 1)
        });
        // Deferring holds zones back from the free pool, so only while free zones are not
        // short, and for a bounded number of victims; never where collection runs on, whose
        // next round counts on every victim's reset (`Mapping::resets_owed`).
        let defer = durable && !short && waiting.len() <= DEFERRED_VICTIMS_MAX;
        let (now, flush) = if waiting.is_empty() {
            (ready, false)
        } else if defer {
            *self.deferred.lock() = waiting;
            (ready, false)
        } else {
            (victims, true)
        };
        // Running on (`MountOptions::gc_run_on`), a round planned beside this finish counts
        // the zones it resets, but one in case the device retires a victim instead, and its
        // lanes wait for them; cleared, and the lanes woken, however this ends.
        let _owed = self.policy.run_on.then(|| {
            let owed = u32::try_from(now.len().saturating_sub(1)).unwrap_or(u32::MAX);
            self.shared.map(|m| m.resets_owed = owed);
            OwedResets(&self.shared)
        });
        self.shared.map(|m| {
            m.counters.gc_rounds += 1;
            m.counters.gc_round_flushes += u64::from(flush);
        });
        if flush {
            self.flush().await?;
        }
        if now.is_empty() {
            return Ok(());
        }
        self.wait_for_readers(&now).await?;
        let resetting = self.shared.activity().enter(Gauge::Resets);
        let resets = futures::future::join_all(now.iter().map(|&v| self.reset_victim(v)));
        let resets = resets.await;
        drop(resetting);
        let mut first_error = None;
        for r in resets {
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        self.shared.space_changed();
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Moves `list` (live blocks of the round's victims) through GC stream `stream`; with
    /// `durable` the last batch is written with FUA (`StreamWriter::relocate`). A
    /// destination zone whose write failed is sealed and the rest goes to a new one; this
    /// gives up (failing the volume) after `DEST_FAILURES_MAX` failed batches. Blocks of a
    /// victim that went Offline are dropped: its remaining data is lost. False if it stopped
    /// short for want of a free zone in a round planned on the resets of the finish before
    /// it (`Round::on_owed_resets`): that finish has ended, and the device retired zones the
    /// round counted on; or after the device sealed a destination of the round (`sealed`,
    /// set by any lane): the round ends early (`Mapping::end_round_early`).
    async fn move_out(
        &self,
        round: &Round,
        list: &[u32],
        stream: Stream,
        lane: usize,
        durable: bool,
        sealed: &AtomicBool,
    ) -> Result<bool, FtlError> {
        let mut list = list.to_vec();
        let mut failures_left = DEST_FAILURES_MAX;
        let mut i = 0;
        let depth = self.writer.copy_pipeline_depth();
        while i < list.len() {
            let moved = match depth {
                Some(d) => {
                    self.writer
                        .relocate_pipelined(&list[i..], stream, lane, durable, d)
                        .await
                }
                None => {
                    self.writer
                        .relocate(&list[i..], stream, lane, durable)
                        .await
                }
            };
            match moved {
                Ok(n) => i += n,
                Err(e) => {
                    if self.victims_offline(round).await {
                        self.shared
                            .map(|m| list.retain(|&p| !m.zone(m.zone_of(p)).lost));
                        i = 0;
                        continue;
                    }
                    match e {
                        FtlError::NoSpace if round.on_owed_resets => return Ok(false),
                        // The device sealed a destination of this round (a refused copy):
                        // a zone the round counted on is gone, and the zone taken in its
                        // place may have been the last free one, so the round ends early
                        // as above.
                        FtlError::NoSpace if sealed.load(Ordering::SeqCst) => return Ok(false),
                        FtlError::NoSpace => return Err(self.no_zone_to_copy_into()),
                        FtlError::Device(s) if failures_left > 0 => {
                            tracing::warn!(
                                stream = stream.name(),
                                "a garbage collection copy failed ({s}); retrying in another zone"
                            );
                            failures_left -= 1;
                            *self.last_refusal.lock() = Some(s);
                            sealed.store(true, Ordering::SeqCst);
                        }
                        e => return Err(e),
                    }
                }
            }
        }
        Ok(true)
    }

    /// The error of a GC lane that found no free zone in a round that counted on none to
    /// come: the reserve the first victim of a round is taken on is gone. The device's
    /// retirements take it for good (the volume fails naming them), or a destination the
    /// device refused, sealed part-full, took the last free zone at a floor of one zone
    /// (docs/DESIGN.md's failure table); either way the error says that collection had no
    /// zone to copy into, not that it found nothing to reclaim.
    fn no_zone_to_copy_into(&self) -> FtlError {
        self.shared
            .spare_used_up("garbage collection has no free zone left to copy into")
            .unwrap_or_else(|| {
                FtlError::Failed(
                    "garbage collection has no free zone left to copy into: the reserve zone \
                     was taken (a zone the device refused a write to is sealed part-full); a \
                     higher collection floor keeps room for such a zone"
                        .into(),
                )
            })
    }

    /// Waits until no read pins any of `victims`; each must hold no valid block by now.
    async fn wait_for_readers(&self, victims: &[u32]) -> Result<(), FtlError> {
        loop {
            let waiting = self.shared.space_notified();
            tokio::pin!(waiting);
            waiting.as_mut().enable();
            let pinned = self.shared.map(|m| {
                let mut pinned = false;
                for &v in victims {
                    let z = m.zone(v);
                    if z.valid != 0 {
                        return Err(FtlError::Corrupt(format!(
                            "data zone {v} still holds {} valid blocks after collection",
                            z.valid
                        )));
                    }
                    pinned |= z.readers != 0;
                }
                Ok(pinned)
            })?;
            if !pinned {
                return Ok(());
            }
            self.shared.check_failed()?;
            waiting.await;
        }
    }

    /// Resets a collected victim, or retires it if the device refuses.
    async fn reset_victim(&self, victim: u32) -> Result<(), FtlError> {
        let reset = retry(|| {
            self.shared.dev().zone_mgmt(
                ZoneAction::Reset,
                self.shared.layout().data_zone_start(victim),
                false,
            )
        })
        .await;
        match reset {
            Ok(()) => {
                self.shared.map(|m| m.zone_reset(victim));
                Ok(())
            }
            // The device retired the zone: its data has moved out; it is never used again.
            Err(
                e @ (NvmeStatus::InvalidZoneStateTransition
                | NvmeStatus::ZoneIsReadOnly
                | NvmeStatus::ZoneIsOffline),
            ) => {
                tracing::warn!(zone = victim, "data zone retired: reset refused ({e})");
                self.shared.map(|m| m.retire(victim, false));
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// After a failed move: retires every victim of `round` that went Offline (its remaining
    /// blocks are lost; they stay mapped, so reads of them fail); true if one did.
    async fn victims_offline(&self, round: &Round) -> bool {
        let mut any = false;
        for &v in &round.victims {
            let known = self.shared.map(|m| m.zone(v).lost);
            if !known && self.victim_offline(v).await {
                any = true;
            }
        }
        any
    }

    /// After a failed move out of `victim`: if the victim went Offline its remaining blocks
    /// are lost (they stay mapped, so reads of them fail), it is retired, and true is returned.
    async fn victim_offline(&self, victim: u32) -> bool {
        let at = self.shared.layout().data_zone_start(victim);
        let state = self
            .shared
            .dev()
            .report_zones(at, zns::ReportFilter::All, true, 1)
            .await
            .ok()
            .and_then(|r| r.zones.first().map(|d| d.state));
        if state == Some(zns::ZoneState::Offline) {
            tracing::error!(
                zone = victim,
                "data zone went offline; its remaining data is lost"
            );
            self.shared.map(|m| m.retire(victim, true));
            self.shared.space_changed();
            return true;
        }
        false
    }

    /// Whether a file system that stops its writes for collection, as F2FS's foreground
    /// segment compaction does (ZNS+ paper section 2.3), would stop them now: collection is
    /// wanted, has something to reclaim, and no zone re-opened by threaded logging gives the
    /// hot stream room (threaded logging reclaims without the stop).
    pub(crate) fn compaction_due(&self) -> bool {
        let policy = self.shared.opts().victim_policy;
        self.shared
            .map(|m| self.policy.gc_wanted(m.free_zones()) && m.reclaimable(policy) && !m.tl_live())
    }

    /// Foreground compaction: wakes the maintenance task and waits, woken by every change of
    /// space (collection's resets signal it), until `compaction_due` is false, then writes a
    /// checkpoint as F2FS does after a foreground compaction. With serial collection each
    /// victim ends with its own checkpoint instead, and the wait also lasts until the victim
    /// under way has ended (it signals), so the writes resume only between victims. False,
    /// with nothing written, when no compaction was due. A volume that fails meanwhile
    /// returns its failure.
    pub(crate) async fn compact_and_wait(&self) -> Result<bool, FtlError> {
        let serial = self.shared.opts().serial_collection;
        let mut waited = false;
        loop {
            let waiting = self.shared.space_notified();
            tokio::pin!(waiting);
            waiting.as_mut().enable();
            self.shared.check_failed()?;
            let victim_under_way = waited && serial && self.serial_busy.load(Ordering::SeqCst);
            if !victim_under_way && !self.compaction_due() {
                break;
            }
            waited = true;
            self.shared.wake_maintenance();
            let _waiting = self.shared.activity().enter(Gauge::SpaceWaits);
            waiting.await;
        }
        if waited && !serial {
            self.checkpoint().await?;
        }
        Ok(waited)
    }

    /// Writes a checkpoint of the current mapping: a delta of the dirty mapping pages after
    /// the newest one in its slot when the chain has room for it and it is small enough
    /// (`Mapping::next_checkpoint`), else a full one into the other slot. What the map lock
    /// covers: for a delta, the copy of the dirty pages and the zone table; for a full one,
    /// `FULL_COPY_PAGES` pages at a time, then the pages changed meanwhile and the zone table
    /// (`checkpoint::FullCopy`).
    pub(crate) async fn checkpoint(&self) -> Result<(), FtlError> {
        let mut cur = self.ckpt.lock().await;
        let number = cur.number + 1;
        let base = cur.base;
        let volume_id = self.shared.volume_id();
        enum Taken {
            Delta(Vec<u8>, u64, u64),
            Full(checkpoint::FullCopy),
        }
        // The snapshot clears the dirty bits of the pages it copies. Until this checkpoint
        // is durable no delta may follow: if it fails or is dropped, those pages would be in
        // no checkpoint, so the next one must be full (the chain is set again below).
        let chained = std::mem::replace(&mut cur.chained, false);
        let first = self.shared.map(|m| {
            let kind = m.next_checkpoint();
            m.delta_chain = None;
            match kind {
                CkptKind::Delta => {
                    let mark = m.begin_snapshot();
                    let bytes = checkpoint::snapshot_delta(m, number, base, volume_id);
                    Taken::Delta(bytes, m.next_seq(), mark)
                }
                CkptKind::Full => Taken::Full(checkpoint::FullCopy::new(m)),
            }
        });
        let (bytes, seq, mark, kind) = match first {
            Taken::Delta(bytes, seq, mark) => (bytes, seq, mark, CkptKind::Delta),
            Taken::Full(mut copy) => {
                // The lock is released between stretches of pages, so requests go on.
                while !self
                    .shared
                    .map(|m| copy.copy_pages(m, checkpoint::FULL_COPY_PAGES))
                {}
                let (copy, seq, mark) = self.shared.map(|m| {
                    let mark = m.begin_snapshot();
                    let copy = copy.finish(m, number, volume_id);
                    (copy, m.next_seq(), mark)
                });
                (copy.seal(), seq, mark, CkptKind::Full)
            }
        };
        // Everything the snapshot maps must be durable before the checkpoint says so.
        self.flush_device().await?;
        let (dev, layout) = (self.shared.dev(), self.shared.layout());
        let blocks = checkpoint::blocks_of(bytes.len() as u64, layout.geometry.block_size);
        match kind {
            CkptKind::Delta => {
                checkpoint::append_slot(dev, layout, cur.slot, cur.end_block, &bytes).await?;
                cur.end_block += blocks;
                cur.delta_blocks += blocks;
                cur.chained = chained;
            }
            CkptKind::Full => {
                let slot = 1 - cur.slot;
                if cur.slot_open && layout.has_delta_room() {
                    // Only one checkpoint zone is active at a time.
                    checkpoint::seal_slot(dev, layout, cur.slot).await?;
                }
                let deltas = self.shared.opts().delta_checkpoints && layout.has_delta_room();
                checkpoint::write_slot(dev, layout, slot, &bytes, deltas).await?;
                cur.slot_open = deltas;
                let flags = self.shared.map(|m| {
                    if m.threaded.enabled {
                        checkpoint::FLAG_THREADED_LOGGING
                    } else {
                        0
                    }
                });
                cur.versions[slot as usize] = Some(checkpoint::full_version(flags, layout));
                cur.slot = slot;
                cur.base = number;
                cur.end_block = blocks;
                cur.delta_blocks = 0;
                cur.chained = true;
            }
        }
        cur.number = number;
        let chain = cur
            .delta_chain(layout)
            .filter(|_| self.shared.opts().delta_checkpoints);
        let bs = u64::from(layout.geometry.block_size);
        self.shared.map(|m| {
            m.checkpoint_durable(seq, mark);
            m.delta_chain = chain;
            if kind == CkptKind::Delta {
                m.counters.delta_checkpoints += 1;
                m.counters.delta_checkpoint_bytes += blocks * bs;
            }
        });
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
