//! The checkpoint's copy of a parallel engine's open state: the admitted row batches whose panes are still
//! open (their columns shared with the batches, not copied), lifted into a pane store of the operator's own
//! once they hold more than [`LIFT_ROWS`] rows, so that memory stays bounded by the open state (a stream
//! without a lateness bound keeps every pane open until the end, and its rows must not all stay alive).

use std::collections::VecDeque;

use super::super::pane_engine::PaneEngine;
use super::super::parallel::Admitted;
use super::super::slots::SlotStore;
use super::Bound;

/// Rows kept as they came before they are lifted into panes. A stream with a lateness bound usually emits
/// (and prunes) long before; lifting costs about what the pane engine's ingest does.
const LIFT_ROWS: usize = 1 << 20;

#[derive(Default)]
pub(super) struct RowLog {
    /// `(the batch's last pane, its rows)`, in arrival order.
    batches: VecDeque<(i64, Admitted)>,
    rows: usize,
    /// Rows lifted so far (`None` until the first lift).
    lifted: Option<PaneEngine>,
}

impl RowLog {
    /// Keeps `rows` (admitted to the engine too).
    pub(super) fn push(&mut self, b: &Bound, rows: &Admitted) {
        let Some(pane) = rows.last_pane(b.spec) else {
            return;
        };
        self.rows += rows.ts.len();
        self.batches.push_back((pane, rows.clone()));
        if self.rows > LIFT_ROWS {
            self.lift(b);
        }
    }

    /// Forgets what only panes before `needed` hold (their windows are out).
    pub(super) fn prune(&mut self, needed: i64) {
        self.batches.retain(|(pane, rows)| {
            let keep = *pane >= needed;
            if !keep {
                self.rows -= rows.ts.len();
            }
            keep
        });
        if let Some(panes) = &mut self.lifted {
            panes.forget_before(needed);
        }
    }

    /// Every kept row, in panes.
    pub(super) fn panes(&mut self, b: &Bound) -> &PaneEngine {
        self.lift(b);
        self.lifted.as_ref().expect("lifted above")
    }

    fn lift(&mut self, b: &Bound) {
        let panes = self.lifted.get_or_insert_with(|| {
            PaneEngine::new(b.spec, SlotStore::new(&b.metas), SlotStore::new(&b.metas))
        });
        for (_, rows) in self.batches.drain(..) {
            let keep = rows.keep.as_deref();
            panes.ingest(&rows.ts, &rows.keys, keep, &rows.inputs, rows.order());
        }
        self.rows = 0;
    }
}
