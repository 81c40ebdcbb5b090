//! Checkpoints of the streaming band join: [`BandJoiner::snapshot`], [`BandJoiner::restore`] and
//! [`BandJoiner::snapshot_options`] (`docs/checkpoints.md`, "Band join").
//!
//! A snapshot is the join's *logical* state between two calls, never its memory layout, so that it restores
//! into any thread count and any strategy:
//!
//! * per side, the **live input rows** (Arrow IPC, in the side's input schema): every row a future output
//!   can still name. Those are the rows stored in the windows (valid rows no later tuple has purged yet),
//!   the rows released but not ready (`pending`), the admitted rows above the watermark (`buffered`) and,
//!   for `how="left"`, the left rows not closed yet (`open`, with whether they matched). A second Arrow
//!   section says which row is which and, for a window row, its **merged position**: the position fixes
//!   the output order (`(ts, trigger position, partner position)`) and which thread stores it;
//! * per side, the K-slack (watermark, largest time, adaptive K), the row count (the next row's `seq`), the
//!   latest key published into the merge, the largest ready time (what releases input batches), counters;
//! * the number of ready tuples so far (the next merged position), whether the engine had started and
//!   whether the joiner was flushed, and the counters.
//!
//! The values the engines compare (band values as float64, interned equality ids) are read again from the
//! rows on restore, with a new equality dictionary: ids are only ever compared for equality, so new ids
//! change no output. Nothing of the engines' memory is written: the windows are the union of every
//! thread's portions, which the restoring engine deals out again by the round-robin rule of
//! [`Processor`](super::processor::Processor).
//!
//! **No row twice.** A snapshot is taken between calls, when every ready tuple has been processed and
//! every output of it returned (the joiner builds output rows only then), so the outputs already returned
//! are exactly those triggered by the first `ready` tuples of the merged stream. The restored engines
//! continue at merged position `ready` and the restored merge holds only tuples that were not ready: each
//! future output has a trigger at or beyond `ready`, i.e. was not returned before. Unmatched left rows are
//! settled at every call too, so the open ones (with their `matched` flags) are all that is owed.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::order::kslack::KSlack;
use crate::snapshot::{Reader, Writer};

use super::engine::Engine;
use super::operator::{BandJoiner, SideState};
use super::options::{BandJoinOptions, JoinHow};
use super::outer::Outer;
use super::prepare::{self, JoinKey, JoinTuple, Side};
use super::processor::Restored;
use super::readiness::ReadyMerge;
use super::window::Partner;

/// The operator name in a snapshot's header.
pub const OPERATOR: &str = "band_join";

/// The layout version of the band join's state (the sections below). A later windgate keeps reading it.
pub const STATE_VERSION: u32 = 1;

/// Parameters that change how the join runs, never its rows: a restore may change them.
pub const RUNTIME: [&str; 4] = ["threads", "strategy", "index", "credits"];

/// The scalars of a snapshot (the JSON section `state`).
#[derive(Serialize, Deserialize)]
struct State {
    flushed: bool,
    /// Tuples of the merged stream that were ready (and processed): the next merged position.
    ready: u64,
    /// Whether the engine had started: it then holds both sides' published keys, so the restore starts
    /// one too and publishes them again.
    engine: bool,
    sides: [Option<SideMeta>; 2],
    pairs_out: u64,
    unmatched_rows: u64,
    comparisons: u64,
    backpressured: u64,
}

/// One bound side's scalars.
#[derive(Serialize, Deserialize)]
struct SideMeta {
    /// Rows pushed so far, late ones included: the next row's `seq`.
    rows: u64,
    kslack: KSlack,
    /// The latest key the side published into the merge, as `(ts, seq)`.
    latest: Option<(i64, u64)>,
    ready_max_ts: Option<i64>,
    rows_in: u64,
    late_rows: u64,
}

/// What a live row is to the join (one row of a side's `meta` section).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Live {
    /// Its merged position, if it is stored in the window.
    window: Option<u64>,
    pending: bool,
    buffered: bool,
    /// `how="left"`: a left row not closed yet, and whether it matched.
    open: bool,
    matched: bool,
}

fn rows_section(side: Side) -> String {
    format!("{}.rows", side.name())
}

fn meta_section(side: Side) -> String {
    format!("{}.meta", side.name())
}

/// A snapshot whose sections contradict each other (only a crafted one can pass the checksum).
fn inconsistent(message: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Snapshot,
        format!("data: the band join snapshot's state is inconsistent: {message}"),
    )
}

fn meta_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("seq", DataType::UInt64, false),
        Field::new("window_pos", DataType::UInt64, true),
        Field::new("pending", DataType::Boolean, false),
        Field::new("buffered", DataType::Boolean, false),
        Field::new("open", DataType::Boolean, false),
        Field::new("matched", DataType::Boolean, false),
    ]))
}

impl BandJoiner {
    /// The joiner's whole logical state as checkpoint bytes (see the module docs), with `annotations`
    /// carried along. Take it between calls; [`restore`](Self::restore) continues exactly from here. A
    /// poisoned joiner has no state to trust: it refuses with the cause.
    pub fn snapshot(&mut self, annotations: &BTreeMap<String, String>) -> Result<Vec<u8>> {
        if let Some(e) = &self.poisoned {
            return Err(Error::new(
                ErrorKind::Poisoned,
                format!(
                    "snapshot: the join failed earlier, so it has no state to checkpoint: {}",
                    e.message()
                ),
            ));
        }
        let window = self.window_entries()?;
        let mut w = Writer::new(OPERATOR, STATE_VERSION, &self.opts)?;
        w.annotate_all(annotations);
        w.json("state", &self.state())?;
        for side in Side::BOTH {
            if self.sides[side.index()].is_some() {
                let live = self.live_rows(side, &window[side.index()])?;
                let st = self.sides[side.index()].as_ref().expect("bound");
                let rows = gather(st, live.keys().copied())?;
                w.batches(&rows_section(side), &st.schema.schema, &[rows])?;
                w.batches(&meta_section(side), &meta_schema(), &[meta_batch(&live)?])?;
            }
        }
        w.finish()
    }

    /// The options a snapshot was taken with (what a restore without options runs with).
    pub fn snapshot_options(data: &[u8]) -> Result<BandJoinOptions> {
        Reader::open(data, OPERATOR, STATE_VERSION)?.params()
    }

    /// A joiner continuing from `data`. With `opts`, they must equal the snapshot's but for the
    /// [`RUNTIME`] settings (else `SnapshotMismatch` names the first that differs), and the joiner runs with
    /// them; without, it runs with the snapshot's own. Bytes that are not a whole band join snapshot are a
    /// `Snapshot` error; a refused restore has built nothing.
    pub fn restore(data: &[u8], opts: Option<BandJoinOptions>) -> Result<Self> {
        let r = Reader::open(data, OPERATOR, STATE_VERSION)?;
        let opts = r.params_or(opts, &RUNTIME)?;
        let mut j = BandJoiner::new(opts)?;
        let state: State = r.json("state")?;
        let mut window: [Vec<(u64, JoinTuple)>; 2] = [vec![], vec![]];
        let mut pending: [VecDeque<JoinTuple>; 2] = [VecDeque::new(), VecDeque::new()];
        let mut open = vec![];
        for side in Side::BOTH {
            let Some(meta) = &state.sides[side.index()] else {
                continue;
            };
            let (schema, batches) = r.batches(&rows_section(side))?;
            let rows =
                arrow_select::concat::concat_batches(&schema, &batches).map_err(inconsistent)?;
            let (_, meta_batches) = r.batches(&meta_section(side))?;
            let live = read_meta(&meta_batches, rows.num_rows(), meta.rows)?;
            j.bind(side, &schema).map_err(inconsistent)?;
            let tuples = j.restore_side(side, meta, &rows, &live)?;
            for ((seq, l), t) in live.iter().zip(tuples) {
                if l.open {
                    open.push((t.key.ts, *seq, l.matched));
                }
                if l.buffered {
                    j.sides[side.index()]
                        .as_mut()
                        .expect("bound")
                        .buffer
                        .push(t.clone());
                }
                if l.pending {
                    pending[side.index()].push_back(t.clone());
                }
                if let Some(pos) = l.window {
                    window[side.index()].push((pos, t));
                }
            }
        }
        j.restore_merge(&state, pending, open)?;
        j.restore_counters(&state);
        if state.flushed {
            j.flushed = true;
        } else if state.engine {
            j.restore_engine(&state, window)?;
        }
        Ok(j)
    }

    /// Each side's window as `(merged position, row)` in merged order, from whichever engine runs (the
    /// threads hand over their portions). A flushed joiner's windows are never read again.
    fn window_entries(&mut self) -> Result<[Vec<Partner>; 2]> {
        let mut window = match (&mut self.engine, self.flushed) {
            (_, true) | (None, _) => [vec![], vec![]],
            (Some(Engine::Inline(p)), _) => p.window(),
            (Some(Engine::Reference(r)), _) => r.window(),
            (Some(Engine::Threads(t)), _) => match t.window() {
                Ok(w) => w,
                Err(e) => {
                    if e.kind() != ErrorKind::Interrupted {
                        self.poisoned = Some(e.clone());
                    }
                    return Err(e);
                }
            },
        };
        for w in &mut window {
            w.sort_unstable();
        }
        Ok(window)
    }

    fn state(&self) -> State {
        let side_meta = |side: Side| {
            self.sides[side.index()].as_ref().map(|st| SideMeta {
                rows: st.rows,
                kslack: st.kslack.clone(),
                latest: self.merge.latest(side).map(|k| (k.ts, k.seq)),
                ready_max_ts: self.merge.ready_max_ts[side.index()],
                rows_in: self.stats.rows_in[side.index()],
                late_rows: self.stats.late_rows[side.index()],
            })
        };
        State {
            flushed: self.flushed,
            ready: self.merge.ready_count(),
            engine: self.engine.is_some(),
            sides: [side_meta(Side::Left), side_meta(Side::Right)],
            pairs_out: self.stats.pairs_out,
            unmatched_rows: self.stats.unmatched_rows,
            comparisons: self.stats().comparisons,
            backpressured: self.stats.backpressured,
        }
    }

    /// Every live row of `side` by `seq`: the window's, the pending, the buffered and the open ones.
    fn live_rows(&self, side: Side, window: &[Partner]) -> Result<BTreeMap<u64, Live>> {
        let mut live: BTreeMap<u64, Live> = BTreeMap::new();
        for &(pos, seq) in window {
            live.entry(seq).or_default().window = Some(pos);
        }
        for t in self.merge.pending(side) {
            live.entry(t.key.seq).or_default().pending = true;
        }
        for t in &self.sides[side.index()].as_ref().expect("bound").buffer {
            live.entry(t.key.seq).or_default().buffered = true;
        }
        if let (Side::Left, Some(outer)) = (side, &self.merge.outer) {
            let open = outer.open_rows().ok_or_else(|| {
                Error::new(
                    ErrorKind::Internal,
                    "snapshot: unmatched left rows are waiting to be settled (a snapshot is taken between \
                     calls)",
                )
            })?;
            for (_, seq, matched) in open {
                let l = live.entry(seq).or_default();
                l.open = true;
                l.matched = matched;
            }
        }
        Ok(live)
    }

    /// Binds `side`'s scalars and its live rows (as the joiner's only input batches, one per run of
    /// consecutive `seq`s); returns the rows' tuples, read again from the rows, in `live`'s order.
    fn restore_side(
        &mut self,
        side: Side,
        meta: &SideMeta,
        rows: &RecordBatch,
        live: &[(u64, Live)],
    ) -> Result<Vec<JoinTuple>> {
        let st = self.sides[side.index()].as_mut().expect("bound");
        let dict = self.eq_dict.as_mut().expect("bound with the first side");
        let mut tuples = prepare::tuples(&st.schema, rows, 0, dict).map_err(inconsistent)?;
        for (t, (seq, _)) in tuples.iter_mut().zip(live) {
            t.key.seq = *seq;
        }
        st.kslack = meta.kslack.clone();
        st.rows = meta.rows;
        st.chunks = chunks(rows, &tuples);
        self.stats.rows_in[side.index()] = meta.rows_in;
        self.stats.late_rows[side.index()] = meta.late_rows;
        Ok(tuples)
    }

    /// The merge: ready count, published keys, pending tuples in key order and (`how="left"`) the open
    /// left rows.
    fn restore_merge(
        &mut self,
        state: &State,
        mut pending: [VecDeque<JoinTuple>; 2],
        mut open: Vec<(i64, u64, bool)>,
    ) -> Result<()> {
        let meta = |s: Side| state.sides[s.index()].as_ref();
        let latest = Side::BOTH.map(|s| {
            meta(s)
                .and_then(|m| m.latest)
                .map(|(ts, seq)| JoinKey { ts, side: s, seq })
        });
        let ready_max_ts = Side::BOTH.map(|s| meta(s).and_then(|m| m.ready_max_ts));
        for p in &mut pending {
            p.make_contiguous().sort_by_key(|t| t.key);
        }
        self.merge = ReadyMerge::restored(state.ready, latest, ready_max_ts, pending);
        match (self.bounds, self.opts.how) {
            (Some(bounds), JoinHow::Left) => {
                open.sort_by_key(|&(ts, seq, _)| (ts, seq));
                let matched: Vec<u64> = open.iter().filter(|o| o.2).map(|o| o.1).collect();
                let open = open.into_iter().map(|(ts, seq, _)| (ts, seq)).collect();
                self.merge.outer =
                    Some(Outer::restored(bounds, self.opts.semantics, open, matched));
            }
            _ if !open.is_empty() => {
                return Err(inconsistent("open left rows without how=\"left\""));
            }
            _ => {}
        }
        Ok(())
    }

    fn restore_counters(&mut self, state: &State) {
        self.stats.pairs_out = state.pairs_out;
        self.stats.unmatched_rows = state.unmatched_rows;
        self.stats.backpressured = state.backpressured;
        self.comparisons_before = state.comparisons;
    }

    /// Starts the engine from the windows and the ready count; the threads' gate also gets the pending
    /// tuples and each side's latest key again, exactly what it held.
    fn restore_engine(
        &mut self,
        state: &State,
        mut window: [Vec<(u64, JoinTuple)>; 2],
    ) -> Result<()> {
        if self.bounds.is_none() {
            return Err(inconsistent("an engine without a bound side"));
        }
        if window.iter().flatten().any(|(pos, _)| *pos >= state.ready) {
            return Err(inconsistent(
                "a window row at a merged position not reached",
            ));
        }
        // The rows come in arrival order; a portion stores (and purges) in merged order.
        for w in &mut window {
            w.sort_unstable_by_key(|(pos, _)| *pos);
        }
        let restored = Restored {
            counter: state.ready,
            window,
        };
        self.start_engine(Some(&restored))?;
        let Some(Engine::Threads(e)) = &mut self.engine else {
            return Ok(());
        };
        let mut outputs = vec![];
        for side in Side::BOTH {
            let pending = self.merge.pending(side);
            for t in pending {
                e.insert(t.clone(), state.ready, &mut outputs)?;
            }
            if let Some(k) = self.merge.latest(side) {
                e.advance(side, k);
            }
        }
        if !outputs.is_empty() {
            return Err(inconsistent("tuples that were not ready produced outputs"));
        }
        // The merge of the threaded engine only counts the ready prefix: it needs keys, not values.
        self.merge.strip_pending_values();
        Ok(())
    }
}

/// `side`'s rows at `seqs` (ascending), gathered from the input batches it keeps.
fn gather(st: &SideState, seqs: impl Iterator<Item = u64>) -> Result<RecordBatch> {
    let missing = |seq| {
        Error::new(
            ErrorKind::Internal,
            format!(
                "snapshot: row {seq} of the {} input is live but no longer held",
                st.schema.side.name()
            ),
        )
    };
    let mut picks = vec![];
    for seq in seqs {
        let c = st.chunks.partition_point(|(first, _, _)| *first <= seq);
        let (first, batch, _) = st
            .chunks
            .get(c.wrapping_sub(1))
            .ok_or_else(|| missing(seq))?;
        let offset = (seq - first) as usize;
        if offset >= batch.num_rows() {
            return Err(missing(seq));
        }
        picks.push((c - 1, offset));
    }
    let schema = st.schema.schema.clone();
    if picks.is_empty() {
        return Ok(RecordBatch::new_empty(schema));
    }
    let columns = (0..schema.fields().len())
        .map(|col| {
            let arrays: Vec<&dyn Array> = st
                .chunks
                .iter()
                .map(|(_, b, _)| b.column(col).as_ref())
                .collect();
            arrow_select::interleave::interleave(&arrays, &picks).map_err(Error::output)
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    RecordBatch::try_new(schema, columns).map_err(Error::output)
}

fn meta_batch(live: &BTreeMap<u64, Live>) -> Result<RecordBatch> {
    let flag = |f: fn(&Live) -> bool| -> ArrayRef {
        Arc::new(BooleanArray::from_iter(live.values().map(|l| Some(f(l)))))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(live.keys().copied())),
        Arc::new(UInt64Array::from_iter(live.values().map(|l| l.window))),
        flag(|l| l.pending),
        flag(|l| l.buffered),
        flag(|l| l.open),
        flag(|l| l.matched),
    ];
    RecordBatch::try_new(meta_schema(), columns).map_err(Error::output)
}

/// A side's `meta` section, checked against its `rows` section: one entry per row, `seq`s ascending and
/// below the side's row count.
fn read_meta(batches: &[RecordBatch], n_rows: usize, side_rows: u64) -> Result<Vec<(u64, Live)>> {
    let mut out = Vec::with_capacity(n_rows);
    for b in batches {
        if b.schema().fields() != meta_schema().fields() {
            return Err(inconsistent("the meta section has other columns"));
        }
        let seq = b.column(0).as_primitive::<UInt64Type>();
        let pos = b.column(1).as_primitive::<UInt64Type>();
        let flag = |i: usize| b.column(i).as_boolean();
        let (pending, buffered, open, matched) = (flag(2), flag(3), flag(4), flag(5));
        for i in 0..b.num_rows() {
            out.push((
                seq.value(i),
                Live {
                    window: pos.is_valid(i).then_some(pos.value(i)),
                    pending: pending.value(i),
                    buffered: buffered.value(i),
                    open: open.value(i),
                    matched: matched.value(i),
                },
            ));
        }
    }
    if out.len() != n_rows {
        return Err(inconsistent(format!(
            "{} rows but {} row descriptions",
            n_rows,
            out.len()
        )));
    }
    if out.windows(2).any(|w| w[0].0 >= w[1].0) || out.last().is_some_and(|l| l.0 >= side_rows) {
        return Err(inconsistent(
            "row numbers out of order or beyond the side's rows",
        ));
    }
    Ok(out)
}

/// The live rows as input batches: one per run of consecutive `seq`s, with the largest time of its rows
/// (what lets the output let go of it, as for pushed batches).
fn chunks(rows: &RecordBatch, tuples: &[JoinTuple]) -> VecDeque<(u64, RecordBatch, i64)> {
    let mut out = VecDeque::new();
    let mut start = 0;
    for i in 1..=tuples.len() {
        if i == tuples.len() || tuples[i].key.seq != tuples[i - 1].key.seq + 1 {
            let max_ts = tuples[start..i]
                .iter()
                .map(|t| t.key.ts)
                .max()
                .unwrap_or(i64::MIN);
            out.push_back((tuples[start].key.seq, rows.slice(start, i - start), max_ts));
            start = i;
        }
    }
    out
}
