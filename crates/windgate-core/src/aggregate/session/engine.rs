//! The streaming session engine: per key its open sessions by start ([`KeySessions`]: end and state slot),
//! and one min-heap of every open session by end, which the watermark drains.
//!
//! A row at time `t` of key `k` looks up, in `k`'s map, the session with the greatest start `<= t` (it holds
//! the row if its end is at or above `t`: Spark's rule) and the sessions starting inside `(t, t + gap]` (the
//! row's reach): `O(log n + m)` for `n` open sessions of the key and `m` sessions merged. No session found:
//! the row opens `[t, t + gap)` in a fresh slot. Otherwise the sessions found and the row become one session
//! `[min start, max(ends, t + gap))` in the first one's slot, the others' states combined into it. Rows in
//! time order take the first lookup only (their session's end moves forward).
//!
//! The by-end heap is kept lazily: a session is listed under the end it had when it was listed, and a row
//! that only moves a session's end forward (the common case, rows in time order) updates the key's sessions
//! in place and leaves the heap alone. When the watermark reaches a listed end whose session has grown since,
//! the session is listed again under its current end; an entry whose session was merged away (no session of
//! the key starts there any more, or one listed under another end) is dropped when it comes up. So a row in
//! time order costs one lookup in its key's sessions; only new sessions and backward extensions push onto the
//! heap, and stale entries leave it once the watermark passes them.
//!
//! A batch is lifted in one pass after its rows found their slots: the merges it caused are recorded as
//! `(kept, merged)` slot pairs, applied after the lift in the order they happened, and the merged slots are
//! released only then, so no slot is reused within a batch. Combines are exact and commutative (exact sums,
//! `first`/`last` by the rows' total order), so the bits do not depend on which sessions merged when.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Closed;
use super::key_sessions::{KeySessions, Open};
use crate::aggregate::forget::KeyHolder;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::{InputValues, RowOrder, SKIP};
use crate::keys::NO_KEY;

pub(crate) struct SessionEngine {
    gap: i64,
    store: SlotStore,
    /// Per key id: the open sessions by start.
    keys: Vec<KeySessions>,
    /// Every open session at least once, as `(listed end, key, start)`, smallest first: the watermark closes
    /// a prefix (see the module docs for the lazy listing and the stale entries).
    by_end: BinaryHeap<Reverse<(i64, u32, i64)>>,
    /// Open sessions.
    open: usize,
    /// Scratch of a batch: each row's slot, the merges, the slots they freed, the sessions a row reached.
    slots: Vec<u32>,
    merges: Vec<(u32, u32)>,
    freed: Vec<u32>,
    reached: Vec<(i64, Open)>,
}

impl SessionEngine {
    pub fn new(gap: i64, store: SlotStore) -> Self {
        Self {
            gap,
            store,
            keys: Vec::new(),
            by_end: BinaryHeap::new(),
            open: 0,
            slots: Vec::new(),
            merges: Vec::new(),
            freed: Vec::new(),
            reached: Vec::new(),
        }
    }

    pub fn store(&self) -> &SlotStore {
        &self.store
    }

    pub fn open_sessions(&self) -> usize {
        self.open
    }

    /// The least end of an open session (`None` when none is open). Exact because every call that changes
    /// the sessions ends with [`Self::settle`]: the heap's first entry is then a session listed under its
    /// current end, and every other session ends at or after its own listed end, which is no smaller.
    pub fn earliest_end(&self) -> Option<i64> {
        self.by_end.peek().map(|&Reverse((listed, ..))| listed)
    }

    /// Drops stale entries from the front of the heap and lists a grown session at the front again under
    /// its current end, until the front entry is exact (the work [`Self::close_through`] would do later).
    fn settle(&mut self) {
        while let Some(&Reverse((listed, key, start))) = self.by_end.peek() {
            match self.keys[key as usize].get_mut(start) {
                Some(open) if open.listed == listed => {
                    if open.end == listed {
                        return;
                    }
                    open.listed = open.end;
                    let end = open.end;
                    self.by_end.pop();
                    self.by_end.push(Reverse((end, key, start)));
                }
                _ => {
                    self.by_end.pop();
                }
            }
        }
    }

    /// Places every admitted row (`keep`) whose key is `mine` in its session and lifts the batch (the
    /// parallel engine runs one engine per worker over the same batch, each on its own keys).
    /// `ts[i] + gap` must not overflow (the operator checks the admitted range).
    pub fn ingest(
        &mut self,
        ts: &[i64],
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
        mine: impl Fn(u32) -> bool,
    ) {
        let mut slots = std::mem::take(&mut self.slots);
        slots.clear();
        self.merges.clear();
        self.freed.clear();
        for (i, (&t, &key)) in ts.iter().zip(keys).enumerate() {
            if keep.is_some_and(|k| !k[i]) || !mine(key) {
                slots.push(SKIP);
                continue;
            }
            slots.push(self.place(t, key));
        }
        self.store.update(&slots, inputs, order);
        if !self.merges.is_empty() {
            self.store.combine_within(&self.merges);
        }
        for &s in &self.freed {
            self.store.release(s);
        }
        self.slots = slots;
        self.settle();
    }

    /// The slot of the session that row time `t` of `key` belongs to, merging sessions as needed.
    fn place(&mut self, t: i64, key: u32) -> u32 {
        let k = key as usize;
        if k >= self.keys.len() {
            self.keys.resize_with(k + 1, KeySessions::default);
        }
        let sessions = &mut self.keys[k];
        let reach = t + self.gap;
        let mut start = t;
        let mut end = reach;
        let mut kept: Option<u32> = None;
        // The session holding `t`, if any (a row at a session's end joins it).
        if let Some((s, o)) = sessions.at_or_before(t)
            && o.end >= t
        {
            if o.end >= reach {
                // Sessions are apart (each starts after the previous one's end): none starts inside
                // (t, reach] ⊂ (s, o.end]. Nothing changes.
                return o.slot;
            }
            if !sessions.any_in(t, reach) {
                // Only the end moves forward: in place, the by-end listing stays (it is lazy).
                sessions.get_mut(s).expect("just found").end = reach;
                return o.slot;
            }
            sessions.remove(s);
            self.open -= 1;
            start = s;
            end = end.max(o.end);
            kept = Some(o.slot);
        }
        // The sessions the row reaches: starts inside (t, t + gap]. Their heap entries go stale.
        let mut reached = std::mem::take(&mut self.reached);
        sessions.take_in(t, reach, &mut reached);
        self.open -= reached.len();
        for (_, o) in reached.drain(..) {
            end = end.max(o.end);
            match kept {
                None => kept = Some(o.slot),
                Some(dst) => {
                    self.merges.push((dst, o.slot));
                    self.freed.push(o.slot);
                }
            }
        }
        self.reached = reached;
        let slot = kept.unwrap_or_else(|| self.store.alloc());
        let listed = end;
        self.keys[k].insert(start, Open { end, slot, listed });
        self.open += 1;
        self.by_end.push(Reverse((end, key, start)));
        slot
    }

    /// Takes every final session out of the engine: those ending before `watermark` (a row at the
    /// watermark may still join a session ending there), all at `i64::MAX` (the end of the stream). Their
    /// slots stay allocated until [`Self::release`].
    pub fn close_through(&mut self, watermark: i64, out: &mut Vec<Closed>) {
        if watermark == i64::MAX {
            // The end of the stream closes everything: straight from the keys, not in heap order (the
            // operator sorts the closed sessions anyway).
            self.by_end.clear();
            self.open = 0;
            for (key, sessions) in self.keys.iter_mut().enumerate() {
                let all = std::mem::take(sessions);
                out.extend(all.iter().map(|(start, o)| Closed {
                    key: key as u32,
                    start,
                    end: o.end,
                    slot: o.slot,
                }));
            }
            return;
        }
        while let Some(&Reverse((listed, key, start))) = self.by_end.peek() {
            if !super::is_final(listed, watermark) {
                break;
            }
            self.by_end.pop();
            let sessions = &mut self.keys[key as usize];
            let Some(open) = sessions.get_mut(start).filter(|o| o.listed == listed) else {
                continue; // Stale: merged away, or listed again under a later end.
            };
            if !super::is_final(open.end, watermark) {
                // Grown since it was listed: listed again under its current end.
                open.listed = open.end;
                self.by_end.push(Reverse((open.end, key, start)));
                continue;
            }
            let open = sessions.remove(start).expect("just found");
            self.open -= 1;
            out.push(Closed {
                key,
                start,
                end: open.end,
                slot: open.slot,
            });
        }
        self.settle();
    }

    /// Every open session, by key id and start (what a checkpoint writes).
    pub fn open(&self) -> Vec<Closed> {
        let mut out = Vec::with_capacity(self.open);
        for (key, sessions) in self.keys.iter().enumerate() {
            out.extend(sessions.iter().map(|(start, o)| Closed {
                key: key as u32,
                start,
                end: o.end,
                slot: o.slot,
            }));
        }
        out
    }

    /// Adds a restored session whose state is already in slot `slot` of [`Self::store_mut`].
    pub fn insert(&mut self, key: u32, start: i64, end: i64, slot: u32) {
        let k = key as usize;
        if k >= self.keys.len() {
            self.keys.resize_with(k + 1, KeySessions::default);
        }
        let listed = end;
        self.keys[k].insert(start, Open { end, slot, listed });
        self.open += 1;
        self.by_end.push(Reverse((end, key, start)));
    }

    pub fn store_mut(&mut self) -> &mut SlotStore {
        &mut self.store
    }
}

impl KeyHolder for SessionEngine {
    fn key_entries(&self) -> usize {
        self.open
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        for (key, sessions) in self.keys.iter().enumerate() {
            live[key] |= !sessions.is_empty();
        }
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        let old = std::mem::take(&mut self.keys);
        for (key, sessions) in old.into_iter().enumerate() {
            if sessions.is_empty() {
                continue;
            }
            let new = remap[key] as usize;
            if new >= self.keys.len() {
                self.keys.resize_with(new + 1, KeySessions::default);
            }
            self.keys[new] = sessions;
        }
        // Entries of forgotten keys are stale (they had no open session): dropped.
        self.by_end = std::mem::take(&mut self.by_end)
            .into_iter()
            .filter(|Reverse((_, key, _))| remap[*key as usize] != NO_KEY)
            .map(|Reverse((listed, key, start))| Reverse((listed, remap[key as usize], start)))
            .collect();
        self.settle();
    }
}
