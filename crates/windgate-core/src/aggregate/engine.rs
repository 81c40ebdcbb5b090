//! The engines behind the streaming operator: the single-threaded ones, or a parallel engine behind its
//! [`Driver`]; one enum so the operator's hot path dispatches once per call.

use super::emission::Emission;
use super::forget::forget_idle_keys;
use super::pane_engine::PaneEngine;
use super::parallel::{Admitted, Driver};
use super::reference::ReferenceEngine;
use super::slots::SlotStore;
use crate::error::Result;
use crate::keys::{KeyDict, KeyOrder};

pub(super) enum Engine {
    Pane(PaneEngine),
    Reference(ReferenceEngine),
    /// Any parallel engine.
    Parallel(Box<Driver>),
}

impl Engine {
    pub(super) fn ingest(&mut self, rows: Admitted) -> Result<()> {
        let keep = rows.keep.as_deref();
        match self {
            Engine::Pane(e) => e.ingest(&rows.ts, &rows.keys, keep, &rows.inputs, rows.order()),
            Engine::Reference(e) => {
                e.ingest(&rows.ts, &rows.keys, keep, &rows.inputs, rows.order())
            }
            Engine::Parallel(e) => return e.ingest(rows),
        }
        Ok(())
    }

    /// Emits the windows up to `last`. `wait=false` lets the farm hand back only what is finished (the batch
    /// function collects the rest later; the order is the same).
    pub(super) fn emit_until(
        &mut self,
        last: i64,
        keys: KeyOrder<'_>,
        out: &mut Emission,
        wait: bool,
    ) -> Result<()> {
        match self {
            Engine::Pane(e) => e.emit_until(last, keys, out),
            Engine::Reference(e) => e.emit_until(last, keys, out),
            Engine::Parallel(e) => e.emit_until(last, keys, out, wait),
        }
    }

    /// Forgets the keys that hold no open state once they are most of the dictionary (see [`super::forget`]),
    /// so that a stream of ever-new keys keeps memory bounded by its open state. The parallel engines keep key
    /// ids in their workers' state and do not forget (documented in the README).
    pub(super) fn forget_idle_keys(&mut self, keys: &mut KeyDict) {
        match self {
            Engine::Pane(e) => forget_idle_keys(e, keys),
            Engine::Reference(e) => forget_idle_keys(e, keys),
            Engine::Parallel(_) => {}
        }
    }

    pub(super) fn last_window(&self) -> Option<i64> {
        match self {
            Engine::Pane(e) => e.last_window(),
            Engine::Reference(e) => e.last_window(),
            Engine::Parallel(e) => e.last_window(),
        }
    }

    pub(super) fn scratch(&mut self) -> &mut SlotStore {
        match self {
            Engine::Pane(e) => &mut e.scratch,
            Engine::Reference(e) => &mut e.scratch,
            Engine::Parallel(e) => &mut e.scratch,
        }
    }
}
