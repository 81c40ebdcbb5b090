//! The band join of Gulisano et al., *ScaleJoin: a Deterministic, Disjoint-Parallel and Skew-Resilient Stream
//! Join*: R<ts, x, y>, S<ts, a, b>, x, y, a, b uniform on [1, 10000],
//! predicate |x - a| <= 10 and |y - b| <= 10 (about 1 in 250,000 pairs), 100 rows per time unit per side.
//!
//! * `index_off`: every thread scans its whole portion; throughput = comparisons (the paper's c/s; the target
//!   is >= 1 G per processing thread).
//! * `index_on`: the per-thread cell index; throughput = time-band candidate pairs, comparable with DuckDB's
//!   0.3 s for 100k rows a side and window 100 (about 2 G pairs).

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use windgate_core::join::{BandJoinOptions, BandJoiner, JoinStrategy, Predicate, Side};
use windgate_core::time::Span;

const WINDOW: i64 = 100;
const RATE: usize = 100;

fn side(rows: usize, names: [&str; 2], seed: u64) -> RecordBatch {
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let ts = Int64Array::from_iter_values((0..rows).map(|i| (i / RATE) as i64));
    let ints = Int64Array::from_iter_values((0..rows).map(|_| (next() % 10_000 + 1) as i64));
    let floats =
        Float64Array::from_iter_values((0..rows).map(|_| 1.0 + (next() % 9_999_000) as f64 / 1e3));
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new(names[0], DataType::Int64, false),
        Field::new(names[1], DataType::Float64, false),
    ]));
    RecordBatch::try_new(schema, vec![Arc::new(ts), Arc::new(ints), Arc::new(floats)]).unwrap()
}

fn options(threads: usize, index: bool) -> BandJoinOptions {
    let band = |l: &str, r: &str| Predicate::Band {
        left: l.into(),
        right: r.into(),
        eps: 10.0,
    };
    let mut o = BandJoinOptions::new(
        ("ts".into(), "ts".into()),
        Span::Units(WINDOW),
        vec![band("x", "a"), band("y", "b")],
    );
    o.threads = Some(threads);
    o.index = index;
    o.strategy = if threads == 1 {
        JoinStrategy::Serial
    } else {
        JoinStrategy::ScaleJoin
    };
    o
}

/// Runs the join over 8k-row batches; returns (pairs, comparisons).
fn run(left: &RecordBatch, right: &RecordBatch, o: &BandJoinOptions) -> (u64, u64) {
    let mut j = BandJoiner::new(o.clone()).unwrap();
    j.bind(Side::Left, &left.schema()).unwrap();
    j.bind(Side::Right, &right.schema()).unwrap();
    let mut pairs = 0;
    for (side, b) in [(Side::Left, left), (Side::Right, right)] {
        let mut off = 0;
        while off < b.num_rows() {
            let n = 8192.min(b.num_rows() - off);
            pairs += j.push(&b.slice(off, n), side).unwrap().num_rows() as u64;
            off += n;
        }
    }
    pairs += j.flush().unwrap().num_rows() as u64;
    (pairs, j.stats().comparisons)
}

/// Pairs with `|l.ts - r.ts| <= WINDOW` (both sides have `RATE` rows per time unit).
fn time_band_pairs(rows: usize) -> u64 {
    let units = rows.div_ceil(RATE) as i64;
    let mut pairs = 0u64;
    for t in 0..units {
        let lo = (t - WINDOW).max(0);
        let hi = (t + WINDOW).min(units - 1);
        pairs += (RATE * RATE) as u64 * (hi - lo + 1) as u64;
    }
    pairs
}

fn bench(c: &mut Criterion) {
    let small = 30_000;
    let (l, r) = (side(small, ["x", "y"], 1), side(small, ["a", "b"], 2));
    let mut g = c.benchmark_group("band_join_index_off");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let (_, comparisons) = run(&l, &r, &options(1, false));
    g.throughput(Throughput::Elements(comparisons));
    for threads in [1, 2] {
        g.bench_function(BenchmarkId::new("comparisons", threads), |b| {
            b.iter(|| run(&l, &r, &options(threads, false)))
        });
    }
    g.finish();

    let full = 100_000;
    let (l, r) = (side(full, ["x", "y"], 1), side(full, ["a", "b"], 2));
    let mut g = c.benchmark_group("band_join_index_on");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(time_band_pairs(full)));
    for threads in [1, 2] {
        g.bench_function(BenchmarkId::new("time_band_pairs", threads), |b| {
            b.iter(|| run(&l, &r, &options(threads, true)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
