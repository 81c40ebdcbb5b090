//! `CountWindowAggregator`: the streaming operator of count windows, and `count_window_aggregate`, the batch
//! function built on it.
//!
//! The operator is the per-key operators' ([`crate::aggregate::keyed`]: options, admission, watermark, key
//! dictionary, aggregate states); what is the count windows' own is the engine ([`super::engine`] or
//! [`super::reference`]) and the output: the `by` columns, `window_first` and `window_last` (the times of the
//! first and last row covered, in the time column's type), `window_rows` (int64), then the aggregates, in the
//! total order of the rows that completed the windows.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef};

use super::engine::CountEngine;
use super::reference::CountReference;
use super::{Fired, counts};
use crate::aggregate::batch::BatchOutput;
use crate::aggregate::keyed::{Bound, KeyedOperator, Kind, PerKeyEngine, keyed_aggregate};
use crate::aggregate::options::WindowAggregateOptions;
use crate::aggregate::slots::SlotStore;
use crate::arrow_io::{column, int_column_as};
use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};
use crate::time::TimeUnit;

mod checkpoint;

pub use checkpoint::OPERATOR as COUNT_WINDOW_OPERATOR;

/// Count windows, the kind (see [`crate::aggregate::keyed`]).
pub struct CountWindows;

impl Kind for CountWindows {
    type Window = Fired;
    const STRATEGY: &'static str = "count";
    const OPERATOR: &'static str = checkpoint::OPERATOR;
    const NAME: &'static str = "count windows";

    fn require(opts: &WindowAggregateOptions) -> Result<()> {
        if opts.rows.is_none() {
            return Err(Error::param(
                "rows",
                "a count-window operator needs rows= (rows per window)",
            ));
        }
        Ok(())
    }

    fn window_fields(window_type: &DataType) -> Vec<Field> {
        vec![
            Field::new("window_first", window_type.clone(), false),
            Field::new("window_last", window_type.clone(), false),
            Field::new("window_rows", DataType::Int64, false),
        ]
    }

    fn engine(
        opts: &WindowAggregateOptions,
        _: TimeUnit,
        store: SlotStore,
        reference: bool,
    ) -> Result<Box<dyn PerKeyEngine<Fired>>> {
        Ok(if reference {
            Box::new(CountReference::new(counts(opts), store))
        } else {
            Box::new(CountEngine::new(counts(opts), store))
        })
    }

    /// The engines fire in the total order of the completing rows already.
    fn order(_: &mut [Fired], _: &[u32]) {}

    fn key(f: &Fired) -> u32 {
        f.key
    }

    fn slot(f: &Fired) -> u32 {
        f.slot
    }

    fn columns(fired: &[Fired], window_type: &DataType) -> Result<Vec<ArrayRef>> {
        let times = |t: fn(&Fired) -> i64| {
            let values = Int64Array::from_iter_values(fired.iter().map(t));
            int_column_as(Arc::new(values), window_type)
        };
        let rows = Int64Array::from_iter_values(fired.iter().map(|f| f.rows as i64));
        Ok(vec![
            times(|f| f.first)?,
            times(|f| f.last)?,
            Arc::new(rows),
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

/// The streaming operator of count windows.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Float64Array, Int64Array, RecordBatch};
/// use windgate_core::aggregate::{CountWindowAggregator, LatenessOpt, Span, WindowAggregateOptions};
///
/// // Windows of 3 rows, one every 2 rows.
/// let mut opts = WindowAggregateOptions::count("ts", 3, Some(2), vec![("v".into(), vec!["sum".into()])]);
/// opts.lateness = LatenessOpt::Bound(Span::Units(0));
/// let mut agg = CountWindowAggregator::new(opts).unwrap();
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])) as _),
///     ("v", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0, 5.0])) as _),
/// ]).unwrap();
/// // The watermark (5) passed rows 1 to 4: windows of rows 1-2 and 2-4.
/// assert_eq!(agg.push(&batch, 0).unwrap().num_rows(), 2);
/// // The end of the stream releases row 5, which completes no window (as in Flink).
/// assert_eq!(agg.flush().unwrap().num_rows(), 0);
/// ```
pub type CountWindowAggregator = KeyedOperator<CountWindows>;

/// The batch function of count windows: every source's batches through one [`CountWindowAggregator`], then
/// the end of the stream. Without `lateness` the result is exact over all rows whatever their order.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use windgate_core::aggregate::{WindowAggregateOptions, count_window_aggregate};
///
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![5, 1, 4, 2, 3])) as _),
/// ]).unwrap();
/// let opts = WindowAggregateOptions::count("ts", 2, None, vec![("*".into(), vec!["count".into()])]);
/// let out = count_window_aggregate(vec![(batch.schema(), vec![Ok(batch)])], opts, || Ok(())).unwrap();
/// let rows: usize = out.batches.iter().map(|b| b.num_rows()).sum();
/// assert_eq!(rows, 2); // rows at 1-2 and 3-4; the row at 5 never fires
/// ```
pub fn count_window_aggregate<I>(
    sources: Vec<(SchemaRef, I)>,
    opts: WindowAggregateOptions,
    on_batch: impl FnMut() -> Result<()>,
) -> Result<BatchOutput>
where
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    keyed_aggregate::<CountWindows, I>(sources, opts, on_batch)
}

/// The `by` columns of a written batch.
fn by_columns(opts: &WindowAggregateOptions, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    (opts.by.iter())
        .map(|c| column(batch, c, "by").cloned())
        .collect()
}
