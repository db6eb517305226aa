//! `zone compact` and `zone tl-open` on an image made with `device create --zns-plus`: the
//! compaction copies data inside the device to the destination's write pointer, TL_open puts
//! the WP on the first invalid block and writes then pass the valid run, the zone report
//! names the TL-opened zone (text and JSON), the state lasts between commands, and a
//! session accepts both commands.

mod common;

use common::{fails, ok, session};
use serde_json::Value;

/// A ZNS+ image of the small profile (zones of 256 blocks, 192 writable) with zone 0 full
/// of 0x5a.
fn plus_image(dir: &tempfile::TempDir) -> String {
    let img = dir.path().join("plus.img");
    let img = img.to_str().expect("utf-8 path").to_string();
    let created = ok(&["device", "create", &img, "--zones", "8", "--zns-plus"]);
    assert!(created.contains("ZNS+ commands"), "{created}");
    ok(&["io", "fill", &img, "--zone", "0"]);
    img
}

fn zone_json(img: &str, zone: usize) -> Value {
    let v: Value = serde_json::from_str(&ok(&["zone", "report", img, "--json"])).expect("json");
    v["zones"][zone].clone()
}

#[test]
fn compaction_copies_to_the_destination_write_pointer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = plus_image(&dir);
    let out = ok(&[
        "zone",
        "compact",
        &img,
        "--extent",
        "0:256:4",
        "--extent",
        "0x10:260:8",
    ]);
    assert_eq!(
        out,
        "compacted 12 blocks in 2 extents\nzone 1: implicitly_opened, wp 0x10c (+0xc)\n"
    );
    let read = ok(&["io", "read", &img, "--lba", "256", "--blocks", "12"]);
    assert!(read.contains("5a 5a 5a 5a"), "{read}");
    // The next extent must start at the new WP; anywhere else is the device's error.
    let err = fails(&["zone", "compact", &img, "--extent", "0:256:4"], 1);
    assert!(err.contains("Zone Invalid Write"), "{err}");
}

#[test]
fn tl_open_moves_the_wp_past_valid_blocks_and_the_report_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = plus_image(&dir);
    let out = ok(&[
        "zone",
        "tl-open",
        &img,
        "--zone",
        "0",
        "--valid",
        "0-3,100-131",
    ]);
    assert_eq!(
        out,
        "zone 0: full -> explicitly_opened (TL-opened), wp 0x4 (+0x4); 36 valid blocks kept\n"
    );
    let z = zone_json(&img, 0);
    assert_eq!(z["tl_opened"], Value::Bool(true));
    assert_eq!(z["wp"], 4);
    // A write over the valid run is refused; the invalid run is taken and the WP then
    // passes the valid blocks 100-131.
    let err = fails(
        &[
            "io",
            "write",
            &img,
            "--lba",
            "4",
            "--blocks",
            "97",
            "--pattern",
            "0x77",
        ],
        1,
    );
    assert!(err.contains("Zone Invalid Write"), "{err}");
    ok(&[
        "io",
        "write",
        &img,
        "--lba",
        "4",
        "--blocks",
        "96",
        "--pattern",
        "0x77",
    ]);
    assert_eq!(zone_json(&img, 0)["wp"], 132);
    let text = ok(&["zone", "report", &img, "--count", "2"]);
    assert!(
        text.ends_with("TL-opened (ZNS+ threaded logging): zone 0\n"),
        "{text}"
    );
    // A restart keeps it TL-opened, now Closed.
    ok(&["device", "restart", &img]);
    let z = zone_json(&img, 0);
    assert_eq!(
        (z["state"].as_str(), z["tl_opened"].as_bool()),
        (Some("closed"), Some(true))
    );
}

#[test]
fn a_bitmap_file_and_a_session_work_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let img = plus_image(&dir);
    // 192 blocks: 24 bytes; block 0 valid only.
    let bitmap = dir.path().join("valid.bin");
    let mut bits = vec![0u8; 24];
    bits[0] = 1;
    std::fs::write(&bitmap, &bits).expect("bitmap");
    let bitmap = bitmap.to_str().expect("utf-8 path");
    let script = format!(
        "zone tl-open --zone 0 --valid-file {bitmap}\nzone compact --extent 0:256:1\nzone report --count 2 --json\n"
    );
    let o = session(&img, script.as_bytes());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("wp 0x1 (+0x1); 1 valid block kept"), "{out}");
    assert!(out.contains("compacted 1 block in 1 extent"), "{out}");
    assert!(out.contains("\"tl_opened\":true"), "{out}");
    // A bitmap of the wrong size is a usage error.
    std::fs::write(dir.path().join("short.bin"), [0u8; 3]).expect("short");
    let short = dir.path().join("short.bin");
    let err = fails(
        &[
            "zone",
            "tl-open",
            &img,
            "--zone",
            "2",
            "--valid-file",
            short.to_str().expect("utf-8"),
        ],
        2,
    );
    assert!(err.contains("needs 24"), "{err}");
}
