//! Admission of a batch's rows (DESIGN §3): null times, then the source's K-slack. Shared by every windowed
//! operator so that the same input gives the same admitted rows, late rows and errors whichever operator reads
//! it.

use arrow_buffer::NullBuffer;

use super::kslack::{Admission, KSlack, Lateness};
use crate::aggregate::{NullTime, OnLate};
use crate::error::{Error, ErrorKind, Result};

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
}

/// The outcome for one batch.
#[derive(Debug, Default)]
pub struct Admitted {
    /// `None`: every row admitted.
    pub keep: Option<Vec<bool>>,
    pub late: u64,
    pub null_time: u64,
    /// Smallest and largest admitted time.
    pub range: Option<(i64, i64)>,
}

/// Runs `ts` (with `nulls`) through `ks`. On error `ks` may have moved: callers work on a copy.
pub fn admit(
    ks: &mut KSlack,
    ts: &[i64],
    nulls: Option<&NullBuffer>,
    r: &Rules,
) -> Result<Admitted> {
    let n = ts.len();
    let mut a = Admitted::default();
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
            if ks.policy() == Lateness::Sorted {
                return Err(Error::new(
                    ErrorKind::LateRow,
                    format!(
                        "source {} is not sorted by time: row {} of {} has {} = {t} after {}; \
                         sources merged without lateness must be sorted (pass lateness=... to accept disorder)",
                        r.source,
                        r.first_row + i,
                        r.what,
                        r.time,
                        watermark
                    ),
                ));
            }
            if r.on_late == OnLate::Error {
                return Err(Error::new(
                    ErrorKind::LateRow,
                    format!(
                        "late row: row {} of {} has {} = {t}, below the watermark {watermark} \
                         (on_late=\"error\"; use on_late=\"drop\" to drop and count late rows)",
                        r.first_row + i,
                        r.what,
                        r.time
                    ),
                ));
            }
            a.late += 1;
            a.keep.get_or_insert_with(|| vec![true; n])[i] = false;
            continue;
        }
        lo = lo.min(t);
        hi = hi.max(t);
    }
    a.range = (lo <= hi).then_some((lo, hi));
    Ok(a)
}
