//! The small expression language of the columnar operators: predicates for `filter` (and for the row
//! classes of `sessionize` and `last_n_before`) and arithmetic for `project`.
//!
//! The spec form is nested lists, so that Python can write them as tuples:
//! `("and", ("<=", "store", 10), ("isin", "category", [1, 2, 3]))`, `("is_not_null", "user_id")`,
//! `("not", p)`; arithmetic: `("*", "quantity", "price")`, where a string is a column and a number a literal.
//!
//! Predicates follow SQL's three-valued logic: a comparison with a null is null, `and`/`or` are Kleene, and
//! `filter` keeps the rows where the predicate is true. Literals are converted to the column's type once, at
//! bind time; an integer column compared with a fractional float literal is compared as float64.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, Scalar, StringArray,
};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_cast::{CastOptions, cast_with_options};
use arrow_schema::{DataType, Schema};

use super::keys::column_index;
use super::value::Value;
use crate::error::{Error, ErrorKind, Result};

/// A literal of a predicate or an expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl Literal {
    fn parse(v: &Value, param: &str) -> Result<Self> {
        Ok(match v {
            Value::Bool(b) => Literal::Bool(*b),
            Value::Int(i) => Literal::Int(*i),
            Value::Float(f) if !f.is_nan() => Literal::Float(*f),
            Value::Str(s) => Literal::Str(s.clone()),
            other => {
                return Err(Error::param(
                    param,
                    format!(
                        "expected a literal (bool, int, float or string), got {}",
                        other.describe()
                    ),
                ));
            }
        })
    }

    fn describe(&self) -> String {
        match self {
            Literal::Bool(b) => format!("the bool {b}"),
            Literal::Int(i) => format!("the int {i}"),
            Literal::Float(f) => format!("the float {f}"),
            Literal::Str(s) => format!("the string {s:?}"),
        }
    }

    fn array(&self) -> ArrayRef {
        match self {
            Literal::Bool(b) => Arc::new(BooleanArray::from(vec![*b])),
            Literal::Int(i) => Arc::new(Int64Array::from(vec![*i])),
            Literal::Float(f) => Arc::new(Float64Array::from(vec![*f])),
            Literal::Str(s) => Arc::new(StringArray::from(vec![s.as_str()])),
        }
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A row predicate.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    Cmp {
        column: String,
        op: CmpOp,
        value: Literal,
    },
    IsNull(String),
    IsNotNull(String),
    IsIn {
        column: String,
        values: Vec<Literal>,
    },
    And(Vec<Predicate>),
    Or(Vec<Predicate>),
    Not(Box<Predicate>),
}

const PREDICATE_FORMS: &str = "(\"==\"|\"!=\"|\"<\"|\"<=\"|\">\"|\">=\", column, literal), (\"is_null\"|\"is_not_null\", \
     column), (\"isin\", column, [literals]), (\"and\"|\"or\", predicate, ...) or (\"not\", predicate)";

impl Predicate {
    /// Parses the spec form; `param` names the parameter in errors.
    pub fn parse(v: &Value, param: &str) -> Result<Self> {
        let bad = |why: String| Error::param(param, format!("{why}; expected {PREDICATE_FORMS}"));
        let Value::List(items) = v else {
            return Err(bad(format!("got {}", v.describe())));
        };
        let Some(Value::Str(op)) = items.first() else {
            return Err(bad("the first element must be the operator name".into()));
        };
        let args = &items[1..];
        let column = |i: usize| match args.get(i) {
            Some(Value::Str(c)) if !c.is_empty() => Ok(c.clone()),
            Some(other) => Err(bad(format!(
                "{op:?} takes a column name, got {}",
                other.describe()
            ))),
            None => Err(bad(format!("{op:?} takes a column name"))),
        };
        let arity = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(bad(format!(
                    "{op:?} takes {n} arguments, got {}",
                    args.len()
                )))
            }
        };
        let cmp = match op.as_str() {
            "==" | "=" => Some(CmpOp::Eq),
            "!=" => Some(CmpOp::Ne),
            "<" => Some(CmpOp::Lt),
            "<=" => Some(CmpOp::Le),
            ">" => Some(CmpOp::Gt),
            ">=" => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(cmp) = cmp {
            arity(2)?;
            return Ok(Predicate::Cmp {
                column: column(0)?,
                op: cmp,
                value: Literal::parse(&args[1], param)?,
            });
        }
        Ok(match op.as_str() {
            "is_null" => {
                arity(1)?;
                Predicate::IsNull(column(0)?)
            }
            "is_not_null" => {
                arity(1)?;
                Predicate::IsNotNull(column(0)?)
            }
            "isin" => {
                arity(2)?;
                let Value::List(values) = &args[1] else {
                    return Err(bad(format!(
                        "\"isin\" takes a list of literals, got {}",
                        args[1].describe()
                    )));
                };
                Predicate::IsIn {
                    column: column(0)?,
                    values: values
                        .iter()
                        .map(|v| Literal::parse(v, param))
                        .collect::<Result<_>>()?,
                }
            }
            "and" | "or" => {
                if args.is_empty() {
                    return Err(bad(format!("{op:?} takes at least one predicate")));
                }
                let parts = args
                    .iter()
                    .map(|a| Predicate::parse(a, param))
                    .collect::<Result<Vec<_>>>()?;
                if op == "and" {
                    Predicate::And(parts)
                } else {
                    Predicate::Or(parts)
                }
            }
            "not" => {
                arity(1)?;
                Predicate::Not(Box::new(Predicate::parse(&args[0], param)?))
            }
            _ => return Err(bad(format!("unknown operator {op:?}"))),
        })
    }

    /// Checks the columns and literal types against `schema`; `param` names the parameter in errors.
    pub(crate) fn bind(&self, schema: &Schema, param: &str) -> Result<BoundPredicate> {
        let col = |name: &str| column_index(schema, name, param);
        Ok(match self {
            Predicate::Cmp { column, op, value } => {
                let index = col(column)?;
                let (lit, as_float) = bind_literal(schema, index, value, param)?;
                BoundPredicate::Cmp {
                    index,
                    op: *op,
                    lit,
                    as_float,
                }
            }
            Predicate::IsNull(c) => BoundPredicate::IsNull(col(c)?, true),
            Predicate::IsNotNull(c) => BoundPredicate::IsNull(col(c)?, false),
            Predicate::IsIn { column, values } => {
                let index = col(column)?;
                let lits = values
                    .iter()
                    .map(|v| bind_literal(schema, index, v, param))
                    .collect::<Result<Vec<_>>>()?;
                BoundPredicate::Or(
                    lits.into_iter()
                        .map(|(lit, as_float)| BoundPredicate::Cmp {
                            index,
                            op: CmpOp::Eq,
                            lit,
                            as_float,
                        })
                        .collect(),
                )
            }
            Predicate::And(ps) => BoundPredicate::And(
                ps.iter()
                    .map(|p| p.bind(schema, param))
                    .collect::<Result<_>>()?,
            ),
            Predicate::Or(ps) => BoundPredicate::Or(
                ps.iter()
                    .map(|p| p.bind(schema, param))
                    .collect::<Result<_>>()?,
            ),
            Predicate::Not(p) => BoundPredicate::Not(Box::new(p.bind(schema, param)?)),
        })
    }
}

/// The literal as a one-row array of the column's type (or float64, with `true`, when an integer column
/// meets a fractional float).
fn bind_literal(
    schema: &Schema,
    index: usize,
    lit: &Literal,
    param: &str,
) -> Result<(Scalar<ArrayRef>, bool)> {
    let field = schema.field(index);
    let dt = field.data_type();
    let mismatch = || {
        Error::new(
            ErrorKind::ColumnType,
            format!(
                "{param}: cannot compare column '{}' ({dt}) with {}",
                field.name(),
                lit.describe()
            ),
        )
    };
    let numeric = dt.is_numeric();
    let temporal = dt.is_temporal();
    let stringy = matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    let ok = match lit {
        Literal::Bool(_) => *dt == DataType::Boolean,
        Literal::Int(_) => numeric || temporal,
        Literal::Float(_) => numeric,
        Literal::Str(_) => stringy,
    };
    if !ok {
        return Err(mismatch());
    }
    if let Literal::Float(f) = lit {
        if dt.is_integer() && (f.fract() != 0.0 || f.abs() >= 9.0e15) {
            return Ok((Scalar::new(lit.array()), true));
        }
    }
    let cast = cast_with_options(
        &lit.array(),
        dt,
        &CastOptions {
            safe: false,
            ..Default::default()
        },
    )
    .map_err(|_| mismatch())?;
    Ok((Scalar::new(cast), false))
}

/// A predicate checked against a schema, ready to evaluate.
#[derive(Debug)]
pub(crate) enum BoundPredicate {
    Cmp {
        index: usize,
        op: CmpOp,
        lit: Scalar<ArrayRef>,
        as_float: bool,
    },
    /// Column index; `true` for is_null.
    IsNull(usize, bool),
    And(Vec<BoundPredicate>),
    Or(Vec<BoundPredicate>),
    Not(Box<BoundPredicate>),
}

impl BoundPredicate {
    /// Three-valued result per row.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        use arrow_ord::cmp;
        Ok(match self {
            BoundPredicate::Cmp {
                index,
                op,
                lit,
                as_float,
            } => {
                let mut col = batch.column(*index).clone();
                if *as_float {
                    col = arrow_cast::cast(&col, &DataType::Float64)?;
                }
                let c: &dyn arrow_array::Datum = &col;
                match op {
                    CmpOp::Eq => cmp::eq(c, lit)?,
                    CmpOp::Ne => cmp::neq(c, lit)?,
                    CmpOp::Lt => cmp::lt(c, lit)?,
                    CmpOp::Le => cmp::lt_eq(c, lit)?,
                    CmpOp::Gt => cmp::gt(c, lit)?,
                    CmpOp::Ge => cmp::gt_eq(c, lit)?,
                }
            }
            BoundPredicate::IsNull(index, want_null) => {
                let col = batch.column(*index);
                let valid = match col.logical_nulls() {
                    Some(n) => n.inner().clone(),
                    None => BooleanBuffer::new_set(col.len()),
                };
                BooleanArray::new(if *want_null { !&valid } else { valid }, None)
            }
            BoundPredicate::And(ps) => fold(ps, batch, true)?,
            BoundPredicate::Or(ps) => fold(ps, batch, false)?,
            BoundPredicate::Not(p) => {
                let v = p.evaluate(batch)?;
                BooleanArray::new(!v.values(), v.nulls().cloned())
            }
        })
    }

    /// Rows where the predicate is true (null counts as false).
    pub fn mask(&self, batch: &RecordBatch) -> Result<BooleanBuffer> {
        Ok(truth(&self.evaluate(batch)?).0)
    }
}

/// `(true, false)` rows of a three-valued result.
fn truth(a: &BooleanArray) -> (BooleanBuffer, BooleanBuffer) {
    match a.nulls() {
        None => (a.values().clone(), !a.values()),
        Some(n) => (a.values() & n.inner(), &!a.values() & n.inner()),
    }
}

/// Kleene `and` (`conj`) or `or` over the parts.
fn fold(ps: &[BoundPredicate], batch: &RecordBatch, conj: bool) -> Result<BooleanArray> {
    let mut acc: Option<(BooleanBuffer, BooleanBuffer)> = None;
    for p in ps {
        let (t, f) = truth(&p.evaluate(batch)?);
        acc = Some(match acc {
            None => (t, f),
            Some((at, af)) if conj => (&at & &t, &af | &f),
            Some((at, af)) => (&at | &t, &af & &f),
        });
    }
    let (t, f) = acc.expect("and/or has at least one part");
    let known = &t | &f;
    let nulls = (known.count_set_bits() != known.len()).then(|| NullBuffer::new(known));
    Ok(BooleanArray::new(t, nulls))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(arrow_array::Int32Array::from(vec![
                    Some(1),
                    None,
                    Some(3),
                    Some(4),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("x"),
                    Some("y"),
                    None,
                    Some("x"),
                ])),
            ],
        )
        .unwrap()
    }

    fn eval(v: Value) -> Vec<Option<bool>> {
        let b = batch();
        let p = Predicate::parse(&v, "p")
            .unwrap()
            .bind(b.schema_ref(), "p")
            .unwrap();
        p.evaluate(&b).unwrap().iter().collect()
    }

    fn l(items: Vec<Value>) -> Value {
        Value::List(items)
    }

    #[test]
    fn three_valued_logic() {
        let lt = l(vec!["<".into(), "a".into(), 3i64.into()]);
        assert_eq!(
            eval(lt.clone()),
            vec![Some(true), None, Some(false), Some(false)]
        );
        let sx = l(vec!["==".into(), "s".into(), "x".into()]);
        assert_eq!(
            eval(l(vec!["and".into(), lt.clone(), sx.clone()])),
            vec![Some(true), Some(false), Some(false), Some(false)]
        );
        assert_eq!(
            eval(l(vec!["or".into(), lt.clone(), sx])),
            vec![Some(true), None, None, Some(true)]
        );
        assert_eq!(
            eval(l(vec!["not".into(), lt])),
            vec![Some(false), None, Some(true), Some(true)]
        );
        assert_eq!(
            eval(l(vec![
                "isin".into(),
                "a".into(),
                l(vec![4i64.into(), 1i64.into()])
            ])),
            vec![Some(true), None, Some(false), Some(true)]
        );
        assert_eq!(
            eval(l(vec!["is_null".into(), "s".into()])),
            vec![Some(false), Some(false), Some(true), Some(false)]
        );
        assert_eq!(
            eval(l(vec![">".into(), "a".into(), 2.5.into()])),
            vec![Some(false), None, Some(true), Some(true)]
        );
    }

    #[test]
    fn errors_name_the_parameter_and_column() {
        let b = batch();
        let bad = Predicate::parse(
            &l(vec!["==".into(), "a".into(), "x".into()]),
            "filter: predicate",
        )
        .unwrap()
        .bind(b.schema_ref(), "filter: predicate")
        .unwrap_err();
        assert!(bad.message().contains("column 'a'"), "{bad}");
        let missing =
            Predicate::parse(&l(vec!["is_null".into(), "zz".into()]), "filter: predicate")
                .unwrap()
                .bind(b.schema_ref(), "filter: predicate")
                .unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::ColumnNotFound);
        let op =
            Predicate::parse(&l(vec!["~".into(), "a".into()]), "filter: predicate").unwrap_err();
        assert!(op.message().starts_with("filter: predicate"), "{op}");
    }
}
