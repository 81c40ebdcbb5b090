//! How a batch's rows fall into panes for the pane engine's lift: runs of rows within one pane, the short
//! runs of a stream's bounded disorder gathered by pane, spans of rows mixed between two neighbouring panes,
//! and the panes' key maps kept for reuse.

use std::collections::BTreeMap;

use super::slots::{KeySlots, KeyedPlan, SlotStore};
use crate::time::WindowSpec;

/// Runs of fewer rows than this (rows of a stream's bounded disorder near a pane's edge, where neighbouring rows
/// alternate between two panes) are gathered by pane and lifted by key once per pane and batch (see
/// [`ShortRuns`]): a keyed lift costs a fused pass's set-up (its lane's scale, its records, their absorption),
/// and paid per run of a row or two it cost more than the rows, whose sums also landed at as many scales.
pub(super) const SHORT_RUN: usize = 64;

/// The rows of a batch's short runs (see [`SHORT_RUN`]), by pane: gathered into one column of keys and one of
/// values per pane, they are lifted by key like a long run. (Lifted by slot instead, a row of them cost some
/// 130 instructions: nearly every row its own slot, each slot absorbed into every aggregate.)
#[derive(Debug, Default)]
pub(super) struct ShortRuns {
    /// `(pane, rows)`, panes in order of first appearance; the first `used` hold this batch's rows, the rest
    /// are emptied vectors kept for the next batch.
    panes: Vec<(i64, Vec<u32>)>,
    pub(super) used: usize,
    keys: Vec<u32>,
    values: Vec<f64>,
}

/// Room [`ShortRuns`] keeps between batches: a batch's gathered rows must not stay allocated.
const SHORT_KEEP_PANES: usize = 8;
const SHORT_KEEP_ROWS: usize = 1 << 14;

/// Panes a batch's short runs may fall in before they are lifted by slot instead of gathered (scattered rows,
/// a row or two a pane, would pay a keyed pass per pane). Measured on a shuffled table with panes of 1 ms and
/// windows of 6 (`strategy="pane"`, one row a pane and batch): 0.23 M rows/s gathered, 0.34 M by slot.
pub(super) const SHORT_MAX_PANES: usize = 16;

impl ShortRuns {
    /// Adds rows `rows` of pane `pane`: a search of at most [`SHORT_MAX_PANES`] + 1 panes, since the caller
    /// lifts the rows by slot past that. Returns whether the pane is new to the batch.
    pub(super) fn add(&mut self, pane: i64, rows: std::ops::Range<usize>) -> bool {
        let (at, new) = match self.panes[..self.used].iter().position(|p| p.0 == pane) {
            Some(at) => (at, false),
            None => {
                if self.used == self.panes.len() {
                    self.panes.push((pane, Vec::new()));
                }
                self.panes[self.used].0 = pane;
                self.used += 1;
                (self.used - 1, true)
            }
        };
        self.panes[at].1.extend(rows.map(|r| r as u32));
        new
    }

    /// Gives each row added since the last call its slot in its pane (`slots` has a place for every row of
    /// the batch), and forgets them.
    pub(super) fn place_rows(
        &mut self,
        panes: &mut BTreeMap<i64, KeySlots>,
        store: &mut SlotStore,
        keys: &[u32],
        slots: &mut [u32],
    ) {
        for (pane, rows) in &self.panes[..self.used] {
            let group = panes.get_mut(pane).expect("a short run's pane is open");
            for &r in rows {
                slots[r as usize] = group.slot(keys[r as usize], store);
            }
        }
        self.forget();
    }

    /// Lifts the rows added since the last call into their panes, through `plan`, and forgets them.
    pub(super) fn lift(
        &mut self,
        panes: &mut BTreeMap<i64, KeySlots>,
        store: &mut SlotStore,
        keys: &[u32],
        plan: &KeyedPlan<'_>,
    ) {
        for (pane, rows) in &mut self.panes[..self.used] {
            let group = panes.get_mut(pane).expect("a short run's pane is open");
            self.keys.clear();
            self.keys.extend(rows.iter().map(|&r| keys[r as usize]));
            self.values.clear();
            self.values
                .extend(rows.iter().map(|&r| plan.values()[r as usize]));
            store.lift_keyed_values(&self.keys, &self.values, plan, group);
            rows.clear();
        }
        self.forget();
    }

    /// Empties the panes' rows (they were lifted), keeping no more room than [`SHORT_KEEP_PANES`] and
    /// [`SHORT_KEEP_ROWS`] say.
    fn forget(&mut self) {
        self.panes[..self.used].iter_mut().for_each(|(_, rows)| {
            rows.clear();
            release_large(rows);
        });
        self.used = 0;
        self.panes.truncate(SHORT_KEEP_PANES);
        release_large(&mut self.keys);
        release_large(&mut self.values);
    }
}

/// Frees `v`'s room if it outgrew what [`ShortRuns`] keeps between batches.
fn release_large<T>(v: &mut Vec<T>) {
    if v.capacity() > SHORT_KEEP_ROWS {
        *v = Vec::new();
    }
}

/// Pane `id`'s key map, opened (from the spare maps) if the pane is new.
pub(super) fn open<'a>(
    panes: &'a mut BTreeMap<i64, KeySlots>,
    spare: &mut Vec<KeySlots>,
    id: i64,
) -> &'a mut KeySlots {
    (panes.entry(id)).or_insert_with(|| spare.pop().unwrap_or_default())
}

/// The last two panes a batch's runs fell in, `(pane, start, end)`, newest first: rows in bounded disorder near a
/// pane's edge alternate between two panes, and each run paid a division for its pane and a multiplication for
/// the pane's times. Empty ranges at first, which hold no time.
#[derive(Debug, Default)]
pub(super) struct RecentPanes([(i64, i64, i64); 2]);

impl RecentPanes {
    /// The pane of time `t` and its times `[start, end)`.
    #[inline]
    pub(super) fn pane_of(&mut self, t: i64, spec: &WindowSpec) -> (i64, i64, i64) {
        let [a, b] = self.0;
        if (a.1..a.2).contains(&t) {
            return a;
        }
        if (b.1..b.2).contains(&t) {
            self.0 = [b, a];
            return b;
        }
        let id = spec.pane_of(t);
        let (start, end) = spec.pane_bounds(id);
        self.0 = [(id, start, end), a];
        (id, start, end)
    }
}

/// Emptied key maps kept for reuse (see `PaneEngine::spare`): about the panes dropped at one emission.
const SPARE_MAPS: usize = 4;

/// Keeps a dropped pane's key map, emptied, for a later pane (see `PaneEngine::spare`).
pub(super) fn keep_spare(spare: &mut Vec<KeySlots>, mut pane: KeySlots) {
    if spare.len() < SPARE_MAPS {
        pane.empty();
        spare.push(pane);
    }
}

crate::prefetch::with_avx2! {
    /// How many rows from the first have times in `[start, end)`. In-order input comes in runs of thousands
    /// of rows: blocks of [`RUN_BLOCK`] rows are tested whole (a compare the compiler vectorises, with AVX2's
    /// 64-bit compares where the CPU has them), and only the block where the run ends row by row.
    pub(super) fn run_within(ts: &[i64], start: i64, end: i64) -> usize = run_within_blocks;
}

/// The portable body of [`run_within`].
#[inline(always)]
fn run_within_blocks(ts: &[i64], start: i64, end: i64) -> usize {
    let inside = |t: &i64| (start..end).contains(t);
    // A short run (rows of a stream's bounded disorder alternate between two panes at a pane's edge) ends
    // within its first rows: a look at them spares the block test.
    let head = ts.iter().take(RUN_HEAD).take_while(|t| inside(t)).count();
    if head < RUN_HEAD {
        return head;
    }
    let mut run = head;
    for block in ts[head..].chunks(RUN_BLOCK) {
        if !block.iter().fold(true, |all, t| all & inside(t)) {
            return run + block.iter().take_while(|t| inside(t)).count();
        }
        run += block.len();
    }
    run
}

/// Panes a span of mixed rows covers (see [`pane_span`]). Two: at a pane's edge, rows in bounded disorder
/// alternate between two panes. Four (the pane before a run's and the two after), so that a span covers a
/// whole slice of the batch, measured slower: 67.9 against 70.4 M rows/s (`agg_scaling`, rows late by up to
/// 2 s), the records of four panes outgrowing the L1 cache.
pub(super) const SPAN_PANES: usize = 2;

/// The fewest rows a span of two panes takes ([`pane_span`]): a keyed pass costs each key it meets an
/// absorb into every aggregate, so a span shorter than the keys could meet nearly a key a row, where its rows
/// gathered with the batch's other short runs of their pane share the pass. Measured (Python, 4 M rows late by
/// up to 2 s both ways, 1000 keys, `lateness="1s"` dropping a quarter, cutting spans short): spans from 64
/// rows on 38.4-38.9 -> 36.7-37.3 M rows/s.
pub(super) fn span_min_rows(plan: &KeyedPlan<'_>) -> usize {
    SHORT_RUN.max(plan.key_count())
}

/// Rows of two neighbouring panes: `first` and the next, which starts at `second` (panes `width` long).
pub(super) struct PaneSpan {
    first: i64,
    second: i64,
    width: i64,
    pub(super) rows: usize,
}

/// The rows from the first within its pane (`pane`: id, start, end) and a neighbour: the next pane or, if
/// that span is shorter than [`SHORT_RUN`], the one before; `None` when both are short. At a pane's edge in
/// bounded disorder rows alternate between two panes in runs of a row or two; such a span lifts them in one
/// keyed pass ([`lift_span`]) instead of one per run.
pub(super) fn pane_span(
    ts: &[i64],
    (id, start, end): (i64, i64, i64),
    width: i64,
) -> Option<PaneSpan> {
    let after = run_within(ts, start, end.saturating_add(width));
    let (first, second, rows) = if after >= SHORT_RUN {
        (id, end, after)
    } else {
        (
            id - 1,
            start,
            run_within(ts, start.saturating_sub(width), end),
        )
    };
    (rows >= SHORT_RUN).then_some(PaneSpan {
        first,
        second,
        width,
        rows,
    })
}

/// Lifts the rows of `span` from row `i` on (all kept) through one keyed pass over its [`SPAN_PANES`] panes
/// (`SlotStore::lift_keyed_panes`). The panes leave the map while it runs; those that were open or received
/// rows go back.
pub(super) fn lift_span(
    panes: &mut BTreeMap<i64, KeySlots>,
    spare: &mut Vec<KeySlots>,
    store: &mut SlotStore,
    plan: &KeyedPlan<'_>,
    (keys, ts): (&[u32], &[i64]),
    i: usize,
    span: &PaneSpan,
) {
    let mut open = [false; SPAN_PANES];
    let mut groups: [KeySlots; SPAN_PANES] = std::array::from_fn(|k| {
        let pane = panes.remove(&(span.first + k as i64));
        open[k] = pane.is_some();
        pane.unwrap_or_else(|| spare.pop().unwrap_or_default())
    });
    let (rows, at) = (i..i + span.rows, (span.second, span.width));
    store.lift_keyed_panes(rows, keys, ts, at, plan, &mut groups);
    for ((k, group), open) in groups.into_iter().enumerate().zip(open) {
        if open || !group.entries.is_empty() {
            panes.insert(span.first + k as i64, group);
        } else {
            keep_spare(spare, group);
        }
    }
}

/// How many of the rows `keep` flags, from the first, are kept (at least one: a run starts at a kept row).
pub(super) fn kept_prefix(keep: &[bool]) -> usize {
    keep.iter().position(|&k| !k).unwrap_or(keep.len())
}

/// Where the pane runs of sorted times end, found near a guess: an in-order stream keeps a steady rate, so a
/// run holds about as many rows as its pane's time left at the last run's rows per unit of time. The guess
/// is tested, widened by doubling steps (a gallop) and closed by a binary search, so the answer is exact
/// whatever the guess; at a steady rate it takes two probes, where a binary search over a piece took fifteen,
/// the first of them missing the cache (2% of a count+sum+max query's time, `perf`).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct SortedRuns {
    /// Rows per unit of time of the last run that ended before its slice did (0 before any).
    rate: f64,
}

impl SortedRuns {
    /// How many rows from the first have times below `end`, `ts` being sorted: `ts.partition_point(|&t| t <
    /// end)`.
    pub(super) fn run_end(&mut self, ts: &[i64], end: i64) -> usize {
        let Some(&first) = ts.first() else {
            return 0;
        };
        let span = end.saturating_sub(first) as f64;
        // `as` saturates: a negative or NaN guess is 0, a huge one `usize::MAX`.
        let guess = (span * self.rate) as usize;
        let run = gallop(ts, end, guess.clamp(1, ts.len()));
        if run < ts.len() && span > 0.0 {
            self.rate = run as f64 / span;
        }
        run
    }
}

/// `ts.partition_point(|&t| t < end)` for sorted `ts`, searched from `guess` (in `1..=ts.len()`) outwards.
fn gallop(ts: &[i64], end: i64, guess: usize) -> usize {
    let below = |i: usize| ts[i] < end;
    let search = |from: usize, to: usize| from + ts[from..to].partition_point(|&t| t < end);
    if below(guess - 1) {
        // The answer is at least `lo`.
        let (mut lo, mut step) = (guess, 1);
        loop {
            let probe = lo + step;
            if probe > ts.len() {
                return search(lo, ts.len());
            }
            if !below(probe - 1) {
                return search(lo, probe - 1);
            }
            lo = probe;
            step *= 2;
        }
    } else {
        // The answer is at most `hi`.
        let (mut hi, mut step) = (guess - 1, 1);
        loop {
            if hi < step {
                return search(0, hi);
            }
            let probe = hi - step;
            if below(probe) {
                return search(probe + 1, hi);
            }
            hi = probe;
            step *= 2;
        }
    }
}

/// Rows a pane run is tested by at once (see [`run_within`]).
const RUN_BLOCK: usize = 64;

/// Rows [`run_within`] tests one by one before it tests blocks.
const RUN_HEAD: usize = 8;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The blocked run length is the row-by-row one, for runs ending anywhere in or across blocks.
        #[test]
        fn run_within_counts_the_leading_rows_in_range(
            ts in prop::collection::vec(-5i64..20, 0..300),
            start in -5i64..10,
            len in 0i64..15,
        ) {
            let end = start + len;
            let want = ts.iter().take_while(|&&t| t >= start && t < end).count();
            prop_assert_eq!(run_within(&ts, start, end), want);
        }
    }

    proptest! {
        /// The guessed search finds the sorted run's end exactly, whatever the rate the runs before it left.
        #[test]
        fn sorted_runs_end_where_a_binary_search_does(
            steps in prop::collection::vec(0i64..4, 0..400),
            ends in prop::collection::vec(-3i64..900, 1..12),
            rate in prop_oneof![Just(0.0), 0.0f64..5.0, Just(1e300)],
        ) {
            let ts: Vec<i64> = steps.iter().scan(0, |t, d| { *t += d; Some(*t) }).collect();
            let mut runs = SortedRuns { rate };
            for end in ends {
                prop_assert_eq!(runs.run_end(&ts, end), ts.partition_point(|&t| t < end));
            }
        }
    }

    #[test]
    fn run_within_long_runs() {
        let ts: Vec<i64> = (0..1000).map(|i| i / 300).collect();
        assert_eq!(run_within(&ts, 0, 1), 300);
        assert_eq!(run_within(&ts, 0, 3), 900);
        assert_eq!(run_within(&ts, 0, 9), 1000);
        assert_eq!(run_within(&ts[300..], 1, 2), 300);
        assert_eq!(run_within(&[], 0, 9), 0);
    }
}
