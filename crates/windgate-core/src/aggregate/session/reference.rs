//! The reference session engine: plain and obviously correct, the oracle of the streaming engine.
//!
//! It keeps every admitted row. At each emission it sorts the rows by key and by the total order
//! `(ts, order_by, source, seq)`, cuts each key's rows into sessions (a row joins the current session while
//! its time is at most the session's end, the previous row's time plus `gap`), and lifts the rows of every
//! final session (`end < watermark`) one at a time into a fresh slot. No state is carried between rows of
//! different emissions but the rows themselves.

use super::Closed;
use crate::aggregate::forget::KeyHolder;
use crate::aggregate::kept_rows::KeptRows;
use crate::aggregate::keyed::PerKeyEngine;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::{InputValues, RowOrder};
use crate::error::Result;

pub(crate) struct SessionReference {
    gap: i64,
    rows: KeptRows,
    store: SlotStore,
}

impl SessionReference {
    pub fn new(gap: i64, store: SlotStore) -> Self {
        Self {
            gap,
            rows: KeptRows::default(),
            store,
        }
    }
}

impl PerKeyEngine<Closed> for SessionReference {
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

    /// Lifts every final session (see [`super::is_final`]) into a slot of its own and forgets its rows.
    fn close_through(&mut self, watermark: i64, out: &mut Vec<Closed>) {
        self.rows.sort();
        let mut rest = Vec::new();
        let rows = &self.rows.rows;
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
                out.push(Closed {
                    key: rows[i].key,
                    start: rows[i].at.ts,
                    end,
                    slot: self.rows.lift(&mut self.store, &rows[i..j]),
                });
            } else {
                rest.extend_from_slice(&rows[i..j]);
            }
            i = j;
        }
        self.rows.keep_only(rest);
    }

    /// The retained rows.
    fn open_slots(&self) -> u64 {
        self.rows.rows.len() as u64
    }

    fn check_range(&self, range: (i64, i64), time: &str) -> Result<()> {
        super::check_end(range, self.gap, time)
    }
}

impl KeyHolder for SessionReference {
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
