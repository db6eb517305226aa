//! Where a server listens: loopback TCP by default, other addresses only when asked for, Unix
//! sockets that never replace an existing file, and URIs clients can use as printed.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use common::{Addr, Client, TestServer};
use nbd::{Listen, MemDisk, NbdServer, ServerConfig, ServerError};
use zns::{BlockDevice, BlockResult, Lba};

fn disk() -> Arc<MemDisk> {
    Arc::new(MemDisk::new(4096, 16).expect("memdisk"))
}

#[test]
fn default_config_is_loopback_on_the_nbd_port() {
    let c = ServerConfig::default();
    assert_eq!(
        c.listen,
        Listen::Tcp("127.0.0.1:10809".parse().expect("addr"))
    );
    assert!(!c.allow_remote && !c.multi_conn);
    assert_eq!(c.export_name, "");
}

#[test]
fn non_loopback_addresses_need_allow_remote() {
    let any: SocketAddr = "0.0.0.0:0".parse().expect("addr");
    match NbdServer::bind(ServerConfig::tcp(any), disk()) {
        Err(e @ ServerError::RemoteNotAllowed(_)) => {
            assert!(e.to_string().contains("allow_remote"), "{e}");
        }
        other => panic!("expected a refusal, got {:?}", other.map(|s| s.local_uri())),
    }
    let cfg = ServerConfig {
        allow_remote: true,
        ..ServerConfig::tcp(any)
    };
    let server = NbdServer::bind(cfg, disk()).expect("explicitly allowed");
    assert!(server.local_addr().expect("tcp").port() != 0);
}

#[test]
fn tcp_uri_names_the_chosen_port_and_export() {
    let s = TestServer::tcp(disk(), |c| c.export_name = "vol 1".into());
    let Addr::Tcp(a) = s.addr else {
        unreachable!("tcp server")
    };
    assert_eq!(s.uri, format!("nbd://127.0.0.1:{}/vol%201", a.port()));
    assert_eq!(
        Client::go(&s.addr, "vol 1").expect("go").export.size,
        16 * 4096
    );
}

#[test]
fn an_existing_socket_path_is_never_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("taken");
    std::fs::write(&path, b"precious").expect("write");
    match NbdServer::bind(ServerConfig::unix(&path), disk()) {
        Err(e @ ServerError::SocketExists(_)) => assert!(e.to_string().contains("already exists")),
        other => panic!("expected a refusal, got {:?}", other.map(|s| s.local_uri())),
    }
    assert_eq!(std::fs::read(&path).expect("still there"), b"precious");
}

#[test]
fn a_socket_of_a_server_never_run_is_removed_on_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s");
    let server = NbdServer::bind(ServerConfig::unix(&path), disk()).expect("bind");
    assert!(path.exists());
    assert_eq!(
        server.local_uri(),
        format!("nbd+unix:///?socket={}", path.display())
    );
    drop(server);
    assert!(!path.exists());
}

/// A volume with a block size no NBD client can be told about.
struct OddBlocks;

#[async_trait]
impl BlockDevice for OddBlocks {
    fn block_size(&self) -> u32 {
        520
    }
    fn size_blocks(&self) -> u64 {
        8
    }
    async fn read(&self, _: Lba, _: &mut [u8]) -> BlockResult<()> {
        Ok(())
    }
    async fn write(&self, _: Lba, _: &[u8], _: bool) -> BlockResult<()> {
        Ok(())
    }
    async fn flush(&self) -> BlockResult<()> {
        Ok(())
    }
    async fn trim(&self, _: Lba, _: u64) -> BlockResult<()> {
        Ok(())
    }
    async fn write_zeroes(&self, _: Lba, _: u64, _: bool) -> BlockResult<()> {
        Ok(())
    }
}

#[test]
fn bad_volumes_and_limits_are_refused_at_bind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = ServerConfig::unix(dir.path().join("s"));
    let e = NbdServer::bind(cfg.clone(), Arc::new(OddBlocks))
        .err()
        .expect("refused");
    assert!(matches!(e, ServerError::Volume(_)), "{e}");
    let big_blocks = Arc::new(MemDisk::new(65536, 4).expect("memdisk"));
    let small_max = ServerConfig {
        max_request_bytes: 4096,
        ..cfg.clone()
    };
    let e = NbdServer::bind(small_max, big_blocks)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("below the block size"), "{e}");
    let e = NbdServer::bind(
        ServerConfig {
            max_in_flight: 0,
            ..cfg
        },
        disk(),
    )
    .err()
    .expect("refused");
    assert!(matches!(e, ServerError::Config(_)), "{e}");
}
