//! ScaleJoin's threads (Gulisano et al., ScaleJoin): the caller feeds SG_in through one source handle per side; `n`
//! processing threads each read every ready tuple, run [`Processor`] and add their outputs to SG_out, whose
//! one reader (the caller) receives them merged in [`OutKey`] order. No central sequential step.
//!
//! Waiting: a thread with nothing ready spins briefly, announces that it sleeps, polls once more and parks;
//! the caller unparks sleepers after each batch of insertions, each flush request and each close.
//!
//! Flushing a push: outputs of the *last* tuples would stay in SG_out, because each thread's latest output is
//! not ready (Gulisano et al., ScaleJoin). When the caller needs every output of the first `c` ready tuples, it publishes
//! `c`; each thread, once it processed `c` tuples, adds a marker `(ts, c - 1, MAX)` to SG_out and
//! acknowledges. With every thread's marker written, everything below is ready.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle, Thread};
use std::time::Duration;

use crossbeam_utils::{Backoff, CachePadded};

use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::order::scale_gate::{NextItem, Reader, ScaleGate, Source};
use crate::threads::panic_message;

use super::prepare::{JoinKey, JoinTuple, Side};
use super::processor::{OutKey, OutPair, Processor};
use super::window::Partner;

/// Gate levels: sources search from their previous position, so few levels are needed (Gulisano et al., ScaleGate).
const LEVELS: usize = 4;
/// How far (in ready tuples) the caller may run ahead of the slowest thread before it waits: bounds the
/// ready part of SG_in.
const MAX_LAG: u64 = 1 << 16;
/// The caller wakes sleeping threads and drains outputs every this many insertions.
const WAKE_EVERY: u64 = 1024;
/// The longest the waiting caller stays parked without a wake-up (threads wake it without a handshake).
const PARK: Duration = Duration::from_micros(200);
/// The longest an idle processing thread sleeps: wake-ups are not missed (see `run_thread`), so this is only
/// a safety net, and long enough that an idle joiner costs no CPU to speak of.
const IDLE_PARK: Duration = Duration::from_millis(50);

/// What one processing thread publishes.
#[derive(Default)]
struct ThreadState {
    /// Tuples processed (Release after each; the caller's lag check reads it).
    processed: AtomicU64,
    /// The last flush target this thread wrote a marker for.
    acked: AtomicU64,
    /// The last window request this thread answered (checkpoints).
    dumped: AtomicU64,
    sleeping: AtomicBool,
    /// The thread left its loop (end of input, stop or panic): it will not acknowledge any more.
    exited: AtomicBool,
    comparisons: AtomicU64,
    pairs: AtomicU64,
    /// Tuples in this thread's window portions. Like the two counters above, a statistic published
    /// (Relaxed) whenever the thread runs out of ready tuples, so it is current once a flush was
    /// acknowledged.
    stored: AtomicU64,
}

struct Shared {
    threads: Vec<CachePadded<ThreadState>>,
    /// The flush target: outputs of the first `flush` ready tuples are wanted.
    flush: AtomicU64,
    /// Window requests (checkpoints): a thread with nothing ready answers the latest one by adding its
    /// portions to `windows`.
    dump: AtomicU64,
    windows: Mutex<Vec<[Vec<Partner>; 2]>>,
    /// Set on drop: threads stop without processing what is left.
    stop: AtomicBool,
    caller: Thread,
    caller_waiting: AtomicBool,
    failed: Mutex<Option<String>>,
}

impl Shared {
    fn wake_caller(&self) {
        if self.caller_waiting.load(Ordering::SeqCst) {
            self.caller.unpark();
        }
    }
}

/// The parallel engine.
pub struct ScaleJoin {
    inputs: [Source<JoinKey, JoinTuple>; 2],
    output: Reader<OutKey, OutPair>,
    shared: Arc<Shared>,
    handles: Vec<(Thread, JoinHandle<()>)>,
    inserted: u64,
    /// The threads were joined.
    done: bool,
}

impl ScaleJoin {
    /// Starts `n` processing threads built by `processor(id)`.
    pub fn start(n: usize, processor: impl Fn(usize) -> Processor) -> Result<Self> {
        let (sources, readers) = ScaleGate::new::<JoinKey, JoinTuple>(2, n, LEVELS);
        let (out_sources, mut out_readers) = ScaleGate::new::<OutKey, OutPair>(n, 1, LEVELS);
        let shared = Arc::new(Shared {
            threads: (0..n).map(|_| CachePadded::default()).collect(),
            flush: AtomicU64::new(0),
            dump: AtomicU64::new(0),
            windows: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            caller: thread::current(),
            caller_waiting: AtomicBool::new(false),
            failed: Mutex::new(None),
        });
        let mut handles = Vec::with_capacity(n);
        for (id, (input, output)) in readers.into_iter().zip(out_sources).enumerate() {
            let shared = shared.clone();
            let proc = processor(id);
            // A processor restored from a checkpoint has processed its tuples already: the lag check must
            // see them, or the caller would wait for progress no ready tuple can make.
            shared.threads[id]
                .processed
                .store(proc.processed(), Ordering::Release);
            let handle = thread::Builder::new()
                .name(format!("windgate-join-{id}"))
                .spawn(move || run_thread(id, input, output, proc, shared))
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Poisoned,
                        format!("could not start a join thread: {e}"),
                    )
                })?;
            handles.push((handle.thread().clone(), handle));
        }
        let mut sources = sources.into_iter();
        Ok(ScaleJoin {
            inputs: [sources.next().expect("2"), sources.next().expect("2")],
            output: out_readers.pop().expect("1 reader"),
            shared,
            handles,
            inserted: 0,
            done: false,
        })
    }

    /// Adds one tuple of its side (in the side's key order); `ready` is the length of the merged stream's
    /// ready prefix after it (the caller's [`ReadyMerge`](super::readiness::ReadyMerge) counts it). Drains ready
    /// outputs into `out` now and then, and waits when the threads lag too far behind the ready prefix.
    ///
    /// Only ready tuples count towards the lag: the threads cannot process a tuple the other side has not
    /// passed yet, so a bound on every inserted tuple would wait for progress that cannot happen (a side
    /// pushed alone, or all of one side before the other). Unready tuples are bounded by the joiner's
    /// credits instead.
    pub fn insert(
        &mut self,
        t: JoinTuple,
        ready: u64,
        out: &mut Vec<(u64, OutPair)>,
    ) -> Result<()> {
        let side = t.key.side;
        self.inputs[side.index()].add(t.key, t);
        self.inserted += 1;
        if self.inserted.is_multiple_of(WAKE_EVERY) {
            self.wake_threads();
            self.drain(out);
            if ready.saturating_sub(self.slowest()) > MAX_LAG {
                self.wait(out, |s| ready.saturating_sub(s.slowest()) <= MAX_LAG / 2)?;
            }
        }
        Ok(())
    }

    /// A promise: `side` sends no key below `key` any more.
    pub fn advance(&mut self, side: Side, key: JoinKey) {
        self.inputs[side.index()].advance(key);
    }

    pub fn close(&mut self, side: Side) {
        self.inputs[side.index()].close();
        self.wake_threads();
    }

    /// Every output of the first `ready` tuples of the merged stream, appended to `out` in order.
    pub fn collect(&mut self, ready: u64, out: &mut Vec<(u64, OutPair)>) -> Result<()> {
        if ready > self.shared.flush.load(Ordering::Relaxed) {
            self.shared.flush.store(ready, Ordering::Release);
        }
        self.wake_threads();
        let shared = self.shared.clone();
        self.wait(out, |_| {
            shared.threads.iter().all(|t| {
                t.acked.load(Ordering::Acquire) >= ready || t.exited.load(Ordering::Acquire)
            })
        })?;
        self.drain(out);
        Ok(())
    }

    /// Every thread's share of the windows, as `(merged position, row)` per side in merged order (a
    /// checkpoint's window). Call it between pushes, once [`collect`](Self::collect) returned: every
    /// ready tuple is processed and nothing is being inserted, so each thread answers when it finds
    /// nothing ready, with exactly the state the pushes left.
    pub fn window(&mut self) -> Result<[Vec<Partner>; 2]> {
        let request = self.shared.dump.load(Ordering::Relaxed) + 1;
        self.shared.windows.lock().expect("not poisoned").clear();
        self.shared.dump.store(request, Ordering::SeqCst);
        self.wake_threads();
        let shared = self.shared.clone();
        let mut outputs = vec![];
        self.wait(&mut outputs, |_| {
            shared.threads.iter().all(|t| {
                t.dumped.load(Ordering::Acquire) >= request || t.exited.load(Ordering::Acquire)
            })
        })?;
        if !outputs.is_empty()
            || self
                .shared
                .threads
                .iter()
                .any(|t| t.dumped.load(Ordering::Acquire) < request)
        {
            return Err(Error::new(
                ErrorKind::Internal,
                "snapshot: the join threads did not hand over their windows (a thread stopped, or outputs \
                 were still owed)",
            ));
        }
        let mut window: [Vec<Partner>; 2] = [vec![], vec![]];
        for [l, r] in self.shared.windows.lock().expect("not poisoned").drain(..) {
            window[0].extend(l);
            window[1].extend(r);
        }
        // A thread that answered an earlier, interrupted request just before this one answers twice.
        for w in &mut window {
            w.sort_unstable();
            w.dedup();
        }
        Ok(window)
    }

    /// After both sides closed: every remaining output; joins the threads.
    pub fn finish(&mut self, out: &mut Vec<(u64, OutPair)>) -> Result<()> {
        self.wake_threads();
        loop {
            match self.output.next_ready() {
                NextItem::Item(k, p) => out.push((k.trigger, *p)),
                NextItem::End => break,
                NextItem::Pending => {
                    self.check_failed()?;
                    interrupt::check()?;
                    self.park();
                }
            }
        }
        self.join_threads();
        self.check_failed()
    }

    /// Comparisons and pairs per thread.
    pub fn per_thread(&self) -> Vec<(u64, u64)> {
        self.shared
            .threads
            .iter()
            .map(|t| {
                (
                    t.comparisons.load(Ordering::Relaxed),
                    t.pairs.load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Tuples stored in every thread's window portions (as last published).
    pub fn stored(&self) -> u64 {
        self.shared
            .threads
            .iter()
            .map(|t| t.stored.load(Ordering::Relaxed))
            .sum()
    }

    fn drain(&mut self, out: &mut Vec<(u64, OutPair)>) {
        while let NextItem::Item(k, p) = self.output.next_ready() {
            out.push((k.trigger, *p));
        }
    }

    fn slowest(&self) -> u64 {
        self.shared
            .threads
            .iter()
            .map(|t| t.processed.load(Ordering::Acquire))
            .min()
            .unwrap_or(self.inserted)
    }

    fn wake_threads(&self) {
        // Pairs with the fence a thread runs between announcing its sleep and its last poll.
        fence(Ordering::SeqCst);
        for (t, (thread, _)) in self.shared.threads.iter().zip(&self.handles) {
            if t.sleeping.load(Ordering::SeqCst) {
                thread.unpark();
            }
        }
    }

    /// Drains outputs (so SG_out stays short) until `done` holds, a thread failed or the caller is
    /// interrupted. `done` must only wait for work the threads can do on their own (ready tuples, flush
    /// markers): nothing the caller would have to insert.
    fn wait(&mut self, out: &mut Vec<(u64, OutPair)>, done: impl Fn(&Self) -> bool) -> Result<()> {
        let backoff = Backoff::new();
        while !done(self) {
            self.check_failed()?;
            interrupt::check()?;
            self.drain(out);
            self.wake_threads();
            if backoff.is_completed() {
                self.park();
            } else {
                backoff.snooze();
            }
        }
        Ok(())
    }

    fn park(&self) {
        self.shared.caller_waiting.store(true, Ordering::SeqCst);
        thread::park_timeout(PARK);
        self.shared.caller_waiting.store(false, Ordering::SeqCst);
    }

    fn check_failed(&self) -> Result<()> {
        match &*self.shared.failed.lock().expect("not poisoned") {
            Some(msg) => Err(Error::new(
                ErrorKind::Poisoned,
                format!("a join thread failed: {msg}"),
            )),
            None => Ok(()),
        }
    }

    fn join_threads(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        for (_, h) in self.handles.drain(..) {
            // A panic was caught inside the thread and recorded in `failed`.
            let _ = h.join();
        }
    }
}

impl Drop for ScaleJoin {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for (thread, _) in &self.handles {
            thread.unpark();
        }
        self.join_threads();
    }
}

/// One processing thread: Algorithm 1's loop, plus flush markers, sleeping and panic capture.
fn run_thread(
    id: usize,
    mut input: Reader<JoinKey, JoinTuple>,
    mut output: Source<OutKey, OutPair>,
    mut proc: Processor,
    shared: Arc<Shared>,
) {
    let me = &shared.threads[id];
    let result = catch_unwind(AssertUnwindSafe(|| {
        let backoff = Backoff::new();
        let mut last_ts = i64::MIN;
        let mut armed = false;
        while !shared.stop.load(Ordering::Relaxed) {
            match input.next_ready() {
                NextItem::Item(_, t) => {
                    if armed {
                        me.sleeping.store(false, Ordering::SeqCst);
                        armed = false;
                    }
                    proc.process(t, |k, p| output.add(k, p));
                    last_ts = t.key.ts;
                    me.processed.store(proc.processed(), Ordering::Release);
                    backoff.reset();
                }
                NextItem::End => break,
                NextItem::Pending => {
                    me.comparisons.store(proc.comparisons, Ordering::Relaxed);
                    me.pairs.store(proc.pairs, Ordering::Relaxed);
                    me.stored.store(proc.stored() as u64, Ordering::Relaxed);
                    let target = shared.flush.load(Ordering::Acquire);
                    if target > me.acked.load(Ordering::Relaxed) && proc.processed() >= target {
                        output.advance(OutKey {
                            ts: last_ts,
                            trigger: target - 1,
                            partner: u64::MAX,
                        });
                        me.acked.store(target, Ordering::Release);
                        shared.wake_caller();
                        continue;
                    }
                    let request = shared.dump.load(Ordering::Acquire);
                    if request > me.dumped.load(Ordering::Relaxed) {
                        shared
                            .windows
                            .lock()
                            .expect("not poisoned")
                            .push(proc.window());
                        me.dumped.store(request, Ordering::Release);
                        shared.wake_caller();
                        continue;
                    }
                    if !backoff.is_completed() {
                        backoff.snooze();
                    } else if !armed {
                        // Announce the sleep, then poll once more: the caller publishes tuples (or a flush
                        // target) before it reads `sleeping`, so with the fences on both sides either it
                        // sees us asleep and unparks us, or our next poll sees its work (Dekker).
                        me.sleeping.store(true, Ordering::SeqCst);
                        fence(Ordering::SeqCst);
                        armed = true;
                    } else {
                        thread::park_timeout(IDLE_PARK);
                        me.sleeping.store(false, Ordering::SeqCst);
                        armed = false;
                    }
                }
            }
        }
    }));
    me.comparisons.store(proc.comparisons, Ordering::Relaxed);
    me.pairs.store(proc.pairs, Ordering::Relaxed);
    if let Err(panic) = result {
        *shared.failed.lock().expect("not poisoned") = Some(panic_message(&panic));
    }
    // Dropping `output` closes this thread's SG_out source, so the caller's reader can reach the end.
    drop(output);
    me.exited.store(true, Ordering::Release);
    shared.wake_caller();
}
