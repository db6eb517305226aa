//! A `serve` whose shutdown cannot checkpoint the volume says so, with the cause, and exits
//! 1; it never claims a clean checkpoint it could not write.

mod common;
use common::ok;

#[path = "common/serve.rs"]
mod serve;
use serve::Served;

#[test]
fn a_checkpoint_that_cannot_be_written_fails_the_stop() {
    // serve printed "volume flushed and checkpointed" only after its last step, but a
    // failed step was reported bare (or masked by a later one), without saying that the
    // volume was not checkpointed. Here zone 1, the checkpoint slot the shutdown writes
    // (format wrote slot 0, in zone 0, and the mount, which finds nothing new since,
    // writes none), is read-only, so the final checkpoint must fail.
    let dir = tempfile::tempdir().expect("tempdir");
    let img = dir.path().join("dev.img");
    let img = img.to_str().expect("utf-8 path");
    ok(&["device", "create", img, "--profile", "small"]);
    ok(&["ftl", "format", img, "--op", "25"]);
    ok(&["fault", img, "--zone", "1", "--state", "read_only"]);
    let sock = format!("unix:{}", dir.path().join("nbd.sock").display());
    let s = Served::start(&["serve", "--device", img, "--listen", &sock]);
    assert!(
        s.started.contains("nbd+unix://"),
        "serve did not start: {}",
        s.started
    );
    let (status, out, err) = s.terminate();
    assert_eq!(status.code(), Some(1), "{out}{err}");
    assert!(!out.contains("flushed and checkpointed"), "{out}");
    assert!(
        err.contains("stopped with errors: the volume could not be flushed and checkpointed: ")
            && err.contains("checkpoint"),
        "the error names the failed step and its cause: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // The device image itself was closed: it opens and reports its zones.
    let report = ok(&[
        "zone", "report", img, "--json", "--start", "1", "--count", "1",
    ]);
    assert!(report.contains("read_only"), "{report}");
}
