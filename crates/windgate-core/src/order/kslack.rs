//! Watermarks and late rows (`docs/architecture.md`, "Contracts": late rows).
//!
//! A [`KSlack`] sees one source's timestamps in arrival order and decides, row by row, whether a row is
//! admitted or late. Its decisions depend only on the sequence of timestamps, never on timing or batch
//! boundaries: that is what makes late-row dropping deterministic.

use crate::error::{Error, Result};
use crate::time::{Span, TimeUnit, Timestamp};

/// `lateness=` as the user gives it: `None`, a bound, or `"adaptive"`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LatenessOpt {
    Exact,
    Bound(Span),
    Adaptive,
}

impl LatenessOpt {
    /// The policy of one source once the time unit is known (an operator that merges sorted sources maps
    /// `Exact` to [`Lateness::Sorted`] itself).
    pub fn policy(&self, unit: TimeUnit, column: &str) -> Result<Lateness> {
        Ok(match self {
            LatenessOpt::Exact => Lateness::Exact,
            LatenessOpt::Adaptive => Lateness::Adaptive,
            LatenessOpt::Bound(k) => Lateness::fixed(k.resolve(unit, column, "lateness")?)?,
        })
    }
}

/// How much disorder a source may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Lateness {
    /// `lateness=None`: exact over every row whatever its order; no window closes before the end.
    Exact,
    /// A fixed bound `K`: watermark `= max ts seen - K`; a row below the watermark is late.
    Fixed(i64),
    /// The adaptive K-slack of Mencagli, Torquati, Danelutto, De Matteis, *Parallel Continuous Preference Queries
    /// over Out-of-Order and Bursty Data Streams*: `K` grows to the largest lateness seen so far.
    Adaptive,
    /// Sources merged by a gate without a lateness bound (several sources, `lateness=None`): each source must
    /// be sorted by time; the watermark is its latest ts, and a row below it is an error, never a drop.
    Sorted,
}

impl Lateness {
    pub fn fixed(k: i64) -> Result<Self> {
        if k < 0 {
            return Err(Error::param(
                "lateness",
                format!("expected a non-negative bound, got {k}"),
            ));
        }
        Ok(Lateness::Fixed(k))
    }
}

/// What [`KSlack::observe`] decided for one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// The row is below the watermark it met on arrival.
    Late {
        watermark: Timestamp,
    },
}

/// One source's watermark state.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KSlack {
    policy: Lateness,
    /// Largest ts seen so far (`None` before the first row).
    t_max: Option<Timestamp>,
    /// Current slack `K` (fixed, or grown by the adaptive rule).
    k: i64,
    /// Adaptive rule: the smallest ts seen since `t_max` last grew (the paper's `buf`, reduced to its minimum,
    /// which is all the rule reads).
    buf_min: Option<Timestamp>,
    /// The watermark `last_P`: rows below it are late. Only moves forward.
    watermark: Option<Timestamp>,
}

impl KSlack {
    pub fn new(policy: Lateness) -> Self {
        let k = match policy {
            Lateness::Fixed(k) => k,
            _ => 0,
        };
        Self {
            policy,
            t_max: None,
            k,
            buf_min: None,
            watermark: None,
        }
    }

    pub fn policy(&self) -> Lateness {
        self.policy
    }

    /// The same state under `policy`: a restored operator keeps a source's watermark and slack but takes the
    /// policy its own strategy implies (a multiway strategy reads `lateness=None` as sorted sources).
    pub fn with_policy(mut self, policy: Lateness) -> Self {
        self.policy = policy;
        self
    }

    /// The watermark: every row still to come with `ts` below it is late. `None` means minus infinity.
    pub fn watermark(&self) -> Option<Timestamp> {
        self.watermark
    }

    /// The current slack K.
    pub fn k(&self) -> i64 {
        self.k
    }

    pub fn max_ts(&self) -> Option<Timestamp> {
        self.t_max
    }

    /// Decides one row. The paper's order of steps is kept: the adaptive rule feeds even rows it then drops
    /// into K, and the late test runs after the watermark update (a new maximum is never late).
    #[inline]
    pub fn observe(&mut self, ts: Timestamp) -> Admission {
        match self.policy {
            Lateness::Exact => {
                self.t_max = Some(self.t_max.map_or(ts, |m| m.max(ts)));
                Admission::Admit
            }
            Lateness::Fixed(_) | Lateness::Sorted => {
                if let Some(wm) = self.watermark
                    && ts < wm
                {
                    return Admission::Late { watermark: wm };
                }
                if self.t_max.is_none_or(|m| ts > m) {
                    self.t_max = Some(ts);
                    self.watermark = Some(ts.saturating_sub(self.k));
                }
                Admission::Admit
            }
            Lateness::Adaptive => self.observe_adaptive(ts),
        }
    }

    fn observe_adaptive(&mut self, ts: Timestamp) -> Admission {
        self.buf_min = Some(self.buf_min.map_or(ts, |m| m.min(ts)));
        if self.t_max.is_none_or(|m| ts > m) {
            self.t_max = Some(ts);
            // The lateness of everything seen since the last maximum, measured against the new one.
            let gap = ts.saturating_sub(self.buf_min.unwrap_or(ts));
            self.k = self.k.max(gap);
            self.buf_min = None;
            let p = ts.saturating_sub(self.k);
            self.watermark = Some(self.watermark.map_or(p, |w| w.max(p)));
        }
        match self.watermark {
            Some(wm) if ts < wm => Admission::Late { watermark: wm },
            _ => Admission::Admit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The worked trace of Mencagli et al.'s K-slack (adaptive lateness bound, see
    /// `docs/architecture.md#late-rows`): arrivals 10, 12, 11, 15, 9, 14, 20.
    #[test]
    fn adaptive_worked_trace() {
        let mut ks = KSlack::new(Lateness::Adaptive);
        let mut seen = vec![];
        for ts in [10, 12, 11, 15, 9, 14, 20] {
            let a = ks.observe(ts);
            seen.push((ts, a == Admission::Admit, ks.k(), ks.watermark().unwrap()));
        }
        assert_eq!(
            seen,
            vec![
                (10, true, 0, 10),
                (12, true, 0, 12),
                (11, false, 0, 12), // dropped: K was still 0
                (15, true, 4, 12),  // K = 4, P = 11 < last_P: nothing emitted
                (9, false, 4, 12),  // dropped
                (14, true, 4, 12),  // kept
                (20, true, 11, 12), // K = 11, P = 9: nothing emitted
            ]
        );
    }

    #[test]
    fn fixed_bound() {
        let mut ks = KSlack::new(Lateness::fixed(3).unwrap());
        assert_eq!(ks.observe(10), Admission::Admit);
        assert_eq!(ks.observe(7), Admission::Admit); // 7 >= 10 - 3
        assert_eq!(ks.observe(6), Admission::Late { watermark: 7 });
        assert_eq!(ks.observe(20), Admission::Admit);
        assert_eq!(ks.watermark(), Some(17));
        assert!(
            Lateness::fixed(-1)
                .unwrap_err()
                .message()
                .starts_with("lateness:")
        );
    }

    #[test]
    fn exact_never_drops() {
        let mut ks = KSlack::new(Lateness::Exact);
        for ts in [5, -100, 1000, 0] {
            assert_eq!(ks.observe(ts), Admission::Admit);
        }
        assert_eq!(ks.watermark(), None);
    }

    proptest! {
        /// Watermarks only move forward, and no admitted row is ever below a watermark published before it
        /// (the adaptive K-slack's invariant).
        #[test]
        fn watermark_monotone_and_admitted_rows_above_it(
            ts in proptest::collection::vec(-50i64..50, 0..200), k in 0i64..10, adaptive: bool,
        ) {
            let mut ks = KSlack::new(if adaptive { Lateness::Adaptive } else { Lateness::Fixed(k) });
            let mut prev = None;
            for &t in &ts {
                let before = ks.watermark();
                let a = ks.observe(t);
                if a == Admission::Admit {
                    prop_assert!(before.is_none_or(|w| t >= w));
                }
                prop_assert!(prev <= ks.watermark());
                prev = ks.watermark();
            }
        }
    }
}
