//! Byte ranges cut into device blocks: a partial head block, whole blocks, a partial tail
//! block. Pure arithmetic; the I/O layer reads and writes whole blocks directly and runs
//! read-modify-write only on the partial ones.

/// Part of one block: bytes `start..start + len` of block `lba`, never the whole block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partial {
    pub lba: u64,
    /// Byte offset inside the block.
    pub start: usize,
    pub len: usize,
}

/// Whole blocks `lba..lba + blocks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Whole {
    pub lba: u64,
    pub blocks: u64,
}

/// A byte range as the device sees it. The pieces are in address order and tile the range;
/// `head_len()` and `whole_len()` give where each piece's bytes sit in a caller's buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub head: Option<Partial>,
    pub whole: Option<Whole>,
    pub tail: Option<Partial>,
    block_size: u64,
}

impl Span {
    pub fn head_len(&self) -> usize {
        self.head.map_or(0, |p| p.len)
    }

    pub fn whole_len(&self) -> usize {
        self.whole
            .map_or(0, |w| (w.blocks * self.block_size) as usize)
    }

    pub fn is_aligned(&self) -> bool {
        self.head.is_none() && self.tail.is_none()
    }
}

/// Cuts `len` bytes at byte `offset` into blocks of `block_size` bytes (a power of two).
/// `offset + len` must not overflow; requests are range-checked before they get here.
pub fn split(offset: u64, len: u64, block_size: u32) -> Span {
    let bs = u64::from(block_size.max(1));
    let mut span = Span {
        block_size: bs,
        ..Span::default()
    };
    if len == 0 {
        return span;
    }
    let end = offset.saturating_add(len);
    let mut at = offset;
    let in_block = at % bs;
    if in_block != 0 {
        let n = (bs - in_block).min(len);
        span.head = Some(Partial {
            lba: at / bs,
            start: in_block as usize,
            len: n as usize,
        });
        at += n;
    }
    let blocks = (end - at) / bs;
    if blocks > 0 {
        span.whole = Some(Whole {
            lba: at / bs,
            blocks,
        });
        at += blocks * bs;
    }
    if at < end {
        span.tail = Some(Partial {
            lba: at / bs,
            start: 0,
            len: (end - at) as usize,
        });
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn aligned_ranges_are_whole_blocks_only() {
        let s = split(8192, 16384, 4096);
        assert_eq!(s.whole, Some(Whole { lba: 2, blocks: 4 }));
        assert!(s.is_aligned());
        assert_eq!(
            split(0, 0, 4096),
            Span {
                block_size: 4096,
                ..Span::default()
            }
        );
    }

    #[test]
    fn inside_one_block_is_a_head_only() {
        let s = split(4096 + 100, 1000, 4096);
        assert_eq!(
            s.head,
            Some(Partial {
                lba: 1,
                start: 100,
                len: 1000
            })
        );
        assert_eq!((s.whole, s.tail), (None, None));
    }

    #[test]
    fn unaligned_both_ends() {
        let s = split(512, 4096 * 2, 4096);
        assert_eq!(
            s.head,
            Some(Partial {
                lba: 0,
                start: 512,
                len: 3584
            })
        );
        assert_eq!(s.whole, Some(Whole { lba: 1, blocks: 1 }));
        assert_eq!(
            s.tail,
            Some(Partial {
                lba: 2,
                start: 0,
                len: 512
            })
        );
        assert_eq!((s.head_len(), s.whole_len()), (3584, 4096));
    }

    proptest! {
        /// The pieces tile the range exactly, in order, and only the ends are partial.
        #[test]
        fn pieces_tile_the_range(offset in 0u64..1 << 40, len in 0u64..1 << 24, shift in 0u32..17) {
            let bs = 1u32 << shift;
            let s = split(offset, len, bs);
            let bs64 = u64::from(bs);
            let mut at = offset;
            if let Some(h) = s.head {
                prop_assert_eq!(h.lba * bs64 + h.start as u64, at);
                prop_assert!(h.start > 0 && h.start + h.len <= bs as usize && h.len > 0);
                at += h.len as u64;
            }
            if let Some(w) = s.whole {
                prop_assert_eq!(w.lba * bs64, at);
                prop_assert!(w.blocks > 0);
                at += w.blocks * bs64;
            }
            if let Some(t) = s.tail {
                prop_assert_eq!(t.lba * bs64, at);
                prop_assert!(t.start == 0 && t.len > 0 && t.len < bs as usize);
                at += t.len as u64;
            }
            prop_assert_eq!(at, offset + len);
            prop_assert_eq!((s.head_len() + s.whole_len()) as u64 + s.tail.map_or(0, |t| t.len as u64), len);
        }
    }
}
