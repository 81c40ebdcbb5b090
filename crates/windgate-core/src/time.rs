//! Time, windows and panes.
//!
//! Windows are aligned like Spark's `window()`: window `j` covers `[j*slide + offset, j*slide + offset + size)`
//! for every integer `j`, so timestamps may be negative (floor division throughout). Panes are the disjoint
//! slices of length `L = gcd(size, slide)` on the same grid: a window is `size / L` consecutive panes, and
//! consecutive windows start `slide / L` panes apart (0-based ids; the pane model of Mencagli, Torquati,
//! Danelutto, De Matteis, *Parallel Continuous Preference Queries over Out-of-Order and Bursty Data Streams*;
//! see `docs/architecture.md`, "Contracts").
//!
//! [`Span`] is a length of time as the user gives it (units or a duration string), resolved here once the time
//! column's unit is known, so that every operator reads lengths of time the same way.

pub(crate) mod calendar;

use arrow_array::timezone::Tz;
use arrow_schema::DataType;

use crate::error::{Error, ErrorKind, Result};

/// A point in time in the time column's own unit (seconds, ms, us, ns, days, or a plain integer).
pub type Timestamp = i64;

/// Floor division by a positive divisor, correct for negative numerators (Rust's `/` truncates towards zero).
#[inline]
pub fn floor_div(a: i64, b: i64) -> i64 {
    debug_assert!(b > 0);
    a.div_euclid(b)
}

pub fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.abs()
}

/// The pane of consecutive timestamps, remembering the last pane's time range so that in-order input stays in
/// it without a division per row.
#[derive(Debug, Clone, Copy)]
pub struct PaneCursor {
    spec: WindowSpec,
    /// `(id, start, end)` of the last pane.
    cur: Option<(i64, Timestamp, Timestamp)>,
}

impl PaneCursor {
    pub fn new(spec: WindowSpec) -> Self {
        Self { spec, cur: None }
    }

    /// The pane of `ts`, and whether it differs from the previous call's.
    #[inline]
    pub fn pane(&mut self, ts: Timestamp) -> (i64, bool) {
        if let Some((id, start, end)) = self.cur
            && ts >= start
            && ts < end
        {
            return (id, false);
        }
        let id = self.spec.pane_of(ts);
        let (start, end) = self.spec.pane_bounds(id);
        self.cur = Some((id, start, end));
        (id, true)
    }
}

/// Each admitted row's pane (rows with `keep[i] == false` get pane 0 and are not counted) and the largest
/// pane among them: the pane engines' routing step.
pub fn assign_panes(
    spec: WindowSpec,
    ts: &[Timestamp],
    keep: Option<&[bool]>,
) -> (Vec<i64>, Option<i64>) {
    let mut panes = vec![0i64; ts.len()];
    let mut max: Option<i64> = None;
    let mut cursor = PaneCursor::new(spec);
    for (i, &t) in ts.iter().enumerate() {
        if keep.is_some_and(|k| !k[i]) {
            continue;
        }
        let (id, changed) = cursor.pane(t);
        if changed {
            max = Some(max.map_or(id, |m| m.max(id)));
        }
        panes[i] = id;
    }
    (panes, max)
}

/// Most windows one row may fall in (`ceil(size / slide)`). Each row is part of the output of every window
/// it falls in, so this bounds the output (and the work) per input row: a million windows per row is far
/// beyond any dashboard's needs, while `size=2**40, slide=1` would never finish.
pub const MAX_WINDOWS_PER_ROW: i64 = 1 << 20;

/// A validated sliding-window specification with its pane grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    size: i64,
    slide: i64,
    /// Reduced to `[0, slide)`: the same set of windows as the offset the user gave.
    offset: i64,
    pane: i64,
    panes_per_window: i64,
    panes_per_slide: i64,
}

impl WindowSpec {
    /// `slide = None` means tumbling windows (`slide == size`).
    ///
    /// ```
    /// use windgate_core::time::WindowSpec;
    /// let w = WindowSpec::new(60, Some(10), 0).unwrap();
    /// assert_eq!(w.pane(), 10);
    /// assert_eq!(w.windows_of_ts(65), (1, 6)); // windows starting at 10, 20, ..., 60
    /// assert!(WindowSpec::new(10, Some(20), 0).is_err()); // slide > size
    /// ```
    pub fn new(size: i64, slide: Option<i64>, offset: i64) -> Result<Self> {
        if size <= 0 {
            return Err(Error::param(
                "size",
                format!("expected a positive window size, got {size}"),
            ));
        }
        let slide = slide.unwrap_or(size);
        if slide <= 0 {
            return Err(Error::param(
                "slide",
                format!("expected a positive slide, got {slide}"),
            ));
        }
        if slide > size {
            return Err(Error::param(
                "slide",
                format!(
                    "slide ({slide}) must not exceed size ({size}): rows between windows would be lost"
                ),
            ));
        }
        // ceil(size / slide) without overflow (both are positive).
        let windows_per_row = size / slide + i64::from(size % slide != 0);
        if windows_per_row > MAX_WINDOWS_PER_ROW {
            return Err(Error::param(
                "slide",
                format!(
                    "size / slide = {windows_per_row} windows per row; at most {MAX_WINDOWS_PER_ROW} \
                     (every row is output in each of its windows): use a larger slide"
                ),
            ));
        }
        let pane = gcd(size, slide);
        Ok(Self {
            size,
            slide,
            offset: offset.rem_euclid(slide),
            pane,
            panes_per_window: size / pane,
            panes_per_slide: slide / pane,
        })
    }

    pub fn size(&self) -> i64 {
        self.size
    }
    pub fn slide(&self) -> i64 {
        self.slide
    }
    pub fn offset(&self) -> i64 {
        self.offset
    }
    /// Pane length `L = gcd(size, slide)`.
    pub fn pane(&self) -> i64 {
        self.pane
    }
    /// The most windows a row is in, `ceil(size / slide)`.
    pub fn windows_per_row(&self) -> i64 {
        self.size / self.slide + i64::from(self.size % self.slide != 0)
    }
    pub fn panes_per_window(&self) -> i64 {
        self.panes_per_window
    }
    pub fn panes_per_slide(&self) -> i64 {
        self.panes_per_slide
    }

    /// The pane holding `ts`. Callers check the range first with [`WindowSpec::check_range`].
    #[inline]
    pub fn pane_of(&self, ts: Timestamp) -> i64 {
        floor_div(ts - self.offset, self.pane)
    }

    /// The times `[start, end)` of pane `pane`.
    #[inline]
    pub fn pane_bounds(&self, pane: i64) -> (Timestamp, Timestamp) {
        let start = self.offset() + pane * self.pane();
        (start, start + self.pane())
    }

    /// First pane of window `j`.
    #[inline]
    pub fn first_pane(&self, window: i64) -> i64 {
        window.saturating_mul(self.panes_per_slide)
    }

    /// Inclusive range of the windows that contain pane `p` (equation 6 of Mencagli et al., *Parallel
    /// Continuous Preference Queries over Out-of-Order and Bursty Data Streams*, 0-based).
    #[inline]
    pub fn windows_of_pane(&self, pane: i64) -> (i64, i64) {
        let lo = floor_div(pane - self.panes_per_window, self.panes_per_slide) + 1;
        (lo, floor_div(pane, self.panes_per_slide))
    }

    /// Inclusive range of the windows that contain `ts`.
    pub fn windows_of_ts(&self, ts: Timestamp) -> (i64, i64) {
        self.windows_of_pane(self.pane_of(ts))
    }

    pub fn window_start(&self, window: i64) -> Timestamp {
        window * self.slide + self.offset
    }

    /// Start of pane `p`.
    pub fn pane_start(&self, pane: i64) -> Timestamp {
        pane * self.pane + self.offset
    }

    pub fn window_end(&self, window: i64) -> Timestamp {
        self.window_start(window) + self.size
    }

    /// The last window whose end is at or below `watermark`: every row that can still arrive has
    /// `ts >= watermark`, so such a window is final.
    pub fn last_closed_window(&self, watermark: Timestamp) -> i64 {
        // end(j) = j*slide + offset + size <= wm  <=>  j <= (wm - offset - size) / slide
        floor_div_i128(
            watermark as i128 - self.offset as i128 - self.size as i128,
            self.slide as i128,
        )
    }

    /// The last pane whose end is at or below `watermark` (final: no row still to come can fall in it).
    pub fn last_closed_pane(&self, watermark: Timestamp) -> i64 {
        // end(p) = (p + 1)*pane + offset <= wm  <=>  p <= (wm - offset) / pane - 1
        floor_div_i128(watermark as i128 - self.offset as i128, self.pane as i128) - 1
    }

    /// `end(window)` computed in i128 and saturated into i64, for callers that have no
    /// [`WindowSpec::check_range`] to lean on: a window whose real end lies past `i64::MAX` ends at `i64::MAX`
    /// (W-Hive then releases it only once every updater closed, which is right, since no timestamp reaches its
    /// end).
    pub fn window_end_saturating(&self, window: i64) -> Timestamp {
        let end = window as i128 * self.slide as i128 + self.offset as i128 + self.size as i128;
        end.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// The windows containing `ts` (`lo..=hi`, as [`WindowSpec::windows_of_ts`]) and the first timestamp after
    /// `ts` at which that set changes (`ts` reaches `end(lo)` or `start(hi + 1)`), so that a caller walking
    /// non-decreasing timestamps recomputes only then. Computed in i128 and clamped, for any `ts` without a
    /// [`WindowSpec::check_range`]: near the i64 limits it only leaves out windows that i64 ids cannot name,
    /// and never names a window that does not contain `ts` (W-Hive's release rule depends on that).
    pub fn windows_of_ts_until_change(&self, ts: Timestamp) -> (i64, i64, Timestamp) {
        let (size, slide, offset) = (self.size as i128, self.slide as i128, self.offset as i128);
        let t = ts as i128;
        // lo: the smallest j with end(j) = j*slide + offset + size > ts; hi: the largest j with start(j) <= ts.
        let lo = (t - offset - size).div_euclid(slide) + 1;
        let hi = (t - offset).div_euclid(slide);
        let change =
            ((lo * slide + offset + size).min((hi + 1) * slide + offset)).min(i64::MAX as i128);
        let clamp = |v: i128| v.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        (clamp(lo), clamp(hi), change as i64)
    }

    /// Checks that every window touching `[min_ts, max_ts]` has a start and an end inside i64, so the
    /// unchecked arithmetic of the hot path cannot overflow. `column` names the time column in the error, where
    /// `format` writes its values.
    pub fn check_range(
        &self,
        min_ts: Timestamp,
        max_ts: Timestamp,
        column: &str,
        format: &TimeFormat,
    ) -> Result<()> {
        let (size, slide, offset) = (self.size as i128, self.slide as i128, self.offset as i128);
        let lo_start = (min_ts as i128 - offset).div_euclid(slide) * slide - size + offset;
        let hi_end = (max_ts as i128 - offset).div_euclid(slide) * slide + offset + size;
        if lo_start < i64::MIN as i128 || hi_end > i64::MAX as i128 {
            let bad = if lo_start < i64::MIN as i128 {
                min_ts
            } else {
                max_ts
            };
            return Err(Error::new(
                ErrorKind::Overflow,
                format!(
                    "column '{column}': timestamp {} is too close to the i64 limits: its windows \
                     (size {}, slide {}) would overflow",
                    format.format(bad),
                    format_duration(self.size, format.unit()),
                    format_duration(self.slide, format.unit())
                ),
            ));
        }
        Ok(())
    }
}

fn floor_div_i128(a: i128, b: i128) -> i64 {
    let q = a.div_euclid(b);
    q.clamp(i64::MIN as i128 / 2, i64::MAX as i128 / 2) as i64
}

/// The unit of a time column, which gives duration strings their meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Second,
    Millisecond,
    Microsecond,
    Nanosecond,
    Day,
    /// A plain integer column: durations must be integers.
    Plain,
}

impl TimeUnit {
    fn nanos(self) -> Option<i128> {
        Some(match self {
            TimeUnit::Second => 1_000_000_000,
            TimeUnit::Millisecond => 1_000_000,
            TimeUnit::Microsecond => 1_000,
            TimeUnit::Nanosecond => 1,
            TimeUnit::Day => 86_400_000_000_000,
            TimeUnit::Plain => return None,
        })
    }

    /// The column type as users see it in errors: `timestamp[ns]`, `date32`, ...
    pub fn type_name(self) -> &'static str {
        match self {
            TimeUnit::Second => "timestamp[s]",
            TimeUnit::Millisecond => "timestamp[ms]",
            TimeUnit::Microsecond => "timestamp[us]",
            TimeUnit::Nanosecond => "timestamp[ns]",
            TimeUnit::Day => "date32",
            TimeUnit::Plain => "integer",
        }
    }

    /// The unit's short name after a number: `ns`, `us`, `ms`, `s`, `days`.
    pub fn short(self) -> &'static str {
        match self {
            TimeUnit::Second => "s",
            TimeUnit::Millisecond => "ms",
            TimeUnit::Microsecond => "us",
            TimeUnit::Nanosecond => "ns",
            TimeUnit::Day => "days",
            TimeUnit::Plain => "",
        }
    }

    fn name(self) -> &'static str {
        match self {
            TimeUnit::Second => "seconds",
            TimeUnit::Millisecond => "milliseconds",
            TimeUnit::Microsecond => "microseconds",
            TimeUnit::Nanosecond => "nanoseconds",
            TimeUnit::Day => "days",
            TimeUnit::Plain => "plain integers",
        }
    }
}

/// Parses a duration string such as `"250ms"`, `"10s"`, `"5 minutes"`, `"1h 30m"`, `"1.5s"` or `"-1h"` (a
/// leading sign is read here; whether a negative length is allowed is the caller's decision, see
/// [`Span::resolve`]) into the time column's unit. The result must be a whole number of units; `param` names
/// the parameter in errors.
///
/// ```
/// use windgate_core::time::{parse_duration, TimeUnit};
/// assert_eq!(parse_duration("5 minutes", TimeUnit::Millisecond, "size").unwrap(), 300_000);
/// assert_eq!(parse_duration("1h30m", TimeUnit::Second, "size").unwrap(), 5_400);
/// assert_eq!(parse_duration("-1h", TimeUnit::Second, "offset").unwrap(), -3_600);
/// assert!(parse_duration("10s", TimeUnit::Plain, "size").is_err());
/// ```
pub fn parse_duration(text: &str, unit: TimeUnit, param: &str) -> Result<i64> {
    let Some(unit_ns) = unit.nanos() else {
        return Err(Error::param(
            param,
            format!(
                "a duration string ({text:?}) needs a timestamp or date time column; the time column holds \
                 plain integers, so pass an integer in its unit"
            ),
        ));
    };
    let total_ns = parse_ns(text, param)?;
    if total_ns % unit_ns != 0 {
        return Err(bad_duration(
            text,
            param,
            &format!(
                "it is not a whole number of {} (the time column's unit)",
                unit.name()
            ),
        ));
    }
    i64::try_from(total_ns / unit_ns).map_err(|_| bad_duration(text, param, "it is too long"))
}

fn bad_duration(text: &str, param: &str, why: &str) -> Error {
    Error::param(
        param,
        format!(
            "cannot read duration {text:?}: {why} (expected e.g. \"250ms\", \"10s\", \"5 minutes\", \"1h\")"
        ),
    )
}

/// The signed length of a duration string in nanoseconds (in i128, where any i64 count of any unit fits).
fn parse_ns(text: &str, param: &str) -> Result<i128> {
    let bad = |why: &str| bad_duration(text, param, why);
    let mut rest = text.trim();
    let negative = rest.starts_with('-');
    if let Some(r) = rest.strip_prefix(['-', '+']) {
        rest = r.trim_start();
    }
    if rest.is_empty() {
        return Err(bad("it is empty"));
    }
    let mut total_ns: i128 = 0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(bad("expected a number"));
        }
        let (num, tail) = rest.split_at(num_len);
        let tail = tail.trim_start();
        let unit_len = tail
            .find(|c: char| !c.is_alphabetic() && c != 'µ')
            .unwrap_or(tail.len());
        let (unit_word, tail) = tail.split_at(unit_len);
        let factor: i128 = match unit_word.to_ascii_lowercase().as_str() {
            "ns" | "nanosecond" | "nanoseconds" => 1,
            "us" | "µs" | "microsecond" | "microseconds" => 1_000,
            "ms" | "millisecond" | "milliseconds" => 1_000_000,
            "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000_000_000,
            "d" | "day" | "days" => 86_400_000_000_000,
            "w" | "week" | "weeks" => 604_800_000_000_000,
            "mo" | "month" | "months" => {
                return Err(bad(
                    "calendar months have no fixed length: give tz= (e.g. tz=\"UTC\") to cut windows into \
                     a zone's months",
                ));
            }
            "y" | "year" | "years" => {
                return Err(bad(
                    "years are not supported: give \"12mo\" with tz= for calendar years",
                ));
            }
            "" => return Err(bad("a unit is missing after the number")),
            other => return Err(bad(&format!("unknown unit {other:?}"))),
        };
        total_ns = total_ns
            .checked_add(scale_decimal(num, factor).ok_or_else(|| bad("the number is not valid"))?)
            .ok_or_else(|| bad("it is too long"))?;
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    Ok(if negative { -total_ns } else { total_ns })
}

/// `units` of the time column's `unit` as the duration string a user would write: `"5m"`, `"1h30m"`,
/// `"250ms"`, `"-1h"`, `"3d12h"` (days, hours, minutes, seconds, then ms, us, ns; `"0s"` for zero). The inverse
/// of [`parse_duration`]. Plain integer columns have no unit: the number itself.
///
/// ```
/// use windgate_core::time::{format_duration, TimeUnit};
/// assert_eq!(format_duration(300_000_000_000, TimeUnit::Nanosecond), "5m");
/// assert_eq!(format_duration(-3_600_000_000, TimeUnit::Microsecond), "-1h");
/// assert_eq!(format_duration(5_400_250, TimeUnit::Millisecond), "1h30m250ms");
/// ```
pub fn format_duration(units: i64, unit: TimeUnit) -> String {
    let Some(unit_ns) = unit.nanos() else {
        return units.to_string();
    };
    let ns = units as i128 * unit_ns;
    if ns == 0 {
        return "0s".into();
    }
    let mut out = String::from(if ns < 0 { "-" } else { "" });
    let mut rest = ns.unsigned_abs();
    for (factor, name) in [
        (86_400_000_000_000u128, "d"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ] {
        if rest >= factor {
            out.push_str(&format!("{}{name}", rest / factor));
            rest %= factor;
        }
    }
    out
}

/// `num` (decimal digits with at most one point) times `factor`, exactly, or None.
fn scale_decimal(num: &str, factor: i128) -> Option<i128> {
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
        return None;
    }
    let int: i128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    let mut value = int.checked_mul(factor)?;
    let mut scale = factor;
    for d in frac_part.bytes() {
        if scale % 10 != 0 {
            return None; // finer than a nanosecond
        }
        scale /= 10;
        value = value.checked_add((d - b'0') as i128 * scale)?;
    }
    Some(value)
}

/// A length of time: an integer in the time column's unit, or a duration string resolved once the unit is
/// known (at the first batch).
///
/// On a timestamp or date column only durations are accepted: a plain integer means different lengths on
/// columns of different units (`300_000_000_000` is 5 minutes in nanoseconds and 3.5 days in microseconds), so
/// every integer but 0 is an error there, which names the duration to pass instead. Integer time columns take
/// integers only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Span {
    Units(i64),
    Text(String),
}

impl Span {
    /// The length in the unit of the time column `column`: integers only on integer columns (0 anywhere),
    /// duration strings only on timestamp and date columns. A negative duration string is an error (see
    /// [`Span::resolve_signed`] for the parameters that take a sign); negative integers are left to the
    /// caller's range check, as on integer columns.
    pub fn resolve(&self, unit: TimeUnit, column: &str, param: &str) -> Result<i64> {
        let v = self.resolve_signed(unit, column, param)?;
        if let Span::Text(t) = self
            && v < 0
        {
            return Err(Error::param(
                param,
                format!(
                    "expected a non-negative duration, got {t:?} (only an offset, or a join's lower and \
                     upper bounds, may be negative)"
                ),
            ));
        }
        Ok(v)
    }

    /// [`Span::resolve`] for a parameter that may be negative (a window offset, a join's bounds).
    pub fn resolve_signed(&self, unit: TimeUnit, column: &str, param: &str) -> Result<i64> {
        match self {
            Span::Units(v) => {
                if *v != 0 && unit != TimeUnit::Plain {
                    return Err(plain_integer_error(*v, unit, column, param));
                }
                Ok(*v)
            }
            Span::Text(t) => {
                if unit != TimeUnit::Plain
                    && let Some(v) = bare_integer(t)
                {
                    return Err(plain_integer_error(v, unit, column, param));
                }
                parse_duration(t, unit, param)
            }
        }
    }

    /// Early syntax check of a duration string (the unit is not known yet; a bare integer string is judged
    /// once it is).
    pub(crate) fn check(&self, param: &str) -> Result<()> {
        if let Span::Text(t) = self
            && bare_integer(t).is_none()
        {
            parse_ns(t, param)?;
        }
        Ok(())
    }
}

/// A unit-less number such as `"5"` (as a command line passes it), if `text` is one.
fn bare_integer(text: &str) -> Option<i64> {
    let t = text.trim();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| t.parse().ok())
        .flatten()
}

/// The error of a plain integer `v` given for `param` on a timestamp or date column: names the column's type
/// and the duration string meaning what `v` would have meant.
fn plain_integer_error(v: i64, unit: TimeUnit, column: &str, param: &str) -> Error {
    // "sessionize: gap" -> the keyword "gap".
    let keyword = param.rsplit(": ").next().unwrap_or(param);
    Error::param(
        param,
        format!(
            "the time column '{column}' is a {}; pass a duration such as {keyword}=\"{}\" ({v} {}) instead of \
             a plain integer",
            unit.type_name(),
            format_duration(v, unit),
            unit.short()
        ),
    )
}

/// How a time column's values read in stats and error messages: ISO 8601 timestamps in the column's zone
/// (`2024-06-01T12:02:59.810Z`, `2024-06-01T14:02:59.810+02:00` for `"Europe/Berlin"`, no suffix for a
/// timestamp without a zone), dates for date32, and the integer itself for plain integer columns.
#[derive(Debug, Clone, Copy)]
pub struct TimeFormat {
    unit: TimeUnit,
    tz: Option<Tz>,
}

impl Default for TimeFormat {
    fn default() -> Self {
        Self::plain()
    }
}

impl TimeFormat {
    /// Plain integers (also the format before the time column's type is known).
    pub const fn plain() -> Self {
        Self {
            unit: TimeUnit::Plain,
            tz: None,
        }
    }

    /// The format of a time column of type `data_type` (a zone arrow cannot read prints as naive times).
    pub fn of(data_type: &DataType) -> Self {
        let unit = crate::arrow_io::time_unit(data_type, "").unwrap_or(TimeUnit::Plain);
        let tz = match data_type {
            DataType::Timestamp(_, Some(tz)) => tz.parse::<Tz>().ok(),
            _ => None,
        };
        Self { unit, tz }
    }

    pub fn unit(&self) -> TimeUnit {
        self.unit
    }

    /// `value` as it reads (see [`format_ts`]).
    pub fn format(&self, value: Timestamp) -> String {
        format_ts(value, self.unit, self.tz.as_ref())
    }

    /// [`Self::format`] of a value that may be missing (`None` before any row).
    pub fn format_opt(&self, value: Option<Timestamp>) -> Option<String> {
        value.map(|v| self.format(v))
    }
}

/// A time value of a column in `unit` as ISO 8601: `2024-06-01T12:02:59.810Z` with `tz` UTC,
/// `2024-06-01T14:02:59.810+02:00` with `tz` Europe/Berlin, `2024-06-01T12:02:59.810` without a zone (a naive
/// timestamp), `2024-06-01` for a date32 column; fractions of a second in 3, 6 or 9 digits, only as many as
/// the value needs. Plain integers, and values outside chrono's years, print as the integer.
///
/// ```
/// use windgate_core::time::{format_ts, TimeUnit};
/// let utc: arrow_array::timezone::Tz = "UTC".parse().unwrap();
/// assert_eq!(format_ts(1_717_243_379_810, TimeUnit::Millisecond, Some(&utc)), "2024-06-01T12:02:59.810Z");
/// let berlin: arrow_array::timezone::Tz = "Europe/Berlin".parse().unwrap();
/// assert_eq!(
///     format_ts(1_717_243_379_810_000_000, TimeUnit::Nanosecond, Some(&berlin)),
///     "2024-06-01T14:02:59.810+02:00"
/// );
/// assert_eq!(format_ts(1_717_243_379, TimeUnit::Second, None), "2024-06-01T12:02:59");
/// assert_eq!(format_ts(42, TimeUnit::Plain, None), "42");
/// ```
pub fn format_ts(value: Timestamp, unit: TimeUnit, tz: Option<&Tz>) -> String {
    use chrono::{DateTime, SecondsFormat};
    let Some(unit_ns) = unit.nanos() else {
        return value.to_string();
    };
    let ns = value as i128 * unit_ns;
    let (secs, sub) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    let Some(utc) = i64::try_from(secs)
        .ok()
        .and_then(|s| DateTime::from_timestamp(s, sub as u32))
    else {
        return value.to_string();
    };
    if unit == TimeUnit::Day {
        return utc.date_naive().format("%Y-%m-%d").to_string();
    }
    match tz {
        Some(tz) => utc
            .with_timezone(tz)
            .to_rfc3339_opts(SecondsFormat::AutoSi, true),
        None => utc.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn floor_div_negative() {
        assert_eq!(floor_div(-1, 10), -1);
        assert_eq!(floor_div(-10, 10), -1);
        assert_eq!(floor_div(-11, 10), -2);
        assert_eq!(floor_div(9, 10), 0);
    }

    #[test]
    fn panes_of_windows_worked_example() {
        // w_p = 5, s_p = 2: pane 4 is in windows {0,1,2}, pane 5 in {1,2}, window 1 is panes 2..6.
        let w = WindowSpec::new(5, Some(2), 0).unwrap();
        assert_eq!(w.pane(), 1);
        assert_eq!(w.windows_of_pane(4), (0, 2));
        assert_eq!(w.windows_of_pane(5), (1, 2));
        assert_eq!(w.first_pane(1), 2);
    }

    #[test]
    fn validation_names_the_parameter() {
        assert!(
            WindowSpec::new(0, None, 0)
                .unwrap_err()
                .message()
                .starts_with("size:")
        );
        assert!(
            WindowSpec::new(10, Some(-1), 0)
                .unwrap_err()
                .message()
                .starts_with("slide:")
        );
        assert!(
            WindowSpec::new(10, Some(20), 0)
                .unwrap_err()
                .message()
                .starts_with("slide:")
        );
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("250ms", TimeUnit::Microsecond, "size").unwrap(),
            250_000
        );
        assert_eq!(
            parse_duration("1.5s", TimeUnit::Millisecond, "size").unwrap(),
            1_500
        );
        assert_eq!(parse_duration("1 day", TimeUnit::Day, "size").unwrap(), 1);
        assert_eq!(
            parse_duration("2 weeks", TimeUnit::Second, "size").unwrap(),
            1_209_600
        );
        let e = parse_duration("1h", TimeUnit::Day, "slide").unwrap_err();
        assert!(e.message().contains("whole number of days"), "{e}");
        assert!(
            parse_duration("10 parsecs", TimeUnit::Second, "size")
                .unwrap_err()
                .message()
                .contains("parsecs")
        );
        assert!(parse_duration("", TimeUnit::Second, "size").is_err());
        assert!(parse_duration("1.2.3s", TimeUnit::Second, "size").is_err());
        assert!(parse_duration("1ns", TimeUnit::Second, "size").is_err());
    }

    #[test]
    fn overflow_is_an_error() {
        let w = WindowSpec::new(10, None, 0).unwrap();
        assert!(
            w.check_range(0, i64::MAX - 5, "ts", &TimeFormat::plain())
                .is_err()
        );
        assert!(
            w.check_range(i64::MIN + 5, 0, "ts", &TimeFormat::plain())
                .is_err()
        );
        assert!(
            w.check_range(-1_000_000, 1_000_000, "ts", &TimeFormat::plain())
                .is_ok()
        );
    }

    #[test]
    fn windows_until_change_match_the_spec() {
        for (size, slide, offset) in [(1, 1, 0), (10, 3, 0), (30, 3, 2), (12, 12, 5), (7, 2, 1)] {
            let s = WindowSpec::new(size, Some(slide), offset).unwrap();
            for ts in -100..100 {
                let (lo, hi, change) = s.windows_of_ts_until_change(ts);
                assert_eq!(
                    (lo, hi),
                    s.windows_of_ts(ts),
                    "{size}/{slide}/{offset} at {ts}"
                );
                assert!(change > ts);
                for t in ts..change {
                    assert_eq!(s.windows_of_ts(t), (lo, hi));
                }
                assert_ne!(s.windows_of_ts(change), (lo, hi));
                assert_eq!(s.window_end_saturating(lo - 1), s.window_end(lo - 1));
                assert!(s.window_end(lo - 1) <= ts && ts < s.window_end(lo));
            }
        }
        // Near the limits nothing overflows, and every window named contains the ts.
        let s = WindowSpec::new(10, Some(3), 0).unwrap();
        for ts in [i64::MIN, i64::MIN + 1, i64::MAX - 1, i64::MAX] {
            let (lo, hi, change) = s.windows_of_ts_until_change(ts);
            assert!(change >= ts);
            for w in lo..=hi {
                let end = s.window_end_saturating(w);
                assert!(end > ts || end == i64::MAX);
            }
        }
        assert_eq!(s.window_end_saturating(i64::MAX), i64::MAX);
        assert_eq!(s.window_end_saturating(i64::MIN), i64::MIN);
    }

    #[test]
    fn plain_integers_are_rejected_on_timestamp_columns() {
        let e = Span::Units(300_000_000_000)
            .resolve(TimeUnit::Nanosecond, "ts", "size")
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidParameter);
        assert_eq!(
            e.message(),
            "size: the time column 'ts' is a timestamp[ns]; pass a duration such as size=\"5m\" \
             (300000000000 ns) instead of a plain integer"
        );
        let e = Span::Units(302_400_000_000)
            .resolve(TimeUnit::Microsecond, "t", "size")
            .unwrap_err();
        assert!(
            e.message().contains("size=\"3d12h\" (302400000000 us)"),
            "{e}"
        );
        // A unit-less string, as the command line passes it; the keyword of a pipeline operator's parameter.
        let e = Span::Text("5".into())
            .resolve(TimeUnit::Millisecond, "ts", "sessionize: gap")
            .unwrap_err();
        assert!(
            e.message()
                .starts_with("sessionize: gap: the time column 'ts' is a timestamp[ms]")
        );
        assert!(e.message().contains("gap=\"5ms\" (5 ms)"), "{e}");
        let e = Span::Units(-3600)
            .resolve_signed(TimeUnit::Second, "ts", "offset")
            .unwrap_err();
        assert!(e.message().contains("offset=\"-1h\""), "{e}");
        let e = Span::Units(2)
            .resolve(TimeUnit::Day, "d", "size")
            .unwrap_err();
        assert!(
            e.message()
                .contains("is a date32; pass a duration such as size=\"2d\""),
            "{e}"
        );
        // 0 means the same in every unit; integer columns take integers (and reject duration strings).
        assert_eq!(
            Span::Units(0)
                .resolve(TimeUnit::Nanosecond, "ts", "offset")
                .unwrap(),
            0
        );
        assert_eq!(
            Span::Units(7)
                .resolve(TimeUnit::Plain, "ts", "size")
                .unwrap(),
            7
        );
        assert_eq!(
            Span::Units(-7)
                .resolve(TimeUnit::Plain, "ts", "offset")
                .unwrap(),
            -7
        );
        assert!(
            Span::Text("7s".into())
                .resolve(TimeUnit::Plain, "ts", "size")
                .is_err()
        );
        assert_eq!(
            Span::Text("7".into())
                .check("size")
                .map_err(|e| e.to_string()),
            Ok(())
        );
    }

    #[test]
    fn signs_are_read_and_rejected_where_they_make_no_sense() {
        let off = Span::Text("-1h".into());
        assert_eq!(
            off.resolve_signed(TimeUnit::Second, "ts", "offset")
                .unwrap(),
            -3600
        );
        assert_eq!(
            Span::Text(" + 90 s".into())
                .resolve(TimeUnit::Second, "ts", "size")
                .unwrap(),
            90
        );
        let e = off.resolve(TimeUnit::Second, "ts", "size").unwrap_err();
        assert!(
            e.message()
                .starts_with("size: expected a non-negative duration, got \"-1h\""),
            "{e}"
        );
        let e = parse_duration("-1 fortnight", TimeUnit::Second, "offset").unwrap_err();
        assert!(e.message().contains("\"-1 fortnight\""), "{e}");
        assert!(parse_duration("-", TimeUnit::Second, "offset").is_err());
        assert!(parse_duration("--1s", TimeUnit::Second, "offset").is_err());
    }

    #[test]
    fn negative_offsets_give_sparks_windows() {
        // Spark: window(t, "60 seconds", "20 seconds", "-15 seconds") puts t in [k*20 - 15, k*20 + 45).
        let w = WindowSpec::new(60, Some(20), -15).unwrap();
        assert_eq!(w.offset(), 5);
        for ts in -100..100 {
            let (lo, hi) = w.windows_of_ts(ts);
            let starts: Vec<i64> = (lo..=hi).map(|j| w.window_start(j)).collect();
            let brute: Vec<i64> = (-20..20)
                .map(|k| k * 20 - 15)
                .filter(|s| *s <= ts && ts < s + 60)
                .collect();
            assert_eq!(starts, brute, "{ts}");
        }
        // An offset beyond the slide names the same windows.
        assert_eq!(WindowSpec::new(60, Some(20), 125).unwrap().offset(), 5);
    }

    #[test]
    fn durations_format_as_users_write_them() {
        assert_eq!(format_duration(300_000_000_000, TimeUnit::Nanosecond), "5m");
        assert_eq!(format_duration(5_400, TimeUnit::Second), "1h30m");
        assert_eq!(format_duration(250, TimeUnit::Millisecond), "250ms");
        assert_eq!(
            format_duration(-3_600_000_000, TimeUnit::Microsecond),
            "-1h"
        );
        assert_eq!(format_duration(0, TimeUnit::Second), "0s");
        assert_eq!(format_duration(3, TimeUnit::Day), "3d");
        assert_eq!(format_duration(1_500, TimeUnit::Nanosecond), "1us500ns");
        assert_eq!(format_duration(-7, TimeUnit::Plain), "-7");
        assert_eq!(
            format_duration(i64::MIN, TimeUnit::Nanosecond),
            "-106751d23h47m16s854ms775us808ns"
        );
        for v in [1i64, 59, 61, 3_599_999, 86_400_001, -1, -90_061_001] {
            let text = format_duration(v, TimeUnit::Millisecond);
            assert_eq!(
                parse_duration(&text, TimeUnit::Millisecond, "x").unwrap(),
                v,
                "{text}"
            );
        }
    }

    #[test]
    fn timestamps_read_in_the_columns_zone() {
        use arrow_schema::TimeUnit as Arrow;
        let ms = 1_717_243_379_810; // 2024-06-01T12:02:59.810Z
        let of = |tz: Option<&str>| {
            TimeFormat::of(&DataType::Timestamp(Arrow::Millisecond, tz.map(Into::into)))
        };
        assert_eq!(of(Some("UTC")).format(ms), "2024-06-01T12:02:59.810Z");
        assert_eq!(of(Some("+00:00")).format(ms), "2024-06-01T12:02:59.810Z");
        assert_eq!(
            of(Some("Europe/Berlin")).format(ms),
            "2024-06-01T14:02:59.810+02:00"
        );
        // Winter time in Berlin.
        assert_eq!(
            of(Some("Europe/Berlin")).format(1_704_110_400_000),
            "2024-01-01T13:00:00+01:00"
        );
        assert_eq!(
            of(Some("+05:30")).format(ms),
            "2024-06-01T17:32:59.810+05:30"
        );
        assert_eq!(of(None).format(ms), "2024-06-01T12:02:59.810");
        assert_eq!(of(None).format(-1), "1969-12-31T23:59:59.999");
        let ns = TimeFormat::of(&DataType::Timestamp(Arrow::Nanosecond, Some("UTC".into())));
        assert_eq!(
            ns.format(1_717_243_379_000_000_001),
            "2024-06-01T12:02:59.000000001Z"
        );
        assert_eq!(ns.format(i64::MIN), "1677-09-21T00:12:43.145224192Z");
        assert_eq!(
            TimeFormat::of(&DataType::Date32).format(19_875),
            "2024-06-01"
        );
        assert_eq!(TimeFormat::of(&DataType::Int64).format(ms), "1717243379810");
        assert_eq!(TimeFormat::plain().format_opt(None), None);
        // Beyond chrono's years: the integer.
        let s = TimeFormat::of(&DataType::Timestamp(Arrow::Second, None));
        assert_eq!(s.format(i64::MAX), i64::MAX.to_string());
    }

    #[test]
    fn overflow_errors_print_timestamps() {
        use arrow_schema::TimeUnit as Arrow;
        let f = TimeFormat::of(&DataType::Timestamp(Arrow::Millisecond, Some("UTC".into())));
        let w = WindowSpec::new(3_600_000, None, 0).unwrap();
        let e = w.check_range(0, i64::MAX - 5, "ts", &f).unwrap_err();
        assert!(
            e.message()
                .contains("timestamp 9223372036854775802 is too close"),
            "{e}"
        );
        assert!(e.message().contains("(size 1h, slide 1h)"), "{e}");
    }

    proptest! {
        /// Pane and window arithmetic against brute-force enumeration (the pane model of Mencagli et al.).
        #[test]
        fn windows_match_brute_force(size in 1i64..21, slide_div in 1i64..21, offset in -30i64..30, ts in -200i64..200) {
            let slide = 1 + (slide_div - 1) % size;
            let w = WindowSpec::new(size, Some(slide), offset).unwrap();
            let (lo, hi) = w.windows_of_ts(ts);
            let brute: Vec<i64> = (-300..300)
                .filter(|&j| j * slide + offset <= ts && ts < j * slide + offset + size)
                .collect();
            let start = w.window_start(lo);
            // The reduced offset renumbers windows; compare by window start.
            let starts: Vec<i64> = (lo..=hi).map(|j| w.window_start(j)).collect();
            let brute_starts: Vec<i64> = brute.iter().map(|j| j * slide + offset).collect();
            prop_assert_eq!(starts, brute_starts);
            prop_assert!(start <= ts);
            // Every window is exactly its panes.
            for j in lo..=hi {
                let p0 = w.first_pane(j);
                let p = w.pane_of(ts);
                prop_assert!(p0 <= p && p < p0 + w.panes_per_window());
            }
            prop_assert!(w.window_end(w.last_closed_window(ts)) <= ts);
            prop_assert!(w.window_end(w.last_closed_window(ts) + 1) > ts);
        }
    }
}
