//! The stripe code of a RAIZN array: the `m` parity units of a stripe's `d` data units, and
//! lost units rebuilt from any `d` of the others. `m = 1` is XOR (RAID-5, `zns::parity`, the
//! fast path); `m = 2` is a systematic Reed-Solomon code (`reed_solomon_simd`), parity unit
//! `j` being its recovery shard `j`. Sans-IO.
//!
//! Both codes are linear and work symbol position by symbol position, so a unit of zeros
//! contributes nothing: the parity of a partial stripe is the parity of its written prefix
//! with every unwritten block taken as zeros (docs/DESIGN.md, "Partial parity"). A
//! Reed-Solomon symbol spans two bytes 32 apart in a 64-byte chunk, so unlike XOR the code
//! of m = 2 is only ever applied to whole units, never to a slice of one.
//!
//! Fault model: none of its own; the caller decides which units to trust. Too few units or
//! units of different sizes are typed errors, never a panic and never a unit made up from
//! fewer than `d` others.

/// Why a stripe could not be coded or rebuilt.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    #[error("{have} unit(s) of the stripe are left, {need} are needed to rebuild")]
    TooFew { need: usize, have: usize },
    #[error("the stripe's units differ in size, or a Reed-Solomon unit has an odd size")]
    Sizes,
    #[error("{got} data units given to a stripe of {want}")]
    DataCount { got: usize, want: usize },
    #[error("Reed-Solomon: {0}")]
    Rs(String),
}

/// A stripe code: `d` data units and `m` (1 or 2) parity units. Positions `0..d` are the data
/// units in stripe order, `d + j` is parity unit `j`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripeCode {
    d: usize,
    m: usize,
}

impl StripeCode {
    pub fn new(d: usize, m: usize) -> StripeCode {
        StripeCode { d, m }
    }

    /// Data units per stripe.
    pub fn data_units(&self) -> usize {
        self.d
    }

    /// Parity units per stripe.
    pub fn parity_units(&self) -> usize {
        self.m
    }

    /// The `m` parity units of `data` (`d` units of one size; units of length zero give
    /// empty parity, as a member without per-block metadata needs).
    pub fn encode(&self, data: &[&[u8]]) -> Result<Vec<Vec<u8>>, CodeError> {
        if data.len() != self.d {
            return Err(CodeError::DataCount {
                got: data.len(),
                want: self.d,
            });
        }
        let len = data.first().map_or(0, |u| u.len());
        if data.iter().any(|u| u.len() != len) {
            return Err(CodeError::Sizes);
        }
        if self.m == 1 {
            let mut p = vec![0u8; len];
            zns::parity::parity_into(&mut p, data);
            return Ok(vec![p]);
        }
        if len == 0 {
            return Ok(vec![Vec::new(); self.m]);
        }
        if !len.is_multiple_of(2) {
            return Err(CodeError::Sizes);
        }
        reed_solomon_simd::encode(self.d, self.m, data).map_err(|e| CodeError::Rs(e.to_string()))
    }

    /// The units at positions `want` rebuilt from `have` (position, bytes): with m = 1 the
    /// XOR of every other unit, with m = 2 any `d` units. A wanted unit that is given is
    /// copied.
    pub fn rebuild(
        &self,
        have: &[(usize, &[u8])],
        want: &[usize],
    ) -> Result<Vec<Vec<u8>>, CodeError> {
        let total = self.d + self.m;
        let mut seen = vec![false; total];
        let mut units: Vec<(usize, &[u8])> = Vec::with_capacity(have.len());
        for (p, u) in have {
            if let Some(s) = seen.get_mut(*p).filter(|s| !**s) {
                *s = true;
                units.push((*p, u));
            }
        }
        let len = units.first().map_or(0, |(_, u)| u.len());
        if units.iter().any(|(_, u)| u.len() != len) {
            return Err(CodeError::Sizes);
        }
        let missing = want
            .iter()
            .filter(|w| !seen.get(**w).copied().unwrap_or(false));
        if missing.clone().next().is_none() {
            return want.iter().map(|w| self.given(&units, *w)).collect();
        }
        if units.len() < self.d {
            return Err(CodeError::TooFew {
                need: self.d,
                have: units.len(),
            });
        }
        if self.m == 1 || len == 0 {
            // XOR: the one missing unit is the XOR of all the others (zero length: empty).
            let mut x = vec![0u8; len];
            let all: Vec<&[u8]> = units.iter().map(|(_, u)| *u).collect();
            zns::parity::parity_into(&mut x, &all);
            return want
                .iter()
                .map(|w| match seen.get(*w) {
                    Some(true) => self.given(&units, *w),
                    _ => Ok(x.clone()),
                })
                .collect();
        }
        let data = self.data_of(&units)?;
        let parity = if want.iter().any(|w| *w >= self.d && !seen[*w]) {
            let refs: Vec<&[u8]> = data.iter().map(|u| &u[..]).collect();
            self.encode(&refs)?
        } else {
            Vec::new()
        };
        want.iter()
            .map(|w| match (*w < self.d, seen.get(*w)) {
                (_, Some(true)) => self.given(&units, *w),
                (true, _) => data.get(*w).cloned().ok_or(CodeError::Sizes),
                (false, _) => parity.get(*w - self.d).cloned().ok_or(CodeError::Sizes),
            })
            .collect()
    }

    /// Rebuilds the unit at code position `want` from `have` (position, unit data, unit
    /// metadata) and copies its blocks from block `x0` on into `data` and `meta` (`bs` and
    /// `oob` bytes per block). The outer error is a caller's slice that does not fit the
    /// unit (a bug); the inner one says the stripe cannot be rebuilt.
    pub fn rebuild_blocks(
        &self,
        have: &[(usize, Vec<u8>, Vec<u8>)],
        want: usize,
        x0: usize,
        (bs, oob): (usize, usize),
        data: &mut [u8],
        meta: &mut [u8],
    ) -> Result<Result<(), CodeError>, zns::NvmeStatus> {
        let units: Vec<(usize, &[u8])> = have.iter().map(|(p, u, _)| (*p, &u[..])).collect();
        let metas: Vec<(usize, &[u8])> = have.iter().map(|(p, _, m)| (*p, &m[..])).collect();
        let (ud, um) = match (self.rebuild(&units, &[want]), self.rebuild(&metas, &[want])) {
            (Ok(ud), Ok(um)) => (ud, um),
            (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
        };
        let internal = zns::NvmeStatus::InternalError;
        let (Some(ud), Some(um)) = (ud.first(), um.first()) else {
            return Err(internal);
        };
        let (n, nm) = (data.len(), meta.len());
        data.copy_from_slice(ud.get(x0 * bs..x0 * bs + n).ok_or(internal)?);
        meta.copy_from_slice(um.get(x0 * oob..x0 * oob + nm).ok_or(internal)?);
        Ok(Ok(()))
    }

    /// Every data unit, decoded from at least `d` units (m >= 2).
    fn data_of(&self, units: &[(usize, &[u8])]) -> Result<Vec<Vec<u8>>, CodeError> {
        let rs = |e: reed_solomon_simd::Error| CodeError::Rs(e.to_string());
        let originals = units.iter().filter(|(p, _)| *p < self.d).copied();
        let recovery = units
            .iter()
            .filter(|(p, _)| *p >= self.d)
            .map(|(p, u)| (p - self.d, *u));
        if units
            .first()
            .is_some_and(|(_, u)| !u.len().is_multiple_of(2))
        {
            return Err(CodeError::Sizes);
        }
        let restored =
            reed_solomon_simd::decode(self.d, self.m, originals, recovery).map_err(rs)?;
        (0..self.d)
            .map(|k| {
                units
                    .iter()
                    .find(|(p, _)| *p == k)
                    .map(|(_, u)| u.to_vec())
                    .or_else(|| restored.get(&k).cloned())
                    .ok_or(CodeError::TooFew {
                        need: self.d,
                        have: units.len(),
                    })
            })
            .collect()
    }

    fn given(&self, units: &[(usize, &[u8])], w: usize) -> Result<Vec<u8>, CodeError> {
        units
            .iter()
            .find(|(p, _)| *p == w)
            .map(|(_, u)| u.to_vec())
            .ok_or(CodeError::Sizes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(d: usize, len: usize, seed: u8) -> Vec<Vec<u8>> {
        (0..d)
            .map(|k| {
                (0..len)
                    .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ (k as u8 * 17))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn every_pair_of_lost_units_comes_back_with_two_parity_units() {
        let (d, m) = (3, 2);
        let code = StripeCode::new(d, m);
        let data = units(d, 4096 + 64, 5);
        let refs: Vec<&[u8]> = data.iter().map(|u| &u[..]).collect();
        let parity = match code.encode(&refs) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let all: Vec<&[u8]> = refs
            .iter()
            .copied()
            .chain(parity.iter().map(|p| &p[..]))
            .collect();
        for a in 0..d + m {
            for b in a + 1..d + m {
                let have: Vec<(usize, &[u8])> = (0..d + m)
                    .filter(|p| *p != a && *p != b)
                    .map(|p| (p, all[p]))
                    .collect();
                let got = match code.rebuild(&have, &[a, b]) {
                    Ok(g) => g,
                    Err(e) => panic!("lost {a},{b}: {e}"),
                };
                assert_eq!(got[0], all[a], "lost {a},{b}");
                assert_eq!(got[1], all[b], "lost {a},{b}");
            }
        }
        let three: Vec<(usize, &[u8])> = (3..5).map(|p| (p, all[p])).collect();
        assert!(matches!(
            code.rebuild(&three, &[0]),
            Err(CodeError::TooFew { need: 3, have: 2 })
        ));
    }

    #[test]
    fn parity_of_zeros_is_zero_so_partial_stripes_code_their_prefix() {
        // A partial stripe's parity is computed with the unwritten units as zeros; this holds
        // only because a unit of zeros contributes nothing to either parity unit.
        let code = StripeCode::new(3, 2);
        let z = vec![0u8; 128];
        let p = match code.encode(&[&z, &z, &z]) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert!(p.iter().all(|u| u.iter().all(|b| *b == 0)));
        assert_eq!(
            code.encode(&[&[], &[], &[]]),
            Ok(vec![Vec::new(), Vec::new()])
        );
    }

    #[test]
    fn xor_code_rebuilds_one_unit_and_refuses_two() {
        let code = StripeCode::new(2, 1);
        let data = units(2, 100, 9);
        let p = match code.encode(&[&data[0], &data[1]]) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let got = code.rebuild(&[(1, &data[1]), (2, &p[0])], &[0]);
        assert_eq!(got, Ok(vec![data[0].clone()]));
        assert!(matches!(
            code.rebuild(&[(2, &p[0])], &[0]),
            Err(CodeError::TooFew { .. })
        ));
    }
}
