//! `ServerConfig::request_thread`: requests run on the server's request thread, not on the
//! thread that reads the sockets, and the protocol's behaviour is the same either way: every
//! write lands, replies come back as requests complete, a request that waits does not hold up
//! the ones behind it.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::{pattern, TestServer};
use nbd::proto::Command;
use nbd::MemDisk;
use zns::{BlockDevice, BlockResult, Lba};

/// A `MemDisk` that records the name of the thread each command of a request ran on.
struct ThreadRecorder {
    inner: MemDisk,
    threads: Mutex<Vec<String>>,
}

impl ThreadRecorder {
    fn note(&self) {
        let name = std::thread::current().name().unwrap_or("").to_string();
        self.threads.lock().expect("lock").push(name);
    }
}

#[async_trait]
impl BlockDevice for ThreadRecorder {
    fn block_size(&self) -> u32 {
        self.inner.block_size()
    }
    fn size_blocks(&self) -> u64 {
        self.inner.size_blocks()
    }
    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        self.note();
        self.inner.read(lba, buf).await
    }
    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        self.note();
        self.inner.write(lba, data, fua).await
    }
    async fn flush(&self) -> BlockResult<()> {
        // Not noted: the server flushes the volume itself at shutdown, on its own thread.
        self.inner.flush().await
    }
    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        self.note();
        self.inner.trim(lba, blocks).await
    }
    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        self.note();
        self.inner.write_zeroes(lba, blocks, fua).await
    }
}

/// Sends 64 writes of 16 KiB back to back (half of them unaligned, so read-modify-write
/// runs too), reads everything back, and returns the names of the threads the volume saw.
fn pipelined_writes(request_thread: bool) -> Vec<String> {
    let disk = Arc::new(ThreadRecorder {
        inner: MemDisk::new(4096, 1024).expect("memdisk"),
        threads: Mutex::new(Vec::new()),
    });
    let s = TestServer::unix(disk.clone(), |c| c.request_thread = request_thread);
    let mut c = s.connect();
    let len = 16 * 1024u32;
    // 4 KiB apart, so no two writes overlap (overlapping writes in flight have no defined
    // order); every other one starts 100 bytes into a block, so its ends are partial blocks.
    let offset = |i: u64| i * u64::from(len + 4096) + if i % 2 == 1 { 100 } else { 0 };
    let mut sent = Vec::new();
    for i in 0..64u64 {
        let data = pattern(offset(i), len as usize, 7);
        sent.push(c.send(Command::Write, 0, offset(i), len, &data));
    }
    let mut got: Vec<u64> = (0..64)
        .map(|_| {
            let (h, e, _) = c.recv(&HashMap::new());
            assert_eq!(e, 0, "write {h}");
            h
        })
        .collect();
    got.sort_unstable();
    sent.sort_unstable();
    assert_eq!(got, sent, "one reply per write");
    for i in 0..64u64 {
        let expect = pattern(offset(i), len as usize, 7);
        assert_eq!(c.read(offset(i), len), Ok(expect), "write {i}");
    }
    c.disconnect();
    drop(s);
    let threads = disk.threads.lock().expect("lock").clone();
    threads
}

#[test]
fn with_the_option_every_command_runs_on_the_request_thread_and_every_write_lands() {
    let threads = pipelined_writes(true);
    assert!(threads.len() >= 128, "{} commands", threads.len());
    assert!(
        threads.iter().all(|t| t == "nbd-requests"),
        "commands ran on {:?}",
        threads
            .iter()
            .filter(|t| *t != "nbd-requests")
            .collect::<Vec<_>>()
    );
}

#[test]
fn without_it_no_command_runs_on_a_request_thread() {
    let threads = pipelined_writes(false);
    assert!(threads.len() >= 128, "{} commands", threads.len());
    assert!(threads.iter().all(|t| t != "nbd-requests"));
}

/// A request that waits on the request thread (its write is held at a gate) must not hold up
/// the requests read after it: the thread polls each request once and lets a waiting one go
/// on as a task of its own.
#[test]
fn a_fast_read_overtakes_a_held_write_on_the_request_thread() {
    common::fast_read_overtakes_held_write(|c| c.request_thread = true);
}
