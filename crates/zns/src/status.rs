//! NVMe completion statuses that zoned devices return, as a typed error.
//!
//! Every variant carries its Status Code Type (SCT) and Status Code (SC) from the NVMe base
//! and ZNS command set specifications; `Display` prints the specification's name exactly, so
//! that tools and people can match on it.

/// An NVMe command completion status other than success.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum NvmeStatus {
    /// SCT 0h / SC 02h.
    #[error("Invalid Field")]
    InvalidField,
    /// SCT 0h / SC 04h: the transfer to or from the host failed; retryable.
    #[error("Data Transfer Error")]
    DataTransferError,
    /// SCT 0h / SC 05h: the command was in flight when power was lost.
    #[error("Commands Aborted due to Power Loss Notification")]
    AbortedPowerLoss,
    /// SCT 0h / SC 06h: a transient controller failure; retryable.
    #[error("Internal Error")]
    InternalError,
    /// SCT 0h / SC 80h.
    #[error("LBA Out of Range")]
    LbaOutOfRange,
    /// SCT 0h / SC 82h: the namespace is gone (whole-device failure); not retryable.
    #[error("Namespace Not Ready")]
    NamespaceNotReady,
    /// SCT 0h / SC 20h: the namespace is write protected (an image opened read-only); not
    /// retryable.
    #[error("Namespace is Write Protected")]
    NamespaceWriteProtected,
    /// SCT 0h / SC 01h: the device does not implement the command.
    #[error("Invalid Command Opcode")]
    InvalidOpcode,
    /// SCT 1h / SC 83h.
    #[error("Command Size Limit Exceeded")]
    CommandSizeLimitExceeded,
    /// SCT 1h / SC B8h.
    #[error("Zone Boundary Error")]
    ZoneBoundaryError,
    /// SCT 1h / SC B9h.
    #[error("Zone Is Full")]
    ZoneIsFull,
    /// SCT 1h / SC BAh.
    #[error("Zone Is Read Only")]
    ZoneIsReadOnly,
    /// SCT 1h / SC BBh.
    #[error("Zone Is Offline")]
    ZoneIsOffline,
    /// SCT 1h / SC BCh.
    #[error("Zone Invalid Write")]
    ZoneInvalidWrite,
    /// SCT 1h / SC BDh.
    #[error("Too Many Active Zones")]
    TooManyActiveZones,
    /// SCT 1h / SC BEh.
    #[error("Too Many Open Zones")]
    TooManyOpenZones,
    /// SCT 1h / SC BFh.
    #[error("Invalid Zone State Transition")]
    InvalidZoneStateTransition,
    /// SCT 2h / SC 81h: media error on read.
    #[error("Unrecovered Read Error")]
    UnrecoveredReadError,
    /// SCT 2h / SC 80h: media error on write (for an emulated device, the host could not
    /// write its image); not retryable.
    #[error("Write Fault")]
    WriteFault,
}

impl NvmeStatus {
    /// Every status, for tables and round-trip tests.
    pub const ALL: [NvmeStatus; 19] = [
        NvmeStatus::InvalidField,
        NvmeStatus::DataTransferError,
        NvmeStatus::AbortedPowerLoss,
        NvmeStatus::InternalError,
        NvmeStatus::LbaOutOfRange,
        NvmeStatus::NamespaceNotReady,
        NvmeStatus::InvalidOpcode,
        NvmeStatus::CommandSizeLimitExceeded,
        NvmeStatus::ZoneBoundaryError,
        NvmeStatus::ZoneIsFull,
        NvmeStatus::ZoneIsReadOnly,
        NvmeStatus::ZoneIsOffline,
        NvmeStatus::ZoneInvalidWrite,
        NvmeStatus::TooManyActiveZones,
        NvmeStatus::TooManyOpenZones,
        NvmeStatus::InvalidZoneStateTransition,
        NvmeStatus::UnrecoveredReadError,
        NvmeStatus::NamespaceWriteProtected,
        NvmeStatus::WriteFault,
    ];

    /// Status Code Type.
    pub fn sct(self) -> u8 {
        match self {
            NvmeStatus::InvalidField
            | NvmeStatus::DataTransferError
            | NvmeStatus::AbortedPowerLoss
            | NvmeStatus::InternalError
            | NvmeStatus::LbaOutOfRange
            | NvmeStatus::NamespaceNotReady
            | NvmeStatus::NamespaceWriteProtected
            | NvmeStatus::InvalidOpcode => 0,
            NvmeStatus::UnrecoveredReadError | NvmeStatus::WriteFault => 2,
            _ => 1,
        }
    }

    /// Status Code.
    pub fn sc(self) -> u8 {
        match self {
            NvmeStatus::InvalidOpcode => 0x01,
            NvmeStatus::InvalidField => 0x02,
            NvmeStatus::DataTransferError => 0x04,
            NvmeStatus::AbortedPowerLoss => 0x05,
            NvmeStatus::InternalError => 0x06,
            NvmeStatus::NamespaceWriteProtected => 0x20,
            NvmeStatus::WriteFault => 0x80,
            NvmeStatus::LbaOutOfRange => 0x80,
            NvmeStatus::NamespaceNotReady => 0x82,
            NvmeStatus::CommandSizeLimitExceeded => 0x83,
            NvmeStatus::UnrecoveredReadError => 0x81,
            NvmeStatus::ZoneBoundaryError => 0xB8,
            NvmeStatus::ZoneIsFull => 0xB9,
            NvmeStatus::ZoneIsReadOnly => 0xBA,
            NvmeStatus::ZoneIsOffline => 0xBB,
            NvmeStatus::ZoneInvalidWrite => 0xBC,
            NvmeStatus::TooManyActiveZones => 0xBD,
            NvmeStatus::TooManyOpenZones => 0xBE,
            NvmeStatus::InvalidZoneStateTransition => 0xBF,
        }
    }

    /// The 11-bit status field (SCT << 8 | SC) as NVMe tools print it, e.g. 0x1b9.
    pub fn code(self) -> u16 {
        (u16::from(self.sct()) << 8) | u16::from(self.sc())
    }

    /// Looks a status up by its 11-bit code.
    pub fn from_code(code: u16) -> Option<NvmeStatus> {
        NvmeStatus::ALL.into_iter().find(|s| s.code() == code)
    }

    /// Whether retrying the same command may succeed (the Do Not Retry bit is clear).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            NvmeStatus::DataTransferError
                | NvmeStatus::InternalError
                | NvmeStatus::AbortedPowerLoss
        )
    }
}

/// Result of a zoned-device command.
pub type NvmeResult<T> = Result<T, NvmeStatus>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_specification_and_round_trip() {
        assert_eq!(NvmeStatus::ZoneBoundaryError.code(), 0x1B8);
        assert_eq!(NvmeStatus::InvalidZoneStateTransition.code(), 0x1BF);
        assert_eq!(NvmeStatus::CommandSizeLimitExceeded.code(), 0x183);
        assert_eq!(NvmeStatus::LbaOutOfRange.code(), 0x080);
        assert_eq!(NvmeStatus::InvalidField.code(), 0x002);
        for s in NvmeStatus::ALL {
            assert_eq!(NvmeStatus::from_code(s.code()), Some(s));
        }
        assert_eq!(NvmeStatus::from_code(0x7FF), None);
        assert_eq!(NvmeStatus::ZoneIsFull.to_string(), "Zone Is Full");
        assert_eq!(NvmeStatus::WriteFault.code(), 0x280);
        assert_eq!(NvmeStatus::NamespaceWriteProtected.code(), 0x020);
    }

    #[test]
    fn only_transfer_internal_and_power_loss_errors_are_retryable() {
        // A host I/O error on an emulated device's image (Write Fault) and a write to a
        // read-only image (Namespace is Write Protected) must not be retried: the same
        // command fails the same way again.
        let transient: Vec<NvmeStatus> = NvmeStatus::ALL
            .into_iter()
            .filter(|s| s.is_transient())
            .collect();
        assert_eq!(
            transient,
            [
                NvmeStatus::DataTransferError,
                NvmeStatus::AbortedPowerLoss,
                NvmeStatus::InternalError
            ]
        );
    }
}
