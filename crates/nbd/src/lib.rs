//! An NBD (Network Block Device) server that exports any zonestack `BlockDevice` to
//! unmodified clients: qemu, nbdcopy, nbdfuse, fio's nbd engine, the Linux kernel.
//!
//! The protocol core is sans-IO (`proto` for the bytes, `negotiate` for option haggling,
//! `request` for checking requests, `span` for cutting byte ranges into blocks); the async
//! shell (`server`, `conn`) does the socket work with tokio. See docs/DESIGN.md, "NBD server".
//!
//! ```no_run
//! # async fn demo() -> Result<(), nbd::ServerError> {
//! use std::sync::Arc;
//! let disk = Arc::new(nbd::MemDisk::new(4096, 1 << 18).expect("valid size"));
//! let server = nbd::NbdServer::bind(nbd::ServerConfig::unix("/tmp/vol.sock"), disk)?;
//! println!("connect to {}", server.local_uri());
//! server.serve_until(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

mod budget;
mod config;
mod conn;
mod error;
mod executor;
mod inbox;
mod io;
mod locks;
pub mod memdisk;
pub mod negotiate;
pub mod proto;
pub mod request;
mod server;
pub mod span;

pub use config::{Listen, ServerConfig, DEFAULT_PORT};
pub use error::ServerError;
pub use memdisk::{MemDisk, MemDiskCounters, MemDiskError};
pub use server::{NbdServer, ServerHandle, ServerStats};
