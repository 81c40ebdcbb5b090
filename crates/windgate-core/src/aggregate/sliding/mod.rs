//! Sliding windows over pane partials in O(1) amortised combines per (window, key), whatever the panes per
//! window: the "two-stacks" queue of sliding-window aggregation surveyed by Tangwongsan, Hirzel and
//! Schneider, *Sliding-Window Aggregation Algorithms*, and in Shein, Chrysanthis and Labrinidis'
//! *SlickDeque*, over the panes of the window.
//!
//! The window's panes are a queue: the *back* holds the panes pushed since the last flip and their running
//! combination; the *front* holds suffix combinations of older panes (entry `i` is pane `i` combined with every
//! newer front pane), oldest on top. A window is the front's top combined with the back's running state, the
//! two lowered together without the combination being stored. Evicting a pane pops the front; when the front
//! runs dry, the back's panes are flipped into suffixes, one combine per pane. Every pane is thus combined at
//! most three times in all, and a window reads two states per key, where recombining its panes costs one per
//! pane (288 for a day of 5-minute panes).
//!
//! The queue is kept in one of two layouts, chosen by how many of the keys each pane holds
//! ([`Sliding::choose`]):
//!
//! * [`per_key`]: a queue per key, over the panes in which the key has rows. Costs nothing for the panes a
//!   key skips, but each key's pushes, pops and flips are bookkeeping of their own.
//! * [`shared`]: one queue for every key, each state a block of slots by key. A step per pane instead of per
//!   key and pane, and the combines in key order; but a key combines an empty state in each pane it skips.
//!
//! Combines are exact and commutative (see [`super::state`]), so neither the grouping of panes nor the empty
//! states change a bit of any result: the determinism tests compare every engine with the reference engine.

mod per_key;
mod shared;

use std::collections::BTreeMap;

use arrow_array::ArrayRef;

use self::per_key::PerKeyStacks;
use self::shared::SharedStacks;
use super::slots::{KeySlots, SlotStore};
use crate::error::Result;

/// From this many panes per window on, the pane engine combines windows through [`Sliding`]; below, it
/// recombines the panes, which costs fewer combines than the stacks' bookkeeping. Measured with the
/// `agg_scaling` binary (4M rows, 1000 random keys, count+sum+max, 1 thread): recombining 26 M rows/s against
/// 21 M at 3 panes, level at 6 (17.7 against 18.3), sliding ahead from 12 on (18.3 against 15.9) and far
/// ahead at 288 (12.5 against 2.1).
pub(crate) const SLIDING_MIN_PANES: i64 = 6;

/// Windows between two looks at how many keys the panes hold: a look reads the length of each of the
/// window's panes.
const CHOOSE_EVERY: u32 = 32;

/// The panes some stacks hold: those from `evicted` on and below `pushed`, both layouts' cursor.
#[derive(Debug, Clone, Copy)]
struct Held {
    pushed: i64,
    evicted: i64,
}

impl Held {
    /// Stacks holding no pane (a fresh build pushes its first window's panes whole).
    const NONE: Held = Held {
        pushed: i64::MIN,
        evicted: i64::MIN,
    };

    /// The held panes before `first`, which the window from `first` evicts (empty when there are none).
    fn before(&self, first: i64) -> std::ops::Range<i64> {
        self.evicted..first.min(self.pushed).max(self.evicted)
    }

    /// Moves to the window `first..=last`, once the panes before `first` are evicted: the panes to push, if
    /// any are not yet.
    fn advance(&mut self, first: i64, last: i64) -> Option<std::ops::RangeInclusive<i64>> {
        self.evicted = self.evicted.max(first);
        self.pushed = self.pushed.max(first);
        if self.pushed > last {
            return None;
        }
        let push = self.pushed..=last;
        self.pushed = last + 1;
        Some(push)
    }

    /// Whether pane `pane` is held: dropping it evicts it.
    fn holds(&self, pane: i64) -> bool {
        pane >= self.evicted && pane < self.pushed
    }

    /// Marks the panes up to `pane` evicted (the pane engine dropped them).
    fn dropped(&mut self, pane: i64) {
        self.evicted = self.evicted.max(pane + 1);
    }
}

/// The layout of the queue (see the module doc). One per pane engine, which boxes it: the variants' sizes
/// do not matter.
#[allow(clippy::large_enum_variant)]
enum Stacks {
    PerKey(PerKeyStacks),
    Shared(SharedStacks),
}

/// The pane engine's sliding window: the queue of its panes in the layout that suits them.
pub(crate) struct Sliding {
    stacks: Stacks,
    /// An empty store of the query's aggregates, for stacks built afresh.
    template: SlotStore,
    /// Windows until the next look at the layout.
    until_choice: u32,
    /// The most panes a window holds (shared stacks keep a block for each, and one for the back).
    panes_per_window: usize,
}

impl Sliding {
    /// Empty stacks for windows of `panes_per_window` panes; `store` is an empty store of the query's
    /// aggregates.
    pub(crate) fn new(store: SlotStore, panes_per_window: i64) -> Self {
        Self {
            stacks: Stacks::PerKey(PerKeyStacks::new(store.empty_like())),
            template: store,
            until_choice: 0,
            panes_per_window: usize::try_from(panes_per_window).unwrap_or(usize::MAX),
        }
    }

    /// Moves the window to panes `first..=last`: evicts the panes before `first`, then pushes the panes up to
    /// `last` (`panes` holds every open pane, their keys below `key_bound`; `pane_store` their states).
    pub(crate) fn advance(
        &mut self,
        first: i64,
        last: i64,
        panes: &BTreeMap<i64, KeySlots>,
        pane_store: &SlotStore,
        key_bound: usize,
    ) {
        self.choose(first, last, panes, key_bound);
        match &mut self.stacks {
            Stacks::PerKey(s) => s.advance(first, last, panes, pane_store),
            Stacks::Shared(s) => s.advance(first, last, panes, pane_store),
        }
    }

    /// Picks the layout for the window `first..=last`, rebuilding the stacks when it changes (a rebuild pushes
    /// the window's panes again, as the first window does). Shared stacks when the window's panes hold at
    /// least half the keys on average, per-key stacks again when they hold less than a quarter (the gap keeps
    /// a stream at the edge from rebuilding at every look). Shared stacks are also rebuilt when the keys
    /// outgrow their blocks, then with an eighth to spare.
    fn choose(&mut self, first: i64, last: i64, panes: &BTreeMap<i64, KeySlots>, key_bound: usize) {
        let outgrown = matches!(&self.stacks, Stacks::Shared(s) if !s.holds(key_bound));
        if !outgrown && self.until_choice > 0 {
            self.until_choice -= 1;
            return;
        }
        self.until_choice = CHOOSE_EVERY;
        let (mut entries, mut count) = (0usize, 0usize);
        for (_, pane) in panes.range(first..=last) {
            entries += pane.entries.len();
            count += 1;
        }
        let slots = count * key_bound;
        // Blocks as wide as the keys (every slot is combined at each flip); with an eighth to spare once the
        // keys have outgrown them, so that a stream whose keys keep coming rebuilds once per eighth.
        let spare = if outgrown { key_bound / 8 } else { 0 };
        let cap = (key_bound + spare).next_multiple_of(64);
        // Every block's slots must have ids (`u32`), with room to spare.
        let blocks = self.panes_per_window.saturating_add(2);
        let fits = cap.checked_mul(blocks).is_some_and(|n| n < 1 << 31);
        let shared = fits
            && match self.stacks {
                Stacks::PerKey(_) => slots > 0 && entries * 2 >= slots,
                Stacks::Shared(_) => entries * 4 >= slots,
            };
        let is_shared = matches!(self.stacks, Stacks::Shared(_));
        if shared && (!is_shared || outgrown) {
            let stacks = SharedStacks::new(self.template.empty_like(), cap as u32);
            self.stacks = Stacks::Shared(stacks);
        } else if !shared && is_shared {
            self.rebuild_per_key();
        }
    }

    /// Per-key stacks built afresh: the next advance pushes the window's panes into them.
    fn rebuild_per_key(&mut self) {
        self.stacks = Stacks::PerKey(PerKeyStacks::new(self.template.empty_like()));
    }

    /// Evicts pane `pane`, which the pane engine drops (its last window is out; `panes` still holds it): every
    /// later window starts after it.
    pub(crate) fn evict_dropped(
        &mut self,
        pane: i64,
        panes: &BTreeMap<i64, KeySlots>,
        pane_store: &SlotStore,
    ) {
        match &mut self.stacks {
            Stacks::PerKey(s) => s.evict_dropped(pane, panes, pane_store),
            Stacks::Shared(s) => s.evict_dropped(pane, panes, pane_store),
        }
    }

    /// How many keys have a pane in the current window.
    pub(crate) fn active_len(&self) -> usize {
        match &self.stacks {
            Stacks::PerKey(s) => s.active().len(),
            Stacks::Shared(s) => s.active_len(),
        }
    }

    /// Appends `(key, 0)` for every key with a pane in the current window, in no particular order.
    pub(crate) fn push_active(&self, rows: &mut Vec<(u32, u32)>) {
        match &self.stacks {
            Stacks::PerKey(s) => rows.extend(s.active().iter().map(|&key| (key, 0))),
            Stacks::Shared(s) => rows.extend(s.active_keys().map(|key| (key, 0))),
        }
    }

    /// Whether `key` has a pane in the current window.
    pub(crate) fn is_active(&self, key: u32) -> bool {
        match &self.stacks {
            Stacks::PerKey(s) => s.is_active(key),
            Stacks::Shared(s) => s.is_active(key),
        }
    }

    /// The current window's aggregate columns for the given `(key, _)` rows, in order.
    pub(crate) fn finish(&mut self, rows: &[(u32, u32)]) -> Result<Vec<ArrayRef>> {
        match &mut self.stacks {
            Stacks::PerKey(s) => s.finish(rows),
            Stacks::Shared(s) => s.finish(rows),
        }
    }

    /// Renames key ids after the key dictionary forgot keys (`remap[old]` is the new id). Shared stacks,
    /// whose blocks are laid out by id, are built afresh at the next advance.
    pub(crate) fn remap_keys(&mut self, remap: &[u32]) {
        match &mut self.stacks {
            Stacks::PerKey(s) => s.remap_keys(remap),
            Stacks::Shared(_) => {
                self.rebuild_per_key();
                self.until_choice = 0;
            }
        }
    }
}
