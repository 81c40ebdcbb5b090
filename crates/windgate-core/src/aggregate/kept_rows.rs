//! The rows a per-key reference engine keeps (count windows; the session reference, which forgets the rows of
//! closed sessions, is to move onto it): each admitted row's place in the
//! total order, its key and where its values are, liftable one at a time into a slot. Plain on purpose: the
//! references are the oracles of the streaming engines.

use super::forget::KeyHolder;
use super::slots::SlotStore;
use super::state::{InputValues, OrderKey, RowOrder};

/// One kept row.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kept {
    pub at: OrderKey,
    pub key: u32,
    /// Which ingested chunk holds the row's values, and where.
    chunk: u32,
    index: u32,
}

#[derive(Default)]
pub(super) struct KeptRows {
    pub rows: Vec<Kept>,
    chunks: Vec<Vec<InputValues>>,
}

impl KeptRows {
    /// Keeps a batch's admitted rows (`keep`; all without it).
    pub fn push(
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
                self.rows.push(Kept {
                    at: order.key(i),
                    key,
                    chunk,
                    index: i as u32,
                });
            }
        }
    }

    /// Sorts the rows by key, then by the total order.
    pub fn sort(&mut self) {
        self.rows.sort_by_key(|r| (r.key, r.at));
    }

    /// A fresh slot of `store` holding `rows`, lifted one at a time.
    pub fn lift(&self, store: &mut SlotStore, rows: &[Kept]) -> u32 {
        let slot = store.alloc();
        for r in rows {
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
            store.update(&[slot], &inputs, order);
        }
        slot
    }
}

impl KeyHolder for KeptRows {
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
