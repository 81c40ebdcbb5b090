//! ScaleGate against the obvious alternatives: a mutex around a binary heap that merges the same sources with
//! the same readiness rule (an item leaves once every source has sent a later one), and a general concurrent
//! skip list (crossbeam-skiplist) whose reader checks readiness by scanning every source's latest key (the
//! baseline of Cederman, Gulisano et al., *Efficient data streaming multiway aggregation through concurrent
//! algorithmic designs and new abstract data types*). `merge_2_sources`: two source threads, one reader, 1M
//! items each (as in Gulisano et al., *ScaleJoin: a Deterministic, Disjoint-Parallel and Skew-Resilient Stream
//! Join*; the target is >= 20 M rows/s through a 2-source merge). `merge_n_sources`: the T-Gate role of the
//! multiway aggregation paper, 1-20 sources sharing 2M items (on 2 cores the source threads are multiplexed).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use windgate_core::order::scale_gate::{NextItem, ScaleGate};

const PER_SOURCE: u64 = 1_000_000;

/// Keys `(ts, source, seq)` with interleaved timestamps; returns items read.
fn scale_gate(sources: usize, readers: usize) -> u64 {
    scale_gate_n(sources, readers, PER_SOURCE)
}

fn scale_gate_n(sources: usize, readers: usize, per_source: u64) -> u64 {
    let (srcs, rdrs) = ScaleGate::new::<(u64, usize, u64), u64>(sources, readers, 4);
    thread::scope(|s| {
        for (j, mut src) in srcs.into_iter().enumerate() {
            s.spawn(move || {
                for i in 0..per_source {
                    src.add((i * sources as u64 + j as u64, j, i), i);
                }
                src.close();
            });
        }
        let handles: Vec<_> = rdrs
            .into_iter()
            .map(|mut r| {
                s.spawn(move || {
                    let mut n = 0u64;
                    loop {
                        match r.next_ready() {
                            NextItem::Item(_, v) => {
                                black_box(v);
                                n += 1;
                            }
                            NextItem::Pending => std::hint::spin_loop(),
                            NextItem::End => return n,
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

/// The baseline: sources push into one locked heap; the reader pops what is below every source's latest.
fn mutex_heap(sources: usize) -> u64 {
    struct State {
        heap: BinaryHeap<Reverse<(u64, usize)>>,
        latest: Vec<Option<u64>>,
        closed: Vec<bool>,
    }
    let state = Arc::new(Mutex::new(State {
        heap: BinaryHeap::new(),
        latest: vec![None; sources],
        closed: vec![false; sources],
    }));
    thread::scope(|s| {
        for j in 0..sources {
            let state = state.clone();
            s.spawn(move || {
                for i in 0..PER_SOURCE {
                    let k = i * sources as u64 + j as u64;
                    let mut st = state.lock().unwrap();
                    st.heap.push(Reverse((k, j)));
                    st.latest[j] = Some(k);
                }
                state.lock().unwrap().closed[j] = true;
            });
        }
        let reader = s.spawn(|| {
            let mut n = 0u64;
            loop {
                let mut st = state.lock().unwrap();
                let bound = (0..sources)
                    .filter(|&j| !st.closed[j])
                    .map(|j| st.latest[j])
                    .min();
                let all_closed = bound.is_none();
                let mut popped = 0;
                while let Some(&Reverse((k, _))) = st.heap.peek() {
                    let ready = match bound {
                        None => true,
                        Some(None) => false,
                        Some(Some(b)) => k < b,
                    };
                    if !ready {
                        break;
                    }
                    st.heap.pop();
                    popped += 1;
                }
                n += popped;
                if all_closed && st.heap.is_empty() {
                    return n;
                }
            }
        });
        reader.join().unwrap()
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("merge_2_sources");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    g.throughput(Throughput::Elements(2 * PER_SOURCE));
    g.bench_function(BenchmarkId::new("scale_gate", "1_reader"), |b| {
        b.iter(|| assert_eq!(scale_gate(2, 1), 2 * PER_SOURCE))
    });
    g.bench_function(BenchmarkId::new("scale_gate", "2_readers"), |b| {
        b.iter(|| assert_eq!(scale_gate(2, 2), 4 * PER_SOURCE))
    });
    g.bench_function(BenchmarkId::new("mutex_heap", "1_reader"), |b| {
        b.iter(|| assert_eq!(mutex_heap(2), 2 * PER_SOURCE))
    });
    g.finish();
}

/// The general skip list: sources insert concurrently and publish their latest key; the reader removes the
/// front entry once it is below every open source's latest (an O(N) scan per item).
fn skip_list(sources: usize, per_source: u64) -> u64 {
    let map = crossbeam_skiplist::SkipMap::<u64, u64>::new();
    let latest: Vec<AtomicU64> = (0..sources).map(|_| AtomicU64::new(0)).collect();
    let (map, latest) = (&map, &latest);
    thread::scope(|s| {
        for (j, mine) in latest.iter().enumerate() {
            s.spawn(move || {
                for i in 0..per_source {
                    let k = i * sources as u64 + j as u64 + 1; // 0 means "nothing sent yet"
                    map.insert(k, i);
                    mine.store(k, Ordering::Release);
                }
                mine.store(u64::MAX, Ordering::Release); // closed
            });
        }
        let reader = s.spawn(move || {
            let mut n = 0u64;
            loop {
                let bound = latest
                    .iter()
                    .map(|l| l.load(Ordering::Acquire))
                    .min()
                    .unwrap();
                match map.front() {
                    Some(e) if *e.key() < bound || bound == u64::MAX => {
                        black_box(e.value());
                        e.remove();
                        n += 1;
                    }
                    None if bound == u64::MAX => return n,
                    _ => std::hint::spin_loop(),
                }
            }
        });
        reader.join().unwrap()
    })
}

fn bench_n(c: &mut Criterion) {
    const TOTAL: u64 = 2_000_000;
    let mut g = c.benchmark_group("merge_n_sources");
    g.sample_size(10).measurement_time(Duration::from_secs(6));
    g.throughput(Throughput::Elements(TOTAL));
    for n in [1usize, 2, 4, 8, 20] {
        let per = TOTAL / n as u64;
        g.bench_function(BenchmarkId::new("t_gate", n), |b| {
            b.iter(|| assert_eq!(scale_gate_n(n, 1, per), per * n as u64))
        });
        g.bench_function(BenchmarkId::new("skip_list_scan", n), |b| {
            b.iter(|| assert_eq!(skip_list(n, per), per * n as u64))
        });
    }
    g.finish();
}

criterion_group!(benches, bench, bench_n);
criterion_main!(benches);
