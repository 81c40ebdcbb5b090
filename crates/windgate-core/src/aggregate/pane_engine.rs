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
use super::sliding::{SLIDING_MIN_PANES, Sliding};
use super::slots::{KeySlots, KeyedPlan, SlotStore};
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
    /// The per-key stacks of windows of many panes (see [`super::sliding`]).
    sliding: Option<Box<Sliding>>,
    /// Reused buffer for row slots.
    slots: Vec<u32>,
    /// Dropped panes' key maps, emptied, for the next panes: a pane's map grows to the key ids' range, and
    /// growing one afresh for every pane cost more than lifting a pane's rows into its keys.
    spare: Vec<KeySlots>,
    /// A batch's short runs, gathered by pane (see [`ShortRuns`]).
    short: ShortRuns,
}

/// Runs of fewer rows than this (rows of a stream's bounded disorder near a pane's edge, where neighbouring rows
/// alternate between two panes) are gathered by pane and lifted by key once per pane and batch (see
/// [`ShortRuns`]): a keyed lift costs a fused pass's set-up (its lane's scale, its records, their absorption),
/// and paid per run of a row or two it cost more than the rows, whose sums also landed at as many scales.
const SHORT_RUN: usize = 64;

/// The rows of a batch's short runs (see [`SHORT_RUN`]), by pane: gathered into one column of keys and one of
/// values per pane, they are lifted by key like a long run. (Lifted by slot instead, a row of them cost some
/// 130 instructions: nearly every row its own slot, each slot absorbed into every aggregate.)
#[derive(Debug, Default)]
struct ShortRuns {
    /// `(pane, rows)`, panes in order of first appearance; the first `used` hold this batch's rows, the rest
    /// are emptied vectors kept for the next batch.
    panes: Vec<(i64, Vec<u32>)>,
    used: usize,
    keys: Vec<u32>,
    values: Vec<f64>,
}

/// Room [`ShortRuns`] keeps between batches: a batch's gathered rows must not stay allocated.
const SHORT_KEEP_PANES: usize = 8;
const SHORT_KEEP_ROWS: usize = 1 << 14;

/// Panes a batch's short runs may fall in before they are lifted by slot instead of gathered (scattered rows,
/// a row or two a pane, would pay a keyed pass per pane). Measured on a shuffled table with panes of 1 ms and
/// windows of 6 (`strategy="pane"`, one row a pane and batch): 0.23 M rows/s gathered, 0.34 M by slot.
const SHORT_MAX_PANES: usize = 16;

impl ShortRuns {
    /// Adds rows `rows` of pane `pane`: a search of at most [`SHORT_MAX_PANES`] + 1 panes, since the caller
    /// lifts the rows by slot past that. Returns whether the pane is new to the batch.
    fn add(&mut self, pane: i64, rows: std::ops::Range<usize>) -> bool {
        let (at, new) = match self.panes[..self.used].iter().position(|p| p.0 == pane) {
            Some(at) => (at, false),
            None => {
                if self.used == self.panes.len() {
                    self.panes.push((pane, Vec::new()));
                }
                self.panes[self.used].0 = pane;
                self.used += 1;
                (self.used - 1, true)
            }
        };
        self.panes[at].1.extend(rows.map(|r| r as u32));
        new
    }

    /// Gives each row added since the last call its slot in its pane (`slots` has a place for every row of
    /// the batch), and forgets them.
    fn place_rows(
        &mut self,
        panes: &mut BTreeMap<i64, KeySlots>,
        store: &mut SlotStore,
        keys: &[u32],
        slots: &mut [u32],
    ) {
        for (pane, rows) in &self.panes[..self.used] {
            let group = panes.get_mut(pane).expect("a short run's pane is open");
            for &r in rows {
                slots[r as usize] = group.slot(keys[r as usize], store);
            }
        }
        self.forget();
    }

    /// Lifts the rows added since the last call into their panes, through `plan`, and forgets them.
    fn lift(
        &mut self,
        panes: &mut BTreeMap<i64, KeySlots>,
        store: &mut SlotStore,
        keys: &[u32],
        plan: &KeyedPlan<'_>,
    ) {
        for (pane, rows) in &mut self.panes[..self.used] {
            let group = panes.get_mut(pane).expect("a short run's pane is open");
            self.keys.clear();
            self.keys.extend(rows.iter().map(|&r| keys[r as usize]));
            self.values.clear();
            self.values
                .extend(rows.iter().map(|&r| plan.values()[r as usize]));
            store.lift_keyed_values(&self.keys, &self.values, plan, group);
            rows.clear();
        }
        self.forget();
    }

    /// Empties the panes' rows (they were lifted), keeping no more room than [`SHORT_KEEP_PANES`] and
    /// [`SHORT_KEEP_ROWS`] say.
    fn forget(&mut self) {
        self.panes[..self.used].iter_mut().for_each(|(_, rows)| {
            rows.clear();
            release_large(rows);
        });
        self.used = 0;
        self.panes.truncate(SHORT_KEEP_PANES);
        release_large(&mut self.keys);
        release_large(&mut self.values);
    }
}

/// Frees `v`'s room if it outgrew what [`ShortRuns`] keeps between batches.
fn release_large<T>(v: &mut Vec<T>) {
    if v.capacity() > SHORT_KEEP_ROWS {
        *v = Vec::new();
    }
}

/// Pane `id`'s key map, opened (from the spare maps) if the pane is new.
fn open<'a>(
    panes: &'a mut BTreeMap<i64, KeySlots>,
    spare: &mut Vec<KeySlots>,
    id: i64,
) -> &'a mut KeySlots {
    (panes.entry(id)).or_insert_with(|| spare.pop().unwrap_or_default())
}

/// The last two panes a batch's runs fell in, `(pane, start, end)`, newest first: rows in bounded disorder near a
/// pane's edge alternate between two panes, and each run paid a division for its pane and a multiplication for
/// the pane's times. Empty ranges at first, which hold no time.
#[derive(Debug, Default)]
struct RecentPanes([(i64, i64, i64); 2]);

impl RecentPanes {
    /// The pane of time `t` and its times `[start, end)`.
    #[inline]
    fn pane_of(&mut self, t: i64, spec: &WindowSpec) -> (i64, i64, i64) {
        let [a, b] = self.0;
        if (a.1..a.2).contains(&t) {
            return a;
        }
        if (b.1..b.2).contains(&t) {
            self.0 = [b, a];
            return b;
        }
        let id = spec.pane_of(t);
        let (start, end) = spec.pane_bounds(id);
        self.0 = [(id, start, end), a];
        (id, start, end)
    }
}

/// Emptied key maps kept for reuse (see `PaneEngine::spare`): about the panes dropped at one emission.
const SPARE_MAPS: usize = 4;

impl PaneEngine {
    pub fn new(spec: WindowSpec, store: SlotStore, scratch: SlotStore) -> Self {
        let sliding = (spec.panes_per_window() >= SLIDING_MIN_PANES)
            .then(|| Box::new(Sliding::new(store.empty_like())));
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
        let Self {
            spec,
            panes,
            store,
            slots,
            spare,
            short,
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
        // The pane of the last run found and the end of its rows: a run the keyed lift cut at a dropped row
        // resumes there, without testing its rows' times again.
        let mut found = (0, 0);
        let mut i = 0;
        while i < ts.len() {
            if !kept(i) {
                i += 1;
                continue;
            }
            // The run of rows from row i within one pane (in-order input comes in long runs): one pane
            // lookup per run, then a key lookup per row.
            if i >= found.1 {
                let (id, start, end) = recent.pane_of(ts[i], spec);
                let run = run_within(&ts[i..], start, end);
                // Row i lies in `[start, end)`, so the loop advances.
                debug_assert!(
                    run > 0,
                    "row {i} at {} outside its pane [{start}, {end})",
                    ts[i]
                );
                found = (id, i + run);
            }
            let (id, run) = (found.0, found.1 - i);
            if let Some(plan) = &keyed {
                // A run lifted by key holds kept rows only: it ends at the first row the admission dropped.
                let run = keep.map_or(run, |k| kept_prefix(&k[i..i + run]));
                if run >= SHORT_RUN {
                    store.lift_keyed(i..i + run, keys, plan, open(panes, spare, id));
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
                sliding.advance(first, first + wp - 1, &self.panes, &self.store);
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
        while let Some(entry) = self.panes.first_entry() {
            if self.spec.windows_of_pane(*entry.key()).1 > last {
                break;
            }
            if let Some(sliding) = &mut self.sliding {
                sliding.evict_dropped(*entry.key(), &entry.get().entries, &self.store);
            }
            for &(_, slot) in &entry.get().entries {
                self.store.release(slot);
            }
            keep_spare(&mut self.spare, entry.remove());
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
        while let Some(entry) = self.panes.first_entry() {
            if *entry.key() >= pane {
                break;
            }
            if let Some(sliding) = &mut self.sliding {
                sliding.evict_dropped(*entry.key(), &entry.get().entries, &self.store);
            }
            for &(_, slot) in &entry.get().entries {
                self.store.release(slot);
            }
            keep_spare(&mut self.spare, entry.remove());
        }
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

/// Keeps a dropped pane's key map, emptied, for a later pane (see `PaneEngine::spare`).
fn keep_spare(spare: &mut Vec<KeySlots>, mut pane: KeySlots) {
    if spare.len() < SPARE_MAPS {
        pane.empty();
        spare.push(pane);
    }
}

crate::prefetch::with_avx2! {
    /// How many rows from the first have times in `[start, end)`. In-order input comes in runs of thousands
    /// of rows: blocks of [`RUN_BLOCK`] rows are tested whole (a compare the compiler vectorises, with AVX2's
    /// 64-bit compares where the CPU has them), and only the block where the run ends row by row.
    fn run_within(ts: &[i64], start: i64, end: i64) -> usize = run_within_blocks;
}

/// The portable body of [`run_within`].
#[inline(always)]
fn run_within_blocks(ts: &[i64], start: i64, end: i64) -> usize {
    let inside = |t: &i64| (start..end).contains(t);
    // A short run (rows of a stream's bounded disorder alternate between two panes at a pane's edge) ends
    // within its first rows: a look at them spares the block test.
    let head = ts.iter().take(RUN_HEAD).take_while(|t| inside(t)).count();
    if head < RUN_HEAD {
        return head;
    }
    let mut run = head;
    for block in ts[head..].chunks(RUN_BLOCK) {
        if !block.iter().fold(true, |all, t| all & inside(t)) {
            return run + block.iter().take_while(|t| inside(t)).count();
        }
        run += block.len();
    }
    run
}

/// How many of the rows `keep` flags, from the first, are kept (at least one: a run starts at a kept row).
fn kept_prefix(keep: &[bool]) -> usize {
    keep.iter().position(|&k| !k).unwrap_or(keep.len())
}

/// Rows a pane run is tested by at once (see [`run_within`]).
const RUN_BLOCK: usize = 64;

/// Rows [`run_within`] tests one by one before it tests blocks.
const RUN_HEAD: usize = 8;

/// Appends window `j` finished from the sliding stacks: a row per key with a pane in the window, in key order.
fn window_rows(
    sliding: &mut Sliding,
    keys: KeyOrder<'_>,
    rows: &mut Vec<(u32, u32)>,
    j: i64,
    out: &mut Emission,
) -> Result<()> {
    if sliding.active().len() * 4 >= keys.sorted.len() {
        // Most keys are present: walking the keys in order beats sorting the window's rows.
        let active = keys.sorted.iter().filter(|&&key| sliding.is_active(key));
        rows.extend(active.map(|&key| (key, 0)));
    } else {
        rows.extend(sliding.active().iter().map(|&key| (key, 0)));
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The blocked run length is the row-by-row one, for runs ending anywhere in or across blocks.
        #[test]
        fn run_within_counts_the_leading_rows_in_range(
            ts in prop::collection::vec(-5i64..20, 0..300),
            start in -5i64..10,
            len in 0i64..15,
        ) {
            let end = start + len;
            let want = ts.iter().take_while(|&&t| t >= start && t < end).count();
            prop_assert_eq!(run_within(&ts, start, end), want);
        }
    }

    #[test]
    fn run_within_long_runs() {
        let ts: Vec<i64> = (0..1000).map(|i| i / 300).collect();
        assert_eq!(run_within(&ts, 0, 1), 300);
        assert_eq!(run_within(&ts, 0, 3), 900);
        assert_eq!(run_within(&ts, 0, 9), 1000);
        assert_eq!(run_within(&ts[300..], 1, 2), 300);
        assert_eq!(run_within(&[], 0, 9), 0);
    }
}
