//! Beicht's ring approaches (master's thesis on disjoint parallelization of sliding-window aggregation), as
//! benchmark baselines: HOA, the hash-once approach
//! (`strategy="hoa"`), and RRCA, the round-robin-cyclic approach (`strategy="rrca"`).
//!
//! * **The input feeds every PU.** The caller deals messages round-robin: message `s` goes
//!   to PU `s mod P`'s data-stream queue. A message is a chunk of rows or a copy of a punctuation.
//! * **Tuples travel clockwise** (PU i -> PU i+1 mod P) from their ingress PU, forwarded before they are
//!   processed, and are dropped by their *last PU*, the ingress PU's counterclockwise neighbour. So every row
//!   visits every PU, as in the line approaches.
//! * **Ownership.** RRCA: window `k` on PU `k mod P` (RRA's assignment; each PU finds its windows with a few
//!   arithmetic operations). HOA: `(k, key)` on PU `hash(k, key) mod P` (HSA's hash), computed **once**, by the
//!   ingress PU, which stores P lists in the message, list `p` holding the (row, window) pairs PU `p` owns
//!   (Fig. 12). Messages grow with WS/WA, as the thesis says, so the caller cuts HOA chunks to about
//!   [`ROUTE_BUDGET`] pairs.
//! * **The four forwarding rules** choose between the head of the data-stream queue and the head of the
//!   previous-PU queue: (1) both empty: wait; (2) only the previous-PU queue filled: wait; (3) only the
//!   data-stream queue filled: take it; (4) both filled: take the older. The thesis compares timestamps because
//!   its input is sorted, so a tuple's timestamp is its position in the input. Here rows may be out of order
//!   (within the lateness bound) and the operator's punctuations say which windows are complete, so the rules
//!   compare the input's message sequence number, the thesis' timestamp in that role. Dealing is
//!   round-robin, so an empty data-stream queue still tells its PU the sequence number of its next own message;
//!   rule 2 waits only while the previous-PU head is newer than that (which cannot happen: a newer message
//!   exists only once the own one was dealt). This is the thesis' rule 2 with a known lower bound for the empty
//!   queue (a heartbeat), and it is what keeps the ring live under back-pressure.
//! * **safeTs.** Processing a tuple whose last PU is itself, a PU sets `safe` past its sequence number: that
//!   tuple went round the whole ring, and every PU forwarded it only when its own next input was newer, so every
//!   older message has been processed here (the thesis' safe timestamp, checked here for FIFO queues and
//!   in-order dealing).
//! * **Result sets.** PU P-1 starts one when it processes a punctuation copy with a new limit; sets travel
//!   counterclockwise (P-1 -> ... -> 0); a PU adds its windows ending by the limit and passes the set on only
//!   once its `safe` has passed the punctuation, so every row dealt before the punctuation has been processed
//!   there; PU 0 hands the windows to the collector in id order. A punctuation is dealt as P copies, one per PU,
//!   so every PU's `safe` passes it without waiting for later input.
//!
//! **Bounded memory without deadlock.** With bounded queues between PUs a ring can
//! deadlock (every PU blocked sending into its full neighbour, or the input blocked on one PU while its
//! neighbour waits under rule 2). So the queues are unbounded and the bound is a credit per message in flight:
//! the caller takes a credit before dealing a message and blocks while `queue_messages x P` are out; the
//! message's last PU returns it. No PU ever blocks on a send, a PU with input always has a message it may take
//! (shown above for rule 2), so messages in flight always reach their last PU and credits always come back;
//! rows in flight stay bounded by the credits. Result sets (one per punctuation) hold only windows that left
//! the PUs' stores, as in the line approaches.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded, never, select, unbounded};

use super::line::{Owner, PuWindows, ResultSet, hash_owner};
use crate::aggregate::parallel::{
    Admitted, AggWindow, EngineArgs, FinishedWindow, ParallelEngine, finish_all,
};
use crate::aggregate::state::AggMeta;
use crate::error::Result;
use crate::runtime::collector::{Collector, OutMsg, report_panic};
use crate::runtime::farm::FarmStats;
use crate::runtime::monitor::WorkerCounters;
use crate::threads::spawn;
use crate::time::WindowSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingKind {
    Hoa,
    Rrca,
}

/// HOA: (row, window) pairs a message may carry, about 512 KB of routes.
pub const ROUTE_BUDGET: usize = 1 << 16;

/// What the caller deals to a PU.
enum Input {
    Rows {
        rows: Arc<Admitted>,
        lo: usize,
        hi: usize,
    },
    /// Windows up to `limit` are complete; every row dealt before has a sequence number below `base`.
    Punct { limit: i64, base: u64 },
}

/// A message in a data-stream queue.
struct Own {
    seq: u64,
    input: Input,
}

/// Rows on the ring, with HOA's routes: `routes[p]` holds `row << 32 | d` (row offset in `lo..hi`, window
/// `lo_window(row) + d`) for the pairs PU `p` owns, row by row. Empty for RRCA. `d < WS/WA` fits 32 bits: a
/// row in 2^32 windows would take hours per row on these approaches anyway.
struct Chunk {
    rows: Arc<Admitted>,
    lo: usize,
    hi: usize,
    routes: Vec<Vec<u64>>,
}

#[derive(Clone)]
enum Body {
    Rows(Arc<Chunk>),
    Punct { limit: i64, base: u64 },
}

/// A message on the ring (by reference: the rows and routes are shared).
#[derive(Clone)]
struct Tuple {
    seq: u64,
    ingress: usize,
    body: Body,
}

/// A result set with the sequence number every PU's safe mark must reach before adding its windows.
struct Gated {
    gate: u64,
    rs: ResultSet,
}

pub struct RingEngine {
    inputs: Vec<Sender<Own>>,
    /// Taken before dealing a message, returned by its last PU.
    credits: Sender<()>,
    next_seq: u64,
    rows_per_message: usize,
    counters: Vec<Arc<WorkerCounters>>,
    collector: Collector<AggWindow>,
    threads: Vec<JoinHandle<()>>,
    frontier: i64,
}

impl RingEngine {
    pub fn new(
        kind: RingKind,
        spec: WindowSpec,
        metas: &[Arc<AggMeta>],
        pus: usize,
        queue: usize,
    ) -> Result<Self> {
        let p = pus.max(1);
        let (out_tx, out_rx) = unbounded();
        let (credit_tx, credit_rx) = bounded(queue.max(1) * p);
        let (mut inputs, mut ds) = (vec![], vec![]);
        let (mut ring_tx, mut ring_rx) = (vec![], vec![]);
        let (mut rs_tx, mut rs_rx) = (vec![], vec![]);
        for _ in 0..p {
            let (tx, rx) = unbounded();
            inputs.push(tx);
            ds.push(Some(rx));
            let (tx, rx) = unbounded();
            ring_tx.push(Some(tx));
            ring_rx.push(Some(rx));
            let (tx, rx) = unbounded();
            rs_tx.push(Some(tx));
            rs_rx.push(Some(rx));
        }
        let mut threads = vec![];
        let mut counters = vec![];
        for me in 0..p {
            let c = Arc::new(WorkerCounters::default());
            let ring = p > 1;
            let pu = Pu {
                kind,
                spec,
                me,
                pus: p,
                ds: ds[me].take().expect("one per PU"),
                // PU i receives tuples from PU i-1 and result sets from PU i+1.
                prev: if ring { ring_rx[me].take() } else { None },
                forward: if ring {
                    ring_tx[(me + 1) % p].take()
                } else {
                    None
                },
                from_right: if me + 1 < p { rs_rx[me].take() } else { None },
                to_left: if me > 0 { rs_tx[me - 1].take() } else { None },
                out: out_tx.clone(),
                credits: credit_rx.clone(),
                counters: c.clone(),
            };
            let metas = metas.to_vec();
            threads.push(spawn(format!("windgate-ring-{me}"), move || {
                pu.run(&metas)
            })?);
            counters.push(c);
        }
        let rows_per_message = match kind {
            RingKind::Hoa => (ROUTE_BUDGET / spec.windows_per_row() as usize).max(1),
            RingKind::Rrca => usize::MAX,
        };
        Ok(Self {
            inputs,
            credits: credit_tx,
            next_seq: 0,
            rows_per_message,
            counters,
            collector: Collector::new(out_rx),
            threads,
            frontier: i64::MIN,
        })
    }

    pub fn busy_ns(&self) -> Vec<u64> {
        self.counters.iter().map(|c| c.busy_ns()).collect()
    }

    /// Deals one message to the next PU in turn, once a credit is free.
    fn deal(&mut self, input: Input) -> Result<()> {
        self.collector.check()?;
        if self.credits.send(()).is_err() {
            return Err(self.collector.fail("the ring PUs stopped".into()));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let pu = (seq % self.inputs.len() as u64) as usize;
        if self.inputs[pu].send(Own { seq, input }).is_err() {
            return Err(self.collector.fail(format!("ring PU {pu} stopped")));
        }
        Ok(())
    }

    pub fn submit(&mut self, rows: Admitted) -> Result<()> {
        let n = rows.ts.len();
        let rows = Arc::new(rows);
        let mut lo = 0;
        while lo < n {
            let hi = lo.saturating_add(self.rows_per_message).min(n);
            let rows = rows.clone();
            self.deal(Input::Rows { rows, lo, hi })?;
            lo = hi;
        }
        Ok(())
    }

    /// Windows up to `last` are complete: a punctuation copy to every PU; PU P-1 starts the result set.
    pub fn punctuate(&mut self, last: i64) -> Result<()> {
        self.collector.check()?;
        if last <= self.frontier {
            return Ok(());
        }
        self.frontier = last;
        let base = self.next_seq;
        for _ in 0..self.inputs.len() {
            self.deal(Input::Punct { limit: last, base })?;
        }
        Ok(())
    }

    pub fn collect(&mut self, until: i64, wait: bool) -> Result<Vec<(i64, AggWindow)>> {
        self.collector.collect(until, wait, &self.threads)
    }
}

impl RingEngine {
    /// The registry's constructor: `kind` on `cfg.plq_workers` processing units.
    pub(crate) fn build(kind: RingKind, args: &EngineArgs<'_>) -> Result<Box<dyn ParallelEngine>> {
        let (pus, queue) = (args.cfg.plq_workers, args.cfg.queue_messages);
        let engine = RingEngine::new(kind, args.spec, args.metas, pus, queue)?;
        Ok(Box::new(engine))
    }
}

impl ParallelEngine for RingEngine {
    fn submit(&mut self, spec: WindowSpec, rows: Admitted) -> Result<Option<i64>> {
        let last = rows.last_pane(spec);
        RingEngine::submit(self, rows)?;
        Ok(last)
    }

    fn advance(&mut self, _spec: WindowSpec, last: i64) -> Result<()> {
        self.punctuate(last)
    }

    fn collect(&mut self, last: i64, wait: bool) -> Result<Vec<(i64, FinishedWindow)>> {
        Ok(finish_all(RingEngine::collect(self, last, wait)?))
    }

    fn stats(&self) -> FarmStats {
        FarmStats {
            plq_busy_ns: self.busy_ns(),
            ..FarmStats::default()
        }
    }
}

impl Drop for RingEngine {
    /// Closing the data-stream queues stops every PU (nothing is waited for: the operator collected what it
    /// needed), and a PU whose neighbour stopped stops too.
    fn drop(&mut self) {
        self.inputs.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

struct Pu {
    kind: RingKind,
    spec: WindowSpec,
    me: usize,
    pus: usize,
    ds: Receiver<Own>,
    /// `None` on a ring of one PU (its tuples end where they enter).
    prev: Option<Receiver<Tuple>>,
    forward: Option<Sender<Tuple>>,
    from_right: Option<Receiver<Gated>>,
    to_left: Option<Sender<Gated>>,
    out: Sender<OutMsg<AggWindow>>,
    credits: Receiver<()>,
    counters: Arc<WorkerCounters>,
}

/// A PU's state besides its channels.
struct State {
    windows: PuWindows,
    /// Every message with a lower sequence number has been processed here (the thesis' safeTs).
    safe: u64,
    /// Result sets waiting for `safe`, oldest first.
    pending: VecDeque<Gated>,
    /// PU P-1: the limit of the last result set started.
    started: i64,
    /// HOA: scratch for a message's routes laid out by pass.
    table: Vec<u32>,
}

const NO_WINDOW: u32 = u32::MAX;

impl Pu {
    fn run(self, metas: &[Arc<AggMeta>]) {
        report_panic(
            &self.out,
            || format!("ring PU {}", self.me),
            || self.serve(metas),
        );
    }

    /// The thesis' Pseudocode 4 (HOA) / 5 (RRCA). Returns when a queue closes (the engine is dropped, or a
    /// neighbour stopped).
    fn serve(&self, metas: &[Arc<AggMeta>]) {
        let mut st = State {
            windows: PuWindows::new(metas),
            safe: 0,
            pending: VecDeque::new(),
            started: i64::MIN,
            table: Vec::new(),
        };
        let (no_tuple, no_own, no_set) = (never(), never(), never());
        let prev = self.prev.as_ref().unwrap_or(&no_tuple);
        let right = self.from_right.as_ref().unwrap_or(&no_set);
        let mut own: Option<Own> = None;
        let mut from_prev: Option<Tuple> = None;
        // The input deals message s to PU s mod P: this PU's next own message.
        let mut next_own = self.me as u64;
        loop {
            loop {
                match right.try_recv() {
                    Ok(g) => st.pending.push_back(g),
                    Err(TryRecvError::Disconnected) => return,
                    Err(TryRecvError::Empty) => break,
                }
            }
            // Result sets whose punctuation this PU has passed.
            while st.pending.front().is_some_and(|g| g.gate <= st.safe) {
                let g = st.pending.pop_front().expect("front");
                if !self.pass(g, &mut st.windows) {
                    return;
                }
            }
            if own.is_none() {
                match self.ds.try_recv() {
                    Ok(m) => own = Some(m),
                    Err(TryRecvError::Disconnected) => return,
                    Err(TryRecvError::Empty) => {}
                }
            }
            if from_prev.is_none() {
                match prev.try_recv() {
                    Ok(t) => from_prev = Some(t),
                    Err(TryRecvError::Disconnected) => return,
                    Err(TryRecvError::Empty) => {}
                }
            }
            // The forwarding rules: the older head; an empty data-stream queue counts as its next message.
            let own_head = own.as_ref().map_or(next_own, |m| m.seq);
            let tuple = if from_prev.as_ref().is_some_and(|t| t.seq < own_head) {
                from_prev.take()
            } else if let Some(m) = own.take() {
                next_own = m.seq + self.pus as u64;
                Some(self.ingress(m))
            } else {
                None
            };
            if let Some(t) = tuple {
                if !self.process(t, &mut st) {
                    return;
                }
                continue;
            }
            // Rules 1 and 2: wait for input (or for a result set from the right).
            let own_rx = if own.is_none() { &self.ds } else { &no_own };
            let prev_rx = if from_prev.is_none() { prev } else { &no_tuple };
            select! {
                recv(own_rx) -> m => match m {
                    Ok(m) => own = Some(m),
                    Err(_) => return,
                },
                recv(prev_rx) -> t => match t {
                    Ok(t) => from_prev = Some(t),
                    Err(_) => return,
                },
                recv(right) -> g => match g {
                    Ok(g) => st.pending.push_back(g),
                    Err(_) => return,
                },
            }
        }
    }

    /// A message from the data-stream queue becomes a tuple; HOA hashes its windows here, once.
    fn ingress(&self, m: Own) -> Tuple {
        let body = match m.input {
            Input::Rows { rows, lo, hi } => {
                let routes = match self.kind {
                    RingKind::Hoa => {
                        let t0 = Instant::now();
                        let routes = self.routes(&rows, lo..hi);
                        self.counters.add(t0.elapsed(), 0);
                        routes
                    }
                    RingKind::Rrca => Vec::new(),
                };
                Body::Rows(Arc::new(Chunk {
                    rows,
                    lo,
                    hi,
                    routes,
                }))
            }
            Input::Punct { limit, base } => Body::Punct { limit, base },
        };
        Tuple {
            seq: m.seq,
            ingress: self.me,
            body,
        }
    }

    /// HOA's "Prepare & Execute Hash Operation & Store Results In Tuple": the P lists of (row, window) pairs.
    fn routes(&self, rows: &Admitted, range: Range<usize>) -> Vec<Vec<u64>> {
        let mut routes = vec![Vec::new(); self.pus];
        let keep = rows.keep.as_deref();
        for i in range.clone() {
            if keep.is_some_and(|k| !k[i]) {
                continue;
            }
            let (a, b) = self.spec.windows_of_ts(rows.ts[i]);
            let row = ((i - range.start) as u64) << 32;
            for k in a..=b {
                routes[hash_owner(k, rows.keys[i], self.pus)].push(row | (k - a) as u64);
            }
        }
        routes
    }

    /// Forward (unless this is the tuple's last PU), then process: update the owned windows; PU P-1 starts a
    /// result set at a punctuation with a new limit.
    fn process(&self, t: Tuple, st: &mut State) -> bool {
        let last = (t.ingress + self.pus - 1) % self.pus;
        if last != self.me
            && let Some(f) = &self.forward
            && f.send(t.clone()).is_err()
        {
            return false;
        }
        match &t.body {
            Body::Rows(c) => {
                let t0 = Instant::now();
                let lifted = match self.kind {
                    RingKind::Rrca => st.windows.lift_owned(
                        &self.spec,
                        Owner::RoundRobin,
                        self.me,
                        self.pus,
                        &c.rows,
                        c.lo..c.hi,
                    ),
                    RingKind::Hoa => self.lift_routed(c, st),
                };
                self.counters.add(t0.elapsed(), lifted);
            }
            &Body::Punct { limit, base } => {
                if self.me == self.pus - 1 && limit > st.started {
                    st.started = limit;
                    st.pending.push_back(Gated {
                        gate: base,
                        rs: ResultSet::new(limit),
                    });
                }
            }
        }
        if last == self.me {
            st.safe = st.safe.max(t.seq + 1);
            // The message leaves the ring: its credit goes back to the input.
            let _ = self.credits.try_recv();
        }
        true
    }

    /// HOA: updates the windows this PU's list names, pass `j` taking each row's `j`-th pair.
    fn lift_routed(&self, c: &Chunk, st: &mut State) -> u64 {
        let list = &c.routes[self.me];
        let n = c.hi - c.lo;
        // Pairs are row by row: pass j holds the j-th pair of each row.
        let (mut passes, mut run, mut prev_row) = (0usize, 0usize, u64::MAX);
        for &e in list {
            let row = e >> 32;
            run = if row == prev_row { run + 1 } else { 1 };
            prev_row = row;
            passes = passes.max(run);
        }
        st.table.clear();
        st.table.resize(passes * n, NO_WINDOW);
        let (mut run, mut prev_row) = (0usize, u64::MAX);
        for &e in list {
            let row = e >> 32;
            run = if row == prev_row { run + 1 } else { 1 };
            prev_row = row;
            st.table[(run - 1) * n + row as usize] = e as u32;
        }
        let table = &st.table;
        st.windows
            .lift(&self.spec, &c.rows, c.lo..c.hi, passes, |i, j, a, _| {
                let d = table[j * n + i - c.lo];
                (d != NO_WINDOW).then_some(a + d as i64)
            })
    }

    /// Adds this PU's windows ending by the set's limit and passes the set on (PU 0: to the collector).
    fn pass(&self, mut g: Gated, w: &mut PuWindows) -> bool {
        let t0 = Instant::now();
        w.expire_into(&mut g.rs);
        self.counters.add(t0.elapsed(), 0);
        match &self.to_left {
            Some(tx) => tx.send(g).is_ok(),
            None => g.rs.output(&self.out),
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow_buffer::ScalarBuffer;
    use arrow_schema::DataType;

    use super::*;
    use crate::aggregate::function::{AggSpec, ValueClass};
    use crate::aggregate::state::InputValues;

    fn count() -> Vec<Arc<AggMeta>> {
        let spec = AggSpec::parse_all(&[("*".into(), vec!["count".into()])]).unwrap();
        vec![Arc::new(AggMeta {
            spec: spec[0].clone(),
            input_type: DataType::Int64,
            class: ValueClass::Int,
        })]
    }

    fn rows(ts: Vec<i64>, seq0: u64) -> Admitted {
        let n = ts.len();
        Admitted {
            ts: ScalarBuffer::from(ts),
            keys: (0..n as u32).map(|i| i % 3).collect(),
            key_columns: vec![],
            max_ts: None,
            keep: None,
            inputs: vec![InputValues::Star],
            source: 0,
            seq0,
            by: None,
            sorted: false,
        }
    }

    /// One credit per PU (a single message in flight per PU) must not deadlock the
    /// ring, with HOA's chunks cut into many small messages; every window comes out once, in order.
    #[test]
    fn one_credit_per_pu_keeps_the_ring_live() {
        for kind in [RingKind::Hoa, RingKind::Rrca] {
            for pus in [1, 2, 3, 5] {
                // 300 windows per row: HOA cuts a chunk into messages of ROUTE_BUDGET / 300 rows.
                let spec = WindowSpec::new(300, Some(1), 0).unwrap();
                let mut e = RingEngine::new(kind, spec, &count(), pus, 1).unwrap();
                let mut got = vec![];
                let mut seq = 0;
                for b in 0..40i64 {
                    let ts: Vec<i64> = (0..500).map(|i| b * 50 + i / 10).collect();
                    e.submit(rows(ts, seq)).unwrap();
                    seq += 500;
                    let last = spec.last_closed_window(b * 50);
                    e.punctuate(last).unwrap();
                    got.extend(e.collect(last, true).unwrap().into_iter().map(|(k, _)| k));
                }
                let last = spec.windows_of_ts(39 * 50 + 49).1;
                e.punctuate(last).unwrap();
                got.extend(e.collect(last, true).unwrap().into_iter().map(|(k, _)| k));
                let want: Vec<i64> = (spec.windows_of_ts(0).0..=last).collect();
                assert_eq!(got, want, "{kind:?} pus={pus}");
                assert_eq!(e.busy_ns().len(), pus);
            }
        }
    }
}
