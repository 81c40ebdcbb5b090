//! Reorder buffers (Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory Multicores*,
//! section 3): workers finish units of work in any order, and each unit's output must go downstream in the order
//! of its serial number.
//!
//! [`ReorderBuffer`] is the paper's non-blocking scheme (Fig. 4): a worker *deposits* its unit in slot
//! `serial mod S` whenever the serial is within the window `[next, next + S)` (the entry condition), then tries
//! to become the single drainer (a test-and-set flag) and emits every unit from `next` on while the slot holds
//! one. Depositing never waits for draining: a worker that loses the flag goes back to work, and whoever holds
//! the flag emits its unit for it. [`LockedReorder`] is the lock-based baseline (Fig. 2): one lock for deposit
//! and drain, so depositors queue behind a drainer.
//!
//! The invariants (from the paper's correctness proof), stated where they are kept:
//! * I1: `next` only grows, by one, inside the drain (the flag holder).
//! * I2: a non-empty slot `j` holds the unit of serial `t ≡ j (mod S)` with `next <= t < next + S`.
//! * I3: the drainer empties a slot *before* advancing `next`; the other order lets a depositor of `t + S` see
//!   the new `next`, store into the slot, and have its unit erased.
//! * I4: between a depositor's `next` load and its store, `next` cannot pass its serial (its unit is not in
//!   the buffer yet), so the slot stays reserved for it.
//! * I5: when no worker is inside [`ReorderBuffer::send`], the slot of `next` is empty (nothing stranded).
//!
//! **The flag handshake.** The paper clears the flag and then rechecks the slot it found empty (L36-L42): a
//! store→load (Dekker) pattern on two locations, which needs `SeqCst` fences on both sides.
//! Here the flag and the recheck live in one atomic word: a depositor sets `DRAINING | DIRTY` with one
//! read-modify-write after its deposit, and the drainer clears `DIRTY` before each pass and leaves only with a
//! compare-exchange `DRAINING -> 0`, which fails if a deposit announced itself since the pass began. That is
//! the same protocol ("clear the flag unless something arrived since the last look"), but every step is an RMW
//! on one word, so it needs no `SeqCst` at all, and loom can check it: loom 0.7 does not apply the SC-fence
//! rule to a plain load that already read the old value and reports a false stranding on the two-location
//! form. The two-location form with release/acquire only is kept as the loom model's negative control
//! ([`ReorderBuffer::with_weak_ordering_for_tests`]): loom finds the stranded unit there.

use std::collections::BTreeMap;
use std::ptr;
use std::sync::Mutex;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, Ordering};

/// Emits units in serial order, whichever worker finished them.
pub trait Reorder<T>: Send + Sync {
    /// Deposits the unit of `serial` (serials are 1, 2, 3, ... each exactly once) and emits, through `sink`,
    /// every unit that is now next in order. `Err(unit)` gives the unit back when the buffer cannot take it
    /// yet (serial `>= next + S`): the caller retries with the same unit (the paper's caller contract).
    fn send(&self, serial: u64, unit: T, sink: &mut dyn FnMut(T)) -> Result<(), T>;

    /// Serial of the next unit to emit.
    fn next_serial(&self) -> u64;
}

/// Deposits `unit` until the buffer takes it (spinning politely while it is full).
pub fn send_blocking<T>(r: &dyn Reorder<T>, serial: u64, mut unit: T, sink: &mut dyn FnMut(T)) {
    #[cfg(not(loom))]
    let backoff = crossbeam_utils::Backoff::new();
    loop {
        match r.send(serial, unit, sink) {
            Ok(()) => return,
            Err(u) => unit = u,
        }
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(not(loom))]
        backoff.snooze();
    }
}

/// The paper's non-blocking reorder buffer.
pub struct ReorderBuffer<T> {
    /// Serial of the next unit to emit (I1: written only by the flag holder, `fetch_add` with Release after
    /// the slot was emptied; depositors load it with Acquire so that the emptying is visible before they
    /// store into the slot).
    next: CachePadded<AtomicU64>,
    /// `S` slots; null is EMPTY, otherwise a `Box<T>` leaked by its depositor (I2). A unit is a `Box`, so an
    /// empty unit is still non-null.
    slots: Box<[CachePadded<AtomicPtr<T>>]>,
    mask: u64,
    /// `DRAINING`: someone drains (the paper's flag); `DIRTY`: a unit was deposited since the drainer's last
    /// pass began (the paper's recheck). Every access is a read-modify-write with AcqRel: the depositors'
    /// announcements form one release sequence that the drainer's `fetch_and` acquires, so their slot stores
    /// are visible to the pass that follows.
    state: CachePadded<AtomicU8>,
    /// The negative control's flag (the paper's two-location handshake without fences).
    weak_flag: AtomicBool,
    /// Deposits refused because the serial was `S` or more ahead of `next`.
    refused: AtomicU64,
    /// Test-only: leave out the two `SeqCst` fences and recheck with a plain load (the loom model's negative
    /// control: the paper's handshake with release/acquire only).
    weak: bool,
}

// SAFETY: slots own `Box<T>`s that move between threads (deposited by one, emitted by another): `T: Send` is
// what that needs; every shared field is atomic.
unsafe impl<T: Send> Send for ReorderBuffer<T> {}
// SAFETY: as above; `&ReorderBuffer` only exposes atomic operations and moves whole units.
unsafe impl<T: Send> Sync for ReorderBuffer<T> {}

impl<T> ReorderBuffer<T> {
    /// A buffer of `slots` slots (rounded up to a power of two, at least 1).
    pub fn new(slots: usize) -> Self {
        Self::build(slots, false)
    }

    /// The same buffer without the `SeqCst` fences that keep I5 (and with a plain-load recheck): for the loom
    /// model's negative control only.
    #[doc(hidden)]
    pub fn with_weak_ordering_for_tests(slots: usize) -> Self {
        Self::build(slots, true)
    }

    fn build(slots: usize, weak: bool) -> Self {
        let s = slots.max(1).next_power_of_two();
        Self {
            next: CachePadded::new(AtomicU64::new(1)),
            slots: (0..s)
                .map(|_| CachePadded::new(AtomicPtr::new(ptr::null_mut())))
                .collect(),
            mask: s as u64 - 1,
            state: CachePadded::new(AtomicU8::new(0)),
            weak_flag: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            weak,
        }
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Deposits refused so far because the buffer was full for them.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// L14-22: stores the unit if its serial is inside `[next, next + S)`.
    fn try_add(&self, serial: u64, unit: T) -> Result<(), T> {
        let n = self.next.load(Ordering::Acquire);
        if serial < n || serial >= n + self.slots.len() as u64 {
            debug_assert!(
                serial >= n,
                "serial {serial} was already emitted (next is {n})"
            );
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(unit);
        }
        let slot = &self.slots[(serial & self.mask) as usize];
        // I4: the slot is empty and reserved for `serial` (the previous user, `serial - S`, was emptied before
        // `next` passed it, and the Acquire load of `next` above made that emptying visible).
        debug_assert!(slot.load(Ordering::Relaxed).is_null());
        // Release: publishes the unit's contents to the drainer's Acquire load.
        slot.store(Box::into_raw(Box::new(unit)), Ordering::Release);
        Ok(())
    }

    /// L24-43: takes the flag (announcing a deposit with `dirty`) unless someone holds it, and drains.
    fn send_pending(&self, dirty: bool, sink: &mut dyn FnMut(T)) {
        if self.weak {
            return self.send_pending_weak(sink);
        }
        let announce = DRAINING | if dirty { DIRTY } else { 0 };
        if self.state.fetch_or(announce, Ordering::AcqRel) & DRAINING != 0 {
            return; // the drainer sees DIRTY and passes again (I5)
        }
        loop {
            // A pass sees every deposit announced before this RMW (release sequence of the announcements).
            self.state.fetch_and(!DIRTY, Ordering::AcqRel);
            self.drain(sink);
            // Leave only if nothing was announced during the pass; the Release publishes `next` to the next
            // drainer's announcement RMW.
            if self
                .state
                .compare_exchange(DRAINING, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
    }

    /// L27-38: emits units from `next` on while its slot is full. Caller holds the flag.
    fn drain(&self, sink: &mut dyn FnMut(T)) -> usize {
        loop {
            let n = self.next.load(Ordering::Relaxed); // only the flag holder changes it (I1)
            let slot = &self.slots[(n & self.mask) as usize];
            let p = slot.load(Ordering::Acquire);
            if p.is_null() {
                return (n & self.mask) as usize;
            }
            // SAFETY: `p` came from `Box::into_raw` in `try_add` for serial `n` (I2), and only the flag holder
            // takes it; it is emptied below before anyone may deposit into this slot again (I3).
            let unit = unsafe { Box::from_raw(p) };
            sink(*unit);
            slot.store(ptr::null_mut(), Ordering::Relaxed);
            // I3: the emptying above happens before `next` moves (Release), so a depositor that sees the new
            // `next` (Acquire) sees the empty slot.
            self.next.fetch_add(1, Ordering::Release);
        }
    }

    /// The negative control: the paper's flag and recheck on two locations, release/acquire only.
    fn send_pending_weak(&self, sink: &mut dyn FnMut(T)) {
        loop {
            if self.weak_flag.swap(true, Ordering::AcqRel) {
                return;
            }
            let i = self.drain(sink);
            self.weak_flag.store(false, Ordering::Release);
            if self.slots[i].load(Ordering::Acquire).is_null() {
                return;
            }
        }
    }
}

/// `ReorderBuffer::state` bits.
const DRAINING: u8 = 1;
const DIRTY: u8 = 2;

impl<T: Send> Reorder<T> for ReorderBuffer<T> {
    fn send(&self, serial: u64, unit: T, sink: &mut dyn FnMut(T)) -> Result<(), T> {
        let added = self.try_add(serial, unit);
        // Drain whether or not the deposit succeeded (L9): a refused worker may be the one to unblock itself.
        self.send_pending(added.is_ok(), sink);
        added
    }

    fn next_serial(&self) -> u64 {
        self.next.load(Ordering::Acquire)
    }
}

impl<T> Drop for ReorderBuffer<T> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            let p = slot.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: `&mut self`: no other thread holds the buffer; `p` is an undelivered unit's Box.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

/// The lock-based baseline (the paper's Fig. 2): deposit and drain under one lock; never refuses.
pub struct LockedReorder<T> {
    state: Mutex<(u64, BTreeMap<u64, T>)>,
}

impl<T> Default for LockedReorder<T> {
    fn default() -> Self {
        Self {
            state: Mutex::new((1, BTreeMap::new())),
        }
    }
}

impl<T: Send> Reorder<T> for LockedReorder<T> {
    fn send(&self, serial: u64, unit: T, sink: &mut dyn FnMut(T)) -> Result<(), T> {
        let mut st = self.state.lock().expect("reorder lock");
        let (next, waiting) = &mut *st;
        if serial != *next {
            waiting.insert(serial, unit);
            return Ok(());
        }
        sink(unit);
        *next += 1;
        while let Some(u) = waiting.remove(next) {
            sink(u);
            *next += 1;
        }
        Ok(())
    }

    fn next_serial(&self) -> u64 {
        self.state.lock().expect("reorder lock").0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn run(buffer: Arc<dyn Reorder<u64>>, workers: usize, units: u64) -> Vec<u64> {
        let out = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for w in 0..workers as u64 {
                let (buffer, out) = (buffer.clone(), out.clone());
                s.spawn(move || {
                    // Worker w owns serials w+1, w+1+workers, ...: finishes out of order with the others.
                    let mut serial = w + 1;
                    while serial <= units {
                        let mut sink = |u: u64| out.lock().unwrap().push(u);
                        send_blocking(&*buffer, serial, serial * 10, &mut sink);
                        if serial % 7 == 0 {
                            std::thread::yield_now();
                        }
                        serial += workers as u64;
                    }
                });
            }
        });
        Arc::try_unwrap(out).unwrap().into_inner().unwrap()
    }

    #[test]
    fn emits_in_serial_order_for_any_size_and_workers() {
        for slots in [1, 2, 3, 8, 64] {
            for workers in [1, 2, 3, 5] {
                let want: Vec<u64> = (1..=2000).map(|s| s * 10).collect();
                let nb = run(Arc::new(ReorderBuffer::<u64>::new(slots)), workers, 2000);
                assert_eq!(nb, want, "non-blocking, {slots} slots, {workers} workers");
                let lb = run(Arc::new(LockedReorder::<u64>::default()), workers, 2000);
                assert_eq!(lb, want, "locked, {workers} workers");
            }
        }
    }

    #[test]
    fn refuses_serials_beyond_the_window_and_frees_leftovers() {
        let b = ReorderBuffer::<Vec<u8>>::new(2);
        let mut out = vec![];
        assert!(b.send(3, vec![3], &mut |u| out.push(u)).is_err()); // next = 1, S = 2
        assert_eq!(b.refused(), 1);
        assert!(b.send(2, vec![2], &mut |u| out.push(u)).is_ok());
        assert!(out.is_empty());
        assert_eq!(b.next_serial(), 1);
        // Dropping with serial 2 still inside frees it (no leak under valgrind/miri).
    }

    #[test]
    fn quiescent_buffer_has_nothing_stranded() {
        let b = ReorderBuffer::<u64>::new(4);
        let mut out = vec![];
        for s in [2, 4, 3, 1] {
            b.send(s, s, &mut |u| out.push(u)).unwrap();
        }
        assert_eq!(out, vec![1, 2, 3, 4]);
        assert_eq!(b.next_serial(), 5);
    }
}
