//! The partial-state format: per-(key, pane) aggregate states as Arrow rows, exact and mergeable in any order.
//!
//! `output="partials"` makes a [`super::WindowAggregator`] emit, instead of windows, one row per (key, pane)
//! once the pane is final; `input="partials"` makes one read such rows and combine them into windows (or into
//! coarser partials). Two-phase plans pre-aggregate where the rows are (a Spark task, another process, a file
//! writer) and ship only the states; the merged windows have the same bits as aggregating every row in one
//! place, because every combine is exact (see [`super::state`]).
//!
//! A partial row holds the `by` columns, the time column (the pane's start, in the time column's type), and
//! per aggregate (output name `o`) the columns below ([`FORMAT_VERSION`] 1):
//!
//! | function | columns |
//! |----------|---------|
//! | every one | `o__n` int64: rows the state holds (non-null values; all rows for `count(*)`) |
//! | `sum`, `mean` of integers | `o__sum` decimal128(38, 0): the exact integer sum |
//! | `sum`, `mean` of floats | `o__sum` binary: the exact sum ([`ExactSum::to_bytes`]) |
//! | `var`, `std` | `o__sum`, `o__sumsq` binary: exact sums of `x` and `x²`; `o__sumsq_big` binary or null: squares of `|x| ≥ 2^480`, scaled by `2^-1200` |
//! | `min`, `max` | `o__value` (the input column's type): the extreme, null when `n = 0` |
//! | `first`, `last` | `o__value`, and `o__at_ts`, `o__at_by`, `o__at_source`, `o__at_seq` int64: the row's place in the total order that decides ties |
//!
//! `count` has only `o__n`. The schema's metadata carries `windgate.partials` = the format version when the
//! rows come straight from windgate (engines that drop metadata, like Spark's shuffles, lose nothing else).

use std::sync::Arc;

use arrow_array::types::Int64Type;
use arrow_array::{
    Array, ArrayRef, BinaryArray, Decimal128Array, Int64Array, PrimitiveArray, RecordBatch,
};
use arrow_schema::{DataType, Field, Schema};

use super::exact_sum::ExactSum;
use super::function::{AggFunc, AggSpec, ValueClass, value_class};
use super::state::{AggMeta, AggState, Kind, OrderKey, Picked};
use crate::arrow_io::{as_f64, as_i64, column, float_column_as, int_column_as, null_buffer_from};
use crate::error::{Error, ErrorKind, Result};

/// Version of the partial-state columns; a reader refuses rows of another version.
pub const FORMAT_VERSION: u32 = 1;

/// Schema metadata key holding [`FORMAT_VERSION`].
pub const METADATA_KEY: &str = "windgate.partials";

/// What an operator reads: raw rows, or partial states of another operator with the same query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputKind {
    #[default]
    Rows,
    Partials,
}

/// What an operator emits: windows, or the partial states of its final panes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputKind {
    #[default]
    Windows,
    Partials,
}

impl InputKind {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "rows" => Ok(InputKind::Rows),
            "partials" => Ok(InputKind::Partials),
            other => Err(Error::param(
                "input",
                format!("expected \"rows\" or \"partials\", got {other:?}"),
            )),
        }
    }
}

impl OutputKind {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "windows" => Ok(OutputKind::Windows),
            "partials" => Ok(OutputKind::Partials),
            other => Err(Error::param(
                "output",
                format!("expected \"windows\" or \"partials\", got {other:?}"),
            )),
        }
    }
}

/// Integer sums are exact in 38 digits: at most 2^63 values of magnitude at most 2^63 sum below 2^126 < 10^38.
const DECIMAL: DataType = DataType::Decimal128(38, 0);

fn name(meta: &AggMeta, part: &str) -> String {
    format!("{}__{part}", meta.spec.output_name)
}

/// The parts of a function's state, after `n`.
fn parts(func: AggFunc) -> &'static [&'static str] {
    match func {
        AggFunc::CountStar | AggFunc::Count => &[],
        AggFunc::Sum | AggFunc::Mean => &["sum"],
        AggFunc::Var | AggFunc::Std => &["sum", "sumsq", "sumsq_big"],
        AggFunc::Min | AggFunc::Max => &["value"],
        AggFunc::First | AggFunc::Last => &["value", "at_ts", "at_by", "at_source", "at_seq"],
    }
}

/// The names of an aggregate's partial-state columns.
pub(super) fn column_names(spec: &AggSpec) -> impl Iterator<Item = String> + '_ {
    std::iter::once("n")
        .chain(parts(spec.func).iter().copied())
        .map(|p| format!("{}__{p}", spec.output_name))
}

/// The partial-state columns of one aggregate, in order.
pub(super) fn fields(meta: &AggMeta) -> Vec<Field> {
    let f = |part: &str, dt: DataType, nullable: bool| Field::new(name(meta, part), dt, nullable);
    let mut out = vec![f("n", DataType::Int64, false)];
    match (meta.spec.func, meta.class) {
        (AggFunc::CountStar | AggFunc::Count, _) => {}
        (AggFunc::Sum | AggFunc::Mean, ValueClass::Int) => out.push(f("sum", DECIMAL, false)),
        (AggFunc::Sum | AggFunc::Mean, ValueClass::Float) => {
            out.push(f("sum", DataType::Binary, false))
        }
        (AggFunc::Var | AggFunc::Std, _) => {
            out.push(f("sum", DataType::Binary, false));
            out.push(f("sumsq", DataType::Binary, false));
            out.push(f("sumsq_big", DataType::Binary, true));
        }
        (AggFunc::Min | AggFunc::Max, _) => out.push(f("value", meta.input_type.clone(), true)),
        (AggFunc::First | AggFunc::Last, _) => {
            out.push(f("value", meta.input_type.clone(), true));
            for part in ["at_ts", "at_by", "at_source", "at_seq"] {
                out.push(f(part, DataType::Int64, false));
            }
        }
    }
    out
}

/// The metadata of a partial schema.
pub(super) fn metadata() -> std::collections::HashMap<String, String> {
    [(METADATA_KEY.to_string(), FORMAT_VERSION.to_string())].into()
}

/// The aggregate a partial input feeds: its value class and input type read off its state columns.
pub(super) fn meta_from_schema(spec: &AggSpec, schema: &Schema) -> Result<AggMeta> {
    if let Some(v) = schema.metadata().get(METADATA_KEY)
        && v != &FORMAT_VERSION.to_string()
    {
        return Err(Error::param(
            "input",
            format!(
                "the partial states have format version {v}; this windgate reads version {FORMAT_VERSION}"
            ),
        ));
    }
    let col = |part: &str| -> Result<DataType> {
        let n = format!("{}__{part}", spec.output_name);
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        schema
            .field_with_name(&n)
            .map(|f| f.data_type().clone())
            .map_err(|_| Error::column_not_found("input", &n, &names))
    };
    col("n")?;
    let (input_type, class) = match spec.func {
        AggFunc::CountStar | AggFunc::Count => (DataType::Int64, ValueClass::Int),
        AggFunc::Sum | AggFunc::Mean => match col("sum")? {
            DataType::Decimal128(..) => (DataType::Int64, ValueClass::Int),
            _ => (DataType::Float64, ValueClass::Float),
        },
        AggFunc::Var | AggFunc::Std => (DataType::Float64, ValueClass::Float),
        AggFunc::Min | AggFunc::Max | AggFunc::First | AggFunc::Last => {
            let dt = col("value")?;
            let class = value_class(&dt, spec.func, &format!("{}__value", spec.output_name))?;
            (dt, class)
        }
    };
    Ok(AggMeta {
        spec: spec.clone(),
        input_type,
        class,
    })
}

/// The states of `slots`, in order, as the aggregate's partial-state columns.
pub(super) fn export(state: &AggState, slots: &[u32]) -> Result<Vec<ArrayRef>> {
    let meta = state.meta();
    let at = |s: &u32| *s as usize;
    let count = |n: &[i64]| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(slots.iter().map(|s| n[at(s)])))
    };
    let sums = |sums: &[ExactSum]| -> ArrayRef {
        Arc::new(BinaryArray::from_iter_values(
            slots.iter().map(|s| sums[at(s)].to_bytes()),
        ))
    };
    let valid = |n: &[i64]| null_buffer_from(slots.iter().map(|s| n[at(s)] > 0));
    let ints = |v: &[i64], n: &[i64]| -> Result<ArrayRef> {
        let vals: Vec<i64> = slots.iter().map(|s| v[at(s)]).collect();
        let arr = PrimitiveArray::<Int64Type>::new(vals.into(), valid(n));
        int_column_as(Arc::new(arr), &meta.input_type)
    };
    let floats = |v: &[f64], n: &[i64]| -> Result<ArrayRef> {
        let vals: Vec<f64> = slots.iter().map(|s| v[at(s)]).collect();
        let arr: ArrayRef = Arc::new(arrow_array::Float64Array::new(vals.into(), valid(n)));
        float_column_as(arr, &meta.input_type)
    };
    let order = |p: &[OrderKey]| -> Vec<ArrayRef> {
        let col = |f: fn(&OrderKey) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(
                slots.iter().map(|s| f(&p[at(s)])),
            ))
        };
        vec![
            col(|k| k.ts),
            col(|k| k.by),
            col(|k| k.source as i64),
            col(|k| k.seq as i64),
        ]
    };
    Ok(match &state.kind {
        Kind::Count(c) => vec![count(c)],
        Kind::SumInt { sum, n } => {
            let dec = Decimal128Array::from_iter_values(slots.iter().map(|s| sum[at(s)]))
                .with_precision_and_scale(38, 0)
                .map_err(Error::output)?;
            vec![count(n), Arc::new(dec)]
        }
        Kind::SumFloat { sum, n } => vec![count(n), sums(sum)],
        Kind::Moments { s, q, n, big } => {
            let big: ArrayRef = Arc::new(BinaryArray::from_iter(
                slots
                    .iter()
                    .map(|s| big[at(s)].as_ref().map(|b| b.to_bytes())),
            ));
            vec![count(n), sums(s), sums(q), big]
        }
        Kind::ExtremeInt { v, n } => vec![count(n), ints(v, n)?],
        Kind::ExtremeFloat { v, n } => vec![count(n), floats(v, n)?],
        Kind::PickInt(p) => [vec![count(&p.n), ints(&p.v, &p.n)?], order(&p.at)].concat(),
        Kind::PickFloat(p) => [vec![count(&p.n), floats(&p.v, &p.n)?], order(&p.at)].concat(),
    })
}

/// Reads the partial-state columns of `meta`'s aggregate from `batch`: a state with one slot per row.
pub(super) fn import(meta: &Arc<AggMeta>, batch: &RecordBatch) -> Result<AggState> {
    let get = |part: &str| column(batch, &name(meta, part), "input");
    let n = non_null_ints(get("n")?, &name(meta, "n"))?;
    if let Some(i) = n.iter().position(|&c| c < 0) {
        return Err(bad(meta, "n", format!("row {i} holds a negative count")));
    }
    let rows = n.len();
    let mut state = AggState::new(meta.clone());
    state.kind = match (&state.kind, meta.class) {
        (Kind::Count(_), _) => Kind::Count(n),
        (Kind::SumInt { .. }, _) => {
            let arr = get("sum")?;
            let dec = arr
                .as_any()
                .downcast_ref::<Decimal128Array>()
                .ok_or_else(|| {
                    bad(
                        meta,
                        "sum",
                        format!("expected decimal128(38, 0), got {}", arr.data_type()),
                    )
                })?;
            if dec.scale() != 0 || dec.null_count() > 0 {
                return Err(bad(
                    meta,
                    "sum",
                    "expected a non-null decimal with scale 0".into(),
                ));
            }
            Kind::SumInt {
                sum: dec.values().to_vec(),
                n,
            }
        }
        (Kind::SumFloat { .. }, _) => Kind::SumFloat {
            sum: exact_sums(get("sum")?, meta, "sum")?,
            n,
        },
        (Kind::Moments { .. }, _) => {
            let big_col = get("sumsq_big")?;
            let big = binary(big_col, meta, "sumsq_big")?
                .iter()
                .map(|b| b.map(|b| ExactSum::from_bytes(b).map(Box::new)).transpose())
                .collect::<Result<Vec<_>>>()
                .map_err(|e| bad(meta, "sumsq_big", e.message().to_string()))?;
            Kind::Moments {
                s: exact_sums(get("sum")?, meta, "sum")?,
                q: exact_sums(get("sumsq")?, meta, "sumsq")?,
                n,
                big,
            }
        }
        (Kind::ExtremeInt { .. }, _) => Kind::ExtremeInt {
            v: values_int(get("value")?, meta, &n)?,
            n,
        },
        (Kind::ExtremeFloat { .. }, _) => Kind::ExtremeFloat {
            v: values_float(get("value")?, meta, &n)?,
            n,
        },
        (Kind::PickInt(_), _) => Kind::PickInt(Picked {
            v: values_int(get("value")?, meta, &n)?,
            at: order_keys(&get, meta, rows)?,
            n,
        }),
        (Kind::PickFloat(_), _) => Kind::PickFloat(Picked {
            v: values_float(get("value")?, meta, &n)?,
            at: order_keys(&get, meta, rows)?,
            n,
        }),
    };
    Ok(state)
}

fn bad(meta: &AggMeta, part: &str, why: String) -> Error {
    Error::new(
        ErrorKind::InvalidValue,
        format!("partial-state column {:?}: {why}", name(meta, part)),
    )
}

fn non_null_ints(arr: &ArrayRef, col: &str) -> Result<Vec<i64>> {
    if arr.logical_null_count() > 0 {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            format!("partial-state column {col:?} has nulls; it must not"),
        ));
    }
    Ok(as_i64(arr, col)?.to_vec())
}

fn binary<'a>(arr: &'a ArrayRef, meta: &AggMeta, part: &str) -> Result<&'a BinaryArray> {
    arr.as_any().downcast_ref::<BinaryArray>().ok_or_else(|| {
        bad(
            meta,
            part,
            format!("expected binary, got {}", arr.data_type()),
        )
    })
}

fn exact_sums(arr: &ArrayRef, meta: &AggMeta, part: &str) -> Result<Vec<ExactSum>> {
    let col = binary(arr, meta, part)?;
    if col.null_count() > 0 {
        return Err(bad(meta, part, "has nulls; it must not".into()));
    }
    col.iter()
        .map(|b| ExactSum::from_bytes(b.unwrap_or_default()))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| bad(meta, part, e.message().to_string()))
}

/// Values of a state's `value` column: null exactly where the state is empty (`n = 0`; read as 0, never
/// used); a null beside a count would lose a value, so it is refused.
fn values_int(arr: &ArrayRef, meta: &AggMeta, n: &[i64]) -> Result<Vec<i64>> {
    check_value_column(arr, meta, n)?;
    Ok(as_i64(arr, &name(meta, "value"))?.to_vec())
}

fn values_float(arr: &ArrayRef, meta: &AggMeta, n: &[i64]) -> Result<Vec<f64>> {
    check_value_column(arr, meta, n)?;
    Ok(as_f64(arr)?.to_vec())
}

fn check_value_column(arr: &ArrayRef, meta: &AggMeta, n: &[i64]) -> Result<()> {
    if arr.data_type() != &meta.input_type {
        return Err(bad(
            meta,
            "value",
            format!("expected {}, got {}", meta.input_type, arr.data_type()),
        ));
    }
    if let Some(nulls) = arr.logical_nulls()
        && let Some(i) = (0..arr.len()).find(|&i| nulls.is_null(i) && n[i] > 0)
    {
        return Err(bad(
            meta,
            "value",
            format!("row {i} is null while its state holds {} value(s)", n[i]),
        ));
    }
    Ok(())
}

fn order_keys<'a>(
    get: &impl Fn(&str) -> Result<&'a ArrayRef>,
    meta: &AggMeta,
    rows: usize,
) -> Result<Vec<OrderKey>> {
    let part = |p: &str| non_null_ints(get(p)?, &name(meta, p));
    let (ts, by, source, seq) = (
        part("at_ts")?,
        part("at_by")?,
        part("at_source")?,
        part("at_seq")?,
    );
    (0..rows)
        .map(|i| {
            let source = u32::try_from(source[i])
                .map_err(|_| bad(meta, "at_source", format!("row {i} is out of range")))?;
            let seq = u64::try_from(seq[i])
                .map_err(|_| bad(meta, "at_seq", format!("row {i} is negative")))?;
            Ok(OrderKey {
                ts: ts[i],
                by: by[i],
                source,
                seq,
            })
        })
        .collect()
}
