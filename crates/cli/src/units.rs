//! Parsing of sizes and numbers as storage tools write them (4K, 1M, 2G, 0x1000), and a
//! `hexdump -C` style formatter.

/// Parses a byte count with an optional K/M/G/T suffix (powers of 1024) or a 0x prefix.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() && !t.starts_with("0x") => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                'B' => 1,
                _ => {
                    return Err(format!(
                        "unknown size suffix in '{text}' (use K, M, G or T)"
                    ))
                }
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n = parse_u64(digits)?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{text}' is too large"))
}

/// Parses a decimal or 0x-prefixed hexadecimal number.
pub fn parse_u64(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    };
    r.map_err(|_| format!("'{text}' is not a number"))
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
    fn sizes_parse_like_storage_tools() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("0x1000"), Ok(4096));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(parse_byte("0xab"), Ok(0xab));
        assert!(parse_byte("256").is_err());
    }

    #[test]
    fn hexdump_collapses_repeats() {
        let d = hexdump(0, &[0u8; 64]);
        assert_eq!(d, "00000000  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n*\n00000040\n");
        assert!(hexdump(16, b"AB").starts_with("00000010  41 42"));
    }
}
