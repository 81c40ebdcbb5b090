//! `sessionize`: per key, splits the rows into sessions at gaps in event time and emits one row per closed
//! session. Partitioned by key.
//!
//! A key's row joins the key's open session when its time is at most `gap` after the session's end (the
//! latest time in it), otherwise it closes that session and starts a new one; so `gap=0` groups rows of
//! equal time (a basket of one ticket). A session closes when the operator's stream time minus `lateness`
//! passes `end + gap` (no row of the key can join it any more, assuming rows arrive in time order within
//! `lateness`), or at end of stream. Each closed session becomes one row: the key columns, `session_start`,
//! `session_end`, `rows`, one int64 count per entry of `counts` (rows of the session where that predicate
//! holds), and the list of the `values` column in arrival order (nulls kept).
//!
//! **Order.** Sessions are emitted at the input row where they close, sessions closing together in order of
//! `(session_end, key)`, the open ones at end of stream likewise. For input sorted by time this is simply
//! `ORDER BY session_end, key`.
//!
//! **Arrival order.** Input is taken in arrival order; a row whose time is earlier than its key's previous
//! row is an error naming the column and row (`LateRowError`), because silently re-sorting would make the
//! result depend on what has been seen. With `allow_unordered=True` such a row instead joins its key's open
//! session (moving `session_start` back if needed): sessions are then cut by gaps in arrival order. A row
//! that arrives after its key's session was closed by stream time starts a new session.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use hashbrown::HashMap;

use super::expr::RowPredicate;
use super::keyed::{Keyed, KeyedOp, PartCtx, Routing};
use super::order::{ASC, SortKey};
use super::value::{Params, Value};
use super::{Bound, ColumnarOp, DEFAULT_PARTITIONS, TimeColumn, check_unique};
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{ByteRows, RowCodec, column_index};
use crate::time::Span;

/// Sessions per key.
#[derive(Debug, Clone)]
pub struct Sessionize {
    key: Vec<String>,
    time: String,
    gap: Span,
    values: Option<String>,
    counts: Vec<(String, RowPredicate)>,
    lateness: Span,
    allow_unordered: bool,
    partitions: usize,
}

impl Sessionize {
    pub fn new(key: &[&str], time: &str, gap: i64) -> Self {
        Self {
            key: key.iter().map(|k| k.to_string()).collect(),
            time: time.to_string(),
            gap: Span::Units(gap),
            values: None,
            counts: Vec::new(),
            lateness: Span::Units(0),
            allow_unordered: false,
            partitions: DEFAULT_PARTITIONS,
        }
    }

    /// Collects `column`'s values of each session into a list column of the same name.
    pub fn values(mut self, column: &str) -> Self {
        self.values = Some(column.to_string());
        self
    }

    /// Adds an int64 column `name`: the session's rows where `predicate` holds.
    pub fn count(mut self, name: &str, predicate: RowPredicate) -> Self {
        self.counts.push((name.to_string(), predicate));
        self
    }

    pub fn allow_unordered(mut self, allow: bool) -> Self {
        self.allow_unordered = allow;
        self
    }

    pub fn partitions(mut self, p: usize) -> Self {
        self.partitions = p;
        self
    }

    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new(
            "sessionize",
            spec,
            &[
                "key",
                "time",
                "gap",
                "values",
                "counts",
                "lateness",
                "allow_unordered",
                "partitions",
            ],
        )?;
        let key = p.nonempty_strings("key")?;
        let time = p.string("time")?;
        let gap = p.span("gap")?;
        let values = p.opt_string("values")?;
        let label = p.label("counts");
        let counts = match p.get("counts") {
            None => Vec::new(),
            Some(Value::Map(entries)) => entries
                .iter()
                .map(|(name, v)| {
                    Ok((
                        name.clone(),
                        RowPredicate::parse(v, &format!("{label}[{name:?}]"))?,
                    ))
                })
                .collect::<Result<_>>()?,
            Some(other) => {
                return Err(Error::param(
                    &label,
                    format!(
                        "expected a dict of output column to predicate, got {}",
                        other.describe()
                    ),
                ));
            }
        };
        let lateness = p.opt_span("lateness")?.unwrap_or(Span::Units(0));
        let allow_unordered = p.bool("allow_unordered", false)?;
        let partitions = p.partitions()?;
        Ok(Self {
            key,
            time,
            gap,
            values,
            counts,
            lateness,
            allow_unordered,
            partitions,
        })
    }
}

impl ColumnarOp for Sessionize {
    fn name(&self) -> &'static str {
        "sessionize"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let codec = Arc::new(RowCodec::new(input, &self.key, "sessionize: key")?);
        let time = TimeColumn::bind(input, &self.time, "sessionize: time")?;
        let gap = time.span(&self.gap, "sessionize: gap")?;
        let lateness = time.span(&self.lateness, "sessionize: lateness")?;
        let masks = self
            .counts
            .iter()
            .map(|(name, p)| p.bind(input, &format!("sessionize: counts[{name:?}]")))
            .collect::<Result<Vec<_>>>()?;
        let values = match &self.values {
            Some(v) => {
                column_index(input, v, "sessionize: values")?;
                Some(Arc::new(RowCodec::new(
                    input,
                    std::slice::from_ref(v),
                    "sessionize: values",
                )?))
            }
            None => None,
        };
        let mut fields: Vec<Field> = codec.fields().to_vec();
        fields.push(Field::new("session_start", time.data_type.clone(), true));
        fields.push(Field::new("session_end", time.data_type.clone(), true));
        fields.push(Field::new("rows", DataType::Int64, false));
        for (name, _) in &self.counts {
            fields.push(Field::new(name, DataType::Int64, false));
        }
        let list_field = values
            .as_ref()
            .map(|v| Arc::new(Field::new("item", v.fields()[0].data_type().clone(), true)));
        if let (Some(name), Some(item)) = (&self.values, &list_field) {
            fields.push(Field::new(name, DataType::List(item.clone()), true));
        }
        check_unique(&fields, "sessionize: counts")?;
        let output = Arc::new(Schema::new(fields));
        let nk = self.key.len();
        let merge_cols: Vec<_> = std::iter::once((nk + 1, ASC))
            .chain((0..nk).map(|i| (i, ASC)))
            .collect();
        let merge = SortKey::new(&output, &merge_cols, "sessionize: key")?;
        let routing = Routing {
            keys: codec.clone(),
            time: Some((time.index, time.name.clone())),
            clocked: true,
            lateness,
            masks,
            values: values.clone(),
            casts: Vec::new(),
            partitions: self.partitions,
        };
        let op = SessionOp {
            codec,
            values,
            list_field,
            counts: self.counts.len(),
            gap,
            allow_unordered: self.allow_unordered,
            time,
            output: output.clone(),
        };
        let keyed = Keyed::new(op, routing, input.clone(), Some(merge));
        Ok(Bound::new(output, move |p| p.partitioned(keyed)))
    }
}

struct SessionOp {
    codec: Arc<RowCodec>,
    values: Option<Arc<RowCodec>>,
    list_field: Option<Arc<Field>>,
    counts: usize,
    gap: i64,
    allow_unordered: bool,
    time: TimeColumn,
    output: SchemaRef,
}

struct Session {
    start: i64,
    end: i64,
    last: i64,
    rows: i64,
    counts: Vec<i64>,
    values: ByteRows,
}

#[derive(Default)]
pub(crate) struct Sessions {
    open: HashMap<Box<[u8]>, Session>,
    /// `(deadline, key)` of every open session: it closes once the watermark reaches the deadline.
    deadlines: BTreeSet<(i64, Box<[u8]>)>,
}

#[derive(Default)]
struct SessionOut {
    keys: ByteRows,
    starts: Vec<i64>,
    ends: Vec<i64>,
    rows: Vec<i64>,
    counts: Vec<Vec<i64>>,
    values: ByteRows,
    offsets: Vec<i32>,
}

impl SessionOp {
    fn deadline(&self, s: &Session) -> i64 {
        s.end.saturating_add(self.gap).saturating_add(1)
    }

    fn emit(&self, key: &[u8], s: Session, out: &mut SessionOut) -> Result<()> {
        out.keys.push(key);
        out.starts.push(s.start);
        out.ends.push(s.end);
        out.rows.push(s.rows);
        out.counts.resize_with(self.counts, Vec::new);
        for (o, c) in out.counts.iter_mut().zip(&s.counts) {
            o.push(*c);
        }
        if self.values.is_some() {
            if out.offsets.is_empty() {
                out.offsets.push(0);
            }
            for v in s.values.iter() {
                out.values.push(v);
            }
            let end = i32::try_from(out.values.len()).map_err(|_| {
                Error::new(
                    ErrorKind::Overflow,
                    "sessionize: values: more than 2^31 values in one batch",
                )
            })?;
            out.offsets.push(end);
        }
        Ok(())
    }

    fn add(&self, s: &mut Session, ctx: &PartCtx, r: usize, ts: i64) {
        s.start = s.start.min(ts);
        s.end = s.end.max(ts);
        s.last = ts;
        s.rows += 1;
        for (m, c) in s.counts.iter_mut().enumerate() {
            *c += ctx.mask(m, r) as i64;
        }
        if self.values.is_some() {
            s.values.push(ctx.value(r));
        }
    }
}

impl KeyedOp for SessionOp {
    type State = Sessions;
    type Out = SessionOut;

    fn name(&self) -> &str {
        "sessionize"
    }

    fn out_rows(&self, out: &SessionOut) -> usize {
        out.rows.len()
    }

    fn out_batch(&self, out: SessionOut) -> Result<RecordBatch> {
        let mut cols: Vec<ArrayRef> = self.codec.decode(out.keys.iter())?;
        cols.push(self.time.array(out.starts)?);
        cols.push(self.time.array(out.ends)?);
        cols.push(Arc::new(Int64Array::from(out.rows)));
        let mut counts = out.counts;
        counts.resize_with(self.counts, Vec::new);
        for c in counts {
            cols.push(Arc::new(Int64Array::from(c)));
        }
        if let (Some(codec), Some(item)) = (&self.values, &self.list_field) {
            let values = codec.decode(out.values.iter())?.remove(0);
            let offsets = OffsetBuffer::new(out.offsets.into());
            cols.push(Arc::new(
                ListArray::try_new(item.clone(), offsets, values, None).map_err(Error::output)?,
            ));
        }
        RecordBatch::try_new(self.output.clone(), cols).map_err(Error::output)
    }

    fn row(&self, st: &mut Sessions, ctx: &PartCtx, r: usize, out: &mut SessionOut) -> Result<()> {
        let ts = ctx.time(r, "sessionize")?;
        let key = ctx.key(r);
        if let Some(s) = st.open.get_mut(key) {
            if ts < s.last && !self.allow_unordered {
                return Err(Error::new(
                    ErrorKind::LateRow,
                    format!(
                        "sessionize: column '{}' at {} is {ts}, earlier than the previous row of its key ({}: {}); \
                         rows of a key must arrive in time order (pass allow_unordered=True to put such rows into \
                         the key's open session)",
                        ctx.time_name,
                        ctx.row_label(r),
                        self.codec.describe(key),
                        s.last
                    ),
                ));
            }
            let old = self.deadline(s);
            if (ts as i128) - (s.end as i128) <= self.gap as i128 {
                self.add(s, ctx, r, ts);
                let new = self.deadline(s);
                if new != old {
                    st.deadlines.remove(&(old, Box::from(key)));
                    st.deadlines.insert((new, Box::from(key)));
                }
                return Ok(());
            }
            // The gap is exceeded: close the key's session here and start a new one.
            let (k, s) = st.open.remove_entry(key).expect("the session is open");
            st.deadlines.remove(&(old, k.clone()));
            self.emit(&k, s, out)?;
        }
        let mut s = Session {
            start: ts,
            end: ts,
            last: ts,
            rows: 0,
            counts: vec![0; self.counts],
            values: ByteRows::default(),
        };
        self.add(&mut s, ctx, r, ts);
        st.deadlines.insert((self.deadline(&s), Box::from(key)));
        st.open.insert(Box::from(key), s);
        Ok(())
    }

    fn next_deadline(&self, st: &Sessions) -> Option<i64> {
        st.deadlines.first().map(|(d, _)| *d)
    }

    fn fire(&self, st: &mut Sessions, deadline: i64, out: &mut SessionOut) -> Result<()> {
        while st.deadlines.first().is_some_and(|(d, _)| *d == deadline) {
            let (_, key) = st.deadlines.pop_first().expect("checked");
            let s = st
                .open
                .remove(&key)
                .expect("a deadline belongs to an open session");
            self.emit(&key, s, out)?;
        }
        Ok(())
    }

    fn finish(&self, st: &mut Sessions, out: &mut SessionOut) -> Result<()> {
        st.deadlines.clear();
        for (key, s) in std::mem::take(&mut st.open) {
            self.emit(&key, s, out)?;
        }
        Ok(())
    }
}
