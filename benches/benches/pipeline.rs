//! Ordered pipelines (Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory
//! Multicores*): the reorder buffers on their own, then the runtime's overhead on a cheap
//! chain against the sequential executor.
//!
//! * `reorder`: `threads` workers deposit serials 1..N (worker w owns w+1, w+1+threads, ...), so they finish
//!   out of order; the non-blocking buffer (Fig. 4) against the lock-based one (Fig. 2), S = 1024 (the
//!   paper's light-operator case of Fig. 12 with no operator at all: pure ordering cost).
//! * `chain`: stateless map -> partitioned running sum (100 partitions, hybrid queue) -> stateful sink, 1 µs-ish
//!   of work per item, sequential executor against the parallel one at 1 and 2 threads.

use std::hint::black_box;
use std::sync::Mutex;
use std::thread;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use windgate_core::order::reorder::{LockedReorder, Reorder, ReorderBuffer, send_blocking};
use windgate_core::runtime::pipeline::{
    Keyed, Map, Partitioner, Pipeline, PipelineOptions, Stateful,
};

const UNITS: u64 = 1_000_000;

fn deposit_all(buffer: &dyn Reorder<u64>, threads: u64) -> u64 {
    let sum = Mutex::new(0u64);
    thread::scope(|s| {
        for w in 0..threads {
            let sum = &sum;
            s.spawn(move || {
                let mut local = 0u64;
                let mut serial = w + 1;
                while serial <= UNITS {
                    send_blocking(buffer, serial, serial, &mut |u| {
                        local = local.wrapping_add(u)
                    });
                    serial += threads;
                }
                *sum.lock().unwrap() += local;
            });
        }
    });
    sum.into_inner().unwrap()
}

fn reorder(c: &mut Criterion) {
    let mut g = c.benchmark_group("reorder");
    g.throughput(Throughput::Elements(UNITS));
    g.sample_size(10);
    for threads in [1u64, 2] {
        g.bench_with_input(
            BenchmarkId::new("nonblocking", threads),
            &threads,
            |b, &t| b.iter(|| black_box(deposit_all(&ReorderBuffer::<u64>::new(1024), t))),
        );
        g.bench_with_input(BenchmarkId::new("locked", threads), &threads, |b, &t| {
            b.iter(|| black_box(deposit_all(&LockedReorder::<u64>::default(), t)))
        });
    }
    g.finish();
}

struct Sink(u64);

impl Stateful<u64> for Sink {
    fn name(&self) -> &str {
        "sink"
    }
    fn process(&mut self, x: u64, out: &mut Vec<u64>) -> windgate_core::Result<()> {
        self.0 = self.0.rotate_left(5) ^ x;
        if x.is_multiple_of(1024) {
            out.push(self.0);
        }
        Ok(())
    }
}

fn work(x: u64) -> u64 {
    (0..50).fold(x, |h, i| {
        (h ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17)
    })
}

fn chain() -> Pipeline<u64> {
    Pipeline::new()
        .stateless(Map::new("map", |x: u64, out: &mut Vec<u64>| {
            out.push(work(x))
        }))
        .partitioned(Keyed::new(
            "sum",
            Partitioner::Hash { partitions: 100 },
            |x: &u64| *x % 1000,
            |_| 0u64,
            |s: &mut u64, x: u64, out: &mut Vec<u64>| {
                *s = s.wrapping_add(work(x));
                out.push(*s)
            },
        ))
        .stateful(Sink(0))
}

fn pipeline(c: &mut Criterion) {
    const N: u64 = 200_000;
    let mut g = c.benchmark_group("pipeline_chain");
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    g.bench_function("sequential", |b| {
        b.iter(|| black_box(chain().run_sequential(0..N).unwrap().items.len()))
    });
    for threads in [1usize, 2] {
        let opts = PipelineOptions {
            threads,
            marker_every: 0,
            ..PipelineOptions::default()
        };
        g.bench_with_input(BenchmarkId::new("parallel", threads), &opts, |b, o| {
            b.iter(|| black_box(chain().run(0..N, o).unwrap().items.len()))
        });
    }
    g.finish();
}

criterion_group!(benches, reorder, pipeline);
criterion_main!(benches);
