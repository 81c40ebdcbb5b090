//! Pareto dominance and k-dominance with a preference per dimension (the definitions of
//! Mencagli et al., *Parallel Continuous Preference Queries over Out-of-Order and Bursty Data Streams*).
//!
//! Values are compared with `<` and `<=`, so `-0.0` and `0.0` tie, and identical points never dominate each
//! other: duplicates are kept by every query built on this. NaN never reaches here (callers reject it).

use std::cmp::Ordering;

/// Which end of a dimension is better (serialized by its name, as `prefer=` takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prefer {
    Min,
    Max,
}

impl Prefer {
    pub const NAMES: [&str; 2] = ["min", "max"];

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "min" => Some(Self::Min),
            "max" => Some(Self::Max),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Min => "min",
            Self::Max => "max",
        }
    }

    /// How `a` ranks against `b` in this dimension: `Less` means `a` is strictly better.
    #[inline]
    pub fn rank(self, a: f64, b: f64) -> Ordering {
        let (x, y) = match self {
            Self::Min => (a, b),
            Self::Max => (b, a),
        };
        if x < y {
            Ordering::Less
        } else if x > y {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }
}

/// How one point `a` stands against another `b` over all dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compare {
    /// Dimensions where `a` is at least as good as `b`.
    pub at_least_as_good: usize,
    /// Whether `a` is strictly better than `b` in some dimension (accumulated over *all* dimensions: the
    /// authors' code kept only the last one).
    pub strictly_better: bool,
}

/// Compares point `a` with point `b`; `a(k)` and `b(k)` give dimension `k`. Taking accessors rather than rows
/// lets columnar stores compare in place without gathering a row first.
#[inline]
pub fn compare(prefer: &[Prefer], a: impl Fn(usize) -> f64, b: impl Fn(usize) -> f64) -> Compare {
    let mut c = Compare {
        at_least_as_good: 0,
        strictly_better: false,
    };
    for (k, p) in prefer.iter().enumerate() {
        match p.rank(a(k), b(k)) {
            Ordering::Less => {
                c.at_least_as_good += 1;
                c.strictly_better = true;
            }
            Ordering::Equal => c.at_least_as_good += 1,
            Ordering::Greater => {}
        }
    }
    c
}

impl Compare {
    /// `a ≺ b`: at least as good everywhere and strictly better somewhere.
    #[inline]
    pub fn dominates(self, dims: usize) -> bool {
        self.strictly_better && self.at_least_as_good == dims
    }

    /// The largest k for which `a` k-dominates `b`, or 0 if it does not k-dominate it for any k. Every
    /// strictly-better dimension is among the at-least-as-good ones, so that k is the whole count.
    #[inline]
    pub fn k(self) -> usize {
        if self.strictly_better {
            self.at_least_as_good
        } else {
            0
        }
    }
}

/// `a ≺ b` for two rows.
pub fn dominates(prefer: &[Prefer], a: &[f64], b: &[f64]) -> bool {
    compare(prefer, |k| a[k], |k| b[k]).dominates(prefer.len())
}

/// The largest k for which row `a` k-dominates row `b` (0 if none).
pub fn k_dominance(prefer: &[Prefer], a: &[f64], b: &[f64]) -> usize {
    compare(prefer, |k| a[k], |k| b[k]).k()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Prefer::{Max, Min};

    #[test]
    fn duplicates_do_not_dominate() {
        assert!(!dominates(&[Min, Max], &[1.0, 2.0], &[1.0, 2.0]));
        assert_eq!(k_dominance(&[Min, Max], &[1.0, 2.0], &[1.0, 2.0]), 0);
        assert!(!dominates(&[Min], &[-0.0], &[0.0]));
    }

    #[test]
    fn preference_flips_dimension() {
        assert!(dominates(&[Min, Min], &[1.0, 2.0], &[1.0, 3.0]));
        assert!(!dominates(&[Min, Max], &[1.0, 2.0], &[1.0, 3.0]));
        assert!(dominates(&[Min, Max], &[1.0, 3.0], &[1.0, 2.0]));
    }

    #[test]
    fn k_dominance_accumulates_strictness_over_all_dimensions() {
        // Strictly better only in the first dimension: the authors' bug would report 0 here.
        assert_eq!(
            k_dominance(&[Min, Min, Min], &[0.0, 5.0, 1.0], &[1.0, 1.0, 1.0]),
            2
        );
        assert_eq!(
            k_dominance(&[Min, Min, Min], &[0.0, 0.0, 0.0], &[1.0, 1.0, 1.0]),
            3
        );
        assert_eq!(k_dominance(&[Min, Min], &[2.0, 1.0], &[1.0, 1.0]), 0);
    }
}
