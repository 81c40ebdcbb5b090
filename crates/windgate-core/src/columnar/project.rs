//! `project`: selects, renames and computes columns (SQL's `SELECT a, b AS c, x * y AS z`). Stateless.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema, SchemaRef};

use super::arith::{BoundExpr, Expr};
use super::value::{Params, Value};
use super::{Bound, Chunk, ColumnarOp, check_schema};
use crate::error::{Error, Result};
use crate::runtime::pipeline::Stateless;

/// Output columns in order, each an expression of the input's columns.
#[derive(Debug, Clone)]
pub struct Project {
    columns: Vec<(String, Expr)>,
}

impl Project {
    /// `columns`: output name and expression; a bare column keeps its type, arithmetic gives int64 or float64.
    pub fn new(columns: Vec<(String, Expr)>) -> Self {
        Self { columns }
    }

    /// Keeps the named columns, in this order.
    pub fn select(names: &[&str]) -> Self {
        Self::new(
            names
                .iter()
                .map(|n| (n.to_string(), Expr::Column(n.to_string())))
                .collect(),
        )
    }

    /// `columns=["a", "b"]` or `columns={"out": "a", "total": ("*", "q", "p")}`.
    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new("project", spec, &["columns"])?;
        let label = p.label("columns");
        let columns = match p.get("columns") {
            Some(Value::List(items)) => items
                .iter()
                .map(|v| match v {
                    Value::Str(s) if !s.is_empty() => Ok((s.clone(), Expr::Column(s.clone()))),
                    other => Err(Error::param(
                        &label,
                        format!("expected column names, got {}", other.describe()),
                    )),
                })
                .collect::<Result<Vec<_>>>()?,
            Some(Value::Map(entries)) => entries
                .iter()
                .map(|(name, v)| Ok((name.clone(), Expr::parse(v, &format!("{label}[{name:?}]"))?)))
                .collect::<Result<Vec<_>>>()?,
            Some(Value::Str(s)) => vec![(s.clone(), Expr::Column(s.clone()))],
            Some(other) => {
                return Err(Error::param(
                    &label,
                    format!(
                        "expected a list of column names or a dict of output name to expression, got {}",
                        other.describe()
                    ),
                ));
            }
            None => return Err(p.error("columns", "is required")),
        };
        if columns.is_empty() {
            return Err(Error::param(&label, "expected at least one column"));
        }
        Ok(Self::new(columns))
    }
}

impl ColumnarOp for Project {
    fn name(&self) -> &'static str {
        "project"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let mut fields = Vec::with_capacity(self.columns.len());
        let mut columns = Vec::with_capacity(self.columns.len());
        for (i, (name, expr)) in self.columns.iter().enumerate() {
            if self.columns[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::param(
                    "project: columns",
                    format!("the output column {name:?} is named twice"),
                ));
            }
            let param = format!("project: columns[{name:?}]");
            let bound = expr.bind(input, &param)?;
            let field = match expr {
                Expr::Column(c) => input.field_with_name(c)?.clone().with_name(name),
                _ => Field::new(name, bound.data_type().clone(), true),
            };
            fields.push(field);
            columns.push((param, bound));
        }
        let output = Arc::new(Schema::new(fields));
        let op = ProjectOp {
            columns,
            input: input.clone(),
            output: output.clone(),
        };
        Ok(Bound::new(output, move |p| p.stateless(op)))
    }
}

struct ProjectOp {
    /// Each output column's label for errors (`project: columns["name"]`) and bound expression.
    columns: Vec<(String, BoundExpr)>,
    input: SchemaRef,
    output: SchemaRef,
}

impl Stateless<Chunk> for ProjectOp {
    fn name(&self) -> &str {
        "project"
    }

    fn process(&self, input: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let batch = input.batch;
        check_schema("project", &self.input, &batch)?;
        let cols = self
            .columns
            .iter()
            .map(|(param, e)| e.evaluate(&batch, param))
            .collect::<Result<Vec<_>>>()?;
        out.push(Chunk::new(
            RecordBatch::try_new(self.output.clone(), cols).map_err(Error::output)?,
        ));
        Ok(())
    }
}
