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

    /// [`Self::observe`] for every row of `ts` under a fixed bound or sorted sources: the same verdicts and
    /// the same state after, with no branch on whether a row is a new maximum (in bounded disorder that is a
    /// coin toss a branch predictor loses). Sets `keep[i]` to whether row i is admitted and returns each late
    /// row's index and the watermark it met, in row order, and the admitted rows' least and greatest time
    /// (`known`, the rows' range if the caller read it already, when no row is late: no pass for it).
    pub(crate) fn observe_bounded(
        &mut self,
        ts: &[Timestamp],
        keep: &mut [bool],
        known: Option<(Timestamp, Timestamp)>,
    ) -> BoundedVerdicts {
        debug_assert!(matches!(self.policy, Lateness::Fixed(_) | Lateness::Sorted));
        let start = BoundedSteps {
            k: self.k,
            // `None`: minus infinity, which no row is below.
            wm: self.watermark.unwrap_or(Timestamp::MIN),
            t_max: self.t_max.unwrap_or(Timestamp::MIN),
            seen: self.t_max.is_some(),
            moved: false,
        };
        // The verdicts alone first, block by block: a block none of whose rows can be late (see
        // `BoundedSteps::admit_block`) takes one test, the others a step per row.
        let mut steps = start;
        let mut late = 0;
        for (block, kept) in ts.chunks(BOUNDED_BLOCK).zip(keep.chunks_mut(BOUNDED_BLOCK)) {
            if steps.admit_block(block) {
                kept.fill(true);
                continue;
            }
            for (&t, kept) in block.iter().zip(kept) {
                let is_late = steps.step(t);
                *kept = !is_late;
                late += usize::from(is_late);
            }
        }
        if steps.seen {
            self.t_max = Some(steps.t_max);
        }
        if steps.moved {
            self.watermark = Some(steps.wm);
        }
        if late == 0 {
            debug_assert!(
                known.is_none_or(|k| Some(k) == crate::prefetch::min_max(ts)),
                "a wrong time range"
            );
            return BoundedVerdicts {
                late_at: Vec::new(),
                range: known.or_else(|| crate::prefetch::min_max(ts)),
            };
        }
        // Some rows are late: the steps again, for the watermark each met and the others' range.
        let (mut steps, mut late_at) = (start, Vec::with_capacity(late));
        let (mut lo, mut hi) = (Timestamp::MAX, Timestamp::MIN);
        for (i, &t) in ts.iter().enumerate() {
            let wm = steps.wm;
            if steps.step(t) {
                late_at.push((i as u32, wm));
            } else {
                lo = lo.min(t);
                hi = hi.max(t);
            }
        }
        BoundedVerdicts {
            late_at,
            range: (lo <= hi).then_some((lo, hi)),
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

/// What [`KSlack::observe_bounded`] found besides each row's verdict.
pub(crate) struct BoundedVerdicts {
    /// Each late row's index and the watermark it met, in row order.
    pub(crate) late_at: Vec<(u32, Timestamp)>,
    /// The admitted rows' least and greatest time.
    pub(crate) range: Option<(Timestamp, Timestamp)>,
}

/// [`KSlack`]'s steps under a fixed bound (or sorted sources) as plain values, for loops that keep them in
/// registers (see [`KSlack::observe_bounded`]): the watermark, the greatest time, whether a row was seen
/// (the greatest time means nothing before) and whether the watermark moved.
#[derive(Debug, Clone, Copy)]
struct BoundedSteps {
    k: i64,
    wm: Timestamp,
    t_max: Timestamp,
    seen: bool,
    moved: bool,
}

/// Rows [`KSlack::observe_bounded`] tests at once.
const BOUNDED_BLOCK: usize = 64;

impl BoundedSteps {
    /// Takes every row of `block` at once when none can be late, and says so. Its rows meet the current
    /// watermark until the block's first new maximum, then at most its greatest time minus K: a block whose
    /// least time is at least both is admitted whole and leaves its greatest time and that watermark. Rows
    /// in disorder well within the bound pass this test; a step per row has a compare, a select and the next
    /// row's compare in one chain.
    #[inline]
    fn admit_block(&mut self, block: &[Timestamp]) -> bool {
        // Vectorised where the CPU has 64-bit compares (a plain fold compiles to a branch per row).
        let Some((lo, hi)) = crate::prefetch::min_max(block) else {
            return false;
        };
        let new_max = !self.seen | (hi > self.t_max);
        if lo < self.wm || (new_max && lo < hi.saturating_sub(self.k)) {
            return false;
        }
        if new_max {
            self.t_max = hi;
            self.wm = hi.saturating_sub(self.k);
            self.seen = true;
            self.moved = true;
        }
        true
    }

    /// One row of [`KSlack::observe`]: whether it is late (below `self.wm`, the watermark it met); if not,
    /// a new maximum moves the watermark to itself minus K. Selects rather than branches.
    #[inline(always)]
    fn step(&mut self, t: Timestamp) -> bool {
        let late = t < self.wm;
        let new_max = !late & (!self.seen | (t > self.t_max));
        self.seen |= !late;
        self.moved |= new_max;
        self.t_max = if new_max { t } else { self.t_max };
        self.wm = if new_max {
            t.saturating_sub(self.k)
        } else {
            self.wm
        };
        late
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
