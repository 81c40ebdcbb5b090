//! Per-tuple cost of the preference kernels against pane size and dimensions (the axes of Figs. 6-7 in Mencagli
//! et al., *Parallel Continuous Preference Queries over Out-of-Order and Bursty Data Streams*): a
//! pane of `n` points is built by inserting its points one by one (G), for independent and anticorrelated
//! data (anticorrelated skylines are large: the expensive case). Throughput is points per second.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use windgate_core::preference::{Prefer, Skyline, TopDominant};

/// `n` points in `d` dimensions: uniform on [0, 1000), or anticorrelated (their sum close to constant).
fn points(n: usize, d: usize, anti: bool, seed: u64) -> Vec<Vec<f64>> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut cols = vec![Vec::with_capacity(n); d];
    for _ in 0..n {
        let mut p: Vec<f64> = (0..d).map(|_| uniform()).collect();
        if anti {
            // Project onto the plane sum = d/2 and jitter: the classic anticorrelated generator.
            let shift = (d as f64 / 2.0 - p.iter().sum::<f64>()) / d as f64;
            p.iter_mut()
                .for_each(|x| *x = (*x + shift + 0.05 * (uniform() - 0.5)).clamp(0.0, 1.0));
        }
        for (c, x) in cols.iter_mut().zip(p) {
            c.push(x * 1000.0);
        }
    }
    cols
}

fn bench(c: &mut Criterion) {
    for (kernel, anti) in [
        ("skyline", false),
        ("skyline", true),
        ("top_dominant", true),
    ] {
        let data = if anti {
            "anticorrelated"
        } else {
            "independent"
        };
        let mut g = c.benchmark_group(format!("{kernel}_{data}"));
        g.sample_size(10).measurement_time(Duration::from_secs(2));
        for d in [2, 4, 6] {
            for n in [1_000, 10_000] {
                let cols = points(n, d, anti, 7);
                let order: Vec<u128> = (0..n as u128).collect();
                let prefer = vec![Prefer::Min; d];
                g.throughput(Throughput::Elements(n as u64));
                g.bench_function(BenchmarkId::new(format!("d{d}"), n), |b| {
                    b.iter(|| match kernel {
                        "skyline" => Skyline::build(prefer.clone(), &cols, &order).len(),
                        _ => TopDominant::build(prefer.clone(), &cols, &order).len(),
                    })
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
