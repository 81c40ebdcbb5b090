//! `topk`: per window, the `k` rows with the largest score, ties broken by the key columns ascending (then
//! by arrival). Stateful (one state over the whole stream).
//!
//! The window is a column of the input (`window_start` from `window_count`), whose values must arrive in
//! non-decreasing order: a window's rows are complete once a row of a later window arrives, so its top `k`
//! is emitted then, and the last window's at end of stream. This is exactly how `window_count` emits (each
//! window's counts together, windows in order). A window value going back is an error. Without `window` the
//! whole stream is one window, emitted at end of stream. Rows keep their columns; a window's rows come out
//! best first. Null scores rank last; a NaN score is an error.

use arrow_array::RecordBatch;
use arrow_row::OwnedRow;
use arrow_schema::SchemaRef;

use super::rank::{Ranking, check_no_nan};
use super::value::{Params, Value};
use super::{Bound, Chunk, ColumnarOp, check_schema};
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{RowCodec, column_index};
use crate::runtime::pipeline::Stateful;

/// The best `k` rows per window.
#[derive(Debug, Clone)]
pub struct WindowTopK {
    k: usize,
    score: String,
    keys: Vec<String>,
    window: Option<String>,
    descending: bool,
}

impl WindowTopK {
    pub fn new(k: usize, score: &str, keys: &[&str]) -> Self {
        Self {
            k,
            score: score.to_string(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
            window: None,
            descending: true,
        }
    }

    /// Per value of the `window` column (which must not decrease).
    pub fn window(mut self, column: &str) -> Self {
        self.window = Some(column.to_string());
        self
    }

    pub(crate) fn from_spec(spec: &Value) -> Result<Self> {
        let mut p = Params::new(
            "topk",
            spec,
            &["k", "score", "keys", "window", "descending"],
        )?;
        let k = p
            .int_in("k", 0, 1, i64::MAX)
            .map_err(|_| p.error("k", "expected a positive int (how many rows per window)"))?
            as usize;
        let score = p.string("score")?;
        let keys = p.strings("keys")?;
        let window = p.opt_string("window")?;
        let descending = p.bool("descending", true)?;
        Ok(Self {
            k,
            score,
            keys,
            window,
            descending,
        })
    }
}

impl ColumnarOp for WindowTopK {
    fn name(&self) -> &'static str {
        "topk"
    }

    fn bind(&self, input: &SchemaRef) -> Result<Bound> {
        let score = column_index(input, &self.score, "topk: score")?;
        let dt = input.field(score).data_type();
        if !dt.is_numeric() {
            return Err(Error::new(
                ErrorKind::ColumnType,
                format!(
                    "topk: score column '{}' must be numeric, got {dt}",
                    self.score
                ),
            ));
        }
        let keys = self
            .keys
            .iter()
            .map(|k| column_index(input, k, "topk: keys"))
            .collect::<Result<Vec<_>>>()?;
        let ranking = Ranking::new(input, score, &keys, self.descending, "topk: keys")?;
        let window = match &self.window {
            Some(w) => Some(RowCodec::new(
                input,
                std::slice::from_ref(w),
                "topk: window",
            )?),
            None => None,
        };
        let op = TopKOp {
            k: self.k,
            score,
            score_name: self.score.clone(),
            window_name: self.window.clone().unwrap_or_default(),
            ranking,
            window,
            input: input.clone(),
            current: None,
            buffer: Vec::new(),
            buffered: 0,
            seen: 0,
        };
        Ok(Bound::new(input.clone(), move |p| p.stateful(op)))
    }
}

struct TopKOp {
    k: usize,
    score: usize,
    score_name: String,
    window_name: String,
    ranking: Ranking,
    window: Option<RowCodec>,
    input: SchemaRef,
    /// The open window's value.
    current: Option<OwnedRow>,
    /// The open window's rows (or their best `k` so far).
    buffer: Vec<RecordBatch>,
    buffered: usize,
    /// Rows seen, for error messages.
    seen: u64,
}

impl TopKOp {
    fn add(&mut self, rows: RecordBatch) -> Result<()> {
        self.buffered += rows.num_rows();
        self.buffer.push(rows);
        if self.buffered > 4 * self.k + 8192 {
            let best = self.best()?;
            self.buffered = best.num_rows();
            self.buffer = vec![best];
        }
        Ok(())
    }

    fn best(&mut self) -> Result<RecordBatch> {
        let all = arrow_select::concat::concat_batches(&self.input, &self.buffer)?;
        self.buffer.clear();
        self.buffered = 0;
        self.ranking.top(&all, self.k)
    }

    fn flush(&mut self, out: &mut Vec<Chunk>) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let best = self.best()?;
        if best.num_rows() > 0 {
            out.push(Chunk::new(best));
        }
        Ok(())
    }
}

impl Stateful<Chunk> for TopKOp {
    fn name(&self) -> &str {
        "topk"
    }

    fn process(&mut self, input: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let batch = input.batch;
        check_schema("topk", &self.input, &batch)?;
        check_no_nan(
            batch.column(self.score),
            "topk",
            &self.score_name,
            self.seen,
        )?;
        let n = batch.num_rows();
        let windows = match &self.window {
            Some(codec) => codec.encode(&batch)?,
            None => {
                self.seen += n as u64;
                return self.add(batch);
            }
        };
        let mut start = 0;
        while start < n {
            let w = windows.row(start);
            let mut end = start + 1;
            while end < n && windows.row(end) == w {
                end += 1;
            }
            match self.current.as_ref().map(|c| c.row().cmp(&w)) {
                Some(std::cmp::Ordering::Equal) => {}
                Some(std::cmp::Ordering::Greater) => {
                    return Err(Error::new(
                        ErrorKind::LateRow,
                        format!(
                            "topk: column '{}' goes back to {} at row {}; windows must arrive in order (as \
                             window_count emits them)",
                            self.window_name,
                            self.window
                                .as_ref()
                                .map_or(String::new(), |c| c.describe(w.data())),
                            self.seen + start as u64
                        ),
                    ));
                }
                _ => {
                    self.flush(out)?;
                    self.current = Some(w.owned());
                }
            }
            self.add(batch.slice(start, end - start))?;
            start = end;
        }
        self.seen += n as u64;
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Chunk>) -> Result<()> {
        self.flush(out)
    }
}
