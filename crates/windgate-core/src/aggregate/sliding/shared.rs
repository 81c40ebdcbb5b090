//! The two-stacks queue kept once for every key, when nearly every key has rows in nearly every pane (a fleet
//! of sensors reporting each pane): one queue of panes, and each of its states a *block* of slots, slot
//! `block + key` for key `key`.
//!
//! Every key then flips, evicts and pushes at the same panes, so the queue's bookkeeping is a step per pane,
//! not per key and pane, and the combines run over blocks in key order (neighbouring slots). A key without
//! rows in a pane combines an empty state there, which leaves every result's bits as they were (combines
//! are exact and commutative, see [`crate::aggregate::state`]); only the cost grows with the keys a pane
//! skips, which is why [`super::Sliding`] takes this layout only for dense panes.

use std::collections::BTreeMap;

use arrow_array::ArrayRef;

use super::Held;
use crate::aggregate::functions::Triple;
use crate::aggregate::slots::{KeySlots, SlotStore};
use crate::aggregate::state::SKIP;
use crate::error::Result;

/// The shared stacks of the pane engine's current window, with their own store of combined states.
pub(super) struct SharedStacks {
    store: SlotStore,
    /// One empty state (slot 0): what a key without rows in a pane contributes to a suffix.
    empty: SlotStore,
    /// Keys below `cap` have a slot in each block; the caller rebuilds the stacks for more keys.
    cap: u32,
    /// `(pane, block)`: the suffix combination from this pane on, for every key, oldest pane last.
    front: Vec<(i64, u32)>,
    /// Panes pushed since the last flip, oldest first; their combination is block `back_block`, written
    /// whole at the first pane of each new back.
    back: Vec<i64>,
    back_block: u32,
    /// Blocks not in use, holding stale states until a flip overwrites them whole.
    pool: Vec<u32>,
    /// Panes of the current window in which each key has rows: a key is active while this is non-zero.
    in_window: Vec<u32>,
    active: usize,
    /// The panes pushed and not yet evicted.
    held: Held,
    pairs: Vec<(u32, u32)>,
    present: Vec<Triple>,
    absent: Vec<Triple>,
}

impl SharedStacks {
    /// Stacks for keys below `cap`; `store` is an empty store of the query's aggregates.
    pub(super) fn new(mut store: SlotStore, cap: u32) -> Self {
        let mut empty = store.empty_like();
        empty.alloc_many(1);
        let back_block = store.alloc_many(cap as usize);
        Self {
            store,
            empty,
            cap,
            front: Vec::new(),
            back: Vec::new(),
            back_block,
            pool: Vec::new(),
            in_window: vec![0; cap as usize],
            active: 0,
            held: Held::NONE,
            pairs: Vec::new(),
            present: Vec::new(),
            absent: Vec::new(),
        }
    }

    /// Whether keys below `key_bound` have slots here.
    pub(super) fn holds(&self, key_bound: usize) -> bool {
        key_bound <= self.cap as usize
    }

    /// Moves the window to panes `first..=last`: evicts the panes before `first`, then pushes the panes up to
    /// `last` (`panes` holds every open pane, with keys below `cap`; `pane_store` their states).
    pub(super) fn advance(
        &mut self,
        first: i64,
        last: i64,
        panes: &BTreeMap<i64, KeySlots>,
        pane_store: &SlotStore,
    ) {
        for (_, pane) in panes.range(self.held.before(first)) {
            self.leave(pane);
        }
        self.evict_to(first, panes, pane_store);
        let Some(push) = self.held.advance(first, last) else {
            return;
        };
        self.pairs.clear();
        for (&p, pane) in panes.range(push) {
            for &(key, _) in &pane.entries {
                let n = &mut self.in_window[key as usize];
                self.active += usize::from(*n == 0);
                *n += 1;
            }
            if self.back.is_empty() {
                self.write_block(self.back_block, Some(pane), SKIP, pane_store);
            } else {
                let back = self.back_block;
                (self.pairs).extend(pane.entries.iter().map(|&(key, slot)| (back + key, slot)));
            }
            self.back.push(p);
        }
        self.store.combine_pairs(pane_store, &self.pairs);
    }

    /// Evicts pane `pane`, which the pane engine drops (its last window is out): every later window starts
    /// after it.
    pub(super) fn evict_dropped(
        &mut self,
        pane: i64,
        panes: &BTreeMap<i64, KeySlots>,
        pane_store: &SlotStore,
    ) {
        if self.held.holds(pane)
            && let Some(dropped) = panes.get(&pane)
        {
            self.leave(dropped);
            self.evict_to(pane + 1, panes, pane_store);
        }
        self.held.dropped(pane);
    }

    /// Counts `pane`'s keys out of the window.
    fn leave(&mut self, pane: &KeySlots) {
        for &(key, _) in &pane.entries {
            // Every pane left was pushed (the engine adds no rows to a pane once a window holding it is out),
            // so its keys are counted in; should one not be, it is passed over rather than miscounted.
            let n = self.in_window.get_mut(key as usize).filter(|n| **n > 0);
            debug_assert!(n.is_some(), "key {key} leaves a window it is not in");
            if let Some(n) = n {
                *n -= 1;
                self.active -= usize::from(*n == 0);
            }
        }
    }

    /// Drops the panes before `first`: pops the front, and flips the back into the front when the front runs
    /// dry while the back holds an evicted pane.
    fn evict_to(&mut self, first: i64, panes: &BTreeMap<i64, KeySlots>, pane_store: &SlotStore) {
        while let Some(&(p, block)) = self.front.last()
            && p < first
        {
            self.front.pop();
            self.pool.push(block);
        }
        if self.front.is_empty() && self.back.first().is_some_and(|&p| p < first) {
            let keep = self.back.partition_point(|&p| p < first);
            let mut newer = SKIP;
            for i in (keep..self.back.len()).rev() {
                let p = self.back[i];
                let block = self
                    .pool
                    .pop()
                    .unwrap_or_else(|| self.store.alloc_many(self.cap as usize));
                self.write_block(block, panes.get(&p), newer, pane_store);
                self.front.push((p, block));
                newer = block;
            }
            self.back.clear();
        }
    }

    /// Sets every key's slot of `block` to its state in `pane` (empty without one) combined with its slot of
    /// block `newer` (`SKIP`: none).
    fn write_block(
        &mut self,
        block: u32,
        pane: Option<&KeySlots>,
        newer: u32,
        pane_store: &SlotStore,
    ) {
        self.present.clear();
        self.absent.clear();
        for key in 0..self.cap {
            let b = if newer == SKIP { SKIP } else { newer + key };
            match pane.and_then(|p| p.get(key)) {
                Some(slot) => self.present.push((block + key, slot, b)),
                None => self.absent.push((block + key, 0, b)),
            }
        }
        self.store.set_combined(pane_store, &self.present);
        self.store.set_combined(&self.empty, &self.absent);
    }

    /// How many keys have a pane in the current window.
    pub(super) fn active_len(&self) -> usize {
        self.active
    }

    /// The keys with a pane in the current window, in id order.
    pub(super) fn active_keys(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.cap).filter(|&key| self.in_window[key as usize] > 0)
    }

    /// Whether `key` has a pane in the current window.
    pub(super) fn is_active(&self, key: u32) -> bool {
        self.in_window.get(key as usize).is_some_and(|&n| n > 0)
    }

    /// The current window's aggregate columns for the given `(key, _)` rows, in order: the front's top block
    /// and the back block lowered together, slot by slot.
    pub(super) fn finish(&mut self, rows: &[(u32, u32)]) -> Result<Vec<ArrayRef>> {
        let top = self.front.last().map_or(SKIP, |&(_, block)| block);
        let back = if self.back.is_empty() {
            SKIP
        } else {
            self.back_block
        };
        let at = |block: u32, key: u32| if block == SKIP { SKIP } else { block + key };
        self.pairs.clear();
        (self.pairs).extend(rows.iter().map(|&(key, _)| (at(top, key), at(back, key))));
        (self.store.states.iter())
            .map(|s| s.finish_two(&self.pairs))
            .collect()
    }
}
