//! The README's command blocks run, in order, in a fresh temporary directory, with the
//! `zonestack` under test first on PATH, so the README cannot rot. Convention: a block
//! fenced with ```` ```sh ```` runs; ```` ```sh no-test ```` (installation, the whole test
//! suite, long runs) and any other fence do not. The blocks run as one bash script with
//! `set -e`, so a background `serve` started in one block is stopped in a later one.

use std::path::Path;
use std::process::Command;

/// The bodies of the README's runnable blocks, each with the line it starts on.
fn runnable_blocks(readme: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in readme.lines().enumerate() {
        match current.as_mut() {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    let run = info.trim() == "sh";
                    current = Some((i + 1, String::new()));
                    if !run {
                        // Not run: remember it with an empty marker line so it is skipped.
                        current = Some((0, String::new()));
                    }
                }
            }
            Some((start, body)) => {
                if line.trim_end() == "```" {
                    if *start != 0 {
                        blocks.push((*start, std::mem::take(body)));
                    }
                    current = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    assert!(current.is_none(), "the README ends inside a code block");
    blocks
}

#[test]
fn the_readme_blocks_split_as_marked() {
    let text =
        "a\n```sh\necho 1\n```\n```sh no-test\nexit 1\n```\n```\nx\n```\n```sh\necho 2\n```\n";
    let blocks = runnable_blocks(text);
    let bodies: Vec<&str> = blocks.iter().map(|(_, b)| b.as_str()).collect();
    assert_eq!(bodies, ["echo 1\n", "echo 2\n"]);
}

// The bug this guards against: none of the README's examples ran as written (no binary on
// PATH, paths valid only at the repository root, a 35 GB image, a session that failed with
// Zone Is Full after the fill before it).
#[test]
fn every_runnable_readme_block_succeeds_in_order() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("read README.md");
    let blocks = runnable_blocks(&readme);
    assert!(blocks.len() >= 6, "only {} runnable blocks", blocks.len());
    let mut script = String::from("set -e\n");
    for (line, body) in &blocks {
        script.push_str(&format!(
            "echo '>>> README block at line {line}' >&2\n{body}"
        ));
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_zonestack"));
    let bin_dir = bin.parent().expect("binary directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env("PATH", path)
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "a README block failed ({:?}); the last '>>>' line names it\nstderr:\n{stderr}\nstdout:\n{stdout}",
        out.status
    );
    // What the blocks promise, spot-checked.
    assert!(stdout.contains("try next:"), "{stdout}");
    assert!(
        stdout.contains("zone 2: empty -> explicitly_opened"),
        "{stdout}"
    );
    assert!(stdout.contains("export-size"), "{stdout}");
    assert!(
        stdout.contains("stopped: volume flushed and checkpointed"),
        "{stdout}"
    );
    assert!(dir.path().join("seq.png").exists());
}
