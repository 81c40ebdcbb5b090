//! The window-level query (WLQ) stage (as in Mencagli et al., *Parallel Continuous Preference Queries over
//! Out-of-Order and Bursty Data Streams*): an emitter turning pane partitions into window tasks, workers merging
//! them into window results, and progress reports that let the collector restore window order.
//!
//! A window's running result travels with its task: the emitter holds it while the window is idle and a
//! worker holds it while merging, so tasks of one window are serial by construction and need no lock. WIN_FB
//! hands tasks to workers that said they are ready (feedback after every task), preferring to keep a window on
//! the worker that just merged into it and otherwise serving the oldest window first; WIN_RR sends every task of
//! window j to worker `j mod m` (the baseline).
//!
//! A window is complete once every pane-level query (PLQ) worker acknowledged a punctuation past its last pane and
//! its last task is merged; then its result goes to the collector. `Progress(j)` tells the collector that every
//! window up to j has been sent (it follows them on the same channel, or causally after their senders' feedback).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::{FarmQuery, Started, WindowSchedulerKind, WlqIn, WlqStage, WlqWorker};
use crate::error::Result;
use crate::runtime::collector::{OutMsg, report_panic};
use crate::threads::spawn;
use crate::time::WindowSpec;

/// What a task hands back: the window's running result.
type In<Q> = WlqIn<Q, <Q as FarmQuery>::Window>;

/// Starts the stage: `stage.workers` workers and the emitter.
pub(super) fn start<Q: FarmQuery>(stage: WlqStage<Q, Q::Window>) -> Result<Started> {
    let (mut threads, workers, counters) = stage.spawn_workers(run_worker)?;
    let emitter = Emitter {
        query: stage.query,
        spec: stage.spec,
        kind: stage.kind,
        rx: stage.rx,
        workers,
        out: stage.out,
        plq_workers: stage.plq_workers,
    };
    threads.push(spawn("windgate-wlq-emitter".into(), move || emitter.run())?);
    Ok((threads, counters))
}

/// A window task: merge `parts` into window `window`'s result `state`. A task takes every partition pending for
/// its window at dispatch time: one round trip per batch of partitions, not per partition.
pub struct Task<Q: FarmQuery> {
    window: i64,
    parts: Vec<Arc<Q::Part>>,
    state: Q::Window,
    /// No task can follow: send the result to the collector instead of back.
    finalize: bool,
}

struct WinDesc<Q: FarmQuery> {
    /// `None` while a worker holds the result.
    state: Option<Q::Window>,
    pending: VecDeque<Arc<Q::Part>>,
}

struct Emitter<Q: FarmQuery> {
    query: Arc<Q>,
    spec: WindowSpec,
    kind: WindowSchedulerKind,
    rx: Receiver<In<Q>>,
    workers: Vec<Sender<Task<Q>>>,
    out: Sender<OutMsg<Q::Done>>,
    plq_workers: usize,
}

struct State<Q: FarmQuery> {
    acked: Vec<i64>,
    /// Every PLQ worker acknowledged this frontier: all partitions of panes below it are here.
    frontier: i64,
    wd: BTreeMap<i64, WinDesc<Q>>,
    ready: Vec<bool>,
    rr: usize,
    progress: i64,
}

impl<Q: FarmQuery> Emitter<Q> {
    pub fn run(self) {
        report_panic(&self.out, || "WLQ emitter".into(), || self.serve());
    }

    fn serve(&self) {
        let mut st = State::<Q> {
            acked: vec![i64::MIN; self.plq_workers],
            frontier: i64::MIN,
            wd: BTreeMap::new(),
            ready: vec![true; self.workers.len()],
            rr: 0,
            progress: i64::MIN,
        };
        let mut exits = 0;
        while let Ok(msg) = self.rx.recv() {
            match msg {
                WlqIn::Part { pane, part } => {
                    let (lo, hi) = self.spec.windows_of_pane(pane);
                    for j in lo..=hi {
                        let d = st.wd.entry(j).or_insert_with(|| WinDesc {
                            state: Some(self.query.new_window()),
                            pending: VecDeque::new(),
                        });
                        d.pending.push_back(part.clone());
                        self.try_dispatch(&mut st, j, None);
                    }
                }
                WlqIn::Ack { worker, frontier } => {
                    st.acked[worker as usize] = frontier;
                    let f = *st.acked.iter().min().expect("at least one PLQ worker");
                    if f > st.frontier {
                        st.frontier = f;
                        let last = self.last_complete(f);
                        let idle: Vec<i64> = st
                            .wd
                            .range(..=last)
                            .filter(|(_, d)| d.state.is_some() && d.pending.is_empty())
                            .map(|(&j, _)| j)
                            .collect();
                        for j in idle {
                            self.finalize_idle(&mut st, j);
                        }
                    }
                }
                WlqIn::Feedback {
                    worker,
                    unit,
                    state,
                } => self.feedback(&mut st, worker, unit, state),
                WlqIn::Exit => {
                    exits += 1;
                    if exits == self.plq_workers {
                        return;
                    }
                }
            }
            self.report_progress(&mut st);
        }
    }

    fn last_complete(&self, frontier: i64) -> i64 {
        super::last_complete(&self.spec, frontier)
    }

    fn complete(&self, st: &State<Q>, j: i64) -> bool {
        j <= self.last_complete(st.frontier)
    }

    fn finalize_idle(&self, st: &mut State<Q>, j: i64) {
        let d = st.wd.remove(&j).expect("descriptor");
        let state = d.state.expect("idle window holds its result");
        let _ = self.out.send(OutMsg::Window(j, self.query.done(state)));
    }

    /// Sends window j's next task if the window is idle and a worker can take it. `prefer` is a worker known to
    /// be free (the one whose feedback we are handling).
    fn try_dispatch(&self, st: &mut State<Q>, j: i64, prefer: Option<usize>) -> bool {
        let complete = self.complete(st, j);
        let d = st.wd.get_mut(&j).expect("descriptor");
        if d.state.is_none() || d.pending.is_empty() {
            return false;
        }
        let worker = match self.kind {
            WindowSchedulerKind::WinRr => (j.rem_euclid(self.workers.len() as i64)) as usize,
            WindowSchedulerKind::WinFb => {
                match prefer.or_else(|| next_ready(&st.ready, &mut st.rr)) {
                    Some(w) => w,
                    None => return false,
                }
            }
        };
        let parts: Vec<Arc<Q::Part>> = d.pending.drain(..).collect();
        let state = d.state.take().expect("idle");
        let finalize = complete;
        st.ready[worker] = false;
        let _ = self.workers[worker].send(Task {
            window: j,
            parts,
            state,
            finalize,
        });
        true
    }

    fn feedback(&self, st: &mut State<Q>, worker: usize, j: i64, state: Option<Q::Window>) {
        match state {
            None => {
                st.wd.remove(&j);
            }
            Some(state) => {
                let d = st.wd.get_mut(&j).expect("descriptor of a busy window");
                d.state = Some(state);
                let pending = !d.pending.is_empty();
                if pending {
                    // Cache locality: the worker that just merged into j takes j's next task.
                    let prefer = (self.kind == WindowSchedulerKind::WinFb).then_some(worker);
                    if self.try_dispatch(st, j, prefer) && prefer.is_some() {
                        return;
                    }
                } else if self.complete(st, j) {
                    self.finalize_idle(st, j);
                }
            }
        }
        if self.kind == WindowSchedulerKind::WinRr {
            st.ready[worker] = true;
            return;
        }
        // Serve the oldest idle window with work, else the worker becomes ready.
        let next = st
            .wd
            .iter()
            .find(|(_, d)| d.state.is_some() && !d.pending.is_empty())
            .map(|(&j, _)| j);
        match next {
            Some(j) => {
                self.try_dispatch(st, j, Some(worker));
            }
            None => st.ready[worker] = true,
        }
    }

    fn report_progress(&self, st: &mut State<Q>) {
        let mut p = self.last_complete(st.frontier);
        if let Some((&first, _)) = st.wd.first_key_value() {
            p = p.min(first - 1);
        }
        if p > st.progress {
            st.progress = p;
            let _ = self.out.send(OutMsg::Progress(p));
        }
    }
}

pub(super) fn next_ready(ready: &[bool], rr: &mut usize) -> Option<usize> {
    let n = ready.len();
    for k in 0..n {
        let w = (*rr + k) % n;
        if ready[w] {
            *rr = w + 1;
            return Some(w);
        }
    }
    None
}

fn run_worker<Q: FarmQuery>(w: &WlqWorker<Q, Q::Window, Task<Q>>) {
    for mut task in w.rx.iter() {
        let t0 = Instant::now();
        for part in task.parts.drain(..) {
            w.query.merge(&mut task.state, &part);
        }
        let state = if task.finalize {
            let done = w.query.done(task.state);
            if w.out.send(OutMsg::Window(task.window, done)).is_err() {
                return;
            }
            None
        } else {
            Some(task.state)
        };
        w.counters.add(t0.elapsed(), 1);
        let msg = WlqIn::Feedback {
            worker: w.me,
            unit: task.window,
            state,
        };
        if w.feedback.send(msg).is_err() {
            return;
        }
    }
}
