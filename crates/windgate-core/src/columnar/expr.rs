//! Predicates of the columnar operators: `filter`'s condition and the row classes of `sessionize` and
//! `last_n_before` (arithmetic for `project` is in [`super::arith`]).
//!
//! The spec form is nested lists, so that Python can write them as tuples:
//! `("and", ("<=", "store", 10), ("isin", "category", [1, 2, 3]))`, `("is_not_null", "user_id")`,
//! `("not", p)`.
//!
//! Predicates follow SQL's three-valued logic: a comparison with a null is null, `and`/`or` are Kleene, and
//! `filter` keeps the rows where the predicate is true. Literals are converted to the column's type once, at
//! bind time; an integer column compared with a fractional float literal is compared as float64.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, Scalar, StringArray,
};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_cast::{CastOptions, cast_with_options};
use arrow_schema::{DataType, Schema};

use super::value::{MAX_EXPR_DEPTH, Value};
use crate::error::{Error, ErrorKind, Result};
use crate::keys::column_index;

/// A literal of a predicate or an expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl Literal {
    pub(crate) fn parse(v: &Value, param: &str) -> Result<Self> {
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

    pub(crate) fn describe(&self) -> String {
        match self {
            Literal::Bool(b) => format!("the bool {b}"),
            Literal::Int(i) => format!("the int {i}"),
            Literal::Float(f) => format!("the float {f}"),
            Literal::Str(s) => format!("the string {s:?}"),
        }
    }

    pub(crate) fn array(&self) -> ArrayRef {
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
pub enum RowPredicate {
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
    And(Vec<RowPredicate>),
    Or(Vec<RowPredicate>),
    Not(Box<RowPredicate>),
}

const PREDICATE_FORMS: &str = "(\"==\"|\"!=\"|\"<\"|\"<=\"|\">\"|\">=\", column, literal), (\"is_null\"|\"is_not_null\", \
     column), (\"isin\", column, [literals]), (\"and\"|\"or\", predicate, ...) or (\"not\", predicate)";

/// The error for an expression nesting deeper than [`MAX_EXPR_DEPTH`].
pub(crate) fn too_deep(param: &str, what: &str) -> Error {
    Error::param(
        param,
        format!(
            "the {what} nests more than {MAX_EXPR_DEPTH} levels deep (after merging chains of one \"and\" or \"or\"); \
             at most {MAX_EXPR_DEPTH}"
        ),
    )
}

impl RowPredicate {
    /// Parses the spec form; `param` names the parameter in errors.
    ///
    /// Chains of one `"and"` (or `"or"`), however deep, become one n-ary node and `("not", ("not", p))`
    /// becomes `p` (both exact under three-valued logic), without recursing on the chain. What still nests
    /// may nest at most [`MAX_EXPR_DEPTH`] levels; deeper is an error naming `param`.
    pub fn parse(v: &Value, param: &str) -> Result<Self> {
        Self::parse_at(v, param, 1)
    }

    fn parse_at(v: &Value, param: &str, depth: usize) -> Result<Self> {
        if depth > MAX_EXPR_DEPTH {
            return Err(too_deep(param, "predicate"));
        }
        let (op, args) = match v {
            Value::List(items) => match items.as_slice() {
                [Value::Str(op), args @ ..]
                    if (op == "and" || op == "or") && !args.is_empty()
                        || op == "not" && args.len() == 1 =>
                {
                    (op.as_str(), args)
                }
                _ => return Self::parse_leaf(v, param),
            },
            _ => return Self::parse_leaf(v, param),
        };
        Ok(match op {
            "and" | "or" => {
                // Operands that are the same operator are spliced in place (a heap stack, in order).
                let mut todo: Vec<&Value> = args.iter().rev().collect();
                let mut parts = Vec::new();
                while let Some(a) = todo.pop() {
                    if let Value::List(inner) = a
                        && inner.len() > 1
                        && matches!(&inner[0], Value::Str(o) if o == op)
                    {
                        todo.extend(inner[1..].iter().rev());
                        continue;
                    }
                    parts.push(RowPredicate::parse_at(a, param, depth + 1)?);
                }
                if op == "and" {
                    RowPredicate::And(parts)
                } else {
                    RowPredicate::Or(parts)
                }
            }
            "not" => {
                // Strip pairs of negations without recursing on them.
                let mut inner = &args[0];
                let mut negated = true;
                while let Value::List(items) = inner {
                    match items.as_slice() {
                        [Value::Str(o), p] if o == "not" => {
                            inner = p;
                            negated = !negated;
                        }
                        _ => break,
                    }
                }
                let p = RowPredicate::parse_at(inner, param, depth + 1)?;
                if negated {
                    RowPredicate::Not(Box::new(p))
                } else {
                    p
                }
            }
            _ => unreachable!("only and, or and not reach here"),
        })
    }

    /// Everything but `and`, `or` and `not` (which [`RowPredicate::parse_at`] handles, recursing): kept apart so
    /// that the recursive function's stack frame stays small.
    #[inline(never)]
    fn parse_leaf(v: &Value, param: &str) -> Result<Self> {
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
            return Ok(RowPredicate::Cmp {
                column: column(0)?,
                op: cmp,
                value: Literal::parse(&args[1], param)?,
            });
        }
        Ok(match op.as_str() {
            "and" | "or" => return Err(bad(format!("{op:?} takes at least one predicate"))),
            // `parse_at` takes a one-argument "not".
            "not" => {
                return Err(bad(format!(
                    "\"not\" takes 1 arguments, got {}",
                    args.len()
                )));
            }
            "is_null" => {
                arity(1)?;
                RowPredicate::IsNull(column(0)?)
            }
            "is_not_null" => {
                arity(1)?;
                RowPredicate::IsNotNull(column(0)?)
            }
            "isin" => {
                arity(2)?;
                let Value::List(values) = &args[1] else {
                    return Err(bad(format!(
                        "\"isin\" takes a list of literals, got {}",
                        args[1].describe()
                    )));
                };
                RowPredicate::IsIn {
                    column: column(0)?,
                    values: values
                        .iter()
                        .map(|v| Literal::parse(v, param))
                        .collect::<Result<_>>()?,
                }
            }
            _ => return Err(bad(format!("unknown operator {op:?}"))),
        })
    }

    /// Checks the columns and literal types against `schema`; `param` names the parameter in errors.
    pub(crate) fn bind(&self, schema: &Schema, param: &str) -> Result<BoundPredicate> {
        let mut steps = Vec::new();
        self.emit(schema, param, 1, &mut steps)?;
        Ok(BoundPredicate { steps })
    }

    /// Appends the predicate in postfix order (operands, then the operator).
    fn emit(&self, schema: &Schema, param: &str, depth: usize, out: &mut Vec<Step>) -> Result<()> {
        if depth > MAX_EXPR_DEPTH {
            return Err(too_deep(param, "predicate"));
        }
        match self {
            RowPredicate::And(ps) | RowPredicate::Or(ps) => {
                for p in ps {
                    p.emit(schema, param, depth + 1, out)?;
                }
                out.push(if matches!(self, RowPredicate::And(_)) {
                    Step::And(ps.len())
                } else {
                    Step::Or(ps.len())
                });
            }
            RowPredicate::Not(p) => {
                p.emit(schema, param, depth + 1, out)?;
                out.push(Step::Not);
            }
            _ => self.emit_leaf(schema, param, out)?,
        }
        Ok(())
    }

    /// A comparison or null test (kept apart from the recursive [`RowPredicate::emit`] so that its frame
    /// stays small).
    #[inline(never)]
    fn emit_leaf(&self, schema: &Schema, param: &str, out: &mut Vec<Step>) -> Result<()> {
        let col = |name: &str| column_index(schema, name, param);
        match self {
            RowPredicate::Cmp { column, op, value } => {
                let index = col(column)?;
                let (lit, as_float) = bind_literal(schema, index, value, param)?;
                out.push(Step::Cmp {
                    index,
                    op: *op,
                    lit,
                    as_float,
                });
            }
            RowPredicate::IsNull(c) => out.push(Step::IsNull(col(c)?, true)),
            RowPredicate::IsNotNull(c) => out.push(Step::IsNull(col(c)?, false)),
            RowPredicate::IsIn { column, values } => {
                let index = col(column)?;
                for v in values {
                    let (lit, as_float) = bind_literal(schema, index, v, param)?;
                    out.push(Step::Cmp {
                        index,
                        op: CmpOp::Eq,
                        lit,
                        as_float,
                    });
                }
                out.push(Step::Or(values.len()));
            }
            RowPredicate::And(_) | RowPredicate::Or(_) | RowPredicate::Not(_) => {
                unreachable!("emit handles and, or and not")
            }
        }
        Ok(())
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
    if let Literal::Float(f) = lit
        && dt.is_integer()
        && (f.fract() != 0.0 || f.abs() >= 9.0e15)
    {
        return Ok((Scalar::new(lit.array()), true));
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

/// One step of a bound predicate, in postfix order.
#[derive(Debug)]
enum Step {
    Cmp {
        index: usize,
        op: CmpOp,
        lit: Scalar<ArrayRef>,
        as_float: bool,
    },
    /// Column index; `true` for is_null.
    IsNull(usize, bool),
    /// Kleene `and` of the last `n` results.
    And(usize),
    /// Kleene `or` of the last `n` results (`n` = 0 for an empty `isin`: false everywhere).
    Or(usize),
    Not,
}

/// A predicate checked against a schema, ready to evaluate: a postfix program run on a stack of results,
/// so evaluation never recurses however deeply the predicate nests (workers run it on small stacks).
#[derive(Debug)]
pub(crate) struct BoundPredicate {
    steps: Vec<Step>,
}

impl BoundPredicate {
    /// Three-valued result per row.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        use arrow_ord::cmp;
        let mut stack: Vec<BooleanArray> = Vec::new();
        for step in &self.steps {
            let v = match step {
                Step::Cmp {
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
                Step::IsNull(index, want_null) => {
                    let col = batch.column(*index);
                    let valid = match col.logical_nulls() {
                        Some(n) => n.inner().clone(),
                        None => BooleanBuffer::new_set(col.len()),
                    };
                    BooleanArray::new(if *want_null { !&valid } else { valid }, None)
                }
                Step::And(n) | Step::Or(n) => {
                    let parts = stack.split_off(stack.len() - n);
                    fold(&parts, batch.num_rows(), matches!(step, Step::And(_)))
                }
                Step::Not => {
                    let v = stack.pop().expect("not has an operand");
                    BooleanArray::new(!v.values(), v.nulls().cloned())
                }
            };
            stack.push(v);
        }
        debug_assert_eq!(stack.len(), 1);
        Ok(stack.pop().expect("a predicate leaves one result"))
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

/// Kleene `and` (`conj`) or `or` over the parts (of `rows` rows; no parts: `conj`, i.e. true for `and`).
fn fold(parts: &[BooleanArray], rows: usize, conj: bool) -> BooleanArray {
    let mut acc: Option<(BooleanBuffer, BooleanBuffer)> = None;
    for p in parts {
        let (t, f) = truth(p);
        acc = Some(match acc {
            None => (t, f),
            Some((at, af)) if conj => (&at & &t, &af | &f),
            Some((at, af)) => (&at | &t, &af & &f),
        });
    }
    let Some((t, f)) = acc else {
        return BooleanArray::new(BooleanBuffer::collect_bool(rows, |_| conj), None);
    };
    let known = &t | &f;
    let nulls = (known.count_set_bits() != known.len()).then(|| NullBuffer::new(known));
    BooleanArray::new(t, nulls)
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
        let p = RowPredicate::parse(&v, "p")
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
        let bad = RowPredicate::parse(
            &l(vec!["==".into(), "a".into(), "x".into()]),
            "filter: predicate",
        )
        .unwrap()
        .bind(b.schema_ref(), "filter: predicate")
        .unwrap_err();
        assert!(bad.message().contains("column 'a'"), "{bad}");
        let missing =
            RowPredicate::parse(&l(vec!["is_null".into(), "zz".into()]), "filter: predicate")
                .unwrap()
                .bind(b.schema_ref(), "filter: predicate")
                .unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::ColumnNotFound);
        let op =
            RowPredicate::parse(&l(vec!["~".into(), "a".into()]), "filter: predicate").unwrap_err();
        assert!(op.message().starts_with("filter: predicate"), "{op}");
    }
}
