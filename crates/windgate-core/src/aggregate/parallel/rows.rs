//! The rows the operator hands to a parallel engine: admitted, keyed and owned, so they can cross threads.

use arrow_array::ArrayRef;
use arrow_buffer::ScalarBuffer;

use crate::aggregate::state::{InputValues, RowOrder};
use crate::time::WindowSpec;

/// Rows admitted by the operator, owned so that they can cross to the workers. A clone shares the columns.
#[derive(Clone)]
pub(crate) struct Admitted {
    pub(crate) ts: ScalarBuffer<i64>,
    /// Key ids in the operator's dictionary; empty when the engine numbers keys on its workers (the sharded
    /// engine in batch mode), which read `key_columns` instead.
    pub(crate) keys: Vec<u32>,
    /// The rows' `by` columns (shared with the batch, not copied).
    pub(crate) key_columns: Vec<ArrayRef>,
    /// `None`: every row admitted.
    pub(crate) keep: Option<Vec<bool>>,
    /// The latest admitted time when the caller knows it already (admission finds it), so that no engine
    /// reads the times again for it on the caller's thread; `None`: not known, [`Self::last_pane`] finds it.
    pub(crate) max_ts: Option<i64>,
    pub(crate) inputs: Vec<InputValues>,
    pub(crate) source: u32,
    pub(crate) seq0: u64,
    /// The `order_by` column (ties of equal times), if the query has one.
    pub(crate) by: Option<ScalarBuffer<i64>>,
    /// The times never decrease (the caller read them all: see `WindowAggregator::push_in_range`).
    pub(crate) sorted: bool,
}

impl Admitted {
    pub(crate) fn order(&self) -> RowOrder<'_> {
        RowOrder {
            ts: &self.ts,
            by: self.by.as_deref(),
            source: self.source,
            seq0: self.seq0,
        }
    }

    /// The pane of the latest admitted row. The engines without panes (the line, the ring, the multiway
    /// designs) find each row's windows themselves; the operator still needs the last window to flush.
    pub(crate) fn last_pane(&self, spec: WindowSpec) -> Option<i64> {
        // Branch-free folds: the sharded engine runs this on the caller's thread for every row.
        let max = match self.keep.as_deref() {
            _ if self.max_ts.is_some() => self.max_ts,
            None => self.ts.iter().copied().max(),
            Some(keep) => {
                let (any, max) = (self.ts.iter().zip(keep))
                    .fold((false, i64::MIN), |(any, m), (&t, &k)| {
                        (any | k, if k { m.max(t) } else { m })
                    });
                any.then_some(max)
            }
        };
        max.map(|t| spec.pane_of(t))
    }
}
