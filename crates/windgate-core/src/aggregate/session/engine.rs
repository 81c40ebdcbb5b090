//! The streaming session engine: per key an ordered map of its open sessions (start -> end and state slot),
//! and one ordered set of every open session by end, which the watermark drains.
//!
//! A row at time `t` of key `k` looks up, in `k`'s map, the session with the greatest start `<= t` (it holds
//! the row if its end is at or above `t`: Spark's rule) and the sessions starting inside `(t, t + gap]` (the
//! row's reach): `O(log n + m)` for `n` open sessions of the key and `m` sessions merged. No session found:
//! the row opens `[t, t + gap)` in a fresh slot. Otherwise the sessions found and the row become one session
//! `[min start, max(ends, t + gap))` in the first one's slot, the others' states combined into it. Rows in
//! time order take the first lookup only (their session's end moves forward).
//!
//! The by-end set is kept lazily: a session is listed under the end it had when it was listed, and a row
//! that only moves a session's end forward (the common case, rows in time order) updates the key's map in
//! place and leaves the set alone. When the watermark reaches a listed end whose session has grown since,
//! the session is listed again under its current end. So a row in time order costs one lookup in its key's
//! map; only new sessions, merges and backward extensions touch the set.
//!
//! A batch is lifted in one pass after its rows found their slots: the merges it caused are recorded as
//! `(kept, merged)` slot pairs, applied after the lift in the order they happened, and the merged slots are
//! released only then, so no slot is reused within a batch. Combines are exact and commutative (exact sums,
//! `first`/`last` by the rows' total order), so the bits do not depend on which sessions merged when.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Included};

use super::Closed;
use crate::aggregate::forget::KeyHolder;
use crate::aggregate::keyed::PerKeyEngine;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::{InputValues, RowOrder, SKIP};
use crate::error::Result;

#[derive(Debug, Clone, Copy)]
struct Open {
    end: i64,
    slot: u32,
    /// The end under which the session is in `by_end` (at most `end`).
    listed: i64,
}

pub(crate) struct SessionEngine {
    gap: i64,
    store: SlotStore,
    /// Per key id: the open sessions by start.
    keys: Vec<BTreeMap<i64, Open>>,
    /// Every open session once, as `(listed end, key, start)`: the watermark closes a prefix (see the
    /// module docs for the lazy listing).
    by_end: BTreeSet<(i64, u32, i64)>,
    /// Scratch of a batch: each row's slot, the merges, the slots they freed.
    slots: Vec<u32>,
    merges: Vec<(u32, u32)>,
    freed: Vec<u32>,
}

impl SessionEngine {
    pub fn new(gap: i64, store: SlotStore) -> Self {
        Self {
            gap,
            store,
            keys: Vec::new(),
            by_end: BTreeSet::new(),
            slots: Vec::new(),
            merges: Vec::new(),
            freed: Vec::new(),
        }
    }

    /// The slot of the session that row time `t` of `key` belongs to, merging sessions as needed.
    fn place(&mut self, t: i64, key: u32) -> u32 {
        let k = key as usize;
        if k >= self.keys.len() {
            self.keys.resize_with(k + 1, BTreeMap::new);
        }
        let map = &mut self.keys[k];
        let reach = t + self.gap;
        let mut start = t;
        let mut end = reach;
        let mut kept: Option<u32> = None;
        // The session holding `t`, if any (a row at a session's end joins it).
        let mut holder = None;
        if let Some((&s, &o)) = map.range(..=t).next_back()
            && o.end >= t
        {
            if o.end >= reach {
                // Sessions are apart (each starts after the previous one's end): none starts inside
                // (t, reach] ⊂ (s, o.end]. Nothing changes.
                return o.slot;
            }
            if map.range((Excluded(t), Included(reach))).next().is_none() {
                // Only the end moves forward: in place, the by-end listing stays (it is lazy).
                map.get_mut(&s).expect("just found").end = reach;
                return o.slot;
            }
            holder = Some((s, o));
        }
        if let Some((s, o)) = holder {
            map.remove(&s);
            self.by_end.remove(&(o.listed, key, s));
            start = s;
            end = end.max(o.end);
            kept = Some(o.slot);
        }
        // The sessions the row reaches: starts inside (t, t + gap].
        let reached: Vec<(i64, Open)> = map
            .range((Excluded(t), Included(reach)))
            .map(|(&s, &o)| (s, o))
            .collect();
        for (s, o) in reached {
            map.remove(&s);
            self.by_end.remove(&(o.listed, key, s));
            end = end.max(o.end);
            match kept {
                None => kept = Some(o.slot),
                Some(dst) => {
                    self.merges.push((dst, o.slot));
                    self.freed.push(o.slot);
                }
            }
        }
        let slot = kept.unwrap_or_else(|| self.store.alloc());
        map.insert(
            start,
            Open {
                end,
                slot,
                listed: end,
            },
        );
        self.by_end.insert((end, key, start));
        slot
    }

    /// Every open session, by key id and start (what a checkpoint writes).
    pub fn open(&self) -> Vec<Closed> {
        let mut out = Vec::with_capacity(self.by_end.len());
        for (key, map) in self.keys.iter().enumerate() {
            out.extend(map.iter().map(|(&start, o)| Closed {
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
            self.keys.resize_with(k + 1, BTreeMap::new);
        }
        let listed = end;
        self.keys[k].insert(start, Open { end, slot, listed });
        self.by_end.insert((end, key, start));
    }
}

impl PerKeyEngine<Closed> for SessionEngine {
    fn store(&self) -> &SlotStore {
        &self.store
    }

    fn store_mut(&mut self) -> &mut SlotStore {
        &mut self.store
    }

    /// Places every admitted row (`keep`) in its session and lifts the batch. `ts[i] + gap` must not
    /// overflow (the operator checks the admitted range).
    fn ingest(
        &mut self,
        ts: &[i64],
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
    ) {
        let mut slots = std::mem::take(&mut self.slots);
        slots.clear();
        self.merges.clear();
        self.freed.clear();
        for (i, (&t, &key)) in ts.iter().zip(keys).enumerate() {
            if keep.is_some_and(|k| !k[i]) {
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
    }

    /// Takes every final session out of the engine: those ending before `watermark` (a row at the
    /// watermark may still join a session ending there), all at `i64::MAX` (the end of the stream). Their
    /// slots stay allocated until [`Self::release`].
    fn close_through(&mut self, watermark: i64, out: &mut Vec<Closed>) {
        while let Some(&(listed, key, start)) = self.by_end.first() {
            if !super::is_final(listed, watermark) {
                break;
            }
            self.by_end.pop_first();
            let map = &mut self.keys[key as usize];
            let open = map
                .get_mut(&start)
                .expect("every listed session is in its key's map");
            if !super::is_final(open.end, watermark) {
                // Grown since it was listed: listed again under its current end.
                open.listed = open.end;
                self.by_end.insert((open.end, key, start));
                continue;
            }
            let open = map.remove(&start).expect("just found");
            out.push(Closed {
                key,
                start,
                end: open.end,
                slot: open.slot,
            });
        }
    }

    fn open_slots(&self) -> u64 {
        self.by_end.len() as u64
    }

    fn check_range(&self, range: (i64, i64), time: &str) -> Result<()> {
        super::check_end(range, self.gap, time)
    }
}

impl KeyHolder for SessionEngine {
    fn key_entries(&self) -> usize {
        self.by_end.len()
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        for (key, map) in self.keys.iter().enumerate() {
            live[key] |= !map.is_empty();
        }
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        let old = std::mem::take(&mut self.keys);
        for (key, map) in old.into_iter().enumerate() {
            if map.is_empty() {
                continue;
            }
            let new = remap[key] as usize;
            if new >= self.keys.len() {
                self.keys.resize_with(new + 1, BTreeMap::new);
            }
            self.keys[new] = map;
        }
        self.by_end = std::mem::take(&mut self.by_end)
            .into_iter()
            .map(|(listed, key, start)| (listed, remap[key as usize], start))
            .collect();
    }
}
