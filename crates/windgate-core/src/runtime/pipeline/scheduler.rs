//! The central scheduler (the dynamic scheduling of Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream
//! Processing on Shared-Memory Multicores*): a free worker asks for an operator, gets one by the policy's rule
//! among the *schedulable* ones (fewer workers than its maximum degree of parallelism, and work waiting),
//! runs it for one time slice worth of items, and reports back what it did. The reports are the online
//! estimates: per-item cost `c_i`, selectivity `s_i`, and CT's worker time in the current window.
//!
//! One mutex guards it all: a worker takes it twice per time slice (hundreds of microseconds), so it is
//! never contended enough to matter and the invariants (`w_i <= M_i`, no allotment to an empty worklist)
//! are plain to check.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::options::{PipelineOptions, SchedulerPolicy};
use super::stage::Done;

/// A time slice's allotment: operator, item budget, and (partitioned-queue baseline) the worker slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allotment {
    pub op: usize,
    pub budget: usize,
    pub slot: usize,
}

/// The figures a policy decides on, for one operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OpView {
    /// Items waiting (`I_i`).
    pub len: usize,
    /// Workers allotted now (`w_i`).
    pub workers: usize,
    /// Maximum degree of parallelism (`M_i`).
    pub max_dop: usize,
    /// Seconds per item (`c_i`).
    pub cost: f64,
    /// Outputs per input (`s_i`).
    pub selectivity: f64,
    /// Worker seconds in the current CT window (`T_i^W`).
    pub window_busy: f64,
}

impl OpView {
    fn schedulable(&self) -> bool {
        self.workers < self.max_dop && self.len > 0
    }
}

/// The policy's choice among `ops` (`None` when nothing is schedulable). Pure, so the invariants can be
/// tested on any figures.
pub(crate) fn pick(
    policy: SchedulerPolicy,
    ops: &[OpView],
    tau: f64,
    capacity: usize,
) -> Option<usize> {
    let schedulable = || (0..ops.len()).filter(|&i| ops[i].schedulable());
    // cs_i = s_1 * ... * s_i: ingress items to operator i's outputs.
    let cs: Vec<f64> = ops
        .iter()
        .scan(1.0, |acc, o| {
            *acc *= o.selectivity;
            Some(*acc)
        })
        .collect();
    let min_by = |f: &dyn Fn(usize) -> f64| {
        schedulable().min_by(|&a, &b| f(a).total_cmp(&f(b)).then(a.cmp(&b)))
    };
    match policy {
        // LP: suction from egress.
        SchedulerPolicy::Lp => schedulable().next_back(),
        // QST (eq. 1): the earliest operator whose output queue is under T_i = C cs_i / sum cs_j; the last
        // operator's output is egress (no threshold). None under threshold: the latest schedulable one, so
        // the backed-up queues drain.
        SchedulerPolicy::Qst => {
            let total: f64 = cs.iter().sum::<f64>().max(f64::MIN_POSITIVE);
            schedulable()
                .find(|&i| {
                    i + 1 == ops.len() || (ops[i + 1].len as f64) < capacity as f64 * cs[i] / total
                })
                .or_else(|| schedulable().next_back())
        }
        // ET (eq. 2): the most worker time needed to drain, shared by one more worker.
        SchedulerPolicy::Et => {
            min_by(&|i| -(ops[i].len as f64 * ops[i].cost) / (ops[i].workers as f64 + 1.0))
        }
        // CT (eq. 3): the fewest ingress-equivalent items processed in this window, counting the time
        // already committed by allotted workers.
        SchedulerPolicy::Ct | SchedulerPolicy::CtInput => {
            let norm = |i: usize| match policy {
                SchedulerPolicy::Ct => cs[i],
                _ if i == 0 => 1.0,
                _ => cs[i - 1],
            };
            min_by(&|i| {
                let o = &ops[i];
                (o.window_busy + o.workers as f64 * tau) / (o.cost * norm(i)).max(f64::MIN_POSITIVE)
            })
        }
    }
}

/// Per-operator bookkeeping, under the scheduler's lock.
#[derive(Debug, Clone)]
pub(crate) struct OpSched {
    pub workers: usize,
    pub max_dop: usize,
    pub inputs: u64,
    pub outputs: u64,
    /// Worklist entries processed (the unit of the time-slice budget).
    pub taken: u64,
    pub busy: Duration,
    pub window_busy: Duration,
    pub allotments: u64,
    pub max_workers: usize,
    /// Partitioned-queue baseline: which worker slots are taken, and where the rotation continues.
    slots: Vec<bool>,
    next_slot: usize,
}

impl OpSched {
    /// `slots`: the baseline's worker slots (0 for every other kind: the slot is then always 0).
    pub(crate) fn new(max_dop: usize, slots: usize) -> Self {
        Self {
            workers: 0,
            max_dop: max_dop.max(1),
            inputs: 0,
            outputs: 0,
            taken: 0,
            busy: Duration::ZERO,
            window_busy: Duration::ZERO,
            allotments: 0,
            max_workers: 0,
            slots: vec![false; slots],
            next_slot: 0,
        }
    }

    /// Seconds per worklist entry (a part of a partitioned input counts as one: the budget counts
    /// entries); an unmeasured operator is assumed cheap (1 µs) so it gets tried.
    fn cost(&self) -> f64 {
        if self.taken == 0 {
            1e-6
        } else {
            (self.busy.as_secs_f64() / self.taken as f64).max(1e-9)
        }
    }

    fn selectivity(&self) -> f64 {
        if self.inputs == 0 {
            1.0
        } else {
            self.outputs as f64 / self.inputs as f64
        }
    }

    fn take_slot(&mut self) -> usize {
        if self.slots.is_empty() {
            return 0;
        }
        let n = self.slots.len();
        let slot = (0..n)
            .map(|k| (self.next_slot + k) % n)
            .find(|&s| !self.slots[s])
            .expect("workers < max_dop = slots, so one is free");
        self.slots[slot] = true;
        self.next_slot = (slot + 1) % n;
        slot
    }
}

struct State {
    ops: Vec<OpSched>,
    window_start: Instant,
}

pub(crate) struct Scheduler {
    state: Mutex<State>,
    policy: SchedulerPolicy,
    tau: Duration,
    window: Duration,
    capacity: usize,
}

impl Scheduler {
    pub(crate) fn new(ops: Vec<OpSched>, options: &PipelineOptions) -> Self {
        Self {
            state: Mutex::new(State {
                ops,
                window_start: Instant::now(),
            }),
            policy: options.scheduler,
            tau: options.time_slice,
            window: options.ct_window,
            capacity: options.qst_capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A worker that panicked holding the lock leaves consistent counters (every update is one
        // statement), and the run is failing anyway: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A worker asks for work; `len(i)` is operator i's worklist size now.
    pub(crate) fn acquire(&self, len: impl Fn(usize) -> usize) -> Option<Allotment> {
        let mut st = self.lock();
        if st.window_start.elapsed() >= self.window {
            st.window_start = Instant::now();
            st.ops
                .iter_mut()
                .for_each(|o| o.window_busy = Duration::ZERO);
        }
        let views: Vec<OpView> = st
            .ops
            .iter()
            .enumerate()
            .map(|(i, o)| OpView {
                len: len(i),
                workers: o.workers,
                max_dop: o.max_dop,
                cost: o.cost(),
                selectivity: o.selectivity(),
                window_busy: o.window_busy.as_secs_f64(),
            })
            .collect();
        let i = pick(self.policy, &views, self.tau.as_secs_f64(), self.capacity)?;
        debug_assert!(views[i].schedulable());
        let budget = (self.tau.as_secs_f64() / views[i].cost).clamp(1.0, 65536.0) as usize;
        let o = &mut st.ops[i];
        o.workers += 1;
        o.allotments += 1;
        o.max_workers = o.max_workers.max(o.workers);
        let slot = o.take_slot();
        Some(Allotment {
            op: i,
            budget,
            slot,
        })
    }

    /// The worker is back: what it processed, produced, and the time it took.
    pub(crate) fn release(&self, a: Allotment, busy: Duration, done: Done) {
        let mut st = self.lock();
        let o = &mut st.ops[a.op];
        o.workers -= 1;
        if !o.slots.is_empty() {
            o.slots[a.slot] = false;
        }
        o.inputs += done.inputs;
        o.outputs += done.outputs;
        o.taken += done.taken;
        o.busy += busy;
        o.window_busy += busy;
    }

    /// Work done outside an allotment (end-of-stream output, on the caller's thread).
    pub(crate) fn record(&self, op: usize, busy: Duration, outputs: u64) {
        let mut st = self.lock();
        st.ops[op].outputs += outputs;
        st.ops[op].busy += busy;
    }

    /// True when operators `0..=upto` have no waiting items and no allotted worker: nothing more can reach
    /// operator `upto + 1` until the caller adds input. Checked under the lock, so no allotment races it.
    pub(crate) fn quiescent(&self, upto: usize, len: impl Fn(usize) -> usize) -> bool {
        let st = self.lock();
        (0..=upto).all(|i| st.ops[i].workers == 0 && len(i) == 0)
    }

    pub(crate) fn snapshot(&self) -> Vec<OpSched> {
        self.lock().ops.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(len: usize, workers: usize, max_dop: usize) -> OpView {
        OpView {
            len,
            workers,
            max_dop,
            cost: 1e-6,
            selectivity: 1.0,
            window_busy: 0.0,
        }
    }

    const ALL: [SchedulerPolicy; 5] = [
        SchedulerPolicy::Ct,
        SchedulerPolicy::CtInput,
        SchedulerPolicy::Lp,
        SchedulerPolicy::Qst,
        SchedulerPolicy::Et,
    ];

    #[test]
    fn never_picks_an_empty_or_full_operator() {
        // Exhaustive over small shapes: len 0..3, workers 0..3, max_dop 1..3 for 3 operators.
        let shapes: Vec<OpView> = (0..3)
            .flat_map(|l| (0..3).flat_map(move |w| (1..3).map(move |m| view(l, w, m))))
            .collect();
        for a in &shapes {
            for b in &shapes {
                for c in &shapes {
                    let ops = [*a, *b, *c];
                    for p in ALL {
                        match pick(p, &ops, 5e-4, 100) {
                            Some(i) => assert!(ops[i].schedulable(), "{p:?} picked {i} of {ops:?}"),
                            None => assert!(ops.iter().all(|o| !o.schedulable())),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn each_rule_picks_what_the_paper_says() {
        let mut ops = [view(5, 0, 4), view(5, 0, 4), view(5, 0, 1)];
        assert_eq!(pick(SchedulerPolicy::Lp, &ops, 5e-4, 100), Some(2));
        ops[2].workers = 1; // stateful operator busy: LP moves upstream
        assert_eq!(pick(SchedulerPolicy::Lp, &ops, 5e-4, 100), Some(1));
        // ET: most work per (workers + 1).
        ops[0].cost = 1e-5;
        assert_eq!(pick(SchedulerPolicy::Et, &ops, 5e-4, 100), Some(0));
        // CT: least normalised work this window.
        ops[0].window_busy = 1.0;
        assert_eq!(pick(SchedulerPolicy::Ct, &ops, 5e-4, 100), Some(1));
        // QST: the earliest whose output queue is under threshold (C/3 each here).
        let q = [view(10, 0, 4), view(50, 0, 4), view(1, 0, 4)];
        assert_eq!(pick(SchedulerPolicy::Qst, &q, 5e-4, 90), Some(1));
        assert_eq!(pick(SchedulerPolicy::Qst, &q, 5e-4, 300), Some(0));
    }

    #[test]
    fn ct_input_divides_by_the_input_ratio() {
        // A filter (s = 0.1) before an operator of the same cost. As printed, CT divides the filter's work
        // by cs_1 = 0.1 too, which inflates it tenfold and starves the filter; dividing by the input ratio
        // (1 for the first operator) counts ingress items and gives it the worker.
        let mut ops = [view(5, 0, 4), view(5, 0, 4)];
        ops[0].selectivity = 0.1;
        ops[0].window_busy = 5e-4;
        ops[1].window_busy = 1e-4;
        assert_eq!(pick(SchedulerPolicy::Ct, &ops, 5e-4, 100), Some(1));
        assert_eq!(pick(SchedulerPolicy::CtInput, &ops, 5e-4, 100), Some(0));
    }
}
