//! The engines behind the preference operator. All of them hand back, per finished window, each group's picks
//! in output order; the operator sorts groups and gathers rows.
//!
//! * `Pane`: the farm's query on the caller's thread ([`InlineFarm`]): G per pane, H per window.
//! * `Farm`: the pane farm over the same query: pane-level query (PLQ) and window-level query (WLQ) workers,
//!   as in Mencagli, Torquati, Danelutto, De Matteis, *Parallel Continuous Preference Queries over
//!   Out-of-Order and Bursty Data Streams*.
//! * `Recompute`: rows kept per pane, each window's kernel rebuilt from its rows (the paper's baseline).
//! * `Reference`: rows kept per pane, each window answered by the definition over all pairs (tests).

use std::collections::BTreeMap;

use hashbrown::HashMap;

use super::PackedOrderKey;
use super::query::{Groups, KernelSpec, Pick, PrefChunk, PrefQuery};
use crate::error::Result;
use crate::runtime::farm::inline::InlineFarm;
use crate::runtime::farm::{Farm, FarmConfig, FarmStats};
use crate::time::{WindowSpec, assign_panes};

/// One finished window: its id and each group's picks (groups in no particular order).
pub type WindowPicks = (i64, Vec<(u32, Vec<Pick>)>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Pane,
    Farm,
    Recompute,
    Reference,
}

#[allow(clippy::large_enum_variant)] // one per operator
enum Runner {
    Pane(InlineFarm<PrefQuery>),
    Farm(Farm<PrefQuery>),
    Rows(RowEngine),
}

pub struct Engine {
    runner: Runner,
    spec: WindowSpec,
    kernel: KernelSpec,
    max_pane: Option<i64>,
}

impl Engine {
    pub fn new(
        kind: EngineKind,
        spec: WindowSpec,
        kernel: KernelSpec,
        cfg: &FarmConfig,
    ) -> Result<Self> {
        let query = || PrefQuery {
            spec: kernel.clone(),
        };
        let runner = match kind {
            EngineKind::Pane => Runner::Pane(InlineFarm::new(query(), spec)),
            EngineKind::Farm => Runner::Farm(Farm::new(query(), spec, cfg)?),
            EngineKind::Recompute => Runner::Rows(RowEngine::new(spec, false)),
            EngineKind::Reference => Runner::Rows(RowEngine::new(spec, true)),
        };
        Ok(Self {
            runner,
            spec,
            kernel,
            max_pane: None,
        })
    }

    /// Adds admitted rows (`keep[i]` false: row i is not admitted).
    pub fn ingest(&mut self, chunk: PrefChunk, keep: Option<Vec<bool>>) -> Result<()> {
        let (panes, max) = assign_panes(self.spec, &chunk.ts, keep.as_deref());
        self.max_pane = self.max_pane.max(max);
        let keep = keep.as_deref();
        match &mut self.runner {
            Runner::Pane(f) => f.submit(chunk, panes, keep),
            Runner::Farm(f) => f.submit(chunk, panes, keep)?,
            Runner::Rows(r) => r.add(&chunk, &panes, keep),
        }
        Ok(())
    }

    /// Closes the panes windows up to `last` need, without waiting.
    pub fn advance(&mut self, last: i64) -> Result<()> {
        let frontier = self
            .spec
            .first_pane(last)
            .saturating_add(self.spec.panes_per_window());
        match &mut self.runner {
            Runner::Pane(f) => f.punctuate(frontier)?,
            Runner::Farm(f) => f.punctuate(frontier)?,
            Runner::Rows(_) => {}
        }
        Ok(())
    }

    /// The finished windows up to `last`, in window order; with `wait`, every one of them.
    pub fn emit_until(&mut self, last: i64, wait: bool) -> Result<Vec<WindowPicks>> {
        self.advance(last)?;
        let windows = match &mut self.runner {
            Runner::Pane(f) => f.collect(last),
            Runner::Farm(f) => f.collect(last, wait)?,
            Runner::Rows(r) => return r.emit_until(last, &self.kernel),
        };
        Ok(windows
            .into_iter()
            .map(|(j, groups)| (j, answers(groups, &self.kernel)))
            .collect())
    }

    /// The last pane holding an admitted row (what a checkpoint keeps of the engine besides its rows).
    pub fn last_pane(&self) -> Option<i64> {
        self.max_pane
    }

    /// A restored engine's last pane: rows of closed panes are not fed again, so it is carried over.
    pub fn restore_last_pane(&mut self, pane: Option<i64>) {
        self.max_pane = self.max_pane.max(pane);
    }

    /// The last window holding an admitted row.
    pub fn last_window(&self) -> Option<i64> {
        self.max_pane.map(|p| self.spec.windows_of_pane(p).1)
    }

    pub fn farm_stats(&self) -> Option<FarmStats> {
        match &self.runner {
            Runner::Farm(f) => Some(f.stats()),
            _ => None,
        }
    }
}

fn answers(groups: Groups, kernel: &KernelSpec) -> Vec<(u32, Vec<Pick>)> {
    groups
        .into_iter()
        .map(|(key, k)| (key, k.answer(kernel)))
        .collect()
}

/// One pane's admitted rows, column-wise.
#[derive(Default)]
struct PaneRows {
    keys: Vec<u32>,
    orders: Vec<PackedOrderKey>,
    cols: Vec<Vec<f64>>,
}

/// Keeps rows per pane and answers each window from its rows.
struct RowEngine {
    spec: WindowSpec,
    brute: bool,
    panes: BTreeMap<i64, PaneRows>,
    /// Windows up to here are emitted.
    done: i64,
}

impl RowEngine {
    fn new(spec: WindowSpec, brute: bool) -> Self {
        Self {
            spec,
            brute,
            panes: BTreeMap::new(),
            done: i64::MIN,
        }
    }

    fn add(&mut self, chunk: &PrefChunk, panes: &[i64], keep: Option<&[bool]>) {
        for (i, &pane) in panes.iter().enumerate() {
            if keep.is_some_and(|k| !k[i]) {
                continue;
            }
            let p = self.panes.entry(pane).or_default();
            if p.cols.is_empty() {
                p.cols = vec![vec![]; chunk.cols.len()];
            }
            p.keys.push(chunk.keys[i]);
            p.orders.push(chunk.order_key(i));
            for (col, src) in p.cols.iter_mut().zip(&chunk.cols) {
                col.push(src[i]);
            }
        }
    }

    fn emit_until(&mut self, last: i64, kernel: &KernelSpec) -> Result<Vec<WindowPicks>> {
        // Every window holding a stored pane, up to `last`, not emitted yet.
        let mut windows: Vec<i64> = self
            .panes
            .keys()
            .flat_map(|&p| {
                let (lo, hi) = self.spec.windows_of_pane(p);
                lo.max(self.done.saturating_add(1))..=hi.min(last)
            })
            .collect();
        windows.sort_unstable();
        windows.dedup();
        let out = windows
            .iter()
            .map(|&j| {
                crate::interrupt::check()?;
                Ok((j, self.window(j, kernel)))
            })
            .collect::<Result<_>>()?;
        self.done = self.done.max(last);
        // Panes whose every window is emitted go.
        while let Some(e) = self.panes.first_entry() {
            if self.spec.windows_of_pane(*e.key()).1 > last {
                break;
            }
            e.remove();
        }
        Ok(out)
    }

    /// Window `j`'s picks per group.
    fn window(&self, j: i64, kernel: &KernelSpec) -> Vec<(u32, Vec<Pick>)> {
        let first = self.spec.first_pane(j);
        let mut groups: HashMap<u32, (Vec<Vec<f64>>, Vec<PackedOrderKey>)> = HashMap::new();
        for (_, p) in self
            .panes
            .range(first..first + self.spec.panes_per_window())
        {
            for (i, &key) in p.keys.iter().enumerate() {
                let (cols, orders) = groups
                    .entry(key)
                    .or_insert_with(|| (vec![vec![]; p.cols.len()], vec![]));
                for (col, src) in cols.iter_mut().zip(&p.cols) {
                    col.push(src[i]);
                }
                orders.push(p.orders[i]);
            }
        }
        groups
            .into_iter()
            .map(|(key, (cols, orders))| {
                let picks = if self.brute {
                    kernel.reference(&cols, &orders)
                } else {
                    let k = kernel.build(&cols, orders.iter().copied().enumerate());
                    k.answer(kernel)
                };
                (key, picks)
            })
            .collect()
    }
}
