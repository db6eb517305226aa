//! Running `zonestack serve` in a test: start it, wait for its URI, stop it with SIGTERM.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};

/// A running `zonestack serve` whose stdout and stderr the test reads; killed when dropped.
pub struct Served {
    child: Child,
    /// What stdout said before the server was ready: the banner and the URI.
    pub started: String,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Served {
    /// Starts `zonestack ARGS` and returns once it printed its URI (or exited).
    pub fn start(args: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_zonestack"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn zonestack serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut started = String::new();
        while !started.contains("nbd") {
            let mut line = String::new();
            if stdout.read_line(&mut line).expect("read stdout") == 0 {
                // The server ended before it listened: say why.
                let out = child.wait_with_output().expect("wait for zonestack serve");
                panic!(
                    "zonestack {args:?} ended before listening ({}); stdout {started:?}, stderr: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            started.push_str(&line);
        }
        Served {
            child,
            started,
            stdout,
        }
    }

    /// Sends SIGTERM and waits for the exit: the status, the rest of stdout, all of stderr.
    pub fn terminate(mut self) -> (ExitStatus, String, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(
            sent.map(|s| s.success()).unwrap_or(false),
            "kill -TERM {pid}"
        );
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).expect("read stdout");
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).expect("read stderr");
        }
        let status = self.child.wait().expect("wait for zonestack serve");
        (status, rest, err)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
