//! The read path: through the L2P; an unmapped or trimmed block reads as zeros; a block on a
//! failed member, or whose read fails, is rebuilt from the other blocks of its stripe, found
//! through the compact stripe table (docs/DESIGN.md, "Reads").
//!
//! Fault model: a member read may fail; with `m = 1` one failure per stripe is rebuilt, a
//! second fails the read with the member's status. Nothing returns data of another block.

use futures::future::join_all;
use zns::{BlockError, BlockResult, Lba};

use super::Shared;
use crate::index::Mapping;
use crate::layout::Pba;
use zns::parity::xor_into;

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
    let mapping = sh
        .st
        .lock()
        .index
        .lookup(lba)
        .map_err(|e| BlockError::Failed(e.to_string()))?;
    match mapping {
        Mapping::Unmapped | Mapping::Trimmed { .. } => {
            out.fill(0);
            Ok(())
        }
        Mapping::Mapped { pba, .. } => read_at(sh, pba, out).await,
    }
}

/// Reads the block at `pba`, rebuilding it when its member failed or the read fails.
pub(crate) async fn read_at(sh: &Shared, pba: Pba, out: &mut [u8]) -> BlockResult<()> {
    let member_failed = sh
        .st
        .lock()
        .failed_members
        .get(usize::from(pba.member))
        .copied()
        .unwrap_or(false);
    if !member_failed {
        let dev = &sh.members[usize::from(pba.member)];
        match dev
            .read(sh.layout.data_lba(pba.segment, pba.offset), out, None)
            .await
        {
            Ok(()) => return Ok(()),
            Err(s) => tracing::warn!(
                "member {}: read of {pba:?} failed ({s}); rebuilding it",
                pba.member
            ),
        }
    }
    degraded(sh, pba, out).await
}

/// Rebuilds the block at `pba` from the other `n - 1` blocks of its stripe.
async fn degraded(sh: &Shared, pba: Pba, out: &mut [u8]) -> BlockResult<()> {
    let l = sh.layout;
    let peers: Vec<Pba> = {
        let st = sh.st.lock();
        let id = st
            .index
            .stripe_id(pba)
            .map_err(|e| BlockError::Failed(e.to_string()))?
            .ok_or_else(|| BlockError::DataLost(format!("no stripe id for {pba:?}")))?;
        let stripe = l.group_range(l.group_of(pba.offset)).0 + id;
        let mut peers = Vec::new();
        for member in (0..l.n() as u8).filter(|m| *m != pba.member) {
            if st
                .failed_members
                .get(usize::from(member))
                .copied()
                .unwrap_or(false)
            {
                return Err(BlockError::DataLost(format!(
                    "{pba:?}: member {member} has failed too"
                )));
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
        peers
    };
    let bs = l.block_size();
    let reads = peers.iter().map(|p| async move {
        let mut b = vec![0u8; bs];
        let dev = &sh.members[usize::from(p.member)];
        dev.read(l.data_lba(p.segment, p.offset), &mut b, None)
            .await
            .map(|_| b)
    });
    out.fill(0);
    for r in join_all(reads).await {
        xor_into(out, &r.map_err(BlockError::Device)?);
    }
    Ok(())
}
