//! The input rows a preference query may still output. The kernels keep only order keys and values; the rows
//! themselves (every column) stay here until no open window can select them.

use std::collections::VecDeque;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrow_select::interleave::interleave_record_batch;

use crate::error::{Error, Result};

struct Chunk {
    /// Arrival position of row 0.
    seq0: u64,
    batch: RecordBatch,
    /// The last window any of its admitted rows belongs to.
    last_window: i64,
}

#[derive(Default)]
pub(super) struct Retained {
    chunks: VecDeque<Chunk>,
}

impl Retained {
    /// Keeps `batch` (rows `seq0..`) until window `last_window` has been emitted.
    pub(super) fn push(&mut self, seq0: u64, batch: RecordBatch, last_window: i64) {
        if batch.num_rows() > 0 {
            self.chunks.push_back(Chunk {
                seq0,
                batch,
                last_window,
            });
        }
    }

    /// Forgets the chunks whose rows all lie in windows up to `window` (emitted). Chunks go in arrival order,
    /// so a chunk behind a longer-lived one waits for it: at most the lateness bound's worth of rows.
    pub(super) fn release_through(&mut self, window: i64) {
        while self.chunks.front().is_some_and(|c| c.last_window <= window) {
            self.chunks.pop_front();
        }
    }

    /// The rows at arrival positions `seqs`, in that order (each must still be retained).
    pub(super) fn gather(&self, schema: &SchemaRef, seqs: &[u64]) -> Result<RecordBatch> {
        if seqs.is_empty() {
            return Ok(RecordBatch::new_empty(schema.clone()));
        }
        let first = self.chunks.front().map_or(0, |c| c.seq0);
        let indices: Vec<(usize, usize)> = seqs
            .iter()
            .map(|&s| {
                debug_assert!(s >= first, "row {s} was released");
                let c = self.chunks.partition_point(|c| c.seq0 <= s) - 1;
                (c, (s - self.chunks[c].seq0) as usize)
            })
            .collect();
        let batches: Vec<&RecordBatch> = self.chunks.iter().map(|c| &c.batch).collect();
        interleave_record_batch(&batches, &indices).map_err(Error::output)
    }

    pub(super) fn rows(&self) -> usize {
        self.chunks.iter().map(|c| c.batch.num_rows()).sum()
    }
}
