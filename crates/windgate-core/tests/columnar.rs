//! The built-in columnar operators against plain row-at-a-time implementations, batch-cut independence,
//! and random chains of them: parallel runs (every thread count, scheduler, reorder and partitioning
//! scheme, random partition counts and batch cuts) equal the sequential executor.

mod columnar_reference;
mod columnar_support;

use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use columnar_reference::*;
use columnar_support::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use windgate_core::ErrorKind;
use windgate_core::columnar::{ColumnarPipeline, Value};

fn op(kind: &str, params: Value) -> ColumnarPipeline {
    ColumnarPipeline::new().push(kind, &params).unwrap()
}

fn l(v: Vec<Value>) -> Value {
    Value::List(v)
}

fn eq_pred(col: &str, v: Value) -> Value {
    l(vec!["==".into(), col.into(), v])
}

// ---- per-operator checks ----------------------------------------------------------------------------

fn check(
    pipeline: &ColumnarPipeline,
    data: &[Row],
    expected: Result<Vec<String>, ErrorKind>,
    cuts: &[usize],
    options: &windgate_core::runtime::pipeline::PipelineOptions,
    chunk: usize,
) -> Result<(), TestCaseError> {
    let b = batch(data);
    let schema: SchemaRef = b.schema();
    let seq = sequential(pipeline, &schema, cut(&b, cuts));
    let par = parallel(pipeline, &schema, vec![b.clone()], options, chunk);
    match expected {
        Ok(rows) => {
            prop_assert_eq!(
                norm(
                    seq.clone()
                        .map_err(|e| TestCaseError::fail(e.to_string()))?
                ),
                norm(rows)
            );
        }
        Err(kind) => prop_assert_eq!(seq.as_ref().err().map(|e| e.kind()), Some(kind)),
    }
    prop_assert!(
        same(&seq, &par),
        "sequential {:?} vs parallel {:?}",
        seq,
        par
    );
    Ok(())
}

fn sessionize(gap: i64, lateness: i64, partitions: i64) -> ColumnarPipeline {
    op(
        "sessionize",
        Value::map([
            ("key", "k".into()),
            ("time", "ts".into()),
            ("gap", gap.into()),
            ("lateness", lateness.into()),
            ("values", "v".into()),
            (
                "counts",
                Value::Map(vec![("carts".into(), eq_pred("e", "cart".into()))]),
            ),
            ("partitions", partitions.into()),
        ]),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sessionize_matches_reference(
        data in rows(120, 3), gap in 0i64..12, lateness in prop::sample::select(vec![0i64, 2, 5]),
        p in 1i64..9, cuts in prop::collection::vec(any::<usize>(), 0..6), o in any_options(), chunk in 1usize..40,
    ) {
        check(&sessionize(gap, lateness, p), &data, ref_sessions(&data, gap, lateness), &cuts, &o, chunk)?;
    }

    #[test]
    fn window_count_matches_reference(
        data in rows(120, 0), size in 1i64..20, min in 1i64..3, top in prop::option::of(1usize..4),
        p in 1i64..9, cuts in prop::collection::vec(any::<usize>(), 0..6), o in any_options(), chunk in 1usize..40,
    ) {
        let mut params = vec![
            ("keys".to_string(), Value::from("k")), ("time".into(), "ts".into()), ("size".into(), size.into()),
            ("min_count".into(), min.into()), ("partitions".into(), p.into()),
        ];
        if let Some(t) = top { params.push(("top_k".into(), (t as i64).into())); }
        let pipeline = op("window_count", Value::Map(params));
        check(&pipeline, &data, ref_window_count(&data, size, min, top), &cuts, &o, chunk)?;
    }

    #[test]
    fn last_n_before_matches_reference(
        data in rows(120, 3), n in 1i64..4, within in 0i64..30, p in 1i64..9,
        cuts in prop::collection::vec(any::<usize>(), 0..6), o in any_options(), chunk in 1usize..40,
    ) {
        let pipeline = op("last_n_before", Value::map([
            ("key", "k".into()), ("time", "ts".into()), ("value", "v".into()),
            ("trigger", eq_pred("e", "buy".into())), ("candidate", eq_pred("e", "view".into())),
            ("n", n.into()), ("within", within.into()), ("output", "prev".into()), ("partitions", p.into()),
        ]));
        check(&pipeline, &data, ref_last_n(&data, n as usize, within), &cuts, &o, chunk)?;
    }

    #[test]
    fn pairs_of_sessions_match_reference(
        data in rows(100, 0), gap in 0i64..8, cuts in prop::collection::vec(any::<usize>(), 0..6),
        o in any_options(), chunk in 1usize..40,
    ) {
        let pipeline = sessionize(gap, 0, 4).push("pairs", &Value::map([("column", "v".into())])).unwrap();
        check(&pipeline, &data, Ok(ref_pairs(&data, gap)), &cuts, &o, chunk)?;
    }

    #[test]
    fn regression_matches_reference(
        data in rows(150, 0), bucket in 1i64..10, max in prop::option::of(-1.0f64..1.0), p in 1i64..5,
        cuts in prop::collection::vec(any::<usize>(), 0..6), o in any_options(), chunk in 1usize..40,
    ) {
        let mut params = vec![
            ("key".to_string(), Value::from("k")), ("time".into(), "ts".into()), ("value".into(), "v".into()),
            ("bucket".into(), bucket.into()), ("partitions".into(), p.into()),
        ];
        if let Some(m) = max { params.push(("max_slope".into(), m.into())); }
        let pipeline = op("regression", Value::Map(params));
        check(&pipeline, &data, Ok(ref_regression(&data, bucket, max)), &cuts, &o, chunk)?;
    }

    #[test]
    fn topk_and_stateless_ops_match_reference(
        data in rows(120, 0), k in 1i64..4, cuts in prop::collection::vec(any::<usize>(), 0..6),
        o in any_options(), chunk in 1usize..40,
    ) {
        let topk = ColumnarPipeline::new()
            .push("topk", &Value::map([("k", k.into()), ("score", "v".into()), ("keys", "k".into()),
                ("window", "w".into())])).unwrap();
        let w: Vec<i64> = data.iter().map(|r| r.ts / 10).collect();
        let b = batch(&data);
        let b = RecordBatch::try_from_iter(
            b.schema().fields().iter().map(|f| f.name().clone()).zip(b.columns().iter().cloned())
                .chain([("w".to_string(), Arc::new(Int64Array::from(w)) as _)]),
        ).unwrap();
        let schema = b.schema();
        let seq = sequential(&topk, &schema, cut(&b, &cuts)).unwrap();
        prop_assert_eq!(&seq, &ref_topk(&data, k as usize));
        let par = parallel(&topk, &schema, vec![b.clone()], &o, chunk).unwrap();
        prop_assert_eq!(&seq, &par);
        // filter + running_mean: mean of v over the kept rows.
        let fm = ColumnarPipeline::new()
            .push("filter", &Value::map([("predicate", l(vec!["!=".into(), "e".into(), "cart".into()]))])).unwrap()
            .push("running_mean", &Value::map([("column", "v".into())])).unwrap();
        let got = sequential(&fm, &schema, cut(&b, &cuts)).unwrap();
        let (mut n, mut s) = (0i64, 0i64);
        let want: Vec<String> = data.iter().filter(|r| r.e != "cart").map(|r| {
            if let Some(v) = r.v { n += 1; s += v; }
            let mean = if n == 0 { "null".to_string() } else { format!("{:?}", s as f64 / n as f64) };
            format!("{}|{}|{}|{}|{}|{}", r.ts, opt(r.k), opt(r.v), r.e, r.ts / 10, mean)
        }).collect();
        prop_assert_eq!(norm(got.clone()), norm(want));
        prop_assert_eq!(got, parallel(&fm, &schema, vec![b], &o, chunk).unwrap());
    }
}

// ---- random chains: parallel == sequential --------------------------------------------------------

/// A random valid chain over the test schema (ts, k, v, e), with partition counts `p` for its partitioned
/// operators: filters, then one of several tails exercising every operator.
fn chain(shape: u8, gap: i64, size: i64, p: i64) -> ColumnarPipeline {
    let mut c = ColumnarPipeline::new();
    let push = |c: ColumnarPipeline, kind: &str, v: Value| c.push(kind, &v).unwrap();
    if shape & 1 == 1 {
        c = push(
            c,
            "filter",
            Value::map([(
                "predicate",
                l(vec![
                    "or".into(),
                    l(vec!["is_null".into(), "v".into()]),
                    l(vec![">=".into(), "v".into(), 2.into()]),
                ]),
            )]),
        );
    }
    match shape >> 1 {
        0 => {
            c = push(
                c,
                "sessionize",
                Value::map([
                    ("key", "k".into()),
                    ("time", "ts".into()),
                    ("gap", gap.into()),
                    ("values", "v".into()),
                    ("partitions", p.into()),
                ]),
            );
            c = push(
                c,
                "pairs",
                Value::map([("column", "v".into()), ("names", Value::strs(&["a", "b"]))]),
            );
            c = push(
                c,
                "window_count",
                Value::map([
                    ("keys", Value::strs(&["a", "b"])),
                    ("time", "session_end".into()),
                    ("size", size.into()),
                    ("partitions", (p + 1).into()),
                ]),
            );
            c = push(
                c,
                "topk",
                Value::map([
                    ("k", 3.into()),
                    ("score", "count".into()),
                    ("keys", Value::strs(&["a", "b"])),
                    ("window", "window_start".into()),
                ]),
            );
        }
        1 => {
            c = push(
                c,
                "last_n_before",
                Value::map([
                    ("key", "k".into()),
                    ("time", "ts".into()),
                    ("value", "v".into()),
                    ("trigger", eq_pred("e", "buy".into())),
                    ("n", 3.into()),
                    ("within", (size * 3).into()),
                    ("output", "prev".into()),
                    ("partitions", p.into()),
                ]),
            );
            c = push(
                c,
                "window_count",
                Value::map([
                    ("keys", "prev".into()),
                    ("top_k", 4.into()),
                    ("partitions", p.into()),
                ]),
            );
        }
        2 => {
            c = push(
                c,
                "sessionize",
                Value::map([
                    ("key", "k".into()),
                    ("time", "ts".into()),
                    ("gap", gap.into()),
                    (
                        "counts",
                        Value::Map(vec![("carts".into(), eq_pred("e", "cart".into()))]),
                    ),
                    ("partitions", p.into()),
                ]),
            );
            c = push(
                c,
                "filter",
                Value::map([("predicate", l(vec![">".into(), "carts".into(), 0.into()]))]),
            );
            c = push(c, "running_mean", Value::map([("column", "rows".into())]));
        }
        _ => {
            c = push(
                c,
                "project",
                Value::map([(
                    "columns",
                    Value::Map(vec![
                        ("k".into(), "k".into()),
                        ("ts".into(), "ts".into()),
                        ("amount".into(), l(vec!["*".into(), "v".into(), 3.into()])),
                    ]),
                )]),
            );
            c = push(
                c,
                "regression",
                Value::map([
                    ("key", "k".into()),
                    ("time", "ts".into()),
                    ("value", "amount".into()),
                    ("bucket", size.into()),
                    ("max_slope", 0.5.into()),
                    ("partitions", p.into()),
                ]),
            );
        }
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_chains_parallel_equals_sequential(
        data in rows(200, 0), shape in 0u8..8, gap in 0i64..10, size in 1i64..30, p1 in 1i64..9, p2 in 1i64..9,
        cuts in prop::collection::vec(any::<usize>(), 0..8), o in any_options(), chunk in 1usize..64,
    ) {
        let b = batch(&data);
        let schema = b.schema();
        let seq = sequential(&chain(shape, gap, size, p1), &schema, vec![b.clone()]);
        let seq_cut = sequential(&chain(shape, gap, size, p2), &schema, cut(&b, &cuts));
        prop_assert!(same(&seq, &seq_cut), "batch cuts or partition counts changed the result");
        let par = parallel(&chain(shape, gap, size, p2), &schema, cut(&b, &cuts), &o, chunk);
        prop_assert!(same(&seq, &par), "{:?}\nvs\n{:?}", seq, par);
    }
}

/// Every option set of the grid on a few fixed inputs, for every chain shape.
#[test]
fn chains_on_the_whole_option_grid() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let data = rows(300, 0).new_tree(&mut runner).unwrap().current();
    let b = batch(&data);
    let schema = b.schema();
    for shape in 0..8u8 {
        let seq = sequential(&chain(shape, 4, 12, 5), &schema, vec![b.clone()]).unwrap();
        for (i, o) in grid().iter().enumerate() {
            let par = parallel(
                &chain(shape, 4, 12, 1 + (i as i64 % 7)),
                &schema,
                vec![b.clone()],
                o,
                1 + i % 50,
            )
            .unwrap();
            assert_eq!(seq, par, "shape {shape}, options {o:?}");
        }
    }
}

// ---- small hand-checked cases and errors ----------------------------------------------------------

fn r(ts: i64, k: i64, v: i64, e: &'static str) -> Row {
    Row {
        ts,
        k: Some(k),
        v: Some(v),
        e,
    }
}

#[test]
fn sessions_by_hand() {
    let data = [
        r(0, 1, 10, "view"),
        r(5, 2, 20, "cart"),
        r(8, 1, 11, "cart"),
        r(30, 1, 12, "view"),
        r(31, 2, 21, "view"),
    ];
    let got = sequential(
        &sessionize(10, 0, 3),
        &batch(&data).schema(),
        vec![batch(&data)],
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            "2|5|5|1|1|[20]",
            "1|0|8|2|1|[10, 11]",
            "1|30|30|1|0|[12]",
            "2|31|31|1|0|[21]"
        ]
    );
}

#[test]
fn unordered_key_is_an_error_naming_column_and_row() {
    let data = [r(5, 1, 0, "view"), r(6, 2, 0, "view"), r(4, 1, 0, "view")];
    let err = sequential(
        &sessionize(10, 5, 2),
        &batch(&data).schema(),
        vec![batch(&data)],
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LateRow);
    assert!(
        err.message().contains("column 'ts'") && err.message().contains("row 2"),
        "{err}"
    );
    let allowed = op(
        "sessionize",
        Value::map([
            ("key", "k".into()),
            ("time", "ts".into()),
            ("gap", 10.into()),
            ("allow_unordered", true.into()),
        ]),
    );
    let got = sequential(&allowed, &batch(&data).schema(), vec![batch(&data)]).unwrap();
    assert_eq!(got, vec!["1|4|5|2", "2|6|6|1"]);
}

#[test]
fn late_window_row_is_an_error() {
    let data = [r(5, 1, 0, "view"), r(25, 2, 0, "view"), r(9, 1, 0, "view")];
    let p = op(
        "window_count",
        Value::map([
            ("keys", "k".into()),
            ("time", "ts".into()),
            ("size", 10.into()),
        ]),
    );
    let err = sequential(&p, &batch(&data).schema(), vec![batch(&data)]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LateRow);
    assert!(err.message().contains("row 2"), "{err}");
}

#[test]
fn bad_parameters_name_the_operator_and_parameter() {
    let schema = batch(&[]).schema();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "sessionize",
            Value::map([("key", "k".into()), ("time", "ts".into())]),
            "sessionize: gap",
        ),
        (
            "sessionize",
            Value::map([
                ("key", "nope".into()),
                ("time", "ts".into()),
                ("gap", 1.into()),
            ]),
            "sessionize: key",
        ),
        (
            "sessionize",
            Value::map([("key", "k".into()), ("time", "e".into()), ("gap", 1.into())]),
            "column 'e'",
        ),
        (
            "window_count",
            Value::map([("keys", "k".into()), ("size", 5.into())]),
            "window_count: time",
        ),
        (
            "window_count",
            Value::map([
                ("keys", "k".into()),
                ("time", "ts".into()),
                ("size", 0.into()),
            ]),
            "window_count: size",
        ),
        (
            "topk",
            Value::map([("k", 0.into()), ("score", "v".into())]),
            "topk: k",
        ),
        (
            "topk",
            Value::map([("k", 2.into()), ("score", "e".into())]),
            "topk: score",
        ),
        (
            "pairs",
            Value::map([("column", "v".into())]),
            "pairs: column 'v' must be a list",
        ),
        (
            "filter",
            Value::map([("predicate", eq_pred("k", "x".into()))]),
            "filter: predicate",
        ),
        (
            "filter",
            Value::map([("predicte", eq_pred("k", 1.into()))]),
            "unknown parameter \"predicte\"",
        ),
        (
            "regression",
            Value::map([
                ("key", "k".into()),
                ("time", "ts".into()),
                ("value", "e".into()),
                ("bucket", 3.into()),
            ]),
            "regression: column 'e'",
        ),
        ("nope", Value::Null, "unknown operator"),
    ];
    for (kind, params, needle) in cases {
        let err = ColumnarPipeline::new()
            .push(kind, &params)
            .and_then(|p| p.output_schema(&schema))
            .expect_err(needle);
        assert!(
            err.to_string().contains(needle),
            "{kind}: {err} (expected {needle:?})"
        );
    }
}

#[test]
fn a_batch_with_another_schema_is_an_error() {
    let b = batch(&[r(1, 1, 1, "view")]);
    let other =
        RecordBatch::try_from_iter([("ts", Arc::new(StringArray::from(vec!["x"])) as _)]).unwrap();
    let p = op(
        "filter",
        Value::map([("predicate", l(vec!["is_null".into(), "v".into()]))]),
    );
    let err = sequential(&p, &b.schema(), vec![b.clone(), other]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch);
    assert!(err.message().starts_with("data:"), "{err}");
}
