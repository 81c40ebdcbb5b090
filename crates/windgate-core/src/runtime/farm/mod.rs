//! The pane farm of Mencagli, Torquati, Danelutto, De Matteis, *Parallel Continuous Preference Queries over
//! Out-of-Order and Bursty Data Streams* (`docs/architecture.md`, "Data path"): a pane-level query (PLQ)
//! stage reduces rows to per-pane partial results on a farm of workers, a window-level query (WLQ) stage
//! merges partials into windows, and the caller collects windows in order.
//!
//! ```text
//! caller (emitter) ──rows, punctuations──► PLQ worker[0..n) ──partitions, acks──► WLQ emitter ──tasks──► WLQ worker[0..m)
//!      ▲ collector                                                                   ▲    └──feedback──────┘ │
//!      └──────────────────────────── windows, progress ──────────────────────────────┴──────────────────────┘
//! ```
//!
//! The farm is generic over the query ([`FarmQuery`]: G at the pane level, H at the window level), so window
//! aggregation and the preference queries share it. The caller's thread is the PLQ emitter (it routes rows with
//! a `PaneScheduler` and broadcasts punctuations in-band) and the collector (windows come back on one channel
//! and are released in window order once a progress report covers them).
//!
//! Memory is bounded: the PLQ channels and the WLQ emitter's input are bounded, so a slow stage backs pressure
//! up to the caller. Two channels are unbounded, and why: the collector's (it holds finished output, and the
//! WLQ side must never wait on a caller that is itself waiting to send rows: that would be a cycle) and the
//! WLQ workers' task channels (the WLQ emitter must never block, or the PLQ workers feeding it would stall;
//! WIN_FB sends a worker one task at a time, so only WIN_RR can queue there, at most the windows in flight).
//!
//! The window level comes in two kinds. [`wlq`] is the paper's: a task per window, every pane merged into every
//! window it belongs to, so a window costs one merge per pane it spans. [`blocks`] is for long windows of a
//! query whose window states combine with each other ([`SlidingQuery`]): a task per block of consecutive
//! windows, each window built from a suffix and a prefix of the block's panes, so its cost does not grow with
//! the panes it spans. [`Farm::new`] and [`Farm::sliding`] start one or the other.
//!
//! Determinism: G's partitions of a pane are combined by H exactly (the query guarantees an order-independent
//! merge), so which worker computed which piece never shows in the output (`docs/architecture.md`,
//! "Contracts": determinism).

mod blocks;
pub(crate) mod inline;
mod plq;
mod wlq;

use std::ops::Range;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use super::collector::{Collector, OutMsg, report_panic};
use super::monitor::{Monitor, WorkerCounters};
use super::pane_scheduler::{PaneScheduler, PaneSchedulerKind};
use super::pid::{Pid, PidConfig};
use crate::error::{Error, Result};
use crate::threads::spawn;
use crate::time::WindowSpec;
use plq::PlqMsg;

/// `owner` of a row no worker takes (late or null-time rows).
pub const NOT_ROUTED: u8 = u8::MAX;

/// Most row runs sent to a worker per chunk before it gets their span instead.
const MAX_RUNS: usize = 32;

/// The query a farm runs: G (pane level, incremental over rows) and H (window level, a merge of partials).
pub trait FarmQuery: Send + Sync + 'static {
    /// A chunk of admitted rows, shared read-only by the PLQ workers.
    type Chunk: Send + Sync + 'static;
    /// A PLQ worker's open pane partitions.
    type Worker: Send + 'static;
    /// G's result for one partition of one pane.
    type Part: Send + Sync + 'static;
    /// H's running result for one window.
    type Window: Send + 'static;
    /// A complete window as the caller receives it. The worker that completes a window turns it into this,
    /// so per-window finishing work runs on the farm rather than on the caller's thread.
    type Done: Send + 'static;

    fn new_worker(&self) -> Self::Worker;
    /// Adds rows `rows` of `chunk` with `owner[i] == me` (pane `panes[i]`) to the worker's partitions.
    fn ingest(
        &self,
        worker: &mut Self::Worker,
        chunk: &Routed<Self::Chunk>,
        rows: Range<usize>,
        me: u8,
    );
    /// Removes the worker's partitions of panes below `frontier` and hands each to `out`, in pane order.
    fn close_below(
        &self,
        worker: &mut Self::Worker,
        frontier: i64,
        out: &mut dyn FnMut(i64, Self::Part),
    );
    fn new_window(&self) -> Self::Window;
    /// Merges one partition into a window. Must not depend on the order partitions arrive in.
    fn merge(&self, window: &mut Self::Window, part: &Self::Part);
    /// A window all of whose partitions were merged, as the caller receives it.
    fn done(&self, window: Self::Window) -> Self::Done;
}

/// A query whose window results combine with one another as partitions do (exactly, in any order), so one
/// combination of panes can serve several overlapping windows: what the block window stage ([`Farm::sliding`])
/// needs.
pub trait SlidingQuery: FarmQuery {
    /// Combines `from` into `into`.
    fn combine(&self, into: &mut Self::Window, from: &Self::Window);
}

/// A chunk with each row's pane and worker.
pub struct Routed<C> {
    pub chunk: C,
    pub panes: Vec<i64>,
    pub owner: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WindowSchedulerKind {
    WinFb,
    WinRr,
}

impl WindowSchedulerKind {
    pub const NAMES: [&str; 2] = ["win_fb", "win_rr"];

    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "win_fb" => Ok(Self::WinFb),
            "win_rr" => Ok(Self::WinRr),
            other => Err(Error::param(
                "window_scheduler",
                format!(
                    "unknown window scheduler {other:?}; expected one of {:?}",
                    Self::NAMES
                ),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::WinFb => "win_fb",
            Self::WinRr => "win_rr",
        }
    }
}

#[derive(Debug, Clone)]
pub struct FarmConfig {
    pub plq_workers: usize,
    pub wlq_workers: usize,
    pub scheduler: PaneSchedulerKind,
    pub window_scheduler: WindowSchedulerKind,
    /// A fixed split threshold in rows instead of `alpha * theta_b` (tests force splitting with it).
    pub split_threshold: Option<u64>,
    pub pid: PidConfig,
    /// The PID's and the monitor's sampling interval T.
    pub sample_interval: Duration,
    /// Messages each PLQ channel holds before the caller waits.
    pub queue_messages: usize,
}

impl FarmConfig {
    pub fn new(threads: usize) -> Self {
        Self {
            plq_workers: threads,
            wlq_workers: threads,
            scheduler: PaneSchedulerKind::AsPid,
            window_scheduler: WindowSchedulerKind::WinFb,
            split_threshold: None,
            pid: PidConfig::default(),
            sample_interval: Duration::from_secs(1),
            queue_messages: 16,
        }
    }
}

/// What the farm reports in `stats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FarmStats {
    pub plq_busy_ns: Vec<u64>,
    pub wlq_busy_ns: Vec<u64>,
    pub punctuations: u64,
    pub panes_closed: u64,
    pub panes_split: u64,
    pub split_factor: f64,
    pub theta_b: f64,
    pub alpha: f64,
    /// Mean PLQ utilisation over the sampling intervals with `0 < rho < 50`.
    pub utilisation: f64,
    pub window_tasks: u64,
}

/// Messages into the WLQ emitter. `S` is what a WLQ task holds and hands back: a window's running result, or
/// a block of windows.
pub(crate) enum WlqIn<Q: FarmQuery, S> {
    Part {
        pane: i64,
        part: Arc<Q::Part>,
    },
    Ack {
        worker: u8,
        frontier: i64,
    },
    /// A WLQ worker finished a task on `unit` (a window or a block): `state` comes back unless the unit is done.
    Feedback {
        worker: usize,
        unit: i64,
        state: Option<S>,
    },
    Exit,
}

/// What a window-level stage is started with: its emitter reads `rx` (partitions and acknowledgements from the
/// PLQ workers, feedback from its own workers on `feedback`) and sends windows to `out`.
pub(crate) struct WlqStage<Q: FarmQuery, S> {
    pub query: Arc<Q>,
    pub spec: WindowSpec,
    pub kind: WindowSchedulerKind,
    pub rx: Receiver<WlqIn<Q, S>>,
    pub feedback: Sender<WlqIn<Q, S>>,
    pub out: Sender<OutMsg<Q::Done>>,
    pub plq_workers: usize,
    pub workers: usize,
}

/// A started window-level stage: its threads (workers and emitter) and the workers' counters.
pub(crate) type Started = (Vec<JoinHandle<()>>, Vec<Arc<WorkerCounters>>);

/// A stage's spawned workers: their threads, the senders of their task channels and their counters.
pub(crate) type SpawnedWorkers<T> = (
    Vec<JoinHandle<()>>,
    Vec<Sender<T>>,
    Vec<Arc<WorkerCounters>>,
);

/// What a WLQ worker thread owns: its task channel `rx` (tasks of type `T`), where it reports (`feedback` to
/// the emitter, windows to `out`) and its counters.
pub(crate) struct WlqWorker<Q: FarmQuery, S, T> {
    pub query: Arc<Q>,
    pub me: usize,
    pub rx: Receiver<T>,
    pub feedback: Sender<WlqIn<Q, S>>,
    pub out: Sender<OutMsg<Q::Done>>,
    pub counters: Arc<WorkerCounters>,
}

impl<Q: FarmQuery, S: Send + 'static> WlqStage<Q, S> {
    /// Spawns the stage's `workers` threads, each running `body` (a panic becomes the farm's error); returns
    /// the threads, the senders of their task channels and their counters.
    pub(crate) fn spawn_workers<T: Send + 'static>(
        &self,
        body: fn(&WlqWorker<Q, S, T>),
    ) -> Result<SpawnedWorkers<T>> {
        let (mut threads, mut tasks, mut counters) = (vec![], vec![], vec![]);
        for me in 0..self.workers {
            let (tx, rx) = unbounded::<T>();
            let worker = WlqWorker {
                query: self.query.clone(),
                me,
                rx,
                feedback: self.feedback.clone(),
                out: self.out.clone(),
                counters: Arc::new(WorkerCounters::default()),
            };
            counters.push(worker.counters.clone());
            threads.push(spawn(format!("windgate-wlq-{me}"), move || {
                report_panic(&worker.out, || format!("WLQ worker {me}"), || body(&worker))
            })?);
            tasks.push(tx);
        }
        Ok((threads, tasks, counters))
    }
}

/// A running farm. Dropping it stops and joins its threads.
pub struct Farm<Q: FarmQuery> {
    plq: Vec<Sender<PlqMsg<Q::Chunk>>>,
    plq_counters: Vec<Arc<WorkerCounters>>,
    wlq_counters: Vec<Arc<WorkerCounters>>,
    /// Rows sent to each PLQ worker so far (`lambda`'s running total).
    scheduled: Vec<u64>,
    sched: PaneScheduler,
    pid: Pid,
    monitor: Monitor,
    interval: Duration,
    next_sample: Instant,
    collector: Collector<Q::Done>,
    frontier: i64,
    punctuations: u64,
    threads: Vec<JoinHandle<()>>,
}

impl<Q: SlidingQuery> Farm<Q> {
    /// A farm whose window level works in blocks of consecutive windows ([`blocks`]): for long windows, where
    /// merging every pane into every window would cost a merge per pane a window spans. Windows that do not
    /// overlap (a slide longer than the window) get the per-window stage: they share no panes.
    pub fn sliding(query: Q, spec: WindowSpec, cfg: &FarmConfig) -> Result<Self> {
        if spec.panes_per_window() < spec.panes_per_slide() {
            return Self::new(query, spec, cfg);
        }
        Self::start(query, spec, cfg, blocks::start)
    }
}

impl<Q: FarmQuery> Farm<Q> {
    /// A farm with the paper's window level ([`wlq`]): a task per window.
    pub fn new(query: Q, spec: WindowSpec, cfg: &FarmConfig) -> Result<Self> {
        Self::start(query, spec, cfg, wlq::start)
    }

    fn start<S: Send + 'static>(
        query: Q,
        spec: WindowSpec,
        cfg: &FarmConfig,
        window_stage: fn(WlqStage<Q, S>) -> Result<Started>,
    ) -> Result<Self> {
        let n = cfg.plq_workers.clamp(1, (NOT_ROUTED - 1) as usize);
        let query = Arc::new(query);
        let (out_tx, out_rx) = unbounded();
        let (wlq_tx, wlq_rx) = bounded::<WlqIn<Q, S>>(256.max(4 * n));
        let mut threads = vec![];
        let mut plq = vec![];
        let mut plq_counters = vec![];
        for me in 0..n {
            let (tx, rx) = bounded(cfg.queue_messages.max(1));
            let c = Arc::new(WorkerCounters::default());
            let (q, wlq, out, c2) = (query.clone(), wlq_tx.clone(), out_tx.clone(), c.clone());
            threads.push(spawn(format!("windgate-plq-{me}"), move || {
                plq::run(q, me as u8, rx, wlq, out, c2)
            })?);
            plq.push(tx);
            plq_counters.push(c);
        }
        let (wlq_threads, wlq_counters) = window_stage(WlqStage {
            query,
            spec,
            kind: cfg.window_scheduler,
            rx: wlq_rx,
            feedback: wlq_tx,
            out: out_tx,
            plq_workers: n,
            workers: cfg.wlq_workers.max(1),
        })?;
        threads.extend(wlq_threads);
        Ok(Self {
            plq,
            plq_counters,
            wlq_counters,
            scheduled: vec![0; n],
            sched: PaneScheduler::new(cfg.scheduler, n, cfg.split_threshold),
            pid: Pid::new(cfg.pid),
            monitor: Monitor::default(),
            interval: cfg.sample_interval,
            next_sample: Instant::now() + cfg.sample_interval,
            collector: Collector::new(out_rx),
            frontier: i64::MIN,
            punctuations: 0,
            threads,
        })
    }

    pub fn workers(&self) -> usize {
        self.plq.len()
    }

    /// Routes a chunk: `panes[i]` is row i's pane, `admitted[i]` whether it is routed at all.
    pub fn submit(
        &mut self,
        chunk: Q::Chunk,
        panes: Vec<i64>,
        admitted: Option<&[bool]>,
    ) -> Result<()> {
        self.check()?;
        self.maybe_sample();
        let n = panes.len();
        let mut owner = vec![NOT_ROUTED; n];
        let mut load: Vec<u64> = self
            .scheduled
            .iter()
            .zip(&self.plq_counters)
            .map(|(&s, c)| s.saturating_sub(c.rows()))
            .collect();
        // Each worker's rows as runs of consecutive rows (in-order input gives a few long runs per chunk).
        let workers = self.plq.len();
        let mut runs: Vec<Vec<(usize, usize)>> = vec![vec![]; workers];
        let mut counts = vec![0u64; workers];
        let mut i = 0;
        while i < n {
            if admitted.is_some_and(|a| !a[i]) {
                i += 1;
                continue;
            }
            let pane = panes[i];
            let mut end = i + 1;
            while end < n && panes[end] == pane && admitted.is_none_or(|a| a[end]) {
                end += 1;
            }
            let mut pos = i;
            self.sched
                .assign_run(pane, (end - i) as u32, &mut load, |w, count| {
                    let (lo, hi) = (pos, pos + count as usize);
                    owner[lo..hi].fill(w);
                    let r = &mut runs[w as usize];
                    match r.last_mut() {
                        Some(last) if last.1 == lo => last.1 = hi,
                        _ => r.push((lo, hi)),
                    }
                    counts[w as usize] += count as u64;
                    pos = hi;
                });
            i = end;
        }
        let routed = Arc::new(Routed {
            chunk,
            panes,
            owner,
        });
        for (w, mut ranges) in runs.into_iter().enumerate() {
            let count = counts[w];
            if count == 0 {
                continue;
            }
            // Many short runs (disorder, TB_RR): one pass over their span, skipping other workers' rows, is
            // cheaper than a kernel call per run.
            if ranges.len() > MAX_RUNS {
                let span = (ranges[0].0, ranges[ranges.len() - 1].1);
                ranges = vec![span];
            }
            self.scheduled[w] += count;
            let msg = PlqMsg::Rows {
                routed: routed.clone(),
                ranges,
                count,
            };
            if self.plq[w].send(msg).is_err() {
                return Err(self.fail(format!("PLQ worker {w} stopped")));
            }
        }
        Ok(())
    }

    /// Closes every pane below `frontier` (a punctuation, broadcast in-band).
    pub fn punctuate(&mut self, frontier: i64) -> Result<()> {
        self.check()?;
        if frontier <= self.frontier {
            return Ok(());
        }
        self.frontier = frontier;
        self.punctuations += 1;
        self.sched.close_below(frontier);
        for w in 0..self.plq.len() {
            if self.plq[w].send(PlqMsg::Punct(frontier)).is_err() {
                return Err(self.fail(format!("PLQ worker {w} stopped")));
            }
        }
        Ok(())
    }

    /// Releases the finished windows up to `until`, in window order. With `wait`, blocks until every window up to
    /// `until` is finished (the panes they need must have been punctuated); otherwise takes what is there.
    pub fn collect(&mut self, until: i64, wait: bool) -> Result<Vec<(i64, Q::Done)>> {
        self.collector.collect(until, wait, &self.threads)
    }

    pub fn stats(&self) -> FarmStats {
        let s = self.sched.stats();
        FarmStats {
            plq_busy_ns: self.plq_counters.iter().map(|c| c.busy_ns()).collect(),
            wlq_busy_ns: self.wlq_counters.iter().map(|c| c.busy_ns()).collect(),
            punctuations: self.punctuations,
            panes_closed: s.panes_closed,
            panes_split: s.panes_split,
            split_factor: s.split_factor(),
            theta_b: s.theta_b,
            alpha: self.pid.alpha(),
            utilisation: self.monitor.mean_rho(),
            window_tasks: self.wlq_counters.iter().map(|c| c.rows()).sum(),
        }
    }

    /// Every T: measure the utilisation and let the PID move `alpha`.
    fn maybe_sample(&mut self) {
        let now = Instant::now();
        if now < self.next_sample {
            return;
        }
        let elapsed = self.interval + (now - self.next_sample);
        self.next_sample = now + self.interval;
        let rho = self
            .monitor
            .sample(&self.plq_counters, &self.scheduled, elapsed);
        if self.sched.kind() == PaneSchedulerKind::AsPid {
            let alpha = self.pid.step(rho);
            self.sched.set_alpha(alpha);
        }
    }

    fn check(&self) -> Result<()> {
        self.collector.check()
    }

    fn fail(&mut self, why: String) -> Error {
        self.collector.fail(why)
    }
}

impl<Q: FarmQuery> Drop for Farm<Q> {
    fn drop(&mut self) {
        // Closing the PLQ channels ends the PLQ workers, whose goodbyes end the WLQ emitter, whose end closes
        // the WLQ workers' channels.
        self.plq.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The last window whose panes are all below `frontier` (every window, at the end of the stream).
pub(crate) fn last_complete(spec: &WindowSpec, frontier: i64) -> i64 {
    if frontier == i64::MAX {
        return i64::MAX;
    }
    crate::time::floor_div(
        frontier.saturating_sub(spec.panes_per_window()),
        spec.panes_per_slide(),
    )
}
