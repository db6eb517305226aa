//! A parser for the subset of fio job files that `zonestack bench JOBFILE` runs. Pure code:
//! text in, job descriptions out, so every rule is unit-tested without a device.
//!
//! A job file is INI-like: `[global]` sets defaults for the jobs that follow it, every other
//! section is a job. Lines starting with `;` or `#` are comments. An option fio knows but this
//! runner does not is an error that names the option and the line, because silently ignoring
//! it would report figures for a workload other than the one written down.

use std::fmt;

/// fio's `rw=` patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
}

impl Rw {
    fn parse(v: &str) -> Option<Rw> {
        Some(match v {
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            "readwrite" | "rw" => Rw::ReadWrite,
            "randrw" => Rw::RandRw,
            _ => return None,
        })
    }

    /// Whether the pattern reads, writes, or both.
    pub fn reads(self) -> bool {
        !matches!(self, Rw::Write | Rw::RandWrite)
    }

    pub fn writes(self) -> bool {
        !matches!(self, Rw::Read | Rw::RandRead)
    }

    pub fn random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }
}

/// fio's `random_distribution=`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    Random,
    /// `zipf:THETA`: a power law over the range, the popular places scattered.
    Zipf(f64),
    /// `pareto:H` (0 < H < 1): fio's Pareto, rank = (n - 1) * u^(ln H / ln(1 - H)), the
    /// popular places scattered.
    Pareto(f64),
    /// `zoned:A/R:A/R...`: A percent of the accesses go uniformly to the next R percent of
    /// the range, in order from its start (fio's percentage distribution).
    Zoned(ZonedSplit),
}

/// The (access percent, range percent) pairs of `random_distribution=zoned:`; both columns
/// sum to 100.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZonedSplit {
    parts: [(u8, u8); ZONED_PARTS_MAX],
    len: u8,
}

/// Pairs a `zoned:` distribution may have.
pub const ZONED_PARTS_MAX: usize = 8;

impl ZonedSplit {
    /// The pairs, or None unless 1 to `ZONED_PARTS_MAX` pairs of non-zero ranges whose
    /// columns each sum to 100.
    pub fn new(pairs: &[(u8, u8)]) -> Option<ZonedSplit> {
        if pairs.is_empty() || pairs.len() > ZONED_PARTS_MAX || pairs.iter().any(|p| p.1 == 0) {
            return None;
        }
        let sum = |f: fn(&(u8, u8)) -> u32| pairs.iter().map(f).sum::<u32>();
        if sum(|p| u32::from(p.0)) != 100 || sum(|p| u32::from(p.1)) != 100 {
            return None;
        }
        let mut parts = [(0, 0); ZONED_PARTS_MAX];
        parts[..pairs.len()].copy_from_slice(pairs);
        Some(ZonedSplit {
            parts,
            len: pairs.len() as u8,
        })
    }

    pub fn parts(&self) -> &[(u8, u8)] {
        &self.parts[..usize::from(self.len)]
    }

    /// The place in `[0, n)` for the uniform samples `which` (picks the part) and `within`.
    pub fn pick(&self, which: f64, within: f64, n: u64) -> u64 {
        let mut access = 0.0;
        let mut start = 0u64;
        let parts = self.parts();
        for (i, (a, r)) in parts.iter().enumerate() {
            access += f64::from(*a) / 100.0;
            let end = if i + 1 == parts.len() {
                n
            } else {
                start + n * u64::from(*r) / 100
            };
            if which < access || i + 1 == parts.len() {
                let width = end.saturating_sub(start).max(1);
                return (start + (within * width as f64) as u64).min(n.saturating_sub(1));
            }
            start = end;
        }
        0
    }
}

/// One job, with `[global]` already applied.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    pub name: String,
    /// Line of the job's section header.
    pub line: usize,
    pub rw: Rw,
    pub block_bytes: u64,
    pub iodepth: u32,
    pub numjobs: u32,
    pub size_bytes: Option<u64>,
    pub io_size_bytes: Option<u64>,
    pub runtime_ms: Option<u64>,
    /// Time the job runs before its figures start counting (fio's `ramp_time`).
    pub ramp_ms: u64,
    pub time_based: bool,
    pub offset_bytes: u64,
    pub zoned: bool,
    pub zone_append: bool,
    pub max_open_zones: Option<u32>,
    pub rate_bytes_per_sec: Option<u64>,
    pub rwmixread: u32,
    pub percentage_random: u32,
    pub distribution: Distribution,
    pub group_reporting: bool,
    /// The job waits for every earlier job to finish (`stonewall` or `new_group`).
    pub stonewall: bool,
    /// fio's `filename`: kept so the runner can say that it does not open it (jobs run on the
    /// emulated device, or on `--device IMAGE`).
    pub filename: Option<String>,
}

impl JobSpec {
    /// fio's defaults.
    fn new(name: &str, line: usize) -> JobSpec {
        JobSpec {
            name: name.to_string(),
            line,
            rw: Rw::Read,
            block_bytes: 4096,
            iodepth: 1,
            numjobs: 1,
            size_bytes: None,
            io_size_bytes: None,
            runtime_ms: None,
            ramp_ms: 0,
            time_based: false,
            offset_bytes: 0,
            zoned: false,
            zone_append: false,
            max_open_zones: None,
            rate_bytes_per_sec: None,
            rwmixread: 50,
            percentage_random: 100,
            distribution: Distribution::Random,
            group_reporting: false,
            stonewall: false,
            filename: None,
        }
    }
}

/// Why a job file was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    Unsupported {
        option: String,
        line: usize,
    },
    Value {
        option: String,
        value: String,
        line: usize,
        why: &'static str,
    },
    OutsideSection {
        option: String,
        line: usize,
    },
    Syntax {
        line: usize,
    },
    NoJobs,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Unsupported { option, line } => {
                write!(f, "unsupported fio option '{option}' at line {line}")
            }
            ParseError::Value {
                option,
                value,
                line,
                why,
            } => write!(
                f,
                "invalid value '{value}' for fio option '{option}' at line {line}: {why}"
            ),
            ParseError::OutsideSection { option, line } => write!(
                f,
                "fio option '{option}' at line {line} is outside any section; put it under [global] or a job"
            ),
            ParseError::Syntax { line } => write!(
                f,
                "line {line} is neither a [section], an option nor a comment"
            ),
            ParseError::NoJobs => write!(f, "the job file defines no jobs"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Parses a job file into its jobs, in file order.
pub fn parse(text: &str) -> Result<Vec<JobSpec>, ParseError> {
    let mut global = JobSpec::new("global", 0);
    let mut jobs: Vec<JobSpec> = Vec::new();
    // Which spec the options go to: none yet, `[global]`, or the last job.
    let mut in_global: Option<bool> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with(';') || l.starts_with('#') {
            continue;
        }
        if let Some(rest) = l.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .ok_or(ParseError::Syntax { line })?;
            if name == "global" {
                in_global = Some(true);
            } else {
                let mut job = global.clone();
                job.name = name.to_string();
                job.line = line;
                jobs.push(job);
                in_global = Some(false);
            }
            continue;
        }
        let (key, value) = match l.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (l, None),
        };
        let spec = match in_global {
            None => {
                return Err(ParseError::OutsideSection {
                    option: key.to_string(),
                    line,
                })
            }
            Some(true) => &mut global,
            Some(false) => jobs.last_mut().ok_or(ParseError::Syntax { line })?,
        };
        apply(spec, key, value, line)?;
    }
    if jobs.is_empty() {
        return Err(ParseError::NoJobs);
    }
    Ok(jobs)
}

fn apply(s: &mut JobSpec, key: &str, value: Option<&str>, line: usize) -> Result<(), ParseError> {
    let v = value.unwrap_or("");
    let bad = |why: &'static str| ParseError::Value {
        option: key.to_string(),
        value: v.to_string(),
        line,
        why,
    };
    match key {
        "name" => s.name = v.to_string(),
        "rw" | "readwrite" => {
            s.rw = Rw::parse(v).ok_or(bad(
                "use read, write, randread, randwrite, readwrite or randrw",
            ))?
        }
        "bs" => {
            s.block_bytes = parse_size(v)
                .ok()
                .filter(|b| *b > 0)
                .ok_or(bad("expected a size"))?
        }
        "iodepth" => s.iodepth = count(v).ok_or(bad("expected a count of at least 1"))?,
        "numjobs" => s.numjobs = count(v).ok_or(bad("expected a count of at least 1"))?,
        "size" => s.size_bytes = Some(parse_size(v).ok().ok_or(bad("expected a size"))?),
        "io_size" | "io_limit" => {
            s.io_size_bytes = Some(parse_size(v).ok().ok_or(bad("expected a size"))?)
        }
        "runtime" => s.runtime_ms = Some(millis(v).ok_or(bad("expected a time"))?),
        "ramp_time" => s.ramp_ms = millis(v).ok_or(bad("expected a time"))?,
        "time_based" => s.time_based = flag(value).ok_or(bad("expected 0 or 1"))?,
        "offset" => s.offset_bytes = parse_size(v).ok().ok_or(bad("expected a size"))?,
        "zonemode" => {
            s.zoned = match v {
                "zbd" => true,
                "none" => false,
                _ => return Err(bad("only zbd and none are supported")),
            }
        }
        "zone_append" => s.zone_append = flag(value).ok_or(bad("expected 0 or 1"))?,
        "max_open_zones" => {
            s.max_open_zones = Some(count(v).ok_or(bad("expected a count of at least 1"))?)
        }
        "rate" => {
            s.rate_bytes_per_sec = Some(
                parse_size(v)
                    .ok()
                    .filter(|r| *r > 0)
                    .ok_or(bad("expected a size"))?,
            )
        }
        "rwmixread" => s.rwmixread = percent(v).ok_or(bad("expected 0 to 100"))?,
        "rwmixwrite" => s.rwmixread = 100 - percent(v).ok_or(bad("expected 0 to 100"))?,
        "percentage_random" => s.percentage_random = percent(v).ok_or(bad("expected 0 to 100"))?,
        "random_distribution" => {
            s.distribution = distribution(v).ok_or(bad(
                "use random, zipf:THETA, pareto:H (0 < H < 1) or zoned:ACCESS/RANGE:... (percent, each column summing to 100)",
            ))?
        }
        "group_reporting" => s.group_reporting = flag(value).ok_or(bad("expected 0 or 1"))?,
        "stonewall" | "wait_for_previous" | "new_group" => {
            s.stonewall = flag(value).ok_or(bad("expected 0 or 1"))?
        }
        // Accepted so that job files written for a real drive run unchanged; the emulated
        // device has no engine or page cache to choose. `filename` is kept: the runner says
        // it does not open it.
        "filename" => s.filename = Some(v.to_string()),
        "ioengine" | "direct" | "thread" | "description" => {}
        _ => {
            return Err(ParseError::Unsupported {
                option: key.to_string(),
                line,
            })
        }
    }
    Ok(())
}

/// Why a size was refused by [`parse_size`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// No digits at all (`""`, `"k"`).
    NoNumber,
    /// The digits are not a decimal or 0x-prefixed hexadecimal number.
    NotANumber,
    /// A suffix other than K, M, G or T (optionally followed by `iB` or `B`), or `B`.
    UnknownSuffix(String),
    /// The size does not fit in 64 bits.
    TooLarge,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeError::NoNumber => write!(f, "expected a size such as 4096, 4K, 1MiB or 0x1000"),
            SizeError::NotANumber => write!(f, "not a decimal or 0x-prefixed number"),
            SizeError::UnknownSuffix(s) => write!(
                f,
                "unknown size suffix '{s}' (use K, M, G or T, optionally followed by iB or B)"
            ),
            SizeError::TooLarge => write!(f, "the size does not fit in 64 bits"),
        }
    }
}

impl std::error::Error for SizeError {}

/// The project's one parser of byte sizes, for fio job files and every command-line option:
/// a decimal number with an optional case-insensitive suffix `K`, `M`, `G` or `T` (powers of
/// 1024, as fio's default `kb_base=1024` reads them), which may be followed by `iB` or `B`
/// (`4k`, `4K`, `4KiB`, `4kb`); a plain `B` suffix (`512B`); or a 0x-prefixed hexadecimal
/// byte count without a suffix (`0x1000`, because `b` is a hexadecimal digit). Surrounding
/// whitespace is ignored.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if hex.is_empty() {
            return Err(SizeError::NoNumber);
        }
        return u64::from_str_radix(hex, 16).map_err(|e| match e.kind() {
            std::num::IntErrorKind::PosOverflow => SizeError::TooLarge,
            _ => SizeError::NotANumber,
        });
    }
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(digits);
    if number.is_empty() {
        return Err(SizeError::NoNumber);
    }
    let lower = suffix.to_ascii_lowercase();
    let unit = lower
        .strip_suffix("ib")
        .filter(|u| !u.is_empty())
        .or_else(|| lower.strip_suffix('b').filter(|u| !u.is_empty()))
        .unwrap_or(&lower);
    let shift = match unit {
        "" | "b" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(SizeError::UnknownSuffix(suffix.to_string())),
    };
    let n: u64 = number.parse().map_err(|_| SizeError::TooLarge)?;
    n.checked_mul(1u64 << shift).ok_or(SizeError::TooLarge)
}

fn count(v: &str) -> Option<u32> {
    v.parse().ok().filter(|n| *n >= 1)
}

fn percent(v: &str) -> Option<u32> {
    v.parse().ok().filter(|n| *n <= 100)
}

/// A bare option (`time_based`) means on, like `time_based=1`.
fn flag(v: Option<&str>) -> Option<bool> {
    match v {
        None | Some("1") | Some("true") => Some(true),
        Some("0") | Some("false") => Some(false),
        _ => None,
    }
}

/// A time in fio's default unit, seconds, or with an `ms`, `s`, `m` or `h` suffix.
fn millis(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (n, unit) = v.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let ms = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    n.checked_mul(ms)
}

fn distribution(v: &str) -> Option<Distribution> {
    if v == "random" {
        return Some(Distribution::Random);
    }
    if let Some(h) = v.strip_prefix("pareto:") {
        let h: f64 = h.parse().ok()?;
        return (h > 0.0 && h < 1.0).then_some(Distribution::Pareto(h));
    }
    if let Some(split) = v.strip_prefix("zoned:") {
        let pairs: Option<Vec<(u8, u8)>> = split
            .split(':')
            .map(|pair| {
                let (a, r) = pair.split_once('/')?;
                Some((a.trim().parse().ok()?, r.trim().parse().ok()?))
            })
            .collect();
        return ZonedSplit::new(&pairs?).map(Distribution::Zoned);
    }
    let theta: f64 = v.strip_prefix("zipf:")?.parse().ok()?;
    // fio requires theta > 0; theta = 1 is a pole of the generalised harmonic sum we use.
    (theta > 0.0 && theta.is_finite() && theta != 1.0).then_some(Distribution::Zipf(theta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_options_are_inherited_and_overridden() {
        let jobs = parse(
            "; a comment\n# another\n[global]\nbs=8k\nzonemode=zbd\n\n[a]\nrw=write\n[b]\nbs=16k\nrw=randread\n",
        )
        .expect("parses");
        assert_eq!(jobs.len(), 2);
        assert_eq!((jobs[0].name.as_str(), jobs[0].block_bytes), ("a", 8192));
        assert_eq!((jobs[1].name.as_str(), jobs[1].block_bytes), ("b", 16384));
        assert!(jobs[0].zoned && jobs[1].zoned);
        assert_eq!(jobs[0].rw, Rw::Write);
        assert_eq!(jobs[1].rw, Rw::RandRead);
        assert_eq!(jobs[1].line, 9);
    }

    #[test]
    fn global_after_a_job_applies_only_to_later_jobs() {
        let jobs = parse("[a]\n[global]\niodepth=4\n[b]\n").expect("parses");
        assert_eq!((jobs[0].iodepth, jobs[1].iodepth), (1, 4));
    }

    #[test]
    fn every_supported_option_is_read() {
        let jobs = parse(
            "[j]\nname=x\nrw=randrw\nbs=1m\niodepth=8\nnumjobs=2\nsize=2g\nio_size=512m\n\
             runtime=30\ntime_based\noffset=4k\nzonemode=zbd\nzone_append=1\nmax_open_zones=3\n\
             rate=100m\nrwmixread=70\npercentage_random=20\nrandom_distribution=zipf:1.2\n\
             ioengine=libaio\nfilename=/dev/nvme0n2\ndirect=1\ngroup_reporting\nstonewall\n",
        )
        .expect("parses");
        let j = &jobs[0];
        assert_eq!(j.name, "x");
        assert_eq!(j.filename.as_deref(), Some("/dev/nvme0n2"));
        assert_eq!(j.rw, Rw::RandRw);
        assert_eq!((j.block_bytes, j.iodepth, j.numjobs), (1 << 20, 8, 2));
        assert_eq!(
            (j.size_bytes, j.io_size_bytes),
            (Some(2 << 30), Some(512 << 20))
        );
        assert_eq!(
            (j.runtime_ms, j.time_based, j.offset_bytes),
            (Some(30_000), true, 4096)
        );
        assert!(j.zoned && j.zone_append && j.group_reporting && j.stonewall);
        assert_eq!(j.max_open_zones, Some(3));
        assert_eq!(j.rate_bytes_per_sec, Some(100 << 20));
        assert_eq!((j.rwmixread, j.percentage_random), (70, 20));
        assert_eq!(j.distribution, Distribution::Zipf(1.2));
    }

    #[test]
    fn skewed_distributions_parse_as_fio_writes_them() {
        let d = |v: &str| {
            parse(&format!("[a]\nrandom_distribution={v}\n")).expect("parses")[0].distribution
        };
        assert_eq!(d("pareto:0.2"), Distribution::Pareto(0.2));
        let Distribution::Zoned(z) = d("zoned:80/20:20/80") else {
            panic!("not zoned");
        };
        assert_eq!(z.parts(), &[(80, 20), (20, 80)]);
        // 80% of the accesses land in the first 20% of the range.
        assert_eq!(z.pick(0.5, 0.999, 1000), 199);
        assert_eq!(z.pick(0.79, 0.0, 1000), 0);
        assert_eq!(z.pick(0.81, 0.0, 1000), 200);
        assert_eq!(z.pick(0.99, 0.999_999, 1000), 999);
    }

    #[test]
    fn unknown_option_names_itself_and_its_line() {
        let e = parse("[global]\nbs=4k\n\n; c\n[a]\nrw=write\nfoo=1\n").unwrap_err();
        assert_eq!(e.to_string(), "unsupported fio option 'foo' at line 7");
    }

    #[test]
    fn bad_values_name_the_option_and_line() {
        let e = parse("[a]\nbs=4q\n").unwrap_err();
        assert!(e.to_string().contains("'bs' at line 2"), "{e}");
        let e = parse("[a]\nrw=sideways\n").unwrap_err();
        assert!(e.to_string().contains("'rw' at line 2"), "{e}");
        let e = parse("[a]\nzonemode=host-managed\n").unwrap_err();
        assert!(e.to_string().contains("'zonemode'"), "{e}");
        for bad in [
            "pareto:1.5",
            "zoned:80/20:10/80",
            "zoned:80/0:20/100",
            "gauss:1",
        ] {
            let e = parse(&format!("[a]\nrandom_distribution={bad}\n")).unwrap_err();
            assert!(e.to_string().contains("random_distribution"), "{bad}: {e}");
        }
        let e = parse("[a]\nrwmixread=101\n").unwrap_err();
        assert!(e.to_string().contains("rwmixread"), "{e}");
    }

    #[test]
    fn structure_errors_are_reported() {
        assert_eq!(
            parse("bs=4k\n[a]\n").unwrap_err(),
            ParseError::OutsideSection {
                option: "bs".into(),
                line: 1
            }
        );
        assert_eq!(parse("[a\n").unwrap_err(), ParseError::Syntax { line: 1 });
        assert_eq!(parse("[global]\nbs=4k\n").unwrap_err(), ParseError::NoJobs);
    }

    #[test]
    fn sizes_use_base_1024_suffixes() {
        // One parser serves job files and the command line, so it accepts what both did:
        // fio's suffixes with optional iB/B, a bare B, and 0x hexadecimal.
        for (text, bytes) in [
            ("4k", 4096),
            ("4K", 4096),
            ("4KiB", 4096),
            ("4kb", 4096),
            ("1M", 1 << 20),
            ("1m", 1 << 20),
            ("3g", 3 << 30),
            ("2G", 2 << 30),
            ("1T", 1 << 40),
            ("512", 512),
            ("512B", 512),
            ("4096", 4096),
            (" 8K ", 8192),
            ("0x1000", 4096),
            ("0X1b", 27),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text:?}");
        }
        assert_eq!(parse_size("k"), Err(SizeError::NoNumber));
        assert_eq!(parse_size(""), Err(SizeError::NoNumber));
        assert_eq!(parse_size("0x"), Err(SizeError::NoNumber));
        assert_eq!(parse_size("4x"), Err(SizeError::UnknownSuffix("x".into())));
        assert_eq!(parse_size("12Q"), Err(SizeError::UnknownSuffix("Q".into())));
        // "ib" alone is not a unit; an earlier parser read "4ib" as 4 bytes.
        assert_eq!(
            parse_size("4ib"),
            Err(SizeError::UnknownSuffix("ib".into()))
        );
        assert_eq!(
            parse_size("4kk"),
            Err(SizeError::UnknownSuffix("kk".into()))
        );
        assert_eq!(parse_size("-4k"), Err(SizeError::NoNumber));
        assert_eq!(parse_size("0x1G"), Err(SizeError::NotANumber));
        assert_eq!(parse_size("99999999999T"), Err(SizeError::TooLarge));
        assert_eq!(parse_size("0x10000000000000000"), Err(SizeError::TooLarge));
        assert_eq!(parse_size("99999999999999999999"), Err(SizeError::TooLarge));
        assert_eq!(millis("250ms"), Some(250));
        assert_eq!(millis("2m"), Some(120_000));
    }
}
