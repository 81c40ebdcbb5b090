//! The three operator kinds of an ordered pipeline (those of Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream
//! Processing on Shared-Memory Multicores*): what each may assume about the order it sees inputs in, and therefore
//! how many workers the runtime may put on it.
//!
//! Every operator is *unary*: one input item becomes zero or more output items (selectivity 0, 1 or more),
//! and every operator of a chain takes and produces the same item type `T` (rows, or whole Arrow batches:
//! see `columnar`). `process` returns an error for bad data (a windgate error naming the column and row); the
//! run stops with it. Whatever the kind, a pipeline's output equals a sequential run over the inputs in
//! arrival order ([`super::Pipeline::run_sequential`]); the kind only says which parallelism keeps that true.

use std::any::Any;

use crate::error::Result;
use std::hash::BuildHasher;

/// A pure function of one input: any number of workers, inputs in any order; the reorder buffer restores
/// the output order.
pub trait Stateless<T>: Send + Sync {
    fn name(&self) -> &str;
    fn process(&self, input: T, out: &mut Vec<T>) -> Result<()>;
}

/// One state over the whole stream, fed in arrival order: one worker at a time.
pub trait Stateful<T>: Send {
    fn name(&self) -> &str;
    fn process(&mut self, input: T, out: &mut Vec<T>) -> Result<()>;
    /// End of stream: whatever the operator still holds (open windows, running results).
    fn finish(&mut self, _out: &mut Vec<T>) -> Result<()> {
        Ok(())
    }
}

/// Disjoint state per partition: items of one partition are processed one at a time in arrival order,
/// different partitions in parallel (up to `partitions()` workers).
///
/// An input is *routed* into parts, each for one partition. A row goes to one partition; a columnar batch
/// may be cut into one part per partition its rows hash to. The outputs of one input's parts are put back
/// together by [`Partitioned::combine`], so the operator decides the output order (a columnar operator
/// merges by input row, which makes the result independent of how the stream was cut into batches).
pub trait Partitioned<T>: Send + Sync {
    /// Per-partition state, created once per run.
    type State: Send + 'static;

    fn name(&self) -> &str;
    fn partitions(&self) -> usize;
    fn new_state(&self, partition: usize) -> Self::State;
    /// Pushes `(partition, part)` for each part of `input`, in the order they must be processed and
    /// combined. Zero parts is allowed (the input produces nothing).
    fn route(&self, input: T, parts: &mut Vec<(usize, T)>) -> Result<()>;
    fn process(&self, state: &mut Self::State, input: T, out: &mut Vec<T>) -> Result<()>;
    /// The unit of one input from its parts' outputs, in route order. Default: concatenation.
    fn combine(&self, parts: Vec<Vec<T>>, out: &mut Vec<T>) -> Result<()> {
        parts.into_iter().for_each(|p| out.extend(p));
        Ok(())
    }
    /// End of stream for one partition; the partitions' outputs (in partition order) then go through
    /// [`Partitioned::combine`] as one unit.
    fn finish(&self, _state: &mut Self::State, _out: &mut Vec<T>) -> Result<()> {
        Ok(())
    }
}

/// Maps a key to one of `p` partitions (hash mod p, or ranges for skewed key spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partitioner {
    /// `hash(key) mod partitions`.
    Hash { partitions: usize },
    /// Partition `i` holds keys below `bounds[i]` (and at or above `bounds[i - 1]`); the last partition
    /// holds the rest. `bounds` must be sorted; `bounds.len() + 1` partitions.
    Range { bounds: Vec<u64> },
}

impl Partitioner {
    pub fn partitions(&self) -> usize {
        match self {
            Partitioner::Hash { partitions } => (*partitions).max(1),
            Partitioner::Range { bounds } => bounds.len() + 1,
        }
    }

    pub fn partition(&self, key: u64) -> usize {
        match self {
            Partitioner::Hash { partitions } => {
                // A fixed seed: the partition of a key is the same in every run and process.
                let h = foldhash::fast::FixedState::with_seed(0x9e37_79b9).hash_one(key);
                (h % (*partitions).max(1) as u64) as usize
            }
            Partitioner::Range { bounds } => bounds.partition_point(|b| *b <= key),
        }
    }
}

/// A partitioned operator from closures: a key selector, a partitioner, a per-partition state and a step.
/// Each input goes whole to its key's partition.
///
/// ```
/// use windgate_core::runtime::pipeline::{Keyed, Partitioner, Pipeline, PipelineOptions};
/// // Running count per key (key = value mod 3), emitted as (value, count so far).
/// let counts = Keyed::new(
///     "count",
///     Partitioner::Hash { partitions: 4 },
///     |v: &(u64, u64)| v.0 % 3,
///     |_| std::collections::HashMap::<u64, u64>::new(),
///     |seen, v, out| {
///         let c = seen.entry(v.0 % 3).or_insert(0);
///         *c += 1;
///         out.push((v.0, *c));
///     },
/// );
/// let pipeline = Pipeline::new().partitioned(counts);
/// let out = pipeline.run((0..6).map(|v| (v, 0)), &PipelineOptions::default()).unwrap();
/// assert_eq!(out.items, vec![(0, 1), (1, 1), (2, 1), (3, 2), (4, 2), (5, 2)]);
/// ```
pub struct Keyed<T, S, K, I, P> {
    name: String,
    partitioner: Partitioner,
    key: K,
    init: I,
    step: P,
    _marker: std::marker::PhantomData<fn(T) -> S>,
}

impl<T, S, K, I, P> Keyed<T, S, K, I, P>
where
    K: Fn(&T) -> u64 + Send + Sync,
    I: Fn(usize) -> S + Send + Sync,
    P: Fn(&mut S, T, &mut Vec<T>) + Send + Sync,
{
    pub fn new(name: &str, partitioner: Partitioner, key: K, init: I, step: P) -> Self {
        Self {
            name: name.to_string(),
            partitioner,
            key,
            init,
            step,
            _marker: std::marker::PhantomData,
        }
    }
}

impl<T, S, K, I, P> Partitioned<T> for Keyed<T, S, K, I, P>
where
    S: Send + 'static,
    K: Fn(&T) -> u64 + Send + Sync,
    I: Fn(usize) -> S + Send + Sync,
    P: Fn(&mut S, T, &mut Vec<T>) + Send + Sync,
{
    type State = S;

    fn name(&self) -> &str {
        &self.name
    }
    fn partitions(&self) -> usize {
        self.partitioner.partitions()
    }
    fn new_state(&self, partition: usize) -> S {
        (self.init)(partition)
    }
    fn route(&self, input: T, parts: &mut Vec<(usize, T)>) -> Result<()> {
        let p = self.partitioner.partition((self.key)(&input));
        parts.push((p, input));
        Ok(())
    }
    fn process(&self, state: &mut S, input: T, out: &mut Vec<T>) -> Result<()> {
        (self.step)(state, input, out);
        Ok(())
    }
}

/// A stateless operator from a closure.
pub struct Map<F> {
    name: String,
    f: F,
}

impl<F> Map<F> {
    pub fn new(name: &str, f: F) -> Self {
        Self {
            name: name.to_string(),
            f,
        }
    }
}

impl<T, F: Fn(T, &mut Vec<T>) + Send + Sync> Stateless<T> for Map<F> {
    fn name(&self) -> &str {
        &self.name
    }
    fn process(&self, input: T, out: &mut Vec<T>) -> Result<()> {
        (self.f)(input, out);
        Ok(())
    }
}

/// A partitioned operator with its state type erased, so that a chain can hold operators of different
/// state types. The state is downcast once per part (a pointer compare).
pub(crate) trait ErasedPartitioned<T>: Send + Sync {
    fn name(&self) -> &str;
    fn partitions(&self) -> usize;
    fn new_state(&self, partition: usize) -> Box<dyn Any + Send>;
    fn route(&self, input: T, parts: &mut Vec<(usize, T)>) -> Result<()>;
    fn process(&self, state: &mut (dyn Any + Send), input: T, out: &mut Vec<T>) -> Result<()>;
    fn combine(&self, parts: Vec<Vec<T>>, out: &mut Vec<T>) -> Result<()>;
    fn finish(&self, state: &mut (dyn Any + Send), out: &mut Vec<T>) -> Result<()>;
}

impl<T, P: Partitioned<T>> ErasedPartitioned<T> for P {
    fn name(&self) -> &str {
        Partitioned::name(self)
    }
    fn partitions(&self) -> usize {
        Partitioned::partitions(self).max(1)
    }
    fn new_state(&self, partition: usize) -> Box<dyn Any + Send> {
        Box::new(Partitioned::new_state(self, partition))
    }
    fn route(&self, input: T, parts: &mut Vec<(usize, T)>) -> Result<()> {
        Partitioned::route(self, input, parts)
    }
    fn process(&self, state: &mut (dyn Any + Send), input: T, out: &mut Vec<T>) -> Result<()> {
        let state = state
            .downcast_mut::<P::State>()
            .expect("a partition's state has its operator's type");
        Partitioned::process(self, state, input, out)
    }
    fn combine(&self, parts: Vec<Vec<T>>, out: &mut Vec<T>) -> Result<()> {
        Partitioned::combine(self, parts, out)
    }
    fn finish(&self, state: &mut (dyn Any + Send), out: &mut Vec<T>) -> Result<()> {
        let state = state
            .downcast_mut::<P::State>()
            .expect("a partition's state has its operator's type");
        Partitioned::finish(self, state, out)
    }
}

/// One operator of a chain, by kind.
pub(crate) enum Op<T> {
    Stateless(Box<dyn Stateless<T>>),
    Partitioned(Box<dyn ErasedPartitioned<T>>),
    Stateful(Box<dyn Stateful<T>>),
}

impl<T> Op<T> {
    pub(crate) fn name(&self) -> &str {
        match self {
            Op::Stateless(o) => o.name(),
            Op::Partitioned(o) => o.name(),
            Op::Stateful(o) => o.name(),
        }
    }

    pub(crate) fn kind(&self) -> OpKind {
        match self {
            Op::Stateless(_) => OpKind::Stateless,
            Op::Partitioned(o) => OpKind::Partitioned {
                partitions: o.partitions(),
            },
            Op::Stateful(_) => OpKind::Stateful,
        }
    }
}

/// An operator's kind as reported in stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Stateless,
    Partitioned { partitions: usize },
    Stateful,
}

impl OpKind {
    pub fn label(&self) -> &'static str {
        match self {
            OpKind::Stateless => "stateless",
            OpKind::Partitioned { .. } => "partitioned",
            OpKind::Stateful => "stateful",
        }
    }
}
