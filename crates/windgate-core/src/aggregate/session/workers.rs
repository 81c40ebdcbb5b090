//! Session windows on several threads: the keys partitioned among workers, each a [`SessionEngine`] of its
//! own over its keys (sessions never span keys, so a worker's sessions are final as they are).
//!
//! A key belongs to the worker it was first given to (round robin over new key ids, kept across the
//! dictionary's renumbering), so every row of a key meets that key's sessions in one engine, in the order of
//! the batch. Each batch is shared, whole, with every worker; a worker skips the rows of other workers' keys.
//! The operator sorts the workers' closed sessions as it does the single engine's; each worker finishes the
//! states of its own, and the columns are interleaved back into the sorted order (no state copied): the same
//! rows in the same order whatever the number of workers. A checkpoint gathers the open sessions' states
//! into one store (exact combines into empty slots: the same bits), so it is the same for any number of
//! workers, and restores on any other.
//!
//! Batches smaller than [`PARALLEL_MIN_ROWS`] run the workers one after the other on the caller's thread
//! (starting threads would cost more than it saves); so does a batch whose threads the system refuses to
//! start. Either way the result is the same.

use std::sync::Mutex;

use arrow_array::{Array, ArrayRef};
use arrow_select::interleave::interleave;

use super::Closed;
use super::engine::SessionEngine;
use crate::aggregate::forget::KeyHolder;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::{AggState, InputValues, RowOrder};
use crate::error::{Error, Result};

/// Batches with fewer admitted rows than this run the workers on the caller's thread.
pub(crate) const PARALLEL_MIN_ROWS: usize = 1 << 13;

/// The rows of one batch, as every worker reads them.
pub(crate) struct BatchRows<'a> {
    pub ts: &'a [i64],
    pub keys: &'a [u32],
    pub keep: Option<&'a [bool]>,
    pub inputs: &'a [InputValues],
    pub order: RowOrder<'a>,
}

pub(crate) struct SessionWorkers {
    workers: Vec<SessionEngine>,
    /// Per key id, the worker holding its sessions.
    owner: Vec<u8>,
    /// An empty store of the query's aggregates (checkpoints gather the workers' states into a copy).
    empty: SlotStore,
}

impl SessionWorkers {
    /// `threads` workers (at least one) of sessions with inactivity gap `gap`, over empty stores like `store`.
    pub fn new(gap: i64, store: SlotStore, threads: usize) -> Self {
        let threads = threads.clamp(1, u8::MAX as usize);
        let workers = (0..threads)
            .map(|_| SessionEngine::new(gap, store.empty_like()))
            .collect();
        Self {
            workers,
            owner: Vec::new(),
            empty: store,
        }
    }

    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    pub fn open_sessions(&self) -> usize {
        self.workers.iter().map(SessionEngine::open_sessions).sum()
    }

    /// The least end of an open session over the workers.
    pub fn earliest_end(&self) -> Option<i64> {
        self.workers
            .iter()
            .filter_map(SessionEngine::earliest_end)
            .min()
    }

    /// Gives every key id below `keys` a worker (new ids in round robin).
    fn own(&mut self, keys: usize) {
        let n = self.workers.len();
        while self.owner.len() < keys {
            self.owner.push((self.owner.len() % n) as u8);
        }
    }

    /// Places every admitted row in its key's sessions, on the workers' threads when the batch is large.
    pub fn ingest(&mut self, rows: &BatchRows<'_>, key_count: usize, admitted: usize) {
        self.own(key_count);
        let owner = &self.owner;
        let run = |me: usize, engine: &mut SessionEngine| {
            let mine = |k: u32| owner[k as usize] as usize == me;
            engine.ingest(rows.ts, rows.keys, rows.keep, rows.inputs, rows.order, mine);
        };
        if self.workers.len() == 1 {
            return run(0, &mut self.workers[0]);
        }
        if admitted < PARALLEL_MIN_ROWS {
            for (me, engine) in self.workers.iter_mut().enumerate() {
                run(me, engine);
            }
            return;
        }
        // Each worker's engine behind its own lock, taken once by the thread that runs it (uncontended):
        // when the system refuses a thread, the caller runs that worker too, with the same result.
        let engines: Vec<Mutex<&mut SessionEngine>> =
            self.workers.iter_mut().map(Mutex::new).collect();
        let work = |me: usize| run(me, &mut engines[me].lock().expect("not poisoned"));
        std::thread::scope(|scope| {
            let mut refused = Vec::new();
            for me in 1..engines.len() {
                let started = std::thread::Builder::new()
                    .name(format!("windgate-session-{me}"))
                    .spawn_scoped(scope, move || work(me));
                if started.is_err() {
                    refused.push(me);
                }
            }
            work(0);
            refused.into_iter().for_each(work);
        });
    }

    /// Takes every final session out of the workers (see [`SessionEngine::close_through`]); their slots
    /// are their key's worker's, and stay allocated until [`Self::release`].
    pub fn close_through(&mut self, watermark: i64, out: &mut Vec<Closed>) {
        for engine in &mut self.workers {
            engine.close_through(watermark, out);
        }
    }

    /// Each aggregate's column over `closed` (sessions [`Self::close_through`] returned, in any order): with
    /// several workers, each finishes its own sessions and the columns are interleaved back into `closed`'s
    /// order (no state is copied).
    pub fn finish(&self, closed: &[Closed]) -> Result<Vec<ArrayRef>> {
        if let [one] = self.workers.as_slice() {
            return finish_from(one.store(), closed);
        }
        let mut slots: Vec<Vec<u32>> = vec![Vec::new(); self.workers.len()];
        let picks: Vec<(usize, usize)> = (closed.iter())
            .map(|c| {
                let w = self.owner[c.key as usize] as usize;
                slots[w].push(c.slot);
                (w, slots[w].len() - 1)
            })
            .collect();
        let aggregates = self.workers[0].store().states.len();
        (0..aggregates)
            .map(|a| {
                let parts: Vec<ArrayRef> = (self.workers.iter().zip(&slots))
                    .map(|(e, s)| e.store().states[a].finish(s))
                    .collect::<Result<_>>()?;
                let refs: Vec<&dyn Array> = parts.iter().map(|p| p.as_ref()).collect();
                interleave(&refs, &picks).map_err(Error::output)
            })
            .collect()
    }

    /// Frees the slots of sessions [`Self::close_through`] returned, once they were lowered.
    pub fn release(&mut self, closed: &[Closed]) {
        for c in closed {
            let w = self.owner[c.key as usize] as usize;
            self.workers[w].store_mut().release(c.slot);
        }
    }

    /// Every open session and a store holding their states (what a checkpoint writes), in one order for
    /// any number of workers: by key id, then start.
    pub fn open(&self) -> (Vec<Closed>, SlotStore) {
        let mut store = self.empty.empty_like();
        let mut all = Vec::with_capacity(self.open_sessions());
        for engine in &self.workers {
            let mut part = engine.open();
            gather(&mut store, engine, &mut part);
            all.extend(part);
        }
        all.sort_unstable_by_key(|c| (c.key, c.start));
        (all, store)
    }

    /// Adds restored sessions: row `i` of `states` is the state of session `(keys[i], starts[i], ends[i])`.
    pub fn restore(&mut self, keys: &[u32], starts: &[i64], ends: &[i64], states: &[AggState]) {
        let max = keys.iter().map(|&k| k as usize + 1).max().unwrap_or(0);
        self.own(max);
        for (i, &key) in keys.iter().enumerate() {
            let engine = &mut self.workers[self.owner[key as usize] as usize];
            let slot = engine.store_mut().alloc();
            for (dst, src) in engine.store_mut().states.iter_mut().zip(states) {
                dst.combine_pairs(src, &[(slot, i as u32)]);
            }
            engine.insert(key, starts[i], ends[i], slot);
        }
    }
}

/// Each aggregate's column over `closed`, whose slots are `store`'s.
pub(crate) fn finish_from(store: &SlotStore, closed: &[Closed]) -> Result<Vec<ArrayRef>> {
    let slots: Vec<u32> = closed.iter().map(|c| c.slot).collect();
    store.states.iter().map(|s| s.finish(&slots)).collect()
}

/// Moves the states of `sessions` (slots of `engine`'s store) into fresh slots of `store`, renaming their
/// slots to those.
fn gather(store: &mut SlotStore, engine: &SessionEngine, sessions: &mut [Closed]) {
    let pairs: Vec<(u32, u32)> = sessions.iter().map(|c| (store.alloc(), c.slot)).collect();
    store.combine_pairs(engine.store(), &pairs);
    for (c, &(dst, _)) in sessions.iter_mut().zip(&pairs) {
        c.slot = dst;
    }
}

impl KeyHolder for SessionWorkers {
    fn key_entries(&self) -> usize {
        self.open_sessions()
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        self.workers.iter().for_each(|e| e.mark_live_keys(live));
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        let mut owner = vec![0u8; remap.iter().filter(|&&k| k != crate::keys::NO_KEY).count()];
        for (old, &new) in remap.iter().enumerate() {
            if let (Some(slot), Some(&o)) = (owner.get_mut(new as usize), self.owner.get(old)) {
                *slot = o;
            }
        }
        self.owner = owner;
        self.workers.iter_mut().for_each(|e| e.remap_keys(remap));
    }
}
