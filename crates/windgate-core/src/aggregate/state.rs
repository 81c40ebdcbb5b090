//! Columnar partial states: one vector per aggregate, indexed by slot. A slot is one (key, pane) pair in the
//! pane store, or one (key, window) pair while a window is being lowered.
//!
//! Every combine here is exact and commutative (integer and [`ExactSum`] sums, min/max under the total order
//! of `f64::total_cmp`, first/last under the row order `(ts, source, seq)`), so partial states can be merged
//! in any order and give the same bits: the determinism contract rests on that.

use std::sync::Arc;

use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{ArrayRef, Int64Array, PrimitiveArray};
use arrow_buffer::{NullBuffer, ScalarBuffer};
use arrow_schema::DataType;

use super::function::{AggFunc, AggSpec, ValueClass};
use crate::arrow_io::{int_column_as, null_buffer_from};
use crate::error::{Error, ErrorKind, Result};
use crate::exact_sum::{ExactSum, two_product};

/// Slot value that means "skip this row" (late rows, rows with a null time under `null_time="drop"`).
pub const SKIP: u32 = u32::MAX;

/// Position of a row in the total order `(ts, by, source, seq)`. `by` is the `order_by` column's value (0
/// without one): it decides ties of equal times before the source and arrival do, so an order-sensitive
/// function gives the same result however the rows were split into sources (brief 000 edge case 23).
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
    fn key(&self, i: usize) -> OrderKey {
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
        match (self.spec.func, self.class) {
            (AggFunc::CountStar | AggFunc::Count, _) => DataType::Int64,
            (AggFunc::Sum, ValueClass::Int) => DataType::Int64,
            (AggFunc::Sum | AggFunc::Mean | AggFunc::Var | AggFunc::Std, _) => DataType::Float64,
            (AggFunc::Min | AggFunc::Max | AggFunc::First | AggFunc::Last, _) => {
                self.input_type.clone()
            }
        }
    }

    fn column(&self) -> &str {
        self.spec.column.as_deref().unwrap_or("*")
    }
}

#[derive(Debug, Clone)]
pub(super) enum Kind {
    Count(Vec<i64>),
    SumInt {
        sum: Vec<i128>,
        n: Vec<i64>,
    },
    SumFloat {
        sum: Vec<ExactSum>,
        n: Vec<i64>,
    },
    Moments {
        s: Vec<ExactSum>,
        q: Vec<ExactSum>,
        n: Vec<i64>,
        /// Squares of values of magnitude >= 2^BIG_EXP, scaled by 2^-2*SCALE (their squares would overflow
        /// f64); allocated only for the slots that saw one.
        big: Vec<Option<Box<ExactSum>>>,
    },
    ExtremeInt {
        v: Vec<i64>,
        n: Vec<i64>,
    },
    ExtremeFloat {
        v: Vec<f64>,
        n: Vec<i64>,
    },
    PickInt(Picked<i64>),
    PickFloat(Picked<f64>),
}

/// `first`/`last` states: the value of the row that comes first (or last) in the order `(ts, source, seq)`.
#[derive(Debug, Clone, Default)]
pub(super) struct Picked<T> {
    pub(super) v: Vec<T>,
    pub(super) at: Vec<OrderKey>,
    pub(super) n: Vec<i64>,
}

impl<T: Copy + Default> Picked<T> {
    fn push_empty(&mut self) {
        self.v.push(T::default());
        self.at.push(OrderKey::default());
        self.n.push(0);
    }

    fn update(
        &mut self,
        slots: &[u32],
        values: &[T],
        nulls: Option<&NullBuffer>,
        order: RowOrder<'_>,
        last: bool,
    ) {
        each_valid(slots, nulls, |i, s| {
            let k = order.key(i);
            if self.n[s] == 0 || (k > self.at[s]) == last {
                (self.v[s], self.at[s]) = (values[i], k);
            }
            self.n[s] += 1;
        })
    }

    fn combine_pairs(&mut self, other: &Picked<T>, pairs: &[(u32, u32)], last: bool) {
        for_pairs(pairs, |d, s| {
            if other.n[s] > 0 {
                if self.n[d] == 0 || (other.at[s] > self.at[d]) == last {
                    (self.v[d], self.at[d]) = (other.v[s], other.at[s]);
                }
                self.n[d] += other.n[s];
            }
        })
    }
}

/// The partial states of one aggregate for every slot.
#[derive(Debug, Clone)]
pub struct AggState {
    meta: Arc<AggMeta>,
    pub(super) kind: Kind,
}

#[inline(always)]
fn for_pairs(pairs: &[(u32, u32)], mut f: impl FnMut(usize, usize)) {
    for &(d, s) in pairs {
        f(d as usize, s as usize);
    }
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

impl AggState {
    pub fn new(meta: Arc<AggMeta>) -> Self {
        let kind = match (meta.spec.func, meta.class) {
            (AggFunc::CountStar | AggFunc::Count, _) => Kind::Count(vec![]),
            (AggFunc::Sum | AggFunc::Mean, ValueClass::Int) => Kind::SumInt {
                sum: vec![],
                n: vec![],
            },
            (AggFunc::Sum | AggFunc::Mean, ValueClass::Float) => Kind::SumFloat {
                sum: vec![],
                n: vec![],
            },
            (AggFunc::Var | AggFunc::Std, _) => Kind::Moments {
                s: vec![],
                q: vec![],
                n: vec![],
                big: vec![],
            },
            (AggFunc::Min | AggFunc::Max, ValueClass::Int) => Kind::ExtremeInt {
                v: vec![],
                n: vec![],
            },
            (AggFunc::Min | AggFunc::Max, ValueClass::Float) => Kind::ExtremeFloat {
                v: vec![],
                n: vec![],
            },
            (AggFunc::First | AggFunc::Last, ValueClass::Int) => Kind::PickInt(Picked::default()),
            (AggFunc::First | AggFunc::Last, ValueClass::Float) => {
                Kind::PickFloat(Picked::default())
            }
        };
        Self { meta, kind }
    }

    pub fn meta(&self) -> &Arc<AggMeta> {
        &self.meta
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Count(c) => c.len(),
            Kind::SumInt { n, .. }
            | Kind::SumFloat { n, .. }
            | Kind::Moments { n, .. }
            | Kind::ExtremeInt { n, .. }
            | Kind::ExtremeFloat { n, .. }
            | Kind::PickInt(Picked { n, .. })
            | Kind::PickFloat(Picked { n, .. }) => n.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes room for `n` more slots (stores whose size is known up front skip the regrowth).
    pub fn reserve(&mut self, n: usize) {
        match &mut self.kind {
            Kind::Count(c) => c.reserve(n),
            Kind::SumInt { sum, n: c } => (sum.reserve(n), c.reserve(n)).1,
            Kind::SumFloat { sum, n: c } => (sum.reserve(n), c.reserve(n)).1,
            Kind::Moments { s, q, n: c, big } => {
                (s.reserve(n), q.reserve(n), c.reserve(n), big.reserve(n)).2
            }
            Kind::ExtremeInt { v, n: c } => (v.reserve(n), c.reserve(n)).1,
            Kind::ExtremeFloat { v, n: c } => (v.reserve(n), c.reserve(n)).1,
            Kind::PickInt(p) => (p.v.reserve(n), p.at.reserve(n), p.n.reserve(n)).2,
            Kind::PickFloat(p) => (p.v.reserve(n), p.at.reserve(n), p.n.reserve(n)).2,
        }
    }

    /// Appends `n` empty slots at once.
    pub fn extend_empty(&mut self, n: usize) {
        let len = self.len() + n;
        match &mut self.kind {
            Kind::Count(c) => c.resize(len, 0),
            Kind::SumInt { sum, n } => (sum.resize(len, 0), n.resize(len, 0)).1,
            Kind::SumFloat { sum, n } => (sum.resize(len, ExactSum::new()), n.resize(len, 0)).1,
            Kind::Moments { s, q, n, big } => {
                (
                    s.resize(len, ExactSum::new()),
                    q.resize(len, ExactSum::new()),
                    n.resize(len, 0),
                    big.resize(len, None),
                )
                    .2
            }
            Kind::ExtremeInt { v, n } => (v.resize(len, 0), n.resize(len, 0)).1,
            Kind::ExtremeFloat { v, n } => (v.resize(len, 0.0), n.resize(len, 0)).1,
            Kind::PickInt(p) => {
                (
                    p.v.resize(len, 0),
                    p.at.resize(len, OrderKey::default()),
                    p.n.resize(len, 0),
                )
                    .2
            }
            Kind::PickFloat(p) => {
                (
                    p.v.resize(len, 0.0),
                    p.at.resize(len, OrderKey::default()),
                    p.n.resize(len, 0),
                )
                    .2
            }
        }
    }

    /// Appends an empty slot.
    pub fn push_empty(&mut self) {
        match &mut self.kind {
            Kind::Count(c) => c.push(0),
            Kind::SumInt { sum, n } => (sum.push(0), n.push(0)).1,
            Kind::SumFloat { sum, n } => (sum.push(ExactSum::new()), n.push(0)).1,
            Kind::Moments { s, q, n, big } => {
                (
                    s.push(ExactSum::new()),
                    q.push(ExactSum::new()),
                    n.push(0),
                    big.push(None),
                )
                    .2
            }
            Kind::ExtremeInt { v, n } => (v.push(0), n.push(0)).1,
            Kind::ExtremeFloat { v, n } => (v.push(0.0), n.push(0)).1,
            Kind::PickInt(p) => p.push_empty(),
            Kind::PickFloat(p) => p.push_empty(),
        }
    }

    /// Empties slot `i` for reuse.
    pub fn reset(&mut self, i: usize) {
        match &mut self.kind {
            Kind::Count(c) => c[i] = 0,
            Kind::SumInt { sum, n } => (sum[i], n[i]) = (0, 0),
            Kind::SumFloat { sum, n } => (sum[i], n[i]) = (ExactSum::new(), 0),
            Kind::Moments { s, q, n, big } => {
                (s[i], q[i], n[i], big[i]) = (ExactSum::new(), ExactSum::new(), 0, None)
            }
            Kind::ExtremeInt { n, .. } | Kind::ExtremeFloat { n, .. } => n[i] = 0,
            Kind::PickInt(Picked { n, .. }) | Kind::PickFloat(Picked { n, .. }) => n[i] = 0,
        }
    }

    /// Drops every slot, keeping the capacity (scratch stores are refilled at every emission).
    pub fn clear(&mut self) {
        match &mut self.kind {
            Kind::Count(c) => c.clear(),
            Kind::SumInt { sum, n } => (sum.clear(), n.clear()).1,
            Kind::SumFloat { sum, n } => (sum.clear(), n.clear()).1,
            Kind::Moments { s, q, n, big } => (s.clear(), q.clear(), n.clear(), big.clear()).2,
            Kind::ExtremeInt { v, n } => (v.clear(), n.clear()).1,
            Kind::ExtremeFloat { v, n } => (v.clear(), n.clear()).1,
            Kind::PickInt(p) => (p.v.clear(), p.at.clear(), p.n.clear()).2,
            Kind::PickFloat(p) => (p.v.clear(), p.at.clear(), p.n.clear()).2,
        }
    }

    /// Lifts a batch's rows into their slots (`SKIP` rows are passed over).
    pub fn update(&mut self, slots: &[u32], input: &InputValues, order: RowOrder<'_>) {
        let func = self.meta.spec.func;
        if let InputValues::Partial(rows, at) = input {
            let pairs: Vec<(u32, u32)> = (slots.iter().enumerate())
                .filter(|&(_, &s)| s != SKIP)
                .map(|(i, &s)| (s, (at + i) as u32))
                .collect();
            return self.combine_pairs(rows, &pairs);
        }
        match (&mut self.kind, input) {
            (Kind::Count(c), InputValues::Star) => each_valid(slots, None, |_, s| c[s] += 1),
            (Kind::Count(c), InputValues::Validity(nulls)) => {
                each_valid(slots, nulls.as_ref(), |_, s| c[s] += 1)
            }
            (Kind::Count(c), InputValues::Int(_, nulls)) => {
                each_valid(slots, nulls.as_ref(), |_, s| c[s] += 1)
            }
            (Kind::Count(c), InputValues::Float(_, nulls)) => {
                each_valid(slots, nulls.as_ref(), |_, s| c[s] += 1)
            }
            (Kind::SumInt { sum, n }, InputValues::Int(v, nulls)) => {
                each_valid(slots, nulls.as_ref(), |i, s| {
                    sum[s] += v[i] as i128;
                    n[s] += 1;
                })
            }
            (Kind::SumFloat { sum, n }, InputValues::Float(v, nulls)) => {
                each_valid(slots, nulls.as_ref(), |i, s| {
                    sum[s].add(v[i]);
                    n[s] += 1;
                })
            }
            (Kind::Moments { s: sx, q, n, big }, input) => {
                let (ints, floats, nulls) = match input {
                    InputValues::Int(v, nl) => (Some(v), None, nl.as_ref()),
                    InputValues::Float(v, nl) => (None, Some(v), nl.as_ref()),
                    _ => unreachable!("moments read a numeric column"),
                };
                each_valid(slots, nulls, |i, s| {
                    let x = match (ints, floats) {
                        (Some(v), _) => v[i] as f64,
                        (_, Some(v)) => v[i],
                        _ => unreachable!(),
                    };
                    sx[s].add(x);
                    if x.abs() < BIG {
                        let (hi, lo) = two_product(x, x);
                        q[s].add(hi);
                        q[s].add(lo);
                    } else {
                        add_big_square(&mut big[s], x);
                    }
                    n[s] += 1;
                })
            }
            (Kind::ExtremeInt { v: st, n }, InputValues::Int(v, nulls)) => {
                let max = func == AggFunc::Max;
                each_valid(slots, nulls.as_ref(), |i, s| {
                    let x = v[i];
                    if n[s] == 0 || (max && x > st[s]) || (!max && x < st[s]) {
                        st[s] = x;
                    }
                    n[s] += 1;
                })
            }
            (Kind::ExtremeFloat { v: st, n }, InputValues::Float(v, nulls)) => {
                let max = func == AggFunc::Max;
                each_valid(slots, nulls.as_ref(), |i, s| {
                    let x = canonical_nan(v[i]);
                    if n[s] == 0 || better_float(x, st[s], max) {
                        st[s] = x;
                    }
                    n[s] += 1;
                })
            }
            (Kind::PickInt(p), InputValues::Int(v, nulls)) => {
                p.update(slots, v, nulls.as_ref(), order, func == AggFunc::Last)
            }
            (Kind::PickFloat(p), InputValues::Float(v, nulls)) => {
                p.update(slots, v, nulls.as_ref(), order, func == AggFunc::Last)
            }
            (kind, input) => unreachable!("input {input:?} does not fit state {kind:?}"),
        }
    }

    /// Combines slot `src` of `other` (a state of the same aggregate) into slot `dst` of `self`.
    pub fn combine(&mut self, dst: usize, other: &AggState, src: usize) {
        self.combine_pairs(other, &[(dst as u32, src as u32)]);
    }

    /// Combines, for every `(dst, src)` pair, slot `src` of `other` into slot `dst` of `self`. One dispatch
    /// on the state's kind per call, not per pair: the window combiner merges a whole pane at a time.
    pub fn combine_pairs(&mut self, other: &AggState, pairs: &[(u32, u32)]) {
        let func = self.meta.spec.func;
        let max = func == AggFunc::Max;
        let last = func == AggFunc::Last;
        match (&mut self.kind, &other.kind) {
            (Kind::Count(a), Kind::Count(b)) => for_pairs(pairs, |d, s| a[d] += b[s]),
            (Kind::SumInt { sum, n }, Kind::SumInt { sum: s2, n: n2 }) => {
                for_pairs(pairs, |d, s| {
                    sum[d] += s2[s];
                    n[d] += n2[s];
                })
            }
            (Kind::SumFloat { sum, n }, Kind::SumFloat { sum: s2, n: n2 }) => {
                for_pairs(pairs, |d, s| {
                    sum[d].merge(&s2[s]);
                    n[d] += n2[s];
                })
            }
            (
                Kind::Moments { s: sx, q, n, big },
                Kind::Moments {
                    s: s2,
                    q: q2,
                    n: n2,
                    big: big2,
                },
            ) => for_pairs(pairs, |d, s| {
                sx[d].merge(&s2[s]);
                q[d].merge(&q2[s]);
                n[d] += n2[s];
                if let Some(b) = &big2[s] {
                    big[d].get_or_insert_with(Default::default).merge(b);
                }
            }),
            (Kind::ExtremeInt { v, n }, Kind::ExtremeInt { v: v2, n: n2 }) => {
                for_pairs(pairs, |d, s| {
                    if n2[s] > 0 {
                        if n[d] == 0 || (max && v2[s] > v[d]) || (!max && v2[s] < v[d]) {
                            v[d] = v2[s];
                        }
                        n[d] += n2[s];
                    }
                })
            }
            (Kind::ExtremeFloat { v, n }, Kind::ExtremeFloat { v: v2, n: n2 }) => {
                for_pairs(pairs, |d, s| {
                    if n2[s] > 0 {
                        if n[d] == 0 || better_float(v2[s], v[d], max) {
                            v[d] = v2[s];
                        }
                        n[d] += n2[s];
                    }
                })
            }
            (Kind::PickInt(a), Kind::PickInt(b)) => a.combine_pairs(b, pairs, last),
            (Kind::PickFloat(a), Kind::PickFloat(b)) => a.combine_pairs(b, pairs, last),
            _ => unreachable!("combine of states of different aggregates"),
        }
    }

    /// Lowers the given slots, in order, into the output column.
    pub fn finish(&self, slots: &[u32]) -> Result<ArrayRef> {
        let func = self.meta.spec.func;
        let valid = |n: &[i64], min: i64| -> Option<NullBuffer> {
            null_buffer_from(slots.iter().map(|&s| n[s as usize] >= min))
        };
        let ints = |vals: Vec<i64>, nulls: Option<NullBuffer>| -> Result<ArrayRef> {
            let arr = PrimitiveArray::<Int64Type>::new(vals.into(), nulls);
            int_column_as(Arc::new(arr), &self.meta.output_type())
        };
        let floats = |vals: Vec<f64>, nulls: Option<NullBuffer>| -> Result<ArrayRef> {
            let arr: ArrayRef = Arc::new(PrimitiveArray::<Float64Type>::new(vals.into(), nulls));
            if self.meta.output_type() == DataType::Float64 {
                Ok(arr)
            } else {
                crate::arrow_io::float_column_as(arr, &self.meta.output_type())
            }
        };
        let pick = |slot: &u32| *slot as usize;
        match &self.kind {
            Kind::Count(c) => Ok(Arc::new(Int64Array::from_iter_values(
                slots.iter().map(|s| c[pick(s)]),
            ))),
            Kind::SumInt { sum, n } => {
                let nulls = valid(n, 1);
                if func == AggFunc::Mean {
                    let vals = slots.iter().map(|&s| {
                        let s = s as usize;
                        if n[s] == 0 {
                            0.0
                        } else {
                            sum[s] as f64 / n[s] as f64
                        }
                    });
                    return floats(vals.collect(), nulls);
                }
                let mut vals = Vec::with_capacity(slots.len());
                for &s in slots {
                    let v = i64::try_from(sum[s as usize]).map_err(|_| {
                        Error::new(
                            ErrorKind::Overflow,
                            format!(
                                "aggs: sum of column '{}' overflows int64 in a window",
                                self.meta.column()
                            ),
                        )
                    })?;
                    vals.push(v);
                }
                ints(vals, nulls)
            }
            Kind::SumFloat { sum, n } => {
                let mean = func == AggFunc::Mean;
                let vals = slots.iter().map(|&s| {
                    let s = s as usize;
                    let total = sum[s].value();
                    if mean && n[s] > 0 {
                        total / n[s] as f64
                    } else {
                        total
                    }
                });
                floats(vals.collect(), valid(n, 1))
            }
            Kind::Moments { s, q, n, big } => {
                let vals = slots.iter().map(|&i| {
                    let i = i as usize;
                    let var = sample_variance(&s[i], &q[i], big[i].as_deref(), n[i]);
                    if func == AggFunc::Std {
                        var.sqrt()
                    } else {
                        var
                    }
                });
                floats(vals.collect(), valid(n, 2))
            }
            Kind::ExtremeInt { v, n } | Kind::PickInt(Picked { v, n, .. }) => {
                ints(slots.iter().map(|s| v[pick(s)]).collect(), valid(n, 1))
            }
            Kind::ExtremeFloat { v, n } | Kind::PickFloat(Picked { v, n, .. }) => {
                floats(slots.iter().map(|s| v[pick(s)]).collect(), valid(n, 1))
            }
        }
    }
}

/// NaN payloads and signs differ; treat every NaN as the one positive NaN, which `total_cmp` puts above
/// +inf (Spark's rule: NaN is larger than any other value).
#[inline]
fn canonical_nan(x: f64) -> f64 {
    if x.is_nan() { f64::NAN } else { x }
}

#[inline]
fn better_float(candidate: f64, current: f64, max: bool) -> bool {
    let ord = candidate.total_cmp(&current);
    if max { ord.is_gt() } else { ord.is_lt() }
}

/// Sample variance from the exact sums `S = sum x` and `Q = sum x^2`: `Q - 2 m S + n m^2` for
/// `m = round(S / n)` is summed exactly (every product split with FMA), less the `(S - n m)^2 / n` that `m`
/// being off the true mean adds. Every input is exact, so the result has the same bits for any order of the
/// rows.
///
/// Squares of values of magnitude `>= BIG` would overflow (or, summed, leave the f64 range), so they are kept
/// scaled in `big`; when there are any, the whole computation runs on values scaled by `2^-SCALE` and the
/// result is scaled back (to +inf when the variance itself overflows, as the exact result does).
fn sample_variance(s: &ExactSum, q: &ExactSum, big: Option<&ExactSum>, n: i64) -> f64 {
    if n < 2 {
        return f64::NAN; // masked as null by the caller
    }
    let s_hi = s.value();
    if !s_hi.is_finite() {
        return f64::NAN; // a NaN or infinite input
    }
    // S to ~106 bits: S = s_hi + s_lo + (tiny).
    let mut rest = s.clone();
    rest.add(-s_hi);
    let s_lo = rest.value();
    let Some(big) = big else {
        if !q.value().is_finite() {
            return f64::NAN;
        }
        return centred_moment(s_hi, s_lo, s.clone(), q.clone(), n);
    };
    // Scaling by a power of two is exact but for the tiny parts that fall below f64's range, which cannot
    // change a variance this large; multiplications by 2^-SCALE are done one at a time (2^-2*SCALE is 0).
    let down = 2f64.powi(-SCALE);
    let mut acc = big.clone();
    acc.add(q.value() * down * down);
    let mut scaled = ExactSum::new();
    scaled.add(s_hi * down);
    scaled.add(s_lo * down);
    let up = 2f64.powi(SCALE);
    centred_moment(s_hi * down, s_lo * down, scaled, acc, n) * up * up
}

/// Values of at least this magnitude have their squares kept scaled (`2^480`: a square below `2^960` leaves
/// room to sum 2^60 of them without leaving the f64 range).
const BIG: f64 = 3.1217485503159922e144; // 2^480
/// The scale of big squares: `(x * 2^-SCALE)^2` is exact and well inside the f64 range for any finite `x >= BIG`.
const SCALE: i32 = 600;

fn add_big_square(slot: &mut Option<Box<ExactSum>>, x: f64) {
    let scaled = x * 2f64.powi(-SCALE);
    let (hi, lo) = two_product(scaled, scaled);
    let acc = slot.get_or_insert_with(Default::default);
    acc.add(hi);
    acc.add(lo);
}

/// `sum (x - mean)^2 / (n - 1)` from `S = s_hi + s_lo` (and `S` exactly) and `Q = sum x^2`.
fn centred_moment(s_hi: f64, s_lo: f64, s: ExactSum, q: ExactSum, n: i64) -> f64 {
    let nf = n as f64;
    let m = s_hi / nf;
    let mut acc = q;
    for part in [s_hi, s_lo] {
        let (hi, lo) = two_product(-2.0 * m, part);
        acc.add(hi);
        acc.add(lo);
    }
    let (m2_hi, m2_lo) = two_product(m, m);
    for part in [m2_hi, m2_lo] {
        let (hi, lo) = two_product(nf, part);
        acc.add(hi);
        acc.add(lo);
    }
    // Sum (x - m)^2 = Sum (x - mean)^2 + n (mean - m)^2: take off the second term, with d = S - n m (exact
    // until one rounding) so that n (mean - m)^2 = d^2 / n.
    let mut d = s;
    let (nm_hi, nm_lo) = two_product(nf, m);
    d.add(-nm_hi);
    d.add(-nm_lo);
    let d = d.value();
    ((acc.value() - d * d / nf) / (nf - 1.0)).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variance(xs: &[f64]) -> f64 {
        let mut s = ExactSum::new();
        xs.iter().for_each(|&x| s.add(x));
        let mut big = None;
        for &x in xs.iter().filter(|x| x.abs() >= BIG) {
            add_big_square(&mut big, x);
        }
        let mut q = ExactSum::new();
        for &x in xs.iter().filter(|x| x.abs() < BIG) {
            let (hi, lo) = two_product(x, x);
            q.add(hi);
            q.add(lo);
        }
        sample_variance(&s, &q, big.as_deref(), xs.len() as i64)
    }

    #[test]
    fn variance_of_huge_values_overflows_like_the_exact_result() {
        assert_eq!(variance(&[1e200, -1e200]), f64::INFINITY);
        assert_eq!(variance(&[1e200, 1e200, 1e200]), 0.0);
        // a, a + d, a + 2d: variance d^2 exactly, finite, though every square overflows f64.
        let (a, d) = (2f64.powi(531), 2f64.powi(480));
        assert_eq!(variance(&[a, a + d, a + 2.0 * d]), d * d);
        // Big and small values in one window.
        assert_eq!(
            variance(&[3e150, -3e150, 1.0]),
            variance(&[-3e150, 1.0, 3e150])
        );
        assert!(variance(&[3e150, -3e150, 1.0]).is_finite());
    }

    #[test]
    fn variance_is_accurate_with_a_large_offset() {
        // Values 1e9 + {4, 7, 13, 16}: variance 30 exactly; the textbook formula loses it to cancellation.
        let xs = [1e9 + 4.0, 1e9 + 7.0, 1e9 + 13.0, 1e9 + 16.0];
        assert_eq!(variance(&xs), 30.0);
        assert_eq!(
            variance(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
            32.0 / 7.0
        );
        assert!(variance(&[1.0]).is_nan());
        // Equal values have no spread, even when their mean is not representable (hypothesis found this).
        let x = 699051.6432011065;
        assert_eq!(variance(&[x, x, x]), 0.0);
    }
}
