//! Output batches: the windows of an emission, and the partial-state rows of `output="partials"`.

use super::*;

/// Builds the partial-state rows `(pane, key, slot)` drained from the pane engine.
pub(super) fn partial_batch(b: &Bound, rows: &[(i64, u32, u32)]) -> Result<RecordBatch> {
    let Engine::Pane(engine) = &b.engine else {
        unreachable!("checked by the caller");
    };
    let keys: Vec<u32> = rows.iter().map(|r| r.1).collect();
    let slots: Vec<u32> = rows.iter().map(|r| r.2).collect();
    let mut columns = b.keys.columns(&keys)?;
    let time_type = b.output_schema.field(columns.len()).data_type().clone();
    let starts =
        Int64Array::from_iter_values(rows.iter().map(|r| b.instant(b.spec.pane_start(r.0))));
    columns.push(int_column_as(Arc::new(starts), &time_type)?);
    for state in &engine.store().states {
        columns.extend(partial::export(state, &slots)?);
    }
    if columns.is_empty() {
        return Ok(RecordBatch::new_empty(b.output_schema.clone()));
    }
    RecordBatch::try_new(b.output_schema.clone(), columns).map_err(Error::output)
}

/// Builds the output batch of an emission.
pub(super) fn assemble(b: &mut Bound, e: &Emission) -> Result<RecordBatch> {
    let mut columns = b.keys.emitted_columns(&e.keys)?;
    let window_type = b
        .output_schema
        .field(b.keys.names().len())
        .data_type()
        .clone();
    let (starts, ends) = window_bounds(b, &e.windows);
    columns.push(int_column_as(Arc::new(starts), &window_type)?);
    columns.push(int_column_as(Arc::new(ends), &window_type)?);
    columns.extend(e.aggregate_columns(b.engine.scratch())?);
    if b.update.allowed.is_some() {
        columns.push(Arc::new(Int64Array::from_iter_values(
            e.marks.iter().map(|m| i64::from(m.0)),
        )));
    }
    if b.update.early.is_some() {
        columns.push(Arc::new(BooleanArray::from_iter(
            e.marks.iter().map(|m| Some(m.1)),
        )));
    }
    if columns.is_empty() {
        return Ok(RecordBatch::new_empty(b.output_schema.clone()));
    }
    RecordBatch::try_new(b.output_schema.clone(), columns).map_err(Error::output)
}

/// `window_start` and `window_end` of each output row: instants (with `tz=`, each window's bounds are looked
/// up once, not once per key).
fn window_bounds(b: &Bound, windows: &[i64]) -> (Int64Array, Int64Array) {
    let (mut starts, mut ends) = (
        Vec::with_capacity(windows.len()),
        Vec::with_capacity(windows.len()),
    );
    let mut cached: Option<(i64, (i64, i64))> = None;
    for &j in windows {
        let (start, end) = match cached {
            Some((k, bounds)) if k == j => bounds,
            _ => {
                let bounds = (
                    b.instant(b.spec.window_start(j)),
                    b.instant(b.spec.window_end(j)),
                );
                cached = Some((j, bounds));
                bounds
            }
        };
        starts.push(start);
        ends.push(end);
    }
    (starts.into(), ends.into())
}
