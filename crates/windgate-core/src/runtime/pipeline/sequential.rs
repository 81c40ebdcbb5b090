//! The sequential executor: every input through the whole chain, in arrival order, on the caller's thread.
//! It *defines* what a pipeline returns; the parallel executor must return the same items in the same order
//! (Definition 5.1 of Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory
//! Multicores*).

use std::any::Any;
use std::time::Instant;

use super::operator::Op;
use super::stats::{OpStats, PipelineStats};
use crate::error::Result;

/// Runs `ops` over `input`, emitting to `sink`; `check` is called every few thousand inputs (Ctrl-C).
pub(crate) fn run<T>(
    mut ops: Vec<Op<T>>,
    input: impl IntoIterator<Item = T>,
    sink: &mut dyn FnMut(T),
    check: &mut dyn FnMut() -> Result<()>,
) -> Result<PipelineStats> {
    let start = Instant::now();
    let mut states: Vec<Vec<Box<dyn Any + Send>>> = ops.iter().map(new_states).collect();
    let mut stats: Vec<OpStats> = ops
        .iter()
        .map(|o| OpStats::new(o.name(), o.kind()))
        .collect();
    let (mut inputs, mut outputs) = (0u64, 0u64);
    let mut emit = |item: T| {
        outputs += 1;
        sink(item)
    };
    for item in input {
        inputs += 1;
        if inputs % 4096 == 0 {
            check()?;
        }
        push(&mut ops, &mut states, &mut stats, 0, item, &mut emit)?;
    }
    for i in 0..ops.len() {
        let mut out = Vec::new();
        let t = Instant::now();
        finish(&mut ops[i], &mut states[i], &mut out)?;
        stats[i].busy += t.elapsed();
        stats[i].outputs += out.len() as u64;
        for item in out {
            push(&mut ops, &mut states, &mut stats, i + 1, item, &mut emit)?;
        }
    }
    for s in stats.iter_mut() {
        s.max_workers = 1;
    }
    Ok(PipelineStats {
        executor: "sequential",
        threads: 1,
        scheduler: "none",
        reorder: "none",
        partitioning: "none",
        inputs,
        outputs,
        elapsed: start.elapsed(),
        ops: stats,
        latencies: Vec::new(),
    })
}

pub(crate) fn new_states<T>(op: &Op<T>) -> Vec<Box<dyn Any + Send>> {
    match op {
        Op::Partitioned(p) => (0..p.partitions()).map(|i| p.new_state(i)).collect(),
        _ => Vec::new(),
    }
}

/// Item `item` into operator `i` and everything it produces on down the chain (depth first: the order of
/// outputs is the same as breadth first, since each operator sees its inputs in the same order).
fn push<T>(
    ops: &mut [Op<T>],
    states: &mut [Vec<Box<dyn Any + Send>>],
    stats: &mut [OpStats],
    i: usize,
    item: T,
    sink: &mut dyn FnMut(T),
) -> Result<()> {
    if i == ops.len() {
        sink(item);
        return Ok(());
    }
    let mut out = Vec::new();
    let t = Instant::now();
    apply(&mut ops[i], &mut states[i], item, &mut out)?;
    stats[i].busy += t.elapsed();
    stats[i].inputs += 1;
    stats[i].outputs += out.len() as u64;
    for o in out {
        push(ops, states, stats, i + 1, o, sink)?;
    }
    Ok(())
}

/// One input through one operator, all its parts in route order, then combined (always, even for one part:
/// the parallel executor does the same).
fn apply<T>(
    op: &mut Op<T>,
    states: &mut [Box<dyn Any + Send>],
    item: T,
    out: &mut Vec<T>,
) -> Result<()> {
    match op {
        Op::Stateless(o) => o.process(item, out),
        Op::Stateful(o) => o.process(item, out),
        Op::Partitioned(o) => {
            let mut parts = Vec::new();
            o.route(item, &mut parts)?;
            let outs = parts
                .into_iter()
                .map(|(p, part)| {
                    let mut o_p = Vec::new();
                    o.process(&mut *states[p], part, &mut o_p)?;
                    Ok(o_p)
                })
                .collect::<Result<_>>()?;
            o.combine(outs, out)
        }
    }
}

/// End of stream for one operator (partitions in order, then combined).
pub(crate) fn finish<T>(
    op: &mut Op<T>,
    states: &mut [Box<dyn Any + Send>],
    out: &mut Vec<T>,
) -> Result<()> {
    match op {
        Op::Stateless(_) => Ok(()),
        Op::Stateful(o) => o.finish(out),
        Op::Partitioned(o) => {
            let outs = states
                .iter_mut()
                .map(|s| {
                    let mut o_p = Vec::new();
                    o.finish(&mut **s, &mut o_p)?;
                    Ok(o_p)
                })
                .collect::<Result<_>>()?;
            o.combine(outs, out)
        }
    }
}
