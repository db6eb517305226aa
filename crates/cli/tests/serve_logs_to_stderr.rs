//! `--log-level` (or RUST_LOG) makes `serve` log its start and each shutdown step on stderr,
//! while stdout keeps only the banner and the URI scripts read.

mod common;
use common::fails;

#[path = "common/serve.rs"]
mod serve;
use serve::Served;

#[test]
fn serve_at_info_logs_its_start_and_shutdown_on_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = format!("unix:{}", dir.path().join("nbd.sock").display());
    let s = Served::start(&[
        "serve",
        "--log-level",
        "info",
        "--memory",
        "1M",
        // 7% of a small volume cannot pay four 64 MiB checkpoint and reserve zones.
        "--op",
        "50",
        "--listen",
        &sock,
    ]);
    assert!(s.started.contains("nbd+unix://"), "{}", s.started);
    let (status, out, err) = s.terminate();
    assert!(status.success(), "{err}");
    assert!(
        out.contains("stopped: volume flushed and checkpointed"),
        "{out}"
    );
    assert!(
        err.contains("INFO") && err.contains("serving a 1 MiB FTL volume at nbd+unix://"),
        "the start line names the URI: {err}"
    );
    assert!(
        err.contains("16 zones of 16384 blocks"),
        "and the geometry: {err}"
    );
    for step in [
        "SIGTERM received",
        "volume flushed and checkpointed",
        "device closed",
    ] {
        assert!(
            err.contains(step),
            "shutdown step '{step}' is logged: {err}"
        );
    }
}

#[test]
fn the_default_level_keeps_stderr_quiet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = format!("unix:{}", dir.path().join("nbd.sock").display());
    let s = Served::start(&["serve", "--memory", "1M", "--listen", &sock]);
    let (status, _, err) = s.terminate();
    assert!(status.success(), "{err}");
    assert_eq!(err, "", "info lines are off at the default warn level");
}

#[test]
fn an_invalid_level_is_a_usage_error() {
    let err = fails(&["serve", "--memory", "1M", "--log-level", "verbose"], 2);
    assert!(err.contains("verbose"), "{err}");
    let err = fails(&["--log-level", "loud", "device", "profiles"], 2);
    assert!(err.contains("loud") && err.contains("trace"), "{err}");
}
