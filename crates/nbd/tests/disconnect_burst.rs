//! Clients that queue many requests and then vanish do not keep the server busy with work
//! nobody will read: requests not yet started are dropped, reads in progress are abandoned,
//! and a fresh client is served at once.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::{Client, TestServer};
use nbd::proto::Command;
use nbd::MemDisk;
use zns::{BlockDevice, BlockResult, Lba};

const BS: u32 = 4096;
const MIB: u32 = 1 << 20;
/// Clients in the burst; also the server's connection limit, so that the fresh client gets
/// a slot only once a burst connection has ended.
const BURST: usize = 16;
/// 1 MiB reads each burst client queues before it vanishes.
const QUEUED: u64 = 200;
/// How long the volume takes per read; reads run one at a time, so the whole burst would
/// keep the volume busy for BURST * QUEUED * READ_TIME = 6.4 s.
const READ_TIME: Duration = Duration::from_millis(2);

/// A `MemDisk` whose reads run one at a time and take READ_TIME each in real time (a slow
/// device with one queue slot), counting every read that started.
struct SlowReads {
    inner: MemDisk,
    one_at_a_time: tokio::sync::Mutex<()>,
    started: AtomicU64,
}

#[async_trait]
impl BlockDevice for SlowReads {
    fn block_size(&self) -> u32 {
        self.inner.block_size()
    }
    fn size_blocks(&self) -> u64 {
        self.inner.size_blocks()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let _slot = self.one_at_a_time.lock().await;
        tokio::time::sleep(READ_TIME).await;
        self.inner.read(lba, buf).await
    }
    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        self.inner.write(lba, data, fua).await
    }
    async fn flush(&self) -> BlockResult<()> {
        self.inner.flush().await
    }
    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        self.inner.trim(lba, blocks).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        self.inner.write_zeroes(lba, blocks, fua).await
    }
}

/// Regression guard: the server ran every request a vanished client had queued, replies
/// thrown away. 32 clients each queueing 200 reads of 32 MiB and closing at once locked every
/// new client out for 163 s (their connections held every slot until the work was done).
#[test]
fn a_fresh_client_is_served_at_once_after_a_burst_of_vanishing_clients() {
    let disk = Arc::new(SlowReads {
        inner: MemDisk::new(BS, u64::from(64 * MIB / BS)).expect("memdisk"),
        one_at_a_time: tokio::sync::Mutex::new(()),
        started: AtomicU64::new(0),
    });
    let s = TestServer::unix(disk.clone(), |c| {
        c.max_connections = BURST;
        c.max_request_bytes = MIB;
        c.max_in_flight = 8;
        c.max_in_flight_bytes = 8 * MIB as usize;
        c.server_max_in_flight = 16;
        c.server_max_in_flight_bytes = 16 * MIB as usize;
    });
    let mut burst: Vec<Client> = (0..BURST).map(|_| s.connect()).collect();
    for c in &mut burst {
        for i in 0..QUEUED {
            c.send(Command::Read, 0, (i % 64) * u64::from(MIB), MIB, &[]);
        }
    }
    for c in &burst {
        c.sock.kill();
    }
    drop(burst);

    let asked = Instant::now();
    let mut fresh = s.connect();
    assert_eq!(fresh.read(4096, 512), Ok(vec![0u8; 512]));
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(1),
        "the fresh client waited {waited:?}"
    );
    // Every burst connection ends (only the fresh one stays), having run a small part of
    // what was queued.
    s.wait_for_connections(1);
    let queued = BURST as u64 * QUEUED;
    let ran = disk.started.load(Ordering::SeqCst);
    assert!(
        ran < queued / 10,
        "{ran} of {queued} queued reads were started for clients that had gone"
    );
    assert_eq!(fresh.read(0, 4096), Ok(vec![0u8; 4096]));
}
