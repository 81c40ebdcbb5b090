//! The pane farm (`"farm"`) over [`AggQuery`]: rows get their pane on the caller's thread, the farm is
//! punctuated by panes and its window-level workers hand windows back finished.

use super::pane_query::AggQuery;
use super::{Admitted, EngineArgs, FinishedWindow, ParallelEngine, pane_frontier};
use crate::aggregate::sliding::SLIDING_MIN_PANES;
use crate::error::Result;
use crate::runtime::farm::{Farm, FarmStats};
use crate::time::{WindowSpec, assign_panes};

pub(crate) fn query(args: &EngineArgs<'_>) -> AggQuery {
    AggQuery {
        metas: args.metas.to_vec(),
    }
}

/// The pane farm: pane-level query (PLQ) and window-level query (WLQ) worker farms. From
/// [`SLIDING_MIN_PANES`] panes a window on, as in the pane engine, the window level builds windows in blocks
/// from shared suffixes and prefixes of their panes (`Farm::sliding`) rather than merging every pane into every
/// window: the cost of a window then no longer grows with its panes.
pub(crate) fn build(args: &EngineArgs<'_>) -> Result<Box<dyn ParallelEngine>> {
    let farm = if args.spec.panes_per_window() >= SLIDING_MIN_PANES {
        Farm::sliding(query(args), args.spec, args.cfg)?
    } else {
        Farm::new(query(args), args.spec, args.cfg)?
    };
    Ok(Box::new(farm))
}

impl ParallelEngine for Farm<AggQuery> {
    fn submit(&mut self, spec: WindowSpec, rows: Admitted) -> Result<Option<i64>> {
        let (panes, max) = assign_panes(spec, &rows.ts, rows.keep.as_deref());
        let keep = rows.keep.clone();
        Farm::submit(self, rows, panes, keep.as_deref())?;
        Ok(max)
    }

    fn advance(&mut self, spec: WindowSpec, last: i64) -> Result<()> {
        self.punctuate(pane_frontier(spec, last))
    }

    fn collect(&mut self, last: i64, wait: bool) -> Result<Vec<(i64, FinishedWindow)>> {
        Farm::collect(self, last, wait)
    }

    fn stats(&self) -> FarmStats {
        Farm::stats(self)
    }
}
