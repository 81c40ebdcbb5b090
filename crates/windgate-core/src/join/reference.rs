//! The oracle: a single-threaded nested-loop three-step join over the merged stream, with every predicate
//! evaluated directly on the tuples. No index, no portions, no threads.

use std::collections::VecDeque;

use super::options::{Bounds, Predicate, Semantics};
use super::prepare::{JoinTuple, Side};
use super::processor::{OutKey, OutPair, Restored};

#[derive(Debug)]
pub struct ReferenceJoin {
    bounds: Bounds,
    semantics: Semantics,
    eps: Vec<f64>,
    has_eq: bool,
    counter: u64,
    windows: [VecDeque<(u64, JoinTuple)>; 2],
    pub comparisons: u64,
}

impl ReferenceJoin {
    pub fn new(bounds: Bounds, semantics: Semantics, on: &[Predicate]) -> Self {
        let eps = on
            .iter()
            .filter_map(|p| match p {
                Predicate::Band { eps, .. } => Some(*eps),
                Predicate::Eq { .. } => None,
            })
            .collect();
        ReferenceJoin {
            bounds,
            semantics,
            eps,
            has_eq: on.iter().any(|p| matches!(p, Predicate::Eq { .. })),
            counter: 0,
            windows: [VecDeque::new(), VecDeque::new()],
            comparisons: 0,
        }
    }

    /// Tuples in both windows.
    pub fn stored(&self) -> usize {
        self.windows.iter().map(VecDeque::len).sum()
    }

    /// The windows' valid tuples as `(merged position, row)`: invalid ones can match nothing, so a
    /// checkpoint leaves them out.
    pub fn window(&self) -> [Vec<(u64, u64)>; 2] {
        self.windows.each_ref().map(|w| {
            w.iter()
                .filter(|(_, t)| t.valid)
                .map(|(p, t)| (*p, t.key.seq))
                .collect()
        })
    }

    /// Continues from a checkpoint (see [`Restored`]).
    pub fn load(&mut self, r: &Restored) {
        self.counter = r.counter;
        for side in Side::BOTH {
            self.windows[side.index()] = r.window[side.index()].iter().cloned().collect();
        }
    }

    /// Every predicate, and for interval semantics the time bounds, checked directly.
    fn matches(&self, a: &JoinTuple, b: &JoinTuple) -> bool {
        let (l, r) = match a.key.side {
            Side::Left => (a, b),
            Side::Right => (b, a),
        };
        (self.semantics == Semantics::ScaleJoin || self.bounds.holds(l.key.ts, r.key.ts))
            && a.valid
            && b.valid
            && (!self.has_eq || a.eq == b.eq)
            && a.band
                .iter()
                .zip(&b.band)
                .zip(&self.eps)
                .all(|((x, y), e)| (x - y).abs() <= *e)
    }

    /// ScaleJoin's three steps (Gulisano et al.) for the next tuple of the merged stream.
    pub fn process(&mut self, t: JoinTuple, mut emit: impl FnMut(OutKey, OutPair)) {
        let pos = self.counter;
        self.counter += 1;
        let (own, other) = (t.key.side.index(), t.key.side.other().index());
        let ts = t.key.ts;
        if self.semantics == Semantics::Interval {
            let h = self.bounds.horizon(t.key.side.other(), ts);
            self.windows[other].retain(|(_, w)| w.key.ts >= h);
        }
        for (p, w) in &self.windows[other] {
            self.comparisons += 1;
            if self.matches(&t, w) {
                let (left, right) = match t.key.side {
                    Side::Left => (t.key.seq, w.key.seq),
                    Side::Right => (w.key.seq, t.key.seq),
                };
                emit(
                    OutKey {
                        ts: t.key.ts,
                        trigger: pos,
                        partner: *p,
                    },
                    OutPair { left, right },
                );
            }
        }
        let h = self.bounds.horizon(t.key.side, ts);
        self.windows[own].push_back((pos, t));
        self.windows[own].retain(|(_, w)| w.key.ts >= h);
    }
}
