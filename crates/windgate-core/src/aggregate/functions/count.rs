//! `count`: rows (`count(*)`, nulls included) or non-null values (`count(col)`).

use std::any::Any;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};
use arrow_schema::DataType;

use super::columns::{StateColumns, int64_column};
use super::{
    Accumulator, AggregateFunction, FusedPass, Lift, Needs, Triple, for_pairs, for_triples,
    lift_rows, pair_count, same,
};
use crate::aggregate::function::{AggSpec, ValueClass};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder};
use crate::error::Result;

pub(super) struct CountFn;

pub(super) const COUNT: CountFn = CountFn;

impl AggregateFunction for CountFn {
    fn output_type(&self, _: &DataType, _: ValueClass) -> DataType {
        DataType::Int64
    }

    fn state_fields(&self, _: &DataType, _: ValueClass) -> Vec<(&'static str, DataType, bool)> {
        vec![]
    }

    fn state_parts(&self) -> &'static [&'static str] {
        &[]
    }

    fn partial_input(
        &self,
        _: &AggSpec,
        _: &dyn Fn(&str) -> Result<DataType>,
    ) -> Result<(DataType, ValueClass)> {
        Ok((DataType::Int64, ValueClass::Int))
    }

    fn accumulator(&self, _: &AggMeta) -> Box<dyn Accumulator> {
        Box::new(Count::default())
    }

    /// `count` over a column counts its non-null values: any type will do.
    fn reads_values(&self) -> bool {
        false
    }

    fn output_nullable(&self) -> bool {
        false
    }
}

/// Counts per slot.
#[derive(Debug, Default)]
pub(super) struct Count {
    n: Vec<i64>,
}

impl Lift for Count {
    type Value = ();

    #[inline(always)]
    fn lift(&mut self, slot: usize, _: (), _: usize, _: &RowOrder<'_>) {
        self.n[slot] += 1;
    }
}

impl Accumulator for Count {
    slot_vectors!(n: 0);

    fn reset(&mut self, i: usize) {
        self.n[i] = 0;
    }

    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        let nulls = match input {
            InputValues::Star => None,
            InputValues::Validity(nulls)
            | InputValues::Int(_, nulls)
            | InputValues::Float(_, nulls) => nulls.as_ref(),
            InputValues::Partial(..) => unreachable!("partial inputs are combined, not lifted"),
        };
        lift_rows(self, slots, nulls, &order, |_| ());
    }

    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]) {
        let (a, b) = (&mut self.n, &same::<Self>(other).n);
        for_pairs(pairs, |d, s| a[d] += b[s]);
    }

    fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        for_pairs(pairs, |d, s| self.n[d] += self.n[s]);
    }

    fn set_combined(&mut self, other: &dyn Accumulator, triples: &[Triple]) {
        let (n, from) = (&mut self.n, &same::<Self>(other).n);
        for_triples(triples, |d, a, b| n[d] = from[a] + b.map_or(0, |b| n[b]));
    }

    fn finish(&self, _: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        Ok(int64_column(&self.n, slots))
    }

    fn finish_two(&self, _: &AggMeta, pairs: &[(u32, u32)]) -> Option<Result<ArrayRef>> {
        let counts = pairs.iter().map(|&p| pair_count(&self.n, p));
        Some(Ok(Arc::new(Int64Array::from_iter_values(counts))))
    }

    fn fused_needs(&self) -> Option<Needs> {
        Some(Needs::default())
    }

    fn absorb(&mut self, pass: &FusedPass) {
        for (s, p) in pass.touched() {
            self.n[s] += i64::from(p.n);
        }
    }

    fn export(&self, _: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        Ok(vec![int64_column(&self.n, slots)])
    }

    fn import(&mut self, n: Vec<i64>, _: &StateColumns<'_>) -> Result<()> {
        self.n = n;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
