//! `project`'s arithmetic: a column, a numeric literal, or `+ - *` of two expressions, in the spec form
//! `("*", "quantity", "price")` (a string is a column, a number a literal). Integers compute in int64 with
//! overflow checked (an error, never a wrapped value), anything with a float in float64.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Schema};

use super::expr::{Literal, too_deep};
use super::value::{MAX_EXPR_DEPTH, Value};
use crate::error::{Error, ErrorKind, Result};
use crate::keys::column_index;

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
    /// Parses the spec form; `param` names the parameter in errors. Nesting deeper than
    /// [`MAX_EXPR_DEPTH`] is an error.
    pub fn parse(v: &Value, param: &str) -> Result<Self> {
        Self::parse_at(v, param, 1)
    }

    fn parse_at(v: &Value, param: &str, depth: usize) -> Result<Self> {
        if depth > MAX_EXPR_DEPTH {
            return Err(too_deep(param, "expression"));
        }
        if let Value::List(items) = v
            && let [Value::Str(op), a, b] = items.as_slice()
            && let Some(op) = ArithOp::parse(op)
        {
            return Ok(Expr::Arith(
                op,
                Box::new(Expr::parse_at(a, param, depth + 1)?),
                Box::new(Expr::parse_at(b, param, depth + 1)?),
            ));
        }
        Self::parse_leaf(v, param)
    }

    /// A column or a literal, or the error for anything else (kept apart from the recursive
    /// [`Expr::parse_at`] so that its stack frame stays small).
    #[inline(never)]
    fn parse_leaf(v: &Value, param: &str) -> Result<Self> {
        Ok(match v {
            Value::Str(s) if !s.is_empty() => Expr::Column(s.clone()),
            Value::Int(_) | Value::Float(_) => Expr::Literal(Literal::parse(v, param)?),
            Value::List(items) if items.len() == 3 => {
                return Err(Error::param(
                    param,
                    format!(
                        "expected an operator \"+\", \"-\" or \"*\", got {}",
                        items[0].describe()
                    ),
                ));
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

    /// Checks the columns against `schema` and resolves every type; `param` names the parameter in errors.
    pub(crate) fn bind(&self, schema: &Schema, param: &str) -> Result<BoundExpr> {
        let mut steps = Vec::new();
        let out = self.emit(schema, param, 1, &mut steps)?;
        Ok(BoundExpr { steps, out })
    }

    /// Appends the expression in postfix order; returns its type: a column's own type, or int64/float64
    /// for arithmetic.
    fn emit(
        &self,
        schema: &Schema,
        param: &str,
        depth: usize,
        out: &mut Vec<Step>,
    ) -> Result<DataType> {
        if depth > MAX_EXPR_DEPTH {
            return Err(too_deep(param, "expression"));
        }
        let Expr::Arith(op, a, b) = self else {
            return self.emit_leaf(schema, param, out);
        };
        let ta = a.emit(schema, param, depth + 1, out)?;
        let tb = b.emit(schema, param, depth + 1, out)?;
        let t = arith_type(ta, tb, a, b, param)?;
        out.push(Step::Arith(*op, t.clone()));
        Ok(t)
    }

    /// A column or a literal (kept apart from the recursive [`Expr::emit`] so that its frame stays small).
    #[inline(never)]
    fn emit_leaf(&self, schema: &Schema, param: &str, out: &mut Vec<Step>) -> Result<DataType> {
        Ok(match self {
            Expr::Column(c) => {
                let index = column_index(schema, c, param)?;
                out.push(Step::Column(index));
                schema.field(index).data_type().clone()
            }
            Expr::Literal(l @ Literal::Int(_)) => {
                out.push(Step::Literal(l.array()));
                DataType::Int64
            }
            Expr::Literal(l @ Literal::Float(_)) => {
                out.push(Step::Literal(l.array()));
                DataType::Float64
            }
            Expr::Literal(l) => {
                return Err(Error::param(
                    param,
                    format!("expected a number, got {}", l.describe()),
                ));
            }
            Expr::Arith(..) => unreachable!("emit handles arithmetic"),
        })
    }
}

impl ArithOp {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "+" => Some(ArithOp::Add),
            "-" => Some(ArithOp::Sub),
            "*" => Some(ArithOp::Mul),
            _ => None,
        }
    }
}

/// The type arithmetic on `a` (of type `ta`) and `b` computes in: int64, or float64 if either is a float.
#[inline(never)]
fn arith_type(ta: DataType, tb: DataType, a: &Expr, b: &Expr, param: &str) -> Result<DataType> {
    for (t, e) in [(&ta, a), (&tb, b)] {
        if !t.is_numeric() {
            let name = match e {
                Expr::Column(c) => format!("column '{c}'"),
                _ => "an operand".into(),
            };
            return Err(Error::new(
                ErrorKind::ColumnType,
                format!("{param}: {name} is {t}; arithmetic needs numbers"),
            ));
        }
    }
    Ok(if ta.is_floating() || tb.is_floating() {
        DataType::Float64
    } else {
        DataType::Int64
    })
}

/// One step of a bound expression, in postfix order.
#[derive(Debug)]
enum Step {
    Column(usize),
    /// A one-row array, repeated to the batch's length.
    Literal(ArrayRef),
    /// Pops the right, then the left operand; computes in the given type.
    Arith(ArithOp, DataType),
}

/// An expression checked against a schema: a postfix program run on a stack of arrays, so evaluation never
/// recurses however deeply the expression nests (workers run it on small stacks).
#[derive(Debug)]
pub(crate) struct BoundExpr {
    steps: Vec<Step>,
    out: DataType,
}

impl BoundExpr {
    /// The output type: a column's own type, or int64/float64 for arithmetic.
    pub fn data_type(&self) -> &DataType {
        &self.out
    }

    pub fn evaluate(&self, batch: &RecordBatch, param: &str) -> Result<ArrayRef> {
        let mut stack: Vec<ArrayRef> = Vec::new();
        for step in &self.steps {
            let v = match step {
                Step::Column(index) => batch.column(*index).clone(),
                Step::Literal(one) => {
                    let idx = arrow_array::UInt32Array::from(vec![0u32; batch.num_rows()]);
                    arrow_select::take::take(one, &idx, None)?
                }
                Step::Arith(op, out) => {
                    let y = stack.pop().expect("arithmetic has a right operand");
                    let x = stack.pop().expect("arithmetic has a left operand");
                    arith(*op, out, &x, &y, param)?
                }
            };
            stack.push(v);
        }
        debug_assert_eq!(stack.len(), 1);
        Ok(stack.pop().expect("an expression leaves one result"))
    }
}

/// `x op y` in `out` (int64, checked, or float64).
fn arith(op: ArithOp, out: &DataType, x: &ArrayRef, y: &ArrayRef, param: &str) -> Result<ArrayRef> {
    let x = arrow_cast::cast(x, out)?;
    let y = arrow_cast::cast(y, out)?;
    let nulls = NullBuffer::union(x.nulls(), y.nulls());
    if *out == DataType::Float64 {
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
