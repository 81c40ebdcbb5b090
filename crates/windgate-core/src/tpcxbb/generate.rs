//! The generator of `docs/tpcxbb.md` (section 2): a web clickstream and store sales, time-ordered, with skewed items,
//! users and stores, sessions of clicks, baskets with related items, and categories whose sales drift.

use std::sync::Arc;

use arrow_array::builder::{Int32Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::rng::{Rng, Skew, Zipf};
use crate::error::{Error, Result};

/// 2024-01-01T00:00:00Z in seconds: where both streams start.
pub const START: i64 = 1_704_067_200;
const DAY: i64 = 86_400;
/// Rows per generated batch.
const BATCH_ROWS: usize = 1 << 16;

/// The generator's parameters (`docs/tpcxbb.md`, section 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenOptions {
    /// Rows of each table.
    pub rows: usize,
    pub seed: u64,
    pub days: i64,
    /// Users (default `max(1000, rows / 20)`).
    pub users: Option<i64>,
    pub items: i64,
    pub stores: i64,
}

impl Default for GenOptions {
    fn default() -> Self {
        Self {
            rows: 100_000,
            seed: 0,
            days: 28,
            users: None,
            items: 5000,
            stores: 20,
        }
    }
}

impl GenOptions {
    pub fn new(rows: usize, seed: u64) -> Self {
        Self {
            rows,
            seed,
            ..Default::default()
        }
    }

    fn check(&self) -> Result<()> {
        let positive = |name: &str, v: i64, max: i64| {
            if v < 1 || v > max {
                Err(Error::param(name, format!("expected 1 to {max}, got {v}")))
            } else {
                Ok(())
            }
        };
        positive("days", self.days, 36_500)?;
        positive("items", self.items, 100_000_000)?;
        positive("stores", self.stores, 1_000_000)?;
        if let Some(u) = self.users {
            positive("users", u, 1_000_000_000)?;
        }
        if self.rows > 1 << 40 {
            return Err(Error::param(
                "rows",
                format!("expected at most 2^40, got {}", self.rows),
            ));
        }
        Ok(())
    }

    fn users(&self) -> i64 {
        self.users.unwrap_or((self.rows as i64 / 20).max(1000))
    }

    /// `ts` of row `i` (constant rate over `days`).
    fn ts(&self, i: usize) -> i64 {
        START + ((i as i128 * (self.days * DAY) as i128) / self.rows.max(1) as i128) as i64
    }
}

pub fn clickstream_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("click_id", DataType::Int64, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("user_id", DataType::Int64, true),
        Field::new("item_id", DataType::Int64, true),
        Field::new("event", DataType::Utf8, false),
        Field::new("category", DataType::Int32, true),
    ]))
}

pub fn store_sales_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("ticket", DataType::Int64, false),
        Field::new("store", DataType::Int32, false),
        Field::new("item_id", DataType::Int64, false),
        Field::new("category", DataType::Int32, false),
        Field::new("quantity", DataType::Int32, false),
        Field::new("price", DataType::Int64, false),
    ]))
}

/// An item's category, 1..10.
pub fn category(item: i64) -> i32 {
    (1 + item % 10) as i32
}

/// An item's unit price in cents, 100..9999.
pub fn price(item: i64) -> i64 {
    100 + (item * 7919) % 9900
}

/// `(clickstream, store_sales)`, each `rows` rows in batches.
pub fn generate(opts: &GenOptions) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>)> {
    opts.check()?;
    Ok((clickstream(opts)?, store_sales(opts)?))
}

struct Session {
    user: Option<i64>,
    last_viewed: Option<i64>,
}

fn new_session(rng: &mut Rng, users: &Zipf) -> Session {
    let user = (rng.below(10) != 0).then(|| users.sample(rng));
    Session {
        user,
        last_viewed: None,
    }
}

pub fn clickstream(opts: &GenOptions) -> Result<Vec<RecordBatch>> {
    opts.check()?;
    let mut rng = Rng::new(opts.seed);
    let items = Zipf::new(opts.items, Skew::S1125);
    // Mild skew: a user who starts too large a share of sessions would never leave a 60-minute gap, and
    // sessions would merge into one per heavy user spanning the whole stream.
    let users = Zipf::new(opts.users(), Skew::S050);
    let open = ((opts.rows as i128 * 300) / (opts.days * DAY) as i128).max(1) as usize;
    let mut sessions: Vec<Session> = (0..open).map(|_| new_session(&mut rng, &users)).collect();
    let schema = clickstream_schema();
    let mut out = Vec::new();
    let mut start = 0;
    while start < opts.rows {
        let n = BATCH_ROWS.min(opts.rows - start);
        let (mut ts, mut user, mut item) = (
            Int64Builder::with_capacity(n),
            Int64Builder::with_capacity(n),
            Int64Builder::with_capacity(n),
        );
        let mut event = StringBuilder::with_capacity(n, n * 5);
        let mut cat = Int32Builder::with_capacity(n);
        for i in start..start + n {
            ts.append_value(opts.ts(i));
            let slot = rng.below(open as u64) as usize;
            let s = &mut sessions[slot];
            user.append_option(s.user);
            if rng.below(20) == 0 {
                item.append_null();
                cat.append_null();
                event.append_value("view");
            } else {
                let e = rng.below(100);
                let (name, it) = if e < 85 {
                    let it = items.sample(&mut rng);
                    s.last_viewed = Some(it);
                    ("view", it)
                } else {
                    let it = match s.last_viewed {
                        Some(v) => v,
                        None => items.sample(&mut rng),
                    };
                    (if e < 95 { "cart" } else { "purchase" }, it)
                };
                item.append_value(it);
                cat.append_value(category(it));
                event.append_value(name);
            }
            if rng.below(8) == 0 {
                sessions[slot] = new_session(&mut rng, &users);
            }
        }
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(
            start as i64..(start + n) as i64,
        ));
        out.push(
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    ids,
                    Arc::new(ts.finish()),
                    Arc::new(user.finish()),
                    Arc::new(item.finish()),
                    Arc::new(event.finish()),
                    Arc::new(cat.finish()),
                ],
            )
            .map_err(Error::output)?,
        );
        start += n;
    }
    Ok(out)
}

pub fn store_sales(opts: &GenOptions) -> Result<Vec<RecordBatch>> {
    opts.check()?;
    // A different stream than the clickstream's, from the same seed.
    let mut rng = Rng::new(opts.seed ^ 0x5a1e_5a1e_5a1e_5a1e);
    let items = Zipf::new(opts.items, Skew::S1125);
    let stores = Zipf::new(opts.stores, Skew::S075);
    let draw = |rng: &mut Rng, day: i64| loop {
        let it = items.sample(rng);
        let c = category(it) as f64;
        let w = (c - 5.5) / 9.0 * (day as f64 / opts.days as f64) + 1.0;
        if rng.unit() * 1.5 < w {
            return it;
        }
    };
    let schema = store_sales_schema();
    let mut out = Vec::new();
    let mut cols: [Vec<i64>; 5] = Default::default(); // ts, ticket, store, item, quantity
    let mut done = 0; // rows already in `out`
    let mut ticket = 0i64;
    while done + cols[0].len() < opts.rows {
        ticket += 1;
        let first = done + cols[0].len();
        let ts = opts.ts(first);
        let day = (ts - START) / DAY;
        let mut size = 1;
        while size < 12 && rng.below(3) != 0 {
            size += 1;
        }
        let store = stores.sample(&mut rng);
        let mut prev = 0;
        for j in 0..size.min(opts.rows - first) {
            let it = if j > 0 && rng.below(10) < 3 {
                prev % opts.items + 1
            } else {
                draw(&mut rng, day)
            };
            let mut q = 1;
            while q < 10 && rng.below(2) == 1 {
                q += 1;
            }
            for (c, v) in cols.iter_mut().zip([ts, ticket, store, it, q]) {
                c.push(v);
            }
            prev = it;
            if cols[0].len() == BATCH_ROWS {
                done += BATCH_ROWS;
                out.push(sales_batch(&schema, std::mem::take(&mut cols))?);
            }
        }
    }
    if !cols[0].is_empty() {
        out.push(sales_batch(&schema, cols)?);
    }
    Ok(out)
}

fn sales_batch(schema: &SchemaRef, cols: [Vec<i64>; 5]) -> Result<RecordBatch> {
    let [ts, ticket, store, item, quantity] = cols;
    let i32s = |c: Vec<i64>| -> ArrayRef {
        Arc::new(Int32Array::from_iter_values(
            c.into_iter().map(|v| v as i32),
        ))
    };
    let cats: ArrayRef = Arc::new(Int32Array::from_iter_values(
        item.iter().map(|i| category(*i)),
    ));
    let prices: ArrayRef = Arc::new(Int64Array::from_iter_values(item.iter().map(|i| price(*i))));
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ts)),
            Arc::new(Int64Array::from(ticket)),
            i32s(store),
            Arc::new(Int64Array::from(item)),
            cats,
            i32s(quantity),
            prices,
        ],
    )
    .map_err(Error::output)
}
