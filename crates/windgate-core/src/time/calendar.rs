//! Windows of local calendar days, weeks and months (`tz=`): the row's window coordinate is its wall time.
//!
//! A day in `Europe/Berlin` is 23, 24 or 25 hours long, so local days are no grid of instants; on wall time,
//! `local(t) = t + utc_offset(t)`, they are one again. So the operator cuts windows on wall time: every row's
//! time goes through [`Calendar::wall_time`] once, at the operator's front, and every engine (pane, shard,
//! farm, reference, update mode) works on that coordinate with the plain [`WindowSpec`] and pane model. What
//! comes out goes back to instants: a window's bounds through [`Calendar::instant_of`], the watermark that
//! closes windows through [`Calendar::local_watermark`] (wall time runs backwards at an autumn change, so a
//! window closes only once no row still to come can have a wall time inside it). Watermarks and K-slack stay
//! in instants: they order arrivals. Months are no grid on wall time either: their coordinate is the month's
//! index times 31 days plus the time since the month's local midnight ([`Calendar::coordinate`]), a grid of
//! months that the same spec cuts. `docs/time.md`, "Calendar windows in a time zone (`tz=`)", is the user's view.

use arrow_array::timezone::Tz;
use arrow_schema::{DataType, TimeUnit as ArrowUnit};
use chrono::{Datelike, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone};

use super::{Span, WindowSpec, floor_div};
use crate::error::{Error, Result};

const DAY_SECS: i64 = 86_400;
/// 1970-01-05, the first Monday after the epoch (a Thursday): whole-week windows start on Mondays, as
/// Polars' `"1w"` and DuckDB's `time_bucket` weeks do.
const MONDAY_SECS: i64 = 4 * DAY_SECS;
/// More than any UTC offset a zone ever had (the largest are local mean times of about 15 h 56 min): a
/// local time lies within this of its instant.
const MAX_OFFSET_SECS: i64 = 16 * 3600;
/// How far ahead [`Calendar::local_watermark`] looks for a backward jump of wall time: no later row can
/// have a wall time below `local(watermark)` once it is more than the largest drop of the offset (under
/// 2 * [`MAX_OFFSET_SECS`]) past the watermark.
const LOOKAHEAD_SECS: i64 = 2 * MAX_OFFSET_SECS;
/// How far back [`Calendar::localize`] looks for an autumn change whose repeated span a row may still be
/// in: more than any drop of a zone's offset since standard time (two hours, double summer time).
const FOLD_LOOKBACK_SECS: i64 = 3 * 3600;
/// Offsets are sampled this far apart when looking for changes (zones change at most twice a year; no
/// zone changes twice within an hour).
const PROBE_SECS: i64 = 3600;

/// A month on the coordinate of month windows: longer than any month, so that `month index * MONTH + time
/// since the month's local midnight` is a uniform grid of months (see [`Calendar::coordinate`]).
const MONTH_DAYS: i64 = 31;
/// Month windows take offsets within the shortest month.
const MONTH_OFFSET_DAYS: i64 = 28;

/// What [`Calendar::localize`] keeps per hour of UTC: the offset when it holds the whole hour, and the
/// latest autumn change at or before the hour's end (its instant, the wall time just before it).
type HourInfo = (Option<i64>, Option<(i64, i64)>);

/// A zone and the time column's unit: converts instants to wall time and back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Calendar {
    tz: Tz,
    /// Time-column units per second.
    per_sec: i64,
    /// Month windows: [`MONTH_DAYS`] in time-column units (the coordinate's month).
    month: Option<i64>,
}

/// `"1mo"`, `"3 months"`: a number of calendar months (`None` for any other length).
pub(crate) fn months(span: &Span) -> Option<i64> {
    let Span::Text(text) = span else {
        return None;
    };
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: i64 = num.parse().ok().filter(|&n| n > 0)?;
    matches!(
        unit.trim().to_ascii_lowercase().as_str(),
        "mo" | "month" | "months"
    )
    .then_some(n)
}

/// With `tz=`, `span` as the validation and window spec read it: a number of months as that many coordinate
/// months of [`MONTH_DAYS`] days (see [`bind`]), anything else as it is.
pub(crate) fn month_placeholder(span: &Span, tz: Option<&str>) -> Span {
    match months(span) {
        Some(n) if tz.is_some() => Span::Text(format!("{}d", n.saturating_mul(MONTH_DAYS))),
        _ => span.clone(),
    }
}

/// Checks `tz=` without the data: a zone arrow-rs reads (IANA names through `chrono-tz`, or `"+05:30"`).
pub(crate) fn check_zone(tz: &str) -> Result<Tz> {
    tz.parse::<Tz>().map_err(|_| {
        Error::param(
            "tz",
            format!(
                "unknown time zone {tz:?}: expected an IANA name such as \"Europe/Berlin\" or a fixed offset \
                 such as \"+05:30\""
            ),
        )
    })
}

/// The window grid and calendar of `tz=` on a time column of type `time_type` named `column`: `spec` as it
/// is and `None` without `tz` or for windows shorter than a day (they stay on the UTC grid, fixed-length);
/// for windows of whole days, the spec on wall time (whole weeks start on Mondays) and the calendar.
pub(crate) fn bind(
    tz: Option<&str>,
    time_type: &DataType,
    column: &str,
    spec: WindowSpec,
    month_spans: (bool, bool),
) -> Result<(WindowSpec, Option<Calendar>)> {
    let Some(name) = tz else {
        return Ok((spec, None));
    };
    let tz = check_zone(name)?;
    let unit = match time_type {
        DataType::Timestamp(unit, Some(_)) => *unit,
        DataType::Timestamp(unit, None) => {
            let t = crate::arrow_io::time_unit(time_type, column)?.type_name();
            let _ = unit;
            return Err(Error::param(
                "tz",
                format!(
                    "the time column '{column}' is a {t} without a zone: its values are wall times already, \
                     so \"1d\" windows start at its midnights without tz=; if they are UTC instants, give the \
                     column a zone (cast to timestamp with tz=\"UTC\") to cut them in {name}'s days"
                ),
            ));
        }
        other => {
            return Err(Error::param(
                "tz",
                format!(
                    "the time column '{column}' is {other}: tz= cuts windows of a timestamp column with a \
                     zone (timestamp[.., tz=...]) into local days"
                ),
            ));
        }
    };
    let per_sec = match unit {
        ArrowUnit::Second => 1,
        ArrowUnit::Millisecond => 1_000,
        ArrowUnit::Microsecond => 1_000_000,
        ArrowUnit::Nanosecond => 1_000_000_000,
    };
    let day = DAY_SECS * per_sec;
    let (size, slide) = (spec.size(), spec.slide());
    if month_spans.0 || month_spans.1 {
        return bind_months(tz, per_sec, spec, month_spans);
    }
    if size % day != 0 || slide % day != 0 {
        if size < day {
            return Ok((spec, None)); // shorter than a day: the UTC grid, fixed-length windows
        }
        let (param, value) = if size % day != 0 {
            ("size", size)
        } else {
            ("slide", slide)
        };
        let unit = crate::arrow_io::time_unit(time_type, column)?;
        return Err(Error::param(
            param,
            format!(
                "with tz=, windows follow local days when size and slide are whole days (\"1d\", \"1w\"), \
                 and windows shorter than a day keep the UTC grid; got {param} {}",
                super::format_duration(value, unit)
            ),
        ));
    }
    let monday = if slide % (7 * day) == 0 {
        MONDAY_SECS * per_sec
    } else {
        0
    };
    let spec = WindowSpec::new(size, Some(slide), spec.offset() + monday)?;
    let month = None;
    Ok((spec, Some(Calendar { tz, per_sec, month })))
}

/// [`bind`] for month windows: size and slide whole months (as placeholders of [`MONTH_DAYS`] days each),
/// the offset within the shortest month.
fn bind_months(
    tz: Tz,
    per_sec: i64,
    spec: WindowSpec,
    (size_months, slide_months): (bool, bool),
) -> Result<(WindowSpec, Option<Calendar>)> {
    if !(size_months && slide_months) {
        let param = if size_months { "slide" } else { "size" };
        return Err(Error::param(
            param,
            "month windows (\"1mo\") take a size and slide of whole months (\"1mo\", \"3mo\")",
        ));
    }
    let month = MONTH_DAYS * DAY_SECS * per_sec;
    if spec.offset() % month >= MONTH_OFFSET_DAYS * DAY_SECS * per_sec {
        return Err(Error::param(
            "offset",
            format!(
                "month windows take an offset of under {MONTH_OFFSET_DAYS} days into the month (\"1d\": \
                 months from the 2nd), and no negative one"
            ),
        ));
    }
    let calendar = Calendar {
        tz,
        per_sec,
        month: Some(month),
    };
    Ok((spec, Some(calendar)))
}

impl Calendar {
    /// The zone's offset from UTC at instant `ts`, in time-column units (instants beyond chrono's years take
    /// the offset of its last representable second).
    pub(crate) fn offset(&self, ts: i64) -> i64 {
        let secs = floor_div(ts, self.per_sec);
        let utc = match chrono::DateTime::from_timestamp(secs, 0) {
            Some(d) => d.naive_utc(),
            None if secs < 0 => NaiveDateTime::MIN,
            None => NaiveDateTime::MAX,
        };
        let off = self
            .tz
            .offset_from_utc_datetime(&utc)
            .fix()
            .local_minus_utc();
        i64::from(off) * self.per_sec
    }

    /// Wall time at instant `ts`: the instant plus the zone's offset there (saturating at the i64 limits,
    /// which `WindowSpec::check_range` then refuses).
    pub(crate) fn wall_time(&self, ts: i64) -> i64 {
        ts.saturating_add(self.offset(ts))
    }

    /// The window coordinate of wall time `wall`: wall time itself, or for month windows the month's index
    /// since 1970-01 times [`MONTH_DAYS`] plus the time since the month's local midnight (monotone in wall
    /// time, and a uniform grid of months).
    pub(crate) fn coordinate(&self, wall: i64) -> i64 {
        let Some(month) = self.month else {
            return wall;
        };
        let secs = floor_div(wall, self.per_sec);
        let Some(d) = chrono::DateTime::from_timestamp(secs, 0) else {
            return wall; // beyond chrono's years (refused by the range check)
        };
        let index = (i64::from(d.year()) - 1970) * 12 + i64::from(d.month0());
        let start = self.month_start(index);
        index.saturating_mul(month).saturating_add(wall - start)
    }

    /// Wall time at coordinate `c` (the inverse of [`Self::coordinate`]).
    pub(crate) fn wall_of(&self, c: i64) -> i64 {
        let Some(month) = self.month else {
            return c;
        };
        let index = floor_div(c, month);
        self.month_start(index).saturating_add(c - index * month)
    }

    /// Wall time of local midnight on the first of month `index` (months since 1970-01).
    fn month_start(&self, index: i64) -> i64 {
        let year = i32::try_from(1970 + floor_div(index, 12)).unwrap_or(i32::MAX);
        let first = NaiveDate::from_ymd_opt(year, index.rem_euclid(12) as u32 + 1, 1);
        let secs = first.map_or(if index < 0 { i64::MIN } else { i64::MAX }, |d| {
            d.and_hms_opt(0, 0, 0)
                .expect("midnight")
                .and_utc()
                .timestamp()
        });
        secs.saturating_mul(self.per_sec)
    }

    /// The instant a window bound (a coordinate) stands for.
    pub(crate) fn instant(&self, c: i64) -> i64 {
        self.instant_of(self.wall_of(c))
    }

    /// The coordinate below which no row still to come falls once the watermark is `watermark`.
    pub(crate) fn closing(&self, watermark: i64) -> i64 {
        self.coordinate(self.local_watermark(watermark))
    }

    /// Every value of `ts` as its window coordinate: [`Self::coordinate`] of its *monotone* wall time, the
    /// greatest wall time at or before the instant. That is the wall time itself except in the repeated span
    /// of an autumn change, whose second pass keeps the wall time reached just before the change: so the
    /// coordinate never runs backwards, rows order by it as their instants do (`first` and `last` follow
    /// the instants through the repeated hour), and a bound inside the repeated span is where its first
    /// occurrence is. The zone is looked up a few times per hour of UTC the rows touch, not once per row: an
    /// hour whose two ends have the same offset has it throughout (no zone changes twice within an hour),
    /// and rows come in runs of nearby times.
    pub(crate) fn localize(&self, ts: &[i64]) -> Vec<i64> {
        let hour = PROBE_SECS * self.per_sec;
        // Per UTC hour: its offset when uniform, and the autumn change it may be catching up on.
        let mut cached: Option<(i64, HourInfo)> = None;
        ts.iter()
            .map(|&t| {
                let h = floor_div(t, hour);
                let (uniform, fold) = match cached {
                    Some((c, info)) if c == h => info,
                    _ => {
                        let start = h.saturating_mul(hour);
                        let first = self.offset(start);
                        let off =
                            (self.offset(start.saturating_add(hour - 1)) == first).then_some(first);
                        let fold = self.last_fold(start, start.saturating_add(hour - 1));
                        cached = Some((h, (off, fold)));
                        (off, fold)
                    }
                };
                let mut wall = match uniform {
                    Some(off) => t.saturating_add(off),
                    None => self.wall_time(t),
                };
                if let Some((change, before)) = fold
                    && t >= change
                {
                    wall = wall.max(before);
                }
                self.coordinate(wall)
            })
            .collect()
    }

    /// The latest autumn change (the offset drops) in `(end - FOLD_LOOKBACK_SECS, end]` at or before
    /// `end`: `(the change's instant, the wall time just before it)`. Instants in `[.., end]` after the
    /// change whose wall time is below that are in the repeated span.
    fn last_fold(&self, start: i64, end: i64) -> Option<(i64, i64)> {
        let probe = PROBE_SECS * self.per_sec;
        let mut at = start.saturating_sub(FOLD_LOOKBACK_SECS * self.per_sec);
        let mut off = self.offset(at);
        let mut fold = None;
        while at < end {
            let next = at.saturating_add(probe).min(end);
            let next_off = self.offset(next);
            if next_off < off {
                let change = self.first_offset_change(at, next, off);
                let before = change - 1;
                fold = Some((change, before.saturating_add(self.offset(before))));
            }
            (at, off) = (next, next_off);
        }
        fold
    }

    /// The instant a window bound on wall time stands for: the instant whose wall time is `local`; the
    /// earlier of two at an autumn change; at a spring change, where `local` does not exist, the change
    /// itself (the first instant whose wall time is past `local`).
    pub(crate) fn instant_of(&self, local: i64) -> i64 {
        let secs = floor_div(local, self.per_sec);
        let sub = local - secs * self.per_sec;
        let Some(naive) = chrono::DateTime::from_timestamp(secs, 0).map(|d| d.naive_utc()) else {
            return local.saturating_sub(self.offset(local));
        };
        let at = |secs: i64| secs.saturating_mul(self.per_sec).saturating_add(sub);
        match self.tz.from_local_datetime(&naive) {
            LocalResult::Single(d) => at(d.timestamp()),
            LocalResult::Ambiguous(a, b) => at(a.timestamp().min(b.timestamp())),
            LocalResult::None => {
                let reach = MAX_OFFSET_SECS * self.per_sec;
                self.first_at_or_after(
                    local.saturating_sub(reach),
                    local.saturating_add(reach),
                    local,
                )
            }
        }
    }

    /// The first instant in `[lo, hi]` whose wall time is at least `local` (wall time rises there).
    fn first_at_or_after(&self, mut lo: i64, mut hi: i64, local: i64) -> i64 {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.wall_time(mid) >= local {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// The least wall time of any instant at or after `watermark`: every row still to come has a wall time
    /// at or above it, so windows ending there are final. It is `local(watermark)` unless the offset drops
    /// soon after (an autumn change), where wall time runs back.
    pub(crate) fn local_watermark(&self, watermark: i64) -> i64 {
        let probe = PROBE_SECS * self.per_sec;
        let mut least = self.wall_time(watermark);
        let (mut at, mut off) = (watermark, self.offset(watermark));
        for _ in 0..LOOKAHEAD_SECS / PROBE_SECS {
            let next = at.saturating_add(probe);
            let next_off = self.offset(next);
            if next_off < off {
                // Wall time runs back at the change: its least value is right after it.
                let change = self.first_offset_change(at, next, off);
                least = least.min(change.saturating_add(self.offset(change)));
            }
            if next == at {
                break;
            }
            (at, off) = (next, next_off);
        }
        least
    }

    /// The first instant in `(lo, hi]` whose offset is not `off` (one exists at `hi`).
    fn first_offset_change(&self, mut lo: i64, mut hi: i64, off: i64) -> i64 {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.offset(mid) == off {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }
}

#[cfg(test)]
mod tests;
