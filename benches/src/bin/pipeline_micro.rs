//! The micro-benchmarks of Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory
//! Multicores* (Figs. 9-13), scaled to a small machine: parametric operators whose per-item cost is
//! a busy wait of a set time, so each figure isolates the runtime's overhead.
//!
//! * B2 (Fig. 9): one partitioned operator, keys from N(-0.5, σ) over a range partitioner; HYBRID (p = 100)
//!   vs PARTITIONED (p = threads); speed-up over 1 thread per σ.
//! * B3 (Fig. 10): one partitioned operator, uniform keys, per-item cost 10..1000 µs; processing latency of
//!   the markers, HYBRID vs PARTITIONED.
//! * B5 (Fig. 12): one light stateless operator; NON-BLOCKING vs LOCK-BASED reordering; speed-up and
//!   average per-item cost (including time blocked) vs threads.
//! * B6 (Fig. 13): stateless (selectivity 50) then partitioned; both reorder schemes; pipeline speed-up.
//!
//! Every row also runs the sequential executor on the same input (overhead = parallel 1-thread time over
//! sequential time). Prints one JSON object per line: `cargo run --release -p windgate-benches --bin
//! pipeline_micro -- [b2|b3|b5|b6|all] [--quick]`.

use std::time::{Duration, Instant};

use windgate_core::runtime::pipeline::{
    Keyed, Map, Partitioned, Partitioner, Partitioning, Pipeline, PipelineOptions, PipelineStats,
    ReorderScheme,
};

/// Busy-waits `d` (the paper's parametric "matrix computation", as a time).
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn xorshift(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// A standard normal draw (Box-Muller) from two uniforms.
fn normal(next: &mut impl FnMut() -> u64) -> f64 {
    let u = |x: u64| (x >> 11) as f64 / (1u64 << 53) as f64;
    let (a, b) = (u(next()).max(1e-12), u(next()));
    (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
}

const KEYS: u64 = 10_000;

/// The parametric partitioned operator: `cost` per item, a running sum per partition.
fn keyed(cost: Duration, partitioner: Partitioner) -> impl Partitioned<u64> {
    Keyed::new(
        "ps",
        partitioner,
        |x: &u64| *x,
        |_| 0u64,
        move |st: &mut u64, x: u64, out: &mut Vec<u64>| {
            spin(cost);
            *st = st.wrapping_add(x);
            out.push(*st);
        },
    )
}

fn uniform_bounds(p: usize) -> Vec<u64> {
    (1..p as u64).map(|i| KEYS * i / p as u64).collect()
}

struct Row {
    bench: &'static str,
    fields: Vec<(&'static str, String)>,
}

impl Row {
    fn new(bench: &'static str) -> Self {
        Self {
            bench,
            fields: Vec::new(),
        }
    }
    fn s(mut self, k: &'static str, v: impl std::fmt::Display) -> Self {
        self.fields.push((k, format!("\"{v}\"")));
        self
    }
    fn n(mut self, k: &'static str, v: f64) -> Self {
        self.fields.push((k, format!("{v:.6}")));
        self
    }
    fn print(self) {
        let body: Vec<String> = std::iter::once(format!("\"bench\": \"{}\"", self.bench))
            .chain(self.fields.iter().map(|(k, v)| format!("\"{k}\": {v}")))
            .collect();
        println!("{{{}}}", body.join(", "));
    }
}

fn stats_row(bench: &'static str, s: &PipelineStats, seq: Duration) -> Row {
    let first = &s.ops[0];
    Row::new(bench)
        .n("threads", s.threads as f64)
        .s("reorder", s.reorder)
        .s("partitioning", s.partitioning)
        .n("items_per_s", s.throughput())
        .n("seconds", s.elapsed.as_secs_f64())
        .n("sequential_seconds", seq.as_secs_f64())
        .n(
            "first_op_cost_us",
            first.cost().unwrap_or_default().as_secs_f64() * 1e6,
        )
        .n(
            "latency_ms",
            s.trimmed_latency().unwrap_or_default().as_secs_f64() * 1e3,
        )
        .n(
            "refused",
            s.ops.iter().map(|o| o.refused).sum::<u64>() as f64,
        )
}

fn options(threads: usize, reorder: ReorderScheme, partitioning: Partitioning) -> PipelineOptions {
    PipelineOptions {
        threads,
        reorder,
        partitioning,
        marker_every: 100,
        ..PipelineOptions::default()
    }
}

fn b2(quick: bool) {
    let n = if quick { 4_000 } else { 20_000 };
    let cost = Duration::from_micros(20);
    for sigma in [0.05, 0.2, 1.0, 10.0] {
        let mut next = xorshift(42);
        let keys: Vec<u64> = (0..n)
            .map(|_| {
                // Mode at -0.5, not 0: with 2 workers the partitioned baseline has 2 ranges split at 0,
                // so a centred mode would fall half in each and hide the skew.
                let z = (normal(&mut next) * sigma - 0.5).clamp(-1.0, 1.0);
                (((z + 1.0) / 2.0) * (KEYS - 1) as f64) as u64
            })
            .collect();
        for (partitioning, p) in [
            (Partitioning::Partitioned, 2usize),
            (Partitioning::Hybrid, 100),
        ] {
            let pipe = || {
                Pipeline::new().partitioned(keyed(
                    cost,
                    Partitioner::Range {
                        bounds: uniform_bounds(p),
                    },
                ))
            };
            let seq = pipe().run_sequential(keys.clone()).unwrap().stats.elapsed;
            let mut one = None;
            for threads in [1, 2] {
                let s = pipe()
                    .run(
                        keys.clone(),
                        &options(threads, ReorderScheme::NonBlocking, partitioning),
                    )
                    .unwrap()
                    .stats;
                let base = *one.get_or_insert(s.elapsed);
                stats_row("b2_skew", &s, seq)
                    .n("sigma", sigma)
                    .n("partitions", p as f64)
                    .n("speedup", base.as_secs_f64() / s.elapsed.as_secs_f64())
                    .print();
            }
        }
    }
}

fn b3(quick: bool) {
    for cost_us in [10u64, 100, 1000] {
        let n = ((if quick { 0.3 } else { 1.5 }) * 1e6 / cost_us as f64) as u64;
        let mut next = xorshift(7);
        let keys: Vec<u64> = (0..n).map(|_| next() % KEYS).collect();
        let cost = Duration::from_micros(cost_us);
        for (partitioning, p) in [
            (Partitioning::Partitioned, 2usize),
            (Partitioning::Hybrid, 100),
        ] {
            let pipe =
                || Pipeline::new().partitioned(keyed(cost, Partitioner::Hash { partitions: p }));
            let seq = pipe().run_sequential(keys.clone()).unwrap().stats.elapsed;
            let mut o = options(2, ReorderScheme::NonBlocking, partitioning);
            o.marker_every = (n / 50).max(1);
            let s = pipe().run(keys.clone(), &o).unwrap().stats;
            stats_row("b3_latency", &s, seq)
                .n("cost_us", cost_us as f64)
                .n("partitions", p as f64)
                .print();
        }
    }
}

fn b5(quick: bool) {
    for cost_us in [0u64, 2, 10] {
        let n: u64 = if quick { 20_000 } else { 200_000 } / (cost_us + 1).min(10);
        let cost = Duration::from_micros(cost_us);
        let pipe = || {
            Pipeline::new().stateless(Map::new("sl", move |x: u64, out: &mut Vec<u64>| {
                spin(cost);
                out.push(x ^ 1)
            }))
        };
        let seq = pipe().run_sequential(0..n).unwrap().stats.elapsed;
        for reorder in [ReorderScheme::NonBlocking, ReorderScheme::Locked] {
            let mut one = None;
            for threads in [1, 2] {
                let s = pipe()
                    .run(0..n, &options(threads, reorder, Partitioning::Hybrid))
                    .unwrap()
                    .stats;
                let base = *one.get_or_insert(s.elapsed);
                stats_row("b5_light_stateless", &s, seq)
                    .n("cost_us", cost_us as f64)
                    .n("speedup", base.as_secs_f64() / s.elapsed.as_secs_f64())
                    .print();
            }
        }
    }
}

fn b6(quick: bool) {
    let n: u64 = if quick { 400 } else { 2_000 };
    let (sl, ps) = (Duration::from_micros(20), Duration::from_micros(4));
    let pipe = || {
        Pipeline::new()
            .stateless(Map::new("fanout50", move |x: u64, out: &mut Vec<u64>| {
                spin(sl);
                out.extend((0..50).map(|j| x * 50 + j))
            }))
            .partitioned(keyed(ps, Partitioner::Hash { partitions: 100 }))
    };
    let seq = pipe().run_sequential(0..n).unwrap().stats.elapsed;
    for reorder in [ReorderScheme::NonBlocking, ReorderScheme::Locked] {
        let mut one = None;
        for threads in [1, 2] {
            let s = pipe()
                .run(0..n, &options(threads, reorder, Partitioning::Hybrid))
                .unwrap()
                .stats;
            let base = *one.get_or_insert(s.elapsed);
            stats_row("b6_high_selectivity", &s, seq)
                .n("speedup", base.as_secs_f64() / s.elapsed.as_secs_f64())
                .print();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let which = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or("all", |s| s.as_str());
    let all = which == "all";
    if all || which == "b2" {
        b2(quick);
    }
    if all || which == "b3" {
        b3(quick);
    }
    if all || which == "b5" {
        b5(quick);
    }
    if all || which == "b6" {
        b6(quick);
    }
}
