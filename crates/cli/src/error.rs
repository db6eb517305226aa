//! The CLI's error type: why a command failed, and the exit code that says so (1 for a
//! device or host failure, 2 for a malformed request).

use zns::NvmeStatus;

/// Why a command failed, and how the process exits for it.
#[derive(Debug)]
pub enum CliError {
    /// A device command completed with an NVMe error status (exit 1).
    Device(NvmeStatus),
    /// The request itself was malformed (exit 2).
    Usage(String),
    /// Anything else: a missing or corrupt image, host I/O (exit 1).
    Other(String),
    /// Stdout's reader went away (`zonestack zone report IMG | head -1`): the command stops
    /// quietly, as a Unix tool killed by SIGPIPE does, and exits 141 (128 + SIGPIPE), the
    /// status a shell reports for such a tool.
    BrokenPipe,
}

impl CliError {
    pub fn message(&self) -> String {
        match self {
            CliError::Device(s) => format!("{s} (status {:#05x})", s.code()),
            CliError::Usage(m) | CliError::Other(m) => m.clone(),
            CliError::BrokenPipe => "broken pipe".to_string(),
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::BrokenPipe => 141,
            _ => 1,
        }
    }
}

impl From<NvmeStatus> for CliError {
    fn from(s: NvmeStatus) -> Self {
        CliError::Device(s)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return CliError::BrokenPipe;
        }
        CliError::Other(e.to_string())
    }
}

pub type CliResult = Result<(), CliError>;
