//! The built-in columnar operators against plain row-at-a-time implementations, batch-cut independence,
//! and random chains of them: parallel runs (every thread count, scheduler, reorder and partitioning
//! scheme, random partition counts and batch cuts) equal the sequential executor.

mod columnar_support;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use columnar_support::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use windgate_core::ErrorKind;
use windgate_core::columnar::{ColumnarPipeline, Value};

#[derive(Debug, Clone)]
struct Row {
    ts: i64,
    k: Option<i64>,
    v: Option<i64>,
    e: &'static str,
}

const EVENTS: [&str; 3] = ["view", "cart", "buy"];

fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_from_iter([
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.ts))) as _,
        ),
        (
            "k",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.k))) as _,
        ),
        (
            "v",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.v))) as _,
        ),
        (
            "e",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.e))) as _,
        ),
    ])
    .unwrap()
}

/// Rows in time order with small steps, a few keys (null among them), some null values; then a few
/// swaps of neighbours with different keys whose times differ by at most `disorder` (each key stays in time
/// order).
fn rows(max: usize, disorder: i64) -> impl Strategy<Value = Vec<Row>> {
    let row = (
        0i64..4,
        prop::option::weighted(0.9, 0i64..6),
        prop::option::weighted(0.9, 0i64..8),
        0usize..3,
    );
    (
        prop::collection::vec(row, 0..max),
        prop::collection::vec(any::<usize>(), 0..8),
    )
        .prop_map(move |(raw, swaps)| {
            let mut ts = 100;
            let mut out: Vec<Row> = raw
                .into_iter()
                .map(|(step, k, v, e)| {
                    ts += if step == 3 { 9 } else { step };
                    Row {
                        ts,
                        k,
                        v,
                        e: EVENTS[e],
                    }
                })
                .collect();
            for s in swaps {
                if out.len() > 1 {
                    let i = s % (out.len() - 1);
                    let (a, b) = (&out[i], &out[i + 1]);
                    if a.k != b.k && b.ts - a.ts <= disorder {
                        out.swap(i, i + 1);
                    }
                }
            }
            out
        })
}

fn op(kind: &str, params: Value) -> ColumnarPipeline {
    ColumnarPipeline::new().push(kind, &params).unwrap()
}

fn l(v: Vec<Value>) -> Value {
    Value::List(v)
}

fn eq_pred(col: &str, v: Value) -> Value {
    l(vec!["==".into(), col.into(), v])
}

fn opt(v: Option<i64>) -> String {
    v.map_or("null".into(), |x| x.to_string())
}

// ---- reference implementations ----------------------------------------------------------------------

/// Sessions of `k` by `ts` with `gap` and `lateness`, values `v` and a count of carts, closed by stream
/// time, each row's closings in (end, key) order.
fn ref_sessions(rows: &[Row], gap: i64, lateness: i64) -> Result<Vec<String>, ErrorKind> {
    struct S {
        start: i64,
        end: i64,
        last: i64,
        n: i64,
        carts: i64,
        vals: Vec<Option<i64>>,
    }
    let fmt = |k: Option<i64>, s: &S| {
        let vals: Vec<String> = s.vals.iter().map(|v| opt(*v)).collect();
        format!(
            "{}|{}|{}|{}|{}|[{}]",
            opt(k),
            s.start,
            s.end,
            s.n,
            s.carts,
            vals.join(", ")
        )
    };
    let mut open: BTreeMap<Option<i64>, S> = BTreeMap::new();
    let mut out = Vec::new();
    let mut runmax = i64::MIN;
    let close_due = |open: &mut BTreeMap<Option<i64>, S>,
                     wm: i64,
                     closed: &mut Vec<(i64, Option<i64>, String)>| {
        let due: Vec<Option<i64>> = open
            .iter()
            .filter(|(_, s)| s.end + gap < wm)
            .map(|(k, _)| *k)
            .collect();
        for k in due {
            let s = open.remove(&k).unwrap();
            closed.push((s.end, k, fmt(k, &s)));
        }
    };
    for r in rows {
        runmax = runmax.max(r.ts);
        let wm = runmax - lateness;
        let mut closed = Vec::new();
        close_due(&mut open, wm, &mut closed);
        let add = |s: &mut S| {
            s.end = s.end.max(r.ts);
            s.start = s.start.min(r.ts);
            s.last = r.ts;
            s.n += 1;
            s.carts += (r.e == "cart") as i64;
            s.vals.push(r.v);
        };
        match open.get_mut(&r.k) {
            Some(s) if r.ts < s.last => return Err(ErrorKind::LateRow),
            Some(s) if r.ts - s.end <= gap => add(s),
            existing => {
                if existing.is_some() {
                    let s = open.remove(&r.k).unwrap();
                    closed.push((s.end, r.k, fmt(r.k, &s)));
                }
                let mut s = S {
                    start: r.ts,
                    end: r.ts,
                    last: r.ts,
                    n: 0,
                    carts: 0,
                    vals: vec![],
                };
                add(&mut s);
                open.insert(r.k, s);
            }
        }
        close_due(&mut open, wm, &mut closed);
        closed.sort_by_key(|(end, k, _)| (*end, *k));
        out.extend(closed.into_iter().map(|c| c.2));
    }
    let mut rest: Vec<_> = open
        .into_iter()
        .map(|(k, s)| (s.end, k, fmt(k, &s)))
        .collect();
    rest.sort_by_key(|(end, k, _)| (*end, *k));
    out.extend(rest.into_iter().map(|c| c.2));
    Ok(out)
}

/// Counts per (k, tumbling window of `size`) closed by stream time, `min` and optional `top`.
fn ref_window_count(
    rows: &[Row],
    size: i64,
    min: i64,
    top: Option<usize>,
) -> Result<Vec<String>, ErrorKind> {
    let mut windows: BTreeMap<i64, BTreeMap<Option<i64>, i64>> = BTreeMap::new();
    let mut out = Vec::new();
    let mut runmax = i64::MIN;
    let emit = |start: i64, counts: BTreeMap<Option<i64>, i64>, out: &mut Vec<String>| {
        let mut kept: Vec<(Option<i64>, i64)> =
            counts.into_iter().filter(|(_, c)| *c >= min).collect();
        if let Some(k) = top {
            kept.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            kept.truncate(k);
        }
        out.extend(
            kept.into_iter()
                .map(|(k, c)| format!("{}|{start}|{}|{c}", opt(k), start + size)),
        );
    };
    for r in rows {
        runmax = runmax.max(r.ts);
        while let Some((&s, _)) = windows.first_key_value() {
            if s + size > runmax {
                break;
            }
            let (s, c) = windows.pop_first().unwrap();
            emit(s, c, &mut out);
        }
        let start = r.ts.div_euclid(size) * size;
        if start + size <= runmax {
            return Err(ErrorKind::LateRow);
        }
        *windows.entry(start).or_default().entry(r.k).or_default() += 1;
    }
    for (s, c) in windows {
        emit(s, c, &mut out);
    }
    Ok(out)
}

fn ref_last_n(rows: &[Row], n: usize, within: i64) -> Result<Vec<String>, ErrorKind> {
    type Recent = (i64, VecDeque<(i64, Option<i64>)>);
    let mut recent: HashMap<Option<i64>, Recent> = HashMap::new();
    let mut out = Vec::new();
    for r in rows {
        let (last, q) = recent.entry(r.k).or_insert((r.ts, VecDeque::new()));
        if r.ts < *last {
            return Err(ErrorKind::LateRow);
        }
        *last = r.ts;
        if r.e == "buy" {
            for (t, v) in q.iter().rev() {
                if *t < r.ts - within {
                    break;
                }
                out.push(format!("{}|{}|{}|{}", opt(r.k), r.ts, opt(r.v), opt(*v)));
            }
        }
        if r.e == "view" {
            if q.len() == n {
                q.pop_front();
            }
            q.push_back((r.ts, r.v));
        }
    }
    Ok(out)
}

fn ref_pairs(rows: &[Row], gap: i64) -> Vec<String> {
    // Sessions (no lateness, no carts column) then pairs of distinct non-null values.
    let mut out = Vec::new();
    for s in ref_sessions(rows, gap, 0).unwrap() {
        let parts: Vec<&str> = s.split('|').collect();
        let vals = parts[5].trim_matches(|c| c == '[' || c == ']');
        let mut v: Vec<i64> = vals.split(", ").filter_map(|x| x.parse().ok()).collect();
        v.sort_unstable();
        v.dedup();
        for i in 0..v.len() {
            for j in i + 1..v.len() {
                out.push(format!(
                    "{}|{}|{}|{}|{}|{}|{}",
                    parts[0], parts[1], parts[2], parts[3], parts[4], v[i], v[j]
                ));
            }
        }
    }
    out
}

fn ref_regression(rows: &[Row], bucket: i64, max_slope: Option<f64>) -> Vec<String> {
    #[derive(Default)]
    struct Fit {
        first: Option<i64>,
        n: i128,
        sx: i128,
        sxx: i128,
        sy: i128,
        sxy: i128,
    }
    let mut open: BTreeMap<i64, BTreeMap<Option<i64>, i128>> = BTreeMap::new();
    let mut fits: HashMap<Option<i64>, Fit> = HashMap::new();
    let mut out = Vec::new();
    let mut runmax = i64::MIN;
    let mut close = |b: i64, sums: BTreeMap<Option<i64>, i128>, out: &mut Vec<String>| {
        for (k, y) in sums {
            let f = fits.entry(k).or_default();
            let x = (b - *f.first.get_or_insert(b)) as i128;
            f.n += 1;
            f.sx += x;
            f.sxx += x * x;
            f.sy += y;
            f.sxy += x * y;
            if f.n < 2 {
                continue;
            }
            let den = f.n * f.sxx - f.sx * f.sx;
            let slope = (f.n * f.sxy - f.sx * f.sy) as f64 / den as f64;
            let icp = (f.sy * f.sxx - f.sx * f.sxy) as f64 / den as f64;
            if max_slope.is_some_and(|m| slope > m) {
                continue;
            }
            out.push(format!(
                "{}|{}|{}|{slope:?}|{icp:?}",
                opt(k),
                b * bucket,
                f.n
            ));
        }
    };
    for r in rows {
        runmax = runmax.max(r.ts);
        while let Some((&b, _)) = open.first_key_value() {
            if (b + 1) * bucket > runmax {
                break;
            }
            let (b, s) = open.pop_first().unwrap();
            close(b, s, &mut out);
        }
        if let Some(v) = r.v {
            *open
                .entry(r.ts.div_euclid(bucket))
                .or_default()
                .entry(r.k)
                .or_default() += v as i128;
        }
    }
    for (b, s) in std::mem::take(&mut open) {
        close(b, s, &mut out);
    }
    out
}

fn ref_topk(rows: &[Row], k: usize) -> Vec<String> {
    // Window = ts / 10 (rows grouped by it in order); score v desc nulls last; key k asc nulls first.
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let w = rows[i].ts / 10;
        let mut j = i;
        while j < rows.len() && rows[j].ts / 10 == w {
            j += 1;
        }
        let mut g: Vec<&Row> = rows[i..j].iter().collect();
        g.sort_by(|a, b| {
            match (a.v, b.v) {
                (Some(x), Some(y)) => y.cmp(&x),
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, None) => std::cmp::Ordering::Equal,
            }
            .then(a.k.cmp(&b.k))
        });
        out.extend(
            g.into_iter()
                .take(k)
                .map(|r| format!("{}|{}|{}|{}|{}", r.ts, opt(r.k), opt(r.v), r.e, w)),
        );
        i = j;
    }
    out
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
