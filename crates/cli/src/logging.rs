//! Logging: a `tracing` subscriber that writes to stderr, at the level `--log-level` names
//! (warn by default) or as the `RUST_LOG` filter says when that is set. Stdout stays for the
//! command's output, which scripts parse.

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

use crate::error::CliError;

/// The levels `--log-level` accepts, most to least severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    fn directive(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// The filter to log with: `RUST_LOG` when it is set and not empty (it wins over the
/// option, as in other Rust tools), else `level`, else warn. A `RUST_LOG` that does not parse
/// is a usage error rather than a silent fallback, so a typo never hides the logs asked for.
fn filter(rust_log: Option<&str>, level: Option<LogLevel>) -> Result<EnvFilter, CliError> {
    match rust_log.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => EnvFilter::try_new(v)
            .map_err(|e| CliError::Usage(format!("RUST_LOG={v} is not a valid filter: {e}"))),
        None => Ok(EnvFilter::new(level.unwrap_or(LogLevel::Warn).directive())),
    }
}

/// Installs the subscriber for the whole process.
pub fn init(level: Option<LogLevel>) -> Result<(), CliError> {
    let rust_log = match std::env::var("RUST_LOG") {
        Ok(v) => Some(v),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(CliError::Usage("RUST_LOG is not UTF-8".into()))
        }
    };
    let filter = filter(rust_log.as_deref(), level)?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| CliError::Other(format!("cannot install the logger: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_wins_over_the_option_and_a_bad_one_is_refused() {
        let f = |env, level| filter(env, level).map(|f| f.to_string());
        assert_eq!(f(None, None).ok().as_deref(), Some("warn"));
        assert_eq!(
            f(None, Some(LogLevel::Debug)).ok().as_deref(),
            Some("debug")
        );
        assert_eq!(
            f(Some(" "), Some(LogLevel::Info)).ok().as_deref(),
            Some("info")
        );
        assert_eq!(
            f(Some("nbd=trace"), Some(LogLevel::Error)).ok().as_deref(),
            Some("nbd=trace")
        );
        assert!(matches!(
            filter(Some("nbd=loud"), None),
            Err(CliError::Usage(_))
        ));
    }
}
