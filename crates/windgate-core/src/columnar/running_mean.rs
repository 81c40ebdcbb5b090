//! `running_mean`: appends the mean of a column over every row so far (this one included), nulls ignored
//! (null until the first value). Stateful.
//!
//! The mean is `sum / count` with the sum exact — an i128 for integers, an exact superaccumulator for
//! floats — rounded once, so it depends on the values seen and not on how they were grouped.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::value::{Params, Value};
use super::{Bound, Chunk, ColumnarOp, check_schema, check_unique};
use crate::error::{Error, ErrorKind, Result};
use crate::exact_sum::ExactSum;
use crate::keys::column_index;
use crate::runtime::pipeline::Stateful;

/// The running mean of a column.
#[derive(Debug, Clone)]
pub struct RunningMean {
    column: String,
    output: String,
}

impl RunningMean {
    /// Output column `output` (default `mean_<column>`).
    pub fn new(column: &str, output: Option<&str>) -> Self {
        Self {
            column: column.to_string(),
            output: output.map_or_else(|| format!("mean_{column}"), str::to_string),
        }
    }

    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new("running_mean", spec, &["column", "output"])?;
        let column = p.string("column")?;
        let output = p.opt_string("output")?;
        Ok(Self::new(&column, output.as_deref()))
    }
}

impl ColumnarOp for RunningMean {
    fn name(&self) -> &'static str {
        "running_mean"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let index = column_index(input, &self.column, "running_mean: column")?;
        let dt = input.field(index).data_type();
        let float = match dt {
            d if d.is_integer() => false,
            d if d.is_floating() => true,
            other => {
                return Err(Error::new(
                    ErrorKind::ColumnType,
                    format!(
                        "running_mean: column '{}' must be numeric, got {other}",
                        self.column
                    ),
                ));
            }
        };
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new(&self.output, DataType::Float64, true));
        check_unique(&fields, "running_mean: output")?;
        let output = Arc::new(Schema::new(fields));
        let op = MeanOp {
            index,
            float,
            input: input.clone(),
            output: output.clone(),
            n: 0,
            int_sum: 0,
            float_sum: ExactSum::new(),
        };
        Ok(Bound::new(output, move |p| p.stateful(op)))
    }
}

struct MeanOp {
    index: usize,
    float: bool,
    input: SchemaRef,
    output: SchemaRef,
    n: u64,
    int_sum: i128,
    float_sum: ExactSum,
}

impl Stateful<Chunk> for MeanOp {
    fn name(&self) -> &str {
        "running_mean"
    }

    fn process(&mut self, input: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let batch = input.batch;
        check_schema("running_mean", &self.input, &batch)?;
        let target = if self.float {
            DataType::Float64
        } else {
            DataType::Int64
        };
        let col = arrow_cast::cast(batch.column(self.index), &target)?;
        let mut means: Vec<Option<f64>> = Vec::with_capacity(batch.num_rows());
        for i in 0..col.len() {
            if col.is_valid(i) {
                self.n += 1;
                if self.float {
                    self.float_sum
                        .add(col.as_primitive::<Float64Type>().value(i));
                } else {
                    self.int_sum += col.as_primitive::<Int64Type>().value(i) as i128;
                }
            }
            means.push((self.n > 0).then(|| {
                let sum = if self.float {
                    self.float_sum.value()
                } else {
                    self.int_sum as f64
                };
                sum / self.n as f64
            }));
        }
        let mut cols = batch.columns().to_vec();
        cols.push(Arc::new(Float64Array::from(means)));
        out.push(Chunk::new(
            RecordBatch::try_new(self.output.clone(), cols).map_err(Error::output)?,
        ));
        Ok(())
    }
}
