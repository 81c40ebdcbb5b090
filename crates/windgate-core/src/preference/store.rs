//! A column-wise point store with swap-to-end deletion (as in the authors' code for Mencagli et al., *Parallel
//! Continuous Preference Queries over Out-of-Order and Bursty Data Streams*): the container both the skyline and
//! the top-δ kernels keep their current points in.
//!
//! Values are stored *normalised*: negated in dimensions where larger is better, so that smaller is better in
//! every dimension and the inner loops need no per-dimension branch. A point is compared against a block of
//! [`BLOCK`] stored points at a time, dimension by dimension over contiguous columns: straight-line `u8` lane
//! arithmetic the compiler vectorises (the pairwise scan is the whole cost of BNL).

use smallvec::SmallVec;

use super::PackedOrderKey;
use super::dominance::Prefer;

/// Stored points compared against one point per pass.
pub(crate) const BLOCK: usize = 64;

/// One point's normalised values.
pub(crate) type Point = SmallVec<[f64; 8]>;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PointStore {
    pub(crate) prefer: Vec<Prefer>,
    /// One column per dimension, all of length `order.len()`, normalised (smaller is better).
    pub(crate) cols: Vec<Vec<f64>>,
    /// Each stored point's position in the total order.
    pub(crate) order: Vec<PackedOrderKey>,
}

/// How stored points `i0 + j` stand against a point `p`, lane by lane.
pub(crate) struct BlockCmp {
    /// Dimensions where the stored point is at least as good as `p`.
    pub(crate) s_le: [u8; BLOCK],
    /// 1 if the stored point is strictly better than `p` somewhere.
    pub(crate) s_lt: [u8; BLOCK],
    /// Dimensions where `p` is at least as good as the stored point.
    pub(crate) p_le: [u8; BLOCK],
    /// 1 if `p` is strictly better than the stored point somewhere.
    pub(crate) p_lt: [u8; BLOCK],
}

impl BlockCmp {
    pub(crate) fn new() -> Self {
        Self {
            s_le: [0; BLOCK],
            s_lt: [0; BLOCK],
            p_le: [0; BLOCK],
            p_lt: [0; BLOCK],
        }
    }

    /// The largest k for which stored point `j` k-dominates `p` (0 if none); `d` means it dominates `p`.
    #[inline]
    pub(crate) fn k_sp(&self, j: usize) -> u8 {
        if self.s_lt[j] != 0 { self.s_le[j] } else { 0 }
    }

    /// The largest k for which `p` k-dominates stored point `j`.
    #[inline]
    pub(crate) fn k_ps(&self, j: usize) -> u8 {
        if self.p_lt[j] != 0 { self.p_le[j] } else { 0 }
    }
}

impl PointStore {
    pub(crate) fn new(prefer: Vec<Prefer>) -> Self {
        assert!(prefer.len() < 256, "at most 255 dimensions");
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

    /// Row `row` of caller columns (in the caller's orientation) as a normalised point.
    pub(crate) fn normalise<C: AsRef<[f64]>>(&self, cols: &[C], row: usize) -> Point {
        self.prefer
            .iter()
            .zip(cols)
            .map(|(p, c)| orient(*p, c.as_ref()[row]))
            .collect()
    }

    /// Stored point `i`, normalised (to feed it into another store with the same preferences).
    pub(crate) fn point(&self, i: usize) -> Point {
        self.cols.iter().map(|c| c[i]).collect()
    }

    /// Stored point `i` in the caller's orientation.
    pub(crate) fn values(&self, i: usize) -> Vec<f64> {
        self.prefer
            .iter()
            .zip(&self.cols)
            .map(|(p, c)| orient(*p, c[i]))
            .collect()
    }

    /// Compares `p` with the stored points from `i0` on, at most [`BLOCK`] of them; returns how many.
    #[inline]
    pub(crate) fn compare_block(&self, p: &[f64], i0: usize, c: &mut BlockCmp) -> usize {
        let n = BLOCK.min(self.len() - i0);
        let (s_le, s_lt) = (&mut c.s_le[..n], &mut c.s_lt[..n]);
        let (p_le, p_lt) = (&mut c.p_le[..n], &mut c.p_lt[..n]);
        s_le.fill(0);
        s_lt.fill(0);
        p_le.fill(0);
        p_lt.fill(0);
        for (col, &v) in self.cols.iter().zip(p) {
            let col = &col[i0..i0 + n];
            for j in 0..n {
                let s = col[j];
                s_le[j] += (s <= v) as u8;
                s_lt[j] |= (s < v) as u8;
                p_le[j] += (v <= s) as u8;
                p_lt[j] |= (v < s) as u8;
            }
        }
        n
    }

    /// Whether one of the first `m` stored points dominates `p`, with an early exit: most points of a
    /// skyline-sized window are dominated, usually by an early stored point, and this answers them without a
    /// block pass.
    #[inline]
    pub(crate) fn dominated_among_first(&self, p: &[f64], m: usize) -> bool {
        (0..m.min(self.len())).any(|i| {
            let (mut le, mut lt) = (true, false);
            for (col, &v) in self.cols.iter().zip(p) {
                let s = col[i];
                le &= s <= v;
                lt |= s < v;
            }
            le && lt
        })
    }

    pub(crate) fn push(&mut self, p: &[f64], order: PackedOrderKey) {
        for (col, &v) in self.cols.iter_mut().zip(p) {
            col.push(v);
        }
        self.order.push(order);
    }

    /// Removes point `i` by moving the last point into its slot (O(d); the store's order is not meaningful).
    pub(crate) fn swap_remove(&mut self, i: usize) {
        for col in &mut self.cols {
            col.swap_remove(i);
        }
        self.order.swap_remove(i);
    }
}

/// `v` turned so that smaller is better (and back: the map is its own inverse).
#[inline]
fn orient(p: Prefer, v: f64) -> f64 {
    match p {
        Prefer::Min => v,
        Prefer::Max => -v,
    }
}
