//! Top-k by a score column: the k best rows, best score first, ties by the total order.
//!
//! A partial top-k is a bounded max-heap of the worst kept entry, so G costs O(log k) per row. The k best of a
//! union are among the k best of each part, so [`TopK::merge`] (H) is exact and order-independent: the result
//! depends only on the set of `(score, order)` pairs, because `(score, order)` is a strict total order on rows.
//!
//! Scores compare with `<` / `>`, so `-0.0` and `0.0` tie (as in dominance). NaN never reaches here.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::PackedOrderKey;

/// One kept row. Ordered worst-last: `a < b` iff `a` ranks before (is better than) `b`.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The score turned so that smaller is better (negated for descending; negation is exact).
    key: f64,
    order: PackedOrderKey,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_f64(self.key, other.key).then(self.order.cmp(&other.order))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

/// A total order on non-NaN scores in which `-0.0 == 0.0`.
fn cmp_f64(a: f64, b: f64) -> Ordering {
    if a < b {
        Ordering::Less
    } else if a > b {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

#[derive(Debug, Clone)]
pub struct TopK {
    k: usize,
    descending: bool,
    /// At most `k` entries; the top is the worst one kept, the first to go.
    heap: BinaryHeap<Entry>,
}

impl TopK {
    /// `descending`: higher scores are better.
    pub fn new(k: usize, descending: bool) -> Self {
        Self {
            k,
            descending,
            heap: BinaryHeap::with_capacity(k.min(1 << 16)),
        }
    }

    /// The top-k of `score[i]` with total order `order[i]`.
    pub fn build(k: usize, descending: bool, score: &[f64], order: &[PackedOrderKey]) -> Self {
        let mut t = Self::new(k, descending);
        for (&s, &o) in score.iter().zip(order) {
            t.insert(s, o);
        }
        t
    }

    pub fn k(&self) -> usize {
        self.k
    }

    pub fn descending(&self) -> bool {
        self.descending
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    fn key(&self, score: f64) -> f64 {
        if self.descending { -score } else { score }
    }

    /// G: offers one row.
    pub fn insert(&mut self, score: f64, order: PackedOrderKey) {
        let e = Entry {
            key: self.key(score),
            order,
        };
        self.offer(e);
    }

    fn offer(&mut self, e: Entry) {
        if self.heap.len() < self.k {
            self.heap.push(e);
        } else if let Some(mut worst) = self.heap.peek_mut()
            && e < *worst
        {
            *worst = e;
        }
    }

    /// H: folds another partial top-k (same `k` and direction) into this one.
    pub fn merge(&mut self, other: &TopK) {
        debug_assert_eq!((self.k, self.descending), (other.k, other.descending));
        for &e in other.heap.iter() {
            self.offer(e);
        }
    }

    /// The answer as `(order, score)`, best score first, ties by the total order.
    pub fn ranked(&self) -> Vec<(PackedOrderKey, f64)> {
        let mut v: Vec<Entry> = self.heap.iter().copied().collect();
        v.sort_unstable();
        v.into_iter().map(|e| (e.order, self.key(e.key))).collect()
    }
}

/// Reference: sort every row by (score best first, order) and keep the first `k`.
pub fn topk_reference(
    k: usize,
    descending: bool,
    score: &[f64],
    order: &[PackedOrderKey],
) -> Vec<(PackedOrderKey, f64)> {
    let mut rows: Vec<(PackedOrderKey, f64)> =
        order.iter().copied().zip(score.iter().copied()).collect();
    rows.sort_by(|a, b| {
        let by_score = if descending {
            cmp_f64(b.1, a.1)
        } else {
            cmp_f64(a.1, b.1)
        };
        by_score.then(a.0.cmp(&b.0))
    });
    rows.truncate(k);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_first_ties_by_order() {
        let t = TopK::build(3, true, &[1.0, 5.0, 5.0, 2.0], &[0, 9, 4, 3]);
        assert_eq!(t.ranked(), vec![(4, 5.0), (9, 5.0), (3, 2.0)]);
        let t = TopK::build(2, false, &[1.0, 5.0, 1.0], &[2, 0, 1]);
        assert_eq!(t.ranked(), vec![(1, 1.0), (2, 1.0)]);
    }

    #[test]
    fn zero_k_keeps_nothing() {
        let t = TopK::build(0, true, &[1.0], &[0]);
        assert!(t.ranked().is_empty());
    }
}
