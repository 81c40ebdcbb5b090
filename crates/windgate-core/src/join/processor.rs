//! A ScaleJoin processing thread's logic (Algorithm 1 of Gulisano et al., ScaleJoin), free of threads and gates so that the
//! parallel engine, the serial engine and the tests run the very same code.

use crate::time::Timestamp;

use super::options::{Bounds, Semantics};
use super::prepare::{JoinTuple, Side};
use super::window::{Partner, Portion};

/// The output gate's total order (Gulisano et al., ScaleJoin): the trigger's time, the trigger's merged position, the
/// partner's merged position. Identical for any number of threads: the order a sequential join emits when it
/// scans its window in insertion order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OutKey {
    pub ts: Timestamp,
    pub trigger: u64,
    pub partner: u64,
}

/// A matching pair as rows of the two inputs (positions among each side's rows in arrival order);
/// `right` is [`OutPair::NO_ROW`] for a left row without a match (`how="left"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutPair {
    pub left: u64,
    pub right: u64,
}

impl OutPair {
    /// The `right` of an unmatched left row: its right columns are null.
    pub const NO_ROW: u64 = u64::MAX;
}

/// What an engine continues from after a checkpoint: the merged positions handed out so far and each
/// side's window tuples (valid ones, in merged order) with their positions.
#[derive(Debug, Default)]
pub struct Restored {
    pub counter: u64,
    pub window: [Vec<(u64, JoinTuple)>; 2],
}

/// Thread `id` of `n`: sees every tuple, stores every n-th.
#[derive(Debug)]
pub struct Processor {
    id: u64,
    n: u64,
    bounds: Bounds,
    semantics: Semantics,
    /// Tuples seen so far: the next tuple's merged position.
    counter: u64,
    portions: [Portion; 2],
    matches: Vec<Partner>,
    pub comparisons: u64,
    pub pairs: u64,
}

impl Processor {
    pub fn new(
        id: usize,
        n: usize,
        bounds: Bounds,
        semantics: Semantics,
        eps: &[f64],
        has_eq: bool,
        index: bool,
    ) -> Self {
        let portion = || Portion::new(eps.to_vec(), has_eq, index);
        Processor {
            id: id as u64,
            n: n as u64,
            bounds,
            semantics,
            counter: 0,
            portions: [portion(), portion()],
            matches: Vec::new(),
            comparisons: 0,
            pairs: 0,
        }
    }

    /// Tuples processed so far.
    pub fn processed(&self) -> u64 {
        self.counter
    }

    /// Tuples stored in this thread's portions.
    pub fn stored(&self) -> usize {
        self.portions.iter().map(Portion::len).sum()
    }

    /// This thread's share of each side's window as `(merged position, row)`, in no particular order.
    pub fn window(&self) -> [Vec<Partner>; 2] {
        [self.portions[0].entries(), self.portions[1].entries()]
    }

    /// Continues from a checkpoint: `r.counter` tuples were processed, and of the windows' tuples this
    /// thread stores the ones the round-robin gives it (the rule of [`process`](Self::process)), so the
    /// union over threads is the window whatever the thread count was.
    pub fn load(&mut self, r: &Restored) {
        self.counter = r.counter;
        for side in Side::BOTH {
            for (pos, t) in &r.window[side.index()] {
                if (pos + 1) % self.n == self.id && t.valid {
                    self.portions[side.index()].insert(t, *pos);
                }
            }
        }
    }

    /// Processes the next ready tuple: compare with the opposite portion, store if it is this thread's turn,
    /// purge. `emit` receives the outputs in [`OutKey`] order.
    pub fn process(&mut self, t: &JoinTuple, mut emit: impl FnMut(OutKey, OutPair)) {
        let pos = self.counter;
        self.counter += 1;
        let own = t.key.side;
        let other = own.other();
        let ts = t.key.ts;
        let interval = self.semantics == Semantics::Interval;
        if interval {
            // The "modified" three-step: purge the opposite window first, so every pair is within the
            // bounds (the later bound, for asymmetric ones, is checked by the probe).
            self.portions[other.index()].purge(self.bounds.horizon(other, ts));
        }
        let max_ts = if interval {
            self.bounds.partner_max(own, ts)
        } else {
            None
        };
        if t.valid {
            self.matches.clear();
            self.comparisons += self.portions[other.index()].probe(t, max_ts, &mut self.matches);
            // The index visits cells, not positions: restore the insertion order.
            self.matches.sort_unstable_by_key(|m| m.0);
            self.pairs += self.matches.len() as u64;
            for &(partner, seq) in &self.matches {
                let pair = match own {
                    Side::Left => OutPair {
                        left: t.key.seq,
                        right: seq,
                    },
                    Side::Right => OutPair {
                        left: seq,
                        right: t.key.seq,
                    },
                };
                emit(
                    OutKey {
                        ts: t.key.ts,
                        trigger: pos,
                        partner,
                    },
                    pair,
                );
            }
        }
        // Algorithm 1 L11 and L19: the counter is incremented before the test, so the first tuple goes to
        // thread 1 (thread 0 when n = 1), as in the paper's worked example.
        if (pos + 1) % self.n == self.id && t.valid {
            // An invalid tuple (null or NaN compared value) can match nothing: storing it would change no
            // output.
            self.portions[own.index()].insert(t, pos);
        }
        // L21-23, for every ready tuple, stored or not (`ts - window` for symmetric bounds).
        self.portions[own.index()].purge(self.bounds.horizon(own, ts));
    }
}
