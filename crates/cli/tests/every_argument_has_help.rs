//! Every argument of every subcommand has help text: the test walks `zonestack help`
//! recursively through the "Commands:" sections and reads the "Arguments:" and "Options:"
//! sections of each `-h`, failing on an entry with no words besides its default or possible
//! values.

mod common;

use common::ok;

/// The entries of the sections of a `-h` page: (section, first column, description).
fn entries(help: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out: Vec<(String, String, String)> = Vec::new();
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line.trim_end_matches(':').to_string();
            continue;
        }
        if line.trim().is_empty() || section.is_empty() {
            continue;
        }
        let body = line.trim_start();
        let indent = line.len() - body.len();
        // clap puts a new entry at an indent of at most 6 ("  -h, --help", "      --json",
        // "  <PATH>", "  open  Explicitly open zones"); wrapped descriptions sit further right.
        if indent <= 6 {
            let (name, desc) = match body.find("  ") {
                Some(at) => (&body[..at], body[at..].trim()),
                None => (body, ""),
            };
            out.push((section.clone(), name.to_string(), desc.to_string()));
        } else if let Some(last) = out.last_mut() {
            last.2.push(' ');
            last.2.push_str(body);
        }
    }
    out
}

/// What is left of a description without clap's bracketed defaults and value lists.
fn words(desc: &str) -> String {
    let mut s = String::new();
    let mut depth = 0;
    for c in desc.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => s.push(c),
            _ => {}
        }
    }
    s.trim().to_string()
}

fn walk(path: &mut Vec<String>, seen: &mut usize, blank: &mut Vec<String>) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("-h");
    let help = ok(&args);
    *seen += 1;
    for (section, name, desc) in entries(&help) {
        let here = format!("zonestack {} {name}", path.join(" "));
        match section.as_str() {
            "Commands" => {
                if words(&desc).is_empty() {
                    blank.push(format!("{here} (a subcommand)"));
                }
                if name != "help" {
                    path.push(name);
                    walk(path, seen, blank);
                    path.pop();
                }
            }
            "Arguments" | "Options" if words(&desc).is_empty() => blank.push(here),
            _ => {}
        }
    }
}

// The bug this guards against: `<PATH>` on 16 subcommands, and --lba, --blocks, --out,
// --zone, --fua, --zones, --force and --json in several, printed no help at all, and
// --gc-policy, --workload, --policy, --pattern only their defaults or values.
#[test]
fn every_argument_of_every_subcommand_has_help_text() {
    let mut seen = 0;
    let mut blank = Vec::new();
    walk(&mut Vec::new(), &mut seen, &mut blank);
    // The job-file runner parses its own arguments behind an external subcommand.
    for (_, name, desc) in entries(&ok(&["bench", "job.fio", "-h"])) {
        if words(&desc).is_empty() {
            blank.push(format!("zonestack bench JOBFILE {name}"));
        }
    }
    assert!(seen >= 30, "walked only {seen} help pages");
    assert!(
        blank.is_empty(),
        "arguments without help text:\n{}",
        blank.join("\n")
    );
}

#[test]
fn the_parser_sees_a_missing_description() {
    let page = "Usage: x\n\nArguments:\n  <PATH>\n\nOptions:\n      --json\n      --zone <ZONE>  Zone index\n      --pattern <P>  [default: 0x5a]\n";
    let blank: Vec<_> = entries(page)
        .into_iter()
        .filter(|(_, _, d)| words(d).is_empty())
        .map(|(_, n, _)| n)
        .collect();
    assert_eq!(blank, ["<PATH>", "--json", "--pattern <P>"]);
}
