//! `filter`: keeps the rows where a predicate is true (SQL's `WHERE`). Stateless.

use arrow_array::BooleanArray;
use arrow_schema::SchemaRef;

use super::expr::{BoundPredicate, RowPredicate};
use super::value::{Params, Value};
use super::{Bound, Chunk, ColumnarOp, check_schema};
use crate::error::{Error, Result};
use crate::runtime::pipeline::Stateless;

/// Keeps the rows where `predicate` is true (null counts as false).
#[derive(Debug, Clone)]
pub struct Filter {
    predicate: RowPredicate,
}

impl Filter {
    pub fn new(predicate: RowPredicate) -> Self {
        Self { predicate }
    }

    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new("filter", spec, &["predicate"])?;
        let predicate = match p.get("predicate") {
            Some(v) => RowPredicate::parse(v, &p.label("predicate"))?,
            None => return Err(p.error("predicate", "is required")),
        };
        Ok(Self::new(predicate))
    }
}

impl ColumnarOp for Filter {
    fn name(&self) -> &'static str {
        "filter"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let predicate = self.predicate.bind(input, "filter: predicate")?;
        let op = FilterOp {
            predicate,
            input: input.clone(),
        };
        Ok(Bound::new(input.clone(), move |p| p.stateless(op)))
    }
}

struct FilterOp {
    predicate: BoundPredicate,
    input: SchemaRef,
}

impl Stateless<Chunk> for FilterOp {
    fn name(&self) -> &str {
        "filter"
    }

    fn process(&self, input: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let batch = input.batch;
        check_schema("filter", &self.input, &batch)?;
        let mask = self.predicate.mask(&batch)?;
        let kept = mask.count_set_bits();
        if kept == batch.num_rows() {
            out.push(Chunk::new(batch));
        } else if kept > 0 {
            let mask = BooleanArray::new(mask, None);
            let filtered =
                arrow_select::filter::filter_record_batch(&batch, &mask).map_err(Error::output)?;
            out.push(Chunk::new(filtered));
        }
        Ok(())
    }
}
