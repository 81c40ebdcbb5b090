//! The aggregate functions users name in `aggs`, and what they read and produce.
//!
//! Every function is split the pane way (lift / combine / lower, as in Beicht, *Disjoint Parallelization of
//! Sliding-Window Streaming Aggregation*, and in Mencagli, Torquati, Danelutto, De Matteis, *Parallel
//! Continuous Preference Queries over Out-of-Order and Bursty Data Streams*): rows are lifted into a
//! per-(key, pane) partial state, partial states combine into a window's state, and the window's state is
//! lowered into one output value. [`super::functions`] implements each function; [`super::state`] holds the
//! partial states.

use std::sync::Arc;

use arrow_schema::DataType;

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

impl AggFunc {
    pub const NAMES: [&str; 9] = [
        "count", "sum", "min", "max", "mean", "var", "std", "first", "last",
    ];

    /// Parses a function name given for `column` (`"*"` allows only `count`).
    pub fn parse(name: &str, column: &str) -> Result<Self> {
        let star = column == "*";
        let func = match name.trim().to_ascii_lowercase().as_str() {
            "count" if star => AggFunc::CountStar,
            "count" => AggFunc::Count,
            "sum" => AggFunc::Sum,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            "mean" | "avg" => AggFunc::Mean,
            "var" | "variance" | "var_samp" => AggFunc::Var,
            "std" | "stddev" | "stddev_samp" => AggFunc::Std,
            "first" => AggFunc::First,
            "last" => AggFunc::Last,
            _ => {
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

    pub fn name(self) -> &'static str {
        match self {
            AggFunc::CountStar | AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::Mean => "mean",
            AggFunc::Var => "var",
            AggFunc::Std => "std",
            AggFunc::First => "first",
            AggFunc::Last => "last",
        }
    }
}

/// The physical class an input column is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueClass {
    /// Integers, and temporal types read as their integer value.
    Int,
    Float,
}

/// Classifies a column type for a function, or says why the function cannot take it.
pub fn value_class(dt: &DataType, func: AggFunc, column: &str) -> Result<ValueClass> {
    use DataType::*;
    let temporal = matches!(
        dt,
        Timestamp(..) | Date32 | Date64 | Time32(_) | Time64(_) | Duration(_)
    );
    let class = match dt {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => ValueClass::Int,
        Float32 | Float64 => ValueClass::Float,
        _ if temporal => ValueClass::Int,
        _ if func == AggFunc::Count => ValueClass::Int, // count reads only validity
        _ => {
            return Err(Error::column_type(
                column,
                format!(
                    "{} needs an integer, float or temporal column, got {dt}",
                    func.name()
                ),
            ));
        }
    };
    if temporal
        && matches!(
            func,
            AggFunc::Sum | AggFunc::Mean | AggFunc::Var | AggFunc::Std
        )
    {
        return Err(Error::column_type(
            column,
            format!(
                "{} is not defined for {dt} (use min, max, first, last or count)",
                func.name()
            ),
        ));
    }
    Ok(class)
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
