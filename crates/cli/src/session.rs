//! `zonestack session PATH` (or `session --raizn a.img,b.img,c.img`): one open device or RAIZN
//! array, commands from stdin one per line. Each line is a subcommand without `zonestack` and
//! PATH; open zones stay open between lines because the device stays open. A failed line
//! prints `error: line N: ...` in line and the session goes on; a line that is not UTF-8 or
//! longer than `MAX_LINE_BYTES` fails the same way. The session exits 1 when any line failed.
//!
//! On an array the zone, io and flush lines address the array (a `ZonedDevice` like one
//! image); the lines only an emulator image has (`stats`, `power-loss`, `fault`, `device
//! restart`) are refused, because an array has several images and no one of them is the
//! device the line would name. At the end the array is flushed and its images closed.

use std::io::{BufRead, Write};

use clap::Parser;
use std::path::Path;

use zns::ZonedDevice;

use crate::args::{Cli, Cmd};
use crate::commands;
use crate::error::{CliError, CliResult};
use crate::lines::{BoundedLines, Line, MAX_LINE_BYTES};
use crate::members::Members;
use crate::opened::Opened;

/// Subcommands followed by a second word before the PATH position.
const TWO_WORD: [&str; 3] = ["zone", "io", "device"];
/// Stands in for PATH when a line is parsed with the command-line grammar.
const PLACEHOLDER: &str = "<session-device>";

/// Turns a session line into command-line arguments, inserting the PATH placeholder.
pub fn argv_of(line: &str) -> Vec<String> {
    let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let at = match words.first().map(String::as_str) {
        Some(w) if TWO_WORD.contains(&w) => 2,
        _ => 1,
    }
    .min(words.len());
    let mut argv = vec!["zonestack".to_string()];
    argv.extend_from_slice(&words[..at]);
    argv.push(PLACEHOLDER.to_string());
    argv.extend_from_slice(&words[at..]);
    argv
}

/// What a session runs its lines on.
pub enum SessionDevice<'a> {
    /// One device image or drive, and the path that named it.
    One { dev: &'a Opened, name: &'a Path },
    /// A RAIZN array, open for the whole session, over `members`.
    Array {
        vol: &'a raizn::RaiznVolume,
        members: &'a Members,
    },
}

async fn run_line(dev: &SessionDevice<'_>, line: &str, out: &mut impl Write) -> CliResult {
    match (line, dev) {
        ("stats", SessionDevice::One { dev, .. }) => {
            return commands::print_stats(dev.require_image("`stats`")?, out)
        }
        ("stats", SessionDevice::Array { .. }) => {
            return Err(CliError::Usage(
                "`stats` works on one emulator image, not inside a session of a RAIZN array".into(),
            ))
        }
        ("help", _) => {
            writeln!(out, "lines are zonestack subcommands without PATH, e.g. `io write --lba 0 --blocks 1 --pattern 0xab`;")?;
            match dev {
                SessionDevice::One { .. } => {
                    writeln!(out, "also: flush, power-loss [--seed N], stats, quit")?
                }
                SessionDevice::Array { .. } => writeln!(out, "also: flush, quit")?,
            }
            return Ok(());
        }
        _ => {}
    }
    let cli = Cli::try_parse_from(argv_of(line)).map_err(|e| {
        let text = e.to_string();
        CliError::Usage(
            text.lines()
                .next()
                .unwrap_or("invalid command")
                .trim_start_matches("error: ")
                .to_string(),
        )
    })?;
    if cli.log_level.is_some() {
        return Err(CliError::Usage(
            "--log-level applies to the whole session: give it before `session`".into(),
        ));
    }
    match dev {
        SessionDevice::One { dev, name } => commands::execute(dev, name, &cli.cmd, out).await,
        SessionDevice::Array { vol, members } => {
            execute_on_array(vol, members, &cli.cmd, out).await
        }
    }
}

/// Runs one session line's command on the array: zone and io commands as on one image,
/// flush; everything else is refused with the reason.
async fn execute_on_array(
    vol: &raizn::RaiznVolume,
    members: &Members,
    cmd: &Cmd,
    out: &mut impl Write,
) -> CliResult {
    match cmd {
        Cmd::Zone(_) | Cmd::Io(_) => {
            if commands::target_of(cmd).is_some_and(|t| !t.raizn.is_empty()) {
                return Err(CliError::Usage(
                    "--raizn cannot be used inside a session: the session's array is the target"
                        .into(),
                ));
            }
            // A reset of the array resets zones of every member: on drives, only with --force.
            if members.devs.iter().flatten().any(|d| d.is_drive()) {
                commands::guard_reset(vol, Path::new("the RAIZN array"), cmd).await?;
            }
            commands::execute_zoned(vol, cmd, out).await
        }
        Cmd::Flush { .. } => Ok(vol.flush().await?),
        Cmd::PowerLoss { .. } | Cmd::Fault(_) | Cmd::Device(_) => Err(CliError::Usage(
            "this line works on one emulator image, not inside a session of a RAIZN array".into(),
        )),
        _ => Err(CliError::Usage(
            "this command cannot run inside a session".into(),
        )),
    }
}

/// What a session did with its lines.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    /// Lines that held a command (not blank, not a comment).
    commands: u64,
    failed: u64,
    first_failed: Option<u64>,
}

impl Tally {
    fn fail(&mut self, number: u64) {
        self.failed += 1;
        self.first_failed.get_or_insert(number);
    }
}

/// Prints a failed line's error in line, naming the line.
fn report(out: &mut impl Write, tally: &mut Tally, number: u64, message: &str) -> CliResult {
    tally.fail(number);
    writeln!(out, "error: line {number}: {message}")?;
    Ok(())
}

/// Runs the lines until the end of input or `quit`. An error here is an error of the output
/// or of reading the input, which ends the session; a failed line does not.
async fn run_lines(
    dev: &SessionDevice<'_>,
    input: impl BufRead,
    out: &mut impl Write,
    tally: &mut Tally,
) -> CliResult {
    let mut lines = BoundedLines::new(input, MAX_LINE_BYTES);
    loop {
        let (number, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(()),
            Err(e) => {
                let at = lines.lines_read() + 1;
                return Err(CliError::Other(format!("reading line {at}: {e}")));
            }
        };
        let line = match line {
            Line::Text(t) => t,
            Line::TooLong { bytes } => {
                tally.commands += 1;
                let m = format!(
                    "the line is {bytes} bytes, over the limit of {MAX_LINE_BYTES}; skipped"
                );
                report(out, tally, number, &m)?;
                out.flush()?;
                continue;
            }
            Line::NotUtf8 { at } => {
                tally.commands += 1;
                let m = format!(
                    "the line is not UTF-8 (invalid byte at column {}); skipped",
                    at + 1
                );
                report(out, tally, number, &m)?;
                out.flush()?;
                continue;
            }
        };
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "quit" || line == "exit" {
            return Ok(());
        }
        tally.commands += 1;
        let mut buf = Vec::new();
        match run_line(dev, line, &mut buf).await {
            Ok(()) if buf.is_empty() => writeln!(out, "ok")?,
            Ok(()) => out.write_all(&buf)?,
            Err(e) => {
                out.write_all(&buf)?;
                report(out, tally, number, &e.message())?;
            }
        }
        out.flush()?;
    }
}

/// Runs every line of `input` on one device, then closes it. Fails (exit 1) when any line
/// failed, when the input could not be read, or when the device could not be closed; each
/// failed line has already printed its error, naming its line number.
pub async fn run(
    dev: &Opened,
    name: &Path,
    input: impl BufRead,
    out: &mut impl Write,
) -> CliResult {
    let mut tally = Tally::default();
    let ran = run_lines(&SessionDevice::One { dev, name }, input, out, &mut tally).await;
    let closed = dev.shutdown();
    conclude(
        ran,
        &tally,
        closed.map_err(|e| format!("closing the device: {}", e.message())),
    )
}

/// Runs every line of `input` on the RAIZN array over `members` (opened here, which recovers
/// it), then flushes the array and closes the images; fails as `run` does.
pub async fn run_array(members: Members, input: impl BufRead, out: &mut impl Write) -> CliResult {
    let vol = match crate::cmd_raizn::open_array(&members).await {
        Ok(v) => v,
        Err(e) => return crate::members::finish(members, Err(e)),
    };
    let mut tally = Tally::default();
    let dev = SessionDevice::Array {
        vol: &vol,
        members: &members,
    };
    let ran = run_lines(&dev, input, out, &mut tally).await;
    let flushed = vol
        .flush()
        .await
        .map_err(|e| format!("flushing the array: {e}"));
    drop(vol);
    let closed = members
        .close()
        .map_err(|e| format!("closing the member images: {}", e.message()));
    conclude(ran, &tally, flushed.and(closed))
}

/// The session's outcome from how its lines went and how the device was closed.
fn conclude(ran: CliResult, tally: &Tally, closed: Result<(), String>) -> CliResult {
    let mut problems = Vec::new();
    if let Err(e) = ran {
        problems.push(e.message());
    }
    if let Some(first) = tally.first_failed {
        problems.push(format!(
            "{} of {} command lines failed (the first at line {first})",
            tally.failed, tally.commands
        ));
    }
    if let Err(e) = closed {
        problems.push(e);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Other(problems.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_goes_where_the_path_would() {
        assert_eq!(
            argv_of("io write --lba 0"),
            ["zonestack", "io", "write", PLACEHOLDER, "--lba", "0"]
        );
        assert_eq!(
            argv_of("fault --zone 1 --state offline")[..3],
            ["zonestack", "fault", PLACEHOLDER]
        );
        assert_eq!(argv_of("flush"), ["zonestack", "flush", PLACEHOLDER]);
        assert_eq!(argv_of("zone"), ["zonestack", "zone", PLACEHOLDER]);
    }
}
