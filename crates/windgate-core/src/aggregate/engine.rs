//! The engines behind the streaming operator, one enum so the operator's hot path dispatches once per call.

use super::emission::Emission;
use super::farm_engine::{Admitted, FarmEngine};
use super::keys::KeyOrder;
use super::pane_engine::PaneEngine;
use super::reference::ReferenceEngine;
use super::slots::SlotStore;
use crate::error::Result;

pub(super) enum Engine {
    Pane(PaneEngine),
    Reference(ReferenceEngine),
    Farm(Box<FarmEngine>),
}

impl Engine {
    pub(super) fn ingest(&mut self, rows: Admitted) -> Result<()> {
        let keep = rows.keep.as_deref();
        match self {
            Engine::Pane(e) => e.ingest(&rows.ts, &rows.keys, keep, &rows.inputs, rows.order()),
            Engine::Reference(e) => {
                e.ingest(&rows.ts, &rows.keys, keep, &rows.inputs, rows.order())
            }
            Engine::Farm(e) => return e.ingest(rows),
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
            Engine::Farm(e) => return e.emit_until(last, keys, out, wait),
        }
        Ok(())
    }

    pub(super) fn last_window(&self) -> Option<i64> {
        match self {
            Engine::Pane(e) => e.last_window(),
            Engine::Reference(e) => e.last_window(),
            Engine::Farm(e) => e.last_window(),
        }
    }

    pub(super) fn scratch(&mut self) -> &mut SlotStore {
        match self {
            Engine::Pane(e) => &mut e.scratch,
            Engine::Reference(e) => &mut e.scratch,
            Engine::Farm(e) => &mut e.scratch,
        }
    }
}
