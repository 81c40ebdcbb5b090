//! Canonical row orders: how a partitioned operator merges its partitions' outputs (by input row, then by
//! a key of the output columns), and how top-k ranks rows (score descending, then key ascending). Both must
//! depend on the rows only, never on which partition or worker produced them.

use arrow_array::{RecordBatch, UInt32Array};
use arrow_row::Rows;
use arrow_schema::{Schema, SortOptions};

use crate::error::{Error, Result};
use crate::keys::RowCodec;

/// A sort order over some output columns.
#[derive(Debug)]
pub(crate) struct SortKey {
    codec: RowCodec,
}

/// Ascending, nulls first (the order of keys everywhere in windgate).
pub(crate) const ASC: SortOptions = SortOptions {
    descending: false,
    nulls_first: true,
};

/// Descending with nulls last (SQL's `ORDER BY score DESC` puts nulls last in most engines' defaults for
/// DESC in DuckDB and Spark).
pub(crate) const DESC: SortOptions = SortOptions {
    descending: true,
    nulls_first: false,
};

impl SortKey {
    pub fn new(schema: &Schema, cols: &[(usize, SortOptions)], param: &str) -> Result<Self> {
        Ok(Self {
            codec: RowCodec::with_options(schema, cols, param)?,
        })
    }

    pub fn rows(&self, batch: &RecordBatch) -> Result<Rows> {
        self.codec.encode(batch)
    }

    /// `rows` (encoded by this key) in the order `indices`.
    pub fn permute(&self, rows: &Rows, indices: &[u32]) -> Rows {
        self.codec.permute(rows, indices)
    }

    /// Positions of `batch`'s rows sorted by `(prefix[i], key)`, stable (equal rows keep their order).
    pub fn sort_indices(&self, batch: &RecordBatch, prefix: Option<&[u32]>) -> Result<Vec<u32>> {
        let rows = self.rows(batch)?;
        let mut idx: Vec<u32> = (0..batch.num_rows() as u32).collect();
        match prefix {
            Some(p) => idx.sort_by(|&a, &b| {
                p[a as usize]
                    .cmp(&p[b as usize])
                    .then_with(|| rows.row(a as usize).cmp(&rows.row(b as usize)))
            }),
            None => idx.sort_by(|&a, &b| rows.row(a as usize).cmp(&rows.row(b as usize))),
        }
        Ok(idx)
    }
}

/// The rows of `batch` at `indices`, in that order.
pub(crate) fn take(batch: &RecordBatch, indices: &[u32]) -> Result<RecordBatch> {
    let idx = UInt32Array::from(indices.to_vec());
    arrow_select::take::take_record_batch(batch, &idx).map_err(Error::output)
}
