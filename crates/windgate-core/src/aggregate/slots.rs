//! A store of partial-state slots for every aggregate of a query, with slot reuse.

use std::sync::Arc;

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use super::functions::{FusedPass, FusedPlan, FusedSink, Needs, Triple, fused_plan};
use super::state::{AggMeta, AggState, InputValues, RowOrder, SKIP};

/// The partial states of all aggregates, slot `i` of each belonging to the same (key, pane) or (key, window).
///
/// Slots are handed out and taken back one at a time, but emptied and appended in batches, one call per
/// aggregate for many slots: a slot costs a dynamic call per aggregate otherwise, which measured more than
/// the lift of a pane's rows into it.
pub struct SlotStore {
    pub states: Vec<AggState>,
    /// Empty slots, ready to hand out.
    free: Vec<u32>,
    /// Released slots, still holding their states: emptied all at once when `free` runs dry.
    dirty: Vec<u32>,
    len: u32,
    /// The records of the fused pass (empty between batches).
    fused: FusedPass,
    /// Each row's record in a pass over neighbouring groups ([`Self::lift_keyed_panes`]), kept for its room.
    records: Vec<u32>,
}

/// Empty slots appended at a time when no released slot is left.
const GROW: u32 = 64;

impl SlotStore {
    pub fn new(metas: &[Arc<AggMeta>]) -> Self {
        Self {
            states: metas.iter().map(|m| AggState::new(m.clone())).collect(),
            free: Vec::new(),
            dirty: Vec::new(),
            len: 0,
            fused: FusedPass::default(),
            records: Vec::new(),
        }
    }

    /// An empty store of the same aggregates.
    pub fn empty_like(&self) -> Self {
        Self {
            states: self.states.iter().map(AggState::empty_like).collect(),
            free: Vec::new(),
            dirty: Vec::new(),
            len: 0,
            fused: FusedPass::default(),
            records: Vec::new(),
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
            return slot;
        }
        self.refill();
        self.free.pop().expect("refilled")
    }

    /// Fills `free`: empties the released slots in one call per aggregate, or, when none was released,
    /// appends [`GROW`] empty slots (handed out in ascending order).
    #[inline(never)]
    fn refill(&mut self) {
        if !self.dirty.is_empty() {
            self.states
                .iter_mut()
                .for_each(|s| s.reset_many(&self.dirty));
            self.free.extend(self.dirty.drain(..).rev());
            return;
        }
        self.states
            .iter_mut()
            .for_each(|s| s.extend_empty(GROW as usize));
        self.free.extend((self.len..self.len + GROW).rev());
        self.len += GROW;
    }

    /// `n` new empty slots `first..first + n` (returns `first`), appended in one call per aggregate: a store
    /// refilled at every emission (the scratch store of window states) takes a window's slots at once, where
    /// [`Self::alloc`] costs a call per aggregate and slot. Released slots stay free for [`Self::alloc`].
    pub fn alloc_many(&mut self, n: usize) -> u32 {
        self.states.iter_mut().for_each(|s| s.extend_empty(n));
        let first = self.len;
        self.len += n as u32;
        first
    }

    /// A slot whose state the caller overwrites whole before anything reads it ([`Self::set_combined`]): a
    /// released slot as it is, sparing the emptying [`Self::alloc`] gives it.
    #[inline]
    pub(crate) fn alloc_overwritten(&mut self) -> u32 {
        self.dirty.pop().unwrap_or_else(|| self.alloc())
    }

    /// Takes slot `slot` back; its state is emptied when the slot is handed out again.
    pub fn release(&mut self, slot: u32) {
        self.dirty.push(slot);
    }

    /// Slots in use.
    pub fn live(&self) -> usize {
        self.len as usize - self.free.len() - self.dirty.len()
    }

    /// Drops every slot.
    pub fn clear(&mut self) {
        self.states.iter_mut().for_each(AggState::clear);
        self.free.clear();
        self.dirty.clear();
        self.len = 0;
    }

    /// Lifts a batch: `inputs[a]` feeds aggregate `a`; `slots[i]` is row i's slot or `SKIP`. The aggregates
    /// of one float column that can go through one fused pass (see `functions::fused_plan`), and each other
    /// aggregate lifts its rows on its own.
    pub fn update(&mut self, slots: &[u32], inputs: &[InputValues], order: RowOrder<'_>) {
        let mut fused = None;
        if let Some(plan) = self.fused_plan(inputs) {
            let (states, pass) = (&mut self.states, &mut self.fused);
            let absorb = |pass: &FusedPass| {
                for (_, s) in states
                    .iter_mut()
                    .enumerate()
                    .filter(|(i, _)| plan.takes(*i))
                {
                    s.absorb(pass)
                }
            };
            if pass.run(slots, plan.values, plan.needs, self.len as usize, absorb) {
                fused = Some(plan);
            }
        }
        let on_its_own = |i: usize| fused.is_none_or(|p| !p.takes(i));
        for (i, (state, input)) in self.states.iter_mut().zip(inputs).enumerate() {
            if on_its_own(i) {
                state.update(slots, input, order);
            }
        }
    }

    /// The fused pass that lifts some of `inputs` (see `functions::fused_plan`).
    fn fused_plan<'a>(&self, inputs: &'a [InputValues]) -> Option<FusedPlan<'a>> {
        fused_plan(self.states.iter().map(AggState::fused_needs).zip(inputs))
    }

    /// How [`Self::lift_keyed`] lifts a batch of rows with key ids `keys`: when every aggregate takes part
    /// in the fused pass (see `functions::fused_plan`) and the keys are few enough for its records.
    pub(crate) fn keyed_plan<'a>(
        &self,
        inputs: &'a [InputValues],
        keys: &[u32],
    ) -> Option<KeyedPlan<'a>> {
        let FusedPlan { values, needs, .. } = self.fused_plan(inputs).filter(|p| p.all)?;
        // Vector maxima, not `Iterator::max` (which took 3% of a count+sum+max query's time as a scalar loop
        // with a branch a key).
        let key_count = match keys.is_empty() {
            true => 0,
            false => crate::prefetch::greatest_u32(keys) as usize + 1,
        };
        FusedPass::takes(key_count).then_some(KeyedPlan {
            values,
            needs,
            key_count,
        })
    }

    /// Lifts rows `rows` of a batch, all of one group (a pane) and all kept, through the fused pass by key
    /// (see `FusedPass::run_keyed`): `keys` per row of the batch, `group` giving each key's slot (allocated
    /// here on first use). A key's slot is looked up once per chunk of rows, not once per row.
    pub(crate) fn lift_keyed(
        &mut self,
        rows: std::ops::Range<usize>,
        keys: &[u32],
        plan: &KeyedPlan<'_>,
        group: &mut KeySlots,
    ) {
        self.lift_keyed_values(&keys[rows.clone()], &plan.values[rows], plan, group);
    }

    /// [`Self::lift_keyed`] of rows given as their key ids and values (rows gathered from a batch, of one
    /// group, all kept).
    pub(crate) fn lift_keyed_values(
        &mut self,
        keys: &[u32],
        values: &[f64],
        plan: &KeyedPlan<'_>,
        group: &mut KeySlots,
    ) {
        struct ByKey<'a> {
            store: &'a mut SlotStore,
            group: &'a mut KeySlots,
        }
        impl FusedSink for ByKey<'_> {
            fn place(&mut self, key: u32) -> u32 {
                self.group.slot(key, self.store)
            }
            fn absorb(&mut self, pass: &FusedPass) {
                self.store.states.iter_mut().for_each(|s| s.absorb(pass));
            }
        }
        // The pass's records leave the store while it runs: the sink allocates slots in it.
        let mut pass = std::mem::take(&mut self.fused);
        let mut sink = ByKey { store: self, group };
        let ran = pass.run_keyed(keys, values, plan.needs, plan.key_count, &mut sink);
        debug_assert!(ran, "the plan checked the key count");
        self.fused = pass;
    }

    /// Lifts rows `rows` of a batch, all kept, that fall in `N` neighbouring groups (panes `width` long, the
    /// second starting at `start`: `groups[0]` holds times below `start`, and each next group the times from
    /// the next pane's start on), in one fused pass by key whose record `N key + group` holds a key's
    /// rows of one group. Rows in bounded disorder alternate between two panes at a pane's edge, a run of a
    /// row or two each: one pass over their span costs a record id per row instead of a pass per run. The
    /// caller checks [`KeyedPlan::takes_groups`].
    pub(crate) fn lift_keyed_panes<const N: usize>(
        &mut self,
        rows: std::ops::Range<usize>,
        keys: &[u32],
        ts: &[i64],
        (start, width): (i64, i64),
        plan: &KeyedPlan<'_>,
        groups: &mut [KeySlots; N],
    ) {
        struct ByGroup<'a, const N: usize> {
            store: &'a mut SlotStore,
            groups: &'a mut [KeySlots; N],
        }
        impl<const N: usize> FusedSink for ByGroup<'_, N> {
            fn place(&mut self, record: u32) -> u32 {
                let group = record as usize % N;
                self.groups[group].slot(record / N as u32, self.store)
            }
            fn absorb(&mut self, pass: &FusedPass) {
                self.store.states.iter_mut().for_each(|s| s.absorb(pass));
            }
        }
        debug_assert!(N >= 2, "one group lifts through `lift_keyed`");
        let mut records = std::mem::take(&mut self.records);
        records.clear();
        let (keys, ts) = (&keys[rows.clone()], &ts[rows.clone()]);
        // The group of time `t`: how many group starts from the second on are at or below it.
        let starts: [i64; N] = std::array::from_fn(|g| match g {
            0 => i64::MIN,
            g => start.saturating_add((g as i64 - 1).saturating_mul(width)),
        });
        let group = |t: i64| starts[1..].iter().map(|&s| u32::from(t >= s)).sum::<u32>();
        records.extend((keys.iter().zip(ts)).map(|(&k, &t)| N as u32 * k + group(t)));
        let mut pass = std::mem::take(&mut self.fused);
        let mut sink = ByGroup {
            store: self,
            groups,
        };
        let count = N * plan.key_count;
        let ran = pass.run_keyed(&records, &plan.values[rows], plan.needs, count, &mut sink);
        debug_assert!(ran, "the caller checked the record count");
        self.fused = pass;
        self.records = records;
    }

    /// Combines, for every `(dst, src)` pair, slot `src` of `other` into slot `dst`, for every aggregate.
    pub fn combine_pairs(&mut self, other: &SlotStore, pairs: &[(u32, u32)]) {
        for (a, b) in self.states.iter_mut().zip(&other.states) {
            a.combine_pairs(b, pairs);
        }
    }

    /// Combines, for every `(dst, src)` pair, slot `src` into slot `dst` of this same store.
    pub fn combine_within(&mut self, pairs: &[(u32, u32)]) {
        self.states.iter_mut().for_each(|s| s.combine_within(pairs));
    }

    /// Sets, for every `(dst, a, b)`, slot `dst` to slot `a` of `other` combined with slot `b` of this store
    /// (`SKIP`: `a` alone), for every aggregate, whatever `dst` held.
    pub(crate) fn set_combined(&mut self, other: &SlotStore, triples: &[Triple]) {
        for (a, b) in self.states.iter_mut().zip(&other.states) {
            a.set_combined(b, triples);
        }
    }
}

/// A batch's fused pass by key (see [`SlotStore::keyed_plan`]): the column, the parts, and the key ids' bound.
pub(crate) struct KeyedPlan<'a> {
    values: &'a [f64],
    needs: Needs,
    key_count: usize,
}

impl KeyedPlan<'_> {
    /// The batch's values of the fused column.
    pub(crate) fn values(&self) -> &[f64] {
        self.values
    }

    /// One more than the greatest key id of the batch.
    pub(crate) fn key_count(&self) -> usize {
        self.key_count
    }

    /// Whether [`SlotStore::lift_keyed_panes`] can take the batch over `groups` groups: a record per key and
    /// group.
    pub(crate) fn takes_groups(&self, groups: usize) -> bool {
        FusedPass::takes(groups * self.key_count)
    }
}

/// The slots of one group of rows (a pane, a pane partition or a window): a slot per key present.
///
/// The key -> slot map is a dense array indexed by key id while the group's keys are dense (the common case:
/// a few thousand keys, each in most panes), and a hash map once they are sparse: with a million distinct
/// keys each pane holds only its own few, and a dense array per pane would cost 4 bytes per key of the
/// whole stream (gigabytes over hundreds of open panes).
#[derive(Debug, Default, Clone)]
pub struct KeySlots {
    /// Dense map key id -> slot (`SKIP` when the key has no row here); unused once `sparse` is set.
    slot_of_key: Vec<u32>,
    sparse: Option<HashMap<u32, u32, FixedState>>,
    /// `(key, slot)` in order of first appearance.
    pub entries: Vec<(u32, u32)>,
}

/// A group stays dense while its array would hold at most this many slots per key present (or is small).
const DENSE_SLACK: usize = 8;
const DENSE_ALWAYS: usize = 1 << 12;

impl KeySlots {
    /// The key's slot in `store`, allocated on first use.
    #[inline]
    pub fn slot(&mut self, key: u32, store: &mut SlotStore) -> u32 {
        // The hot path: a dense group that already has the key (a sparse group's array is empty), or a key
        // within its array new to it (every key of a fresh pane: no call per key for it).
        if let Some(&slot) = self.slot_of_key.get(key as usize) {
            if slot != SKIP {
                return slot;
            }
            let slot = store.alloc();
            self.slot_of_key[key as usize] = slot;
            self.entries.push((key, slot));
            return slot;
        }
        self.slot_slow(key, store)
    }

    /// [`Self::slot`] for a key new to the group, or a sparse group.
    #[inline(never)]
    fn slot_slow(&mut self, key: u32, store: &mut SlotStore) -> u32 {
        let k = key as usize;
        if self.sparse.is_none() && k >= self.slot_of_key.len() {
            if k >= DENSE_ALWAYS && k > DENSE_SLACK * (self.entries.len() + 1) {
                self.go_sparse();
            } else {
                self.slot_of_key.resize(k + 1, SKIP);
            }
        }
        if let Some(map) = &mut self.sparse {
            return *map.entry(key).or_insert_with(|| {
                let slot = store.alloc();
                self.entries.push((key, slot));
                slot
            });
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

    #[cold]
    fn go_sparse(&mut self) {
        let mut map = HashMap::with_capacity_and_hasher(
            self.entries.len() * 2,
            FixedState::with_seed(0x5107),
        );
        map.extend(self.entries.iter().copied());
        self.sparse = Some(map);
        self.slot_of_key = Vec::new();
    }

    /// Forgets every key, keeping the dense array's room (all `SKIP` again) for the next group.
    pub fn empty(&mut self) {
        if self.sparse.take().is_none() {
            for &(key, _) in &self.entries {
                self.slot_of_key[key as usize] = SKIP;
            }
        }
        self.entries.clear();
    }

    /// The key's slot, if the key has one here.
    #[inline]
    pub fn get(&self, key: u32) -> Option<u32> {
        if let Some(map) = &self.sparse {
            return map.get(&key).copied();
        }
        self.slot_of_key
            .get(key as usize)
            .copied()
            .filter(|&s| s != SKIP)
    }

    /// Renames key ids after the key dictionary forgot keys (`remap[old]` is the new id; every key here is
    /// live, so none maps to nothing).
    pub fn remap_keys(&mut self, remap: &[u32]) {
        for (key, _) in &mut self.entries {
            *key = remap[*key as usize];
        }
        self.slot_of_key.clear();
        self.sparse = None;
        let entries = std::mem::take(&mut self.entries);
        let max = entries.iter().map(|e| e.0 as usize + 1).max().unwrap_or(0);
        if max >= DENSE_ALWAYS && max > DENSE_SLACK * (entries.len() + 1) {
            self.entries = entries;
            self.go_sparse();
        } else {
            self.slot_of_key.resize(max, SKIP);
            for &(key, slot) in &entries {
                self.slot_of_key[key as usize] = slot;
            }
            self.entries = entries;
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_buffer::ScalarBuffer;
    use arrow_schema::DataType;
    use proptest::prelude::*;

    use super::*;
    use crate::aggregate::function::{AggSpec, ValueClass};
    use crate::aggregate::functions::lane_values;
    use crate::aggregate::state::RowOrder;

    fn metas() -> Vec<Arc<AggMeta>> {
        let aggs = [
            ("*".to_string(), vec!["count".to_string()]),
            (
                "x".into(),
                vec!["sum".into(), "max".into(), "min".into(), "mean".into()],
            ),
        ];
        AggSpec::parse_all(&aggs)
            .unwrap()
            .into_iter()
            .map(|spec| {
                Arc::new(AggMeta {
                    spec,
                    input_type: DataType::Float64,
                    class: ValueClass::Float,
                })
            })
            .collect()
    }

    proptest! {
        /// A batch whose aggregates only in part fuse (with `var` and `first`, one of another column, one of a
        /// column with nulls): the fused ones through one pass, the others on their own, leave every state as
        /// each aggregate lifting alone does.
        #[test]
        fn a_partly_fused_batch_equals_each_aggregate_alone(
            rows in prop::collection::vec((lane_values(), lane_values(), 0u32..30, proptest::bool::weighted(0.8)), 0..300),
            batches in 1usize..3,
        ) {
            let aggs = [
                ("*".to_string(), vec!["count".to_string()]),
                ("x".into(), vec!["sum".into(), "var".into(), "max".into(), "first".into(), "mean".into(), "min".into()]),
                ("y".into(), vec!["max".into()]),
                ("z".into(), vec!["sum".into()]),
            ];
            let metas: Vec<Arc<AggMeta>> = AggSpec::parse_all(&aggs).unwrap().into_iter().map(|spec| {
                Arc::new(AggMeta { spec, input_type: DataType::Float64, class: ValueClass::Float })
            }).collect();
            let mut store = SlotStore::new(&metas);
            let mut alone: Vec<AggState> = metas.iter().map(|m| AggState::new(m.clone())).collect();
            let slots = store.alloc_many(30);
            alone.iter_mut().for_each(|a| a.extend_empty(slots as usize + 30));
            let ts: Vec<i64> = (0..rows.len() as i64).collect();
            for b in 0..batches {
                let slot_of: Vec<u32> = rows.iter().map(|r| slots + r.2).collect();
                let col = |f: fn(&(f64, f64, u32, bool)) -> f64| ScalarBuffer::from(rows.iter().map(f).collect::<Vec<_>>());
                let (x, y) = (col(|r| r.0), col(|r| r.1));
                let z_nulls = arrow_buffer::NullBuffer::from(rows.iter().map(|r| r.3).collect::<Vec<_>>());
                let inputs: Vec<InputValues> = metas.iter().map(|m| match m.spec.column.as_deref() {
                    None => InputValues::Star,
                    Some("x") => InputValues::Float(x.clone(), None),
                    Some("y") => InputValues::Float(y.clone(), None),
                    _ => InputValues::Float(x.clone(), Some(z_nulls.clone())),
                }).collect();
                let order = RowOrder { ts: &ts, by: None, source: 0, seq0: (b * rows.len()) as u64 };
                store.update(&slot_of, &inputs, order);
                for (a, input) in alone.iter_mut().zip(&inputs) {
                    a.update(&slot_of, input, order);
                }
            }
            let all: Vec<u32> = (slots..slots + 30).collect();
            for (a, b) in store.states.iter().zip(&alone) {
                prop_assert_eq!(a.finish(&all).unwrap().to_data(), b.finish(&all).unwrap().to_data());
                for (x, y) in a.export(&all).unwrap().iter().zip(&b.export(&all).unwrap()) {
                    prop_assert_eq!(x.to_data(), y.to_data());
                }
            }
        }

        /// Lifting a group's rows by key (one slot lookup per key and chunk) leaves the states lifting them by
        /// slot leaves: the same slots, finished values and partial-state bytes, over several runs.
        #[test]
        fn lifting_by_key_equals_lifting_by_slot(
            runs in prop::collection::vec(prop::collection::vec((lane_values(), 0u32..40), 0..300), 1..4),
        ) {
            let metas = metas();
            let (mut by_key, mut by_slot) = (SlotStore::new(&metas), SlotStore::new(&metas));
            let (mut group_k, mut group_s) = (KeySlots::default(), KeySlots::default());
            for run in &runs {
                let keys: Vec<u32> = run.iter().map(|r| r.1).collect();
                let values: Vec<f64> = run.iter().map(|r| r.0).collect();
                let input = InputValues::Float(ScalarBuffer::from(values), None);
                let inputs: Vec<InputValues> =
                    metas.iter().map(|m| if m.spec.column.is_none() { InputValues::Star } else { input.clone() }).collect();
                let plan = by_key.keyed_plan(&inputs, &keys).expect("fused");
                by_key.lift_keyed(0..keys.len(), &keys, &plan, &mut group_k);
                let slots: Vec<u32> = keys.iter().map(|&k| group_s.slot(k, &mut by_slot)).collect();
                let order = RowOrder { ts: &[], by: None, source: 0, seq0: 0 };
                by_slot.update(&slots, &inputs, order);
            }
            let mut entries_k = group_k.entries.clone();
            let mut entries_s = group_s.entries.clone();
            entries_k.sort_unstable();
            entries_s.sort_unstable();
            let slots_k: Vec<u32> = entries_k.iter().map(|e| e.1).collect();
            let slots_s: Vec<u32> = entries_s.iter().map(|e| e.1).collect();
            prop_assert_eq!(entries_k.iter().map(|e| e.0).collect::<Vec<_>>(), entries_s.iter().map(|e| e.0).collect::<Vec<_>>());
            for (a, b) in by_key.states.iter().zip(&by_slot.states) {
                prop_assert_eq!(a.finish(&slots_k).unwrap().to_data(), b.finish(&slots_s).unwrap().to_data());
                for (x, y) in a.export(&slots_k).unwrap().iter().zip(&b.export(&slots_s).unwrap()) {
                    prop_assert_eq!(x.to_data(), y.to_data());
                }
            }
        }
    }
}
