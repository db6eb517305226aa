//! `MemDisk`, the in-memory volume the server is tested and measured on, keeps the
//! `BlockDevice` contract: whole blocks only, range checks, zeros where nothing was written,
//! trim and write zeroes reading back as zeros, and memory only for what was written.

mod common;

use common::{block_on, pattern};
use nbd::{MemDisk, MemDiskError};
use zns::{BlockDevice, BlockError};

#[test]
fn creation_checks_block_size_and_volume_size() {
    assert_eq!(
        MemDisk::new(1000, 8).err(),
        Some(MemDiskError::BlockSize(1000))
    );
    assert_eq!(
        MemDisk::new(256, 8).err(),
        Some(MemDiskError::BlockSize(256))
    );
    assert!(matches!(
        MemDisk::new(4096, 0),
        Err(MemDiskError::Size { .. })
    ));
    assert!(matches!(
        MemDisk::new(4096, u64::MAX / 2),
        Err(MemDiskError::Size { .. })
    ));
    // A huge volume costs nothing until written.
    let d = MemDisk::new(4096, 1 << 40).expect("4 PiB, sparse");
    assert_eq!(d.allocated_bytes(), 0);
}

#[test]
fn writes_read_back_and_unwritten_blocks_are_zero() {
    let d = MemDisk::new(512, 4096).expect("memdisk");
    block_on(async {
        // A write that crosses an allocation-chunk boundary (256 KiB).
        let at = 256 * 1024 / 512 - 3;
        let data = pattern(0, 512 * 7, 1);
        d.write(at, &data, false).await.expect("write");
        let mut back = vec![0u8; data.len()];
        d.read(at, &mut back).await.expect("read");
        assert_eq!(back, data);
        let mut unwritten = vec![1u8; 512];
        d.read(0, &mut unwritten).await.expect("read");
        assert_eq!(unwritten, vec![0u8; 512]);
    });
    assert_eq!(d.allocated_bytes(), 2 * 256 * 1024);
}

#[test]
fn ranges_and_alignment_are_checked() {
    let d = MemDisk::new(4096, 16).expect("memdisk");
    block_on(async {
        let mut buf = vec![0u8; 4096];
        assert_eq!(d.read(16, &mut buf).await, Err(BlockError::OutOfRange));
        assert_eq!(
            d.write(15, &[0u8; 8192], false).await,
            Err(BlockError::OutOfRange)
        );
        assert_eq!(
            d.write(0, &[0u8; 100], false).await,
            Err(BlockError::Misaligned)
        );
        assert_eq!(d.trim(u64::MAX, 2).await, Err(BlockError::OutOfRange));
        assert_eq!(
            d.write_zeroes(0, u64::MAX, false).await,
            Err(BlockError::OutOfRange)
        );
        assert_eq!(d.read(15, &mut buf).await, Ok(()));
    });
}

#[test]
fn trim_and_write_zeroes_read_back_as_zeros_and_free_memory() {
    let d = MemDisk::new(4096, 256).expect("memdisk");
    block_on(async {
        let data = pattern(0, 256 * 4096, 2);
        d.write(0, &data, true).await.expect("write");
        assert_eq!(d.allocated_bytes(), 1 << 20);
        // Zero the second chunk exactly, and part of the third.
        d.trim(64, 64).await.expect("trim");
        d.write_zeroes(130, 2, false).await.expect("zeroes");
        let mut back = vec![0u8; 256 * 4096];
        d.read(0, &mut back).await.expect("read");
        let mut want = data;
        want[64 * 4096..128 * 4096].fill(0);
        want[130 * 4096..132 * 4096].fill(0);
        assert!(back == want);
    });
    assert_eq!(
        d.allocated_bytes(),
        3 * 256 * 1024,
        "the fully trimmed chunk is freed"
    );
    let c = d.counters();
    assert_eq!(
        (c.writes, c.fua_writes, c.trims, c.write_zeroes, c.reads),
        (1, 1, 1, 1, 1)
    );
}
