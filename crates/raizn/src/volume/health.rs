//! Member failure made durable: the degraded mode of a RAIZN array, recorded in a new
//! superblock generation on every survivor, and the failed mode after a second failure.
//!
//! Fault model: a member fails by returning a device error (Namespace Not Ready, a write
//! fault, an unrecovered read, a transfer or internal error), by being absent at open, or by
//! `fail_member`. Up to m failures (the parity count) degrade the array: each is written
//! (FUA) into a new superblock on every survivor before the command that found it
//! completes, so a reopen stays degraded and never trusts the stale members again. One
//! failure more makes the array failed: from then on it is read-only where the data still
//! is (a read of units on surviving members answers, a unit of a lost member fails with
//! Unrecovered Read Error), every other command returns an error, and the failure names
//! every failed member; data is never made up. Power may be lost while a superblock generation is being written: open takes
//! the union of the failed members the survivors' newest superblocks record.
//!
//! Lock order: superblock generations are written under the general log lock
//! (`general.rs`), taken after a zone's and a log's locks and before the `State` lock.

use zns::{NvmeResult, NvmeStatus};

use super::general::Rec;
use super::{RaiznError, RaiznVolume};
use crate::layout::MAX_PARITY;
use crate::meta::{MetaError, Superblock};

/// The status every command returns once more members failed than the parity covers.
pub(super) const ARRAY_FAILED: NvmeStatus = NvmeStatus::InternalError;

/// Whether a member's error means the member itself failed (rather than a zone rule).
pub(super) fn member_failed(status: NvmeStatus) -> bool {
    matches!(
        status,
        NvmeStatus::NamespaceNotReady
            | NvmeStatus::WriteFault
            | NvmeStatus::UnrecoveredReadError
            | NvmeStatus::DataTransferError
            | NvmeStatus::InternalError
    )
}

/// A set of at most `MAX_PARITY` members, in the order they failed; a plain value
/// (`Copy`) so it can be read out of the `State` lock and compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failed {
    members: [usize; MAX_PARITY as usize],
    len: u8,
}

impl Failed {
    /// The set holding `members` (at most `MAX_PARITY`; the rest is refused).
    pub fn of(members: &[usize]) -> Option<Failed> {
        let mut f = Failed::default();
        for m in members {
            if !f.insert(*m) {
                return None;
            }
        }
        Some(f)
    }

    pub fn contains(&self, member: usize) -> bool {
        self.as_slice().contains(&member)
    }

    pub fn as_slice(&self) -> &[usize] {
        &self.members[..self.len as usize]
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The first member that failed.
    pub fn first(&self) -> Option<usize> {
        self.as_slice().first().copied()
    }

    /// Adds `member`; false when the set is full and `member` is not in it.
    fn insert(&mut self, member: usize) -> bool {
        if self.contains(member) {
            return true;
        }
        match self.members.get_mut(self.len as usize) {
            Some(slot) => {
                *slot = member;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// The set without `member`.
    pub fn without(&self, member: usize) -> Failed {
        let mut f = Failed::default();
        for m in self.as_slice().iter().filter(|m| **m != member) {
            f.insert(*m);
        }
        f
    }
}

/// The health of the array, behind the `State` lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Health {
    /// Parity units per stripe: how many members may fail before the array does.
    pub parity: usize,
    /// The members that failed, at most `parity` of them.
    pub failed: Failed,
    /// One member more than the parity covers failed (the failed ones, then it): the
    /// array is failed.
    pub broken: Option<(Failed, usize)>,
    /// The failed members the survivors' superblocks record.
    pub persisted: Failed,
    /// The newest superblock generation written.
    pub generation: u64,
    /// The last member a command found failed, with the status it answered: an open whose
    /// recovery meets a failure starts over without that member, naming this cause.
    pub last_cause: Option<(usize, NvmeStatus)>,
}

impl Health {
    /// Notes that `member` failed; Err(the failed members, in order) when that is one
    /// failure more than the parity covers.
    pub fn note(&mut self, member: usize) -> Result<(), Vec<usize>> {
        if let Some((f, m)) = self.broken {
            return Err(broken_members(f, m));
        }
        if self.failed.contains(member) {
            return Ok(());
        }
        if self.failed.len() < self.parity && self.failed.insert(member) {
            return Ok(());
        }
        self.broken = Some((self.failed, member));
        Err(broken_members(self.failed, member))
    }
}

/// The members of a failed array, in the order they failed.
fn broken_members(f: Failed, m: usize) -> Vec<usize> {
    let mut v = f.as_slice().to_vec();
    v.push(m);
    v
}

impl RaiznVolume {
    /// Marks `member` failed and records it in the survivors' superblocks: reads reconstruct
    /// its units, writes skip it, and a reopen stays degraded. A second failed member makes
    /// the array failed (every command errors) and is refused naming both members.
    pub async fn fail_member(&self, member: usize) -> Result<(), RaiznError> {
        if member >= self.members.len() {
            return Err(RaiznError::NoSuchMember {
                member,
                members: self.members.len(),
            });
        }
        let noted = self.state.lock().health.note(member);
        if let Err(members) = noted {
            return Err(self.too_many(members));
        }
        tracing::warn!(member, "RAIZN member failed; the array is degraded");
        self.persist_health()
            .await
            .map_err(|status| match self.broken() {
                Some(e) => e,
                None => RaiznError::Member {
                    member,
                    what: "recording the failure in the superblocks",
                    status,
                },
            })
    }

    /// Why the array is failed, naming every failed member; None while it serves commands.
    pub fn broken(&self) -> Option<RaiznError> {
        let b = self.state.lock().health.broken;
        b.map(|(f, m)| self.too_many(broken_members(f, m)))
    }

    pub(super) fn too_many(&self, members: Vec<usize>) -> RaiznError {
        RaiznError::TooManyFailed {
            members,
            parity: self.layout.parity(),
        }
    }

    /// Refuses a command that writes or changes state once the array is failed (reads and
    /// reports answer on: `read_zone` refuses only the units of lost members).
    pub(super) fn check_usable(&self) -> NvmeResult<()> {
        match self.state.lock().health.broken {
            Some(_) => Err(ARRAY_FAILED),
            None => Ok(()),
        }
    }

    /// A member command failed: a member failure within the parity's reach degrades the
    /// array and the command goes on (it persists the failure before it completes); anything
    /// else is the command's error.
    pub(super) fn note_member_error(&self, member: usize, status: NvmeStatus) -> NvmeResult<()> {
        if !member_failed(status) {
            return Err(status);
        }
        let mut st = self.state.lock();
        if st.rebuild.as_ref().is_some_and(|r| r.member == member) {
            // The member being rebuilt failed: the rebuild is off and the member counts as
            // failed in every zone again (the survivors hold everything).
            tracing::warn!(member, %status, "RAIZN member failed during its rebuild");
            st.rebuild = None;
        }
        let was = st.health.failed;
        match st.health.note(member) {
            Ok(()) => {
                if !was.contains(member) {
                    tracing::warn!(member, %status, "RAIZN member failed; the array is degraded");
                    st.health.last_cause = Some((member, status));
                }
                Ok(())
            }
            Err(members) => {
                tracing::error!(
                    ?members,
                    %status,
                    "RAIZN members {members:?} failed, more than the parity covers; the array is failed"
                );
                Err(status)
            }
        }
    }

    /// Writes a new superblock generation (FUA) on every survivor when the failed member
    /// changed since the last one; a no-op otherwise. Called before a command that met a
    /// failure completes, so no acknowledged write depends on an unrecorded failure.
    pub(super) async fn persist_health(&self) -> NvmeResult<()> {
        let mut log = self.general.lock().await;
        let (failed, generation) = {
            let st = self.state.lock();
            let h = st.health;
            if h.broken.is_some() {
                return Err(ARRAY_FAILED);
            }
            if h.failed == h.persisted {
                return Ok(());
            }
            (h.failed, h.generation + 1)
        };
        let targets: Vec<usize> = (0..self.members.len())
            .filter(|m| !failed.contains(*m))
            .collect();
        self.append_general(
            &mut log,
            &targets,
            Rec::Superblock(generation, failed),
            true,
        )
        .await?;
        let mut st = self.state.lock();
        if st.health.failed != failed {
            // Another member failed while this generation was written: the array is failed.
            return Err(ARRAY_FAILED);
        }
        st.health.persisted = failed;
        st.health.generation = generation;
        Ok(())
    }

    /// Member `m`'s superblock of generation `generation`.
    pub(super) fn superblock_of(
        &self,
        m: usize,
        generation: u64,
        failed: Failed,
    ) -> Result<Vec<u8>, MetaError> {
        let f = failed.as_slice();
        Superblock {
            member_index: m as u32,
            generation,
            failed_member: f.first().map(|f| *f as u32),
            second_failed_member: f.get(1).map(|f| *f as u32),
            ..self.sb
        }
        .encode()
    }
}

/// Why a member's superblock could not be had.
pub(super) enum ReadSb {
    /// The member did not answer: it counts as failed.
    Device(NvmeStatus),
    /// The member answered with something that is not this array's superblock.
    Invalid(RaiznError),
}
