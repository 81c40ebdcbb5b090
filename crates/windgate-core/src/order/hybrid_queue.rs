//! Work queues for partitioned stateful operators (Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing
//! on Shared-Memory Multicores*, section 4): every tuple of a key must be processed by one worker at a time, in
//! arrival order, while any worker may serve any partition.
//!
//! [`HybridQueue`] is the paper's HYBRID-QUEUE (Fig. 7): a FIFO per partition holding the tuples, a master FIFO
//! of partition ids (one entry per tuple, in arrival order) that workers take from, and a count per
//! partition that is both the number of tuples its active worker still owes and the exclusive-access token.
//! A worker that takes an entry of a partition someone else is serving *delegates* the tuple (increments the
//! count) and moves on: nobody waits. [`PartitionedQueue`] is the Volcano-style baseline: a queue per partition
//! and a fixed owner per partition.
//!
//! The paper's Theorem 4.1: no two workers operate on one partition at once, and each partition's tuples are
//! processed exactly once, in arrival order. Why, at each step:
//! * the producer pushes the tuple onto its partition's queue *before* pushing the id onto the master queue,
//!   so a worker holding a master entry finds the tuple (crossbeam's queues give that happens-before);
//! * only a worker that moved the count from 0 enters the partition; the count drops only after a tuple is
//!   fully processed, so only the active worker can bring it back to 0, and the next one to enter sees its
//!   work (AcqRel on the count);
//! * the active worker keeps processing until the count reaches 0, so a delegated tuple is never stranded.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;

struct Partition<T, S> {
    queue: SegQueue<T>,
    /// PARTITIONED-QUEUE only: a tuple popped but not yet admitted (its output would not fit the reorder
    /// buffer); it stays the partition's head. Touched only by the partition's owner.
    held: UnsafeCell<Option<T>>,
    /// Tuples of this partition taken from the master queue and not yet processed. Non-zero: a worker is
    /// active here and owns `state`.
    count: CachePadded<AtomicUsize>,
    state: UnsafeCell<S>,
}

impl<T, S> Partition<T, S> {
    fn new(state: S) -> Self {
        Self {
            queue: SegQueue::new(),
            held: UnsafeCell::new(None),
            count: CachePadded::new(AtomicUsize::new(0)),
            state: UnsafeCell::new(state),
        }
    }

    /// Runs `f` on the state with the partition's token taken (count 0 -> 1 -> 0): exclusive without
    /// `unsafe` at the call site. `None` if a worker is inside.
    fn with_state<R>(&self, f: impl FnOnce(&mut S) -> R) -> Option<R> {
        self.count
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
            .ok()?;
        // SAFETY: the token (count moved from 0) makes this the partition's only user, as for a worker.
        let r = f(unsafe { &mut *self.state.get() });
        self.count.store(0, Ordering::Release);
        Some(r)
    }
}

/// Runs `f` on every partition's state in order (end of stream); panics if a worker is still inside one,
/// which the caller must have ruled out.
fn each_state<T, S>(partitions: &[Partition<T, S>], mut f: impl FnMut(usize, &mut S)) {
    for (i, p) in partitions.iter().enumerate() {
        p.with_state(|s| f(i, s))
            .expect("no worker is inside a partition at end of stream");
    }
}

/// The paper's hybrid queue over partitions with per-partition state `S`.
pub struct HybridQueue<T, S> {
    partitions: Box<[Partition<T, S>]>,
    master: SegQueue<u32>,
    /// Entries in the master queue (the scheduler's worklist size; `SegQueue::len` is not exact under races).
    pending: CachePadded<AtomicUsize>,
}

// SAFETY: `state` is only touched by the partition's active worker (the one that moved `count` from 0), one at
// a time, with AcqRel on `count` ordering successive owners; tuples and states move between threads, so both
// must be `Send`.
unsafe impl<T: Send, S: Send> Sync for HybridQueue<T, S> {}

impl<T, S> HybridQueue<T, S> {
    /// `partitions` partitions, partition `p` starting with state `state(p)`.
    pub fn new(partitions: usize, mut state: impl FnMut(usize) -> S) -> Self {
        assert!(
            partitions >= 1 && partitions <= u32::MAX as usize,
            "1 to 2^32 partitions"
        );
        Self {
            partitions: (0..partitions).map(|p| Partition::new(state(p))).collect(),
            master: SegQueue::new(),
            pending: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    pub fn partitions(&self) -> usize {
        self.partitions.len()
    }

    /// Master-queue entries not yet taken.
    pub fn len(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// L2-6 (producer): the tuple goes to its partition's queue first, then its id to the master queue.
    pub fn add(&self, partition: usize, item: T) {
        self.partitions[partition].queue.push(item);
        self.pending.fetch_add(1, Ordering::Relaxed);
        self.master.push(partition as u32);
    }

    /// L8-15 (worker): takes up to `budget` master entries; for each, either becomes the partition's active
    /// worker and processes its tuples until none is owed, or delegates. `f(partition, state, tuple)` runs
    /// with exclusive access to the partition's state. The budget is checked only between master entries: an
    /// active worker never leaves a partition with tuples owed. Returns the entries taken.
    pub fn consume(&self, budget: usize, mut f: impl FnMut(usize, &mut S, T)) -> usize {
        let mut taken = 0;
        while taken < budget {
            let Some(p) = self.master.pop() else {
                break;
            };
            taken += 1;
            self.pending.fetch_sub(1, Ordering::Relaxed);
            let part = &self.partitions[p as usize];
            if part.count.fetch_add(1, Ordering::AcqRel) != 0 {
                continue; // delegated to the active worker
            }
            loop {
                let item = part
                    .queue
                    .pop()
                    .expect("a master entry always has its tuple in the partition queue");
                // SAFETY: this worker moved `count` from 0 and has not brought it back, so it is the only one
                // inside this partition; the previous owner's writes happen-before (AcqRel on `count`).
                let state = unsafe { &mut *part.state.get() };
                f(p as usize, state, item);
                if part.count.fetch_sub(1, Ordering::AcqRel) == 1 {
                    break;
                }
            }
        }
        taken
    }

    /// Runs `f(partition, state)` on every partition in order, once no worker is inside any (end of stream).
    pub fn each_state(&self, f: impl FnMut(usize, &mut S)) {
        each_state(&self.partitions, f)
    }

    /// The partitions' states, once every worker is done (the tests check them).
    #[cfg(test)]
    pub fn into_states(self) -> Vec<S> {
        self.partitions
            .into_vec()
            .into_iter()
            .map(|p| p.state.into_inner())
            .collect()
    }
}

/// The baseline (PARTITIONED-QUEUE): partition `p` belongs to worker `p mod workers`, which alone serves its
/// queue. No coordination, but an unserved or hot partition holds back the others' outputs downstream.
pub struct PartitionedQueue<T, S> {
    partitions: Box<[Partition<T, S>]>,
    workers: usize,
    /// Tuples added and not yet processed (held heads included).
    pending: CachePadded<AtomicUsize>,
}

// SAFETY: partition `p`'s queue is popped and its state touched only by worker `p mod workers`, which
// `consume` requires callers to be one thread per worker id.
unsafe impl<T: Send, S: Send> Sync for PartitionedQueue<T, S> {}

impl<T, S> PartitionedQueue<T, S> {
    pub fn new(partitions: usize, workers: usize, mut state: impl FnMut(usize) -> S) -> Self {
        assert!(partitions >= 1 && workers >= 1);
        Self {
            partitions: (0..partitions).map(|p| Partition::new(state(p))).collect(),
            workers,
            pending: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    pub fn add(&self, partition: usize, item: T) {
        self.pending.fetch_add(1, Ordering::Relaxed);
        self.partitions[partition].queue.push(item);
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Tuples added and not yet processed.
    pub fn len(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Worker `worker` serves its own partitions, up to `budget` tuples. Each worker id must be used by one
    /// thread at a time (checked with the partition's `count` as an in-use flag). The pipeline admits through
    /// [`Self::consume_admitted`]; the tests exercise the queue alone through this.
    #[cfg(test)]
    pub fn consume(&self, worker: usize, budget: usize, f: impl FnMut(usize, &mut S, T)) -> usize {
        self.consume_admitted(worker, budget, |_| true, f)
    }

    /// As [`PartitionedQueue::consume`], but a partition's head tuple is processed only if `admit` says so;
    /// otherwise it stays the head and the worker moves on to its next partition. An ordered runtime admits a
    /// tuple only when its output fits the reorder buffer, so an owner never waits for a partition that
    /// only it serves.
    pub fn consume_admitted(
        &self,
        worker: usize,
        budget: usize,
        admit: impl Fn(&T) -> bool,
        mut f: impl FnMut(usize, &mut S, T),
    ) -> usize {
        let mut done = 0;
        for p in (worker..self.partitions.len()).step_by(self.workers) {
            let part = &self.partitions[p];
            assert_eq!(
                part.count.swap(1, Ordering::Acquire),
                0,
                "worker {worker} is served by two threads"
            );
            // SAFETY: the in-use flag above makes this thread the partition's only user (state and held).
            let (state, held) = unsafe { (&mut *part.state.get(), &mut *part.held.get()) };
            while done < budget {
                let Some(item) = held.take().or_else(|| part.queue.pop()) else {
                    break;
                };
                if !admit(&item) {
                    *held = Some(item);
                    break;
                }
                self.pending.fetch_sub(1, Ordering::Relaxed);
                f(p, state, item);
                done += 1;
            }
            part.count.store(0, Ordering::Release);
        }
        done
    }

    /// Runs `f(partition, state)` on every partition in order, once no worker is inside any.
    pub fn each_state(&self, f: impl FnMut(usize, &mut S)) {
        each_state(&self.partitions, f)
    }

    #[cfg(test)]
    pub fn into_states(self) -> Vec<S> {
        self.partitions
            .into_vec()
            .into_iter()
            .map(|p| p.state.into_inner())
            .collect()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// Per partition: the (key, seq) pairs in processing order and a busy flag proving exclusion.
    #[derive(Default)]
    struct Seen {
        busy: AtomicBool,
        order: Vec<(u64, u64)>,
    }

    fn check(states: Vec<Seen>, keys: u64, per_key: u64, partitions: usize) {
        let mut all = 0;
        for (p, s) in states.into_iter().enumerate() {
            for k in 0..keys {
                let seqs: Vec<u64> = s.order.iter().filter(|e| e.0 == k).map(|e| e.1).collect();
                if (k % partitions as u64) as usize == p {
                    assert_eq!(
                        seqs,
                        (0..per_key).collect::<Vec<_>>(),
                        "key {k} in order, exactly once"
                    );
                } else {
                    assert!(seqs.is_empty());
                }
            }
            all += s.order.len() as u64;
        }
        assert_eq!(all, keys * per_key);
    }

    fn process(_: usize, s: &mut Seen, (k, seq): (u64, u64)) {
        assert!(
            !s.busy.swap(true, Ordering::Relaxed),
            "two workers in one partition"
        );
        s.order.push((k, seq));
        if seq % 64 == 0 {
            std::thread::yield_now();
        }
        s.busy.store(false, Ordering::Relaxed);
    }

    fn hybrid(partitions: usize, workers: usize, keys: u64, per_key: u64, hot: bool) {
        let q = HybridQueue::new(partitions, |_| Seen::default());
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    loop {
                        let finished = done.load(Ordering::Acquire);
                        if q.consume(16, process) == 0 {
                            if finished && q.is_empty() {
                                return;
                            }
                            std::thread::yield_now();
                        }
                    }
                });
            }
            // One producer, keys round-robin (or one hot key with most of the rows).
            for seq in 0..per_key {
                for k in 0..keys {
                    let k = if hot && k % 4 != 0 { 0 } else { k };
                    q.add((k % partitions as u64) as usize, (k, seq));
                }
            }
            done.store(true, Ordering::Release);
        });
        if !hot {
            check(q.into_states(), keys, per_key, partitions);
        } else {
            let total: usize = q.into_states().iter().map(|s| s.order.len()).sum();
            assert_eq!(total as u64, keys * per_key);
        }
    }

    #[test]
    fn exclusive_and_in_order_for_any_partitions_and_workers() {
        for (partitions, workers) in [(1, 1), (1, 4), (3, 2), (16, 3), (100, 4)] {
            hybrid(partitions, workers, 37, 300, false);
        }
    }

    #[test]
    fn one_hot_key_does_not_stall_the_others() {
        hybrid(8, 4, 20, 400, true);
    }

    #[test]
    fn partitioned_baseline_is_in_order() {
        let (partitions, workers, keys, per_key) = (6, 3, 12u64, 500u64);
        let q = PartitionedQueue::new(partitions, workers, |_| Seen::default());
        for seq in 0..per_key {
            for k in 0..keys {
                q.add((k % partitions as u64) as usize, (k, seq));
            }
        }
        std::thread::scope(|s| {
            for w in 0..workers {
                let q = &q;
                s.spawn(move || while q.consume(w, 64, process) > 0 {});
            }
        });
        check(q.into_states(), keys, per_key, partitions);
    }

    #[test]
    fn baseline_holds_an_unadmitted_head_and_moves_on() {
        // One worker owning two partitions; partition 0's head is refused until the limit rises: the worker
        // serves partition 1 meanwhile, and the held head comes first once admitted.
        let q = PartitionedQueue::new(2, 1, |_| Vec::new());
        for x in [10u64, 11, 20, 21] {
            q.add((x / 10 - 1) as usize, x);
        }
        let limit = std::sync::atomic::AtomicU64::new(11);
        let admit = |x: &u64| *x < limit.load(Ordering::Relaxed) || *x >= 20;
        assert_eq!(
            q.consume_admitted(0, 10, admit, |_, s: &mut Vec<u64>, x| s.push(x)),
            3
        );
        assert_eq!(q.len(), 1);
        limit.store(100, Ordering::Relaxed);
        assert_eq!(q.consume_admitted(0, 10, |_| true, |_, s, x| s.push(x)), 1);
        assert!(q.is_empty());
        let mut seen = vec![];
        q.each_state(|p, s| seen.push((p, s.clone())));
        assert_eq!(seen, vec![(0, vec![10, 11]), (1, vec![20, 21])]);
    }

    #[test]
    fn each_state_visits_partitions_in_order() {
        let q = HybridQueue::new(3, |p| p * 10);
        q.add(2, ());
        assert_eq!(q.consume(5, |_, s, ()| *s += 1), 1);
        let mut seen = vec![];
        q.each_state(|p, s| seen.push((p, *s)));
        assert_eq!(seen, vec![(0, 0), (1, 10), (2, 21)]);
    }
}
