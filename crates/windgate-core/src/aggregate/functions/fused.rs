//! The fused pass: one loop over a batch's rows that lifts every aggregate of a query over one float column
//! (`count`, `sum`, `mean`, `min`, `max`, and `count(*)`) at once.
//!
//! Lifted aggregate by aggregate, each row's slot is read once per aggregate, and each aggregate keeps and
//! bumps a count of its own. Here each accumulator says which parts of the column it reads
//! ([`Accumulator::fused_needs`]): the rows' count, their exact sum, their greatest or least value. The pass
//! keeps those parts for every slot side by side in one record ([`SlotParts`]), so a row costs one slot read,
//! one record and one count; each accumulator then takes the records of the slots the batch touched
//! ([`Accumulator::absorb`]): a call per aggregate and batch, a read per touched slot. The row loop is
//! compiled once per combination of parts (sum, max, min), so nothing inside it tests a function's kind.
//!
//! The states are the ones lifting row by row gives, bit for bit: counts and extremes are the same integer
//! sums and maxima, and the sum's lane is the batch lane's ([`super::lane`]), its outside values added to the
//! exact sum one by one as there. Queries the pass does not cover (integer columns, a column with nulls,
//! `first`, `last`, `var`, `std`, partial inputs, one aggregate alone) lift aggregate by aggregate.

use super::Scalar;
use super::lane::{LANE_ROWS, lane_anchor, lane_term};
use crate::aggregate::state::{InputValues, SKIP};

/// The fused pass keeps a record per slot of the store: past this many slots (a million keys, say) it would
/// double the state's memory, and the records would be read from far memory anyway; such stores lift
/// aggregate by aggregate.
const MAX_SLOTS: usize = 1 << 16;

/// The parts of a column a fused pass computes beyond the count every pass keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Needs {
    pub sum: bool,
    pub max: bool,
    pub min: bool,
}

impl Needs {
    fn union(self, other: Needs) -> Needs {
        Needs {
            sum: self.sum | other.sum,
            max: self.max | other.max,
            min: self.min | other.min,
        }
    }
}

/// One slot's parts of a batch's column, side by side, in 32 bytes aligned to 32: a record lies in one cache
/// line, and a thousand keys' records fit a 32 KB L1 cache. (At 48 bytes, with a flag for the lane and both
/// extremes, the row loop waited on its records: `perf` put 42% of its samples on the first access.)
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct SlotParts {
    /// The values the lane holds, in lane units (see [`FusedPass::anchor`]).
    pub lane: i128,
    /// The order key ([`Scalar::order_key`]) of the greatest value with `max`, else of the least with `min`
    /// (with both, the least is kept beside the records, in `FusedPass::mins`).
    ext: i64,
    /// Rows lifted into the slot (a chunk holds at most [`LANE_ROWS`]).
    pub n: u32,
    /// Rows whose values the lane could not hold (see `outside_row`).
    outside: u32,
}

impl SlotParts {
    /// The empty record of a pass computing `needs`.
    fn empty(needs: Needs) -> Self {
        Self {
            lane: 0,
            ext: if needs.max { i64::MIN } else { i64::MAX },
            n: 0,
            outside: 0,
        }
    }

    /// Whether any value went into the lane (then the sum is no longer only -0.0, even when the lane is 0).
    pub(crate) fn in_lane(&self) -> bool {
        self.n > self.outside
    }
}

/// The records of a fused pass over one chunk of rows, and what the accumulators read of them.
///
/// A record belongs to a slot of the store (rows given with their slots), or to a key (rows of one pane
/// given with their key ids, [`FusedPass::run_keyed`]): then the pass looks up a key's slot once per chunk
/// rather than once per row, and its records span the keys, not the slots of every open pane.
#[derive(Debug, Default)]
pub(crate) struct FusedPass {
    /// By record; `empty` outside a chunk.
    parts: Vec<SlotParts>,
    /// By record, with both `max` and `min`: the least value's order key (`i64::MAX` outside a chunk).
    mins: Vec<i64>,
    /// The parts the records hold (their empty record is [`SlotParts::empty`] of these).
    needs: Needs,
    /// The records the chunk touched, in the order of their first rows (or of the records, when found by a
    /// scan): the first `touched_len` entries. The buffer keeps its length (a row may write one past the list's
    /// end), so that no chunk refills it.
    touched: Vec<u32>,
    touched_len: usize,
    /// `(record, value)` of the values the lane cannot hold, in row order.
    outside: Vec<(u32, f64)>,
    /// Keyed runs: each touched record's slot in the store, by record.
    slot_of: Vec<u32>,
    keyed: bool,
    anchor: u64,
}

/// Where a fused pass's records go: their slots, and the accumulators that absorb them.
pub(crate) trait FusedSink {
    /// The store slot of key `key` (allocated on first use); called once per chunk for each key touched.
    fn place(&mut self, key: u32) -> u32;
    /// Hands a chunk's records to every accumulator (`Accumulator::absorb`).
    fn absorb(&mut self, pass: &FusedPass);
}

impl FusedPass {
    /// The slots the chunk touched, with their parts.
    pub(crate) fn touched(&self) -> impl Iterator<Item = (usize, &SlotParts)> {
        (self.touched_records().iter()).map(|&r| (self.slot(r) as usize, &self.parts[r as usize]))
    }

    /// The slots the chunk touched, each with its rows and the order key of its greatest value (`MAX`) or
    /// least value.
    pub(crate) fn touched_extremes<const MAX: bool>(
        &self,
    ) -> impl Iterator<Item = (usize, u32, i64)> + '_ {
        let in_mins = !MAX && self.needs.max;
        (self.touched_records().iter()).map(move |&r| {
            let p = &self.parts[r as usize];
            let key = if in_mins {
                self.mins[r as usize]
            } else {
                p.ext
            };
            (self.slot(r) as usize, p.n, key)
        })
    }

    /// The values the lane could not hold, with their slots: to be added to the exact sums one by one.
    pub(crate) fn outside(&self) -> impl Iterator<Item = (u32, f64)> + '_ {
        self.outside.iter().map(|&(r, x)| (self.slot(r), x))
    }

    fn touched_records(&self) -> &[u32] {
        &self.touched[..self.touched_len]
    }

    /// The store slot of record `r`.
    #[inline]
    fn slot(&self, r: u32) -> u32 {
        if self.keyed {
            self.slot_of[r as usize]
        } else {
            r
        }
    }

    /// The lane's resolution: a lane unit weighs `2^(anchor - 1074)` (`ExactSum::add_scaled`).
    pub(crate) fn anchor(&self) -> u16 {
        self.anchor as u16
    }

    /// Lifts a batch of `values` through the pass: `slots` holds each row's slot in a store of `store_len`
    /// slots, `needs` what [`plan`] found, and `absorb` hands each chunk's records to every accumulator.
    /// Returns `false`, having done nothing, when the store is too large for the pass ([`MAX_SLOTS`]).
    pub(crate) fn run(
        &mut self,
        slots: &[u32],
        values: &[f64],
        needs: Needs,
        store_len: usize,
        absorb: impl FnMut(&FusedPass),
    ) -> bool {
        struct BySlot<F>(F);
        impl<F: FnMut(&FusedPass)> FusedSink for BySlot<F> {
            fn place(&mut self, slot: u32) -> u32 {
                slot
            }
            fn absorb(&mut self, pass: &FusedPass) {
                (self.0)(pass)
            }
        }
        self.keyed = false;
        self.run_records(slots, values, needs, store_len, &mut BySlot(absorb))
    }

    /// [`Self::run`] for rows given by key id (all of one pane, none skipped): `keys[i] < key_count` is row
    /// i's key, and `sink` gives each key's slot. Returns `false`, having done nothing, past [`MAX_SLOTS`] keys.
    pub(crate) fn run_keyed(
        &mut self,
        keys: &[u32],
        values: &[f64],
        needs: Needs,
        key_count: usize,
        sink: &mut impl FusedSink,
    ) -> bool {
        self.keyed = true;
        self.run_records(keys, values, needs, key_count, sink)
    }

    /// Whether the pass keeps records for `len` slots or keys (see [`MAX_SLOTS`]).
    pub(crate) fn takes(len: usize) -> bool {
        len <= MAX_SLOTS
    }

    fn run_records(
        &mut self,
        records: &[u32],
        values: &[f64],
        needs: Needs,
        len: usize,
        sink: &mut impl FusedSink,
    ) -> bool {
        if !Self::takes(len) {
            return false;
        }
        if self.needs != needs {
            // Other parts than the last batch's: every record emptied for them.
            self.parts.clear();
            self.needs = needs;
        }
        let empty = SlotParts::empty(needs);
        self.parts.resize(len, empty);
        if needs.max && needs.min {
            self.mins.resize(len, i64::MAX);
        }
        if self.keyed {
            self.slot_of.resize(len, SKIP);
        }
        let values = &values[..records.len()];
        for start in (0..records.len()).step_by(LANE_ROWS) {
            let end = records.len().min(start + LANE_ROWS);
            self.chunk(&records[start..end], &values[start..end], needs);
            if self.keyed {
                for &r in &self.touched[..self.touched_len] {
                    self.slot_of[r as usize] = sink.place(r);
                }
            }
            sink.absorb(self);
            for &r in &self.touched[..self.touched_len] {
                self.parts[r as usize] = empty;
            }
            if needs.max && needs.min {
                for &r in &self.touched[..self.touched_len] {
                    self.mins[r as usize] = i64::MAX;
                }
            }
            self.touched_len = 0;
            self.outside.clear();
        }
        true
    }

    /// Runs the row loop compiled for `needs` over one chunk.
    fn chunk(&mut self, slots: &[u32], values: &[f64], needs: Needs) {
        self.anchor = if needs.sum { lane_anchor(values) } else { 0 };
        // Fewer records than rows: the records the chunk touched are found by one scan of them at its end
        // rather than listed row by row.
        if self.parts.len() <= slots.len() {
            self.rows_for::<false>(slots, values, needs);
            self.scan_touched();
        } else {
            self.rows_for::<true>(slots, values, needs);
        }
    }

    /// [`Self::rows`] compiled for `needs`.
    #[inline(always)]
    fn rows_for<const TRACK: bool>(&mut self, slots: &[u32], values: &[f64], needs: Needs) {
        let Needs { sum, max, min } = needs;
        match (sum, max, min) {
            (false, false, false) => self.rows::<false, false, false, TRACK>(slots, values),
            (false, false, true) => self.rows::<false, false, true, TRACK>(slots, values),
            (false, true, false) => self.rows::<false, true, false, TRACK>(slots, values),
            (false, true, true) => self.rows::<false, true, true, TRACK>(slots, values),
            (true, false, false) => self.rows::<true, false, false, TRACK>(slots, values),
            (true, false, true) => self.rows::<true, false, true, TRACK>(slots, values),
            (true, true, false) => self.rows::<true, true, false, TRACK>(slots, values),
            (true, true, true) => self.rows::<true, true, true, TRACK>(slots, values),
        }
    }

    /// Lists the records a chunk run without `TRACK` touched (those with rows), in record order.
    fn scan_touched(&mut self) {
        if self.touched.len() <= self.parts.len() {
            self.touched.resize(self.parts.len() + 1, 0);
        }
        let mut len = 0;
        for (r, p) in self.parts.iter().enumerate() {
            self.touched[len] = r as u32;
            len += usize::from(p.n != 0);
        }
        self.touched_len = len;
    }

    /// The row loop: every row with a slot updates that slot's record once; with `TRACK`, the records touched
    /// are listed at their first row (else [`Self::scan_touched`] finds them).
    #[inline(always)]
    fn rows<const SUM: bool, const MAX: bool, const MIN: bool, const TRACK: bool>(
        &mut self,
        slots: &[u32],
        values: &[f64],
    ) {
        // A slot's first row is a coin toss a branch predictor loses (ten rows a slot, in random order): the
        // slot is written to the list at every row and the list grows only at a first row. The list has room
        // for every row and one more.
        if TRACK && self.touched.len() <= slots.len() {
            self.touched.resize(slots.len() + 1, 0);
        }
        let mut touched_len = 0;
        let (parts, mins, touched, outside, anchor) = (
            &mut self.parts[..],
            &mut self.mins[..],
            &mut self.touched[..],
            &mut self.outside,
            self.anchor,
        );
        for (&s, &x) in slots.iter().zip(values) {
            // One compare for both a skipped row and the bounds: `SKIP` is past any record (`MAX_SLOTS`).
            let Some(p) = parts.get_mut(s as usize) else {
                debug_assert_eq!(s, SKIP, "a record past the pass's records");
                continue;
            };
            if TRACK {
                touched[touched_len] = s;
                touched_len += usize::from(p.n == 0);
            }
            p.n += 1;
            // With both extremes, the least is kept beside the records.
            let min = (MAX && MIN).then(|| &mut mins[s as usize]);
            if SUM {
                match lane_term(x, anchor) {
                    Some(term) => {
                        p.lane += term;
                        // A value the lane holds is finite: no NaN to make canonical.
                        extremes::<MAX, MIN>(p, min, x.order_key());
                    }
                    None => outside_row::<MAX, MIN>(p, min, outside, s, x),
                }
            } else {
                extremes::<MAX, MIN>(p, min, x.canonical().order_key());
            }
        }
        if TRACK {
            self.touched_len = touched_len;
        }
    }
}

/// A row whose value the lane cannot hold (zero, subnormal, NaN, infinite or far below the chunk's largest):
/// listed for the exact sums' own add, out of the row loop, so that the loop's state stays in registers.
#[cold]
#[inline(never)]
fn outside_row<const MAX: bool, const MIN: bool>(
    p: &mut SlotParts,
    min: Option<&mut i64>,
    outside: &mut Vec<(u32, f64)>,
    s: u32,
    x: f64,
) {
    outside.push((s, x));
    p.outside += 1;
    extremes::<MAX, MIN>(p, min, x.canonical().order_key());
}

/// Folds a row's order key into its record's extremes, as `MAX` and `MIN` ask (`min`: where the least goes
/// when both are asked).
#[inline(always)]
fn extremes<const MAX: bool, const MIN: bool>(p: &mut SlotParts, min: Option<&mut i64>, key: i64) {
    if MAX {
        p.ext = p.ext.max(key);
    }
    if MIN {
        match min {
            Some(m) => *m = (*m).min(key),
            None => p.ext = p.ext.min(key),
        }
    }
}

/// What one fused pass lifts (see [`plan`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan<'a> {
    /// The float column it reads.
    pub values: &'a [f64],
    /// The parts its records keep.
    pub needs: Needs,
    /// Bit `i`: aggregate `i` takes part; the others lift on their own.
    members: u64,
    /// Every aggregate takes part.
    pub all: bool,
}

impl Plan<'_> {
    /// Whether aggregate `i` takes part.
    pub fn takes(&self, i: usize) -> bool {
        i < 64 && self.members >> i & 1 == 1
    }
}

/// The fused pass of a batch's aggregates: those that say what they need (`None`: it lifts on its own) and
/// read the first such float column without nulls, or count rows (`count(*)`, or a count of a column without
/// nulls: then every row counts) take part, if at least two do; the others lift on their own (`var`,
/// `first`, an aggregate of another column or of a column with nulls).
pub(crate) fn plan<'a>(
    aggs: impl Iterator<Item = (Option<Needs>, &'a InputValues)>,
) -> Option<Plan<'a>> {
    let no_nulls =
        |n: &Option<arrow_buffer::NullBuffer>| n.as_ref().is_none_or(|n| n.null_count() == 0);
    let mut column: Option<&[f64]> = None;
    let (mut needs, mut members, mut all) = (Needs::default(), 0u64, true);
    for (i, (need, input)) in aggs.enumerate() {
        let takes = match (need, input) {
            (None, _) => false,
            _ if i >= 64 => false,
            (Some(_), InputValues::Star) => true,
            (Some(_), InputValues::Validity(nulls)) => no_nulls(nulls),
            (Some(_), InputValues::Float(v, nulls)) if no_nulls(nulls) => match column {
                None => {
                    column = Some(v);
                    true
                }
                // One column: the same buffer (several aggregates of one column share it).
                Some(c) => std::ptr::eq(c, &v[..]),
            },
            _ => false,
        };
        match need {
            Some(need) if takes => {
                needs = needs.union(need);
                members |= 1 << i;
            }
            _ => all = false,
        }
    }
    (members.count_ones() >= 2).then_some(())?;
    Some(Plan {
        values: column?,
        needs,
        members,
        all,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_buffer::{NullBuffer, ScalarBuffer};
    use arrow_schema::DataType;
    use proptest::prelude::*;

    use super::*;
    use crate::aggregate::function::{AggSpec, ValueClass};
    use crate::aggregate::functions::lane::lane_values;
    use crate::aggregate::functions::{Accumulator, function};
    use crate::aggregate::state::{AggMeta, RowOrder};

    fn meta(func: &str, column: &str) -> Arc<AggMeta> {
        let spec = AggSpec::parse_all(&[(column.into(), vec![func.into()])]).unwrap();
        Arc::new(AggMeta {
            spec: spec[0].clone(),
            input_type: DataType::Float64,
            class: ValueClass::Float,
        })
    }

    const FUNCS: [(&str, &str); 7] = [
        ("count", "*"),
        ("count", "x"),
        ("sum", "x"),
        ("mean", "x"),
        ("min", "x"),
        ("max", "x"),
        ("max", "x"),
    ];

    proptest! {
        /// Any set of the functions the pass covers, lifted through the pass (twice, into the same states),
        /// leaves every state as lifting aggregate by aggregate does: the same finished bits and partial
        /// states.
        #[test]
        fn fused_pass_equals_lifting_one_by_one(
            rows in prop::collection::vec((lane_values(), 0u32..9), 0..400),
            picked in prop::collection::vec(0usize..FUNCS.len(), 2..6),
            store in 22usize..40,
        ) {
            // Counts alone read no column: the pass needs one.
            prop_assume!(picked.iter().any(|&f| f >= 2));
            let metas: Vec<_> = picked.iter().map(|&f| meta(FUNCS[f].0, FUNCS[f].1)).collect();
            let values = ScalarBuffer::from(rows.iter().map(|r| r.0).collect::<Vec<_>>());
            let slots: Vec<u32> = rows.iter().map(|r| if r.1 == 8 { SKIP } else { r.1 * 3 }).collect();
            let inputs: Vec<InputValues> = metas
                .iter()
                .map(|m| match m.spec.column {
                    None => InputValues::Star,
                    Some(_) if m.spec.func.name() == "count" => InputValues::Validity(None),
                    Some(_) => InputValues::Float(values.clone(), None),
                })
                .collect();
            let fresh = || -> Vec<Box<dyn Accumulator>> {
                metas
                    .iter()
                    .map(|m| {
                        let mut a = function(m.spec.func).accumulator(m);
                        a.extend_empty(store);
                        a
                    })
                    .collect()
            };
            let order = RowOrder { ts: &[], by: None, source: 0, seq0: 0 };
            let (mut one_by_one, mut fused) = (fresh(), fresh());
            let mut pass = FusedPass::default();
            for _ in 0..2 {
                for (a, input) in one_by_one.iter_mut().zip(&inputs) {
                    a.update(&slots, input, order);
                }
                let needs = fused.iter().map(|a| a.fused_needs());
                let plan = plan(needs.zip(&inputs)).expect("every function fuses");
                prop_assert!(plan.all);
                let ran = pass.run(&slots, plan.values, plan.needs, store, |p| {
                    fused.iter_mut().for_each(|a| a.absorb(p))
                });
                prop_assert!(ran);
            }
            let all: Vec<u32> = (0..store as u32).collect();
            for ((m, a), b) in metas.iter().zip(&one_by_one).zip(&fused) {
                let (x, y) = (a.finish(m, &all).unwrap(), b.finish(m, &all).unwrap());
                prop_assert_eq!(x.to_data(), y.to_data(), "{}", m.spec.func.name());
                let (x, y) = (a.export(m, &all).unwrap(), b.export(m, &all).unwrap());
                for (x, y) in x.iter().zip(&y) {
                    prop_assert_eq!(x.to_data(), y.to_data(), "{}", m.spec.func.name());
                }
            }
        }
    }

    fn float(v: &ScalarBuffer<f64>, nulls: Option<NullBuffer>) -> InputValues {
        InputValues::Float(v.clone(), nulls)
    }

    #[test]
    fn plan_takes_one_float_column_without_nulls() {
        let v = ScalarBuffer::from(vec![1.0, 2.0]);
        let w = ScalarBuffer::from(vec![1.0, 2.0]);
        let count = Some(Needs::default());
        let sum = Some(Needs {
            sum: true,
            ..Needs::default()
        });
        let max = Some(Needs {
            max: true,
            ..Needs::default()
        });
        let (star, fv, fw) = (InputValues::Star, float(&v, None), float(&w, None));
        let got = plan([(count, &star), (sum, &fv), (max, &fv)].into_iter()).unwrap();
        assert_eq!(
            got.needs,
            Needs {
                sum: true,
                max: true,
                min: false
            }
        );
        assert!(std::ptr::eq(got.values, &v[..]) && got.all);
        assert!((0..3).all(|i| got.takes(i)) && !got.takes(3));
        // One aggregate alone, or none of a column to read.
        assert!(plan([(sum, &fv)].into_iter()).is_none());
        let nulls = float(&v, Some(NullBuffer::from(vec![true, false])));
        assert!(plan([(sum, &nulls), (max, &nulls)].into_iter()).is_none());
        // Aggregates that lift on their own, read another column or one with nulls stay out of the pass.
        let some = |aggs: &[(Option<Needs>, &InputValues)]| {
            let p = plan(aggs.iter().copied()).unwrap();
            assert!(!p.all);
            (0..aggs.len()).map(|i| p.takes(i)).collect::<Vec<_>>()
        };
        assert_eq!(
            some(&[(sum, &fv), (None, &fv), (max, &fv)]),
            [true, false, true]
        );
        assert_eq!(
            some(&[(sum, &fv), (max, &fw), (count, &star)]),
            [true, false, true]
        );
        assert_eq!(
            some(&[(sum, &nulls), (sum, &fv), (max, &fv)]),
            [false, true, true]
        );
        assert!(plan([(sum, &fv), (max, &fw)].into_iter()).is_none());
        assert!(plan([(None, &fv), (max, &fv)].into_iter()).is_none());
        assert!(plan([(count, &star), (count, &star)].into_iter()).is_none());
    }
}
