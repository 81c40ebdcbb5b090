//! The reference session engine: plain and obviously correct, the oracle of the streaming engine.
//!
//! It keeps every admitted row. At each emission it sorts the rows by key and by the total order
//! `(ts, order_by, source, seq)`, cuts each key's rows into sessions (a row joins the current session while
//! its time is at most the session's end, the previous row's time plus `gap`), and lifts the rows of every
//! final session (`end < watermark`) one at a time into a fresh slot. No state is carried between rows of
//! different emissions but the rows themselves.

use super::Closed;
use crate::aggregate::forget::KeyHolder;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::{InputValues, OrderKey, RowOrder};

struct Row {
    at: OrderKey,
    key: u32,
    /// Which ingested chunk holds the row's values, and where.
    chunk: u32,
    index: u32,
}

pub(crate) struct SessionReference {
    gap: i64,
    rows: Vec<Row>,
    chunks: Vec<Vec<InputValues>>,
    store: SlotStore,
}

impl SessionReference {
    pub fn new(gap: i64, store: SlotStore) -> Self {
        Self {
            gap,
            rows: Vec::new(),
            chunks: Vec::new(),
            store,
        }
    }

    pub fn store(&self) -> &SlotStore {
        &self.store
    }

    pub fn retained_rows(&self) -> usize {
        self.rows.len()
    }

    /// The least end of an open session: the retained rows cut into sessions as [`Self::close_through`]
    /// does (every retained row is in an open session).
    pub fn earliest_end(&self) -> Option<i64> {
        let mut rows: Vec<(u32, i64)> = self.rows.iter().map(|r| (r.key, r.at.ts)).collect();
        rows.sort_unstable();
        let mut best: Option<i64> = None;
        let mut i = 0;
        while i < rows.len() {
            let (key, first) = rows[i];
            let mut end = first + self.gap;
            i += 1;
            while i < rows.len() && rows[i].0 == key && rows[i].1 <= end {
                end = end.max(rows[i].1 + self.gap);
                i += 1;
            }
            best = Some(best.map_or(end, |b| b.min(end)));
        }
        best
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
        self.chunks.push(inputs.to_vec());
        for i in 0..ts.len() {
            if keep.is_none_or(|k| k[i]) {
                self.rows.push(Row {
                    at: order.key(i),
                    key: keys[i],
                    chunk,
                    index: i as u32,
                });
            }
        }
    }

    /// Lifts every final session (see [`super::is_final`]) into a slot of its own and forgets its rows.
    pub fn close_through(&mut self, watermark: i64, out: &mut Vec<Closed>) {
        self.rows.sort_by_key(|r| (r.key, r.at));
        let mut rest = Vec::new();
        let rows = std::mem::take(&mut self.rows);
        let mut i = 0;
        while i < rows.len() {
            // One session: rows[i..j].
            let mut end = rows[i].at.ts + self.gap;
            let mut j = i + 1;
            while j < rows.len() && rows[j].key == rows[i].key && rows[j].at.ts <= end {
                end = end.max(rows[j].at.ts + self.gap);
                j += 1;
            }
            if super::is_final(end, watermark) {
                let slot = self.store.alloc();
                for r in &rows[i..j] {
                    let inputs: Vec<InputValues> = self.chunks[r.chunk as usize]
                        .iter()
                        .map(|v| v.slice(r.index as usize, 1))
                        .collect();
                    let order = RowOrder {
                        ts: &[r.at.ts],
                        by: Some(&[r.at.by]),
                        source: r.at.source,
                        seq0: r.at.seq,
                    };
                    self.store.update(&[slot], &inputs, order);
                }
                out.push(Closed {
                    key: rows[i].key,
                    start: rows[i].at.ts,
                    end,
                    slot,
                });
            } else {
                rest.extend(rows[i..j].iter().map(|r| Row { ..*r }));
            }
            i = j;
        }
        self.rows = rest;
        if self.rows.is_empty() {
            self.chunks.clear();
        }
    }

    pub fn release(&mut self, closed: &[Closed]) {
        for c in closed {
            self.store.release(c.slot);
        }
    }
}

impl KeyHolder for SessionReference {
    fn key_entries(&self) -> usize {
        self.rows.len()
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        for r in &self.rows {
            live[r.key as usize] = true;
        }
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        for r in &mut self.rows {
            r.key = remap[r.key as usize];
        }
    }
}
