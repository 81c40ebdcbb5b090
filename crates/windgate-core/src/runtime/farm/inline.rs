//! The farm's query run on the caller's thread: one pane-level query (PLQ) worker, windows merged by the
//! window-level query (WLQ) as panes close. This is the single-threaded pane engine of any [`FarmQuery`] (the
//! preference queries' `"pane"` strategy), and the farm's oracle in tests (same G, same H, no threads).
//!
//! Window aggregation has a pane engine of its own, `aggregate::pane_engine`, and keeps it on purpose: this
//! generic one routes every batch (a pane and an owner per row), keeps a store per pane and merges each closed
//! pane into every open window it belongs to, so each open window holds its own copy of its keys' states.
//! The aggregation engine lifts rows into one shared store through an incremental pane cursor, combines a
//! window's panes only when it is emitted (into one scratch store, finished at once), can hand panes out as
//! partial states (`output="partials"`) and lets the operator forget idle keys. Folding it into this one
//! would cost those features and the extra copies on the hot path.

use std::collections::BTreeMap;

use super::{FarmQuery, NOT_ROUTED, Routed, last_complete};
use crate::error::Result;
use crate::time::WindowSpec;

pub struct InlineFarm<Q: FarmQuery> {
    query: Q,
    spec: WindowSpec,
    worker: Q::Worker,
    windows: BTreeMap<i64, Q::Window>,
    frontier: i64,
}

impl<Q: FarmQuery> InlineFarm<Q> {
    pub fn new(query: Q, spec: WindowSpec) -> Self {
        let worker = query.new_worker();
        Self {
            query,
            spec,
            worker,
            windows: BTreeMap::new(),
            frontier: i64::MIN,
        }
    }

    /// Adds a chunk: `panes[i]` is row i's pane, `admitted[i]` whether it counts at all.
    pub fn submit(&mut self, chunk: Q::Chunk, panes: Vec<i64>, admitted: Option<&[bool]>) {
        let n = panes.len();
        let owner = match admitted {
            None => vec![0; n],
            Some(a) => a.iter().map(|&k| if k { 0 } else { NOT_ROUTED }).collect(),
        };
        let routed = Routed {
            chunk,
            panes,
            owner,
        };
        self.query.ingest(&mut self.worker, &routed, 0..n, 0);
    }

    /// Closes the panes below `frontier` and merges them into their windows. An interruption (checked per
    /// pane: a pane may belong to many windows) leaves the windows half merged, so the caller must poison.
    pub fn punctuate(&mut self, frontier: i64) -> Result<()> {
        if frontier <= self.frontier {
            return Ok(());
        }
        self.frontier = frontier;
        let (query, spec, windows) = (&self.query, &self.spec, &mut self.windows);
        let mut interrupted = Ok(());
        query.close_below(&mut self.worker, frontier, &mut |pane, part| {
            if interrupted.is_err() {
                return;
            }
            interrupted = crate::interrupt::check();
            let (lo, hi) = spec.windows_of_pane(pane);
            for j in lo..=hi {
                let w = windows.entry(j).or_insert_with(|| query.new_window());
                query.merge(w, &part);
            }
        });
        interrupted
    }

    /// The finished windows up to `until`, in window order.
    pub fn collect(&mut self, until: i64) -> Vec<(i64, Q::Window)> {
        let last = until.min(last_complete(&self.spec, self.frontier));
        let mut out = vec![];
        while let Some(e) = self.windows.first_entry() {
            if *e.key() > last {
                break;
            }
            out.push(e.remove_entry());
        }
        out
    }
}
