//! The single-threaded streaming engine: a pane store (the pane-level query, PLQ) and a window combiner (the
//! window-level query, WLQ) in one thread.
//!
//! Rows are lifted into per-(key, pane) partial states; when the watermark passes a window's end, the window's
//! panes are combined per key and the window is emitted; a pane is dropped once its last window is out, so
//! memory is bounded by the open panes (times the keys active in them), not by the stream's length.
//!
//! Why not `runtime::farm::inline`, the generic pane engine of any farm query (what the preference queries
//! run)? That one routes each batch (a pane and an owner per row), keeps a store per pane and merges every
//! closed pane into each open window's own store. This one is aggregation's fused fast path: one shared
//! store filled through an incremental pane cursor, a window's panes combined only when it is emitted (into
//! one scratch store, finished at once; or, for windows of many panes, lowered straight from the sliding
//! stacks), panes handed out as partial states (`output="partials"`) and idle
//! keys forgotten (see `KeyHolder`). The tests check each against its operator's reference engine.

use std::collections::BTreeMap;

use super::emission::Emission;
use super::pane_runs::{
    RecentPanes, SHORT_MAX_PANES, SHORT_RUN, SPAN_PANES, ShortRuns, SortedRuns, keep_spare,
    kept_prefix, lift_span, open, pane_span, run_within, span_min_rows,
};
use super::sliding::{SLIDING_MIN_PANES, Sliding};
use super::slots::{KeySlots, SlotStore};
use super::state::{InputValues, RowOrder, SKIP};
use crate::error::Result;
use crate::keys::KeyOrder;
use crate::time::WindowSpec;

/// Windows emitted between two interruption checks: a window costs at least a few hundred nanoseconds.
const CHECK_EVERY: u64 = 256;

pub struct PaneEngine {
    spec: WindowSpec,
    panes: BTreeMap<i64, KeySlots>,
    store: SlotStore,
    /// Combined window states of the emission being built (windows of few panes; the sliding stacks finish
    /// their windows themselves).
    pub scratch: SlotStore,
    /// Windows below this one were emitted (or can no longer receive rows).
    next_window: i64,
    /// Key -> scratch slot of the window being combined (windows of few panes, recombined per window).
    window_slot_of_key: Vec<u32>,
    /// The two stacks of windows of many panes (see [`super::sliding`]).
    sliding: Option<Box<Sliding>>,
    /// Reused buffer for row slots.
    slots: Vec<u32>,
    /// Dropped panes' key maps, emptied, for the next panes: a pane's map grows to the key ids' range, and
    /// growing one afresh for every pane cost more than lifting a pane's rows into its keys.
    spare: Vec<KeySlots>,
    /// A batch's short runs, gathered by pane (see [`ShortRuns`]).
    short: ShortRuns,
    /// Where sorted batches' pane runs end (see [`SortedRuns`]).
    runs: SortedRuns,
}

impl PaneEngine {
    pub fn new(spec: WindowSpec, store: SlotStore, scratch: SlotStore) -> Self {
        let sliding = (spec.panes_per_window() >= SLIDING_MIN_PANES)
            .then(|| Box::new(Sliding::new(store.empty_like(), spec.panes_per_window())));
        Self {
            sliding,
            spec,
            panes: BTreeMap::new(),
            store,
            scratch,
            next_window: i64::MIN,
            window_slot_of_key: Vec::new(),
            slots: Vec::new(),
            spare: Vec::new(),
            short: ShortRuns::default(),
            runs: SortedRuns::default(),
        }
    }

    /// Lifts one batch. `keep[i]` says whether row i was admitted; `ts` and `keys` are per row.
    pub fn ingest(
        &mut self,
        ts: &[i64],
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
    ) {
        self.ingest_times(ts, keys, keep, inputs, order, false)
    }

    /// [`Self::ingest`], told whether the batch's times never decrease (its caller checked): then each pane's
    /// run of rows is found by search from a guess at the stream's rate ([`SortedRuns`]), so the pass over the
    /// times its caller made is the batch's only one.
    pub fn ingest_times(
        &mut self,
        ts: &[i64],
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
        sorted: bool,
    ) {
        debug_assert!(
            !sorted || ts.is_sorted(),
            "a batch said to be sorted is not"
        );
        let Self {
            spec,
            panes,
            store,
            slots,
            spare,
            short,
            runs,
            ..
        } = self;
        // The aggregates fused: each pane's run of kept rows is lifted by key, each key's slot looked up once
        // per run rather than once per row.
        let keyed = store.keyed_plan(inputs, keys);
        slots.clear();
        if keyed.is_none() {
            slots.resize(ts.len(), SKIP);
        }
        let kept = |i: usize| keep.is_none_or(|k| k[i]);
        // With a keyed plan, whether this batch's short runs are lifted by slot (see `SHORT_MAX_PANES`).
        let mut scattered = false;
        let mut recent = RecentPanes::default();
        // The pane of the last run found, its times and the end of its rows: a run the keyed lift cut at a
        // dropped row resumes there, without testing its rows' times again.
        let mut found = (0, 0, 0, 0);
        // The first row the admission dropped at or after the current one (`ts.len()` if none): found by scans
        // that only move forward, so each row's flag is read once.
        let mut dropped = 0;
        // The fewest rows a span of two panes takes, if the keyed plan can take two panes' records.
        let min_span = (keyed.as_ref())
            .filter(|plan| plan.takes_groups(SPAN_PANES))
            .map(span_min_rows);
        let mut i = 0;
        while i < ts.len() {
            if !kept(i) {
                i += 1;
                continue;
            }
            // The run of rows from row i within one pane (in-order input comes in long runs): one pane
            // lookup per run, then a key lookup per row.
            if i >= found.3 {
                let (id, start, end) = recent.pane_of(ts[i], spec);
                // Row i lies in `[start, end)`: in sorted times, so do all rows up to the first at `end`.
                let run = if sorted {
                    runs.run_end(&ts[i..], end)
                } else {
                    run_within(&ts[i..], start, end)
                };
                // Row i lies in `[start, end)`, so the loop advances.
                debug_assert!(
                    run > 0,
                    "row {i} at {} outside its pane [{start}, {end})",
                    ts[i]
                );
                found = (id, start, end, i + run);
            }
            let (id, run) = (found.0, found.3 - i);
            if let Some(plan) = &keyed {
                // A run lifted by key holds kept rows only: it ends at the first row the admission dropped.
                if dropped <= i {
                    dropped = keep.map_or(ts.len(), |k| i + kept_prefix(&k[i..]));
                }
                let run = run.min(dropped - i);
                // Rows of two neighbouring panes (see `pane_span`), when the kept rows could make a span.
                let span = min_span
                    .filter(|&min| !scattered && run < SHORT_RUN && dropped - i >= min)
                    .and_then(|min| {
                        pane_span(&ts[i..dropped], (id, found.1, found.2), spec.pane())
                            .filter(|span| span.rows >= min)
                    });
                if run >= SHORT_RUN {
                    store.lift_keyed(i..i + run, keys, plan, open(panes, spare, id));
                } else if let Some(span) = span {
                    lift_span(panes, spare, store, plan, (keys, ts), i, &span);
                    i += span.rows;
                    continue;
                } else if scattered {
                    let pane = open(panes, spare, id);
                    for r in i..i + run {
                        slots[r] = pane.slot(keys[r], store);
                    }
                } else {
                    // The pane's map is looked up when the batch first gathers rows of it, not per run.
                    if short.add(id, i..i + run) {
                        open(panes, spare, id);
                    }
                    if short.used > SHORT_MAX_PANES {
                        // Scattered rows: a keyed pass per pane would cost more than the rows. By slot from
                        // here on, the rows gathered so far included.
                        scattered = true;
                        slots.resize(ts.len(), SKIP);
                        short.place_rows(panes, store, keys, slots);
                    }
                }
                i += run;
                continue;
            }
            let pane = open(panes, spare, id);
            let (out, run_keys) = (&mut slots[i..i + run], &keys[i..i + run]);
            match keep {
                None => {
                    for (slot, &key) in out.iter_mut().zip(run_keys) {
                        *slot = pane.slot(key, store);
                    }
                }
                Some(keep) => {
                    let rows = out.iter_mut().zip(run_keys).zip(&keep[i..i + run]);
                    for ((slot, &key), &kept) in rows {
                        if kept {
                            *slot = pane.slot(key, store);
                        }
                    }
                }
            }
            i += run;
        }
        match &keyed {
            Some(plan) if !scattered => short.lift(panes, store, keys, plan),
            _ => store.update(slots, inputs, order),
        }
    }

    /// Emits every window up to and including `last` that holds a row, and drops the panes no later window
    /// needs. Checks for an interruption every [`CHECK_EVERY`] windows (the caller poisons the operator then).
    pub fn emit_until(&mut self, last: i64, keys: KeyOrder<'_>, out: &mut Emission) -> Result<()> {
        let wp = self.spec.panes_per_window();
        let mut j = self.next_window;
        let mut rows: Vec<(u32, u32)> = Vec::new();
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        // Skip windows without panes: jump to the first window of the next open pane.
        while let Some((&p, _)) = self.panes.range(self.spec.first_pane(j)..).next() {
            j = j.max(self.spec.windows_of_pane(p).0);
            if j > last {
                break;
            }
            if (j as u64).is_multiple_of(CHECK_EVERY) {
                crate::interrupt::check()?;
            }
            let first = self.spec.first_pane(j);
            rows.clear();
            if let Some(sliding) = &mut self.sliding {
                let key_bound = keys.ranks.len();
                sliding.advance(first, first + wp - 1, &self.panes, &self.store, key_bound);
                window_rows(sliding, keys, &mut rows, j, out)?;
                j += 1;
                continue;
            }
            for (_, pane) in self.panes.range(first..first + wp) {
                pairs.clear();
                for &(key, slot) in &pane.entries {
                    let k = key as usize;
                    if k >= self.window_slot_of_key.len() {
                        self.window_slot_of_key.resize(k + 1, SKIP);
                    }
                    let mut ws = self.window_slot_of_key[k];
                    if ws == SKIP {
                        ws = self.scratch.alloc();
                        self.window_slot_of_key[k] = ws;
                        rows.push((key, ws));
                    }
                    pairs.push((ws, slot));
                }
                self.scratch.combine_pairs(&self.store, &pairs);
            }
            if rows.len() * 4 >= keys.sorted.len() {
                // Most keys are present: walking the keys in order beats sorting the window's rows.
                rows.clear();
                for &key in keys.sorted {
                    if let Some(&ws) = self.window_slot_of_key.get(key as usize)
                        && ws != SKIP
                    {
                        rows.push((key, ws));
                    }
                }
                out.push_sorted_window(j, &rows);
            } else {
                out.push_window(j, &mut rows, keys.ranks);
            }
            for &(key, _) in &rows {
                self.window_slot_of_key[key as usize] = SKIP;
            }
            j += 1;
        }
        self.next_window = self.next_window.max(last.saturating_add(1));
        // Drop panes whose last window is out.
        while let Some((&p, _)) = self.panes.first_key_value() {
            if self.spec.windows_of_pane(p).1 > last {
                break;
            }
            self.drop_first_pane(p);
        }
        Ok(())
    }

    /// Takes out every pane up to and including `last` for `output="partials"`: `(pane, key, slot)` in pane
    /// order, keys in output order within a pane. The slots stay allocated until [`Self::release`], so the
    /// caller can export them from [`Self::store`] first.
    pub fn drain_panes(&mut self, last: i64, ranks: &[u32]) -> Vec<(i64, u32, u32)> {
        let mut out = Vec::new();
        while let Some(entry) = self.panes.first_entry() {
            let pane = *entry.key();
            if pane > last {
                break;
            }
            let start = out.len();
            out.extend(entry.remove().entries.iter().map(|&(k, s)| (pane, k, s)));
            out[start..].sort_unstable_by_key(|&(_, k, _)| ranks[k as usize]);
        }
        out
    }

    /// Every open pane from `first` on, without taking it out: `(pane, key, slot)` in pane order, keys in
    /// output order within a pane (what a checkpoint writes, see `super::operator::checkpoint`).
    pub fn open_panes_from(&self, first: i64, ranks: &[u32]) -> Vec<(i64, u32, u32)> {
        let mut out = Vec::new();
        for (&pane, slots) in self.panes.range(first..) {
            let start = out.len();
            out.extend(slots.entries.iter().map(|&(k, s)| (pane, k, s)));
            out[start..].sort_unstable_by_key(|&(_, k, _)| ranks[k as usize]);
        }
        out
    }

    /// Drops the panes before `pane` (a checkpoint's copy of the state, whose windows are out).
    pub fn forget_before(&mut self, pane: i64) {
        while let Some((&p, _)) = self.panes.first_key_value() {
            if p >= pane {
                break;
            }
            self.drop_first_pane(p);
        }
    }

    /// Drops the oldest open pane, `pane`: out of the sliding stacks, its slots released, its map kept empty.
    fn drop_first_pane(&mut self, pane: i64) {
        if let Some(sliding) = &mut self.sliding {
            sliding.evict_dropped(pane, &self.panes, &self.store);
        }
        let Some(dropped) = self.panes.remove(&pane) else {
            return;
        };
        for &(_, slot) in &dropped.entries {
            self.store.release(slot);
        }
        keep_spare(&mut self.spare, dropped);
    }

    pub fn store(&self) -> &SlotStore {
        &self.store
    }

    /// Frees slots taken out by [`Self::drain_panes`].
    pub fn release(&mut self, slots: impl IntoIterator<Item = u32>) {
        slots.into_iter().for_each(|s| self.store.release(s));
    }

    /// The last window that holds a row (for the end of the stream).
    pub fn last_window(&self) -> Option<i64> {
        self.panes
            .last_key_value()
            .map(|(&p, _)| self.spec.windows_of_pane(p).1)
    }

    pub fn open_panes(&self) -> usize {
        self.panes.len()
    }

    pub fn live_slots(&self) -> usize {
        self.store.live()
    }
}

/// Appends window `j` finished from the sliding stacks: a row per key with a pane in the window, in key order.
fn window_rows(
    sliding: &mut Sliding,
    keys: KeyOrder<'_>,
    rows: &mut Vec<(u32, u32)>,
    j: i64,
    out: &mut Emission,
) -> Result<()> {
    if sliding.active_len() * 4 >= keys.sorted.len() {
        // Most keys are present: walking the keys in order beats sorting the window's rows.
        let active = keys.sorted.iter().filter(|&&key| sliding.is_active(key));
        rows.extend(active.map(|&key| (key, 0)));
    } else {
        sliding.push_active(rows);
        rows.sort_unstable_by_key(|&(key, _)| keys.ranks[key as usize]);
    }
    // Row i of the window is row i of its columns.
    (rows.iter_mut().zip(0..)).for_each(|(row, i)| row.1 = i);
    let columns = sliding.finish(rows)?;
    out.push_finished_window(j, rows, columns);
    Ok(())
}

impl super::forget::KeyHolder for PaneEngine {
    fn key_entries(&self) -> usize {
        self.panes.values().map(|p| p.entries.len()).sum()
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        for pane in self.panes.values() {
            for &(key, _) in &pane.entries {
                live[key as usize] = true;
            }
        }
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        for pane in self.panes.values_mut() {
            pane.remap_keys(remap);
        }
        // Between emissions every entry is SKIP: only the length depends on the ids (and so for spare maps).
        self.window_slot_of_key = Vec::new();
        self.spare.clear();
        if let Some(sliding) = &mut self.sliding {
            sliding.remap_keys(remap);
        }
    }
}
