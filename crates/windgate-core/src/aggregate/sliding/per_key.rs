//! The two-stacks queue kept per key: each key's stacks hold only the panes in which it has rows, so a key
//! costs nothing in the panes it skips (keys scattered over panes, see [`super`]).

use std::collections::BTreeMap;

use arrow_array::ArrayRef;

use super::Held;
use crate::aggregate::functions::Triple;
use crate::aggregate::slots::{KeySlots, SlotStore};
use crate::aggregate::state::SKIP;
use crate::error::Result;

/// One key's panes in the windows being emitted.
#[derive(Debug)]
struct KeyStacks {
    /// `(pane, slot in the sliding store)`: the suffix combination from this pane on, oldest pane last.
    front: Vec<(i64, u32)>,
    /// `(pane, slot in the pane store)` pushed since the last flip, oldest first.
    back: Vec<(i64, u32)>,
    /// The combination of `back`'s panes in the sliding store; `SKIP` while `back` is empty.
    back_state: u32,
}

impl Default for KeyStacks {
    fn default() -> Self {
        Self {
            front: Vec::new(),
            back: Vec::new(),
            back_state: SKIP,
        }
    }
}

impl KeyStacks {
    fn is_empty(&self) -> bool {
        self.front.is_empty() && self.back.is_empty()
    }
}

/// The per-key stacks of the pane engine's current window, with their own store of combined states.
pub(super) struct PerKeyStacks {
    keys: Vec<KeyStacks>,
    store: SlotStore,
    /// Keys with a pane in the current window, and each key's place in it (`SKIP` when absent).
    active: Vec<u32>,
    place: Vec<u32>,
    /// The panes pushed and not yet evicted.
    held: Held,
    pairs: Vec<(u32, u32)>,
    /// Back states started by the current push: each set to its first pane.
    firsts: Vec<Triple>,
    /// The suffixes of flips not yet computed: `flips[l]` sets each suffix `l` places from its key's newest to
    /// its pane combined with the suffix one place newer (none at level 0). Run in batches, level by level,
    /// so that each level is one call per aggregate for every key that flipped.
    flips: Vec<Vec<Triple>>,
}

impl PerKeyStacks {
    pub(super) fn new(store: SlotStore) -> Self {
        Self {
            keys: Vec::new(),
            store,
            active: Vec::new(),
            place: Vec::new(),
            held: Held::NONE,
            pairs: Vec::new(),
            firsts: Vec::new(),
            flips: Vec::new(),
        }
    }

    /// Moves the window to panes `first..=last`: evicts the panes before `first`, then pushes the panes up to
    /// `last` (`panes` holds every open pane; `pane_store` their states).
    pub(super) fn advance(
        &mut self,
        first: i64,
        last: i64,
        panes: &BTreeMap<i64, KeySlots>,
        pane_store: &SlotStore,
    ) {
        for (_, pane) in panes.range(self.held.before(first)) {
            for &(key, _) in &pane.entries {
                self.evict(key, first);
            }
        }
        self.run_flips(pane_store);
        let Some(push) = self.held.advance(first, last) else {
            return;
        };
        self.pairs.clear();
        self.firsts.clear();
        for (&p, pane) in panes.range(push) {
            for &(key, slot) in &pane.entries {
                let k = key as usize;
                if k >= self.keys.len() {
                    self.keys.resize_with(k + 1, KeyStacks::default);
                    self.place.resize(k + 1, SKIP);
                }
                if self.place[k] == SKIP {
                    self.place[k] = self.active.len() as u32;
                    self.active.push(key);
                }
                let ks = &mut self.keys[k];
                ks.back.push((p, slot));
                if ks.back_state == SKIP {
                    ks.back_state = self.store.alloc_overwritten();
                    self.firsts.push((ks.back_state, slot, SKIP));
                } else {
                    self.pairs.push((ks.back_state, slot));
                }
            }
        }
        // A key's first pane sets its back state, before its later panes (if several came) combine into it.
        self.store.set_combined(pane_store, &self.firsts);
        self.store.combine_pairs(pane_store, &self.pairs);
    }

    /// Evicts pane `pane`, which the pane engine dropped (its last window is out): every later window starts
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
            for &(key, _) in &dropped.entries {
                self.evict(key, pane + 1);
            }
            self.run_flips(pane_store);
        }
        self.held.dropped(pane);
    }

    /// Drops `key`'s panes before `first`: pops the front, and flips the back into the front when the front
    /// runs dry. Inlined into the loops over an evicted pane's keys: a call per key cost a sixth of it.
    #[inline(always)]
    fn evict(&mut self, key: u32, first: i64) {
        let k = key as usize;
        // A key in several evicted panes loses them all at its first eviction.
        let Some(ks) = self.keys.get_mut(k).filter(|ks| !ks.is_empty()) else {
            return;
        };
        while let Some(&(p, slot)) = ks.front.last()
            && p < first
        {
            ks.front.pop();
            self.store.release(slot);
        }
        if ks.front.is_empty() && ks.back.first().is_some_and(|&(p, _)| p < first) {
            flip(ks, first, &mut self.store, &mut self.flips);
        }
        if ks.is_empty() {
            let at = self.place[k] as usize;
            self.active.swap_remove(at);
            if let Some(&moved) = self.active.get(at) {
                self.place[moved as usize] = at as u32;
            }
            self.place[k] = SKIP;
        }
    }

    /// The keys with a pane in the current window, in no particular order.
    pub(super) fn active(&self) -> &[u32] {
        &self.active
    }

    /// Whether `key` has a pane in the current window.
    pub(super) fn is_active(&self, key: u32) -> bool {
        self.place.get(key as usize).is_some_and(|&p| p != SKIP)
    }

    /// The current window's aggregate columns for the given `(key, _)` rows, in order: each key's front top
    /// and back state lowered together (see `Accumulator::finish_two`), without building the window's state.
    pub(super) fn finish(&mut self, rows: &[(u32, u32)]) -> Result<Vec<ArrayRef>> {
        self.pairs.clear();
        self.pairs.extend(rows.iter().map(|&(key, _)| {
            let ks = &self.keys[key as usize];
            (
                ks.front.last().map_or(SKIP, |&(_, suffix)| suffix),
                ks.back_state,
            )
        }));
        (self.store.states.iter())
            .map(|s| s.finish_two(&self.pairs))
            .collect()
    }

    /// Runs the combines of the flips made since the last call (see `flips`).
    fn run_flips(&mut self, pane_store: &SlotStore) {
        for level in &mut self.flips {
            if level.is_empty() {
                break;
            }
            self.store.set_combined(pane_store, level);
            level.clear();
        }
    }

    /// Renames key ids after the key dictionary forgot keys (`remap[old]` is the new id). Every key with
    /// stacks has a pane open, so it is live.
    pub(super) fn remap_keys(&mut self, remap: &[u32]) {
        let mut keys: Vec<KeyStacks> = Vec::new();
        for (old, ks) in std::mem::take(&mut self.keys).into_iter().enumerate() {
            if ks.is_empty() {
                continue;
            }
            let new = remap[old] as usize;
            if new >= keys.len() {
                keys.resize_with(new + 1, KeyStacks::default);
            }
            keys[new] = ks;
        }
        self.keys = keys;
        self.place = vec![SKIP; self.keys.len()];
        for (at, key) in self.active.iter_mut().enumerate() {
            *key = remap[*key as usize];
            self.place[*key as usize] = at as u32;
        }
    }
}

/// Turns `ks`'s back panes from `first` on into front suffixes (the older ones are dropped), newest first, so
/// that the oldest suffix ends on top. The suffixes are queued in `flips` by level and computed in batches by
/// [`PerKeyStacks::run_flips`] before any window is read; until then their slots hold whatever they last held.
fn flip(ks: &mut KeyStacks, first: i64, store: &mut SlotStore, flips: &mut Vec<Vec<Triple>>) {
    let keep = ks.back.partition_point(|&(p, _)| p < first);
    let mut newer = SKIP;
    for (level, &(p, slot)) in ks.back[keep..].iter().rev().enumerate() {
        let suffix = store.alloc_overwritten();
        if flips.len() <= level {
            flips.resize_with(level + 1, Vec::new);
        }
        flips[level].push((suffix, slot, newer));
        ks.front.push((p, suffix));
        newer = suffix;
    }
    ks.back.clear();
    store.release(ks.back_state);
    ks.back_state = SKIP;
}
