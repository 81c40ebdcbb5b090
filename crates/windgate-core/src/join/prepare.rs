//! Arrow batches to join tuples: the time, band and equality columns of each side read once, checked, and
//! turned into what the processing threads compare (float64 band values, interned equality ids).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use smallvec::SmallVec;

use crate::arrow_io::{as_i64, column, exact_f64, time_unit};
use crate::error::{Error, ErrorKind, Result};
use crate::keys::KeyDict;
use crate::time::{TimeUnit, Timestamp};

use super::options::Predicate;

/// Left or right input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    Left = 0,
    Right = 1,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::Left, Side::Right];

    pub fn name(self) -> &'static str {
        match self {
            Side::Left => "left",
            Side::Right => "right",
        }
    }

    pub fn other(self) -> Side {
        match self {
            Side::Left => Side::Right,
            Side::Right => Side::Left,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn parse(name: &str) -> Result<Side> {
        match name {
            "left" => Ok(Side::Left),
            "right" => Ok(Side::Right),
            other => Err(Error::param(
                "side",
                format!("expected \"left\" or \"right\", got {other:?}"),
            )),
        }
    }
}

/// A tuple's place in the merged total order (Gulisano et al., ScaleJoin): time, then left before right, then its
/// position among its side's rows in arrival order. Independent of batch splits and thread counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JoinKey {
    pub ts: Timestamp,
    pub side: Side,
    pub seq: u64,
}

/// What a processing thread needs of one row: its key and the values the predicates compare.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinTuple {
    pub key: JoinKey,
    /// False when a band or equality value is null or NaN: the row matches nothing (SQL), but still takes its
    /// place in the order (and in the round-robin).
    pub valid: bool,
    /// Interned equality key (0 without equality predicates).
    pub eq: u32,
    /// One value per band predicate, as float64.
    pub band: SmallVec<[f64; 2]>,
}

/// One side's columns, bound at its first batch.
#[derive(Debug, Clone)]
pub struct SideSchema {
    pub side: Side,
    pub schema: SchemaRef,
    pub time: String,
    pub time_type: DataType,
    pub unit: TimeUnit,
    band: Vec<String>,
    eq: Vec<String>,
}

impl SideSchema {
    pub fn bind(side: Side, schema: &SchemaRef, time: &str, on: &[Predicate]) -> Result<Self> {
        let param = format!("{} input", side.name());
        crate::arrow_io::check_unique_names(schema, side.name())?;
        let empty = RecordBatch::new_empty(schema.clone());
        let t = column(&empty, time, "time")?;
        let unit = time_unit(t.data_type(), time)?;
        let pick = |p: &Predicate| -> Option<(bool, String)> {
            let (is_band, l, r) = match p {
                Predicate::Band { left, right, .. } => (true, left, right),
                Predicate::Eq { left, right } => (false, left, right),
            };
            Some((is_band, if side == Side::Left { l } else { r }.clone()))
        };
        let (mut band, mut eq) = (vec![], vec![]);
        for (is_band, name) in on.iter().filter_map(pick) {
            let col = column(&empty, &name, "on")
                .map_err(|e| Error::new(e.kind(), format!("{} ({param})", e.message())))?;
            if is_band {
                let dt = col.data_type();
                if !(dt.is_integer() || dt.is_floating() || matches!(dt, DataType::Decimal128(..)))
                {
                    return Err(Error::column_type(
                        &name,
                        format!("a band predicate needs a numeric column, got {dt} ({param})"),
                    ));
                }
                band.push(name);
            } else {
                eq.push(name);
            }
        }
        Ok(Self {
            side,
            schema: schema.clone(),
            time: time.to_string(),
            time_type: t.data_type().clone(),
            unit,
            band,
            eq,
        })
    }

    /// A later batch must have the columns and types of the first.
    pub fn check_same(&self, schema: &SchemaRef) -> Result<()> {
        if schema.fields() != self.schema.fields() {
            return Err(Error::new(
                ErrorKind::SchemaMismatch,
                format!(
                    "{} input: a batch's schema differs from the first batch's ({:?} vs {:?})",
                    self.side.name(),
                    names(schema),
                    names(&self.schema)
                ),
            ));
        }
        Ok(())
    }

    pub fn eq_types(&self) -> Vec<DataType> {
        self.eq
            .iter()
            .map(|c| normalise(self.schema.field_with_name(c).expect("bound").data_type()))
            .collect()
    }
}

fn names(schema: &SchemaRef) -> Vec<String> {
    schema.fields().iter().map(|f| f.name().clone()).collect()
}

/// The common type equality columns are compared in: integers as int64, floats as float64, strings as utf8.
fn normalise(dt: &DataType) -> DataType {
    match dt {
        d if d.is_signed_integer() || d.is_unsigned_integer() => DataType::Int64,
        d if d.is_floating() => DataType::Float64,
        DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        d => d.clone(),
    }
}

/// Both sides' equality types must agree after `normalise`.
pub fn check_eq_types(left: &SideSchema, right: &SideSchema) -> Result<()> {
    for ((l, r), (lt, rt)) in left
        .eq
        .iter()
        .zip(&right.eq)
        .zip(left.eq_types().iter().zip(right.eq_types()))
    {
        if *lt != rt {
            return Err(Error::new(
                ErrorKind::SchemaMismatch,
                format!("on: eq({l:?}, {r:?}) compares {lt} with {rt}; expected comparable types"),
            ));
        }
    }
    let (lt, rt) = (&left.time_type, &right.time_type);
    if lt != rt {
        return Err(Error::new(
            ErrorKind::SchemaMismatch,
            format!(
                "time: the left time column '{}' is {lt} but the right one '{}' is {rt}; expected the same type",
                left.time, right.time
            ),
        ));
    }
    Ok(())
}

/// Reads one batch of `side` into tuples; `first_seq` is the side's row count before this batch.
pub fn tuples(
    s: &SideSchema,
    batch: &RecordBatch,
    first_seq: u64,
    eq_dict: &mut KeyDict,
) -> Result<Vec<JoinTuple>> {
    let n = batch.num_rows();
    let t = batch.column_by_name(&s.time).expect("bound");
    if t.null_count() > 0 {
        let row = (0..n).find(|&i| t.is_null(i)).unwrap_or(0);
        return Err(Error::new(
            ErrorKind::NullValue,
            format!(
                "column '{}': null time at row {row} of this batch of the {} input; expected a time on \
                 every row",
                s.time,
                s.side.name()
            ),
        ));
    }
    let ts = as_i64(t, &s.time)?;
    let mut valid = vec![true; n];
    let mut band: Vec<Vec<f64>> = Vec::with_capacity(s.band.len());
    for name in &s.band {
        let col = batch.column_by_name(name).expect("bound");
        mark_nulls(col, &mut valid);
        let values = band_values(col, name, s.side)?;
        for (v, ok) in values.iter().zip(valid.iter_mut()) {
            *ok &= !v.is_nan();
        }
        band.push(values);
    }
    let eq = if s.eq.is_empty() {
        vec![0; n]
    } else {
        let cols: Vec<ArrayRef> =
            s.eq.iter()
                .map(|c| {
                    let col = batch.column_by_name(c).expect("bound");
                    mark_nulls(col, &mut valid);
                    let target = normalise(col.data_type());
                    let col = if *col.data_type() == target {
                        col.clone()
                    } else {
                        arrow_cast::cast(col, &target)?
                    };
                    if target == DataType::Float64 {
                        return Ok(float_eq_key(&col, &mut valid));
                    }
                    Ok(col)
                })
                .collect::<Result<_>>()?;
        eq_dict.ids(&cols, n)?
    };
    Ok((0..n)
        .map(|i| JoinTuple {
            key: JoinKey {
                ts: ts[i],
                side: s.side,
                seq: first_seq + i as u64,
            },
            valid: valid[i],
            eq: eq[i],
            // -0.0 and 0.0 are equal; `+ 0.0` makes them one bit pattern for the index cells.
            band: band.iter().map(|b| b[i] + 0.0).collect(),
        })
        .collect())
}

/// Float equality as SQL has it: NaN equals nothing (the row matches nothing) and -0.0 equals 0.0 (one bit
/// pattern, since the dictionary compares bytes).
fn float_eq_key(col: &ArrayRef, valid: &mut [bool]) -> ArrayRef {
    let values = col.as_primitive::<Float64Type>();
    for (ok, v) in valid.iter_mut().zip(values.values().iter()) {
        *ok &= !v.is_nan();
    }
    Arc::new(values.unary::<_, Float64Type>(|v| v + 0.0))
}

fn mark_nulls(col: &ArrayRef, valid: &mut [bool]) {
    if let Some(nulls) = col.logical_nulls() {
        for (ok, v) in valid.iter_mut().zip(nulls.iter()) {
            *ok &= v;
        }
    }
}

/// A band column as float64; integers must be exact in float64.
fn band_values(col: &ArrayRef, name: &str, side: Side) -> Result<Vec<f64>> {
    exact_f64(col, name, "band predicates", |i| {
        format!("row {i} of this batch of the {} input", side.name())
    })
}

/// A shared equality dictionary for both sides (equal values get one id whichever side they come from).
pub fn eq_dict(left: &SideSchema) -> Result<KeyDict> {
    KeyDict::new(left.eq.clone(), left.eq_types())
}
