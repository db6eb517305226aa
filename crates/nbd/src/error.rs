//! Errors of setting up and running an NBD server (not of single requests: those become an
//! errno in a reply and never stop the server).

use std::net::SocketAddr;
use std::path::PathBuf;

use zns::BlockError;

/// Why a server could not start, or what went wrong when it stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("invalid NBD server configuration: {0}")]
    Config(String),
    #[error(
        "refusing to listen on {0}: it is not a loopback address; set allow_remote to export \
         the volume to other hosts"
    )]
    RemoteNotAllowed(SocketAddr),
    #[error("{0} already exists; remove it or choose another socket path")]
    SocketExists(PathBuf),
    #[error("cannot listen on {what}: {source}")]
    Bind {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the volume cannot be exported over NBD: {0}")]
    Volume(String),
    #[error("cannot start the thread that runs NBD requests: {0}")]
    Thread(#[source] std::io::Error),
    #[error("flushing the volume at shutdown failed: {0}")]
    Flush(#[source] BlockError),
}
