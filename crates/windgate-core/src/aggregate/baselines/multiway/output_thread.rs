//! The merge designs' output thread (MQ, MQLF, TuMLSC): O takes rows in the total order from the per-source
//! queues or the T-Gate, applies them to its windows (MQ's UpdateOutput) and emits complete winsets.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::Sender;
use crossbeam_queue::SegQueue;
use crossbeam_utils::Backoff;

use super::{IDLE_PARK, RowRef};
use crate::aggregate::parallel::{Admitted, AggWindow};
use crate::aggregate::slots::{KeySlots, SlotStore};
use crate::aggregate::state::{AggMeta, OrderKey, RowOrder, SKIP};
use crate::order::scale_gate::{NextItem, Reader};
use crate::runtime::collector::{OutMsg, report_panic};
use crate::runtime::monitor::WorkerCounters;
use crate::threads::idle_step;
use crate::time::WindowSpec;

/// A source's queue (MQ, MQLF).
#[allow(clippy::large_enum_variant)] // one per source, never moved
pub(super) enum Queue {
    Locked(Mutex<VecDeque<RowRef>>),
    LockFree(SegQueue<RowRef>),
}

impl Queue {
    pub(super) fn push(&self, r: RowRef) {
        match self {
            Queue::Locked(q) => q.lock().expect("queue lock").push_back(r),
            Queue::LockFree(q) => q.push(r),
        }
    }

    fn pop(&self) -> Option<RowRef> {
        match self {
            Queue::Locked(q) => q.lock().expect("queue lock").pop_front(),
            Queue::LockFree(q) => q.pop(),
        }
    }
}

pub(super) struct SourceQueue {
    pub(super) queue: Queue,
    /// Set (Release) after the source's last row was pushed: O that sees it (Acquire) and then finds the queue
    /// empty has seen every row of the source.
    pub(super) closed: AtomicBool,
}

/// O's end of the S-Merge.
pub(super) enum Merge {
    Queues {
        queues: Arc<Vec<SourceQueue>>,
        heads: Vec<Option<RowRef>>,
        done: Vec<bool>,
        /// Last key taken from each source: its later rows are above it.
        taken: Vec<Option<OrderKey>>,
    },
    Gate(Reader<OrderKey, RowRef>),
}

/// What O's merge step found.
enum Step {
    Row(RowRef),
    /// Nothing ready; every row not yet taken is at or above this key (`None`: no bound yet).
    Wait(Option<OrderKey>),
    End,
}

impl Merge {
    pub(super) fn queues(queues: Arc<Vec<SourceQueue>>) -> Self {
        let n = queues.len();
        Merge::Queues {
            queues,
            heads: (0..n).map(|_| None).collect(),
            done: vec![false; n],
            taken: vec![None; n],
        }
    }

    fn next(&mut self) -> Step {
        match self {
            Merge::Gate(reader) => match reader.next_ready() {
                NextItem::Item(_, r) => Step::Row(RowRef {
                    chunk: r.chunk.clone(),
                    row: r.row,
                }),
                NextItem::Pending => Step::Wait(reader.pending_key()),
                NextItem::End => Step::End,
            },
            Merge::Queues {
                queues,
                heads,
                done,
                taken,
            } => {
                // Algorithm 2 [L5-L7]: every open source must have a head; then the smallest key goes.
                let mut best: Option<(OrderKey, usize)> = None;
                let mut bound: Option<OrderKey> = None;
                let mut blocked = false;
                for j in 0..queues.len() {
                    if done[j] {
                        continue;
                    }
                    if heads[j].is_none() {
                        let closed = queues[j].closed.load(Ordering::Acquire);
                        heads[j] = queues[j].queue.pop();
                        if heads[j].is_none() && closed {
                            done[j] = true;
                            continue;
                        }
                    }
                    match &heads[j] {
                        Some(r) => {
                            let k = r.key();
                            if best.is_none_or(|(b, _)| k < b) {
                                best = Some((k, j));
                            }
                        }
                        None => {
                            blocked = true;
                            bound = min_key(bound, taken[j]);
                            if taken[j].is_none() {
                                return Step::Wait(None);
                            }
                        }
                    }
                }
                match best {
                    None if !blocked => Step::End,
                    Some((k, j)) if !blocked => {
                        taken[j] = Some(k);
                        Step::Row(heads[j].take().expect("head"))
                    }
                    Some((k, _)) => Step::Wait(min_key(bound, Some(k))),
                    None => Step::Wait(bound),
                }
            }
        }
    }
}

fn min_key(a: Option<OrderKey>, b: Option<OrderKey>) -> Option<OrderKey> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// O: merges, updates the windows, emits complete winsets.
pub(super) struct Output {
    pub(super) spec: WindowSpec,
    pub(super) metas: Vec<Arc<AggMeta>>,
    pub(super) merge: Merge,
    pub(super) out: Sender<OutMsg<AggWindow>>,
    pub(super) counters: Arc<WorkerCounters>,
    pub(super) in_flight: Arc<AtomicU64>,
}

impl Output {
    pub(super) fn run(mut self) {
        let out = self.out.clone();
        report_panic(&out, || "multiway output thread".into(), || self.serve());
    }

    fn serve(&mut self) {
        let mut w = Winsets::new(&self.metas, self.spec);
        let mut progress = i64::MIN;
        let backoff = Backoff::new();
        loop {
            let t0 = Instant::now();
            let mut rows = 0u64;
            let step = loop {
                match self.merge.next() {
                    Step::Row(r) => {
                        w.take(r);
                        rows += 1;
                    }
                    other => break other,
                }
            };
            if rows > 0 {
                self.in_flight.fetch_sub(rows, Ordering::Relaxed);
            }
            let last = match step {
                Step::Row(_) => unreachable!("rows are taken above"),
                Step::End => i64::MAX,
                Step::Wait(None) => progress,
                Step::Wait(Some(k)) => self.spec.last_closed_window(k.ts),
            };
            if last > progress {
                w.apply_pending();
                if !w.emit_through(last, &self.out)
                    || self.out.send(OutMsg::Progress(last)).is_err()
                {
                    return;
                }
                progress = last;
            }
            self.counters.add(t0.elapsed(), rows);
            if matches!(step, Step::End) {
                return;
            }
            idle_step(&backoff, rows > 0, IDLE_PARK);
        }
    }
}

/// O's live windows (MQ's UpdateOutput): one store, a key map per window. Ready rows are kept as runs per
/// source and applied a run at a time (one kernel pass per window offset); states combine exactly, so this
/// gives the states a row-at-a-time update in the total order would.
struct Winsets {
    spec: WindowSpec,
    metas: Vec<Arc<AggMeta>>,
    store: SlotStore,
    by_id: BTreeMap<i64, KeySlots>,
    /// Per source: the chunk and row range taken but not applied yet.
    pending: Vec<Option<(Arc<Admitted>, usize, usize)>>,
    slots: Vec<u32>,
}

impl Winsets {
    fn new(metas: &[Arc<AggMeta>], spec: WindowSpec) -> Self {
        Self {
            spec,
            metas: metas.to_vec(),
            store: SlotStore::new(metas),
            by_id: BTreeMap::new(),
            pending: vec![],
            slots: vec![],
        }
    }

    fn take(&mut self, r: RowRef) {
        let j = r.chunk.source as usize;
        if self.pending.len() <= j {
            self.pending.resize_with(j + 1, || None);
        }
        let row = r.row as usize;
        if let Some((c, _, hi)) = &mut self.pending[j]
            && Arc::ptr_eq(c, &r.chunk)
            && *hi == row
        {
            *hi += 1;
            return;
        }
        if let Some(run) = self.pending[j].replace((r.chunk, row, row + 1)) {
            self.apply(run);
        }
    }

    fn apply_pending(&mut self) {
        for j in 0..self.pending.len() {
            if let Some(run) = self.pending[j].take() {
                self.apply(run);
            }
        }
    }

    /// Updates every window of rows `lo..hi` of `chunk`, one kernel pass per window offset.
    fn apply(&mut self, (chunk, lo, hi): (Arc<Admitted>, usize, usize)) {
        let per_row = self.spec.windows_per_row();
        let inputs: Vec<_> = chunk.inputs.iter().map(|v| v.slice(lo, hi - lo)).collect();
        let order = RowOrder {
            ts: &chunk.ts[lo..hi],
            by: chunk.by.as_ref().map(|b| &b[lo..hi]),
            source: chunk.source,
            seq0: chunk.seq0 + lo as u64,
        };
        self.slots.resize(hi - lo, SKIP);
        for d in 0..per_row {
            let mut any = false;
            for (s, i) in self.slots.iter_mut().zip(lo..hi) {
                let (first, last) = self.spec.windows_of_ts(chunk.ts[i]);
                let k = first + d;
                *s = if k > last {
                    SKIP
                } else {
                    any = true;
                    self.by_id
                        .entry(k)
                        .or_default()
                        .slot(chunk.keys[i], &mut self.store)
                };
            }
            if any {
                self.store.update(&self.slots, &inputs, order);
            }
        }
    }

    /// Sends the windows up to `last`, in order.
    fn emit_through(&mut self, last: i64, out: &Sender<OutMsg<AggWindow>>) -> bool {
        while let Some(entry) = self.by_id.first_entry() {
            if *entry.key() > last {
                break;
            }
            let (k, keys) = entry.remove_entry();
            let mut win = AggWindow::new(&self.metas);
            win.merge_slots(&self.store, &keys.entries);
            for &(_, slot) in &keys.entries {
                self.store.release(slot);
            }
            if out.send(OutMsg::Window(k, win)).is_err() {
                return false;
            }
        }
        true
    }
}
