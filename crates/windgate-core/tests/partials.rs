//! The partial-state format: rows aggregated in any number of places into per-(key, pane) partial states,
//! then merged in any order, give the windows of aggregating every row in one place, bit for bit.

mod common;

use std::sync::Arc;

use arrow_array::{BinaryArray, RecordBatch};
use arrow_schema::{Field, Schema};
use arrow_select::concat::concat_batches;
use common::{Case, batch, case, case_options, run};
use proptest::prelude::*;
use windgate_core::aggregate::{
    InputKind, LatenessOpt, OutputKind, Strategy, WindowAggregateOptions, WindowAggregator,
};
use windgate_core::error::ErrorKind;

/// Phase 1: each part of the case's rows (cut at `c.cuts`) through its own operator emitting partials, with
/// `row_offset` set to the part's place in the whole input.
fn phase_one(c: &Case) -> Vec<RecordBatch> {
    let mut bounds: Vec<usize> = c.cuts.iter().map(|&x| x.min(c.rows.len())).collect();
    bounds.push(c.rows.len());
    let mut out = vec![];
    let mut start = 0;
    for end in bounds {
        if end < start {
            continue;
        }
        let mut opts = case_options(c);
        opts.lateness = LatenessOpt::Exact;
        opts.output = OutputKind::Partials;
        opts.row_offset = start as u64;
        let mut agg = WindowAggregator::new(opts).unwrap();
        agg.bind(&batch(&[]).schema()).unwrap();
        out.push(agg.push(&batch(&c.rows[start..end]), 0).unwrap());
        out.push(agg.flush().unwrap());
        start = end;
    }
    out.retain(|b| b.num_columns() > 0);
    out
}

/// Phase 2: partial batches (in the given order) into windows, or into coarser partials.
fn merge(
    c: &Case,
    parts: &[RecordBatch],
    tune: impl FnOnce(&mut WindowAggregateOptions),
) -> RecordBatch {
    let mut opts = case_options(c);
    opts.lateness = LatenessOpt::Exact;
    opts.input = InputKind::Partials;
    tune(&mut opts);
    let mut agg = WindowAggregator::new(opts).unwrap();
    let mut outs = vec![];
    for p in parts {
        outs.push(agg.push(p, 0).unwrap());
    }
    outs.push(agg.flush().unwrap());
    outs.retain(|b| b.num_columns() > 0);
    concat_batches(&outs.last().unwrap().schema(), &outs).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(200), ..ProptestConfig::default() })]

    #[test]
    fn partials_merged_in_any_order_equal_the_one_place_result(c in case(), reverse in any::<bool>(),
                                                                 engine in 0usize..3) {
        let whole = run(&c, Strategy::Reference, false);
        let mut parts = phase_one(&c);
        if parts.is_empty() {
            return Ok(());
        }
        if reverse {
            parts.reverse();
        }
        let strategy = [Strategy::Pane, Strategy::Reference, Strategy::Farm][engine];
        let merged = merge(&c, &parts, |o| { o.strategy = strategy; o.threads = Some(2); });
        prop_assert_eq!(&merged, &whole);
        // Partials of partials (a combiner stage) lose nothing either.
        let compacted = merge(&c, &parts, |o| o.output = OutputKind::Partials);
        let again = merge(&c, &[compacted], |_| {});
        prop_assert_eq!(&again, &whole);
    }

    #[test]
    fn streamed_partials_equal_the_flushed_ones(c in case()) {
        // With a lateness bound, panes come out as the watermark passes them; the union is the same rows.
        let Some(k) = c.lateness else { return Ok(()) };
        let mut opts = case_options(&c);
        opts.lateness = LatenessOpt::Bound(windgate_core::aggregate::Span::Units(k));
        opts.output = OutputKind::Partials;
        let mut agg = WindowAggregator::new(opts).unwrap();
        agg.bind(&batch(&[]).schema()).unwrap();
        let mut outs = vec![];
        for chunk in c.rows.chunks(7) {
            outs.push(agg.push(&batch(chunk), 0).unwrap());
        }
        outs.push(agg.flush().unwrap());
        let streamed = concat_batches(&outs.last().unwrap().schema(), &outs).unwrap();
        let whole = run(&c, Strategy::Reference, false);
        let merged = merge(&c, &[streamed], |_| {});
        prop_assert_eq!(merged, whole);
    }
}

fn small_case() -> Case {
    Case {
        size: 10,
        slide: 5,
        offset: 0,
        lateness: None,
        rows: (0..40)
            .map(|i| common::Row {
                ts: i,
                key: Some((i % 3) as i32),
                v: Some(i as f64 * 0.1),
                iv: i,
            })
            .collect(),
        cuts: vec![13, 27],
    }
}

#[test]
fn partial_schema_names_every_state_column() {
    let parts = phase_one(&small_case());
    assert_eq!(parts.iter().filter(|b| b.num_rows() > 0).count(), 3);
    let names: Vec<String> = parts[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    for expected in [
        "k",
        "ts",
        "count__n",
        "sum_v__n",
        "sum_v__sum",
        "var_v__sumsq",
        "var_v__sumsq_big",
        "max_v__value",
        "first_v__at_seq",
        "sum_iv__sum",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    assert_eq!(
        parts[0]
            .schema()
            .metadata()
            .get("windgate.partials")
            .map(String::as_str),
        Some("1")
    );
}

#[test]
fn bad_partials_are_named_errors() {
    let c = small_case();
    let parts = phase_one(&c);
    let p = parts.iter().find(|b| b.num_rows() > 0).unwrap();
    let mut opts = case_options(&c);
    opts.input = InputKind::Partials;

    // A missing state column.
    let i = p.schema().index_of("sum_v__sum").unwrap();
    let mut missing = p.clone();
    missing.remove_column(i);
    let err = WindowAggregator::new(opts.clone())
        .unwrap()
        .push(&missing, 0)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ColumnNotFound, "{err}");
    assert!(err.to_string().contains("sum_v__sum"), "{err}");

    // A corrupted exact sum.
    let mut cols = p.columns().to_vec();
    cols[i] = Arc::new(BinaryArray::from_iter_values(
        (0..p.num_rows()).map(|_| [9u8, 0]),
    ));
    let corrupt = RecordBatch::try_new(p.schema(), cols).unwrap();
    let mut agg = WindowAggregator::new(opts.clone()).unwrap();
    let err = agg.push(&corrupt, 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidValue, "{err}");
    assert!(err.to_string().contains("sum_v__sum"), "{err}");
    // Refused whole: the operator is still usable and the good rows go in after.
    agg.push(p, 0).unwrap();

    // Another format version.
    let fields: Vec<Arc<Field>> = p.schema().fields().iter().cloned().collect();
    let v2 = Schema::new_with_metadata(fields, [("windgate.partials".into(), "2".into())].into());
    let other = RecordBatch::try_new(Arc::new(v2), p.columns().to_vec()).unwrap();
    let err = WindowAggregator::new(opts.clone())
        .unwrap()
        .push(&other, 0)
        .unwrap_err();
    assert!(err.to_string().contains("format version 2"), "{err}");

    // output="partials" needs the pane engine.
    let mut farm = case_options(&c);
    farm.output = OutputKind::Partials;
    farm.strategy = Strategy::Farm;
    assert!(WindowAggregator::new(farm).is_err());
}

#[test]
fn an_empty_partial_batch_without_a_state_column_is_refused() {
    let c = small_case();
    let parts = phase_one(&c);
    let p = &parts[0];
    assert_eq!(p.num_rows(), 0);
    let mut missing = p.clone();
    missing.remove_column(p.schema().index_of("sum_v__sum").unwrap());
    let mut opts = case_options(&c);
    opts.input = InputKind::Partials;
    let err = WindowAggregator::new(opts)
        .unwrap()
        .push(&missing, 0)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ColumnNotFound, "{err}");
}

#[test]
fn a_null_extreme_beside_a_count_is_refused() {
    let c = small_case();
    let parts = phase_one(&c);
    let p = parts.iter().find(|b| b.num_rows() > 0).unwrap();
    let i = p.schema().index_of("max_v__value").unwrap();
    let mut cols = p.columns().to_vec();
    cols[i] = Arc::new(arrow_array::Float64Array::new_null(p.num_rows()));
    let nulled = RecordBatch::try_new(p.schema(), cols).unwrap();
    let mut opts = case_options(&c);
    opts.input = InputKind::Partials;
    let err = WindowAggregator::new(opts)
        .unwrap()
        .push(&nulled, 0)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidValue, "{err}");
    assert!(err.to_string().contains("max_v__value"), "{err}");
}
