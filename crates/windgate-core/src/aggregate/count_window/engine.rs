//! The streaming count-window engine: the rows the watermark has not passed yet, each in a slot of its own,
//! and per key its count of released rows and the partial states of its last rows in panes.
//!
//! Every window of a key starts and ends on a multiple of `g = gcd(rows, rows_slide)` rows of the key (it ends
//! at a multiple of `rows_slide` and is `rows` long, or starts at the first row), so a key's released rows are
//! folded into panes of `g` rows, and a window is the combine of its key's last `min(rows, count) / g` panes:
//! `rows / g` combines per firing, `rows / (g * rows_slide)` per row (one per row for `rows_slide = 1`, however
//! long the window; a sliding `rows = 1000, rows_slide = 1` folds 1000 panes per row). A key keeps at most
//! `rows / g` panes, and after a firing only the `rows - rows_slide` rows the next window still covers; a key
//! whose next window covers none of its rows (`rows_slide >= rows`, right after a firing) holds nothing and
//! may be forgotten.
//!
//! A row waits in its own slot (its partial state, lifted at ingest) until released; released rows are taken in
//! the total order, the first row of a pane lends the pane its slot, the others are combined into it. The
//! combines of one release are applied in one pass, in the order they were made (row into pane, then pane into
//! window), and the slots they free are released only after it, so no slot is reused within a release.

use std::collections::VecDeque;

use super::{Counts, Fired, is_released};
use crate::aggregate::forget::KeyHolder;
use crate::aggregate::keyed::PerKeyEngine;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::{InputValues, OrderKey, RowOrder, SKIP};

/// A row the watermark has not passed yet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    pub at: OrderKey,
    pub key: u32,
    pub slot: u32,
}

/// Up to `g` consecutive released rows of a key, as one partial state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pane {
    /// Times of its first and last row.
    pub first: i64,
    pub last: i64,
    pub rows: u64,
    pub slot: u32,
}

/// A key's released rows: how many (since it last held nothing), and the panes of the last ones.
#[derive(Debug, Default)]
struct KeyRows {
    count: u64,
    panes: VecDeque<Pane>,
}

pub(crate) struct CountEngine {
    counts: Counts,
    /// Rows per pane, `gcd(rows, rows_slide)`.
    g: u64,
    store: SlotStore,
    pending: Vec<Pending>,
    keys: Vec<KeyRows>,
    /// Panes over all keys (every key with a count holds at least one).
    panes: usize,
    /// Scratch of a release: the combines in order, the slots they free.
    pairs: Vec<(u32, u32)>,
    freed: Vec<u32>,
}

impl CountEngine {
    pub fn new(counts: Counts, store: SlotStore) -> Self {
        Self {
            counts,
            g: counts.pane(),
            store,
            pending: Vec::new(),
            keys: Vec::new(),
            panes: 0,
            pairs: Vec::new(),
            freed: Vec::new(),
        }
    }

    /// Counts one released row in its key, and fires the key's window when the count reaches a multiple of
    /// `rows_slide`.
    fn place(&mut self, p: Pending, out: &mut Vec<Fired>) {
        let k = p.key as usize;
        if k >= self.keys.len() {
            self.keys.resize_with(k + 1, KeyRows::default);
        }
        let (g, Counts { size, slide }) = (self.g, self.counts);
        let key = &mut self.keys[k];
        key.count += 1;
        match key.panes.back_mut() {
            Some(last) if last.rows < g => {
                self.pairs.push((last.slot, p.slot));
                self.freed.push(p.slot);
                last.last = p.at.ts;
                last.rows += 1;
            }
            _ => {
                key.panes.push_back(Pane {
                    first: p.at.ts,
                    last: p.at.ts,
                    rows: 1,
                    slot: p.slot,
                });
                self.panes += 1;
            }
        }
        if key.count.is_multiple_of(g) {
            // A full pane: the panes before the last `size` rows are no window's any more.
            self.panes -= evict(key, size / g, &mut self.freed);
        }
        if !key.count.is_multiple_of(slide) {
            return;
        }
        let slot = self.store.alloc();
        self.pairs
            .extend(key.panes.iter().map(|pane| (slot, pane.slot)));
        out.push(Fired {
            key: p.key,
            first: key.panes.front().expect("the row just placed").first,
            last: p.at.ts,
            rows: size.min(key.count),
            slot,
        });
        // The next window covers the last `size - slide` rows of now.
        self.panes -= evict(key, size.saturating_sub(slide) / g, &mut self.freed);
        if key.panes.is_empty() {
            // Nothing of the key is in any future window: it is as new (`slide` is a multiple of `g`).
            key.count = 0;
        }
    }

    /// The rows waiting for the watermark (what a checkpoint writes).
    pub fn pending(&self) -> &[Pending] {
        &self.pending
    }

    /// Every key's count and panes, oldest pane first (what a checkpoint writes).
    pub fn panes(&self) -> impl Iterator<Item = (u32, u64, &Pane)> {
        (self.keys.iter().enumerate())
            .flat_map(|(k, key)| key.panes.iter().map(move |p| (k as u32, key.count, p)))
    }

    /// Adds a restored waiting row whose state is already in its slot of [`Self::store_mut`].
    pub fn insert_pending(&mut self, p: Pending) {
        self.pending.push(p);
    }

    /// Appends a restored pane of `key` (whose count is `count`), its state already in its slot.
    pub fn insert_pane(&mut self, key: u32, count: u64, pane: Pane) {
        let k = key as usize;
        if k >= self.keys.len() {
            self.keys.resize_with(k + 1, KeyRows::default);
        }
        self.keys[k].count = count;
        self.keys[k].panes.push_back(pane);
        self.panes += 1;
    }
}

impl PerKeyEngine<Fired> for CountEngine {
    fn store(&self) -> &SlotStore {
        &self.store
    }

    fn store_mut(&mut self) -> &mut SlotStore {
        &mut self.store
    }

    /// Lifts every admitted row (`keep`) into a slot of its own, to wait for the watermark.
    fn ingest(
        &mut self,
        _ts: &[i64],
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
    ) {
        let mut slots = Vec::with_capacity(keys.len());
        for (i, &key) in keys.iter().enumerate() {
            if keep.is_some_and(|k| !k[i]) {
                slots.push(SKIP);
                continue;
            }
            let slot = self.store.alloc();
            slots.push(slot);
            self.pending.push(Pending {
                at: order.key(i),
                key,
                slot,
            });
        }
        self.store.update(&slots, inputs, order);
    }

    /// Releases the rows the watermark passed, in the total order, and fires their keys' windows into `out`
    /// (in the order of the rows that completed them). The windows' slots stay allocated until
    /// [`Self::release`].
    fn close_through(&mut self, watermark: i64, out: &mut Vec<Fired>) {
        let mut released = Vec::new();
        self.pending.retain(|p| {
            let go = is_released(p.at.ts, watermark);
            if go {
                released.push(*p);
            }
            !go
        });
        released.sort_unstable_by_key(|p| p.at);
        self.pairs.clear();
        self.freed.clear();
        for p in released {
            self.place(p, out);
        }
        if !self.pairs.is_empty() {
            self.store.combine_within(&self.pairs);
        }
        for &s in &self.freed {
            self.store.release(s);
        }
    }

    /// Slots in use: waiting rows, panes, and windows not yet released.
    fn open_slots(&self) -> u64 {
        self.store.live() as u64
    }

    /// Just past the earliest waiting row: the watermark that releases it (and may fire its key's window).
    fn next_close(&self) -> Option<i64> {
        let least = self.pending.iter().map(|p| p.at.ts).min()?;
        Some(least.saturating_add(1))
    }
}

/// Drops the oldest panes of `key` until it keeps `keep`; their slots go to `freed`. Returns how many.
fn evict(key: &mut KeyRows, keep: u64, freed: &mut Vec<u32>) -> usize {
    let mut n = 0;
    while key.panes.len() as u64 > keep {
        let pane = key.panes.pop_front().expect("more than keep");
        freed.push(pane.slot);
        n += 1;
    }
    n
}

impl KeyHolder for CountEngine {
    fn key_entries(&self) -> usize {
        self.pending.len() + self.panes
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        for p in &self.pending {
            live[p.key as usize] = true;
        }
        for (k, key) in self.keys.iter().enumerate() {
            live[k] |= !key.panes.is_empty();
        }
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        for p in &mut self.pending {
            p.key = remap[p.key as usize];
        }
        let old = std::mem::take(&mut self.keys);
        for (k, key) in old.into_iter().enumerate() {
            if key.panes.is_empty() {
                continue;
            }
            let new = remap[k] as usize;
            if new >= self.keys.len() {
                self.keys.resize_with(new + 1, KeyRows::default);
            }
            self.keys[new] = key;
        }
    }
}
