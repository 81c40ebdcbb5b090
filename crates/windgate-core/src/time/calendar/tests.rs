//! The wall-time transform at daylight-saving changes: Europe/Berlin and America/New_York (changes at 2:00),
//! America/Santiago (changes at midnight), and a fixed +05:30.

use super::*;

const H: i64 = 3_600;

fn zoned(unit: ArrowUnit, tz: &str) -> DataType {
    DataType::Timestamp(unit, Some(tz.into()))
}

/// Seconds since the epoch of a UTC time written `"2024-03-31T01:00:00"`.
fn utc(text: &str) -> i64 {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp()
}

/// Tumbling windows of `size` seconds in zone `tz` on a seconds column.
fn days(tz: &str, size: i64, offset: i64) -> (WindowSpec, Calendar) {
    let spec = WindowSpec::new(size, None, offset).unwrap();
    let (spec, cal) = bind(
        Some(tz),
        &zoned(ArrowUnit::Second, tz),
        "ts",
        spec,
        (false, false),
    )
    .unwrap();
    (spec, cal.expect("whole days"))
}

/// The window of instant `t` as instants `[start, end)`.
fn window_of(spec: &WindowSpec, cal: &Calendar, t: i64) -> (i64, i64) {
    let (j, last) = spec.windows_of_ts(cal.wall_time(t));
    assert_eq!(j, last, "tumbling");
    (
        cal.instant_of(spec.window_start(j)),
        cal.instant_of(spec.window_end(j)),
    )
}

#[test]
fn berlin_days_start_at_local_midnight_and_last_23_or_25_hours() {
    let (spec, cal) = days("Europe/Berlin", 24 * H, 0);
    // Winter: [23:00Z, 23:00Z).
    assert_eq!(
        window_of(&spec, &cal, utc("2024-01-15T12:00:00")),
        (utc("2024-01-14T23:00:00"), utc("2024-01-15T23:00:00"))
    );
    // Spring change (2024-03-31 02:00 CET -> 03:00 CEST): a day of 23 hours.
    assert_eq!(
        window_of(&spec, &cal, utc("2024-03-31T00:59:59")),
        (utc("2024-03-30T23:00:00"), utc("2024-03-31T22:00:00"))
    );
    assert_eq!(
        window_of(&spec, &cal, utc("2024-03-31T01:00:00")),
        (utc("2024-03-30T23:00:00"), utc("2024-03-31T22:00:00"))
    );
    // Autumn change (2024-10-27 03:00 CEST -> 02:00 CET): 25 hours, both passes of 02:xx in it.
    let autumn = (utc("2024-10-26T22:00:00"), utc("2024-10-27T23:00:00"));
    for t in [
        "2024-10-27T00:30:00",
        "2024-10-27T01:30:00",
        "2024-10-27T22:59:59",
    ] {
        assert_eq!(window_of(&spec, &cal, utc(t)), autumn, "{t}");
    }
    assert_eq!(
        window_of(&spec, &cal, utc("2024-10-27T23:00:00")).0,
        utc("2024-10-27T23:00:00")
    );
}

#[test]
fn new_york_days_and_mondays() {
    let (spec, cal) = days("America/New_York", 24 * H, 0);
    // 2024-03-10 02:00 EST -> 03:00 EDT; 2024-11-03 02:00 EDT -> 01:00 EST.
    assert_eq!(
        window_of(&spec, &cal, utc("2024-03-10T12:00:00")),
        (utc("2024-03-10T05:00:00"), utc("2024-03-11T04:00:00"))
    );
    assert_eq!(
        window_of(&spec, &cal, utc("2024-11-03T05:30:00")),
        (utc("2024-11-03T04:00:00"), utc("2024-11-04T05:00:00"))
    );
    // Weeks start on Monday (2024-11-04), local midnight; the one holding the change is 169 hours long.
    let (spec, cal) = days("America/New_York", 7 * 24 * H, 0);
    assert_eq!(
        window_of(&spec, &cal, utc("2024-11-03T12:00:00")),
        (utc("2024-10-28T04:00:00"), utc("2024-11-04T05:00:00"))
    );
}

#[test]
fn santiago_changes_at_midnight() {
    let (spec, cal) = days("America/Santiago", 24 * H, 0);
    // 2024-09-08 00:00 -04 -> 01:00 -03: that midnight does not exist; the day starts at the change.
    assert_eq!(
        window_of(&spec, &cal, utc("2024-09-08T12:00:00")),
        (utc("2024-09-08T04:00:00"), utc("2024-09-09T03:00:00"))
    );
    assert_eq!(
        window_of(&spec, &cal, utc("2024-09-08T03:59:59")),
        (utc("2024-09-07T04:00:00"), utc("2024-09-08T04:00:00"))
    );
    // 2024-04-07 00:00 -03 -> 2024-04-06 23:00 -04: Saturday has 25 hours, both passes of 23:xx in it.
    let saturday = (utc("2024-04-06T03:00:00"), utc("2024-04-07T04:00:00"));
    for t in [
        "2024-04-07T02:30:00",
        "2024-04-07T03:30:00",
        "2024-04-07T03:59:59",
    ] {
        assert_eq!(window_of(&spec, &cal, utc(t)), saturday, "{t}");
    }
}

#[test]
fn fixed_offsets_and_day_offsets() {
    let (spec, cal) = days("+05:30", 24 * H, 0);
    assert_eq!(
        window_of(&spec, &cal, utc("2024-06-01T20:00:00")),
        (utc("2024-06-01T18:30:00"), utc("2024-06-02T18:30:00"))
    );
    // offset="6h": days from 06:00 local; on the spring day in Berlin that is still 23 hours.
    let (spec, cal) = days("Europe/Berlin", 24 * H, 6 * H);
    assert_eq!(
        window_of(&spec, &cal, utc("2024-03-31T12:00:00")),
        (utc("2024-03-31T04:00:00"), utc("2024-04-01T04:00:00"))
    );
    assert_eq!(
        window_of(&spec, &cal, utc("2024-03-31T03:00:00")),
        (utc("2024-03-30T05:00:00"), utc("2024-03-31T04:00:00"))
    );
}

#[test]
fn the_local_watermark_waits_for_the_repeated_hour() {
    let (_, cal) = days("Europe/Berlin", 24 * H, 0);
    // At 00:30Z on the autumn day (02:30 CEST), 02:00 CET is still to come at 01:00Z.
    let wm = utc("2024-10-27T00:30:00");
    assert_eq!(cal.local_watermark(wm), utc("2024-10-27T02:00:00"));
    assert_eq!(
        cal.local_watermark(utc("2024-10-27T01:30:00")),
        utc("2024-10-27T02:30:00")
    );
    assert_eq!(
        cal.local_watermark(utc("2024-06-01T00:00:00")),
        utc("2024-06-01T02:00:00")
    );
    // Never above the wall time of any later instant, and never moving back.
    let mut last = i64::MIN;
    for zone in ["Europe/Berlin", "America/New_York", "America/Santiago"] {
        let (_, cal) = days(zone, 24 * H, 0);
        for start in [
            "2024-10-26T12:00:00",
            "2024-11-02T12:00:00",
            "2024-04-05T12:00:00",
        ] {
            last = i64::MIN;
            let from = utc(start);
            for step in 0..(48 * 4) {
                let wm = from + step * 900;
                let lw = cal.local_watermark(wm);
                assert!(lw >= last, "{zone} {wm}");
                last = lw;
                for ahead in 0..(40 * 12) {
                    let t = wm + ahead * 300;
                    assert!(cal.wall_time(t) >= lw, "{zone} wm {wm} t {t}");
                }
            }
        }
    }
    let _ = last;
}

#[test]
fn units_and_bad_parameters() {
    let ms = zoned(ArrowUnit::Millisecond, "Europe/Berlin");
    let spec = WindowSpec::new(86_400_000, None, 0).unwrap();
    let (_, cal) = bind(Some("Europe/Berlin"), &ms, "ts", spec, (false, false)).unwrap();
    let cal = cal.unwrap();
    let t = utc("2024-10-27T01:30:00") * 1000 + 250;
    assert_eq!(cal.wall_time(t), utc("2024-10-27T02:30:00") * 1000 + 250);
    assert_eq!(
        cal.instant_of(utc("2024-10-27T02:30:00") * 1000 + 250),
        t - 3_600_000
    );
    // Windows shorter than a day keep the UTC grid.
    let hour = WindowSpec::new(3_600_000, None, 0).unwrap();
    assert!(
        bind(Some("+05:30"), &ms, "ts", hour, (false, false))
            .unwrap()
            .1
            .is_none()
    );
    let err = |tz: &str, dt: &DataType, spec| {
        bind(Some(tz), dt, "ts", spec, (false, false))
            .unwrap_err()
            .to_string()
    };
    assert!(err("Mars/Olympus", &ms, spec).contains("tz: unknown time zone \"Mars/Olympus\""));
    assert!(err("UTC", &DataType::Int64, spec).starts_with("tz: the time column 'ts' is Int64"));
    let naive = DataType::Timestamp(ArrowUnit::Millisecond, None);
    assert!(err("UTC", &naive, spec).contains("without a zone"));
    let mixed = WindowSpec::new(86_400_000, Some(3_600_000), 0).unwrap();
    assert!(err("UTC", &ms, mixed).starts_with("slide: with tz="));
    let long = WindowSpec::new(36 * 3_600_000, None, 0).unwrap();
    assert!(err("UTC", &ms, long).contains("got size 1d12h"));
}

#[test]
fn localize_is_the_monotone_wall_time_row_by_row() {
    for zone in [
        "Europe/Berlin",
        "America/Santiago",
        "Australia/Lord_Howe",
        "+05:30",
    ] {
        let (_, cal) = days(zone, 24 * H, 0);
        let ts: Vec<i64> = (0..20_000)
            .map(|i| utc("2024-04-05T00:00:00") + i * 53 - (i % 7) * 3_000)
            .chain((0..20_000).map(|i| utc("2024-10-26T00:00:00") + i * 11))
            .chain((0..20_000).map(|i| utc("2024-09-07T00:00:00") + i * 17))
            .collect();
        // Brute force of the monotone wall time: the running maximum of the wall time, second by second
        // (the times are seconds), from three hours before the earliest row.
        let lo = ts.iter().min().unwrap() - 3 * H;
        let hi = *ts.iter().max().unwrap();
        let mut running = i64::MIN;
        let most: Vec<i64> = (lo..=hi)
            .map(|s| {
                running = running.max(cal.wall_time(s));
                running
            })
            .collect();
        let each: Vec<i64> = ts.iter().map(|&t| most[(t - lo) as usize]).collect();
        assert_eq!(cal.localize(&ts), each, "{zone}");
        let folds = ts
            .iter()
            .filter(|&&t| cal.wall_time(t) < most[(t - lo) as usize]);
        if zone == "Europe/Berlin" {
            assert!(
                folds.count() > 0,
                "the sample crosses Berlin's autumn change"
            );
        }
    }
}

#[test]
fn months_start_on_the_first_at_local_midnight() {
    let month = 31 * 24 * H;
    let ts = zoned(ArrowUnit::Second, "Europe/Berlin");
    let bound = |size, slide, offset| {
        let spec = WindowSpec::new(size, Some(slide), offset).unwrap();
        let (spec, cal) = bind(Some("Europe/Berlin"), &ts, "ts", spec, (true, true)).unwrap();
        (spec, cal.unwrap())
    };
    let of = |spec: &WindowSpec, cal: &Calendar, t: i64| {
        let (j, _) = spec.windows_of_ts(cal.localize(&[t])[0]);
        (
            cal.instant(spec.window_start(j)),
            cal.instant(spec.window_end(j)),
        )
    };
    let (spec, cal) = bound(month, month, 0);
    assert_eq!(
        of(&spec, &cal, utc("2024-03-31T12:00:00")),
        (utc("2024-02-29T23:00:00"), utc("2024-03-31T22:00:00"))
    );
    assert_eq!(
        of(&spec, &cal, utc("2024-02-29T22:59:59")),
        (utc("2024-01-31T23:00:00"), utc("2024-02-29T23:00:00"))
    );
    // Quarters: months 0, 3, 6, ... since 1970-01, so January to March.
    let (spec, cal) = bound(3 * month, 3 * month, 0);
    assert_eq!(
        of(&spec, &cal, utc("2024-02-10T00:00:00")),
        (utc("2023-12-31T23:00:00"), utc("2024-03-31T22:00:00"))
    );
    // From the 2nd of each month (offset "1d").
    let (spec, cal) = bound(month, month, 24 * H);
    assert_eq!(
        of(&spec, &cal, utc("2024-03-01T12:00:00")),
        (utc("2024-02-01T23:00:00"), utc("2024-03-01T23:00:00"))
    );
    // The closing coordinate: every March row is final once the watermark is past April's local midnight.
    let (spec, cal) = bound(month, month, 0);
    let march = spec
        .windows_of_ts(cal.localize(&[utc("2024-03-15T00:00:00")])[0])
        .0;
    assert_eq!(
        spec.last_closed_window(cal.closing(utc("2024-03-31T21:59:59"))),
        march - 1
    );
    assert_eq!(
        spec.last_closed_window(cal.closing(utc("2024-03-31T22:00:00"))),
        march
    );
    // Bad combinations.
    let spec = WindowSpec::new(month, Some(24 * H), 0).unwrap();
    let err = bind(Some("UTC"), &ts, "ts", spec, (true, false))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("slide: month windows"), "{err}");
    let spec = WindowSpec::new(month, None, 29 * 24 * H).unwrap();
    let err = bind(Some("UTC"), &ts, "ts", spec, (true, true))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("offset: month windows"), "{err}");
    assert_eq!(months(&Span::Text("3mo".into())), Some(3));
    assert_eq!(months(&Span::Text(" 2 months".into())), Some(2));
    assert_eq!(months(&Span::Text("1m".into())), None);
}
