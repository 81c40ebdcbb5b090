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
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{KeyDict, KeySharder};
use crate::prefetch::{ahead, prefetch};
use crate::threads::panic_message;

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

/// The rows of one batch that a worker routed to another: their indices in the batch and their columns,
/// gathered by the worker that read them (so each column is read from memory once, by one worker).
pub(super) struct Bucket {
    idx: Vec<u32>,
    ts: Vec<i64>,
    by: Option<Vec<i64>>,
    inputs: Vec<InputValues>,
}

pub(super) enum FromWorker {
    Part(usize, Part),
    Failed(String),
}

pub(super) struct Worker {
    pub(super) me: u32,
    pub(super) shards: usize,
    /// `to[s]`: buckets for worker `s`; `from[s]`: buckets from worker `s` (`None` for this worker). A channel
    /// per pair, unbounded (a batch's bucket is at most the batch), so a send never waits and a worker that
    /// stops is seen by the others as a closed channel.
    pub(super) to: Vec<Option<Sender<Bucket>>>,
    pub(super) from: Vec<Option<Receiver<Bucket>>>,
    /// Scratch: this worker's rows of a batch routed per shard.
    pub(super) routed: Vec<Vec<u32>>,
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

    /// Each worker routes its share of the batch's rows (an equal range) to their keys' shards, gathering their
    /// columns per shard, sends the other workers their buckets, lifts its own and then those the others routed
    /// to it. Rows are lifted in any order: every combine is exact and commutative, and a bucket's rows are
    /// numbered from the first one's place in its source (see [`Self::lift`]).
    fn ingest(&mut self, rows: &Admitted, picked: &mut Vec<u32>) -> Result<()> {
        if rows
            .inputs
            .iter()
            .any(|v| matches!(v, InputValues::Partial(..)))
        {
            picked.clear();
            let n = rows.ts.len();
            let keep = rows.keep.as_deref();
            (self.sharder).select(&rows.key_columns, n, keep, self.me, picked)?;
            return self.ingest_masked(rows, picked);
        }
        let (n, t, me) = (rows.ts.len(), self.shards, self.me as usize);
        let mut routed = std::mem::take(&mut self.routed);
        routed.iter_mut().for_each(Vec::clear);
        let keep = rows.keep.as_deref();
        let mine = n * me / t..n * (me + 1) / t;
        let result = (self.sharder).route(&rows.key_columns, mine, keep, &mut routed);
        if let Err(e) = result {
            self.routed = routed;
            return Err(e);
        }
        for (s, idx) in routed.iter().enumerate() {
            if let Some(to) = &self.to[s] {
                let bucket = gather_bucket(rows, idx, &mut self.pool);
                if to.send(bucket).is_err() {
                    self.routed = routed;
                    return Err(peer_stopped(s));
                }
            }
        }
        let own = gather_bucket(rows, &routed[me], &mut self.pool);
        self.routed = routed;
        self.lift(rows, own)?;
        for s in 0..t {
            let Some(from) = &self.from[s] else { continue };
            let bucket = from.recv().map_err(|_| peer_stopped(s))?;
            self.lift(rows, bucket)?;
        }
        Ok(())
    }

    /// Lifts a bucket of `rows`. Its rows get consecutive numbers from the first one's place in its source:
    /// increasing within the source, above every earlier row's and below every later one's (a restored
    /// state's included), which is all the order of rows with equal times reads.
    fn lift(&mut self, rows: &Admitted, bucket: Bucket) -> Result<()> {
        if let Some(&first) = bucket.idx.first() {
            let keys = self.dict.ids_at(&rows.key_columns, &bucket.idx)?;
            let order = RowOrder {
                ts: &bucket.ts,
                by: bucket.by.as_deref(),
                source: rows.source,
                seq0: rows.seq0 + first as u64,
            };
            (self.pane).ingest(&bucket.ts, &keys, None, &bucket.inputs, order);
        }
        self.pool.give_back(bucket.ts, bucket.by, bucket.inputs);
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
        let columns = emitted.and_then(|()| {
            (self.pane.scratch.states.iter())
                .map(|s| s.finish(&em.slots))
                .collect::<Result<Vec<_>>>()
        });
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

/// Rows `idx` of `rows`, gathered.
fn gather_bucket(rows: &Admitted, idx: &[u32], pool: &mut Pool) -> Bucket {
    let mut ts = pool.take_ints();
    gather_into(&rows.ts, idx, &mut ts);
    let by = rows.by.as_ref().map(|b| {
        let mut by = pool.take_ints();
        gather_into(b, idx, &mut by);
        by
    });
    let inputs = (rows.inputs.iter())
        .map(|v| gather_input(v, idx, pool))
        .collect();
    Bucket {
        idx: idx.to_vec(),
        ts,
        by,
        inputs,
    }
}

fn peer_stopped(s: usize) -> Error {
    Error::new(ErrorKind::Poisoned, format!("shard worker {s} stopped"))
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
