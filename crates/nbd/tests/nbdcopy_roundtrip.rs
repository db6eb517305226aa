//! `nbdcopy` (libnbd) copies a file with data and zero runs into the export and back out,
//! byte for byte. With `CAN_MULTI_CONN` advertised it spreads the copy over several
//! connections, and the result is the same.

mod common;

use std::sync::Arc;

use common::{pattern, require_tool, run_tool, volume_bytes, TestServer};
use nbd::MemDisk;

const SIZE: usize = 12 << 20;

fn source_image(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let mut data = pattern(0, SIZE, 3);
    // Zero runs, one aligned and one not, so nbdcopy's zero detection comes into play.
    data[2 << 20..5 << 20].fill(0);
    data[(7 << 20) + 1234..(8 << 20) + 99].fill(0);
    let path = dir.join("src.img");
    std::fs::write(&path, &data).expect("write source");
    (path, data)
}

fn round_trip(multi_conn: bool) -> u64 {
    let nbdcopy = require_tool("nbdcopy", "libnbd-bin");
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, data) = source_image(dir.path());
    let disk = Arc::new(MemDisk::new(4096, (SIZE / 4096) as u64).expect("memdisk"));
    let s = TestServer::unix(disk.clone(), |c| c.multi_conn = multi_conn);
    let src_s = src.to_string_lossy().into_owned();
    run_tool(&nbdcopy, &[&src_s, &s.uri]);
    assert!(
        volume_bytes(disk.as_ref(), 0, SIZE) == data,
        "the volume holds the file"
    );
    let out = dir.path().join("out.img");
    let out_s = out.to_string_lossy().into_owned();
    run_tool(&nbdcopy, &[&s.uri, &out_s]);
    assert!(
        std::fs::read(&out).expect("read copy") == data,
        "the copy back is identical"
    );
    s.handle.stats().connections_accepted
}

#[test]
fn nbdcopy_round_trips_a_file_over_one_connection() {
    assert_eq!(
        round_trip(false),
        2,
        "one connection per copy without multi-conn"
    );
}

#[test]
fn nbdcopy_round_trips_a_file_over_several_connections() {
    let conns = round_trip(true);
    assert!(conns > 2, "nbdcopy used {conns} connections for two copies");
}
