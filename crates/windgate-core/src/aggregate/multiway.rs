//! Multiway aggregation (seed 000, brief 000 §2): several time-sorted sources feed one window aggregate, each
//! through its own input thread, and an output thread O merges them into the total order `(ts, source, seq)`,
//! updates the windows and emits each winset once no source can still touch it.
//!
//! The designs differ in how the sources are merged (the S-Merge stage):
//! * `"mq"` (Algorithm 2): a queue per source, guarded by a lock; O keeps one head per queue and takes the
//!   smallest key, scanning all N heads per row. Its cost grows with N, which is what the paper shows.
//! * `"mqlf"`: the same with lock-free queues (crossbeam's `SegQueue`, standing in for the paper's
//!   Michael-Scott queue), to show that the locks are not the whole cost.
//! * `"tumlsc"` (Algorithm 4 and §2.3): the input threads insert into a T-Gate (the ScaleGate of
//!   [`crate::order::scale_gate`], one module for both papers), and O reads ready rows in the total order with
//!   an O(1) readiness check.
//!
//! Readiness is the same for all three (brief 000 §1.2 with ties broken by source): a row is processed only
//! when every open source has a later key queued or consumed, so the rows are applied in one order, the total
//! order. Every aggregate state combines exactly (integer and exact float sums; first/last by the total
//! order), so O may apply ready rows in runs per source without changing a bit of the result.
//!
//! Emission: when O waits, every row it has not processed has a key at least `frontier` (the smallest key it
//! waits at), so the windows ending by `frontier.ts` are complete; O sends them in window order, then a
//! progress report ([`OutMsg::Progress`]) that lets the caller's collector release them.
//!
//! Memory: the caller's hand-off to each input thread is bounded (a few chunks), so a slow input thread backs
//! pressure up to `push`. Rows that wait for a stalled source stay in the queues or the gate (brief 000 A5:
//! credits that bound this are not implemented yet; `stats` reports rows in flight).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use crossbeam_queue::SegQueue;
use crossbeam_utils::Backoff;

use super::farm_engine::{Admitted, AggWindow};
use super::slots::{KeySlots, SlotStore};
use super::state::{AggMeta, OrderKey, RowOrder, SKIP};
use crate::error::Result;
use crate::order::scale_gate::{Next, Reader, ScaleGate, Source};
use crate::runtime::farm::{Collector, OutMsg, panic_message, spawn};
use crate::runtime::monitor::WorkerCounters;
use crate::time::WindowSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    Mq,
    MqLf,
    TuMlSc,
}

/// Chunks the caller may hand an input thread before `push` waits.
const HANDOFF_CHUNKS: usize = 4;
/// O's longest sleep when nothing is ready (input threads wake it after every chunk).
const IDLE_PARK: Duration = Duration::from_millis(1);

/// One row of a chunk, as the queues and the gate carry it.
struct RowRef {
    chunk: Arc<Admitted>,
    row: u32,
}

impl RowRef {
    fn key(&self) -> OrderKey {
        let i = self.row as usize;
        OrderKey {
            ts: self.chunk.ts[i],
            source: self.chunk.source,
            seq: self.chunk.seq0 + i as u64,
        }
    }
}

enum InMsg {
    Rows(Arc<Admitted>),
    Close,
}

/// A source's queue (MQ, MQLF).
#[allow(clippy::large_enum_variant)] // one per source, never moved
enum Queue {
    Locked(Mutex<VecDeque<RowRef>>),
    LockFree(SegQueue<RowRef>),
}

impl Queue {
    fn push(&self, r: RowRef) {
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

struct SourceQueue {
    queue: Queue,
    /// Set (Release) after the source's last row was pushed: O that sees it (Acquire) and then finds the queue
    /// empty has seen every row of the source.
    closed: AtomicBool,
}

/// An input thread's end of the S-Merge.
enum Feed {
    Queue(Arc<Vec<SourceQueue>>, usize),
    Gate(Source<OrderKey, RowRef>),
}

/// O's end of the S-Merge.
enum Merge {
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
    fn next(&mut self) -> Step {
        match self {
            Merge::Gate(reader) => match reader.next_ready() {
                Next::Item(_, r) => Step::Row(RowRef {
                    chunk: r.chunk.clone(),
                    row: r.row,
                }),
                Next::Pending => Step::Wait(reader.pending_key()),
                Next::End => Step::End,
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

/// The engine as the operator sees it: `submit` per source, `close_source`, `collect`.
pub struct MultiwayEngine {
    inputs: Vec<Option<Sender<InMsg>>>,
    collector: Collector<AggWindow>,
    /// The output thread (last) and the input threads.
    threads: Vec<JoinHandle<()>>,
    counters: Vec<Arc<WorkerCounters>>,
    in_flight: Arc<AtomicU64>,
    output: Thread,
}

impl MultiwayEngine {
    pub fn new(design: Design, spec: WindowSpec, metas: &[Arc<AggMeta>], sources: usize) -> Self {
        let n = sources.max(1);
        let (out_tx, out_rx) = unbounded();
        let in_flight = Arc::new(AtomicU64::new(0));
        let (feeds, merge) = match design {
            Design::TuMlSc => {
                let (srcs, mut readers) = ScaleGate::new::<OrderKey, RowRef>(n, 1, 3);
                let feeds = srcs.into_iter().map(Feed::Gate).collect::<Vec<_>>();
                (feeds, Merge::Gate(readers.pop().expect("one reader")))
            }
            Design::Mq | Design::MqLf => {
                let queues: Arc<Vec<SourceQueue>> = Arc::new(
                    (0..n)
                        .map(|_| SourceQueue {
                            queue: match design {
                                Design::Mq => Queue::Locked(Mutex::default()),
                                _ => Queue::LockFree(SegQueue::new()),
                            },
                            closed: AtomicBool::new(false),
                        })
                        .collect(),
                );
                let feeds = (0..n).map(|j| Feed::Queue(queues.clone(), j)).collect();
                let merge = Merge::Queues {
                    queues,
                    heads: (0..n).map(|_| None).collect(),
                    done: vec![false; n],
                    taken: vec![None; n],
                };
                (feeds, merge)
            }
        };
        let o_counters = Arc::new(WorkerCounters::default());
        let out = Output {
            spec,
            metas: metas.to_vec(),
            merge,
            out: out_tx.clone(),
            counters: o_counters.clone(),
            in_flight: in_flight.clone(),
        };
        let o = spawn("windgate-multiway-o".into(), move || out.run());
        let output = o.thread().clone();
        let mut threads = vec![];
        let mut inputs = vec![];
        let mut counters = vec![];
        for (j, feed) in feeds.into_iter().enumerate() {
            let (tx, rx) = bounded(HANDOFF_CHUNKS);
            let c = Arc::new(WorkerCounters::default());
            let input = InputThread {
                rx,
                feed,
                output: output.clone(),
                out: out_tx.clone(),
                counters: c.clone(),
                in_flight: in_flight.clone(),
            };
            threads.push(spawn(format!("windgate-multiway-i{j}"), move || {
                input.run(j)
            }));
            inputs.push(Some(tx));
            counters.push(c);
        }
        counters.push(o_counters);
        threads.push(o);
        Self {
            inputs,
            collector: Collector::new(out_rx),
            threads,
            counters,
            in_flight,
            output,
        }
    }

    pub fn workers(&self) -> usize {
        self.counters.len()
    }

    /// Busy time per thread: the input threads, then O.
    pub fn busy_ns(&self) -> Vec<u64> {
        self.counters.iter().map(|c| c.busy_ns()).collect()
    }

    /// Rows handed to the input threads and not yet applied by O.
    pub fn rows_in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub fn submit(&mut self, rows: Admitted) -> Result<()> {
        self.collector.check()?;
        let j = rows.source as usize;
        let sent = match &self.inputs[j] {
            Some(tx) => tx.send(InMsg::Rows(Arc::new(rows))).is_ok(),
            None => false,
        };
        if !sent {
            return Err(self.collector.fail(format!("input thread {j} stopped")));
        }
        Ok(())
    }

    /// End of source `j`: its last rows become ready and it stops holding the others back.
    pub fn close_source(&mut self, j: usize) -> Result<()> {
        if let Some(tx) = self.inputs[j].take() {
            let _ = tx.send(InMsg::Close);
        }
        self.output.unpark();
        Ok(())
    }

    /// The finished windows up to `until`, in window order; with `wait`, all of them (the sources must have
    /// moved past them, or be closed).
    pub fn collect(&mut self, until: i64, wait: bool) -> Result<Vec<(i64, AggWindow)>> {
        let o = self.threads.len() - 1;
        self.collector.collect(until, wait, &self.threads[o..])
    }
}

impl Drop for MultiwayEngine {
    fn drop(&mut self) {
        for j in 0..self.inputs.len() {
            let _ = self.close_source(j);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

struct InputThread {
    rx: Receiver<InMsg>,
    feed: Feed,
    output: Thread,
    out: Sender<OutMsg<AggWindow>>,
    counters: Arc<WorkerCounters>,
    in_flight: Arc<AtomicU64>,
}

impl InputThread {
    fn run(mut self, j: usize) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.serve()));
        if let Err(panic) = result {
            let _ = self.out.send(OutMsg::Failed(format!(
                "multiway input thread {j} panicked: {}",
                panic_message(&panic)
            )));
        }
        // Whatever happened, the source ends (a dropped gate source closes itself).
        if let Feed::Queue(q, j) = &self.feed {
            q[*j].closed.store(true, Ordering::Release);
        }
        self.output.unpark();
    }

    fn serve(&mut self) {
        while let Ok(msg) = self.rx.recv() {
            let chunk = match msg {
                InMsg::Rows(chunk) => chunk,
                InMsg::Close => break,
            };
            let t0 = Instant::now();
            let keep = chunk.keep.as_deref();
            let mut rows = 0u64;
            for i in 0..chunk.ts.len() {
                if keep.is_some_and(|k| !k[i]) {
                    continue;
                }
                let r = RowRef {
                    chunk: chunk.clone(),
                    row: i as u32,
                };
                match &mut self.feed {
                    Feed::Queue(q, j) => q[*j].queue.push(r),
                    Feed::Gate(src) => src.add(r.key(), r),
                }
                rows += 1;
            }
            self.in_flight.fetch_add(rows, Ordering::Relaxed);
            self.counters.add(t0.elapsed(), rows);
            self.output.unpark();
        }
        if let Feed::Gate(src) = &mut self.feed {
            src.close();
        }
    }
}

/// O: merges, updates the windows, emits complete winsets.
struct Output {
    spec: WindowSpec,
    metas: Vec<Arc<AggMeta>>,
    merge: Merge,
    out: Sender<OutMsg<AggWindow>>,
    counters: Arc<WorkerCounters>,
    in_flight: Arc<AtomicU64>,
}

impl Output {
    fn run(mut self) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.serve()));
        if let Err(panic) = result {
            let _ = self.out.send(OutMsg::Failed(format!(
                "multiway output thread panicked: {}",
                panic_message(&panic)
            )));
        }
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
            if rows > 0 {
                backoff.reset();
            } else if backoff.is_completed() {
                std::thread::park_timeout(IDLE_PARK);
            } else {
                backoff.snooze();
            }
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
        let per_row = (self.spec.size() + self.spec.slide() - 1) / self.spec.slide();
        let inputs: Vec<_> = chunk.inputs.iter().map(|v| v.slice(lo, hi - lo)).collect();
        let order = RowOrder {
            ts: &chunk.ts[lo..hi],
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
