//! Checkpoints of [`SessionAggregator`] (`docs/checkpoints.md`): besides what every per-key operator writes
//! ([`crate::aggregate::keyed_checkpoint`]), every open session as one row: the `by` columns, `window_start`, `window_end` (int64) and each
//! aggregate's state in the partial-state format of [`crate::aggregate::partial`] (the two-phase plan's
//! encoding, not a second one). Restoring combines each row's states into a fresh slot (exact combines: the
//! same bits as the rows they came from) and lists the session again. The streaming engine only: the
//! reference engine keeps rows, not states, so `strategy="reference"` neither writes nor restores them.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;

use super::*;
use arrow_schema::Schema;

use crate::aggregate::front::{self, corrupt};
use crate::aggregate::keyed::Bound;
use crate::aggregate::keyed_checkpoint::no_reference;
use crate::aggregate::partial;
use crate::arrow_io::column;
use crate::snapshot::{Reader, Writer};

/// The operator's name in a snapshot's header.
pub const OPERATOR: &str = "session_aggregate";

/// Writes the open sessions (see the module docs).
pub(super) fn write(b: &Bound<SessionWindows>, w: &mut Writer) -> Result<()> {
    let schema = sessions_schema(b);
    let batch = sessions_batch(b, &schema)?;
    w.batches("sessions", &schema, &[batch])
}

/// Lists the written sessions again, each in a fresh slot holding its states.
pub(super) fn read(
    b: &mut Bound<SessionWindows>,
    opts: &WindowAggregateOptions,
    r: &Reader<'_>,
) -> Result<()> {
    for batch in &r.batches("sessions")?.1 {
        restore_sessions(b, opts, batch)?;
    }
    Ok(())
}

fn stream(b: &Bound<SessionWindows>) -> Result<&SessionEngine> {
    (b.engine.as_any())
        .downcast_ref()
        .ok_or_else(|| no_reference(SessionWindows::NAME))
}

/// Lists the sessions of one written batch again.
fn restore_sessions(
    b: &mut Bound<SessionWindows>,
    o: &WindowAggregateOptions,
    batch: &RecordBatch,
) -> Result<()> {
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
    let engine: &mut SessionEngine = (b.engine.as_any_mut())
        .downcast_mut()
        .ok_or_else(|| no_reference(SessionWindows::NAME))?;
    let slots = front::import_slots(engine.store_mut(), &b.metas, batch)?;
    for i in 0..n {
        if starts[i] >= ends[i] {
            return Err(corrupt("a session ends before it starts"));
        }
        engine.insert(keys[i], starts[i], ends[i], slots[i]);
    }
    Ok(())
}

/// The `by` columns, `window_start`, `window_end` (int64), then every aggregate's partial-state columns.
fn sessions_schema(b: &Bound<SessionWindows>) -> SchemaRef {
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

fn sessions_batch(b: &Bound<SessionWindows>, schema: &SchemaRef) -> Result<RecordBatch> {
    let engine = stream(b)?;
    let open = engine.open();
    let keys: Vec<u32> = open.iter().map(|c| c.key).collect();
    let slots: Vec<u32> = open.iter().map(|c| c.slot).collect();
    let mut columns = b.keys.columns(&keys)?;
    columns.push(Arc::new(Int64Array::from_iter_values(
        open.iter().map(|c| c.start),
    )));
    columns.push(Arc::new(Int64Array::from_iter_values(
        open.iter().map(|c| c.end),
    )));
    for state in &engine.store().states {
        columns.extend(partial::export(state, &slots)?);
    }
    let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(open.len()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &opts).map_err(Error::output)
}
