//! Garbage-collection copies pipelined into one zone: several Simple Copy commands in flight to
//! the same destination zone, each submitted at the write pointer the one before it leaves.
//! One Copy at a time left the flash mostly idle: a Copy completes only once its sources are
//! read, and those reads wait behind the programs already queued on the dies, so one lane
//! moved about 512 KiB per such wait (docs/BENCHMARKS.md).
//!
//! Ordering: each command is polled once as soon as it is created, so commands reach the
//! device in write-pointer order on a device that executes them in the order it receives them
//! (the emulated device does: a command takes effect at its first poll). A command that still
//! overtakes the one ahead of it (a device that delays some commands before it runs them, as
//! the emulator's latency faults do) is refused with Zone Invalid Write without writing
//! anything; it is submitted again once every copy ahead of it has completed. A device that
//! reorders often is better run with `MountOptions::copies_per_lane` 1.
//!
//! Fault model: as for every data-zone write (io.rs). A copy that fails seals the zone; the
//! copies behind it in the pipeline are still awaited (those that landed move their blocks,
//! those refused are failed writes too) and the caller retries what was not moved in another
//! zone. Moves are compare-and-swap on the mapping, so a block copied twice maps once.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use zns::{CopyRange, NvmeStatus};

use super::{SlotGuard, StreamWriter};
use crate::activity::{Entered, Gauge};
use crate::map::{Reservation, Stream};
use crate::plan::{Acquire, WriteKind};
use crate::retry::retry;
use crate::FtlError;

type CopyFuture<'a> = Pin<Box<dyn Future<Output = Result<(), NvmeStatus>> + Send + 'a>>;

/// A Copy on its way: the command, what it moves, and its result if it already completed.
struct InFlight<'a> {
    fut: CopyFuture<'a>,
    done: Option<Result<(), NvmeStatus>>,
    /// The zone it writes to.
    zone: u32,
    r: Reservation,
    /// Index in `srcs` of its first source.
    first: usize,
    ranges: Vec<CopyRange>,
    dest: zns::Lba,
    fua: bool,
    /// Whether copies to its zone were in flight ahead of it when it was submitted.
    behind: bool,
    _copying: Entered<'a>,
}

impl StreamWriter {
    /// The Copy source ranges of `srcs` (sorted physical blocks), merging neighbours.
    fn copy_ranges(&self, srcs: &[u32]) -> Vec<CopyRange> {
        let g = self.shared.layout().geometry;
        let mut ranges: Vec<CopyRange> = Vec::new();
        for &p in srcs {
            let lba = self.shared.layout().pba_to_lba(p);
            match ranges.last_mut() {
                Some(r)
                    if r.lba + r.blocks == lba && r.blocks < u64::from(g.copy_max_range_blocks) =>
                {
                    r.blocks += 1
                }
                _ => ranges.push(CopyRange { lba, blocks: 1 }),
            }
        }
        ranges
    }

    /// Blocks of `srcs` the next Copy takes: as many as the device's Copy limits allow.
    fn copy_batch(&self, srcs: &[u32]) -> usize {
        let g = self.shared.layout().geometry;
        let max = g.copy_max_blocks.min(g.mdts_blocks).max(1) as usize;
        let mut n = srcs.len().min(max);
        while n > 1 && self.copy_ranges(&srcs[..n]).len() > g.copy_max_ranges as usize {
            n = n.div_ceil(2);
        }
        n
    }

    /// Moves a prefix of `srcs` (sorted physical blocks) into the zone of lane `lane` of
    /// `stream` with up to `depth` Simple Copy commands in flight; returns how many. With
    /// `durable`, the Copy that moves the rest of `srcs` is written with FUA (it is the last
    /// in the pipeline, and a FUA write makes the zone durable up to its end).
    pub(crate) async fn relocate_pipelined(
        &self,
        srcs: &[u32],
        stream: Stream,
        lane: usize,
        durable: bool,
        depth: usize,
    ) -> Result<usize, FtlError> {
        let slot = self.lane_slot(stream, lane)?;
        let (mut guard, mut z, _) = self.acquire_zone(slot, stream).await?;
        let mut zone_start = self.shared.layout().data_zone_start(z);
        let mut pipe: VecDeque<InFlight<'_>> = VecDeque::new();
        let (mut issued, mut moved) = (0usize, 0usize);
        let mut stuck = false;
        let mut first_error: Option<FtlError> = None;
        loop {
            while first_error.is_none() && !stuck && pipe.len() < depth && issued < srcs.len() {
                let n = self.copy_batch(&srcs[issued..]);
                let r = self.shared.map(|m| m.reserve(z, n as u64));
                if r.blocks == 0 {
                    // The zone is full: the lane goes on in a fresh zone while the copies to
                    // this one are still in flight, so the pipeline does not drain at every
                    // zone boundary. No zone to be had: what is in flight ends, and the
                    // caller's next call reports the lack of space.
                    match self.next_copy_zone(&mut guard, stream).await {
                        Ok(Some(next)) => {
                            if !pipe.is_empty() {
                                self.shared.map(|m| m.counters.gc_lane_zones_chained += 1);
                            }
                            z = next;
                            zone_start = self.shared.layout().data_zone_start(z);
                        }
                        Ok(None) => stuck = true,
                        Err(e) => {
                            first_error = Some(e);
                        }
                    }
                    continue;
                }
                let n = r.blocks as usize;
                let fua = durable && issued + n == srcs.len();
                let ranges = self.copy_ranges(&srcs[issued..issued + n]);
                let dest = zone_start + r.offset;
                let copying = self.shared.activity().enter(Gauge::Copies);
                let sent = ranges.clone();
                let mut fut: CopyFuture<'_> =
                    Box::pin(
                        async move { retry(|| self.shared.dev().copy(&sent, dest, fua)).await },
                    );
                // Submit it now, behind the copies before it.
                let done = match futures::poll!(fut.as_mut()) {
                    Poll::Ready(res) => Some(res),
                    Poll::Pending => None,
                };
                let behind = pipe.iter().any(|c| c.zone == z);
                pipe.push_back(InFlight {
                    fut,
                    done,
                    zone: z,
                    r,
                    first: issued,
                    ranges,
                    dest,
                    fua,
                    behind,
                    _copying: copying,
                });
                issued += n;
            }
            let Some(mut c) = pipe.pop_front() else {
                break;
            };
            let res = match c.done.take() {
                Some(res) => res,
                None => c.fut.as_mut().await,
            };
            drop(c.fut);
            let cz = c.zone;
            let res = match res {
                // It overtook a copy ahead of it on the way to the device (a device that
                // delays commands before it runs them), so it found the write pointer short of
                // its destination and was refused, writing nothing. Every copy ahead of it has
                // completed now: it goes again, at the head of the pipeline.
                Err(NvmeStatus::ZoneInvalidWrite) if c.behind && first_error.is_none() => {
                    retry(|| self.shared.dev().copy(&c.ranges, c.dest, c.fua)).await
                }
                other => other,
            };
            match res {
                Ok(()) => {
                    let n = c.r.blocks as usize;
                    let batch = &srcs[c.first..c.first + n];
                    self.shared.map(|m| {
                        for (k, &p) in batch.iter().enumerate() {
                            m.complete_move(p, cz, c.r.offset + k as u64);
                        }
                        m.end_gc_write(cz, c.r.offset, n as u64);
                        if c.fua {
                            m.fua_ended(cz);
                        }
                    });
                    self.write_ended();
                    if first_error.is_none() {
                        moved = c.first + n;
                    }
                }
                Err(e) => {
                    self.write_failed(cz, WriteKind::Copy).await;
                    first_error.get_or_insert(e.into());
                }
            }
        }
        // A zone whose copy failed is sealed, so the slot will not use it again; a zone that
        // is still open (the lane moved on to it before the failure) stays the lane's.
        if stuck {
            *guard = None;
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(moved),
        }
    }

    /// The zone the lane of `guard` copies into next, its current one being full: a fresh
    /// zone of `stream` (its header written) if the GC streams may open one, else None.
    async fn next_copy_zone(
        &self,
        guard: &mut SlotGuard<'_>,
        stream: Stream,
    ) -> Result<Option<u32>, FtlError> {
        let plan = self
            .shared
            .map(|m| m.plan_acquire(**guard, stream, &self.policy));
        if plan.wake_gc {
            self.shared.wake_maintenance();
        }
        match plan.next {
            Acquire::Use(z) => Ok(Some(z)),
            Acquire::Open { zone, generation } => {
                **guard = None;
                if !self.shared.map(|m| m.tl_writing(zone)) {
                    self.write_header(zone, generation).await?;
                }
                **guard = Some((zone, generation));
                Ok(Some(zone))
            }
            _ => Ok(None),
        }
    }
}
