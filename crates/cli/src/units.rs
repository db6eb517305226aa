//! Parsing of numbers as storage tools write them (17, 0x1000), and a `hexdump -C` style
//! formatter. Sizes with suffixes (4K, 1MiB) parse with `bench::jobfile::parse_size`, the
//! project's one size parser.

/// Parses a decimal or 0x-prefixed hexadecimal number.
pub fn parse_u64(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    };
    r.map_err(|_| format!("'{text}' is not a number"))
}

/// Parses a count of blocks: a number of at least 1, because a command on zero blocks is a
/// malformed request, not something to send to the device.
pub fn parse_blocks(text: &str) -> Result<u64, String> {
    match parse_u64(text)? {
        0 => Err("a command needs at least 1 block".to_string()),
        n => Ok(n),
    }
}

/// Formats a byte count for people, exactly when that reads well: in the largest binary unit
/// (B, KiB, MiB, GiB, TiB, PiB) in which the count is exact to at most two decimals and below
/// 10,000 (`768 KiB`, `1.5 GiB`, `1077 MiB`); otherwise rounded to two decimals in the largest
/// unit it reaches (`19.43 MiB`). A size is never rounded down to zero, as an earlier `>> 20`
/// printed a 768 KiB zone as `0 MiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let unit_bytes = |i: usize| 1u64 << (10 * i);
    let exact = (0..UNITS.len()).rev().find(|&i| {
        let u = unit_bytes(i);
        // `bytes % u` is below 2^50, so multiplying by 100 cannot overflow.
        (bytes >= u || i == 0) && ((bytes % u) * 100).is_multiple_of(u) && bytes / u < 10_000
    });
    if let Some(i) = exact {
        let u = unit_bytes(i);
        let hundredths = (bytes % u) * 100 / u;
        let text = format!("{}.{hundredths:02}", bytes / u);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        return format!("{text} {}", UNITS[i]);
    }
    let i = (0..UNITS.len())
        .rev()
        .find(|&i| bytes >= unit_bytes(i))
        .unwrap_or(0);
    let text = format!("{:.2}", bytes as f64 / unit_bytes(i) as f64);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {}", UNITS[i])
}

/// Parses a byte value for a fill pattern (0xab, 171).
pub fn parse_byte(text: &str) -> Result<u8, String> {
    let v = parse_u64(text)?;
    u8::try_from(v).map_err(|_| format!("pattern '{text}' does not fit in one byte"))
}

/// Formats bytes like `hexdump -C`, collapsing repeated lines into `*`.
pub fn hexdump(base: u64, data: &[u8]) -> String {
    let mut out = String::new();
    let mut prev: Option<&[u8]> = None;
    let mut starred = false;
    for (i, line) in data.chunks(16).enumerate() {
        if prev == Some(line) {
            if !starred {
                out.push_str("*\n");
                starred = true;
            }
            continue;
        }
        starred = false;
        prev = Some(line);
        let mut hex = String::new();
        for (j, b) in line.iter().enumerate() {
            hex.push_str(&format!("{b:02x} "));
            if j == 7 {
                hex.push(' ');
            }
        }
        let ascii: String = line
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!(
            "{:08x}  {hex:<49} |{ascii}|\n",
            base + (i * 16) as u64
        ));
    }
    out.push_str(&format!("{:08x}\n", base + data.len() as u64));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_like_storage_tools() {
        assert_eq!(parse_u64("0x1000"), Ok(4096));
        assert_eq!(parse_u64("17"), Ok(17));
        assert!(parse_u64("4K").is_err());
        assert_eq!(parse_byte("0xab"), Ok(0xab));
        assert!(parse_byte("256").is_err());
    }

    #[test]
    fn block_counts_start_at_one() {
        assert_eq!(parse_blocks("1"), Ok(1));
        assert_eq!(parse_blocks("0x10"), Ok(16));
        assert!(parse_blocks("0").is_err());
        assert!(parse_blocks("0x0").is_err());
    }

    #[test]
    fn sizes_print_exactly_or_to_two_decimals() {
        // `device info` printed the small profile's 768 KiB zone capacity as "0 MiB".
        assert_eq!(format_size(768 << 10), "768 KiB");
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(512), "512 B");
        assert_eq!(format_size(4096), "4 KiB");
        assert_eq!(format_size(1 << 20), "1 MiB");
        assert_eq!(format_size(1077 << 20), "1077 MiB");
        assert_eq!(format_size(3 << 29), "1.5 GiB");
        assert_eq!(format_size(5 << 28), "1.25 GiB");
        assert_eq!(format_size(2 << 30), "2 GiB");
        assert_eq!(format_size(16 << 40), "16 TiB");
        assert_eq!(format_size(4973 * 4096), "19.43 MiB");
        assert_eq!(format_size((1 << 30) + (1 << 29) + 4096), "1.5 GiB");
        assert_eq!(format_size(20 << 30), "20 GiB");
        assert_eq!(format_size(10_000 << 20), "9.77 GiB");
        assert_eq!(format_size(10_000), "9.77 KiB");
        assert_eq!(format_size(u64::MAX), "16384 PiB");
    }

    #[test]
    fn hexdump_collapses_repeats() {
        let d = hexdump(0, &[0u8; 64]);
        assert_eq!(d, "00000000  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n*\n00000040\n");
        assert!(hexdump(16, b"AB").starts_with("00000010  41 42"));
    }
}
