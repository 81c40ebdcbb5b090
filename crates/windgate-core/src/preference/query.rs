//! The preference kernels as the farm's query (the G/H decomposition of Mencagli et al., *Parallel Continuous
//! Preference Queries over Out-of-Order and Bursty Data Streams*): G keeps one kernel per (pane partition,
//! group) and H merges a window's partitions kernel by kernel. Every kernel merges exactly and
//! order-independently, so a pane split over workers or partitions merged in any order give the answer of one
//! kernel over the window's rows.

use std::collections::BTreeMap;
use std::ops::Range;

use arrow_buffer::ScalarBuffer;
use hashbrown::HashMap;

use super::options::QueryKind;
use super::{
    PackedOrderKey, Prefer, Skyline, TopDominant, TopK, order_key, skyline_reference,
    top_dominant_reference, topk_reference,
};
use crate::runtime::farm::{FarmQuery, Routed};

/// One group's partial answer: a skyline, a top-δ dominant store or a partial top-k.
#[derive(Debug, Clone)]
pub enum Kernel {
    Skyline(Skyline),
    TopDominant(TopDominant),
    TopK(TopK),
}

/// One selected row: its order key and, for top-δ dominant, its κ.
pub type Pick = (PackedOrderKey, Option<u32>);

impl Kernel {
    /// G: adds row `row` of `cols` (the value columns) with order key `key`.
    #[inline]
    pub fn insert(&mut self, cols: &[Vec<f64>], row: usize, key: PackedOrderKey) {
        match self {
            Kernel::Skyline(s) => s.insert_row(cols, row, key),
            Kernel::TopDominant(t) => t.insert_row(cols, row, key),
            Kernel::TopK(t) => t.insert(cols[0][row], key),
        }
    }

    /// H: folds another partial answer of the same query into this one.
    pub fn merge(&mut self, other: &Kernel) {
        match (self, other) {
            (Kernel::Skyline(a), Kernel::Skyline(b)) => a.merge(b),
            (Kernel::TopDominant(a), Kernel::TopDominant(b)) => a.merge(b),
            (Kernel::TopK(a), Kernel::TopK(b)) => a.merge(b),
            _ => unreachable!("kernels of one query are of one kind"),
        }
    }

    /// The answer in output order: skyline and top-δ rows by the total order, top-k best first.
    pub fn answer(&self, spec: &KernelSpec) -> Vec<Pick> {
        match self {
            Kernel::Skyline(s) => s.members().into_iter().map(|o| (o, None)).collect(),
            Kernel::TopDominant(t) => t
                .select(spec.delta)
                .into_iter()
                .map(|(o, k)| (o, Some(k)))
                .collect(),
            Kernel::TopK(t) => t.ranked().into_iter().map(|(o, _)| (o, None)).collect(),
        }
    }
}

/// What an empty kernel of the query looks like.
#[derive(Debug, Clone)]
pub struct KernelSpec {
    kind: Kind,
    prefer: Vec<Prefer>,
    /// δ (top-δ dominant) or k (top-k).
    delta: usize,
    descending: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Skyline,
    TopDominant,
    TopK,
}

impl KernelSpec {
    pub fn new(q: &QueryKind) -> Self {
        match q {
            QueryKind::Skyline { prefer, .. } => Self {
                kind: Kind::Skyline,
                prefer: prefer.clone(),
                delta: 0,
                descending: false,
            },
            QueryKind::TopDominant { prefer, delta, .. } => Self {
                kind: Kind::TopDominant,
                prefer: prefer.clone(),
                delta: *delta,
                descending: false,
            },
            QueryKind::TopK { k, descending, .. } => Self {
                kind: Kind::TopK,
                prefer: vec![],
                delta: *k,
                descending: *descending,
            },
        }
    }

    pub fn empty(&self) -> Kernel {
        match self.kind {
            Kind::Skyline => Kernel::Skyline(Skyline::new(self.prefer.clone())),
            Kind::TopDominant => Kernel::TopDominant(TopDominant::new(self.prefer.clone())),
            Kind::TopK => Kernel::TopK(TopK::new(self.delta, self.descending)),
        }
    }

    /// The kernel over rows `rows` of `cols`.
    pub fn build(
        &self,
        cols: &[Vec<f64>],
        rows: impl IntoIterator<Item = (usize, PackedOrderKey)>,
    ) -> Kernel {
        let mut k = self.empty();
        for (row, key) in rows {
            k.insert(cols, row, key);
        }
        k
    }

    /// The answer by the definition over every pair of `cols`' rows (row i has order key `keys[i]`), in
    /// output order: the reference engine.
    pub fn reference(&self, cols: &[Vec<f64>], keys: &[PackedOrderKey]) -> Vec<Pick> {
        match self.kind {
            Kind::Skyline => skyline_reference(&self.prefer, cols, keys)
                .into_iter()
                .map(|o| (o, None))
                .collect(),
            Kind::TopDominant => top_dominant_reference(&self.prefer, cols, keys, self.delta)
                .into_iter()
                .map(|(o, k)| (o, Some(k)))
                .collect(),
            Kind::TopK => topk_reference(self.delta, self.descending, &cols[0], keys)
                .into_iter()
                .map(|(o, _)| (o, None))
                .collect(),
        }
    }
}

/// Admitted rows of one slice of input, owned so that they can cross to the workers.
pub struct PrefChunk {
    pub ts: ScalarBuffer<i64>,
    /// Group id of each row.
    pub keys: Vec<u32>,
    /// The value columns (dimensions or score) as `f64`.
    pub cols: Vec<Vec<f64>>,
    /// Arrival position of row 0.
    pub seq0: u64,
}

impl PrefChunk {
    #[inline]
    pub fn order_key(&self, row: usize) -> PackedOrderKey {
        order_key(self.ts[row], self.seq0 + row as u64)
    }
}

/// The farm's query: per (pane partition, group) kernels.
pub struct PrefQuery {
    pub spec: KernelSpec,
}

/// Partial answers per group.
pub type Groups = HashMap<u32, Kernel>;

/// A pane-level query (PLQ) worker's open pane partitions.
#[derive(Default)]
pub struct PrefWorker {
    panes: BTreeMap<i64, Groups>,
}

impl FarmQuery for PrefQuery {
    type Chunk = PrefChunk;
    type Worker = PrefWorker;
    type Part = Groups;
    type Window = Groups;
    type Done = Groups;

    fn new_worker(&self) -> PrefWorker {
        PrefWorker::default()
    }

    fn ingest(&self, w: &mut PrefWorker, chunk: &Routed<PrefChunk>, rows: Range<usize>, me: u8) {
        let c = &chunk.chunk;
        let mine = |i: usize| chunk.owner[i] == me;
        let mut i = rows.start;
        while i < rows.end {
            if !mine(i) {
                i += 1;
                continue;
            }
            // One map lookup per run of this worker's rows in one pane (the common case).
            let pane = chunk.panes[i];
            let groups = w.panes.entry(pane).or_default();
            while i < rows.end && (!mine(i) || chunk.panes[i] == pane) {
                if mine(i) {
                    groups
                        .entry(c.keys[i])
                        .or_insert_with(|| self.spec.empty())
                        .insert(&c.cols, i, c.order_key(i));
                }
                i += 1;
            }
        }
    }

    fn close_below(&self, w: &mut PrefWorker, frontier: i64, out: &mut dyn FnMut(i64, Groups)) {
        while let Some(entry) = w.panes.first_entry() {
            if *entry.key() >= frontier {
                break;
            }
            let (pane, groups) = entry.remove_entry();
            out(pane, groups);
        }
    }

    fn new_window(&self) -> Groups {
        Groups::new()
    }

    fn merge(&self, window: &mut Groups, part: &Groups) {
        for (&key, k) in part {
            match window.get_mut(&key) {
                Some(w) => w.merge(k),
                None => {
                    window.insert(key, k.clone());
                }
            }
        }
    }

    fn done(&self, window: Groups) -> Groups {
        window
    }
}
