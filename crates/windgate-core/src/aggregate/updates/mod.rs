//! Update mode: windows that fire more than once. `allowed_lateness` keeps a fired window open to late rows
//! for that much longer and fires it again, marked by `revision`, whenever one arrives (Flink's allowed
//! lateness, Spark's update mode); `emit="early"` fires the partial result of every open window that changed
//! each time the watermark crosses a multiple of the interval, marked not `final` (Flink's continuous
//! event-time trigger). The on-time firing is the row the default mode emits.
//!
//! **Which rows count.** A row below the watermark it met, `wm`, is late. Without `allowed_lateness` it is
//! dropped (or kept aside, or an error: `on_late`). With `allowed_lateness = L` it counts in each of its windows
//! whose end is above `wm - L` (the windows not yet purged; Flink drops an element per window the same way)
//! and is dropped only when it has no such window. So the last revision of every window is the exact
//! aggregate over the rows that count in it, whatever the batch split.
//!
//! **Engine.** [`UpdatingEngine`] keeps the rows of every window not yet purged (the reference engine's
//! storage) and folds the windows that fire from their rows, so any window can fire again. Memory is bounded
//! by the rows of `lateness + allowed_lateness + size` of event time; each firing costs a pass over them.
//!
//! **Checkpoints** ([`checkpoint`]) hold those rows, each with its place in the order and first window, and
//! the revisions of the fired windows, so a restored operator fires exactly what the uninterrupted one would.
//!
//! **Order.** Each call's rows come in `(window_start, by...)` order: revisions of older windows, then the
//! windows firing on time, then early firings of open windows.

mod checkpoint;

use std::collections::{BTreeSet, HashMap};

pub(crate) use checkpoint::{Exported, Marks};

use super::emission::Emission;
use super::forget::KeyHolder;
use super::parallel::Admitted;
use super::reference::ReferenceEngine;
use super::slots::SlotStore;
use crate::error::Result;
use crate::keys::KeyOrder;
use crate::order::admission::BatchAdmission;
use crate::time::{WindowSpec, floor_div};

/// The update-mode parameters, in the time column's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct UpdateMode {
    /// `allowed_lateness`.
    pub allowed: Option<i64>,
    /// `emit="early"`'s interval.
    pub early: Option<i64>,
}

impl UpdateMode {
    pub(crate) fn is_on(&self) -> bool {
        self.allowed.is_some() || self.early.is_some()
    }
}

/// Takes back the late rows that still count in a window (see the module doc): admitted, no longer late.
/// Returns each one's index and the first window it counts in. `closing` maps the watermark a row met to the
/// windows' coordinate (wall time under `tz=`, see `time::calendar`).
pub(crate) fn accept_allowed(
    a: &mut BatchAdmission,
    ts: &[i64],
    spec: &WindowSpec,
    allowed: i64,
    closing: impl Fn(i64) -> i64,
) -> Vec<(u32, i64)> {
    let n = ts.len();
    let mut range = a.range;
    let mut accepted = vec![];
    a.late_at.retain(|&(i, wm)| {
        let t = ts[i as usize];
        let (first, last) = spec.windows_of_ts(t);
        let purged = closing(wm).saturating_sub(allowed);
        if spec.window_end_saturating(last) <= purged {
            return true; // every window of the row is purged: it stays late
        }
        // The first window ending above `purged`: after the last one the watermark `purged` closes.
        let from = first.max(spec.last_closed_window(purged).saturating_add(1));
        accepted.push((i, from));
        a.late -= 1;
        if let Some(keep) = a.keep.as_mut() {
            keep[i as usize] = true;
        }
        range = Some(range.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))));
        false
    });
    a.range = range;
    if a.keep
        .as_ref()
        .is_some_and(|k| k.len() == n && k.iter().all(|&x| x))
    {
        a.keep = None;
    }
    accepted
}

/// The engine of the update mode (see the module doc).
pub(crate) struct UpdatingEngine {
    rows: ReferenceEngine,
    spec: WindowSpec,
    mode: UpdateMode,
    /// Every window up to this one fired on time.
    fired_through: i64,
    /// Every window up to this one is purged: its rows may be gone, late rows no longer reach it.
    purged_through: i64,
    /// The late rows of the next ingested batch taken back by [`accept_allowed`]: index, first window.
    accepted: Vec<(u32, i64)>,
    /// Fired windows that took rows since they last fired.
    dirty: BTreeSet<(i64, u32)>,
    /// The last revision of each (window, key) that fired and is not purged.
    revisions: HashMap<(i64, u32), u32>,
    /// Open windows that took rows since the last early firing.
    changed: BTreeSet<(i64, u32)>,
    /// The watermark the operator last saw, and the early tick already fired.
    watermark: Option<i64>,
    tick: Option<i64>,
}

impl UpdatingEngine {
    pub(crate) fn new(spec: WindowSpec, scratch: SlotStore, mode: UpdateMode) -> Self {
        Self {
            rows: ReferenceEngine::new(spec, scratch),
            spec,
            mode,
            fired_through: i64::MIN,
            purged_through: i64::MIN,
            accepted: Vec::new(),
            dirty: BTreeSet::new(),
            revisions: HashMap::new(),
            changed: BTreeSet::new(),
            watermark: None,
            tick: None,
        }
    }

    /// The late rows of the next batch that count in some of their windows (see [`accept_allowed`]).
    pub(crate) fn expect_accepted(&mut self, accepted: Vec<(u32, i64)>) {
        self.accepted = accepted;
    }

    pub(crate) fn ingest(&mut self, rows: &Admitted) {
        let keep = rows.keep.as_deref();
        let accepted = std::mem::take(&mut self.accepted);
        let from = |i: u32| {
            accepted
                .binary_search_by_key(&i, |a| a.0)
                .ok()
                .map(|p| accepted[p].1)
        };
        for (i, (&t, &key)) in rows.ts.iter().zip(&rows.keys).enumerate() {
            if keep.is_some_and(|k| !k[i]) {
                continue;
            }
            let (first, last) = self.spec.windows_of_ts(t);
            let first = first.max(from(i as u32).unwrap_or(i64::MIN));
            for j in first.max(self.purged_through.saturating_add(1))..=last {
                if j <= self.fired_through {
                    self.dirty.insert((j, key));
                } else if self.mode.early.is_some() {
                    self.changed.insert((j, key));
                }
            }
        }
        let since = self.rows.len();
        self.rows
            .ingest(&rows.ts, &rows.keys, keep, &rows.inputs, rows.order());
        if !accepted.is_empty() {
            self.rows.count_from(since, from);
        }
    }

    /// The operator's watermark before an emission (`i64::MAX` at the end of the stream).
    pub(crate) fn observe(&mut self, watermark: i64) {
        self.watermark = Some(self.watermark.map_or(watermark, |w| w.max(watermark)));
    }

    /// Fires the windows up to `last` on time, the revisions, and (at a new early tick) the open windows that
    /// changed; then purges what no late row can reach any more.
    pub(crate) fn emit_until(
        &mut self,
        last: i64,
        keys: KeyOrder<'_>,
        out: &mut Emission,
    ) -> Result<()> {
        let before = self.fired_through;
        let early = self.early_tick_due();
        let hi = match (early, self.changed.last()) {
            (true, Some(&(j, _))) => j.max(last),
            _ => last,
        };
        let lo = self.purged_through.saturating_add(1);
        let (dirty, changed) = (&self.dirty, &self.changed);
        let select = |j: i64, k: u32| {
            if j <= before {
                dirty.contains(&(j, k))
            } else if j <= last {
                true
            } else {
                early && changed.contains(&(j, k))
            }
        };
        let start = out.windows.len();
        self.rows.fold(lo, hi, select, keys, out)?;
        for i in start..out.windows.len() {
            let (j, key) = (out.windows[i], out.keys[i]);
            let mark = if j > last {
                (0, false) // early
            } else if self.mode.allowed.is_none() {
                (0, true) // fires once: nothing to remember
            } else {
                // A window whose watermark passed before any row of this key arrived fires first here.
                let r = self
                    .revisions
                    .entry((j, key))
                    .and_modify(|r| *r += 1)
                    .or_insert(0);
                (*r, true)
            };
            out.marks.push(mark);
        }
        self.fired_through = before.max(last);
        self.dirty.clear();
        if early {
            self.changed.clear();
        } else {
            self.changed.retain(|&(j, _)| j > last);
        }
        self.purge();
        Ok(())
    }

    /// Whether the watermark crossed a multiple of the early interval since the last early firing.
    fn early_tick_due(&mut self) -> bool {
        let (Some(interval), Some(wm)) = (self.mode.early, self.watermark) else {
            return false;
        };
        if wm == i64::MAX {
            return false; // the end: every window fires on time
        }
        let tick = floor_div(wm, interval);
        let due = self.tick.is_none_or(|t| tick > t);
        self.tick = Some(tick);
        due
    }

    fn purge(&mut self) {
        let through = match (self.mode.allowed, self.watermark) {
            (_, Some(i64::MAX)) | (None, _) => self.fired_through,
            (Some(l), Some(wm)) => self
                .spec
                .last_closed_window(wm.saturating_sub(l))
                .min(self.fired_through),
            (Some(_), None) => return,
        };
        if through <= self.purged_through {
            return;
        }
        self.purged_through = through;
        self.rows.forget_through(through);
        self.revisions.retain(|&(j, _), _| j > through);
    }

    pub(crate) fn last_window(&self) -> Option<i64> {
        self.rows.last_window()
    }

    pub(crate) fn retained_rows(&self) -> usize {
        self.rows.retained_rows()
    }

    pub(crate) fn scratch(&mut self) -> &mut SlotStore {
        &mut self.rows.scratch
    }
}

impl KeyHolder for UpdatingEngine {
    fn key_entries(&self) -> usize {
        self.rows.key_entries() + self.revisions.len() + self.changed.len()
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        self.rows.mark_live_keys(live);
        let pairs = self
            .revisions
            .keys()
            .chain(&self.changed)
            .chain(&self.dirty);
        for &(_, key) in pairs {
            live[key as usize] = true;
        }
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        self.rows.remap_keys(remap);
        let moved = |&(j, k): &(i64, u32)| (j, remap[k as usize]);
        self.dirty = self.dirty.iter().map(moved).collect();
        self.changed = self.changed.iter().map(moved).collect();
        self.revisions = self.revisions.iter().map(|(p, &r)| (moved(p), r)).collect();
    }
}
