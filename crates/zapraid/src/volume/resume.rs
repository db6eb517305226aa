//! Resuming a recovery onto a replacement that a power cut (or a failed command) stopped
//! (docs/DESIGN.md, "Recovery onto a replacement"): the replacement's own zones are the
//! progress record. A zone is kept, and its segment not rebuilt again, only when it is
//! exactly what a rebuild would write now: Full, the segment's header with this member's
//! index and the segment's current sequence floor (the same incarnation of the segment),
//! one record per stripe the segment holds at offset = stripe, and each record equal to the
//! one rebuilt from the other members' records (a hole where the stripe is not whole on
//! them). Records name the writes (LBA and sequence number), so equal records mean equal
//! blocks. Anything else (a zone cut short, a member's own zone from before it failed, a
//! segment collected and reopened, a stripe torn since) is reset and rebuilt.
//!
//! Fault model: as the recovery's. The kept zones survived the cut, so they are on the
//! medium; without a cut they may sit in the replacement's cache, and the recovery flushes
//! the replacement before the member is marked healthy, as for zones it rebuilds.

use std::collections::BTreeMap;

use zns::{ReportFilter, ZoneDescriptor, ZoneState, ZonedDevice};

use super::{members, recover, Shared, ZapRaidError};
use crate::index::SegmentState;
use crate::meta::{BlockRecord, RecordKind, SegmentHeader};

/// The segments whose zones on `dev` (described by `zones`) a recovery of `member` may keep,
/// with the sequence floor each was rebuilt from.
pub(crate) async fn rebuilt_segments(
    sh: &Shared,
    member: usize,
    dev: &dyn ZonedDevice,
    zones: &[ZoneDescriptor],
) -> Result<BTreeMap<u32, u64>, ZapRaidError> {
    let mut keep = BTreeMap::new();
    for (z, d) in zones.iter().enumerate() {
        let z = z as u32;
        if d.state != ZoneState::Full {
            continue;
        }
        let (state, floor, stripes) = {
            let st = sh.st.lock();
            (
                st.index.state(z),
                st.index.floor(z),
                st.index.stripes_written(z),
            )
        };
        let Some(floor) = floor.filter(|_| state == Some(SegmentState::Sealed)) else {
            continue;
        };
        if is_rebuilt(sh, member, dev, z, d, floor, stripes).await? {
            keep.insert(z, floor);
        }
    }
    Ok(keep)
}

/// Whether `dev`'s zone `z` (descriptor `d`) is segment `z`'s rebuild for `member` as it is
/// now (see the module comment).
async fn is_rebuilt(
    sh: &Shared,
    member: usize,
    dev: &dyn ZonedDevice,
    z: u32,
    d: &ZoneDescriptor,
    floor: u64,
    stripes: u32,
) -> Result<bool, ZapRaidError> {
    let l = sh.layout;
    let mut b = vec![0u8; l.block_size()];
    if dev.read(d.start, &mut b, None).await.is_err() {
        return Ok(false);
    }
    let ours = SegmentHeader::decode(&b).is_ok_and(|h| {
        h.uuid == sh.uuid && usize::from(h.member) == member && h.seq_floor == floor
    });
    if !ours {
        return Ok(false);
    }
    // A zone that does not decode is not kept: it is reset and rebuilt.
    let Ok(mine) = recover::load_member(dev, &l, member, z, d).await else {
        return Ok(false);
    };
    if mine.len() != stripes as usize || mine.iter().zip(0..).any(|(r, s)| r.stripe != s) {
        return Ok(false);
    }
    let by_stripe = others(sh, member, z, stripes).await?;
    for (s, (got, peers)) in mine.iter().zip(&by_stripe).enumerate() {
        if expected(sh, member, s as u32, peers).as_ref() != Some(got) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The other members' records of segment `z`, by stripe (holes left out).
async fn others(
    sh: &Shared,
    member: usize,
    z: u32,
    stripes: u32,
) -> Result<Vec<Vec<(u32, BlockRecord)>>, ZapRaidError> {
    let l = sh.layout;
    let mut by_stripe = vec![Vec::new(); stripes as usize];
    for j in (0..l.n() as usize).filter(|j| *j != member && !members::is_failed(sh, *j)) {
        let Some(peer) = sh.member(j) else {
            return Err(ZapRaidError::Corrupt(format!("no member {j}")));
        };
        let d = peer
            .report_zones(l.zone_start(z), ReportFilter::All, false, 1)
            .await
            .map_err(|s| {
                super::rebuild::second_failure(sh, j, &format!("report of zone {z}: {s}"))
            })?
            .zones
            .first()
            .copied()
            .ok_or_else(|| ZapRaidError::Corrupt(format!("member {j} has no zone {z}")))?;
        let recs = recover::load_member(peer.as_ref(), &l, j, z, &d).await?;
        for r in recs.into_iter().filter(|r| r.kind != RecordKind::Hole) {
            if let Some(v) = by_stripe.get_mut(r.stripe as usize) {
                v.push((j as u32, r));
            }
        }
    }
    Ok(by_stripe)
}

/// The record a rebuild writes for `member`'s block of stripe `s` from the other members'
/// records of it (as `rebuild::rebuild_block` decides), `None` when they do not rebuild one.
fn expected(
    sh: &Shared,
    member: usize,
    s: u32,
    peers: &[(u32, BlockRecord)],
) -> Option<BlockRecord> {
    if let Some((_, r)) = peers.iter().find(|(_, r)| r.kind == RecordKind::State) {
        return Some(*r);
    }
    if sh.layout.is_summary(s) {
        return Some(BlockRecord::summary(s));
    }
    if peers.len() != super::rebuild::whole_on_others(sh, member) {
        return Some(BlockRecord::hole(s));
    }
    crate::code::rebuild_record(&sh.layout, s, peers, member as u32)
}
