//! The parallel window-aggregation engines as the operator sees them: one [`ParallelEngine`] trait that the pane
//! farm, RRCPA and the research baselines implement, and the [`Driver`] that runs any of them; and [`shard`], the
//! key-partitioned engine, which numbers keys on its workers and so has an interface of its own (see
//! `super::engine`).
//!
//! The shared pieces every engine builds on live here too, below the engines ([`rows`]: the admitted rows;
//! [`window`]: a window's states; [`pane_query`]: aggregation as the pane farm's query), so an engine module
//! imports this module and never the other way round. Which engine runs a query is decided in one place, the
//! registry of [`super::strategy`].

pub(crate) mod farm;
pub(crate) mod pane_query;
pub(crate) mod rows;
pub(crate) mod shard;
pub(crate) mod window;

use std::sync::Arc;

use super::emission::Emission;
use super::slots::SlotStore;
use super::state::AggMeta;
use crate::error::Result;
use crate::keys::KeyOrder;
use crate::runtime::farm::{FarmConfig, FarmStats};
use crate::time::WindowSpec;
pub(crate) use rows::Admitted;
pub(crate) use window::{AggWindow, FinishedWindow};

/// What a parallel engine is built from.
pub(crate) struct EngineArgs<'a> {
    pub(crate) spec: WindowSpec,
    pub(crate) metas: &'a [Arc<AggMeta>],
    /// RRCPA, the line and the ring run on `cfg.plq_workers` processing units (PUs), the farm on the whole
    /// configuration.
    pub(crate) cfg: &'a FarmConfig,
    /// Sources pushed to (the multiway designs run an input thread per source).
    pub(crate) sources: usize,
    /// The caller's `threads` (TuMLMC's updater threads).
    pub(crate) threads: usize,
}

/// Builds one parallel engine: the constructor column of the strategy registry.
pub(crate) type Build = fn(&EngineArgs<'_>) -> Result<Box<dyn ParallelEngine>>;

/// One parallel aggregation engine. The operator calls it once per batch slice, never per row, so dynamic
/// dispatch costs nothing measurable. `Send + Sync`: the operator is a Python object any thread may hold.
pub(crate) trait ParallelEngine: Send + Sync {
    /// Hands admitted rows to the workers; returns the pane of the latest admitted row (the operator flushes
    /// up to its last window).
    fn submit(&mut self, spec: WindowSpec, rows: Admitted) -> Result<Option<i64>>;

    /// End of source `source`. Only the multiway designs, which merge sources themselves, care.
    fn close_source(&mut self, _source: usize) -> Result<()> {
        Ok(())
    }

    /// The windows up to `last` are complete: close what they need, without waiting for anything.
    fn advance(&mut self, spec: WindowSpec, last: i64) -> Result<()>;

    /// The finished windows up to `last`, in window order; with `wait`, all of them.
    fn collect(&mut self, last: i64, wait: bool) -> Result<Vec<(i64, FinishedWindow)>>;

    /// Per-worker figures for `stats`.
    fn stats(&self) -> FarmStats;
}

/// The first pane no window up to `last` needs: the punctuation of the pane engines (farm, RRCPA).
pub(crate) fn pane_frontier(spec: WindowSpec, last: i64) -> i64 {
    spec.first_pane(last)
        .saturating_add(spec.panes_per_window())
}

/// Finishes windows merged on the collector's side (every engine but the farm, whose workers finish them).
pub(crate) fn finish_all(windows: Vec<(i64, AggWindow)>) -> Vec<(i64, FinishedWindow)> {
    windows.into_iter().map(|(j, w)| (j, w.finish())).collect()
}

/// Runs one parallel engine for the operator: tracks the last window to flush and turns finished windows into
/// emitted rows in key order.
pub(crate) struct Driver {
    engine: Box<dyn ParallelEngine>,
    spec: WindowSpec,
    max_pane: Option<i64>,
    /// Empty: windows come back finished. Kept so that an emission without rows gets its aggregate columns'
    /// types from the same place as the pane engine's.
    pub(crate) scratch: SlotStore,
}

impl Driver {
    pub(crate) fn new(build: Build, args: &EngineArgs<'_>) -> Result<Self> {
        Ok(Self {
            engine: build(args)?,
            spec: args.spec,
            max_pane: None,
            scratch: SlotStore::new(args.metas),
        })
    }

    pub(crate) fn ingest(&mut self, rows: Admitted) -> Result<()> {
        let max = self.engine.submit(self.spec, rows)?;
        self.max_pane = self.max_pane.max(max);
        Ok(())
    }

    /// End of source `j` (multiway designs: its last rows become ready).
    pub(crate) fn close_source(&mut self, j: usize) -> Result<()> {
        self.engine.close_source(j)
    }

    /// Closes the panes windows up to `last` need, without waiting for anything.
    pub(crate) fn advance(&mut self, last: i64) -> Result<()> {
        self.engine.advance(self.spec, last)
    }

    /// Closes the panes windows up to `last` need and hands back the finished windows up to `last`; with
    /// `wait`, all of them.
    pub(crate) fn emit_until(
        &mut self,
        last: i64,
        keys: KeyOrder<'_>,
        out: &mut Emission,
        wait: bool,
    ) -> Result<()> {
        self.advance(last)?;
        for (j, w) in self.engine.collect(last, wait)? {
            let columns = w.columns?;
            // Rows in key order: walk the sorted keys when most are present, else sort the window's own.
            let rows: Vec<(u32, u32)> = if w.keys.entries.len() * 4 >= keys.sorted.len() {
                keys.sorted
                    .iter()
                    .filter_map(|&key| w.keys.get(key).map(|slot| (key, slot)))
                    .collect()
            } else {
                let mut rows = w.keys.entries;
                rows.sort_unstable_by_key(|&(key, _)| keys.ranks[key as usize]);
                rows
            };
            out.push_finished_window(j, &rows, columns);
        }
        Ok(())
    }

    pub(crate) fn last_window(&self) -> Option<i64> {
        self.max_pane.map(|p| self.spec.windows_of_pane(p).1)
    }

    pub(crate) fn stats(&self) -> FarmStats {
        self.engine.stats()
    }
}
