//! Checkpoints of the per-key operators (`docs/checkpoints.md`): the logical state written between calls, and
//! an operator rebuilt from it that continues exactly where it stood.
//!
//! Every kind writes the same header (its operator's name, [`STATE_VERSION`], the options), the sources'
//! K-slacks, arrival counters and closed flags, the counters, and the input schema; then its streaming
//! engine's own batches ([`Kind::write_state`]), partial states in the format of [`super::partial`], and
//! with `on_late="keep"` the late rows not yet taken. The
//! reference engines keep rows, not states: `strategy="reference"` neither writes nor restores checkpoints.

use std::collections::BTreeMap;

use super::front::{RunState, corrupt};
use super::keyed::{KeyedOperator, Kind};
use super::options::WindowAggregateOptions;
use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};

/// Version of the state this module writes.
pub const STATE_VERSION: u32 = 1;

/// The parameters a restore may change: they decide how the operator runs, never its rows.
const RUNTIME: &[&str] = &["threads", "strategy", "farm"];

/// The error of a checkpoint of a reference engine (`kind`: "count windows").
pub(super) fn no_reference(kind: &str) -> Error {
    Error::param(
        "strategy",
        format!(
            "checkpoints of {kind} need the streaming engine (strategy=\"auto\"): the reference engine \
             keeps rows, not states"
        ),
    )
}

impl<K: Kind> KeyedOperator<K> {
    /// The operator's whole state as bytes (see the module docs); `annotations` are carried along as they
    /// are. Between calls only: a poisoned or flushed operator refuses.
    pub fn snapshot(&mut self, annotations: &BTreeMap<String, String>) -> Result<Vec<u8>> {
        self.life.check("snapshot")?;
        if self.reference {
            return Err(no_reference(K::NAME));
        }
        let mut w = Writer::new(K::OPERATOR, STATE_VERSION, &self.opts)?;
        w.annotate_all(annotations);
        let state = RunState::of(&self.sources, &self.stats, self.bound.is_some());
        w.json("state", &state)?;
        if let Some(b) = &self.bound {
            w.batches("schema", &b.schema, &[])?;
            K::write_state(b, &mut w)?;
        }
        if let Some(schema) = self.late.schema() {
            w.batches("late", schema, self.late.kept())?;
        }
        w.finish()
    }

    /// The options a snapshot was taken with.
    pub fn snapshot_options(data: &[u8]) -> Result<WindowAggregateOptions> {
        Reader::open(data, K::OPERATOR, STATE_VERSION)?.params()
    }

    /// An operator continuing from `data`. With `opts`, they must equal the snapshot's but for the runtime
    /// settings (`threads`, `strategy`, `farm`), which are taken from `opts`.
    pub fn restore(data: &[u8], opts: Option<WindowAggregateOptions>) -> Result<Self> {
        let r = Reader::open(data, K::OPERATOR, STATE_VERSION)?;
        let opts = r.params_or(opts, RUNTIME)?;
        let state: RunState = r.json("state")?;
        if state.sources() != opts.sources {
            return Err(corrupt("the state's sources do not match its parameters"));
        }
        let mut agg = Self::new(opts)?;
        if agg.reference {
            return Err(no_reference(K::NAME));
        }
        if state.bound {
            let (schema, _) = r.batches("schema")?;
            agg.bind(&schema)?;
            let b = agg.bound.as_mut().expect("bound");
            K::read_state(b, &agg.opts, &r)?;
            if agg.late.schema().is_some() {
                agg.late.restore(r.batches("late")?.1);
            }
        }
        state.apply(&mut agg.sources, &mut agg.stats);
        Ok(agg)
    }
}
