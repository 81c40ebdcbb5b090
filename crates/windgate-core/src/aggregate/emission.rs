//! What an engine hands back when windows close: one output row per (window, key), in output order, each
//! pointing at a slot of the engine's scratch store that holds the window's combined state, or (the parallel
//! engines, whose windows come back whole) each window's aggregate columns, already finished.

use arrow_array::{Array, ArrayRef};
use arrow_select::concat::concat;
use arrow_select::interleave::interleave;

use super::slots::SlotStore;
use crate::error::{Error, Result};

/// Output rows in order `(window, key rank)`.
#[derive(Debug, Default)]
pub struct Emission {
    pub windows: Vec<i64>,
    pub keys: Vec<u32>,
    pub slots: Vec<u32>,
    /// Distinct windows in this emission.
    pub window_count: u64,
    /// Windows finished by the engine, in order: per window, one column per aggregate indexed by the window's
    /// own slots. When set, row `i`'s aggregates are row `slots[i]` of its window's columns.
    pub finished: Vec<Vec<ArrayRef>>,
    /// Update mode only (`allowed_lateness`, `emit="early"`): each row's `(revision, final)`.
    pub marks: Vec<(u32, bool)>,
}

impl Emission {
    /// Appends one window's rows, sorted by key rank. `rows` holds `(key, slot)` pairs.
    pub fn push_window(&mut self, window: i64, rows: &mut [(u32, u32)], ranks: &[u32]) {
        rows.sort_unstable_by_key(|&(key, _)| ranks[key as usize]);
        self.push_sorted_window(window, rows);
    }

    /// Appends a finished window's rows, in key order, with `(key, slot in the window's columns)` pairs.
    pub fn push_finished_window(
        &mut self,
        window: i64,
        rows: &[(u32, u32)],
        columns: Vec<ArrayRef>,
    ) {
        if rows.is_empty() {
            return;
        }
        self.push_sorted_window(window, rows);
        self.finished.push(columns);
    }

    /// Each aggregate's column, one value per row: the finished windows' columns gathered in row order, or,
    /// when the engine left the windows' states in `scratch`, the rows' slots of it lowered.
    pub fn aggregate_columns(&self, scratch: &SlotStore) -> Result<Vec<ArrayRef>> {
        let Some(first) = self.finished.first() else {
            return scratch
                .states
                .iter()
                .map(|s| s.finish(&self.slots))
                .collect();
        };
        // The pane engine finishes a window's rows in output order: its columns are then appended whole.
        let whole = self.finished.iter().map(|w| w[0].len()).sum::<usize>() == self.slots.len()
            && (self.slots.iter())
                .zip(self.places_in_window())
                .all(|(&s, at)| s as usize == at);
        let picks = if whole {
            Vec::new()
        } else {
            self.finished_indices()
        };
        (0..first.len())
            .map(|a| {
                let windows: Vec<&dyn Array> =
                    self.finished.iter().map(|w| w[a].as_ref()).collect();
                let column = if whole {
                    concat(&windows)
                } else {
                    interleave(&windows, &picks)
                };
                column.map_err(Error::output)
            })
            .collect()
    }

    /// The `(window, slot)` of every row of finished windows, as `interleave` takes them. Each window's rows are
    /// consecutive and windows come once each, so the `w`-th run of equal `windows` is `finished[w]`.
    fn finished_indices(&self) -> Vec<(usize, usize)> {
        let mut w = 0;
        self.slots
            .iter()
            .enumerate()
            .map(|(i, &slot)| {
                if i > 0 && self.windows[i] != self.windows[i - 1] {
                    w += 1;
                }
                (w, slot as usize)
            })
            .collect()
    }

    /// Each row's place within its window's run of rows.
    fn places_in_window(&self) -> impl Iterator<Item = usize> + '_ {
        let mut at = 0;
        (0..self.windows.len()).map(move |i| {
            if i > 0 && self.windows[i] != self.windows[i - 1] {
                at = 0;
            }
            at += 1;
            at - 1
        })
    }

    /// Drops every row of the windows up to and including `last` (windows come in ascending order): an
    /// operator restored from a checkpoint emitted those before it was taken.
    pub fn drop_through(&mut self, last: i64) {
        let cut = self.windows.partition_point(|&w| w <= last);
        if cut == 0 {
            return;
        }
        let mut dropped = 0;
        for i in 0..cut {
            if i == 0 || self.windows[i] != self.windows[i - 1] {
                dropped += 1;
            }
        }
        self.windows.drain(..cut);
        self.keys.drain(..cut);
        self.slots.drain(..cut);
        if !self.marks.is_empty() {
            self.marks.drain(..cut);
        }
        if !self.finished.is_empty() {
            self.finished.drain(..dropped);
        }
        self.window_count -= dropped as u64;
    }

    /// Appends one window's rows, already in key order.
    pub fn push_sorted_window(&mut self, window: i64, rows: &[(u32, u32)]) {
        if rows.is_empty() {
            return;
        }
        // Three appends rather than three pushes a row (a capacity test each).
        (self.windows).extend(std::iter::repeat_n(window, rows.len()));
        self.keys.extend(rows.iter().map(|&(key, _)| key));
        self.slots.extend(rows.iter().map(|&(_, slot)| slot));
        self.window_count += 1;
    }
}
