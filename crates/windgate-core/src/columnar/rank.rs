//! Ranking rows for top-k: score descending (nulls last), ties by key ascending (nulls first), then by
//! arrival. Shared by the stateful `topk` and `window_count`'s per-window `top_k`.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Schema, SortOptions};

use super::order::{ASC, DESC, SortKey, take};
use crate::error::{Error, ErrorKind, Result};

/// The ranking order over a batch's score and key columns.
#[derive(Debug)]
pub(crate) struct Ranking {
    key: SortKey,
}

impl Ranking {
    /// `descending`: the largest scores first (the usual top-k); otherwise the smallest.
    pub fn new(
        schema: &Schema,
        score: usize,
        keys: &[usize],
        descending: bool,
        param: &str,
    ) -> Result<Self> {
        let score_order = if descending {
            DESC
        } else {
            SortOptions {
                descending: false,
                nulls_first: false,
            }
        };
        let mut cols = vec![(score, score_order)];
        cols.extend(keys.iter().map(|k| (*k, ASC)));
        Ok(Self {
            key: SortKey::new(schema, &cols, param)?,
        })
    }

    /// The best `k` rows of `batch`, best first.
    pub fn top(&self, batch: &RecordBatch, k: usize) -> Result<RecordBatch> {
        let mut idx = self.key.sort_indices(batch, None)?;
        idx.truncate(k);
        take(batch, &idx)
    }
}

/// A score column must not hold NaN (it has no place in a ranking); `op` and `column` name it.
pub(crate) fn check_no_nan(col: &ArrayRef, op: &str, column: &str, row0: u64) -> Result<()> {
    let pos = match col.data_type() {
        DataType::Float64 => {
            let a = col.as_primitive::<Float64Type>();
            (0..a.len()).find(|&i| a.is_valid(i) && a.value(i).is_nan())
        }
        DataType::Float32 => {
            let a = col.as_primitive::<Float32Type>();
            (0..a.len()).find(|&i| a.is_valid(i) && a.value(i).is_nan())
        }
        _ => None,
    };
    match pos {
        None => Ok(()),
        Some(i) => Err(Error::new(
            ErrorKind::InvalidValue,
            format!(
                "{op}: column '{column}' is NaN at row {}; a score must be a number (or null)",
                row0 + i as u64
            ),
        )),
    }
}
