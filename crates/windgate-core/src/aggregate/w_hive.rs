//! W-Hive, as in Cederman, Gulisano, Nikolakopoulos, Papatriantafilou, Tsigas, *Efficient data streaming
//! multiway aggregation through concurrent algorithmic designs and new abstract data types* (Algorithm 5): a
//! lock-free list of *winsets* (the state of one window id), which several updater threads fill and one output
//! thread takes, in window order, once no updater can touch a winset any more.
//!
//! Two of the paper's designs use it (`aggregate::baselines::multiway`):
//! * **TuMLMC**: `U` updaters each read every tuple of a T-Gate in the total order; updater `u` updates only
//!   the keys hashed to it ([`Updater::update`]) and advances its progress on *every* tuple it reads
//!   ([`Updater::advance`]: an updater whose keys are rare must not hold the output back), so a (window, key)
//!   is touched by one updater, in the total order.
//! * **WiML**: `N` source threads each update the W-Hive with their own time-sorted tuples; several threads
//!   touch the same window, each in its own slot.
//!
//! # Structure
//!
//! * A sorted list of winset nodes keyed by window id (`i64`) with a skip-list index of 1..=[`MAX_LEVELS`]
//!   levels: the reference-counted list ScaleGate uses too (`crate::sync::rc_skiplist`). A missing window is
//!   inserted by a CAS at level 0 (insert-if-absent: the loser of a race on the same id drops its node and uses
//!   the winner's, as the paper's Algorithm 5, line 85), then linked on the upper levels, bottom-up.
//! * Each node holds **one partial per updater** (`P: Default + Send`, the caller's type, e.g. a per-key
//!   aggregate store; unlike the paper, no key domain is assumed and no lock-free hash map is needed): updater
//!   `u` only ever touches slot `u`, so window state is plain memory, not atomics. The output takes all `U`
//!   partials of a released winset ([`NextWinset::Winset`]) and merges them itself (the caller's states combine
//!   exactly, so the merge order does not matter). A node's `U` partials are made with `P::default()` when the
//!   node is created, so that should not allocate (an empty map does not).
//! * `progress[u]: AtomicI64`, `i64::MIN` at the start (blocks the output), `i64::MAX` once updater `u` closed.
//!   Updater `u` stores its tuple's ts with Release **before** touching any window of that tuple (the paper's
//!   `written` entry, Algorithm 5 line 59, in watermark form). Winset `j`, covering `[start(j), end(j))`, is
//!   **released** iff `end(j) <= W = min_u progress[u]` (Acquire loads). Every updater's timestamps must be
//!   non-decreasing: checked by an `assert!` in every build, because a decrease would let an updater write a
//!   winset the output already took (a data race, so a safe API must not allow it).
//!
//! # Why a released winset is complete and race-free (the happens-before argument)
//!
//! Let the output read `p_u = progress[u]` (Acquire) for every `u`, `W = min_u p_u`, and take winset `j`
//! with `end(j) <= W`.
//! 1. *Every write to slot `u` of `j` happened before the take.* Updater `u` wrote slot `u` of `j` only for
//!    tuples with `ts < end(j) <= p_u`. It stores strictly increasing values, each before touching the
//!    windows of its tuple, so every tuple with `ts < p_u` was fully processed before the Release store of
//!    `p_u` (program order), which the output's Acquire load read: those writes happen before the take.
//! 2. *No write to slot `u` of `j` comes after.* Every later tuple of `u` has `ts >= p_u >= end(j)`, and the
//!    windows of such a tuple all end after `ts`, so `j` is not one of them.
//! 3. *No winset is skipped.* The output loads its cursor's successor **after** computing `W`. The creator `c`
//!    of any node `i` with `end(i) <= W` created it while its progress was some `ts_c < end(i) <= W <= p_c`, so
//!    the creating CAS happened before the Release store of `p_c` that the output acquired, and the output's
//!    later load of the list sees it (coherence). Hence when the output finds the successor `j` released,
//!    every node that will ever exist with an id below `j` is already in the list, before `j`, and was taken
//!    earlier. Nobody creates a node for a released id afterwards (point 2).
//! 4. *End.* `W == i64::MAX` means every updater closed after its last write, so the list the output then
//!    loads is final: a null successor is [`NextWinset::End`].
//!
//! The output may keep `W` from an earlier scan while it finds released winsets: every list load it makes
//! comes after that scan, which is all points 1-3 need. It rescans only when the successor is not released.
//!
//! # Reclamation (departure from the paper's shared `inserthead`, and why no crossbeam-epoch)
//!
//! The paper starts every search at a shared `inserthead` that the output moves, which needs epochs (or a
//! garbage collector) to free anything. Here each updater instead searches from **its own position** (the
//! predecessors of the first window of its last tuple, like ScaleGate's sources): the first window of a tuple
//! never decreases with its ts, so the finger stays valid and each search is short. Nothing is shared to move,
//! so reclamation is the intrusive reference counting of `crate::sync::rc_skiplist` (whose docs give the
//! argument), which runs under loom:
//! * A node is counted once per link pointing at it, once per updater whose anchor (`update[levels - 1]`) it
//!   is, and once if it is the output's cursor. Nodes are **never unlinked**, so every node right of a
//!   counted node is reachable from it through counted links and alive.
//! * The count decrements are AcqRel, so every use of a node (including the output's take of its slots)
//!   happens before its free, as with `Arc`.
//! * Updaters write only nodes right of their own anchor (window ids `>= lo`, the first window of their ts);
//!   the output reads only its cursor's successors. So a node is freed only once the output and every updater
//!   are past it, and never while someone can reach it.
//!
//! crossbeam-epoch was not used: it runs under loom only with its own `crossbeam_loom` cfg and feature (which
//! also switches crossbeam-utils, hence every crossbeam user in the crate), while the refcounts run under
//! plain `--cfg loom` with the rest of the crate and are modelled by `tests/loom_w_hive.rs`.
//!
//! # Memory bound
//!
//! The output moves the partials out when it takes a winset, so only *shells* (a node with `U` default
//! partials) stay until every anchor passed them. Live winsets (created, not yet taken) are those with
//! `end > W` (unreleased) plus those released but not yet taken:
//! `live_winsets <= (max_u ts_u - min_u ts_u) / slide + ceil(size / slide) + 1 + (released, untaken)`,
//! i.e. bounded by the **updaters' progress spread** (an updater that has not started yet, at `i64::MIN`,
//! holds everything back) and the output's lag; the W-Hive never blocks an updater, so the operator bounds
//! both (T-Gate credits, bounded source hand-off: `docs/architecture.md`, "Data path"), and can watch
//! [`Output::live_winsets`]. Shells: each anchor sits on the last top-level node before its updater's first
//! window, `2^(levels - 1)` nodes back on average, plus the output's cursor ([`Output::live_nodes`]). An
//! updater that only [`Updater::advance`]s moves its anchor too (once per window slide), so an idle TuMLMC
//! updater pins nothing. Time gaps create no nodes.
//!
//! # Progress (lock-freedom)
//!
//! Every operation is lock-free: an updater retries only when another thread's CAS on the same link
//! succeeded, and [`Output::next_ready`] never waits ([`NextWinset::Pending`] instead). Waiting for readiness is
//! the caller's business (its back-off).
//!
//! ```
//! use windgate_core::aggregate::w_hive::{NextWinset, WHive};
//! use windgate_core::time::WindowSpec;
//! let spec = WindowSpec::new(10, Some(5), 0).unwrap(); // windows [5j, 5j + 10)
//! let (mut ups, mut out) = WHive::new::<u64>(spec, 2);
//! let (mut b, mut a) = (ups.pop().unwrap(), ups.pop().unwrap());
//! a.update(7, |_, p| *p += 1); // windows 0 [0, 10) and 1 [5, 15)
//! assert!(matches!(out.next_ready(), NextWinset::Pending)); // b has not started: it could still write window 0
//! b.advance(12);
//! a.advance(10); // both past end(0) = 10
//! assert!(matches!(out.next_ready(), NextWinset::Winset(0, ref p) if p == &[1, 0]));
//! assert!(matches!(out.next_ready(), NextWinset::Pending)); // end(1) = 15 > min(10, 12)
//! a.close();
//! b.close();
//! assert!(matches!(out.next_ready(), NextWinset::Winset(1, ref p) if p == &[1, 0]));
//! assert!(matches!(out.next_ready(), NextWinset::End));
//! ```

use std::ptr;
use std::sync::atomic::{AtomicBool as StdAtomicBool, AtomicUsize as StdAtomicUsize};

use crossbeam_utils::CachePadded;

use crate::sync::rc_skiplist::{self, Heights};
use crate::sync::{Arc, AtomicI64, Ordering, UnsafeCell};
use crate::time::WindowSpec;

pub use crate::sync::rc_skiplist::MAX_LEVELS;

// The protocol atomics and cells (`crate::sync`) are loom's under `--cfg loom`, so loom checks every slot
// access for a happens-before edge. Statistics and the poison flag are plain std atomics (Relaxed, no part of
// the protocol), so they add no loom scheduling points.

/// Levels used by [`WHive::new`]. A W-Hive holds few live winsets (`size / slide` plus the updaters'
/// spread), and each updater searches from its own finger, which moves one window per slide, so the index
/// only shortens the rare jump (an updater resuming after a time gap walks the nodes others created
/// meanwhile). More levels cost shells: an anchor sits on the last top-level node before its window,
/// `2^(levels - 1)` nodes back on average (`every_node_is_freed` in `tests/w_hive_edges.rs` measured at most
/// 5, 13, 29 and 44 live nodes for 1-4 levels where 4 winsets were live). Two levels are the compromise.
pub const DEFAULT_LEVELS: usize = 2;

/// What a W-Hive node carries beside its window id (the list's key).
struct Winset<P> {
    /// Slot `u` belongs to updater `u` until the winset is released, then to the output (module docs). Empty
    /// for the head.
    slots: Box<[UnsafeCell<P>]>,
}

type Node<P> = rc_skiplist::Node<i64, Winset<P>>;

/// Frees a node whose count reached zero, or one that lost its insertion race and was never linked.
///
/// # Safety
/// Nobody else can reach `node`; it came from `Box::into_raw` and is freed once.
unsafe fn free<P>(node: *mut Node<P>, live_nodes: &StdAtomicUsize) {
    // SAFETY: the caller's contract. Every use of the node (including the output's take of its slots and the
    // updaters' writes) happened before, through the AcqRel count chain (`rc_skiplist::release`).
    drop(unsafe { Box::from_raw(node) });
    live_nodes.fetch_sub(1, Ordering::Relaxed);
}

/// Drops one count of `node`, freeing what reaches zero ([`rc_skiplist::release`]).
///
/// # Safety
/// The caller owns one count of `node` (an anchor).
unsafe fn release<P>(node: *mut Node<P>, live_nodes: &StdAtomicUsize) {
    // SAFETY: the caller owns the count; `release` calls `free` once per node that nobody can reach any more.
    unsafe { rc_skiplist::release(node, |n| free(n, live_nodes)) }
}

/// Moves a counted anchor right to `new` ([`rc_skiplist::move_anchor`]).
///
/// # Safety
/// `*anchor` is the caller's count; `new` is at or right of it.
unsafe fn move_anchor<P>(
    anchor: &mut *mut Node<P>,
    new: *mut Node<P>,
    live_nodes: &StdAtomicUsize,
) {
    // SAFETY: the caller's contract; nodes freed on the way are freed as in `release`.
    unsafe { rc_skiplist::move_anchor(anchor, new, |n| free(n, live_nodes)) }
}

/// State shared by the handles; the nodes themselves are owned through the counts.
struct Inner {
    spec: WindowSpec,
    levels: usize,
    /// `progress[u]`: updater `u`'s latest ts; `i64::MIN` until its first, `i64::MAX` once closed.
    /// Invariant: only updater `u` stores it, strictly increasing, with Release, and each store comes before
    /// any window write of that tuple and after every window write of all tuples with a smaller ts; the output
    /// loads it with Acquire. So `end(j) <= progress[u]` (as read) implies that all of `u`'s writes to winset
    /// `j` happen before the read, and none comes after (module docs, points 1-2).
    progress: Box<[CachePadded<AtomicI64>]>,
    /// Nodes allocated and not freed, the head included (statistics, Relaxed).
    live_nodes: StdAtomicUsize,
    /// Winsets linked into the list (Relaxed; incremented after the linking CAS).
    created: StdAtomicUsize,
    /// Winsets the output took (Relaxed).
    taken: StdAtomicUsize,
    /// Set by an updater dropped during a panic, before its closing progress store (which publishes it).
    poisoned: StdAtomicBool,
    /// Loom negative control only: progress stores are Relaxed (a bug loom must find).
    #[cfg(loom)]
    relaxed_progress: bool,
}

impl Inner {
    /// The ordering of the progress stores: Release, which the module's argument needs. Loom builds can weaken
    /// it per W-Hive for the negative control of `tests/loom_w_hive.rs` ([`WHive::with_relaxed_progress`]),
    /// which loom must catch as a data race on a slot.
    #[inline(always)]
    fn progress_store(&self) -> Ordering {
        #[cfg(loom)]
        if self.relaxed_progress {
            return Ordering::Relaxed;
        }
        Ordering::Release
    }
}

/// Builds the handles of a W-Hive; all state lives behind them.
pub struct WHive;

/// A W-Hive's updater handles (one per updater, in id order) and its output handle.
pub type Handles<P> = (Vec<Updater<P>>, Output<P>);

impl WHive {
    /// A W-Hive over `spec`'s windows with `updaters` updaters, each owning one partial of every winset, and
    /// [`DEFAULT_LEVELS`] index levels.
    #[allow(clippy::new_ret_no_self)]
    pub fn new<P: Default + Send>(spec: WindowSpec, updaters: usize) -> Handles<P> {
        Self::with_levels(spec, updaters, DEFAULT_LEVELS)
    }

    /// As [`WHive::new`] with `levels` index levels (1..=[`MAX_LEVELS`]; loom models use 1-2).
    pub fn with_levels<P: Default + Send>(
        spec: WindowSpec,
        updaters: usize,
        levels: usize,
    ) -> Handles<P> {
        Self::build(
            spec,
            updaters,
            levels,
            #[cfg(loom)]
            false,
        )
    }

    fn build<P: Default + Send>(
        spec: WindowSpec,
        updaters: usize,
        levels: usize,
        #[cfg(loom)] relaxed_progress: bool,
    ) -> Handles<P> {
        rc_skiplist::check_levels(levels);
        // One count per handle: every updater's anchor and the output's cursor start at the head.
        let head = Box::into_raw(Box::new(Node::head(
            i64::MIN,
            Winset {
                slots: Box::new([]),
            },
            updaters + 1,
        )));
        let inner = Arc::new(Inner {
            spec,
            levels,
            progress: (0..updaters)
                .map(|_| CachePadded::new(AtomicI64::new(i64::MIN)))
                .collect(),
            live_nodes: StdAtomicUsize::new(1),
            created: StdAtomicUsize::new(0),
            taken: StdAtomicUsize::new(0),
            poisoned: StdAtomicBool::new(false),
            #[cfg(loom)]
            relaxed_progress,
        });
        let ups = (0..updaters)
            .map(|u| Updater {
                inner: inner.clone(),
                id: u,
                update: [head; MAX_LEVELS],
                anchor: head,
                last: i64::MIN,
                lo: i64::MIN,
                hi: i64::MIN,
                change_at: i64::MIN,
                sought: None,
                heights: Heights::seeded(u),
            })
            .collect();
        let out = Output {
            inner,
            cur: head,
            watermark: i64::MIN,
        };
        (ups, out)
    }
}

#[cfg(loom)]
impl WHive {
    /// Loom builds only: a W-Hive whose progress stores are Relaxed instead of Release, the negative control
    /// of `tests/loom_w_hive.rs` (loom must report the race between an updater's write and the output's take).
    #[doc(hidden)]
    pub fn with_relaxed_progress<P: Default + Send>(
        spec: WindowSpec,
        updaters: usize,
        levels: usize,
    ) -> Handles<P> {
        Self::build(spec, updaters, levels, true)
    }
}

/// Updater `id`'s handle: updates slot `id` of the winsets of its tuples, in non-decreasing ts order.
/// Dropping it closes it.
pub struct Updater<P: Default + Send> {
    inner: Arc<Inner>,
    id: usize,
    /// Per-level predecessors of window `sought` found by the last seek: nodes with a smaller window id (or
    /// the head), all at or right of `anchor`, hence alive.
    update: [*mut Node<P>; MAX_LEVELS],
    /// The counted node this updater's searches start from: `update[levels - 1]` after each seek.
    anchor: *mut Node<P>,
    /// The last progress stored (`i64::MIN` before the first).
    last: i64,
    /// The windows `lo..=hi` of `last` (once a tuple or advance came), valid for every ts below `change_at`.
    lo: i64,
    hi: i64,
    change_at: i64,
    /// The window `update` was sought for (`None`: the head, valid for every window).
    sought: Option<i64>,
    heights: Heights,
}

// SAFETY: an `Updater` is used by one thread at a time (`&mut self`); its raw pointers point at nodes kept
// alive by its counted anchor. It writes partials (`P`) that another thread (the output) later moves out and
// that any thread may drop, hence `P: Send`. Shared `&Updater` only reads `id` and plain statistics.
unsafe impl<P: Default + Send> Send for Updater<P> {}
// SAFETY: every method that touches the list takes `&mut self`.
unsafe impl<P: Default + Send> Sync for Updater<P> {}

impl<P: Default + Send> Updater<P> {
    /// This updater's id: the index of its partial in every [`NextWinset::Winset`].
    pub fn id(&self) -> usize {
        self.id
    }

    /// Progress without data: a promise that this updater's future timestamps are `>= ts`. TuMLMC updaters
    /// call it for every tuple they skip, so that an updater whose keys are rare never holds the output back
    /// (cheap: a compare, and a Release store when ts grew; the index is walked once per window slide).
    /// Panics if `ts` is below an earlier ts of this updater.
    #[inline]
    pub fn advance(&mut self, ts: i64) {
        assert!(
            ts >= self.last,
            "W-Hive: updater {}'s timestamps must not decrease ({ts} after {})",
            self.id,
            self.last
        );
        if ts > self.last {
            self.last = ts;
            // Release, before any window write of this tuple and after all writes of earlier (smaller-ts)
            // tuples: the `Inner::progress` invariant, read with Acquire by `Output::scan`.
            self.inner.progress[self.id].store(ts, self.inner.progress_store());
        }
        if ts >= self.change_at {
            self.enter(ts);
        }
    }

    /// Advances to `ts` ([`Updater::advance`]), then calls `f(window, partial)` with this updater's partial of
    /// every window containing `ts`, in ascending window order, creating the winsets that do not exist yet.
    /// Panics if `ts` is below an earlier ts of this updater.
    #[inline]
    pub fn update(&mut self, ts: i64, mut f: impl FnMut(i64, &mut P)) {
        self.advance(ts);
        let mut prev = self.update[0];
        for w in self.lo..=self.hi {
            let node = self.find_or_insert(prev, w);
            // SAFETY: `node` is alive (right of our anchor: its id is >= lo, the window our anchor precedes).
            // Slot `id` is ours alone until the output takes the winset, which it does only once
            // `end(w) <= progress[id]`; our progress is `ts < end(w)` until we store a larger value, which
            // comes after this write (module docs, points 1-2). So no other thread accesses it now.
            unsafe { (*node).data.slots[self.id].with_mut(|p| f(w, &mut *p)) };
            prev = node;
        }
    }

    /// Closes this updater (the same as dropping it): its progress becomes `i64::MAX`, so it holds back no
    /// winset, and its anchor is released.
    pub fn close(self) {}

    /// Winsets created and not yet taken by the output (exact when quiescent).
    pub fn live_winsets(&self) -> usize {
        live_winsets(&self.inner)
    }

    /// The windows of `ts` changed: recompute them and move the finger to the new first window.
    #[cold]
    fn enter(&mut self, ts: i64) {
        let (lo, hi, change_at) = self.inner.spec.windows_of_ts_until_change(ts);
        (self.lo, self.hi, self.change_at) = (lo, hi, change_at);
        if lo <= hi && self.sought != Some(lo) {
            self.seek(lo);
        }
    }

    /// Sets `update[i]` to the last node before window `target` on level `i`, searching from the anchor, and
    /// moves the anchor to `update[levels - 1]`.
    fn seek(&mut self, target: i64) {
        let levels = self.inner.levels;
        // SAFETY: the anchor is counted and precedes every window this updater can still touch (windows
        // `>= lo`, and `target` is the new `lo`, which never decreases), so its key is below `target`.
        // `update[levels - 1]` is the anchor or right of it.
        unsafe {
            rc_skiplist::search(self.anchor, levels, &target, &mut self.update);
            move_anchor(
                &mut self.anchor,
                self.update[levels - 1],
                &self.inner.live_nodes,
            );
        }
        self.sought = Some(target);
    }

    /// The node of window `w`, inserted after `prev` (a node with a smaller id, or the head) if absent.
    fn find_or_insert(&mut self, mut prev: *mut Node<P>, w: i64) -> *mut Node<P> {
        let mut fresh: *mut Node<P> = ptr::null_mut();
        loop {
            // SAFETY: `prev` is right of our anchor (or it), so alive, and so is its successor; the Acquire
            // load synchronises with the CAS that linked the successor, so its fields are initialised.
            let next = unsafe { (*prev).next(0) };
            // SAFETY: as above.
            let next_w = (!next.is_null()).then(|| unsafe { (*next).key });
            if next_w.is_some_and(|n| n < w) {
                prev = next;
                continue;
            }
            if next_w == Some(w) {
                if !fresh.is_null() {
                    // Another updater linked window `w` first: use its node and drop ours.
                    // SAFETY: `fresh` was never linked, so nobody else knows it; it came from `Box::into_raw`.
                    unsafe { free(fresh, &self.inner.live_nodes) };
                }
                return next;
            }
            if fresh.is_null() {
                fresh = self.alloc(w);
            }
            // SAFETY: `fresh` is ours until the CAS publishes it; `prev` is alive (above).
            if unsafe { rc_skiplist::try_link(prev, 0, next, fresh) } {
                break;
            }
        }
        // Level 0 won: only we link `fresh` on the upper levels, so no equal key can appear there.
        // SAFETY: `fresh` is linked and alive: its own uncounted-yet links (`height - 1` of its counts) are
        // still ours, so it cannot be freed before we link them. `update[level]` precedes our first window
        // `lo <= w` and is right of our anchor, so it and every node right of it are alive.
        unsafe {
            for level in 1..(*fresh).height() {
                rc_skiplist::link(self.update[level], level, fresh);
            }
        }
        self.inner.created.fetch_add(1, Ordering::Relaxed);
        fresh
    }

    fn alloc(&mut self, w: i64) -> *mut Node<P> {
        let height = self.heights.next(self.inner.levels);
        let slots = (0..self.inner.progress.len())
            .map(|_| UnsafeCell::new(P::default()))
            .collect();
        let node = Box::new(Node::new(w, Winset { slots }, height));
        self.inner.live_nodes.fetch_add(1, Ordering::Relaxed);
        Box::into_raw(node)
    }
}

impl<P: Default + Send> Drop for Updater<P> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.inner.poisoned.store(true, Ordering::Relaxed);
        }
        // A dropped updater is a closed one: otherwise the output would wait for it forever. Release: every
        // window write of this updater happens before an output that reads `i64::MAX`.
        self.inner.progress[self.id].store(i64::MAX, self.inner.progress_store());
        // SAFETY: the anchor is this handle's count; we touch no node after this.
        unsafe { release(self.anchor, &self.inner.live_nodes) };
    }
}

fn live_winsets(inner: &Inner) -> usize {
    let taken = inner.taken.load(Ordering::Relaxed);
    inner.created.load(Ordering::Relaxed).saturating_sub(taken)
}

/// What [`Output::next_ready`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum NextWinset<P> {
    /// The next released winset in window order: its window id and the updaters' partials, indexed by
    /// updater id (a default `P` for an updater that never touched it).
    Winset(i64, Vec<P>),
    /// Nothing released yet: some updater may still write the next winset, or none exists yet. Retry later.
    Pending,
    /// Every updater closed and every winset was taken.
    End,
}

/// The output handle: takes released winsets, once each, in window order (wait-free apart from the
/// reference counting).
pub struct Output<P: Default + Send> {
    inner: Arc<Inner>,
    /// The last winset taken, or the head: counted, so everything right of it is alive.
    cur: *mut Node<P>,
    /// `W = min_u progress[u]` at the last scan; only list loads made after that scan are checked against it.
    watermark: i64,
}

// SAFETY: an `Output` is used by one thread at a time (`&mut self`); its cursor is counted. It moves partials
// written by updater threads out (`P: Send`).
unsafe impl<P: Default + Send> Send for Output<P> {}
// SAFETY: `next_ready` takes `&mut self`; a shared `&Output` only reads statistics.
unsafe impl<P: Default + Send> Sync for Output<P> {}

impl<P: Default + Send> Output<P> {
    /// The next released winset, [`NextWinset::Pending`] or [`NextWinset::End`]. Never waits.
    pub fn next_ready(&mut self) -> NextWinset<P> {
        // SAFETY: `cur` is counted, so alive, and so is its successor.
        let mut next = unsafe { (*self.cur).next(0) };
        if !self.released(next) {
            self.watermark = self.scan();
            // Reload after the scan: point 3 of the module docs needs the list load to follow the Acquire
            // loads of the progress it is checked against.
            // SAFETY: as above.
            next = unsafe { (*self.cur).next(0) };
            if next.is_null() {
                return if self.watermark == i64::MAX {
                    NextWinset::End
                } else {
                    NextWinset::Pending
                };
            }
            if !self.released(next) {
                return NextWinset::Pending;
            }
        }
        // SAFETY: `next` is alive (the successor of our counted cursor) and released: every updater's writes
        // to it happen before our scan's Acquire loads and none comes after (module docs, points 1-2), so we
        // are the only thread touching its slots now, and for good.
        let (window, parts) = unsafe {
            let node = &*next;
            let parts = node
                .data
                .slots
                .iter()
                .map(|s| s.with_mut(|p| std::mem::take(&mut *p)))
                .collect();
            (node.key, parts)
        };
        // SAFETY: the cursor is our count and `next` is right of it.
        unsafe { move_anchor(&mut self.cur, next, &self.inner.live_nodes) };
        self.inner.taken.fetch_add(1, Ordering::Relaxed);
        NextWinset::Winset(window, parts)
    }

    /// `W = min_u progress[u]` as of the last scan. After [`NextWinset::Pending`] every winset ending by `W` has been
    /// returned, and none can appear later: a window is created only by an updater whose progress is below its
    /// end, and every progress is at least `W` and never decreases. The caller's frontier.
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// Winsets created and not yet taken (exact when quiescent): bounded by the updaters' progress spread
    /// plus the winsets released but not taken (module docs, memory bound).
    pub fn live_winsets(&self) -> usize {
        live_winsets(&self.inner)
    }

    /// Nodes allocated and not yet freed: live winsets, the shells that anchors still pin, and the head
    /// while some handle has not moved past it.
    pub fn live_nodes(&self) -> usize {
        self.inner.live_nodes.load(Ordering::Relaxed)
    }

    /// Whether some updater was dropped while its thread panicked: its windows may miss tuples, though it
    /// counts as closed. Read it after [`NextWinset::End`] (or whenever) to turn that into an operator error.
    pub fn poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::Relaxed)
    }

    /// The windows: winset `j` covers `[spec.window_start(j), spec.window_end(j))`.
    pub fn spec(&self) -> &WindowSpec {
        &self.inner.spec
    }

    /// Whether `next` is a winset every updater is past by the current `watermark`. A window whose end lies
    /// past `i64::MAX` ends at `i64::MAX` ([`WindowSpec::window_end_saturating`]): it is released only once
    /// every updater closed.
    fn released(&self, next: *mut Node<P>) -> bool {
        // SAFETY: a non-null successor of our cursor is alive (counted link).
        !next.is_null()
            && self
                .inner
                .spec
                .window_end_saturating(unsafe { (*next).key })
                <= self.watermark
    }

    /// `min_u progress[u]` (Acquire: synchronises with each updater's Release store, module docs); `i64::MAX`
    /// without updaters.
    fn scan(&self) -> i64 {
        self.inner
            .progress
            .iter()
            .map(|p| p.load(Ordering::Acquire))
            .min()
            .unwrap_or(i64::MAX)
    }
}

impl<P: Default + Send> Drop for Output<P> {
    fn drop(&mut self) {
        // SAFETY: the cursor is this handle's count; the updaters free the rest as they pass.
        unsafe { release(self.cur, &self.inner.live_nodes) };
    }
}
