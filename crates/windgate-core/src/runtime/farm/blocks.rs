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

use crossbeam_channel::{Receiver, Sender};

use super::wlq::next_ready;
use super::{
    SlidingQuery, Started, WindowSchedulerKind, WlqIn, WlqStage, WlqWorker, last_complete,
};
use crate::error::Result;
use crate::runtime::collector::{OutMsg, report_panic};
use crate::threads::spawn;
use crate::time::{WindowSpec, floor_div};

type In<Q> = WlqIn<Q, Block<Q>>;

/// The most windows a block holds. Blocks of `ppw / pps` windows make every window's cost constant; past
/// this many (a day of one-second slides is 86,400) a block is cut shorter, which is still exact (a chunk no
/// longer than a window is all the decomposition needs) and keeps a block's bookkeeping bounded.
const MAX_BLOCK_WINDOWS: i64 = 1 << 16;

/// The windows of one block and the combinations that build them. Segments are kept sparse, by index: only
/// those some partition reached exist, so a block's memory follows its data, not its length.
pub(crate) struct Block<Q: SlidingQuery> {
    shape: Shape,
    /// The first window of the block.
    first: i64,
    /// The next window to send (`first + B` once all are sent).
    next: i64,
    /// The chunk's segments by index `k`: segment `k` holds the panes window `first + k` starts with.
    seg: BTreeMap<i64, Q::Window>,
    /// The panes after the chunk by index `k`: the ones window `first + k` ends with and window
    /// `first + k - 1` does not.
    pre: BTreeMap<i64, Q::Window>,
    /// Built once the chunk is complete: each segment combined with every later one, by the segment's
    /// index. Window `first + k` reads the entry of the first segment from `k` on.
    suffix: Option<BTreeMap<i64, Q::Window>>,
    /// Prefix segments `0..=next - first - 1` combined.
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
    /// Blocks of `ppw / pps` windows (at most [`MAX_BLOCK_WINDOWS`]), whose chunks are no longer than a
    /// window. Needs `ppw >= pps` (windows that overlap or touch).
    fn new(spec: &WindowSpec) -> Self {
        let (ppw, pps) = (spec.panes_per_window(), spec.panes_per_slide());
        debug_assert!(ppw >= pps);
        Self {
            windows: (ppw / pps).clamp(1, MAX_BLOCK_WINDOWS),
            panes_per_slide: pps,
            panes_per_window: ppw,
        }
    }

    fn of_window(&self, j: i64) -> i64 {
        floor_div(j, self.windows)
    }

    /// As `WindowSpec::first_pane`, saturating at the ends of the time line.
    fn first_pane(&self, j: i64) -> i64 {
        j.saturating_mul(self.panes_per_slide)
    }

    fn last_pane(&self, j: i64) -> i64 {
        (self.first_pane(j)).saturating_add(self.panes_per_window - 1)
    }
}

impl<Q: SlidingQuery> Block<Q> {
    fn new(shape: Shape, id: i64) -> Self {
        let first = id.saturating_mul(shape.windows);
        Self {
            shape,
            first,
            next: first,
            seg: BTreeMap::new(),
            pre: BTreeMap::new(),
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
        debug_assert!(pane >= start && pane <= s.last_pane(self.first + s.windows - 1));
        let chunk_end = start + s.windows * s.panes_per_slide;
        let at = if pane < chunk_end {
            self.seg.entry((pane - start) / s.panes_per_slide)
        } else {
            // The first window of the block ending at or after `pane`.
            let past = pane - s.last_pane(self.first);
            self.pre
                .entry((past.max(0) + s.panes_per_slide - 1) / s.panes_per_slide)
        };
        query.merge(at.or_insert_with(|| query.new_window()), part);
    }

    /// Sends every window of the block whose panes are all below `frontier` (all their partitions merged).
    /// Returns false if the collector is gone.
    fn advance(&mut self, query: &Q, frontier: i64, out: &Sender<OutMsg<Q::Done>>) -> bool {
        while !self.done() && self.shape.last_pane(self.next) < frontier {
            let k = self.next - self.first;
            let suffix =
                (self.suffix).get_or_insert_with(|| suffixes(query, std::mem::take(&mut self.seg)));
            if let Some(p) = self.pre.remove(&k) {
                match &mut self.prefix {
                    Some(prefix) => query.combine(prefix, &p),
                    None => self.prefix = Some(p),
                }
            }
            // The window's suffix: its own segment's, taken (no later window reads it), or a copy of the next
            // segment's when its own had no partition.
            let head = suffix.remove(&k).or_else(|| {
                let (_, later) = suffix.range(k..).next()?;
                let mut w = query.new_window();
                query.combine(&mut w, later);
                Some(w)
            });
            let window = match (head, &self.prefix) {
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
                // None of the window's panes had a partition.
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

/// The suffix combinations of a complete chunk: each segment combined with every later one.
fn suffixes<Q: SlidingQuery>(query: &Q, seg: BTreeMap<i64, Q::Window>) -> BTreeMap<i64, Q::Window> {
    let mut out = BTreeMap::new();
    let mut newer: Option<i64> = None;
    for (k, mut w) in seg.into_iter().rev() {
        if let Some(n) = newer {
            query.combine(&mut w, &out[&n]);
        }
        out.insert(k, w);
        newer = Some(k);
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
    let (mut threads, workers, counters) = stage.spawn_workers(run_worker)?;
    let emitter = Emitter {
        spec: stage.spec,
        shape: Shape::new(&stage.spec),
        kind: stage.kind,
        workers,
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

fn run_worker<Q: SlidingQuery>(w: &WlqWorker<Q, Block<Q>, Task<Q>>) {
    for mut task in w.rx.iter() {
        let t0 = Instant::now();
        for (pane, part) in task.parts.drain(..) {
            task.state.add(&*w.query, pane, &part);
        }
        if !task.state.advance(&*w.query, task.frontier, &w.out) {
            return;
        }
        w.counters.add(t0.elapsed(), 1);
        let state = (!task.state.done()).then_some(task.state);
        let msg = WlqIn::Feedback {
            worker: w.me,
            unit: task.block,
            state,
        };
        if w.feedback.send(msg).is_err() {
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
                            next: b.saturating_mul(shape.windows),
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

#[cfg(test)]
mod tests {
    use std::ops::Range;

    use proptest::prelude::*;

    use super::*;
    use crate::runtime::farm::{FarmQuery, Routed};

    /// A query whose window is the list of panes merged into it: a block must give each window exactly its
    /// own panes' partitions, each once.
    struct Panes;

    impl FarmQuery for Panes {
        type Chunk = ();
        type Worker = ();
        type Part = i64;
        type Window = Vec<i64>;
        type Done = Vec<i64>;

        fn new_worker(&self) {}
        fn ingest(&self, _: &mut (), _: &Routed<()>, _: Range<usize>, _: u8) {}
        fn close_below(&self, _: &mut (), _: i64, _: &mut dyn FnMut(i64, i64)) {}
        fn new_window(&self) -> Vec<i64> {
            Vec::new()
        }
        fn merge(&self, window: &mut Vec<i64>, part: &i64) {
            window.push(*part);
        }
        fn done(&self, mut window: Vec<i64>) -> Vec<i64> {
            window.sort_unstable();
            window
        }
    }

    impl SlidingQuery for Panes {
        fn combine(&self, into: &mut Vec<i64>, from: &Vec<i64>) {
            into.extend_from_slice(from);
        }
    }

    proptest! {
        /// Blocks of every length up to `ppw / pps` (shorter ones are what the cap makes), partitions arriving
        /// in any order, the frontier moving in steps: every window with a partition comes out once, in order,
        /// holding exactly the partitions of its panes.
        #[test]
        fn a_block_gives_each_window_its_panes(
            pps in 1i64..5,
            extra in 0i64..12,
            cut in 0i64..100,
            id in -3i64..3,
            panes in prop::collection::vec(0i64..60, 0..40),
            steps in prop::collection::vec(0i64..20, 1..6),
        ) {
            let ppw = pps + extra;
            let windows = 1 + cut % (ppw / pps);
            let shape = Shape { windows, panes_per_slide: pps, panes_per_window: ppw };
            let mut block = Block::<Panes>::new(shape, id);
            let first = block.first;
            let (lo, hi) = (shape.first_pane(first), shape.last_pane(first + windows - 1));
            // Partitions of panes of the block's windows (a pane may have several), in any order.
            let parts: Vec<i64> = panes
                .iter()
                .map(|&p| lo + p % (hi - lo + 1))
                .collect();
            let (tx, rx) = crossbeam_channel::unbounded();
            let mut frontier = lo;
            let mut pending: Vec<i64> = parts.clone();
            for step in steps.iter().chain([&i64::MAX]) {
                frontier = frontier.saturating_add(*step);
                // Every partition of a pane below the frontier is merged before the frontier moves past it.
                let (now, later): (Vec<i64>, Vec<i64>) = pending.iter().partition(|&&p| p < frontier);
                for p in now {
                    block.add(&Panes, p, &p);
                }
                pending = later;
                prop_assert!(block.advance(&Panes, frontier, &tx));
            }
            prop_assert!(block.done());
            drop(tx);
            let got: Vec<(i64, Vec<i64>)> = rx
                .iter()
                .map(|m| match m {
                    OutMsg::Window(j, w) => (j, w),
                    _ => unreachable!(),
                })
                .collect();
            let mut want = vec![];
            for j in first..first + windows {
                let mut w: Vec<i64> = parts
                    .iter()
                    .copied()
                    .filter(|&p| p >= shape.first_pane(j) && p <= shape.last_pane(j))
                    .collect();
                w.sort_unstable();
                if !w.is_empty() {
                    want.push((j, w));
                }
            }
            prop_assert_eq!(got, want);
        }
    }
}
