//! ScaleGate, as in Gulisano, Nikolakopoulos, Papatriantafilou, Tsigas, *ScaleJoin: a Deterministic,
//! Disjoint-Parallel and Skew-Resilient Stream Join* (Algorithm 2): a lock-free multi-level list that merges
//! any number of key-sorted sources into one key-sorted stream of *ready* items, which every reader receives (a
//! broadcast, not a work queue).
//!
//! An item is ready once its source has published a later one: no source can then deliver a smaller key,
//! because each source's keys are non-decreasing and every open source's latest item is still in the list,
//! ahead of every reader. This is what makes a parallel consumer deterministic without a sequential merge
//! thread (`docs/architecture.md`, "Contracts": determinism).
//!
//! The list itself (nodes, reference counts, the release cascade, anchors, searches and links) is the one
//! W-Hive uses too: `crate::sync::rc_skiplist`, whose docs give the reclamation argument. This module keeps
//! what a node carries, the block allocator, and the readiness rule.
//!
//! Departures from the paper:
//! * **Handles, not ids.** [`ScaleGate::new`] returns one [`Source`] per source and one [`Reader`] per reader;
//!   each owns its thread-local state (`update[]`, `head`), so two threads can never share an id.
//! * **Dummies**: each source starts with a dummy node of key `Min` as its `written` entry, so readers wait
//!   for *every* source to publish once, instead of needing a start-up barrier.
//! * **Markers** ([`Source::advance`]): a source can promise "nothing below this key" without an item, which
//!   releases its latest item (a watermark, or progress marker). Readers skip them.
//! * **End of stream** ([`Source::close`]): an `Eos` node of key `Max` and a null `written` entry, so the
//!   source's last item becomes ready. A reader that reaches an `Eos` node has seen everything (every open
//!   source keeps a node with a smaller key in the list ahead of all readers).
//! * **Reclamation**: the paper lets a garbage collector free the prefix that no thread's local view reaches,
//!   and points to lock-free reference counting for unmanaged languages; here intrusive reference counts
//!   (`crate::sync::rc_skiplist`). A node is counted once per link pointing at it, once per reader whose
//!   anchor it is and once per source whose anchor (`update[top]`) it is.

use std::mem::MaybeUninit;
use std::ptr;

use crossbeam_utils::CachePadded;

use crate::sync::rc_skiplist::{self, Heights};
use crate::sync::{Arc, AtomicPtr, AtomicUsize, Ordering};

pub use crate::sync::rc_skiplist::MAX_LEVELS;

/// A reader moves its reference-counted anchor only every `ANCHOR_STRIDE` nodes (or when it has to wait):
/// two atomic read-modify-writes per node and reader would make readers fight over every node's count.
/// Up to this many nodes per reader stay allocated longer.
const ANCHOR_STRIDE: usize = 64;

/// A key with the sentinels below and above every item key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Bound<K> {
    Min,
    Item(K),
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Head,
    Dummy,
    Item,
    Marker,
    Eos,
}

/// What a ScaleGate node carries beside its key.
struct Entry<K, T> {
    /// `Some` exactly for `Kind::Item`; written before the node is linked and never changed after.
    value: Option<T>,
    kind: Kind,
    source: u32,
    /// The block the node lives in.
    block: *mut Block<K, T>,
}

type Node<K, T> = rc_skiplist::Node<Bound<K>, Entry<K, T>>;

/// Nodes are carved out of blocks of `BLOCK_NODES`, one block per source at a time: a malloc and a free per
/// node made the writers and the freeing readers queue on the allocator's lock.
const BLOCK_NODES: usize = 256;

struct Block<K, T> {
    /// Nodes of this block not yet freed, plus one while its source may still carve nodes from it.
    live: AtomicUsize,
    slots: Box<[MaybeUninit<Node<K, T>>]>,
}

/// A source's (or the constructor's) current block.
struct Arena<K, T> {
    block: *mut Block<K, T>,
    next: usize,
}

impl<K, T> Arena<K, T> {
    fn new() -> Self {
        Arena {
            block: ptr::null_mut(),
            next: BLOCK_NODES,
        }
    }

    /// A node made by `make` (given the block it will live in), in this arena's next slot.
    fn alloc(&mut self, make: impl FnOnce(*mut Block<K, T>) -> Node<K, T>) -> *mut Node<K, T> {
        if self.next == BLOCK_NODES {
            self.retire();
            let block = Block {
                // Every node counted up front (no per-node increment), plus the arena's hold.
                live: AtomicUsize::new(BLOCK_NODES + 1),
                slots: (0..BLOCK_NODES).map(|_| MaybeUninit::uninit()).collect(),
            };
            self.block = Box::into_raw(Box::new(block));
            self.next = 0;
        }
        // SAFETY: `block` is ours (the arena's hold keeps it) and slot `next` was never handed out.
        unsafe {
            let slot = (*self.block).slots[self.next].as_mut_ptr();
            self.next += 1;
            slot.write(make(self.block));
            slot
        }
    }

    /// Gives up the current block: its never-used slots and the arena's hold.
    fn retire(&mut self) {
        if !self.block.is_null() {
            let unused = BLOCK_NODES - self.next;
            // SAFETY: the arena holds `1 + unused` counts of its block.
            unsafe { block_release(self.block, unused + 1) };
            self.block = ptr::null_mut();
            self.next = BLOCK_NODES;
        }
    }
}

impl<K, T> Drop for Arena<K, T> {
    fn drop(&mut self) {
        self.retire();
    }
}

/// Drops `n` counts of a block; frees it (its slots hold no live node any more) at zero.
///
/// # Safety
/// The caller owns `n` counts of `block`.
unsafe fn block_release<K, T>(block: *mut Block<K, T>, n: usize) {
    // SAFETY: we own `n` counts, so the block is alive until the decrement; at zero nobody else refers to it,
    // and every node in it was dropped in place (slots are `MaybeUninit`, so dropping the block drops none).
    unsafe {
        if (*block).live.fetch_sub(n, Ordering::AcqRel) == n {
            drop(Box::from_raw(block));
        }
    }
}

/// Frees a node whose count reached zero: drops it in place and gives its slot back to its block.
///
/// # Safety
/// Nobody can reach `node` any more; `Arena::alloc` wrote it, and it is freed once.
unsafe fn free<K, T>(node: *mut Node<K, T>) {
    // SAFETY: the caller's contract. The block outlives the node: the node is one of the block's counts,
    // dropped after it.
    unsafe {
        let block = (*node).data.block;
        ptr::drop_in_place(node);
        block_release(block, 1);
    }
}

/// Drops one count of `node`, freeing what reaches zero ([`rc_skiplist::release`]).
///
/// # Safety
/// The caller owns one count of `node` (an anchor).
unsafe fn release<K, T>(node: *mut Node<K, T>) {
    // SAFETY: the caller owns the count; `release` calls `free` once per node that nobody can reach any more.
    unsafe { rc_skiplist::release(node, |n| free(n)) }
}

/// Moves a counted anchor right to `new` ([`rc_skiplist::move_anchor`]).
///
/// # Safety
/// `*anchor` is the caller's count; `new` is at or right of it.
unsafe fn move_anchor<K, T>(anchor: &mut *mut Node<K, T>, new: *mut Node<K, T>) {
    // SAFETY: the caller's contract; nodes freed on the way are freed as in `release`.
    unsafe { rc_skiplist::move_anchor(anchor, new, |n| free(n)) }
}

type Link<K, T> = AtomicPtr<Node<K, T>>;

/// A gate's writer and reader handles.
pub type Handles<K, T> = (Vec<Source<K, T>>, Vec<Reader<K, T>>);

struct Inner<K, T> {
    levels: usize,
    /// `written[j]`: source `j`'s latest node (its dummy at first, null once closed). Only source `j` writes
    /// it (Release); readers compare it with a node they reached (Acquire). A node it points at stays alive:
    /// no reader passes it (it is not ready), and the source's anchor is to its left.
    written: Box<[CachePadded<Link<K, T>>]>,
}

// SAFETY: `Inner` only holds raw pointers into the list, whose nodes are shared through atomics; items (`T`)
// are moved in by one source thread and read (`&T`) by readers on other threads, hence `T: Send + Sync`.
unsafe impl<K: Send + Sync, T: Send + Sync> Send for Inner<K, T> {}
// SAFETY: as above; every shared mutation goes through atomics.
unsafe impl<K: Send + Sync, T: Send + Sync> Sync for Inner<K, T> {}

/// The gate itself only builds handles; all state lives behind them.
pub struct ScaleGate;

impl ScaleGate {
    /// A gate with `sources` writers and `readers` readers, and `levels` list levels (1..=[`MAX_LEVELS`];
    /// loom models use 1-2).
    ///
    /// ```
    /// use windgate_core::order::scale_gate::{NextItem, ScaleGate};
    /// let (mut sources, mut readers) = ScaleGate::new::<i64, &str>(2, 1, 4);
    /// let (mut b, mut a) = (sources.pop().unwrap(), sources.pop().unwrap());
    /// a.add(1, "a1");
    /// b.add(2, "b2");
    /// a.add(3, "a3");
    /// let r = &mut readers[0];
    /// assert!(matches!(r.next_ready(), NextItem::Item(1, &"a1"))); // ready: both sources are past it
    /// assert!(matches!(r.next_ready(), NextItem::Pending)); // b2 is b's latest: b might still send another 2
    /// b.close();
    /// assert!(matches!(r.next_ready(), NextItem::Item(2, &"b2")));
    /// assert!(matches!(r.next_ready(), NextItem::Pending)); // a3 is a's latest
    /// a.close();
    /// assert!(matches!(r.next_ready(), NextItem::Item(3, &"a3")));
    /// assert!(matches!(r.next_ready(), NextItem::End));
    /// ```
    #[allow(clippy::new_ret_no_self)]
    pub fn new<K: Ord + Copy, T>(sources: usize, readers: usize, levels: usize) -> Handles<K, T> {
        rc_skiplist::check_levels(levels);
        let mut arena = Arena::new();
        // One count per handle: every handle's anchor starts at the head. With no handle at all, one count
        // that is dropped below.
        let head = arena.alloc(|block| {
            let entry = Entry {
                value: None,
                kind: Kind::Head,
                source: u32::MAX,
                block,
            };
            Node::head(Bound::Min, entry, (sources + readers).max(1))
        });
        // One dummy per source, linked at level 0 right after the head, in source order.
        let mut written = Vec::with_capacity(sources);
        let mut prev = head;
        for j in 0..sources {
            let dummy = arena.alloc(|block| {
                let entry = Entry {
                    value: None,
                    kind: Kind::Dummy,
                    source: j as u32,
                    block,
                };
                Node::new(Bound::Min, entry, 1)
            });
            // SAFETY: nodes are not shared yet; `prev` is the head or the previous dummy.
            unsafe { (*prev).set_next_unshared(0, dummy) };
            written.push(CachePadded::new(AtomicPtr::new(dummy)));
            prev = dummy;
        }
        if sources + readers == 0 {
            // SAFETY: nobody else knows the list; the one count set above is ours.
            unsafe { release(head) };
        }
        let inner = Arc::new(Inner {
            levels,
            written: written.into_boxed_slice(),
        });
        let srcs = (0..sources)
            .map(|j| Source {
                inner: inner.clone(),
                id: j as u32,
                update: [head; MAX_LEVELS],
                anchor: head,
                arena: Arena::new(),
                heights: Heights::seeded(j),
                last: None,
                closed: false,
            })
            .collect();
        let rdrs = (0..readers)
            .map(|_| Reader {
                inner: inner.clone(),
                anchor: head,
                cur: head,
                since_anchor: 0,
            })
            .collect();
        (srcs, rdrs)
    }
}

/// One source's writer handle: adds its items in non-decreasing key order.
pub struct Source<K: Ord + Copy, T> {
    inner: Arc<Inner<K, T>>,
    id: u32,
    /// Per-level predecessors found by the last insertion, all at or right of `anchor`.
    update: [*mut Node<K, T>; MAX_LEVELS],
    /// The counted node this source's searches start from: `update[levels - 1]` after each insertion.
    anchor: *mut Node<K, T>,
    arena: Arena<K, T>,
    heights: Heights,
    last: Option<K>,
    closed: bool,
}

// SAFETY: a `Source` is used by one thread at a time (`&mut self`); its raw pointers point at nodes kept
// alive by its counted anchor. Sending it moves that ownership.
unsafe impl<K: Ord + Copy + Send + Sync, T: Send + Sync> Send for Source<K, T> {}
// SAFETY: every method that touches the list takes `&mut self`; through `&Source` only `is_closed` (a plain
// bool) is reachable, so sharing references across threads cannot race.
unsafe impl<K: Ord + Copy + Send + Sync, T: Send + Sync> Sync for Source<K, T> {}

impl<K: Ord + Copy, T> Source<K, T> {
    /// Adds an item. Keys must not decrease within a source (checked: a decrease would break readiness).
    pub fn add(&mut self, key: K, value: T) {
        self.insert(Bound::Item(key), Some(value), Kind::Item);
    }

    /// A promise that this source's future keys are `>= key`: releases its latest item without adding one.
    /// Does nothing unless `key` is above the last key added.
    pub fn advance(&mut self, key: K) {
        if self.last.is_some_and(|l| key <= l) {
            return;
        }
        self.insert(Bound::Item(key), None, Kind::Marker);
    }

    /// End of stream: the latest item becomes ready; readers see [`NextItem::End`] once every source closed.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.insert(Bound::Max, None, Kind::Eos);
        self.closed = true;
        // The Eos node itself becomes passable: a null entry equals no node.
        self.inner.written[self.id as usize].store(ptr::null_mut(), Ordering::Release);
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Algorithm 2 of the paper, lines 46-59: search from this source's previous position, link the node
    /// bottom-up, publish it.
    fn insert(&mut self, key: Bound<K>, value: Option<T>, kind: Kind) {
        assert!(!self.closed, "ScaleGate: add after close");
        if let Bound::Item(k) = key {
            assert!(
                self.last.is_none_or(|l| k >= l),
                "ScaleGate: a source's keys must not decrease"
            );
            self.last = Some(k);
        }
        let levels = self.inner.levels;
        // Only items get a random height (line 47); markers and the end are never searched for.
        let height = if kind == Kind::Item {
            self.heights.next(levels)
        } else {
            1
        };
        let source = self.id;
        let node = self.arena.alloc(|block| {
            let entry = Entry {
                value,
                kind,
                source,
                block,
            };
            Node::new(key, entry, height)
        });
        // SAFETY: the anchor is counted, so it and every node right of it are alive; its key is below `key`
        // (it is the head, a dummy or an earlier node of this source, and keys do not decrease). `node` is
        // ours: its `height` counts are the links made here, readers see it at its level-0 CAS, and it is
        // linked on each level by this source only. Every `update[i]` is at or right of the anchor.
        unsafe {
            rc_skiplist::search(self.anchor, levels, &(*node).key, &mut self.update);
            for i in 0..height {
                // After any equal keys already linked (lines 61-67): ties leave in insertion order.
                self.update[i] = rc_skiplist::link(self.update[i], i, node);
            }
            // `update[levels - 1]` is right of the old anchor, hence alive.
            move_anchor(&mut self.anchor, self.update[levels - 1]);
        }
        // Line 59: publish; the previous node of this source becomes ready. `node` stays alive: it is not
        // ready, so no reader passes it, and its level-0 predecessor is right of our anchor.
        self.inner.written[self.id as usize].store(node, Ordering::Release);
    }
}

impl<K: Ord + Copy, T> Drop for Source<K, T> {
    fn drop(&mut self) {
        // A dropped source is a closed one: otherwise readers would wait for it forever.
        self.close();
        // SAFETY: the anchor is this handle's count.
        unsafe { release(self.anchor) };
    }
}

/// What [`Reader::next_ready`] found.
#[derive(Debug)]
pub enum NextItem<'a, K, T> {
    /// The next ready item, in key order.
    Item(K, &'a T),
    /// Nothing ready yet: some source has not published past the next item. Retry later.
    Pending,
    /// Every source closed and every item was read.
    End,
}

/// One reader's handle: receives every ready item once, in key order (wait-free).
pub struct Reader<K: Ord + Copy, T> {
    inner: Arc<Inner<K, T>>,
    /// The counted node: everything right of it is alive.
    anchor: *mut Node<K, T>,
    /// The last node consumed (the paper's `head`); at or right of `anchor`.
    cur: *mut Node<K, T>,
    since_anchor: usize,
}

// SAFETY: a `Reader` is used by one thread at a time (`&mut self`); its pointers are kept alive by its anchor.
unsafe impl<K: Ord + Copy + Send + Sync, T: Send + Sync> Send for Reader<K, T> {}
// SAFETY: `next` takes `&mut self`; a shared `&Reader` exposes nothing.
unsafe impl<K: Ord + Copy + Send + Sync, T: Send + Sync> Sync for Reader<K, T> {}

impl<K: Ord + Copy, T> Reader<K, T> {
    /// The next ready item (Algorithm 2 of the paper, lines 38-44), skipping dummies and markers.
    pub fn next_ready(&mut self) -> NextItem<'_, K, T> {
        loop {
            // SAFETY: `cur` is at or right of the anchor, so alive, and so is its successor.
            let next = unsafe { (*self.cur).next(0) };
            if next.is_null() {
                self.settle();
                return NextItem::Pending;
            }
            // SAFETY: `next` is alive (above). Its fields were written before the CAS that linked it, which
            // the Acquire load above synchronises with.
            let node = unsafe { &*next };
            // Line 41: a source's latest node is not ready.
            let written = self.inner.written[node.data.source as usize].load(Ordering::Acquire);
            if node.data.kind == Kind::Eos {
                return NextItem::End;
            }
            if written == next {
                self.settle();
                return NextItem::Pending;
            }
            self.cur = next;
            self.since_anchor += 1;
            if self.since_anchor >= ANCHOR_STRIDE {
                self.settle();
            }
            if let (Kind::Item, Bound::Item(k), Some(v)) =
                (node.data.kind, node.key, &node.data.value)
            {
                return NextItem::Item(k, v);
            }
        }
    }

    /// A lower bound of every item key this reader has not returned yet: the key of the node it waits at
    /// (after [`NextItem::Pending`]). Every open source's latest node lies at or after that node, and a source's
    /// later keys are at least its latest, so nothing smaller can still come. `None` while some source has not
    /// published (its dummy blocks) or at the end.
    pub fn pending_key(&self) -> Option<K> {
        // SAFETY: `cur` is at or right of the anchor, so alive, and so is its successor.
        let next = unsafe { (*self.cur).next(0) };
        if next.is_null() {
            return None;
        }
        // SAFETY: as in `next_ready`: alive, fields published by the linking CAS.
        match unsafe { (*next).key } {
            Bound::Item(k) => Some(k),
            Bound::Min | Bound::Max => None,
        }
    }

    /// Moves the counted anchor up to `cur`, freeing what only this reader still held.
    fn settle(&mut self) {
        // SAFETY: the anchor is this handle's count and `cur` is at or right of it.
        unsafe { move_anchor(&mut self.anchor, self.cur) };
        self.since_anchor = 0;
    }
}

impl<K: Ord + Copy, T> Drop for Reader<K, T> {
    fn drop(&mut self) {
        // SAFETY: the anchor is this handle's count; a dropped reader must not pin memory.
        unsafe { release(self.anchor) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn drain<K: Ord + Copy, T: Clone>(r: &mut Reader<K, T>) -> (Vec<(K, T)>, bool) {
        let mut out = vec![];
        loop {
            match r.next_ready() {
                NextItem::Item(k, v) => out.push((k, v.clone())),
                NextItem::Pending => return (out, false),
                NextItem::End => return (out, true),
            }
        }
    }

    #[test]
    fn a_silent_source_blocks_everything() {
        let (mut s, mut r) = ScaleGate::new::<i64, i64>(2, 1, 4);
        for k in 0..10 {
            s[0].add(k, k);
        }
        assert_eq!(drain(&mut r[0]), (vec![], false));
        s[1].add(5, 50);
        // Exactly the prefix strictly before each source's latest item: 0..=5 from source 0 (5 ties with
        // source 1's 5 but was inserted first), not 50 (source 1's latest).
        let (got, end) = drain(&mut r[0]);
        assert_eq!(got, (0..=5).map(|k| (k, k)).collect::<Vec<_>>());
        assert!(!end);
        s[1].close();
        let (got, _) = drain(&mut r[0]);
        assert_eq!(got.first(), Some(&(5, 50)));
        assert_eq!(got.last(), Some(&(8, 8)));
        s[0].close();
        assert_eq!(drain(&mut r[0]), (vec![(9, 9)], true));
    }

    #[test]
    fn markers_release_without_items() {
        let (mut s, mut r) = ScaleGate::new::<i64, i64>(2, 2, 2);
        s[0].add(1, 1);
        s[1].add(2, 2);
        s[0].advance(3);
        s[1].advance(3);
        for r in &mut r {
            assert_eq!(drain(r), (vec![(1, 1), (2, 2)], false));
        }
        s[0].advance(2); // not above the last key: ignored
        drop(s);
        for r in &mut r {
            assert_eq!(drain(r), (vec![], true));
        }
    }

    /// Allocations equal frees: every node carries a value that counts its drops.
    #[test]
    fn every_node_is_freed_and_a_slow_reader_pins_only_its_suffix() {
        use std::sync::atomic::AtomicUsize as Counter;
        static LIVE: Counter = Counter::new(0);
        struct Tracked;
        impl Tracked {
            fn new() -> Self {
                LIVE.fetch_add(1, Ordering::Relaxed);
                Tracked
            }
        }
        impl Drop for Tracked {
            fn drop(&mut self) {
                LIVE.fetch_sub(1, Ordering::Relaxed);
            }
        }
        {
            let (mut s, mut r) = ScaleGate::new::<u64, Tracked>(1, 2, 4);
            for k in 0..100_000 {
                s[0].add(k, Tracked::new());
            }
            s[0].close();
            let (fast, slow) = r.split_at_mut(1);
            let mut n = 0;
            while let NextItem::Item(..) = fast[0].next_ready() {
                n += 1;
            }
            assert_eq!(n, 100_000);
            // The slow reader still pins everything.
            assert_eq!(LIVE.load(Ordering::Relaxed), 100_000);
            for _ in 0..50_000 {
                assert!(matches!(slow[0].next_ready(), NextItem::Item(..)));
            }
            let live = LIVE.load(Ordering::Relaxed);
            assert!((50_000..=50_000 + ANCHOR_STRIDE).contains(&live), "{live}");
            drop(r);
            // Dropping the readers and the source's anchor frees the rest, iteratively (no stack overflow).
        }
        assert_eq!(LIVE.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_long_unread_list_drops_without_overflowing_the_stack() {
        let (mut s, r) = ScaleGate::new::<u64, u64>(1, 1, 1);
        for k in 0..1_000_000 {
            s[0].add(k, k);
        }
        drop((s, r));
    }
}
