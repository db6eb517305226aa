//! A line reader with a bound on line length, for input nobody vetted (the stdin of
//! `zonestack session`).
//!
//! Fault model: the input may hold lines of any length (a 256 MiB line once cost a session
//! 1 GB of memory), bytes that are not UTF-8, a last line without a newline, and read errors.
//! The reader keeps at most `max` bytes of a line in memory; the rest of an overlong line is
//! read and dropped up to its newline, so the next line starts where it should. Lines are
//! numbered from 1, counting every line, so an error can name the line it is about.

use std::io::{self, BufRead};

/// The longest session line in bytes, without its newline. A command line is a few dozen
/// bytes; 64 KiB leaves room for anything a person or script writes on purpose.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// Longer than the bound; `bytes` is its full length without the newline.
    TooLong {
        bytes: u64,
    },
    /// Not UTF-8; the first invalid byte is at `at`.
    NotUtf8 {
        at: usize,
    },
}

/// Reads lines of at most `max` bytes each from `input`.
pub struct BoundedLines<R> {
    input: R,
    max: usize,
    buf: Vec<u8>,
    number: u64,
}

impl<R: BufRead> BoundedLines<R> {
    pub fn new(input: R, max: usize) -> Self {
        BoundedLines {
            input,
            max,
            buf: Vec::new(),
            number: 0,
        }
    }

    /// The next line and its 1-based number, or `None` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<(u64, Line)>> {
        self.buf.clear();
        let mut bytes: u64 = 0;
        let mut seen_any = false;
        loop {
            let (used, ended) = {
                let avail = match self.input.fill_buf() {
                    Ok(a) => a,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                if avail.is_empty() {
                    if !seen_any {
                        return Ok(None);
                    }
                    break;
                }
                seen_any = true;
                let newline = avail.iter().position(|&b| b == b'\n');
                let part = &avail[..newline.unwrap_or(avail.len())];
                let room = self.max.saturating_sub(self.buf.len());
                self.buf
                    .extend_from_slice(part.get(..room.min(part.len())).unwrap_or(&[]));
                bytes += part.len() as u64;
                (
                    part.len() + usize::from(newline.is_some()),
                    newline.is_some(),
                )
            };
            self.input.consume(used);
            if ended {
                break;
            }
        }
        self.number += 1;
        debug_assert!(self.buf.len() <= self.max);
        let line = if bytes > self.max as u64 {
            Line::TooLong { bytes }
        } else {
            match std::str::from_utf8(&self.buf) {
                Ok(t) => Line::Text(t.to_string()),
                Err(e) => Line::NotUtf8 {
                    at: e.valid_up_to(),
                },
            }
        };
        Ok(Some((self.number, line)))
    }

    /// How many lines were returned so far.
    pub fn lines_read(&self) -> u64 {
        self.number
    }

    /// Bytes the reader holds for the current line: never more than the bound.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], max: usize) -> Vec<(u64, Line)> {
        let mut r = BoundedLines::new(input, max);
        let mut v = Vec::new();
        while let Some(l) = r.next_line().expect("read from memory") {
            v.push(l);
        }
        v
    }

    #[test]
    fn lines_are_numbered_and_the_last_needs_no_newline() {
        let v = all(b"a\n\n# c\nlast", 16);
        assert_eq!(
            v,
            [
                (1, Line::Text("a".into())),
                (2, Line::Text(String::new())),
                (3, Line::Text("# c".into())),
                (4, Line::Text("last".into())),
            ]
        );
        assert!(all(b"", 16).is_empty());
    }

    #[test]
    fn an_overlong_line_is_skipped_to_its_newline_without_being_held() {
        // A 256 MiB session line was once read whole into memory. Here a line of 1 MiB
        // arrives through an 8 KiB buffer like stdin's; the reader must hold at most the
        // bound and resume exactly at the next line.
        let mut input = vec![b'x'; 1 << 20];
        input.extend_from_slice(b"\nnext\n");
        let mut r = BoundedLines::new(io::BufReader::with_capacity(8192, &input[..]), 100);
        assert_eq!(
            r.next_line().expect("read"),
            Some((1, Line::TooLong { bytes: 1 << 20 }))
        );
        assert!(r.held() <= 100, "held {} bytes", r.held());
        assert_eq!(
            r.next_line().expect("read"),
            Some((2, Line::Text("next".into())))
        );
        assert_eq!(r.next_line().expect("read"), None);
    }

    #[test]
    fn the_bound_is_inclusive_and_invalid_utf8_is_reported_in_place() {
        let v = all(b"1234\n12345\n\xffab\nok\n", 4);
        assert_eq!(
            v,
            [
                (1, Line::Text("1234".into())),
                (2, Line::TooLong { bytes: 5 }),
                (3, Line::NotUtf8 { at: 0 }),
                (4, Line::Text("ok".into())),
            ]
        );
    }
}
