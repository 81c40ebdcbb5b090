//! The update mode's state in a checkpoint: the rows of the windows not yet purged (each one's place in the
//! order, key, first window and every aggregate's input value), the revisions of fired windows, the open
//! windows changed since the last early firing, and the engine's marks (JSON).

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, UInt32Array, UInt64Array,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{Field, Schema};
use serde::{Deserialize, Serialize};

use super::UpdatingEngine;
use crate::aggregate::state::{InputValues, OrderKey};
use crate::arrow_io::as_i64;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::KeyDict;

/// How each aggregate's input is stored.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
enum Input {
    Star,
    Validity,
    Int,
    Float,
}

/// Everything but the rows and the (window, key) sets.
#[derive(Serialize, Deserialize)]
pub(crate) struct Marks {
    fired_through: i64,
    purged_through: i64,
    watermark: Option<i64>,
    tick: Option<i64>,
    inputs: Vec<Input>,
}

/// The sections of a checkpoint: marks, rows, revisions, changed windows.
pub(crate) struct Exported {
    pub marks: Marks,
    pub rows: RecordBatch,
    pub revisions: RecordBatch,
    pub changed: RecordBatch,
}

impl UpdatingEngine {
    /// The engine's state (see the module doc), keys as their values.
    pub(crate) fn export(&self, keys: &KeyDict, aggregates: usize) -> Result<Exported> {
        let rows: Vec<_> = self.rows.rows().collect();
        let inputs: Vec<Input> = match rows.first() {
            Some(r) => r.3.iter().map(kind).collect::<Result<_>>()?,
            None => vec![Input::Star; aggregates],
        };
        let mut cols: Vec<(String, ArrayRef)> = vec![
            (
                "ts".into(),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.ts))),
            ),
            (
                "by".into(),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.by))),
            ),
            (
                "source".into(),
                Arc::new(UInt32Array::from_iter_values(
                    rows.iter().map(|r| r.0.source),
                )),
            ),
            (
                "seq".into(),
                Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.0.seq))),
            ),
            (
                "from".into(),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ),
        ];
        let ids: Vec<u32> = rows.iter().map(|r| r.1).collect();
        cols.extend(key_columns(keys, &ids)?);
        for (a, input) in inputs.iter().enumerate() {
            cols.push((
                format!("in{a}"),
                input_column(*input, rows.iter().map(|r| &r.3[a])),
            ));
        }
        let pairs = |set: Vec<(i64, u32, u32)>| -> Result<RecordBatch> {
            let mut cols: Vec<(String, ArrayRef)> = vec![
                (
                    "window".into(),
                    Arc::new(Int64Array::from_iter_values(set.iter().map(|p| p.0))),
                ),
                (
                    "revision".into(),
                    Arc::new(UInt32Array::from_iter_values(set.iter().map(|p| p.2))),
                ),
            ];
            cols.extend(key_columns(
                keys,
                &set.iter().map(|p| p.1).collect::<Vec<_>>(),
            )?);
            batch(cols)
        };
        let mut revisions: Vec<_> = self
            .revisions
            .iter()
            .map(|(&(j, k), &r)| (j, k, r))
            .collect();
        revisions.sort_unstable();
        Ok(Exported {
            marks: Marks {
                fired_through: self.fired_through,
                purged_through: self.purged_through,
                watermark: self.watermark,
                tick: self.tick,
                inputs,
            },
            rows: batch(cols)?,
            revisions: pairs(revisions)?,
            changed: pairs(self.changed.iter().map(|&(j, k)| (j, k, 0)).collect())?,
        })
    }

    /// Continues from an exported state; keys are numbered again in `keys`.
    pub(crate) fn import(&mut self, e: Exported, keys: &mut KeyDict) -> Result<()> {
        let m = e.marks;
        (self.fired_through, self.purged_through) = (m.fired_through, m.purged_through);
        (self.watermark, self.tick) = (m.watermark, m.tick);
        let r = &e.rows;
        let n = r.num_rows();
        let first_input = 5 + keys.names().len();
        if r.num_columns() != first_input + m.inputs.len()
            || e.revisions.num_columns() != 2 + keys.names().len()
            || e.changed.num_columns() != 2 + keys.names().len()
        {
            return Err(Error::new(
                ErrorKind::Snapshot,
                "the update mode's state does not match the operator's keys and aggregates",
            ));
        }
        let int = |i: usize| as_i64(r.column(i), "checkpoint");
        let (ts, by, from) = (int(0)?, int(1)?, int(4)?);
        let source = downcast::<UInt32Array>(r.column(2))?;
        let seq = downcast::<UInt64Array>(r.column(3))?;
        let key_cols: Vec<ArrayRef> = r.columns()[5..5 + keys.names().len()].to_vec();
        let ids = keys.ids(&key_cols, n)?;
        let at: Vec<OrderKey> = (0..n)
            .map(|i| OrderKey {
                ts: ts[i],
                by: by[i],
                source: source.value(i),
                seq: seq.value(i),
            })
            .collect();
        let inputs = m
            .inputs
            .iter()
            .enumerate()
            .map(|(a, &kind)| input_values(kind, r.column(first_input + a)))
            .collect::<Result<Vec<_>>>()?;
        self.rows.restore_rows(&at, &ids, &from, inputs);
        for (p, r) in pairs(&e.revisions, keys)? {
            self.revisions.insert(p, r);
        }
        self.changed = pairs(&e.changed, keys)?
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        Ok(())
    }
}

/// The (window, key) pairs of a section, keys numbered in `keys`, with their revisions.
fn pairs(b: &RecordBatch, keys: &mut KeyDict) -> Result<Vec<((i64, u32), u32)>> {
    let windows = as_i64(b.column(0), "checkpoint")?;
    let revisions = downcast::<UInt32Array>(b.column(1))?;
    let ids = keys.ids(&b.columns()[2..], b.num_rows())?;
    Ok((0..b.num_rows())
        .map(|i| ((windows[i], ids[i]), revisions.value(i)))
        .collect())
}

fn kind(input: &InputValues) -> Result<Input> {
    Ok(match input {
        InputValues::Star => Input::Star,
        InputValues::Validity(_) => Input::Validity,
        InputValues::Int(..) => Input::Int,
        InputValues::Float(..) => Input::Float,
        InputValues::Partial(..) => {
            return Err(Error::param(
                "input",
                "the update mode takes rows, not partial states",
            ));
        }
    })
}

/// One aggregate's inputs of every row (each a one-row slice) as a column.
fn input_column<'a>(kind: Input, rows: impl Iterator<Item = &'a InputValues>) -> ArrayRef {
    let valid = |nulls: &Option<NullBuffer>| nulls.as_ref().is_none_or(|n| n.is_valid(0));
    match kind {
        Input::Star => Arc::new(BooleanArray::from_iter(rows.map(|_| Some(true)))),
        Input::Validity => Arc::new(BooleanArray::from_iter(rows.map(|i| match i {
            InputValues::Validity(n) => Some(valid(n)),
            _ => None,
        }))),
        Input::Int => Arc::new(Int64Array::from_iter(rows.map(|i| match i {
            InputValues::Int(v, n) => valid(n).then(|| v[0]),
            _ => None,
        }))),
        Input::Float => Arc::new(Float64Array::from_iter(rows.map(|i| match i {
            InputValues::Float(v, n) => valid(n).then(|| v[0]),
            _ => None,
        }))),
    }
}

fn input_values(kind: Input, col: &ArrayRef) -> Result<InputValues> {
    Ok(match kind {
        Input::Star => InputValues::Star,
        Input::Validity => {
            let b = downcast::<BooleanArray>(col)?;
            InputValues::Validity(Some(NullBuffer::new(b.values().clone())))
        }
        Input::Int => {
            let a = downcast::<Int64Array>(col)?;
            InputValues::Int(a.values().clone(), a.nulls().cloned())
        }
        Input::Float => {
            let a = downcast::<Float64Array>(col)?;
            InputValues::Float(a.values().clone(), a.nulls().cloned())
        }
    })
}

fn key_columns(keys: &KeyDict, ids: &[u32]) -> Result<Vec<(String, ArrayRef)>> {
    let names = keys.names();
    Ok(names
        .iter()
        .map(|n| format!("key_{n}"))
        .zip(keys.columns(ids)?)
        .collect())
}

fn batch(cols: Vec<(String, ArrayRef)>) -> Result<RecordBatch> {
    let fields: Vec<Field> = cols
        .iter()
        .map(|(n, c)| Field::new(n, c.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let columns = cols.into_iter().map(|c| c.1).collect();
    RecordBatch::try_new(schema, columns).map_err(Error::output)
}

fn downcast<T: 'static>(col: &ArrayRef) -> Result<&T> {
    col.as_any().downcast_ref::<T>().ok_or_else(|| {
        Error::new(
            ErrorKind::Snapshot,
            "the update mode's state has a column of the wrong type",
        )
    })
}
