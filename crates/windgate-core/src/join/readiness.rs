//! The caller's view of readiness: which tuples of the two sides are ready (ScaleJoin's readiness, Gulisano et al., as the
//! ScaleGate decides it), in merged order. The inline engines take their tuples from here; for the threaded
//! engine it counts the ready prefix so the caller knows how many outputs a push owes.

use std::collections::VecDeque;

use super::outer::Outer;
use super::prepare::{JoinKey, JoinTuple, Side};

/// Pending tuples of both sides and each side's latest published key (an item or a promise).
#[derive(Debug, Default)]
pub struct ReadyMerge {
    pending: [VecDeque<JoinTuple>; 2],
    latest: [Option<JoinKey>; 2],
    closed: [bool; 2],
    /// Tuples released as ready so far (the next one's merged position).
    ready: u64,
    /// Largest ts released per side, and over both.
    pub ready_max_ts: [Option<i64>; 2],
    /// `how="left"`: sees every ready tuple, in order.
    pub outer: Option<Outer>,
}

impl ReadyMerge {
    /// A tuple of `side`, in the side's key order.
    pub fn push(&mut self, t: JoinTuple) {
        let s = t.key.side.index();
        self.latest[s] = Some(t.key);
        self.pending[s].push_back(t);
    }

    /// `side` promises keys `>= key` from now on.
    pub fn advance(&mut self, side: Side, key: JoinKey) {
        let s = side.index();
        if self.latest[s].is_none_or(|l| key > l) {
            self.latest[s] = Some(key);
        }
    }

    /// A checkpoint's merge: `ready` tuples were ready so far, `latest` is what each side published last,
    /// `pending` each side's released, not yet ready tuples in key order.
    pub fn restored(
        ready: u64,
        latest: [Option<JoinKey>; 2],
        ready_max_ts: [Option<i64>; 2],
        pending: [VecDeque<JoinTuple>; 2],
    ) -> Self {
        ReadyMerge {
            pending,
            latest,
            closed: [false; 2],
            ready,
            ready_max_ts,
            outer: None,
        }
    }

    /// The latest key `side` published (an item or a promise).
    pub fn latest(&self, side: Side) -> Option<JoinKey> {
        self.latest[side.index()]
    }

    /// `side`'s released tuples that are not ready yet, in key order.
    pub fn pending(&self, side: Side) -> &VecDeque<JoinTuple> {
        &self.pending[side.index()]
    }

    /// Drops the band values of the pending tuples: the threaded engine has its own copies, and the merge
    /// only needs keys.
    pub fn strip_pending_values(&mut self) {
        for t in self.pending.iter_mut().flatten() {
            t.band = Default::default();
        }
    }

    pub fn close(&mut self, side: Side) {
        self.closed[side.index()] = true;
    }

    pub fn ready_count(&self) -> u64 {
        self.ready
    }

    pub fn pending_len(&self) -> usize {
        self.pending.iter().map(VecDeque::len).sum()
    }

    /// Tuples of `side` released to the engine but not ready yet.
    pub fn pending_of(&self, side: Side) -> usize {
        self.pending[side.index()].len()
    }

    /// The next ready tuple: the smaller front, if every open side has published a key above it (a side's
    /// own latest item is not ready; a side that has published nothing blocks).
    pub fn pop(&mut self) -> Option<JoinTuple> {
        let s = match (self.pending[0].front(), self.pending[1].front()) {
            (None, None) => return None,
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (Some(l), Some(r)) => usize::from(r.key < l.key),
        };
        let key = self.pending[s].front().expect("checked").key;
        let ready = (0..2).all(|j| self.closed[j] || self.latest[j].is_some_and(|l| key < l));
        if !ready {
            return None;
        }
        if let Some(o) = &mut self.outer {
            o.on_ready(key, self.ready);
        }
        self.ready += 1;
        self.ready_max_ts[s] = Some(key.ts);
        self.pending[s].pop_front()
    }

    /// Like [`pop`](Self::pop) but drops the tuple (the threaded engine already has it).
    pub fn count_ready(&mut self) {
        while self.pop().is_some() {}
    }
}
