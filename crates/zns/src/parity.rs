//! XOR parity for the RAID layers (RAIZN, ZapRAID; m = 1): the parity of a stripe is the XOR of
//! its data units, and any one lost unit is the XOR of the others with the parity.
//!
//! The loop works on 16-byte chunks (`u128`) so that the compiler keeps it in vector
//! registers; the tail is done byte by byte.

/// `acc ^= src`, over the shorter of the two lengths.
pub fn xor_into(acc: &mut [u8], src: &[u8]) {
    let n = acc.len().min(src.len());
    let (acc, src) = (&mut acc[..n], &src[..n]);
    let mut a_chunks = acc.chunks_exact_mut(16);
    let mut s_chunks = src.chunks_exact(16);
    for (a, s) in (&mut a_chunks).zip(&mut s_chunks) {
        let mut x = [0u8; 16];
        let mut y = [0u8; 16];
        x.copy_from_slice(a);
        y.copy_from_slice(s);
        let v = u128::from_ne_bytes(x) ^ u128::from_ne_bytes(y);
        a.copy_from_slice(&v.to_ne_bytes());
    }
    for (a, s) in a_chunks
        .into_remainder()
        .iter_mut()
        .zip(s_chunks.remainder())
    {
        *a ^= *s;
    }
}

/// Bytes of the output XORed from every unit before moving on: small enough that the
/// accumulator stays in the L1 cache, so each output byte is written to memory once instead
/// of once per unit (a chain of `xor_into` over whole units reads and writes the
/// accumulator `units` times and becomes bound by memory bandwidth).
const PARITY_BLOCK: usize = 8 * 1024;

/// The XOR of `units` into `out` (zeroed first), block by block so that the accumulator
/// stays in cache; units shorter than `out` count as zero-padded. This is the parity of a
/// stripe in one pass over its data.
pub fn parity_into(out: &mut [u8], units: &[&[u8]]) {
    let mut start = 0;
    while start < out.len() {
        let end = (start + PARITY_BLOCK).min(out.len());
        let acc = &mut out[start..end];
        // The first unit is copied rather than XORed into zeros: one pass less over the block.
        let mut rest = units.iter();
        match rest.next().and_then(|u| u.get(start..u.len().min(end))) {
            Some(first) => {
                acc[..first.len()].copy_from_slice(first);
                acc[first.len()..].fill(0);
            }
            None => acc.fill(0),
        }
        for u in rest {
            if let Some(src) = u.get(start..u.len().min(end)) {
                xor_into(acc, src);
            }
        }
        start = end;
    }
}

/// The XOR of `units` (all of length `len`; shorter ones count as zero-padded).
pub fn xor_of<'a>(len: usize, units: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![0u8; len];
    for u in units {
        xor_into(&mut out, u);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytewise(a: &[u8], b: &[u8]) -> Vec<u8> {
        a.iter().zip(b).map(|(x, y)| x ^ y).collect()
    }

    #[test]
    fn xor_matches_the_bytewise_definition_at_every_length() {
        for len in [0usize, 1, 15, 16, 17, 31, 64, 4096 + 7] {
            let a: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let b: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
            let mut acc = a.clone();
            xor_into(&mut acc, &b);
            assert_eq!(acc, bytewise(&a, &b), "length {len}");
        }
    }

    #[test]
    fn blocked_parity_equals_the_chain_of_xors() {
        // Lengths around the block size, and units shorter than the output (zero-padded),
        // including one that ends inside a block and one shorter than a block.
        for len in [
            0usize,
            5,
            PARITY_BLOCK - 1,
            PARITY_BLOCK,
            3 * PARITY_BLOCK + 17,
        ] {
            let units: Vec<Vec<u8>> = (0..5usize)
                .map(|u| {
                    let n = if u == 3 {
                        len / 2
                    } else if u == 4 {
                        len.min(100)
                    } else {
                        len
                    };
                    (0..n).map(|i| (i * (u + 3) + u) as u8).collect()
                })
                .collect();
            let refs: Vec<&[u8]> = units.iter().map(|u| &u[..]).collect();
            let mut out = vec![0xAAu8; len];
            parity_into(&mut out, &refs);
            assert_eq!(out, xor_of(len, refs.iter().copied()), "length {len}");
        }
    }

    #[test]
    fn a_lost_unit_is_the_xor_of_the_others_and_the_parity() {
        let units: Vec<Vec<u8>> = (0..4u8)
            .map(|u| (0..100).map(|i| i ^ (u * 37)).collect())
            .collect();
        let p = xor_of(100, units.iter().map(|u| &u[..]));
        let rebuilt = xor_of(100, units[1..].iter().map(|u| &u[..]).chain([&p[..]]));
        assert_eq!(rebuilt, units[0]);
        // A shorter unit counts as zero-padded: partial stripes rely on it.
        let short = xor_of(100, [&units[0][..10]]);
        assert_eq!(&short[..10], &units[0][..10]);
        assert!(short[10..].iter().all(|b| *b == 0));
    }
}
