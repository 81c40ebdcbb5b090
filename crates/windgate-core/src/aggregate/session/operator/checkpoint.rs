//! Checkpoints of [`SessionAggregator`]: its logical state written between calls, and an operator rebuilt
//! from it that continues exactly where it stood (`docs/checkpoints.md`).
//!
//! What is written: each source's K-slack, arrival counter and closed flag, the counters, the input schema,
//! and every open session as one row: the `by` columns, `window_start`, `window_end` (int64) and each
//! aggregate's state in the partial-state format of [`crate::aggregate::partial`] (the two-phase plan's
//! encoding, not a second one). Restoring combines each row's states into a fresh slot (exact combines: the
//! same bits as the rows they came from) and lists the session again. The streaming engine only: the
//! reference engine keeps rows, not states, so `strategy="reference"` neither writes nor restores them.

use std::collections::BTreeMap;

use super::*;
use crate::aggregate::front::{RunState, corrupt};
use crate::aggregate::partial;
use crate::aggregate::state::AggState;
use crate::snapshot::{Reader, Writer};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;

/// The operator's name in a snapshot's header.
pub const OPERATOR: &str = "session_aggregate";

/// Version of the state this module writes.
pub const STATE_VERSION: u32 = 1;

/// The parameters a restore may change: they decide how the operator runs, never its rows.
const RUNTIME: &[&str] = &["threads", "strategy", "farm"];

fn no_reference() -> Error {
    Error::param(
        "strategy",
        "checkpoints of session windows need the streaming engine (strategy=\"auto\"): the reference engine \
         keeps rows, not states",
    )
}

impl SessionAggregator {
    /// The operator's whole state as bytes (see the module docs); `annotations` are carried along as they
    /// are. Between calls only: a poisoned or flushed operator refuses.
    pub fn snapshot(&mut self, annotations: &BTreeMap<String, String>) -> Result<Vec<u8>> {
        self.life.check("snapshot")?;
        if self.reference {
            return Err(no_reference());
        }
        let mut w = Writer::new(OPERATOR, STATE_VERSION, &self.opts)?;
        w.annotate_all(annotations);
        let state = RunState::of(&self.sources, &self.stats, self.bound.is_some());
        w.json("state", &state)?;
        if let Some(b) = &self.bound {
            w.batches("schema", &b.schema, &[])?;
            let schema = sessions_schema(b);
            let batch = sessions_batch(b, &schema)?;
            w.batches("sessions", &schema, &[batch])?;
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
        let state: RunState = r.json("state")?;
        if state.sources() != opts.sources {
            return Err(corrupt("the state's sources do not match its parameters"));
        }
        let mut agg = Self::new(opts)?;
        if agg.reference {
            return Err(no_reference());
        }
        if state.bound {
            let (schema, _) = r.batches("schema")?;
            agg.bind(&schema)?;
            for batch in &r.batches("sessions")?.1 {
                agg.restore_sessions(batch)?;
            }
        }
        state.apply(&mut agg.sources, &mut agg.stats);
        Ok(agg)
    }

    /// Lists the sessions of one written batch again, each in a fresh slot holding its states.
    fn restore_sessions(&mut self, batch: &RecordBatch) -> Result<()> {
        let o = &self.opts;
        let b = self.bound.as_mut().expect("bound");
        let n = batch.num_rows();
        let by_cols: Vec<ArrayRef> = (o.by.iter())
            .map(|c| column(batch, c, "by").cloned())
            .collect::<Result<_>>()?;
        let keys = b.keys.ids(&by_cols, n)?;
        let int = |name: &str| -> Result<Vec<i64>> {
            let col = column(batch, name, "snapshot")?;
            let col = col
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| corrupt(format!("column {name} is not int64")))?;
            Ok(col.values().to_vec())
        };
        let (starts, ends) = (int("window_start")?, int("window_end")?);
        let states: Vec<AggState> = (b.metas.iter())
            .map(|m| partial::import(m, batch))
            .collect::<Result<_>>()?;
        let Engine::Stream(engine) = &mut b.engine else {
            return Err(no_reference());
        };
        if (starts.iter().zip(&ends)).any(|(s, e)| s >= e) {
            return Err(corrupt("a session ends before it starts"));
        }
        engine.restore(&keys, &starts, &ends, &states);
        Ok(())
    }
}

/// The `by` columns, `window_start`, `window_end` (int64), then every aggregate's partial-state columns.
fn sessions_schema(b: &Bound) -> SchemaRef {
    let by = b.keys.names().len();
    let mut fields: Vec<Field> = (b.output_schema.fields()[..by].iter())
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("window_start", DataType::Int64, false));
    fields.push(Field::new("window_end", DataType::Int64, false));
    for m in &b.metas {
        fields.extend(partial::fields(m));
    }
    Arc::new(Schema::new(fields))
}

fn sessions_batch(b: &Bound, schema: &SchemaRef) -> Result<RecordBatch> {
    let Engine::Stream(engine) = &b.engine else {
        return Err(no_reference());
    };
    let (open, store) = engine.open();
    let keys: Vec<u32> = open.iter().map(|c| c.key).collect();
    let slots: Vec<u32> = open.iter().map(|c| c.slot).collect();
    let mut columns = b.keys.columns(&keys)?;
    columns.push(Arc::new(Int64Array::from_iter_values(
        open.iter().map(|c| c.start),
    )));
    columns.push(Arc::new(Int64Array::from_iter_values(
        open.iter().map(|c| c.end),
    )));
    for state in &store.states {
        columns.extend(partial::export(state, &slots)?);
    }
    let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(open.len()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &opts).map_err(Error::output)
}
