//! `sum` and `mean`: an exact sum and a count per slot (`i128` for integers, [`ExactSum`] for floats).

use std::any::Any;
use std::sync::Arc;

use arrow_array::{ArrayRef, Decimal128Array};
use arrow_schema::DataType;

use super::columns::{StateColumns, exact_sum_column, int64_column};
use super::lane::BatchLane;
use super::{
    Accumulator, AggregateFunction, FusedPass, Lift, Needs, Scalar, Triple, at_or, for_pairs,
    for_triples, lift_rows, pair_count, pair_mut, pairs_validity, same, valid, valid_counts,
};
use crate::aggregate::function::{AggSpec, ValueClass};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder, SKIP};
use crate::error::{Error, ErrorKind, Result};
use crate::exact_sum::{EMPTY, ExactSum};

/// `sum` (`mean: false`) or `mean`: the same state, lowered differently.
pub(super) struct SumFn {
    mean: bool,
}

pub(super) const SUM: SumFn = SumFn { mean: false };
pub(super) const MEAN: SumFn = SumFn { mean: true };

/// Integer sums are exact in 38 digits: at most 2^63 values of magnitude at most 2^63 sum below 2^126 < 10^38.
const DECIMAL: DataType = DataType::Decimal128(38, 0);

impl AggregateFunction for SumFn {
    fn output_type(&self, _: &DataType, class: ValueClass) -> DataType {
        match class {
            ValueClass::Int if !self.mean => DataType::Int64,
            _ => DataType::Float64,
        }
    }

    fn state_fields(&self, _: &DataType, class: ValueClass) -> Vec<(&'static str, DataType, bool)> {
        match class {
            ValueClass::Int => vec![("sum", DECIMAL, false)],
            ValueClass::Float => vec![("sum", DataType::Binary, false)],
        }
    }

    fn state_parts(&self) -> &'static [&'static str] {
        &["sum"]
    }

    fn partial_input(
        &self,
        _: &AggSpec,
        col: &dyn Fn(&str) -> Result<DataType>,
    ) -> Result<(DataType, ValueClass)> {
        Ok(match col("sum")? {
            DataType::Decimal128(..) => (DataType::Int64, ValueClass::Int),
            _ => (DataType::Float64, ValueClass::Float),
        })
    }

    fn accumulator(&self, meta: &AggMeta) -> Box<dyn Accumulator> {
        match meta.class {
            ValueClass::Int => Box::new(SumInt {
                mean: self.mean,
                ..Default::default()
            }),
            ValueClass::Float => Box::new(SumFloat {
                mean: self.mean,
                ..Default::default()
            }),
        }
    }

    fn takes_temporal(&self) -> bool {
        false
    }
}

/// Integer sums, exact in `i128`, and counts.
#[derive(Debug, Default)]
pub(super) struct SumInt {
    mean: bool,
    sum: Vec<i128>,
    n: Vec<i64>,
}

impl Lift for SumInt {
    type Value = i64;

    #[inline(always)]
    fn lift(&mut self, slot: usize, x: i64, _: usize, _: &RowOrder<'_>) {
        self.sum[slot] += x as i128;
        self.n[slot] += 1;
    }
}

impl Accumulator for SumInt {
    slot_vectors!(sum: 0, n: 0);

    fn reset(&mut self, i: usize) {
        (self.sum[i], self.n[i]) = (0, 0);
    }

    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        let (v, nulls) = i64::input(input);
        let v = &v[..slots.len()];
        lift_rows(self, slots, nulls, &order, |i| v[i]);
    }

    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]) {
        let other = same::<Self>(other);
        for_pairs(pairs, |d, s| {
            self.sum[d] += other.sum[s];
            self.n[d] += other.n[s];
        })
    }

    fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        for_pairs(pairs, |d, s| {
            self.sum[d] += self.sum[s];
            self.n[d] += self.n[s];
        })
    }

    fn set_combined(&mut self, other: &dyn Accumulator, triples: &[Triple]) {
        let other = same::<Self>(other);
        for_triples(triples, |d, a, b| {
            let (sum, n) = b.map_or((0, 0), |b| (self.sum[b], self.n[b]));
            self.sum[d] = other.sum[a] + sum;
            self.n[d] = other.n[a] + n;
        })
    }

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let states = slots
            .iter()
            .map(|&s| (self.sum[s as usize], self.n[s as usize]));
        self.lower(meta, states)
    }

    fn finish_two(&self, meta: &AggMeta, pairs: &[(u32, u32)]) -> Option<Result<ArrayRef>> {
        let sum = |&(a, b): &(u32, u32)| at_or(&self.sum, a, 0) + at_or(&self.sum, b, 0);
        let states = pairs.iter().map(|p| (sum(p), pair_count(&self.n, *p)));
        Some(self.lower(meta, states))
    }

    fn export(&self, _: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        let dec = Decimal128Array::from_iter_values(slots.iter().map(|&s| self.sum[s as usize]))
            .with_precision_and_scale(38, 0)
            .map_err(Error::output)?;
        Ok(vec![int64_column(&self.n, slots), Arc::new(dec)])
    }

    fn import(&mut self, n: Vec<i64>, cols: &StateColumns<'_>) -> Result<()> {
        self.sum = cols.decimal_sums("sum")?;
        self.n = n;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl SumInt {
    /// The output column of the given `(sum, count)` states: the sums, or the means.
    fn lower(
        &self,
        meta: &AggMeta,
        states: impl Iterator<Item = (i128, i64)> + Clone,
    ) -> Result<ArrayRef> {
        let nulls = valid_counts(states.clone().map(|(_, n)| n), 1);
        if self.mean {
            let vals = states.map(|(sum, n)| if n == 0 { 0.0 } else { sum as f64 / n as f64 });
            return f64::column(vals.collect(), nulls, &meta.output_type());
        }
        let vals = states.map(|(sum, _)| {
            i64::try_from(sum).map_err(|_| {
                Error::new(
                    ErrorKind::Overflow,
                    format!(
                        "aggs: sum of column '{}' overflows int64 in a window",
                        meta.column()
                    ),
                )
            })
        });
        i64::column(vals.collect::<Result<_>>()?, nulls, &meta.output_type())
    }
}

/// Sets slot `d` of `sums` to `from` plus slot `b` of `sums` (`None`: `from` alone), whatever it held
/// (`Accumulator::set_combined` of the accumulators that keep exact sums).
#[inline(always)]
pub(super) fn set_sum(sums: &mut [ExactSum], d: usize, from: &ExactSum, b: Option<usize>) {
    match b {
        Some(b) => {
            let (dst, newer) = pair_mut(sums, d, b);
            dst.set_merged(from, Some(newer));
        }
        None => sums[d].set_merged(from, None),
    }
}

/// Pairs [`SumFloat::finish_two`] reads ahead of the one it finishes.
const PREFETCH_PAIRS: usize = 8;

/// Float sums, exact ([`ExactSum`]), and counts.
#[derive(Debug, Default)]
pub(super) struct SumFloat {
    mean: bool,
    sum: Vec<ExactSum>,
    n: Vec<i64>,
    lane: BatchLane,
}

impl SumFloat {
    /// [`lower_two`] of every pair's combination (`SKIP`: no slot), and whether every pair had a value. `MEAN`
    /// is `self.mean`, a parameter so that the loop tests it once.
    fn lower_pairs<const MEAN: bool>(&self, pairs: &[(u32, u32)]) -> (Vec<f64>, bool) {
        let (sum, n) = (&self.sum, &self.n);
        let get = |s: u32| (s != SKIP).then(|| &sum[s as usize]);
        let mut all_valid = true;
        let mut vals = Vec::with_capacity(pairs.len());
        for (i, &(a, b)) in pairs.iter().enumerate() {
            // The pairs' slots lie anywhere in the store: ask for a later pair's sums ahead.
            if let Some(&(c, d)) = pairs.get(i + PREFETCH_PAIRS) {
                crate::prefetch::prefetch(sum, c as usize);
                crate::prefetch::prefetch(sum, d as usize);
            }
            let count = pair_count(n, (a, b));
            all_valid &= count >= 1;
            vals.push(lower_two::<MEAN>(get(a), get(b), count));
        }
        (vals, all_valid)
    }

    /// The output of one state: the sum rounded once, or the mean of its `n` values.
    #[inline]
    fn lower(&self, sum: &ExactSum, n: i64) -> f64 {
        if self.mean && n > 0 {
            sum.mean(n)
        } else {
            sum.value()
        }
    }
}

/// The output of the combination of sums `a` and `b` (`None`: no sum) holding `count` values: their mean
/// (`MEAN`), or the sum rounded once. Straight from the two lanes in the common case (`ExactSum::value_with`,
/// `mean_with`), else through their merge, out of line so that the common path's loop stays small (0.6% fewer
/// instructions for count+sum+max over 2 M rows in 6-pane windows, callgrind).
#[inline(always)]
fn lower_two<const MEAN: bool>(a: Option<&ExactSum>, b: Option<&ExactSum>, count: i64) -> f64 {
    let fast = match (a, b) {
        (None, None) => return 0.0,
        // One sum alone (a window held whole by one stack: every `panes per window`-th one): its lane alone.
        (Some(s), None) | (None, Some(s)) if MEAN => s.mean_with(&EMPTY, count),
        (Some(s), None) | (None, Some(s)) => s.value_with(&EMPTY),
        (Some(a), Some(b)) if MEAN => a.mean_with(b, count),
        (Some(a), Some(b)) => a.value_with(b),
    };
    fast.unwrap_or_else(|| lower_merged::<MEAN>(a, b, count))
}

/// [`lower_two`] through the merged sum.
#[inline(never)]
fn lower_merged<const MEAN: bool>(a: Option<&ExactSum>, b: Option<&ExactSum>, count: i64) -> f64 {
    let lower = |sum: &ExactSum| {
        if MEAN && count > 0 {
            sum.mean(count)
        } else {
            sum.value()
        }
    };
    match (a, b) {
        (Some(s), None) | (None, Some(s)) => lower(s),
        (Some(a), Some(b)) => {
            let mut total = a.clone();
            total.merge(b);
            lower(&total)
        }
        (None, None) => 0.0,
    }
}

impl Lift for SumFloat {
    type Value = f64;

    #[inline(always)]
    fn lift(&mut self, slot: usize, x: f64, _: usize, _: &RowOrder<'_>) {
        self.sum[slot].add(x);
        self.n[slot] += 1;
    }
}

impl Accumulator for SumFloat {
    slot_vectors!(sum: ExactSum::new(), n: 0);

    fn reset(&mut self, i: usize) {
        (self.sum[i], self.n[i]) = (ExactSum::new(), 0);
    }

    /// Through the batch lane (see [`super::lane`]): the same exact sums as lifting row by row.
    fn update(&mut self, slots: &[u32], input: &InputValues, _: RowOrder<'_>) {
        let (v, nulls) = f64::input(input);
        self.lane
            .add(&mut self.sum, Some(&mut self.n), slots, v, nulls);
    }

    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]) {
        let other = same::<Self>(other);
        for_pairs(pairs, |d, s| {
            self.sum[d].merge(&other.sum[s]);
            self.n[d] += other.n[s];
        })
    }

    fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        for_pairs(pairs, |d, s| {
            let (dst, src) = pair_mut(&mut self.sum, d, s);
            dst.merge(src);
            self.n[d] += self.n[s];
        })
    }

    fn set_combined(&mut self, other: &dyn Accumulator, triples: &[Triple]) {
        let other = same::<Self>(other);
        for_triples(triples, |d, a, b| {
            set_sum(&mut self.sum, d, &other.sum[a], b);
            self.n[d] = other.n[a] + b.map_or(0, |b| self.n[b]);
        })
    }

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let (sum, n) = (&self.sum, &self.n);
        let vals = slots
            .iter()
            .map(|&s| self.lower(&sum[s as usize], n[s as usize]));
        f64::column(vals.collect(), valid(slots, n, 1), &meta.output_type())
    }

    /// Rounds the two sums' total once: straight from the two lanes in the common case (one resolution, no
    /// slow tier), else through their merge. One pass gives the values and says whether every window has a
    /// value, so the validity is scanned for again only when some window has none.
    fn finish_two(&self, meta: &AggMeta, pairs: &[(u32, u32)]) -> Option<Result<ArrayRef>> {
        let (vals, all_valid) = if self.mean {
            self.lower_pairs::<true>(pairs)
        } else {
            self.lower_pairs::<false>(pairs)
        };
        let nulls = pairs_validity(&self.n, pairs, all_valid, 1);
        Some(f64::column(vals, nulls, &meta.output_type()))
    }

    fn export(&self, _: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        Ok(vec![
            int64_column(&self.n, slots),
            exact_sum_column(&self.sum, slots),
        ])
    }

    fn import(&mut self, n: Vec<i64>, cols: &StateColumns<'_>) -> Result<()> {
        self.sum = cols.exact_sums("sum")?;
        self.n = n;
        Ok(())
    }

    fn fused_needs(&self) -> Option<Needs> {
        Some(Needs {
            sum: true,
            ..Needs::default()
        })
    }

    /// The values outside the lane first, then the lane: the order of the batch lane's adds, so that the
    /// state (not only its value) is the one lifting on its own leaves, and so are its partial-state bytes.
    fn absorb(&mut self, pass: &FusedPass) {
        for (s, x) in pass.outside() {
            self.sum[s as usize].add(x);
        }
        for (s, p) in pass.touched() {
            self.n[s] += i64::from(p.n);
            if p.in_lane() {
                self.sum[s].add_scaled(p.lane, pass.anchor());
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use arrow_buffer::ScalarBuffer;
    use proptest::prelude::*;

    use super::*;
    use crate::aggregate::functions::lane::lane_values;
    use crate::aggregate::state::SKIP;

    proptest! {
        /// The batch lane gives every slot the bits the exact sum's own add gives, row by row, whether it flags
        /// the slots it reached (a store of fewer slots than rows) or lists them (`spread` puts the four slots
        /// used among up to 4000, more than any batch here has rows), with nulls or without.
        #[test]
        fn batch_lane_equals_exact_adds(
            rows in prop::collection::vec((lane_values(), 0u32..5, any::<bool>()), 0..300),
            spread in prop_oneof![Just(1u32), 1u32..1000],
            with_nulls in any::<bool>(),
        ) {
            let store = 4 * spread as usize;
            let values: Vec<f64> = rows.iter().map(|r| r.0).collect();
            let slots: Vec<u32> =
                rows.iter().map(|r| if r.1 == 4 { SKIP } else { r.1 * spread }).collect();
            let nulls = with_nulls
                .then(|| arrow_buffer::NullBuffer::from(rows.iter().map(|r| r.2).collect::<Vec<_>>()));
            let mut acc = SumFloat::default();
            acc.extend_empty(store);
            let input = InputValues::Float(ScalarBuffer::from(values.clone()), nulls.clone());
            let order = RowOrder { ts: &[], by: None, source: 0, seq0: 0 };
            acc.update(&slots, &input, order);
            let mut want = vec![ExactSum::new(); store];
            let mut n = vec![0i64; store];
            for (i, (&s, &x)) in slots.iter().zip(&values).enumerate() {
                if s != SKIP && nulls.as_ref().is_none_or(|nl| nl.is_valid(i)) {
                    want[s as usize].add(x);
                    n[s as usize] += 1;
                }
            }
            for s in 0..store {
                prop_assert_eq!(acc.sum[s].value().to_bits(), want[s].value().to_bits());
                prop_assert_eq!(acc.n[s], n[s]);
            }
            // A second batch into the same sums: the lane was left empty.
            acc.update(&slots, &input, order);
            for (i, (&s, &x)) in slots.iter().zip(&values).enumerate() {
                if s != SKIP && nulls.as_ref().is_none_or(|nl| nl.is_valid(i)) {
                    want[s as usize].add(x);
                }
            }
            for (got, want) in acc.sum.iter().zip(&want) {
                prop_assert_eq!(got.value().to_bits(), want.value().to_bits());
            }
        }
    }
}
