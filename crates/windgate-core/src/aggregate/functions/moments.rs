//! `var` and `std` (sample, n - 1): exact sums of `x` and `x²` and a count per slot, lowered by an exact
//! centred moment.

use std::any::Any;
use std::sync::Arc;

use arrow_array::{ArrayRef, BinaryArray};
use arrow_schema::DataType;

use super::columns::{StateColumns, exact_sum_column, int64_column};
use super::{
    Accumulator, AggregateFunction, Lift, Scalar, for_pairs, lift_rows, pair_mut, same, valid,
};
use crate::aggregate::function::{AggSpec, ValueClass};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder};
use crate::error::Result;
use crate::exact_sum::{ExactSum, two_product};

/// `var` (`std: false`) or `std`: the same state, lowered differently.
pub(super) struct MomentsFn {
    std: bool,
}

pub(super) const VAR: MomentsFn = MomentsFn { std: false };
pub(super) const STD: MomentsFn = MomentsFn { std: true };

impl AggregateFunction for MomentsFn {
    fn output_type(&self, _: &DataType, _: ValueClass) -> DataType {
        DataType::Float64
    }

    fn state_fields(&self, _: &DataType, _: ValueClass) -> Vec<(&'static str, DataType, bool)> {
        vec![
            ("sum", DataType::Binary, false),
            ("sumsq", DataType::Binary, false),
            ("sumsq_big", DataType::Binary, true),
        ]
    }

    fn state_parts(&self) -> &'static [&'static str] {
        &["sum", "sumsq", "sumsq_big"]
    }

    fn partial_input(
        &self,
        _: &AggSpec,
        _: &dyn Fn(&str) -> Result<DataType>,
    ) -> Result<(DataType, ValueClass)> {
        Ok((DataType::Float64, ValueClass::Float))
    }

    fn accumulator(&self, _: &AggMeta) -> Box<dyn Accumulator> {
        Box::new(Moments {
            std: self.std,
            ..Default::default()
        })
    }

    fn takes_temporal(&self) -> bool {
        false
    }
}

/// Exact sums of values and of their squares, and counts.
#[derive(Debug, Default)]
pub(super) struct Moments {
    std: bool,
    s: Vec<ExactSum>,
    q: Vec<ExactSum>,
    n: Vec<i64>,
    /// Squares of values of magnitude >= `BIG`, scaled by 2^-2*SCALE (their squares would overflow
    /// f64); allocated only for the slots that saw one.
    big: Vec<Option<Box<ExactSum>>>,
}

impl Lift for Moments {
    type Value = f64;

    #[inline(always)]
    fn lift(&mut self, slot: usize, x: f64, _: usize, _: &RowOrder<'_>) {
        self.s[slot].add(x);
        if x.abs() < BIG {
            let (hi, lo) = two_product(x, x);
            self.q[slot].add(hi);
            self.q[slot].add(lo);
        } else {
            add_big_square(&mut self.big[slot], x);
        }
        self.n[slot] += 1;
    }
}

impl Accumulator for Moments {
    slot_vectors!(s: ExactSum::new(), q: ExactSum::new(), n: 0, big: None);

    fn reset(&mut self, i: usize) {
        (self.s[i], self.q[i], self.n[i], self.big[i]) =
            (ExactSum::new(), ExactSum::new(), 0, None);
    }

    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        match input {
            InputValues::Int(v, nulls) => {
                lift_rows(self, slots, nulls.as_ref(), &order, |i| v[i] as f64)
            }
            _ => {
                let (v, nulls) = f64::input(input);
                lift_rows(self, slots, nulls, &order, |i| v[i])
            }
        }
    }

    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]) {
        let other = same::<Self>(other);
        for_pairs(pairs, |d, s| {
            self.s[d].merge(&other.s[s]);
            self.q[d].merge(&other.q[s]);
            self.n[d] += other.n[s];
            if let Some(b) = &other.big[s] {
                self.big[d].get_or_insert_with(Default::default).merge(b);
            }
        })
    }

    fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        for_pairs(pairs, |d, s| {
            let (dst, src) = pair_mut(&mut self.s, d, s);
            dst.merge(src);
            let (dst, src) = pair_mut(&mut self.q, d, s);
            dst.merge(src);
            self.n[d] += self.n[s];
            if let Some(b) = self.big[s].clone() {
                self.big[d].get_or_insert_with(Default::default).merge(&b);
            }
        })
    }

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let vals = slots.iter().map(|&i| {
            let i = i as usize;
            let var = sample_variance(&self.s[i], &self.q[i], self.big[i].as_deref(), self.n[i]);
            if self.std { var.sqrt() } else { var }
        });
        f64::column(
            vals.collect(),
            valid(slots, &self.n, 2),
            &meta.output_type(),
        )
    }

    fn export(&self, _: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        let big: ArrayRef = Arc::new(BinaryArray::from_iter(
            slots
                .iter()
                .map(|&s| self.big[s as usize].as_ref().map(|b| b.to_bytes())),
        ));
        Ok(vec![
            int64_column(&self.n, slots),
            exact_sum_column(&self.s, slots),
            exact_sum_column(&self.q, slots),
            big,
        ])
    }

    fn import(&mut self, n: Vec<i64>, cols: &StateColumns<'_>) -> Result<()> {
        self.big = cols.optional_exact_sums("sumsq_big")?;
        self.s = cols.exact_sums("sum")?;
        self.q = cols.exact_sums("sumsq")?;
        self.n = n;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Sample variance from the exact sums `S = sum x` and `Q = sum x^2`: `Q - 2 m S + n m^2` for
/// `m = round(S / n)` is summed exactly (every product split with FMA), less the `(S - n m)^2 / n` that `m`
/// being off the true mean adds. Every input is exact, so the result has the same bits for any order of the
/// rows.
///
/// Squares of values of magnitude `>= BIG` would overflow (or, summed, leave the f64 range), so they are kept
/// scaled in `big`; when there are any, the whole computation runs on values scaled by `2^-SCALE` and the
/// result is scaled back (to +inf when the variance itself overflows, as the exact result does).
fn sample_variance(s: &ExactSum, q: &ExactSum, big: Option<&ExactSum>, n: i64) -> f64 {
    if n < 2 {
        return f64::NAN; // masked as null by the caller
    }
    let s_hi = s.value();
    if !s_hi.is_finite() {
        return f64::NAN; // a NaN or infinite input
    }
    // S to ~106 bits: S = s_hi + s_lo + (tiny).
    let mut rest = s.clone();
    rest.add(-s_hi);
    let s_lo = rest.value();
    let Some(big) = big else {
        if !q.value().is_finite() {
            return f64::NAN;
        }
        return centred_moment(s_hi, s_lo, s.clone(), q.clone(), n);
    };
    // Scaling by a power of two is exact but for the tiny parts that fall below f64's range, which cannot
    // change a variance this large; multiplications by 2^-SCALE are done one at a time (2^-2*SCALE is 0).
    let down = 2f64.powi(-SCALE);
    let mut acc = big.clone();
    acc.add(q.value() * down * down);
    let mut scaled = ExactSum::new();
    scaled.add(s_hi * down);
    scaled.add(s_lo * down);
    let up = 2f64.powi(SCALE);
    centred_moment(s_hi * down, s_lo * down, scaled, acc, n) * up * up
}

/// Values of at least this magnitude have their squares kept scaled (`2^480`: a square below `2^960` leaves
/// room to sum 2^60 of them without leaving the f64 range).
const BIG: f64 = 3.1217485503159922e144; // 2^480
/// The scale of big squares: `(x * 2^-SCALE)^2` is exact and well inside the f64 range for any finite `x >= BIG`.
const SCALE: i32 = 600;

fn add_big_square(slot: &mut Option<Box<ExactSum>>, x: f64) {
    let scaled = x * 2f64.powi(-SCALE);
    let (hi, lo) = two_product(scaled, scaled);
    let acc = slot.get_or_insert_with(Default::default);
    acc.add(hi);
    acc.add(lo);
}

/// `sum (x - mean)^2 / (n - 1)` from `S = s_hi + s_lo` (and `S` exactly) and `Q = sum x^2`.
fn centred_moment(s_hi: f64, s_lo: f64, s: ExactSum, q: ExactSum, n: i64) -> f64 {
    let nf = n as f64;
    let m = s_hi / nf;
    let mut acc = q;
    for part in [s_hi, s_lo] {
        let (hi, lo) = two_product(-2.0 * m, part);
        acc.add(hi);
        acc.add(lo);
    }
    let (m2_hi, m2_lo) = two_product(m, m);
    for part in [m2_hi, m2_lo] {
        let (hi, lo) = two_product(nf, part);
        acc.add(hi);
        acc.add(lo);
    }
    // Sum (x - m)^2 = Sum (x - mean)^2 + n (mean - m)^2: take off the second term, with d = S - n m (exact
    // until one rounding) so that n (mean - m)^2 = d^2 / n.
    let mut d = s;
    let (nm_hi, nm_lo) = two_product(nf, m);
    d.add(-nm_hi);
    d.add(-nm_lo);
    let d = d.value();
    ((acc.value() - d * d / nf) / (nf - 1.0)).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variance(xs: &[f64]) -> f64 {
        let mut s = ExactSum::new();
        xs.iter().for_each(|&x| s.add(x));
        let mut big = None;
        for &x in xs.iter().filter(|x| x.abs() >= BIG) {
            add_big_square(&mut big, x);
        }
        let mut q = ExactSum::new();
        for &x in xs.iter().filter(|x| x.abs() < BIG) {
            let (hi, lo) = two_product(x, x);
            q.add(hi);
            q.add(lo);
        }
        sample_variance(&s, &q, big.as_deref(), xs.len() as i64)
    }

    #[test]
    fn variance_of_huge_values_overflows_like_the_exact_result() {
        assert_eq!(variance(&[1e200, -1e200]), f64::INFINITY);
        assert_eq!(variance(&[1e200, 1e200, 1e200]), 0.0);
        // a, a + d, a + 2d: variance d^2 exactly, finite, though every square overflows f64.
        let (a, d) = (2f64.powi(531), 2f64.powi(480));
        assert_eq!(variance(&[a, a + d, a + 2.0 * d]), d * d);
        // Big and small values in one window.
        assert_eq!(
            variance(&[3e150, -3e150, 1.0]),
            variance(&[-3e150, 1.0, 3e150])
        );
        assert!(variance(&[3e150, -3e150, 1.0]).is_finite());
    }

    #[test]
    fn variance_is_accurate_with_a_large_offset() {
        // Values 1e9 + {4, 7, 13, 16}: variance 30 exactly; the textbook formula loses it to cancellation.
        let xs = [1e9 + 4.0, 1e9 + 7.0, 1e9 + 13.0, 1e9 + 16.0];
        assert_eq!(variance(&xs), 30.0);
        assert_eq!(
            variance(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
            32.0 / 7.0
        );
        assert!(variance(&[1.0]).is_nan());
        // Equal values have no spread, even when their mean is not representable (hypothesis found this).
        let x = 699051.6432011065;
        assert_eq!(variance(&[x, x, x]), 0.0);
    }
}
