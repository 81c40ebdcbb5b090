//! Deeply nested predicates and expressions: chains of one `and`/`or` and double negations of any depth
//! run (they are merged when parsed), other nesting runs up to `MAX_EXPR_DEPTH` levels on every executor,
//! and deeper nesting is an error naming the parameter, never a stack overflow (parsing, binding,
//! evaluating on a worker's stack and dropping never recurse on what they merge).

use std::sync::Arc;

use arrow_array::{Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use windgate_core::ErrorKind;
use windgate_core::columnar::{
    ColumnarPipeline, DEFAULT_CHUNK_ROWS, MAX_EXPR_DEPTH, RunMode, Value,
};
use windgate_core::runtime::pipeline::PipelineOptions;

fn l(v: Vec<Value>) -> Value {
    Value::List(v)
}

fn ne(i: i64) -> Value {
    l(vec!["!=".into(), "a".into(), i.into()])
}

fn data() -> (SchemaRef, RecordBatch) {
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
    let a = Int64Array::from((0..10).collect::<Vec<i64>>());
    let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(a)]).unwrap();
    (schema, b)
}

fn modes() -> Vec<RunMode> {
    let mut m = vec![RunMode::Sequential];
    for threads in [1, 2] {
        m.push(RunMode::Parallel(PipelineOptions {
            threads,
            ..Default::default()
        }));
    }
    m
}

/// Column `out` (or `a`) of the output on every executor (all equal).
fn run(kind: &str, params: Value, out: &str) -> Vec<i64> {
    let pipeline = ColumnarPipeline::new().push(kind, &params).unwrap();
    let (schema, b) = data();
    let mut results = modes().into_iter().map(|mode| {
        let o = pipeline
            .run_with(
                schema.clone(),
                vec![Ok(b.clone())].into_iter(),
                &mode,
                DEFAULT_CHUNK_ROWS,
                &mut || Ok(()),
            )
            .unwrap();
        o.batches
            .iter()
            .flat_map(|b| {
                let c = b.column_by_name(out).unwrap();
                let c = arrow_cast::cast(c, &DataType::Int64).unwrap();
                let c = c.as_any().downcast_ref::<Int64Array>().unwrap().clone();
                (0..c.len()).map(move |i| c.value(i)).collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    });
    let first = results.next().unwrap();
    for r in results {
        assert_eq!(r, first);
    }
    first
}

fn filter(predicate: Value) -> Value {
    Value::map([("predicate", predicate)])
}

fn project(expr: Value) -> Value {
    Value::map([("columns", Value::Map(vec![("x".into(), expr)]))])
}

/// `((a != 0) and (a != 1)) and ...`, nested to the left like Python's `reduce(and_, ...)`.
fn and_chain(n: i64) -> Value {
    let mut p = ne(0);
    for i in 1..n {
        p = l(vec!["and".into(), p, ne(i)]);
    }
    p
}

#[test]
fn long_and_or_chains_are_merged() {
    for n in [2_000, 100_000] {
        assert_eq!(run("filter", filter(and_chain(n)), "a"), Vec::<i64>::new());
    }
    // `a != 9 or (a != 8 or (...))`, nested to the right: true for every row.
    let mut p = ne(0);
    for i in 1..100_000 {
        p = l(vec!["or".into(), ne(i % 10), p]);
    }
    assert_eq!(run("filter", filter(p), "a"), (0..10).collect::<Vec<_>>());
}

#[test]
fn double_negations_are_removed() {
    let mut p = l(vec!["<".into(), "a".into(), 3i64.into()]);
    for _ in 0..100_001 {
        p = l(vec!["not".into(), p]);
    }
    assert_eq!(run("filter", filter(p), "a"), (3..10).collect::<Vec<_>>());
}

/// `not (a != 0 and not (a != 1 and not (...)))`: alternating, so nothing merges; `levels` levels.
fn alternating(levels: usize) -> Value {
    let mut p = ne(0);
    let mut depth = 1;
    let mut i = 1;
    while depth < levels {
        p = if depth % 2 == 1 {
            l(vec!["not".into(), p])
        } else {
            l(vec!["and".into(), ne(i), p])
        };
        depth += 1;
        i = (i + 1) % 10;
    }
    p
}

#[test]
fn nesting_up_to_the_bound_runs_and_deeper_is_a_named_error() {
    let rows = run("filter", filter(alternating(MAX_EXPR_DEPTH)), "a");
    assert!(rows.len() <= 10);
    for deep in [MAX_EXPR_DEPTH + 1, 100_000] {
        let e = ColumnarPipeline::new()
            .push("filter", &filter(alternating(deep)))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidParameter, "{e}");
        assert!(e.message().starts_with("filter: predicate"), "{e}");
        assert!(
            e.message().contains(&format!("at most {MAX_EXPR_DEPTH}")),
            "{e}"
        );
    }
}

/// `((a + 1) * 2 + 1) * 2 ...`, `levels` levels of arithmetic.
fn arith_chain(levels: usize) -> Value {
    let mut e: Value = "a".into();
    for d in 1..levels {
        let (op, k) = if d % 2 == 1 { ("+", 1i64) } else { ("*", 1) };
        e = l(vec![op.into(), e, k.into()]);
    }
    e
}

#[test]
fn deep_arithmetic_runs_up_to_the_bound() {
    let levels = MAX_EXPR_DEPTH;
    let got = run("project", project(arith_chain(levels)), "x");
    let adds = levels as i64 / 2; // one "+ 1" every other level
    assert_eq!(got, (0..10).map(|a| a + adds).collect::<Vec<_>>());
    for deep in [MAX_EXPR_DEPTH + 1, 100_000] {
        let e = ColumnarPipeline::new()
            .push("project", &project(arith_chain(deep)))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidParameter, "{e}");
        assert!(e.message().starts_with("project: columns[\"x\"]"), "{e}");
    }
}

#[test]
fn an_empty_isin_keeps_no_row() {
    let p = l(vec!["isin".into(), "a".into(), l(vec![])]);
    assert_eq!(run("filter", filter(p.clone()), "a"), Vec::<i64>::new());
    let not = l(vec!["not".into(), p]);
    assert_eq!(run("filter", filter(not), "a"), (0..10).collect::<Vec<_>>());
}
