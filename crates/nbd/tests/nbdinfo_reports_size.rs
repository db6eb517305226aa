//! `nbdinfo` (libnbd) connects over a Unix socket and over TCP and reports the export's size,
//! block sizes and flags as the server advertises them; `nbdinfo --list` finds the export.

mod common;

use std::sync::Arc;

use common::{require_tool, run_tool, TestServer};
use nbd::MemDisk;

const SIZE: u64 = 4096 * 2560; // 10 MiB

fn disk() -> Arc<MemDisk> {
    Arc::new(MemDisk::new(4096, SIZE / 4096).expect("memdisk"))
}

fn json_field<'a>(json: &'a str, key: &str) -> &'a str {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} missing in {json}"));
    let rest = json[at + key.len() + 3..].trim_start();
    let end = rest.find([',', '\n', '}']).unwrap_or(rest.len());
    rest[..end].trim()
}

#[test]
fn nbdinfo_reports_size_over_unix_socket() {
    let nbdinfo = require_tool("nbdinfo", "libnbd-bin");
    let server = TestServer::unix(disk(), |c| c.export_name = "vol0".into());
    assert!(
        server.uri.starts_with("nbd+unix:///vol0?socket="),
        "{}",
        server.uri
    );
    let out = run_tool(&nbdinfo, &["--size", &server.uri]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        SIZE.to_string()
    );

    let out = run_tool(&nbdinfo, &["--json", &server.uri]);
    let json = String::from_utf8_lossy(&out.stdout);
    assert_eq!(json_field(&json, "export-size"), SIZE.to_string());
    assert_eq!(json_field(&json, "block_size_minimum"), "1");
    assert_eq!(json_field(&json, "block_size_preferred"), "4096");
    assert_eq!(
        json_field(&json, "block_size_maximum"),
        (32u32 << 20).to_string()
    );
    assert_eq!(json_field(&json, "can_flush"), "true");
    assert_eq!(json_field(&json, "can_fua"), "true");
    assert_eq!(json_field(&json, "can_trim"), "true");
    assert_eq!(json_field(&json, "can_zero"), "true");
    assert_eq!(json_field(&json, "can_multi_conn"), "false");
    assert_eq!(json_field(&json, "is_read_only"), "false");
    server.stop().expect("clean shutdown");
}

#[test]
fn nbdinfo_over_tcp_sees_multi_conn_when_configured() {
    let nbdinfo = require_tool("nbdinfo", "libnbd-bin");
    let server = TestServer::tcp(disk(), |c| c.multi_conn = true);
    assert!(server.uri.starts_with("nbd://127.0.0.1:"), "{}", server.uri);
    let out = run_tool(&nbdinfo, &["--json", &server.uri]);
    let json = String::from_utf8_lossy(&out.stdout);
    assert_eq!(json_field(&json, "export-size"), SIZE.to_string());
    assert_eq!(json_field(&json, "can_multi_conn"), "true");
}

#[test]
fn nbdinfo_list_names_the_export() {
    let nbdinfo = require_tool("nbdinfo", "libnbd-bin");
    let server = TestServer::unix(disk(), |c| c.export_name = "zonevol".into());
    let out = run_tool(&nbdinfo, &["--list", "--json", &server.uri]);
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(json.contains("\"export-name\": \"zonevol\""), "{json}");
    assert_eq!(json_field(&json, "export-size"), SIZE.to_string());
}
