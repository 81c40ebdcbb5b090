//! `regression`: per key, a running least-squares line through the key's per-bucket sums of a value
//! (daily sales per category), re-fitted as each bucket closes. Partitioned by key.
//!
//! Bucket `b` is `[b * bucket, (b + 1) * bucket)` of the time column; a key's point for `b` is
//! `(x, y) = (b - the key's first bucket, sum of value over the key's rows in b)`, rows with a null value
//! ignored. When the operator's stream time minus `lateness` reaches the end of bucket `b` (or at end of
//! stream), every key with a point in `b` adds it and, once it has two points, emits the key columns,
//! `window_start` (`b * bucket`), `points`, `slope` and `intercept` — only when `slope <= max_slope` if that
//! is given ("flat or declining"). Order: `(window_start, key)`.
//!
//! Integer values are summed exactly (i128) and the fit is computed from the exact integer sums:
//! `slope = f64(n Sxy - Sx Sy) / f64(n Sxx - Sx^2)`, `intercept = f64(Sy Sxx - Sx Sxy) / f64(n Sxx - Sx^2)`,
//! each integer rounded once, so SQL engines with 128-bit or decimal arithmetic get the same bits. Float
//! values are summed in arrival order per key (deterministic: a key's rows are always processed in arrival
//! order) and fitted in float64.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use hashbrown::HashMap;

use super::keyed::{Keyed, KeyedOp, PartCtx, Routing};
use super::order::{ASC, SortKey};
use super::value::{Params, Value};
use super::{Bound, ColumnarOp, DEFAULT_PARTITIONS, TimeColumn, check_unique};
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{ByteRows, RowCodec, column_index};
use crate::time::Span;
use crate::time::floor_div;

/// A running per-key regression of bucket sums on the bucket number.
#[derive(Debug, Clone)]
pub struct Regression {
    key: Vec<String>,
    time: String,
    value: String,
    bucket: Span,
    max_slope: Option<f64>,
    lateness: Span,
    partitions: usize,
}

impl Regression {
    pub fn new(key: &[&str], time: &str, value: &str, bucket: i64) -> Self {
        Self {
            key: key.iter().map(|k| k.to_string()).collect(),
            time: time.to_string(),
            value: value.to_string(),
            bucket: Span::Units(bucket),
            max_slope: None,
            lateness: Span::Units(0),
            partitions: DEFAULT_PARTITIONS,
        }
    }

    /// Emits only fits with `slope <= max_slope`.
    pub fn max_slope(mut self, m: f64) -> Self {
        self.max_slope = Some(m);
        self
    }

    pub fn partitions(mut self, p: usize) -> Self {
        self.partitions = p;
        self
    }

    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new(
            "regression",
            spec,
            &[
                "key",
                "time",
                "value",
                "bucket",
                "max_slope",
                "lateness",
                "partitions",
            ],
        )?;
        let key = p.nonempty_strings("key")?;
        let time = p.string("time")?;
        let value = p.string("value")?;
        let bucket = p.span("bucket")?;
        let max_slope = p.opt_float("max_slope")?;
        let lateness = p.opt_span("lateness")?.unwrap_or(Span::Units(0));
        let partitions = p.partitions()?;
        Ok(Self {
            key,
            time,
            value,
            bucket,
            max_slope,
            lateness,
            partitions,
        })
    }
}

impl ColumnarOp for Regression {
    fn name(&self) -> &'static str {
        "regression"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let codec = Arc::new(RowCodec::new(input, &self.key, "regression: key")?);
        let time = TimeColumn::bind(input, &self.time, "regression: time")?;
        let bucket = time.span(&self.bucket, "regression: bucket")?;
        if bucket <= 0 {
            return Err(Error::param(
                "regression: bucket",
                format!("expected a positive size, got {bucket}"),
            ));
        }
        let lateness = time.span(&self.lateness, "regression: lateness")?;
        let value = column_index(input, &self.value, "regression: value")?;
        let dt = input.field(value).data_type();
        let float = match dt {
            d if d.is_integer() => false,
            d if d.is_floating() => true,
            other => {
                return Err(Error::new(
                    ErrorKind::ColumnType,
                    format!(
                        "regression: column '{}' must be numeric, got {other}",
                        self.value
                    ),
                ));
            }
        };
        let mut fields: Vec<Field> = codec.fields().to_vec();
        fields.push(Field::new("window_start", time.data_type.clone(), true));
        fields.push(Field::new("points", DataType::Int64, false));
        fields.push(Field::new("slope", DataType::Float64, true));
        fields.push(Field::new("intercept", DataType::Float64, true));
        check_unique(&fields, "regression: key")?;
        let output = Arc::new(Schema::new(fields));
        let nk = self.key.len();
        let merge_cols: Vec<_> = std::iter::once((nk, ASC))
            .chain((0..nk).map(|i| (i, ASC)))
            .collect();
        let merge = SortKey::new(&output, &merge_cols, "regression: key")?;
        let routing = Routing {
            keys: codec.clone(),
            time: Some((time.index, time.name.clone())),
            clocked: true,
            lateness,
            masks: Vec::new(),
            values: None,
            casts: vec![(
                value,
                if float {
                    DataType::Float64
                } else {
                    DataType::Int64
                },
            )],
            partitions: self.partitions,
        };
        let op = FitOp {
            codec,
            value_name: self.value.clone(),
            float,
            bucket,
            max_slope: self.max_slope,
            time,
            output: output.clone(),
        };
        let keyed = Keyed::new(op, routing, input.clone(), Some(merge));
        Ok(Bound::new(output, move |p| p.partitioned(keyed)))
    }
}

struct FitOp {
    codec: Arc<RowCodec>,
    value_name: String,
    float: bool,
    bucket: i64,
    max_slope: Option<f64>,
    time: TimeColumn,
    output: SchemaRef,
}

/// A bucket's sum: exact for integers, arrival-order float64 for floats.
#[derive(Default, Clone, Copy)]
struct Sum {
    int: i128,
    float: f64,
}

/// The running sums of a key's fit.
struct Fit {
    first: i64,
    n: i64,
    sx: i128,
    sxx: i128,
    sy: Sum,
    sxy: Sum,
}

#[derive(Default)]
pub(crate) struct Fits {
    /// Open buckets by number, each with its keys' sums.
    open: BTreeMap<i64, HashMap<Box<[u8]>, Sum>>,
    fits: HashMap<Box<[u8]>, Fit>,
}

#[derive(Default)]
struct FitOut {
    keys: ByteRows,
    starts: Vec<i64>,
    points: Vec<i64>,
    slopes: Vec<f64>,
    intercepts: Vec<f64>,
}

impl FitOp {
    fn close(
        &self,
        st: &mut Fits,
        b: i64,
        sums: HashMap<Box<[u8]>, Sum>,
        out: &mut FitOut,
    ) -> Result<()> {
        for (key, y) in sums {
            let fit = st.fits.entry_ref(&*key).or_insert(Fit {
                first: b,
                n: 0,
                sx: 0,
                sxx: 0,
                sy: Sum::default(),
                sxy: Sum::default(),
            });
            let overflow = || {
                Error::new(
                    ErrorKind::Overflow,
                    format!(
                        "regression: column '{}': sums leave the 128-bit range",
                        self.value_name
                    ),
                )
            };
            let x = (b - fit.first) as i128;
            fit.n += 1;
            fit.sx += x;
            fit.sxx += x * x;
            fit.sy.int = fit.sy.int.checked_add(y.int).ok_or_else(overflow)?;
            fit.sy.float += y.float;
            let xy = x.checked_mul(y.int).ok_or_else(overflow)?;
            fit.sxy.int = fit.sxy.int.checked_add(xy).ok_or_else(overflow)?;
            fit.sxy.float += x as f64 * y.float;
            if fit.n < 2 {
                continue;
            }
            let (slope, intercept) = self.line(fit).ok_or_else(overflow)?;
            let above = |m: f64| slope.partial_cmp(&m).is_none_or(|o| o.is_gt());
            if self.max_slope.is_some_and(above) {
                continue;
            }
            out.keys.push(&key);
            out.starts.push(b.saturating_mul(self.bucket));
            out.points.push(fit.n);
            out.slopes.push(slope);
            out.intercepts.push(intercept);
        }
        Ok(())
    }

    fn line(&self, f: &Fit) -> Option<(f64, f64)> {
        let n = f.n as i128;
        let den = n.checked_mul(f.sxx)?.checked_sub(f.sx.checked_mul(f.sx)?)?;
        if self.float {
            let (n, sx, sxx) = (n as f64, f.sx as f64, f.sxx as f64);
            let (sy, sxy) = (f.sy.float, f.sxy.float);
            let den = den as f64;
            return Some(((n * sxy - sx * sy) / den, (sy * sxx - sx * sxy) / den));
        }
        let num = n
            .checked_mul(f.sxy.int)?
            .checked_sub(f.sx.checked_mul(f.sy.int)?)?;
        let icp =
            f.sy.int
                .checked_mul(f.sxx)?
                .checked_sub(f.sx.checked_mul(f.sxy.int)?)?;
        Some((num as f64 / den as f64, icp as f64 / den as f64))
    }
}

impl KeyedOp for FitOp {
    type State = Fits;
    type Out = FitOut;

    fn name(&self) -> &str {
        "regression"
    }

    fn out_rows(&self, out: &FitOut) -> usize {
        out.points.len()
    }

    fn out_batch(&self, out: FitOut) -> Result<RecordBatch> {
        let mut cols: Vec<ArrayRef> = self.codec.decode(out.keys.iter())?;
        cols.push(self.time.array(out.starts)?);
        cols.push(Arc::new(Int64Array::from(out.points)));
        cols.push(Arc::new(Float64Array::from(out.slopes)));
        cols.push(Arc::new(Float64Array::from(out.intercepts)));
        RecordBatch::try_new(self.output.clone(), cols).map_err(Error::output)
    }

    fn row(&self, st: &mut Fits, ctx: &PartCtx, r: usize, _out: &mut FitOut) -> Result<()> {
        let ts = ctx.time(r, "regression")?;
        let col = &ctx.routed.casts[0];
        if col.is_null(r) {
            return Ok(());
        }
        let b = floor_div(ts, self.bucket);
        let end = (b as i128 + 1) * self.bucket as i128;
        let wm = ctx.watermark(r);
        if end <= wm as i128 {
            return Err(Error::new(
                ErrorKind::LateRow,
                format!(
                    "regression: column '{}' at {} is {ts}, in a bucket that already closed (stream time minus \
                     lateness is {wm}); rows must arrive in time order within `lateness`",
                    ctx.time_name,
                    ctx.row_label(r)
                ),
            ));
        }
        let sum = st
            .open
            .entry(b)
            .or_default()
            .entry_ref(ctx.key(r))
            .or_default();
        if self.float {
            sum.float += col.as_primitive::<Float64Type>().value(r);
        } else {
            let v = col.as_primitive::<Int64Type>().value(r) as i128;
            sum.int = sum.int.checked_add(v).ok_or_else(|| {
                Error::new(
                    ErrorKind::Overflow,
                    format!(
                        "regression: column '{}': a bucket's sum leaves the 128-bit range",
                        self.value_name
                    ),
                )
            })?;
        }
        Ok(())
    }

    fn next_deadline(&self, st: &Fits) -> Option<i64> {
        st.open
            .first_key_value()
            .map(|(b, _)| b.saturating_add(1).saturating_mul(self.bucket))
    }

    fn fire(&self, st: &mut Fits, _deadline: i64, out: &mut FitOut) -> Result<()> {
        if let Some((b, sums)) = st.open.pop_first() {
            self.close(st, b, sums, out)?;
        }
        Ok(())
    }

    fn finish(&self, st: &mut Fits, out: &mut FitOut) -> Result<()> {
        while let Some((b, sums)) = st.open.pop_first() {
            self.close(st, b, sums, out)?;
        }
        Ok(())
    }
}
