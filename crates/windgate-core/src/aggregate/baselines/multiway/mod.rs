//! Multiway aggregation, as in Cederman, Gulisano, Nikolakopoulos, Papatriantafilou, Tsigas, *Efficient data
//! streaming multiway aggregation through concurrent algorithmic designs and new abstract data types*: several
//! time-sorted sources feed one window aggregate, each through its own input thread; an output thread O emits
//! each winset once no source can still touch it.
//!
//! The merge designs ([`merge`]) have O merge the sources into the total order `(ts, source, seq)` and update
//! the windows itself:
//! * `"mq"` (Algorithm 2): a queue per source, guarded by a lock; O keeps one head per queue and takes the
//!   smallest key, scanning all N heads per row. Its cost grows with N, which is what the paper shows.
//! * `"mqlf"`: the same with lock-free queues (crossbeam's `SegQueue`, standing in for the paper's
//!   Michael-Scott queue), to show that the locks are not the whole cost.
//! * `"tumlsc"` (the paper's Algorithm 4): the input threads insert into a T-Gate (the ScaleGate of
//!   [`crate::order::scale_gate`], one module for both papers), and O reads ready rows in the total order with
//!   an O(1) readiness check.
//!
//! The W-Hive designs ([`hive`]) keep the windows in the W-Hive and parallelise the updates: `"tumlmc"` (a
//! T-Gate read by `U` key-partitioned updater threads) and `"wiml"` (the input threads update the W-Hive
//! directly, no merge).
//!
//! Readiness is the same for the merge designs (the paper's, with ties broken by source): a row is processed only
//! when every open source has a later key queued or consumed, so the rows are applied in one order, the total
//! order. Every aggregate state combines exactly (integer and exact float sums; first/last by the total
//! order), so O may apply ready rows in runs per source without changing a bit of the result.
//!
//! Emission: when O waits, every row it has not processed has a key at least `frontier` (the smallest key it
//! waits at), so the windows ending by `frontier.ts` are complete; O sends them in window order, then a
//! progress report ([`OutMsg::Progress`]) that lets the caller's collector release them.
//!
//! Memory: the caller's hand-off to each input thread is bounded (a few chunks), so a slow input thread backs
//! pressure up to `push`. Rows that wait for a stalled source stay in the queues or the gate: unlike the
//! operator's own merge of sources, these designs take no `credits` bound (the input threads count rows in
//! flight for one; nothing reads the count yet).

mod hive;
mod output_thread;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use crate::aggregate::parallel::{
    Admitted, AggWindow, EngineArgs, FinishedWindow, ParallelEngine, finish_all,
};
use crate::aggregate::state::{AggMeta, OrderKey};
use crate::aggregate::w_hive::{Updater, WHive};
use crate::error::Result;
use crate::order::scale_gate::{ScaleGate, Source};
use crate::runtime::collector::{Collector, OutMsg, report_panic};
use crate::runtime::farm::FarmStats;
use crate::runtime::monitor::WorkerCounters;
use crate::threads::spawn;
use crate::time::WindowSpec;
use hive::{HiveOutput, HiveUpdater, Part, update_rows};
use output_thread::{Merge, Output, Queue, SourceQueue};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    Mq,
    MqLf,
    TuMlSc,
    /// With this many key-partitioned updater threads.
    TuMlMc(usize),
    WiMl,
}

/// Chunks the caller may hand an input thread before `push` waits.
const HANDOFF_CHUNKS: usize = 4;
/// The longest sleep of a thread with nothing to do (input threads wake the others after every chunk).
const IDLE_PARK: Duration = Duration::from_millis(1);
/// Levels of the T-Gate.
const GATE_LEVELS: usize = 3;

/// One row of a chunk, as the queues and the gate carry it.
struct RowRef {
    chunk: Arc<Admitted>,
    row: u32,
}

impl RowRef {
    fn new(chunk: &Arc<Admitted>, row: usize) -> Self {
        Self {
            chunk: chunk.clone(),
            row: row as u32,
        }
    }

    fn key(&self) -> OrderKey {
        let i = self.row as usize;
        // The gate merges in (ts, source, seq): each source is sorted by that; `by` only breaks ties in
        // the aggregate states.
        OrderKey {
            ts: self.chunk.ts[i],
            by: 0,
            source: self.chunk.source,
            seq: self.chunk.seq0 + i as u64,
        }
    }
}

enum InMsg {
    Rows(Arc<Admitted>),
    Close,
}

/// An input thread's end: a queue, a T-Gate source, or (WiML) its own W-Hive updater.
enum Feed {
    Queue(Arc<Vec<SourceQueue>>, usize),
    Gate(Source<OrderKey, RowRef>),
    /// `None` once closed (dropping the updater closes it).
    Hive(Option<Updater<Part>>, Vec<Arc<AggMeta>>, WindowSpec),
}

/// The engine as the operator sees it: `submit` per source, `close_source`, `collect`.
pub struct MultiwayEngine {
    inputs: Vec<Option<Sender<InMsg>>>,
    collector: Collector<AggWindow>,
    /// The input threads, the updaters (TuMLMC), then O (last).
    threads: Vec<JoinHandle<()>>,
    counters: Vec<Arc<WorkerCounters>>,
    /// Threads the input threads wake after each chunk.
    wake: Vec<Thread>,
}

/// The threads behind the input threads, started before them so that they can be woken.
struct Back {
    feeds: Vec<Feed>,
    threads: Vec<JoinHandle<()>>,
    counters: Vec<Arc<WorkerCounters>>,
}

impl MultiwayEngine {
    pub fn new(
        design: Design,
        spec: WindowSpec,
        metas: &[Arc<AggMeta>],
        sources: usize,
    ) -> Result<Self> {
        let n = sources.max(1);
        let (out_tx, out_rx) = unbounded();
        let in_flight = Arc::new(AtomicU64::new(0));
        let back = match design {
            Design::Mq | Design::MqLf | Design::TuMlSc => {
                merge_back(design, spec, metas, n, &out_tx, &in_flight)?
            }
            Design::TuMlMc(u) => tumlmc_back(u.max(1), spec, metas, n, &out_tx)?,
            Design::WiMl => wiml_back(spec, metas, n, &out_tx)?,
        };
        let wake: Vec<Thread> = back.threads.iter().map(|t| t.thread().clone()).collect();
        let mut threads = vec![];
        let mut inputs = vec![];
        let mut counters = vec![];
        for (j, feed) in back.feeds.into_iter().enumerate() {
            let (tx, rx) = bounded(HANDOFF_CHUNKS);
            let c = Arc::new(WorkerCounters::default());
            let input = InputThread {
                rx,
                feed,
                wake: wake.clone(),
                out: out_tx.clone(),
                counters: c.clone(),
                in_flight: in_flight.clone(),
                slots: Vec::new(),
            };
            threads.push(spawn(format!("windgate-multiway-i{j}"), move || {
                input.run(j)
            })?);
            inputs.push(Some(tx));
            counters.push(c);
        }
        threads.extend(back.threads);
        counters.extend(back.counters);
        Ok(Self {
            inputs,
            collector: Collector::new(out_rx),
            threads,
            counters,
            wake,
        })
    }

    /// Busy time per thread: the input threads, the updaters (TuMLMC), then O.
    pub fn busy_ns(&self) -> Vec<u64> {
        self.counters.iter().map(|c| c.busy_ns()).collect()
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
        self.wake.iter().for_each(Thread::unpark);
        Ok(())
    }

    /// The finished windows up to `until`, in window order; with `wait`, all of them (the sources must have
    /// moved past them, or be closed).
    pub fn collect(&mut self, until: i64, wait: bool) -> Result<Vec<(i64, AggWindow)>> {
        let o = self.threads.len() - 1;
        self.collector.collect(until, wait, &self.threads[o..])
    }
}

impl MultiwayEngine {
    /// The registry's constructor: `design` over the operator's sources.
    pub(crate) fn build(design: Design, args: &EngineArgs<'_>) -> Result<Box<dyn ParallelEngine>> {
        let engine = MultiwayEngine::new(design, args.spec, args.metas, args.sources)?;
        Ok(Box::new(engine))
    }
}

impl ParallelEngine for MultiwayEngine {
    fn submit(&mut self, spec: WindowSpec, rows: Admitted) -> Result<Option<i64>> {
        let last = rows.last_pane(spec);
        MultiwayEngine::submit(self, rows)?;
        Ok(last)
    }

    fn close_source(&mut self, source: usize) -> Result<()> {
        MultiwayEngine::close_source(self, source)
    }

    /// Readiness comes from the sources themselves: nothing to punctuate.
    fn advance(&mut self, _spec: WindowSpec, _last: i64) -> Result<()> {
        Ok(())
    }

    fn collect(&mut self, last: i64, wait: bool) -> Result<Vec<(i64, FinishedWindow)>> {
        Ok(finish_all(MultiwayEngine::collect(self, last, wait)?))
    }

    fn stats(&self) -> FarmStats {
        FarmStats {
            plq_busy_ns: self.busy_ns(),
            ..FarmStats::default()
        }
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

/// MQ, MQLF, TuMLSC: queues or a T-Gate, and O merging.
fn merge_back(
    design: Design,
    spec: WindowSpec,
    metas: &[Arc<AggMeta>],
    n: usize,
    out: &Sender<OutMsg<AggWindow>>,
    in_flight: &Arc<AtomicU64>,
) -> Result<Back> {
    let (feeds, merge) = if design == Design::TuMlSc {
        let (srcs, mut readers) = ScaleGate::new::<OrderKey, RowRef>(n, 1, GATE_LEVELS);
        let feeds = srcs.into_iter().map(Feed::Gate).collect::<Vec<_>>();
        (feeds, Merge::Gate(readers.pop().expect("one reader")))
    } else {
        let queues: Arc<Vec<SourceQueue>> = Arc::new(
            (0..n)
                .map(|_| SourceQueue {
                    queue: if design == Design::Mq {
                        Queue::Locked(Default::default())
                    } else {
                        Queue::LockFree(Default::default())
                    },
                    closed: AtomicBool::new(false),
                })
                .collect(),
        );
        let feeds = (0..n).map(|j| Feed::Queue(queues.clone(), j)).collect();
        (feeds, Merge::queues(queues))
    };
    let c = Arc::new(WorkerCounters::default());
    let o = Output {
        spec,
        metas: metas.to_vec(),
        merge,
        out: out.clone(),
        counters: c.clone(),
        in_flight: in_flight.clone(),
    };
    Ok(Back {
        feeds,
        threads: vec![spawn("windgate-multiway-o".into(), move || o.run())?],
        counters: vec![c],
    })
}

/// TuMLMC: a T-Gate read by `u` updaters over a W-Hive, and O emitting.
fn tumlmc_back(
    u: usize,
    spec: WindowSpec,
    metas: &[Arc<AggMeta>],
    n: usize,
    out: &Sender<OutMsg<AggWindow>>,
) -> Result<Back> {
    let (srcs, readers) = ScaleGate::new::<OrderKey, RowRef>(n, u, GATE_LEVELS);
    let (updaters, output) = WHive::new::<Part>(spec, u);
    let mut threads = vec![];
    let mut counters = vec![];
    for (me, (reader, updater)) in readers.into_iter().zip(updaters).enumerate() {
        let c = Arc::new(WorkerCounters::default());
        let h = HiveUpdater {
            spec,
            me,
            of: u,
            metas: metas.to_vec(),
            reader,
            updater,
            out: out.clone(),
            counters: c.clone(),
        };
        threads.push(spawn(format!("windgate-multiway-u{me}"), move || h.run())?);
        counters.push(c);
    }
    let (o, c) = hive_output(spec, metas, output, out)?;
    threads.push(o);
    counters.push(c);
    Ok(Back {
        feeds: srcs.into_iter().map(Feed::Gate).collect(),
        threads,
        counters,
    })
}

/// WiML: each input thread updates the W-Hive with its own rows; O emits.
fn wiml_back(
    spec: WindowSpec,
    metas: &[Arc<AggMeta>],
    n: usize,
    out: &Sender<OutMsg<AggWindow>>,
) -> Result<Back> {
    let (updaters, output) = WHive::new::<Part>(spec, n);
    let (o, c) = hive_output(spec, metas, output, out)?;
    Ok(Back {
        feeds: updaters
            .into_iter()
            .map(|u| Feed::Hive(Some(u), metas.to_vec(), spec))
            .collect(),
        threads: vec![o],
        counters: vec![c],
    })
}

fn hive_output(
    spec: WindowSpec,
    metas: &[Arc<AggMeta>],
    output: crate::aggregate::w_hive::Output<Part>,
    out: &Sender<OutMsg<AggWindow>>,
) -> Result<(JoinHandle<()>, Arc<WorkerCounters>)> {
    let c = Arc::new(WorkerCounters::default());
    let o = HiveOutput {
        spec,
        metas: metas.to_vec(),
        output,
        out: out.clone(),
        counters: c.clone(),
    };
    Ok((spawn("windgate-multiway-o".into(), move || o.run())?, c))
}

struct InputThread {
    rx: Receiver<InMsg>,
    feed: Feed,
    wake: Vec<Thread>,
    out: Sender<OutMsg<AggWindow>>,
    counters: Arc<WorkerCounters>,
    in_flight: Arc<AtomicU64>,
    /// WiML's scratch slot list.
    slots: Vec<u32>,
}

impl InputThread {
    fn run(mut self, j: usize) {
        let out = self.out.clone();
        report_panic(
            &out,
            || format!("multiway input thread {j}"),
            || self.serve(),
        );
        // Whatever happened, the source ends (a dropped gate source or W-Hive updater closes itself).
        match &mut self.feed {
            Feed::Queue(q, j) => q[*j].closed.store(true, Ordering::Release),
            Feed::Hive(u, ..) => drop(u.take()),
            Feed::Gate(_) => {}
        }
        self.wake.iter().for_each(Thread::unpark);
    }

    fn serve(&mut self) {
        while let Ok(msg) = self.rx.recv() {
            let chunk = match msg {
                InMsg::Rows(chunk) => chunk,
                InMsg::Close => break,
            };
            let t0 = Instant::now();
            let keep = chunk.keep.as_deref();
            let kept = (0..chunk.ts.len()).filter(|&i| keep.is_none_or(|k| k[i]));
            let rows = match &mut self.feed {
                // WiML: the whole chunk into the W-Hive, a run of rows per pane.
                Feed::Hive(u, metas, spec) => {
                    let u = u.as_mut().expect("open until Close");
                    let all = (0, chunk.ts.len());
                    update_rows(u, metas, spec, &chunk, all, |_| true, &mut self.slots);
                    kept.count() as u64
                }
                Feed::Queue(q, j) => {
                    let rows = kept
                        .map(|i| q[*j].queue.push(RowRef::new(&chunk, i)))
                        .count();
                    self.in_flight.fetch_add(rows as u64, Ordering::Relaxed);
                    rows as u64
                }
                Feed::Gate(src) => {
                    let rows = kept
                        .map(|i| {
                            let r = RowRef::new(&chunk, i);
                            src.add(r.key(), r)
                        })
                        .count();
                    self.in_flight.fetch_add(rows as u64, Ordering::Relaxed);
                    rows as u64
                }
            };
            self.counters.add(t0.elapsed(), rows);
            self.wake.iter().for_each(Thread::unpark);
        }
        if let Feed::Gate(src) = &mut self.feed {
            src.close();
        }
    }
}
