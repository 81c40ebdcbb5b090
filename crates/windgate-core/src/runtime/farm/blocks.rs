//! The window-level stage for long windows: a task per *block* of consecutive windows, each window built from
//! one suffix and one prefix combination of the block's panes, so a window costs a constant number of combines
//! however many panes it spans (the paper's stage, [`super::wlq`], merges every pane into every window).
//!
//! A block of `B = ppw / pps` windows (`ppw` panes a window, `pps` panes a slide) starts at pane `S` and its
//! first panes, the *chunk* `S .. S + B·pps`, are no longer than a window. So every window of the block is the
//! chunk's panes from its start on (a suffix) followed by the panes from the chunk's end to its own end (a
//! prefix of what follows the chunk), as in the two-stacks and "pane-based chunk" schemes of sliding-window
//! aggregation (Tangwongsan, Hirzel and Schneider, *Sliding-Window Aggregation Algorithms*). The block merges
//! each partition into one chunk segment or one prefix segment (a segment is the `pps` panes one window adds to
//! the one before), builds the suffixes once the chunk is complete (a combine per window), and then, window by
//! window, extends the running prefix by one segment and combines it with the window's suffix.
//!
//! Determinism: partitions and window states combine exactly and in any order ([`SlidingQuery`]), so a window
//! assembled from segments has the bits of one merged pane by pane. A window none of whose panes had a
//! partition is not sent, as in the paper's stage, which only opens a window when a partition reaches it.
//!
//! Scheduling is the paper's, with blocks for windows: a block's state travels with its task (blocks are serial
//! by construction), WIN_FB hands tasks to ready workers and keeps a block on the worker that last ran it,
//! WIN_RR sends block `b` to worker `b mod m`. A task also runs when the frontier completes windows of an idle
//! block that has no new partitions, since completing is what sends them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::wlq::next_ready;
use super::{SlidingQuery, Started, WindowSchedulerKind, WlqIn, WlqStage, last_complete};
use crate::error::Result;
use crate::runtime::collector::{OutMsg, report_panic};
use crate::runtime::monitor::WorkerCounters;
use crate::threads::spawn;
use crate::time::{WindowSpec, floor_div};

type In<Q> = WlqIn<Q, Block<Q>>;

/// The windows of one block and the combinations that build them.
pub(crate) struct Block<Q: SlidingQuery> {
    shape: Shape,
    /// The first window of the block.
    first: i64,
    /// The next window to send (`first + B` once all are sent).
    next: i64,
    /// `seg[k]`: the partitions of the chunk's segment `k`, the panes window `first + k` starts with.
    seg: Vec<Option<Q::Window>>,
    /// `pre[k]`: the partitions of the panes after the chunk that window `first + k` ends with and window
    /// `first + k - 1` does not.
    pre: Vec<Option<Q::Window>>,
    /// `suffix[k]`: segments `k..B` combined; `None` when none had a partition. Built once the chunk is
    /// complete; window `first + k` takes its entry.
    suffix: Option<Vec<Option<Q::Window>>>,
    /// Prefix segments `0..next - first` combined.
    prefix: Option<Q::Window>,
}

/// Block geometry, the same for every block of a query.
#[derive(Clone, Copy)]
struct Shape {
    /// Windows a block.
    windows: i64,
    panes_per_slide: i64,
    panes_per_window: i64,
}

impl Shape {
    /// Blocks of `ppw / pps` windows, whose chunks are no longer than a window. Needs `ppw >= pps` (windows
    /// that overlap or touch).
    fn new(spec: &WindowSpec) -> Self {
        let (ppw, pps) = (spec.panes_per_window(), spec.panes_per_slide());
        debug_assert!(ppw >= pps);
        Self {
            windows: ppw / pps,
            panes_per_slide: pps,
            panes_per_window: ppw,
        }
    }

    fn of_window(&self, j: i64) -> i64 {
        floor_div(j, self.windows)
    }

    fn first_pane(&self, j: i64) -> i64 {
        j * self.panes_per_slide
    }

    fn last_pane(&self, j: i64) -> i64 {
        self.first_pane(j) + self.panes_per_window - 1
    }
}

impl<Q: SlidingQuery> Block<Q> {
    fn new(shape: Shape, id: i64) -> Self {
        let first = id * shape.windows;
        let b = shape.windows as usize;
        Self {
            shape,
            first,
            next: first,
            seg: (0..b).map(|_| None).collect(),
            pre: (0..b).map(|_| None).collect(),
            suffix: None,
            prefix: None,
        }
    }

    fn done(&self) -> bool {
        self.next == self.first + self.shape.windows
    }

    /// Merges a partition of `pane`, one of the panes of the block's windows.
    fn add(&mut self, query: &Q, pane: i64, part: &Q::Part) {
        let s = self.shape;
        let start = s.first_pane(self.first);
        let chunk_end = start + s.windows * s.panes_per_slide;
        let at = if pane < chunk_end {
            &mut self.seg[((pane - start) / s.panes_per_slide) as usize]
        } else {
            let past = pane - s.last_pane(self.first);
            let k = if past <= 0 {
                0
            } else {
                (past + s.panes_per_slide - 1) / s.panes_per_slide
            };
            &mut self.pre[k as usize]
        };
        debug_assert!(pane >= start && pane <= s.last_pane(self.first + s.windows - 1));
        query.merge(at.get_or_insert_with(|| query.new_window()), part);
    }

    /// Sends every window of the block whose panes are all below `frontier` (all their partitions merged).
    /// Returns false if the collector is gone.
    fn advance(&mut self, query: &Q, frontier: i64, out: &Sender<OutMsg<Q::Done>>) -> bool {
        while !self.done() && self.shape.last_pane(self.next) < frontier {
            let k = (self.next - self.first) as usize;
            let suffix = self
                .suffix
                .get_or_insert_with(|| suffixes(query, &mut self.seg));
            if let Some(p) = self.pre[k].take() {
                match &mut self.prefix {
                    Some(prefix) => query.combine(prefix, &p),
                    None => self.prefix = Some(p),
                }
            }
            let window = match (suffix[k].take(), &self.prefix) {
                (Some(mut w), Some(p)) => {
                    query.combine(&mut w, p);
                    Some(w)
                }
                (Some(w), None) => Some(w),
                (None, Some(p)) => {
                    let mut w = query.new_window();
                    query.combine(&mut w, p);
                    Some(w)
                }
                (None, None) => None,
            };
            if let Some(w) = window
                && out.send(OutMsg::Window(self.next, query.done(w))).is_err()
            {
                return false;
            }
            self.next += 1;
        }
        true
    }
}

/// The suffix combinations of a complete chunk, newest first: `suffix[k]` is segments `k..` combined.
fn suffixes<Q: SlidingQuery>(query: &Q, seg: &mut [Option<Q::Window>]) -> Vec<Option<Q::Window>> {
    let mut out: Vec<Option<Q::Window>> = (0..seg.len()).map(|_| None).collect();
    for k in (0..seg.len()).rev() {
        let newer = out.get(k + 1).and_then(Option::as_ref);
        out[k] = match (seg[k].take(), newer) {
            (Some(mut w), Some(n)) => {
                query.combine(&mut w, n);
                Some(w)
            }
            (Some(w), None) => Some(w),
            (None, Some(n)) => {
                let mut w = query.new_window();
                query.combine(&mut w, n);
                Some(w)
            }
            (None, None) => None,
        };
    }
    out
}

/// A block task: merge `parts`, then send the windows that `frontier` completes.
struct Task<Q: SlidingQuery> {
    block: i64,
    parts: Vec<(i64, Arc<Q::Part>)>,
    state: Block<Q>,
    frontier: i64,
}

struct BlockDesc<Q: SlidingQuery> {
    /// `None` while a worker holds the block.
    state: Option<Block<Q>>,
    pending: Vec<(i64, Arc<Q::Part>)>,
    /// The block's first window not yet sent, as of its last task.
    next: i64,
}

/// Starts the stage: `stage.workers` workers and the emitter.
pub(super) fn start<Q: SlidingQuery>(stage: WlqStage<Q, Block<Q>>) -> Result<Started> {
    let mut threads = vec![];
    let mut tasks = vec![];
    let mut counters = vec![];
    for me in 0..stage.workers {
        let (tx, rx) = unbounded::<Task<Q>>();
        let c = Arc::new(WorkerCounters::default());
        let (q, fb, out, c2) = (
            stage.query.clone(),
            stage.feedback.clone(),
            stage.out.clone(),
            c.clone(),
        );
        threads.push(spawn(format!("windgate-wlq-{me}"), move || {
            report_panic(
                &out,
                || format!("WLQ worker {me}"),
                || run_worker(&*q, me, &rx, &fb, &out, &c2),
            )
        })?);
        tasks.push(tx);
        counters.push(c);
    }
    let emitter = Emitter {
        spec: stage.spec,
        shape: Shape::new(&stage.spec),
        kind: stage.kind,
        workers: tasks,
        out: stage.out,
        acked: vec![i64::MIN; stage.plq_workers],
        frontier: i64::MIN,
        blocks: BTreeMap::new(),
        ready: vec![true; stage.workers],
        rr: 0,
        progress: i64::MIN,
    };
    let rx = stage.rx;
    threads.push(spawn("windgate-wlq-emitter".into(), move || {
        let out = emitter.out.clone();
        report_panic(&out, || "WLQ emitter".into(), || emitter.serve(&rx))
    })?);
    Ok((threads, counters))
}

fn run_worker<Q: SlidingQuery>(
    query: &Q,
    me: usize,
    rx: &Receiver<Task<Q>>,
    feedback: &Sender<In<Q>>,
    out: &Sender<OutMsg<Q::Done>>,
    counters: &WorkerCounters,
) {
    for mut task in rx.iter() {
        let t0 = Instant::now();
        for (pane, part) in task.parts.drain(..) {
            task.state.add(query, pane, &part);
        }
        if !task.state.advance(query, task.frontier, out) {
            return;
        }
        counters.add(t0.elapsed(), 1);
        let state = (!task.state.done()).then_some(task.state);
        let msg = WlqIn::Feedback {
            worker: me,
            unit: task.block,
            state,
        };
        if feedback.send(msg).is_err() {
            return;
        }
    }
}

struct Emitter<Q: SlidingQuery> {
    spec: WindowSpec,
    shape: Shape,
    kind: WindowSchedulerKind,
    workers: Vec<Sender<Task<Q>>>,
    out: Sender<OutMsg<Q::Done>>,
    acked: Vec<i64>,
    /// Every PLQ worker acknowledged this frontier: all partitions of panes below it are here.
    frontier: i64,
    blocks: BTreeMap<i64, BlockDesc<Q>>,
    ready: Vec<bool>,
    rr: usize,
    progress: i64,
}

impl<Q: SlidingQuery> Emitter<Q> {
    fn serve(mut self, rx: &Receiver<In<Q>>) {
        let mut exits = 0;
        while let Ok(msg) = rx.recv() {
            match msg {
                WlqIn::Part { pane, part } => {
                    let (lo, hi) = self.spec.windows_of_pane(pane);
                    for b in self.shape.of_window(lo)..=self.shape.of_window(hi) {
                        let shape = self.shape;
                        let d = self.blocks.entry(b).or_insert_with(|| BlockDesc {
                            state: Some(Block::new(shape, b)),
                            pending: Vec::new(),
                            next: b * shape.windows,
                        });
                        d.pending.push((pane, part.clone()));
                        self.try_dispatch(b, None);
                    }
                }
                WlqIn::Ack { worker, frontier } => {
                    self.acked[worker as usize] = frontier;
                    let f = *self.acked.iter().min().expect("at least one PLQ worker");
                    if f > self.frontier {
                        self.frontier = f;
                        let last = last_complete(&self.spec, f);
                        let complete: Vec<i64> = (self.blocks.iter())
                            .take_while(|(_, d)| d.next <= last)
                            .map(|(&b, _)| b)
                            .collect();
                        for b in complete {
                            self.try_dispatch(b, None);
                        }
                    }
                }
                WlqIn::Feedback {
                    worker,
                    unit,
                    state,
                } => self.feedback(worker, unit, state),
                WlqIn::Exit => {
                    exits += 1;
                    if exits == self.acked.len() {
                        return;
                    }
                }
            }
            self.report_progress();
        }
    }

    /// Whether block `b` is idle and has work: partitions to merge or a window the frontier completed.
    fn has_work(&self, d: &BlockDesc<Q>) -> bool {
        d.state.is_some() && (!d.pending.is_empty() || self.shape.last_pane(d.next) < self.frontier)
    }

    /// Sends block `b`'s next task if it has work and a worker can take it. `prefer` is a worker known to be
    /// free (the one whose feedback is being handled).
    fn try_dispatch(&mut self, b: i64, prefer: Option<usize>) -> bool {
        if !self.blocks.get(&b).is_some_and(|d| self.has_work(d)) {
            return false;
        }
        let worker = match self.kind {
            WindowSchedulerKind::WinRr => b.rem_euclid(self.workers.len() as i64) as usize,
            WindowSchedulerKind::WinFb => {
                match prefer.or_else(|| next_ready(&self.ready, &mut self.rr)) {
                    Some(w) => w,
                    None => return false,
                }
            }
        };
        let d = self.blocks.get_mut(&b).expect("checked above");
        let task = Task {
            block: b,
            parts: std::mem::take(&mut d.pending),
            state: d.state.take().expect("idle"),
            frontier: self.frontier,
        };
        self.ready[worker] = false;
        let _ = self.workers[worker].send(task);
        true
    }

    fn feedback(&mut self, worker: usize, b: i64, state: Option<Block<Q>>) {
        match state {
            None => {
                self.blocks.remove(&b);
            }
            Some(state) => {
                let d = self.blocks.get_mut(&b).expect("descriptor of a busy block");
                d.next = state.next;
                d.state = Some(state);
                // Cache locality: the worker that just ran b takes b's next task.
                let prefer = (self.kind == WindowSchedulerKind::WinFb).then_some(worker);
                if self.try_dispatch(b, prefer) && prefer.is_some() {
                    return;
                }
            }
        }
        if self.kind == WindowSchedulerKind::WinRr {
            self.ready[worker] = true;
            return;
        }
        // Serve the oldest idle block with work, else the worker becomes ready.
        let next = (self.blocks.iter())
            .find(|(_, d)| self.has_work(d))
            .map(|(&b, _)| b);
        match next {
            Some(b) => {
                self.try_dispatch(b, Some(worker));
            }
            None => self.ready[worker] = true,
        }
    }

    /// Every window up to the frontier's last complete one has been sent, but for the blocks still open.
    fn report_progress(&mut self) {
        let mut p = last_complete(&self.spec, self.frontier);
        if let Some((_, d)) = self.blocks.first_key_value() {
            p = p.min(d.next - 1);
        }
        if p > self.progress {
            self.progress = p;
            let _ = self.out.send(OutMsg::Progress(p));
        }
    }
}
