//! Window aggregation as a [`FarmQuery`]: what the pane farm and RRCPA run. The pane-level query (PLQ) lifts
//! rows into per-(key, pane partition) partial states; the window-level query (WLQ) combines partitions into
//! per-(key, window) states, as in Mencagli, Torquati, Danelutto, De Matteis, *Parallel Continuous Preference
//! Queries over Out-of-Order and Bursty Data Streams* (see `docs/architecture.md`, "Data path").

use std::collections::BTreeMap;
use std::ops::Range;

use super::rows::Admitted;
use super::window::{AggWindow, FinishedWindow};
use crate::aggregate::slots::{KeySlots, SlotStore};
use crate::aggregate::state::{AggMeta, InputValues, RowOrder, SKIP};
use crate::runtime::farm::{FarmQuery, Routed, SlidingQuery};
use std::sync::Arc;

/// Window aggregation as the pane farm's query: the pane-level query (PLQ) lifts rows into per-(key, pane
/// partition) partial states, the window-level query (WLQ) combines partitions into per-(key, window) states.
pub(crate) struct AggQuery {
    pub(crate) metas: Vec<Arc<AggMeta>>,
}

/// A PLQ worker's open partitions. A run of rows from one pane (the usual case: in-order input is routed in
/// runs) is lifted straight into that pane's own store, which is then shipped as is when the pane closes.
/// Runs mixing panes (disorder, TB_RR spans) go through one shared store in a single pass and are merged into
/// the pane's store at close.
pub(crate) struct AggWorker {
    shared: SlotStore,
    panes: BTreeMap<i64, PaneAcc>,
    slots: Vec<u32>,
    slots_pairs: Vec<(u32, u32)>,
}

#[derive(Default)]
struct PaneAcc {
    own: Option<(KeySlots, SlotStore)>,
    shared: KeySlots,
}

/// One pane partition: `entries[i] = (key, slot)` into its own store.
pub(crate) struct AggPart {
    entries: Vec<(u32, u32)>,
    store: SlotStore,
}

impl FarmQuery for AggQuery {
    type Chunk = Admitted;
    type Worker = AggWorker;
    type Part = AggPart;
    type Window = AggWindow;
    type Done = FinishedWindow;

    fn new_worker(&self) -> AggWorker {
        AggWorker {
            shared: SlotStore::new(&self.metas),
            panes: BTreeMap::new(),
            slots: Vec::new(),
            slots_pairs: Vec::new(),
        }
    }

    fn ingest(&self, w: &mut AggWorker, chunk: &Routed<Admitted>, rows: Range<usize>, me: u8) {
        let (lo, hi) = (rows.start, rows.end);
        let c = &chunk.chunk;
        let mut mine = (lo..hi).filter(|&i| chunk.owner[i] == me);
        let Some(first) = mine.next() else {
            return;
        };
        let p0 = chunk.panes[first];
        let single = mine.all(|i| chunk.panes[i] == p0);
        let AggWorker {
            shared,
            panes,
            slots,
            ..
        } = w;
        slots.clear();
        slots.resize(hi - lo, SKIP);
        let store = if single {
            let acc = panes.entry(p0).or_default();
            let (keys, store) = acc
                .own
                .get_or_insert_with(|| (KeySlots::default(), SlotStore::new(&self.metas)));
            for i in lo..hi {
                if chunk.owner[i] == me {
                    slots[i - lo] = keys.slot(c.keys[i], store);
                }
            }
            store
        } else {
            let mut cur_pane = None;
            let mut acc: Option<&mut PaneAcc> = None;
            for i in lo..hi {
                if chunk.owner[i] != me {
                    continue;
                }
                let p = chunk.panes[i];
                if cur_pane != Some(p) {
                    cur_pane = Some(p);
                    acc = Some(panes.entry(p).or_default());
                }
                let a = acc.as_deref_mut().expect("set above");
                slots[i - lo] = a.shared.slot(c.keys[i], shared);
            }
            shared
        };
        let inputs: Vec<InputValues> = c.inputs.iter().map(|v| v.slice(lo, hi - lo)).collect();
        let order = RowOrder {
            ts: &c.ts[lo..hi],
            by: c.by.as_ref().map(|b| &b[lo..hi]),
            source: c.source,
            seq0: c.seq0 + lo as u64,
        };
        store.update(slots, &inputs, order);
    }

    fn close_below(&self, w: &mut AggWorker, frontier: i64, out: &mut dyn FnMut(i64, AggPart)) {
        while let Some(entry) = w.panes.first_entry() {
            if *entry.key() >= frontier {
                break;
            }
            let (pane, acc) = entry.remove_entry();
            let (mut keys, mut store) = acc.own.unwrap_or_else(|| {
                let n = acc.shared.entries.len();
                (
                    KeySlots::default(),
                    SlotStore::with_capacity(&self.metas, n),
                )
            });
            if !acc.shared.entries.is_empty() {
                keys.merge(
                    &mut store,
                    &w.shared,
                    &acc.shared.entries,
                    &mut w.slots_pairs,
                );
                for &(_, slot) in &acc.shared.entries {
                    w.shared.release(slot);
                }
            }
            let part = AggPart {
                entries: keys.entries,
                store,
            };
            out(pane, part);
        }
    }

    fn new_window(&self) -> AggWindow {
        AggWindow::new(&self.metas)
    }

    fn merge(&self, window: &mut AggWindow, part: &AggPart) {
        window.merge_slots(&part.store, &part.entries);
    }

    fn done(&self, window: AggWindow) -> FinishedWindow {
        window.finish()
    }
}

/// Window states combine like partitions (exactly, in any order), so the farm can build long windows from
/// shared suffixes and prefixes of their panes.
impl SlidingQuery for AggQuery {
    fn combine(&self, into: &mut AggWindow, from: &AggWindow) {
        into.combine(from);
    }
}
