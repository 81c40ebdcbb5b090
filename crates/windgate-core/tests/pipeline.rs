//! The differential pipeline test: random chains of stateless, partitioned and stateful
//! operators, a non-commutative stateful sink, and the parallel executor's output bit-identical to the
//! sequential executor's for every thread count, heuristic, reorder scheme, partitioning scheme and buffer
//! size; plus liveness with a one-slot buffer, end of stream, errors and panics.

use proptest::prelude::*;
use windgate_core::runtime::pipeline::{
    Keyed, Map, Partitioned, Partitioner, Partitioning, Pipeline, PipelineOptions, ReorderScheme,
    SchedulerPolicy, Stateful,
};
use windgate_core::{Error, ErrorKind, Result};

fn mix(h: u64, x: u64) -> u64 {
    (h ^ x)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(29)
        .wrapping_add(x)
}

/// Spins for about `units` x 100 ns: variable per-item cost, so workers finish out of order.
fn work(units: u64) {
    let mut h = 0u64;
    for i in 0..units * 20 {
        h = std::hint::black_box(mix(h, i));
    }
    std::hint::black_box(h);
}

#[derive(Debug, Clone)]
enum Spec {
    /// Stateless: x -> mix(x, salt), cost by x.
    Map { salt: u64, cost: u64 },
    /// Stateless: keeps x unless x % m == 0.
    Filter { m: u64 },
    /// Stateless: x -> x % (fan + 1) copies (selectivity 0..fan).
    Flat { fan: u64 },
    /// Partitioned by key x % keys: running hash per key, emits (mix(x, state)).
    Keyed {
        keys: u64,
        partitions: usize,
        range: bool,
        cost: u64,
    },
    /// Partitioned, an input cut into x % 4 parts over partitions: exercises fan-in and combine.
    Split { partitions: usize },
    /// Stateful, non-commutative: running hash of every input, emitted per input, final at end.
    Chain,
}

/// A partitioned operator that routes an input into several parts (like a columnar batch cut by key).
struct SplitOp {
    partitions: usize,
}

impl Partitioned<u64> for SplitOp {
    type State = u64;
    fn name(&self) -> &str {
        "split"
    }
    fn partitions(&self) -> usize {
        self.partitions
    }
    fn new_state(&self, p: usize) -> u64 {
        p as u64
    }
    fn route(&self, x: u64, parts: &mut Vec<(usize, u64)>) -> Result<()> {
        for j in 0..x % 4 {
            parts.push((((x + j) % self.partitions as u64) as usize, mix(x, j)));
        }
        Ok(())
    }
    fn process(&self, state: &mut u64, x: u64, out: &mut Vec<u64>) -> Result<()> {
        *state = mix(*state, x);
        work(x % 5);
        out.push(*state);
        Ok(())
    }
    fn combine(&self, parts: Vec<Vec<u64>>, out: &mut Vec<u64>) -> Result<()> {
        // Order-sensitive: the parts' outputs must come in route order.
        let n = parts.len() as u64;
        out.push(parts.iter().flatten().fold(n, |h, &x| mix(h, x)));
        Ok(())
    }
    fn finish(&self, state: &mut u64, out: &mut Vec<u64>) -> Result<()> {
        out.push(*state);
        Ok(())
    }
}

struct ChainOp(u64);

impl Stateful<u64> for ChainOp {
    fn name(&self) -> &str {
        "chain"
    }
    fn process(&mut self, x: u64, out: &mut Vec<u64>) -> Result<()> {
        self.0 = mix(self.0, x);
        out.push(self.0);
        Ok(())
    }
    fn finish(&mut self, out: &mut Vec<u64>) -> Result<()> {
        out.push(!self.0);
        Ok(())
    }
}

fn build(specs: &[Spec]) -> Pipeline<u64> {
    let mut p = Pipeline::new();
    for s in specs.iter().cloned() {
        p = match s {
            Spec::Map { salt, cost } => {
                p.stateless(Map::new("map", move |x: u64, out: &mut Vec<u64>| {
                    work((x % 7) * cost);
                    out.push(mix(x, salt));
                }))
            }
            Spec::Filter { m } => {
                p.stateless(Map::new("filter", move |x: u64, out: &mut Vec<u64>| {
                    if !x.is_multiple_of(m) {
                        out.push(x)
                    }
                }))
            }
            Spec::Flat { fan } => {
                p.stateless(Map::new("flat", move |x: u64, out: &mut Vec<u64>| {
                    for j in 0..x % (fan + 1) {
                        out.push(x.wrapping_add(j));
                    }
                }))
            }
            Spec::Keyed {
                keys,
                partitions,
                range,
                cost,
            } => {
                let partitioner = if range {
                    // Skewed ranges: most keys in the first partition.
                    Partitioner::Range {
                        bounds: (1..partitions as u64)
                            .map(|i| keys * i * i / (partitions as u64).pow(2))
                            .collect(),
                    }
                } else {
                    Partitioner::Hash { partitions }
                };
                p.partitioned(Keyed::new(
                    "keyed",
                    partitioner,
                    move |x: &u64| x % keys,
                    |_| std::collections::HashMap::<u64, u64>::new(),
                    move |st, x, out| {
                        let h = st.entry(x % keys).or_insert(0);
                        *h = mix(*h, x);
                        work((x % 3) * cost);
                        out.push(*h);
                    },
                ))
            }
            Spec::Split { partitions } => p.partitioned(SplitOp { partitions }),
            Spec::Chain => p.stateful(ChainOp(7)),
        };
    }
    p
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        (any::<u64>(), 0u64..3).prop_map(|(salt, cost)| Spec::Map { salt, cost }),
        (2u64..5).prop_map(|m| Spec::Filter { m }),
        (1u64..6).prop_map(|fan| Spec::Flat { fan }),
        (1u64..50, 1usize..12, any::<bool>(), 0u64..3).prop_map(
            |(keys, partitions, range, cost)| {
                Spec::Keyed {
                    keys,
                    partitions,
                    range,
                    cost,
                }
            }
        ),
        (1usize..6).prop_map(|partitions| Spec::Split { partitions }),
        Just(Spec::Chain),
    ]
}

fn options() -> impl Strategy<Value = PipelineOptions> {
    (
        prop::sample::select(vec![1usize, 2, 3, 4, 8]),
        prop::sample::select(vec![
            SchedulerPolicy::Ct,
            SchedulerPolicy::CtInput,
            SchedulerPolicy::Lp,
            SchedulerPolicy::Qst,
            SchedulerPolicy::Et,
        ]),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![1usize, 2, 3, 64, 1024]),
        prop::sample::select(vec![0u64, 1, 7, 100]),
        prop::sample::select(vec![1usize, 5, 1 << 16]),
        prop::sample::select(vec![20u64, 500, 5000]),
    )
        .prop_map(
            |(threads, scheduler, locked, owned, slots, markers, pending, slice)| PipelineOptions {
                threads,
                scheduler,
                reorder: if locked {
                    ReorderScheme::Locked
                } else {
                    ReorderScheme::NonBlocking
                },
                partitioning: if owned {
                    Partitioning::Partitioned
                } else {
                    Partitioning::Hybrid
                },
                reorder_slots: slots,
                time_slice: std::time::Duration::from_micros(slice),
                ct_window: std::time::Duration::from_millis(2),
                qst_capacity: 64,
                marker_every: markers,
                max_pending: pending,
            },
        )
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 48 } else { 600 })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn parallel_equals_sequential(
        specs in prop::collection::vec(spec(), 0..6),
        sink in any::<bool>(),
        input in prop::collection::vec(0u64..1000, 0..400),
        opts in options(),
    ) {
        let mut specs = specs;
        if sink {
            specs.push(Spec::Chain); // a non-commutative sink sees every reordering
        }
        let want = build(&specs).run_sequential(input.clone()).unwrap();
        let got = build(&specs).run(input.clone(), &opts).unwrap();
        prop_assert_eq!(&got.items, &want.items, "specs {:?} options {:?}", specs, opts);
        prop_assert_eq!(got.stats.inputs, input.len() as u64);
        prop_assert_eq!(got.stats.outputs, want.items.len() as u64);
        for (g, w) in got.stats.ops.iter().zip(&want.stats.ops) {
            prop_assert_eq!((g.inputs, g.outputs), (w.inputs, w.outputs), "{}", g.name);
            let cap = match g.kind {
                windgate_core::runtime::pipeline::OpKind::Stateful => 1,
                windgate_core::runtime::pipeline::OpKind::Partitioned { partitions } => partitions.min(opts.threads),
                windgate_core::runtime::pipeline::OpKind::Stateless => opts.threads,
            };
            prop_assert!(g.max_workers <= cap, "{} had {} workers (cap {})", g.name, g.max_workers, cap);
        }
        if !specs.is_empty() && opts.marker_every > 0 {
            prop_assert_eq!(got.stats.latencies.len() as u64, input.len() as u64 / opts.marker_every);
        }
    }
}

/// The cross-operator deadlock test: a one-slot buffer, every core on a stateless operator of
/// very variable cost, then a partitioned one; it must finish, in order.
#[test]
fn one_slot_buffers_finish_under_variable_cost() {
    let specs = [
        Spec::Map { salt: 1, cost: 40 },
        Spec::Keyed {
            keys: 3,
            partitions: 7,
            range: false,
            cost: 5,
        },
        Spec::Split { partitions: 3 },
        Spec::Chain,
    ];
    let input: Vec<u64> = (0..3000).map(|i| mix(i, 5) % 1000).collect();
    let want = build(&specs).run_sequential(input.clone()).unwrap().items;
    for threads in [1, 2, 4, 8] {
        for partitioning in [Partitioning::Hybrid, Partitioning::Partitioned] {
            let opts = PipelineOptions {
                threads,
                reorder_slots: 1,
                partitioning,
                ..PipelineOptions::default()
            };
            let got = build(&specs).run(input.clone(), &opts).unwrap();
            assert_eq!(got.items, want, "{threads} threads, {partitioning:?}");
        }
    }
}

/// A long random run in release mode: many inputs, every policy, both schemes.
#[test]
fn stress_many_inputs_every_policy() {
    let specs = [
        Spec::Flat { fan: 3 },
        Spec::Keyed {
            keys: 1000,
            partitions: 100,
            range: false,
            cost: 1,
        },
        Spec::Filter { m: 3 },
        Spec::Split { partitions: 4 },
        Spec::Map { salt: 9, cost: 1 },
        Spec::Chain,
    ];
    let n = if cfg!(debug_assertions) {
        5_000
    } else {
        60_000
    };
    let input: Vec<u64> = (0..n).map(|i| mix(i, 77) % 100_000).collect();
    let want = build(&specs).run_sequential(input.clone()).unwrap().items;
    for scheduler in [
        SchedulerPolicy::Ct,
        SchedulerPolicy::CtInput,
        SchedulerPolicy::Lp,
        SchedulerPolicy::Qst,
        SchedulerPolicy::Et,
    ] {
        for reorder in [ReorderScheme::NonBlocking, ReorderScheme::Locked] {
            for partitioning in [Partitioning::Hybrid, Partitioning::Partitioned] {
                let opts = PipelineOptions {
                    threads: 3,
                    scheduler,
                    reorder,
                    partitioning,
                    reorder_slots: 16,
                    ..PipelineOptions::default()
                };
                let got = build(&specs).run(input.clone(), &opts).unwrap();
                assert_eq!(got.items.len(), want.len());
                assert!(
                    got.items == want,
                    "{scheduler:?} {reorder:?} {partitioning:?}"
                );
            }
        }
    }
}

struct Failing;

impl Stateful<u64> for Failing {
    fn name(&self) -> &str {
        "failing"
    }
    fn process(&mut self, x: u64, out: &mut Vec<u64>) -> Result<()> {
        if x == 500 {
            return Err(Error::new(ErrorKind::InvalidValue, "row 500 is bad"));
        }
        out.push(x);
        Ok(())
    }
}

#[test]
fn an_operator_error_stops_the_run_with_that_error() {
    let build = || {
        Pipeline::new()
            .stateless(Map::new("id", |x: u64, out: &mut Vec<u64>| out.push(x)))
            .stateful(Failing)
    };
    let err = build().run_sequential(0..1000).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidValue);
    for threads in [1, 2, 4] {
        let opts = PipelineOptions {
            threads,
            ..PipelineOptions::default()
        };
        let err = build().run(0..1000, &opts).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidValue, "{threads} threads");
        assert!(err.message().contains("row 500"));
    }
}

#[test]
fn a_panicking_operator_is_an_error_not_a_hang() {
    let p = Pipeline::new().stateless(Map::new("boom", |x: u64, out: &mut Vec<u64>| {
        assert!(x != 77, "boom at 77");
        out.push(x)
    }));
    let opts = PipelineOptions {
        threads: 2,
        reorder_slots: 4,
        ..PipelineOptions::default()
    };
    let err = p.run(0..10_000, &opts).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Poisoned);
    assert!(err.message().contains("boom at 77"), "{}", err.message());
}

#[test]
fn interrupt_stops_the_run() {
    let p = Pipeline::new().stateless(Map::new("slow", |x: u64, out: &mut Vec<u64>| {
        work(100);
        out.push(x)
    }));
    let mut calls = 0;
    let err = p
        .run_with(
            0..u64::MAX,
            &PipelineOptions {
                threads: 2,
                ..PipelineOptions::default()
            },
            &mut |_| {},
            &mut || {
                calls += 1;
                if calls > 3 {
                    Err(Error::new(ErrorKind::Poisoned, "interrupted"))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err();
    assert!(err.message().contains("interrupted"));
}

#[test]
fn bad_options_name_the_parameter() {
    let p = || Pipeline::<u64>::new();
    for (opts, param) in [
        (
            PipelineOptions {
                threads: 0,
                ..PipelineOptions::default()
            },
            "threads",
        ),
        (
            PipelineOptions {
                reorder_slots: 0,
                ..PipelineOptions::default()
            },
            "reorder_slots",
        ),
    ] {
        let err = p().run(0..3, &opts).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidParameter);
        assert!(err.message().contains(param), "{}", err.message());
    }
    assert!(
        SchedulerPolicy::parse("fifo")
            .unwrap_err()
            .message()
            .contains("scheduler")
    );
}
