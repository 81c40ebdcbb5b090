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
    /// unchecked arithmetic of the hot path cannot overflow. `column` names the time column in the error.
    pub fn check_range(&self, min_ts: Timestamp, max_ts: Timestamp, column: &str) -> Result<()> {
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
                    "column '{column}': timestamp {bad} is too close to the i64 limits: its windows \
                     (size {}, slide {}) would overflow",
                    self.size, self.slide
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

/// Parses a duration string such as `"250ms"`, `"10s"`, `"5 minutes"`, `"1h 30m"` or `"1.5s"` into the time
/// column's unit. The result must be a whole number of units; `param` names the parameter in errors.
///
/// ```
/// use windgate_core::time::{parse_duration, TimeUnit};
/// assert_eq!(parse_duration("5 minutes", TimeUnit::Millisecond, "size").unwrap(), 300_000);
/// assert_eq!(parse_duration("1h30m", TimeUnit::Second, "size").unwrap(), 5_400);
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
    let bad = |why: &str| {
        Error::param(
            param,
            format!(
                "cannot read duration {text:?}: {why} (expected e.g. \"250ms\", \"10s\", \"5 minutes\", \"1h\")"
            ),
        )
    };
    let mut rest = text.trim();
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
            "" => return Err(bad("a unit is missing after the number")),
            other => return Err(bad(&format!("unknown unit {other:?}"))),
        };
        total_ns = total_ns
            .checked_add(scale_decimal(num, factor).ok_or_else(|| bad("the number is not valid"))?)
            .ok_or_else(|| bad("it is too long"))?;
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    if total_ns % unit_ns != 0 {
        return Err(bad(&format!(
            "it is not a whole number of {} (the time column's unit)",
            unit.name()
        )));
    }
    i64::try_from(total_ns / unit_ns).map_err(|_| bad("it is too long"))
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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Span {
    Units(i64),
    Text(String),
}

impl Span {
    pub fn resolve(&self, unit: TimeUnit, param: &str) -> Result<i64> {
        match self {
            Span::Units(v) => Ok(*v),
            Span::Text(t) => parse_duration(t, unit, param),
        }
    }

    /// Early syntax check of a duration string (the unit is not known yet).
    pub(crate) fn check(&self, param: &str) -> Result<()> {
        if let Span::Text(t) = self {
            parse_duration(t, TimeUnit::Nanosecond, param)?;
        }
        Ok(())
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
        assert!(w.check_range(0, i64::MAX - 5, "ts").is_err());
        assert!(w.check_range(i64::MIN + 5, 0, "ts").is_err());
        assert!(w.check_range(-1_000_000, 1_000_000, "ts").is_ok());
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
