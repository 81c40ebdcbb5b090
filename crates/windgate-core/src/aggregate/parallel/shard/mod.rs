//! The sharded engine (`strategy="shard"`): key-partitioned pane engines, after Beicht, *Disjoint
//! Parallelization of Sliding-Window Streaming Aggregation*.
//!
//! Why it scales where the farm does not: a key's rows all go to one worker, so a worker's windows are final as
//! they are (no partial states merged across workers), and each worker numbers its keys with a dictionary of
//! its own, so the caller's thread does no per-row work at all: it admits the batch (a vectorised pass in the
//! common cases) and shares it, whole and uncopied, with every worker.
//!
//! * Every worker reads the key columns of every row, keeps those whose key hashes to it ([`KeySharder`]),
//!   gathers their columns and lifts them into its own [`PaneEngine`] (the single-threaded engine, reused, not
//!   copied).
//! * To emit windows up to `j`, the caller asks every worker; each combines and finishes its windows and answers
//!   with its rows in `(window, key)` order under its own ids, plus the bytes of the keys it numbered since.
//! * The caller learns those keys in the operator's dictionary (once per key), maps the workers' ids to the
//!   operator's, and merges the workers' rows per window by key rank: the same rows in the same order as every
//!   other engine, the states being the pane engine's own, bit for bit.
//!
//! Emission requests are answered in order and, in batch mode (`wait=false`), collected without blocking, so
//! the workers never wait for the caller.

mod worker;

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};

use super::Admitted;
use crate::aggregate::emission::Emission;
use crate::aggregate::pane_engine::PaneEngine;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::AggMeta;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{KeyDict, KeySharder};
use crate::threads::{MAX_THREADS, spawn};
use crate::time::WindowSpec;
use worker::{FromWorker, Part, Pool, ToWorker, Worker};

/// Batches queued per worker: enough that a worker finds the next batch ready when it finishes one, few enough
/// that memory stays a few batches deep when the workers are slower than the caller.
const QUEUE_BATCHES: usize = 4;

pub(crate) struct ShardEngine {
    spec: WindowSpec,
    inputs: Vec<Sender<ToWorker>>,
    replies: Receiver<FromWorker>,
    threads: Vec<JoinHandle<()>>,
    /// Per worker, its key ids mapped to the operator's dictionary's.
    remap: Vec<Vec<u32>>,
    /// The last window of every emission asked for and not yet merged, in order.
    requested: VecDeque<i64>,
    /// Parts received per worker, in request order.
    parts: Vec<VecDeque<Part>>,
    max_pane: Option<i64>,
    failed: Option<String>,
    /// Never filled: the aggregate columns' types of an emission without rows.
    pub(crate) scratch: SlotStore,
}

impl ShardEngine {
    /// `threads` workers over keys `by` of types `key_types`.
    pub(crate) fn new(
        spec: WindowSpec,
        metas: &[Arc<AggMeta>],
        by: &[String],
        key_types: &[DataType],
        threads: usize,
    ) -> Result<Self> {
        let n = threads.clamp(1, MAX_THREADS);
        let (reply_tx, replies) = unbounded();
        let mut inputs = Vec::with_capacity(n);
        let mut spawned = Vec::with_capacity(n);
        for me in 0..n {
            let (tx, rx) = bounded(QUEUE_BATCHES);
            let w = Worker {
                me: me as u32,
                sharder: KeySharder::new(key_types, n)?,
                dict: KeyDict::new(by.to_vec(), key_types.to_vec())?,
                pane: PaneEngine::new(spec, SlotStore::new(metas), SlotStore::new(metas)),
                exported: 0,
                pool: Pool::default(),
            };
            let out = reply_tx.clone();
            spawned.push(spawn(format!("windgate-shard-{me}"), move || {
                w.run(rx, out)
            })?);
            inputs.push(tx);
        }
        Ok(Self {
            spec,
            inputs,
            replies,
            threads: spawned,
            remap: vec![Vec::new(); n],
            requested: VecDeque::new(),
            parts: (0..n).map(|_| VecDeque::new()).collect(),
            max_pane: None,
            failed: None,
            scratch: SlotStore::new(metas),
        })
    }

    /// Shares admitted rows (with their `by` columns) with every worker.
    pub(crate) fn ingest(&mut self, rows: Admitted) -> Result<()> {
        self.check()?;
        let Some(pane) = rows.last_pane(self.spec) else {
            return Ok(());
        };
        self.max_pane = self.max_pane.max(Some(pane));
        let rows = Arc::new(rows);
        for w in 0..self.inputs.len() {
            if self.inputs[w].send(ToWorker::Rows(rows.clone())).is_err() {
                return Err(self.fail(format!("shard worker {w} stopped")));
            }
        }
        Ok(())
    }

    /// The last window that holds a row.
    pub(crate) fn last_window(&self) -> Option<i64> {
        self.max_pane.map(|p| self.spec.windows_of_pane(p).1)
    }

    /// Emits the windows up to `last`: asks the workers for them, and merges every emission all workers have
    /// answered (with `wait`, every one asked for), learning new keys in `keys`.
    pub(crate) fn emit_until(
        &mut self,
        last: i64,
        keys: &mut KeyDict,
        out: &mut Emission,
        wait: bool,
    ) -> Result<()> {
        self.check()?;
        if self.requested.back().is_none_or(|&r| last > r) && self.max_pane.is_some() {
            for w in 0..self.inputs.len() {
                if self.inputs[w].send(ToWorker::Emit(last)).is_err() {
                    return Err(self.fail(format!("shard worker {w} stopped")));
                }
            }
            self.requested.push_back(last);
        }
        self.receive(wait)?;
        while self.parts.iter().all(|p| !p.is_empty()) {
            self.requested.pop_front();
            let parts: Vec<Part> = (self.parts.iter_mut())
                .map(|p| p.pop_front().expect("checked above"))
                .collect();
            self.merge(parts, keys, out)?;
        }
        Ok(())
    }

    /// Takes the workers' answers that have arrived; with `wait`, until every emission asked for is answered.
    /// While waiting, Ctrl-C is honoured and a dead worker is an error.
    fn receive(&mut self, wait: bool) -> Result<()> {
        loop {
            let asked = self.requested.len();
            let answered = self.parts.iter().all(|p| p.len() >= asked);
            let msg = if wait && !answered {
                crate::interrupt::check()?;
                match self.replies.recv_timeout(crate::interrupt::PERIOD) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => {
                        if self.threads.iter().any(|t| t.is_finished()) {
                            return Err(self.fail("a shard worker stopped".into()));
                        }
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(self.fail("the shard workers stopped".into()));
                    }
                }
            } else {
                match self.replies.try_recv() {
                    Ok(m) => m,
                    Err(_) => return Ok(()),
                }
            };
            match msg {
                FromWorker::Part(w, part) => self.parts[w].push_back(part),
                FromWorker::Failed(why) => return Err(self.fail(why)),
            }
        }
    }

    /// Merges one emission's parts (one per worker) into `out`: windows ascending, keys in output order.
    fn merge(
        &mut self,
        mut parts: Vec<Part>,
        keys: &mut KeyDict,
        out: &mut Emission,
    ) -> Result<()> {
        for (w, part) in parts.iter().enumerate() {
            let rows: Vec<&[u8]> = part.new_keys.iter().map(Vec::as_slice).collect();
            let ids = keys.intern_rows(&rows)?;
            self.remap[w].extend(ids);
        }
        let mut columns = Vec::with_capacity(parts.len());
        for part in &mut parts {
            columns.push(std::mem::replace(&mut part.columns, Ok(vec![]))?);
        }
        if parts.iter().all(|p| p.windows.is_empty()) {
            return Ok(());
        }
        // One set of columns for the emission: the parts' rows back to back.
        let merged = (0..self.scratch.states.len())
            .map(|a| {
                let arrays: Vec<&dyn Array> = columns.iter().map(|c| c[a].as_ref()).collect();
                arrow_select::concat::concat(&arrays).map_err(Error::output)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let mut base = Vec::with_capacity(parts.len());
        let mut rows = 0;
        for part in &parts {
            base.push(rows);
            rows += part.windows.len();
        }
        let ranks = keys.order().ranks;
        let global = |w: usize, i: usize| self.remap[w][parts[w].keys[i] as usize];
        let mut heads = vec![0usize; parts.len()];
        let mut current = None;
        loop {
            // The least (window, key rank) among the parts' next rows.
            let mut best: Option<(i64, u32, usize)> = None;
            for (w, part) in parts.iter().enumerate() {
                let i = heads[w];
                if i < part.windows.len() {
                    let at = (part.windows[i], ranks[global(w, i) as usize]);
                    if best.is_none_or(|(j, r, _)| at < (j, r)) {
                        best = Some((at.0, at.1, w));
                    }
                }
            }
            let Some((j, _, w)) = best else { break };
            let i = heads[w];
            heads[w] += 1;
            if current != Some(j) {
                current = Some(j);
                out.window_count += 1;
                out.finished.push(merged.clone());
            }
            out.windows.push(j);
            out.keys.push(global(w, i));
            out.slots.push((base[w] + i) as u32);
        }
        Ok(())
    }

    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(Error::new(ErrorKind::Poisoned, why.clone())),
            None => Ok(()),
        }
    }

    /// Marks the engine failed, preferring a worker's own report to `why`.
    fn fail(&mut self, why: String) -> Error {
        let why = (self.replies.try_iter())
            .find_map(|m| match m {
                FromWorker::Failed(w) => Some(w),
                FromWorker::Part(..) => None,
            })
            .unwrap_or(why);
        self.failed = Some(why.clone());
        Error::new(ErrorKind::Poisoned, why)
    }
}

impl Drop for ShardEngine {
    fn drop(&mut self) {
        // Closing the inputs ends the workers.
        self.inputs.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
