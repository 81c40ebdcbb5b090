//! The reference engine: plain and obviously correct, kept as the oracle for every other engine.
//!
//! It keeps every admitted row. When windows close it lists, for each row, every window containing it, sorts
//! the (window, key, row) triples, and folds each group's rows one at a time in the total order
//! `(ts, source, seq)`. No panes, no partial states carried between windows.

use super::emission::Emission;
use super::slots::SlotStore;
use super::state::{InputValues, OrderKey, RowOrder};
use crate::error::Result;
use crate::keys::KeyOrder;
use crate::time::WindowSpec;

struct Row {
    at: OrderKey,
    key: u32,
    /// Which ingested chunk holds the row's values, and where.
    chunk: u32,
    index: u32,
    /// The first window the row counts in (`i64::MIN`: all of its windows); the update mode counts a late
    /// row only in its windows not yet purged.
    from: i64,
}

pub struct ReferenceEngine {
    spec: WindowSpec,
    rows: Vec<Row>,
    chunks: Vec<Option<Vec<InputValues>>>,
    pub scratch: SlotStore,
    next_window: i64,
}

impl ReferenceEngine {
    pub fn new(spec: WindowSpec, scratch: SlotStore) -> Self {
        Self {
            spec,
            rows: Vec::new(),
            chunks: Vec::new(),
            scratch,
            next_window: i64::MIN,
        }
    }

    pub fn ingest(
        &mut self,
        ts: &[i64],
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
    ) {
        let chunk = self.chunks.len() as u32;
        self.chunks.push(Some(inputs.to_vec()));
        for i in 0..ts.len() {
            if keep.is_none_or(|k| k[i]) {
                let at = OrderKey {
                    ts: ts[i],
                    by: order.by.map_or(0, |b| b[i]),
                    source: order.source,
                    seq: order.seq0 + i as u64,
                };
                self.rows.push(Row {
                    at,
                    key: keys[i],
                    chunk,
                    index: i as u32,
                    from: i64::MIN,
                });
            }
        }
    }

    /// Emits every window up to and including `last`.
    pub fn emit_until(&mut self, last: i64, keys: KeyOrder<'_>, out: &mut Emission) -> Result<()> {
        self.fold(self.next_window, last, |_, _| true, keys, out)?;
        self.next_window = self.next_window.max(last.saturating_add(1));
        self.forget_through(last);
        Ok(())
    }

    /// Emits the (window, key) groups with a window in `lo..=hi` that `select(window, key)` picks, folding
    /// each group's rows from scratch; changes nothing else (the update mode fires windows more than once).
    pub(super) fn fold(
        &mut self,
        lo: i64,
        hi: i64,
        select: impl Fn(i64, u32) -> bool,
        keys: KeyOrder<'_>,
        out: &mut Emission,
    ) -> Result<()> {
        let ranks = keys.ranks;
        let mut groups: Vec<(i64, u32, OrderKey, usize)> = Vec::new();
        for (r, row) in self.rows.iter().enumerate() {
            let (first, last) = self.spec.windows_of_ts(row.at.ts);
            for j in first.max(lo).max(row.from)..=last.min(hi) {
                if select(j, row.key) {
                    groups.push((j, ranks[row.key as usize], row.at, r));
                }
            }
        }
        groups.sort_unstable_by_key(|&(j, rank, at, _)| (j, rank, at));
        let mut i = 0;
        let mut window_rows: Vec<(u32, u32)> = Vec::new();
        while i < groups.len() {
            crate::interrupt::check()?;
            let window = groups[i].0;
            window_rows.clear();
            while i < groups.len() && groups[i].0 == window {
                let rank = groups[i].1;
                let slot = self.scratch.alloc();
                let key = self.rows[groups[i].3].key;
                while i < groups.len() && groups[i].0 == window && groups[i].1 == rank {
                    self.fold_row(slot, groups[i].3);
                    i += 1;
                }
                window_rows.push((key, slot));
            }
            out.push_window(window, &mut window_rows, ranks);
        }
        Ok(())
    }

    /// Every retained row: its place in the order, key, first window and each aggregate's input (one row).
    pub(super) fn rows(&self) -> impl Iterator<Item = (OrderKey, u32, i64, Vec<InputValues>)> + '_ {
        self.rows.iter().map(|r| {
            let inputs = self.chunks[r.chunk as usize].as_ref().expect("live chunk");
            let one = inputs
                .iter()
                .map(|i| i.slice(r.index as usize, 1))
                .collect();
            (r.at, r.key, r.from, one)
        })
    }

    /// Appends rows with their places in the order and first windows (a checkpoint's rows): `inputs` holds
    /// each aggregate's values of all of them, row `i` at index `i`.
    pub(super) fn restore_rows(
        &mut self,
        at: &[OrderKey],
        keys: &[u32],
        from: &[i64],
        inputs: Vec<InputValues>,
    ) {
        let chunk = self.chunks.len() as u32;
        self.chunks.push(Some(inputs));
        for (i, ((&at, &key), &from)) in at.iter().zip(keys).zip(from).enumerate() {
            self.rows.push(Row {
                at,
                key,
                chunk,
                index: i as u32,
                from,
            });
        }
    }

    /// Rows ingested so far (the next ingested row's position).
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Makes the rows from position `since` on count only from window `from(index in its chunk)` on.
    pub(super) fn count_from(&mut self, since: usize, from: impl Fn(u32) -> Option<i64>) {
        for row in &mut self.rows[since..] {
            if let Some(j) = from(row.index) {
                row.from = j;
            }
        }
    }

    /// Forgets the rows whose every window is at or before `last`.
    pub(super) fn forget_through(&mut self, last: i64) {
        let spec = self.spec;
        self.rows
            .retain(|row| spec.windows_of_ts(row.at.ts).1 > last);
        let mut live = vec![false; self.chunks.len()];
        self.rows.iter().for_each(|r| live[r.chunk as usize] = true);
        for (c, alive) in self.chunks.iter_mut().zip(live) {
            if !alive {
                *c = None;
            }
        }
    }

    fn fold_row(&mut self, slot: u32, r: usize) {
        let row = &self.rows[r];
        let inputs = self.chunks[row.chunk as usize]
            .as_ref()
            .expect("live chunk");
        let (ts, by) = ([row.at.ts], [row.at.by]);
        let order = RowOrder {
            ts: &ts,
            by: Some(&by),
            source: row.at.source,
            seq0: row.at.seq,
        };
        for (state, input) in self.scratch.states.iter_mut().zip(inputs) {
            state.update(&[slot], &input.slice(row.index as usize, 1), order);
        }
    }

    /// Lifts every retained row into `panes`, one row at a time in its own order (a checkpoint writes the
    /// reference engine's state as the pane engine's open panes).
    pub fn lift_into(&self, panes: &mut super::pane_engine::PaneEngine) {
        for row in &self.rows {
            let inputs: Vec<InputValues> = self.chunks[row.chunk as usize]
                .as_ref()
                .expect("live chunk")
                .iter()
                .map(|input| input.slice(row.index as usize, 1))
                .collect();
            let (ts, by) = ([row.at.ts], [row.at.by]);
            let order = RowOrder {
                ts: &ts,
                by: Some(&by),
                source: row.at.source,
                seq0: row.at.seq,
            };
            panes.ingest(&ts, &[row.key], None, &inputs, order);
        }
    }

    pub fn last_window(&self) -> Option<i64> {
        self.rows
            .iter()
            .map(|r| self.spec.windows_of_ts(r.at.ts).1)
            .max()
    }

    pub fn retained_rows(&self) -> usize {
        self.rows.len()
    }
}

impl super::forget::KeyHolder for ReferenceEngine {
    fn key_entries(&self) -> usize {
        self.rows.len()
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        for row in &self.rows {
            live[row.key as usize] = true;
        }
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        for row in &mut self.rows {
            row.key = remap[row.key as usize];
        }
    }
}
