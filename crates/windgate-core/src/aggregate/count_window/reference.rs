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
use crate::aggregate::kept_rows::KeptRows;
use crate::aggregate::keyed::PerKeyEngine;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::{InputValues, OrderKey, RowOrder};

pub(crate) struct CountReference {
    counts: Counts,
    rows: KeptRows,
    store: SlotStore,
    /// The watermark of the previous emission: rows it passed fired their windows then.
    done: Option<i64>,
}

impl CountReference {
    pub fn new(counts: Counts, store: SlotStore) -> Self {
        Self {
            counts,
            rows: KeptRows::default(),
            store,
            done: None,
        }
    }
}

impl PerKeyEngine<Fired> for CountReference {
    fn store(&self) -> &SlotStore {
        &self.store
    }

    fn store_mut(&mut self) -> &mut SlotStore {
        &mut self.store
    }

    fn ingest(
        &mut self,
        _: &[i64],
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
    ) {
        self.rows.push(keys, keep, inputs, order);
    }

    /// Fires every window completed by a row that `watermark` passed and the previous emission's did not.
    fn close_through(&mut self, watermark: i64, out: &mut Vec<Fired>) {
        self.rows.sort();
        let Counts { size, slide } = self.counts;
        let done = self.done;
        let rows = &self.rows.rows;
        let mut fired: Vec<(OrderKey, Fired)> = Vec::new();
        let mut i = 0;
        while i < rows.len() {
            let key = rows[i].key;
            let j = i + rows[i..].partition_point(|r| r.key == key);
            for n in (slide as usize..=j - i).step_by(slide as usize) {
                let last = rows[i + n - 1].at;
                if !is_released(last.ts, watermark) || done.is_some_and(|d| is_released(last.ts, d))
                {
                    continue;
                }
                let from = i + n - (size as usize).min(n);
                let window = Fired {
                    key,
                    first: rows[from].at.ts,
                    last: last.ts,
                    rows: (i + n - from) as u64,
                    slot: self.rows.lift(&mut self.store, &rows[from..i + n]),
                };
                fired.push((last, window));
            }
            i = j;
        }
        fired.sort_by_key(|f| f.0);
        out.extend(fired.into_iter().map(|f| f.1));
        self.done = Some(done.map_or(watermark, |d| d.max(watermark)));
    }

    /// The retained rows (every row: the reference forgets nothing).
    fn open_slots(&self) -> u64 {
        self.rows.rows.len() as u64
    }
}

impl KeyHolder for CountReference {
    fn key_entries(&self) -> usize {
        self.rows.key_entries()
    }

    fn mark_live_keys(&self, live: &mut [bool]) {
        self.rows.mark_live_keys(live)
    }

    fn remap_keys(&mut self, remap: &[u32]) {
        self.rows.remap_keys(remap)
    }
}
