//! `min` and `max`: the extreme value and a count per slot, under `<` for integers and `f64::total_cmp` for
//! floats (every NaN canonical, above +inf).

use std::any::Any;

use arrow_array::ArrayRef;
use arrow_schema::DataType;

use super::columns::{StateColumns, int64_column};
use super::{
    Accumulator, AggregateFunction, Lift, Scalar, for_pairs, lift_rows, same, valid, value_class,
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

/// The extreme value per slot (meaningless where the count is 0) and counts.
#[derive(Debug, Default)]
pub(super) struct Extreme<T, const MAX: bool> {
    v: Vec<T>,
    n: Vec<i64>,
}

impl<T: Scalar, const MAX: bool> Lift for Extreme<T, MAX> {
    type Value = T;

    #[inline(always)]
    fn lift(&mut self, slot: usize, x: T, _: usize, _: &RowOrder<'_>) {
        // An empty slot holds `worst`, which every value beats or equals: no test for "empty".
        let x = x.canonical();
        let current = self.v[slot];
        self.v[slot] = std::hint::select_unpredictable(x.beats::<MAX>(current), x, current);
        self.n[slot] += 1;
    }
}

impl<T: Scalar, const MAX: bool> Accumulator for Extreme<T, MAX> {
    slot_vectors!(v: T::worst::<MAX>(), n: 0);

    fn reset(&mut self, i: usize) {
        (self.v[i], self.n[i]) = (T::worst::<MAX>(), 0);
    }

    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        let (v, nulls) = T::input(input);
        // Cut to the rows' length, so that the row loop reads `v[i]` without a bounds check.
        let v = &v[..slots.len()];
        lift_rows(self, slots, nulls, &order, |i| v[i]);
    }

    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]) {
        let other = same::<Self>(other);
        // An empty slot holds `worst`, which loses to (or equals) every value: no test for "empty" either side.
        for_pairs(pairs, |d, s| {
            let (x, current) = (other.v[s], self.v[d]);
            self.v[d] = std::hint::select_unpredictable(x.beats::<MAX>(current), x, current);
            self.n[d] += other.n[s];
        })
    }

    fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        for_pairs(pairs, |d, s| {
            let (x, current) = (self.v[s], self.v[d]);
            self.v[d] = std::hint::select_unpredictable(x.beats::<MAX>(current), x, current);
            self.n[d] += self.n[s];
        })
    }

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let vals = slots.iter().map(|&s| self.v[s as usize]).collect();
        T::column(vals, valid(slots, &self.n, 1), &meta.output_type())
    }

    fn export(&self, meta: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        let vals = slots.iter().map(|&s| self.v[s as usize]).collect();
        Ok(vec![
            int64_column(&self.n, slots),
            T::column(vals, valid(slots, &self.n, 1), &meta.input_type)?,
        ])
    }

    fn import(&mut self, n: Vec<i64>, cols: &StateColumns<'_>) -> Result<()> {
        self.v = cols.values(&n)?;
        for (v, &n) in self.v.iter_mut().zip(&n) {
            if n == 0 {
                *v = T::worst::<MAX>();
            }
        }
        self.n = n;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
