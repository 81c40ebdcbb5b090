//! Reading and writing the parts of a state as partial-state columns (the format is described in
//! [`crate::aggregate::partial`]).

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BinaryArray, Decimal128Array, Int64Array, RecordBatch};

use super::Scalar;
use crate::aggregate::state::{AggMeta, OrderKey};
use crate::arrow_io::{as_i64, column};
use crate::error::{Error, ErrorKind, Result};
use crate::exact_sum::ExactSum;

/// The name of part `part` of `meta`'s state: `<output name>__<part>`.
pub(crate) fn part_name(meta: &AggMeta, part: &str) -> String {
    format!("{}__{part}", meta.spec.output_name)
}

/// The partial-state columns of one aggregate in a batch of partial rows.
pub(crate) struct StateColumns<'a> {
    pub(crate) meta: &'a AggMeta,
    batch: &'a RecordBatch,
}

impl<'a> StateColumns<'a> {
    pub(crate) fn new(meta: &'a AggMeta, batch: &'a RecordBatch) -> Self {
        Self { meta, batch }
    }

    /// The rows.
    pub(crate) fn rows(&self) -> usize {
        self.batch.num_rows()
    }

    fn get(&self, part: &str) -> Result<&'a ArrayRef> {
        column(self.batch, &part_name(self.meta, part), "input")
    }

    /// An error about part `part`.
    pub(crate) fn bad(&self, part: &str, why: String) -> Error {
        Error::new(
            ErrorKind::InvalidValue,
            format!(
                "partial-state column {:?}: {why}",
                part_name(self.meta, part)
            ),
        )
    }

    /// The counts `n`, checked non-null and non-negative.
    pub(crate) fn counts(&self) -> Result<Vec<i64>> {
        let n = self.non_null_ints("n")?;
        if let Some(i) = n.iter().position(|&c| c < 0) {
            return Err(self.bad("n", format!("row {i} holds a negative count")));
        }
        Ok(n)
    }

    fn non_null_ints(&self, part: &str) -> Result<Vec<i64>> {
        let arr = self.get(part)?;
        let col = part_name(self.meta, part);
        if arr.logical_null_count() > 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                format!("partial-state column {col:?} has nulls; it must not"),
            ));
        }
        Ok(as_i64(arr, &col)?.to_vec())
    }

    /// Exact integer sums, a non-null decimal128 column of scale 0.
    pub(crate) fn decimal_sums(&self, part: &str) -> Result<Vec<i128>> {
        let arr = self.get(part)?;
        let dec = arr
            .as_any()
            .downcast_ref::<Decimal128Array>()
            .ok_or_else(|| {
                self.bad(
                    part,
                    format!("expected decimal128(38, 0), got {}", arr.data_type()),
                )
            })?;
        if dec.scale() != 0 || dec.null_count() > 0 {
            return Err(self.bad(part, "expected a non-null decimal with scale 0".into()));
        }
        Ok(dec.values().to_vec())
    }

    fn binary(&self, part: &str) -> Result<&'a BinaryArray> {
        let arr = self.get(part)?;
        arr.as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(|| self.bad(part, format!("expected binary, got {}", arr.data_type())))
    }

    /// Exact float sums ([`ExactSum::to_bytes`]), non-null.
    pub(crate) fn exact_sums(&self, part: &str) -> Result<Vec<ExactSum>> {
        let col = self.binary(part)?;
        if col.null_count() > 0 {
            return Err(self.bad(part, "has nulls; it must not".into()));
        }
        col.iter()
            .map(|b| ExactSum::from_bytes(b.unwrap_or_default()))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| self.bad(part, e.message().to_string()))
    }

    /// Exact float sums, null where a state has none.
    pub(crate) fn optional_exact_sums(&self, part: &str) -> Result<Vec<Option<Box<ExactSum>>>> {
        self.binary(part)?
            .iter()
            .map(|b| b.map(|b| ExactSum::from_bytes(b).map(Box::new)).transpose())
            .collect::<Result<Vec<_>>>()
            .map_err(|e| self.bad(part, e.message().to_string()))
    }

    /// Values of the `value` column: null exactly where the state is empty (`n = 0`; read as 0, never used);
    /// a null beside a count would lose a value, so it is refused.
    pub(crate) fn values<T: Scalar>(&self, n: &[i64]) -> Result<Vec<T>> {
        let arr = self.get("value")?;
        let meta = self.meta;
        if arr.data_type() != &meta.input_type {
            return Err(self.bad(
                "value",
                format!("expected {}, got {}", meta.input_type, arr.data_type()),
            ));
        }
        if let Some(nulls) = arr.logical_nulls()
            && let Some(i) = (0..arr.len()).find(|&i| nulls.is_null(i) && n[i] > 0)
        {
            return Err(self.bad(
                "value",
                format!("row {i} is null while its state holds {} value(s)", n[i]),
            ));
        }
        T::read(arr, &part_name(meta, "value"))
    }

    /// The rows' places in the total order (`at_ts`, `at_by`, `at_source`, `at_seq`).
    pub(crate) fn order_keys(&self) -> Result<Vec<OrderKey>> {
        let (ts, by, source, seq) = (
            self.non_null_ints("at_ts")?,
            self.non_null_ints("at_by")?,
            self.non_null_ints("at_source")?,
            self.non_null_ints("at_seq")?,
        );
        (0..self.rows())
            .map(|i| {
                let source = u32::try_from(source[i])
                    .map_err(|_| self.bad("at_source", format!("row {i} is out of range")))?;
                let seq = u64::try_from(seq[i])
                    .map_err(|_| self.bad("at_seq", format!("row {i} is negative")))?;
                Ok(OrderKey {
                    ts: ts[i],
                    by: by[i],
                    source,
                    seq,
                })
            })
            .collect()
    }
}

/// An int64 column of the given slots' values of `v` (counts, for `n`).
pub(crate) fn int64_column(v: &[i64], slots: &[u32]) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(
        slots.iter().map(|&s| v[s as usize]),
    ))
}

/// A binary column of the given slots' exact sums.
pub(crate) fn exact_sum_column(sums: &[ExactSum], slots: &[u32]) -> ArrayRef {
    Arc::new(BinaryArray::from_iter_values(
        slots.iter().map(|&s| sums[s as usize].to_bytes()),
    ))
}

/// The `at_ts`, `at_by`, `at_source`, `at_seq` columns of the given slots' order keys.
pub(crate) fn order_columns(at: &[OrderKey], slots: &[u32]) -> Vec<ArrayRef> {
    let col = |f: fn(&OrderKey) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            slots.iter().map(|&s| f(&at[s as usize])),
        ))
    };
    vec![
        col(|k| k.ts),
        col(|k| k.by),
        col(|k| k.source as i64),
        col(|k| k.seq as i64),
    ]
}
