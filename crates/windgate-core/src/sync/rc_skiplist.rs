//! The reference-counted lock-free skip list under ScaleGate ([`crate::order::scale_gate`]) and W-Hive
//! (`aggregate::w_hive`, above this module's layer): nodes, their counts, the release cascade, anchors, searches and links.
//!
//! ScaleGate comes from Gulisano, Nikolakopoulos, Papatriantafilou, Tsigas, *ScaleJoin: a Deterministic,
//! Disjoint-Parallel and Skew-Resilient Stream Join* (Algorithm 2); W-Hive from Cederman, Gulisano,
//! Nikolakopoulos, Papatriantafilou, Tsigas, *Efficient data streaming multiway aggregation through concurrent
//! algorithmic designs and new abstract data types* (Algorithm 5), which inserts its winsets "in the same
//! manner" as its T-Gate, ScaleGate's twin. Both keep one sorted multi-level list whose nodes are **never
//! unlinked**, and every thread searches from its own position instead of a shared head. That is what makes
//! reclamation simple enough for intrusive reference counts, without epochs or hazard pointers:
//!
//! * **Counts.** A node is counted once per link pointing at it and once per *anchor*: a handle's counted
//!   position (a ScaleGate source's or reader's, a W-Hive updater's finger or its output's cursor). A new
//!   node starts with `height` counts, the links it is about to get, owned by its creator until it links
//!   them ([`Node::new`]); a head starts with one count per handle ([`Node::head`]).
//! * **Liveness.** Every node right of a counted node is reachable from it through counted links, so it is
//!   alive: a handle walks right from its anchor with plain Acquire loads, with no hazard pointers.
//! * **Anchors only move right** ([`move_anchor`]): the new node is counted (Relaxed, as an `Arc` clone: the
//!   old anchor's count keeps it alive) before the old anchor's count is dropped.
//! * **Release cascade** ([`release`]): the decrement that drops a count to zero frees the node, which drops
//!   the counts of its links; iteratively, so that freeing a list of a million nodes cannot overflow the
//!   stack. The decrements are AcqRel, so every use of a node happens before its free, as with `Arc`.
//! * **Links** ([`link`], [`try_link`]): a node's own link is stored Relaxed before the CAS (AcqRel) that
//!   publishes it, and the CAS's Release makes the node's fields visible to every thread that reaches it by
//!   an Acquire load of a link. The link `prev -> next` becomes `node -> next` (its count moves with it) and
//!   `prev -> node` is one of `node`'s own counts. A CAS fails only when another thread's CAS on the same
//!   link succeeded, so linking is lock-free.
//!
//! What stays in each structure: what a node carries beside its key, how nodes are allocated and freed
//! (ScaleGate carves them out of per-source blocks, W-Hive boxes each winset: the `free` argument of
//! [`release`]), W-Hive's insert-if-absent on level 0, and each structure's own readiness rule with the
//! happens-before argument that goes with it (ScaleGate's `written` entries, W-Hive's progress watermark).
//! The functions are generic, so each structure still gets its own monomorphic code: the searches and links
//! inline into its insertion, the release cascade stays out of line, as when each carried its own copy (one
//! thread driving both structures ran 2% fewer instructions than with the two copies, under cachegrind).

use std::ptr;

use smallvec::SmallVec;

use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

/// The most levels of a list. Searches start from the searcher's own previous position, so few levels
/// suffice.
pub const MAX_LEVELS: usize = 4;

/// Panics unless `levels` is a valid level count (`1..=MAX_LEVELS`).
pub(crate) fn check_levels(levels: usize) {
    assert!(
        (1..=MAX_LEVELS).contains(&levels),
        "levels must be 1..={MAX_LEVELS}"
    );
}

/// One node of a list: a key, the structure's `data`, and the reference-counted links (module docs).
pub(crate) struct Node<K, V> {
    /// The search key. A head's key sorts below every other node's; searches only compare successors, so it
    /// is never read.
    pub(crate) key: K,
    /// What the structure keeps beside the key: written before the node is linked, so a thread that reached
    /// the node through an Acquire load of a link sees it.
    pub(crate) data: V,
    /// Levels this node is (or will be) linked on; `MAX_LEVELS` for a head.
    height: usize,
    /// Links + anchors pointing at this node (module docs).
    refs: AtomicUsize,
    /// `next[i]` for `i < height`; null is the end of the list.
    next: [AtomicPtr<Node<K, V>>; MAX_LEVELS],
}

impl<K, V> Node<K, V> {
    /// A node to be linked on `height` levels, with the `height` counts of the links it is about to get.
    #[inline]
    pub(crate) fn new(key: K, data: V, height: usize) -> Self {
        Self::with_refs(key, data, height, height)
    }

    /// A head: on every level, with one count per handle that starts there (it has no incoming links). Nothing
    /// else may hold it, or the head would keep the whole list alive: the handles' anchors free it.
    pub(crate) fn head(key: K, data: V, handles: usize) -> Self {
        Self::with_refs(key, data, MAX_LEVELS, handles)
    }

    #[inline]
    fn with_refs(key: K, data: V, height: usize, refs: usize) -> Self {
        Node {
            key,
            data,
            height,
            refs: AtomicUsize::new(refs),
            next: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    pub(crate) fn height(&self) -> usize {
        self.height
    }

    /// The successor on `level` (null at the end). Acquire: synchronises with the CAS that linked it, so its
    /// fields are initialised.
    #[inline]
    pub(crate) fn next(&self, level: usize) -> *mut Node<K, V> {
        self.next[level].load(Ordering::Acquire)
    }

    /// Sets a link while the list is not shared yet (a constructor chaining its first nodes). Relaxed: handing
    /// the handles to other threads publishes it. The link is one of `next`'s counts, which its creator set.
    pub(crate) fn set_next_unshared(&self, level: usize, next: *mut Node<K, V>) {
        self.next[level].store(next, Ordering::Relaxed);
    }
}

/// Drops one count of `node`; frees it at zero, which drops the counts its links hold, iteratively (a long
/// list must not overflow the stack).
///
/// # Safety
/// The caller owns one count of `node` (an anchor, or a link of a node being freed). `free(n)` must drop and
/// deallocate `n` as it was allocated; it is called once for each node whose count reaches zero, after its
/// links were read.
///
/// Not `#[inline]`: the cascade stays out of line, as each structure's own copy was, so that the anchor moves
/// that call it ([`move_anchor`]) stay small enough to inline.
pub(crate) unsafe fn release<K, V>(node: *mut Node<K, V>, mut free: impl FnMut(*mut Node<K, V>)) {
    let mut work: SmallVec<[*mut Node<K, V>; 8]> = SmallVec::new();
    work.push(node);
    while let Some(n) = work.pop() {
        // SAFETY: we own one count of `n`, so it is alive until the decrement. AcqRel: our earlier uses of `n`
        // (Release) happen before whoever frees it, and the freer (Acquire) sees everyone's.
        let last = unsafe { (*n).refs.fetch_sub(1, Ordering::AcqRel) } == 1;
        if !last {
            continue;
        }
        // SAFETY: the count reached zero: no link or anchor refers to `n` any more, and nobody can reach it
        // (every path to it went through a counted link or anchor). Every use of it happened before this
        // point through the AcqRel count chain. Its links are read before `free`, which frees it exactly once:
        // we are the one thread that saw the count reach zero.
        unsafe {
            let node = &*n;
            for link in &node.next[..node.height] {
                let next = link.load(Ordering::Acquire);
                if !next.is_null() {
                    work.push(next);
                }
            }
            free(n);
        }
    }
}

/// Moves a handle's counted anchor right to `new` (nothing if it is there already), freeing what only the old
/// anchor still held.
///
/// # Safety
/// `*anchor` is a count the caller owns; `new` is the anchor or right of it (hence alive); `free` is as in
/// [`release`].
#[inline(always)]
pub(crate) unsafe fn move_anchor<K, V>(
    anchor: &mut *mut Node<K, V>,
    new: *mut Node<K, V>,
    free: impl FnMut(*mut Node<K, V>),
) {
    if new != *anchor {
        // SAFETY: `new` is alive (right of the counted anchor): count it first (Relaxed, as an `Arc` clone),
        // then drop the old anchor's count, which we own.
        unsafe {
            (*new).refs.fetch_add(1, Ordering::Relaxed);
            release(std::mem::replace(anchor, new), free);
        }
    }
}

/// Finds the predecessors of `key`: from `start`, down from level `levels - 1` to 0, right while the
/// successor's key is below `key`; `update[i]` becomes the last node on level `i` with a smaller key (or
/// `start`). ScaleGate's Algorithm 2, lines 50-56.
///
/// # Safety
/// `start` is the caller's anchor or right of it (so it and every node reached from it are alive), and its
/// key is below `key` (or it is a head).
#[inline]
pub(crate) unsafe fn search<K: Ord, V>(
    start: *mut Node<K, V>,
    levels: usize,
    key: &K,
    update: &mut [*mut Node<K, V>; MAX_LEVELS],
) {
    let mut curr = start;
    for i in (0..levels).rev() {
        // SAFETY: `curr` is `start` or right of it, so alive, and so is every node reached from it (never
        // unlinked, counted links); `next` loads with Acquire, so their keys are initialised.
        unsafe {
            let mut next = (*curr).next(i);
            while !next.is_null() && (*next).key < *key {
                curr = next;
                next = (*curr).next(i);
            }
        }
        update[i] = curr;
    }
}

/// Links `node` on `level` after `from` and after every node linked there since whose key is not above
/// `node`'s (so equal keys keep their insertion order), retrying when a concurrent insertion wins the CAS;
/// returns `node`'s predecessor. ScaleGate's Algorithm 2, lines 61-67.
///
/// # Safety
/// `from` is the caller's anchor or right of it, with a key not above `node`'s (or a head); `node` is
/// initialised, to be linked on `level` (below its height) by this caller only, and holds the count for this
/// link until the CAS hands it over.
#[inline]
pub(crate) unsafe fn link<K: Ord, V>(
    mut from: *mut Node<K, V>,
    level: usize,
    node: *mut Node<K, V>,
) -> *mut Node<K, V> {
    // SAFETY: `from` and every node right of it are alive (right of the caller's anchor); `node` is alive
    // (its creator holds its counts until its links are made).
    unsafe {
        let key = &(*node).key;
        loop {
            let next = (*from).next(level);
            if !next.is_null() && (*next).key <= *key {
                from = next;
            } else if try_link(from, level, next, node) {
                return from;
            }
        }
    }
}

/// One attempt to link `node` between `prev` and `next` on `level`; false if another thread changed `prev`'s
/// link meanwhile (the caller looks again).
///
/// # Safety
/// `prev` is alive; `node` is initialised and the caller's to link on `level` (module docs: the link moves
/// `prev -> next`'s count to `node -> next`, and `prev -> node` uses one of `node`'s counts).
#[inline]
pub(crate) unsafe fn try_link<K, V>(
    prev: *mut Node<K, V>,
    level: usize,
    next: *mut Node<K, V>,
    node: *mut Node<K, V>,
) -> bool {
    // SAFETY: as the contract says. Relaxed: the CAS below (Release) publishes `node`'s link with the rest of
    // its fields; the CAS's Acquire side makes a winner see the fields of the `next` it links to.
    unsafe {
        (*node).next[level].store(next, Ordering::Relaxed);
        (*prev).next[level]
            .compare_exchange(next, node, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// Random node heights in `1..=levels`, geometric with p = 1/2 (xorshift64*). Seeded per handle, so the
/// heights of a run, and so the loom models' interleavings, are reproducible.
pub(crate) struct Heights(u64);

impl Heights {
    /// The generator of handle `handle` (a source or updater index).
    pub(crate) fn seeded(handle: usize) -> Self {
        Heights(0x9E37_79B9_7F4A_7C15 ^ (handle as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    #[inline]
    pub(crate) fn next(&mut self, levels: usize) -> usize {
        let rng = &mut self.0;
        *rng ^= *rng >> 12;
        *rng ^= *rng << 25;
        *rng ^= *rng >> 27;
        let bits = rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (1 + bits.trailing_ones() as usize).min(levels)
    }
}
