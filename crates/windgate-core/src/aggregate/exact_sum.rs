//! Exact, order-independent float summation.
//!
//! DESIGN §4 asks for float sums and means that do not depend on summation order, so that any thread count,
//! batch split or pane split gives bit-identical results. [`ExactSum`] is a sparse fixed-point
//! superaccumulator (after Neal, "Fast exact summation using small and large superaccumulators", 2015): every
//! finite f64 is an integer multiple of 2^-1074, so the sum is kept exactly as a big integer in 32-bit digits
//! held in i64 cells (the upper 32 bits absorb carries). Only the digits the data touches are stored, usually
//! three or four, inline. The result is the exact sum rounded once to nearest-even: the same bits for every
//! order of the same values, and the correctly rounded sum besides.

use smallvec::SmallVec;

const DIGIT_BITS: u32 = 32;
const DIGIT_MASK: i64 = (1 << DIGIT_BITS) - 1;
/// Each add puts less than 2^32 into a cell; a cell holds 2^63, so carries must be pushed up before 2^31 adds.
const NORMALISE_EVERY: u32 = 1 << 30;

/// An exact sum of f64 values. `Default` is the empty sum.
#[derive(Debug, Clone, Default)]
pub struct ExactSum {
    /// Index of `digits[0]`: digit `i` weighs 2^(32*(lo+i) - 1074).
    lo: u16,
    /// Little-endian base-2^32 digits with carries pending; the true value is sum(digits[i] * 2^(32*i)).
    digits: SmallVec<[i64; 4]>,
    /// Adds since the carries were last pushed up (bounds every cell's magnitude by `pending * 2^32`).
    pending: u32,
    /// NaN, +inf and -inf seen (bit 0, 1, 2). IEEE rules decide the result from them.
    specials: u8,
    /// Only -0.0 (or nothing) was added: the IEEE sum is then -0.0.
    not_only_neg_zero: bool,
}

const NAN: u8 = 1;
const POS_INF: u8 = 2;
const NEG_INF: u8 = 4;

impl ExactSum {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one value exactly.
    #[inline]
    pub fn add(&mut self, v: f64) {
        let bits = v.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i64;
        let frac = bits & ((1u64 << 52) - 1);
        if biased == 0x7ff {
            self.add_special(v);
            return;
        }
        if v != 0.0 || v.is_sign_positive() {
            self.not_only_neg_zero = true;
        }
        if v == 0.0 {
            return;
        }
        // v = ±mant * 2^(pos - 1074), pos >= 0.
        let (mant, pos) = if biased == 0 {
            (frac, 0)
        } else {
            (frac | (1 << 52), biased - 1)
        };
        let digit = (pos / DIGIT_BITS as i64) as u16;
        let shifted = (mant as u128) << (pos % DIGIT_BITS as i64);
        let parts = [
            (shifted as i64) & DIGIT_MASK,
            ((shifted >> 32) as i64) & DIGIT_MASK,
            ((shifted >> 64) as i64) & DIGIT_MASK,
        ];
        // Fast path: the digits are already there (values of one column share a narrow exponent range).
        let base = match (digit as usize).checked_sub(self.lo as usize) {
            Some(b) if b + 3 <= self.digits.len() => b,
            _ => self.reserve(digit, 3),
        };
        let digits = &mut self.digits[base..base + 3];
        if bits >> 63 == 0 {
            for (d, p) in digits.iter_mut().zip(parts) {
                *d += p;
            }
        } else {
            for (d, p) in digits.iter_mut().zip(parts) {
                *d -= p;
            }
        }
        self.pending += 1;
        if self.pending >= NORMALISE_EVERY {
            self.normalise();
        }
    }

    #[cold]
    fn add_special(&mut self, v: f64) {
        self.not_only_neg_zero = true;
        self.specials |= if v.is_nan() {
            NAN
        } else if v > 0.0 {
            POS_INF
        } else {
            NEG_INF
        };
    }

    /// Adds another exact sum (the combine step of panes and windows).
    pub fn merge(&mut self, other: &ExactSum) {
        self.specials |= other.specials;
        self.not_only_neg_zero |= other.not_only_neg_zero;
        if other.digits.is_empty() {
            return;
        }
        if self.digits.is_empty() {
            self.lo = other.lo;
            self.digits.clone_from(&other.digits);
            self.pending = other.pending;
            return;
        }
        if self.pending.saturating_add(other.pending) >= NORMALISE_EVERY {
            self.normalise();
        }
        let base = match (other.lo as usize).checked_sub(self.lo as usize) {
            Some(b) if b + other.digits.len() <= self.digits.len() => b,
            _ => self.reserve(other.lo, other.digits.len()),
        };
        for (d, o) in self.digits[base..].iter_mut().zip(&other.digits) {
            *d += o;
        }
        self.pending += other.pending.max(1);
        if self.pending >= NORMALISE_EVERY {
            self.normalise();
        }
    }

    /// Makes digits `[digit, digit + n)` present and returns the index of `digit` in `self.digits`.
    #[cold]
    fn reserve(&mut self, digit: u16, n: usize) -> usize {
        if self.digits.is_empty() {
            self.lo = digit;
            self.digits.resize(n, 0);
            return 0;
        }
        if digit < self.lo {
            let grow = (self.lo - digit) as usize;
            self.digits.insert_many(0, std::iter::repeat_n(0, grow));
            self.lo = digit;
        }
        let base = (digit - self.lo) as usize;
        if base + n > self.digits.len() {
            self.digits.resize(base + n, 0);
        }
        base
    }

    /// Pushes carries up so that every digit but the top one is in `[0, 2^32)` and the top one is small.
    fn normalise(&mut self) {
        let mut carry = 0i64;
        for d in self.digits.iter_mut() {
            let v = *d + carry;
            carry = v >> DIGIT_BITS; // arithmetic shift: floor division by 2^32
            *d = v & DIGIT_MASK;
        }
        while carry != 0 && carry != -1 {
            self.digits.push(carry & DIGIT_MASK);
            carry >>= DIGIT_BITS;
        }
        if carry == -1 {
            // Negative total: keep the sign in a top digit of -1 (two's complement over the digits).
            self.digits.push(-1);
        }
        self.pending = 1;
    }

    /// The exact sum, rounded once to nearest-even. An empty sum is 0.0.
    pub fn value(&self) -> f64 {
        if self.specials != 0 {
            return match self.specials {
                POS_INF => f64::INFINITY,
                NEG_INF => f64::NEG_INFINITY,
                _ => f64::NAN, // NaN seen, or +inf and -inf together
            };
        }
        let mut n = self.clone();
        n.normalise();
        let negative = n.digits.last().is_some_and(|&d| d < 0);
        if negative {
            for d in n.digits.iter_mut() {
                *d = -*d;
            }
            n.normalise();
        }
        let magnitude = round_digits(n.lo, &n.digits);
        if magnitude == 0.0 {
            return if self.not_only_neg_zero { 0.0 } else { -0.0 };
        }
        if negative { -magnitude } else { magnitude }
    }
}

/// Rounds the non-negative number `sum(digits[i] * 2^(32*(lo+i) - 1074))` (digits in `[0, 2^32)`) to f64.
fn round_digits(lo: u16, digits: &[i64]) -> f64 {
    let Some(top) = digits.iter().rposition(|&d| d != 0) else {
        return 0.0;
    };
    // The three highest digits hold at least 65 significant bits; everything below only matters as "sticky".
    let first = top.saturating_sub(2);
    let mut x: u128 = 0;
    for &d in digits[first..=top].iter().rev() {
        x = (x << DIGIT_BITS) | d as u128;
    }
    let sticky = digits[..first].iter().any(|&d| d != 0);
    let lsb_exp = (lo as i64 + first as i64) * DIGIT_BITS as i64 - 1074;
    let nbits = 128 - x.leading_zeros() as i64;
    if nbits <= 53 {
        // Exact (only possible near the subnormal range, where nothing lies below `first`).
        return x as f64 * pow2(lsb_exp);
    }
    let shift = (nbits - 53) as u32;
    let mut mant = x >> shift;
    let rem = x & ((1u128 << shift) - 1);
    let half = 1u128 << (shift - 1);
    if rem > half || (rem == half && (sticky || mant & 1 == 1)) {
        mant += 1;
    }
    let mut exp = lsb_exp + shift as i64;
    if mant == 1u128 << 53 {
        mant >>= 1;
        exp += 1;
    }
    if exp > 971 {
        return f64::INFINITY;
    }
    mant as f64 * pow2(exp)
}

/// 2^e for -1074 <= e <= 1023, exactly.
fn pow2(e: i64) -> f64 {
    debug_assert!((-1074..=1023).contains(&e));
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e + 1074))
    }
}

/// `a * b` as an exact unevaluated sum `hi + lo` (FMA-based two-product).
#[inline]
pub fn two_product(a: f64, b: f64) -> (f64, f64) {
    let hi = a * b;
    (hi, a.mul_add(b, -hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sum(values: &[f64]) -> f64 {
        let mut s = ExactSum::new();
        values.iter().for_each(|&v| s.add(v));
        s.value()
    }

    #[test]
    fn classic_cancellation() {
        assert_eq!(sum(&[1e100, 1.0, -1e100]), 1.0);
        assert_eq!(sum(&[0.1, 0.2, 0.3]), 0.6); // naive left-to-right gives 0.6000000000000001
        assert_eq!(sum(&[0.1; 10]), 1.0);
        assert_eq!(sum(&[]), 0.0);
        assert!(sum(&[-0.0]).is_sign_negative());
        assert!(sum(&[-0.0, 0.0]).is_sign_positive());
        assert_eq!(sum(&[f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(sum(&[f64::MAX, f64::MAX, -f64::MAX]), f64::MAX);
        assert_eq!(sum(&[5e-324, 5e-324]), 1e-323);
        assert_eq!(sum(&[-3.5, 1.25]), -2.25);
        assert!(sum(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert!(sum(&[1.0, f64::NAN]).is_nan());
        assert_eq!(sum(&[1.0, f64::INFINITY]), f64::INFINITY);
    }

    #[test]
    fn rounds_half_to_even() {
        // 2^53 + 1 is a tie between 2^53 and 2^53 + 2: even wins; any extra bit breaks the tie upwards.
        let big = 9007199254740992.0;
        assert_eq!(sum(&[big, 1.0]), big);
        assert_eq!(sum(&[big, 1.0, 1e-300]), big + 2.0);
        assert_eq!(sum(&[big, 1.0, -1e-300]), big);
        assert_eq!(sum(&[big, 3.0]), big + 4.0);
    }

    #[test]
    fn many_adds_trigger_normalisation() {
        let mut s = ExactSum::new();
        s.pending = NORMALISE_EVERY - 2;
        for _ in 0..10 {
            s.add(-0.75);
        }
        assert_eq!(s.value(), -7.5);
    }

    fn finite() -> impl Strategy<Value = f64> {
        prop_oneof![
            (-1000i32..1000).prop_map(|i| i as f64 / 8.0),
            any::<f64>().prop_filter("finite", |v| v.is_finite()),
            (-1e6f64..1e6),
            (-1e-300f64..1e-300),
        ]
    }

    proptest! {
        /// Any order and any grouping (merge of partial sums) gives the same bits.
        #[test]
        fn order_and_grouping_independent(mut values in proptest::collection::vec(finite(), 0..60), cut in 0usize..60, seed: u64) {
            let whole = sum(&values);
            let cut = cut.min(values.len());
            let mut a = ExactSum::new();
            let mut b = ExactSum::new();
            values[..cut].iter().for_each(|&v| a.add(v));
            values[cut..].iter().for_each(|&v| b.add(v));
            b.merge(&a);
            prop_assert_eq!(b.value().to_bits(), whole.to_bits());
            // A deterministic shuffle.
            let mut state = seed | 1;
            for i in (1..values.len()).rev() {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                values.swap(i, (state % (i as u64 + 1)) as usize);
            }
            prop_assert_eq!(sum(&values).to_bits(), whole.to_bits());
        }

        /// Against exact integer arithmetic where the values are multiples of 1/8.
        #[test]
        fn matches_integer_sum(ints in proptest::collection::vec(-1_000_000_000i64..1_000_000_000, 0..100)) {
            let values: Vec<f64> = ints.iter().map(|&i| i as f64 / 8.0).collect();
            let exact = ints.iter().sum::<i64>() as f64 / 8.0;
            prop_assert_eq!(sum(&values), exact);
        }
    }
}
