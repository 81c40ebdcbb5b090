//! `sum` and `mean`: an exact sum and a count per slot (`i128` for integers, [`ExactSum`] for floats).

use std::any::Any;
use std::sync::Arc;

use arrow_array::{ArrayRef, Decimal128Array};
use arrow_schema::DataType;

use super::columns::{StateColumns, exact_sum_column, int64_column};
use super::{
    Accumulator, AggregateFunction, Lift, Scalar, for_pairs, lift_rows, pair_mut, same, valid,
};
use crate::aggregate::function::{AggSpec, ValueClass};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder};
use crate::error::{Error, ErrorKind, Result};
use crate::exact_sum::ExactSum;

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

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let (sum, n) = (&self.sum, &self.n);
        let nulls = valid(slots, n, 1);
        if self.mean {
            let vals = slots.iter().map(|&s| {
                let s = s as usize;
                if n[s] == 0 {
                    0.0
                } else {
                    sum[s] as f64 / n[s] as f64
                }
            });
            return f64::column(vals.collect(), nulls, &meta.output_type());
        }
        let mut vals = Vec::with_capacity(slots.len());
        for &s in slots {
            let v = i64::try_from(sum[s as usize]).map_err(|_| {
                Error::new(
                    ErrorKind::Overflow,
                    format!(
                        "aggs: sum of column '{}' overflows int64 in a window",
                        meta.column()
                    ),
                )
            })?;
            vals.push(v);
        }
        i64::column(vals, nulls, &meta.output_type())
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

/// Float sums, exact ([`ExactSum`]), and counts.
#[derive(Debug, Default)]
pub(super) struct SumFloat {
    mean: bool,
    sum: Vec<ExactSum>,
    n: Vec<i64>,
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

    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        let (v, nulls) = f64::input(input);
        lift_rows(self, slots, nulls, &order, |i| v[i]);
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

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let (sum, n) = (&self.sum, &self.n);
        let vals = slots.iter().map(|&s| {
            let s = s as usize;
            if self.mean && n[s] > 0 {
                sum[s].mean(n[s])
            } else {
                sum[s].value()
            }
        });
        f64::column(vals.collect(), valid(slots, n, 1), &meta.output_type())
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

    fn as_any(&self) -> &dyn Any {
        self
    }
}
