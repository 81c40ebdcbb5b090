//! The TPCx-BB-like queries: each equals a brute-force implementation of `docs/tpcxbb.md`, and parallel
//! runs (the whole option grid) equal the sequential executor; small hand-checked cases; the generator.

mod columnar_support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};
use columnar_support::*;
use windgate_core::runtime::pipeline::PipelineOptions;
use windgate_core::tpcxbb::{GenOptions, Query, START, generate};

#[derive(Debug, Clone)]
struct Click {
    id: i64,
    ts: i64,
    user: Option<i64>,
    item: Option<i64>,
    event: String,
}

#[derive(Debug, Clone)]
struct Sale {
    ts: i64,
    ticket: i64,
    store: i32,
    item: i64,
    category: i32,
    quantity: i32,
    price: i64,
}

fn clicks_of(batches: &[RecordBatch]) -> Vec<Click> {
    let mut out = Vec::new();
    for b in batches {
        let i64s = |name: &str| {
            b.column_by_name(name)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let (id, ts, user, item) = (
            i64s("click_id"),
            i64s("ts"),
            i64s("user_id"),
            i64s("item_id"),
        );
        let event = b
            .column_by_name("event")
            .unwrap()
            .as_string::<i32>()
            .clone();
        for i in 0..b.num_rows() {
            out.push(Click {
                id: id.value(i),
                ts: ts.value(i),
                user: user.is_valid(i).then(|| user.value(i)),
                item: item.is_valid(i).then(|| item.value(i)),
                event: event.value(i).to_string(),
            });
        }
    }
    out
}

fn sales_of(batches: &[RecordBatch]) -> Vec<Sale> {
    let mut out = Vec::new();
    for b in batches {
        let i64s = |name: &str| {
            b.column_by_name(name)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let i32s = |name: &str| {
            b.column_by_name(name)
                .unwrap()
                .as_primitive::<Int32Type>()
                .clone()
        };
        let (ts, ticket, item, price) =
            (i64s("ts"), i64s("ticket"), i64s("item_id"), i64s("price"));
        let (store, cat, q) = (i32s("store"), i32s("category"), i32s("quantity"));
        for i in 0..b.num_rows() {
            out.push(Sale {
                ts: ts.value(i),
                ticket: ticket.value(i),
                store: store.value(i),
                item: item.value(i),
                category: cat.value(i),
                quantity: q.value(i),
                price: price.value(i),
            });
        }
    }
    out
}

// ---- brute force, straight from docs/tpcxbb.md, section 3 -------------------------------------------

fn top_pairs(
    counts: impl IntoIterator<Item = ((i64, i64), i64)>,
    k: usize,
) -> Vec<((i64, i64), i64)> {
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

fn q1(sales: &[Sale]) -> Vec<String> {
    let mut baskets: BTreeMap<i64, (i64, BTreeSet<i64>)> = BTreeMap::new();
    for s in sales
        .iter()
        .filter(|s| s.store <= 10 && (1..=5).contains(&s.category))
    {
        baskets
            .entry(s.ticket)
            .or_insert((s.ts, BTreeSet::new()))
            .1
            .insert(s.item);
    }
    let mut counts: BTreeMap<i64, HashMap<(i64, i64), i64>> = BTreeMap::new();
    for (ts, items) in baskets.values() {
        let items: Vec<i64> = items.iter().copied().collect();
        for i in 0..items.len() {
            for j in i + 1..items.len() {
                *counts
                    .entry(ts / 3600 * 3600)
                    .or_default()
                    .entry((items[i], items[j]))
                    .or_default() += 1;
            }
        }
    }
    let mut out = Vec::new();
    for (ws, c) in counts {
        for ((a, b), n) in top_pairs(c.into_iter().filter(|(_, n)| *n >= 2), 100) {
            out.push(format!("{a}|{b}|{ws}|{}|{n}", ws + 3600));
        }
    }
    out
}

struct Session {
    user: i64,
    start: i64,
    end: i64,
    rows: i64,
    carts: i64,
    purchases: i64,
    items: BTreeSet<i64>,
}

/// Sessions per user over `clicks` in file order, gap 3600.
fn sessions<'a>(clicks: impl Iterator<Item = &'a Click>) -> Vec<Session> {
    let mut open: HashMap<i64, Session> = HashMap::new();
    let mut done = Vec::new();
    for c in clicks {
        let u = c.user.unwrap();
        if let Some(s) = open.get(&u)
            && c.ts - s.end > 3600
        {
            done.push(open.remove(&u).unwrap());
        }
        let s = open.entry(u).or_insert(Session {
            user: u,
            start: c.ts,
            end: c.ts,
            rows: 0,
            carts: 0,
            purchases: 0,
            items: BTreeSet::new(),
        });
        s.end = c.ts;
        s.rows += 1;
        s.carts += (c.event == "cart") as i64;
        s.purchases += (c.event == "purchase") as i64;
        s.items.extend(c.item);
    }
    done.extend(open.into_values());
    done
}

fn q2(clicks: &[Click]) -> Vec<String> {
    let mut counts: HashMap<(i64, i64), i64> = HashMap::new();
    for s in sessions(
        clicks
            .iter()
            .filter(|c| c.user.is_some() && c.item.is_some()),
    ) {
        let items: Vec<i64> = s.items.into_iter().collect();
        for i in 0..items.len() {
            for j in i + 1..items.len() {
                *counts.entry((items[i], items[j])).or_default() += 1;
            }
        }
    }
    top_pairs(counts, 30)
        .into_iter()
        .map(|((a, b), n)| format!("{a}|{b}|{n}"))
        .collect()
}

fn q3(clicks: &[Click]) -> Vec<String> {
    let kept: Vec<&Click> = clicks
        .iter()
        .filter(|c| {
            c.user.is_some() && c.item.is_some() && (c.event == "view" || c.event == "purchase")
        })
        .collect();
    let mut counts: HashMap<i64, i64> = HashMap::new();
    for p in kept.iter().filter(|c| c.event == "purchase") {
        let mut views: Vec<&&Click> = kept
            .iter()
            .filter(|v| {
                v.event == "view" && v.user == p.user && v.id < p.id && v.ts >= p.ts - 864_000
            })
            .collect();
        views.sort_by_key(|v| std::cmp::Reverse(v.id));
        for v in views.into_iter().take(5) {
            *counts.entry(v.item.unwrap()).or_default() += 1;
        }
    }
    let mut v: Vec<(i64, i64)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .take(30)
        .map(|(i, n)| format!("{i}|{n}"))
        .collect()
}

fn q4(clicks: &[Click]) -> Vec<String> {
    let mut s: Vec<Session> = sessions(clicks.iter().filter(|c| c.user.is_some()))
        .into_iter()
        .filter(|s| s.carts > 0 && s.purchases == 0)
        .collect();
    s.sort_by_key(|s| (s.end, s.user));
    let (mut n, mut sum) = (0i64, 0i64);
    s.iter()
        .map(|s| {
            n += 1;
            sum += s.rows;
            let mean = sum as f64 / n as f64;
            format!(
                "{}|{}|{}|{}|{}|{}|{mean:?}",
                s.user, s.start, s.end, s.rows, s.carts, s.purchases
            )
        })
        .collect()
}

fn q15(sales: &[Sale]) -> Vec<String> {
    let mut daily: BTreeMap<i32, BTreeMap<i64, i128>> = BTreeMap::new();
    for s in sales.iter().filter(|s| s.store == 1) {
        *daily
            .entry(s.category)
            .or_default()
            .entry(s.ts / 86_400)
            .or_default() += s.quantity as i128 * s.price as i128;
    }
    let mut out = Vec::new();
    for (c, days) in daily {
        let first = *days.keys().next().unwrap();
        let (mut n, mut sx, mut sy, mut sxx, mut sxy) = (0i128, 0i128, 0i128, 0i128, 0i128);
        for (d, y) in days {
            let x = (d - first) as i128;
            n += 1;
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
            let den = n * sxx - sx * sx;
            if n >= 2 && n * sxy - sx * sy <= 0 {
                let slope = (n * sxy - sx * sy) as f64 / den as f64;
                let icp = (sy * sxx - sx * sxy) as f64 / den as f64;
                out.push((d, c, format!("{c}|{}|{n}|{slope:?}|{icp:?}", d * 86_400)));
            }
        }
    }
    out.sort_by_key(|(d, c, _)| (*d, *c));
    out.into_iter().map(|x| x.2).collect()
}

fn brute(q: Query, clicks: &[Click], sales: &[Sale]) -> Vec<String> {
    match q {
        Query::Q1 => q1(sales),
        Query::Q2 => q2(clicks),
        Query::Q3 => q3(clicks),
        Query::Q4 => q4(clicks),
        Query::Q15 => q15(sales),
    }
}

fn input(q: Query, data: &(Vec<RecordBatch>, Vec<RecordBatch>)) -> Vec<RecordBatch> {
    match q.table() {
        windgate_core::tpcxbb::Table::Clickstream => data.0.clone(),
        windgate_core::tpcxbb::Table::StoreSales => data.1.clone(),
    }
}

#[test]
fn queries_equal_brute_force_of_the_doc() {
    for (rows, seed, days) in [(20_000, 1, 28), (6_000, 2, 3), (3_000, 3, 40)] {
        let opts = GenOptions {
            rows,
            seed,
            days,
            ..Default::default()
        };
        let data = generate(&opts).unwrap();
        let (clicks, sales) = (clicks_of(&data.0), sales_of(&data.1));
        for q in Query::ALL {
            let batches = input(q, &data);
            let schema = batches[0].schema();
            let got = sequential(&q.pipeline(), &schema, batches).unwrap();
            let want = brute(q, &clicks, &sales);
            assert!(
                !want.is_empty() || q == Query::Q1,
                "{q:?} on {rows} rows gives rows"
            );
            assert_eq!(
                norm(got),
                norm(want),
                "{q:?}, rows {rows}, seed {seed}, days {days}"
            );
        }
    }
}

#[test]
fn queries_parallel_equal_sequential_on_the_whole_grid() {
    let data = generate(&GenOptions::new(4_000, 9)).unwrap();
    for q in Query::ALL {
        let batches = input(q, &data);
        let schema = batches[0].schema();
        let seq = sequential(&q.pipeline(), &schema, batches.clone()).unwrap();
        for (i, o) in grid().iter().enumerate() {
            let par = parallel(
                &q.pipeline(),
                &schema,
                batches.clone(),
                o,
                [64, 500, 4096][i % 3],
            )
            .unwrap();
            assert_eq!(seq, par, "{q:?} with {o:?}");
        }
    }
}

#[test]
fn generator_is_deterministic_and_follows_the_doc() {
    let opts = GenOptions::new(70_000, 5);
    let (c1, s1) = generate(&opts).unwrap();
    let (c2, s2) = generate(&opts).unwrap();
    assert_eq!(c1, c2);
    assert_eq!(s1, s2);
    assert_ne!(generate(&GenOptions::new(70_000, 6)).unwrap().0, c1);
    let (clicks, sales) = (clicks_of(&c1), sales_of(&s1));
    assert_eq!((clicks.len(), sales.len()), (70_000, 70_000));
    assert!(
        clicks
            .windows(2)
            .all(|w| w[0].ts <= w[1].ts && w[1].id == w[0].id + 1)
    );
    assert!(sales.windows(2).all(|w| w[0].ts <= w[1].ts));
    assert!(
        clicks
            .iter()
            .all(|c| c.ts >= START && c.ts < START + 28 * 86_400)
    );
    let anon = clicks.iter().filter(|c| c.user.is_none()).count() as f64 / 70_000.0;
    assert!((0.05..0.2).contains(&anon), "anonymous share {anon}");
    assert!(clicks.iter().all(|c| c.item.is_some() || c.event == "view"));
    // Tickets are contiguous and share ts and store.
    let mut seen = BTreeSet::new();
    for w in sales.windows(2) {
        if w[0].ticket == w[1].ticket {
            assert_eq!((w[0].ts, w[0].store), (w[1].ts, w[1].store));
        } else {
            assert!(seen.insert(w[0].ticket), "ticket {} is split", w[0].ticket);
        }
    }
    assert!(sales.iter().all(|s| s.category == 1 + (s.item % 10) as i32));
    assert!(
        sales
            .iter()
            .all(|s| (1..=10).contains(&s.quantity) && (100..10_000).contains(&s.price))
    );
    for b in c1.iter().chain(&s1) {
        assert!(b.num_rows() > 0);
    }
}

// ---- hand-checked cases ---------------------------------------------------------------------------

fn clicks(rows: &[(i64, Option<i64>, Option<i64>, &str)]) -> RecordBatch {
    let n = rows.len() as i64;
    RecordBatch::try_from_iter([
        (
            "click_id",
            Arc::new(Int64Array::from_iter_values(0..n)) as _,
        ),
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as _,
        ),
        (
            "user_id",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))) as _,
        ),
        (
            "item_id",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.2))) as _,
        ),
        (
            "event",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))) as _,
        ),
        (
            "category",
            Arc::new(Int32Array::from_iter(
                rows.iter().map(|r| r.2.map(|i| 1 + (i % 10) as i32)),
            )) as _,
        ),
    ])
    .unwrap()
}

fn run_hand(q: Query, b: RecordBatch) -> Vec<String> {
    let schema = b.schema();
    let seq = sequential(&q.pipeline(), &schema, vec![b.clone()]).unwrap();
    let par = parallel(
        &q.pipeline(),
        &schema,
        vec![b],
        &PipelineOptions {
            threads: 3,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    assert_eq!(seq, par);
    seq
}

#[test]
fn q4_by_hand() {
    // User 1: a session with a cart and no purchase (3 pages), then after > 1 h a session with a purchase.
    // User 2: cart then nothing (1 page). Anonymous clicks are ignored.
    let b = clicks(&[
        (0, Some(1), Some(5), "view"),
        (60, Some(2), Some(7), "cart"),
        (100, Some(1), None, "view"),
        (200, None, Some(5), "cart"),
        (3700, Some(1), Some(5), "cart"),
        (7400, Some(1), Some(5), "purchase"),
    ]);
    assert_eq!(
        run_hand(Query::Q4, b),
        vec!["2|60|60|1|1|0|1.0", "1|0|3700|3|1|0|2.0"]
    );
}

#[test]
fn q3_by_hand() {
    let day = 86_400;
    let b = clicks(&[
        (0, Some(1), Some(10), "view"),
        (day, Some(1), Some(11), "view"),
        (2 * day, Some(1), Some(12), "cart"),
        (11 * day, Some(1), Some(13), "purchase"), // only item 11 is within 10 days (day 1 >= day 11 - 10)
        (11 * day, Some(2), Some(11), "view"),
        (12 * day, Some(2), Some(14), "purchase"),
    ]);
    assert_eq!(run_hand(Query::Q3, b), vec!["11|2"]);
}

#[test]
fn q2_by_hand() {
    let b = clicks(&[
        (0, Some(1), Some(3), "view"),
        (10, Some(1), Some(1), "view"),
        (20, Some(1), Some(3), "cart"),
        (30, Some(2), Some(1), "view"),
        (40, Some(2), Some(3), "view"),
        (5000, Some(1), Some(2), "view"), // user 1's second session: no pair
    ]);
    assert_eq!(run_hand(Query::Q2, b), vec!["1|3|2"]);
}
