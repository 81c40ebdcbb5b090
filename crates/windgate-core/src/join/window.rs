//! One processing thread's share of one side's window (its *portion*, Gulisano et al., ScaleJoin): the tuples it stored,
//! in time order, columnar, and optionally indexed so that a probe compares candidates only.
//!
//! The index: cells of width `eps` over the first band column, keyed by the equality id too. A probe `v`
//! visits the cells of `[v - eps, v + eps]` (three at most) of its own equality id, so a thread scans the
//! tuples near it instead of its whole portion (DuckDB's range join is the bar: brute force cannot beat it).
//! Within a run, every predicate is evaluated by columnar loops over 64 tuples at a time (byte masks the
//! compiler vectorises), then the matches are picked out of the mask.

use std::collections::VecDeque;

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use crate::time::Timestamp;

use super::prepare::JoinTuple;

/// Tuples scanned per mask block.
const BLOCK: usize = 64;

/// A probe of a finite value visits at most five cells (its band of two cells, one of margin each way).
const MAX_PROBE_CELLS: i64 = 8;

/// A match found by a probe: the partner's merged position and its row among its side's rows.
pub type Partner = (u64, u64);

/// Tuples in time order, columnar; `pop_front` moves `start` and compaction is amortised.
#[derive(Debug, Default)]
struct Run {
    start: usize,
    ts: Vec<Timestamp>,
    pos: Vec<u64>,
    seq: Vec<u64>,
    /// Equality ids, kept only where the index does not already separate them.
    eq: Vec<u32>,
    band: Vec<Vec<f64>>,
}

impl Run {
    fn new(dims: usize) -> Self {
        Run {
            band: vec![Vec::new(); dims],
            ..Default::default()
        }
    }

    fn len(&self) -> usize {
        self.ts.len() - self.start
    }

    fn push(&mut self, t: &JoinTuple, pos: u64, keep_eq: bool) {
        self.ts.push(t.key.ts);
        self.pos.push(pos);
        self.seq.push(t.key.seq);
        if keep_eq {
            self.eq.push(t.eq);
        }
        for (col, &v) in self.band.iter_mut().zip(&t.band) {
            col.push(v);
        }
    }

    /// The stored tuples as `(merged position, row)` (a checkpoint's window).
    fn entries(&self) -> impl Iterator<Item = Partner> + '_ {
        let s = self.start;
        self.pos[s..]
            .iter()
            .copied()
            .zip(self.seq[s..].iter().copied())
    }

    fn front_ts(&self) -> Option<Timestamp> {
        self.ts.get(self.start).copied()
    }

    fn pop_front(&mut self) {
        self.start += 1;
        if self.start >= 1024 && self.start * 2 >= self.ts.len() {
            let s = self.start;
            self.ts.drain(..s);
            self.pos.drain(..s);
            self.seq.drain(..s);
            if !self.eq.is_empty() {
                self.eq.drain(..s);
            }
            for col in &mut self.band {
                col.drain(..s);
            }
            self.start = 0;
        }
    }

    /// Appends the tuples of this run matching `t` (every band within its eps, and the equality id when the
    /// run keeps ids) to `out`; returns the comparisons made (one per tuple scanned, as the paper counts).
    /// `max_ts`: only tuples at or below it (asymmetric bounds); the run is in time order, so the scan stops
    /// there.
    fn scan(
        &self,
        t: &JoinTuple,
        eps: &[f64],
        max_ts: Option<i128>,
        out: &mut Vec<Partner>,
    ) -> u64 {
        let n = match max_ts {
            None => self.ts.len(),
            Some(m) => self.start + self.ts[self.start..].partition_point(|&x| x as i128 <= m),
        };
        let mut i = self.start;
        let mut hits = [0u8; BLOCK];
        while i < n {
            let len = BLOCK.min(n - i);
            let hits = &mut hits[..len];
            hits.fill(1);
            for ((col, &v), &e) in self.band.iter().zip(&t.band).zip(eps) {
                and_band(hits, &col[i..i + len], v, e);
            }
            if !self.eq.is_empty() {
                let id = t.eq;
                for (h, &x) in hits.iter_mut().zip(&self.eq[i..i + len]) {
                    *h &= (x == id) as u8;
                }
            }
            for (j, &h) in hits.iter().enumerate() {
                if h != 0 {
                    out.push((self.pos[i + j], self.seq[i + j]));
                }
            }
            i += len;
        }
        (n - self.start) as u64
    }
}

/// `hits[i] &= |col[i] - v| <= eps`, written so that it vectorises (NaN compares false).
#[inline]
fn and_band(hits: &mut [u8], col: &[f64], v: f64, eps: f64) {
    for (h, &x) in hits.iter_mut().zip(col) {
        *h &= ((x - v).abs() <= eps) as u8;
    }
}

/// The cell of a band value: `floor(v / width)`, or the value's bits for an exact (`eps = 0`) band.
#[inline]
fn cell(v: f64, width: f64) -> i64 {
    if width > 0.0 {
        (v / width).floor() as i64
    } else {
        v.to_bits() as i64
    }
}

type CellKey = (u32, i64);

/// One side's portion of the window in one processing thread.
#[derive(Debug)]
pub struct Portion {
    eps: Vec<f64>,
    has_eq: bool,
    /// Unindexed: every stored tuple, equality ids kept.
    all: Run,
    /// Indexed: runs per (equality id, cell of the first band value).
    cells: HashMap<CellKey, Run, FixedState>,
    /// Indexed: the cell of every stored tuple in storage (= time) order, so purging finds them.
    order: VecDeque<(Timestamp, CellKey)>,
    indexed: bool,
}

impl Portion {
    pub fn new(eps: Vec<f64>, has_eq: bool, indexed: bool) -> Self {
        // An index needs something to index by.
        let indexed = indexed && (has_eq || !eps.is_empty());
        Portion {
            all: Run::new(eps.len()),
            cells: HashMap::with_hasher(FixedState::with_seed(0x6a6f)),
            order: VecDeque::new(),
            eps,
            has_eq,
            indexed,
        }
    }

    pub fn len(&self) -> usize {
        if self.indexed {
            self.order.len()
        } else {
            self.all.len()
        }
    }

    /// Every stored tuple as `(merged position, row)`, in no particular order: what a checkpoint keeps of
    /// the portion (the values are read again from the input rows on restore).
    pub fn entries(&self) -> Vec<Partner> {
        if !self.indexed {
            return self.all.entries().collect();
        }
        self.cells.values().flat_map(Run::entries).collect()
    }

    fn key(&self, t: &JoinTuple, band0: f64) -> CellKey {
        let c = self.eps.first().map_or(0, |&e| cell(band0, e));
        (t.eq, c)
    }

    /// Stores `t` (at merged position `pos`); tuples arrive in time order.
    pub fn insert(&mut self, t: &JoinTuple, pos: u64) {
        if !self.indexed {
            self.all.push(t, pos, self.has_eq);
            return;
        }
        let key = self.key(t, t.band.first().copied().unwrap_or(0.0));
        let dims = self.eps.len();
        self.cells
            .entry(key)
            .or_insert_with(|| Run::new(dims))
            .push(t, pos, false);
        self.order.push_back((t.key.ts, key));
    }

    /// Removes every tuple with `ts < bound` (the strict purge of Algorithm 1, L22).
    pub fn purge(&mut self, bound: Timestamp) {
        if !self.indexed {
            while self.all.front_ts().is_some_and(|ts| ts < bound) {
                self.all.pop_front();
            }
            return;
        }
        while let Some(&(ts, key)) = self.order.front()
            && ts < bound
        {
            self.order.pop_front();
            // Runs hold their tuples in storage order, so the oldest of the portion is its run's front.
            let run = self.cells.get_mut(&key).expect("indexed tuple has a run");
            run.pop_front();
            if run.len() == 0 {
                self.cells.remove(&key);
            }
        }
    }

    /// Appends the stored tuples matching `t` (and at or below `max_ts`, when given) to `out` (not in
    /// position order); returns the comparisons.
    pub fn probe(&self, t: &JoinTuple, max_ts: Option<i128>, out: &mut Vec<Partner>) -> u64 {
        if !self.indexed {
            return self.all.scan(t, &self.eps, max_ts, out);
        }
        let Some(&v) = t.band.first() else {
            return self
                .cells
                .get(&(t.eq, 0))
                .map_or(0, |r| r.scan(t, &self.eps, max_ts, out));
        };
        let e = self.eps[0];
        let (lo, hi) = if e > 0.0 {
            // One cell of margin each way: `|x - v| <= e` can hold in float64 for an `x` just outside
            // `[v - e, v + e]` (the difference rounds down to `e`), whose cell is then a neighbour. The exact
            // check in `scan` decides.
            (
                cell(v - e, e).saturating_sub(1),
                cell(v + e, e).saturating_add(1),
            )
        } else {
            let c = cell(v, e);
            (c, c)
        };
        if hi.checked_sub(lo).is_none_or(|d| d > MAX_PROBE_CELLS) {
            // `v ± e` left the float64 range (a huge `eps` or value): the cell range would cover most of
            // i64, so scan the runs of the equality id instead of counting through empty cells.
            return self
                .cells
                .iter()
                .filter(|(k, _)| k.0 == t.eq)
                .map(|(_, r)| r.scan(t, &self.eps, max_ts, out))
                .sum();
        }
        let mut comparisons = 0;
        for c in lo..=hi {
            if let Some(r) = self.cells.get(&(t.eq, c)) {
                comparisons += r.scan(t, &self.eps, max_ts, out);
            }
        }
        comparisons
    }
}
