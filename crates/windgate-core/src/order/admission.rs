//! Admission of a batch's rows (`docs/architecture.md`, "Contracts": late rows): null times, then the source's K-slack. Shared by every windowed
//! operator so that the same input gives the same admitted rows, late rows and errors whichever operator reads
//! it.

use arrow_buffer::NullBuffer;

use super::kslack::{Admission, BoundedVerdicts, KSlack, Lateness};
use crate::error::{Error, ErrorKind, Result};
use crate::prefetch::min_max;
use crate::time::TimeFormat;

/// `on_late=`: what happens to a row below its source's watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum OnLate {
    /// Dropped and counted.
    Drop,
    /// The push fails (and changes nothing).
    Error,
    /// Dropped from the windows and counted, and handed to the caller as a side output (the row itself and
    /// the watermark it met), like Flink's late-data side output.
    Keep,
}

impl OnLate {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "drop" => Ok(OnLate::Drop),
            "error" => Ok(OnLate::Error),
            "keep" => Ok(OnLate::Keep),
            other => Err(Error::param(
                "on_late",
                format!("expected \"drop\", \"keep\" or \"error\", got {other:?}"),
            )),
        }
    }
}

/// Refuses `on_late="keep"` for an operator (`who`) that has no side output for late rows.
pub fn refuse_keep(on_late: OnLate, who: &str) -> Result<()> {
    if on_late == OnLate::Keep {
        return Err(Error::param(
            "on_late",
            format!(
                "on_late=\"keep\" (late rows as a side output) is supported by window aggregation; \
                 {who} take \"drop\" or \"error\""
            ),
        ));
    }
    Ok(())
}

/// `null_time=`: what happens to a row whose time is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NullTime {
    Error,
    Drop,
}

impl NullTime {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "error" => Ok(NullTime::Error),
            "drop" => Ok(NullTime::Drop),
            other => Err(Error::param(
                "null_time",
                format!("expected \"error\" or \"drop\", got {other:?}"),
            )),
        }
    }
}

/// Default credits of a streaming operator with several sources (or sides): the rows one may have pending
/// (admitted, not yet final because another holds the watermark back) before its pushes are refused with a
/// backpressure error. About a million rows, a few tens of MB of pending state: far above any skew between
/// live sources, well below an out-of-memory.
pub const DEFAULT_CREDITS: u64 = 1 << 20;

/// What the rules of one call are, and how to name things in errors.
pub struct Rules<'a> {
    pub time: &'a str,
    pub null_time: NullTime,
    pub on_late: OnLate,
    pub source: usize,
    /// "this batch" or "a batch of source 2".
    pub what: &'a str,
    /// Row number of the first row within the pushed batch (large batches are sliced).
    pub first_row: usize,
    /// How the time column's values read in errors (ISO 8601 for timestamps).
    pub format: TimeFormat,
    /// The rows' least and greatest time, when the caller read them already (rows without null times only):
    /// spares admission its own pass over the time column.
    pub range: Option<(i64, i64)>,
}

/// The outcome for one batch.
#[derive(Debug, Default)]
pub struct BatchAdmission {
    /// `None`: every row admitted.
    pub keep: Option<Vec<bool>>,
    pub late: u64,
    pub null_time: u64,
    /// Smallest and largest admitted time.
    pub range: Option<(i64, i64)>,
    /// Each late row's index in the slice and the watermark it met, in row order (for `on_late="keep"` and
    /// `allowed_lateness`).
    pub late_at: Vec<(u32, i64)>,
}

/// Runs `ts` (with `nulls`) through `ks`. On error `ks` may have moved: callers work on a copy.
pub fn admit(
    ks: &mut KSlack,
    ts: &[i64],
    nulls: Option<&NullBuffer>,
    r: &Rules,
) -> Result<BatchAdmission> {
    let n = ts.len();
    let mut a = BatchAdmission::default();
    if nulls.is_none_or(|nl| nl.null_count() == 0) {
        if let Some(range) = admit_all(ks, ts, r.range) {
            a.range = Some(range);
            return Ok(a);
        }
        if matches!(ks.policy(), Lateness::Fixed(_) | Lateness::Sorted) {
            return admit_bounded(ks, ts, r);
        }
    }
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for (i, &t) in ts.iter().enumerate() {
        if nulls.is_some_and(|nl| nl.is_null(i)) {
            if r.null_time == NullTime::Error {
                return Err(Error::new(
                    ErrorKind::NullValue,
                    format!(
                        "column '{}': null time at row {} of {}; pass null_time=\"drop\" to drop such rows",
                        r.time,
                        r.first_row + i,
                        r.what
                    ),
                ));
            }
            a.null_time += 1;
            a.keep.get_or_insert_with(|| vec![true; n])[i] = false;
            continue;
        }
        if let Admission::Late { watermark } = ks.observe(t) {
            refuse_late(ks.policy(), r, i, t, watermark)?;
            a.late += 1;
            a.keep.get_or_insert_with(|| vec![true; n])[i] = false;
            a.late_at.push((i as u32, watermark));
            continue;
        }
        lo = lo.min(t);
        hi = hi.max(t);
    }
    a.range = (lo <= hi).then_some((lo, hi));
    Ok(a)
}

/// [`admit`] of a null-free slice under a fixed bound or sorted sources that [`admit_all`] did not take (rows
/// out of order): one pass without a branch per row on the K-slack's steps (`KSlack::observe_bounded`).
fn admit_bounded(ks: &mut KSlack, ts: &[i64], r: &Rules) -> Result<BatchAdmission> {
    let mut keep = vec![true; ts.len()];
    let BoundedVerdicts { late_at, range } = ks.observe_bounded(ts, &mut keep, r.range);
    if let Some(&(i, watermark)) = late_at.first() {
        let i = i as usize;
        refuse_late(ks.policy(), r, i, ts[i], watermark)?;
    }
    Ok(BatchAdmission {
        keep: (!late_at.is_empty()).then_some(keep),
        late: late_at.len() as u64,
        null_time: 0,
        range,
        late_at,
    })
}

/// The error for row `i` (time `t`), below the watermark it met, when sorted sources or `on_late="error"`
/// refuse it.
fn refuse_late(policy: Lateness, r: &Rules, i: usize, t: i64, watermark: i64) -> Result<()> {
    if policy == Lateness::Sorted {
        return Err(Error::new(
            ErrorKind::LateRow,
            format!(
                "source {} is not sorted by time: row {} of {} has {} = {} after {}; \
                 sources merged without lateness must be sorted (pass lateness=... to accept disorder)",
                r.source,
                r.first_row + i,
                r.what,
                r.time,
                r.format.format(t),
                r.format.format(watermark)
            ),
        ));
    }
    if r.on_late == OnLate::Error {
        return Err(Error::new(
            ErrorKind::LateRow,
            format!(
                "late row: row {} of {} has {} = {}, below the watermark {} \
                 (on_late=\"error\"; use on_late=\"drop\" to drop and count late rows)",
                r.first_row + i,
                r.what,
                r.time,
                r.format.format(t),
                r.format.format(watermark)
            ),
        ));
    }
    Ok(())
}

/// The common cases where no row of a null-free slice can be late, decided in one vectorised pass instead of
/// a K-slack step per row: no bound at all, or a fixed bound (or sorted sources) with the slice in time order
/// and starting at or above the watermark. Returns the time range after moving `ks` exactly as the row-by-row
/// steps would; `None` (nothing moved) when the rows need those steps. `known` is the rows' time range if the
/// caller has it.
fn admit_all(ks: &mut KSlack, ts: &[i64], known: Option<(i64, i64)>) -> Option<(i64, i64)> {
    let (&first, &last) = (ts.first()?, ts.last()?);
    match ks.policy() {
        Lateness::Exact => {
            debug_assert!(
                known.is_none_or(|k| Some(k) == min_max(ts)),
                "a wrong time range"
            );
            let (lo, hi) = known.or_else(|| min_max(ts))?;
            ks.observe(hi);
            Some((lo, hi))
        }
        Lateness::Fixed(_) | Lateness::Sorted => {
            let sorted = ts.windows(2).all(|w| w[0] <= w[1]);
            if !sorted || ks.watermark().is_some_and(|wm| first < wm) {
                return None;
            }
            // In time order, each new maximum moves the watermark to itself minus K and no row falls below
            // it: only the last maximum's step leaves a trace.
            ks.observe(last);
            Some((first, last))
        }
        Lateness::Adaptive => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules() -> Rules<'static> {
        Rules {
            time: "ts",
            null_time: NullTime::Drop,
            on_late: OnLate::Drop,
            source: 0,
            what: "this batch",
            first_row: 0,
            format: TimeFormat::plain(),
            range: None,
        }
    }

    fn policy() -> impl Strategy<Value = Lateness> {
        prop_oneof![
            Just(Lateness::Exact),
            (0i64..5).prop_map(Lateness::Fixed),
            Just(Lateness::Sorted),
            Just(Lateness::Adaptive),
        ]
    }

    /// Times of every kind: a small range (ties, disorder, late rows) and the extremes.
    fn times() -> impl Strategy<Value = i64> {
        prop_oneof![
            8 => 0i64..40,
            1 => Just(i64::MIN),
            1 => Just(i64::MAX),
            1 => any::<i64>(),
        ]
    }

    /// A first row at the least time is a new maximum: the watermark moves to it (as `observe` moves it).
    #[test]
    fn a_bounded_slice_at_the_least_time_moves_the_watermark() {
        for policy in [Lateness::Fixed(2), Lateness::Sorted] {
            let (mut whole, mut single) = (KSlack::new(policy), KSlack::new(policy));
            let BoundedVerdicts { late_at, range } =
                whole.observe_bounded(&[i64::MIN; 2], &mut [false; 2], None);
            single.observe(i64::MIN);
            assert_eq!(whole.watermark(), Some(i64::MIN));
            assert_eq!(whole.watermark(), single.watermark());
            assert_eq!((late_at, range), (vec![], Some((i64::MIN, i64::MIN))));
            let late_at = whole
                .observe_bounded(&[5, 1], &mut [false; 2], None)
                .late_at;
            assert_eq!(late_at, vec![(1, 5 - whole.k())], "{policy:?}");
        }
    }

    proptest! {
        /// `observe_bounded` gives `observe`'s verdicts row by row (with the watermark each late row met),
        /// the admitted rows' range and the same state after, from any state: a K-slack that saw rows under
        /// any policy and was restored under a fixed bound or as sorted.
        #[test]
        fn bounded_slices_observe_as_single_rows(
            before in policy(),
            after in prop_oneof![(0i64..12).prop_map(Lateness::Fixed), Just(Lateness::Sorted)],
            seen in prop::collection::vec(times(), 0..8),
            ts in prop::collection::vec(times(), 0..300),
            jitter in prop::option::of(0i64..4),
        ) {
            // Rows in time order moved back by up to `jitter`, whole blocks of which are admitted at once.
            let ts: Vec<i64> = match jitter {
                Some(j) => (ts.iter().enumerate())
                    .map(|(i, t)| i as i64 / 16 - t.rem_euclid(j + 1))
                    .collect(),
                None => ts,
            };
            let mut ks = KSlack::new(before);
            for &t in &seen {
                ks.observe(t);
            }
            let mut whole = ks.clone().with_policy(after);
            let mut single = whole.clone();
            let mut keep = vec![false; ts.len()];
            let BoundedVerdicts { late_at, range } = whole.observe_bounded(&ts, &mut keep, None);
            let mut want_late = vec![];
            let mut want_keep = vec![];
            for (i, &t) in ts.iter().enumerate() {
                match single.observe(t) {
                    Admission::Late { watermark } => want_late.push((i as u32, watermark)),
                    Admission::Admit => {}
                }
                want_keep.push(want_late.last().is_none_or(|&(j, _)| j as usize != i));
            }
            let kept = ts.iter().zip(&want_keep).filter(|&(_, &k)| k).map(|(&t, _)| t);
            let want_range = kept.fold(None, |r: Option<(i64, i64)>, t| {
                Some(r.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))))
            });
            prop_assert_eq!(keep, want_keep);
            prop_assert_eq!(late_at, want_late);
            prop_assert_eq!(range, want_range);
            prop_assert_eq!(whole.watermark(), single.watermark());
            prop_assert_eq!(whole.max_ts(), single.max_ts());
            prop_assert_eq!(whole.k(), single.k());
        }

        /// Whole slices (the vectorised fast paths included) admit exactly what row-by-row admission admits
        /// and leave the K-slack in the same state.
        #[test]
        fn slices_admit_what_single_rows_admit(
            policy in policy(),
            ts in prop::collection::vec(0i64..40, 0..60),
            cut in 0usize..60,
            sorted in any::<bool>(),
        ) {
            let mut ts = ts;
            // Sorted sources reject disorder with an error (tested elsewhere); give them sorted rows.
            if sorted || policy == Lateness::Sorted {
                ts.sort();
            }
            let cut = cut.min(ts.len());
            let mut whole = KSlack::new(policy);
            let mut kept = vec![];
            for part in [&ts[..cut], &ts[cut..]] {
                let a = admit(&mut whole, part, None, &rules()).unwrap();
                kept.extend((0..part.len()).map(|i| a.keep.as_ref().is_none_or(|k| k[i])));
            }
            let mut single = KSlack::new(policy);
            let one: Vec<bool> = ts
                .iter()
                .map(|t| {
                    let a = admit(&mut single, std::slice::from_ref(t), None, &rules()).unwrap();
                    a.keep.is_none()
                })
                .collect();
            prop_assert_eq!(kept, one);
            prop_assert_eq!(whole.watermark(), single.watermark());
            prop_assert_eq!(whole.k(), single.k());
            prop_assert_eq!(whole.max_ts(), single.max_ts());
        }
    }
}
