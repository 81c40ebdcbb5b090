//! The aggregate functions users name in `aggs`, and what they read and produce.
//!
//! Every function is split the pane way (lift / combine / lower, as in Beicht, *Disjoint Parallelization of
//! Sliding-Window Streaming Aggregation*, and in Mencagli, Torquati, Danelutto, De Matteis, *Parallel
//! Continuous Preference Queries over Out-of-Order and Bursty Data Streams*): rows are lifted into a
//! per-(key, pane) partial state, partial states combine into a window's state, and the window's state is
//! lowered into one output value. [`super::functions`] implements each function; [`super::state`] holds the
//! partial states.

use std::sync::Arc;

use crate::error::{Error, Result};

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFunc {
    /// `count` over `"*"`: rows, nulls included.
    CountStar,
    /// `count` over a column: non-null values.
    Count,
    Sum,
    Min,
    Max,
    Mean,
    /// Sample variance (n - 1), like Spark's `variance`/`var_samp`.
    Var,
    /// Sample standard deviation.
    Std,
    /// Value of the first row in the total order `(ts, source, seq)`, nulls ignored.
    First,
    /// Value of the last row in the total order, nulls ignored.
    Last,
}

/// Every function users can name, written once: its variant, the name it is known by (also in output column
/// names) and the other names it accepts. [`AggFunc::parse`], [`AggFunc::name`] and [`AggFunc::NAMES`] read
/// this table; `count` over `"*"` is the row count ([`AggFunc::CountStar`]). What a function computes is in
/// its file of [`super::functions`].
const FUNCTIONS: &[(AggFunc, &str, &[&str])] = &[
    (AggFunc::Count, "count", &[]),
    (AggFunc::Sum, "sum", &[]),
    (AggFunc::Min, "min", &[]),
    (AggFunc::Max, "max", &[]),
    (AggFunc::Mean, "mean", &["avg"]),
    (AggFunc::Var, "var", &["variance", "var_samp"]),
    (AggFunc::Std, "std", &["stddev", "stddev_samp"]),
    (AggFunc::First, "first", &[]),
    (AggFunc::Last, "last", &[]),
];

impl AggFunc {
    /// The names users may write (aliases aside), in the table's order.
    pub const NAMES: [&str; FUNCTIONS.len()] = {
        let mut names = [""; FUNCTIONS.len()];
        let mut i = 0;
        while i < FUNCTIONS.len() {
            names[i] = FUNCTIONS[i].1;
            i += 1;
        }
        names
    };

    /// Parses a function name given for `column` (`"*"` allows only `count`).
    pub fn parse(name: &str, column: &str) -> Result<Self> {
        let star = column == "*";
        let wanted = name.trim().to_ascii_lowercase();
        let found = FUNCTIONS
            .iter()
            .find(|(_, n, aliases)| *n == wanted || aliases.contains(&wanted.as_str()));
        let func = match found {
            Some((AggFunc::Count, ..)) if star => AggFunc::CountStar,
            Some((func, ..)) => *func,
            None => {
                return Err(Error::param(
                    "aggs",
                    format!(
                        "unknown function {name:?} for column {column:?}; expected one of {:?}",
                        Self::NAMES
                    ),
                ));
            }
        };
        if star && func != AggFunc::CountStar {
            return Err(Error::param(
                "aggs",
                format!("\"*\" takes only \"count\" (the row count), got {name:?}"),
            ));
        }
        Ok(func)
    }

    /// The name the function is known by (`count` for the row count too).
    pub fn name(self) -> &'static str {
        let func = if self == AggFunc::CountStar {
            AggFunc::Count
        } else {
            self
        };
        FUNCTIONS
            .iter()
            .find(|(f, ..)| *f == func)
            .map_or("count", |(_, name, _)| name)
    }
}

/// The physical class an input column is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueClass {
    /// Integers, and temporal types read as their integer value.
    Int,
    Float,
}

/// One output column: a function over an input column.
#[derive(Debug, Clone)]
pub struct AggSpec {
    /// Input column, `None` for `"*"`.
    pub column: Option<Arc<str>>,
    pub func: AggFunc,
    /// `count` for the row count, otherwise `<func>_<column>`.
    pub output_name: String,
}

impl AggSpec {
    /// Builds the specs from `(column, [function names])` pairs in the order given.
    ///
    /// ```
    /// use windgate_core::aggregate::AggSpec;
    /// let specs = AggSpec::parse_all(&[("*".into(), vec!["count".into()]), ("kwh".into(), vec!["sum".into(), "max".into()])]).unwrap();
    /// let names: Vec<_> = specs.iter().map(|s| s.output_name.as_str()).collect();
    /// assert_eq!(names, ["count", "sum_kwh", "max_kwh"]);
    /// ```
    pub fn parse_all(aggs: &[(String, Vec<String>)]) -> Result<Vec<AggSpec>> {
        let mut specs: Vec<AggSpec> = Vec::new();
        for (column, funcs) in aggs {
            if funcs.is_empty() {
                return Err(Error::param(
                    "aggs",
                    format!("no function given for column {column:?}"),
                ));
            }
            for name in funcs {
                let func = AggFunc::parse(name, column)?;
                let (col, output_name) = if func == AggFunc::CountStar {
                    (None, "count".to_string())
                } else {
                    (
                        Some(Arc::from(column.as_str())),
                        format!("{}_{column}", func.name()),
                    )
                };
                if specs.iter().any(|s| s.output_name == output_name) {
                    return Err(Error::param(
                        "aggs",
                        format!("output column {output_name:?} is asked for twice"),
                    ));
                }
                specs.push(AggSpec {
                    column: col,
                    func,
                    output_name,
                });
            }
        }
        if specs.is_empty() {
            return Err(Error::param(
                "aggs",
                "expected at least one aggregate, e.g. {\"*\": \"count\"}",
            ));
        }
        Ok(specs)
    }
}
