//! The test data model of `tests/columnar.rs` (rows of ts, key, value, event; batches; a proptest strategy
//! with bounded disorder) and plain row-at-a-time implementations of the columnar operators.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use proptest::prelude::*;
use windgate_core::ErrorKind;

#[derive(Debug, Clone)]
pub struct Row {
    pub ts: i64,
    pub k: Option<i64>,
    pub v: Option<i64>,
    pub e: &'static str,
}

pub const EVENTS: [&str; 3] = ["view", "cart", "buy"];

pub fn batch(rows: &[Row]) -> RecordBatch {
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
pub fn rows(max: usize, disorder: i64) -> impl Strategy<Value = Vec<Row>> {
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

pub fn opt(v: Option<i64>) -> String {
    v.map_or("null".into(), |x| x.to_string())
}

// ---- reference implementations ----------------------------------------------------------------------

/// Sessions of `k` by `ts` with `gap` and `lateness`, values `v` and a count of carts, closed by stream
/// time, each row's closings in (end, key) order.
pub fn ref_sessions(rows: &[Row], gap: i64, lateness: i64) -> Result<Vec<String>, ErrorKind> {
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
pub fn ref_window_count(
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

pub fn ref_last_n(rows: &[Row], n: usize, within: i64) -> Result<Vec<String>, ErrorKind> {
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

pub fn ref_pairs(rows: &[Row], gap: i64) -> Vec<String> {
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

pub fn ref_regression(rows: &[Row], bucket: i64, max_slope: Option<f64>) -> Vec<String> {
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

pub fn ref_topk(rows: &[Row], k: usize) -> Vec<String> {
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
