//! The read path: through the L2P; an unmapped or trimmed block reads as zeros; a block on a
//! failed member, or whose read fails, is rebuilt from the other blocks of its stripe, found
//! through the compact stripe table (docs/DESIGN.md, "Reads").
//!
//! Fault model: a member read may fail, and a member may fail while a read is in flight (its
//! blocks are then re-addressed: `Index::remap_failed_member`); with `m = 1` one missing
//! block per stripe is rebuilt, a second fails the read naming both members. Nothing returns
//! data of another block.

use futures::future::join_all;
use zns::{BlockError, BlockResult, Lba};

use super::Shared;
use crate::index::Mapping;
use crate::layout::Pba;

/// Times a block read looks its address up again when a member failure re-addressed it
/// meanwhile (each retry needs another failure, so `n` bounds them).
const READ_RETRIES: usize = 8;

pub(crate) async fn read(sh: &Shared, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
    sh.check_failed()?;
    sh.check_range(lba, buf.len())?;
    let _gate = sh.io_gate.read().await;
    let bs = sh.layout.block_size();
    let reads = buf
        .chunks_mut(bs)
        .enumerate()
        .map(|(i, out)| read_block(sh, lba + i as u64, out));
    for r in join_all(reads).await {
        r?;
    }
    Ok(())
}

async fn read_block(sh: &Shared, lba: Lba, out: &mut [u8]) -> BlockResult<()> {
    for _ in 0..READ_RETRIES {
        let (mapping, epoch) = {
            let st = sh.st.lock();
            let m = st
                .index
                .lookup(lba)
                .map_err(|e| BlockError::Failed(e.to_string()))?;
            (m, st.remap_epoch)
        };
        match mapping {
            Mapping::Unmapped | Mapping::Trimmed { .. } => {
                out.fill(0);
                return Ok(());
            }
            Mapping::Mapped { pba, .. } => match read_at(sh, pba, epoch, out).await? {
                true => return Ok(()),
                false => continue,
            },
        }
    }
    Err(BlockError::Failed(format!(
        "LBA {lba}: its address kept moving (members failing)"
    )))
}

/// Reads the block at `pba` (looked up at remap epoch `epoch`), rebuilding it when its
/// member failed or the read fails. Returns false when a member failure re-addressed blocks
/// since the lookup: the caller looks the address up again.
pub(crate) async fn read_at(
    sh: &Shared,
    pba: Pba,
    epoch: u64,
    out: &mut [u8],
) -> BlockResult<bool> {
    let member = usize::from(pba.member);
    let Some(dev) = sh.member(member) else {
        return Err(BlockError::Failed(format!("{pba:?}: no such member")));
    };
    if !super::members::is_failed(sh, member) {
        match dev
            .read(sh.layout.data_lba(pba.segment, pba.offset), out, None)
            .await
        {
            Ok(()) => return Ok(true),
            Err(s) => {
                tracing::warn!("member {member}: read of {pba:?} failed ({s}); rebuilding it")
            }
        }
    }
    degraded(sh, pba, epoch, out).await
}

/// The addresses of the other blocks of the stripe of `pba` on members not failed (at
/// least the `k` the code needs), or None when a member failure re-addressed blocks since
/// `epoch`.
fn peers_of(sh: &Shared, pba: Pba, epoch: u64) -> BlockResult<Option<(u32, Vec<Pba>)>> {
    let l = sh.layout;
    let st = sh.st.lock();
    if st.remap_epoch != epoch {
        return Ok(None);
    }
    let id = st
        .index
        .stripe_id(pba)
        .map_err(|e| BlockError::Failed(e.to_string()))?
        .ok_or_else(|| BlockError::DataLost(format!("no stripe id for {pba:?}")))?;
    let stripe = l.group_range(l.group_of(pba.offset)).0 + id;
    let mut peers = Vec::new();
    let mut failed = Vec::new();
    for member in (0..l.n() as u8).filter(|m| *m != pba.member) {
        if st
            .failed_members
            .get(usize::from(member))
            .copied()
            .unwrap_or(false)
        {
            failed.push(member.to_string());
            continue;
        }
        let offset = st
            .index
            .find_stripe_block(pba.segment, member, stripe)
            .map_err(|e| BlockError::Failed(e.to_string()))?
            .ok_or_else(|| {
                BlockError::DataLost(format!(
                    "{pba:?}: stripe {stripe} has no block on member {member}"
                ))
            })?;
        peers.push(Pba {
            segment: pba.segment,
            member,
            offset,
        });
    }
    if peers.len() < l.k as usize {
        return Err(BlockError::DataLost(format!(
            "{pba:?} on member {}: member(s) {} have failed too, more than {} parity block(s) cover",
            pba.member,
            failed.join(", "),
            l.m
        )));
    }
    Ok(Some((stripe, peers)))
}

/// Rebuilds the block at `pba` from the other blocks of its stripe (every other one with
/// `m = 1`; any `k` of them with Reed-Solomon).
async fn degraded(sh: &Shared, pba: Pba, epoch: u64, out: &mut [u8]) -> BlockResult<bool> {
    let l = sh.layout;
    let Some((stripe, peers)) = peers_of(sh, pba, epoch)? else {
        return Ok(false);
    };
    let bs = l.block_size();
    let reads = peers.iter().map(|p| async move {
        let mut b = vec![0u8; bs];
        let m = usize::from(p.member);
        let dev = sh
            .member(m)
            .ok_or_else(|| BlockError::Failed(format!("no member {m}")))?;
        dev.read(l.data_lba(p.segment, p.offset), &mut b, None)
            .await
            .map_err(|s| {
                BlockError::DataLost(format!(
                    "{pba:?} on member {} cannot be rebuilt: member {m} read failed too ({s})",
                    pba.member
                ))
            })?;
        Ok::<_, BlockError>((u32::from(p.member), b))
    });
    let mut have = Vec::with_capacity(peers.len());
    let mut first_err = None;
    for r in join_all(reads).await {
        match r {
            Ok(b) => have.push(b),
            Err(e) => first_err = first_err.or(Some(e)),
        }
    }
    // With m = 1 every other block is needed; Reed-Solomon needs any k.
    let need = if l.m == 1 {
        l.n() as usize - 1
    } else {
        l.k as usize
    };
    if have.len() < need {
        return Err(first_err.unwrap_or_else(|| {
            BlockError::DataLost(format!("{pba:?}: too few blocks of its stripe left"))
        }));
    }
    let refs: Vec<(u32, &[u8])> = have.iter().map(|(m, b)| (*m, &b[..])).collect();
    let block = crate::code::rebuild_block(&l, stripe, &refs, u32::from(pba.member))
        .map_err(|e| BlockError::DataLost(format!("{pba:?}: {e}")))?;
    if block.len() != out.len() {
        return Err(BlockError::Failed(format!(
            "{pba:?}: rebuilt {} bytes for a block of {}",
            block.len(),
            out.len()
        )));
    }
    out.copy_from_slice(&block);
    // A failure during the peer reads may have re-addressed them: rebuild again if so.
    Ok(sh.st.lock().remap_epoch == epoch)
}
