//! The utilisation monitor of AS_PID (Mencagli et al., *Parallel Continuous Preference Queries over Out-of-Order
//! and Bursty Data Streams*, eqs. 4-5): from each worker's busy time and processed count over a sampling
//! interval, and the load the emitter scheduled to it, estimate whether the pane-level query (PLQ) farm is a
//! bottleneck (`rho >= 1`).
//!
//! The unit of work is a row (the emitter schedules rows, in chunks), so `lambda`, `q` and the service time `C`
//! are all per row.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters one worker publishes; the emitter reads them every sampling interval.
///
/// `Relaxed` suffices: each counter is a monotone tally read for statistics only; no other memory is
/// published through it.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Nanoseconds spent processing messages (waits excluded).
    pub busy_ns: AtomicU64,
    /// Rows processed.
    pub rows: AtomicU64,
    /// Messages processed.
    pub messages: AtomicU64,
}

impl WorkerCounters {
    pub fn add(&self, busy: Duration, rows: u64) {
        self.busy_ns
            .fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
        self.rows.fetch_add(rows, Ordering::Relaxed);
        self.messages.fetch_add(1, Ordering::Relaxed);
    }

    pub fn busy_ns(&self) -> u64 {
        self.busy_ns.load(Ordering::Relaxed)
    }

    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }
}

/// One worker's figures over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// `phi_i`: busy nanoseconds.
    pub busy_ns: f64,
    /// `q_i`: rows processed.
    pub processed: f64,
    /// `lambda_i`: rows scheduled to the worker.
    pub scheduled: f64,
}

/// `rho = sum_i lambda_i^2 / (lambda_tot * mu_i)` with `mu_i = q_i + max(0, T - phi_i) / C` and `C =
/// phi_tot / q_tot` (eqs. 4-5). NaN or infinity maps to 0, as in the authors' code.
pub fn utilisation(samples: &[Sample], interval: Duration) -> f64 {
    let t = interval.as_nanos() as f64;
    let phi: f64 = samples.iter().map(|s| s.busy_ns).sum();
    let q: f64 = samples.iter().map(|s| s.processed).sum();
    let lambda: f64 = samples.iter().map(|s| s.scheduled).sum();
    let c = phi / q;
    let rho: f64 = samples
        .iter()
        .map(|s| {
            let mu = s.processed + (t - s.busy_ns).max(0.0) / c;
            s.scheduled * s.scheduled / (lambda * mu)
        })
        .sum();
    if rho.is_finite() { rho } else { 0.0 }
}

/// Turns the workers' monotone counters into per-interval samples.
#[derive(Debug, Default)]
pub struct Monitor {
    last: Vec<(u64, u64, u64)>,
    /// Sum and count of the samples with `0 < rho < 50` (the ones the paper averages).
    rho_sum: f64,
    rho_n: u64,
    pub last_rho: f64,
}

impl Monitor {
    /// Samples every worker; `scheduled[i]` is the running total of rows sent to worker i.
    pub fn sample(
        &mut self,
        counters: &[std::sync::Arc<WorkerCounters>],
        scheduled: &[u64],
        interval: Duration,
    ) -> f64 {
        self.last.resize(counters.len(), (0, 0, 0));
        let samples: Vec<Sample> = counters
            .iter()
            .zip(scheduled)
            .zip(self.last.iter_mut())
            .map(|((c, &sched), last)| {
                let now = (c.busy_ns(), c.rows(), sched);
                let s = Sample {
                    busy_ns: (now.0 - last.0) as f64,
                    processed: (now.1 - last.1) as f64,
                    scheduled: (now.2 - last.2) as f64,
                };
                *last = now;
                s
            })
            .collect();
        let rho = utilisation(&samples, interval);
        if rho > 0.0 && rho < 50.0 {
            self.rho_sum += rho;
            self.rho_n += 1;
        }
        self.last_rho = rho;
        rho
    }

    /// The mean over the valid samples (0 when there were none).
    pub fn mean_rho(&self) -> f64 {
        if self.rho_n == 0 {
            0.0
        } else {
            self.rho_sum / self.rho_n as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Workers with service time S per row fed evenly at total rate lambda: rho = lambda * S / n.
    #[test]
    fn even_load_gives_lambda_s_over_n() {
        let t = Duration::from_secs(1);
        for (n, lambda, s_ns) in [(1usize, 1e6, 500.0), (4, 2e6, 1000.0), (3, 9e5, 2000.0)] {
            let per = lambda / n as f64;
            let busy = (per * s_ns).min(1e9);
            let samples = vec![
                Sample {
                    busy_ns: busy,
                    processed: busy / s_ns,
                    scheduled: per,
                };
                n
            ];
            let want = lambda * s_ns * 1e-9 / n as f64;
            let got = utilisation(&samples, t);
            assert!((got - want).abs() / want < 0.05, "n={n}: {got} vs {want}");
        }
    }

    #[test]
    fn idle_farm_is_zero() {
        assert_eq!(
            utilisation(&[Sample::default(); 2], Duration::from_secs(1)),
            0.0
        );
    }
}
