//! What an engine hands back when windows close: one output row per (window, key), in output order, each
//! pointing at a slot of the engine's scratch store that holds the window's combined state, or (the parallel
//! engines, whose windows come back whole) each window's aggregate columns, already finished.

use arrow_array::ArrayRef;

/// Output rows in order `(window, key rank)`.
#[derive(Debug, Default)]
pub struct Emission {
    pub windows: Vec<i64>,
    pub keys: Vec<u32>,
    pub slots: Vec<u32>,
    /// Distinct windows in this emission.
    pub window_count: u64,
    /// Windows finished by the engine: per window, one column per aggregate indexed by the window's own slots.
    /// When set, row `i`'s aggregates are row `slots[i]` of its window's columns, and `finished_rows` says how
    /// many consecutive rows each window has.
    pub finished: Vec<Vec<ArrayRef>>,
    pub finished_rows: Vec<usize>,
}

impl Emission {
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

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
        self.finished_rows.push(rows.len());
    }

    /// The `(window, slot)` of every row of finished windows, as `interleave` takes them.
    pub fn finished_indices(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::with_capacity(self.slots.len());
        let mut row = 0;
        for (w, &n) in self.finished_rows.iter().enumerate() {
            out.extend(self.slots[row..row + n].iter().map(|&s| (w, s as usize)));
            row += n;
        }
        out
    }

    /// Appends one window's rows, already in key order.
    pub fn push_sorted_window(&mut self, window: i64, rows: &[(u32, u32)]) {
        if rows.is_empty() {
            return;
        }
        for &(key, slot) in rows {
            self.windows.push(window);
            self.keys.push(key);
            self.slots.push(slot);
        }
        self.window_count += 1;
    }
}
