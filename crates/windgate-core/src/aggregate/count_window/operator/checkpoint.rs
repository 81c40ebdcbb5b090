//! Checkpoints of [`CountWindowAggregator`] (`docs/checkpoints.md`): besides what every per-key operator
//! writes ([`crate::aggregate::keyed_checkpoint`]), two batches of partial states in the format of [`crate::aggregate::partial`]: `pending`, a row per row
//! waiting for the watermark (the `by` columns, its place in the total order `@ts`, `@by`, `@source`, `@seq`,
//! its state), and `panes`, a row per pane of a key's last rows, oldest first (the `by` columns, the key's
//! count `@count`, the pane's `@first`, `@last`, `@rows`, its state). Restoring combines each row's states into a
//! fresh slot (exact combines: the same bits). The streaming engine only: the reference engine keeps rows, not
//! states, so `strategy="reference"` neither writes nor restores them.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::{RecordBatchOptions, UInt64Array};

use super::*;
use crate::aggregate::count_window::engine::{Pane, Pending};
use arrow_schema::Schema;

use crate::aggregate::front::{self, corrupt};
use crate::aggregate::keyed::Bound;
use crate::aggregate::keyed_checkpoint::no_reference;
use crate::aggregate::partial;
use crate::aggregate::state::OrderKey;
use crate::snapshot::{Reader, Writer};

/// The operator's name in a snapshot's header.
pub const OPERATOR: &str = "count_window_aggregate";

const PENDING: [&str; 4] = ["@ts", "@by", "@source", "@seq"];
const PANES: [&str; 4] = ["@count", "@first", "@last", "@rows"];

/// Writes the waiting rows and the keys' panes (see the module docs).
pub(super) fn write(b: &Bound<CountWindows>, w: &mut Writer) -> Result<()> {
    let engine: &CountEngine = (b.engine.as_any())
        .downcast_ref()
        .ok_or_else(|| no_reference(CountWindows::NAME))?;
    let pending = engine.pending();
    let keys: Vec<u32> = pending.iter().map(|p| p.key).collect();
    let slots: Vec<u32> = pending.iter().map(|p| p.slot).collect();
    let columns: [ArrayRef; 4] = [
        ints(pending.iter().map(|p| p.at.ts)),
        ints(pending.iter().map(|p| p.at.by)),
        Arc::new(UInt64Array::from_iter_values(
            pending.iter().map(|p| p.at.source as u64),
        )),
        Arc::new(UInt64Array::from_iter_values(
            pending.iter().map(|p| p.at.seq),
        )),
    ];
    let (schema, batch) = written(b, engine, PENDING, &keys, &slots, columns)?;
    w.batches("pending", &schema, &[batch])?;
    let panes: Vec<(u32, u64, Pane)> = engine.panes().map(|(k, c, p)| (k, c, *p)).collect();
    let keys: Vec<u32> = panes.iter().map(|p| p.0).collect();
    let slots: Vec<u32> = panes.iter().map(|p| p.2.slot).collect();
    let columns: [ArrayRef; 4] = [
        Arc::new(UInt64Array::from_iter_values(panes.iter().map(|p| p.1))),
        ints(panes.iter().map(|p| p.2.first)),
        ints(panes.iter().map(|p| p.2.last)),
        Arc::new(UInt64Array::from_iter_values(
            panes.iter().map(|p| p.2.rows),
        )),
    ];
    let (schema, batch) = written(b, engine, PANES, &keys, &slots, columns)?;
    w.batches("panes", &schema, &[batch])?;
    Ok(())
}

/// Puts the written rows and panes back.
pub(super) fn read(
    b: &mut Bound<CountWindows>,
    opts: &WindowAggregateOptions,
    r: &Reader<'_>,
) -> Result<()> {
    for batch in &r.batches("pending")?.1 {
        restore_rows(b, opts, batch, false)?;
    }
    for batch in &r.batches("panes")?.1 {
        restore_rows(b, opts, batch, true)?;
    }
    Ok(())
}

/// Puts the rows of one written batch back: waiting rows, or (`panes`) panes in their keys' order.
fn restore_rows(
    b: &mut Bound<CountWindows>,
    opts: &WindowAggregateOptions,
    batch: &RecordBatch,
    panes: bool,
) -> Result<()> {
    let keys = b.keys.ids(&by_columns(opts, batch)?, batch.num_rows())?;
    let engine: &mut CountEngine = (b.engine.as_any_mut())
        .downcast_mut()
        .ok_or_else(|| no_reference(CountWindows::NAME))?;
    let slots = front::import_slots(engine.store_mut(), &b.metas, batch)?;
    let names = if panes { PANES } else { PENDING };
    let [a, c, d, e] = names.map(|name| read_u64(batch, name));
    let (a, c, d, e) = (a?, c?, d?, e?);
    for (i, (&key, &slot)) in keys.iter().zip(&slots).enumerate() {
        if panes {
            let pane = Pane {
                first: c[i] as i64,
                last: d[i] as i64,
                rows: e[i],
                slot,
            };
            if pane.rows == 0 || pane.first > pane.last {
                return Err(corrupt("a pane without rows"));
            }
            engine.insert_pane(key, a[i], pane);
        } else {
            let at = OrderKey {
                ts: a[i] as i64,
                by: c[i] as i64,
                source: u32::try_from(d[i]).map_err(|_| corrupt("a source out of range"))?,
                seq: e[i],
            };
            engine.insert_pending(Pending { at, key, slot });
        }
    }
    Ok(())
}

fn ints(values: impl Iterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(values))
}

/// A written column as u64 bits (int64 columns reinterpreted; the readers cast back).
fn read_u64(batch: &RecordBatch, name: &str) -> Result<Vec<u64>> {
    let col = column(batch, name, "snapshot")?;
    if let Some(c) = col.as_primitive_opt::<Int64Type>() {
        return Ok(c.values().iter().map(|&v| v as u64).collect());
    }
    let c = col
        .as_primitive_opt::<UInt64Type>()
        .ok_or_else(|| corrupt(format!("column {name} is not an integer column")))?;
    Ok(c.values().to_vec())
}

/// One written batch: the `by` columns of `keys`, the four `names` columns, then the partial states of
/// `slots`.
fn written(
    b: &Bound<CountWindows>,
    engine: &CountEngine,
    names: [&str; 4],
    keys: &[u32],
    slots: &[u32],
    own: [ArrayRef; 4],
) -> Result<(SchemaRef, RecordBatch)> {
    let by = b.keys.names().len();
    let mut fields: Vec<Field> = (b.output_schema.fields()[..by].iter())
        .map(|f| f.as_ref().clone())
        .collect();
    for (name, col) in names.iter().zip(&own) {
        fields.push(Field::new(*name, col.data_type().clone(), false));
    }
    for m in &b.metas {
        fields.extend(partial::fields(m));
    }
    let schema = Arc::new(Schema::new(fields));
    let mut columns = b.keys.columns(keys)?;
    columns.extend(own);
    for state in &engine.store().states {
        columns.extend(partial::export(state, slots)?);
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(keys.len()));
    let batch =
        RecordBatch::try_new_with_options(schema.clone(), columns, &opts).map_err(Error::output)?;
    Ok((schema, batch))
}
