//! A window's partial states while they are merged (from pane partitions or straight from rows), and the
//! window once its aggregates are finished.
//!
//! Partial states combine exactly (integer counts and sums, exact float sums, extremes and picks by the total
//! order), so a pane split over workers, or merged into its windows in any order, gives the very states the
//! single-threaded pane engine computes.

use std::sync::Arc;

use arrow_array::ArrayRef;

use crate::aggregate::slots::{KeySlots, SlotStore};
use crate::aggregate::state::AggMeta;
use crate::error::Result;

/// One window's per-key partial states.
pub(crate) struct AggWindow {
    keys: KeySlots,
    store: SlotStore,
    /// Scratch for merges.
    pairs: Vec<(u32, u32)>,
}

impl AggWindow {
    pub(crate) fn new(metas: &[Arc<AggMeta>]) -> Self {
        Self {
            keys: KeySlots::default(),
            store: SlotStore::new(metas),
            pairs: Vec::new(),
        }
    }

    /// Combines `(key, slot)` states of `from` into this window.
    pub(crate) fn merge_slots(&mut self, from: &SlotStore, entries: &[(u32, u32)]) {
        self.keys
            .merge(&mut self.store, from, entries, &mut self.pairs);
    }

    /// Combines another window's states into this one.
    pub(crate) fn combine(&mut self, other: &AggWindow) {
        self.merge_slots(&other.store, &other.keys.entries);
    }

    /// Finishes every aggregate of every slot. A window's store only ever grows (slots are never released), so
    /// its slots are `0..len`.
    pub(crate) fn finish(self) -> FinishedWindow {
        debug_assert_eq!(self.store.live(), self.keys.entries.len());
        let slots: Vec<u32> = (0..self.keys.entries.len() as u32).collect();
        let columns = self.store.states.iter().map(|s| s.finish(&slots)).collect();
        FinishedWindow {
            keys: self.keys,
            columns,
        }
    }
}

/// A window whose aggregates were finished by the worker that completed it: the caller only orders and
/// gathers rows (a float sum's finish rounds a superaccumulator, the costliest per-row step of an emission).
pub(crate) struct FinishedWindow {
    pub(crate) keys: KeySlots,
    /// Aggregate `a`'s values at `columns[a]`, row `s` for the key in slot `s`; or the error finishing raised
    /// (an integer sum that overflows).
    pub(crate) columns: Result<Vec<ArrayRef>>,
}
