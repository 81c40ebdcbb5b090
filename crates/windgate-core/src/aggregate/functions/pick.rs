//! `first` and `last`: the value of the row that comes first (or last) in the total order `(ts, by, source,
//! seq)`, with that row's place and a count per slot. Ties cannot happen: the order is total.

use std::any::Any;

use arrow_array::ArrayRef;
use arrow_schema::DataType;

use super::columns::{StateColumns, int64_column, order_columns};
use super::extreme::value_input;
use super::{
    Accumulator, AggregateFunction, Lift, Scalar, Triple, each_valid, for_pairs, for_triples,
    pairs_validity, same, valid,
};
use crate::aggregate::function::{AggSpec, ValueClass};
use crate::aggregate::state::{AggMeta, InputValues, OrderKey, RowOrder, SKIP};
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
    /// A batch's winning row per slot (`SKIP` between batches), and the slots it reached with whether each
    /// was empty before it: see [`Picked::update`].
    winner: Vec<u32>,
    touched: Vec<(u32, bool)>,
}

impl<T: Scalar, const LAST: bool> Lift for Picked<T, LAST> {
    type Value = T;

    #[inline(always)]
    fn lift(&mut self, slot: usize, x: T, row: usize, order: &RowOrder<'_>) {
        self.take(slot, (x, order.key(row), 1));
    }
}

impl<T: Scalar, const LAST: bool> Picked<T, LAST> {
    /// Combines a state `(value, place, count)` into slot `d`: its pick wins if `d` has none or it comes
    /// later (`last`) or earlier (`first`).
    #[inline(always)]
    fn take(&mut self, d: usize, (v, at, n): (T, OrderKey, i64)) {
        if n > 0 {
            if self.n[d] == 0 || (at > self.at[d]) == LAST {
                (self.v[d], self.at[d]) = (v, at);
            }
            self.n[d] += n;
        }
    }
}

impl<T: Scalar, const LAST: bool> Accumulator for Picked<T, LAST> {
    slot_vectors!(v: T::default(), at: OrderKey::default(), n: 0);

    /// Only the count: a value and place beside a zero count are never read.
    fn reset(&mut self, i: usize) {
        self.n[i] = 0;
    }

    /// The batch's winner per slot first, then one compare of full order keys per slot: the rows of a batch
    /// share their source and are numbered in row order, so among them the order is `(ts, by, row)`. A batch
    /// sorted by time without a `by` column (the common case) needs no compare at all: `last`'s winner is a
    /// slot's last row, `first`'s its first; otherwise a row compares its time (and `by`) with its slot's
    /// winner so far. The states are those of lifting row by row ([`Lift::lift`]).
    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        let (v, nulls) = T::input(input);
        let rows = slots.len();
        let ts = &order.ts[..rows];
        self.winner.resize(self.n.len(), SKIP);
        self.touched.resize(rows + 1, (0, false));
        let mut pass = WinnerPass {
            winner: &mut self.winner[..],
            touched: &mut self.touched[..],
            n: &mut self.n[..],
            len: 0,
        };
        match order.by {
            None if crate::prefetch::non_decreasing(ts) => {
                each_valid(slots, nulls, |i, s| pass.row::<LAST>(i, s, |_, _| LAST))
            }
            None => each_valid(slots, nulls, |i, s| {
                pass.row::<LAST>(
                    i,
                    s,
                    |i, w| if LAST { ts[i] >= ts[w] } else { ts[i] < ts[w] },
                )
            }),
            Some(by) => {
                let by = &by[..rows];
                let place = |i: usize| (ts[i], by[i]);
                each_valid(slots, nulls, |i, s| {
                    pass.row::<LAST>(i, s, |i, w| {
                        if LAST {
                            place(i) >= place(w)
                        } else {
                            place(i) < place(w)
                        }
                    })
                })
            }
        }
        let len = pass.len;
        for &(s, was_empty) in &self.touched[..len] {
            let s = s as usize;
            let w = std::mem::replace(&mut self.winner[s], SKIP) as usize;
            let k = order.key(w);
            if was_empty || (k > self.at[s]) == LAST {
                (self.v[s], self.at[s]) = (v[w], k);
            }
        }
    }

    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]) {
        let other = same::<Self>(other);
        for_pairs(pairs, |d, s| {
            self.take(d, (other.v[s], other.at[s], other.n[s]))
        })
    }

    fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        for_pairs(pairs, |d, s| {
            self.take(d, (self.v[s], self.at[s], self.n[s]))
        })
    }

    /// Emptied as `reset` empties (the count only), then `a`'s pick taken and `b`'s weighed against it.
    fn set_combined(&mut self, other: &dyn Accumulator, triples: &[Triple]) {
        let other = same::<Self>(other);
        for_triples(triples, |d, a, b| {
            self.n[d] = 0;
            self.take(d, (other.v[a], other.at[a], other.n[a]));
            if let Some(b) = b {
                self.take(d, (self.v[b], self.at[b], self.n[b]));
            }
        })
    }

    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef> {
        let vals = slots.iter().map(|&s| self.v[s as usize]).collect();
        T::column(vals, valid(slots, &self.n, 1), &meta.output_type())
    }

    /// The winner of the pair's two states, as [`Self::take`] would pick it combining them into an empty
    /// slot (`b` replaces `a` when its row comes after `a`'s for `last`, not after for `first`), without the
    /// scratch state.
    fn finish_two(&self, meta: &AggMeta, pairs: &[(u32, u32)]) -> Option<Result<ArrayRef>> {
        let has = |s: u32| s != SKIP && self.n[s as usize] > 0;
        let mut all_valid = true;
        let vals = (pairs.iter())
            .map(|&(a, b)| match (has(a), has(b)) {
                (true, true) => {
                    let (a, b) = (a as usize, b as usize);
                    self.v[if (self.at[b] > self.at[a]) == LAST {
                        b
                    } else {
                        a
                    }]
                }
                (true, false) => self.v[a as usize],
                (false, true) => self.v[b as usize],
                (false, false) => {
                    all_valid = false;
                    T::default()
                }
            })
            .collect();
        let nulls = pairs_validity(&self.n, pairs, all_valid, 1);
        Some(T::column(vals, nulls, &meta.output_type()))
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

/// One batch's search for each slot's winning row (see `Picked::update`).
struct WinnerPass<'a> {
    /// By slot: the winning row so far, `SKIP` before the slot's first row.
    winner: &'a mut [u32],
    /// The slots reached, with whether each was empty before the batch: the first `len` entries (written at
    /// every row, kept at a slot's first, so that a first row costs no branch).
    touched: &'a mut [(u32, bool)],
    n: &'a mut [i64],
    len: usize,
}

impl WinnerPass<'_> {
    /// Row `i` of slot `s`: it becomes the winner at the slot's first row or when `beats(i, winner)`.
    #[inline(always)]
    fn row<const LAST: bool>(&mut self, i: usize, s: usize, beats: impl Fn(usize, usize) -> bool) {
        let w = self.winner[s];
        let first = w == SKIP;
        let held = if first { i } else { w as usize };
        self.touched[self.len] = (s as u32, self.n[s] == 0);
        self.len += usize::from(first);
        self.winner[s] = if first || beats(i, held) { i } else { held } as u32;
        self.n[s] += 1;
    }
}

#[cfg(test)]
mod tests {
    use arrow_buffer::{NullBuffer, ScalarBuffer};
    use proptest::prelude::*;

    use super::*;

    /// Rows as `(time, by, slot (4: none), valid, value)`.
    type Row = (i64, i64, u32, bool, i64);

    fn batch(rows: &[Row]) -> (Vec<u32>, InputValues, Vec<i64>, Vec<i64>) {
        let slots = rows
            .iter()
            .map(|r| if r.2 == 4 { SKIP } else { r.2 })
            .collect();
        let nulls = NullBuffer::from(rows.iter().map(|r| r.3).collect::<Vec<_>>());
        let values = ScalarBuffer::from(rows.iter().map(|r| r.4).collect::<Vec<_>>());
        let ts = rows.iter().map(|r| r.0).collect();
        let by = rows.iter().map(|r| r.1).collect();
        (slots, InputValues::Int(values, Some(nulls)), ts, by)
    }

    /// Lifts `rows` one by one through [`Lift::lift`] and as one batch through `update`, into states that
    /// already hold `before`'s rows.
    fn both<const LAST: bool>(before: &[Row], rows: &[Row], with_by: bool) -> [Vec<ArrayRef>; 2] {
        let run = |by_row: bool| {
            let mut acc = Picked::<i64, LAST>::default();
            acc.extend_empty(4);
            for (source, part) in [before, rows].into_iter().enumerate() {
                let (slots, input, ts, by) = batch(part);
                let order = RowOrder {
                    ts: &ts,
                    by: with_by.then_some(&by[..]),
                    source: source as u32,
                    seq0: 100 * source as u64,
                };
                if by_row {
                    let InputValues::Int(v, nulls) = &input else {
                        unreachable!()
                    };
                    super::super::lift_rows(&mut acc, &slots, nulls.as_ref(), &order, |i| v[i]);
                } else {
                    acc.update(&slots, &input, order);
                }
            }
            let meta = AggMeta {
                spec: crate::aggregate::function::AggSpec::parse_all(&[(
                    "x".into(),
                    vec![if LAST { "last" } else { "first" }.into()],
                )])
                .unwrap()[0]
                    .clone(),
                input_type: DataType::Int64,
                class: ValueClass::Int,
            };
            acc.export(&meta, &[0, 1, 2, 3]).unwrap()
        };
        [run(true), run(false)]
    }

    proptest! {
        /// A batch's winner per slot, then one compare per slot, leaves the states lifting row by row leaves:
        /// times with ties, sorted or not, a `by` column or none, null values, skipped rows, slots holding
        /// earlier rows.
        #[test]
        fn batch_update_equals_lifting_row_by_row(
            before in prop::collection::vec((0i64..6, 0i64..3, 0u32..5, prop::bool::weighted(0.8), -9i64..9), 0..30),
            rows in prop::collection::vec((0i64..6, 0i64..3, 0u32..5, prop::bool::weighted(0.8), -9i64..9), 0..60),
            with_by in prop::bool::ANY,
            sorted in prop::bool::ANY,
        ) {
            // Sorted by time, a batch without `by` takes the path without compares.
            let mut rows = rows;
            if sorted {
                rows.sort_by_key(|r| r.0);
            }
            let [a, b] = both::<true>(&before, &rows, with_by);
            prop_assert_eq!(a, b);
            let [a, b] = both::<false>(&before, &rows, with_by);
            prop_assert_eq!(a, b);
        }
    }
}
