//! Member failure made durable: the degraded mode of a RAIZN array, recorded in a new
//! superblock generation on every survivor, and the failed mode after a second failure.
//!
//! Fault model: a member fails by returning a device error (Namespace Not Ready, a write
//! fault, an unrecovered read, a transfer or internal error), by being absent at open, or by
//! `fail_member`. One failure degrades the array: it is written (FUA) into a new superblock
//! on every survivor before the command that found it completes, so a reopen stays degraded
//! and never trusts the stale member again. A second failure makes the array failed: every
//! command returns an error from then on and the failure names both members; data is never
//! made up. Power may be lost while a superblock generation is being written: open takes
//! the union of the failed members the survivors' newest superblocks record.
//!
//! Lock order: superblock generations are written under the general log lock
//! (`general.rs`), taken after a zone's and a log's locks and before the `State` lock.

use zns::{NvmeResult, NvmeStatus};

use super::general::Rec;
use super::{RaiznError, RaiznVolume};
use crate::meta::{MetaError, Superblock};

/// The status every command returns once two members failed.
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

/// The health of the array, behind the `State` lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Health {
    /// The member that failed, if one did.
    pub failed: Option<usize>,
    /// Two members failed (the first, then the second): the array is failed.
    pub broken: Option<(usize, usize)>,
    /// The failed member the survivors' superblocks record.
    pub persisted: Option<usize>,
    /// The newest superblock generation written.
    pub generation: u64,
}

impl Health {
    /// Notes that `member` failed; Err(the two members) when that is a second failure.
    pub fn note(&mut self, member: usize) -> Result<(), (usize, usize)> {
        if let Some(b) = self.broken {
            return Err(b);
        }
        match self.failed {
            None => {
                self.failed = Some(member);
                Ok(())
            }
            Some(f) if f == member => Ok(()),
            Some(f) => {
                self.broken = Some((f, member));
                Err((f, member))
            }
        }
    }
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
        if let Err((a, b)) = noted {
            return Err(self.too_many(a, b));
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

    /// Why the array is failed, naming both failed members; None while it serves commands.
    pub fn broken(&self) -> Option<RaiznError> {
        let b = self.state.lock().health.broken;
        b.map(|(a, b)| self.too_many(a, b))
    }

    pub(super) fn too_many(&self, a: usize, b: usize) -> RaiznError {
        RaiznError::TooManyFailed {
            members: vec![a, b],
            parity: self.layout.parity(),
        }
    }

    /// Refuses every command once the array is failed.
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
                if was.is_none() {
                    tracing::warn!(member, %status, "RAIZN member failed; the array is degraded");
                }
                Ok(())
            }
            Err((a, b)) => {
                tracing::error!(
                    first = a,
                    second = b,
                    %status,
                    "RAIZN members {a} and {b} failed; the array is failed"
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
            .filter(|m| failed != Some(*m))
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
        failed: Option<usize>,
    ) -> Result<Vec<u8>, MetaError> {
        Superblock {
            member_index: m as u32,
            generation,
            failed_member: failed.map(|f| f as u32),
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
