//! One operator at run time: its worklist, its reorder buffer, and how its outputs reach the next operator
//! (the runtime of Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory Multicores*).
//!
//! * Stateless: an MPMC queue of `(serial, item)`; any number of workers; each output unit goes through
//!   the reorder buffer.
//! * Partitioned: the hybrid queue (or the partitioned-queue baseline) of *parts*; an input routed into
//!   several parts gets a fan-in record, and whoever finishes its last part combines the parts' outputs
//!   and deposits the unit. Per-partition FIFO order is serial order, since parts are added in serial order.
//! * Stateful: a queue and one worker at a time (the scheduler's `M_i = 1`); outputs go straight on.
//!
//! **Serials and the single producer.** An operator's inputs get serials 1, 2, 3, ... as they are added, and only
//! one thread adds to an operator at a time: the caller for the first operator; for the others, the upstream
//! reorder buffer's drainer (the flag holder, or the lock holder), or the upstream stateful operator's single
//! worker, or the caller at end of stream when everything upstream is idle. Successive producers are ordered by
//! that flag, lock or allotment, so serial order is FIFO order (the paper's correctness argument).
//!
//! **Deadlock freedom.** A worker deposits a unit it has finished and retries while the buffer is full. The unit
//! with serial `next` is then always held by a worker that is processing it (stateless: it was dequeued earlier;
//! hybrid: its master entries were taken earlier, by a worker still inside that partition or delegated to one), so
//! the retry ends (the paper's progress argument for the full buffer). The baseline cannot argue that (a worker
//! owns several partitions), so it admits a part only if its serial fits the buffer and never retries.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_queue::SegQueue;

use super::operator::{ErasedPartitioned, Op, OpKind, Stateful, Stateless};
use super::options::{Partitioning, PipelineOptions, ReorderScheme};
use crate::error::{Error, ErrorKind, Result};
use crate::order::hybrid_queue::{HybridQueue, PartitionedQueue};
use crate::order::reorder::{LockedReorder, Reorder, ReorderBuffer};

/// A latency marker: flows through every operator in order, stamped when the first one takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Marker {
    start: Option<Instant>,
    end: Option<Instant>,
}

impl Marker {
    pub(crate) fn new() -> Self {
        Self {
            start: None,
            end: None,
        }
    }

    fn stamped(self) -> Self {
        Self {
            start: self.start.or_else(|| Some(Instant::now())),
            ..self
        }
    }

    /// Leaving the last operator (egress): the end of its processing latency, whenever the caller's thread
    /// gets to collect it.
    pub(crate) fn exited(self) -> Self {
        Self {
            end: Some(Instant::now()),
            ..self
        }
    }

    pub(crate) fn latency(&self) -> std::time::Duration {
        match (self.start, self.end) {
            (Some(s), Some(e)) => e.saturating_duration_since(s),
            _ => std::time::Duration::ZERO,
        }
    }
}

/// What travels between operators.
pub(crate) enum Payload<T> {
    Item(T),
    Marker(Marker),
}

/// The outputs of one input (or one marker): one serial, emitted together.
pub(crate) struct Unit<T> {
    items: Vec<T>,
    marker: Option<Marker>,
}

/// Outputs of an input's parts, gathered until the last part is done.
struct FanIn<T> {
    remaining: AtomicUsize,
    outs: Mutex<Vec<Vec<T>>>,
}

enum PartBody<T> {
    Item {
        index: usize,
        item: T,
    },
    /// An input routed into no parts: its unit is `combine([])`.
    NoParts,
    Marker(Marker),
}

struct Part<T> {
    serial: u64,
    body: PartBody<T>,
    fan: Option<Arc<FanIn<T>>>,
}

type States = Box<dyn Any + Send>;

// One per operator per run: the variants' size difference costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Work<T> {
    Stateless {
        op: Box<dyn Stateless<T>>,
        queue: SegQueue<(u64, Payload<T>)>,
        len: AtomicUsize,
    },
    Stateful {
        op: Mutex<Box<dyn Stateful<T>>>,
        queue: SegQueue<Payload<T>>,
        len: AtomicUsize,
    },
    Hybrid {
        op: Box<dyn ErasedPartitioned<T>>,
        queue: HybridQueue<Part<T>, States>,
    },
    Owned {
        op: Box<dyn ErasedPartitioned<T>>,
        queue: PartitionedQueue<Part<T>, States>,
    },
}

#[allow(clippy::large_enum_variant)]
enum Reorderer<T> {
    NonBlocking(ReorderBuffer<Unit<T>>),
    Locked(LockedReorder<Unit<T>>),
}

impl<T: Send> Reorderer<T> {
    fn get(&self) -> &dyn Reorder<Unit<T>> {
        match self {
            Reorderer::NonBlocking(r) => r,
            Reorderer::Locked(r) => r,
        }
    }
}

/// Items processed and produced in one allotment.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Done {
    /// Inputs whose unit completed here (the operator's input count).
    pub inputs: u64,
    pub outputs: u64,
    /// Worklist entries processed (parts of partitioned inputs, markers): what the time slice's budget
    /// counts, so the scheduler's per-entry cost is busy time over this.
    pub taken: u64,
}

pub(crate) struct Stage<T> {
    name: String,
    kind: OpKind,
    work: Work<T>,
    /// Last serial given to an input (single producer: see the module doc).
    serial: AtomicU64,
    reorder: Option<Reorderer<T>>,
    slots: u64,
}

/// What a stage needs from the run around it: the next stage, egress, and the failure flag.
pub(crate) trait Downstream<T> {
    /// Adds `payload` to operator `op`'s worklist (`op == stages` is egress).
    fn enqueue(&self, op: usize, payload: Payload<T>);
    fn fail(&self, e: Error);
    fn aborted(&self) -> bool;
}

impl<T: Send> Stage<T> {
    pub(crate) fn new(op: Op<T>, options: &PipelineOptions) -> Self {
        let (name, kind) = (op.name().to_string(), op.kind());
        let reorder = || match options.reorder {
            ReorderScheme::NonBlocking => {
                Reorderer::NonBlocking(ReorderBuffer::new(options.reorder_slots))
            }
            ReorderScheme::Locked => Reorderer::Locked(LockedReorder::default()),
        };
        let (work, reorder) = match op {
            Op::Stateless(op) => (
                Work::Stateless {
                    op,
                    queue: SegQueue::new(),
                    len: AtomicUsize::new(0),
                },
                Some(reorder()),
            ),
            Op::Stateful(op) => (
                Work::Stateful {
                    op: Mutex::new(op),
                    queue: SegQueue::new(),
                    len: AtomicUsize::new(0),
                },
                None,
            ),
            Op::Partitioned(op) => {
                let p = op.partitions();
                let work = match options.partitioning {
                    Partitioning::Hybrid => Work::Hybrid {
                        queue: HybridQueue::new(p, |i| op.new_state(i)),
                        op,
                    },
                    Partitioning::Partitioned => Work::Owned {
                        queue: PartitionedQueue::new(p, p.min(options.threads), |i| {
                            op.new_state(i)
                        }),
                        op,
                    },
                };
                (work, Some(reorder()))
            }
        };
        let slots = match &reorder {
            Some(Reorderer::NonBlocking(r)) => r.capacity() as u64,
            _ => u64::MAX,
        };
        Self {
            name,
            kind,
            work,
            serial: AtomicU64::new(0),
            reorder,
            slots,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn kind(&self) -> OpKind {
        self.kind
    }

    /// `M_i`, and the baseline's worker slots (0 otherwise).
    pub(crate) fn parallelism(&self, threads: usize) -> (usize, usize) {
        match &self.work {
            Work::Stateless { .. } => (threads, 0),
            Work::Stateful { .. } => (1, 0),
            Work::Hybrid { queue, .. } => (queue.partitions(), 0),
            Work::Owned { queue, .. } => (queue.workers(), queue.workers()),
        }
    }

    /// Items waiting (`I_i`).
    pub(crate) fn len(&self) -> usize {
        match &self.work {
            Work::Stateless { len, .. } | Work::Stateful { len, .. } => len.load(Ordering::Acquire),
            Work::Hybrid { queue, .. } => queue.len(),
            Work::Owned { queue, .. } => queue.len(),
        }
    }

    /// Deposits refused because the buffer was full.
    pub(crate) fn refused(&self) -> u64 {
        match &self.reorder {
            Some(Reorderer::NonBlocking(r)) => r.refused(),
            _ => 0,
        }
    }

    fn next_serial(&self) -> u64 {
        self.serial.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Adds an input (single producer). A partitioned operator's route error fails the run.
    pub(crate) fn enqueue(&self, payload: Payload<T>, down: &dyn Downstream<T>) {
        match &self.work {
            Work::Stateless { queue, len, .. } => {
                let serial = self.next_serial();
                len.fetch_add(1, Ordering::AcqRel); // before the push: a consumer never sees it negative
                queue.push((serial, payload));
            }
            Work::Stateful { queue, len, .. } => {
                len.fetch_add(1, Ordering::AcqRel);
                queue.push(payload);
            }
            Work::Hybrid { op, queue } => {
                self.route(op.as_ref(), payload, down, |p, part| queue.add(p, part))
            }
            Work::Owned { op, queue } => {
                self.route(op.as_ref(), payload, down, |p, part| queue.add(p, part))
            }
        }
    }

    fn route(
        &self,
        op: &dyn ErasedPartitioned<T>,
        payload: Payload<T>,
        down: &dyn Downstream<T>,
        add: impl Fn(usize, Part<T>),
    ) {
        let serial = self.next_serial();
        // Inputs without parts (and markers) still take their serial's place in a partition's FIFO.
        let spread = (serial % op.partitions() as u64) as usize;
        let lone = |body| Part {
            serial,
            body,
            fan: None,
        };
        let item = match payload {
            Payload::Marker(m) => return add(spread, lone(PartBody::Marker(m))),
            Payload::Item(item) => item,
        };
        let mut parts = Vec::new();
        if let Err(e) = op.route(item, &mut parts) {
            down.fail(e);
            return add(spread, lone(PartBody::NoParts));
        }
        match parts.len() {
            0 => add(spread, lone(PartBody::NoParts)),
            1 => {
                let (p, item) = parts.pop().expect("one part");
                add(p, lone(PartBody::Item { index: 0, item }))
            }
            k => {
                let fan = Arc::new(FanIn {
                    remaining: AtomicUsize::new(k),
                    outs: Mutex::new((0..k).map(|_| Vec::new()).collect()),
                });
                for (index, (p, item)) in parts.into_iter().enumerate() {
                    add(
                        p,
                        Part {
                            serial,
                            body: PartBody::Item { index, item },
                            fan: Some(fan.clone()),
                        },
                    );
                }
            }
        }
    }

    /// One allotment: up to `budget` items of this operator.
    pub(crate) fn work(
        &self,
        me: usize,
        budget: usize,
        slot: usize,
        down: &dyn Downstream<T>,
    ) -> Result<Done> {
        let mut done = Done::default();
        match &self.work {
            Work::Stateless { op, queue, len } => {
                for _ in 0..budget {
                    let Some((serial, payload)) = queue.pop() else {
                        break;
                    };
                    len.fetch_sub(1, Ordering::AcqRel);
                    done.taken += 1;
                    let unit = match payload {
                        Payload::Marker(m) => Unit {
                            items: Vec::new(),
                            marker: Some(m.stamped()),
                        },
                        Payload::Item(item) => {
                            let mut items = Vec::new();
                            op.process(item, &mut items)?;
                            done.inputs += 1;
                            done.outputs += items.len() as u64;
                            Unit {
                                items,
                                marker: None,
                            }
                        }
                    };
                    self.deposit(me, serial, unit, down)?;
                }
            }
            Work::Stateful { op, queue, len } => {
                let mut op = op.lock().unwrap_or_else(|e| e.into_inner());
                let mut items = Vec::new();
                for _ in 0..budget {
                    let Some(payload) = queue.pop() else {
                        break;
                    };
                    len.fetch_sub(1, Ordering::AcqRel);
                    done.taken += 1;
                    match payload {
                        Payload::Marker(m) => down.enqueue(me + 1, Payload::Marker(m.stamped())),
                        Payload::Item(item) => {
                            op.process(item, &mut items)?;
                            done.inputs += 1;
                            done.outputs += items.len() as u64;
                            for o in items.drain(..) {
                                down.enqueue(me + 1, Payload::Item(o));
                            }
                        }
                    }
                }
            }
            Work::Hybrid { op, queue } => {
                let mut failed = None;
                queue.consume(budget, |_, state, part| {
                    if failed.is_none()
                        && let Err(e) = self.part(me, op.as_ref(), state, part, &mut done, down)
                    {
                        failed = Some(e);
                    }
                });
                failed.map_or(Ok(()), Err)?;
            }
            Work::Owned { op, queue } => {
                let mut failed = None;
                let window = |part: &Part<T>| {
                    self.reorder.as_ref().is_none_or(|r| {
                        part.serial < r.get().next_serial().saturating_add(self.slots)
                    })
                };
                queue.consume_admitted(slot, budget, window, |_, state, part| {
                    if failed.is_none()
                        && let Err(e) = self.part(me, op.as_ref(), state, part, &mut done, down)
                    {
                        failed = Some(e);
                    }
                });
                failed.map_or(Ok(()), Err)?;
            }
        }
        Ok(done)
    }

    /// One part of a partitioned operator's input, with its partition's state.
    fn part(
        &self,
        me: usize,
        op: &dyn ErasedPartitioned<T>,
        state: &mut States,
        part: Part<T>,
        done: &mut Done,
        down: &dyn Downstream<T>,
    ) -> Result<()> {
        done.taken += 1;
        let mut items = Vec::new();
        let marker = match part.body {
            PartBody::Marker(m) => Some(m.stamped()),
            PartBody::NoParts => {
                op.combine(Vec::new(), &mut items)?;
                done.inputs += 1;
                None
            }
            PartBody::Item { index, item } => {
                let mut out = Vec::new();
                op.process(&mut **state, item, &mut out)?;
                match part.fan {
                    None => op.combine(vec![out], &mut items)?,
                    Some(fan) => {
                        fan.outs.lock().unwrap_or_else(|e| e.into_inner())[index] = out;
                        // AcqRel: the last part's finisher sees every other part's outputs.
                        if fan.remaining.fetch_sub(1, Ordering::AcqRel) != 1 {
                            return Ok(());
                        }
                        let outs = std::mem::take(
                            &mut *fan.outs.lock().unwrap_or_else(|e| e.into_inner()),
                        );
                        op.combine(outs, &mut items)?;
                    }
                }
                done.inputs += 1; // an input is counted once, when its unit is complete
                None
            }
        };
        done.outputs += items.len() as u64;
        self.deposit(me, part.serial, Unit { items, marker }, down)
    }

    /// Hands a finished unit to the reorder buffer, retrying while it is full (the paper's caller contract);
    /// whoever drains emits it downstream.
    fn deposit(
        &self,
        me: usize,
        serial: u64,
        unit: Unit<T>,
        down: &dyn Downstream<T>,
    ) -> Result<()> {
        let r = self
            .reorder
            .as_ref()
            .expect("stateless and partitioned operators have a reorder buffer")
            .get();
        let mut emit = |u: Unit<T>| {
            for item in u.items {
                down.enqueue(me + 1, Payload::Item(item));
            }
            if let Some(m) = u.marker {
                down.enqueue(me + 1, Payload::Marker(m));
            }
        };
        let backoff = crossbeam_utils::Backoff::new();
        let mut unit = unit;
        loop {
            match r.send(serial, unit, &mut emit) {
                Ok(()) => return Ok(()),
                Err(u) => unit = u,
            }
            if down.aborted() {
                return Err(aborted());
            }
            backoff.snooze();
        }
    }

    /// End of stream, on the caller's thread while no worker is on this operator or upstream of it.
    pub(crate) fn finish(&self, me: usize, down: &dyn Downstream<T>) -> Result<u64> {
        let mut items = Vec::new();
        match &self.work {
            Work::Stateless { .. } => return Ok(0),
            Work::Stateful { op, .. } => {
                op.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .finish(&mut items)?;
                let n = items.len() as u64;
                for o in items {
                    down.enqueue(me + 1, Payload::Item(o));
                }
                return Ok(n);
            }
            Work::Hybrid { op, queue } => {
                finish_partitions(op.as_ref(), |f| queue.each_state(f), &mut items)?
            }
            Work::Owned { op, queue } => {
                finish_partitions(op.as_ref(), |f| queue.each_state(f), &mut items)?
            }
        }
        let n = items.len() as u64;
        self.deposit(
            me,
            self.next_serial(),
            Unit {
                items,
                marker: None,
            },
            down,
        )?;
        Ok(n)
    }
}

/// Every partition's end-of-stream outputs, in partition order, combined into one unit.
fn finish_partitions<T>(
    op: &dyn ErasedPartitioned<T>,
    each: impl FnOnce(&mut dyn FnMut(usize, &mut States)),
    items: &mut Vec<T>,
) -> Result<()> {
    let mut outs = Vec::new();
    let mut failed = None;
    each(&mut |_, state| {
        let mut o = Vec::new();
        if let Err(e) = op.finish(&mut **state, &mut o) {
            failed.get_or_insert(e);
        }
        outs.push(o);
    });
    failed.map_or(Ok(()), Err)?;
    op.combine(outs, items)
}

pub(crate) fn aborted() -> Error {
    Error::new(ErrorKind::Poisoned, "the pipeline run was stopped")
}

/// The run's failure flag and first error.
pub(crate) struct Failure {
    aborted: AtomicBool,
    first: Mutex<Option<Error>>,
}

impl Failure {
    pub(crate) fn new() -> Self {
        Self {
            aborted: AtomicBool::new(false),
            first: Mutex::new(None),
        }
    }

    pub(crate) fn fail(&self, e: Error) {
        self.first
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        self.aborted.store(true, Ordering::Release);
    }

    pub(crate) fn aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }

    pub(crate) fn take(&self) -> Option<Error> {
        self.first.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}
