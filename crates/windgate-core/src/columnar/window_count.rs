//! `window_count`: rows per key per tumbling event-time window (or over the whole stream), partitioned by key.
//!
//! **Emission.** A window's counts are emitted once, when it closes: at the first input row at which the
//! operator's stream time minus `lateness` reaches the window's end (the same row in every partition, see
//! [`super::keyed`]), or at end of stream. All counts of a window are therefore emitted together, after
//! every count of every earlier window, in the order `(window_start, keys)` — so a downstream `topk` knows a
//! window is complete when the first row of a later window (or the end of stream) arrives. A row whose
//! window has already closed is an error (`LateRowError`): counts are never revised. Without `size` there is
//! one window, the whole stream, emitted at end of stream ordered by key.
//!
//! `min_count` drops small counts (SQL's `HAVING count(*) >= n`). `top_k` keeps, per window, only the `k`
//! largest counts (ties by key ascending), ordered count descending: each partition keeps its local top `k`
//! and `combine`, which sees every partition's counts of the window at once, keeps the global top `k`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use hashbrown::HashMap;

use super::keyed::{Keyed, KeyedOp, PartCtx, Routing};
use super::order::{ASC, DESC, SortKey, take};
use super::value::{Params, Value};
use super::{Bound, ColumnarOp, DEFAULT_PARTITIONS, TimeColumn};
use crate::arrow_io::as_i64;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{ByteRows, RowCodec};
use crate::time::Span;
use crate::time::floor_div;

/// Counts per key per tumbling window.
#[derive(Debug, Clone)]
pub struct WindowCount {
    keys: Vec<String>,
    time: Option<String>,
    size: Option<Span>,
    min_count: i64,
    top_k: Option<usize>,
    lateness: Span,
    partitions: usize,
}

impl WindowCount {
    /// Counts per key over the whole stream (add [`WindowCount::tumbling`] for windows).
    pub fn new(keys: &[&str]) -> Self {
        Self {
            keys: keys.iter().map(|k| k.to_string()).collect(),
            time: None,
            size: None,
            min_count: 1,
            top_k: None,
            lateness: Span::Units(0),
            partitions: DEFAULT_PARTITIONS,
        }
    }

    /// Tumbling windows of `size` over `time`: `[floor(ts / size) * size, + size)`.
    pub fn tumbling(mut self, time: &str, size: i64) -> Self {
        self.time = Some(time.to_string());
        self.size = Some(Span::Units(size));
        self
    }

    pub fn min_count(mut self, n: i64) -> Self {
        self.min_count = n;
        self
    }

    pub fn top_k(mut self, k: usize) -> Self {
        self.top_k = Some(k);
        self
    }

    pub fn partitions(mut self, p: usize) -> Self {
        self.partitions = p;
        self
    }

    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new(
            "window_count",
            spec,
            &[
                "keys",
                "time",
                "size",
                "min_count",
                "top_k",
                "lateness",
                "partitions",
            ],
        )?;
        let keys = p.nonempty_strings("keys")?;
        let time = p.opt_string("time")?;
        let size = p.opt_span("size")?;
        let min_count = p.int_in("min_count", 1, 1, i64::MAX)?;
        let top_k = p.opt_int("top_k")?;
        let lateness = p.opt_span("lateness")?.unwrap_or(Span::Units(0));
        let partitions = p.partitions()?;
        if let Some(k) = top_k.filter(|k| *k < 1) {
            return Err(p.error("top_k", format!("expected at least 1, got {k}")));
        }
        if size.is_some() != time.is_some() {
            return Err(p.error(
                if size.is_some() { "time" } else { "size" },
                "time and size go together (windows of `size` over the column `time`); give both or neither",
            ));
        }
        Ok(Self {
            keys,
            time,
            size,
            min_count,
            top_k: top_k.map(|k| k as usize),
            lateness,
            partitions,
        })
    }
}

impl ColumnarOp for WindowCount {
    fn name(&self) -> &'static str {
        "window_count"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let codec = Arc::new(RowCodec::new(input, &self.keys, "window_count: keys")?);
        let nk = self.keys.len();
        let mut fields: Vec<Field> = codec.fields().to_vec();
        let (mut time, mut size, mut lateness) = (None, None, 0);
        if let (Some(t), Some(s)) = (&self.time, &self.size) {
            let tc = TimeColumn::bind(input, t, "window_count: time")?;
            let sz = tc.span(s, "window_count: size")?;
            if sz <= 0 {
                return Err(Error::param(
                    "window_count: size",
                    format!("expected a positive size, got {sz}"),
                ));
            }
            lateness = tc.span(&self.lateness, "window_count: lateness")?;
            fields.push(Field::new("window_start", tc.data_type.clone(), true));
            fields.push(Field::new("window_end", tc.data_type.clone(), true));
            size = Some(sz);
            time = Some(tc);
        }
        fields.push(Field::new("count", DataType::Int64, false));
        super::check_unique(&fields, "window_count: keys")?;
        let output = Arc::new(Schema::new(fields));
        let windowed = size.is_some();
        let count_col = output.fields().len() - 1;
        let mut merge: Vec<_> = Vec::new();
        if windowed {
            merge.push((nk, ASC));
        }
        if self.top_k.is_some() {
            merge.push((count_col, DESC));
        }
        merge.extend((0..nk).map(|i| (i, ASC)));
        let merge = SortKey::new(&output, &merge, "window_count: keys")?;
        let routing = Routing {
            keys: codec.clone(),
            time: time.as_ref().map(|t| (t.index, t.name.clone())),
            clocked: windowed,
            lateness,
            masks: Vec::new(),
            values: None,
            casts: Vec::new(),
            partitions: self.partitions,
        };
        let op = CountOp {
            codec,
            time,
            size,
            min_count: self.min_count,
            top_k: self.top_k,
            output: output.clone(),
        };
        let keyed = Keyed::new(op, routing, input.clone(), Some(merge));
        Ok(Bound::new(output, move |p| p.partitioned(keyed)))
    }
}

struct CountOp {
    codec: Arc<RowCodec>,
    time: Option<TimeColumn>,
    size: Option<i64>,
    min_count: i64,
    top_k: Option<usize>,
    output: SchemaRef,
}

/// Open windows by start (one window, start 0, without `size`), each with counts per key.
type Windows = BTreeMap<i64, HashMap<Box<[u8]>, i64>>;

#[derive(Default)]
struct CountOut {
    keys: ByteRows,
    starts: Vec<i64>,
    counts: Vec<i64>,
}

impl CountOp {
    fn emit(&self, start: i64, counts: HashMap<Box<[u8]>, i64>, out: &mut CountOut) {
        let mut kept: Vec<(Box<[u8]>, i64)> = counts
            .into_iter()
            .filter(|(_, c)| *c >= self.min_count)
            .collect();
        if let Some(k) = self.top_k {
            kept.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            kept.truncate(k);
        }
        for (key, c) in kept {
            out.keys.push(&key);
            out.starts.push(start);
            out.counts.push(c);
        }
    }
}

impl KeyedOp for CountOp {
    type State = Windows;
    type Out = CountOut;

    fn name(&self) -> &str {
        "window_count"
    }

    fn out_rows(&self, out: &CountOut) -> usize {
        out.counts.len()
    }

    fn out_batch(&self, out: CountOut) -> Result<RecordBatch> {
        let mut cols: Vec<ArrayRef> = self.codec.decode(out.keys.iter())?;
        if let (Some(t), Some(size)) = (&self.time, self.size) {
            let ends = out.starts.iter().map(|s| s + size).collect();
            cols.push(t.array(out.starts)?);
            cols.push(t.array(ends)?);
        }
        cols.push(Arc::new(Int64Array::from(out.counts)));
        RecordBatch::try_new(self.output.clone(), cols).map_err(Error::output)
    }

    fn row(&self, st: &mut Windows, ctx: &PartCtx, r: usize, _out: &mut CountOut) -> Result<()> {
        let start = match self.size {
            None => 0,
            Some(size) => {
                let ts = ctx.time(r, "window_count")?;
                let start = floor_div(ts, size) * size;
                let end = start.checked_add(size).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Overflow,
                        format!(
                            "window_count: column '{}' at {} is {ts}, whose window ends past the int64 range",
                            ctx.time_name,
                            ctx.row_label(r)
                        ),
                    )
                })?;
                let wm = ctx.watermark(r);
                if end <= wm {
                    return Err(Error::new(
                        ErrorKind::LateRow,
                        format!(
                            "window_count: column '{}' at {} is {ts}, in the window [{start}, {end}) that already \
                             closed (stream time minus lateness is {wm}); rows must arrive in time order within \
                             `lateness`",
                            ctx.time_name,
                            ctx.row_label(r)
                        ),
                    ));
                }
                start
            }
        };
        *st.entry(start)
            .or_default()
            .entry_ref(ctx.key(r))
            .or_insert(0) += 1;
        Ok(())
    }

    fn next_deadline(&self, st: &Windows) -> Option<i64> {
        let size = self.size?;
        st.first_key_value().map(|(s, _)| s.saturating_add(size))
    }

    fn fire(&self, st: &mut Windows, _deadline: i64, out: &mut CountOut) -> Result<()> {
        if let Some((start, counts)) = st.pop_first() {
            self.emit(start, counts, out);
        }
        Ok(())
    }

    fn finish(&self, st: &mut Windows, out: &mut CountOut) -> Result<()> {
        while let Some((start, counts)) = st.pop_first() {
            self.emit(start, counts, out);
        }
        Ok(())
    }

    /// The global top `k` of each window: rows arrive sorted by (attribution, window, count desc, keys).
    fn cut(&self, batch: RecordBatch, at: &[u32]) -> Result<RecordBatch> {
        let Some(k) = self.top_k else {
            return Ok(batch);
        };
        let starts = match self.size {
            Some(_) => Some(as_i64(
                batch.column(self.codec.fields().len()),
                "window_start",
            )?),
            None => None,
        };
        let group = |i: usize| (at[i], starts.as_ref().map_or(0, |s| s[i]));
        let mut keep = Vec::new();
        let mut run = 0;
        for i in 0..batch.num_rows() {
            run = if i > 0 && group(i) == group(i - 1) {
                run + 1
            } else {
                0
            };
            if run < k {
                keep.push(i as u32);
            }
        }
        if keep.len() == batch.num_rows() {
            return Ok(batch);
        }
        take(&batch, &keep)
    }
}
