//! The spec form of an operator's parameters: a small tree of plain values (what Python's ints, floats,
//! strings, lists, tuples and dicts convert to), so that the bindings only convert and every check and
//! error message lives here, next to the operator that reads it.

use crate::error::{Error, Result};
use crate::time::Span;

/// How deeply a spec value may nest (lists and dicts inside each other) when converted from a caller's
/// data, e.g. Python's. Converting, dropping and merging chains of one `"and"`/`"or"` never recurse on the
/// nesting, so this only guards against runaway (e.g. self-referential) values.
pub const MAX_SPEC_NESTING: usize = 1_000_000;

/// How deeply a predicate or an arithmetic expression may nest once chains of one `"and"` or `"or"` are
/// merged into one n-ary node and double negations removed: `("and", ("and", p, q), r)` is one level above
/// its comparisons, `("not", ("and", p, ("not", q)))` three. Building and checking an expression recurse
/// on this depth on the caller's thread; evaluating it does not recurse at all.
pub const MAX_EXPR_DEPTH: usize = 1_000;

/// A parameter value in spec form.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A list or tuple.
    List(Vec<Value>),
    /// A dict, in the caller's order.
    Map(Vec<(String, Value)>),
}

impl Value {
    /// A short description for error messages ("an int", "a list of 3 values", ...).
    pub fn describe(&self) -> String {
        match self {
            Value::Null => "None".into(),
            Value::Bool(b) => format!("the bool {b}"),
            Value::Int(i) => format!("the int {i}"),
            Value::Float(f) => format!("the float {f}"),
            Value::Str(s) => format!("the string {s:?}"),
            Value::List(l) => format!("a list of {} values", l.len()),
            Value::Map(m) => format!("a dict of {} entries", m.len()),
        }
    }

    pub fn str(s: &str) -> Self {
        Value::Str(s.to_string())
    }

    /// A list of strings.
    pub fn strs(items: &[&str]) -> Self {
        Value::List(items.iter().map(|s| Value::str(s)).collect())
    }

    /// A dict from `(name, value)` pairs.
    pub fn map<const N: usize>(entries: [(&str, Value); N]) -> Self {
        Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }
}

/// Dropping a deeply nested value must not recurse once per level (a chain of 100 000 `&` built in Python
/// nests that deep before the predicate parser merges it): children are moved onto a heap stack instead.
impl Drop for Value {
    fn drop(&mut self) {
        fn nested(v: &Value) -> bool {
            match v {
                Value::List(items) => !items.is_empty(),
                Value::Map(entries) => !entries.is_empty(),
                _ => false,
            }
        }
        fn take(v: &mut Value, into: &mut Vec<Value>) {
            match v {
                Value::List(items) => into.extend(items.drain(..).filter(nested)),
                Value::Map(entries) => {
                    into.extend(entries.drain(..).map(|(_, v)| v).filter(nested))
                }
                _ => {}
            }
        }
        let shallow = match self {
            Value::List(items) => !items.iter().any(nested),
            Value::Map(entries) => !entries.iter().any(|(_, v)| nested(v)),
            _ => true,
        };
        if shallow {
            return;
        }
        let mut stack = Vec::new();
        take(self, &mut stack);
        while let Some(mut v) = stack.pop() {
            take(&mut v, &mut stack);
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::str(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

/// Reads an operator's parameters by name, and refuses names it does not know (a typo must not be
/// silently ignored). Every error names the operator and the parameter.
pub(crate) struct Params<'a> {
    op: &'a str,
    entries: &'a [(String, Value)],
}

impl<'a> Params<'a> {
    /// `known`: every parameter the operator takes; any other name is an error.
    pub fn new(op: &'a str, params: &'a Value, known: &[&str]) -> Result<Self> {
        let entries: &[(String, Value)] = match params {
            Value::Map(m) => m,
            Value::Null => &[],
            other => {
                return Err(Error::param(
                    op,
                    format!("expected a dict of parameters, got {}", other.describe()),
                ));
            }
        };
        if let Some((name, _)) = entries.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            return Err(Error::param(
                op,
                format!(
                    "unknown parameter {name:?} (expected one of: {})",
                    known.join(", ")
                ),
            ));
        }
        Ok(Self { op, entries })
    }

    /// `"<op>: <name>"`, the label errors start with.
    pub fn label(&self, name: &str) -> String {
        format!("{}: {name}", self.op)
    }

    pub fn error(&self, name: &str, message: impl std::fmt::Display) -> Error {
        Error::param(&self.label(name), message)
    }

    /// The value of `name`, unless absent or None.
    pub fn get(&mut self, name: &'static str) -> Option<&'a Value> {
        let i = self.entries.iter().position(|(k, _)| k == name)?;
        Some(&self.entries[i].1).filter(|v| **v != Value::Null)
    }

    fn required(&mut self, name: &'static str) -> Result<&'a Value> {
        self.get(name)
            .ok_or_else(|| self.error(name, "is required"))
    }

    pub fn string(&mut self, name: &'static str) -> Result<String> {
        let v = self.required(name)?;
        self.as_string(name, v)
    }

    pub fn opt_string(&mut self, name: &'static str) -> Result<Option<String>> {
        self.get(name).map(|v| self.as_string(name, v)).transpose()
    }

    fn as_string(&self, name: &str, v: &Value) -> Result<String> {
        match v {
            Value::Str(s) if !s.is_empty() => Ok(s.clone()),
            other => Err(self.error(
                name,
                format!("expected a column name, got {}", other.describe()),
            )),
        }
    }

    /// One column name or a list of them (`key="user_id"` or `key=["a", "b"]`); absent: empty.
    pub fn strings(&mut self, name: &'static str) -> Result<Vec<String>> {
        match self.get(name) {
            None => Ok(Vec::new()),
            Some(Value::List(items)) => items.iter().map(|v| self.as_string(name, v)).collect(),
            Some(v) => Ok(vec![self.as_string(name, v)?]),
        }
    }

    /// Like [`Params::strings`], but at least one name.
    pub fn nonempty_strings(&mut self, name: &'static str) -> Result<Vec<String>> {
        let v = self.strings(name)?;
        if v.is_empty() {
            return Err(self.error(name, "expected at least one column name"));
        }
        Ok(v)
    }

    pub fn opt_int(&mut self, name: &'static str) -> Result<Option<i64>> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i)),
            Some(other) => {
                Err(self.error(name, format!("expected an int, got {}", other.describe())))
            }
        }
    }

    /// An int in `[min, max]`, or `default` when absent.
    pub fn int_in(&mut self, name: &'static str, default: i64, min: i64, max: i64) -> Result<i64> {
        let v = self.opt_int(name)?.unwrap_or(default);
        if v < min || v > max {
            return Err(self.error(name, format!("expected {min} to {max}, got {v}")));
        }
        Ok(v)
    }

    pub fn opt_float(&mut self, name: &'static str) -> Result<Option<f64>> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i as f64)),
            Some(Value::Float(f)) if !f.is_nan() => Ok(Some(*f)),
            Some(other) => {
                Err(self.error(name, format!("expected a number, got {}", other.describe())))
            }
        }
    }

    pub fn bool(&mut self, name: &'static str, default: bool) -> Result<bool> {
        match self.get(name) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(self.error(
                name,
                format!("expected True or False, got {}", other.describe()),
            )),
        }
    }

    /// A duration: an int in the time column's unit or a duration string (resolved once the time column's
    /// type is known). Must not be negative.
    pub fn opt_span(&mut self, name: &'static str) -> Result<Option<Span>> {
        let span = match self.get(name) {
            None => return Ok(None),
            Some(Value::Int(i)) if *i >= 0 => Span::Units(*i),
            Some(Value::Str(s)) => Span::Text(s.clone()),
            Some(other) => {
                return Err(self.error(
                    name,
                    format!(
                        "expected a non-negative int in the time column's unit or a duration string such as \
                         \"1h\", got {}",
                        other.describe()
                    ),
                ));
            }
        };
        span.check(&self.label(name))?;
        Ok(Some(span))
    }

    pub fn span(&mut self, name: &'static str) -> Result<Span> {
        self.opt_span(name)?
            .ok_or_else(|| self.error(name, "is required"))
    }

    /// Partitions of a partitioned operator (how finely its keys are spread over workers; never changes
    /// the result).
    pub fn partitions(&mut self) -> Result<usize> {
        Ok(self.int_in("partitions", super::DEFAULT_PARTITIONS as i64, 1, 1 << 16)? as usize)
    }
}
