//! Member failure and the durable array state: which members have failed, with a
//! generation. A failure is recorded on every surviving member (a replicated state stripe,
//! then a flush) before any command that depends on it completes: a write whose stripe omits
//! the failed member, a flush (docs/DESIGN.md, "Member failure").
//!
//! Fault model: a member command may fail at any time, including the commands that record a
//! failure; a failure beyond `m` fails the volume naming every failed member, never serves a
//! stripe with two blocks missing. Power may be cut at any point: a state that was not yet
//! recorded is as if the failure had not happened (no command depending on it completed),
//! and one that was is found again at open (in the state stripe or in a later segment
//! header).

use std::sync::Arc;

use zns::{BlockError, BlockResult};

use super::write::{self, State};
use super::Shared;

/// The failed members as a bitmap (bit `i` = member `i`).
pub(crate) fn failed_bits(st: &State) -> u64 {
    st.failed_members
        .iter()
        .enumerate()
        .filter(|(_, f)| **f)
        .fold(0, |acc, (i, _)| acc | 1 << i)
}

pub(crate) fn is_failed(sh: &Shared, member: usize) -> bool {
    sh.st
        .lock()
        .failed_members
        .get(member)
        .copied()
        .unwrap_or(true)
}

/// Marks `member` failed (once): from now on its blocks are rebuilt from the others and
/// stripes omit it. A failure beyond the `m` parity blocks fails the volume instead, naming
/// every failed member.
pub(crate) fn member_failed(sh: &Shared, member: usize, why: &str) {
    let mut st = sh.st.lock();
    if st.failed_members.get(member).copied().unwrap_or(true) {
        return;
    }
    let before: Vec<usize> = (0..st.failed_members.len())
        .filter(|i| st.failed_members.get(*i).copied().unwrap_or(false))
        .collect();
    if before.len() >= sh.layout.m as usize {
        drop(st);
        let list: Vec<String> = before.iter().map(|i| format!("member {i}")).collect();
        sh.fail(format!(
            "member {member} failed ({why}) after {} had failed: more failures than {} parity block(s) cover",
            list.join(", "),
            sh.layout.m
        ));
        return;
    }
    if let Some(f) = st.failed_members.get_mut(member) {
        *f = true;
    }
    st.state_gen += 1;
    st.remap_epoch += 1;
    if let Err(e) = st.index.remap_failed_member(member as u8) {
        drop(st);
        sh.fail(format!(
            "member {member} failed ({why}); remapping its blocks: {e}"
        ));
        return;
    }
    let bits = failed_bits(&st);
    drop(st);
    tracing::error!("zapraid member {member} failed: {why}; the array runs degraded");
    sh.member_events.set(bits);
}

/// Marks `member` healthy again (its replacement holds every block it held): a new array
/// state, recorded on every member by the caller (`record_state`).
pub(crate) fn member_recovered(sh: &Shared, member: usize) {
    let mut st = sh.st.lock();
    if let Some(f) = st.failed_members.get_mut(member) {
        *f = false;
    }
    st.state_gen += 1;
    let bits = failed_bits(&st);
    drop(st);
    tracing::info!("zapraid member {member} is healthy again");
    sh.member_events.set(bits);
}

/// Makes the current array state durable on every surviving member: a replicated state
/// stripe, then a flush of every survivor. Returns at once when it already is. A member
/// failing meanwhile makes a newer state, which is written in turn.
pub(crate) async fn record_state(sh: &Arc<Shared>) -> BlockResult<()> {
    let mut durable = sh.state_lock.lock().await;
    // Each round either succeeds or records one more failure; more than n rounds would mean
    // more failures than members.
    for _ in 0..=sh.layout.n() {
        sh.check_failed()?;
        let (gen, bits) = {
            let st = sh.st.lock();
            (st.state_gen, failed_bits(&st))
        };
        if *durable >= gen {
            return Ok(());
        }
        let rxs = write::push_state(sh, gen, bits);
        write::wait_all(sh, rxs).await?;
        sh.flush_members().await?;
        if sh.st.lock().state_gen == gen {
            *durable = gen;
            return Ok(());
        }
    }
    sh.check_failed()?;
    Err(BlockError::Failed(
        "the array state could not be recorded".into(),
    ))
}
