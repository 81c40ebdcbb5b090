//! `last_n_before`: per key, for every *trigger* row (a purchase), the values of the key's last `n`
//! *candidate* rows (views) that arrived before it, within `within` time units. Partitioned by key.
//!
//! Each trigger row becomes up to `n` output rows, most recent candidate first: the key columns, the
//! trigger's time and `value`, and the candidate's `value` in the column `output`. Candidates are the
//! key's rows where `candidate` holds (default: the rows that are not triggers) that arrived before the
//! trigger, and whose time is at least `trigger time - within`. A row that is both a trigger and a candidate
//! is emitted for before it is remembered. Outputs are row-triggered, so they keep the input's order.
//!
//! Rows of a key must arrive in time order (an earlier time than the key's previous row is a
//! `LateRowError`): "the last n before" is then both the latest by arrival and by time. State: the last `n`
//! candidates of every key seen.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema, SchemaRef};
use hashbrown::HashMap;

use super::expr::RowPredicate;
use super::keyed::{Keyed, KeyedOp, PartCtx, Routing};
use super::value::{Params, Value};
use super::{Bound, ColumnarOp, DEFAULT_PARTITIONS, TimeColumn, check_unique};
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{ByteRows, RowCodec, column_index};
use crate::time::Span;

/// The last `n` candidate values before each trigger row, per key.
#[derive(Debug, Clone)]
pub struct LastNBefore {
    key: Vec<String>,
    time: String,
    value: String,
    trigger: RowPredicate,
    candidate: Option<RowPredicate>,
    n: usize,
    within: Option<Span>,
    output: String,
    partitions: usize,
}

impl LastNBefore {
    pub fn new(key: &[&str], time: &str, value: &str, trigger: RowPredicate, n: usize) -> Self {
        Self {
            key: key.iter().map(|k| k.to_string()).collect(),
            time: time.to_string(),
            value: value.to_string(),
            trigger,
            candidate: None,
            n,
            within: None,
            output: format!("{value}_before"),
            partitions: DEFAULT_PARTITIONS,
        }
    }

    pub fn candidate(mut self, p: RowPredicate) -> Self {
        self.candidate = Some(p);
        self
    }

    pub fn within(mut self, within: i64) -> Self {
        self.within = Some(Span::Units(within));
        self
    }

    pub fn output(mut self, name: &str) -> Self {
        self.output = name.to_string();
        self
    }

    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new(
            "last_n_before",
            spec,
            &[
                "key",
                "time",
                "value",
                "trigger",
                "candidate",
                "n",
                "within",
                "output",
                "partitions",
            ],
        )?;
        let key = p.nonempty_strings("key")?;
        let time = p.string("time")?;
        let value = p.string("value")?;
        let trigger = match p.get("trigger") {
            Some(v) => RowPredicate::parse(v, &p.label("trigger"))?,
            None => {
                return Err(p.error(
                    "trigger",
                    "is required (e.g. (\"==\", \"event\", \"purchase\"))",
                ));
            }
        };
        let candidate = match p.get("candidate") {
            Some(v) => Some(RowPredicate::parse(v, &p.label("candidate"))?),
            None => None,
        };
        let n = p.int_in("n", 5, 1, 1 << 20)? as usize;
        let within = p.opt_span("within")?;
        let output = p
            .opt_string("output")?
            .unwrap_or_else(|| format!("{value}_before"));
        let partitions = p.partitions()?;
        Ok(Self {
            key,
            time,
            value,
            trigger,
            candidate,
            n,
            within,
            output,
            partitions,
        })
    }
}

impl ColumnarOp for LastNBefore {
    fn name(&self) -> &'static str {
        "last_n_before"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let codec = Arc::new(RowCodec::new(input, &self.key, "last_n_before: key")?);
        let time = TimeColumn::bind(input, &self.time, "last_n_before: time")?;
        let within = self
            .within
            .as_ref()
            .map(|w| time.span(w, "last_n_before: within"))
            .transpose()?;
        let vi = column_index(input, &self.value, "last_n_before: value")?;
        let values = Arc::new(RowCodec::new(
            input,
            std::slice::from_ref(&self.value),
            "last_n_before: value",
        )?);
        let trigger = self.trigger.bind(input, "last_n_before: trigger")?;
        let candidate = match &self.candidate {
            Some(c) => c.bind(input, "last_n_before: candidate")?,
            None => RowPredicate::Not(Box::new(self.trigger.clone()))
                .bind(input, "last_n_before: trigger")?,
        };
        let mut fields: Vec<Field> = codec.fields().to_vec();
        fields.push(input.field(time.index).clone().with_nullable(true));
        fields.push(input.field(vi).clone().with_nullable(true));
        fields.push(Field::new(
            &self.output,
            input.field(vi).data_type().clone(),
            true,
        ));
        check_unique(&fields, "last_n_before: output")?;
        let output = Arc::new(Schema::new(fields));
        let routing = Routing {
            keys: codec.clone(),
            time: Some((time.index, time.name.clone())),
            clocked: false,
            lateness: 0,
            masks: vec![trigger, candidate],
            values: Some(values.clone()),
            casts: Vec::new(),
            partitions: self.partitions,
        };
        let op = LastNOp {
            codec,
            values,
            n: self.n,
            within,
            time,
            output: output.clone(),
        };
        let keyed = Keyed::new(op, routing, input.clone(), None);
        Ok(Bound::new(output, move |p| p.partitioned(keyed)))
    }
}

struct LastNOp {
    codec: Arc<RowCodec>,
    values: Arc<RowCodec>,
    n: usize,
    within: Option<i64>,
    time: TimeColumn,
    output: SchemaRef,
}

struct Recent {
    last: i64,
    /// `(time, value)` of the latest candidates, oldest first.
    candidates: VecDeque<(i64, Box<[u8]>)>,
}

#[derive(Default)]
struct LastNOut {
    keys: ByteRows,
    times: Vec<i64>,
    values: ByteRows,
    before: ByteRows,
}

const TRIGGER: usize = 0;
const CANDIDATE: usize = 1;

impl KeyedOp for LastNOp {
    type State = HashMap<Box<[u8]>, Recent>;
    type Out = LastNOut;

    fn name(&self) -> &str {
        "last_n_before"
    }

    fn out_rows(&self, out: &LastNOut) -> usize {
        out.times.len()
    }

    fn out_batch(&self, out: LastNOut) -> Result<RecordBatch> {
        let mut cols: Vec<ArrayRef> = self.codec.decode(out.keys.iter())?;
        cols.push(self.time.array(out.times)?);
        cols.push(self.values.decode(out.values.iter())?.remove(0));
        cols.push(self.values.decode(out.before.iter())?.remove(0));
        RecordBatch::try_new(self.output.clone(), cols).map_err(Error::output)
    }

    fn row(&self, st: &mut Self::State, ctx: &PartCtx, r: usize, out: &mut LastNOut) -> Result<()> {
        let ts = ctx.time(r, "last_n_before")?;
        let key = ctx.key(r);
        let recent = st.entry_ref(key).or_insert_with(|| Recent {
            last: ts,
            candidates: VecDeque::new(),
        });
        if ts < recent.last {
            return Err(Error::new(
                ErrorKind::LateRow,
                format!(
                    "last_n_before: column '{}' is {ts} for {}, earlier than the key's previous row ({}); rows of \
                     a key must arrive in time order",
                    ctx.time_name,
                    self.codec.describe(key),
                    recent.last
                ),
            ));
        }
        recent.last = ts;
        if ctx.mask(TRIGGER, r) {
            let since = self.within.map_or(i64::MIN, |w| ts.saturating_sub(w));
            for (t, v) in recent.candidates.iter().rev() {
                if *t < since {
                    break;
                }
                out.keys.push(key);
                out.times.push(ts);
                out.values.push(ctx.value(r));
                out.before.push(v);
            }
        }
        if ctx.mask(CANDIDATE, r) {
            if recent.candidates.len() == self.n {
                recent.candidates.pop_front();
            }
            recent.candidates.push_back((ts, Box::from(ctx.value(r))));
        }
        Ok(())
    }

    fn finish(&self, _st: &mut Self::State, _out: &mut LastNOut) -> Result<()> {
        Ok(())
    }
}
