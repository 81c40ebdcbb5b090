//! Checkpoints of the preference operator: [`PreferenceOperator::snapshot`], [`PreferenceOperator::restore`]
//! and [`PreferenceOperator::snapshot_options`] (`docs/checkpoints.md#preference-queries`).
//!
//! A snapshot is the operator's *logical* state in the container of [`crate::snapshot`], never its memory
//! layout:
//!
//! * the parameters: the options, flat as the Python keywords take them (`query`, `dims`, `k`, ...), so that a
//!   mismatch names the keyword;
//! * `rows` (Arrow IPC, the bound input schema): the retained input rows, chunk after chunk. They are every
//!   row an open window may still pick, plus the rows that share an arrival chunk with one (the operator
//!   keeps whole chunks, `retained.rs`); the restored operator keeps the same chunks, so it gathers output
//!   rows and frees memory exactly as the uninterrupted one;
//! * `keys` (Arrow IPC, the `by` columns): the group dictionary's keys in id order, so that groups keep their
//!   ids (the `keys` counter, and the ids of rows already retained);
//! * `state` (JSON): the K-slack (watermark, slack, largest time), the next arrival position, the last window
//!   emitted, the last pane holding a row, the counters, and per retained chunk its first arrival position,
//!   length, last window and the rows admission refused.
//!
//! The engines' kernels are not written. A kernel's answer depends only on the *set* of (order key, values)
//! inserted (`docs/architecture.md#determinism`), and a row's order key is its time and arrival position,
//! both kept; so a restored operator feeds the retained admitted rows of open panes to a fresh engine of any
//! strategy and thread count and gets the answers the old engine would have given. Windows up to the last
//! emitted one, which the re-fed rows partly re-create, are dropped by the operator
//! (`PreferenceOperator::emitted`), so nothing comes out twice.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{Field, Schema, SchemaRef};
use arrow_select::concat::concat_batches;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::operator::{PreferenceOperator, values};
use super::options::{PreferenceOptions, QueryKind};
use super::query::PrefChunk;
use super::retained::{Chunk, Retained};
use super::strategy::PreferenceStrategy;
use crate::arrow_io::{as_i64, column};
use crate::error::{Error, ErrorKind, Result};
use crate::order::admission::{NullTime, OnLate};
use crate::order::kslack::{KSlack, LatenessOpt};
use crate::snapshot::{Reader, Writer, check_params};
use crate::time::Span;
use crate::window_options::{FarmOptions, WindowOptions};

/// The operator name in a snapshot's header (one for the three queries: the query is a parameter).
pub const OPERATOR: &str = "preference";

/// The state layout written by this version; a reader keeps reading every version it ever wrote.
pub const STATE_VERSION: u32 = 1;

/// The parameters that change how the operator runs, never its rows: a restore may change them.
const RUNTIME: [&str; 3] = ["threads", "strategy", "farm"];

/// Retained chunks are written in IPC batches of at least this many rows (small pushes leave many small
/// chunks; one IPC message each would cost more header than rows).
const IPC_ROWS: usize = 1 << 13;

/// The options as a snapshot's parameters: flat, named as the Python keywords.
#[derive(Serialize, Deserialize)]
struct Params {
    time: String,
    size: Span,
    slide: Option<Span>,
    offset: Span,
    by: Vec<String>,
    #[serde(flatten)]
    query: QueryKind,
    lateness: LatenessOpt,
    on_late: OnLate,
    null_time: NullTime,
    threads: Option<usize>,
    strategy: PreferenceStrategy,
    farm: FarmOptions,
}

impl Params {
    fn of(o: &PreferenceOptions) -> Self {
        let w = &o.window;
        Self {
            time: w.time.clone(),
            size: w.size.clone(),
            slide: w.slide.clone(),
            offset: w.offset.clone(),
            by: w.by.clone(),
            query: o.query.clone(),
            lateness: w.lateness.clone(),
            on_late: w.on_late,
            null_time: w.null_time,
            threads: w.threads,
            strategy: o.strategy,
            farm: w.farm.clone(),
        }
    }

    fn into_options(self) -> PreferenceOptions {
        let mut window = WindowOptions::new(self.time, self.size);
        window.slide = self.slide;
        window.offset = self.offset;
        window.by = self.by;
        window.lateness = self.lateness;
        window.on_late = self.on_late;
        window.null_time = self.null_time;
        window.threads = self.threads;
        window.farm = self.farm;
        PreferenceOptions {
            window,
            query: self.query,
            strategy: self.strategy,
        }
    }
}

/// The scalars of the state (the `state` section).
#[derive(Serialize, Deserialize)]
struct State {
    /// Whether a schema was bound (else there are no `rows` and `keys` sections).
    bound: bool,
    /// Arrival position of the next row: rows keep their positions, so ties break as before.
    next_seq: u64,
    /// The last window emitted.
    emitted: Option<i64>,
    /// The last pane holding an admitted row (where `flush` stops).
    last_pane: Option<i64>,
    kslack: KSlack,
    counters: Counters,
    /// The retained chunks, in arrival order, their rows in `rows` one after the other.
    chunks: Vec<ChunkInfo>,
}

#[derive(Serialize, Deserialize)]
struct Counters {
    batches_in: u64,
    rows_in: u64,
    late_rows: u64,
    null_time_rows: u64,
    rows_out: u64,
    windows_out: u64,
}

#[derive(Serialize, Deserialize)]
struct ChunkInfo {
    seq0: u64,
    rows: usize,
    last_window: i64,
    refused: Vec<u32>,
}

/// A snapshot whose sections do not fit together: as unreadable as a truncated one.
fn corrupt(message: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Snapshot,
        format!("data: not a readable windgate snapshot: {message}"),
    )
}

impl PreferenceOperator {
    /// The operator's whole logical state as snapshot bytes, `annotations` carried along. Take it between
    /// calls; [`Self::restore`] continues exactly where this operator stands. A poisoned or flushed operator
    /// has no state to continue from: the error says which.
    pub fn snapshot(&mut self, annotations: &BTreeMap<String, String>) -> Result<Vec<u8>> {
        self.life.check("snapshot")?;
        let mut w = Writer::new(OPERATOR, STATE_VERSION, &Params::of(&self.opts))?;
        w.annotate_all(annotations);
        w.json("state", &self.state())?;
        if let Some(b) = &self.bound {
            w.batches("rows", &b.schema, &row_batches(&self.retained, &b.schema)?)?;
            if !self.opts.window.by.is_empty() {
                let (schema, keys) = key_batch(&b.keys, &self.opts.window.by)?;
                w.batches("keys", &schema, &[keys])?;
            }
        }
        w.finish()
    }

    /// An operator continuing from `data`. With `Some(opts)`, the options must equal the snapshot's but for
    /// the runtime settings (`threads`, `strategy`, `farm`), which are `opts`' (else a `SnapshotMismatch`
    /// error names the first parameter that differs); with `None`, the snapshot's own options. Bytes that are
    /// truncated, changed or not a preference snapshot are a `Snapshot` error.
    pub fn restore(data: &[u8], opts: Option<PreferenceOptions>) -> Result<Self> {
        let r = Reader::open(data, OPERATOR, STATE_VERSION)?;
        let opts = match opts {
            Some(o) => {
                check(r.params_json(), &o)?;
                o
            }
            None => options_of(&r)?,
        };
        let state: State = r.json("state")?;
        let mut op = PreferenceOperator::new(opts)?;
        op.load(&r, state).map_err(|e| match e.kind() {
            ErrorKind::Snapshot => e,
            _ => corrupt(format!("its rows do not restore: {}", e.message())),
        })?;
        Ok(op)
    }

    /// The options a snapshot was taken with (the bindings apply runtime overrides to them).
    pub fn snapshot_options(data: &[u8]) -> Result<PreferenceOptions> {
        options_of(&Reader::open(data, OPERATOR, STATE_VERSION)?)
    }

    fn state(&self) -> State {
        let s = &self.stats;
        State {
            bound: self.bound.is_some(),
            next_seq: self.seq,
            emitted: self.emitted,
            last_pane: self.bound.as_ref().and_then(|b| b.engine.last_pane()),
            kslack: self.kslack.clone(),
            counters: Counters {
                batches_in: s.batches_in,
                rows_in: s.rows_in,
                late_rows: s.late_rows,
                null_time_rows: s.null_time_rows,
                rows_out: s.rows_out,
                windows_out: s.windows_out,
            },
            chunks: self
                .retained
                .chunks()
                .map(|c| ChunkInfo {
                    seq0: c.seq0,
                    rows: c.batch.num_rows(),
                    last_window: c.last_window,
                    refused: c.refused.clone(),
                })
                .collect(),
        }
    }

    /// Puts a snapshot's state into a fresh operator: counters, K-slack, groups, retained rows, and the
    /// engine fed again with the rows of open panes.
    fn load(&mut self, r: &Reader<'_>, state: State) -> Result<()> {
        let c = &state.counters;
        self.stats.batches_in = c.batches_in;
        self.stats.rows_in = c.rows_in;
        self.stats.late_rows = c.late_rows;
        self.stats.null_time_rows = c.null_time_rows;
        self.stats.rows_out = c.rows_out;
        self.stats.windows_out = c.windows_out;
        self.seq = state.next_seq;
        self.emitted = state.emitted;
        if !state.bound {
            return Ok(());
        }
        let (schema, batches) = r.batches("rows")?;
        self.bind(&schema)?;
        if state.kslack.policy() != self.kslack.policy() {
            return Err(corrupt("its watermark state is of another lateness policy"));
        }
        self.kslack = state.kslack;
        self.load_keys(r)?;
        for chunk in split_chunks(&batches, &schema, state.chunks, state.next_seq)? {
            self.refeed(&chunk)?;
            self.retained.push_chunk(chunk);
        }
        let b = self.bound.as_mut().expect("bound above");
        b.engine.restore_last_pane(state.last_pane);
        Ok(())
    }

    /// Rebuilds the group dictionary: the keys in id order get the same ids again.
    fn load_keys(&mut self, r: &Reader<'_>) -> Result<()> {
        let by = &self.opts.window.by;
        if by.is_empty() {
            return Ok(());
        }
        let b = self.bound.as_mut().expect("bound");
        let (_, batches) = r.batches("keys")?;
        for batch in batches {
            let mut cols = Vec::with_capacity(by.len());
            for name in by {
                let col = column(&batch, name, "by")?;
                let want = b.schema.field_with_name(name)?.data_type();
                // The dictionary decodes some types (dictionaries) to their values: back to the input type.
                cols.push(if col.data_type() == want {
                    col.clone()
                } else {
                    arrow_cast::cast(col, want)?
                });
            }
            let first = b.keys.len() as u32;
            let ids = b.keys.ids(&cols, batch.num_rows())?;
            if !ids.iter().copied().eq(first..first + ids.len() as u32) {
                return Err(corrupt("its group keys repeat"));
            }
        }
        Ok(())
    }

    /// Feeds a retained chunk's admitted rows whose windows are not all emitted to the engine, with their
    /// original arrival positions.
    fn refeed(&mut self, chunk: &Chunk) -> Result<()> {
        let o = &self.opts.window;
        let b = self.bound.as_mut().expect("bound");
        let batch = &chunk.batch;
        let n = batch.num_rows();
        let ts = as_i64(column(batch, &o.time, "time")?, &o.time)?;
        let mut keep = vec![true; n];
        for &i in &chunk.refused {
            keep[i as usize] = false;
        }
        let admitted = || (0..n).filter(|&i| keep[i]).map(|i| ts[i]);
        let (Some(lo), Some(hi)) = (admitted().min(), admitted().max()) else {
            return Ok(());
        };
        b.spec.check_range(lo, hi, &o.time, &b.format)?;
        if let Some(e) = self.emitted {
            for (i, k) in keep.iter_mut().enumerate() {
                *k = *k && b.spec.windows_of_ts(ts[i]).1 > e;
            }
        }
        if !keep.contains(&true) {
            return Ok(());
        }
        let by_cols: Vec<ArrayRef> =
            o.by.iter()
                .map(|c| column(batch, c, "by").cloned())
                .collect::<Result<_>>()?;
        let keys = b.keys.ids(&by_cols, n)?;
        let param = self.opts.query.value_param();
        let cols = self
            .opts
            .query
            .value_columns()
            .into_iter()
            .map(|c| values(column(batch, c, param)?, c, Some(&keep), 0))
            .collect::<Result<Vec<_>>>()?;
        let seq0 = chunk.seq0;
        let rows = PrefChunk {
            ts,
            keys,
            cols,
            seq0,
        };
        b.engine.ingest(rows, Some(keep))
    }
}

/// The options of a snapshot (its own parameters).
fn options_of(r: &Reader<'_>) -> Result<PreferenceOptions> {
    let opts = r.params::<Params>()?.into_options();
    opts.validate()
        .map_err(|e| corrupt(format!("its parameters: {}", e.message())))?;
    Ok(opts)
}

/// Checks a restoring operator's options against a snapshot's parameters: the query first (a top-k
/// snapshot differs from a skyline in every parameter, and the query is the one to name), then every
/// parameter but the runtime ones.
fn check(theirs: &Value, ours: &PreferenceOptions) -> Result<()> {
    let query = theirs.get("query").and_then(Value::as_str).unwrap_or("?");
    if query != ours.query.name() {
        return Err(Error::new(
            ErrorKind::SnapshotMismatch,
            format!(
                "query: the snapshot is of a {query} query, this operator runs {}; a snapshot restores \
                 only into the same query",
                ours.query.name()
            ),
        ));
    }
    check_params(theirs, &Params::of(ours), &RUNTIME)
}

/// The retained rows as IPC batches: chunks as they are, small consecutive ones put together.
fn row_batches(retained: &Retained, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    fn flush(
        schema: &SchemaRef,
        group: &mut Vec<&RecordBatch>,
        out: &mut Vec<RecordBatch>,
    ) -> Result<()> {
        match group.len() {
            0 => {}
            1 => out.push(group[0].clone()),
            _ => out.push(concat_batches(schema, group.iter().copied()).map_err(Error::output)?),
        }
        group.clear();
        Ok(())
    }
    let mut out = vec![];
    let mut group: Vec<&RecordBatch> = vec![];
    let mut rows = 0;
    for c in retained.chunks() {
        group.push(&c.batch);
        rows += c.batch.num_rows();
        if rows >= IPC_ROWS {
            flush(schema, &mut group, &mut out)?;
            rows = 0;
        }
    }
    flush(schema, &mut group, &mut out)?;
    Ok(out)
}

/// The group dictionary's keys in id order, as the `by` columns.
fn key_batch(keys: &crate::keys::KeyDict, by: &[String]) -> Result<(SchemaRef, RecordBatch)> {
    let ids: Vec<u32> = (0..keys.len() as u32).collect();
    let cols = keys.columns(&ids)?;
    let fields: Vec<Field> = by
        .iter()
        .zip(&cols)
        .map(|(name, c)| Field::new(name, c.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let options = RecordBatchOptions::new().with_row_count(Some(ids.len()));
    let batch =
        RecordBatch::try_new_with_options(schema.clone(), cols, &options).map_err(Error::output)?;
    Ok((schema, batch))
}

/// Cuts the `rows` section back into the retained chunks `infos` describes, checking that they fit: chunks
/// in arrival order below `next_seq`, row counts adding up, refused rows inside their chunk.
fn split_chunks(
    batches: &[RecordBatch],
    schema: &SchemaRef,
    infos: Vec<ChunkInfo>,
    next_seq: u64,
) -> Result<Vec<Chunk>> {
    let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut listed = 0usize;
    let mut seq = 0u64;
    for c in &infos {
        let end = c.seq0.checked_add(c.rows as u64);
        if c.rows == 0 || c.seq0 < seq || end.is_none_or(|e| e > next_seq) {
            return Err(corrupt("its retained chunks are out of order"));
        }
        if !c.refused.windows(2).all(|w| w[0] < w[1])
            || c.refused.last().is_some_and(|&i| i as usize >= c.rows)
        {
            return Err(corrupt("its refused rows lie outside their chunk"));
        }
        seq = end.unwrap_or(u64::MAX);
        listed = listed.saturating_add(c.rows);
    }
    if listed != total {
        return Err(corrupt(format!(
            "its chunks list {listed} rows, its rows section holds {total}"
        )));
    }
    let (mut at, mut off) = (0usize, 0usize);
    let mut out = Vec::with_capacity(infos.len());
    for info in infos {
        let mut parts = vec![];
        let mut need = info.rows;
        while need > 0 {
            let b = &batches[at];
            let take = need.min(b.num_rows() - off);
            if take > 0 {
                parts.push(b.slice(off, take));
            }
            (off, need) = (off + take, need - take);
            if off == b.num_rows() {
                (at, off) = (at + 1, 0);
            }
        }
        let batch = match parts.len() {
            1 => parts.pop().expect("one part"),
            _ => concat_batches(schema, &parts).map_err(Error::output)?,
        };
        out.push(Chunk {
            seq0: info.seq0,
            batch,
            last_window: info.last_window,
            refused: info.refused,
        });
    }
    Ok(out)
}
