//! The byte encoding of an [`ExactSum`]: how exact float sums travel in partial states (Spark shuffles,
//! files) without losing a bit.
//!
//! Layout (version 1), little-endian:
//!
//! | bytes | content |
//! |-------|---------|
//! | 1 | format version (`1`) |
//! | 1 | flags: bit 0 NaN seen, bit 1 +inf seen, bit 2 -inf seen, bit 3 some value other than -0.0 seen |
//! | 18 × n | terms: `i128` integer `x`, `u16` position `p`; the sum is `Σ x · 2^(p - 1074)` |
//!
//! Any list of terms is valid (the decoder adds them exactly), so other producers may write one term per
//! finite value: `x` the value's signed significand, `p` its biased exponent minus one (or 0 for subnormals).
//!
//! windgate writes one list per sum, whatever the order and grouping of the adds that built it (a state
//! records them: a batch's lane, spills to the slow tier), so that equal sums give equal bytes: partial
//! states (`output="partials"`, checkpoints) are the same for any split of the input into batches. The
//! canonical list of a finite sum `S` is empty for 0; one term `(x, p)` with `x` odd when `S = x · 2^(p -
//! 1074)` fits (`|x| < 2^127`); else one term per non-zero base-2^32 digit of `|S|`, each `±digit` at its
//! digit's position (a multiple of 32).

use super::{ExactSum, NAN, NEG_INF, POS_INF};
use crate::error::{Error, ErrorKind, Result};

/// The encoding's version byte.
pub const VERSION: u8 = 1;
const TERM: usize = 18;
const NOT_ONLY_NEG_ZERO: u8 = 8;

impl ExactSum {
    /// The sum's exact state as bytes (see the module doc); [`ExactSum::from_bytes`] reads it back.
    ///
    /// ```
    /// use windgate_core::exact_sum::ExactSum;
    /// let mut s = ExactSum::new();
    /// [0.1, 0.2, 1e300, -1e300].iter().for_each(|&v| s.add(v));
    /// let back = ExactSum::from_bytes(&s.to_bytes()).unwrap();
    /// assert_eq!(back.value().to_bits(), s.value().to_bits());
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut flags = self.specials;
        if self.not_only_neg_zero {
            flags |= NOT_ONLY_NEG_ZERO;
        }
        let mut out = vec![VERSION, flags];
        if let Some(big) = &self.big {
            out[1] |= big.specials
                | if big.not_only_neg_zero {
                    NOT_ONLY_NEG_ZERO
                } else {
                    0
                };
        }
        for (x, pos) in self.canonical_terms() {
            push_term(&mut out, x, pos);
        }
        out
    }

    /// The finite part of the sum as its canonical list of terms (see the module doc).
    fn canonical_terms(&self) -> Vec<(i128, u16)> {
        let Some(big) = &self.big else {
            return odd_term(self.acc, self.anchor).into_iter().collect();
        };
        let mut all = (**big).clone();
        all.add_fixed(self.acc, self.anchor);
        all.normalise();
        let negative = all.digits.last().is_some_and(|&d| d < 0);
        if negative {
            all.digits.iter_mut().for_each(|d| *d = -*d);
            all.normalise();
        }
        // `all.digits` now holds |S|, every digit in [0, 2^32).
        let sign = if negative { -1 } else { 1 };
        let Some(first) = all.digits.iter().position(|&d| d != 0) else {
            return Vec::new();
        };
        let last = all
            .digits
            .iter()
            .rposition(|&d| d != 0)
            .expect("a digit is set");
        // Bits from the lowest set one to the highest: at most 127 make one term.
        let low = all.digits[first].trailing_zeros();
        let high = 64 - all.digits[last].leading_zeros();
        let span = (last - first) as u32 * super::DIGIT_BITS + high - low;
        if span <= 127 {
            // Digit i's lowest bit lands at 32 (i - first) - low < 127: nothing shifts out.
            let magnitude =
                (all.digits[first..=last].iter().enumerate()).fold(0u128, |x, (i, &d)| {
                    let at = i as u32 * super::DIGIT_BITS;
                    x | if at == 0 {
                        (d as u128) >> low
                    } else {
                        (d as u128) << (at - low)
                    }
                });
            let pos = (all.lo as u32 + first as u32) * super::DIGIT_BITS + low;
            return vec![(sign * magnitude as i128, pos as u16)];
        }
        (all.digits.iter().enumerate())
            .filter(|&(_, &d)| d != 0)
            .map(|(i, &d)| {
                let pos = (all.lo as usize + i) * super::DIGIT_BITS as usize;
                (sign * d as i128, pos as u16)
            })
            .collect()
    }

    /// Reads [`ExactSum::to_bytes`]'s encoding; an error names what is wrong with the bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<ExactSum> {
        let bad = |why: String| Error::new(ErrorKind::InvalidValue, why);
        let (&version, rest) = bytes
            .split_first()
            .ok_or_else(|| bad("an exact sum state is empty (expected at least 2 bytes)".into()))?;
        if version != VERSION {
            return Err(bad(format!(
                "exact sum state has format version {version}; this windgate reads version {VERSION}"
            )));
        }
        let (&flags, terms) = rest
            .split_first()
            .ok_or_else(|| bad("exact sum state is truncated (no flags byte)".into()))?;
        if flags & !(NAN | POS_INF | NEG_INF | NOT_ONLY_NEG_ZERO) != 0 || terms.len() % TERM != 0 {
            return Err(bad(format!(
                "exact sum state is malformed ({} bytes, flags {flags:#x})",
                bytes.len()
            )));
        }
        let mut sum = ExactSum {
            specials: flags & (NAN | POS_INF | NEG_INF),
            not_only_neg_zero: flags & NOT_ONLY_NEG_ZERO != 0,
            ..ExactSum::default()
        };
        for term in terms.chunks_exact(TERM) {
            let x = i128::from_le_bytes(term[..16].try_into().expect("16 bytes"));
            let pos = u16::from_le_bytes([term[16], term[17]]);
            if pos > MAX_POS || x == i128::MIN {
                return Err(bad(format!(
                    "exact sum state has a term out of range (position {pos})"
                )));
            }
            if x != 0 {
                // The fast lane when the term fits it (the usual single lane term), else the slow tier.
                sum.add_term(x, pos);
            }
        }
        Ok(sum)
    }
}

/// Largest term position the decoder takes: far above any f64 (2^1024 is position 2098) yet small enough
/// that the superaccumulator's digit index stays in range.
const MAX_POS: u16 = 4096;

/// `x · 2^(pos - 1074)` as one term with an odd `x`, or none for 0.
fn odd_term(x: i128, pos: u16) -> Option<(i128, u16)> {
    (x != 0).then(|| {
        let zeros = x.trailing_zeros();
        (x >> zeros, pos + zeros as u16)
    })
}

fn push_term(out: &mut Vec<u8>, x: i128, pos: u16) {
    out.extend_from_slice(&x.to_le_bytes());
    out.extend_from_slice(&pos.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(values: &[f64]) -> (u64, u64) {
        let mut s = ExactSum::new();
        values.iter().for_each(|&v| s.add(v));
        let back = ExactSum::from_bytes(&s.to_bytes()).unwrap();
        (s.value().to_bits(), back.value().to_bits())
    }

    #[test]
    fn special_values_and_signed_zero_survive() {
        for values in [
            vec![],
            vec![-0.0],
            vec![-0.0, 0.0],
            vec![f64::NAN, 1.0],
            vec![f64::INFINITY, 1.0],
            vec![f64::INFINITY, f64::NEG_INFINITY],
            vec![f64::MAX, f64::MAX, -f64::MAX],
            vec![5e-324, 1e308, -1e308],
        ] {
            let (a, b) = roundtrip(&values);
            assert_eq!(a, b, "{values:?}");
        }
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        assert!(ExactSum::from_bytes(&[]).is_err());
        assert!(ExactSum::from_bytes(&[2, 0]).is_err());
        assert!(ExactSum::from_bytes(&[1]).is_err());
        assert!(ExactSum::from_bytes(&[1, 0x80]).is_err());
        assert!(ExactSum::from_bytes(&[1, 0, 1, 2, 3]).is_err());
        let mut far = vec![1, 8];
        push_term(&mut far, 1, u16::MAX);
        assert!(ExactSum::from_bytes(&far).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip_keeps_the_bits(values in proptest::collection::vec(any::<f64>(), 0..64)) {
            let (a, b) = roundtrip(&values);
            prop_assert_eq!(a, b);
        }

        /// Equal sums give equal bytes, however they were built: values added one by one in two orders, or
        /// in random groups summed apart and merged (which spill to the slow tier at different points), and
        /// the bytes read back and written again.
        #[test]
        fn equal_sums_encode_alike(
            values in proptest::collection::vec(
                prop_oneof![
                    any::<f64>().prop_filter("finite", |v| v.is_finite()),
                    (-1000i64..1000, -80i32..80).prop_map(|(m, e)| m as f64 * 2f64.powi(e)),
                    Just(0.0),
                    Just(-0.0),
                ],
                0..48,
            ),
            cuts in proptest::collection::vec(0usize..48, 0..6),
        ) {
            let mut forward = ExactSum::new();
            values.iter().for_each(|&v| forward.add(v));
            let mut backward = ExactSum::new();
            values.iter().rev().for_each(|&v| backward.add(v));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(values.len())).collect();
            cuts.sort_unstable();
            let mut grouped = ExactSum::new();
            let mut start = 0;
            for end in cuts.into_iter().chain([values.len()]) {
                let mut part = ExactSum::new();
                values[start..end].iter().for_each(|&v| part.add(v));
                grouped.merge(&part);
                start = end;
            }
            let bytes = forward.to_bytes();
            prop_assert_eq!(&backward.to_bytes(), &bytes);
            prop_assert_eq!(&grouped.to_bytes(), &bytes);
            prop_assert_eq!(&ExactSum::from_bytes(&bytes).unwrap().to_bytes(), &bytes);
        }

        #[test]
        fn decoded_sums_merge_like_the_originals(
            xs in proptest::collection::vec(-1e300f64..1e300, 0..32),
            ys in proptest::collection::vec(-1e-300f64..1e-300, 0..32),
        ) {
            let (mut a, mut b) = (ExactSum::new(), ExactSum::new());
            xs.iter().for_each(|&v| a.add(v));
            ys.iter().for_each(|&v| b.add(v));
            let mut direct = a.clone();
            direct.merge(&b);
            let mut decoded = ExactSum::from_bytes(&a.to_bytes()).unwrap();
            decoded.merge(&ExactSum::from_bytes(&b.to_bytes()).unwrap());
            prop_assert_eq!(direct.value().to_bits(), decoded.value().to_bits());
        }
    }
}
