//! The W-Hive designs of Cederman et al.: window state lives in the W-Hive ([`crate::aggregate::w_hive`]),
//! one partial per updater, and the output thread O takes each winset once no updater can touch it.
//!
//! * TuMLMC: the sources feed a T-Gate; `U` updater threads each read every ready row in the total order and
//!   update only the keys hashed to them, so each (window, key) sees its rows in the total order, on one
//!   thread. Each updater advances its progress on every row it reads, and to the gate's pending key when it
//!   waits, so rare keys or more updaters than keys never stall the output.
//! * WiML: each source's input thread updates the W-Hive directly with its own (sorted) rows; no merge at
//!   all. Its partials are per source, so "order-sensitive" functions work too: first/last pick by the
//!   total order `(ts, source, seq)`, which combines exactly across partials.
//!
//! Either way O merges a winset's partials (exact combines) and emits it, and reports the W-Hive's watermark
//! as progress so the caller's collector can release the windows in order.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;
use crossbeam_utils::Backoff;

use super::{IDLE_PARK, RowRef};
use crate::aggregate::parallel::{Admitted, AggWindow};
use crate::aggregate::slots::{KeySlots, SlotStore};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder, SKIP};
use crate::aggregate::w_hive::{self, Updater};
use crate::order::scale_gate::{NextItem, Reader};
use crate::runtime::collector::{OutMsg, report_panic};
use crate::runtime::monitor::WorkerCounters;
use crate::threads::idle_step;
use crate::time::WindowSpec;

/// One updater's partial of one window: its keys and their states (`None` until the updater touches it).
#[derive(Default)]
pub(super) struct Part(Option<(KeySlots, SlotStore)>);

/// Adds rows `lo..hi` of `chunk` (those `take` accepts; late rows are never taken) to every window of their
/// times, through `updater`: one W-Hive visit and one vectorised state update per run of rows in the same
/// pane (same windows), instead of one per row. Safe for the W-Hive's protocol because the updater's
/// progress is the run's first time while it writes, which is below the end of every window of the run.
pub(super) fn update_rows(
    updater: &mut Updater<Part>,
    metas: &[Arc<AggMeta>],
    spec: &WindowSpec,
    chunk: &Admitted,
    (lo, hi): (usize, usize),
    take: impl Fn(usize) -> bool,
    slots: &mut Vec<u32>,
) {
    let keep = chunk.keep.as_deref();
    // Rows the operator did not admit (a dropped null time, a late row) have no usable time: they neither
    // start nor end a run, nor move the updater's progress (a late row's time is below it).
    let kept = |i: usize| keep.is_none_or(|k| k[i]);
    let mut start = lo;
    while start < hi {
        if !kept(start) {
            start += 1;
            continue;
        }
        let pane = spec.pane_of(chunk.ts[start]);
        let end = (start + 1..hi)
            .find(|&i| kept(i) && spec.pane_of(chunk.ts[i]) != pane)
            .unwrap_or(hi);
        let last = chunk.ts[(start..end).rev().find(|&i| kept(i)).unwrap_or(start)];
        let n = end - start;
        if !(start..end).any(|i| kept(i) && take(i)) {
            updater.advance(last);
            start = end;
            continue;
        }
        let inputs: Vec<InputValues> = chunk.inputs.iter().map(|v| v.slice(start, n)).collect();
        let order = RowOrder {
            ts: &chunk.ts[start..end],
            by: chunk.by.as_ref().map(|b| &b[start..end]),
            source: chunk.source,
            seq0: chunk.seq0 + start as u64,
        };
        updater.update(chunk.ts[start], |_, part| {
            let (keys, store) = part
                .0
                .get_or_insert_with(|| (KeySlots::default(), SlotStore::new(metas)));
            slots.clear();
            slots.extend((start..end).map(|i| {
                if kept(i) && take(i) {
                    keys.slot(chunk.keys[i], store)
                } else {
                    SKIP
                }
            }));
            store.update(slots, &inputs, order);
        });
        // Progress as a row-by-row update would leave it: at the run's last time.
        updater.advance(last);
        start = end;
    }
}

/// A TuMLMC updater: reads every ready row of the T-Gate, updates the keys hashed to it.
pub(super) struct HiveUpdater {
    pub(super) spec: WindowSpec,
    pub(super) me: usize,
    pub(super) of: usize,
    pub(super) metas: Vec<Arc<AggMeta>>,
    pub(super) reader: Reader<super::OrderKey, RowRef>,
    pub(super) updater: Updater<Part>,
    pub(super) out: Sender<OutMsg<AggWindow>>,
    pub(super) counters: Arc<WorkerCounters>,
}

impl HiveUpdater {
    pub(super) fn run(mut self) {
        let (out, me) = (self.out.clone(), self.me);
        report_panic(&out, || format!("multiway updater {me}"), || self.serve());
        // Dropping the updater closes it (progress = MAX), so the output is never held back by a dead one.
    }

    fn serve(&mut self) {
        let backoff = Backoff::new();
        let mut slots = Vec::new();
        loop {
            let t0 = Instant::now();
            let mut rows = 0u64;
            // Consecutive ready rows of one chunk are updated as a run (rows of other keys skipped in it).
            let mut run: Option<(Arc<Admitted>, usize, usize)> = None;
            let end = loop {
                match self.reader.next_ready() {
                    NextItem::Item(_, r) => {
                        let (chunk, i) = (r.chunk.clone(), r.row as usize);
                        rows += (mine(chunk.keys[i], self.of) == self.me) as u64;
                        match &mut run {
                            Some((c, _, hi)) if Arc::ptr_eq(c, &chunk) && *hi == i => *hi += 1,
                            _ => {
                                self.flush(run.take(), &mut slots);
                                run = Some((chunk, i, i + 1));
                            }
                        }
                    }
                    NextItem::Pending => break false,
                    NextItem::End => break true,
                }
            };
            self.flush(run, &mut slots);
            if end {
                return;
            }
            // Every row still to come has a key at least the gate's pending key.
            if let Some(k) = self.reader.pending_key() {
                self.updater.advance(k.ts);
            }
            self.counters.add(t0.elapsed(), rows);
            idle_step(&backoff, rows > 0, IDLE_PARK);
        }
    }

    /// Updates this updater's keys among rows `lo..hi` of `chunk`; progress moves over the others too, so an
    /// updater whose keys are absent from a chunk never holds the W-Hive back.
    fn flush(&mut self, run: Option<(Arc<Admitted>, usize, usize)>, slots: &mut Vec<u32>) {
        let Some((chunk, lo, hi)) = run else {
            return;
        };
        let (me, of) = (self.me, self.of);
        let spec = self.spec;
        update_rows(
            &mut self.updater,
            &self.metas,
            &spec,
            &chunk,
            (lo, hi),
            |i| mine(chunk.keys[i], of) == me,
            slots,
        );
    }
}

/// Which updater owns key `key` of `of` (a multiplicative hash: adjacent ids spread).
fn mine(key: u32, of: usize) -> usize {
    ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % of
}

/// O of the W-Hive designs.
pub(super) struct HiveOutput {
    pub(super) spec: WindowSpec,
    pub(super) metas: Vec<Arc<AggMeta>>,
    pub(super) output: w_hive::Output<Part>,
    pub(super) out: Sender<OutMsg<AggWindow>>,
    pub(super) counters: Arc<WorkerCounters>,
}

impl HiveOutput {
    pub(super) fn run(mut self) {
        let out = self.out.clone();
        report_panic(&out, || "multiway output thread".into(), || self.serve());
    }

    fn serve(&mut self) {
        let mut progress = i64::MIN;
        let backoff = Backoff::new();
        loop {
            let t0 = Instant::now();
            let mut windows = 0u64;
            let end = loop {
                match self.output.next_ready() {
                    w_hive::NextWinset::Winset(j, parts) => {
                        let mut win = AggWindow::new(&self.metas);
                        for Part(p) in &parts {
                            if let Some((keys, store)) = p {
                                win.merge_slots(store, &keys.entries);
                            }
                        }
                        if self.out.send(OutMsg::Window(j, win)).is_err() {
                            return;
                        }
                        windows += 1;
                    }
                    w_hive::NextWinset::Pending => break false,
                    w_hive::NextWinset::End => break true,
                }
            };
            if self.output.poisoned() {
                let _ = self
                    .out
                    .send(OutMsg::Failed("a multiway updater failed".into()));
                return;
            }
            let last = if end {
                i64::MAX
            } else {
                self.spec.last_closed_window(self.output.watermark())
            };
            if last > progress {
                if self.out.send(OutMsg::Progress(last)).is_err() {
                    return;
                }
                progress = last;
            }
            self.counters.add(t0.elapsed(), windows);
            if end {
                return;
            }
            idle_step(&backoff, windows > 0, IDLE_PARK);
        }
    }
}
