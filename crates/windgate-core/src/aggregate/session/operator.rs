//! `SessionAggregator`: the streaming operator of session windows, and `session_aggregate`, the batch
//! function built on it.
//!
//! The operator is the per-key operators' ([`crate::aggregate::keyed`]: options, admission, watermark, key
//! dictionary, aggregate states); what is the sessions' own is the engine ([`super::engine`] or
//! [`super::reference`]) and the output: the `by` columns, `window_start`, `window_end` (the time column's
//! type), then the aggregates, in the order `(window_end, window_start, key)`.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef};

use super::engine::SessionEngine;
use super::reference::SessionReference;
use super::{Closed, positive_gap};
use crate::aggregate::keyed::{Bound, KeyedOperator, Kind, PerKeyEngine, keyed_aggregate};
use crate::aggregate::options::WindowAggregateOptions;
use crate::aggregate::slots::SlotStore;
use crate::arrow_io::int_column_as;
use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};
use crate::time::TimeUnit;

mod checkpoint;

pub use checkpoint::OPERATOR as SESSION_OPERATOR;

/// Session windows, the kind (see [`crate::aggregate::keyed`]).
pub struct SessionWindows;

impl Kind for SessionWindows {
    type Window = Closed;
    const STRATEGY: &'static str = "session";
    const OPERATOR: &'static str = checkpoint::OPERATOR;
    const NAME: &'static str = "session windows";

    fn require(opts: &WindowAggregateOptions) -> Result<()> {
        if opts.gap.is_none() {
            return Err(Error::param(
                "gap",
                "a session operator needs gap= (the inactivity gap)",
            ));
        }
        Ok(())
    }

    fn window_fields(window_type: &DataType) -> Vec<Field> {
        vec![
            Field::new("window_start", window_type.clone(), false),
            Field::new("window_end", window_type.clone(), false),
        ]
    }

    fn engine(
        opts: &WindowAggregateOptions,
        unit: TimeUnit,
        store: SlotStore,
        reference: bool,
    ) -> Result<Box<dyn PerKeyEngine<Closed>>> {
        let gap = opts.gap.as_ref().expect("checked by require");
        let gap = positive_gap(gap.resolve(unit, &opts.time, "gap")?)?;
        Ok(if reference {
            Box::new(SessionReference::new(gap, store))
        } else {
            Box::new(SessionEngine::new(gap, store))
        })
    }

    /// `(end, start, key rank)`.
    fn order(closed: &mut [Closed], ranks: &[u32]) {
        closed.sort_unstable_by_key(|c| (c.end, c.start, ranks[c.key as usize]));
    }

    fn key(c: &Closed) -> u32 {
        c.key
    }

    fn slot(c: &Closed) -> u32 {
        c.slot
    }

    fn columns(closed: &[Closed], window_type: &DataType) -> Result<Vec<ArrayRef>> {
        let starts = Int64Array::from_iter_values(closed.iter().map(|c| c.start));
        let ends = Int64Array::from_iter_values(closed.iter().map(|c| c.end));
        Ok(vec![
            int_column_as(Arc::new(starts), window_type)?,
            int_column_as(Arc::new(ends), window_type)?,
        ])
    }

    fn write_state(b: &Bound<Self>, w: &mut Writer) -> Result<()> {
        checkpoint::write(b, w)
    }

    fn read_state(
        b: &mut Bound<Self>,
        opts: &WindowAggregateOptions,
        r: &Reader<'_>,
    ) -> Result<()> {
        checkpoint::read(b, opts, r)
    }
}

/// The streaming operator of session windows.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Float64Array, Int64Array, RecordBatch};
/// use windgate_core::aggregate::{LatenessOpt, SessionAggregator, Span, WindowAggregateOptions};
///
/// let mut opts = WindowAggregateOptions::session("ts", Span::Units(10), vec![
///     ("*".into(), vec!["count".into()]),
///     ("v".into(), vec!["sum".into()]),
/// ]);
/// opts.lateness = LatenessOpt::Bound(Span::Units(0));
/// let mut agg = SessionAggregator::new(opts).unwrap();
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 5, 14, 40])) as _),
///     ("v", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0])) as _),
/// ]).unwrap();
/// let out = agg.push(&batch, 0).unwrap();   // [1, 24) is final at ts 40 (14 <= 5 + 10 joined it)
/// assert_eq!(out.num_rows(), 1);
/// let rest = agg.flush().unwrap();          // [40, 50) at the end of the stream
/// assert_eq!(rest.num_rows(), 1);
/// ```
pub type SessionAggregator = KeyedOperator<SessionWindows>;

/// The batch function of session windows: every source's batches through one [`SessionAggregator`], then
/// the end of the stream. Without `lateness` the result is exact over all rows whatever their order.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use windgate_core::aggregate::{Span, WindowAggregateOptions, session_aggregate};
///
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 30, 5, 12, 3])) as _),
/// ]).unwrap();
/// let opts = WindowAggregateOptions::session("ts", Span::Units(10), vec![("*".into(), vec!["count".into()])]);
/// let (_, out) = session_aggregate(vec![(batch.schema(), vec![Ok(batch)])], opts, || Ok(())).unwrap();
/// let rows: usize = out.iter().map(|b| b.num_rows()).sum();
/// assert_eq!(rows, 2); // [1, 22) holds 1, 3, 5, 12; then [30, 40)
/// ```
pub fn session_aggregate<I>(
    sources: Vec<(SchemaRef, I)>,
    opts: WindowAggregateOptions,
    on_batch: impl FnMut() -> Result<()>,
) -> Result<(SchemaRef, Vec<RecordBatch>)>
where
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    let out = keyed_aggregate::<SessionWindows, I>(sources, opts, on_batch)?;
    Ok((out.schema, out.batches))
}
