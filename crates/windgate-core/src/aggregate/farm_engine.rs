//! Window aggregation on the parallel engines: the pane farm (`"farm"`), RRCPA (`"rrcpa"`), the line
//! baselines (`"hsa"`, `"rra"`), the ring baselines (`"hoa"`, `"rrca"`) and seed 000's multiway designs. For
//! the first two, G lifts rows into per-(key, pane partition) partial states
//! and H combines partitions into per-(key, window) states.
//!
//! Partial states combine exactly (integer counts and sums, exact float sums, extremes and picks by the total
//! order), so a pane split over workers, or merged into its windows in any order, gives the very states the
//! single-threaded pane engine computes.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_buffer::ScalarBuffer;

use super::emission::Emission;
use super::slots::{KeySlots, SlotStore};
use super::state::{AggMeta, InputValues, RowOrder, SKIP};
use crate::error::Result;
use crate::keys::KeyOrder;
use crate::runtime::farm::{Farm, FarmConfig, FarmQuery, FarmStats, Routed};
use crate::runtime::rrcpa::Rrcpa;
use crate::time::{WindowSpec, assign_panes};

use super::line::{LineEngine, LineKind};
use super::multiway::{Design, MultiwayEngine};
use super::ring::{RingEngine, RingKind};

/// Rows admitted by the operator, owned so that they can cross to the workers.
pub struct Admitted {
    pub ts: ScalarBuffer<i64>,
    pub keys: Vec<u32>,
    /// `None`: every row admitted.
    pub keep: Option<Vec<bool>>,
    pub inputs: Vec<InputValues>,
    pub source: u32,
    pub seq0: u64,
    /// The `order_by` column (ties of equal times), if the query has one.
    pub by: Option<ScalarBuffer<i64>>,
}

impl Admitted {
    pub fn order(&self) -> RowOrder<'_> {
        RowOrder {
            ts: &self.ts,
            by: self.by.as_deref(),
            source: self.source,
            seq0: self.seq0,
        }
    }
}

pub struct AggQuery {
    metas: Vec<Arc<AggMeta>>,
}

/// A PLQ worker's open partitions. A run of rows from one pane (the usual case: in-order input is routed in
/// runs) is lifted straight into that pane's own store, which is then shipped as is when the pane closes.
/// Runs mixing panes (disorder, TB_RR spans) go through one shared store in a single pass and are merged into
/// the pane's store at close.
pub struct AggWorker {
    shared: SlotStore,
    panes: BTreeMap<i64, PaneAcc>,
    slots: Vec<u32>,
    slots_pairs: Vec<(u32, u32)>,
}

#[derive(Default)]
struct PaneAcc {
    own: Option<(KeySlots, SlotStore)>,
    shared: KeySlots,
}

/// One pane partition: `entries[i] = (key, slot)` into its own store.
pub struct AggPart {
    entries: Vec<(u32, u32)>,
    store: SlotStore,
}

pub struct AggWindow {
    keys: KeySlots,
    store: SlotStore,
    /// Scratch for merges.
    pairs: Vec<(u32, u32)>,
}

impl AggWindow {
    pub fn new(metas: &[Arc<AggMeta>]) -> Self {
        Self {
            keys: KeySlots::default(),
            store: SlotStore::new(metas),
            pairs: Vec::new(),
        }
    }

    /// Combines `(key, slot)` states of `from` into this window.
    pub fn merge_slots(&mut self, from: &SlotStore, entries: &[(u32, u32)]) {
        self.keys
            .merge(&mut self.store, from, entries, &mut self.pairs);
    }
}

/// A window whose aggregates were finished by the worker that completed it: the caller only orders and
/// gathers rows (a float sum's finish rounds a superaccumulator, the costliest per-row step of an emission).
pub struct FinishedWindow {
    pub keys: KeySlots,
    /// Aggregate `a`'s values at `columns[a]`, row `s` for the key in slot `s`; or the error finishing raised
    /// (an integer sum that overflows).
    pub columns: Result<Vec<ArrayRef>>,
}

impl AggWindow {
    /// Finishes every aggregate of every slot. A window's store only ever grows (slots are never released), so
    /// its slots are `0..len`.
    pub fn finish(self) -> FinishedWindow {
        debug_assert_eq!(self.store.live(), self.keys.entries.len());
        let slots: Vec<u32> = (0..self.keys.entries.len() as u32).collect();
        let columns = self.store.states.iter().map(|s| s.finish(&slots)).collect();
        FinishedWindow {
            keys: self.keys,
            columns,
        }
    }
}

impl FarmQuery for AggQuery {
    type Chunk = Admitted;
    type Worker = AggWorker;
    type Part = AggPart;
    type Window = AggWindow;
    type Done = FinishedWindow;

    fn new_worker(&self) -> AggWorker {
        AggWorker {
            shared: SlotStore::new(&self.metas),
            panes: BTreeMap::new(),
            slots: Vec::new(),
            slots_pairs: Vec::new(),
        }
    }

    fn ingest(&self, w: &mut AggWorker, chunk: &Routed<Admitted>, rows: Range<usize>, me: u8) {
        let (lo, hi) = (rows.start, rows.end);
        let c = &chunk.chunk;
        let mut mine = (lo..hi).filter(|&i| chunk.owner[i] == me);
        let Some(first) = mine.next() else {
            return;
        };
        let p0 = chunk.panes[first];
        let single = mine.all(|i| chunk.panes[i] == p0);
        let AggWorker {
            shared,
            panes,
            slots,
            ..
        } = w;
        slots.clear();
        slots.resize(hi - lo, SKIP);
        let store = if single {
            let acc = panes.entry(p0).or_default();
            let (keys, store) = acc
                .own
                .get_or_insert_with(|| (KeySlots::default(), SlotStore::new(&self.metas)));
            for i in lo..hi {
                if chunk.owner[i] == me {
                    slots[i - lo] = keys.slot(c.keys[i], store);
                }
            }
            store
        } else {
            let mut cur_pane = None;
            let mut acc: Option<&mut PaneAcc> = None;
            for i in lo..hi {
                if chunk.owner[i] != me {
                    continue;
                }
                let p = chunk.panes[i];
                if cur_pane != Some(p) {
                    cur_pane = Some(p);
                    acc = Some(panes.entry(p).or_default());
                }
                let a = acc.as_deref_mut().expect("set above");
                slots[i - lo] = a.shared.slot(c.keys[i], shared);
            }
            shared
        };
        let inputs: Vec<InputValues> = c.inputs.iter().map(|v| v.slice(lo, hi - lo)).collect();
        let order = RowOrder {
            ts: &c.ts[lo..hi],
            by: c.by.as_ref().map(|b| &b[lo..hi]),
            source: c.source,
            seq0: c.seq0 + lo as u64,
        };
        store.update(slots, &inputs, order);
    }

    fn close_below(&self, w: &mut AggWorker, frontier: i64, out: &mut dyn FnMut(i64, AggPart)) {
        while let Some(entry) = w.panes.first_entry() {
            if *entry.key() >= frontier {
                break;
            }
            let (pane, acc) = entry.remove_entry();
            let (mut keys, mut store) = acc.own.unwrap_or_else(|| {
                let n = acc.shared.entries.len();
                (
                    KeySlots::default(),
                    SlotStore::with_capacity(&self.metas, n),
                )
            });
            if !acc.shared.entries.is_empty() {
                keys.merge(
                    &mut store,
                    &w.shared,
                    &acc.shared.entries,
                    &mut w.slots_pairs,
                );
                for &(_, slot) in &acc.shared.entries {
                    w.shared.release(slot);
                }
            }
            let part = AggPart {
                entries: keys.entries,
                store,
            };
            out(pane, part);
        }
    }

    fn new_window(&self) -> AggWindow {
        AggWindow::new(&self.metas)
    }

    fn merge(&self, window: &mut AggWindow, part: &AggPart) {
        window.merge_slots(&part.store, &part.entries);
    }

    fn done(&self, window: AggWindow) -> FinishedWindow {
        window.finish()
    }
}

/// The parallel engines over the same query.
#[allow(clippy::large_enum_variant)] // one per operator, already behind the operator's Box
enum Runner {
    Farm(Farm<AggQuery>),
    Rrcpa(Rrcpa<AggQuery>),
    Line(LineEngine),
    Ring(RingEngine),
    Multiway(MultiwayEngine),
}

/// Which parallel engine a [`FarmEngine`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallel {
    Farm,
    Rrcpa,
    Line(LineKind),
    Ring(RingKind),
    /// Seed 000's designs over `sources` sources.
    Multiway(Design, usize),
}

/// The farm engine as the operator sees it.
pub struct FarmEngine {
    runner: Runner,
    spec: WindowSpec,
    max_pane: Option<i64>,
    /// Empty: windows come back finished. Kept so that an emission without rows gets its aggregate columns'
    /// types from the same place as the pane engine's.
    pub scratch: SlotStore,
}

impl FarmEngine {
    /// RRCPA, the line and the ring approaches run on `cfg.plq_workers` PUs.
    pub fn new(
        spec: WindowSpec,
        metas: &[Arc<AggMeta>],
        cfg: &FarmConfig,
        engine: Parallel,
    ) -> Result<Self> {
        let query = AggQuery {
            metas: metas.to_vec(),
        };
        let (pus, queue) = (cfg.plq_workers, cfg.queue_messages);
        let runner = match engine {
            Parallel::Farm => Runner::Farm(Farm::new(query, spec, cfg)?),
            Parallel::Rrcpa => Runner::Rrcpa(Rrcpa::new(query, spec, pus, queue)?),
            Parallel::Line(kind) => Runner::Line(LineEngine::new(kind, spec, metas, pus, queue)?),
            Parallel::Ring(kind) => Runner::Ring(RingEngine::new(kind, spec, metas, pus, queue)?),
            Parallel::Multiway(design, sources) => {
                Runner::Multiway(MultiwayEngine::new(design, spec, metas, sources)?)
            }
        };
        Ok(Self {
            runner,
            spec,
            max_pane: None,
            scratch: SlotStore::new(metas),
        })
    }

    pub fn ingest(&mut self, rows: Admitted) -> Result<()> {
        if matches!(
            self.runner,
            Runner::Line(_) | Runner::Ring(_) | Runner::Multiway(_)
        ) {
            // No panes: each PU finds a row's windows itself. Track the last window for the flush.
            let keep = rows.keep.as_deref();
            let hi = (0..rows.ts.len())
                .filter(|&i| keep.is_none_or(|k| k[i]))
                .map(|i| rows.ts[i])
                .max();
            if let Some(t) = hi {
                let p = self.spec.pane_of(t);
                self.max_pane = Some(self.max_pane.map_or(p, |m| m.max(p)));
            }
            return match &mut self.runner {
                Runner::Line(l) => l.submit(rows),
                Runner::Ring(r) => r.submit(rows),
                Runner::Multiway(m) => m.submit(rows),
                _ => unreachable!("matched above"),
            };
        }
        let (panes, max) = assign_panes(self.spec, &rows.ts, rows.keep.as_deref());
        self.max_pane = self.max_pane.max(max);
        let keep = rows.keep.clone();
        match &mut self.runner {
            Runner::Farm(f) => f.submit(rows, panes, keep.as_deref()),
            Runner::Rrcpa(r) => r.submit(rows, panes, keep.as_deref()),
            Runner::Line(_) | Runner::Ring(_) | Runner::Multiway(_) => {
                unreachable!("submitted above")
            }
        }
    }

    /// End of source `j` (multiway designs: its last rows become ready).
    pub fn close_source(&mut self, j: usize) -> Result<()> {
        match &mut self.runner {
            Runner::Multiway(m) => m.close_source(j),
            _ => Ok(()),
        }
    }

    /// Closes the panes windows up to `last` need, without waiting for anything.
    pub fn advance(&mut self, last: i64) -> Result<()> {
        let frontier = self
            .spec
            .first_pane(last)
            .saturating_add(self.spec.panes_per_window());
        match &mut self.runner {
            Runner::Farm(f) => f.punctuate(frontier),
            Runner::Rrcpa(r) => r.punctuate(frontier),
            Runner::Line(l) => l.punctuate(last),
            Runner::Ring(r) => r.punctuate(last),
            // Readiness comes from the sources themselves.
            Runner::Multiway(_) => Ok(()),
        }
    }

    /// Closes the panes windows up to `last` need and hands back the finished windows up to `last`; with
    /// `wait`, all of them.
    pub fn emit_until(
        &mut self,
        last: i64,
        keys: KeyOrder<'_>,
        out: &mut Emission,
        wait: bool,
    ) -> Result<()> {
        self.advance(last)?;
        // The farm's workers finish windows themselves; the other engines' windows are finished here.
        let finish =
            |ws: Vec<(i64, AggWindow)>| ws.into_iter().map(|(j, w)| (j, w.finish())).collect();
        let done: Vec<(i64, FinishedWindow)> = match &mut self.runner {
            Runner::Farm(f) => f.collect(last, wait)?,
            Runner::Rrcpa(r) => finish(r.collect(last, wait)?),
            Runner::Line(l) => finish(l.collect(last, wait)?),
            Runner::Ring(r) => finish(r.collect(last, wait)?),
            Runner::Multiway(m) => finish(m.collect(last, wait)?),
        };
        for (j, w) in done {
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

    pub fn last_window(&self) -> Option<i64> {
        self.max_pane.map(|p| self.spec.windows_of_pane(p).1)
    }

    pub fn stats(&self) -> FarmStats {
        match &self.runner {
            Runner::Farm(f) => f.stats(),
            Runner::Rrcpa(r) => FarmStats {
                plq_busy_ns: r.busy_ns(),
                split_factor: 1.0,
                ..FarmStats::default()
            },
            Runner::Line(l) => FarmStats {
                plq_busy_ns: l.busy_ns(),
                ..FarmStats::default()
            },
            Runner::Ring(r) => FarmStats {
                plq_busy_ns: r.busy_ns(),
                ..FarmStats::default()
            },
            Runner::Multiway(m) => FarmStats {
                plq_busy_ns: m.busy_ns(),
                ..FarmStats::default()
            },
        }
    }

    pub fn workers(&self) -> usize {
        match &self.runner {
            Runner::Farm(f) => f.workers(),
            Runner::Rrcpa(r) => r.workers(),
            Runner::Line(l) => l.workers(),
            Runner::Ring(r) => r.workers(),
            Runner::Multiway(m) => m.workers(),
        }
    }
}
