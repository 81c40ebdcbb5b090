//! An aggregate's partial states for every slot, and what a batch feeds them: values, and the rows' places in
//! the total order. A slot is one (key, pane) pair in the pane store, or one (key, window) pair while a window
//! is being lowered.
//!
//! Every combine is exact and commutative (integer and exact float sums, min/max under the total order of
//! `f64::total_cmp`, first/last under the row order `(ts, by, source, seq)`), so partial states can be merged
//! in any order and give the same bits: the determinism contract (`docs/architecture.md`) rests on that. The
//! functions themselves live in [`super::functions`].

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::{NullBuffer, ScalarBuffer};
use arrow_schema::DataType;

use super::function::{AggSpec, ValueClass};
use super::functions::{Accumulator, FusedPass, Needs, StateColumns, Triple, function};
use crate::error::Result;

/// Slot value that means "skip this row" (late rows, rows with a null time under `null_time="drop"`).
pub const SKIP: u32 = u32::MAX;

/// Position of a row in the total order `(ts, by, source, seq)`. `by` is the `order_by` column's value (0
/// without one): it decides ties of equal times before the source and arrival do, so an order-sensitive
/// function gives the same result however the rows were split into sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct OrderKey {
    pub ts: i64,
    pub by: i64,
    pub source: u32,
    pub seq: u64,
}

/// One batch's values of an aggregate's input column, read as its [`ValueClass`].
#[derive(Debug, Clone)]
pub enum InputValues {
    /// `count(*)`: no column.
    Star,
    /// `count(col)`: only validity matters.
    Validity(Option<NullBuffer>),
    Int(ScalarBuffer<i64>, Option<NullBuffer>),
    Float(ScalarBuffer<f64>, Option<NullBuffer>),
    /// Rows that are partial states themselves (`input="partials"`): row `i` is slot `offset + i` of the
    /// state, combined into the row's slot instead of lifted (see [`super::partial`]).
    Partial(Arc<AggState>, usize),
}

impl InputValues {
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        let nb = |n: &Option<NullBuffer>| n.as_ref().map(|n| n.slice(offset, len));
        match self {
            InputValues::Star => InputValues::Star,
            InputValues::Validity(n) => InputValues::Validity(nb(n)),
            InputValues::Int(v, n) => InputValues::Int(v.slice(offset, len), nb(n)),
            InputValues::Float(v, n) => InputValues::Float(v.slice(offset, len), nb(n)),
            InputValues::Partial(st, at) => InputValues::Partial(st.clone(), at + offset),
        }
    }
}

/// Where the rows of a batch sit in the total order: row `i` is `(ts[i], by[i] or 0, source, seq0 + i)`.
#[derive(Debug, Clone, Copy)]
pub struct RowOrder<'a> {
    pub ts: &'a [i64],
    pub by: Option<&'a [i64]>,
    pub source: u32,
    pub seq0: u64,
}

impl RowOrder<'_> {
    #[inline]
    pub(crate) fn key(&self, i: usize) -> OrderKey {
        OrderKey {
            ts: self.ts[i],
            by: self.by.map_or(0, |b| b[i]),
            source: self.source,
            seq: self.seq0 + i as u64,
        }
    }
}

/// What an aggregate reads and produces, shared by all its states.
#[derive(Debug)]
pub struct AggMeta {
    pub spec: AggSpec,
    /// Type of the input column (`Int64` for `"*"`).
    pub input_type: DataType,
    pub class: ValueClass,
}

impl AggMeta {
    /// The output column's type.
    pub fn output_type(&self) -> DataType {
        function(self.spec.func).output_type(&self.input_type, self.class)
    }

    /// The input column's name, `*` for `count(*)`.
    pub(crate) fn column(&self) -> &str {
        self.spec.column.as_deref().unwrap_or("*")
    }
}

/// The partial states of one aggregate for every slot: its function's [`Accumulator`], and the partial
/// inputs (`input="partials"`) that are combined rather than lifted.
#[derive(Debug)]
pub struct AggState {
    meta: Arc<AggMeta>,
    acc: Box<dyn Accumulator>,
}

impl AggState {
    pub fn new(meta: Arc<AggMeta>) -> Self {
        let acc = function(meta.spec.func).accumulator(&meta);
        Self { meta, acc }
    }

    /// An empty state of the same aggregate.
    pub fn empty_like(&self) -> Self {
        Self::new(self.meta.clone())
    }

    /// Makes room for `n` more slots (stores whose size is known up front skip the regrowth).
    pub fn reserve(&mut self, n: usize) {
        self.acc.reserve(n)
    }

    /// Appends `n` empty slots.
    pub fn extend_empty(&mut self, n: usize) {
        self.acc.extend_empty(n)
    }

    /// Empties the given slots for reuse, in one call.
    pub fn reset_many(&mut self, slots: &[u32]) {
        self.acc.reset_many(slots)
    }

    /// Drops every slot, keeping the capacity (scratch stores are refilled at every emission).
    pub fn clear(&mut self) {
        self.acc.clear()
    }

    /// Lifts a batch's rows into their slots (`SKIP` rows are passed over); rows of a partial input are
    /// combined into them instead.
    pub fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        if let InputValues::Partial(rows, at) = input {
            let pairs: Vec<(u32, u32)> = (slots.iter().enumerate())
                .filter(|&(_, &s)| s != SKIP)
                .map(|(i, &s)| (s, (at + i) as u32))
                .collect();
            return self.combine_pairs(rows, &pairs);
        }
        self.acc.update(slots, input, order)
    }

    /// What the aggregate reads from a fused pass (see `super::functions::FusedPass`); `None` for a partial
    /// input or a function that lifts on its own.
    pub(crate) fn fused_needs(&self) -> Option<Needs> {
        self.acc.fused_needs()
    }

    /// Takes a fused pass's records into the slots it touched.
    pub(crate) fn absorb(&mut self, pass: &FusedPass) {
        self.acc.absorb(pass)
    }

    /// Combines, for every `(dst, src)` pair, slot `src` of `other` into slot `dst` of `self`. One dispatch
    /// on the function per call, not per pair: the window combiner merges a whole pane at a time.
    pub fn combine_pairs(&mut self, other: &AggState, pairs: &[(u32, u32)]) {
        self.acc.combine_pairs(other.acc.as_ref(), pairs)
    }

    /// Combines, for every `(dst, src)` pair, slot `src` of this state into its slot `dst`.
    pub fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        self.acc.combine_within(pairs)
    }

    /// Sets, for every `(dst, a, b)`, slot `dst` to slot `a` of `other` combined with slot `b` of this state
    /// (`SKIP`: `a` alone), whatever `dst` held.
    pub(crate) fn set_combined(&mut self, other: &AggState, triples: &[Triple]) {
        self.acc.set_combined(other.acc.as_ref(), triples)
    }

    /// Lowers the given slots, in order, into the output column.
    pub fn finish(&self, slots: &[u32]) -> Result<ArrayRef> {
        self.acc.finish(&self.meta, slots)
    }

    /// Lowers, for every `(a, b)` pair, the combination of slots `a` and `b` (`SKIP`: no slot) into the output
    /// column: directly where the function can, else through a scratch state of the pairs' combinations.
    pub fn finish_two(&self, pairs: &[(u32, u32)]) -> Result<ArrayRef> {
        match self.acc.finish_two(&self.meta, pairs) {
            Some(column) => column,
            None => self.finish_two_combined(pairs),
        }
    }

    /// [`Self::finish_two`] through a scratch state holding each pair's combination.
    pub(crate) fn finish_two_combined(&self, pairs: &[(u32, u32)]) -> Result<ArrayRef> {
        let mut scratch = self.empty_like();
        scratch.extend_empty(pairs.len());
        for half in [|p: &(u32, u32)| p.0, |p: &(u32, u32)| p.1] {
            let into: Vec<(u32, u32)> = (pairs.iter().enumerate())
                .filter(|(_, p)| half(p) != SKIP)
                .map(|(i, p)| (i as u32, half(p)))
                .collect();
            scratch.combine_pairs(self, &into);
        }
        scratch.finish(&(0..pairs.len() as u32).collect::<Vec<_>>())
    }

    /// The states of `slots`, in order, as the aggregate's partial-state columns (see [`super::partial`]).
    pub(crate) fn export(&self, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        self.acc.export(&self.meta, slots)
    }

    /// Reads the partial-state columns of `meta`'s aggregate from `batch`: a state with one slot per row.
    pub(crate) fn import(meta: &Arc<AggMeta>, batch: &RecordBatch) -> Result<Self> {
        let cols = StateColumns::new(meta, batch);
        let n = cols.counts()?;
        let mut state = AggState::new(meta.clone());
        state.acc.import(n, &cols)?;
        Ok(state)
    }
}
