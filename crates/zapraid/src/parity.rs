//! Parity of a stripe. `m = 1`: XOR (RAID-5); the parity of a stripe is the XOR of its data
//! blocks, and any one lost block is the XOR of the others. `m >= 2` (Reed-Solomon) is
//! reserved: `Layout::new` refuses it, so nothing here is asked for it.
//!
//! The same XOR protects the per-block records' LBA and sequence fields (docs/FORMAT.md).

/// `acc ^= src`, over the shorter of the two lengths. Works on 16-byte chunks so the
/// compiler keeps the loop in vector registers; the tail goes byte by byte.
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

/// The XOR of `blocks`, each `len` bytes (a shorter one counts as zero-padded).
pub fn xor_of<'a>(len: usize, blocks: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![0u8; len];
    for b in blocks {
        xor_into(&mut out, b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_matches_the_bytewise_definition_at_every_length() {
        for len in [0usize, 1, 15, 16, 17, 33, 4096 + 5] {
            let a: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let b: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
            let mut acc = a.clone();
            xor_into(&mut acc, &b);
            let want: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
            assert_eq!(acc, want, "length {len}");
        }
    }

    #[test]
    fn any_lost_block_is_the_xor_of_the_others() {
        let blocks: Vec<Vec<u8>> = (0..3u8)
            .map(|u| (0..64).map(|i| i ^ (u * 41)).collect())
            .collect();
        let p = xor_of(64, blocks.iter().map(|b| &b[..]));
        for lost in 0..3 {
            let others = blocks
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != lost)
                .map(|(_, b)| &b[..]);
            let rebuilt = xor_of(64, others.chain([&p[..]]));
            assert_eq!(rebuilt, blocks[lost], "lost {lost}");
        }
    }
}
