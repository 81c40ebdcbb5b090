//! Q1, Q2, Q3, Q4 and Q15 as pipelines of the built-in columnar operators (`docs/tpcxbb.md`, sections 3-4). Each
//! query is given in spec form, so that Python builds exactly the same pipeline.

use crate::columnar::{ColumnarPipeline, Value};
use crate::error::{Error, Result};

/// One of the five queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    Q1,
    Q2,
    Q3,
    Q4,
    Q15,
}

/// Which generated table a query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Clickstream,
    StoreSales,
}

impl Table {
    pub fn name(&self) -> &'static str {
        match self {
            Table::Clickstream => "clickstream",
            Table::StoreSales => "store_sales",
        }
    }
}

const HOUR: i64 = 3600;
const TEN_DAYS: i64 = 10 * 86_400;

fn l(items: Vec<Value>) -> Value {
    Value::List(items)
}

fn pred(op: &str, column: &str, value: Value) -> Value {
    l(vec![op.into(), column.into(), value])
}

fn not_null(column: &str) -> Value {
    l(vec!["is_not_null".into(), column.into()])
}

fn and(parts: Vec<Value>) -> Value {
    let mut v = vec![Value::str("and")];
    v.extend(parts);
    l(v)
}

fn ints(v: &[i64]) -> Value {
    l(v.iter().map(|i| Value::Int(*i)).collect())
}

impl Query {
    pub const ALL: [Query; 5] = [Query::Q1, Query::Q2, Query::Q3, Query::Q4, Query::Q15];

    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "q1" => Query::Q1,
            "q2" => Query::Q2,
            "q3" => Query::Q3,
            "q4" => Query::Q4,
            "q15" => Query::Q15,
            _ => {
                return Err(Error::param(
                    "query",
                    format!(
                        "expected one of \"q1\", \"q2\", \"q3\", \"q4\", \"q15\", got {name:?}"
                    ),
                ));
            }
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Query::Q1 => "q1",
            Query::Q2 => "q2",
            Query::Q3 => "q3",
            Query::Q4 => "q4",
            Query::Q15 => "q15",
        }
    }

    pub fn table(&self) -> Table {
        match self {
            Query::Q1 | Query::Q15 => Table::StoreSales,
            _ => Table::Clickstream,
        }
    }

    /// The operators in spec form: `(kind, params)`, front to back.
    pub fn spec(&self) -> Vec<(&'static str, Value)> {
        let pair_names = || Value::strs(&["item_a", "item_b"]);
        match self {
            Query::Q1 => vec![
                (
                    "filter",
                    Value::map([(
                        "predicate",
                        and(vec![
                            pred("<=", "store", 10.into()),
                            pred("isin", "category", ints(&[1, 2, 3, 4, 5])),
                        ]),
                    )]),
                ),
                (
                    "sessionize",
                    Value::map([
                        ("key", "ticket".into()),
                        ("time", "ts".into()),
                        ("gap", 0.into()),
                        ("values", "item_id".into()),
                    ]),
                ),
                (
                    "pairs",
                    Value::map([("column", "item_id".into()), ("names", pair_names())]),
                ),
                (
                    "window_count",
                    Value::map([
                        ("keys", pair_names()),
                        ("time", "session_start".into()),
                        ("size", HOUR.into()),
                        ("min_count", 2.into()),
                    ]),
                ),
                (
                    "topk",
                    Value::map([
                        ("k", 100.into()),
                        ("score", "count".into()),
                        ("keys", pair_names()),
                        ("window", "window_start".into()),
                    ]),
                ),
            ],
            Query::Q2 => vec![
                (
                    "filter",
                    Value::map([(
                        "predicate",
                        and(vec![not_null("user_id"), not_null("item_id")]),
                    )]),
                ),
                (
                    "sessionize",
                    Value::map([
                        ("key", "user_id".into()),
                        ("time", "ts".into()),
                        ("gap", HOUR.into()),
                        ("values", "item_id".into()),
                    ]),
                ),
                (
                    "pairs",
                    Value::map([("column", "item_id".into()), ("names", pair_names())]),
                ),
                // Top-k pushed into the count (each partition keeps its 30 best, combine the global 30): the
                // same rows, without emitting every pair's count at end of stream.
                (
                    "window_count",
                    Value::map([("keys", pair_names()), ("top_k", 30.into())]),
                ),
                (
                    "topk",
                    Value::map([
                        ("k", 30.into()),
                        ("score", "count".into()),
                        ("keys", pair_names()),
                    ]),
                ),
            ],
            Query::Q3 => vec![
                (
                    "filter",
                    Value::map([(
                        "predicate",
                        and(vec![
                            not_null("user_id"),
                            not_null("item_id"),
                            pred("isin", "event", Value::strs(&["view", "purchase"])),
                        ]),
                    )]),
                ),
                (
                    "last_n_before",
                    Value::map([
                        ("key", "user_id".into()),
                        ("time", "ts".into()),
                        ("value", "item_id".into()),
                        ("trigger", pred("==", "event", "purchase".into())),
                        ("candidate", pred("==", "event", "view".into())),
                        ("n", 5.into()),
                        ("within", TEN_DAYS.into()),
                        ("output", "viewed_item_id".into()),
                    ]),
                ),
                (
                    "window_count",
                    Value::map([
                        ("keys", Value::strs(&["viewed_item_id"])),
                        ("top_k", 30.into()),
                    ]),
                ),
            ],
            Query::Q4 => vec![
                ("filter", Value::map([("predicate", not_null("user_id"))])),
                (
                    "sessionize",
                    Value::map([
                        ("key", "user_id".into()),
                        ("time", "ts".into()),
                        ("gap", HOUR.into()),
                        (
                            "counts",
                            Value::Map(vec![
                                ("carts".into(), pred("==", "event", "cart".into())),
                                ("purchases".into(), pred("==", "event", "purchase".into())),
                            ]),
                        ),
                    ]),
                ),
                (
                    "filter",
                    Value::map([(
                        "predicate",
                        and(vec![
                            pred(">", "carts", 0.into()),
                            pred("==", "purchases", 0.into()),
                        ]),
                    )]),
                ),
                (
                    "running_mean",
                    Value::map([("column", "rows".into()), ("output", "mean_rows".into())]),
                ),
            ],
            Query::Q15 => vec![
                (
                    "filter",
                    Value::map([("predicate", pred("==", "store", 1.into()))]),
                ),
                (
                    "project",
                    Value::map([(
                        "columns",
                        Value::Map(vec![
                            ("category".into(), "category".into()),
                            ("ts".into(), "ts".into()),
                            (
                                "amount".into(),
                                l(vec!["*".into(), "quantity".into(), "price".into()]),
                            ),
                        ]),
                    )]),
                ),
                (
                    "regression",
                    Value::map([
                        ("key", "category".into()),
                        ("time", "ts".into()),
                        ("value", "amount".into()),
                        ("bucket", 86_400.into()),
                        ("max_slope", 0.0.into()),
                        // 10 categories: more partitions would only add empty parts.
                        ("partitions", 10.into()),
                    ]),
                ),
            ],
        }
    }

    pub fn pipeline(&self) -> ColumnarPipeline {
        self.spec()
            .iter()
            .try_fold(ColumnarPipeline::new(), |p, (kind, params)| {
                p.push(kind, params)
            })
            .expect("the built-in queries are valid")
    }
}
