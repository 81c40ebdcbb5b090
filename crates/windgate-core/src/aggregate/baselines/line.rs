//! Beicht's line approaches (master's thesis on disjoint parallelization of sliding-window aggregation), as
//! benchmark baselines: HSA (`strategy="hsa"`) and RRA
//! (`strategy="rra"`), and the per-PU machinery the ring approaches of [`super::ring`] share with them (a PU's
//! window store, the lift of a chunk into the windows a PU owns, result sets).
//!
//! Every row visits every PU, left to right, forwarded before it is processed. Each PU updates the windows it
//! owns: RRA owns window `k` on PU `k mod P` (a few arithmetic operations per row: the first owned window of a
//! row, then every P-th, the general form of the thesis' Pseudocode 3), HSA owns `(k, key)`
//! on PU `hash(k, key) mod P` (a hash per row and window, the cost the thesis shows limits HSA). There are no
//! panes: each row updates each of its windows, `WS/WA` updates per row in all. At a punctuation, the rightmost
//! PU starts a result set that travels right to left; each PU adds its windows ending by the set's limit and
//! PU 0 hands them to the collector in window order. A PU is one thread that handles one message at a time, so
//! when a result set reaches it, it has processed every row it forwarded before (the thesis' observations 1-3).
//!
//! Batched: rows travel in chunks and a PU lifts a chunk with one kernel pass per owned window of a row, the
//! columnar form of "for each window the tuple contributes to".
//!
//! Rows reach PU 0 through a bounded channel and each PU blocks on its right neighbour's bounded input, so rows
//! in flight are bounded. Result sets travel on unbounded channels: a line has no cycle, so a PU's send never
//! waits on a PU that waits on it, and a result set holds only windows that left the PUs' stores (each window
//! lives in one place), one set per punctuation.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded, select, unbounded};

use crate::aggregate::parallel::{
    Admitted, AggWindow, EngineArgs, FinishedWindow, ParallelEngine, finish_all,
};
use crate::aggregate::slots::{KeySlots, SlotStore};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder, SKIP};
use crate::error::Result;
use crate::runtime::collector::{Collector, OutMsg, report_panic};
use crate::runtime::farm::FarmStats;
use crate::runtime::monitor::WorkerCounters;
use crate::threads::spawn;
use crate::time::WindowSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Hsa,
    Rra,
}

enum Input {
    Rows(Arc<Admitted>),
    /// Windows up to this id are complete.
    Punct(i64),
}

impl LineKind {
    fn owner(self) -> Owner {
        match self {
            LineKind::Hsa => Owner::Hash,
            LineKind::Rra => Owner::RoundRobin,
        }
    }
}

/// Which PU owns a window's state for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
    /// `hash(window, key) mod P` (HSA, HOA).
    Hash,
    /// `window mod P` (RRA, RRCA).
    RoundRobin,
}

/// `hash(window, key) mod pus`: the owner of `(window, key)` in HSA and HOA.
#[inline]
pub(super) fn hash_owner(window: i64, key: u32, pus: usize) -> usize {
    let h = (window as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (key as u64);
    let h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    ((h >> 32) % pus as u64) as usize
}

/// Windows collected on the way to PU 0, by id.
pub(super) struct ResultSet {
    pub limit: i64,
    pub windows: BTreeMap<i64, AggWindow>,
}

impl ResultSet {
    pub fn new(limit: i64) -> Self {
        Self {
            limit,
            windows: BTreeMap::new(),
        }
    }

    /// PU 0's last step: the windows to the collector in id order, then the progress mark.
    pub fn output(self, out: &Sender<OutMsg<AggWindow>>) -> bool {
        for (k, win) in self.windows {
            if out.send(OutMsg::Window(k, win)).is_err() {
                return false;
            }
        }
        out.send(OutMsg::Progress(self.limit)).is_ok()
    }
}

pub struct LineEngine {
    first: Sender<Input>,
    counters: Vec<Arc<WorkerCounters>>,
    collector: Collector<AggWindow>,
    threads: Vec<JoinHandle<()>>,
    frontier: i64,
}

impl LineEngine {
    pub fn new(
        kind: LineKind,
        spec: WindowSpec,
        metas: &[Arc<AggMeta>],
        pus: usize,
        queue: usize,
    ) -> Result<Self> {
        let p = pus.max(1);
        let (out_tx, out_rx) = unbounded();
        let mut threads = vec![];
        let mut counters = vec![];
        // Built right to left: each PU needs its right neighbour's input and its left neighbour's result sets.
        let mut right_input: Option<Sender<Input>> = None;
        let mut from_right: Option<Receiver<ResultSet>> = None;
        for me in (0..p).rev() {
            let (in_tx, in_rx) = bounded(queue.max(1));
            let (rs_tx, rs_rx) = unbounded();
            let c = Arc::new(WorkerCounters::default());
            let pu = Pu {
                kind,
                spec,
                metas: metas.to_vec(),
                me,
                pus: p,
                input: in_rx,
                forward: right_input.replace(in_tx),
                from_right: from_right.replace(rs_rx),
                to_left: (me > 0).then_some(rs_tx),
                out: out_tx.clone(),
                counters: c.clone(),
            };
            threads.push(spawn(format!("windgate-line-{me}"), move || pu.run())?);
            counters.push(c);
        }
        counters.reverse();
        Ok(Self {
            first: right_input.expect("at least one PU"),
            counters,
            collector: Collector::new(out_rx),
            threads,
            frontier: i64::MIN,
        })
    }

    pub fn busy_ns(&self) -> Vec<u64> {
        self.counters.iter().map(|c| c.busy_ns()).collect()
    }

    pub fn submit(&mut self, rows: Admitted) -> Result<()> {
        self.collector.check()?;
        if self.first.send(Input::Rows(Arc::new(rows))).is_err() {
            return Err(self.collector.fail("line PU 0 stopped".into()));
        }
        Ok(())
    }

    /// Windows up to `last` are complete: start a result set.
    pub fn punctuate(&mut self, last: i64) -> Result<()> {
        self.collector.check()?;
        if last <= self.frontier {
            return Ok(());
        }
        self.frontier = last;
        if self.first.send(Input::Punct(last)).is_err() {
            return Err(self.collector.fail("line PU 0 stopped".into()));
        }
        Ok(())
    }

    pub fn collect(&mut self, until: i64, wait: bool) -> Result<Vec<(i64, AggWindow)>> {
        self.collector.collect(until, wait, &self.threads)
    }
}

impl LineEngine {
    /// The registry's constructor: `kind` on `cfg.plq_workers` processing units.
    pub(crate) fn build(kind: LineKind, args: &EngineArgs<'_>) -> Result<Box<dyn ParallelEngine>> {
        let (pus, queue) = (args.cfg.plq_workers, args.cfg.queue_messages);
        let engine = LineEngine::new(kind, args.spec, args.metas, pus, queue)?;
        Ok(Box::new(engine))
    }
}

impl ParallelEngine for LineEngine {
    fn submit(&mut self, spec: WindowSpec, rows: Admitted) -> Result<Option<i64>> {
        let last = rows.last_pane(spec);
        LineEngine::submit(self, rows)?;
        Ok(last)
    }

    fn advance(&mut self, _spec: WindowSpec, last: i64) -> Result<()> {
        self.punctuate(last)
    }

    fn collect(&mut self, last: i64, wait: bool) -> Result<Vec<(i64, FinishedWindow)>> {
        Ok(finish_all(LineEngine::collect(self, last, wait)?))
    }

    fn stats(&self) -> FarmStats {
        FarmStats {
            plq_busy_ns: self.busy_ns(),
            ..FarmStats::default()
        }
    }
}

impl Drop for LineEngine {
    fn drop(&mut self) {
        let (tx, _) = bounded(1);
        drop(std::mem::replace(&mut self.first, tx));
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

struct Pu {
    kind: LineKind,
    spec: WindowSpec,
    metas: Vec<Arc<AggMeta>>,
    me: usize,
    pus: usize,
    input: Receiver<Input>,
    forward: Option<Sender<Input>>,
    from_right: Option<Receiver<ResultSet>>,
    to_left: Option<Sender<ResultSet>>,
    out: Sender<OutMsg<AggWindow>>,
    counters: Arc<WorkerCounters>,
}

/// A PU's live windows: one shared store, a key map per window.
pub(super) struct PuWindows {
    store: SlotStore,
    by_id: BTreeMap<i64, KeySlots>,
    metas: Vec<Arc<AggMeta>>,
    /// Scratch: a slot per row of the chunk being lifted, and its rows' window ranges.
    slots: Vec<u32>,
    bounds: Vec<(i64, i64)>,
}

impl PuWindows {
    pub fn new(metas: &[Arc<AggMeta>]) -> Self {
        Self {
            store: SlotStore::new(metas),
            by_id: BTreeMap::new(),
            metas: metas.to_vec(),
            slots: Vec::new(),
            bounds: Vec::new(),
        }
    }

    /// Lifts the admitted rows of `rows[range]` in `passes` kernel passes: in pass `j`, row `i` updates window
    /// `window_of(i, j, lo, hi)` (`None`: none in this pass), where `lo..=hi` are row i's windows. Returns the
    /// number of updates.
    pub fn lift(
        &mut self,
        spec: &WindowSpec,
        rows: &Admitted,
        range: Range<usize>,
        passes: usize,
        window_of: impl Fn(usize, usize, i64, i64) -> Option<i64>,
    ) -> u64 {
        let (lo, n) = (range.start, range.len());
        let keep = rows.keep.as_deref();
        self.bounds.clear();
        self.bounds.extend(
            rows.ts[range.clone()]
                .iter()
                .map(|&t| spec.windows_of_ts(t)),
        );
        self.slots.clear();
        self.slots.resize(n, SKIP);
        let inputs: Vec<InputValues> = if lo == 0 && n == rows.ts.len() {
            rows.inputs.clone()
        } else {
            rows.inputs.iter().map(|v| v.slice(lo, n)).collect()
        };
        let order = RowOrder {
            ts: &rows.ts[range.clone()],
            by: rows.by.as_ref().map(|b| &b[range.clone()]),
            source: rows.source,
            seq0: rows.seq0 + lo as u64,
        };
        let mut lifted = 0u64;
        for j in 0..passes {
            let mut any = false;
            for r in 0..n {
                self.slots[r] = SKIP;
                let i = lo + r;
                if keep.is_some_and(|k| !k[i]) {
                    continue;
                }
                let (a, b) = self.bounds[r];
                let Some(k) = window_of(i, j, a, b) else {
                    continue;
                };
                let ks = self.by_id.entry(k).or_default();
                self.slots[r] = ks.slot(rows.keys[i], &mut self.store);
                any = true;
                lifted += 1;
            }
            if any {
                self.store.update(&self.slots, &inputs, order);
            }
        }
        lifted
    }

    /// Lifts `rows[range]` into the windows PU `me` of `pus` owns under `owner`, finding them itself (HSA: a
    /// hash per row and window; RRA, RRCA: the first owned window of a row, then every P-th). Returns the
    /// number of updates.
    pub fn lift_owned(
        &mut self,
        spec: &WindowSpec,
        owner: Owner,
        me: usize,
        pus: usize,
        rows: &Admitted,
        range: Range<usize>,
    ) -> u64 {
        let per_row = spec.windows_per_row() as usize;
        match owner {
            Owner::Hash => self.lift(spec, rows, range, per_row, |i, d, a, b| {
                let k = a + d as i64;
                (k <= b && hash_owner(k, rows.keys[i], pus) == me).then_some(k)
            }),
            Owner::RoundRobin => {
                let p = pus as i64;
                let me = me as i64;
                self.lift(spec, rows, range, per_row.div_ceil(pus), |_, j, a, b| {
                    let k = a + (me - a).rem_euclid(p) + j as i64 * p;
                    (k <= b).then_some(k)
                })
            }
        }
    }

    /// Moves every window ending by the set's limit into the set (merged with the other PUs' states of it).
    pub fn expire_into(&mut self, rs: &mut ResultSet) {
        while let Some(entry) = self.by_id.first_entry() {
            if *entry.key() > rs.limit {
                break;
            }
            let (k, keys) = entry.remove_entry();
            let win = rs
                .windows
                .entry(k)
                .or_insert_with(|| AggWindow::new(&self.metas));
            win.merge_slots(&self.store, &keys.entries);
            for &(_, slot) in &keys.entries {
                self.store.release(slot);
            }
        }
    }
}

impl Pu {
    fn run(mut self) {
        let forward = self.forward.take();
        report_panic(
            &self.out,
            || format!("line PU {}", self.me),
            || self.serve(forward),
        );
    }

    /// `forward` is the right neighbour's input; it is dropped when this PU's input ends, so the end travels.
    fn serve(&self, mut forward: Option<Sender<Input>>) {
        let mut w = PuWindows::new(&self.metas);
        let never = crossbeam_channel::never();
        let right = self.from_right.as_ref().unwrap_or(&never);
        loop {
            select! {
                recv(self.input) -> msg => match msg {
                    Ok(msg) => {
                        // Forward before processing (the thesis' order).
                        if let Some(tx) = &forward {
                            let copy = match &msg {
                                Input::Rows(rows) => Input::Rows(rows.clone()),
                                Input::Punct(l) => Input::Punct(*l),
                            };
                            if tx.send(copy).is_err() {
                                return;
                            }
                        }
                        match msg {
                            Input::Rows(rows) => self.lift(&mut w, &rows),
                            // The rightmost PU starts the result set.
                            Input::Punct(limit) if forward.is_none() => {
                                if !self.pass(ResultSet::new(limit), &mut w) {
                                    return;
                                }
                            }
                            Input::Punct(_) => {}
                        }
                    }
                    Err(_) => break,
                },
                recv(right) -> rs => match rs {
                    Ok(rs) => {
                        if !self.pass(rs, &mut w) {
                            return;
                        }
                    }
                    Err(_) => return,
                },
            }
        }
        // End of input: pass on the result sets still coming from the right (the rightmost PU has none).
        drop(forward.take());
        let Some(right) = &self.from_right else {
            return;
        };
        for rs in right.iter() {
            if !self.pass(rs, &mut w) {
                return;
            }
        }
    }

    /// Updates every window this PU owns.
    fn lift(&self, w: &mut PuWindows, rows: &Admitted) {
        let t0 = Instant::now();
        let owner = self.kind.owner();
        let lifted = w.lift_owned(&self.spec, owner, self.me, self.pus, rows, 0..rows.ts.len());
        self.counters.add(t0.elapsed(), lifted);
    }

    /// Adds this PU's windows ending by the set's limit and passes the set left (PU 0: to the collector).
    fn pass(&self, mut rs: ResultSet, w: &mut PuWindows) -> bool {
        let t0 = Instant::now();
        w.expire_into(&mut rs);
        self.counters.add(t0.elapsed(), 0);
        match &self.to_left {
            Some(tx) => tx.send(rs).is_ok(),
            None => rs.output(&self.out),
        }
    }
}
