//! A short exact sum in fixed point: a handful of terms added and rounded once without the slow tier of
//! [`super::ExactSum`], whose spills allocate (the fast path of finishing `var` and `std`).

use super::{mantissa_position, pow2};

/// Most terms one sum takes: a term adds at most two digits below 2^64 to a 128-bit cell, so 16 of them stay
/// below 2^69.
const TERMS: usize = 16;
/// Every term, shifted to the finest term's resolution, must fit in this many bits: it then reaches no cell
/// past the last of [`round_sum`]'s six, and the sum of [`TERMS`] of them keeps its sign.
const SPAN: u32 = 250;

/// A finite double as a term `mag * 2^(pos - 1074)` (the scale of [`super::ExactSum`]'s lane); `None` for NaN
/// or an infinity.
pub(crate) fn term(x: f64) -> Option<(i128, i64)> {
    if !x.is_finite() {
        return None;
    }
    let (mant, pos) = mantissa_position(x.to_bits());
    let mag = if x.is_sign_negative() {
        -(mant as i128)
    } else {
        mant as i128
    };
    Some((mag, pos))
}

/// The exact sum of at most [`TERMS`] terms `mag * 2^(pos - 1074)`, rounded once to nearest-even (`+0.0` when
/// it is zero): summed in 64-bit digits of 128-bit cells, carried once at the end. `None` when the terms span
/// more than [`SPAN`] bits, or the sum is not a normal double far from overflow (the caller's exact path
/// decides those).
pub(crate) fn round_sum(terms: &[(i128, i64)]) -> Option<f64> {
    debug_assert!(terms.len() <= TERMS);
    // The finest term's place and the top of the highest, in one pass: they choose the sum's width.
    let (mut lsb, mut top) = (i64::MAX, i64::MIN);
    for &(mag, pos) in terms.iter().filter(|t| t.0 != 0) {
        lsb = lsb.min(pos);
        top = top.max(pos + (128 - mag.unsigned_abs().leading_zeros()) as i64);
    }
    if lsb == i64::MAX {
        return Some(0.0);
    }
    if top - lsb <= NARROW {
        return narrow_sum(terms, lsb);
    }
    if top - lsb > SPAN as i64 {
        return None;
    }
    // cells[k] weighs 2^(64 k) units of 2^(lsb - 1074); every add below is of magnitude below 2^64.
    let mut cells = [0i128; 6];
    for &(mag, pos) in terms.iter().filter(|t| t.0 != 0) {
        let shift = (pos - lsb) as u32;
        let (k, b) = ((shift / 64) as usize, shift % 64);
        // mag = hi 2^64 + lo, lo unsigned; mag 2^b = (lo 2^b) + (hi 2^b) 2^64, each split in two digits.
        let (lo, hi) = (mag as u64, (mag >> 64) as i64);
        let lo = (lo as u128) << b;
        let hi = (hi as i128) << b;
        cells[k] += (lo as u64) as i128;
        cells[k + 1] += ((lo >> 64) as u64) as i128 + (hi as u64) as i128;
        cells[k + 2] += hi >> 64;
    }
    // Carry into 64-bit limbs; the last carry is the sign.
    let mut limbs = [0u64; 6];
    let mut carry = 0i128;
    for (limb, &cell) in limbs.iter_mut().zip(&cells) {
        let v = cell + carry;
        *limb = v as u64;
        carry = v >> 64;
    }
    let negative = carry < 0;
    if negative {
        // Two's complement over the six limbs.
        let mut borrow = true;
        for limb in &mut limbs {
            let (v, c) = (!*limb).overflowing_add(u64::from(borrow));
            *limb = v;
            borrow = c;
        }
    }
    let top_limb = (0..6).rev().find(|&i| limbs[i] != 0)?;
    // The top bit's place; the result weighs about 2^(top + lsb - 1074).
    let top = 64 * top_limb as i64 + 63 - limbs[top_limb].leading_zeros() as i64;
    let exp = top + lsb - 1074;
    if !(-959..=1022).contains(&exp) {
        return None;
    }
    // The 64 bits from the top one down, and a sticky bit for any set bit below them: they round alike (see
    // `super::i128_to_f64`).
    let (head, sticky) = top_bits(&limbs, top_limb, top);
    let v = (head | u64::from(sticky)) as f64 * pow2(exp - 63);
    Some(if negative { -v } else { v })
}

/// Terms that all fit in this many bits shifted to the finest one's place sum within an `i128` ([`TERMS`] of
/// them stay below 2^126).
const NARROW: i64 = 122;

/// [`round_sum`] of terms that all fit, shifted to `lsb`, in [`NARROW`] bits: one shift and add a term, and
/// the sum rounded as a lane is.
fn narrow_sum(terms: &[(i128, i64)], lsb: i64) -> Option<f64> {
    let mut sum = 0i128;
    for &(mag, pos) in terms.iter().filter(|t| t.0 != 0) {
        sum += mag << (pos - lsb);
    }
    if sum == 0 {
        return Some(0.0);
    }
    let top = 127 - sum.unsigned_abs().leading_zeros() as i64;
    let exp = top + lsb - 1074;
    if !(-959..=1022).contains(&exp) {
        return None;
    }
    Some(super::i128_to_f64(sum) * pow2(lsb - 1074))
}

/// The 64 bits of `limbs` from bit `top` (in limb `top_limb`) down, and whether any bit below them is set.
fn top_bits(limbs: &[u64; 6], top_limb: usize, top: i64) -> (u64, bool) {
    let b = (top % 64) as u32; // the top bit's place in its limb
    if b == 63 {
        let below = limbs[..top_limb].iter().any(|&l| l != 0);
        return (limbs[top_limb], below);
    }
    let next = if top_limb > 0 { limbs[top_limb - 1] } else { 0 };
    let head = (limbs[top_limb] << (63 - b)) | (next >> (b + 1));
    let rest = next << (63 - b) != 0 || limbs[..top_limb.saturating_sub(1)].iter().any(|&l| l != 0);
    (head, rest && top_limb > 0)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::exact_sum::ExactSum;

    fn finite() -> impl Strategy<Value = f64> {
        prop_oneof![
            (-1000i64..1000).prop_map(|i| i as f64),
            (0i32..40, -1_000_000i64..1_000_000)
                .prop_map(|(e, m)| m as f64 * 2f64.powi(e * 3 - 60)),
            any::<f64>().prop_filter("finite", |x| x.is_finite()),
        ]
    }

    fn wide(values: &[f64]) -> Option<f64> {
        let terms: Vec<_> = values.iter().map(|&x| term(x).unwrap()).collect();
        round_sum(&terms)
    }

    fn exact(values: &[f64]) -> f64 {
        let mut s = ExactSum::new();
        values.iter().for_each(|&x| s.add(x));
        s.value()
    }

    proptest! {
        /// Whenever the wide sum answers, it is the exact sum rounded once: `ExactSum`'s value, bit for bit
        /// (zero aside: the wide sum says +0.0, the exact sum -0.0 when only -0.0 was added).
        #[test]
        fn wide_sum_is_the_exact_sum(values in prop::collection::vec(finite(), 0..TERMS)) {
            if let Some(v) = wide(&values) {
                let want = exact(&values);
                prop_assert!(v.to_bits() == want.to_bits() || (v == 0.0 && want == 0.0), "{v} {want}");
            }
        }

        /// Lane-sized terms (up to 127 bits) near one another, as a window's sums of squares are.
        #[test]
        fn wide_lane_terms_are_exact(
            lanes in prop::collection::vec((any::<i128>(), 2u32..100, 0i64..100), 1..6),
            doubles in prop::collection::vec((-(1i64 << 53)..(1i64 << 53), 0i64..150), 0..8),
        ) {
            // Lanes of 27 to 125 bits and 53-bit terms, all within about 250 bits of each other.
            let mut terms: Vec<(i128, i64)> = lanes.iter().map(|&(m, s, p)| (m >> s, p + 600)).collect();
            terms.extend(doubles.iter().map(|&(m, p)| (m as i128, p + 600)));
            let mut want = ExactSum::new();
            for &(m, p) in &terms {
                let mut one = ExactSum::new();
                one.add_scaled(m, p as u16);
                want.merge(&one);
            }
            if let Some(v) = round_sum(&terms) {
                let want = want.value();
                prop_assert!(v.to_bits() == want.to_bits() || (v == 0.0 && want == 0.0), "{v} {want}");
            }
        }
    }

    #[test]
    fn close_terms_always_answer() {
        let values = [1.0e10, -1.0e10, 3.5, 2f64.powi(-60), -7.25e-5];
        assert_eq!(wide(&values).unwrap().to_bits(), exact(&values).to_bits());
        assert_eq!(round_sum(&[]), Some(0.0));
        assert!(term(f64::NAN).is_none());
        // Too wide a span: left to the exact path.
        assert_eq!(wide(&[1e300, 1e-300]), None);
    }
}
