//! The thesis' line approaches (brief 003 §2.1-§2.2), as benchmark baselines: HSA (`strategy="hsa"`) and RRA
//! (`strategy="rra"`).
//!
//! Every row visits every PU, left to right, forwarded before it is processed. Each PU updates the windows it
//! owns: RRA owns window `k` on PU `k mod P` (a few arithmetic operations per row), HSA owns `(k, key)` on PU
//! `hash(k, key) mod P` (a hash per row and window, the cost the thesis shows limits HSA). There are no panes:
//! each row updates each of its windows, `WS/WA` updates per row in all. At a punctuation, the rightmost PU
//! starts a result set that travels right to left; each PU adds its windows ending by the set's limit and PU 0
//! hands them to the collector in window order. A PU is one thread that handles one message at a time, so when
//! a result set reaches it, it has processed every row it forwarded before (the thesis' observations 1-3).
//!
//! Batched: rows travel in chunks and a PU lifts a chunk with one kernel pass per window offset, the columnar
//! form of "for each window the tuple contributes to".

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded, select, unbounded};

use super::farm_engine::{Admitted, AggWindow};
use super::slots::{KeySlots, SlotStore};
use super::state::{AggMeta, RowOrder, SKIP};
use crate::error::Result;
use crate::runtime::farm::{Collector, OutMsg, panic_message, spawn};
use crate::runtime::monitor::WorkerCounters;
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

/// Windows collected on the way to PU 0, by id.
struct ResultSet {
    limit: i64,
    windows: BTreeMap<i64, AggWindow>,
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
    ) -> Self {
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
            threads.push(spawn(format!("windgate-line-{me}"), move || pu.run()));
            counters.push(c);
        }
        counters.reverse();
        Self {
            first: right_input.expect("at least one PU"),
            counters,
            collector: Collector::new(out_rx),
            threads,
            frontier: i64::MIN,
        }
    }

    pub fn workers(&self) -> usize {
        self.counters.len()
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
struct Windows {
    store: SlotStore,
    by_id: BTreeMap<i64, KeySlots>,
}

impl Pu {
    fn run(mut self) {
        let forward = self.forward.take();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.serve(forward)));
        if let Err(panic) = result {
            let _ = self.out.send(OutMsg::Failed(format!(
                "line PU {} panicked: {}",
                self.me,
                panic_message(&panic)
            )));
        }
    }

    /// `forward` is the right neighbour's input; it is dropped when this PU's input ends, so the end travels.
    fn serve(&self, mut forward: Option<Sender<Input>>) {
        let mut w = Windows {
            store: SlotStore::new(&self.metas),
            by_id: BTreeMap::new(),
        };
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
                                let rs = ResultSet { limit, windows: BTreeMap::new() };
                                if !self.pass(rs, &mut w) {
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

    fn owns(&self, window: i64, key: u32) -> bool {
        let p = self.pus as u64;
        match self.kind {
            LineKind::Rra => window.rem_euclid(p as i64) as usize == self.me,
            LineKind::Hsa => {
                let h = (window as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (key as u64);
                let h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                ((h >> 32) % p) as usize == self.me
            }
        }
    }

    /// Updates every window this PU owns, one kernel pass per window offset.
    fn lift(&self, w: &mut Windows, rows: &Admitted) {
        let t0 = Instant::now();
        let n = rows.ts.len();
        let keep = rows.keep.as_deref();
        let per_row = (self.spec.size() + self.spec.slide() - 1) / self.spec.slide();
        let mut slots = vec![SKIP; n];
        let mut lifted = 0u64;
        for d in 0..per_row {
            let mut any = false;
            for i in 0..n {
                slots[i] = SKIP;
                if keep.is_some_and(|k| !k[i]) {
                    continue;
                }
                let (lo, hi) = self.spec.windows_of_ts(rows.ts[i]);
                let k = lo + d;
                if k > hi || !self.owns(k, rows.keys[i]) {
                    continue;
                }
                let ks = w.by_id.entry(k).or_default();
                slots[i] = ks.slot(rows.keys[i], &mut w.store);
                any = true;
                lifted += 1;
            }
            if any {
                let order = RowOrder {
                    ts: &rows.ts,
                    source: rows.source,
                    seq0: rows.seq0,
                };
                w.store.update(&slots, &rows.inputs, order);
            }
        }
        self.counters.add(t0.elapsed(), lifted);
    }

    /// Adds this PU's windows ending by the set's limit and passes the set left (PU 0: to the collector).
    fn pass(&self, mut rs: ResultSet, w: &mut Windows) -> bool {
        let t0 = Instant::now();
        while let Some(entry) = w.by_id.first_entry() {
            if *entry.key() > rs.limit {
                break;
            }
            let (k, keys) = entry.remove_entry();
            let win = rs
                .windows
                .entry(k)
                .or_insert_with(|| AggWindow::new(&self.metas));
            win.merge_slots(&w.store, &keys.entries);
            for &(_, slot) in &keys.entries {
                w.store.release(slot);
            }
        }
        self.counters.add(t0.elapsed(), 0);
        match &self.to_left {
            Some(tx) => tx.send(rs).is_ok(),
            None => {
                for (k, win) in rs.windows {
                    if self.out.send(OutMsg::Window(k, win)).is_err() {
                        return false;
                    }
                }
                self.out.send(OutMsg::Progress(rs.limit)).is_ok()
            }
        }
    }
}
