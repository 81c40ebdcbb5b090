//! The parallel executor (the runtime design and dynamic scheduling of Prasaad, Ramalingam, Rajan, *Scaling
//! Ordered Stream Processing on Shared-Memory Multicores*): `threads` workers, each asking the central scheduler
//! for an operator and working one time slice on it; the caller's thread feeds the first operator (bounded by
//! `max_pending`), collects egress in order, and runs end of stream operator by operator.
//!
//! **End of stream.** Operator `i`'s `finish` may only run once nothing can reach it any more: operators
//! `0..=i` have empty worklists and no allotted worker (checked under the scheduler's lock). Its outputs
//! then take the next serial and flow on like any other unit; operator `i + 1` is finished the same way.

use std::time::{Duration, Instant};

use super::operator::Op;
use super::options::PipelineOptions;
use super::scheduler::{OpSched, Scheduler};
use super::stage::{Done, Downstream, Failure, Marker, Payload, Stage};
use super::stats::{OpStats, PipelineStats};
use crate::error::{Error, ErrorKind, Result};
use crate::threads::panic_message;
use crossbeam_queue::SegQueue;
use std::sync::atomic::{AtomicBool, Ordering};

struct Run<T> {
    stages: Vec<Stage<T>>,
    egress: SegQueue<Payload<T>>,
    scheduler: Scheduler,
    failure: Failure,
    /// Set by the caller when the run is over (or failed): workers leave.
    stop: AtomicBool,
}

impl<T: Send> Downstream<T> for Run<T> {
    fn enqueue(&self, op: usize, payload: Payload<T>) {
        match self.stages.get(op) {
            Some(stage) => stage.enqueue(payload, self),
            None => self.egress.push(match payload {
                Payload::Marker(m) => Payload::Marker(m.exited()),
                item => item,
            }),
        }
    }

    fn fail(&self, e: Error) {
        self.failure.fail(e)
    }

    fn aborted(&self) -> bool {
        self.failure.aborted()
    }
}

impl<T: Send> Run<T> {
    fn len(&self, i: usize) -> usize {
        self.stages[i].len()
    }

    fn worker(&self) {
        let backoff = crossbeam_utils::Backoff::new();
        while !self.stop.load(Ordering::Acquire) && !self.failure.aborted() {
            let Some(a) = self.scheduler.acquire(|i| self.len(i)) else {
                idle(&backoff);
                continue;
            };
            backoff.reset();
            let start = Instant::now();
            let done = self.stages[a.op].work(a.op, a.budget, a.slot, self);
            let counts = done.as_ref().map_or(Done::default(), |d| *d);
            self.scheduler.release(a, start.elapsed(), counts);
            if let Err(e) = done {
                self.failure.fail(e);
            }
        }
    }

    /// Egress to the sink, in order; markers become latencies. True if anything came out.
    fn drain(&self, sink: &mut dyn FnMut(T), latencies: &mut Vec<Duration>) -> bool {
        let mut any = false;
        while let Some(p) = self.egress.pop() {
            any = true;
            match p {
                Payload::Item(item) => sink(item),
                Payload::Marker(m) => latencies.push(m.latency()),
            }
        }
        any
    }
}

/// A polling thread with nothing to do: spin, yield, then sleep briefly.
fn idle(backoff: &crossbeam_utils::Backoff) {
    if backoff.is_completed() {
        std::thread::sleep(Duration::from_micros(50));
    } else {
        backoff.snooze();
    }
}

pub(crate) fn run<T: Send + 'static>(
    ops: Vec<Op<T>>,
    input: impl IntoIterator<Item = T>,
    options: &PipelineOptions,
    sink: &mut dyn FnMut(T),
    check: &mut dyn FnMut() -> Result<()>,
) -> Result<PipelineStats> {
    let start = Instant::now();
    let stages: Vec<Stage<T>> = ops.into_iter().map(|o| Stage::new(o, options)).collect();
    let sched = stages
        .iter()
        .map(|s| {
            let (max_dop, slots) = s.parallelism(options.threads);
            OpSched::new(max_dop, slots)
        })
        .collect();
    let run = Run {
        stages,
        egress: SegQueue::new(),
        scheduler: Scheduler::new(sched, options),
        failure: Failure::new(),
        stop: AtomicBool::new(false),
    };
    let mut latencies = Vec::new();
    let mut counts = (0u64, 0u64);
    let result = std::thread::scope(|s| {
        for w in 0..options.threads {
            let run = &run;
            std::thread::Builder::new()
                .name(format!("windgate-pipeline-{w}"))
                .spawn_scoped(s, move || {
                    if let Err(p) =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.worker()))
                    {
                        run.failure.fail(Error::new(
                            ErrorKind::Poisoned,
                            format!("a pipeline worker panicked: {}", panic_message(&p)),
                        ));
                    }
                })
                .expect("spawn a pipeline worker");
        }
        let mut counted = |t: T| {
            counts.1 += 1;
            sink(t)
        };
        let r = drive(
            &run,
            input,
            options,
            &mut counted,
            check,
            &mut latencies,
            &mut counts.0,
        );
        run.stop.store(true, Ordering::Release);
        r
    });
    if let Some(e) = run.failure.take() {
        return Err(e);
    }
    result?;
    let ops = run
        .scheduler
        .snapshot()
        .into_iter()
        .zip(&run.stages)
        .map(|(o, s)| OpStats {
            inputs: o.inputs,
            outputs: o.outputs,
            busy: o.busy,
            allotments: o.allotments,
            max_workers: o.max_workers,
            refused: s.refused(),
            ..OpStats::new(s.name(), s.kind())
        })
        .collect();
    Ok(PipelineStats {
        executor: "parallel",
        threads: options.threads,
        scheduler: options.scheduler.name(),
        reorder: options.reorder.name(),
        partitioning: options.partitioning.name(),
        inputs: counts.0,
        outputs: counts.1,
        elapsed: start.elapsed(),
        ops,
        latencies,
    })
}

/// The caller's part: feed, collect, check for Ctrl-C, then end of stream operator by operator.
fn drive<T: Send>(
    run: &Run<T>,
    input: impl IntoIterator<Item = T>,
    options: &PipelineOptions,
    sink: &mut dyn FnMut(T),
    check: &mut dyn FnMut() -> Result<()>,
    latencies: &mut Vec<Duration>,
    fed: &mut u64,
) -> Result<()> {
    let mut input = input.into_iter();
    let backoff = crossbeam_utils::Backoff::new();
    let mut last_check = Instant::now();
    let mut poll = |busy: bool, latencies: &mut Vec<Duration>, sink: &mut dyn FnMut(T)| {
        let drained = run.drain(sink, latencies);
        if run.failure.aborted() {
            return Err(super::stage::aborted());
        }
        if last_check.elapsed() >= Duration::from_millis(5) {
            last_check = Instant::now();
            check().inspect_err(|e| run.failure.fail(e.clone()))?;
        }
        if busy || drained {
            backoff.reset();
        } else {
            idle(&backoff);
        }
        Ok(())
    };
    if run.stages.is_empty() {
        for item in input {
            *fed += 1;
            sink(item);
        }
        return Ok(());
    }
    let mut exhausted = false;
    while !exhausted {
        let mut busy = false;
        while run.len(0) < options.max_pending {
            let Some(item) = input.next() else {
                exhausted = true;
                break;
            };
            busy = true;
            *fed += 1;
            run.enqueue(0, Payload::Item(item));
            if options.marker_every > 0 && (*fed).is_multiple_of(options.marker_every) {
                run.enqueue(0, Payload::Marker(Marker::new()));
            }
        }
        poll(busy, latencies, sink)?;
    }
    for i in 0..run.stages.len() {
        while !run.scheduler.quiescent(i, |j| run.len(j)) {
            poll(false, latencies, sink)?;
        }
        let t = Instant::now();
        let outputs = run.stages[i].finish(i, run)?;
        run.scheduler.record(i, t.elapsed(), outputs);
    }
    let last = run.stages.len() - 1;
    while !run.scheduler.quiescent(last, |j| run.len(j)) {
        poll(false, latencies, sink)?;
    }
    run.drain(sink, latencies);
    Ok(())
}
