//! Putting a partitioned operator's outputs back in order: each part sorts its own output by (attributed
//! input row, canonical key) while the partitions run in parallel, and `combine` k-way merges the sorted
//! runs, so the serial step is a merge (`O(n log p)`) rather than a sort of everything.
//!
//! The merge gives exactly the order of a stable sort of the runs' concatenation (in route order): ties
//! on (row, key) go to the earlier run, then the earlier position.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use arrow_array::RecordBatch;
use arrow_row::{Row, Rows};

use super::order::{SortKey, take};
use crate::error::{Error, Result};

/// One part's output, sorted.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub batch: RecordBatch,
    pub at: Vec<u32>,
    /// The canonical key of each row (when the operator has one).
    pub rows: Option<Rows>,
}

impl Run {
    /// Sorts a part's output by `(at, key)`, stably. Without a key the rows are already in `at` order
    /// (row-triggered outputs come out as the part's rows are processed).
    pub fn sorted(batch: RecordBatch, at: Vec<u32>, key: Option<&SortKey>) -> Result<Self> {
        let Some(key) = key else {
            debug_assert!(at.windows(2).all(|w| w[0] <= w[1]));
            return Ok(Self {
                batch,
                at,
                rows: None,
            });
        };
        let rows = key.rows(&batch)?;
        let mut idx: Vec<u32> = (0..at.len() as u32).collect();
        idx.sort_by(|&a, &b| {
            at[a as usize]
                .cmp(&at[b as usize])
                .then_with(|| rows.row(a as usize).cmp(&rows.row(b as usize)))
        });
        if idx.iter().enumerate().all(|(i, &j)| i as u32 == j) {
            return Ok(Self {
                batch,
                at,
                rows: Some(rows),
            });
        }
        Ok(Self {
            batch: take(&batch, &idx)?,
            at: idx.iter().map(|&i| at[i as usize]).collect(),
            rows: Some(key.permute(&rows, &idx)),
        })
    }
}

/// A run's next row in the merge heap.
struct Head<'a> {
    at: u32,
    row: Option<Row<'a>>,
    run: usize,
    pos: usize,
}

impl Head<'_> {
    fn key(&self) -> (u32, Option<&Row<'_>>, usize, usize) {
        (self.at, self.row.as_ref(), self.run, self.pos)
    }
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head<'_> {}

impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// The runs merged into one batch (and each row's attribution).
pub(crate) fn merge(mut runs: Vec<Run>) -> Result<(RecordBatch, Vec<u32>)> {
    runs.retain(|r| !r.at.is_empty());
    if runs.len() == 1 {
        let r = runs.pop().expect("one run");
        return Ok((r.batch, r.at));
    }
    let total: usize = runs.iter().map(|r| r.at.len()).sum();
    let head = |run: usize, pos: usize| {
        let r = &runs[run];
        (pos < r.at.len()).then(|| Head {
            at: r.at[pos],
            row: r.rows.as_ref().map(|rows| rows.row(pos)),
            run,
            pos,
        })
    };
    let mut heap: BinaryHeap<Reverse<Head>> = (0..runs.len())
        .filter_map(|i| head(i, 0))
        .map(Reverse)
        .collect();
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(total);
    let mut at = Vec::with_capacity(total);
    while let Some(Reverse(h)) = heap.pop() {
        order.push((h.run, h.pos));
        at.push(h.at);
        if let Some(next) = head(h.run, h.pos + 1) {
            heap.push(Reverse(next));
        }
    }
    let batches: Vec<&RecordBatch> = runs.iter().map(|r| &r.batch).collect();
    Ok((
        arrow_select::interleave::interleave_record_batch(&batches, &order)
            .map_err(Error::output)?,
        at,
    ))
}
