//! `first` and `last`: the value of the row that comes first (or last) in the total order `(ts, by, source,
//! seq)`, with that row's place and a count per slot. Ties cannot happen: the order is total.

use std::any::Any;

use arrow_array::ArrayRef;
use arrow_schema::DataType;

use super::columns::{StateColumns, int64_column, order_columns};
use super::extreme::value_input;
use super::{Accumulator, AggregateFunction, Lift, Scalar, for_pairs, lift_rows, same, valid};
use crate::aggregate::function::{AggSpec, ValueClass};
use crate::aggregate::state::{AggMeta, InputValues, OrderKey, RowOrder};
use crate::error::Result;

/// `first` (`LAST = false`) or `last`.
pub(super) struct PickFn<const LAST: bool>;

pub(super) const FIRST: PickFn<false> = PickFn;
pub(super) const LAST: PickFn<true> = PickFn;

impl<const LAST: bool> AggregateFunction for PickFn<LAST> {
    fn output_type(&self, input_type: &DataType, _: ValueClass) -> DataType {
        input_type.clone()
    }

    fn state_fields(
        &self,
        input_type: &DataType,
        _: ValueClass,
    ) -> Vec<(&'static str, DataType, bool)> {
        let mut out = vec![("value", input_type.clone(), true)];
        for part in ["at_ts", "at_by", "at_source", "at_seq"] {
            out.push((part, DataType::Int64, false));
        }
        out
    }

    fn state_parts(&self) -> &'static [&'static str] {
        &["value", "at_ts", "at_by", "at_source", "at_seq"]
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
            ValueClass::Int => Box::new(Picked::<i64, LAST>::default()),
            ValueClass::Float => Box::new(Picked::<f64, LAST>::default()),
        }
    }
}

/// The picked value per slot, the place of its row in the total order, and counts.
#[derive(Debug, Default)]
pub(super) struct Picked<T, const LAST: bool> {
    v: Vec<T>,
    at: Vec<OrderKey>,
    n: Vec<i64>,
}

impl<T: Scalar, const LAST: bool> Lift for Picked<T, LAST> {
    type Value = T;

    #[inline(always)]
    fn lift(&mut self, slot: usize, x: T, row: usize, order: &RowOrder<'_>) {
        let k = order.key(row);
        if self.n[slot] == 0 || (k > self.at[slot]) == LAST {
            (self.v[slot], self.at[slot]) = (x, k);
        }
        self.n[slot] += 1;
    }
}

impl<T: Scalar, const LAST: bool> Accumulator for Picked<T, LAST> {
    slot_vectors!(v: T::default(), at: OrderKey::default(), n: 0);

    /// Only the count: a value and place beside a zero count are never read.
    fn reset(&mut self, i: usize) {
        self.n[i] = 0;
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
            if other.n[s] > 0 {
                if self.n[d] == 0 || (other.at[s] > self.at[d]) == LAST {
                    (self.v[d], self.at[d]) = (other.v[s], other.at[s]);
                }
                self.n[d] += other.n[s];
            }
        })
    }

    fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        for_pairs(pairs, |d, s| {
            if self.n[s] > 0 {
                if self.n[d] == 0 || (self.at[s] > self.at[d]) == LAST {
                    (self.v[d], self.at[d]) = (self.v[s], self.at[s]);
                }
                self.n[d] += self.n[s];
            }
        })
    }

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let vals = slots.iter().map(|&s| self.v[s as usize]).collect();
        T::column(vals, valid(slots, &self.n, 1), &meta.output_type())
    }

    fn export(&self, meta: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        let vals = slots.iter().map(|&s| self.v[s as usize]).collect();
        let mut out = vec![
            int64_column(&self.n, slots),
            T::column(vals, valid(slots, &self.n, 1), &meta.input_type)?,
        ];
        out.extend(order_columns(&self.at, slots));
        Ok(out)
    }

    fn import(&mut self, n: Vec<i64>, cols: &StateColumns<'_>) -> Result<()> {
        self.v = cols.values(&n)?;
        self.at = cols.order_keys()?;
        self.n = n;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
