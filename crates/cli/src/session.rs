//! `zonestack session PATH`: one open device, commands from stdin one per line. Each line
//! is a subcommand without `zonestack` and PATH; open zones stay open between lines because
//! the device stays open. Errors are printed in line and the session goes on.

use std::io::{BufRead, Write};

use clap::Parser;
use emu::EmuDevice;

use crate::args::Cli;
use crate::commands::{self, CliError, CliResult};

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

async fn run_line(dev: &EmuDevice, line: &str, out: &mut impl Write) -> CliResult {
    match line {
        "stats" => return commands::print_stats(dev, out),
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
    commands::execute(dev, &cli.cmd, out).await
}

/// Runs every line of `input`; returns after end of input or `quit`.
pub async fn run(dev: &EmuDevice, input: impl BufRead, out: &mut impl Write) -> CliResult {
    for line in input.lines() {
        let line = line?;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "quit" || line == "exit" {
            break;
        }
        let mut buf = Vec::new();
        match run_line(dev, line, &mut buf).await {
            Ok(()) if buf.is_empty() => writeln!(out, "ok")?,
            Ok(()) => out.write_all(&buf)?,
            Err(e) => {
                out.write_all(&buf)?;
                writeln!(out, "error: {}", e.message())?;
            }
        }
        out.flush()?;
    }
    dev.shutdown().map_err(|e| CliError::Other(e.to_string()))
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
