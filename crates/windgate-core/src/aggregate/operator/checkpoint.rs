//! Checkpoints of [`WindowAggregator`]: its logical state written between calls, and an operator rebuilt
//! from it that continues exactly where it stood (`docs/checkpoints.md`).
//!
//! What is written does not depend on the engine: every open pane as a row of the partial-state format of
//! [`super::partial`] (the two-phase Spark plan's encoding, not a second one), in `(pane, key)` order, plus
//! each source's K-slack, arrival counter, credits and closed flag, the counters, the input schema, output
//! a failed push left undelivered, and the last window emitted. The pane engine hands its panes over as they
//! are; the reference engine lifts its retained rows into panes; a parallel engine, whose workers keep state
//! in their own layouts, has its admitted rows of the open panes replayed from the operator's log into panes.
//! So a snapshot taken under one strategy and thread count restores under any other.
//!
//! Restoring feeds the panes to the new engine as partial inputs (exact combines: the same bits as the rows
//! they came from). The engine knows nothing of what was emitted before, so it may emit the windows up to
//! the last one emitted again from the panes it has (partially): the operator drops those ([`Emission::drop_through`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::*;
use crate::aggregate::updates::{Exported, Marks};
use crate::snapshot::{Reader, Writer};

/// The operator's name in a snapshot's header.
pub const OPERATOR: &str = "window_aggregate";

/// Version of the state this module writes; [`WindowAggregator::restore`] reads every version up to it.
pub const STATE_VERSION: u32 = 1;

/// The parameters a restore may change: they decide how the operator runs, never its rows.
const RUNTIME: &[&str] = &["threads", "strategy", "farm"];

/// One source, as written.
#[derive(Serialize, Deserialize)]
struct SourceState {
    kslack: KSlack,
    seq: u64,
    closed: bool,
    pending: Vec<(i64, u64)>,
    pending_rows: u64,
    promised: Option<i64>,
}

/// The counters of [`Stats`] that accumulate over the stream.
#[derive(Serialize, Deserialize)]
struct Counters {
    batches_in: u64,
    rows_in: u64,
    backpressured: u64,
    late_rows: u64,
    null_time_rows: u64,
    rows_out: u64,
    windows_out: u64,
}

/// Everything but the rows.
#[derive(Serialize, Deserialize)]
struct State {
    sources: Vec<SourceState>,
    counters: Counters,
    emitted: Option<i64>,
    bound: bool,
}

impl WindowAggregator {
    /// The operator's whole state as bytes (see the module docs); `annotations` are carried along as they
    /// are. Between calls only: a poisoned or flushed operator refuses.
    pub fn snapshot(&mut self, annotations: &BTreeMap<String, String>) -> Result<Vec<u8>> {
        self.check_usable("snapshot")?;
        let mut w = Writer::new(OPERATOR, STATE_VERSION, &self.opts)?;
        w.annotate_all(annotations);
        w.json("state", &self.state())?;
        let first = self.bound.as_ref().map(|b| self.first_open_pane(b));
        if let (Some(b), Some(first)) = (self.bound.as_mut(), first) {
            let ranks = b.keys.order().ranks.to_vec();
            let time = &self.opts.time;
            w.batches("schema", &b.schema, &[])?;
            let panes = open_panes(b, &mut self.log, first, &ranks, time)?;
            w.batches("panes", &partial_schema(b, time), &[panes])?;
            w.batches("carry", &b.output_schema, &self.carry)?;
            if let Some(schema) = self.late.schema() {
                w.batches("late", schema, self.late.kept())?;
            }
            if let Engine::Updating(e) = &b.engine {
                let x = e.export(&b.keys, b.metas.len())?;
                w.json("update", &x.marks)?;
                w.batches("update_rows", &x.rows.schema(), &[x.rows])?;
                w.batches("update_revisions", &x.revisions.schema(), &[x.revisions])?;
                w.batches("update_changed", &x.changed.schema(), &[x.changed])?;
            }
        }
        w.finish()
    }

    /// The options a snapshot was taken with.
    pub fn snapshot_options(data: &[u8]) -> Result<WindowAggregateOptions> {
        Reader::open(data, OPERATOR, STATE_VERSION)?.params()
    }

    /// An operator continuing from `data`. With `opts`, they must equal the snapshot's but for the runtime
    /// settings (`threads`, `strategy`, `farm`), which are taken from `opts`.
    pub fn restore(data: &[u8], opts: Option<WindowAggregateOptions>) -> Result<Self> {
        let r = Reader::open(data, OPERATOR, STATE_VERSION)?;
        let opts = r.params_or(opts, RUNTIME)?;
        let state: State = r.json("state")?;
        if state.sources.len() != opts.sources {
            return Err(corrupt("the state's sources do not match its parameters"));
        }
        let mut agg = Self::new(opts)?;
        if state.bound {
            let (schema, _) = r.batches("schema")?;
            agg.bind(&schema)?;
            let (_, panes) = r.batches("panes")?;
            let via = agg.restore_sources(&state.sources);
            for batch in &panes {
                agg.feed_panes(batch, via)?;
            }
            agg.close_restored_sources()?;
            agg.carry = r.batches("carry")?.1;
            if agg.late.schema().is_some() {
                agg.late.restore(r.batches("late")?.1);
            }
            let b = agg.bound.as_mut().expect("bound above");
            if let Engine::Updating(e) = &mut b.engine {
                let one = |name: &str| -> Result<RecordBatch> {
                    let (schema, batches) = r.batches(name)?;
                    arrow_select::concat::concat_batches(&schema, &batches).map_err(Error::output)
                };
                let x = Exported {
                    marks: r.json::<Marks>("update")?,
                    rows: one("update_rows")?,
                    revisions: one("update_revisions")?,
                    changed: one("update_changed")?,
                };
                e.import(x, &mut b.keys)?;
            }
        } else {
            agg.restore_sources(&state.sources);
        }
        agg.restore_counters(&state.counters);
        agg.emitted = state.emitted;
        // The update mode's engine knows what it fired (and fires revisions of those windows again).
        let updating = matches!(
            agg.bound.as_ref().map(|b| &b.engine),
            Some(Engine::Updating(_))
        );
        agg.floor = state
            .emitted
            .filter(|_| agg.opts.output == OutputKind::Windows && !updating);
        Ok(agg)
    }

    fn state(&self) -> State {
        let s = &self.stats;
        State {
            sources: (self.sources.iter())
                .map(|src| SourceState {
                    kslack: src.kslack.clone(),
                    seq: src.seq,
                    closed: src.closed,
                    pending: src.pending.iter().copied().collect(),
                    pending_rows: src.pending_rows,
                    promised: src.promised,
                })
                .collect(),
            counters: Counters {
                batches_in: s.batches_in,
                rows_in: s.rows_in,
                backpressured: s.backpressured,
                late_rows: s.late_rows,
                null_time_rows: s.null_time_rows,
                rows_out: s.rows_out,
                windows_out: s.windows_out,
            },
            emitted: self.emitted,
            bound: self.bound.is_some(),
        }
    }

    /// The first pane a window still to come needs.
    fn first_open_pane(&self, b: &Bound) -> i64 {
        match (self.emitted, self.opts.output) {
            (None, _) => i64::MIN,
            (Some(pane), OutputKind::Partials) => pane.saturating_add(1),
            (Some(window), OutputKind::Windows) => b.spec.first_pane(window.saturating_add(1)),
        }
    }

    /// Sets each source's state (all still open: a parallel engine must see the restored panes before a
    /// source closes); returns the source the panes are fed through: a closed one if any (nothing follows
    /// it), else the open one furthest ahead, whose later rows cannot come before any open pane (which
    /// matters to the engines that merge time-sorted sources).
    fn restore_sources(&mut self, saved: &[SourceState]) -> usize {
        for (src, s) in self.sources.iter_mut().zip(saved) {
            let policy = src.kslack.policy();
            src.kslack = s.kslack.clone().with_policy(policy);
            src.seq = s.seq;
            src.pending = s.pending.iter().copied().collect();
            src.pending_rows = s.pending_rows;
            src.promised = s.promised;
        }
        let closed = saved.iter().position(|s| s.closed);
        let ahead = (0..saved.len()).max_by_key(|&j| saved[j].kslack.max_ts());
        for (src, s) in self.sources.iter_mut().zip(saved) {
            src.closed = s.closed;
        }
        closed.or(ahead).unwrap_or(0)
    }

    /// Closes, in a parallel engine, the sources that were closed (after the panes went in).
    fn close_restored_sources(&mut self) -> Result<()> {
        let Some(Engine::Parallel(driver)) = self.bound.as_mut().map(|b| &mut b.engine) else {
            return Ok(());
        };
        for (j, _) in self.sources.iter().enumerate().filter(|(_, s)| s.closed) {
            driver.close_source(j)?;
        }
        Ok(())
    }

    /// Hands one batch of written panes to the engine as partial inputs, through source `via`.
    fn feed_panes(&mut self, batch: &RecordBatch, via: usize) -> Result<()> {
        let o = &self.opts;
        let b = self.bound.as_mut().expect("bound");
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let by: Vec<ArrayRef> =
            o.by.iter()
                .map(|c| column(batch, c, "by").cloned())
                .collect::<Result<_>>()?;
        let keys = b.keys.ids(&by, n)?;
        let ts = as_i64(column(batch, &o.time, "time")?, &o.time)?;
        let inputs = (b.metas.iter())
            .map(|m| {
                Ok(InputValues::Partial(
                    Arc::new(partial::import(m, batch)?),
                    0,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let rows = Admitted {
            ts,
            keys,
            key_columns: by,
            max_ts: None,
            keep: None,
            inputs,
            source: via as u32,
            seq0: 0,
            by: None,
            sorted: false,
        };
        if b.engine.logs_rows() {
            self.log.push(b, &rows);
        }
        b.engine.ingest(rows)
    }

    fn restore_counters(&mut self, c: &Counters) {
        let s = &mut self.stats;
        s.batches_in = c.batches_in;
        s.rows_in = c.rows_in;
        s.backpressured = c.backpressured;
        s.late_rows = c.late_rows;
        s.null_time_rows = c.null_time_rows;
        s.rows_out = c.rows_out;
        s.windows_out = c.windows_out;
    }
}

fn corrupt(message: &str) -> Error {
    Error::new(
        ErrorKind::Snapshot,
        format!("data: not a readable windgate snapshot: {message}"),
    )
}

/// The schema of the written panes: the `by` columns, the time column (the pane's start), then each
/// aggregate's partial-state columns.
fn partial_schema(b: &Bound, time: &str) -> SchemaRef {
    let keys = b.keys.names().len();
    let mut fields: Vec<Field> = (b.output_schema.fields().iter().take(keys))
        .map(|f| f.as_ref().clone())
        .collect();
    let time_type = (b.schema.field_with_name(time)).map_or(&DataType::Int64, |f| f.data_type());
    fields.push(Field::new(time, time_type.clone(), false));
    for meta in &b.metas {
        fields.extend(partial::fields(meta));
    }
    Arc::new(Schema::new_with_metadata(fields, partial::metadata()))
}

/// Every open pane from `first` on as partial-state rows, in `(pane, key)` order, whatever the engine.
fn open_panes(
    b: &Bound,
    log: &mut RowLog,
    first: i64,
    ranks: &[u32],
    time: &str,
) -> Result<RecordBatch> {
    match &b.engine {
        Engine::Pane(e) => pane_rows(b, e, first, ranks, time),
        Engine::Reference(e) => {
            let mut panes = scratch_engine(b);
            e.lift_into(&mut panes);
            pane_rows(b, &panes, first, ranks, time)
        }
        Engine::Parallel(_) | Engine::Shard(_) => pane_rows(b, log.panes(b), first, ranks, time),
        // Its state is written apart (see `snapshot`); no panes.
        Engine::Updating(_) => Ok(RecordBatch::new_empty(partial_schema(b, time))),
    }
}

/// A pane engine to lift rows into (the states of the operator's aggregates, nothing else shared).
fn scratch_engine(b: &Bound) -> PaneEngine {
    PaneEngine::new(b.spec, SlotStore::new(&b.metas), SlotStore::new(&b.metas))
}

/// The partial-state rows of `engine`'s open panes from `first` on.
fn pane_rows(
    b: &Bound,
    engine: &PaneEngine,
    first: i64,
    ranks: &[u32],
    time: &str,
) -> Result<RecordBatch> {
    let rows = engine.open_panes_from(first, ranks);
    let keys: Vec<u32> = rows.iter().map(|r| r.1).collect();
    let slots: Vec<u32> = rows.iter().map(|r| r.2).collect();
    let time_type = b
        .schema
        .field_with_name(time)
        .map_err(Error::output)?
        .data_type();
    let mut columns = b.keys.columns(&keys)?;
    let starts = Int64Array::from_iter_values(rows.iter().map(|r| b.spec.pane_start(r.0)));
    columns.push(int_column_as(Arc::new(starts), time_type)?);
    for state in &engine.store().states {
        columns.extend(state.export(&slots)?);
    }
    RecordBatch::try_new(partial_schema(b, time), columns).map_err(Error::output)
}
