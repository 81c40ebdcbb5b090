//! Reading a pushed batch: its columns checked against the bound schema, its values read, and its rows
//! admitted (null times, the source's K-slack, `allowed_lateness`) on a copy of the source's K-slack, so that
//! nothing changes until the batch is taken whole.

use super::*;

impl WindowAggregator {
    /// Reads and checks a batch of `source` as [`Self::ingest`] would, changing nothing: its columns, its
    /// values, and its rows' admission, decided on a copy of the source's K-slack. `push` runs it over a whole
    /// batch before ingesting the batch slice by slice, so a batch is refused whole or taken whole.
    pub(super) fn read(
        &self,
        batch: &RecordBatch,
        source: usize,
        first_row: usize,
    ) -> Result<Read> {
        let o = &self.opts;
        let b = self.bound.as_ref().expect("bound");
        let what = batch_name(source);
        for name in used_columns(&self.opts, &self.specs) {
            check_same_type(&b.schema, batch, &name, &what)?;
            check_unambiguous(batch.schema_ref(), &name, "data")?;
        }
        let time_col = column(batch, &o.time, "time")?;
        let ts = as_i64(time_col, &o.time)?;
        let order_by = order_by_values(batch, o.order_by.as_deref(), &what, first_row)?;
        let inputs: Vec<InputValues> = b
            .metas
            .iter()
            .map(|m| match &m.spec.column {
                _ if o.input == InputKind::Partials => Ok(InputValues::Partial(
                    Arc::new(partial::import(m, batch)?),
                    0,
                )),
                None => Ok(InputValues::Star),
                Some(c) => input_values(
                    column(batch, c, "aggs")?,
                    m.class,
                    !function(m.spec.func).reads_values(),
                    c,
                ),
            })
            .collect::<Result<_>>()?;
        // Admission: null times, then the source's K-slack, on a copy.
        let mut kslack = self.sources[source].kslack.clone();
        // The whole batch a caller gave its time range with (see `WindowAggregator::push_in_range`).
        let known = (self.known_range).filter(|k| first_row == 0 && k.rows == batch.num_rows());
        let rules = Rules {
            time: &o.time,
            null_time: o.null_time,
            on_late: o.on_late,
            source,
            what: &what,
            first_row,
            format: b.format,
            range: known.map(|k| (k.least, k.greatest)),
        };
        let mut admitted = admit(&mut kslack, &ts, time_col.logical_nulls().as_ref(), &rules)?;
        // `tz=`: admitted by instants, placed in windows by (monotone) wall time (see `time::calendar`). Rows
        // tie on wall time in the repeated span of an autumn change; without `order_by`, the instants break
        // those ties, so `first` and `last` follow the instants there too.
        let (ts, order_by) = match &b.calendar {
            Some(c) => {
                let local = ScalarBuffer::from(c.localize(&ts));
                admitted.range = kept_range(&local, &admitted);
                (local, order_by.or(Some(ts)))
            }
            None => (ts, order_by),
        };
        let accepted = match b.update.allowed {
            Some(allowed) => {
                accept_allowed(&mut admitted, &ts, &b.spec, allowed, |wm| b.closing(wm))
            }
            None => Vec::new(),
        };
        if let Some((lo, hi)) = admitted.range {
            b.spec.check_range(lo, hi, &o.time, &b.format)?;
        }
        // Sorted times stay sorted as wall times (`tz=` localises monotonically), but only unlocalised ones
        // are promised: the pane engine searches them.
        let sorted = known.is_some_and(|k| k.sorted) && b.calendar.is_none();
        Ok(Read {
            ts,
            order_by,
            inputs,
            admitted,
            accepted,
            kslack,
            sorted,
        })
    }
}

/// The least and largest of `ts` over the rows `a` admitted.
fn kept_range(ts: &[i64], a: &crate::order::admission::BatchAdmission) -> Option<(i64, i64)> {
    a.range?;
    let keep = a.keep.as_deref();
    (ts.iter().enumerate())
        .filter(|&(i, _)| keep.is_none_or(|k| k[i]))
        .fold(None, |r, (_, &t)| {
            Some(r.map_or((t, t), |(lo, hi): (i64, i64)| (lo.min(t), hi.max(t))))
        })
}

/// A batch read and checked, not yet ingested: what [`WindowAggregator::read`] returns.
pub(super) struct Read {
    pub(super) ts: ScalarBuffer<i64>,
    pub(super) order_by: Option<ScalarBuffer<i64>>,
    pub(super) inputs: Vec<InputValues>,
    pub(super) admitted: crate::order::admission::BatchAdmission,
    /// `allowed_lateness`: the late rows that still count in some windows (index, first such window).
    pub(super) accepted: Vec<(u32, i64)>,
    /// The source's K-slack after the batch.
    pub(super) kslack: KSlack,
    /// The batch's times never decrease (its caller read them, see `WindowAggregator::push_in_range`).
    pub(super) sorted: bool,
}

/// The input columns an operator reads: time, `by`, then the aggregates' columns (their partial-state
/// columns under `input="partials"`).
pub(in crate::aggregate) fn used_columns(
    o: &WindowAggregateOptions,
    specs: &[AggSpec],
) -> Vec<String> {
    let mut out: Vec<String> = std::iter::once(&o.time)
        .chain(&o.order_by)
        .chain(&o.by)
        .cloned()
        .collect();
    for spec in specs {
        match o.input {
            InputKind::Rows => out.extend(spec.column.as_deref().map(str::to_string)),
            InputKind::Partials => out.extend(partial::column_names(spec)),
        }
    }
    out
}

/// How errors name a batch of `source`: "this batch", "a batch of source 2".
pub(in crate::aggregate) fn batch_name(source: usize) -> String {
    if source == 0 {
        "this batch".to_string()
    } else {
        format!("a batch of source {source}")
    }
}

/// The `order_by` column's values (`None` without one); a null is an error naming the row (`first_row` is the
/// batch's first row within what the caller pushed).
pub(in crate::aggregate) fn order_by_values(
    batch: &RecordBatch,
    order_by: Option<&str>,
    what: &str,
    first_row: usize,
) -> Result<Option<ScalarBuffer<i64>>> {
    let Some(c) = order_by else {
        return Ok(None);
    };
    let col = column(batch, c, "order_by")?;
    if let Some(i) = col.logical_nulls().and_then(|n| n.iter().position(|v| !v)) {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            format!(
                "order_by column {c:?} has a null at row {} of {what}; it must order every row",
                first_row + i
            ),
        ));
    }
    Ok(Some(as_i64(col, c)?))
}

/// `order_by` must be an integer, timestamp or date column.
pub(in crate::aggregate) fn check_order_by_type(column: &str, dt: &DataType) -> Result<()> {
    if dt.is_integer()
        || matches!(
            dt,
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
        )
    {
        return Ok(());
    }
    Err(Error::column_type(
        column,
        format!("order_by expects an integer or timestamp column, got {dt}"),
    ))
}
