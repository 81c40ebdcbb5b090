//! One worker of the sharded engine: it reads every batch the caller shares, keeps the rows whose key hashes
//! to it, numbers their keys with a dictionary of its own and lifts them into a [`PaneEngine`] of its own; asked
//! to emit, it combines and finishes its windows and hands them back with its new keys' bytes.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use crossbeam_channel::{Receiver, Sender};

use super::super::Admitted;
use crate::aggregate::emission::Emission;
use crate::aggregate::pane_engine::PaneEngine;
use crate::aggregate::state::{InputValues, RowOrder};
use crate::error::Result;
use crate::keys::{KeyDict, KeySharder};
use crate::prefetch::{ahead, prefetch};
use crate::threads::panic_message;

/// Rows gathered and lifted at a time: a chunk's gathered columns and slots stay in L2 between the gather and
/// the lift.
const CHUNK_ROWS: usize = 1 << 13;

pub(super) enum ToWorker {
    Rows(Arc<Admitted>),
    /// Emit every window up to and including this one.
    Emit(i64),
}

/// A worker's answer to one [`ToWorker::Emit`].
pub(super) struct Part {
    /// The row bytes of the keys the worker numbered since its previous part, in id order (its ids are dense,
    /// so the first is the number of keys it had sent before).
    pub(super) new_keys: Vec<Vec<u8>>,
    /// Output rows in order `(window, key)`, keys as the worker's ids.
    pub(super) windows: Vec<i64>,
    pub(super) keys: Vec<u32>,
    /// Each aggregate's finished values, row `i` for output row `i`; or the error finishing raised.
    pub(super) columns: Result<Vec<ArrayRef>>,
}

pub(super) enum FromWorker {
    Part(usize, Part),
    Failed(String),
}

pub(super) struct Worker {
    pub(super) me: u32,
    pub(super) sharder: KeySharder,
    pub(super) dict: KeyDict,
    pub(super) pane: PaneEngine,
    /// Keys whose bytes went out in a part.
    pub(super) exported: usize,
    pub(super) pool: Pool,
}

impl Worker {
    /// Serves `input` until the caller drops it. An error or a panic is reported on `out` (the caller turns it
    /// into an operator error, never a hang) and ends the worker, which drops its input: the caller's next send
    /// fails too.
    pub(super) fn run(mut self, input: Receiver<ToWorker>, out: Sender<FromWorker>) {
        let me = self.me as usize;
        let served = catch_unwind(AssertUnwindSafe(|| self.serve(&input, &out)));
        let why = match served {
            Ok(Ok(())) => return,
            Ok(Err(e)) => format!("shard worker {me} failed: {}", e.message()),
            Err(panic) => format!("shard worker {me} panicked: {}", panic_message(&panic)),
        };
        let _ = out.send(FromWorker::Failed(why));
    }

    fn serve(&mut self, input: &Receiver<ToWorker>, out: &Sender<FromWorker>) -> Result<()> {
        let mut picked = Vec::new();
        for msg in input {
            match msg {
                ToWorker::Rows(rows) => self.ingest(&rows, &mut picked)?,
                ToWorker::Emit(last) => {
                    let part = self.emit(last);
                    if out.send(FromWorker::Part(self.me as usize, part)).is_err() {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn ingest(&mut self, rows: &Admitted, picked: &mut Vec<u32>) -> Result<()> {
        picked.clear();
        let n = rows.ts.len();
        let keep = rows.keep.as_deref();
        (self.sharder).select(&rows.key_columns, n, keep, self.me, picked)?;
        if picked.is_empty() {
            return Ok(());
        }
        if rows
            .inputs
            .iter()
            .any(|v| matches!(v, InputValues::Partial(..)))
        {
            return self.ingest_masked(rows, picked);
        }
        for chunk in picked.chunks(CHUNK_ROWS) {
            let mut ts = self.pool.take_ints();
            gather_into(&rows.ts, chunk, &mut ts);
            let by = rows.by.as_ref().map(|b| {
                let mut by = self.pool.take_ints();
                gather_into(b, chunk, &mut by);
                by
            });
            let inputs: Vec<InputValues> = (rows.inputs.iter())
                .map(|v| gather_input(v, chunk, &mut self.pool))
                .collect();
            let keys = self.ids(rows, chunk)?;
            // Gathered rows are numbered from the first one's place in its source: the numbers stay increasing
            // within the source, below every later row's and above every earlier one's (a restored state's
            // included), which is all the order of rows with equal times reads.
            let order = RowOrder {
                ts: &ts,
                by: by.as_deref(),
                source: rows.source,
                seq0: rows.seq0 + chunk[0] as u64,
            };
            self.pane.ingest(&ts, &keys, None, &inputs, order);
            self.pool.give_back(ts, by, inputs);
        }
        Ok(())
    }

    /// Partial-state inputs (`input="partials"`, a restored checkpoint's panes) are slots of a state indexed
    /// by row: they stay where they are and the other shards' rows are masked out instead of gathered.
    fn ingest_masked(&mut self, rows: &Admitted, picked: &[u32]) -> Result<()> {
        let n = rows.ts.len();
        let ids = self.ids(rows, picked)?;
        let mut keys = vec![0u32; n];
        let mut keep = vec![false; n];
        for (&i, &id) in picked.iter().zip(&ids) {
            keys[i as usize] = id;
            keep[i as usize] = true;
        }
        let inputs = &rows.inputs;
        (self.pane).ingest(&rows.ts, &keys, Some(&keep), inputs, rows.order());
        Ok(())
    }

    /// The worker's key ids of rows `picked`.
    fn ids(&mut self, rows: &Admitted, picked: &[u32]) -> Result<Vec<u32>> {
        self.dict.ids_at(&rows.key_columns, picked)
    }

    /// Combines and finishes the worker's windows up to `last` (on this thread: a float sum's finish is the
    /// costliest per-row step of an emission).
    fn emit(&mut self, last: i64) -> Part {
        let mut em = Emission::default();
        let emitted = self.pane.emit_until(last, self.dict.order(), &mut em);
        let columns = emitted.and_then(|()| em.aggregate_columns(&self.pane.scratch));
        self.pane.scratch.clear();
        let known = self.dict.len();
        let new_keys = (self.exported..known)
            .map(|id| self.dict.key_bytes(id as u32).to_vec())
            .collect();
        self.exported = known;
        Part {
            new_keys,
            windows: em.windows,
            keys: em.keys,
            columns,
        }
    }
}

/// `values[i]` for every `i` of `picked` (increasing): the worker's first read of the column, so it asks for
/// the rows ahead of the one it reads.
fn gather_into<T: Copy>(values: &[T], picked: &[u32], out: &mut Vec<T>) {
    out.clear();
    let ahead = ahead::<T>();
    out.extend(picked.iter().map(|&i| {
        prefetch(values, i as usize + ahead);
        values[i as usize]
    }));
}

/// Gather buffers, reused from chunk to chunk: fresh ones would be fresh pages, zeroed by the kernel, at every
/// chunk (a measurable share of the worker's time).
#[derive(Default)]
pub(super) struct Pool {
    ints: Vec<Vec<i64>>,
    floats: Vec<Vec<f64>>,
}

impl Pool {
    fn take_ints(&mut self) -> Vec<i64> {
        self.ints.pop().unwrap_or_default()
    }

    fn take_floats(&mut self) -> Vec<f64> {
        self.floats.pop().unwrap_or_default()
    }

    /// Takes back a chunk's buffers (the states keep no reference to them once the chunk is lifted).
    fn give_back(&mut self, ts: Vec<i64>, by: Option<Vec<i64>>, inputs: Vec<InputValues>) {
        self.ints.push(ts);
        self.ints.extend(by);
        for input in inputs {
            match input {
                InputValues::Int(v, _) => self.ints.extend(v.into_inner().into_vec::<i64>().ok()),
                InputValues::Float(v, _) => {
                    self.floats.extend(v.into_inner().into_vec::<f64>().ok())
                }
                _ => {}
            }
        }
    }
}

fn gather_nulls(nulls: &Option<NullBuffer>, picked: &[u32]) -> Option<NullBuffer> {
    let nulls = nulls.as_ref().filter(|n| n.null_count() > 0)?;
    let valid = BooleanBuffer::collect_bool(picked.len(), |j| nulls.is_valid(picked[j] as usize));
    Some(NullBuffer::new(valid))
}

fn gather_input(values: &InputValues, picked: &[u32], pool: &mut Pool) -> InputValues {
    match values {
        InputValues::Star => InputValues::Star,
        InputValues::Validity(n) => InputValues::Validity(gather_nulls(n, picked)),
        InputValues::Int(v, n) => {
            let mut out = pool.take_ints();
            gather_into(v, picked, &mut out);
            InputValues::Int(ScalarBuffer::from(out), gather_nulls(n, picked))
        }
        InputValues::Float(v, n) => {
            let mut out = pool.take_floats();
            gather_into(v, picked, &mut out);
            InputValues::Float(ScalarBuffer::from(out), gather_nulls(n, picked))
        }
        InputValues::Partial(..) => unreachable!("partial inputs are masked, not gathered"),
    }
}
