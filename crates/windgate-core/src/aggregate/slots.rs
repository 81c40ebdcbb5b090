//! A store of partial-state slots for every aggregate of a query, with slot reuse.

use std::sync::Arc;

use super::state::{AggMeta, AggState, InputValues, RowOrder};

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
