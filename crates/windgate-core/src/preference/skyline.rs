//! Incremental block-nested-loop skyline (as in Mencagli et al., *Parallel Continuous Preference Queries over
//! Out-of-Order and Bursty Data Streams*): the current skyline is kept column-wise; each new point removes the
//! stored points it dominates and is appended unless a stored point dominates it.
//!
//! The stored set is always exactly the skyline of every point inserted so far, whatever the insertion order,
//! which is what makes [`Skyline::merge`] (the window-level H step) exact: a point of `A ∪ B` dominated by
//! anything is dominated by a skyline point of `A ∪ B`, and that point is in `S(A)` or `S(B)`.

use super::PackedOrderKey;
use super::dominance::Prefer;
use smallvec::SmallVec;

use super::store::{BlockCmp, PointStore};

#[derive(Debug, Clone, PartialEq)]
pub struct Skyline {
    store: PointStore,
}

impl Skyline {
    /// An empty skyline with one preference per dimension.
    pub fn new(prefer: Vec<Prefer>) -> Self {
        Self {
            store: PointStore::new(prefer),
        }
    }

    /// The skyline of all rows of `cols` (one slice per dimension), row `i` having total order `order[i]`.
    pub fn build<C: AsRef<[f64]>>(
        prefer: Vec<Prefer>,
        cols: &[C],
        order: &[PackedOrderKey],
    ) -> Self {
        let mut s = Self::new(prefer);
        for (row, &o) in order.iter().enumerate() {
            s.insert_row(cols, row, o);
        }
        s
    }

    pub fn prefer(&self) -> &[Prefer] {
        &self.store.prefer
    }

    pub fn dims(&self) -> usize {
        self.store.dims()
    }

    pub fn len(&self) -> usize {
        self.store.len()
    }

    pub fn is_empty(&self) -> bool {
        self.store.len() == 0
    }

    /// Inserts row `row` of `cols` (one slice per dimension) with total order `order`.
    pub fn insert_row<C: AsRef<[f64]>>(&mut self, cols: &[C], row: usize, order: PackedOrderKey) {
        debug_assert_eq!(cols.len(), self.dims());
        let p = self.store.normalise(cols, row);
        self.insert_point(&p, order);
    }

    /// Inserts one point given as a row.
    pub fn insert(&mut self, point: &[f64], order: PackedOrderKey) {
        debug_assert_eq!(point.len(), self.dims());
        let cols: Vec<[f64; 1]> = point.iter().map(|&v| [v]).collect();
        self.insert_row(&cols, 0, order);
    }

    /// Inserts a normalised point.
    fn insert_point(&mut self, p: &[f64], order: PackedOrderKey) {
        if self.scan(p) {
            self.store.push(p, order);
        }
    }

    /// The BNL step without the append: removes the stored points `p` dominates and says whether `p` survives.
    /// Stored points never dominate each other, so if one dominates `p`, `p` can dominate none of them
    /// (transitivity) and the scan stops early, having removed nothing.
    fn scan(&mut self, p: &[f64]) -> bool {
        if self.store.dominated_among_first(p, 16) {
            return false;
        }
        let d = self.dims() as u8;
        let mut cmp = BlockCmp::new();
        let mut dominated: SmallVec<[u32; 16]> = SmallVec::new();
        let mut i0 = 0;
        while i0 < self.store.len() {
            let n = self.store.compare_block(p, i0, &mut cmp);
            if (0..n).any(|j| cmp.k_sp(j) == d) {
                return false;
            }
            dominated.extend(
                (0..n)
                    .filter(|&j| cmp.k_ps(j) == d)
                    .map(|j| (i0 + j) as u32),
            );
            i0 += n;
        }
        // Descending, so each slot refilled by `swap_remove` takes a point that stays.
        for &i in dominated.iter().rev() {
            self.store.swap_remove(i as usize);
        }
        true
    }

    /// H: folds another skyline (same preferences) into this one. Order-independent. The other's points are
    /// already mutually non-dominating, so each is scanned against this side's points only and the survivors
    /// are appended afterwards: `|A|·|B|` comparisons, none within B.
    pub fn merge(&mut self, other: &Skyline) {
        debug_assert_eq!(self.prefer(), other.prefer());
        let survivors: Vec<usize> = (0..other.store.len())
            .filter(|&i| self.scan(&other.store.point(i)))
            .collect();
        for i in survivors {
            self.store.push(&other.store.point(i), other.store.order[i]);
        }
    }

    /// The members' positions in the total order, ascending (the output order).
    pub fn members(&self) -> Vec<PackedOrderKey> {
        let mut m = self.store.order.clone();
        m.sort_unstable();
        m
    }

    /// The members as `(order, row)` pairs, ascending by order.
    pub fn rows(&self) -> Vec<(PackedOrderKey, Vec<f64>)> {
        let mut idx: Vec<usize> = (0..self.store.len()).collect();
        idx.sort_unstable_by_key(|&i| self.store.order[i]);
        idx.into_iter()
            .map(|i| (self.store.order[i], self.store.values(i)))
            .collect()
    }
}

/// Reference: the skyline by definition, testing every pair. Returns members' orders ascending.
pub fn skyline_reference<C: AsRef<[f64]>>(
    prefer: &[Prefer],
    cols: &[C],
    order: &[PackedOrderKey],
) -> Vec<PackedOrderKey> {
    let mut out: Vec<PackedOrderKey> = (0..order.len())
        .filter(|&t| {
            !(0..order.len()).any(|s| {
                super::dominance::compare(prefer, |k| cols[k].as_ref()[s], |k| cols[k].as_ref()[t])
                    .dominates(prefer.len())
            })
        })
        .map(|t| order[t])
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use Prefer::{Max, Min};

    #[test]
    fn keeps_duplicates_and_drops_dominated() {
        let x = [1.0, 1.0, 2.0, 0.0];
        let y = [1.0, 1.0, 2.0, 3.0];
        let s = Skyline::build(vec![Min, Min], &[&x[..], &y[..]], &[10, 11, 12, 13]);
        assert_eq!(s.members(), vec![10, 11, 13]);
    }

    #[test]
    fn max_preference() {
        let x = [1.0, 2.0, 3.0];
        let s = Skyline::build(vec![Max], &[&x[..]], &[0, 1, 2]);
        assert_eq!(s.members(), vec![2]);
    }

    #[test]
    fn merge_empty() {
        let mut a = Skyline::new(vec![Min]);
        let b = Skyline::build(vec![Min], &[vec![3.0, 1.0]], &[5, 6]);
        a.merge(&b);
        assert_eq!(a.members(), vec![6]);
        assert_eq!(a.rows(), vec![(6, vec![1.0])]);
    }
}
