//! `var` and `std` (sample, n - 1): exact sums of `x` and `x²` and a count per slot, lowered by an exact
//! centred moment.
//!
//! A square is kept exactly as the two halves of `two_product(x, x)`, whose low half lies about 53 binades
//! below the high one. The two halves are summed apart (`q` and `q_lo`), so that each sum stays in its
//! [`ExactSum`]'s fast lane: summed together, most adds spilled to the slow tier. A float batch goes through
//! the batch lane three times (`x` with the counts, the high halves, the low halves; see [`super::lane`]).
//! The partial state has one `sumsq`, the two sums merged: equal sums have equal bytes, so the split never
//! shows.

use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::{ArrayRef, BinaryArray};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;

use super::columns::{StateColumns, exact_sum_column, int64_column};
use super::lane::BatchLane;
use super::sum::set_sum;
use super::{
    Accumulator, AggregateFunction, Lift, Scalar, Triple, for_pairs, for_triples, lift_rows,
    pair_mut, pairs_validity, same, valid,
};
use crate::aggregate::function::{AggSpec, ValueClass};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder, SKIP};
use crate::error::Result;
use crate::exact_sum::{ExactSum, round_sum, term, two_product};

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
    /// The squares' high halves; `q + q_lo` is the sum of squares of the values below `BIG`.
    q: Vec<ExactSum>,
    /// The squares' non-zero low halves.
    q_lo: Vec<ExactSum>,
    n: Vec<i64>,
    /// Squares of values of magnitude >= `BIG`, scaled by 2^-2*SCALE (their squares would overflow
    /// f64); allocated only for the slots that saw one.
    big: Vec<Option<Box<ExactSum>>>,
    lane: BatchLane,
    squares: Squares,
}

/// A batch's squares, split for the batch lane: row `i`'s halves and the slot each goes to (`SKIP` for a
/// row without a slot, a null, a value of magnitude `BIG` or more, and a zero low half).
#[derive(Debug, Default)]
struct Squares {
    hi: Vec<f64>,
    lo: Vec<f64>,
    hi_slots: Vec<u32>,
    lo_slots: Vec<u32>,
}

impl Lift for Moments {
    type Value = f64;

    #[inline(always)]
    fn lift(&mut self, slot: usize, x: f64, _: usize, _: &RowOrder<'_>) {
        self.s[slot].add(x);
        if x.abs() < BIG {
            let (hi, lo) = two_product(x, x);
            self.q[slot].add(hi);
            // A zero low half adds nothing: the high half already marked the sum as not only -0.0.
            if lo != 0.0 {
                self.q_lo[slot].add(lo);
            }
        } else {
            add_big_square(&mut self.big[slot], x);
        }
        self.n[slot] += 1;
    }
}

impl Moments {
    /// Lifts a float batch through the batch lane: the same sums as lifting row by row.
    fn update_floats(&mut self, slots: &[u32], v: &[f64], nulls: Option<&NullBuffer>) {
        self.lane
            .add(&mut self.s, Some(&mut self.n), slots, v, nulls);
        let sq = &mut self.squares;
        sq.hi.clear();
        sq.lo.clear();
        sq.hi_slots.clear();
        sq.lo_slots.clear();
        for (i, (&s, &x)) in slots.iter().zip(v).enumerate() {
            let valid = s != SKIP && nulls.is_none_or(|b| b.is_valid(i));
            let small = valid && x.abs() < BIG;
            if valid && !small {
                add_big_square(&mut self.big[s as usize], x);
            }
            // Rows left out write zeros, so that no huge or non-finite square sets a chunk's resolution.
            let (hi, lo) = if small { two_product(x, x) } else { (0.0, 0.0) };
            sq.hi.push(hi);
            sq.lo.push(lo);
            sq.hi_slots.push(if small { s } else { SKIP });
            sq.lo_slots.push(if small && lo != 0.0 { s } else { SKIP });
        }
        self.lane.add(&mut self.q, None, &sq.hi_slots, &sq.hi, None);
        self.lane
            .add(&mut self.q_lo, None, &sq.lo_slots, &sq.lo, None);
    }

    /// Slot `i`'s sum of squares (of the values below `BIG`) as one exact sum.
    fn squares(&self, i: usize) -> ExactSum {
        merged(&self.q[i], &self.q_lo[i])
    }

    /// The variance (or standard deviation) of one state: NaN below two values (masked as null).
    fn lower(&self, p: Parts<'_>) -> f64 {
        let (s, q, q_lo) = (p.s.as_ref(), p.q.as_ref(), p.q_lo.as_ref());
        let big = p.big.as_deref();
        let var = wide_variance(s, q, q_lo, big, p.n)
            .unwrap_or_else(|| sample_variance(s, merged(q, q_lo), big, p.n));
        if self.std { var.sqrt() } else { var }
    }
}

/// One state's parts, borrowed from a slot or merged from two (see `Moments::finish_two`).
#[derive(Default)]
struct Parts<'a> {
    s: Cow<'a, ExactSum>,
    q: Cow<'a, ExactSum>,
    q_lo: Cow<'a, ExactSum>,
    n: i64,
    big: Option<Cow<'a, ExactSum>>,
}

impl<'a> Parts<'a> {
    fn of(m: &'a Moments, i: usize) -> Self {
        Self {
            s: Cow::Borrowed(&m.s[i]),
            q: Cow::Borrowed(&m.q[i]),
            q_lo: Cow::Borrowed(&m.q_lo[i]),
            n: m.n[i],
            big: m.big[i].as_deref().map(Cow::Borrowed),
        }
    }

    /// The two states combined, as `combine_pairs` combines them into an empty slot.
    fn merged(&self, other: &Parts<'_>) -> Parts<'static> {
        let sum = |a: &ExactSum, b: &ExactSum| Cow::Owned(merged(a, b));
        let big = match (&self.big, &other.big) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => Some(Cow::Owned(one.as_ref().clone())),
            (Some(a), Some(b)) => Some(sum(a, b)),
        };
        Parts {
            s: sum(&self.s, &other.s),
            q: sum(&self.q, &other.q),
            q_lo: sum(&self.q_lo, &other.q_lo),
            n: self.n + other.n,
            big,
        }
    }
}

/// `a + b` as a new exact sum.
fn merged(a: &ExactSum, b: &ExactSum) -> ExactSum {
    let mut sum = a.clone();
    sum.merge(b);
    sum
}

impl Accumulator for Moments {
    slot_vectors!(s: ExactSum::new(), q: ExactSum::new(), q_lo: ExactSum::new(), n: 0, big: None);

    fn reset(&mut self, i: usize) {
        (self.s[i], self.q[i], self.q_lo[i], self.n[i], self.big[i]) =
            (ExactSum::new(), ExactSum::new(), ExactSum::new(), 0, None);
    }

    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        match input {
            InputValues::Int(v, nulls) => {
                lift_rows(self, slots, nulls.as_ref(), &order, |i| v[i] as f64)
            }
            _ => {
                let (v, nulls) = f64::input(input);
                self.update_floats(slots, &v[..slots.len()], nulls)
            }
        }
    }

    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]) {
        let other = same::<Self>(other);
        for_pairs(pairs, |d, s| {
            self.s[d].merge(&other.s[s]);
            self.q[d].merge(&other.q[s]);
            self.q_lo[d].merge(&other.q_lo[s]);
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
            let (dst, src) = pair_mut(&mut self.q_lo, d, s);
            dst.merge(src);
            self.n[d] += self.n[s];
            if let Some(b) = self.big[s].clone() {
                self.big[d].get_or_insert_with(Default::default).merge(&b);
            }
        })
    }

    fn set_combined(&mut self, other: &dyn Accumulator, triples: &[Triple]) {
        let other = same::<Self>(other);
        for_triples(triples, |d, a, b| {
            set_sum(&mut self.s, d, &other.s[a], b);
            set_sum(&mut self.q, d, &other.q[a], b);
            set_sum(&mut self.q_lo, d, &other.q_lo[a], b);
            self.n[d] = other.n[a] + b.map_or(0, |b| self.n[b]);
            self.big[d].clone_from(&other.big[a]);
            if let Some(big) = b.and_then(|b| self.big[b].clone()) {
                self.big[d].get_or_insert_with(Default::default).merge(&big);
            }
        })
    }

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let vals = slots
            .iter()
            .map(|&i| self.lower(Parts::of(self, i as usize)));
        f64::column(
            vals.collect(),
            valid(slots, &self.n, 2),
            &meta.output_type(),
        )
    }

    /// Each pair's two states merged on the stack and lowered, without a scratch state.
    fn finish_two(&self, meta: &AggMeta, pairs: &[(u32, u32)]) -> Option<Result<ArrayRef>> {
        let mut all_valid = true;
        let vals = (pairs.iter())
            .map(|&(a, b)| {
                let parts = match (a, b) {
                    (SKIP, SKIP) => Parts::default(),
                    (s, SKIP) | (SKIP, s) => Parts::of(self, s as usize),
                    (a, b) => Parts::of(self, a as usize).merged(&Parts::of(self, b as usize)),
                };
                all_valid &= parts.n >= 2;
                self.lower(parts)
            })
            .collect();
        let nulls = pairs_validity(&self.n, pairs, all_valid, 2);
        Some(f64::column(vals, nulls, &meta.output_type()))
    }

    fn export(&self, _: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        let squares: Vec<ExactSum> = slots.iter().map(|&s| self.squares(s as usize)).collect();
        let all: Vec<u32> = (0..slots.len() as u32).collect();
        let big: ArrayRef = Arc::new(BinaryArray::from_iter(
            slots
                .iter()
                .map(|&s| self.big[s as usize].as_ref().map(|b| b.to_bytes())),
        ));
        Ok(vec![
            int64_column(&self.n, slots),
            exact_sum_column(&self.s, slots),
            exact_sum_column(&squares, &all),
            big,
        ])
    }

    fn import(&mut self, n: Vec<i64>, cols: &StateColumns<'_>) -> Result<()> {
        self.big = cols.optional_exact_sums("sumsq_big")?;
        self.s = cols.exact_sums("sum")?;
        self.q = cols.exact_sums("sumsq")?;
        self.q_lo = vec![ExactSum::new(); n.len()];
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
fn sample_variance(s: &ExactSum, q: ExactSum, big: Option<&ExactSum>, n: i64) -> f64 {
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
        return centred_moment(s_hi, s_lo, s.clone(), q, n);
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

/// [`sample_variance`] of sums without a slow tier (and no big squares), the common case: the same exact sums
/// rounded once, each summed in fixed point ([`round_sum`]) instead of through [`ExactSum`], whose adds
/// far from a sum's resolution spill to its slow tier and allocate (finishing measured 4,700 instructions a
/// window this way). `None` where it cannot answer: then [`sample_variance`] does, with the same bits.
fn wide_variance(
    s: &ExactSum,
    q: &ExactSum,
    q_lo: &ExactSum,
    big: Option<&ExactSum>,
    n: i64,
) -> Option<f64> {
    let (s_lane, q_lane, l_lane) = (s.lane()?, q.lane()?, q_lo.lane()?);
    // An empty or all-zero sum of values keeps the sign of its zeros: left to the exact path.
    if n < 2 || s_lane.0 == 0 || big.is_some() {
        return None;
    }
    let nf = n as f64;
    let s_hi = s.value();
    if !s_hi.is_finite() {
        return None;
    }
    let s_lo = round_sum(&[s_lane, term(-s_hi)?])?;
    // `sample_variance`'s check that the sum of squares is finite always passes here: without big squares
    // every square is below 2^960 and there are fewer than 2^63 of them.
    // As `centred_moment`: Q - 2 m S + n m^2, every product split exactly, then less d^2 / n.
    let m = s_hi / nf;
    let (m2_hi, m2_lo) = two_product(m, m);
    let halves = |(hi, lo): (f64, f64)| Some([term(hi)?, term(lo)?]);
    let [p0, p1] = halves(two_product(-2.0 * m, s_hi))?;
    let [p2, p3] = halves(two_product(-2.0 * m, s_lo))?;
    let [p4, p5] = halves(two_product(nf, m2_hi))?;
    let [p6, p7] = halves(two_product(nf, m2_lo))?;
    let acc = [q_lane, l_lane, p0, p1, p2, p3, p4, p5, p6, p7];
    let (nm_hi, nm_lo) = two_product(nf, m);
    let d = round_sum(&[s_lane, term(-nm_hi)?, term(-nm_lo)?])?;
    Some(((round_sum(&acc)? - d * d / nf) / (nf - 1.0)).max(0.0))
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
        sample_variance(&s, q, big.as_deref(), xs.len() as i64)
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

#[cfg(test)]
mod lane_tests {
    use arrow_buffer::ScalarBuffer;
    use arrow_schema::DataType;
    use proptest::prelude::*;

    use super::*;
    use crate::aggregate::function::AggFunc;
    use crate::aggregate::functions::lane::lane_values;

    fn meta() -> AggMeta {
        let spec = AggSpec::parse_all(&[("v".into(), vec!["std".into()])]).unwrap();
        assert_eq!(spec[0].func, AggFunc::Std);
        AggMeta {
            spec: spec[0].clone(),
            input_type: DataType::Float64,
            class: ValueClass::Float,
        }
    }

    proptest! {
        /// A float batch through the three batch lanes gives the finished values and the partial-state bytes
        /// that lifting row by row gives (huge values, zeros, NaN and infinities included), over two batches.
        #[test]
        fn lanes_equal_lifting_row_by_row(
            rows in prop::collection::vec((lane_values(), 0u32..5, any::<bool>()), 0..300),
            with_nulls in any::<bool>(),
            huge in prop::collection::vec((0usize..300, prop_oneof![Just(1e150), Just(-3e200)]), 0..3),
        ) {
            let mut values: Vec<f64> = rows.iter().map(|r| r.0).collect();
            for (i, x) in huge {
                if let Some(v) = values.get_mut(i) {
                    *v = x;
                }
            }
            let slots: Vec<u32> = rows.iter().map(|r| if r.1 == 4 { SKIP } else { r.1 }).collect();
            let nulls = with_nulls.then(|| NullBuffer::from(rows.iter().map(|r| r.2).collect::<Vec<_>>()));
            let order = RowOrder { ts: &[], by: None, source: 0, seq0: 0 };
            let meta = meta();
            let mut lanes = Moments { std: true, ..Default::default() };
            let mut rowwise = Moments { std: true, ..Default::default() };
            lanes.extend_empty(4);
            rowwise.extend_empty(4);
            let input = InputValues::Float(ScalarBuffer::from(values.clone()), nulls.clone());
            for _ in 0..2 {
                lanes.update(&slots, &input, order);
                lift_rows(&mut rowwise, &slots, nulls.as_ref(), &order, |i| values[i]);
            }
            let all = [0, 1, 2, 3];
            let (a, b) = (lanes.finish(&meta, &all).unwrap(), rowwise.finish(&meta, &all).unwrap());
            prop_assert_eq!(a.to_data(), b.to_data());
            let (a, b) = (lanes.export(&meta, &all).unwrap(), rowwise.export(&meta, &all).unwrap());
            for (x, y) in a.iter().zip(&b) {
                prop_assert_eq!(x.to_data(), y.to_data());
            }
        }

        /// Wherever the fixed-point path answers, it gives `sample_variance`'s bits: for two groups of values
        /// (of any scale, near-equal values among them) lifted apart and then combined, as panes are.
        #[test]
        fn wide_variance_equals_the_exact_path(
            rows in prop::collection::vec((lane_values(), any::<bool>()), 2..200),
            offset in prop_oneof![Just(0.0), Just(1e9), Just(-3.75e15), Just(1e-200)],
        ) {
            let values: Vec<f64> = rows.iter().map(|r| r.0 + offset).collect();
            let slots: Vec<u32> = rows.iter().map(|r| u32::from(r.1)).collect();
            let order = RowOrder { ts: &[], by: None, source: 0, seq0: 0 };
            let mut m = Moments::default();
            m.extend_empty(2);
            m.update(&slots, &InputValues::Float(ScalarBuffer::from(values), None), order);
            let exact = |m: &Moments, i: usize| {
                sample_variance(&m.s[i], m.squares(i), m.big[i].as_deref(), m.n[i])
            };
            // Each group alone, then both combined into the first.
            for (step, i) in [0, 1, 0].into_iter().enumerate() {
                if step == 2 {
                    m.combine_within(&[(0, 1)]);
                }
                let big = m.big[i].as_deref();
                if let Some(v) = wide_variance(&m.s[i], &m.q[i], &m.q_lo[i], big, m.n[i]) {
                    let want = exact(&m, i);
                    prop_assert_eq!(v.to_bits(), want.to_bits(), "{} {}", v, want);
                }
            }
        }
    }

    #[test]
    fn wide_variance_answers_the_common_case() {
        let mut m = Moments::default();
        m.extend_empty(1);
        let values: Vec<f64> = (0..1000)
            .map(|i| ((i * 7919) % 1000) as f64 / 997.0)
            .collect();
        let order = RowOrder {
            ts: &[],
            by: None,
            source: 0,
            seq0: 0,
        };
        m.update(
            &vec![0; 1000],
            &InputValues::Float(ScalarBuffer::from(values), None),
            order,
        );
        let fast = wide_variance(&m.s[0], &m.q[0], &m.q_lo[0], None, m.n[0])
            .expect("the fast path answers");
        let exact = sample_variance(&m.s[0], m.squares(0), None, m.n[0]);
        assert_eq!(fast.to_bits(), exact.to_bits());
    }
}
