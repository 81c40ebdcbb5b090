//! The aggregate functions behind one trait: a stateless [`AggregateFunction`] per function, a column-wise
//! [`Accumulator`] of per-slot partial states per aggregate, and [`function`], the one registry.
//!
//! # Adding an aggregate function
//!
//! 1. Add a variant to [`AggFunc`] and its row (name and aliases) to the names table of `function.rs`.
//! 2. Write one file here: a unit struct implementing [`AggregateFunction`] (output type, partial-state
//!    columns, the accumulator it makes, and whether it reads values, takes temporal columns or can be null)
//!    and an accumulator implementing [`Lift`] (the per-row update) and [`Accumulator`] (slot bookkeeping
//!    through `slot_vectors!`, the batch update through [`lift_rows`], combine, finish, and the
//!    partial-state columns of [`super::partial`]).
//! 3. Add one line to [`function`].
//!
//! Every combine must be exact and commutative (the determinism contract in `docs/architecture.md`): partial
//! states are merged in whatever order the engine's threads finish, and must give the same bits.
//!
//! # Speed
//!
//! The engines call [`Accumulator::update`] once per aggregate and batch: one dynamic dispatch per batch, then
//! a loop monomorphised for the input's type and null-ness ([`lift_rows`]). The per-row work is [`Lift::lift`],
//! a statically dispatched, inlined update on the typed state, so a fused pass can call the lifts of every
//! aggregate of a query in one loop over the rows (the test `lifts_fuse_into_one_pass` does so).

/// The slot bookkeeping of an accumulator whose state is one vector per part, all as long as the count `n`:
/// `reserve`, `extend_empty` and `clear`, from each part and its empty value. Written once here,
/// inside each `impl Accumulator`; `reset` stays with each accumulator (most reset the count only).
macro_rules! slot_vectors {
    ($($part:ident: $empty:expr),+ $(,)?) => {
        fn reserve(&mut self, n: usize) {
            $(self.$part.reserve(n);)+
        }

        fn extend_empty(&mut self, n: usize) {
            let len = self.n.len() + n;
            $(self.$part.resize(len, $empty);)+
        }

        fn clear(&mut self) {
            $(self.$part.clear();)+
        }
    };
}

mod columns;
mod count;
mod extreme;
mod fused;
mod lane;
mod moments;
mod pick;
mod sum;

use std::any::Any;
use std::fmt::Debug;

use arrow_array::ArrayRef;
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;

pub(crate) use columns::StateColumns;
pub(crate) use fused::{FusedPass, FusedSink, Needs, Plan as FusedPlan, plan as fused_plan};
#[cfg(test)]
pub(crate) use lane::lane_values;

use super::function::{AggFunc, AggSpec, ValueClass};
use super::state::{AggMeta, InputValues, RowOrder, SKIP};
use crate::error::{Error, Result};

/// What an aggregate function is, independent of any state: its output type, its partial-state columns, and
/// the accumulator that holds its states (as DataFusion's `AggregateUDFImpl`). To add a function, implement
/// this and [`Accumulator`] in one new file and add a line to [`function`] (the module docs give the steps).
pub(crate) trait AggregateFunction: Sync {
    /// The output column's type for an input of `input_type`, read as `class`.
    fn output_type(&self, input_type: &DataType, class: ValueClass) -> DataType;

    /// The partial-state columns after `n`, as `(part, type, nullable)`.
    fn state_fields(
        &self,
        input_type: &DataType,
        class: ValueClass,
    ) -> Vec<(&'static str, DataType, bool)>;

    /// The names of [`Self::state_fields`]' parts, known before the input's type is.
    fn state_parts(&self) -> &'static [&'static str];

    /// The input type and class of a partial input, from the type of its state column `part` (`col(part)`).
    fn partial_input(
        &self,
        spec: &AggSpec,
        col: &dyn Fn(&str) -> Result<DataType>,
    ) -> Result<(DataType, ValueClass)>;

    /// An empty accumulator for `meta`'s aggregate.
    fn accumulator(&self, meta: &AggMeta) -> Box<dyn Accumulator>;

    /// Whether the function reads its input's values (not only their validity, as `count` does).
    fn reads_values(&self) -> bool {
        true
    }

    /// Whether the function is defined on temporal columns (min, max, first, last and count are; a sum of
    /// timestamps is not).
    fn takes_temporal(&self) -> bool {
        true
    }

    /// Whether the output can be null (no value in the window); a count never is.
    fn output_nullable(&self) -> bool {
        true
    }
}

/// The partial states of one aggregate for every slot, one vector per part of the state, indexed by slot (as
/// DataFusion's `GroupsAccumulator`, with slots for groups).
pub(crate) trait Accumulator: Debug + Send + Sync + Any {
    /// Makes room for `n` more slots.
    fn reserve(&mut self, n: usize);
    /// Appends `n` empty slots.
    fn extend_empty(&mut self, n: usize);
    /// Empties slot `i` for reuse.
    fn reset(&mut self, i: usize);
    /// Empties the given slots for reuse: one dynamic call for many slots (see `SlotStore`).
    fn reset_many(&mut self, slots: &[u32]) {
        slots.iter().for_each(|&s| self.reset(s as usize));
    }
    /// Drops every slot, keeping the capacity.
    fn clear(&mut self);
    /// Lifts a batch's rows into their slots (`SKIP` rows are passed over); `input` is never a partial.
    fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>);
    /// Combines, for every `(dst, src)` pair, slot `src` of `other` (an accumulator of the same function)
    /// into slot `dst`.
    fn combine_pairs(&mut self, other: &dyn Accumulator, pairs: &[(u32, u32)]);
    /// Combines, for every `(dst, src)` pair, slot `src` into slot `dst` of this accumulator (`dst != src`):
    /// the sliding combiner builds its suffix aggregates inside one store (`super::sliding`).
    fn combine_within(&mut self, pairs: &[(u32, u32)]);
    /// Sets, for every `(dst, a, b)`, slot `dst` to slot `a` of `other` (an accumulator of the same function)
    /// combined with slot `b` of this one (`SKIP`: slot `a` alone), whatever `dst` held (`dst != b`). A
    /// sliding suffix is a pane combined with the next newer suffix (`super::sliding`): written whole, it
    /// spares emptying `dst` and copying the pane into it first. The default does exactly that: empties,
    /// copies, combines.
    fn set_combined(&mut self, other: &dyn Accumulator, triples: &[Triple]) {
        set_by_combining(self, other, triples)
    }
    /// Lowers the given slots, in order, into the output column.
    fn finish(&self, meta: &AggMeta, slots: &[u32]) -> Result<ArrayRef>;
    /// Lowers, for every `(a, b)` pair, the combination of slots `a` and `b` (`SKIP`: no slot) into the
    /// output column without storing it: a window of the sliding combiner is its front suffix and its back
    /// (`super::sliding`), and building that state only to lower it costs a store's worth of writes. `None`,
    /// the default, has the caller combine the pairs into a scratch state and finish that (see
    /// `AggState::finish_two`).
    fn finish_two(&self, _meta: &AggMeta, _pairs: &[(u32, u32)]) -> Option<Result<ArrayRef>> {
        None
    }
    /// The given slots, in order, as the partial-state columns (`n` first).
    fn export(&self, meta: &AggMeta, slots: &[u32]) -> Result<Vec<ArrayRef>>;
    /// Replaces the states by one slot per row of partial-state columns, `n` being the rows' counts.
    fn import(&mut self, n: Vec<i64>, cols: &StateColumns<'_>) -> Result<()>;
    fn as_any(&self) -> &dyn Any;
    /// What this accumulator reads from a fused pass over its float column instead of lifting rows itself
    /// (see [`fused`]); `None`, the default, lifts through [`Self::update`].
    fn fused_needs(&self) -> Option<Needs> {
        None
    }
    /// Takes a fused pass's records into the slots it touched (only called when [`Self::fused_needs`] said
    /// what to read).
    fn absorb(&mut self, _pass: &FusedPass) {
        unreachable!("absorb without fused_needs")
    }
}

/// `(dst, a, b)` of [`Accumulator::set_combined`]: slot `dst` becomes slot `a` of another accumulator combined
/// with slot `b` of this one.
pub(crate) type Triple = (u32, u32, u32);

/// [`Accumulator::set_combined`] by emptying the slots, copying `a` in and combining `b`: the default, and
/// what every accumulator's own version must equal.
fn set_by_combining<A: Accumulator + ?Sized>(
    acc: &mut A,
    other: &dyn Accumulator,
    triples: &[Triple],
) {
    let dst: Vec<u32> = triples.iter().map(|t| t.0).collect();
    acc.reset_many(&dst);
    let copies: Vec<(u32, u32)> = triples.iter().map(|&(d, a, _)| (d, a)).collect();
    acc.combine_pairs(other, &copies);
    let newer = triples.iter().filter(|t| t.2 != SKIP);
    acc.combine_within(&newer.map(|&(d, _, b)| (d, b)).collect::<Vec<_>>());
}

/// Calls `f(dst, a, b)` for every triple of [`Accumulator::set_combined`], `b` as `None` for `SKIP`; asserts
/// that no slot is set from itself.
#[inline(always)]
fn for_triples(triples: &[Triple], mut f: impl FnMut(usize, usize, Option<usize>)) {
    for &(d, a, b) in triples {
        assert_ne!(d, b, "a slot set from itself");
        f(d as usize, a as usize, (b != SKIP).then_some(b as usize));
    }
}

/// One function's update of one slot by one row: the per-row kernel. Static and inlined, so that a loop over
/// rows can combine the lifts of several aggregates without a dispatch per row.
pub(crate) trait Lift {
    /// What one row contributes: the value read from the input column (`()` when only presence counts).
    type Value: Copy;
    /// Lifts row `row` (value `x`, place in the total order given by `order`) into slot `slot`.
    fn lift(&mut self, slot: usize, x: Self::Value, row: usize, order: &RowOrder<'_>);
}

/// The function an aggregate computes: the one registry from [`AggFunc`] to its implementation.
pub(crate) fn function(func: AggFunc) -> &'static dyn AggregateFunction {
    match func {
        AggFunc::CountStar | AggFunc::Count => &count::COUNT,
        AggFunc::Sum => &sum::SUM,
        AggFunc::Mean => &sum::MEAN,
        AggFunc::Var => &moments::VAR,
        AggFunc::Std => &moments::STD,
        AggFunc::Min => &extreme::MIN,
        AggFunc::Max => &extreme::MAX,
        AggFunc::First => &pick::FIRST,
        AggFunc::Last => &pick::LAST,
    }
}

/// Classifies a column type for a function, or says why the function cannot take it. Which functions read
/// only validity or refuse temporal columns is the function's own say (the [`AggregateFunction`] methods).
pub(crate) fn value_class(dt: &DataType, func: AggFunc, column: &str) -> Result<ValueClass> {
    use DataType::*;
    let imp = function(func);
    let temporal = matches!(
        dt,
        Timestamp(..) | Date32 | Date64 | Time32(_) | Time64(_) | Duration(_)
    );
    let class = match dt {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => ValueClass::Int,
        Float32 | Float64 => ValueClass::Float,
        _ if temporal => ValueClass::Int,
        _ if !imp.reads_values() => ValueClass::Int,
        _ => {
            return Err(Error::column_type(
                column,
                format!(
                    "{} needs an integer, float or temporal column, got {dt}",
                    func.name()
                ),
            ));
        }
    };
    if temporal && !imp.takes_temporal() {
        return Err(Error::column_type(
            column,
            format!(
                "{} is not defined for {dt} (use min, max, first, last or count)",
                func.name()
            ),
        ));
    }
    Ok(class)
}

/// Lifts every row with a slot and a non-null value; `value(i)` reads row `i`. The null check is decided once
/// per batch, so the row loop is monomorphised for the state, the value reader and the null-ness.
#[inline]
pub(crate) fn lift_rows<L: Lift>(
    state: &mut L,
    slots: &[u32],
    nulls: Option<&NullBuffer>,
    order: &RowOrder<'_>,
    value: impl Fn(usize) -> L::Value,
) {
    each_valid(slots, nulls, |i, s| state.lift(s, value(i), i, order))
}

/// Calls `f(row, slot)` for every row with a slot and a non-null value.
#[inline]
fn each_valid(slots: &[u32], nulls: Option<&NullBuffer>, mut f: impl FnMut(usize, usize)) {
    match nulls {
        Some(nulls) if nulls.null_count() > 0 => {
            for (i, &s) in slots.iter().enumerate() {
                if s != SKIP && nulls.is_valid(i) {
                    f(i, s as usize);
                }
            }
        }
        _ => {
            for (i, &s) in slots.iter().enumerate() {
                if s != SKIP {
                    f(i, s as usize);
                }
            }
        }
    }
}

/// Calls `f(dst, src)` for every pair.
#[inline(always)]
fn for_pairs(pairs: &[(u32, u32)], mut f: impl FnMut(usize, usize)) {
    for &(d, s) in pairs {
        f(d as usize, s as usize);
    }
}

/// Slot `d` of `v` mutably and slot `s` shared (`d != s`): one state combined into another of the same vector.
#[inline(always)]
fn pair_mut<T>(v: &mut [T], d: usize, s: usize) -> (&mut T, &T) {
    assert_ne!(d, s, "a slot combined into itself");
    if d < s {
        let (lo, hi) = v.split_at_mut(s);
        (&mut lo[d], &hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(d);
        (&mut hi[0], &lo[s])
    }
}

/// `other` as the accumulator type `T` of the function combining it.
fn same<T: 'static>(other: &dyn Accumulator) -> &T {
    other
        .as_any()
        .downcast_ref()
        .expect("combine of states of different aggregates")
}

/// The validity of the given slots' outputs: valid where the state holds at least `min` values.
fn valid(slots: &[u32], n: &[i64], min: i64) -> Option<NullBuffer> {
    valid_counts(slots.iter().map(|&s| n[s as usize]), min)
}

/// The validity of the outputs of [`Accumulator::finish_two`]'s pairs, valid where the pair holds at least
/// `min` values: `all_valid` is what the caller's pass over the pairs found, so the counts are scanned again
/// only when some window has too few.
fn pairs_validity(
    n: &[i64],
    pairs: &[(u32, u32)],
    all_valid: bool,
    min: i64,
) -> Option<NullBuffer> {
    if all_valid {
        return None;
    }
    valid_counts(pairs.iter().map(|&p| pair_count(n, p)), min)
}

/// The validity of outputs of the given counts: valid where the count is at least `min`.
fn valid_counts(counts: impl Iterator<Item = i64> + Clone, min: i64) -> Option<NullBuffer> {
    // Most windows hold values for every aggregate: a plain scan settles that without building a bitmap.
    if counts.clone().all(|c| c >= min) {
        return None;
    }
    crate::arrow_io::null_buffer_from(counts.map(|c| c >= min))
}

/// Slot `s`'s entry of a per-slot vector, or `empty` for `SKIP` (the missing half of a pair of
/// [`Accumulator::finish_two`]).
#[inline(always)]
fn at_or<T: Copy>(v: &[T], s: u32, empty: T) -> T {
    if s == SKIP { empty } else { v[s as usize] }
}

/// The count of the combination of a pair of slots of [`Accumulator::finish_two`].
#[inline(always)]
fn pair_count(n: &[i64], (a, b): (u32, u32)) -> i64 {
    at_or(n, a, 0) + at_or(n, b, 0)
}

/// The values an accumulator can hold: `i64` (integers and temporal types) and `f64`.
pub(crate) trait Scalar: Copy + Default + Debug + Send + Sync + 'static {
    /// Whether this is `f64` (the values a fused pass reads, see [`fused`]).
    const FLOAT: bool;
    /// The values and nulls of an input read as this type.
    fn input(input: &InputValues) -> (&[Self], Option<&NullBuffer>);
    /// The value a state keeps for `self` (every NaN as the one positive NaN).
    fn canonical(self) -> Self;
    /// The value as an integer that orders as `min` and `max` order values (`<` for integers, `total_cmp` for
    /// canonical floats): extremes keep these keys, so that their lifts and combines are an integer `min` or
    /// `max`, compiled without a branch (with random values, whether a row beats the slot's value is a coin
    /// toss a branch predictor loses).
    fn order_key(self) -> i64;
    /// The value whose [`Self::order_key`] is `key`.
    fn from_order_key(key: i64) -> Self;
    /// An output (or partial-state) column of type `target` from the values.
    fn column(values: Vec<Self>, nulls: Option<NullBuffer>, target: &DataType) -> Result<ArrayRef>;
    /// The values of a partial-state column.
    fn read(array: &ArrayRef, column: &str) -> Result<Vec<Self>>;
}

impl Scalar for i64 {
    const FLOAT: bool = false;
    #[inline]
    fn input(input: &InputValues) -> (&[Self], Option<&NullBuffer>) {
        match input {
            InputValues::Int(v, nulls) => (v, nulls.as_ref()),
            other => unreachable!("input {other:?} does not fit an integer state"),
        }
    }
    #[inline]
    fn canonical(self) -> Self {
        self
    }
    #[inline(always)]
    fn order_key(self) -> i64 {
        self
    }
    #[inline(always)]
    fn from_order_key(key: i64) -> Self {
        key
    }
    fn column(values: Vec<Self>, nulls: Option<NullBuffer>, target: &DataType) -> Result<ArrayRef> {
        let array = arrow_array::Int64Array::new(values.into(), nulls);
        crate::arrow_io::int_column_as(std::sync::Arc::new(array), target)
    }
    fn read(array: &ArrayRef, column: &str) -> Result<Vec<Self>> {
        Ok(crate::arrow_io::as_i64(array, column)?.to_vec())
    }
}

/// Flips the magnitude bits of a negative value: turns a double's bits into a key that orders as
/// `f64::total_cmp` does, and back (the map is its own inverse, since it keeps the sign bit).
#[inline(always)]
fn flip_negative(bits: i64) -> i64 {
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

impl Scalar for f64 {
    const FLOAT: bool = true;
    #[inline]
    fn input(input: &InputValues) -> (&[Self], Option<&NullBuffer>) {
        match input {
            InputValues::Float(v, nulls) => (v, nulls.as_ref()),
            other => unreachable!("input {other:?} does not fit a float state"),
        }
    }
    /// NaN payloads and signs differ; every NaN is kept as the one positive NaN, which `total_cmp` puts above
    /// +inf (Spark's rule: NaN is larger than any other value).
    #[inline]
    fn canonical(self) -> Self {
        if self.is_nan() { f64::NAN } else { self }
    }
    /// The key `total_cmp` compares: the bits, with the magnitude bits flipped for negative values.
    #[inline(always)]
    fn order_key(self) -> i64 {
        flip_negative(self.to_bits() as i64)
    }
    #[inline(always)]
    fn from_order_key(key: i64) -> Self {
        f64::from_bits(flip_negative(key) as u64)
    }
    fn column(values: Vec<Self>, nulls: Option<NullBuffer>, target: &DataType) -> Result<ArrayRef> {
        let array: ArrayRef =
            std::sync::Arc::new(arrow_array::Float64Array::new(values.into(), nulls));
        if *target == DataType::Float64 {
            Ok(array)
        } else {
            crate::arrow_io::float_column_as(array, target)
        }
    }
    fn read(array: &ArrayRef, _column: &str) -> Result<Vec<Self>> {
        Ok(crate::arrow_io::as_f64(array)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type};
    use arrow_buffer::{NullBuffer, ScalarBuffer};
    use arrow_schema::DataType;

    use super::*;
    use crate::aggregate::function::AggSpec;

    /// A toy function as a new one would start: the per-row kernel of "sum of squares" of integers.
    #[derive(Default)]
    struct SumOfSquares {
        q: Vec<i128>,
    }

    impl Lift for SumOfSquares {
        type Value = i64;

        #[inline(always)]
        fn lift(&mut self, slot: usize, x: i64, _: usize, _: &RowOrder<'_>) {
            self.q[slot] += x as i128 * x as i128;
        }
    }

    fn meta(func: &str, column: &str, class: ValueClass) -> Arc<AggMeta> {
        let spec = AggSpec::parse_all(&[(column.into(), vec![func.into()])]).unwrap();
        let input_type = match class {
            ValueClass::Int => DataType::Int64,
            ValueClass::Float => DataType::Float64,
        };
        Arc::new(AggMeta {
            spec: spec[0].clone(),
            input_type,
            class,
        })
    }

    fn accumulator(meta: &AggMeta, slots: usize) -> Box<dyn Accumulator> {
        let mut acc = function(meta.spec.func).accumulator(meta);
        acc.extend_empty(slots);
        acc
    }

    /// The lifts of several functions combine in one loop over the rows (the fused pass) and give what one
    /// batch update per function gives.
    #[test]
    fn lifts_fuse_into_one_pass() {
        let (count, sum, max, last) = (
            meta("count", "*", ValueClass::Int),
            meta("sum", "x", ValueClass::Float),
            meta("max", "x", ValueClass::Float),
            meta("last", "x", ValueClass::Float),
        );
        let values: Vec<f64> = vec![1.5, f64::NAN, -2.0, 8.25, 3.0, 0.5];
        let nulls = NullBuffer::from(vec![true, true, false, true, true, true]);
        let slots: Vec<u32> = vec![0, 1, 0, SKIP, 1, 0];
        let ts: Vec<i64> = vec![5, 4, 3, 2, 1, 0];
        let order = RowOrder {
            ts: &ts,
            by: None,
            source: 0,
            seq0: 0,
        };
        let input = InputValues::Float(ScalarBuffer::from(values.clone()), Some(nulls.clone()));

        let separate: Vec<ArrayRef> = [&count, &sum, &max, &last]
            .iter()
            .map(|m| {
                let mut acc = accumulator(m, 2);
                let input = if m.spec.column.is_none() {
                    &InputValues::Star
                } else {
                    &input
                };
                acc.update(&slots, input, order);
                acc.finish(m, &[0, 1]).unwrap()
            })
            .collect();

        let mut c = count::Count::default();
        let mut s = sum::SumFloat::default();
        let mut x = extreme::Extreme::<f64, true>::default();
        let mut l = pick::Picked::<f64, true>::default();
        let mut q = SumOfSquares { q: vec![0; 2] };
        for acc in [&mut c as &mut dyn Accumulator, &mut s, &mut x, &mut l] {
            acc.extend_empty(2);
        }
        for (i, &slot) in slots.iter().enumerate() {
            if slot == SKIP {
                continue;
            }
            let slot = slot as usize;
            c.lift(slot, (), i, &order);
            if nulls.is_valid(i) {
                s.lift(slot, values[i], i, &order);
                x.lift(slot, values[i], i, &order);
                l.lift(slot, values[i], i, &order);
                q.lift(slot, i as i64, i, &order);
            }
        }
        let fused = [
            c.finish(&count, &[0, 1]).unwrap(),
            s.finish(&sum, &[0, 1]).unwrap(),
            x.finish(&max, &[0, 1]).unwrap(),
            l.finish(&last, &[0, 1]).unwrap(),
        ];
        assert_eq!(separate, fused);
        assert_eq!(separate[0].as_primitive::<Int64Type>().values(), &[3, 2]); // count(*) counts null values too
        let sum_out = separate[1].as_primitive::<Float64Type>();
        assert_eq!(sum_out.value(0), 2.0);
        assert!(sum_out.value(1).is_nan());
        // max puts the NaN above every number; last is the row with the largest time (row 0 for slot 0).
        assert!(separate[2].as_primitive::<Float64Type>().value(1).is_nan());
        assert_eq!(separate[3].as_primitive::<Float64Type>().value(0), 1.5);
        assert_eq!(q.q, [25, 17]);
    }

    /// Every function's partial-state columns are the ones its descriptor announces, and read back into the
    /// same states.
    #[test]
    fn export_matches_state_fields_and_round_trips() {
        for func in [
            "count", "sum", "mean", "var", "std", "min", "max", "first", "last",
        ] {
            for class in [ValueClass::Int, ValueClass::Float] {
                let m = meta(func, "x", class);
                let mut acc = accumulator(&m, 2);
                let input = match class {
                    ValueClass::Int => {
                        InputValues::Int(ScalarBuffer::from(vec![3i64, -7, 11]), None)
                    }
                    ValueClass::Float => {
                        InputValues::Float(ScalarBuffer::from(vec![0.1, 1e300, -2.5]), None)
                    }
                };
                let order = RowOrder {
                    ts: &[1, 2, 3],
                    by: None,
                    source: 0,
                    seq0: 0,
                };
                acc.update(&[0, 1, 0], &input, order);
                let columns = acc.export(&m, &[0, 1]).unwrap();
                let f = function(m.spec.func);
                let fields = f.state_fields(&m.input_type, class);
                assert_eq!(columns.len(), 1 + fields.len(), "{func}");
                assert_eq!(f.state_parts().len(), fields.len(), "{func}");
                for (col, (_, dt, _)) in columns[1..].iter().zip(&fields) {
                    assert_eq!(col.data_type(), dt, "{func}");
                }
                let partial_fields = crate::aggregate::partial::fields(&m);
                let schema = Arc::new(arrow_schema::Schema::new(partial_fields));
                let batch = arrow_array::RecordBatch::try_new(schema, columns).unwrap();
                let back = crate::aggregate::state::AggState::import(&m, &batch).unwrap();
                let (a, b) = (
                    back.finish(&[0, 1]).unwrap(),
                    acc.finish(&m, &[0, 1]).unwrap(),
                );
                assert_eq!(a.to_data(), b.to_data(), "{func}");
            }
        }
    }

    proptest::proptest! {
        /// Lowering a pair of slots directly gives the bits of combining them into a scratch state and
        /// finishing that, for every function, integer and float inputs with nulls, and either half missing.
        #[test]
        fn finish_two_equals_combining_first(
            rows in proptest::collection::vec(
                (crate::aggregate::functions::lane::lane_values(), -9i64..9, 0u32..7, proptest::bool::weighted(0.9)),
                0..120,
            ),
            pairs in proptest::collection::vec((0u32..7, 0u32..7), 0..20),
            func in 0usize..AggFunc::NAMES.len(),
            float in proptest::bool::ANY,
            huge in proptest::bool::ANY,
        ) {
            let class = if float { ValueClass::Float } else { ValueClass::Int };
            let m = meta(AggFunc::NAMES[func], "x", class);
            let mut state = crate::aggregate::state::AggState::new(m);
            state.extend_empty(6);
            // Slot 6 stands for a missing half.
            let slots: Vec<u32> = rows.iter().map(|r| if r.2 == 6 { SKIP } else { r.2 }).collect();
            let nulls = Some(NullBuffer::from(rows.iter().map(|r| r.3).collect::<Vec<_>>()));
            // Integers near the ends of i64 let sums overflow the output in some windows and not others.
            let scale = if huge { i64::MAX / 9 } else { 1 };
            let input = match class {
                ValueClass::Float => InputValues::Float(rows.iter().map(|r| r.0).collect(), nulls),
                ValueClass::Int => InputValues::Int(rows.iter().map(|r| r.1 * scale).collect(), nulls),
            };
            let ts: Vec<i64> = (0..rows.len() as i64).map(|i| i * 7 % 5).collect();
            let order = RowOrder { ts: &ts, by: None, source: 0, seq0: 0 };
            state.update(&slots, &input, order);
            let pairs: Vec<(u32, u32)> = pairs
                .iter()
                .map(|&(a, b)| (if a == 6 { SKIP } else { a }, if b == 6 { SKIP } else { b }))
                .collect();
            match (state.finish_two(&pairs), state.finish_two_combined(&pairs)) {
                (Ok(direct), Ok(combined)) => proptest::prop_assert_eq!(direct.to_data(), combined.to_data()),
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.message(), b.message()),
                (a, b) => proptest::prop_assert!(false, "{a:?} against {b:?}"),
            }
        }

        /// Setting slots to a slot of another accumulator combined with one of their own (or alone) leaves
        /// the states that emptying them, copying in and combining leaves, whatever they held before (here:
        /// states of other rows): every function, integer and float inputs with nulls.
        #[test]
        fn set_combined_equals_emptying_and_combining(
            rows in proptest::collection::vec(
                (crate::aggregate::functions::lane::lane_values(), -9i64..9, 0u32..12, proptest::bool::weighted(0.9)),
                0..160,
            ),
            picks in proptest::collection::vec((0u32..6, 0u32..7), 0..6),
            func in 0usize..AggFunc::NAMES.len(),
            float in proptest::bool::ANY,
        ) {
            let class = if float { ValueClass::Float } else { ValueClass::Int };
            let m = meta(AggFunc::NAMES[func], "x", class);
            let nulls = Some(NullBuffer::from(rows.iter().map(|r| r.3).collect::<Vec<_>>()));
            let input = match class {
                ValueClass::Float => InputValues::Float(rows.iter().map(|r| r.0).collect(), nulls),
                ValueClass::Int => InputValues::Int(rows.iter().map(|r| r.1).collect(), nulls),
            };
            let ts: Vec<i64> = (0..rows.len() as i64).map(|i| i * 7 % 5).collect();
            let order = RowOrder { ts: &ts, by: None, source: 0, seq0: 0 };
            // Slots 0..6 are sources, 6..12 the slots set; every slot holds rows first.
            let lifted = |shift: u32| {
                let mut acc = accumulator(&m, 12);
                let slots: Vec<u32> = rows.iter().map(|r| (r.2 + shift) % 12).collect();
                acc.update(&slots, &input, order);
                acc
            };
            let other = lifted(5);
            let (mut set, mut reference) = (lifted(0), lifted(0));
            let triples: Vec<Triple> = (picks.iter().enumerate())
                .map(|(k, &(a, b))| (6 + k as u32, a, if b == 6 { SKIP } else { b }))
                .collect();
            set.set_combined(other.as_ref(), &triples);
            set_by_combining(reference.as_mut(), other.as_ref(), &triples);
            let all: Vec<u32> = (0..12).collect();
            for (x, y) in set.export(&m, &all).unwrap().iter().zip(&reference.export(&m, &all).unwrap()) {
                proptest::prop_assert_eq!(x.to_data(), y.to_data());
            }
            match (set.finish(&m, &all), reference.finish(&m, &all)) {
                (Ok(x), Ok(y)) => proptest::prop_assert_eq!(x.to_data(), y.to_data()),
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.message(), b.message()),
                (a, b) => proptest::prop_assert!(false, "{a:?} against {b:?}"),
            }
        }
    }
}
