//! The item of a columnar pipeline: an Arrow record batch, plus — only while inside one partitioned
//! operator — what connects a partition's part and its outputs back to the input rows.
//!
//! A partitioned operator *routes* an input batch into one part per partition. A part is the whole input
//! batch (a cheap, reference-counted clone) with the positions of the rows its partition owns and what
//! `route` computed once for every part (the key encoding, the stream time). A part's outputs say for
//! each row which input position produced it, so that `combine` can merge the partitions' outputs back into
//! input-row order. Between operators a chunk is a plain batch.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::BooleanBuffer;
use arrow_row::Rows;

use super::partition_merge::Run;

/// One batch of rows flowing through a columnar pipeline.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub(crate) batch: RecordBatch,
    pub(crate) tag: Tag,
}

#[derive(Debug, Clone)]
pub(crate) enum Tag {
    /// A batch between operators.
    Plain,
    /// One partition's part of a routed input: the positions (ascending) of the rows it owns.
    Part { routed: Arc<Routed>, rows: Vec<u32> },
    /// A part's output, sorted by the input position each row is attributed to ([`FINISH`] for rows
    /// emitted at end of stream), then by the operator's canonical key.
    Attributed(Box<Run>),
}

/// The attribution of end-of-stream outputs (after every input row).
pub(crate) const FINISH: u32 = u32::MAX;

/// What `route` computed once per input batch, shared by all its parts.
#[derive(Debug)]
pub(crate) struct Routed {
    /// The key columns in the row format (byte-comparable, hashable).
    pub keys: Rows,
    /// The operator's time column as i64 (nulls are 0 here; `valid` says which rows have a time).
    pub time: Option<Vec<i64>>,
    pub time_valid: Option<BooleanBuffer>,
    /// Running maximum of the valid times, position by position (stream time within this batch;
    /// `i64::MIN` before the first valid time). Empty unless the operator closes things by stream time.
    pub clock: Vec<i64>,
    /// The operator's row classes (predicates), true where the predicate is true.
    pub masks: Vec<BooleanBuffer>,
    /// A value column in the row format, when the operator carries values (sessionize, last_n_before).
    pub values: Option<Rows>,
    /// Columns cast to the types the operator computes in.
    pub casts: Vec<arrow_array::ArrayRef>,
}

impl Chunk {
    pub fn new(batch: RecordBatch) -> Self {
        Self {
            batch,
            tag: Tag::Plain,
        }
    }

    pub fn batch(&self) -> &RecordBatch {
        &self.batch
    }

    pub fn into_batch(self) -> RecordBatch {
        self.batch
    }

    pub fn num_rows(&self) -> usize {
        match &self.tag {
            Tag::Part { rows, .. } => rows.len(),
            _ => self.batch.num_rows(),
        }
    }

    /// A part's sorted output (its batch also stands as the chunk's batch: a cheap, reference-counted clone).
    pub(crate) fn run(run: Run) -> Self {
        Self {
            batch: run.batch.clone(),
            tag: Tag::Attributed(Box::new(run)),
        }
    }
}

impl From<RecordBatch> for Chunk {
    fn from(batch: RecordBatch) -> Self {
        Self::new(batch)
    }
}
