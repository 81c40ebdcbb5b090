//! `min` and `max`: the extreme value and a count per slot, under `<` for integers and `f64::total_cmp` for
//! floats (every NaN canonical, above +inf).

use std::any::Any;

use arrow_array::ArrayRef;
use arrow_schema::DataType;

use super::columns::{StateColumns, int64_column};
use super::{
    Accumulator, AggregateFunction, FusedPass, Lift, Needs, Scalar, Triple, at_or, for_pairs,
    for_triples, lift_rows, pair_count, pairs_validity, same, valid, value_class,
};
use crate::aggregate::function::{AggSpec, ValueClass};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder};
use crate::error::Result;

/// `min` (`MAX = false`) or `max`.
pub(super) struct ExtremeFn<const MAX: bool>;

pub(super) const MIN: ExtremeFn<false> = ExtremeFn;
pub(super) const MAX: ExtremeFn<true> = ExtremeFn;

impl<const MAX: bool> AggregateFunction for ExtremeFn<MAX> {
    fn output_type(&self, input_type: &DataType, _: ValueClass) -> DataType {
        input_type.clone()
    }

    fn state_fields(
        &self,
        input_type: &DataType,
        _: ValueClass,
    ) -> Vec<(&'static str, DataType, bool)> {
        vec![("value", input_type.clone(), true)]
    }

    fn state_parts(&self) -> &'static [&'static str] {
        &["value"]
    }

    fn partial_input(
        &self,
        spec: &AggSpec,
        col: &dyn Fn(&str) -> Result<DataType>,
    ) -> Result<(DataType, ValueClass)> {
        value_input(spec, col)
    }

    fn accumulator(&self, meta: &AggMeta) -> Box<dyn Accumulator> {
        match meta.class {
            ValueClass::Int => Box::new(Extreme::<i64, MAX>::default()),
            ValueClass::Float => Box::new(Extreme::<f64, MAX>::default()),
        }
    }
}

/// The input type and class of a partial input whose state keeps input values in its `value` column.
pub(super) fn value_input(
    spec: &AggSpec,
    col: &dyn Fn(&str) -> Result<DataType>,
) -> Result<(DataType, ValueClass)> {
    let dt = col("value")?;
    let class = value_class(&dt, spec.func, &format!("{}__value", spec.output_name))?;
    Ok((dt, class))
}

/// The extreme value per slot, as its order key ([`Scalar::order_key`]; meaningless where the count is 0),
/// and counts.
#[derive(Debug, Default)]
pub(super) struct Extreme<T, const MAX: bool> {
    v: Vec<i64>,
    n: Vec<i64>,
    _values: std::marker::PhantomData<T>,
}

impl<T, const MAX: bool> Extreme<T, MAX> {
    /// The key an empty slot holds: every value's key beats or equals it, so neither a lift nor a combine
    /// tests for "empty".
    const WORST: i64 = if MAX { i64::MIN } else { i64::MAX };

    /// The better of two keys.
    #[inline(always)]
    fn pick(a: i64, b: i64) -> i64 {
        if MAX { a.max(b) } else { a.min(b) }
    }
}

impl<T: Scalar, const MAX: bool> Lift for Extreme<T, MAX> {
    type Value = T;

    #[inline(always)]
    fn lift(&mut self, slot: usize, x: T, _: usize, _: &RowOrder<'_>) {
        // Both vectors cut to one length, so that one bounds check covers both.
        let len = self.v.len();
        let (v, n) = (&mut self.v[..len], &mut self.n[..len]);
        v[slot] = Self::pick(v[slot], x.canonical().order_key());
        n[slot] += 1;
    }
}

impl<T: Scalar, const MAX: bool> Accumulator for Extreme<T, MAX> {
    slot_vectors!(v: Self::WORST, n: 0);

    fn reset(&mut self, i: usize) {
        (self.v[i], self.n[i]) = (Self::WORST, 0);
    }

    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        let (v, nulls) = T::input(input);
        // Cut to the rows' length, so that the row loop reads `v[i]` without a bounds check.
        let v = &v[..slots.len()];
        lift_rows(self, slots, nulls, &order, |i| v[i]);
    }

    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]) {
        let other = same::<Self>(other);
        for_pairs(pairs, |d, s| {
            self.v[d] = Self::pick(self.v[d], other.v[s]);
            self.n[d] += other.n[s];
        })
    }

    fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        for_pairs(pairs, |d, s| {
            self.v[d] = Self::pick(self.v[d], self.v[s]);
            self.n[d] += self.n[s];
        })
    }

    fn set_combined(&mut self, other: &dyn Accumulator, triples: &[Triple]) {
        let other = same::<Self>(other);
        for_triples(triples, |d, a, b| {
            let (v, n) = b.map_or((Self::WORST, 0), |b| (self.v[b], self.n[b]));
            self.v[d] = Self::pick(other.v[a], v);
            self.n[d] = other.n[a] + n;
        })
    }

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        T::column(
            self.values(slots),
            valid(slots, &self.n, 1),
            &meta.output_type(),
        )
    }

    fn finish_two(&self, meta: &AggMeta, pairs: &[(u32, u32)]) -> Option<Result<ArrayRef>> {
        let key = |&(a, b): &(u32, u32)| {
            Self::pick(
                at_or(&self.v, a, Self::WORST),
                at_or(&self.v, b, Self::WORST),
            )
        };
        // One pass for the values and whether every window has one.
        let mut all_valid = true;
        let values = (pairs.iter())
            .map(|p| {
                all_valid &= pair_count(&self.n, *p) >= 1;
                T::from_order_key(key(p))
            })
            .collect();
        let nulls = pairs_validity(&self.n, pairs, all_valid, 1);
        Some(T::column(values, nulls, &meta.output_type()))
    }

    fn export(&self, meta: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        Ok(vec![
            int64_column(&self.n, slots),
            T::column(
                self.values(slots),
                valid(slots, &self.n, 1),
                &meta.input_type,
            )?,
        ])
    }

    fn import(&mut self, n: Vec<i64>, cols: &StateColumns<'_>) -> Result<()> {
        let values: Vec<T> = cols.values(&n)?;
        self.v = (values.into_iter().zip(&n))
            .map(|(v, &n)| {
                if n == 0 {
                    Self::WORST
                } else {
                    v.canonical().order_key()
                }
            })
            .collect();
        self.n = n;
        Ok(())
    }

    fn fused_needs(&self) -> Option<Needs> {
        T::FLOAT.then_some(Needs {
            max: MAX,
            min: !MAX,
            ..Needs::default()
        })
    }

    fn absorb(&mut self, pass: &FusedPass) {
        for (s, n, key) in pass.touched_extremes::<MAX>() {
            self.v[s] = Self::pick(self.v[s], key);
            self.n[s] += i64::from(n);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<T: Scalar, const MAX: bool> Extreme<T, MAX> {
    /// The given slots' values.
    fn values(&self, slots: &[u32]) -> Vec<T> {
        (slots.iter())
            .map(|&s| T::from_order_key(self.v[s as usize]))
            .collect()
    }
}
