//! A column-wise point store with swap-to-end deletion (brief 004 §1.2 [code]): the container both the skyline
//! and the top-δ kernels keep their current points in.

use super::OrderKey;
use super::dominance::{Compare, Prefer, compare};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PointStore {
    pub(crate) prefer: Vec<Prefer>,
    /// One column per dimension, all of length `order.len()`.
    pub(crate) cols: Vec<Vec<f64>>,
    /// Each stored point's position in the total order.
    pub(crate) order: Vec<OrderKey>,
}

impl PointStore {
    pub(crate) fn new(prefer: Vec<Prefer>) -> Self {
        let cols = vec![Vec::new(); prefer.len()];
        Self {
            prefer,
            cols,
            order: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    pub(crate) fn dims(&self) -> usize {
        self.prefer.len()
    }

    /// Stored point `i` against an outside point given by accessor `p`.
    #[inline]
    pub(crate) fn stored_vs(&self, i: usize, p: &impl Fn(usize) -> f64) -> Compare {
        compare(&self.prefer, |k| self.cols[k][i], p)
    }

    /// An outside point given by accessor `p` against stored point `i`.
    #[inline]
    pub(crate) fn vs_stored(&self, p: &impl Fn(usize) -> f64, i: usize) -> Compare {
        compare(&self.prefer, p, |k| self.cols[k][i])
    }

    pub(crate) fn push(&mut self, p: &impl Fn(usize) -> f64, order: OrderKey) {
        for (k, col) in self.cols.iter_mut().enumerate() {
            col.push(p(k));
        }
        self.order.push(order);
    }

    /// Removes point `i` by moving the last point into its slot (O(d), order of the store is not meaningful).
    pub(crate) fn swap_remove(&mut self, i: usize) {
        for col in &mut self.cols {
            col.swap_remove(i);
        }
        self.order.swap_remove(i);
    }

    /// Accessor for stored point `i` (to feed it into another store).
    pub(crate) fn point(&self, i: usize) -> impl Fn(usize) -> f64 + '_ {
        move |k| self.cols[k][i]
    }
}

/// Accessor for row `row` of caller-supplied columns.
pub(crate) fn row_of<C: AsRef<[f64]>>(cols: &[C], row: usize) -> impl Fn(usize) -> f64 + '_ {
    move |k| cols[k].as_ref()[row]
}
