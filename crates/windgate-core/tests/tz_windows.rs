//! `tz=`: every strategy that takes a single source gives the reference engine's rows for local days, weeks
//! and months around daylight-saving changes, for any batch split and disorder within the lateness bound;
//! every window starts and ends at a local midnight (plus the offset), whatever its length in hours.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::timezone::Tz;
use arrow_array::types::TimestampSecondType;
use arrow_array::{Int64Array, RecordBatch, TimestampSecondArray};
use arrow_select::concat::concat_batches;
use chrono::{TimeZone, Timelike};
use proptest::prelude::*;
use windgate_core::aggregate::{
    LatenessOpt, Span, Strategy, WindowAggregateOptions, WindowAggregator,
};

/// Instants (s) of changes: Berlin's autumn and spring 2024, Santiago's (at midnight) autumn and spring.
const CHANGES: [(&str, i64); 4] = [
    ("Europe/Berlin", 1_729_990_800),
    ("Europe/Berlin", 1_711_846_800),
    ("America/Santiago", 1_712_458_800),
    ("America/Santiago", 1_725_768_000),
];

fn batch(zone: &str, rows: &[(i64, i64)]) -> RecordBatch {
    let ts = TimestampSecondArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())
        .with_timezone(zone);
    let v = Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>());
    RecordBatch::try_from_iter([("ts", Arc::new(ts) as _), ("v", Arc::new(v) as _)]).unwrap()
}

fn options(
    zone: &str,
    size: &str,
    slide: &str,
    offset: &str,
    lateness: Option<i64>,
) -> WindowAggregateOptions {
    let mut o = WindowAggregateOptions::new(
        "ts",
        Span::Text(size.into()),
        vec![
            ("*".into(), vec!["count".into()]),
            ("v".into(), vec!["sum".into(), "first".into()]),
        ],
    );
    o.slide = Some(Span::Text(slide.into()));
    o.offset = Span::Text(offset.into());
    o.tz = Some(zone.into());
    o.lateness = lateness.map_or(LatenessOpt::Exact, |k| {
        LatenessOpt::Bound(Span::Text(format!("{k}s")))
    });
    o
}

fn run(o: WindowAggregateOptions, zone: &str, rows: &[(i64, i64)], cuts: &[usize]) -> RecordBatch {
    let mut agg = WindowAggregator::new(o).unwrap();
    let mut outs = vec![];
    let mut start = 0;
    for end in cuts.iter().map(|&c| c.min(rows.len())).chain([rows.len()]) {
        if end >= start {
            outs.push(agg.push(&batch(zone, &rows[start..end]), 0).unwrap());
            start = end;
        }
    }
    outs.push(agg.flush().unwrap());
    let outs: Vec<_> = outs.into_iter().filter(|b| b.num_columns() > 0).collect();
    concat_batches(&outs[0].schema(), &outs).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn strategies_match_the_reference_on_local_days(
        change in 0usize..4,
        window in 0usize..5,
        offset in prop::sample::select(vec!["0s", "6h", "-1h"]),
        lateness in prop::option::of(prop::sample::select(vec![0i64, 3_600, 18_000])),
        minutes in prop::collection::vec((-4_320i64..4_320, -50i64..50), 0..60),
        cuts in prop::collection::vec(0usize..60, 0..4),
        sorted in any::<bool>(),
    ) {
        let (zone, at) = CHANGES[change];
        let (size, slide) = [("1d", "1d"), ("2d", "1d"), ("1w", "1d"), ("1w", "1w"), ("1mo", "1mo")][window];
        // Month windows take offsets into the month, not before it.
        let offset = if size == "1mo" && offset == "-1h" { "0s" } else { offset };
        let mut rows: Vec<(i64, i64)> = minutes.iter().map(|&(m, v)| (at + m * 60, v)).collect();
        if sorted || lateness.is_some() {
            rows.sort();
        }
        let want = run(
            WindowAggregateOptions { strategy: Strategy::Reference, ..options(zone, size, slide, offset, lateness) },
            zone,
            &rows,
            &cuts,
        );
        for strategy in Strategy::those(|c| !c.sorted_sources) {
            let mut o = options(zone, size, slide, offset, lateness);
            o.strategy = strategy;
            o.threads = Some(2);
            prop_assert_eq!(&run(o, zone, &rows, &cuts), &want, "{}", strategy.name());
        }
        // Bounds at local midnight plus the offset.
        let tz: Tz = zone.parse().unwrap();
        let hour = match offset { "6h" => 6, "-1h" => 23, _ => 0 };
        if want.num_rows() > 0 {
            for c in ["window_start", "window_end"] {
                for t in want.column_by_name(c).unwrap().as_primitive::<TimestampSecondType>().values() {
                    let local = tz.timestamp_opt(*t, 0).unwrap();
                    let (h, m) = (local.hour(), local.minute());
                    // Santiago's spring midnight does not exist: that day starts at 01:00.
                    prop_assert!(h == hour || (zone == "America/Santiago" && h == hour + 1), "{} {}:{}", t, h, m);
                    prop_assert_eq!(m, 0);
                }
            }
        }
    }
}
