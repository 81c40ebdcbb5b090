//! RRCPA, the Round-Robin-Cyclic Pane-based approach of Beicht's master's thesis on disjoint parallelization of
//! sliding-window aggregation, in the line form the thesis proposes as its improvement (its Fig. 17).
//!
//! * The input (the caller's thread) routes each row to exactly one PU: pane `p` lives on PU `p mod P`, so a row
//!   visits one PU and each PU aggregates whole panes (G).
//! * Panes stay where they were built. Windows travel instead, along a line from PU `P-1` to PU 0: each PU
//!   merges its own panes of the window (H) and passes it on; PU 0 hands it to the collector. Windows enter the
//!   line in id order and the line is FIFO, so results leave in window order without a reorder stage.
//! * A PU merges window `k` only once its own input has been punctuated past `k`'s last pane: the line's
//!   counterpart of the ring's safe timestamp. Panes are dropped once the last window containing them passed.
//!
//! Why the line and not the ring: the ring needs the four forwarding rules, a safe timestamp per PU and result
//! sets travelling a second time around; with bounded queues it can deadlock, and its
//! latency grows as 2-3 x WA x (P - 1). The line keeps what makes RRCPA fast (one PU per row, panes reused by
//! every window, no central merge) with none of that. Windows (not rows) cross PUs, so the inter-PU channels are
//! unbounded; rows still come through bounded channels, so memory stays bounded by the open panes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded, select, unbounded};

use crate::aggregate::parallel::farm;
use crate::aggregate::parallel::pane_query::AggQuery;
use crate::aggregate::parallel::{
    Admitted, EngineArgs, FinishedWindow, ParallelEngine, finish_all, pane_frontier,
};
use crate::error::Result;
use crate::runtime::collector::{Collector, OutMsg, report_panic};
use crate::runtime::farm::{FarmQuery, FarmStats, NOT_ROUTED, Routed, last_complete};
use crate::runtime::monitor::WorkerCounters;
use crate::threads::spawn;
use crate::time::WindowSpec;
use crate::time::assign_panes;

enum Input<C> {
    Rows {
        routed: Arc<Routed<C>>,
        lo: usize,
        hi: usize,
        count: u64,
    },
    /// Panes below `frontier` are closed. To PU `P-1` only: the windows to start, ending with a progress mark.
    Punct {
        frontier: i64,
        start: Vec<i64>,
        mark: i64,
    },
}

/// What travels along the line.
enum Line<W> {
    Window(i64, W),
    /// Every window up to this id has gone past.
    Mark(i64),
}

pub(crate) struct Rrcpa<Q: FarmQuery> {
    spec: WindowSpec,
    pus: Vec<Sender<Input<Q::Chunk>>>,
    counters: Vec<Arc<WorkerCounters>>,
    /// Windows holding a pane that had a row, not yet started.
    windows: BTreeSet<i64>,
    max_pane: Option<i64>,
    frontier: i64,
    collector: Collector<Q::Window>,
    threads: Vec<JoinHandle<()>>,
}

impl<Q: FarmQuery> Rrcpa<Q> {
    pub fn new(query: Q, spec: WindowSpec, pus: usize, queue_messages: usize) -> Result<Self> {
        let p = pus.clamp(1, (NOT_ROUTED - 1) as usize);
        let query = Arc::new(query);
        let (out_tx, out_rx) = unbounded();
        let mut inputs = vec![];
        let mut counters = vec![];
        let mut threads = vec![];
        // PU i receives windows from PU i+1 and sends to PU i-1 (PU 0: the collector).
        let mut next_in: Option<Receiver<Line<Q::Window>>> = None;
        for i in (0..p).rev() {
            let (tx, rx) = bounded(queue_messages.max(1));
            let c = Arc::new(WorkerCounters::default());
            let (line_tx, line_rx) = unbounded();
            let from_right = next_in.replace(line_rx);
            let to_left = (i > 0).then_some(line_tx);
            let pu = Pu {
                query: query.clone(),
                spec,
                me: i as u8,
                input: rx,
                from_right,
                to_left,
                out: out_tx.clone(),
                counters: c.clone(),
            };
            threads.push(spawn(format!("windgate-rrcpa-{i}"), move || pu.run())?);
            inputs.push(tx);
            counters.push(c);
        }
        inputs.reverse();
        counters.reverse();
        Ok(Self {
            spec,
            pus: inputs,
            counters,
            windows: BTreeSet::new(),
            max_pane: None,
            frontier: i64::MIN,
            collector: Collector::new(out_rx),
            threads,
        })
    }

    pub fn busy_ns(&self) -> Vec<u64> {
        self.counters.iter().map(|c| c.busy_ns()).collect()
    }

    /// Routes a chunk: pane `p` to PU `p mod P`.
    pub fn submit(
        &mut self,
        chunk: Q::Chunk,
        panes: Vec<i64>,
        admitted: Option<&[bool]>,
    ) -> Result<()> {
        self.collector.check()?;
        let p = self.pus.len() as i64;
        let mut owner = vec![NOT_ROUTED; panes.len()];
        let mut span = vec![(usize::MAX, 0usize, 0u64); self.pus.len()];
        let mut last = None;
        for (i, &pane) in panes.iter().enumerate() {
            if admitted.is_some_and(|a| !a[i]) {
                continue;
            }
            let w = pane.rem_euclid(p) as usize;
            owner[i] = w as u8;
            let s = &mut span[w];
            s.0 = s.0.min(i);
            s.1 = i + 1;
            s.2 += 1;
            if last != Some(pane) {
                last = Some(pane);
                let (lo, hi) = self.spec.windows_of_pane(pane);
                self.windows.extend(lo..=hi);
                self.max_pane = Some(self.max_pane.map_or(pane, |m| m.max(pane)));
            }
        }
        let routed = Arc::new(Routed {
            chunk,
            panes,
            owner,
        });
        for (w, &(lo, hi, count)) in span.iter().enumerate() {
            if count > 0 {
                let msg = Input::Rows {
                    routed: routed.clone(),
                    lo,
                    hi,
                    count,
                };
                if self.pus[w].send(msg).is_err() {
                    return Err(self.collector.fail(format!("RRCPA PU {w} stopped")));
                }
            }
        }
        Ok(())
    }

    /// Closes the panes below `frontier` and starts every complete window down the line.
    pub fn punctuate(&mut self, frontier: i64) -> Result<()> {
        self.collector.check()?;
        if frontier <= self.frontier {
            return Ok(());
        }
        self.frontier = frontier;
        let mark = last_complete(&self.spec, frontier);
        let rest = match mark.checked_add(1) {
            Some(next) => self.windows.split_off(&next),
            None => BTreeSet::new(),
        };
        let start: Vec<i64> = std::mem::replace(&mut self.windows, rest)
            .into_iter()
            .collect();
        let last = self.pus.len() - 1;
        for (w, tx) in self.pus.iter().enumerate() {
            let start = if w == last { start.clone() } else { vec![] };
            if tx
                .send(Input::Punct {
                    frontier,
                    start,
                    mark,
                })
                .is_err()
            {
                return Err(self.collector.fail(format!("RRCPA PU {w} stopped")));
            }
        }
        Ok(())
    }

    pub fn collect(&mut self, until: i64, wait: bool) -> Result<Vec<(i64, Q::Window)>> {
        self.collector.collect(until, wait, &self.threads)
    }
}

impl<Q: FarmQuery> Drop for Rrcpa<Q> {
    fn drop(&mut self) {
        self.pus.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

struct Pu<Q: FarmQuery> {
    query: Arc<Q>,
    spec: WindowSpec,
    me: u8,
    input: Receiver<Input<Q::Chunk>>,
    from_right: Option<Receiver<Line<Q::Window>>>,
    to_left: Option<Sender<Line<Q::Window>>>,
    out: Sender<OutMsg<Q::Window>>,
    counters: Arc<WorkerCounters>,
}

impl<Q: FarmQuery> Pu<Q> {
    fn run(self) {
        report_panic(
            &self.out,
            || format!("RRCPA PU {}", self.me),
            || self.serve(),
        );
    }

    fn serve(&self) {
        let mut worker = self.query.new_worker();
        // Closed panes of this PU, kept until the last window containing them has passed.
        let mut panes: BTreeMap<i64, Q::Part> = BTreeMap::new();
        let mut line: VecDeque<Line<Q::Window>> = VecDeque::new();
        let mut frontier = i64::MIN;
        let mut input_open = true;
        let never = crossbeam_channel::never();
        let right = self.from_right.as_ref().unwrap_or(&never);
        let mut right_open = self.from_right.is_some();
        loop {
            // Pass on every window this PU can complete: its own input is punctuated past the window.
            while let Some(front) = line.front() {
                let ready = match front {
                    Line::Window(k, _) => last_complete(&self.spec, frontier) >= *k || !input_open,
                    Line::Mark(_) => true,
                };
                if !ready {
                    break;
                }
                let item = line.pop_front().expect("front");
                if !self.pass(item, &mut panes) {
                    return;
                }
            }
            if !input_open && !right_open {
                return;
            }
            select! {
                recv(self.input) -> msg => match msg {
                    Ok(Input::Rows { routed, lo, hi, count }) => {
                        let t0 = Instant::now();
                        self.query.ingest(&mut worker, &routed, lo..hi, self.me);
                        self.counters.add(t0.elapsed(), count);
                    }
                    Ok(Input::Punct { frontier: f, start, mark }) => {
                        let t0 = Instant::now();
                        self.query.close_below(&mut worker, f, &mut |p, part| {
                            panes.insert(p, part);
                        });
                        frontier = f;
                        let new_window = || self.query.new_window();
                        line.extend(start.into_iter().map(|k| Line::Window(k, new_window())));
                        if self.from_right.is_none() {
                            line.push_back(Line::Mark(mark));
                        }
                        self.counters.add(t0.elapsed(), 0);
                    }
                    Err(_) => {
                        // End of input: every pane is final.
                        self.query.close_below(&mut worker, i64::MAX, &mut |p, part| {
                            panes.insert(p, part);
                        });
                        input_open = false;
                    }
                },
                recv(right) -> msg => match msg {
                    Ok(item) => line.push_back(item),
                    Err(_) => right_open = false,
                },
            }
        }
    }

    /// Merges this PU's panes of a window and passes it left (PU 0: to the collector).
    fn pass(&self, item: Line<Q::Window>, panes: &mut BTreeMap<i64, Q::Part>) -> bool {
        let item = match item {
            Line::Window(k, mut w) => {
                let t0 = Instant::now();
                let first = self.spec.first_pane(k);
                for (_, part) in panes.range(first..first + self.spec.panes_per_window()) {
                    self.query.merge(&mut w, part);
                }
                // Panes whose last window is k or earlier are done.
                while let Some(entry) = panes.first_entry() {
                    if self.spec.windows_of_pane(*entry.key()).1 > k {
                        break;
                    }
                    entry.remove();
                }
                self.counters.add(t0.elapsed(), 0);
                Line::Window(k, w)
            }
            mark => mark,
        };
        match (&self.to_left, item) {
            (Some(tx), item) => tx.send(item).is_ok(),
            (None, Line::Window(k, w)) => self.out.send(OutMsg::Window(k, w)).is_ok(),
            (None, Line::Mark(m)) => self.out.send(OutMsg::Progress(m)).is_ok(),
        }
    }
}

/// The registry's constructor: RRCPA over window aggregation, on `cfg.plq_workers` processing units.
pub(crate) fn build(args: &EngineArgs<'_>) -> Result<Box<dyn ParallelEngine>> {
    let (pus, queue) = (args.cfg.plq_workers, args.cfg.queue_messages);
    Ok(Box::new(Rrcpa::new(
        farm::query(args),
        args.spec,
        pus,
        queue,
    )?))
}

impl ParallelEngine for Rrcpa<AggQuery> {
    fn submit(&mut self, spec: WindowSpec, rows: Admitted) -> Result<Option<i64>> {
        let (panes, max) = assign_panes(spec, &rows.ts, rows.keep.as_deref());
        let keep = rows.keep.clone();
        Rrcpa::submit(self, rows, panes, keep.as_deref())?;
        Ok(max)
    }

    fn advance(&mut self, spec: WindowSpec, last: i64) -> Result<()> {
        self.punctuate(pane_frontier(spec, last))
    }

    fn collect(&mut self, last: i64, wait: bool) -> Result<Vec<(i64, FinishedWindow)>> {
        Ok(finish_all(Rrcpa::collect(self, last, wait)?))
    }

    fn stats(&self) -> FarmStats {
        FarmStats {
            plq_busy_ns: self.busy_ns(),
            split_factor: 1.0,
            ..FarmStats::default()
        }
    }
}
