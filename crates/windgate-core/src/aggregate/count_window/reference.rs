//! The reference count-window engine: plain and obviously correct, the oracle of the streaming engine.
//!
//! It keeps every admitted row. At each emission it sorts the rows by key and by the total order
//! `(ts, order_by, source, seq)`, numbers each key's rows `1, 2, ...`, and fires the window of every row whose
//! number is a multiple of `rows_slide` and whose time this emission's watermark passed and the previous one's
//! did not: the rows numbered `max(1, n - rows + 1) ..= n`, lifted one at a time into a fresh slot. The windows
//! come out in the total order of the rows that completed them. No state is carried between emissions but the
//! rows and the previous watermark.

use super::{Counts, Fired, is_released};
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

pub(crate) struct CountReference {
    counts: Counts,
    rows: Vec<Row>,
    chunks: Vec<Vec<InputValues>>,
    store: SlotStore,
    /// The watermark of the previous emission: rows it passed fired their windows then.
    done: Option<i64>,
}

impl CountReference {
    pub fn new(counts: Counts, store: SlotStore) -> Self {
        Self {
            counts,
            rows: Vec::new(),
            chunks: Vec::new(),
            store,
            done: None,
        }
    }

    pub fn store(&self) -> &SlotStore {
        &self.store
    }

    pub fn retained_rows(&self) -> usize {
        self.rows.len()
    }

    pub fn ingest(
        &mut self,
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
    ) {
        let chunk = self.chunks.len() as u32;
        self.chunks.push(inputs.to_vec());
        for (i, &key) in keys.iter().enumerate() {
            if keep.is_none_or(|k| k[i]) {
                self.rows.push(Row {
                    at: order.key(i),
                    key,
                    chunk,
                    index: i as u32,
                });
            }
        }
    }

    /// Fires every window completed by a row that `watermark` passed and the previous emission's did not.
    pub fn close_through(&mut self, watermark: i64, out: &mut Vec<Fired>) {
        self.rows.sort_by_key(|r| (r.key, r.at));
        let Counts { size, slide } = self.counts;
        let done = self.done;
        let mut fired: Vec<(OrderKey, Fired)> = Vec::new();
        let mut i = 0;
        while i < self.rows.len() {
            let key = self.rows[i].key;
            let j = i + self.rows[i..].partition_point(|r| r.key == key);
            for n in (slide as usize..=j - i).step_by(slide as usize) {
                let last = self.rows[i + n - 1].at;
                if !is_released(last.ts, watermark) || done.is_some_and(|d| is_released(last.ts, d))
                {
                    continue;
                }
                let from = i + n - (size as usize).min(n);
                let slot = self.lift(from..i + n);
                fired.push((
                    last,
                    Fired {
                        key,
                        first: self.rows[from].at.ts,
                        last: last.ts,
                        rows: (i + n - from) as u64,
                        slot,
                    },
                ));
            }
            i = j;
        }
        fired.sort_by_key(|f| f.0);
        out.extend(fired.into_iter().map(|f| f.1));
        self.done = Some(done.map_or(watermark, |d| d.max(watermark)));
    }

    /// A fresh slot holding the rows `range` (of the sorted rows), lifted one at a time.
    fn lift(&mut self, range: std::ops::Range<usize>) -> u32 {
        let slot = self.store.alloc();
        for r in &self.rows[range] {
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
        slot
    }

    pub fn release(&mut self, fired: &[Fired]) {
        for f in fired {
            self.store.release(f.slot);
        }
    }
}

impl KeyHolder for CountReference {
    /// Every row is kept, so every key stays live.
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
