//! Top-δ dominant skyline (Mencagli et al., *Parallel Continuous Preference Queries over Out-of-Order and Bursty
//! Data Streams*): the skyline with κ kept per point, where κ(t) is the largest k for which some other point
//! k-dominates t (0 if none). The answer is the δ skyline points of lowest κ, ties by the total order (the authors
//! broke ties by storage order, which parallelism makes non-deterministic).
//!
//! Keeping κ only over skyline points is exact: a point dropped because q dominates it is covered by q, which
//! k-dominates everything the dropped point did with at least the same k. So each stored κ equals κ over every
//! point inserted, and [`TopDominant::merge`] (H) is exact and order-independent.
//!
//! κ is computed from the definition with strictness accumulated over all dimensions; the authors' update kept
//! only the last dimension's flag, a bug deliberately not ported.

use super::PackedOrderKey;
use super::dominance::Prefer;
use smallvec::SmallVec;

use super::store::{BlockCmp, PointStore};

#[derive(Debug, Clone, PartialEq)]
pub struct TopDominant {
    store: PointStore,
    /// κ of each stored point, parallel to the store. Always `< d` for stored points.
    kappa: Vec<u32>,
}

impl TopDominant {
    pub fn new(prefer: Vec<Prefer>) -> Self {
        Self {
            store: PointStore::new(prefer),
            kappa: Vec::new(),
        }
    }

    /// The kernel over all rows of `cols`, row `i` having total order `order[i]`.
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

    /// Skyline points currently stored.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    pub fn is_empty(&self) -> bool {
        self.store.len() == 0
    }

    pub fn insert_row<C: AsRef<[f64]>>(&mut self, cols: &[C], row: usize, order: PackedOrderKey) {
        debug_assert_eq!(cols.len(), self.dims());
        let p = self.store.normalise(cols, row);
        if let Some(kappa) = self.scan(&p, 0) {
            self.store.push(&p, order);
            self.kappa.push(kappa);
        }
    }

    pub fn insert(&mut self, point: &[f64], order: PackedOrderKey) {
        debug_assert_eq!(point.len(), self.dims());
        let cols: Vec<[f64; 1]> = point.iter().map(|&v| [v]).collect();
        self.insert_row(&cols, 0, order);
    }

    /// Normalised point `p`, whose κ against points seen elsewhere is already `kappa`, against the stored
    /// points: raises their κ against `p`, drops those `p` dominates (κ = d), and returns `p`'s own κ unless it
    /// is dominated.
    fn scan(&mut self, p: &[f64], kappa: u32) -> Option<u32> {
        let d = self.dims() as u8;
        let mut own = kappa as u8;
        let mut cmp = BlockCmp::new();
        let mut dominated: SmallVec<[u32; 16]> = SmallVec::new();
        let mut i0 = 0;
        while i0 < self.store.len() {
            let n = self.store.compare_block(p, i0, &mut cmp);
            for j in 0..n {
                own = own.max(cmp.k_sp(j));
                let k = cmp.k_ps(j);
                if k == d {
                    dominated.push((i0 + j) as u32);
                } else {
                    let slot = &mut self.kappa[i0 + j];
                    *slot = (*slot).max(k as u32);
                }
            }
            i0 += n;
        }
        // Descending, so each slot refilled by `swap_remove` takes a point that stays.
        for &i in dominated.iter().rev() {
            self.store.swap_remove(i as usize);
            self.kappa.swap_remove(i as usize);
        }
        (own < d).then_some(own as u32)
    }

    /// H: folds another kernel (same preferences) into this one. An incoming point's κ is the max of its κ
    /// there and its κ against this container; the other's points are scanned against this
    /// side's points only and appended afterwards, so pairs within the other side are never compared again.
    pub fn merge(&mut self, other: &TopDominant) {
        debug_assert_eq!(self.prefer(), other.prefer());
        let survivors: Vec<(usize, u32)> = (0..other.store.len())
            .filter_map(|i| Some((i, self.scan(&other.store.point(i), other.kappa[i])?)))
            .collect();
        for (i, kappa) in survivors {
            self.store.push(&other.store.point(i), other.store.order[i]);
            self.kappa.push(kappa);
        }
    }

    /// Every skyline point as `(order, κ)`, ascending by order.
    pub fn skyline(&self) -> Vec<(PackedOrderKey, u32)> {
        let mut all: Vec<(PackedOrderKey, u32)> = self
            .store
            .order
            .iter()
            .copied()
            .zip(self.kappa.iter().copied())
            .collect();
        all.sort_unstable();
        all
    }

    /// The answer: the `delta` skyline points of lowest κ, ties by the total order, returned as `(order, κ)`
    /// ascending by order (the output order).
    pub fn select(&self, delta: usize) -> Vec<(PackedOrderKey, u32)> {
        select_lowest(self.skyline(), delta)
    }
}

/// Keeps the `delta` entries of lowest `(κ, order)` and returns them ascending by order.
fn select_lowest(mut all: Vec<(PackedOrderKey, u32)>, delta: usize) -> Vec<(PackedOrderKey, u32)> {
    all.sort_unstable_by_key(|&(o, k)| (k, o));
    all.truncate(delta);
    all.sort_unstable();
    all
}

/// Reference: κ of every point by definition over all pairs, then the lowest `delta` skyline points. Returns
/// `(order, κ)` ascending by order.
pub fn top_dominant_reference<C: AsRef<[f64]>>(
    prefer: &[Prefer],
    cols: &[C],
    order: &[PackedOrderKey],
    delta: usize,
) -> Vec<(PackedOrderKey, u32)> {
    let d = prefer.len();
    let kappa = |t: usize| {
        (0..order.len())
            .filter(|&s| s != t)
            .map(|s| {
                super::dominance::compare(prefer, |k| cols[k].as_ref()[s], |k| cols[k].as_ref()[t])
                    .k()
            })
            .max()
            .unwrap_or(0)
    };
    let sky: Vec<(PackedOrderKey, u32)> = (0..order.len())
        .map(|t| (t, kappa(t)))
        .filter(|&(_, k)| k < d)
        .map(|(t, k)| (order[t], k as u32))
        .collect();
    select_lowest(sky, delta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Prefer::Min;

    #[test]
    fn kappa_counts_all_dimensions() {
        // (0,5,1) 2-dominates (1,1,1) (dims 0 and 2, strictly in dim 0 only); the authors' bug, keeping the
        // last dimension's flag, would miss it. (1,1,1) 2-dominates (0,5,1) in dims 1 and 2.
        let cols = [vec![0.0, 1.0], vec![5.0, 1.0], vec![1.0, 1.0]];
        let t = TopDominant::build(vec![Min, Min, Min], &cols, &[0, 1]);
        assert_eq!(t.skyline(), vec![(0, 2), (1, 2)]);
        assert_eq!(t.select(1), vec![(0, 2)]);
    }

    #[test]
    fn ties_broken_by_order() {
        let cols = [vec![1.0, 1.0, 1.0]];
        let t = TopDominant::build(vec![Min], &cols, &[7, 3, 5]);
        assert_eq!(t.select(2), vec![(3, 0), (5, 0)]);
    }
}
