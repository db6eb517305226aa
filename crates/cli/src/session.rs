//! `zonestack session PATH`: one open device, commands from stdin one per line. Each line
//! is a subcommand without `zonestack` and PATH; open zones stay open between lines because
//! the device stays open. A failed line prints `error: line N: ...` in line and the session
//! goes on; a line that is not UTF-8 or longer than `MAX_LINE_BYTES` fails the same way. The
//! session exits 1 when any line failed.

use std::io::{BufRead, Write};

use clap::Parser;
use std::path::Path;

use crate::args::Cli;
use crate::commands;
use crate::error::{CliError, CliResult};
use crate::lines::{BoundedLines, Line, MAX_LINE_BYTES};
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

async fn run_line(dev: &Opened, name: &Path, line: &str, out: &mut impl Write) -> CliResult {
    match line {
        "stats" => return commands::print_stats(dev.require_image("`stats`")?, out),
        "help" => {
            writeln!(out, "lines are zonestack subcommands without PATH, e.g. `io write --lba 0 --blocks 1 --pattern 0xab`;")?;
            writeln!(out, "also: flush, power-loss [--seed N], stats, quit")?;
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
    commands::execute(dev, name, &cli.cmd, out).await
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
    dev: &Opened,
    name: &Path,
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
        match run_line(dev, name, line, &mut buf).await {
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

/// Runs every line of `input`, then closes the device. Fails (exit 1) when any line failed,
/// when the input could not be read, or when the device could not be closed; each failed
/// line has already printed its error, naming its line number.
pub async fn run(
    dev: &Opened,
    name: &Path,
    input: impl BufRead,
    out: &mut impl Write,
) -> CliResult {
    let mut tally = Tally::default();
    let ran = run_lines(dev, name, input, out, &mut tally).await;
    let closed = dev.shutdown();
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
        problems.push(format!("closing the device: {}", e.message()));
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
