//! The left outer join (`how="left"`): which left rows found no partner, and where they go in the output.
//!
//! A left row is *closed* by the first ready tuple of the merged stream (time, left before right, arrival)
//! whose time is beyond `l.ts + upper`: no later right row can match it any more. With ScaleJoin's own
//! semantics a left row leaves its window only when a later *left* tuple purges it, so only left tuples
//! close rows there. At the end of both inputs every row still open closes.
//!
//! An unmatched row goes out just before the pairs its closing tuple triggers; rows closed by the same tuple
//! in merged order; rows closed at the end after every pair. All of that depends on the merged stream and the
//! pairs only, so every engine and thread count puts them in the same place.
//!
//! Every pair of a left row is triggered by a tuple before its closing one, so once the outputs of every
//! ready tuple are in (as they are whenever the joiner builds output rows), whether a closed row matched is
//! known.

use std::collections::VecDeque;

use foldhash::fast::FixedState;
use hashbrown::HashSet;

use super::options::{Bounds, Semantics};
use super::prepare::{JoinKey, Side};
use super::processor::OutPair;

/// The closing position of the rows still open at the end of the input: after every pair.
const END: u64 = u64::MAX;

#[derive(Debug)]
pub struct Outer {
    bounds: Bounds,
    /// ScaleJoin semantics: only left tuples close rows.
    left_only: bool,
    /// Ready left rows not closed yet: `(ts, seq)`, in merged (= time) order.
    open: VecDeque<(i64, u64)>,
    /// Closed rows whose match is not settled yet: `(closing position, seq)`, in output order.
    closed: VecDeque<(u64, u64)>,
    /// Left rows (open or closed, not settled) with at least one pair.
    matched: HashSet<u64, FixedState>,
}

impl Outer {
    pub fn new(bounds: Bounds, semantics: Semantics) -> Self {
        Outer {
            bounds,
            left_only: semantics == Semantics::ScaleJoin,
            open: VecDeque::new(),
            closed: VecDeque::new(),
            matched: HashSet::with_hasher(FixedState::with_seed(0x6f75)),
        }
    }

    /// A checkpoint's left rows: the open ones as `(ts, seq)` in merged order, and those of them already
    /// matched. Between calls no closed row waits (every output call settles them all).
    pub fn restored(
        bounds: Bounds,
        semantics: Semantics,
        open: Vec<(i64, u64)>,
        matched: impl IntoIterator<Item = u64>,
    ) -> Self {
        let mut o = Outer::new(bounds, semantics);
        o.open = open.into();
        o.matched.extend(matched);
        o
    }

    /// The open left rows `(ts, seq, matched)` in merged order, if no closed row waits to be settled (as
    /// between calls); else `None`.
    pub fn open_rows(&self) -> Option<Vec<(i64, u64, bool)>> {
        self.closed.is_empty().then(|| {
            self.open
                .iter()
                .map(|&(ts, seq)| (ts, seq, self.matched.contains(&seq)))
                .collect()
        })
    }

    /// Left rows waiting to be closed or settled.
    pub fn len(&self) -> usize {
        self.open.len() + self.closed.len()
    }

    /// The tuple at merged position `pos` became ready.
    pub fn on_ready(&mut self, key: JoinKey, pos: u64) {
        if !self.left_only || key.side == Side::Left {
            while let Some(&(ts, seq)) = self.open.front()
                && !self.bounds.left_open(ts, key.ts)
            {
                self.open.pop_front();
                self.closed.push_back((pos, seq));
            }
        }
        if key.side == Side::Left {
            self.open.push_back((key.ts, key.seq));
        }
    }

    /// End of both inputs: every open row closes after every pair.
    pub fn close_all(&mut self) {
        for (_, seq) in self.open.drain(..) {
            self.closed.push_back((END, seq));
        }
    }

    /// `pairs`: every pair of the ready tuples not returned yet, `(trigger position, pair)` in output order.
    /// Returns them with the closed unmatched rows in their places.
    pub fn resolve(&mut self, pairs: Vec<(u64, OutPair)>) -> Vec<OutPair> {
        self.matched.extend(pairs.iter().map(|p| p.1.left));
        let mut out = Vec::with_capacity(pairs.len());
        for (trigger, pair) in pairs {
            self.settle(Some(trigger), &mut out);
            out.push(pair);
        }
        self.settle(None, &mut out);
        out
    }

    /// Emits the closed rows up to closing position `upto` (all: `None`) that had no pair.
    fn settle(&mut self, upto: Option<u64>, out: &mut Vec<OutPair>) {
        while let Some(&(at, seq)) = self.closed.front()
            && upto.is_none_or(|u| at <= u)
        {
            self.closed.pop_front();
            if !self.matched.remove(&seq) {
                out.push(OutPair {
                    left: seq,
                    right: OutPair::NO_ROW,
                });
            }
        }
    }
}
