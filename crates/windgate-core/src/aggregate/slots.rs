//! A store of partial-state slots for every aggregate of a query, with slot reuse.

use std::sync::Arc;

use super::state::{AggMeta, AggState, InputValues, RowOrder, SKIP};

/// The partial states of all aggregates, slot `i` of each belonging to the same (key, pane) or (key, window).
pub struct SlotStore {
    pub states: Vec<AggState>,
    free: Vec<u32>,
    len: u32,
}

impl SlotStore {
    pub fn new(metas: &[Arc<AggMeta>]) -> Self {
        Self {
            states: metas.iter().map(|m| AggState::new(m.clone())).collect(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// A store with room for `n` slots.
    pub fn with_capacity(metas: &[Arc<AggMeta>], n: usize) -> Self {
        let mut s = Self::new(metas);
        s.states.iter_mut().for_each(|st| st.reserve(n));
        s
    }

    /// An empty slot, reusing a released one when there is one.
    #[inline]
    pub fn alloc(&mut self) -> u32 {
        if let Some(slot) = self.free.pop() {
            self.states.iter_mut().for_each(|s| s.reset(slot as usize));
            return slot;
        }
        self.states.iter_mut().for_each(AggState::push_empty);
        self.len += 1;
        self.len - 1
    }

    /// `n` fresh consecutive slots (the first is returned), without reusing released ones: for scratch stores
    /// filled a window at a time.
    pub fn alloc_block(&mut self, n: usize) -> u32 {
        self.states.iter_mut().for_each(|s| s.extend_empty(n));
        let first = self.len;
        self.len += n as u32;
        first
    }

    pub fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// Slots in use.
    pub fn live(&self) -> usize {
        self.len as usize - self.free.len()
    }

    /// Drops every slot.
    pub fn clear(&mut self) {
        self.states.iter_mut().for_each(AggState::clear);
        self.free.clear();
        self.len = 0;
    }

    /// Lifts a batch: `inputs[a]` feeds aggregate `a`; `slots[i]` is row i's slot or `SKIP`.
    pub fn update(&mut self, slots: &[u32], inputs: &[InputValues], order: RowOrder<'_>) {
        for (state, input) in self.states.iter_mut().zip(inputs) {
            state.update(slots, input, order);
        }
    }

    /// Combines, for every `(dst, src)` pair, slot `src` of `other` into slot `dst`, for every aggregate.
    pub fn combine_pairs(&mut self, other: &SlotStore, pairs: &[(u32, u32)]) {
        for (a, b) in self.states.iter_mut().zip(&other.states) {
            a.combine_pairs(b, pairs);
        }
    }
}

/// The slots of one group of rows (a pane, a pane partition or a window): a slot per key present.
#[derive(Debug, Default, Clone)]
pub struct KeySlots {
    /// Dense map key id -> slot (`SKIP` when the key has no row here).
    slot_of_key: Vec<u32>,
    /// `(key, slot)` in order of first appearance.
    pub entries: Vec<(u32, u32)>,
}

impl KeySlots {
    /// The key's slot in `store`, allocated on first use.
    #[inline]
    pub fn slot(&mut self, key: u32, store: &mut SlotStore) -> u32 {
        let k = key as usize;
        if k >= self.slot_of_key.len() {
            self.slot_of_key.resize(k + 1, SKIP);
        }
        let slot = self.slot_of_key[k];
        if slot != SKIP {
            return slot;
        }
        let slot = store.alloc();
        self.slot_of_key[k] = slot;
        self.entries.push((key, slot));
        slot
    }

    /// The key's slot, if the key has one here.
    #[inline]
    pub fn get(&self, key: u32) -> Option<u32> {
        self.slot_of_key
            .get(key as usize)
            .copied()
            .filter(|&s| s != SKIP)
    }

    /// Combines `(key, slot)` entries of `from` into this group's slots (allocated in `store` as needed).
    /// `pairs` is scratch, reused across calls: windows merge thousands of tiny partitions.
    pub fn merge(
        &mut self,
        store: &mut SlotStore,
        from: &SlotStore,
        entries: &[(u32, u32)],
        pairs: &mut Vec<(u32, u32)>,
    ) {
        pairs.clear();
        pairs.extend(
            entries
                .iter()
                .map(|&(key, slot)| (self.slot(key, store), slot)),
        );
        store.combine_pairs(from, pairs);
    }
}
