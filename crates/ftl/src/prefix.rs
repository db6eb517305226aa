//! Tracks how far into a zone every write has completed, when writes complete out of order
//! (Zone Append): the completed prefix is where a recovery scan must start for that zone.

use std::collections::BTreeMap;

/// The end of the contiguous run of completed blocks from a zone's start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prefix {
    end: u64,
    /// Completed ranges beyond `end`, start -> length. Bounded by the writes in flight.
    ahead: BTreeMap<u64, u64>,
}

impl Prefix {
    pub fn new(end: u64) -> Prefix {
        Prefix {
            end,
            ahead: BTreeMap::new(),
        }
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    /// Records that blocks `[start, start + len)` completed.
    pub fn complete(&mut self, start: u64, len: u64) {
        if start > self.end {
            self.ahead.insert(start, len);
            return;
        }
        self.end = self.end.max(start + len);
        while let Some((&s, &l)) = self.ahead.first_key_value() {
            if s > self.end {
                break;
            }
            self.ahead.pop_first();
            self.end = self.end.max(s + l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_completions_join_the_prefix() {
        let mut p = Prefix::new(1);
        p.complete(5, 2);
        p.complete(3, 2);
        assert_eq!(p.end(), 1);
        p.complete(1, 2);
        assert_eq!(p.end(), 7);
        p.complete(7, 1);
        assert_eq!(p.end(), 8);
    }
}
