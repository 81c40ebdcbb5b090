//! `project`'s arithmetic: a column, a numeric literal, or `+ - *` of two expressions, in the spec form
//! `("*", "quantity", "price")` (a string is a column, a number a literal). Integers compute in int64 with
//! overflow checked (an error, never a wrapped value), anything with a float in float64.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Schema};

use super::expr::Literal;
use super::keys::column_index;
use super::value::Value;
use crate::error::{Error, ErrorKind, Result};

/// An arithmetic operator of `project`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
}

/// A value expression of `project`: a column (kept with its type), a numeric literal, or arithmetic on
/// int64 (checked: overflow is an error) or float64 (when either side is a float).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Column(String),
    Literal(Literal),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
}

impl Expr {
    pub fn parse(v: &Value, param: &str) -> Result<Self> {
        Ok(match v {
            Value::Str(s) if !s.is_empty() => Expr::Column(s.clone()),
            Value::Int(_) | Value::Float(_) => Expr::Literal(Literal::parse(v, param)?),
            Value::List(items) if items.len() == 3 => {
                let op = match &items[0] {
                    Value::Str(s) if s == "+" => ArithOp::Add,
                    Value::Str(s) if s == "-" => ArithOp::Sub,
                    Value::Str(s) if s == "*" => ArithOp::Mul,
                    other => {
                        return Err(Error::param(
                            param,
                            format!(
                                "expected an operator \"+\", \"-\" or \"*\", got {}",
                                other.describe()
                            ),
                        ));
                    }
                };
                Expr::Arith(
                    op,
                    Box::new(Expr::parse(&items[1], param)?),
                    Box::new(Expr::parse(&items[2], param)?),
                )
            }
            other => {
                return Err(Error::param(
                    param,
                    format!(
                        "expected a column name, a number or (\"+\"|\"-\"|\"*\", expr, expr), got {}",
                        other.describe()
                    ),
                ));
            }
        })
    }

    /// The output type: a column's own type, or int64/float64 for arithmetic.
    pub(crate) fn data_type(&self, schema: &Schema, param: &str) -> Result<DataType> {
        Ok(match self {
            Expr::Column(c) => schema
                .field(column_index(schema, c, param)?)
                .data_type()
                .clone(),
            Expr::Literal(Literal::Int(_)) => DataType::Int64,
            Expr::Literal(Literal::Float(_)) => DataType::Float64,
            Expr::Literal(l) => {
                return Err(Error::param(
                    param,
                    format!("expected a number, got {}", l.describe()),
                ));
            }
            Expr::Arith(_, a, b) => {
                let (ta, tb) = (a.data_type(schema, param)?, b.data_type(schema, param)?);
                for (t, e) in [(&ta, a), (&tb, b)] {
                    if !t.is_numeric() {
                        let name = match &**e {
                            Expr::Column(c) => format!("column '{c}'"),
                            _ => "an operand".into(),
                        };
                        return Err(Error::new(
                            ErrorKind::ColumnType,
                            format!("{param}: {name} is {t}; arithmetic needs numbers"),
                        ));
                    }
                }
                if ta.is_floating() || tb.is_floating() {
                    DataType::Float64
                } else {
                    DataType::Int64
                }
            }
        })
    }

    pub(crate) fn evaluate(&self, batch: &RecordBatch, param: &str) -> Result<ArrayRef> {
        match self {
            Expr::Column(c) => Ok(batch
                .column(column_index(batch.schema_ref(), c, param)?)
                .clone()),
            Expr::Literal(l) => {
                let one = l.array();
                let idx = arrow_array::UInt32Array::from(vec![0u32; batch.num_rows()]);
                Ok(arrow_select::take::take(&one, &idx, None)?)
            }
            Expr::Arith(op, a, b) => {
                let out = self.data_type(batch.schema_ref(), param)?;
                let (x, y) = (a.evaluate(batch, param)?, b.evaluate(batch, param)?);
                let x = arrow_cast::cast(&x, &out)?;
                let y = arrow_cast::cast(&y, &out)?;
                let nulls = NullBuffer::union(x.nulls(), y.nulls());
                if out == DataType::Float64 {
                    let (x, y) = (
                        x.as_primitive::<Float64Type>(),
                        y.as_primitive::<Float64Type>(),
                    );
                    let f = |p: f64, q: f64| match op {
                        ArithOp::Add => p + q,
                        ArithOp::Sub => p - q,
                        ArithOp::Mul => p * q,
                    };
                    let v: Vec<f64> = x
                        .values()
                        .iter()
                        .zip(y.values())
                        .map(|(p, q)| f(*p, *q))
                        .collect();
                    return Ok(Arc::new(Float64Array::new(v.into(), nulls)));
                }
                let (x, y) = (x.as_primitive::<Int64Type>(), y.as_primitive::<Int64Type>());
                let mut v = Vec::with_capacity(x.len());
                for i in 0..x.len() {
                    if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                        v.push(0);
                        continue;
                    }
                    let (p, q) = (x.value(i), y.value(i));
                    let r = match op {
                        ArithOp::Add => p.checked_add(q),
                        ArithOp::Sub => p.checked_sub(q),
                        ArithOp::Mul => p.checked_mul(q),
                    };
                    v.push(r.ok_or_else(|| {
                        Error::new(
                            ErrorKind::Overflow,
                            format!("{param}: int64 overflow computing {p} and {q} at row {i} of a batch"),
                        )
                    })?);
                }
                Ok(Arc::new(Int64Array::new(v.into(), nulls)))
            }
        }
    }
}
