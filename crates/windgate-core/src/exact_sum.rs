//! Exact, order-independent float summation.
//!
//! The determinism contract (`docs/architecture.md`, "Contracts") asks for float sums and means that do not
//! depend on summation order, so that any thread count, batch split or pane split gives bit-identical
//! results. Every finite f64 is an integer multiple of 2^-1074, so a sum can be kept exactly as an integer
//! and rounded once, to nearest-even, at the end: the same bits for every order of the same values, and the
//! correctly rounded sum besides.
//!
//! [`ExactSum`] keeps that integer in two tiers. The fast lane is one i128 in fixed point at the finest
//! resolution seen so far (`anchor`): values of a column usually span a few dozen binary orders of magnitude,
//! so nearly every add is a shift and one 128-bit add. Values the lane cannot hold without losing bits go to
//! `DigitSum`, a sparse superaccumulator of 32-bit digits in i64 cells (after Neal, "Fast exact summation
//! using small and large superaccumulators", 2015) that covers the whole f64 range.

use smallvec::SmallVec;

mod bytes;
mod wide;
pub use bytes::VERSION as BYTES_VERSION;
pub(crate) use wide::{round_sum, term};

const DIGIT_BITS: u32 = 32;
const DIGIT_MASK: i64 = (1 << DIGIT_BITS) - 1;
/// Each add puts less than 2^32 into a cell; a cell holds 2^63, so carries must be pushed up before 2^31 adds.
const NORMALISE_EVERY: u32 = 1 << 30;

/// A sparse superaccumulator: exact for any f64 values, slower than the fast lane of [`ExactSum`].
#[derive(Debug, Clone, Default)]
pub(crate) struct DigitSum {
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

/// A finite f64's bits as `(mant, pos)` with `|v| = mant * 2^(pos - 1074)`, `pos >= 0`.
#[inline]
fn mantissa_position(bits: u64) -> (u64, i64) {
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    if biased == 0 {
        (frac, 0)
    } else {
        (frac | (1 << 52), biased - 1)
    }
}

/// The flag of a NaN or infinite value.
fn special_bit(v: f64) -> u8 {
    if v.is_nan() {
        NAN
    } else if v > 0.0 {
        POS_INF
    } else {
        NEG_INF
    }
}

/// The IEEE sum of values that included the flagged specials.
fn special_result(specials: u8) -> f64 {
    match specials {
        POS_INF => f64::INFINITY,
        NEG_INF => f64::NEG_INFINITY,
        _ => f64::NAN, // NaN seen, or +inf and -inf together
    }
}

impl DigitSum {
    #[cfg(test)]
    pub fn new() -> Self {
        Self::default()
    }

    #[cfg(test)]
    /// Adds one value exactly.
    #[inline]
    pub fn add(&mut self, v: f64) {
        let bits = v.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i64;
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
        let (mant, pos) = mantissa_position(bits);
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
    #[cfg(test)]
    fn add_special(&mut self, v: f64) {
        self.not_only_neg_zero = true;
        self.specials |= special_bit(v);
    }

    /// Adds `x * 2^(pos - 1074)` exactly (a fast-lane value of [`ExactSum`]).
    pub fn add_fixed(&mut self, x: i128, pos: u16) {
        if x == 0 {
            return;
        }
        self.not_only_neg_zero = true;
        let m = x.unsigned_abs();
        let shift = (pos as u32) % DIGIT_BITS;
        let low = m << shift;
        let high = if shift == 0 { 0 } else { m >> (128 - shift) };
        let parts = [
            (low as u64 & 0xffff_ffff) as i64,
            ((low >> 32) as u64 & 0xffff_ffff) as i64,
            ((low >> 64) as u64 & 0xffff_ffff) as i64,
            ((low >> 96) as u64 & 0xffff_ffff) as i64,
            high as i64,
        ];
        if self.pending >= NORMALISE_EVERY - 1 {
            self.normalise();
        }
        let base = self.reserve((pos as u32 / DIGIT_BITS) as u16, parts.len());
        for (d, p) in self.digits[base..base + parts.len()].iter_mut().zip(parts) {
            if x > 0 {
                *d += p;
            } else {
                *d -= p;
            }
        }
        self.pending += 1;
    }

    /// Adds another exact sum (the combine step of panes and windows).
    pub fn merge(&mut self, other: &DigitSum) {
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

    #[cfg(test)]
    /// The exact sum, rounded once to nearest-even, with IEEE results for NaN and infinities.
    pub fn value(&self) -> f64 {
        if self.specials != 0 {
            return special_result(self.specials);
        }
        let v = self.rounded();
        if v == 0.0 && !self.not_only_neg_zero {
            -0.0
        } else {
            v
        }
    }

    /// The finite part of the sum, rounded once to nearest-even (+0.0 when it is zero).
    pub fn rounded(&self) -> f64 {
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
        if negative { -magnitude } else { magnitude }
    }
}

/// Most bits a fast-lane term may take: `mant << shift` stays below 2^(53 + LANE_SHIFT) = 2^125, so up to
/// four such terms can meet before an i128 could overflow, and `checked_add` catches anything beyond.
const LANE_SHIFT: i64 = 72;

/// An exact sum of f64 values. `Default` is the empty sum.
///
/// ```
/// use windgate_core::exact_sum::ExactSum;
/// let mut s = ExactSum::new();
/// for v in [0.1, 0.2, 0.3] {
///     s.add(v);
/// }
/// assert_eq!(s.value(), 0.6); // left-to-right f64 addition gives 0.6000000000000001
/// ```
#[derive(Debug, Clone, Default)]
pub struct ExactSum {
    /// Fast lane: `acc * 2^(anchor - 1074)`.
    acc: i128,
    anchor: u16,
    /// Slow tier for what the lane cannot hold. The true sum is lane + big.
    big: Option<Box<DigitSum>>,
    /// NaN, +inf and -inf seen (bit 0, 1, 2). IEEE rules decide the result from them.
    specials: u8,
    /// Only -0.0 (or nothing) was added: the IEEE sum is then -0.0.
    not_only_neg_zero: bool,
}

/// The empty sum, as [`ExactSum::new`] (for `value_with` and `mean_with` of one sum alone).
pub(crate) const EMPTY: ExactSum = ExactSum {
    acc: 0,
    anchor: 0,
    big: None,
    specials: 0,
    not_only_neg_zero: false,
};

impl ExactSum {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one value exactly.
    #[inline]
    pub fn add(&mut self, v: f64) {
        let bits = v.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i64;
        if biased == 0x7ff {
            self.not_only_neg_zero = true;
            self.specials |= special_bit(v);
            return;
        }
        if v == 0.0 {
            self.not_only_neg_zero |= v.is_sign_positive();
            return;
        }
        self.not_only_neg_zero = true;
        let (mant, pos) = mantissa_position(bits);
        let term = if bits >> 63 == 0 {
            mant as i128
        } else {
            -(mant as i128)
        };
        self.add_lane(term, pos as u16);
    }

    /// Adds `term * 2^(pos - 1074)` (|term| < 2^127) to the fast lane, or to the slow tier if the lane cannot
    /// hold it exactly.
    #[inline]
    fn add_lane(&mut self, term: i128, pos: u16) {
        if self.acc == 0 {
            self.acc = term;
            self.anchor = pos;
            return;
        }
        let d = pos as i64 - self.anchor as i64;
        if (0..=LANE_SHIFT).contains(&d) && term.unsigned_abs() < 1 << 53 {
            if let Some(sum) = self.acc.checked_add(term << d) {
                self.acc = sum;
                return;
            }
        } else if d < 0
            && -d <= LANE_SHIFT
            && (self.acc.unsigned_abs().leading_zeros() as i64) > 2 - d + 1
        {
            // A finer value: rescale the lane to its resolution (exact while the top bits are free).
            let rescaled = self.acc << -d;
            if let Some(sum) = rescaled.checked_add(term) {
                self.acc = sum;
                self.anchor = pos;
                return;
            }
        }
        self.spill(term, pos);
    }

    #[cold]
    fn spill(&mut self, term: i128, pos: u16) {
        let big = self.big.get_or_insert_with(Default::default);
        big.add_fixed(self.acc, self.anchor);
        self.acc = term;
        self.anchor = pos;
    }

    /// Adds `term * 2^(pos - 1074)`, the sum of finite non-zero values scaled to one resolution by a caller
    /// (the batch lane of `sum`, see `aggregate::functions::sum`). Zero still counts as a sum of non-zero
    /// values: the IEEE sum is then +0.0, not -0.0.
    pub(crate) fn add_scaled(&mut self, term: i128, pos: u16) {
        self.not_only_neg_zero = true;
        if term != 0 {
            self.add_term(term, pos);
        }
    }

    /// The sum as its lane alone, `(acc, anchor)` with the sum `acc * 2^(anchor - 1074)`: `None` when it has a
    /// slow tier or a special value. (`(0, _)` is an empty sum, or one of zeros.)
    pub(crate) fn lane(&self) -> Option<(i128, i64)> {
        (self.big.is_none() && self.specials == 0).then_some((self.acc, self.anchor as i64))
    }

    /// Becomes `a` plus `b` (`a` alone for `None`), whatever it held: a sliding suffix written whole. Without
    /// slow tiers (the common case) the lane is copied field by field, sparing the clone's drop of the old
    /// state and its allocation test.
    #[inline]
    pub(crate) fn set_merged(&mut self, a: &ExactSum, b: Option<&ExactSum>) {
        if self.big.is_none() && a.big.is_none() {
            (self.acc, self.anchor) = (a.acc, a.anchor);
            (self.specials, self.not_only_neg_zero) = (a.specials, a.not_only_neg_zero);
        } else {
            self.clone_from(a);
        }
        if let Some(b) = b {
            self.merge(b);
        }
    }

    /// Adds another exact sum (the combine step of panes and windows).
    #[inline]
    pub fn merge(&mut self, other: &ExactSum) {
        self.specials |= other.specials;
        self.not_only_neg_zero |= other.not_only_neg_zero;
        if let Some(b) = &other.big {
            self.big.get_or_insert_with(Default::default).merge(b);
        }
        if other.acc != 0 {
            self.add_term(other.acc, other.anchor);
        }
    }

    /// Adds `term * 2^(pos - 1074)` (`term != 0`, up to 127 bits): the common case inline, a lane at the
    /// same resolution (the values of a column share their top binade, so every pane's and every batch
    /// chunk's lane lands on the same anchor) or an empty lane here; the rest out of line.
    #[inline]
    fn add_term(&mut self, term: i128, pos: u16) {
        if self.acc == 0 {
            (self.acc, self.anchor) = (term, pos);
            return;
        }
        if self.anchor == pos
            && let Some(sum) = self.acc.checked_add(term)
        {
            self.acc = sum;
            return;
        }
        self.add_lane_wide(term, pos);
    }

    /// `add_lane` for a term of up to 127 bits (another lane), in the cases [`Self::add_term`] leaves: lanes
    /// at different resolutions, or a sum that overflows.
    #[inline(never)]
    fn add_lane_wide(&mut self, term: i128, pos: u16) {
        // Different resolutions: align on the finer one if nothing falls off the top, else use the slow tier.
        let (fine, fine_pos, coarse, coarse_pos) = if pos < self.anchor {
            (term, pos, self.acc, self.anchor)
        } else {
            (self.acc, self.anchor, term, pos)
        };
        let d = (coarse_pos - fine_pos) as u32;
        if d < 126
            && coarse.unsigned_abs().leading_zeros() > d + 1
            && let Some(sum) = (coarse << d).checked_add(fine)
        {
            self.acc = sum;
            self.anchor = fine_pos;
            return;
        }
        self.big
            .get_or_insert_with(Default::default)
            .add_fixed(term, pos);
    }

    /// The lane of `self + other` when it is one lane: both at one resolution (the panes of one column) and
    /// the total fits, or one of them zero; with no slow tier or special value. `None` otherwise.
    #[inline]
    fn lane_with(&self, other: &ExactSum) -> Option<(i128, u16)> {
        // One test for the common case, two lanes at one resolution and nothing else (`|` rather than `||`:
        // the parts are all loaded anyway, and one branch is cheaper than four).
        let plain = self.big.is_none()
            & other.big.is_none()
            & (self.specials | other.specials == 0)
            & (self.anchor == other.anchor);
        if plain {
            Some((self.acc.checked_add(other.acc)?, self.anchor))
        } else if self.big.is_some() || other.big.is_some() || self.specials | other.specials != 0 {
            None
        } else if other.acc == 0 {
            Some((self.acc, self.anchor))
        } else if self.acc == 0 {
            Some((other.acc, other.anchor))
        } else {
            None
        }
    }

    /// The value of `self + other`, rounded once, without building the sum: `Some` in the common case of
    /// one lane (see `lane_with`; [`EMPTY`] as `other` for `self` alone); `None` otherwise (merge, then
    /// [`Self::value`]).
    #[inline]
    pub(crate) fn value_with(&self, other: &ExactSum) -> Option<f64> {
        let (acc, anchor) = self.lane_with(other)?;
        let v = lane_value(acc, anchor)?;
        let only_neg_zero = !(self.not_only_neg_zero || other.not_only_neg_zero);
        Some(if v == 0.0 && only_neg_zero { -0.0 } else { v })
    }

    /// [`Self::mean`] of `self + other` over `n`, the same bits, without building the sum: `Some` in the
    /// common case of one lane whose quotient is wide (see [`lane_mean`]); `None` otherwise.
    #[inline]
    pub(crate) fn mean_with(&self, other: &ExactSum, n: i64) -> Option<f64> {
        let (acc, anchor) = self.lane_with(other)?;
        lane_mean(acc, anchor, n)
    }

    /// The exact sum divided by `n`, rounded once to nearest-even: the quotient of the rounded sum, corrected
    /// by the exact remainder `S - n q`, then its last bit settled by comparing that remainder with half an ulp
    /// exactly. A plain `value() / n` rounds twice and can be an ulp off; the correction alone can still land
    /// on the wrong side of a tie that the sum's low bits break.
    pub fn mean(&self, n: i64) -> f64 {
        let nf = n as f64;
        let q = self.value() / nf;
        if !q.is_finite() || q == 0.0 {
            return q;
        }
        let Some(rest) = self.minus_product(nf, q) else {
            return q;
        };
        let mut q = q + rest.value() / nf;
        // q is now within an ulp of S / n; at most one step toward the remainder settles it.
        for _ in 0..2 {
            match self.nearest_step(nf, q) {
                Some(next) if next != q => q = next,
                _ => break,
            }
        }
        q
    }

    /// `S - n q`, exactly; `None` when `n q` overflows.
    fn minus_product(&self, nf: f64, q: f64) -> Option<ExactSum> {
        let (hi, lo) = two_product(nf, q);
        if !hi.is_finite() {
            return None;
        }
        let mut rest = self.clone();
        rest.add(-hi);
        rest.add(-lo);
        Some(rest)
    }

    /// The float nearest to `S / n` among `q` and its neighbour toward `S / n` (ties to even), found from the
    /// sign of `2 (S - n q) - n ulp`, all exact; `None` when a product overflows or `q` is nonzero and not
    /// finite.
    fn nearest_step(&self, nf: f64, q: f64) -> Option<f64> {
        let rest = self.minus_product(nf, q)?;
        let r = rest.value();
        if r == 0.0 {
            return Some(q);
        }
        let toward = if r > 0.0 { q.next_up() } else { q.next_down() };
        // Adjacent floats: their difference is a power of two, exact, and so is n times it (n < 2^53).
        let ulp = (toward - q).abs();
        let edge = nf * ulp;
        if !toward.is_finite() || !edge.is_finite() {
            return None;
        }
        // `r` is `S - n q` rounded once, so it decides alone unless it is close to half an ulp (`edge / 2`).
        if edge >= 4.0 * f64::MIN_POSITIVE {
            if r.abs() < 0.375 * edge {
                return Some(q);
            }
            if r.abs() > 0.625 * edge {
                return Some(toward);
            }
        }
        let mut twice = rest.clone();
        twice.merge(&rest);
        twice.add(-r.signum() * edge);
        let beyond = twice.value() * r.signum();
        // Past half an ulp: the neighbour; short of it: q; a tie: the even one of the two.
        let tie = beyond == 0.0;
        Some(if beyond > 0.0 || (tie && q.to_bits() & 1 == 1) {
            toward
        } else {
            q
        })
    }

    /// The exact sum, rounded once to nearest-even. An empty sum is 0.0.
    pub fn value(&self) -> f64 {
        if self.specials != 0 {
            return special_result(self.specials);
        }
        let magnitude = match &self.big {
            None => lane_value(self.acc, self.anchor),
            Some(_) => None,
        };
        let v = magnitude.unwrap_or_else(|| {
            let mut all = self.big.as_deref().cloned().unwrap_or_default();
            all.add_fixed(self.acc, self.anchor);
            all.rounded()
        });
        if v == 0.0 && !self.not_only_neg_zero {
            -0.0
        } else {
            v
        }
    }
}

/// The smallest binade [`lane_mean`] answers in: `mean`'s remainder, about 2^-106 of the mean, stays normal.
const MEAN_MIN_EXP: i64 = -1022 + 128;

/// `acc * 2^(anchor - 1074) / n` rounded once to nearest-even, when the integer quotient `q = |acc| / n` has at
/// least 55 bits and the result lies between 2^-894 and the largest double (the sum finite); `None` otherwise.
///
/// Why it is exact: the rounding point of `q + r / n` (`r` the remainder) lies at least two bits above `q`'s
/// last bit, so the fraction `r / n` only matters as "some bit below is set", and so do `q`'s bits below its
/// top 63: the top 63 bits with one sticky bit for all of those round as the whole quotient does (see
/// [`i128_to_f64`]). One integer division instead of [`ExactSum::mean`]'s corrections.
#[inline]
fn lane_mean(acc: i128, anchor: u16, n: i64) -> Option<f64> {
    // `mean` divides by `n as f64`: past 2^53 rows that is not `n`.
    let n = u128::try_from(n).ok().filter(|&n| n > 0 && n <= 1 << 53)?;
    let m = acc.unsigned_abs();
    let (q, r) = (m / n, m % n);
    if q < 1 << 55 {
        return None;
    }
    let bits = 128 - q.leading_zeros() as i64; // 56..=128
    let exp = bits - 1 + anchor as i64 - 1074;
    // The sum itself must be finite (as `mean` rounds it first), and the mean far from the subnormals, where
    // `mean`'s correction steps lose bits: both paths then give the same bits.
    let sum_exp = 127 - m.leading_zeros() as i64 + anchor as i64 - 1074;
    if !(MEAN_MIN_EXP..=1022).contains(&exp) || sum_exp > 1022 {
        return None;
    }
    let (head, shift) = top_with_sticky(q, r != 0);
    let v = times_pow2(head, shift as i64 + anchor as i64 - 1074);
    Some(if acc < 0 { -v } else { v })
}

/// `m`'s top 63 bits (all of it below 2^63) as a float, the bits below as one sticky bit with `sticky`, and
/// how far they were shifted down: for `m` of 55 bits or more, `head * 2^shift` rounds as `m` plus any
/// fraction `sticky` stands for (the rounding point lies at least two bits above the sticky one, see
/// [`i128_to_f64`]). An `i64` converts in one instruction, a `u64` with its top bit set does not.
#[inline(always)]
fn top_with_sticky(m: u128, sticky: bool) -> (f64, u32) {
    let shift = (128 - m.leading_zeros()).saturating_sub(63);
    let sticky = sticky || m & ((1u128 << shift) - 1) != 0;
    (
        ((m >> shift) as u64 | u64::from(sticky)) as i64 as f64,
        shift,
    )
}

/// `x * 2^e` for a normal result, exactly: in two steps when `2^e` alone is subnormal.
#[inline(always)]
fn times_pow2(x: f64, e: i64) -> f64 {
    if e >= -1022 {
        x * pow2(e)
    } else {
        x * pow2(e + 600) * pow2(-600)
    }
}

/// `acc * 2^(anchor - 1074)` rounded once, when the result is a normal number (then scaling by a power of
/// two after the one rounding of `acc as f64` is exact); `None` otherwise.
#[inline]
fn lane_value(acc: i128, anchor: u16) -> Option<f64> {
    if acc == 0 {
        return Some(0.0);
    }
    let m = acc.unsigned_abs();
    let top = 127 - m.leading_zeros() as i64; // exponent of the leading bit of acc
    let exp = top + anchor as i64 - 1074;
    if !(-1021..=1022).contains(&exp) {
        return None;
    }
    // One rounding to nearest-even: `m`'s top 63 bits and a sticky bit for the rest round as `m` does (see
    // `i128_to_f64`), then one scaling by a power of two, exact for the normal result. The leading bit's
    // place is found once and the two scalings are one: the loop lowering a window's sums waits on this
    // chain.
    let shift = (top - 62).max(0) as u32;
    let sticky = m & ((1u128 << shift) - 1) != 0;
    let head = ((m >> shift) as u64 | u64::from(sticky)) as i64 as f64;
    let v = times_pow2(head, shift as i64 + anchor as i64 - 1074);
    Some(if acc < 0 { -v } else { v })
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

/// `x` rounded once to nearest-even: `x as f64`, without the generic 128-bit conversion routine that
/// every window's sum paid (a quarter of finishing it). Beyond 64 bits, the top 64 bits with a sticky bit for
/// the rest round alike: the rounding point lies 11 bits above the sticky bit, and all the bits below it
/// matter only as "some were set".
#[inline]
fn i128_to_f64(x: i128) -> f64 {
    if let Ok(small) = i64::try_from(x) {
        return small as f64;
    }
    // At least 64 significant bits: keep the top 63 with the bits below as one sticky bit, which rounds as
    // all of them would: ten bits past a double's 53, the last of them sticky, settle a round-to-nearest-even.
    let (top, shift) = top_with_sticky(x.unsigned_abs(), false);
    let v = top * pow2(shift as i64);
    if x < 0 { -v } else { v }
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
pub(crate) fn two_product(a: f64, b: f64) -> (f64, f64) {
    let hi = a * b;
    (hi, a.mul_add(b, -hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fault suite: rounding the sum and then dividing was an ulp off the exact mean.
    #[test]
    fn i128_conversion_rounds_like_the_cast() {
        let edges = [
            0i128,
            1,
            -1,
            i64::MAX as i128,
            i64::MIN as i128,
            i64::MAX as i128 + 1,
            i64::MIN as i128 - 1,
            1i128 << 63,
            i128::MAX,
            i128::MIN,
            i128::MIN + 1,
            (1i128 << 64) + (1 << 11),      // a tie below 2^65: to even
            (1i128 << 64) + (1 << 11) + 1,  // just past the tie
            (1i128 << 64) + (3 << 11),      // a tie to even, upward
            (1i128 << 100) + (1 << 47) + 1, // the tie broken only by the lowest bit
            (1i128 << 100) + (1 << 47),     // an exact tie far down
            ((1i128 << 53) - 1) << 60,      // the largest mantissa, shifted
            (((1i128 << 53) - 1) << 60) + (1 << 59), // rounds up to the next binade
        ];
        for x in edges.into_iter().flat_map(|x| [x, x.wrapping_neg()]) {
            assert_eq!(i128_to_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
        }
    }

    #[test]
    fn mean_is_rounded_once() {
        let mut s = ExactSum::new();
        for v in [
            1.138115896414327e286,
            1.5125137688438888e288,
            3.79778860573417e302,
        ] {
            s.add(v);
        }
        assert_eq!(s.value() / 23.0, 1.6512124372757326e301);
        assert_eq!(s.mean(23), 1.6512124372757328e301);
        let mut z = ExactSum::new();
        z.add(-0.0);
        assert!(z.mean(1).is_sign_negative());
        assert_eq!(ExactSum::new().mean(3), 0.0);
        // Found by the fault suite: S = 2^55 + 4 + 1.9e-122, S / 8 just above the tie 2^52 + 0.5. Correcting
        // the quotient with the rounded remainder landed on the tie and rounded to even, below.
        let mut t = ExactSum::new();
        for v in [3.6028797018963976e16, 1.0, -5.0, 1.945790270253066e-122] {
            t.add(v);
        }
        assert_eq!(t.mean(8), 4503599627370497.0);
        let mut exact_tie = ExactSum::new();
        for v in [3.6028797018963976e16, 1.0, -5.0] {
            exact_tie.add(v);
        }
        assert_eq!(exact_tie.mean(8), 4503599627370496.0);
    }
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
        let mut s = DigitSum::new();
        s.pending = NORMALISE_EVERY - 2;
        for _ in 0..10 {
            s.add(-0.75);
        }
        s.add_fixed(-3, 1074); // -3.0
        assert_eq!(s.value(), -10.5);
    }

    #[test]
    fn lane_spills_to_digits_and_back() {
        // Values 2^-1074 apart in magnitude cannot share the lane: the slow tier takes over, exactly.
        assert_eq!(sum(&[1e300, 5e-324, -1e300]), 5e-324);
        assert_eq!(sum(&[5e-324, 1e300, 1.0, -1e300, 1e-300]), 1.0);
        assert_eq!(sum(&[1e-310, 1e-310]), 2e-310); // subnormal results
        let mut a = ExactSum::new();
        a.add(1e200);
        let mut b = ExactSum::new();
        b.add(1e-200);
        a.merge(&b);
        let mut c = ExactSum::new();
        c.add(-1e200);
        a.merge(&c);
        assert_eq!(a.value(), 1e-200);
    }

    fn finite() -> impl Strategy<Value = f64> {
        prop_oneof![
            (-1000i32..1000).prop_map(|i| i as f64 / 8.0),
            any::<f64>().prop_filter("finite", |v| v.is_finite()),
            (-1e6f64..1e6),
            (-1e-300f64..1e-300),
            (-1e-310f64..1e-310),
            (0i32..60, -1000i64..1000).prop_map(|(e, m)| m as f64 * 2f64.powi(e * 17 - 500)),
        ]
    }

    proptest! {
        /// Divided by a power of two, the mean is the sum of the values so divided (exact where no bit is
        /// lost), rounded once: `mean` must match it bit for bit, ties included.
        #[test]
        fn mean_by_power_of_two_is_rounded_once(
            parts in proptest::collection::vec(finite().prop_filter("room to scale", |w| (w * 256.0).is_finite()), 1..40),
            k in 0u32..8,
            third in proptest::bool::ANY,
        ) {
            // Values w * 2^k (exact: a power of two, no overflow), whose mean over 2^k is sum(w) rounded once.
            let n = 1i64 << k;
            let mut s = ExactSum::new();
            let mut scaled = ExactSum::new();
            for &w in &parts {
                s.add(w * n as f64);
                scaled.add(w);
            }
            prop_assert_eq!(s.mean(n).to_bits(), scaled.value().to_bits());
            if third {
                // n = 3 * 2^k: the quotient is in general not a float; its rounding is still to the nearest.
                let m = s.mean(3 * n);
                let near = scaled.value() / 3.0;
                prop_assert!(m == near || m == near.next_up() || m == near.next_down());
            }
        }

        /// The lane's one-division mean is `mean`'s, bit for bit, whenever it answers: quotients of every
        /// width, remainders at, just off and far from the tie, any resolution; and split in two sums.
        #[test]
        fn lane_mean_is_the_mean(
            q in any::<u128>(),
            width in 0u32..128,
            zeros in prop_oneof![Just(0u32), 0u32..80],
            n in prop_oneof![1i64..16, 1i64..1_000_000, (0i64..=1 << 53), any::<i64>()],
            rest in prop_oneof![Just(0u8), Just(1), Just(2), Just(3), any::<u8>()],
            anchor in prop_oneof![0u16..120, 900u16..1100, 1900u16..2040],
            negative in proptest::bool::ANY,
            cut in any::<i128>(),
        ) {
            let n = n.max(1);
            let n_wide = n as u128;
            // Low bits of the quotient cleared: only the remainder then says the mean is not exact.
            let q = (q >> width) & !((1u128 << zeros) - 1);
            // r: 0, the tie (or just below it for odd n), one past it, n - 1, or anywhere.
            let r = match rest {
                0 => 0,
                1 => n_wide / 2,
                2 => (n_wide / 2 + 1).min(n_wide - 1),
                3 => n_wide - 1,
                k => (k as u128 * 7919) % n_wide,
            };
            let Some(m) = q.checked_mul(n_wide).and_then(|m| m.checked_add(r)) else { return Ok(()) };
            let Ok(acc) = i128::try_from(m) else { return Ok(()) };
            let acc = if negative { -acc } else { acc };
            let mut s = ExactSum::new();
            s.add_scaled(acc, anchor);
            if let Some(fast) = lane_mean(acc, anchor, n) {
                prop_assert_eq!(fast.to_bits(), s.mean(n).to_bits(), "acc {} anchor {} n {}", acc, anchor, n);
            }
            // The same sum as two lanes at one resolution.
            let (mut a, mut b) = (ExactSum::new(), ExactSum::new());
            let part = cut.checked_rem(acc.max(1)).unwrap_or(0);
            a.add_scaled(part, anchor);
            b.add_scaled(acc - part, anchor);
            if let Some(fast) = a.mean_with(&b, n) {
                prop_assert_eq!(fast.to_bits(), s.mean(n).to_bits());
            }
            if let Some(fast) = s.mean_with(&EMPTY, n) {
                prop_assert_eq!(fast.to_bits(), s.mean(n).to_bits());
            }
        }

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

        /// The two tiers agree: the fast lane (with its spills and merges) gives the superaccumulator's bits.
        #[test]
        fn lane_matches_digit_sum(values in proptest::collection::vec(finite(), 0..80), cut in 0usize..80) {
            let mut digits = DigitSum::new();
            values.iter().for_each(|&v| digits.add(v));
            let cut = cut.min(values.len());
            let mut a = ExactSum::new();
            let mut b = ExactSum::new();
            values[..cut].iter().for_each(|&v| a.add(v));
            values[cut..].iter().for_each(|&v| b.add(v));
            a.merge(&b);
            prop_assert_eq!(a.value().to_bits(), digits.value().to_bits());
        }

        /// Against exact integer arithmetic where the values are multiples of 1/8.
        #[test]
        fn i128_conversion_is_the_cast(hi: i64, lo: u64, shift in 0u32..128) {
            let x = (((hi as i128) << 64) | lo as i128) >> shift;
            prop_assert_eq!(i128_to_f64(x).to_bits(), (x as f64).to_bits());
        }

        #[test]
        fn matches_integer_sum(ints in proptest::collection::vec(-1_000_000_000i64..1_000_000_000, 0..100)) {
            let values: Vec<f64> = ints.iter().map(|&i| i as f64 / 8.0).collect();
            let exact = ints.iter().sum::<i64>() as f64 / 8.0;
            prop_assert_eq!(sum(&values), exact);
        }
    }
}
