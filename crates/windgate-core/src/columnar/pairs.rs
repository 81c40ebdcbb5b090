//! `pairs`: expands a list column into every unordered pair of distinct values, one output row per pair
//! (item pairs of a basket or session). Stateless; selectivity can be far above 1.
//!
//! A row whose list has the distinct non-null values `v1 < v2 < ... < vm` (in the values' natural order,
//! nulls skipped, duplicates once) becomes the rows `(v_i, v_j)` for `i < j`, in the order
//! `(v1, v2), (v1, v3), ..., (v2, v3), ...`; the other columns are repeated and the list column is replaced
//! by the two pair columns. A null or short list gives no rows.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, OffsetSizeTrait, RecordBatch, UInt32Array};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::value::{Params, Value};
use super::{Bound, Chunk, ColumnarOp, check_schema};
use crate::error::{Error, ErrorKind, Result};
use crate::keys::column_index;
use crate::runtime::pipeline::Stateless;

/// Pairs of distinct values of a list column.
#[derive(Debug, Clone)]
pub struct Pairs {
    column: String,
    names: (String, String),
}

impl Pairs {
    /// `names`: the two output columns (default `<column>_a`, `<column>_b`).
    pub fn new(column: &str, names: Option<(&str, &str)>) -> Self {
        let names = names.map_or_else(
            || (format!("{column}_a"), format!("{column}_b")),
            |(a, b)| (a.to_string(), b.to_string()),
        );
        Self {
            column: column.to_string(),
            names,
        }
    }

    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new("pairs", spec, &["column", "names"])?;
        let column = p.string("column")?;
        let names = p.strings("names")?;
        match names.as_slice() {
            [] => Ok(Self::new(&column, None)),
            [a, b] if a != b => Ok(Self::new(&column, Some((a, b)))),
            _ => Err(Error::param(
                "pairs: names",
                format!("expected two different column names, got {names:?}"),
            )),
        }
    }
}

impl ColumnarOp for Pairs {
    fn name(&self) -> &'static str {
        "pairs"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let index = column_index(input, &self.column, "pairs: column")?;
        let field = input.field(index);
        let value_type = match field.data_type() {
            DataType::List(f) | DataType::LargeList(f) => f.data_type().clone(),
            other => {
                return Err(Error::new(
                    ErrorKind::ColumnType,
                    format!(
                        "pairs: column '{}' must be a list column (e.g. sessionize's values), got {other}",
                        self.column
                    ),
                ));
            }
        };
        let sort = vec![SortField::new(value_type.clone())];
        if !RowConverter::supports_fields(&sort) {
            return Err(Error::new(
                ErrorKind::ColumnType,
                format!(
                    "pairs: the values of column '{}' ({value_type}) cannot be compared",
                    self.column
                ),
            ));
        }
        let mut fields: Vec<Field> = Vec::new();
        for (i, f) in input.fields().iter().enumerate() {
            if i == index {
                fields.push(Field::new(&self.names.0, value_type.clone(), true));
                fields.push(Field::new(&self.names.1, value_type.clone(), true));
            } else {
                fields.push(f.as_ref().clone());
            }
        }
        let output = Arc::new(Schema::new(fields));
        for name in [&self.names.0, &self.names.1] {
            if output.fields().iter().filter(|f| f.name() == name).count() > 1 {
                return Err(Error::param(
                    "pairs: names",
                    format!("the output column {name:?} is already an input column"),
                ));
            }
        }
        let op = PairsOp {
            index,
            converter: RowConverter::new(sort)?,
            input: input.clone(),
            output: output.clone(),
        };
        Ok(Bound::new(output, move |p| p.stateless(op)))
    }
}

struct PairsOp {
    index: usize,
    converter: RowConverter,
    input: SchemaRef,
    output: SchemaRef,
}

impl PairsOp {
    fn expand<O: OffsetSizeTrait>(&self, batch: &RecordBatch) -> Result<Option<RecordBatch>> {
        let list = batch.column(self.index).as_list::<O>();
        let values = list.values();
        let rows = self
            .converter
            .convert_columns(std::slice::from_ref(values))?;
        let offsets = list.value_offsets();
        let (mut src, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
        let mut distinct: Vec<u32> = Vec::new();
        for row in 0..list.len() {
            if list.is_null(row) {
                continue;
            }
            let (start, end) = (offsets[row].as_usize(), offsets[row + 1].as_usize());
            distinct.clear();
            distinct.extend(
                (start..end)
                    .filter(|&j| values.is_valid(j))
                    .map(|j| j as u32),
            );
            distinct.sort_by(|&x, &y| rows.row(x as usize).cmp(&rows.row(y as usize)));
            distinct.dedup_by(|x, y| rows.row(*x as usize) == rows.row(*y as usize));
            for i in 0..distinct.len() {
                for j in i + 1..distinct.len() {
                    src.push(row as u32);
                    a.push(distinct[i]);
                    b.push(distinct[j]);
                }
            }
        }
        if src.is_empty() {
            return Ok(None);
        }
        let take = |arr: &ArrayRef, idx: Vec<u32>| -> Result<ArrayRef> {
            arrow_select::take::take(arr, &UInt32Array::from(idx), None).map_err(Error::output)
        };
        let mut cols = Vec::with_capacity(batch.num_columns() + 1);
        for (i, c) in batch.columns().iter().enumerate() {
            if i == self.index {
                cols.push(take(values, std::mem::take(&mut a))?);
                cols.push(take(values, std::mem::take(&mut b))?);
            } else {
                cols.push(take(c, src.clone())?);
            }
        }
        Ok(Some(
            RecordBatch::try_new(self.output.clone(), cols).map_err(Error::output)?,
        ))
    }
}

impl Stateless<Chunk> for PairsOp {
    fn name(&self) -> &str {
        "pairs"
    }

    fn process(&self, input: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let batch = input.batch;
        check_schema("pairs", &self.input, &batch)?;
        let expanded = match batch.column(self.index).data_type() {
            DataType::LargeList(_) => self.expand::<i64>(&batch)?,
            _ => self.expand::<i32>(&batch)?,
        };
        out.extend(expanded.map(Chunk::new));
        Ok(())
    }
}
