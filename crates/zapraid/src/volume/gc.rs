//! Garbage collection of sealed segments (docs/DESIGN.md, "Garbage collection"): pick a
//! victim (greedy or cost-benefit), rewrite its live data blocks and live trim records
//! through the write path keeping their sequence numbers, with compare-and-swap index
//! updates so a client write that lands meanwhile wins, flush, and only then reset the
//! victim's member zones and free it.
//!
//! Fault model: power may be cut at any point. Before the flush the victim is intact, so a
//! cut leaves the live blocks there (copies, if any survived, carry the same sequence numbers
//! and data). After the flush every copy is durable, so a cut during the resets (some member
//! zones empty, others not) leaves a torn segment whose blocks are copies of durable ones;
//! recovery loads it like any other and a later collection frees it. A member command that
//! fails fails the member, as on the write path; a member failing during a collection
//! re-addresses its blocks, so the collection stops (returns that it freed nothing) and a
//! later one starts over with the new addresses.

use std::sync::Arc;

use zns::{BlockError, BlockResult, ZoneAction};

use super::write::{self, push_relocation};
use super::{members, read, Shared};
use crate::layout::Pba;
use crate::meta::{BlockRecord, RecordKind, TrimRecord};

/// Collection starts when fewer segments than this are free: one for the relocated blocks
/// (a victim never holds more live blocks than a segment), one for client writes that were
/// admitted before the check.
pub(crate) const FREE_SEGMENTS_LOW: usize = 3;

/// Live blocks read and rewritten at a time, so a collection holds a bounded amount of data.
const MOVE_BATCH_BLOCKS: usize = 64;

/// Collects segments until at least `FREE_SEGMENTS_LOW` are free or nothing more can be
/// gained. One collection runs at a time; writers that find space short wait for it.
pub(crate) async fn ensure_space(sh: &Arc<Shared>) -> BlockResult<()> {
    if sh.st.lock().index.free_count() >= FREE_SEGMENTS_LOW {
        return Ok(());
    }
    let _one = sh.gc_lock.lock().await;
    // A segment is collected at most once per round; the bound stops a loop that gains
    // nothing (every sealed segment full of valid blocks).
    for _ in 0..sh.layout.segments() {
        if sh.st.lock().index.free_count() >= FREE_SEGMENTS_LOW {
            break;
        }
        if !collect_one(sh).await? {
            break;
        }
    }
    Ok(())
}

/// What a collection moves.
struct Plan {
    victim: u32,
    live: Vec<(u64, Pba, u64)>,
    trims: Vec<(u64, crate::index::TrimPlace)>,
    /// `State::remap_epoch` when the addresses above were taken.
    epoch: u64,
    /// The victim is the newest segment (no segment was opened after it): it may hold the
    /// only record of the array state, which is written again first (`Index::newest_segment`).
    restate: Option<(u64, u64)>,
}

fn plan(sh: &Arc<Shared>) -> Option<Plan> {
    let policy = sh.gc_policy();
    let mut st = sh.st.lock();
    let now = st.next_seq;
    let victim = st.index.victim(policy, now)?;
    if !st.index.others_in_use(victim) {
        // Its header would be the array's last: after the flush below every other segment
        // in use has a durable header, so one other suffices. The newest may hold the only
        // record of the array state (`Index::newest_segment`).
        return None;
    }
    let live = st.index.live_in(victim);
    if live.len() as u64 >= sh.layout.data_blocks_per_segment() {
        // Moving a full segment frees nothing.
        return None;
    }
    let mut trims = Vec::new();
    for (seq, place) in st.index.trim_records_in(victim) {
        if st.index.trim_is_live(seq, place.first, place.count) {
            trims.push((seq, place));
        } else {
            st.index.drop_trim_record(seq);
        }
    }
    st.stats.collections_started += 1;
    // Generation 0 (no failure ever) is what every header carries: nothing to lose.
    let restate = (st.index.newest_segment() == Some(victim) && st.state_gen > 0)
        .then(|| (st.state_gen, members::failed_bits(&st)));
    Some(Plan {
        victim,
        live,
        trims,
        epoch: st.remap_epoch,
        restate,
    })
}

/// Collects one segment; returns whether it freed one.
pub(crate) async fn collect_one(sh: &Arc<Shared>) -> BlockResult<bool> {
    sh.check_failed()?;
    // Every stripe handed out so far must be in the index before liveness is judged: a
    // stripe of the victim whose update is still pending would otherwise look dead.
    write::wait_in_flight(sh).await?;
    let Some(p) = plan(sh) else {
        return Ok(false);
    };
    tracing::debug!(
        "zapraid: collecting segment {} ({} live blocks, {} live trim records)",
        p.victim,
        p.live.len(),
        p.trims.len()
    );
    if let Some((gen, bits)) = p.restate {
        // A state stripe opens a segment whose header carries the state too; both are
        // durable before the victim goes (the flush below).
        let rxs = write::push_state(sh, gen, bits);
        write::wait_all(sh, rxs).await?;
    }
    if !move_blocks(sh, &p).await? {
        return Ok(false);
    }
    // The copies must be durable before the originals go: flush pads the open stripe, waits
    // for every stripe handed out (the copies among them) and flushes every member.
    write::flush(sh).await?;
    let (still, epoch) = {
        let st = sh.st.lock();
        (st.index.valid(p.victim).unwrap_or(0), st.remap_epoch)
    };
    if still != 0 && epoch != p.epoch {
        // A member failed meanwhile: its blocks moved addresses, so the compare-and-swap
        // refused their copies. The victim keeps them; a later collection moves them.
        return Ok(false);
    }
    if still != 0 {
        let why = format!(
            "segment {} still holds {still} valid blocks after collection",
            p.victim
        );
        sh.fail(why.clone());
        return Err(BlockError::Failed(why));
    }
    {
        let _gate = sh.io_gate.write().await;
        reset_victim(sh, p.victim).await?;
        let mut st = sh.st.lock();
        st.index
            .free_segment(p.victim)
            .map_err(|e| BlockError::Failed(e.to_string()))?;
        st.stats.segments_collected += 1;
    }
    // A member whose reset failed is failed now: record it before the collection completes.
    members::record_state(sh).await?;
    Ok(true)
}

/// Moves the victim's live blocks; false when a member failure re-addressed them meanwhile.
async fn move_blocks(sh: &Arc<Shared>, p: &Plan) -> BlockResult<bool> {
    let bs = sh.layout.block_size();
    for chunk in p.live.chunks(MOVE_BATCH_BLOCKS) {
        let permits = sh.admit(chunk.len() as u64).await?;
        let mut rxs = Vec::new();
        for (lba, pba, seq) in chunk {
            let mut data = vec![0u8; bs];
            if !read::read_at(sh, *pba, p.epoch, &mut data).await? {
                return Ok(false);
            }
            let rec = BlockRecord::new(RecordKind::Data, *lba, *seq, 0);
            rxs.push(push_relocation(sh, rec, data, *pba));
        }
        write::wait_all(sh, rxs).await?;
        drop(permits);
    }
    let mut rxs = Vec::new();
    for (seq, place) in &p.trims {
        let t = TrimRecord {
            first: place.first,
            count: place.count,
            seq: *seq,
        };
        let rec = BlockRecord::new(RecordKind::Trim, place.first, *seq, 0);
        rxs.push(push_relocation(sh, rec, t.encode(bs), place.pba));
    }
    write::wait_all(sh, rxs).await?;
    Ok(true)
}

/// Frees sealed segment `z` when it holds no live block and no live trim record, as a
/// collection frees its victim: the copies that made it dead are made durable first.
/// Returns whether it did. The caller holds `gc_lock`.
pub(crate) async fn free_if_dead(sh: &Arc<Shared>, z: u32) -> BlockResult<bool> {
    sh.check_failed()?;
    write::wait_in_flight(sh).await?;
    let dead = |sh: &Shared| {
        let st = sh.st.lock();
        st.index.state(z) == Some(crate::index::SegmentState::Sealed)
            && st.index.valid(z) == Some(0)
            && st.index.others_in_use(z)
            && st.index.newest_segment() != Some(z)
            && st
                .index
                .trim_records_in(z)
                .iter()
                .all(|(seq, p)| !st.index.trim_is_live(*seq, p.first, p.count))
    };
    if !dead(sh) {
        return Ok(false);
    }
    write::flush(sh).await?;
    {
        let _gate = sh.io_gate.write().await;
        if !dead(sh) {
            return Ok(false);
        }
        {
            let mut st = sh.st.lock();
            for (seq, _) in st.index.trim_records_in(z) {
                st.index.drop_trim_record(seq);
            }
        }
        reset_victim(sh, z).await?;
        let mut st = sh.st.lock();
        st.index
            .free_segment(z)
            .map_err(|e| BlockError::Failed(e.to_string()))?;
    }
    members::record_state(sh).await?;
    Ok(true)
}

/// Resets the victim's zone on every member.
async fn reset_victim(sh: &Arc<Shared>, victim: u32) -> BlockResult<()> {
    let zslba = sh.layout.zone_start(victim);
    let devs = sh.member_devs();
    let resets = devs
        .iter()
        .enumerate()
        .filter(|(i, _)| !members::is_failed(sh, *i))
        .map(|(i, m)| async move { (i, m.zone_mgmt(ZoneAction::Reset, zslba, false).await) });
    for (i, r) in futures::future::join_all(resets).await {
        if let Err(s) = r {
            members::member_failed(sh, i, &format!("reset of collected segment {victim}: {s}"));
        }
    }
    sh.check_failed()
}
