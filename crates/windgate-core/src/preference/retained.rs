//! The input rows a preference query may still output. The kernels keep only order keys and values; the rows
//! themselves (every column) stay here until no open window can select them.

use std::collections::VecDeque;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrow_select::interleave::interleave_record_batch;

use crate::error::{Error, Result};

pub(super) struct Chunk {
    /// Arrival position of row 0.
    pub(super) seq0: u64,
    pub(super) batch: RecordBatch,
    /// The last window any of its admitted rows belongs to.
    pub(super) last_window: i64,
    /// Offsets of the rows admission turned away (late or null time), ascending. A checkpoint needs them:
    /// a restored engine is fed the retained rows again, and must see exactly the admitted ones.
    pub(super) refused: Vec<u32>,
}

#[derive(Default)]
pub(super) struct Retained {
    chunks: VecDeque<Chunk>,
}

impl Retained {
    /// Keeps `batch` (rows `seq0..`) until window `last_window` has been emitted; `keep[i]` false: row i
    /// was not admitted.
    pub(super) fn push(
        &mut self,
        seq0: u64,
        batch: RecordBatch,
        last_window: i64,
        keep: Option<&[bool]>,
    ) {
        let refused = keep.map_or_else(Vec::new, |k| {
            (0..k.len() as u32).filter(|&i| !k[i as usize]).collect()
        });
        self.push_chunk(Chunk {
            seq0,
            batch,
            last_window,
            refused,
        });
    }

    /// Keeps a chunk as it is (a restored one). Chunks come in arrival order.
    pub(super) fn push_chunk(&mut self, chunk: Chunk) {
        if chunk.batch.num_rows() > 0 {
            self.chunks.push_back(chunk);
        }
    }

    /// The retained chunks, in arrival order.
    pub(super) fn chunks(&self) -> impl Iterator<Item = &Chunk> {
        self.chunks.iter()
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
