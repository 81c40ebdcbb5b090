//! The engines behind the streaming operator: the single-threaded ones, a parallel engine behind its
//! [`Driver`], or the sharded engine; one enum so the operator's hot path dispatches once per call.
//!
//! The sharded engine is not a [`super::parallel::ParallelEngine`]: those take rows keyed by the operator's
//! dictionary and hand back windows in its ids, while the sharded engine's workers number keys themselves
//! (the point of it: no per-row work on the caller's thread) and it teaches the operator's dictionary their
//! keys when windows come out.

use super::emission::Emission;
use super::forget::forget_idle_keys;
use super::pane_engine::PaneEngine;
use super::parallel::shard::ShardEngine;
use super::parallel::{Admitted, Driver};
use super::reference::ReferenceEngine;
use super::slots::SlotStore;
use super::updates::UpdatingEngine;
use crate::error::Result;
use crate::keys::KeyDict;

pub(super) enum Engine {
    Pane(Box<PaneEngine>),
    Reference(Box<ReferenceEngine>),
    /// Any parallel engine.
    Parallel(Box<Driver>),
    /// Key-partitioned pane engines on worker threads.
    Shard(Box<ShardEngine>),
    /// Windows that fire more than once (`allowed_lateness`, `emit="early"`).
    Updating(Box<UpdatingEngine>),
}

impl Engine {
    pub(super) fn ingest(&mut self, rows: Admitted) -> Result<()> {
        let keep = rows.keep.as_deref();
        match self {
            Engine::Pane(e) => {
                let order = rows.order();
                e.ingest_times(&rows.ts, &rows.keys, keep, &rows.inputs, order, rows.sorted)
            }
            Engine::Reference(e) => {
                e.ingest(&rows.ts, &rows.keys, keep, &rows.inputs, rows.order())
            }
            Engine::Parallel(e) => return e.ingest(rows),
            Engine::Shard(e) => return e.ingest(rows),
            Engine::Updating(e) => e.ingest(&rows),
        }
        Ok(())
    }

    /// Emits the windows up to `last`. `wait=false` lets the parallel engines hand back only what is finished
    /// (the batch function collects the rest later; the order is the same). The sharded engine adds its
    /// workers' keys to `keys` first.
    pub(super) fn emit_until(
        &mut self,
        last: i64,
        keys: &mut KeyDict,
        out: &mut Emission,
        wait: bool,
    ) -> Result<()> {
        match self {
            Engine::Pane(e) => e.emit_until(last, keys.order(), out),
            Engine::Reference(e) => e.emit_until(last, keys.order(), out),
            Engine::Parallel(e) => e.emit_until(last, keys.order(), out, wait),
            Engine::Shard(e) => e.emit_until(last, keys, out, wait),
            Engine::Updating(e) => e.emit_until(last, keys.order(), out),
        }
    }

    /// The operator's watermark before an emission (`i64::MAX` at the end): the update mode's early firings
    /// and purges follow it.
    pub(super) fn observe_watermark(&mut self, watermark: i64) {
        if let Engine::Updating(e) = self {
            e.observe(watermark);
        }
    }

    /// Whether the engine numbers keys itself, on its workers: then the caller leaves [`Admitted::keys`] empty
    /// (unless it keeps rows for a checkpoint) and hands the `by` columns over instead.
    pub(super) fn numbers_keys(&self) -> bool {
        matches!(self, Engine::Shard(_))
    }

    /// Whether the engine keeps its state on worker threads, where a checkpoint cannot read it: the operator
    /// keeps the admitted rows of the open panes instead (`operator::row_log`).
    pub(super) fn logs_rows(&self) -> bool {
        matches!(self, Engine::Parallel(_) | Engine::Shard(_))
    }

    /// Forgets the keys that hold no open state once they are most of the dictionary (see [`super::forget`]),
    /// so that a stream of ever-new keys keeps memory bounded by its open state. The parallel engines keep key
    /// ids in their workers' state and do not forget (documented in the README).
    pub(super) fn forget_idle_keys(&mut self, keys: &mut KeyDict) {
        match self {
            Engine::Pane(e) => forget_idle_keys(e.as_mut(), keys),
            Engine::Reference(e) => forget_idle_keys(e.as_mut(), keys),
            Engine::Updating(e) => forget_idle_keys(e.as_mut(), keys),
            Engine::Parallel(_) | Engine::Shard(_) => {}
        }
    }

    pub(super) fn last_window(&self) -> Option<i64> {
        match self {
            Engine::Pane(e) => e.last_window(),
            Engine::Reference(e) => e.last_window(),
            Engine::Parallel(e) => e.last_window(),
            Engine::Shard(e) => e.last_window(),
            Engine::Updating(e) => e.last_window(),
        }
    }

    pub(super) fn scratch(&mut self) -> &mut SlotStore {
        match self {
            Engine::Pane(e) => &mut e.scratch,
            Engine::Reference(e) => &mut e.scratch,
            Engine::Parallel(e) => &mut e.scratch,
            Engine::Shard(e) => &mut e.scratch,
            Engine::Updating(e) => e.scratch(),
        }
    }
}
