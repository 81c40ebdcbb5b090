//! The side output of `on_late="keep"`: each late row itself, with every input column, and the watermark it
//! met on arrival, in arrival order (Flink's late-data side output; Spark has none).
//!
//! A late row is dropped from the windows exactly as under `on_late="drop"` (and counted in `late_rows`), so
//! the main output does not change; the kept rows wait here until the caller takes them
//! ([`super::WindowAggregator::take_late_rows`]), so their memory is bounded by what the caller has not yet
//! taken. A checkpoint carries the rows not yet taken.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Int32Array, Int64Array, RecordBatch, UInt32Array, new_null_array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use arrow_select::concat::concat_batches;
use arrow_select::take::take;

use crate::arrow_io::int_column_as;
use crate::error::{Error, Result};

/// The column naming the watermark a late row met.
const WATERMARK_COLUMN: &str = "watermark";
/// The column naming a late row's source (only for operators with several sources).
const SOURCE_COLUMN: &str = "source";

/// The late rows kept and not yet taken, all in one schema.
#[derive(Default)]
pub(crate) struct LateRows {
    /// The input columns, then `source` (several sources only), then `watermark`.
    schema: Option<SchemaRef>,
    /// Whether the schema has the `source` column.
    source_column: bool,
    kept: Vec<RecordBatch>,
}

impl LateRows {
    /// Fixes the side output's schema from the operator's input schema (`input`, dictionaries decoded); its
    /// extra columns must not collide with an input column.
    pub(crate) fn bind(
        &mut self,
        input: &SchemaRef,
        time_type: &DataType,
        sources: usize,
    ) -> Result<()> {
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        let mut extra = vec![];
        if sources > 1 {
            extra.push(Field::new(SOURCE_COLUMN, DataType::Int32, false));
        }
        extra.push(Field::new(WATERMARK_COLUMN, time_type.clone(), false));
        for f in &extra {
            if input.field_with_name(f.name()).is_ok() {
                return Err(Error::param(
                    "on_late",
                    format!(
                        "on_late=\"keep\" adds a column '{}' to the late rows, and the input already has one; \
                         rename that column",
                        f.name()
                    ),
                ));
            }
        }
        fields.extend(extra);
        self.source_column = sources > 1;
        self.schema = Some(Arc::new(Schema::new(fields)));
        Ok(())
    }

    /// The side output's schema (once bound).
    pub(crate) fn schema(&self) -> Option<&SchemaRef> {
        self.schema.as_ref()
    }

    /// Keeps the late rows [`Self::gather`] built.
    pub(crate) fn push(&mut self, rows: Option<RecordBatch>) {
        self.kept.extend(rows);
    }

    /// The rows `late` (index in `batch`, watermark met) of a batch of `source` as one batch of the side
    /// output's schema, built before anything is kept (so that an error changes nothing). A batch whose columns
    /// differ from the first source's (another source's extra columns) is read by name: columns the side
    /// output has and the batch lacks are null, columns only the batch has are left out.
    pub(crate) fn gather(
        &self,
        batch: &RecordBatch,
        late: &[(u32, i64)],
        source: usize,
    ) -> Result<RecordBatch> {
        let schema = self.schema.as_ref().expect("bound before rows are read");
        let idx = UInt32Array::from_iter_values(late.iter().map(|l| l.0));
        let n = late.len();
        let fields = schema.fields();
        let inputs = fields.len() - 1 - usize::from(self.source_column);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(fields.len());
        for f in &fields[..inputs] {
            columns.push(match batch.column_by_name(f.name()) {
                Some(c) if c.data_type() == f.data_type() => {
                    take(c.as_ref(), &idx, None).map_err(Error::output)?
                }
                _ => new_null_array(f.data_type(), n),
            });
        }
        if self.source_column {
            columns.push(Arc::new(Int32Array::from(vec![source as i32; n])));
        }
        let wm = Int64Array::from_iter_values(late.iter().map(|l| l.1));
        columns.push(int_column_as(
            Arc::new(wm),
            fields[fields.len() - 1].data_type(),
        )?);
        RecordBatch::try_new(schema.clone(), columns).map_err(Error::output)
    }

    /// Rows kept and not yet taken.
    pub(crate) fn pending(&self) -> usize {
        self.kept.iter().map(|b| b.num_rows()).sum()
    }

    /// Every row kept since the last call, in arrival order; `None` before the schema is known.
    pub(crate) fn take(&mut self) -> Result<Option<RecordBatch>> {
        let Some(schema) = self.schema.clone() else {
            return Ok(None);
        };
        let out = concat_batches(&schema, &self.kept).map_err(Error::output)?;
        self.kept.clear();
        Ok(Some(out))
    }

    /// The rows not yet taken (for a checkpoint).
    pub(crate) fn kept(&self) -> &[RecordBatch] {
        &self.kept
    }

    /// Restores the rows a checkpoint carried.
    pub(crate) fn restore(&mut self, batches: Vec<RecordBatch>) {
        self.kept = batches;
    }
}
